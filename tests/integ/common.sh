# common.sh -- sourced by the tests/integ/*.sh scripts (POSIX sh).
#
# Finds the launcher and the test programs whether the scripts run from
# automake (cwd = top build dir, FHRUN / top_builddir / top_srcdir set), from
# an in-tree build, or by hand:
#   FHRUN          launcher (default: $top_builddir/tools/fhrun, ./tools/fhrun,
#                  ../../tools/fhrun, <script dir>/../../tools/fhrun)
#   FH_TEST_BINDIR where the test programs are (default: $top_builddir/
#                  tests/integ, ./tests/integ, ., <script dir>)
#   FH_TEST_NP     rank counts to run (default "2 3 4 8")
#   FH_TEST_PROVIDERS  FH_OFI_PROVIDER values (default "net shm": the default network provider and shm; tcp runs in the tests that name it)
#   FH_TEST_TIMEOUT    seconds per run (default 180)
#   FH_SHM         default off here (the conduits under test); node_local.sh
#                  sets it per run
#   FH_TEST_STRATEGIES FH_REG_STRATEGY values that strategies.sh and
#                  reg_security.sh cover (default: firehose rendezvous
#                  rendezvous-cache bounce; the other scripts run the default)
# Each script ends with `finish`, which exits 0 (all passed), 1 (a failure)
# or 77 (nothing could run).

here=$(cd "$(dirname "$0")" && pwd)
fail=0
ran=0
timeouts=0
skipped=0

first_exe() {
    for c in "$@"; do
        if [ -n "$c" ] && [ -f "$c" ] && [ -x "$c" ]; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

if [ -z "${FHRUN:-}" ] || [ ! -x "$FHRUN" ]; then
    FHRUN=$(first_exe "${top_builddir:+$top_builddir/tools/fhrun}" \
        ./tools/fhrun ../../tools/fhrun "$here/../../tools/fhrun") || FHRUN=
fi

# fh_bin NAME -> path of the test program NAME
fh_bin() {
    first_exe "${FH_TEST_BINDIR:+$FH_TEST_BINDIR/$1}" \
        "${top_builddir:+$top_builddir/tests/integ/$1}" \
        "${top_builddir:+$top_builddir/tests/security/$1}" \
        "./tests/integ/$1" "./tests/security/$1" "./$1" "$here/$1"
}

NP_LIST=${FH_TEST_NP:-"2 3 4 8"}
# The integration scripts test the conduits: the ranks of this host do not
# share segments unless a script says so (node_local.sh runs the node path,
# one group and mixed groups, over a chosen set of these programs).
FH_SHM=${FH_SHM:-off}
export FH_SHM
TIMEOUT=${FH_TEST_TIMEOUT:-180}
tmpd=$(mktemp -d "${TMPDIR:-/tmp}/fhinteg.XXXXXX")
trap 'rm -rf "$tmpd"' EXIT
trap 'rm -rf "$tmpd"; exit 1' INT TERM

# Providers that libfabric offers here (others are skipped, not failed).
providers() {
    for p in ${FH_TEST_PROVIDERS:-net shm}; do
        if command -v fi_info >/dev/null 2>&1 && \
           ! fi_info -p "$p" >/dev/null 2>&1; then
            echo "SKIP provider $p: fi_info -p $p finds nothing" >&2
            continue
        fi
        echo "$p"
    done
}

need_fhrun() {
    if [ -z "$FHRUN" ]; then
        echo "SKIP: tools/fhrun not found (set FHRUN)"
        exit 77
    fi
}

# run_case DESC NAME EXPECT_PASS_LINE CMD...   (CMD is run as is)
# Passes when CMD exits 0 and its output has the line "PASS <NAME>".
run_case() {
    desc=$1; name=$2; shift 2
    log="$tmpd/run.log"
    ran=$((ran + 1))
    t0=$(date +%s)
    timeout -k 10 $((TIMEOUT + 30)) "$@" >"$log" 2>&1
    rc=$?
    t1=$(date +%s)
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && timeouts=$((timeouts + 1))
    if [ $rc -eq 0 ] && grep -q "^PASS $name" "$log"; then
        echo "ok   $desc ($((t1 - t0)) s)"
        grep -E '^\[[0-9]+\] (NOTE|SKIP)' "$log" | head -5
    else
        fail=$((fail + 1))
        echo "FAIL $desc: exit status $rc ($((t1 - t0)) s); command: $*"
        echo "---- last 40 lines of output ----"
        tail -n 40 "$log"
        echo "---------------------------------"
    fi
}

# run_np NAME N [fhrun options --] [program args]
run_np() {
    name=$1; np=$2; shift 2
    bin=$(fh_bin "$name") || { echo "SKIP: $name not built"; skipped=1; return; }
    if [ "$timeouts" -ge 2 ]; then
        echo "FAIL $name -n $np $*: not run (2 runs already timed out)"
        fail=$((fail + 1)); ran=$((ran + 1))
        return
    fi
    run_case "$name -n $np FH_OFI_PROVIDER=${FH_OFI_PROVIDER:-net,tcp}${FH_SHM_MAX_GROUP:+ FH_SHM_MAX_GROUP=$FH_SHM_MAX_GROUP}${FH_PATHS:+ FH_PATHS=$FH_PATHS}${FH_REG_STRATEGY:+ FH_REG_STRATEGY=$FH_REG_STRATEGY} $*" \
        "$name" "$FHRUN" -n "$np" --timeout "$TIMEOUT" "$bin" "$@"
}

# stats_field WHO FIELD: FIELD's value in rank 0's FH_STATS=1 row WHO
# ("total" or "->1") of the last run's log; empty if absent.
stats_field() {
    grep "^firehose\[0\]: stats $1 " "$log" | head -1 | sed -n "s/.* $2=\([0-9]*\).*/\1/p"
}

# expect_stat WHO FIELD OP VALUE: fails the test unless FIELD OP VALUE
# (OP: -gt, -eq, ...) holds in rank 0's stats row WHO.
expect_stat() {
    v=$(stats_field "$1" "$2")
    if [ -z "$v" ] || ! [ "$v" "$3" "$4" ]; then
        echo "FAIL stats row '$1' of rank 0: expected $2 $3 $4, saw '$v'"
        fail=$((fail + 1))
    fi
}

finish() {
    if [ "$fail" -ne 0 ]; then
        echo "$fail of $ran runs FAILED"
        exit 1
    fi
    if [ "$ran" -eq 0 ]; then
        echo "nothing ran"
        exit 77
    fi
    echo "all $ran runs passed"
    exit 0
}
