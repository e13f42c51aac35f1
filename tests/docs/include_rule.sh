#!/bin/sh
# include_rule.sh -- every #include "x" in the tree points down the layers
# (docs/design.md "Layers").  The layer table below is the only one: the
# other checks (layer_calls.sh) ask this script with --layer.
#
# For every .c/.h of the source tree (git's files when the tree is a git
# checkout, else every file outside build directories), each #include "x"
# is resolved as the compiler does: the including file's folder, then the
# top of the tree (so "firehose/util/log.h" resolves from the top), then
# every -I$(top_srcdir)/DIR of Makefile.am in order ("log.h" through
# -I firehose).  An include breaks the rule when
#   upward     the header's layer is above the file's
#   sideways   file and header sit in two different L2 folders
#   cache      a file of firehose/cache/ includes anything outside it
#   client     a file of caf/ or shmem/ includes anything but
#              include/firehose.h and its own folder
#   conduit    a file of conduits/<name>/ includes anything but its own
#              folder, conduits/conduit.h, conduits/util/,
#              firehose/boot/bootstrap.h, firehose/util/ (the log) and
#              include/firehose.h: never another conduit's folder
# and the line "file -> header" is not in tests/docs/include_rule.allow.
# An allowlisted line that no longer occurs is an error too: the list only
# shrinks.  An include that resolves nowhere is an error.
#
# Usage (from anywhere; make check sets top_srcdir):
#   include_rule.sh                check; exit 1 on any error above
#   include_rule.sh --report       layers, every include across folders and
#                                  every violation, allowlisted or not; exit 0
#   include_rule.sh --write-allow  rewrite the allowlist from today's tree
#   include_rule.sh --layer PATH.. print "LAYER PATH" for each path
set -u

