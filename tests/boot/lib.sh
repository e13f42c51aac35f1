# lib.sh -- helpers for the bootstrap shell tests (sourced).
#   FHRUN, BOOT_TEST   binaries under test (default: build/fhrun, build/boot_test;
#                      run_all.sh sets the .asan variants for a second pass)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$HERE/build}
FHRUN=${FHRUN:-$BUILD/fhrun}
BOOT_TEST=${BOOT_TEST:-$BUILD/boot_test}
if [ ! -x "$FHRUN" ] || [ ! -x "$BOOT_TEST" ]; then
    BUILD=$BUILD "$HERE/build.sh" >/dev/null 2>&1 || { echo "build failed"; exit 1; }
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Python helpers that speak the bootstrap protocol (fhwire.py); no
# __pycache__ in the source tree (it may be read-only: distcheck).
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/fhboot-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
FAILS=0
NAME=$(basename "$0" .sh)

fail() {
    echo "FAIL [$NAME]: $*"
    FAILS=$((FAILS + 1))
}
pass() { echo "ok   [$NAME]: $*"; }

# run OUTPREFIX cmd...: runs cmd with stdout/stderr to $TMP/OUTPREFIX.{out,err},
# sets RC and ELAPSED (seconds, float).  Bounded: killed after RUN_LIMIT
# seconds (default 120; exit 124 or 137), so a hang fails instead of hanging.
#
# Time limits (expect_lt) are bounds against hangs, generous enough that a
# loaded 2-core machine never reaches them; what a test asserts is the
# behaviour (exit status, the messages, which signal ended a rank), never
# the speed.  A lower bound (a grace period was waited) is fine: load cannot
# make a wait shorter.
RUN_LIMIT=${RUN_LIMIT:-120}
run() {
    local o=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    timeout -k 5 "$RUN_LIMIT" "$@" >"$TMP/$o.out" 2>"$TMP/$o.err"
    RC=$?
    t1=$(date +%s.%N)
    ELAPSED=$(echo "$t1 - $t0" | bc)
}

expect_rc() {  # expected what
    if [ "$RC" -eq "$1" ]; then pass "$2: exit $RC"
    else fail "$2: expected exit $1, saw $RC"; show "$LAST"; fi
}

# expect_grep FILE REGEX what
expect_grep() {
    if grep -Eq -- "$2" "$1"; then pass "$3"
    else fail "$3: expected /$2/ in $(basename "$1"), saw:"; sed 's/^/    | /' "$1" | head -40; fi
}
expect_nogrep() {
    if ! grep -Eq -- "$2" "$1"; then pass "$3"
    else fail "$3: did not expect /$2/ in $(basename "$1"), saw:"; sed 's/^/    | /' "$1" | head -40; fi
}
# expect_count FILE REGEX N what
expect_count() {
    local n
    n=$(grep -Ec -- "$2" "$1")
    if [ "$n" -eq "$3" ]; then pass "$4 ($n lines)"
    else fail "$4: expected $3 lines /$2/, saw $n:"; sed 's/^/    | /' "$1" | head -40; fi
}
expect_lt() {  # value limit what
    if [ "$(echo "$1 < $2" | bc)" = 1 ]; then pass "$3: ${1}s < ${2}s"
    else fail "$3: took ${1}s, limit ${2}s"; fi
}
show() {
    [ -n "${1:-}" ] || return 0
    for f in "$TMP/$1.out" "$TMP/$1.err"; do
        [ -f "$f" ] && { echo "    --- $(basename "$f")"; sed 's/^/    | /' "$f" | head -40; }
    done
}
# no_orphans what: no process running the test binary remains.
no_orphans() {
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        pgrep -f "^$BOOT_TEST" >/dev/null || { pass "$1: no boot_test process left"; return; }
        sleep 0.2
    done
    fail "$1: processes left:"; pgrep -fa "^$BOOT_TEST" | sed 's/^/    | /'
    pkill -9 -f "^$BOOT_TEST"
}
finish() {
    if [ "$FAILS" -eq 0 ]; then echo "PASS [$NAME]"; exit 0; fi
    echo "FAILED [$NAME]: $FAILS check(s)"; exit 1
}
