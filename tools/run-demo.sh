#!/bin/bash
# run-demo.sh -- from a fresh checkout to the 2-rank demo in one command:
# installs the Debian packages, builds out of tree in _build/, and runs
# bench/fhdemo on two local ranks with tools/fhrun (libfabric over
# loopback, FH_SHM=off), which prints put latencies and the registration
# cache's counters, then again with the two ranks sharing their segments
# (FH_SHM=auto: puts are copies through shared memory); then compiles the coarray hello (caf/examples/hello.f90) with
# caf and runs it on two images with cafrun.
#
# Environment: BUILD_DIR (default _build), FH_* variables are passed to the
# ranks (e.g. FH_OFI_PROVIDER=shm ./tools/run-demo.sh).
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/_build}

"$top/tools/install-deps.sh"

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
    ./autogen.sh
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
    "$top/configure"
fi
make -j2

# Keep the demo's traffic on loopback (libfabric's tcp and sockets providers).
export FI_TCP_IFACE="${FI_TCP_IFACE:-lo}" FI_SOCKETS_IFACE="${FI_SOCKETS_IFACE:-lo}"
# The demo shows the registration cache at work (FH_REG_STRATEGY=firehose,
# the library default; its hit/miss/move counters are zero under
# pin-everything).
export FH_REG_STRATEGY="${FH_REG_STRATEGY:-firehose}"

echo
echo "run-demo.sh: FH_SHM=off FH_REG_STRATEGY=$FH_REG_STRATEGY tools/fhrun -n 2 bench/fhdemo  (in $build)"
FH_SHM=off ./tools/fhrun -n 2 ./bench/fhdemo "$@"

echo
echo "run-demo.sh: the same two ranks sharing their segments: FH_SHM=auto tools/fhrun -n 2 bench/fhdemo"
FH_SHM=auto ./tools/fhrun -n 2 ./bench/fhdemo "$@"

echo
echo "run-demo.sh: caf $top/caf/examples/hello.f90 -o hello && cafrun -n 2 ./hello  (in $build/caf)"
./caf/caf "$top/caf/examples/hello.f90" -o caf/hello
exec ./caf/cafrun -n 2 ./caf/hello
