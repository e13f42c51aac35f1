#!/bin/bash
# run-rxe.sh -- the benchmarks where registration really pins: fhbench over
# the ibv conduit on Soft-RoCE (rxe) in the qemu VM of tests/vm/run-vm.sh.
# bench/run-all.sh runs it with --rxe (or FHB_RXE=1); alone:
#
#   bench/run-rxe.sh [--quick] [--only "sweep latency raw msgrate"]
#                    [--builddir DIR] [--out DIR] [run-vm.sh options...]
#
# Boots the VM once and runs in it (--only: those of the tests below; all
# by default), both ranks on rxe0 (FH_CONDUIT=ibv FH_IBV_DEVICE=rxe0)
# except msgrate, one fhbench per line:
#   sweep    per FH_REG_STRATEGY in FHB_RXE_STRATEGIES (default firehose
#            rendezvous rendezvous-cache pin-everything), M = 2 MiB, working
#            sets 1..4 MiB               -> sweep-ibv-<strategy>.csv
#   latency  per strategy, sizes up to 1 KiB      -> latency-ibv-<strategy>.csv
#   raw      over verbs (bench_raw_ibv.c), firehose on the paired side,
#            sizes up to 64 KiB (1 MiB without --quick)  -> raw-ibv.csv
#   msgrate  2-byte puts from 1..4 threads of rank 0 (FH_MAX_THREADS=4),
#            rank 0 on rxe0 and rank 1 on rxe1 (across the veth), FH_BIND=off
#            (bound, rank 0's threads would share one vCPU), once per
#            FH_PATHS value: independent and shared, FHB_RXE_MSGRATE_ROUNDS
#            rounds (default 1) alternating the two
#                                 -> msgrate-ibv-<paths>[-r<round>].csv
# The VM has no shared directory: each test prints its CSV on the serial
# console between "FHB-CSV-BEGIN <file>" and "FHB-CSV-END <file>" lines,
# and this script cuts them out of console.log into DIR (default ./results).
# A strategy the build rejects (exit 77) goes to DIR/skipped.txt.  At the
# end it prints the issue's rxe target: 8 B put latency firehose /
# rendezvous (<= 0.10, "at least 10x faster"), from the sweep below M and
# from the latency test.  Everything measured here is under software
# emulation (TCG): compare ratios within this run, never absolute times
# with the host's.  Exit status: 0 if every test passed, else non-zero
# (run-vm.sh's status; CSVs of the tests that passed are still written).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
quick=0
only="sweep latency raw msgrate"
builddir=
out=results
vm_opts=()
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=1 ;;
        --only) only=$2; shift ;;
        --builddir) builddir=$2; shift ;;
        --out) out=$2; shift ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'; exit 0 ;;
        *) vm_opts+=("$1") ;;
    esac
    shift
done
if [ -z "$builddir" ]; then
    for d in . "$top/_build" "$top"; do
        if [ -x "$d/bench/fhbench" ] && [ -x "$d/tools/fhrun" ]; then
            builddir=$(cd "$d" && pwd); break
        fi
    done
fi
if [ -z "$builddir" ] || [ ! -x "$builddir/bench/fhbench" ]; then
    echo "run-rxe: build first (bench/fhbench and tools/fhrun not found; use --builddir)" >&2
    exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
STRATEGIES=${FHB_RXE_STRATEGIES:-"firehose rendezvous rendezvous-cache pin-everything"}
if [ $quick = 1 ]; then q=--quick; raw_max=64k; else q=; raw_max=1m; fi
rev=${FHBENCH_GIT_REV:-$(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)}
work=$(mktemp -d "${TMPDIR:-/tmp}/fh-rxe-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The guest helper: fhb.sh FILE CMD... runs CMD --csv /tmp/FILE and prints
# the CSV between markers; exit 77 (strategy unknown) prints a SKIP marker.
cat > "$work/fhb.sh" <<'EOF'
#!/bin/sh
f=$1; shift
"$@" --csv "/tmp/$f" > "/tmp/$f.log" 2>&1
st=$?
cat "/tmp/$f.log"
if [ $st -eq 77 ]; then
    echo "FHB-SKIP $f: $(grep '^SKIP' "/tmp/$f.log" | tail -n 1)"
    exit 0
fi
if [ $st -eq 0 ] && [ -s "/tmp/$f" ]; then
    echo "FHB-CSV-BEGIN $f"
    cat "/tmp/$f"
    echo "FHB-CSV-END $f"
fi
exit $st
EOF

env_ibv="FH_CONDUIT=ibv FH_IBV_DEVICE=rxe0"
run="sh /fh/vm/fhb.sh"
fhb="tools/fhrun -n 2 --timeout 600 bench/fhbench"
tests=()
want() { case " $only " in *" $1 "*) return 0 ;; esac; return 1; }
for s in $STRATEGIES; do
    want sweep && tests+=(--test "sweep-$s" "$env_ibv FH_REG_STRATEGY=$s FH_FIREHOSE_M=2m FH_FIREHOSE_MAXVICTIM=512k $run sweep-ibv-$s.csv $fhb sweep $q --max-ws 4m")
    want latency && tests+=(--test "latency-$s" "$env_ibv FH_REG_STRATEGY=$s $run latency-ibv-$s.csv $fhb latency $q --max-size 1k")
