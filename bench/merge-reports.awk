# merge-reports.awk -- one Markdown report out of R reports of the same shape.
#
#   awk -v R=3 -f bench/merge-reports.awk round-1.md round-2.md round-3.md
#
# The R inputs are bench/report.sh's output for R rounds of run-all.sh; they
# have the same lines in the same order (same series, same sizes).  Line by
# line:
#   - a table row ("| ... |"): each cell that is a number in every round
#     becomes "median [min-max]" over the rounds (just the number when all
#     rounds agree); a cell that starts with a number then words (ratios.sh's
#     "0.91 (medians ...)") gets the numbers' "median [min-max]", then the
#     words of the round that had the median; a verdict cell (met / MISSED) becomes "met R/R", "met
#     k/R" or "MISSED R/R"; any other cell is round 1's text, or "a / b / c"
#     when the rounds' texts differ.
#   - the per-round "Run:" and "run-all.sh took" lines are printed once per
#     round, prefixed "round k:".
#   - any other line is round 1's.
# When the rounds do not have the same number of lines (a series ran in one
# round and not another), it says so on stderr and exits 1: the spread of
# rows that are not the same rows means nothing.

function isnum(s) { return s ~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ }

function trim(s) { gsub(/^ +| +$/, "", s); return s }

function decimals(s,   i) { i = index(s, "."); return i == 0 ? 0 : length(s) - i }

function median(v, n,   i, j, t) {
    for (i = 2; i <= n; i++)            # insertion sort: n is a handful
        for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}

# merge_cell(c): cell c of the current row over the R rounds; numbers keep
# the most decimals any round printed.
function merge_cell(c,   k, allnum, dec, v, m, lo, hi, nmet, same, out, lead, num, mk) {
    allnum = 1; dec = 0; same = 1; nmet = 0
    for (k = 1; k <= R; k++) {
        cell[k, c] = trim(cell[k, c])
        if (!isnum(cell[k, c])) allnum = 0
        else if (decimals(cell[k, c]) > dec) dec = decimals(cell[k, c])
        if (cell[k, c] != cell[1, c]) same = 0
        if (cell[k, c] == "met") nmet++
    }
    if (same) return cell[1, c]
    if (allnum) {
        for (k = 1; k <= R; k++) v[k] = cell[k, c] + 0
        m = median(v, R); lo = v[1]; hi = v[R]
        return sprintf("%." dec "f [%." dec "f-%." dec "f]", m, lo, hi)
    }
    # "1.23 (medians ...)": the leading numbers' spread, then the median
    # round's own words (R odd; else the first round's)
    lead = 1
    for (k = 1; k <= R; k++)
        if (!match(cell[k, c], /^-?[0-9]+(\.[0-9]+)? /)) { lead = 0; break }
        else { num[k] = substr(cell[k, c], 1, RLENGTH - 1); if (decimals(num[k]) > dec) dec = decimals(num[k]) }
    if (lead) {
        for (k = 1; k <= R; k++) v[k] = num[k] + 0
        m = median(v, R); lo = v[1]; hi = v[R]
        mk = 1
        for (k = 1; k <= R; k++) if (num[k] + 0 == m) { mk = k; break }
        return sprintf("%." dec "f [%." dec "f-%." dec "f]; round %d: %s", m, lo, hi, mk, cell[mk, c])
    }
    if (cell[1, c] ~ /^(met|MISSED|n\/a)$/) {
        for (k = 1; k <= R; k++)
            if (cell[k, c] !~ /^(met|MISSED|n\/a)$/) break
        if (k > R) return "met " nmet "/" R
    }
    out = cell[1, c]
    for (k = 2; k <= R; k++) out = out " / " cell[k, c]
    return out
}

FNR == 1 { f++ }
{ line[f, FNR] = $0; n[f] = FNR }

END {
    if (f != R) { print "merge-reports: expected " R " inputs, got " f > "/dev/stderr"; exit 2 }
    for (k = 2; k <= R; k++)
        if (n[k] != n[1]) {
            printf "merge-reports: round %d has %d lines, round 1 has %d: the rounds ran different series\n", k, n[k], n[1] > "/dev/stderr"
            exit 1
        }
    for (i = 1; i <= n[1]; i++) {
        l = line[1, i]
        if (l ~ /^Run: / || l ~ /^run-all\.sh took /) {
            for (k = 1; k <= R; k++) print "round " k ": " line[k, i] (k < R ? "  " : "")
            continue
        }
        if (l !~ /^\|.*\|$/ || l ~ /^\|---/) { print l; continue }
        nc = 0
        for (k = 1; k <= R; k++) {
            s = line[k, i]; sub(/^\|/, "", s); sub(/\|$/, "", s)
            m = split(s, parts, "|")
            if (k == 1) nc = m
            else if (m != nc) {
                printf "merge-reports: line %d has %d cells in round 1, %d in round %d\n", i, nc, m, k > "/dev/stderr"
                exit 1
            }
            for (c = 1; c <= m; c++) cell[k, c] = parts[c]
        }
        out = "|"
        for (c = 1; c <= nc; c++) out = out " " merge_cell(c) " |"
        print out
    }
}
