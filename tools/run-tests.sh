#!/bin/bash
# run-tests.sh -- `make check` in one command: installs the Debian packages,
# builds out of tree with warnings as errors, runs `make check`.  On failure
# it prints test-suite.log and exits non-zero.
#
# What `make check` does not run is left to the other stages of .ci/run:
# the ASan/UBSan build (asan), the ThreadSanitizer build (tsan), the tarball
# (distcheck), libFuzzer (fuzz, `make fuzz`) and the ibv conduit on
# Soft-RoCE in a qemu VM (rxe, `make check-rxe`).  Run .ci/run for all of it.
#
# With CI=true (.ci/run sets it) the tests of the stages CI promises must
# have run, not skipped: netns (root, ip netns), PMIx (mpirun, OpenPMIx)
# and the bootstrap tests (which include both).  install-deps.sh installed
# what they need, so a SKIP there means the stage is broken: it fails.
# Every other skip, of a whole test or of cases inside one, is listed
# (tools/list-skips.sh) so that a stage that could not run shows.
#
# Environment: BUILD_DIR (default _build), CONFIGURE_FLAGS (added to
# --enable-werror), MAKE_JOBS (default 2), CI.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/_build}
jobs=${MAKE_JOBS:-2}

"$top/tools/install-deps.sh"

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
    ./autogen.sh
fi
mkdir -p "$build"
cd "$build"
# shellcheck disable=SC2086  # CONFIGURE_FLAGS is a list of words
"$top/configure" --enable-werror ${CONFIGURE_FLAGS:-}
make -j"$jobs"

# ci_required: fails (1) if a test CI promises skipped or did not run.
ci_required() {
    local t trs bad=0
    for t in tests/integ/netns tests/integ/pmix tests/boot/run_all; do
        trs=$t.trs
        if [ ! -f "$trs" ]; then
            echo "run-tests.sh: CI: $t.sh did not run"; bad=1
        elif grep -q '^:test-result: SKIP' "$trs"; then
            echo "run-tests.sh: CI: $t.sh was SKIPPED; CI promises it. Its log:"
            grep -E 'SKIP' "$t.log" | head -5
            bad=1
        fi
    done
    return $bad
}

if make -j"$jobs" check; then
    # Every skip, required or not (caf without gfortran, unit tests without
    # Check, the memory monitor, stale_key on shm, ...), in the output.
    echo "run-tests.sh: what make check skipped:"
    "$top/tools/list-skips.sh" .
    if [ "${CI:-}" = true ] && ! ci_required; then
        echo "run-tests.sh: FAILED: a stage CI promises could not run"
        exit 1
    fi
    echo "run-tests.sh: all tests passed"
    exit 0
fi
echo
echo "run-tests.sh: make check FAILED; test-suite.log follows"
echo "=================================================================="
cat test-suite.log 2>/dev/null || echo "(no test-suite.log in $build)"
exit 1
