# errors_lib.sh -- helpers of init_errors.sh, unknown_env.sh and
# after_finalize.sh (sourced; POSIX sh).  Finds the launcher, fhinfo and
# the programs from automake's environment (top_builddir, FHRUN, FHINFO) or
# an in-tree build; each script ends with `finish` (exit 0, 1, or 77 when
# nothing could run).
here=$(cd "$(dirname "$0")" && pwd)
bld=${top_builddir:-$(pwd)}
FHRUN=${FHRUN:-$bld/tools/fhrun}
FHINFO=${FHINFO:-$bld/tools/fhinfo}
fail=0
ran=0
tmpd=$(mktemp -d "${TMPDIR:-/tmp}/fhrobust.XXXXXX")
trap 'rm -rf "$tmpd"' EXIT
trap 'rm -rf "$tmpd"; exit 1' INT TERM
out=$tmpd/out
# A clean slate: no FH_* from the caller (tests export theirs), loopback tcp.
for v in $(env | sed -n 's/^\(FH_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export FH_OFI_PROVIDER=tcp FH_SHM=off

# prog NAME: path of a test program (tests/robust, then tests/integ)
prog() {
    for d in "$bld/tests/robust" "$bld/tests/integ"; do
        [ -x "$d/$1" ] && { echo "$d/$1"; return 0; }
    done
    return 1
}

# expect DESC RESULT(0 = ok): one "ok"/"FAIL" line; on failure the output.
expect() {
    ran=$((ran + 1))
    if [ "$2" -eq 0 ]; then
        echo "ok   $1"
    else
        fail=$((fail + 1))
        echo "FAIL $1"
        echo "---- output ----"; tail -n 15 "$out"; echo "----------------"
    fi
}

finish() {
    echo "$ran checks, $fail failed"
    [ "$ran" -eq 0 ] && exit 77
    [ "$fail" -eq 0 ]
}
