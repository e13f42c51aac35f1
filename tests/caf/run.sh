#!/bin/sh
# Runs the libcaf_firehose tests of this directory on 1..4 and 8 images.
# Usage: tests/caf/run.sh BUILD_DIR [test ...]   (default: all *_lib.f90)
# Each test prints "PASS <name>" on image 1 or fails with ERROR STOP 1.
set -u
build=${1:?usage: run.sh BUILD_DIR [test ...]}; shift
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
tests=${*:-$(cd "$src" && ls *_lib.f90 | sed 's/\.f90$//')}
fail=0
for t in $tests; do
    "$build/caf/caf" "$src/$t.f90" -o "$tmp/$t" || { echo "FAIL $t (compile)"; fail=1; continue; }
    for n in ${CAF_TEST_IMAGES:-1 2 3 4 8}; do
        out=$(timeout 300 "$build/caf/cafrun" -n "$n" "$tmp/$t" 2>&1)
        if [ $? -eq 0 ] && printf '%s\n' "$out" | grep -q "^PASS $t\$"; then
            echo "PASS $t -n $n"
        else
            echo "FAIL $t -n $n"; printf '%s\n' "$out" | head -5; fail=1
        fi
    done
done
exit $fail
