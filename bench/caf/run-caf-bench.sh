#!/usr/bin/env bash
# run-caf-bench.sh -- the coarray benchmarks of bench/caf, built with the
# firehose coarray runtime ("ours": libcaf_firehose through caf/caf and
# caf/cafrun) and with OpenCoarrays on Open MPI ("theirs": caf.openmpi,
# cafrun.openmpi), run side by side, interleaved.
#
#   bench/caf/run-caf-bench.sh [--builddir DIR] [--out DIR] [--quick] [--smoke]
#                              [--rounds R] [--np "2 4 8"] [--app-np P]
#                              [--transports "tcp shm"]
#
#   --builddir DIR  firehose build tree (caf/caf, caf/cafrun, tools/fhrun,
#                   bench/fhbench); default: ../../_build, . or the top dir
#   --out DIR       results directory (default ./caf-results)
#   --quick         short run: every program with --quick (caf_putget also
#                   with --step 2, so that 1 MiB is among its sizes)
#   --smoke         for the test suite: tiny sizes, 1 round, 2 images, no
#                   fhbench; only checks that both sides run and every CSV is
#                   well formed.  Exit 0 ok, 1 failure, 77 a side is missing
#                   (the side that exists was still run and checked).
#   --rounds R      rounds of ours/theirs pairs (default 3; the order
#                   alternates each round: ours first in odd rounds)
#   --np LIST       images for caf_cosum, caf_syncall and caf_imagecost
#                   (default "2 4 8")
#   --app-np P      images for caf_cannon and caf_bitonic (default 4: a 2x2
#                   grid and a power of two; 2 runs Cannon's 1-D ring variant)
#   --transports L  "tcp shm" (default) or one of them
#   --benches LIST  only these programs (default "caf_putget caf_strided
#                   caf_events caf_cosum caf_syncall caf_cannon caf_bitonic
#                   caf_imagecost";
#                   e.g. "caf_cosum" for the co_sum rows alone); the fh_put
#                   row and the Open MPI tcp check run only with caf_putget
#
# caf_strided runs 1 Ki and 1 Mi elements with --quick, but on tcp only up
# to 32 Ki (--max 32768) on both sides: OpenCoarrays over tcp moves a
# strided section element by element, ~40 s for a 1 Mi-element statement.
#
# Transports.  tcp (TCP sockets over lo): ours on the default network
#   provider, FH_OFI_PROVIDER=net,tcp (net where libfabric has it),
#   FI_TCP_IFACE=lo FH_SHM=off (the images do not share memory); theirs
#   --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca osc pt2pt
# shm: ours FH_SHM=auto on the default network provider, as a job on one
#   machine runs unless told otherwise (the images share their segments and
#   AM rings: the node path carries everything; the provider only sits
#   there, and the image-cost rows count what it costs -- with
#   FH_OFI_PROVIDER=shm, used here until session 21, 25 MiB per image
#   instead of 11); theirs
#   --mca pml ob1 --mca btl vader,self --mca osc rdma
# How we know Open MPI really uses tcp: the btl list holds only tcp and self
# (vader excluded, so no shared-memory path exists), pml ob1 excludes pml ucx
# and cm (which would bypass the btls through UCX or libfabric), and osc
# pt2pt sends one-sided traffic through pml ob1, i.e. the tcp btl (osc rdma
# cannot run on btl tcp -- no atomics, MPI_Win_create fails -- and osc ucx/sm
# would bypass it).  Each run (not --smoke) repeats one tcp run of caf_putget
# with --mca btl_base_verbose 100 and requires "select: init of component
# tcp returned success" and no vader init in its log (mca-check.log);
# the latencies tell the same story (~20 us on tcp, ~0.2 us on vader).
# On shm Open MPI's osc rdma maps the peer's window (same node) and a
# coindexed put is a memcpy: that is what "ours over shm" is measured against.
#
# Environment: FH_CAF, FH_CAFRUN (default $builddir/caf/caf, caf/cafrun),
# FH_CAFRUN_NP_FLAG (default -n: ours runs as `$FH_CAFRUN -n P prog args`),
# OC_CAF, OC_CAFRUN (default caf.openmpi, cafrun.openmpi), CAF_FFLAGS
# (default -O2).  Our runs set FH_STATS=1; the firehose cache counters of
# the "firehose[r]: stats total ..." lines (summed over ranks) give the hit
# rate reg_hits/(reg_hits+reg_misses) of caf_cannon and caf_bitonic.
# fh_put: firehose's C put latency, `fhrun -n 2 fhbench latency`, its
# 8 B put median, run in the same rounds (layer overhead = caf_put 8 B / it).
#
# Writes into DIR: raw/<round>-<side>-<transport>-<bench>-np<P>.{log,csv}
# (each program's own CSV), results.csv (all numbers, long format:
# round,side,transport,bench,images,size,metric,value; size is bytes for
# put/get/co_sum, matrix order n for Cannon, key count for bitonic, 0 for
# sync all; caf_syncall's metrics are median_us and loop_us;
# caf_imagecost's rss_mib, rss_mib_max and wall_s, the job's launch-to-exit
# time measured here around the launcher),
# summary.csv and summary.txt (medians over rounds and the ratios
# ours/theirs), skipped.txt, run.log.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

