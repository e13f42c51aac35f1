#!/bin/sh
# memmon_valgrind.sh -- issue 29, class 3: a program run under valgrind,
# which runs one thread at a time, does not hang.  With a userfaultfd
# monitor, an munmap of watched memory waits in the kernel for the monitor
# thread to read the event, and valgrind never lets that thread run (the
# 2-rank demo hung after its measurement).  The monitor detects valgrind
# and the runtime falls back (docs/firehose-cache.md, "Fallback"):
#   - fhdemo, 2 ranks over tcp (FH_SHM=off: its local buffers go through
#     the firehose strategy, which caches and would watch them), ends, and
#     each rank says with FH_VERBOSE=1 that the monitor is off because of
#     valgrind;
#   - FH_SEGMENT=everything, which needs the monitor, fails fh_init with
#     the reason, instead of hanging.
# Skips without valgrind and in sanitizer builds (valgrind cannot run them).
. "$(dirname "$0")/common.sh"
need_fhrun
command -v valgrind >/dev/null 2>&1 || { echo "SKIP: valgrind not installed"; exit 77; }
demo=$(first_exe "${top_builddir:+$top_builddir/bench/.libs/fhdemo}" \
    "${top_builddir:+$top_builddir/bench/fhdemo}" ./bench/.libs/fhdemo ./bench/fhdemo) ||
    { echo "SKIP: bench/fhdemo not built"; exit 77; }
# The program itself, not libtool's wrapper script (valgrind would trace
# the shell): its library is in the build's .libs.
if [ "$(basename "$(dirname "$demo")")" = .libs ]; then
    LD_LIBRARY_PATH=$(dirname "$(dirname "$(dirname "$demo")")")/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LD_LIBRARY_PATH
fi
if ldd "$demo" 2>/dev/null | grep -q 'lib[at]san'; then
    echo "SKIP: a sanitizer build (valgrind cannot run it)"; exit 77
fi
unset FH_MEMMON FH_SEGMENT
export FH_OFI_PROVIDER=tcp FH_SHM=off FH_VERBOSE=1
out="$tmpd/out"

ran=$((ran + 1))
timeout 150 "$FHRUN" -n 2 --timeout 120 valgrind -q "$demo" --iters 5 --warmup 1 \
    >"$out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q 'per-peer counters' "$out" &&
   [ "$(grep -c 'memory monitor unavailable (running under valgrind' "$out")" -eq 2 ]; then
    echo "ok   fhdemo -n 2 under valgrind ends, the monitor off in both ranks"
else
    echo "FAIL fhdemo -n 2 under valgrind: status $rc (124: hung), or no 'memory monitor"
    echo "     unavailable (running under valgrind' line from each rank:"
    grep -v '^==' "$out" | tail -n 8 | sed 's/^/     /'
    fail=$((fail + 1))
fi

ran=$((ran + 1))
FH_SEGMENT=everything timeout 150 "$FHRUN" -n 2 --timeout 120 valgrind -q "$demo" \
    --iters 1 --warmup 0 >"$out" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 124 ] &&
   grep -q 'FH_SEGMENT=everything needs the memory monitor, which is unavailable: running under valgrind' "$out"; then
    echo "ok   FH_SEGMENT=everything under valgrind: fh_init fails with the reason"
else
    echo "FAIL FH_SEGMENT=everything under valgrind: status $rc, expected an fh_init error:"
    grep -v '^==' "$out" | tail -n 8 | sed 's/^/     /'
    fail=$((fail + 1))
fi
finish
