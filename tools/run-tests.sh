#!/bin/bash
# run-tests.sh -- the whole test suite in one command: installs the Debian
# packages, builds out of tree with warnings as errors, runs `make check`.
# On failure it prints test-suite.log and exits non-zero.
#
# Environment: BUILD_DIR (default _build), CONFIGURE_FLAGS (added to
# --enable-werror), MAKE_JOBS (default 2).
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

if make -j"$jobs" check; then
    echo "run-tests.sh: all tests passed"
    exit 0
fi
echo
echo "run-tests.sh: make check FAILED; test-suite.log follows"
echo "=================================================================="
cat test-suite.log 2>/dev/null || echo "(no test-suite.log in $build)"
exit 1