builddir=
out=caf-results
quick=0
smoke=0
rounds=3
nplist="2 4 8"
appnp=4
transports="tcp shm"
allbenches="caf_putget caf_strided caf_events caf_cosum caf_syncall caf_cannon caf_bitonic caf_imagecost"
benches=$allbenches

usage() {
    sed -n '2,/^set -u/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}
die() { echo "run-caf-bench: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case $1 in
        --builddir) [ $# -ge 2 ] || die "--builddir needs a value"; builddir=$2; shift ;;
        --out) [ $# -ge 2 ] || die "--out needs a value"; out=$2; shift ;;
        --quick) quick=1 ;;
        --smoke) smoke=1 ;;
        --rounds) [ $# -ge 2 ] || die "--rounds needs a value"; rounds=$2; shift ;;
        --np) [ $# -ge 2 ] || die "--np needs a value"; nplist=$2; shift ;;
        --app-np) [ $# -ge 2 ] || die "--app-np needs a value"; appnp=$2; shift ;;
        --transports) [ $# -ge 2 ] || die "--transports needs a value"; transports=$2; shift ;;
        --benches) [ $# -ge 2 ] || die "--benches needs a value"; benches=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
    shift
done
case $rounds in ''|*[!0-9]*|0) die "--rounds must be a positive integer" ;; esac
case $appnp in ''|*[!0-9]*|0) die "--app-np must be a positive integer" ;; esac
for n in $nplist; do
    case $n in ''|*[!0-9]*|0) die "--np must list positive integers" ;; esac
done
for t in $transports; do
    case $t in tcp|shm) ;; *) die "unknown transport $t (tcp or shm)" ;; esac
done
[ -n "$benches" ] || die "--benches needs at least one program"
for b in $benches; do
    case " $allbenches " in *" $b "*) ;; *) die "unknown bench $b (one of: $allbenches)" ;; esac
done
has_bench() { case " $benches " in *" $1 "*) true ;; *) false ;; esac; }
if [ $smoke = 1 ]; then
    rounds=1; nplist=2; appnp=2
fi

if [ -z "$builddir" ]; then
    for d in "$top/_build" . "$top"; do
        if [ -x "$d/caf/caf" ] || [ -x "$d/tools/fhrun" ]; then
            builddir=$(cd "$d" && pwd); break
        fi
    done
fi
builddir=$(cd "${builddir:-.}" && pwd) || die "no build directory ${builddir:-.}"
FH_CAF=${FH_CAF:-$builddir/caf/caf}
FH_CAFRUN=${FH_CAFRUN:-$builddir/caf/cafrun}
FH_CAFRUN_NP_FLAG=${FH_CAFRUN_NP_FLAG:--n}
OC_CAF=${OC_CAF:-caf.openmpi}
OC_CAFRUN=${OC_CAFRUN:-cafrun.openmpi}
FHRUN=$builddir/tools/fhrun
FHBENCH=$builddir/bench/fhbench
read -r -a fflags <<< "${CAF_FFLAGS:--O2}"

mkdir -p "$out/raw" "$out/bin/ours" "$out/bin/theirs" || die "cannot create $out"
out=$(cd "$out" && pwd)
log=$out/run.log
results=$out/results.csv
: > "$log"
: > "$out/skipped.txt"
echo "round,side,transport,bench,images,size,metric,value" > "$results"
failed=0

say() { echo "$*" | tee -a "$log"; }
skip() { echo "$*" >> "$out/skipped.txt"; say "   skipped: $*"; }

# Open MPI as root, and more images than cores
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
    export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
fi
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo}

if [ $smoke = 1 ]; then TO=120; elif [ $quick = 1 ]; then TO=300; else TO=900; fi


# ---- which sides exist --------------------------------------------------
say "run-caf-bench: $(date -u +%Y-%m-%dT%H:%M:%SZ) git $(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown) quick=$quick smoke=$smoke rounds=$rounds np=\"$nplist\" app-np=$appnp transports=\"$transports\" benches=\"$benches\""
say "machine: $(uname -srm), $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
have_ours=1
have_theirs=1
if [ ! -x "$FH_CAF" ] || [ ! -x "$FH_CAFRUN" ]; then
    have_ours=0
    skip "ours: firehose caf not found ($FH_CAF, $FH_CAFRUN; set --builddir or FH_CAF/FH_CAFRUN): OpenCoarrays half only, no ours/theirs ratios"