done
want raw && tests+=(--test raw "$env_ibv FH_REG_STRATEGY=firehose $run raw-ibv.csv $fhb raw $q --max-size $raw_max")
MR_ROUNDS=${FHB_RXE_MSGRATE_ROUNDS:-1}
for i in $(seq 1 "$MR_ROUNDS"); do        # rounds interleave the two
    sfx=; [ "$i" -gt 1 ] && sfx=-r$i
    for p in independent shared; do
        want msgrate && tests+=(--test "msgrate-$p$sfx" "FH_CONDUIT=ibv FH_IBV_DEVICE=rxe0,rxe1 FH_SHM=off FH_BIND=off FH_MAX_THREADS=4 FH_PATHS=$p $run msgrate-ibv-$p$sfx.csv $fhb msgrate $q --threads 4")
    done
done
[ ${#tests[@]} -gt 0 ] || { echo "run-rxe: --only \"$only\": no such test (sweep latency raw msgrate)" >&2; exit 2; }

echo "run-rxe: booting the rxe VM (software emulation); tests: $only (strategies {$STRATEGIES})"
t0=$(date +%s)
"$top/tests/vm/run-vm.sh" --quiet --keep --workdir "$work/vm" --memory 4096 --timeout 2400 \
    --env "FHBENCH_GIT_REV=$rev" --file "$work/fhb.sh:/fh/vm/fhb.sh" \
    --bin "$builddir/tools/fhrun:tools/fhrun" --bin "$builddir/bench/fhbench:bench/fhbench" \
    "${tests[@]}" "${vm_opts[@]}" > "$work/vm.out" 2>&1
vm_rc=$?
grep -E '^(FH-VM-RESULT|vm:|boot to init|VM run)' "$work/vm.out"
console=$work/vm/console.log
[ -f "$console" ] || { echo "run-rxe: no console log"; cat "$work/vm.out"; exit 3; }

# Cut the CSVs out of the console (kernel lines cannot be in them: a line
# that is not "# ..." and has the wrong field count is dropped, said once).
n=0
for f in $(sed -n 's/^FHB-CSV-BEGIN \([A-Za-z0-9._-]*\)$/\1/p' "$console"); do
    awk -v f="$f" '$0 == "FHB-CSV-BEGIN " f { on = 1; next } $0 == "FHB-CSV-END " f { on = 0 }
        on' "$console" | awk -F, -v f="$f" '
        /^#/ { print; next }
        !nc { nc = NF; print; next }
        NF == nc { print; next }
        { printf "run-rxe: %s: dropped a console line: %s\n", f, $0 > "/dev/stderr" }' \
        > "$out/$f"
    n=$((n + 1))
done
sed -n 's/^FHB-SKIP \(.*\)$/rxe \1/p' "$console" >> "$out/skipped.txt"
cp "$console" "$out/rxe-console.log"
echo "run-rxe: $n CSVs into $out (console: $out/rxe-console.log), $(( $(date +%s) - t0 ))s"

# The target: 8 B put latency, firehose / rendezvous.
. "$here/csv.sh"
fh=$out/sweep-ibv-firehose.csv rv=$out/sweep-ibv-rendezvous.csv
if [ -f "$fh" ] && [ -f "$rv" ]; then
    M=$(csv_meta "$fh" M)
    awk -F, -v M="$M" '
        FNR == 1 { file++ } /^#/ { next }
        !h[file] { for (i = 1; i <= NF; i++) c[file, $i] = i; h[file] = 1; next }
        { ws = $(c[file, "working_set"]); v[file, ws] = $(c[file, "lat_median_us"]); k[ws] = 1 }
        END { for (ws in k) if (v[2, ws] > 0)
                  printf "run-rxe: sweep W=%s%s: 8 B put firehose %s us / rendezvous %s us = %.3f\n",
                      ws, (ws + 0 < M + 0 ? " (below M)" : ""), v[1, ws], v[2, ws], v[1, ws] / v[2, ws] }' \
        "$fh" "$rv" | sort -t= -k2 -n
fi
if want latency; then
    a=$(csv_get "$out/latency-ibv-firehose.csv" median_us op put size 8)
    b=$(csv_get "$out/latency-ibv-rendezvous.csv" median_us op put size 8)
    x=$(ratio "$a" "$b")
    f=$(ratio "$b" "$a")
    echo "run-rxe: latency 8 B put: firehose ${a:-n/a} us / rendezvous ${b:-n/a} us = $x" \
        "(target <= 0.10; firehose ${f}x faster)"
fi
r=$out/raw-ibv.csv
[ -f "$r" ] && echo "run-rxe: raw verbs 8 B put $(csv_get "$r" median_us op put size 8) us," \
    "get $(csv_get "$r" median_us op get size 8) us; paired 8 B put firehose / raw" \
    "$(csv_get "$r" median_us op pair_ratio_put size 8)"
# Message rate: 1, 2 and 4 threads, independent and shared paths, the
# median over the rounds [lowest-highest].
for b in blocking nbi; do
    line=
    for p in independent shared; do
        for t in 1 2 4; do
            v=$(for f in "$out"/msgrate-ibv-$p.csv "$out"/msgrate-ibv-$p-r*.csv; do
                    [ -f "$f" ] && csv_get "$f" msgs_s threads "$t" batching "$b"
                done | sort -n | awk '{ v[NR] = $1 } END { if (NR)
                    printf "%.0f [%.0f-%.0f]", v[int((NR + 1) / 2)], v[1], v[NR] }')
            [ -n "$v" ] && line+=" $p/$t=$v"
        done
    done
    [ -n "$line" ] && echo "run-rxe: msgrate ($b, msgs/s, median [range]):$line"
done
[ $vm_rc -eq 0 ] || echo "run-rxe: the VM run failed (run-vm.sh exit $vm_rc); see $out/rxe-console.log" >&2
exit $vm_rc
