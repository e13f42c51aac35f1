#!/bin/sh
# run-all.sh -- every fhbench test, the peers, the plots.  `make bench` runs
# it from the build tree (`make bench BENCH_ARGS=--quick` for the short run).
#
#   bench/run-all.sh [--quick] [--rxe] [--builddir DIR] [--out DIR]
#
# Writes into DIR (default ./results):
#   latency-<prov>-<strategy>.csv  raw-<prov>.csv  peak-<prov>.csv
#   strategies-<prov>.csv (bench/strategies.sh: peak, firehose against
#   pin-everything in alternating rounds)
#   sweep-tcp-<strategy>.csv       apps-tcp-<strategy>.csv
#   msgrate-<prov>-<strategy>-<paths>.csv   cache.csv   map.csv   peers*.csv
#   node.csv node-rounds.csv (run-peers.sh's node path series; the last
#   round's own CSVs: node-fh.csv, node-barrier-np*.csv, mpi-barrier-np*.csv)
#   *.png (bench/plot.sh), summary.txt (the targets' ratios, bench/ratios
#   in the same run), skipped.txt (series that could not run, and why),
#   run.log (everything printed), timings.txt (seconds per step).
#
# Strategies: FHB_STRATEGIES (default "firehose pin-everything rendezvous
# rendezvous-cache bounce"); one this build rejects (fh_init FH_ERR_CONFIG,
# fhbench exit 77) is listed in skipped.txt, not failed.  Providers:
# FHB_PROVIDERS (default "net tcp shm": net is the default network
# provider, tcp its fallback), skipped when fi_info lacks them.
# Traffic stays on loopback (FI_TCP_IFACE=lo).  The series measure the
# conduits: FH_SHM defaults to off here (the two ranks share a host, and
# with FH_SHM=auto their puts would be copies through shared memory).
# --rxe (or FHB_RXE=1) adds bench/run-rxe.sh: the ibv conduit on Soft-RoCE
# in a qemu VM (sweep-ibv-*, latency-ibv-*, raw-ibv.csv); off by default.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/csv.sh"
quick=0
qflag=
rxe=${FHB_RXE:-0}
builddir=
out=results
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=1; qflag=--quick ;;
        --rxe) rxe=1 ;;
        --builddir) builddir=$2; shift ;;
        --out) out=$2; shift ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "usage: $0 [--quick] [--rxe] [--builddir DIR] [--out DIR]" >&2; exit 2 ;;
    esac
    shift
done
# gnuplot and ucx_perftest (idempotent; FHB_NO_INSTALL=1 skips it).
if [ -z "${FHB_NO_INSTALL:-}" ]; then
    "$top/tools/install-deps.sh" --bench || echo "run-all: install-deps.sh --bench failed; continuing" >&2
fi
if [ -z "$builddir" ]; then
    for d in . "$top/_build" "$top"; do
        if [ -x "$d/bench/fhbench" ] && [ -x "$d/tools/fhrun" ]; then
            builddir=$(cd "$d" && pwd); break
        fi
    done
fi
FHRUN=${builddir:-.}/tools/fhrun
FHBENCH=${builddir:-.}/bench/fhbench
if [ ! -x "$FHBENCH" ] || [ ! -x "$FHRUN" ]; then
    echo "run-all: build first (fhbench and fhrun not found; use --builddir)" >&2
    exit 1
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_SOCKETS_IFACE=${FI_SOCKETS_IFACE:-lo}
export FI_NET_IFACE=${FI_NET_IFACE:-lo}
export FH_SHM=${FH_SHM:-off}
export FHBENCH_GIT_REV=${FHBENCH_GIT_REV:-$(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)}
STRATEGIES=${FHB_STRATEGIES:-"firehose pin-everything rendezvous rendezvous-cache bounce"}
PROVIDERS=${FHB_PROVIDERS:-"net tcp shm"}
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
threads=$((2 * cores))
if [ $quick = 1 ]; then
    SWEEP_M=2m; SWEEP_VICTIM=1m; APPS_M=256k; TO=300
else
    SWEEP_M=4m; SWEEP_VICTIM=2m; APPS_M=1m; TO=1800
fi
log=$out/run.log
: > "$log"
: > "$out/skipped.txt"
: > "$out/timings.txt"
start_all=$(date +%s)
failed=0

say() { echo "$*" | tee -a "$log"; }

# bench NAME CSV [ENV=VALUE...] -- fhbench args...: one fhbench run.
bench() {
    name=$1; csv=$2; shift 2
    envs=
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs="$envs $1"; shift; done
    shift
    t0=$(date +%s)
    say "== $name ($envs )"
    # shellcheck disable=SC2086
    env $envs timeout -k 10 "$TO" "$FHRUN" -n 2 "$FHBENCH" "$@" $qflag --csv "$csv" \
        >> "$log" 2>&1
    rc=$?
    dt=$(( $(date +%s) - t0 ))
    echo "$name $dt" >> "$out/timings.txt"
    case $rc in
        0) say "   ok in ${dt}s" ;;
        77) reason=$(grep '^SKIP' "$log" | tail -n 1)
            echo "$name: $reason" >> "$out/skipped.txt"
            rm -f "$csv"
            say "   skipped: $reason" ;;
        *) say "   FAILED (exit $rc), see $log"; rm -f "$csv"; failed=$((failed + 1)) ;;
    esac
}