fi
if ! command -v "$OC_CAF" >/dev/null 2>&1 || ! command -v "$OC_CAFRUN" >/dev/null 2>&1; then
    have_theirs=0
    skip "theirs: $OC_CAF / $OC_CAFRUN not found (apt-get install libcoarrays-openmpi-dev): firehose half only"
fi
have_fh=1
if [ $smoke = 1 ] || ! has_bench caf_putget; then
    have_fh=0
elif [ ! -x "$FHRUN" ] || [ ! -x "$FHBENCH" ]; then
    have_fh=0
    skip "fh_put: $FHBENCH or $FHRUN not built: no layer-overhead ratio"
fi

say "ours:   $FH_CAF / $FH_CAFRUN: $( [ $have_ours = 1 ] && echo present || echo MISSING)"
say "theirs: $OC_CAF / $OC_CAFRUN: $( [ $have_theirs = 1 ] && echo present || echo MISSING)"

# ---- build ----------------------------------------------------------------
# build SIDE COMPILER: every program into $out/bin/SIDE (in a scratch dir, so
# no stray .mod or .o lands in the source tree)
build() {
    side=$1; fc=$2
    scratch=$(mktemp -d) || return 1
    ok=1
    for b in $benches; do
        say "== build $side $b"
        if ! (cd "$scratch" && "$fc" "${fflags[@]}" "$here/$b.f90" -o "$out/bin/$side/$b") >> "$log" 2>&1; then
            say "   FAILED to build $b with $fc (see $log)"
            failed=$((failed + 1)); ok=0
        fi
    done
    rm -rf "$scratch"
    [ $ok = 1 ]
}
if [ $have_ours = 1 ]; then build ours "$FH_CAF" || true; fi
if [ $have_theirs = 1 ]; then build theirs "$OC_CAF" || true; fi

# ---- one run ----------------------------------------------------------------
# shm_of TRANSPORT: our FH_SHM for it (tcp: through the network only).
shm_of() { [ "$1" = tcp ] && echo off || echo auto; }
# prov_of TRANSPORT: our FH_OFI_PROVIDER for it: the default network
# provider on both (tcp: TCP sockets; shm: the node path does the work).
prov_of() { echo "${FHB_NET_PROVIDER:-net,tcp}"; }

# mca_args TRANSPORT: Open MPI options of a transport (one per line)
mca_args() {
    case $1 in
        tcp) printf '%s\n' --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo \
                 --mca osc pt2pt ;;
        shm) printf '%s\n' --mca pml ob1 --mca btl vader,self --mca osc rdma ;;
    esac
}

# prog_args BENCH TRANSPORT: the program's arguments for this mode (one per
# line)
prog_args() {
    if [ $smoke = 1 ]; then
        case $1 in
            caf_putget) printf '%s\n' --max 4096 --step 8 --iters 20 --reps 1 ;;
            caf_strided) printf '%s\n' --max 1024 --iters 5 ;;
            caf_events) printf '%s\n' --iters 50 ;;
            caf_cosum) printf '%s\n' --reps 3 --elems 131072 ;;
            caf_syncall) printf '%s\n' --iters 50 --reps 1 ;;
            caf_cannon) printf '%s\n' --block 16 --reps 1 ;;
            caf_bitonic) printf '%s\n' --keys 4096 --reps 1 ;;
        esac
    elif [ $quick = 1 ]; then
        echo --quick
        # the quick sizes (8 B times 4^k) skip 1 MiB, a size the node
        # path's targets name
        [ "$1" = caf_putget ] && printf '%s\n' --step 2
        [ "$1" = caf_strided ] && [ "$2" = tcp ] && printf '%s\n' --max 32768
    fi
    return 0
}

# emit ROUND SIDE TRANSPORT CSVFILE: the program's rows into results.csv
emit() {
    awk -F, -v r="$1" -v s="$2" -v t="$3" '
        /^caf_put,|^caf_get,/ { print r","s","t","$1",2,"$2",median_us,"$4
                               print r","s","t","$1",2,"$2",mb_s,"$5 }
        /^caf_sput,|^caf_sget,/ { print r","s","t","$1",2,"$2",median_us,"$4
                                  print r","s","t","$1",2,"$2",mb_s,"$5 }
        /^caf_event,|^caf_atomic_|^caf_elem_/ { print r","s","t","$1","$2",0,median_us,"$4 }
        /^caf_cosum,/   { print r","s","t","$1","$3","$2",median_us,"$4 }
        /^caf_syncall,|^caf_syncimages,/ { print r","s","t","$1","$2",0,median_us,"$4
                                           print r","s","t","$1","$2",0,loop_us,"$5 }
        /^caf_cannon,/  { print r","s","t","$1","$3","$2",seconds,"$4
                          print r","s","t","$1","$3","$2",gflops,"$5 }
        /^caf_bitonic,/ { print r","s","t","$1","$3","$2",seconds,"$4 }
        /^caf_imagecost,/ { print r","s","t","$1","$2",0,rss_mib,"$3
                            print r","s","t","$1","$2",0,rss_mib_max,"$4 }' "$4" >> "$results"
}

