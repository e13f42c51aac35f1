#!/bin/sh
# bench_smoke.sh -- every fhbench test runs (tiny sizes and counts) and
# writes a well-formed CSV.  No timing is checked: benchmarks are not tests.
#
# Checks per test: exit status 0; the CSV has the run header (fhbench,
# conduit, provider, strategy, M, bucket, threads, git), the expected column
# line, at least one row, every row with as many fields as columns, and the
# numeric columns numeric (or empty where the test documents "unused").
# map: the eight rows (reg_map and fhc_map, uthash's jen and mul hash, hit
# and miss) with 4096 keys; node (FH_SHM=auto): the copy rows of each kind,
# the AM short round trip and its node_path line; barrier: its one row;
# fhbench map itself exits non-zero when a lookup returns a wrong value.
# Also: an unknown FH_REG_STRATEGY makes fhbench exit 77 with "SKIP:" (how
# run-all.sh marks a strategy this build lacks), the apps kernels report
# "verified", and bench/ratios.sh reads the CSVs without error, also with
# the rxe VM's files present (bench/run-rxe.sh: *-ibv*.csv, same shapes;
# stand-ins copied from the tcp ones here) and run-peers.sh's node path
# summary (node.csv, a stand-in written here: the verdicts of its lines are
# checked), as does bench/report.sh, and
# bench/merge-reports.awk merges rounds of it.
# Exit 0 pass, 1 fail, 77 skip (nothing built).
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-.}
FHRUN=${FHRUN:-$top_builddir/tools/fhrun}
FHBENCH=$top_builddir/bench/fhbench
if [ ! -x "$FHBENCH" ] || [ ! -x "$FHRUN" ]; then
    echo "SKIP bench_smoke: $FHBENCH or $FHRUN not built"
    exit 77
fi
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FH_OFI_PROVIDER=${FH_OFI_PROVIDER:-tcp}
d=$(mktemp -d "${TMPDIR:-/tmp}/fhbsmoke.XXXXXX")
trap 'rm -rf "$d"' EXIT
fail=0

bad() { echo "FAIL bench_smoke: $*"; fail=1; }

