#!/bin/sh
# caf_chunks.sh -- a hostile coarray image against libcaf_firehose's AM
# handlers (caf_chunks.c says what each scenario sends and expects).
#
# Builds tests/security/caf_chunks.c with $CC (default cc) and links it with
# the build tree's caf wrapper ($CAF), then runs every scenario as its own
# 3-image job (an attack that kills an image does not hide the others).  A
# scenario passes when the job exits 0, image 2 printed "PASS caf_chunks
# <scenario>" and image 2's log has a drop line for each thing the scenario
# forged ("caf: image 2: dropped ... from image 1: <reason>").
# Skipped (77) without the caf wrapper or gfortran.
. "$(dirname "$0")/../integ/common.sh"
need_fhrun
CAF=${CAF:-${top_builddir:+$top_builddir/caf/caf}}
if [ -z "$CAF" ] || [ ! -x "$CAF" ] || ! command -v gfortran >/dev/null 2>&1; then
    echo "SKIP: no caf wrapper (CAF) or no gfortran"
    exit 77
fi
src=${top_srcdir:-$here/../..}
# Under AddressSanitizer: no leak check (the library's coarray state lives
# until the process ends, as in tests/caf/caf_tests.sh).
if [ -n "${ASAN_OPTIONS+x}" ]; then
    ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
    export ASAN_OPTIONS
fi
bin="$tmpd/caf_chunks"
if ! ${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -I"$src/include" -I"$src/caf" \
        -c "$src/tests/security/caf_chunks.c" -o "$bin.o" ||
   ! "$CAF" "$bin.o" -o "$bin"; then
    echo "FAIL caf_chunks: does not build"
    exit 1
fi

# expect_drop SCENARIO REGEX: image 2 logged a drop from image 1 matching REGEX.
expect_drop() {
    if ! grep -E "^caf: image 2: dropped .* from image 1: .*($2)" "$log" >/dev/null; then
        echo "FAIL caf_chunks $1: image 2's log has no drop for '$2'"
        fail=$((fail + 1))
    fi
}

for s in ${FH_CAF_CHUNKS_SCENARIOS:-short written grant syncall misc coll}; do
    before=$fail
    run_case "caf_chunks $s (3 images)" caf_chunks \
        "$FHRUN" -n 3 --timeout "$TIMEOUT" "$bin" "$s"
    [ "$fail" -eq "$before" ] || continue
    case $s in
    short)   expect_drop "$s" "8 bytes where 4096 were due" ;;
    written) expect_drop "$s" "at offset [0-9]+: not a slot"
             expect_drop "$s" "written collective chunk with 5 arguments, expected 6" ;;
    grant)   expect_drop "$s" "grants offset 1099511627776" ;;
    syncall) expect_drop "$s" "round 1 for the initial team, whose barriers are the runtime's" ;;
    misc)
        for r in "status 5" "status with 2 arguments" "SYNC IMAGES ahead" \
                 "round 40" "flags 16" "team number 0" "NEW_INDEX= -3"; do
            expect_drop "$s" "$r"
        done ;;
    coll)
        for r in "data with 3 arguments" "written collective chunk with a 16-byte payload" "phase 9" \
                 "grant with a 16-byte payload" "grants offset 64" "STAT 12345"; do
            expect_drop "$s" "$r"
        done ;;
    esac
    grep '^caf: image 2: dropped' "$log" | head -20
done
finish