# emit_stats ROUND TRANSPORT BENCH NP SIZE LOG: firehose cache counters
emit_stats() {
    awk -v r="$1" -v t="$2" -v b="$3" -v np="$4" -v sz="$5" '
        /^firehose\[[0-9]+\]: stats total / {
            for (i = 1; i <= NF; i++) {
                if ($i ~ /^reg_hits=/) { sub(/^reg_hits=/, "", $i); h += $i; seen = 1 }
                if ($i ~ /^reg_misses=/) { sub(/^reg_misses=/, "", $i); m += $i }
            }
        }
        END {
            if (!seen) exit
            print r",ours,"t","b","np","sz",reg_hits,"h
            print r",ours,"t","b","np","sz",reg_misses,"m
            if (h + m > 0) printf "%s,ours,%s,%s,%s,%s,hit_rate,%.6f\n", r, t, b, np, sz, h / (h + m)
        }' "$6" >> "$results"
}

# well_formed CSVFILE BENCH: the header and >= 1 row, every row as wide as
# the header, every field after the first numeric
well_formed() {
    awk -F, -v b="$2" '
        /^#/ { next }
        !hdr { hdr = 1; nf = NF; if ($1 != "op") bad = 1; next }
        {
            rows++
            if (NF != nf) bad = 1
            if (b == "caf_putget") { if ($1 != "caf_put" && $1 != "caf_get") bad = 1 }
            else if (b == "caf_strided") { if ($1 != "caf_sput" && $1 != "caf_sget") bad = 1 }
            else if (b == "caf_events") { if ($1 !~ /^caf_(event|atomic_add|atomic_fetch_add|elem_put|elem_get)$/) bad = 1 }
            else if (b == "caf_syncall") { if ($1 != "caf_syncall" && $1 != "caf_syncimages") bad = 1 }
            else if ($1 != b) bad = 1
            for (i = 2; i <= NF; i++)
                if ($i !~ /^-?[0-9]+(\.[0-9]+)?$/) bad = 1
        }
        END { exit (bad || !hdr || rows < 1) }' "$1"
}

# run_caf ROUND SIDE TRANSPORT BENCH NP
run_caf() {
    round=$1; side=$2; tr=$3; b=$4; np=$5
    bin=$out/bin/$side/$b
    tag=$round-$side-$tr-$b-np$np
    rlog=$out/raw/$tag.log
    csv=$out/raw/$tag.csv
    if [ ! -x "$bin" ]; then
        skip "$tag: $bin was not built"
        return
    fi
    mapfile -t pargs < <(prog_args "$b" "$tr")
    say "== $tag"
    t0=$(date +%s); t0ns=$(date +%s%N)
    if [ "$side" = ours ]; then
        FH_OFI_PROVIDER=$(prov_of "$tr") FH_SHM=$(shm_of "$tr") FH_STATS=1 timeout -k 10 "$TO" \
            "$FH_CAFRUN" "$FH_CAFRUN_NP_FLAG" "$np" "$bin" "${pargs[@]}" > "$rlog" 2>&1
    else
        mapfile -t margs < <(mca_args "$tr")
        timeout -k 10 "$TO" "$OC_CAFRUN" -np "$np" "${margs[@]}" "$bin" "${pargs[@]}" \
            > "$rlog" 2>&1
    fi
    rc=$?
    t1ns=$(date +%s%N)
    dt=$(( $(date +%s) - t0 ))
    cat "$rlog" >> "$log"
    # the program's own CSV: "# " lines, the header, its rows
    grep -E '^(# |op,|caf_)' "$rlog" | grep -v '^# FAIL' > "$csv"
    if grep -q '^SKIP' "$rlog"; then
        skip "$tag: $(grep '^SKIP' "$rlog" | head -n 1)"
        return
    fi
    if [ $rc -ne 0 ]; then
        say "   FAILED (exit $rc) in ${dt}s, see $rlog"
        failed=$((failed + 1))
        return
    fi
    if ! well_formed "$csv" "$b"; then
        say "   FAILED: $csv is not a well-formed $b table"
        failed=$((failed + 1))
        return
    fi
    say "   ok in ${dt}s: $(grep -c '^caf_' "$csv") rows"
    # a runtime's wrong answer the program names instead of timing it
    grep '^# WRONG' "$csv" | while read -r line; do skip "$tag: ${line#\# }"; done
    emit "$round" "$side" "$tr" "$csv"
    # an empty program's launch-to-exit time, launcher included
    if [ "$b" = caf_imagecost ]; then
        echo "$round,$side,$tr,$b,$np,0,wall_s,$(awk -v a="$t0ns" -v b="$t1ns" \
            'BEGIN { printf "%.3f", (b - a) / 1e9 }')" >> "$results"
    fi
    if [ "$side" = ours ]; then
        case $b in
            caf_cannon|caf_bitonic)
                size=$(awk -F, '/^caf_/ { print $2; exit }' "$csv")
                emit_stats "$round" "$tr" "$b" "$np" "$size" "$rlog"
                if ! grep -q '^firehose\[[0-9]*\]: stats total' "$rlog"; then
                    skip "$tag: no 'firehose[r]: stats total' line with FH_STATS=1: no hit rate"
                fi ;;
        esac
    fi
}