# ---------------------------------------------------------------- the table
# layer PATH: 0..6, bottom to top (docs/design.md "Layers").
layer() {
    case $1 in
    include/*) echo 0 ;;
    firehose/util/*) echo 1 ;;
    firehose/cache/* | firehose/memmon/* | firehose/boot/* | firehose/node/*) echo 2 ;;
    conduits/*) echo 3 ;;
    firehose/reg/*) echo 4 ;;
    firehose/*) echo 5 ;;
    *) echo 6 ;;
    esac
}
# The L2 folders do not include each other; this names a path's L2 folder.
l2_folder() {
    case $1 in
    firehose/cache/*) echo cache ;; firehose/memmon/*) echo memmon ;;
    firehose/node/*) echo node ;;
    firehose/boot/*) echo boot ;; *) echo - ;;
    esac
}
# ---------------------------------------------------------------------------

mode=check
case ${1:-} in
--report) mode=report ;;
--write-allow) mode="write" ;;
--layer)
    shift
    for p in "$@"; do echo "$(layer "$p") $p"; done
    exit 0 ;;
'') ;;
*)
    echo "usage: $0 [--report | --write-allow | --layer PATH...]" >&2
    exit 2 ;;
esac

top=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top=$(cd "$top" && pwd -P) || exit 1
allow="$top/tests/docs/include_rule.allow"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/include_rule.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# The files: git's (tracked, or new and not ignored) in a git checkout whose
# top is this tree; else (a tarball, distcheck) every file outside the
# build directories.
if [ "$(git -C "$top" rev-parse --show-toplevel 2>/dev/null)" = "$top" ]; then
    git -C "$top" ls-files --cached --others --exclude-standard -- '*.c' '*.h'
else
    (cd "$top" && find . \( -name '_build*' -o -name .git -o -name autom4te.cache \) -prune \
        -o -type f \( -name '*.c' -o -name '*.h' \) -print | sed 's|^\./||')
fi | LC_ALL=C sort -u | while read -r f; do [ -f "$top/$f" ] && echo "$f"; done > "$tmp/files"

# The -I folders of Makefile.am, in order ("" is the top itself).
grep -o -e '-I\$(\(top_\)\{0,1\}srcdir)[/A-Za-z0-9_.-]*' "$top/Makefile.am" \
    | sed -e 's/^-I\$([a-z_]*)//' -e 's|^/||' | awk '!seen[$0]++' > "$tmp/idirs"

# "file<TAB>name" for every #include "name".
(cd "$top" && xargs awk '
    match($0, /^[ \t]*#[ \t]*include[ \t]*"[^"]+"/) {
        s = substr($0, RSTART, RLENGTH); sub(/^[^"]*"/, "", s); sub(/"$/, "", s)
        printf "%s\t%s\n", FILENAME, s
    }' < "$tmp/files") > "$tmp/raw"

# norm PATH: drop "./" and "dir/../" so "tests/x/../integ/a.h" reads
# "tests/integ/a.h".
norm() {
    echo "$1" | awk -F/ '{
        n = 0
        for (i = 1; i <= NF; i++) {
            if ($i == "." || $i == "") continue
            if ($i == ".." && n > 0) { n--; continue }
            p[++n] = $i
        }
        s = p[1]; for (i = 2; i <= n; i++) s = s "/" p[i]; print s
    }'
}

# resolve FILE NAME: the header's path from the top, or nothing.
resolve() {
    d=${1%/*}
    [ "$d" = "$1" ] && d=.
    if [ -f "$top/$d/$2" ]; then norm "$d/$2"; return; fi
    if [ -f "$top/$2" ]; then norm "$2"; return; fi
    while read -r i; do
        if [ -f "$top/${i:-.}/$2" ]; then norm "${i:-.}/$2"; return; fi
    done < "$tmp/idirs"
}

# rule FILE HEADER: the rule the include breaks, or nothing.
rule() {
    fd=${1%/*} hd=${2%/*}
    [ "$fd" = "$hd" ] && return
    case $1 in
    caf/* | shmem/*)
        case $2 in include/firehose.h | "${1%%/*}"/*) ;; *) echo client ;; esac
        return ;;
    esac
    lf=$(layer "$1") lh=$(layer "$2")
    if [ "$lh" -gt "$lf" ]; then echo "upward L$lf->L$lh"; return; fi
    case $1 in
    firehose/cache/*) case $2 in firehose/cache/*) ;; *) echo cache ;; esac; return ;;
    esac
    if [ "$lf" -eq 2 ] && [ "$lh" -eq 2 ] && [ "$(l2_folder "$1")" != "$(l2_folder "$2")" ]; then
        echo sideways
        return
    fi
    case $1 in conduits/*/*)
        # what conduits/conduit.h promises a conduit may use, and no more
        case $2 in
        conduits/conduit.h | conduits/util/* | firehose/boot/bootstrap.h) ;;
        firehose/util/* | include/firehose.h) ;;
        *) echo conduit ;;
        esac ;;
    esac
}

# "file -> header<TAB>rule" for every violation; unresolved names apart.
: > "$tmp/violations"
: > "$tmp/unresolved"
: > "$tmp/edges"
tab=$(printf '\t')
while IFS=$tab read -r f name; do
    h=$(resolve "$f" "$name")
    if [ -z "$h" ]; then
        echo "$f: #include \"$name\" resolves nowhere (own folder, top, -I list of Makefile.am)" \
            >> "$tmp/unresolved"
        continue
    fi
    echo "$f -> $h" >> "$tmp/edges"
    r=$(rule "$f" "$h")
    [ -n "$r" ] && printf '%s -> %s\t%s\n' "$f" "$h" "$r" >> "$tmp/violations"
done < "$tmp/raw"
LC_ALL=C sort -u "$tmp/violations" -o "$tmp/violations"
cut -f1 "$tmp/violations" > "$tmp/found"
if [ -f "$allow" ]; then
    sed -e 's/#.*//' -e 's/[ \t]*$//' -e '/^$/d' "$allow" | LC_ALL=C sort -u > "$tmp/allowed"
else
    : > "$tmp/allowed"
fi

