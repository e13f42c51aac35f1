#!/bin/sh
# autogen.sh -- generate ./configure from a git checkout.
# Needs autoconf, automake, libtool and pkg-config
# (Debian: tools/install-deps.sh installs them).
set -e
cd "$(dirname "$0")"
for tool in autoreconf libtoolize pkg-config; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "autogen.sh: $tool not found: run tools/install-deps.sh" \
             "(Debian packages autoconf automake libtool pkg-config)" >&2
        exit 1
    fi
done
mkdir -p m4 build-aux
autoreconf --install --force --warnings=all
echo "autogen.sh: now run ./configure (see ./configure --help)"