# run_fh ROUND TRANSPORT: fhbench latency, the 8 B put median
run_fh() {
    round=$1; tr=$2
    tag=$round-fh-$tr-fh_put-np2
    csv=$out/raw/$tag.csv
    q=()
    [ $quick = 1 ] && q=(--quick)
    say "== $tag"
    FH_OFI_PROVIDER=$(prov_of "$tr") FH_SHM=$(shm_of "$tr") timeout -k 10 "$TO" "$FHRUN" -n 2 \
        "$FHBENCH" latency "${q[@]}" --csv "$csv" > "$out/raw/$tag.log" 2>&1
    rc=$?
    cat "$out/raw/$tag.log" >> "$log"
    case $rc in
        0) ;;
        77) skip "$tag: $(grep '^SKIP' "$out/raw/$tag.log" | head -n 1)"; return ;;
        *) say "   FAILED (exit $rc), see $out/raw/$tag.log"; failed=$((failed + 1)); return ;;
    esac
    v=$(awk -F, '/^#/ { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
                 $c["op"] == "put" && $c["size"] == 8 { print $c["median_us"]; exit }' "$csv")
    if [ -z "$v" ]; then
        say "   FAILED: no put,8 row in $csv"; failed=$((failed + 1)); return
    fi
    say "   ok: 8 B put median ${v} us"
    echo "$round,fh,$tr,fh_put,2,8,median_us,$v" >> "$results"
}

# pair ROUND TRANSPORT BENCH NP: ours and theirs back to back, the order
# alternating with the round
pair() {
    if [ $(( $1 % 2 )) = 1 ]; then order="ours theirs"; else order="theirs ours"; fi
    for side in $order; do
        if [ "$side" = ours ] && [ $have_ours = 0 ]; then continue; fi
        if [ "$side" = theirs ] && [ $have_theirs = 0 ]; then continue; fi
        run_caf "$1" "$side" "$2" "$3" "$4"
    done
}

# ---- Open MPI tcp check ---------------------------------------------------
if [ $have_theirs = 1 ] && [ $smoke = 0 ] && [ -x "$out/bin/theirs/caf_putget" ] &&
   case " $transports " in *" tcp "*) true ;; *) false ;; esac; then
    mapfile -t margs < <(mca_args tcp)
    timeout -k 10 120 "$OC_CAFRUN" -np 2 "${margs[@]}" --mca btl_base_verbose 100 \
        "$out/bin/theirs/caf_putget" --max 64 --iters 10 --reps 1 > "$out/mca-check.log" 2>&1
    if grep -q 'select: init of component tcp returned success' "$out/mca-check.log" &&
       ! grep -q 'initializing btl component vader' "$out/mca-check.log" &&
       grep -q '^caf_put,' "$out/mca-check.log"; then
        mca_check="ok (btl tcp initialized, vader not loaded; see mca-check.log)"
    else
        mca_check="FAILED (see mca-check.log)"
        failed=$((failed + 1))
    fi
    say "Open MPI tcp check: $mca_check"
else
    mca_check="not run"
fi

# ---- the rounds -------------------------------------------------------------
for round in $(seq 1 "$rounds"); do
    say "---- round $round of $rounds"
    for tr in $transports; do
        if [ $have_fh = 1 ]; then run_fh "$round" "$tr"; fi
        if has_bench caf_putget; then pair "$round" "$tr" caf_putget 2; fi
        if has_bench caf_strided; then pair "$round" "$tr" caf_strided 2; fi
        if has_bench caf_events; then pair "$round" "$tr" caf_events 2; fi
        if has_bench caf_cosum; then
            for np in $nplist; do pair "$round" "$tr" caf_cosum "$np"; done
        fi
        if has_bench caf_syncall; then
            for np in $nplist; do pair "$round" "$tr" caf_syncall "$np"; done
        fi
        if has_bench caf_cannon; then pair "$round" "$tr" caf_cannon "$appnp"; fi
        if has_bench caf_bitonic; then pair "$round" "$tr" caf_bitonic "$appnp"; fi
        if has_bench caf_imagecost; then
            for np in $nplist; do pair "$round" "$tr" caf_imagecost "$np"; done
        fi
    done