# check CSV COLUMNS NUMERIC_COLUMNS...
check() {
    f=$1; cols=$2; shift 2
    [ -s "$f" ] || { bad "$f: missing or empty"; return; }
    for k in fhbench conduit provider strategy M bucket threads git; do
        grep -q "^# $k=." "$f" || bad "$f: header line '# $k=...' expected, not found"
    done
    got=$(grep -v '^#' "$f" | head -n 1)
    [ "$got" = "$cols" ] || { bad "$f: columns '$cols' expected, saw '$got'"; return; }
    out=$(awk -F, -v cols="$cols" -v num="$*" '
        BEGIN { nc = split(cols, c, ","); nn = split(num, n, " ")
                for (i = 1; i <= nc; i++) ix[c[i]] = i }
        /^#/ { next }
        !h { h = 1; next }
        { rows++
          if (NF != nc) { printf "row %d: %d fields, expected %d: %s\n", rows, NF, nc, $0; exit }
          for (k = 1; k <= nn; k++) { v = $(ix[n[k]])
              if (v != "" && v !~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/) {
                  printf "row %d: column %s is \"%s\", expected a number\n", rows, n[k], v; exit } } }
        END { if (!rows) print "no rows" }' "$f")
    [ -z "$out" ] || bad "$f: $out"
}

# run NAME CSV [ENV...] -- ARGS
run() {
    name=$1; csv=$2; shift 2
    envs=
    while [ "$1" != -- ]; do envs="$envs $1"; shift; done
    shift
    # shellcheck disable=SC2086
    if ! env $envs timeout -k 5 60 "$FHRUN" -n 2 "$FHBENCH" "$@" --quick --csv "$csv" \
            > "$d/$name.log" 2>&1; then
        bad "$name: fhbench $* exited non-zero"; tail -n 15 "$d/$name.log"
    fi
}

RMA="op,size,iters,median_us,p99_us,mb_s,msgs_s"
RMA_NUM="size iters median_us p99_us mb_s msgs_s"
t0=$(date +%s)
run latency "$d/latency.csv" -- latency --max-size 4k --iters 5
check "$d/latency.csv" "$RMA" $RMA_NUM
run peak "$d/peak.csv" -- peak --max-size 4k --iters 5
check "$d/peak.csv" "$RMA" $RMA_NUM
# --turns (bench/strategies.sh): one job of one, its semaphore made and used
run peak_turns "$d/peak_turns.csv" -- peak --max-size 4k --iters 5 --target-wait barrier \
    --turns "fhbsmoke$$:0:1"
check "$d/peak_turns.csv" "$RMA" $RMA_NUM
[ -e "/dev/shm/sem.fhbsmoke$$.0" ] || bad "peak --turns: semaphore /fhbsmoke$$.0 not made"
rm -f "/dev/shm/sem.fhbsmoke$$.0"
run raw "$d/raw.csv" -- raw --max-size 4k --iters 5
check "$d/raw.csv" "$RMA" $RMA_NUM
# raw over net as well: libfabric 1.17's net writes CQ entries for the
# counter rows' writes, which ask for none, and the paired rows took them
# for their puts' completions (8 B "round trips" of 4-7 us in which the
# target never read the request).  raw skips them and ends the run when a
# single operation's completion is another's (bench_raw.c reap_one).
if ! command -v fi_info >/dev/null 2>&1 || fi_info -p net >/dev/null 2>&1; then
    run raw_net "$d/raw-net.csv" FH_OFI_PROVIDER=net -- raw --max-size 4k --iters 5
    check "$d/raw-net.csv" "$RMA" $RMA_NUM
fi
run sweep "$d/sweep.csv" FH_REG_STRATEGY=firehose FH_FIREHOSE_M=512k FH_FIREHOSE_MAXVICTIM=256k \
    -- sweep --max-ws 1m --iters 5
check "$d/sweep.csv" "strategy,working_set,M,lat_iters,lat_median_us,lat_p99_us,lat_hit_rate,bw_iters,bw_mb_s,bw_hit_rate" \
    working_set M lat_iters lat_median_us lat_p99_us lat_hit_rate bw_iters bw_mb_s bw_hit_rate
run unbalanced "$d/unbalanced.csv" FH_REG_STRATEGY=firehose FH_FIREHOSE_M=512k \
    FH_FIREHOSE_MAXVICTIM=256k FH_FIREHOSE_VICTIM=adaptive -- unbalanced --iters 5
check "$d/unbalanced.csv" "budget,victim,ranks,working_set,F,M,iters,lat_median_us,lat_p99_us,hit_rate" \
    ranks working_set F M iters lat_median_us lat_p99_us hit_rate
run apps "$d/apps.csv" FH_REG_STRATEGY=firehose FH_FIREHOSE_M=256k FH_FIREHOSE_MAXVICTIM=256k -- apps
check "$d/apps.csv" "strategy,app,n,ranks,runtime_s,puts,gets,hits,misses,hit_rate,verified" \
    n ranks runtime_s puts gets hits misses hit_rate verified
if [ -f "$d/apps.csv" ] && [ "$(grep -v '^#' "$d/apps.csv" | awk -F, 'NR > 1 && $11 == 1' | wc -l)" -ne 2 ]; then
    bad "apps: cannon and bitonic rows with verified=1 expected"; cat "$d/apps.csv"
fi
run msgrate "$d/msgrate.csv" FH_MAX_THREADS=2 -- msgrate --threads 2 --iters 20
check "$d/msgrate.csv" "paths,threads,batching,msgs,seconds,msgs_s" threads msgs seconds msgs_s
run cache "$d/cache.csv" -- cache --threads 2 --iters 1000
check "$d/cache.csv" "impl,threads,ops_per_thread,ns_per_op,agg_mops,ns_median,agg_mops_median" \
    threads ops_per_thread ns_per_op agg_mops ns_median agg_mops_median
run map "$d/map.csv" -- map --iters 40000
check "$d/map.csv" "map,uthash_hash,pattern,keys,lookups,ours_ns,uthash_ns,ratio,ratio_min,ratio_max" \
    keys lookups ours_ns uthash_ns ratio ratio_min ratio_max
for mp in reg_map fhc_map; do
    for row in jen,hit jen,miss mul,hit mul,miss; do
        grep -q "^$mp,$row,4096," "$d/map.csv" 2>/dev/null ||
            bad "map: no row $mp,$row with 4096 keys in map.csv"
    done
done
run node "$d/node.csv" FH_SHM=auto -- node --max-size 256k --iters 5
check "$d/node.csv" "$RMA" $RMA_NUM
for row in copy_memcpy,65536 copy_put,262144 copy_get,262144 copy_ratio_put,65536 \
           copy_ratio_get,262144 am_short_rtt,8; do
    grep -q "^$row," "$d/node.csv" 2>/dev/null || bad "node: no row $row in node.csv"
done
grep -q '^# node_path=\(yes\|no\)$' "$d/node.csv" 2>/dev/null ||
    bad "node: a '# node_path=yes|no' line expected in node.csv"
run barrier "$d/barrier.csv" -- barrier --iters 20
check "$d/barrier.csv" "op,ranks,iters,median_us,p99_us" ranks iters median_us p99_us
grep -q '^barrier,2,20,' "$d/barrier.csv" 2>/dev/null || bad "barrier: no row barrier,2,20 in barrier.csv"
mv "$d/node.csv" "$d/node-fh.csv"     # node.csv is run-peers.sh's summary's name

# An unknown strategy is a skip (77), not a failure.
FH_REG_STRATEGY=no-such-strategy timeout -k 5 60 "$FHRUN" -n 2 "$FHBENCH" latency --quick \
    > "$d/skip.log" 2>&1
rc=$?
{ [ $rc -eq 77 ] && grep -q '^SKIP' "$d/skip.log"; } ||
    bad "FH_REG_STRATEGY=no-such-strategy: exit 77 with a SKIP line expected, saw exit $rc"

# The summary script reads these CSVs (names as run-all.sh writes them).
cp "$d/latency.csv" "$d/latency-tcp-firehose.csv"; cp "$d/raw.csv" "$d/raw-tcp.csv"
sh "$top_srcdir/bench/ratios.sh" "$d" > "$d/summary.md" 2> "$d/ratios.err" ||
    bad "ratios.sh failed: $(cat "$d/ratios.err")"
grep -q '8 B blocking put' "$d/summary.md" || bad "ratios.sh: no latency ratio line in: $(cat "$d/summary.md")"
grep -q '^| reg_map hit lookup / uthash HASH_FIND (jen hash) <= 1 | [0-9.]* (' "$d/summary.md" ||
    bad "ratios.sh: no reg_map / uthash line in: $(cat "$d/summary.md")"
[ -s "$d/ratios.err" ] && bad "ratios.sh wrote errors: $(cat "$d/ratios.err")"
for s in firehose rendezvous; do
    cp "$d/sweep.csv" "$d/sweep-ibv-$s.csv"; cp "$d/latency.csv" "$d/latency-ibv-$s.csv"
done
cp "$d/raw.csv" "$d/raw-ibv.csv"
# run-peers.sh's node path summary (metric,size,ranks,node,peer,who,ratio,
# rounds), a stand-in with one row of each kind
cat > "$d/node.csv" <<'EOF2'
metric,size,ranks,node,peer,who,ratio,rounds
put_mb_s,65536,2,9000.0,10000.0,memcpy,0.950,2
put_mb_s,65536,2,9000.0,8000.0,ucx,1.125,2
get_mb_s,65536,2,8000.0,10000.0,memcpy,0.800,2
get_mb_s,65536,2,8000.0,8000.0,ucx,1.000,2
am_rtt_us,8,2,1.000,0.500,ucx,2.000,2
barrier_us,0,2,1.000,2.000,mpi,0.500,2
barrier_us,0,4,3.000,2.000,mpi,1.500,2
EOF2
sh "$top_srcdir/bench/ratios.sh" "$d" > "$d/summary.md" 2> "$d/ratios.err" ||
    bad "ratios.sh (with ibv files) failed: $(cat "$d/ratios.err")"
grep -q 'raw verbs (ibv' "$d/summary.md" && grep -q 'rxe VM (ibv): 8 B blocking put' "$d/summary.md" ||
    bad "ratios.sh: no ibv lines in: $(cat "$d/summary.md")"
[ -s "$d/ratios.err" ] && bad "ratios.sh (with ibv files) wrote errors: $(cat "$d/ratios.err")"
for want in '^| node path put 64 KiB-4 MiB / single-thread memcpy >= 0.90, same process (worst size) | 0.95 (size:ratio 65536:0.95) | met |$' \
            '^| node path get 64 KiB-4 MiB / single-thread memcpy >= 0.90, same process (worst size) | 0.80 (size:ratio 65536:0.80) | MISSED |$' \
            '^| node path AM short round trip / UCX ucp_am_lat x 2 (shm) <= 1.0 | 2.00 (1.000 / 0.500 us) | MISSED |$' \
            '^| node path barrier, 2 ranks / Open MPI MPI_Barrier <= 1.0 | 0.50 (1.000 / 2.000 us) | met |$' \
            '^| node path barrier, 4 ranks / Open MPI MPI_Barrier <= 1.0 | 1.50 '; do
    grep -q "$want" "$d/summary.md" || bad "ratios.sh: no line '$want' from node.csv in: $(grep 'node path' "$d/summary.md")"
done
sh "$top_srcdir/bench/report.sh" "$d" > "$d/report.md" 2> "$d/report.err" ||
    bad "report.sh failed: $(cat "$d/report.err")"
grep -q '^### rxe VM' "$d/report.md" || bad "report.sh: no rxe VM section"
grep -q '^| barrier_us | 0 | 4 | 3.000 | 2.000 | mpi | 1.500 |$' "$d/report.md" ||
    bad "report.sh: no node path row for the 4-rank barrier"
[ -s "$d/report.err" ] && bad "report.sh wrote errors: $(cat "$d/report.err")"

# bench/rounds.sh's merge: two identical rounds give the report back (the
# per-round "Run:" lines twice); a round whose latency differs gives that
# cell "median [lowest-highest]".
awk -v R=2 -f "$top_srcdir/bench/merge-reports.awk" "$d/report.md" "$d/report.md" > "$d/merged.md" 2> "$d/merge.err" ||
    bad "merge-reports.awk failed: $(cat "$d/merge.err")"
grep -v '^Run: \|^run-all' "$d/report.md" > "$d/report.norun"
grep -v '^round [12]: ' "$d/merged.md" > "$d/merged.norun"
cmp -s "$d/report.norun" "$d/merged.norun" || bad "merge-reports.awk of two identical rounds changed the tables"
awk '/^\| tcp \| 8 \|/ && !done { sub(/\| tcp \| 8 \| [0-9.]+/, "| tcp | 8 | 99999.5"); done = 1 } 1' \
    "$d/report.md" > "$d/report2.md"
awk -v R=2 -f "$top_srcdir/bench/merge-reports.awk" "$d/report.md" "$d/report2.md" > "$d/merged.md" 2> "$d/merge.err"
grep -q '^| tcp | 8 | [0-9.]* \[[0-9.]*-99999.5[0-9]*\]' "$d/merged.md" ||
    bad "merge-reports.awk: no 'median [lowest-highest]' cell for a latency that differs: $(grep '^| tcp | 8 |' "$d/merged.md" | head -n 2)"

echo "bench_smoke: $(( $(date +%s) - t0 ))s"
if [ $fail -eq 0 ]; then echo "PASS bench_smoke"; exit 0; fi
exit 1
