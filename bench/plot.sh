#!/bin/sh
# plot.sh -- gnuplot PNGs from the CSVs of run-all.sh.
#
#   bench/plot.sh RESULTS_DIR
#
#   latency.png          blocking put/get median vs size: firehose vs raw
#                        libfabric, per provider (log-log)
#   sweep-latency.png    8 B put median vs working set, one line per
#                        strategy, M marked (log x)
#   sweep-bandwidth.png  64 KiB put MB/s vs working set, same
#   peak.png             put bandwidth vs size, same location, per provider
#   msgrate.png          2-byte put msgs/s vs threads per rank
#   cache.png            hit path ns/op vs threads, per implementation
# A plot whose CSVs are all missing is not drawn.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/csv.sh"
d=${1:?usage: plot.sh RESULTS_DIR}
cd "$d" || exit 1
command -v gnuplot >/dev/null 2>&1 || { echo "plot.sh: gnuplot not installed" >&2; exit 1; }

common='set terminal pngcairo size 900,560 noenhanced font ",10"
set datafile separator ","
set datafile missing ""
set key outside right top
set grid
set format x "%.0b%B"'

# plots < SPECS -> a gnuplot "plot" list for the files that exist.
# One SPEC a line: FILE|USING|TITLE|STYLE
plots() {
    list=
    while IFS='|' read -r f u t st; do
        [ -n "$f" ] && [ -f "$f" ] || continue
        list="$list${list:+, }'$f' using $u title '$t' $st"
    done
    echo "$list"
}
nl='
'

draw() {   # draw OUT SETTINGS PLOTLIST
    [ -n "$3" ] || { echo "plot.sh: $1: no data"; return 0; }
    printf '%s\nset output "%s"\n%s\nplot %s\n' "$common" "$1" "$2" "$3" | gnuplot &&
        echo "plot.sh: wrote $1"
}

# rows FILE COLNUM VALUE -> a file of FILE's rows whose column COLNUM is
# VALUE (gnuplot breaks lines at filtered-out rows; this keeps them whole).
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fhplot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rows() {
    o=$tmp/$(echo "$1-$2-$3" | tr '/,' '__').dat
    [ -f "$1" ] && awk -F, -v c="$2" -v v="$3" '/^#/ { next } $c == v' "$1" > "$o"
    echo "$o"
}

# latency
specs=
for p in tcp shm; do
    for op in put get; do
        specs="$specs${nl}$(rows latency-$p-firehose.csv 1 $op)|2:4|$op firehose $p|with linespoints"
        specs="$specs${nl}$(rows raw-$p.csv 1 $op)|2:4|$op raw libfabric $p|with linespoints dt 2"
    done
done
draw latency.png 'set logscale xy 2
set xlabel "size (bytes)"; set ylabel "median latency (us)"
set title "Blocking put/get latency, 2 ranks (firehose strategy vs raw libfabric)"' "$(echo "$specs" | plots)"

# sweep
for what in latency bandwidth; do
    col=5; ylab="8-byte put median latency (us)"
    [ $what = bandwidth ] && { col=9; ylab="64 KiB put bandwidth (MB/s)"; }
    M=
    specs=
    for f in sweep-tcp-*.csv; do
        [ -f "$f" ] || continue
        s=$(csv_meta "$f" strategy)
        M=${M:-$(csv_meta "$f" M)}
        specs="$specs${nl}$f|2:$col|$s|with linespoints"
    done
    mark=
    [ -n "$M" ] && mark="set arrow from $M, graph 0 to $M, graph 1 nohead dt 3 lw 2
set label \"M\" at $M, graph 0.95 offset 0.5,0"
        ylog=; [ $what = latency ] && ylog="set logscale y 10"
    draw "sweep-$what.png" "set logscale x 2
$ylog
set xlabel \"working set (bytes, random targets)\"; set ylabel \"$ylab\"
set title \"Working-set sweep over tcp, one line per FH_REG_STRATEGY (M = $M bytes)\"
$mark" "$(echo "$specs" | plots)"
done

# peak
specs=
for p in tcp shm; do
    specs="$specs${nl}peak-$p.csv|2:6|firehose $p (same location)|with linespoints"
    specs="$specs${nl}$(rows raw-$p.csv 1 put_nb_flood)|2:6|raw libfabric $p (window 64)|with linespoints dt 2"
done
draw peak.png 'set logscale x 2
set xlabel "size (bytes)"; set ylabel "put bandwidth (MB/s)"
set title "Put bandwidth vs size"' "$(echo "$specs" | plots)"

# msgrate
specs=
for f in msgrate-*.csv; do
    [ -f "$f" ] || continue
    n=$(basename "$f" .csv | sed 's/msgrate-//')
    specs="$specs${nl}$(rows "$f" 3 blocking)|2:6|$n blocking|with linespoints"
    specs="$specs${nl}$(rows "$f" 3 nbi)|2:6|$n nbi|with linespoints dt 2"
done
draw msgrate.png 'set format x "%g"
set logscale y
set xlabel "threads per rank"; set ylabel "2-byte puts per second (rank 0)"
set xtics 1
set title "Message rate: independent vs shared paths, batching off (blocking) and on (nbi)"' \
    "$(echo "$specs" | plots)"

# cache
specs=
for impl in fhc-locked ucx-rcache; do
    specs="$specs${nl}$(rows cache.csv 1 $impl)|2:4|$impl|with linespoints"
done
draw cache.png 'set format x "%g"
set xlabel "threads"; set ylabel "ns per hit (lookup + reference + release)"
set xtics 1
set title "Registration-cache hit path"' "$(echo "$specs" | plots)"