done

# ---- summary ----------------------------------------------------------------
# medians over rounds, then the ratios; summary.csv:
# kind,transport,op,images,size,ours,theirs,ratio
awk -F, -v csvout="$out/summary.csv" -v hours="$have_ours" -v htheirs="$have_theirs" \
    -v trlist="$transports" '
    function med(list,   n, v, i, j, t) {
        n = split(list, v, " ")
        if (n == 0) return ""
        for (i = 2; i <= n; i++) {
            t = v[i] + 0
            for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]
            v[j + 1] = t
        }
        return (n % 2) ? v[(n + 1) / 2] + 0 : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    function get(side, tr, b, np, sz, m,   k) {
        k = side SUBSEP tr SUBSEP b SUBSEP np SUBSEP sz SUBSEP m
        return (k in vals) ? med(vals[k]) : ""
    }
    function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "n/a" : sprintf(a / b < 0.095 ? "%.3f" : "%.2f", a / b) }
    function show(x, f) { return (x == "") ? "n/a" : sprintf(f, x) }
    function row(kind, tr, op, np, sz, o, t, r) {
        printf "%s,%s,%s,%s,%s,%s,%s,%s\n", kind, tr, op, np, sz, o, t, r > csvout
    }
    # A table of one statement timed alone and back to back (SYNC ALL,
    # SYNC IMAGES) over the image counts run: summary rows kind_us and
    # kind_loop_us; skip: leave out counts that neither side ran.
    function sync_table(title, tr, b, kind, skip,   np, o, t, ol, tl) {
        printf "\n%s\n%7s %12s %12s %8s %12s %12s %8s\n", title, "images", "ours", "theirs", "ratio", "ours_loop", "theirs_loop", "ratio"
        for (np = 1; np <= 4096; np++) {
            if (!(np in snp)) continue
            o = get("ours", tr, b, np, 0, "median_us"); t = get("theirs", tr, b, np, 0, "median_us")
            ol = get("ours", tr, b, np, 0, "loop_us"); tl = get("theirs", tr, b, np, 0, "loop_us")
            if (skip && o == "" && t == "") continue
            printf "%7d %12s %12s %8s %12s %12s %8s\n", np, show(o, "%.3f"), show(t, "%.3f"), ratio(o, t), show(ol, "%.3f"), show(tl, "%.3f"), ratio(ol, tl)
            row(kind "_us", tr, b, np, 0, o, t, ratio(o, t))
            row(kind "_loop_us", tr, b, np, 0, ol, tl, ratio(ol, tl))
        }
    }
    NR == 1 { next }
    {
        k = $2 SUBSEP $3 SUBSEP $4 SUBSEP $5 SUBSEP $6 SUBSEP $7
        vals[k] = vals[k] " " $8
        trs[$3] = 1
        if ($4 == "caf_put") psz[$6 + 0] = 1
        if ($4 == "caf_sput") ssz[$6 + 0] = 1
        if ($4 ~ /^caf_event$|^caf_atomic_|^caf_elem_/) evop[$4] = 1
        if ($4 == "caf_cosum") { cnp[$5 + 0] = 1; csz[$6 + 0] = 1 }
        if ($4 == "caf_syncall") snp[$5 + 0] = 1
        if ($4 == "caf_imagecost") inp[$5 + 0] = 1
        if ($4 == "caf_cannon" || $4 == "caf_bitonic") app[$4 SUBSEP $5 SUBSEP $6] = 1
    }
    END {
        print "kind,transport,op,images,size,ours,theirs,ratio" > csvout
        if (!hours) print "NOTE: ours (the firehose caf) is MISSING in this run: OpenCoarrays numbers only, ratios n/a.\n"
        if (!htheirs) print "NOTE: theirs (OpenCoarrays) is MISSING in this run: ratios n/a.\n"
        print "Medians over rounds; ratio = ours / theirs (latency, time: < 1 is better for ours;"
        print "bandwidth, GFLOP/s: > 1 is better for ours)."
        ns = 0; for (s in psz) sizes[++ns] = s + 0
        for (i = 2; i <= ns; i++) { t = sizes[i]; for (j = i - 1; j >= 1 && sizes[j] > t; j--) sizes[j + 1] = sizes[j]; sizes[j + 1] = t }
        ntr = split(trlist, trv, " ")
        for (ti = 1; ti <= ntr; ti++) {
            tr = trv[ti]
            if (!(tr in trs)) continue
            theirs_name = (tr == "tcp") ? "Open MPI tcp (ob1, btl tcp, osc pt2pt)" : "Open MPI vader (ob1, btl vader, osc rdma)"
            ours_name = "firehose FH_OFI_PROVIDER=net,tcp (the default; " (tr == "tcp" ? "TCP sockets, FH_SHM=off)" : "FH_SHM=auto: the node path)")
            printf "\n======== %s: ours = %s, theirs = %s\n", tr, ours_name, theirs_name
            o = get("ours", tr, "caf_put", 2, 8, "median_us"); f = get("fh", tr, "fh_put", 2, 8, "median_us")
            printf "\nlayer overhead: caf 8 B put %s us / fh_put 8 B %s us = %s\n", show(o, "%.3f"), show(f, "%.3f"), ratio(o, f)
            row("layer_overhead", tr, "caf_put/fh_put", 2, 8, o, f, ratio(o, f))
            printf "\nlatency (us, median)\n%10s %-8s %12s %12s %8s\n", "bytes", "op", "ours", "theirs", "ratio"
            for (i = 1; i <= ns; i++) for (p = 1; p <= 2; p++) {
                op = (p == 1) ? "caf_put" : "caf_get"
                o = get("ours", tr, op, 2, sizes[i], "median_us"); t = get("theirs", tr, op, 2, sizes[i], "median_us")
                printf "%10d %-8s %12s %12s %8s\n", sizes[i], op, show(o, "%.3f"), show(t, "%.3f"), ratio(o, t)
                row("latency_us", tr, op, 2, sizes[i], o, t, ratio(o, t))
            }
            printf "\nbandwidth (MB/s, >= 64 KiB)\n%10s %-8s %12s %12s %8s\n", "bytes", "op", "ours", "theirs", "ratio"
            for (i = 1; i <= ns; i++) {
                if (sizes[i] < 65536) continue
                for (p = 1; p <= 2; p++) {
                    op = (p == 1) ? "caf_put" : "caf_get"
                    o = get("ours", tr, op, 2, sizes[i], "mb_s"); t = get("theirs", tr, op, 2, sizes[i], "mb_s")
                    printf "%10d %-8s %12s %12s %8s\n", sizes[i], op, show(o, "%.1f"), show(t, "%.1f"), ratio(o, t)
                    row("bandwidth_MB_s", tr, op, 2, sizes[i], o, t, ratio(o, t))
                }
            }
            printf "\nstrided (every 2nd real(8), one statement; us, median; MB/s of payload)\n%10s %-9s %12s %12s %8s\n", "elements", "op", "ours", "theirs", "ratio"
            for (e = 1; e <= 1073741824; e *= 2) {
                if (!(e in ssz)) continue
                for (p = 1; p <= 2; p++) {
                    op = (p == 1) ? "caf_sput" : "caf_sget"
                    o = get("ours", tr, op, 2, e, "median_us"); t = get("theirs", tr, op, 2, e, "median_us")
                    if (o == "" && t == "") continue
                    printf "%10d %-9s %12s %12s %8s\n", e, op, show(o, "%.3f"), show(t, "%.3f"), ratio(o, t)
                    row("strided_us", tr, op, 2, e, o, t, ratio(o, t))
                }
            }
            printf "\nevents and atomics (us, median, image 1 <-> 2)\n%-22s %12s %12s %8s\n", "op", "ours", "theirs", "ratio"
            nev = split("caf_event caf_atomic_add caf_atomic_fetch_add caf_elem_put caf_elem_get", evl, " ")
            for (i = 1; i <= nev; i++) {
                if (!(evl[i] in evop)) continue
                o = get("ours", tr, evl[i], 2, 0, "median_us"); t = get("theirs", tr, evl[i], 2, 0, "median_us")
                printf "%-22s %12s %12s %8s\n", evl[i], show(o, "%.3f"), show(t, "%.3f"), ratio(o, t)
                row("events_us", tr, evl[i], 2, 0, o, t, ratio(o, t))
            }
            printf "\nco_sum (us, median, slowest image)\n%7s %10s %12s %12s %8s\n", "images", "bytes", "ours", "theirs", "ratio"
            for (np = 1; np <= 4096; np++) {
                if (!(np in cnp)) continue
                for (s = 1; s <= 1073741824; s *= 2) {
                    if (!(s in csz)) continue
                    o = get("ours", tr, "caf_cosum", np, s, "median_us"); t = get("theirs", tr, "caf_cosum", np, s, "median_us")
                    printf "%7d %10d %12s %12s %8s\n", np, s, show(o, "%.3f"), show(t, "%.3f"), ratio(o, t)
                    row("cosum_us", tr, "caf_cosum", np, s, o, t, ratio(o, t))
                }
            }
            sync_table("sync all (us, median of image 1'"'"'s timed statements; loop = back to back)", tr, "caf_syncall", "syncall", 0)
            sync_table("sync images with the ring neighbours (us, as sync all)", tr, "caf_syncimages", "syncimages", 1)
            printf "\nimage cost (an empty program: RSS per image after SYNC ALL, MiB; launch to exit, s)\n%7s %10s %10s %8s %10s %10s %8s\n", "images", "rss_ours", "rss_theirs", "ratio", "s_ours", "s_theirs", "ratio"
            for (np = 1; np <= 4096; np++) {
                if (!(np in inp)) continue
                o = get("ours", tr, "caf_imagecost", np, 0, "rss_mib"); t = get("theirs", tr, "caf_imagecost", np, 0, "rss_mib")
                ol = get("ours", tr, "caf_imagecost", np, 0, "wall_s"); tl = get("theirs", tr, "caf_imagecost", np, 0, "wall_s")
                printf "%7d %10s %10s %8s %10s %10s %8s\n", np, show(o, "%.2f"), show(t, "%.2f"), ratio(o, t), show(ol, "%.3f"), show(tl, "%.3f"), ratio(ol, tl)
                row("imagecost_rss_mib", tr, "caf_imagecost", np, 0, o, t, ratio(o, t))
                row("imagecost_wall_s", tr, "caf_imagecost", np, 0, ol, tl, ratio(ol, tl))
            }
            printf "\napplications (s, median)\n%-12s %7s %9s %12s %12s %8s %10s %10s\n", "bench", "images", "size", "ours", "theirs", "ratio", "our_hits", "our_GF/s"
            for (k in app) {
                split(k, a, SUBSEP)
                o = get("ours", tr, a[1], a[2], a[3], "seconds"); t = get("theirs", tr, a[1], a[2], a[3], "seconds")
                h = get("ours", tr, a[1], a[2], a[3], "hit_rate")
                g = get("ours", tr, a[1], a[2], a[3], "gflops"); gt = get("theirs", tr, a[1], a[2], a[3], "gflops")
                hp = (h == "") ? "" : h * 100
                printf "%-12s %7d %9d %12s %12s %8s %10s %10s\n", a[1], a[2], a[3], show(o, "%.6f"), show(t, "%.6f"), ratio(o, t), show(hp, "%.2f%%"), show(g, "%.3f")
                row(a[1] "_s", tr, a[1], a[2], a[3], o, t, ratio(o, t))
                if (h != "") row(a[1] "_hit_rate", tr, a[1], a[2], a[3], h, "", "n/a")
                if (a[1] == "caf_cannon") {
                    printf "%-12s %7s %9s %12s %12s %8s   (theirs GFLOP/s %s)\n", "", "", "", "", "", "", show(gt, "%.3f")
                    row("caf_cannon_gflops", tr, a[1], a[2], a[3], g, gt, ratio(g, gt))
                }
            }
        }
    }' "$results" > "$out/summary.txt"
{
    echo
    echo "Open MPI tcp check: $mca_check"
    if [ -s "$out/skipped.txt" ]; then echo "skipped:"; sed 's/^/  /' "$out/skipped.txt"; fi
    echo "failures: $failed"
} >> "$out/summary.txt"
say ""
tee -a "$log" < "$out/summary.txt"

