#!/bin/bash
# tests/vm/install-deps.sh -- install the Debian packages the Soft-RoCE VM
# harness needs (idempotent; a no-op taking well under a second when all are
# already installed).  Needs root (or sudo) and the Debian package registry.
#
#   tests/vm/install-deps.sh            install what is missing
#   tests/vm/install-deps.sh --check    exit 1 (listing them) if any are missing
set -euo pipefail

PKGS="qemu-system-x86 linux-image-amd64 busybox-static kmod iproute2 rdma-core
ibverbs-providers ibverbs-utils libibverbs-dev gcc libc6-dev cpio"

missing=()
for p in $PKGS; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$st" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all VM harness packages present"
    exit 0
fi
if [ "${1:-}" = --check ]; then
    echo "install-deps: missing: ${missing[*]}" >&2
    exit 1
fi

echo "install-deps: installing: ${missing[*]}"
SUDO=
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo" >&2; exit 1; }
    SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has no package lists; refresh once if the install fails.
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; then
    $SUDO apt-get update
    $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
