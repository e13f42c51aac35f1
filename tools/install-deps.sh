#!/bin/sh
# install-deps.sh -- install every Debian package firehose needs to build,
# test, fuzz and run its demo.  Idempotent and fast on re-runs: when all the
# packages are already installed it touches nothing (no apt-get update).
# Uses sudo only when not run as root.
#
#   tools/install-deps.sh           build + make check (libucx-dev: the cache
#                                   benchmark's UCX comparison, in the smoke
#                                   test too)
#   tools/install-deps.sh --bench   also what bench/run-all.sh uses: gnuplot
#                                   (plots), ucx-utils (ucx_perftest peer) and
#                                   OpenCoarrays (bench/caf's peer)
# gfortran: the Co-Array Fortran wrapper caf and its tests (tests/caf).
set -eu

PACKAGES="build-essential autoconf automake libtool pkg-config \
libfabric-dev libfabric-bin rdma-core libibverbs-dev librdmacm-dev \
ibverbs-providers uthash-dev check libpmix-dev openmpi-bin libopenmpi-dev \
iproute2 procps clang libclang-rt-14-dev python3 libucx-dev libssl-dev \
gfortran"
case "${1:-}" in
    --bench) PACKAGES="$PACKAGES gnuplot-nox ucx-utils libcoarrays-openmpi-dev" ;;
    "") ;;
    *) echo "usage: $0 [--bench]" >&2; exit 2 ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps.sh: not a Debian-like system (no dpkg/apt-get)." >&2
    echo "install-deps.sh: install by hand the equivalents of: $PACKAGES" >&2
    exit 1
fi

missing=""
for p in $PACKAGES; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
    case "$status" in
        ii*) ;;
        *) missing="$missing $p" ;;
    esac
done

if [ -z "$missing" ]; then
    # shellcheck disable=SC2086  # count the words of the list
    set -- $PACKAGES
    echo "install-deps.sh: all $# packages already installed"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install-deps.sh: need root (or sudo) to install:$missing" >&2
    exit 1
fi

echo "install-deps.sh: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
# Update the package lists only when they are missing or older than a day;
# a fresh machine has none, so its first install always updates.
lists=/var/lib/apt/lists
if [ -z "$(find "$lists" -maxdepth 1 -name '*_Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
    $SUDO apt-get update -q
fi
# shellcheck disable=SC2086  # word splitting of the package list is wanted
if ! $SUDO apt-get install -y -q --no-install-recommends $missing; then
    # The lists may be stale (a package moved): refresh once and retry.
    $SUDO apt-get update -q
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -q --no-install-recommends $missing
fi
echo "install-deps.sh: done"
