#!/bin/sh
# exports.sh -- libfirehose.so exports exactly the functions that
# include/firehose.h declares (the build's firehose.sym, generated from the
# header, plus the system calls firehose/util/interpose.c wraps): nothing
# internal leaks, and nothing declared is missing.
# In-tree programs that need internals link libfhrt.la (Makefile.am).
#
# Run by `make check`; standalone from the build directory:
#   top_srcdir=.. top_builddir=. sh ../tests/docs/exports.sh
set -u

top_builddir=${top_builddir:-.}
so="$top_builddir/.libs/libfirehose.so"
sym="$top_builddir/firehose.sym"
if [ ! -f "$so" ]; then
    echo "SKIP: $so not built (--disable-shared?)"
    exit 77
fi
if ! command -v nm >/dev/null 2>&1; then
    echo "SKIP: no nm"
    exit 77
fi
if [ ! -s "$sym" ]; then
    echo "FAIL: $sym missing or empty (it is generated from include/firehose.h)"
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/exports.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
nm -D --defined-only "$so" | awk '$2 !~ /^[UVvWw]$/ { print $3 }' | LC_ALL=C sort -u \
    > "$tmp/exported"
LC_ALL=C sort -u "$sym" > "$tmp/declared"

fail=0
extra=$(LC_ALL=C comm -23 "$tmp/exported" "$tmp/declared")
missing=$(LC_ALL=C comm -13 "$tmp/exported" "$tmp/declared")
if [ -n "$extra" ]; then
    echo "FAIL: libfirehose.so exports symbols include/firehose.h does not declare:"
    echo "$extra" | sed 's/^/    /'
    fail=1
fi
if [ -n "$missing" ]; then
    echo "FAIL: include/firehose.h declares functions libfirehose.so does not export:"
    echo "$missing" | sed 's/^/    /'
    fail=1
fi
[ "$fail" -eq 0 ] || exit 1
echo "PASS: libfirehose.so exports the $(wc -l < "$tmp/declared") functions of include/firehose.h, nothing else"