if [ "$mode" = write ]; then
    {
        echo "# include_rule.allow -- includes that break the layer rule today"
        echo "# (tests/docs/include_rule.sh; docs/design.md \"Layers\")."
        echo "# One \"file -> header\" per line; what follows # is the rule it breaks."
        echo "# The list only shrinks: a line that no longer occurs fails the check."
        echo "# Regenerate: tests/docs/include_rule.sh --write-allow"
        awk -F'\t' '{ printf "%s  # %s\n", $1, $2 }' "$tmp/violations"
    } > "$allow"
    echo "include_rule: wrote $(wc -l < "$tmp/violations") line(s) to ${allow#"$top"/}"
    [ -s "$tmp/unresolved" ] && cat "$tmp/unresolved"
    exit 0
fi

nfiles=$(wc -l < "$tmp/files")
nedges=$(wc -l < "$tmp/edges")
if [ "$mode" = report ]; then
    echo "include_rule: $nfiles files, $nedges project includes"
    echo
    echo "Layers (bottom to top): files, and the folders they sit in:"
    while read -r f; do
        d=${f%/*}
        case $d in */*/*) d=${d%/*} ;; esac
        echo "$(layer "$f") $d"
    done < "$tmp/files" | LC_ALL=C sort -k1,1n -k2 | awk '
        NR == 1 || $1 != l { if (NR > 1) printf "  L%s %4d  %s\n", l, n, s; l = $1; n = 0; s = ""; p = "" }
        { n++; if ($2 != p) s = s (s == "" ? "" : " ") $2; p = $2 }
        END { if (NR > 0) printf "  L%s %4d  %s\n", l, n, s }'
    echo
    echo "Includes across folders (count, file folder -> header folder):"
    awk '{ f = $1; h = $3; sub(/\/[^\/]*$/, "", f); sub(/\/[^\/]*$/, "", h)
           if (f != h) print f " -> " h }' "$tmp/edges" | LC_ALL=C sort | uniq -c \
        | while read -r n f _ h; do
            printf '  %3d  L%s %-16s -> L%s %s\n' "$n" "$(layer "$f/")" "$f" "$(layer "$h/")" "$h"
        done
    echo
    echo "Violations ($(wc -l < "$tmp/violations"); * = not in the allowlist):"
    while IFS=$tab read -r e r; do
        if grep -qxF "$e" "$tmp/allowed"; then m=' '; else m='*'; fi
        printf ' %s %-16s %s\n' "$m" "$r" "$e"
    done < "$tmp/violations"
    stale=$(LC_ALL=C comm -13 "$tmp/found" "$tmp/allowed")
    [ -n "$stale" ] && { echo; echo "Allowlisted but gone:"; echo "$stale" | sed 's/^/   /'; }
    [ -s "$tmp/unresolved" ] && { echo; echo "Unresolved:"; sed 's/^/   /' "$tmp/unresolved"; }
    exit 0
fi

fail=0
new=$(LC_ALL=C comm -23 "$tmp/found" "$tmp/allowed")
stale=$(LC_ALL=C comm -13 "$tmp/found" "$tmp/allowed")
if [ -n "$new" ]; then
    echo "FAIL: includes that break the layer rule (docs/design.md \"Layers\"):"
    echo "$new" | while read -r e; do
        printf '    %-16s %s\n' "$(grep -F "$e$tab" "$tmp/violations" | cut -f2)" "$e"
    done
    fail=1
fi
if [ -n "$stale" ]; then
    echo "FAIL: tests/docs/include_rule.allow lists includes that no longer occur"
    echo "      (delete these lines, or run tests/docs/include_rule.sh --write-allow):"
    echo "$stale" | sed 's/^/    /'
    fail=1
fi
if [ -s "$tmp/unresolved" ]; then
    echo "FAIL: includes that resolve to no file of the tree:"
    sed 's/^/    /' "$tmp/unresolved"
    fail=1
fi
[ "$fail" -eq 0 ] || exit 1
echo "PASS: $nedges includes of $nfiles files point down the layers" \
    "($(wc -l < "$tmp/allowed") allowlisted in tests/docs/include_rule.allow)"
