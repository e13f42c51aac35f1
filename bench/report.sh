#!/bin/sh
# report.sh -- Markdown tables of one run-all.sh run, for docs/performance.md.
#
#   bench/report.sh RESULTS_DIR > tables.md
#
# Prints the run's machine and revision, the targets table (ratios.sh), and
# one table per test, every number read from the CSVs of RESULTS_DIR.  The
# rxe VM's series (bench/run-rxe.sh: *-ibv*.csv) get rows or tables of their
# own when present.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/csv.sh"
d=${1:?usage: report.sh RESULTS_DIR}

any=$(ls "$d"/*.csv 2>/dev/null | head -n 1)
echo "Run: git \`$(csv_meta "$any" git)\`, $(csv_meta "$any" date), $(csv_meta "$any" cores) cores," \
     "quick=$(csv_meta "$any" quick).  $(sed -n 's/^machine: //p' "$d/run.log" 2>/dev/null | head -n 1)"
[ -f "$d/timings.txt" ] && echo "run-all.sh took $(awk '$1 == "total" { print $2 }' "$d/timings.txt") s;" \
    "load average at the end: $(sed -n 's/^load at the end: //p' "$d/run.log" 2>/dev/null)."
echo

echo "### Targets"
echo
sh "$here/ratios.sh" "$d"
echo

echo "### Latency (median us, blocking, rank 0 -> rank 1)"
echo
echo "| provider | size | put firehose | put pin-everything | put raw | get firehose | get raw |"
echo "|---|---|---|---|---|---|---|"
for p in net tcp shm ibv; do
    [ -f "$d/raw-$p.csv" ] || continue
    for n in 8 64 1024 65536 1048576; do
        echo "| $p | $n | $(csv_get "$d/latency-$p-firehose.csv" median_us op put size $n) |" \
             "$(csv_get "$d/latency-$p-pin-everything.csv" median_us op put size $n) |" \
             "$(csv_get "$d/raw-$p.csv" median_us op put size $n) |" \
             "$(csv_get "$d/latency-$p-firehose.csv" median_us op get size $n) |" \
             "$(csv_get "$d/raw-$p.csv" median_us op get size $n) |"
    done
done
echo
echo "Paired (raw and firehose alternating in one process, medians):"
echo
echo "| provider | what | raw median | firehose median | raw best round | firehose best round | median of per-round ratios |"
echo "|---|---|---|---|---|---|---|"
for p in net tcp shm ibv; do
    r=$d/raw-$p.csv
    [ -f "$r" ] || continue
    echo "| $p | 8 B put, us | $(csv_get "$r" median_us op pair_raw_put size 8) | $(csv_get "$r" median_us op pair_fh_put size 8) |" \
         "$(csv_get "$r" median_us op pair_raw_put_best size 8) | $(csv_get "$r" median_us op pair_fh_put_best size 8) |" \
         "$(csv_get "$r" median_us op pair_ratio_put size 8) |"
    for n in 65536 262144 1048576 4194304; do
        a=$(csv_get "$r" mb_s op pair_raw_put_nb_flood size $n)
        [ -n "$a" ] && echo "| $p | $n B put flood, MB/s | $a | $(csv_get "$r" mb_s op pair_fh_put_nb_flood size $n) |" \
            "$(csv_get "$r" mb_s op pair_raw_put_nb_flood_best size $n) | $(csv_get "$r" mb_s op pair_fh_put_nb_flood_best size $n) |" \
            "$(csv_get "$r" mb_s op pair_ratio_put_nb_flood size $n) |"
    done
done
echo

echo "### Peak put bandwidth, same location (MB/s)"
echo
echo "| size | net | tcp | shm |"
echo "|---|---|---|---|"
for n in 8 1024 65536 1048576 4194304; do
    echo "| $n | $(csv_get "$d/peak-net.csv" mb_s size $n) | $(csv_get "$d/peak-tcp.csv" mb_s size $n) | $(csv_get "$d/peak-shm.csv" mb_s size $n) |"
done
echo

# sweep_table FILE...: one markdown table of sweep CSV rows (bench_sweep.c).
sweep_table() {
    printf '| strategy | working set | 8 B put median us | p99 us | hit rate | 64 KiB put MB/s | hit rate |\n'
    echo "|---|---|---|---|---|---|---|"
    for f in "$@"; do
        [ -f "$f" ] || continue
        awk -F, '/^#/ { next } !h { h = 1; next }
            { printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $5, $6, ($7 == "" ? "-" : $7), $9, ($10 == "" ? "-" : $10) }' "$f"
    done
}

echo "### Sweep (tcp, random targets; M = $(csv_meta "$d/sweep-tcp-firehose.csv" M) bytes)"
echo
sweep_table "$d"/sweep-tcp-*.csv
echo

if ls "$d"/sweep-ibv-*.csv > /dev/null 2>&1; then
    echo "### rxe VM (ibv conduit on Soft-RoCE, software emulation; bench/run-rxe.sh)"
    echo
    echo "Sweep, random targets, M = $(csv_meta "$d/sweep-ibv-firehose.csv" M) bytes:"
    echo
    sweep_table "$d"/sweep-ibv-*.csv
    echo
    echo "Blocking put latency by strategy (median us; raw = verbs):"
    echo
    echo "| size | firehose | rendezvous | rendezvous-cache | pin-everything | raw |"
    echo "|---|---|---|---|---|---|"
    for n in 8 64 1024; do
        row="| $n |"
        for s in firehose rendezvous rendezvous-cache pin-everything; do
            row="$row $(csv_get "$d/latency-ibv-$s.csv" median_us op put size $n) |"
        done
        echo "$row $(csv_get "$d/raw-ibv.csv" median_us op put size $n) |"
    done
    echo
fi

echo "### Applications (the paper's Table 1; tcp, counts summed over ranks)"
echo
echo "| strategy | kernel | n | runtime s | puts | gets | hits | misses | hit rate | verified |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for f in "$d"/apps-tcp-*.csv; do
    [ -f "$f" ] || continue
    awk -F, '/^#/ { next } !h { h = 1; next }
        { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $5, $6, $7, $8, $9, ($10 == "" ? "-" : $10), ($11 == 1 ? "yes" : "NO") }' "$f"
done
echo

echo "### Message rate (2-byte puts per second, rank 0's threads -> passive rank 1)"
echo
echo "| provider-strategy-paths | batching | 1 thread | 2 | 3 | 4 |"
echo "|---|---|---|---|---|---|"
for f in "$d"/msgrate-*.csv; do
    [ -f "$f" ] || continue
    n=$(basename "$f" .csv | sed 's/^msgrate-//')
    for b in blocking nbi; do
        echo "| $n | $b | $(csv_get "$f" msgs_s threads 1 batching $b) | $(csv_get "$f" msgs_s threads 2 batching $b) |" \
             "$(csv_get "$f" msgs_s threads 3 batching $b) | $(csv_get "$f" msgs_s threads 4 batching $b) |"
    done
done
echo

echo "### Registration-cache hit path (ns/op per thread; aggregate Mops/s; best and median repetition)"
echo
echo "| impl | threads | ns/op best | ns/op median | aggregate Mops/s best | median |"
echo "|---|---|---|---|---|---|"
[ -f "$d/cache.csv" ] && awk -F, '/^#/ { next } !h { h = 1; next }
    { printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $4, $6, $5, $7 }' "$d/cache.csv"
echo

echo "### Peers, back to back (bench/peers/run-peers.sh)"
echo
echo "| transport | who | 8 B put us | 64 KiB put MB/s | note |"
echo "|---|---|---|---|---|"
[ -f "$d/peers.csv" ] && awk -F, 'NR > 1 { printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, ($4 == "" ? "-" : $4), $5 }' "$d/peers.csv"
echo
if [ -f "$d/node.csv" ]; then
    echo "### Node path (FH_SHM=auto) against memcpy, UCX and Open MPI (bench/peers/run-peers.sh)"
    echo
    echo "Medians over run-peers.sh's rounds; ratio = node / peer, the median of the per-round ratios"
    echo "(MB/s: > 1 is the node path faster; us: < 1 is the node path faster).  put/get: blocking,"
    echo "two ranks, against a single-thread memcpy in the same process and UCX ucp_put_bw / ucp_get"
    echo "(UCX_TLS=shm,self); AM: short round trip against 2 x ucp_am_lat; barrier: rank 0's"
    echo "median against MPI_Barrier (Open MPI, one node); put8_<src>_us: an 8 B blocking put from"
    echo "our segment (seg), an initialized static array (data: a file mapping), malloc (heap), or"
    echo "from the stack to our own rank (self), against the same put from the stack (fhbench node's"
    echo "in-process per-round ratio)."
    echo
    echo "| metric | size | ranks | node | peer | who | ratio |"
    echo "|---|---|---|---|---|---|---|"
    awk -F, 'NR > 1 { printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, ($4 == "" ? "-" : $4),
                            ($5 == "" ? "-" : $5), $6, ($7 == "" ? "n/a" : $7) }' "$d/node.csv"
    echo
fi
if [ -s "$d/skipped.txt" ]; then
    echo "### Skipped series"
    echo
    sed 's/^/- /' "$d/skipped.txt"
fi
