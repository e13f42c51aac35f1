#!/bin/sh
# readme_table.sh -- the FH_* table in README.md must be exactly what
# `tools/fhinfo --markdown` prints (the table is generated from
# fh_config_table, so this catches a README that was not regenerated).
#
# Regenerate the README table with:  tools/run-tests.sh, or by hand
#   tools/fhinfo --markdown   and paste it between the markers.
#
# Run by `make check` (which sets top_srcdir and FHINFO); standalone:
#   top_srcdir=. FHINFO=_build/tools/fhinfo sh tests/docs/readme_table.sh
set -u

top_srcdir=${top_srcdir:-.}
fhinfo=${FHINFO:-tools/fhinfo}
readme="$top_srcdir/README.md"
begin='<!-- fh-config-table:begin -->'
end='<!-- fh-config-table:end -->'

if [ ! -f "$readme" ]; then
    echo "FAIL: $readme does not exist"
    exit 1
fi
if [ ! -x "$fhinfo" ]; then
    echo "FAIL: $fhinfo not built (run make first)"
    exit 1
fi
for marker in "$begin" "$end"; do
    if ! grep -qxF "$marker" "$readme"; then
        echo "FAIL: README.md has no line '$marker'"
        exit 1
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/readme_table.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# The lines strictly between the markers.
awk -v b="$begin" -v e="$end" '
    $0 == e { inside = 0 }
    inside  { print }
    $0 == b { inside = 1 }
' "$readme" > "$tmp/readme"
"$fhinfo" --markdown > "$tmp/fhinfo" || {
    echo "FAIL: $fhinfo --markdown exited with status $?"
    exit 1
}

if diff -u "$tmp/readme" "$tmp/fhinfo" > "$tmp/diff"; then
    echo "PASS: README.md FH_* table matches fhinfo --markdown" \
         "($(grep -c '^| `FH_' "$tmp/fhinfo") variables)"
    exit 0
fi
echo "FAIL: the FH_* table in README.md differs from 'fhinfo --markdown'."
echo "Replace the lines between '$begin' and '$end' with the output of"
echo "'tools/fhinfo --markdown'.  Diff (- README.md, + fhinfo):"
cat "$tmp/diff"
exit 1
