#!/bin/sh
# memmon_fallback.sh -- the memory monitor when userfaultfd is unavailable
# (docs/firehose-cache.md, "Fallback"), made unavailable by no_uffd (a
# seccomp filter, as in a container):
#   - FH_MEMMON=uffd, and FH_SEGMENT=everything with the default FH_MEMMON=
#     auto, make fh_init return an error (no exit inside it, no hang), a
#     message naming the setting and why the monitor is unavailable, in a
#     single rank and in every rank of a 2-rank job;
#   - FH_MEMMON=auto falls back (said with FH_VERBOSE=1) and the runtime
#     works: rma_integrity and threads_test (heap and stack buffers of
#     several threads: uncached registrations) on 2 ranks.  (churn_test
#     needs FH_SEGMENT=everything, which needs the monitor.)
# Negative control: without no_uffd the same FH_MEMMON=uffd fh_init works
# (when this machine has userfaultfd at all), so no_uffd is what failed it.
. "$(dirname "$0")/common.sh"
need_fhrun
nouffd=$(fh_bin no_uffd) || { echo "SKIP: no_uffd not built"; exit 77; }
probe=$(fh_bin config_probe) || { echo "SKIP: config_probe not built"; exit 77; }
unset FH_BOOT_ADDR FH_JOB_KEY FH_RANK FH_NRANKS FH_MEMMON FH_SEGMENT FH_VERBOSE
export FH_OFI_PROVIDER=tcp
"$nouffd" true || { echo "SKIP: cannot install a seccomp filter here"; exit 77; }
out="$tmpd/out"

expect() {  # DESC RESULT(0 = ok) [file]
    ran=$((ran + 1))
    if [ "$2" -eq 0 ]; then echo "ok   $1"
    else
        fail=$((fail + 1)); echo "FAIL $1"
        [ -n "${3:-}" ] && { echo "---- output ----"; tail -n 20 "$3"; echo "----------------"; }
    fi
}

# negative control
FH_MEMMON=uffd timeout 60 "$probe" >"$out" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
    echo "ok   control: FH_MEMMON=uffd starts without no_uffd"
else
    echo "NOTE control: FH_MEMMON=uffd fails here even without no_uffd (status $rc):"
    tail -n 3 "$out"
fi

for setting in FH_MEMMON=uffd FH_SEGMENT=everything; do
    env "$setting" timeout 60 "$nouffd" "$probe" >"$out" 2>&1
    rc=$?
    expect "$setting without userfaultfd, 1 rank: fh_init returns an error naming $setting (status $rc)" \
        $([ $rc -eq 3 ] && grep -q "fh_init: $setting needs the memory monitor, which is unavailable: userfaultfd" "$out"; echo $?) "$out"
    env "$setting" timeout 90 "$nouffd" "$FHRUN" -n 2 --timeout 60 "$probe" >"$out" 2>&1
    rc=$?
    expect "$setting without userfaultfd, 2 ranks: the job fails (status $rc), fhrun names the reason" \
        $([ $rc -ne 0 ] && [ $rc -lt 124 ] && grep -q "^fhrun: rank [01] (pid [0-9]*) failed in fh_init: $setting needs the memory monitor" "$out"; echo $?) "$out"
done

# the fallback works
FH_VERBOSE=1 FH_TEST_NP=2 run_case "rma_integrity -n 2, FH_MEMMON=auto without userfaultfd" \
    rma_integrity "$nouffd" "$FHRUN" -n 2 --timeout "$TIMEOUT" "$(fh_bin rma_integrity)"
expect "FH_MEMMON=auto without userfaultfd says it falls back" \
    $(grep -q "memory monitor unavailable (userfaultfd() failed" "$log"; echo $?) "$log"
run_case "threads_test -n 2, FH_MEMMON=auto without userfaultfd" threads_test \
    "$nouffd" "$FHRUN" -n 2 --timeout "$TIMEOUT" "$(fh_bin threads_test)"
finish
