#!/bin/sh
# man_pages.sh -- the man pages name only what exists.
#
# In caf/caf.1, caf/cafrun.1 and tools/fhrun.1: every fhinfo option they
# name ("fhinfo \-\-xxx", "fhinfo \-c") is one `fhinfo --help` lists, and
# every FH_* variable they name is one of firehose's tables (`fhinfo`
# lists them all, conduits' included) or one of the few that are not
# tunables: set by fhrun for each rank (FH_RANK, FH_NRANKS, FH_BOOT_ADDR,
# FH_JOB_KEY, fhrun(1)) or read by the caf script (FH_CAF_FC, caf(1)).
#
# Run from the build directory (make check does): top_srcdir, FHINFO.
set -u

top_srcdir=${top_srcdir:-.}
fhinfo=${FHINFO:-tools/fhinfo}
if [ ! -x "$fhinfo" ]; then
    echo "FAIL: $fhinfo not built (run make first)"
    exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/man_pages.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

"$fhinfo" --help > "$tmp/help" 2>&1
"$fhinfo" --conduits > "$tmp/vars" 2>&1
"$fhinfo" >> "$tmp/vars" 2>&1
printf '%s\n' FH_RANK FH_NRANKS FH_BOOT_ADDR FH_JOB_KEY FH_CAF_FC >> "$tmp/vars"

failures=0
checked=0
for page in caf/caf.1 caf/cafrun.1 tools/fhrun.1; do
    src="$top_srcdir/$page"
    # Roff's \- is a dash; \fB and friends are fonts.
    sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$src" > "$tmp/page"
    for opt in $(grep -o 'fhinfo -[-a-z]*' "$tmp/page" | awk '{print $2}' | sort -u); do
        checked=$((checked + 1))
        if ! grep -Eq -- "(^| |, )$opt( |,|\$)" "$tmp/help"; then
            echo "FAIL: $page names 'fhinfo $opt', which fhinfo --help does not list"
            failures=$((failures + 1))
        fi
    done
    for var in $(grep -o 'FH_[A-Z0-9_]*[A-Z0-9]' "$tmp/page" | sort -u); do
        checked=$((checked + 1))
        if ! grep -Eq "(^|[^A-Z_])$var([^A-Z0-9_]|\$)" "$tmp/vars"; then
            echo "FAIL: $page names $var, which is in no FH_* table (fhinfo)"
            failures=$((failures + 1))
        fi
    done
done
if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "PASS: the man pages name $checked fhinfo options and FH_* variables that exist"
