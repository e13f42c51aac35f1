#!/bin/sh
# Builds fhrun and boot_test into $BUILD (default tests/boot/build):
#   fhrun, boot_test            plain
#   fhrun.asan, boot_test.asan  -fsanitize=address,undefined
#   boot_test.pmix              with PMIx (if pkg-config finds pmix)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/tests/boot/build}
mkdir -p "$BUILD"
cd "$ROOT"
CFLAGS="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -Iinclude -I."
BOOT="firehose/boot/boot.c firehose/boot/boot_fhrun.c firehose/boot/boot_pmix.c firehose/boot/boot_single.c firehose/util/log.c"
SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
# OpenSSL libcrypto: the handshake's HMAC (boot_wire.h).
CRYPTO=$(pkg-config --cflags --libs libcrypto 2>/dev/null || echo -lcrypto)
set -x
# fhrun names ranks as FH_RANK_NAMES says (log.c).
LAUNCHER="tools/launcher/*.c firehose/util/log.c firehose/util/error.c"
gcc $CFLAGS -O2 -o "$BUILD/fhrun" $LAUNCHER $CRYPTO
gcc $CFLAGS -O2 -pthread -o "$BUILD/boot_test" tests/boot/boot_test.c $BOOT $CRYPTO
gcc $CFLAGS $SAN -o "$BUILD/fhrun.asan" $LAUNCHER $CRYPTO
gcc $CFLAGS $SAN -pthread -o "$BUILD/boot_test.asan" tests/boot/boot_test.c $BOOT $CRYPTO
if pkg-config --exists pmix; then
    gcc $CFLAGS -O2 -DFH_HAVE_PMIX $(pkg-config --cflags pmix) -pthread \
        -o "$BUILD/boot_test.pmix" tests/boot/boot_test.c $BOOT $(pkg-config --libs pmix) $CRYPTO
    gcc $CFLAGS $SAN -DFH_HAVE_PMIX $(pkg-config --cflags pmix) -pthread \
        -o "$BUILD/boot_test.pmix.asan" tests/boot/boot_test.c $BOOT $(pkg-config --libs pmix) $CRYPTO
fi
