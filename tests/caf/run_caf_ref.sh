#!/bin/sh
# run_caf_ref.sh [BUILD_DIR] -- compiles tests/caf/caf_ref_*.f90 with the
# build's caf wrapper and runs each on 1..4 images (cafrun).  A program that
# prints "PASS <name>" passes; one whose header says "EXPECT-FAIL: <text>"
# must end with a nonzero status and print <text> instead.
# CAF / CAFRUN override the wrappers (e.g. caf.openmpi / cafrun.openmpi).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# Default build: the current directory when it is one (make check runs
# tests from the top build directory), else _build next to the sources.
if [ $# -ge 1 ]; then build=$1
elif [ -x ./caf/caf ]; then build=.
else build=$here/../../_build
fi
user_caf=${CAF:-}
CAF=${CAF:-$build/caf/caf}
CAFRUN=${CAFRUN:-$build/caf/cafrun}
NP=${NP:-"1 2 3 4"}
: "${FI_TCP_IFACE:=lo}"; export FI_TCP_IFACE
if [ -z "$user_caf" ]; then
    fc=$(sed -n 's/^fc=\${FH_CAF_FC:-\(.*\)}$/\1/p' "$CAF" 2>/dev/null)
    if ! command -v "${FH_CAF_FC:-${fc:-gfortran}}" >/dev/null 2>&1; then
        echo "SKIP: no Fortran compiler (${FH_CAF_FC:-${fc:-gfortran}})"; exit 77
    fi
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
for src in "$here"/caf_ref_*.f90; do
    name=$(basename "$src" .f90)
    if ! $CAF "$src" -o "$tmp/$name" >"$tmp/$name.cc" 2>&1; then
        echo "FAIL $name: does not compile"; cat "$tmp/$name.cc"; fail=1; continue
    fi
    expect=$(sed -n 's/.*EXPECT-FAIL: *//p' "$src" | head -1)
    for n in $NP; do
        timeout 120 $CAFRUN -n "$n" "$tmp/$name" >"$tmp/out" 2>&1
        rc=$?
        if [ -n "$expect" ]; then
            if [ $rc -ne 0 ] && grep -q "$expect" "$tmp/out"; then
                echo "PASS $name -n $n (failed as expected)"
            else
                echo "FAIL $name -n $n: rc=$rc, wanted a failure with '$expect'"
                cat "$tmp/out"; fail=1
            fi
        elif [ $rc -eq 0 ] && grep -q "^ *PASS $name" "$tmp/out"; then
            echo "PASS $name -n $n"
        else
            echo "FAIL $name -n $n: rc=$rc"; cat "$tmp/out"; fail=1
        fi
    done
done
exit $fail
