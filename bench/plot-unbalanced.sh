#!/bin/sh
# plot-unbalanced.sh -- the SVG of `fhbench unbalanced` (bench/README.md):
# 8 B put median latency and rank 0's hit rate against the working set W
# (in units of F, log x), one line per budget policy, M marked.
#
#   bench/plot-unbalanced.sh OUT.svg CSV...
#
# Every CSV is one run (`fhbench unbalanced --csv FILE`, columns
# budget,victim,ranks,working_set,F,M,iters,lat_median_us,lat_p99_us,
# hit_rate); the point drawn per (budget, W) is the median over the runs
# (the rounds of an alternating comparison).  Also prints the table of the
# medians (W/F, W KiB, per budget: hit rate and latency) on stdout, the
# format of docs/performance.md.  Needs gnuplot (as bench/plot.sh does);
# exits 1 with a message if it is missing or no CSV has rows.
set -u
out=${1:?usage: plot-unbalanced.sh OUT.svg CSV...}
shift
[ $# -gt 0 ] || { echo "plot-unbalanced.sh: no CSV given" >&2; exit 1; }
command -v gnuplot >/dev/null 2>&1 ||
    { echo "plot-unbalanced.sh: gnuplot not installed" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fhunbal.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# medians: one line per (budget, W): budget W F M hit lat rounds
awk -F, '
    /^#/ || $1 == "budget" || NF < 10 { next }
    {
        k = $1 SUBSEP $4
        if (!(k in n)) { keys[++nk] = k; F[k] = $5; M[k] = $6 }
        n[k]++; lat[k, n[k]] = $8; hit[k, n[k]] = $10
    }
    function med(arr, k, m,    i, j, t, v) {
        for (i = 1; i <= m; i++) v[i] = arr[k, i] + 0
        for (i = 2; i <= m; i++)
            for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
    }
    END {
        for (i = 1; i <= nk; i++) {
            k = keys[i]; split(k, p, SUBSEP)
            printf "%s %s %s %s %.3f %.2f %d\n", p[1], p[2], F[k], M[k],
                   med(hit, k, n[k]), med(lat, k, n[k]), n[k]
        }
    }' "$@" | sort -k1,1 -k2,2n > "$tmp/med"
[ -s "$tmp/med" ] || { echo "plot-unbalanced.sh: no rows in $*" >&2; exit 1; }

for b in static adaptive; do
    awk -v b="$b" '$1 == b { print $2 / $3, $5, $6 }' "$tmp/med" > "$tmp/$b.dat"
done
m_over_f=$(awk 'NR == 1 { print $4 / $3 }' "$tmp/med")
rounds=$(awk '{ if (!m || $7 < m) m = $7 } END { print m }' "$tmp/med")

# The table (both policies side by side, by W).
echo "| W / F | W (KiB) | static hit | adaptive hit | static 8 B put us | adaptive 8 B put us |"
echo "|---|---|---|---|---|---|"
awk '{ k = $2; w[k] = 1; F[k] = $3; M[k] = $4; h[$1, k] = $5; l[$1, k] = $6 }
     END { for (k in w) print k, F[k], M[k], h["static", k], h["adaptive", k],
                                 l["static", k], l["adaptive", k] }' "$tmp/med" |
    sort -n | awk '{ printf "| %.2f | %d%s | %s | %s | %s | %s |\n", $1 / $2, $1 / 1024,
                            ($1 > $3 ? " (> M)" : ""), $4, $5, $6, $7 }'

gnuplot <<EOF || exit 1
set terminal svg size 900,420 noenhanced font "sans,11" background "white"
set output "$out"
set multiplot layout 1,2 title "fhbench unbalanced: rank 0 puts only to rank 1 (medians of $rounds rounds)"
set logscale x 2
set grid
set key top left
set xlabel "working set W / F"
set arrow 1 from $m_over_f, graph 0 to $m_over_f, graph 1 nohead dashtype 2 lc rgb "gray40"
set label 1 "M" at $m_over_f, graph 0.95 offset 0.5,0
set ylabel "8 B put median (us)"
set yrange [0:*]
plot "$tmp/static.dat" using 1:3 with linespoints title "static", \
     "$tmp/adaptive.dat" using 1:3 with linespoints title "adaptive"
set ylabel "hit rate (rank 0 -> 1)"
set yrange [0:1.05]
set key bottom left
plot "$tmp/static.dat" using 1:2 with linespoints title "static", \
     "$tmp/adaptive.dat" using 1:2 with linespoints title "adaptive"
unset multiplot
EOF
echo "plot-unbalanced.sh: wrote $out" >&2
