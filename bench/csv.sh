# csv.sh -- sourced by the bench scripts (POSIX sh): read fhbench CSVs.
#
# An fhbench CSV is "# key=value" header lines, one line of column names,
# then rows (bench/fhbench.h).  These helpers never guess: a missing file,
# column or row prints nothing.

# csv_meta FILE KEY -> the header value of KEY ("# KEY=value")
csv_meta() {
    [ -f "$1" ] || return 0
    sed -n "s/^# $2=//p" "$1" | head -n 1
}

# csv_get FILE COL [KEYCOL KEYVAL]... -> COL of the first row whose KEYCOLs
# equal their KEYVALs.
csv_get() {
    f=$1; col=$2; shift 2
    [ -f "$f" ] || return 0
    awk -F, -v col="$col" -v keys="$*" '
        BEGIN { nk = split(keys, kv, " ") }
        /^#/ { next }
        !hdr { for (i = 1; i <= NF; i++) idx[$i] = i; hdr = 1; next }
        {
            ok = 1
            for (k = 1; k + 1 <= nk; k += 2)
                if (!(kv[k] in idx) || $(idx[kv[k]]) != kv[k + 1]) ok = 0
            if (ok && (col in idx)) { print $(idx[col]); exit }
        }' "$f"
}

# ratio A B -> A/B with 2 decimals, or "n/a" when either is missing or B is 0
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2f\n", a / b }'
}