have_prov() {
    if command -v fi_info >/dev/null 2>&1 && ! fi_info -p "$1" >/dev/null 2>&1; then
        echo "provider $1: fi_info -p $1 finds nothing" >> "$out/skipped.txt"
        return 1
    fi
    return 0
}

say "run-all: $(date -u +%Y-%m-%dT%H:%M:%SZ) git $FHBENCH_GIT_REV quick=$quick"
say "machine: $(uname -srm), $cores cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. latency, raw, peak per provider
for p in $PROVIDERS; do
    have_prov "$p" || continue
    for s in $STRATEGIES; do
        case $s in firehose|pin-everything) ;; *) continue ;; esac
        bench "latency $p $s" "$out/latency-$p-$s.csv" FH_OFI_PROVIDER=$p FH_REG_STRATEGY=$s \
            -- latency
    done
    bench "raw $p" "$out/raw-$p.csv" FH_OFI_PROVIDER=$p FH_REG_STRATEGY=firehose -- raw
    bench "peak $p" "$out/peak-$p.csv" FH_OFI_PROVIDER=$p FH_REG_STRATEGY=firehose -- peak
    # firehose against pin-everything, alternating rounds (issue 30's targets)
    t0=$(date +%s)
    say "== strategies $p (bench/strategies.sh)"
    "$here/strategies.sh" $qflag --provider "$p" --builddir "$builddir" --out "$out" >> "$log" 2>&1 \
        || { say "   FAILED, see $log"; failed=$((failed + 1)); }
    echo "strategies-$p $(( $(date +%s) - t0 ))" >> "$out/timings.txt"
done

# 2. sweep and apps: one series per strategy
for s in $STRATEGIES; do
    bench "sweep tcp $s" "$out/sweep-tcp-$s.csv" FH_OFI_PROVIDER=tcp FH_REG_STRATEGY=$s \
        FH_FIREHOSE_M=$SWEEP_M FH_FIREHOSE_MAXVICTIM=$SWEEP_VICTIM -- sweep
done
for s in $STRATEGIES; do
    bench "apps tcp $s" "$out/apps-tcp-$s.csv" FH_OFI_PROVIDER=tcp FH_REG_STRATEGY=$s \
        FH_FIREHOSE_M=$APPS_M FH_FIREHOSE_MAXVICTIM=$APPS_M -- apps
done

# 3. message rate: independent vs shared paths, per provider
for p in $PROVIDERS; do
    have_prov "$p" || continue
    for s in firehose pin-everything; do
        for paths in independent shared; do
            bench "msgrate $p $s $paths" "$out/msgrate-$p-$s-$paths.csv" FH_OFI_PROVIDER=$p \
                FH_REG_STRATEGY=$s FH_PATHS=$paths FH_MAX_THREADS=$threads \
                -- msgrate --threads "$threads"
        done
    done
done

# 4. the cache hit path.  It measures how one rank's threads scale while
# the other rank waits: FH_BIND=off, since binding would give the working
# rank one CPU of two on a 2-core machine (the placement, not the cache).
bench "cache" "$out/cache.csv" FH_BIND=off -- cache --threads "$threads"
# ... and our hash maps' lookups against uthash
bench "map" "$out/map.csv" -- map

# 5. peers, back to back
t0=$(date +%s)
say "== peers"
"$here/peers/run-peers.sh" $qflag --builddir "$builddir" --out "$out" 2>&1 | tee -a "$log"
echo "peers $(( $(date +%s) - t0 ))" >> "$out/timings.txt"

# 6. optional: the rxe VM (ibv conduit where registration pins)
if [ "$rxe" = 1 ]; then
    t0=$(date +%s)
    say "== rxe VM (bench/run-rxe.sh)"
    { "$here/run-rxe.sh" $qflag --builddir "$builddir" --out "$out" 2>&1
      echo "run-rxe: exit $?"; } | tee -a "$log"
    tail -n 1 "$log" | grep -q '^run-rxe: exit 0$' || failed=$((failed + 1))
    echo "rxe $(( $(date +%s) - t0 ))" >> "$out/timings.txt"
fi

# 7. plots and the summary of ratios
if command -v gnuplot >/dev/null 2>&1; then
    "$here/plot.sh" "$out" >> "$log" 2>&1 || say "run-all: plot.sh failed (see $log)"
else
    say "run-all: gnuplot not installed (Debian gnuplot-nox): no PNGs"
fi
"$here/ratios.sh" "$out" > "$out/summary.txt" 2>>"$log"
cat "$out/summary.txt" | tee -a "$log"
say "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
total=$(( $(date +%s) - start_all ))
echo "total $total" >> "$out/timings.txt"
say "run-all: done in ${total}s, $failed failed; results in $out"
[ -s "$out/skipped.txt" ] && { say "skipped:"; sed 's/^/  /' "$out/skipped.txt" | tee -a "$log"; }
[ "$failed" -eq 0 ]