if [ $failed -ne 0 ]; then
    say "run-caf-bench: $failed failure(s)"
    exit 1
fi
if [ $smoke = 1 ]; then
    rows_ours=$(grep -c ',ours,' "$results")
    rows_theirs=$(grep -c ',theirs,' "$results")
    # every benchmark has rows from every side that exists, on every transport
    missing=
    for side in ours theirs; do
        if [ "$side" = ours ] && [ $have_ours = 0 ]; then continue; fi
        if [ "$side" = theirs ] && [ $have_theirs = 0 ]; then continue; fi
        for tr in $transports; do
            # the rows every side must have (OpenCoarrays' atomic_fetch_add
            # may be WRONG, so not that one)
            for b in $(echo " $benches " | sed -e 's/ caf_putget / caf_put caf_get /' \
                           -e 's/ caf_strided / caf_sput caf_sget /' \
                           -e 's/ caf_events / caf_event caf_atomic_add caf_elem_put caf_elem_get /'); do
                grep -q "^1,$side,$tr,$b," "$results" || missing="$missing $side/$tr/$b"
            done
        done
    done
    if [ -n "$missing" ]; then
        say "run-caf-bench --smoke: FAILED: no rows for$missing"
        exit 1
    fi
    if [ $have_ours = 0 ] || [ $have_theirs = 0 ]; then
        say "run-caf-bench --smoke: SKIP: a side is missing (ours $have_ours, theirs $have_theirs); the other ran (ours rows $rows_ours, theirs rows $rows_theirs)"
        exit 77
    fi
    say "run-caf-bench --smoke: ok (ours rows $rows_ours, theirs rows $rows_theirs)"
fi
exit 0
