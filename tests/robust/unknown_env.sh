#!/bin/sh
# unknown_env.sh -- issue 29 class 6: a misspelt FH_* variable is reported,
# not silently ignored (include/firehose.h, fh_env_register; FH_ENV_KNOWN).
#   - fh_init prints one line per unknown name, on rank 0 only (1, 2 and 3
#     ranks), with "did you mean" for a near miss (FH_REG_STRATEGEY ->
#     FH_REG_STRATEGY), for several names at once, and the job runs;
#   - names set by the launcher, FH_CAF_FC (read by the caf wrapper), and
#     names or prefix* listed in FH_ENV_KNOWN are not reported;
#   - a library's names declared with fh_env_register are not reported,
#     a misspelling of them is (env_register_test, which checks the call's
#     contract too);
#   - fhinfo --check-env: the same rule (FH_CAF_FC and FH_ENV_KNOWN's names
#     pass, FH_REG_STRATEGEY fails naming FH_REG_STRATEGY).
. "$(dirname "$0")/errors_lib.sh"
probe=$(prog config_probe) || { echo "SKIP: config_probe not built"; exit 77; }
[ -x "$FHRUN" ] || { echo "SKIP: fhrun not built"; exit 77; }

warned() { grep -c "is not a firehose variable" "$out"; }

env FH_REG_STRATEGEY=bounce timeout 60 "$probe" >"$out" 2>&1
rc=$?
expect "FH_REG_STRATEGEY, 1 rank: one line suggesting FH_REG_STRATEGY, fh_init OK (status $rc)" \
    $([ $rc -eq 0 ] && [ "$(warned)" -eq 1 ] &&
      grep -q '^firehose\[0\]: FH_REG_STRATEGEY is not a firehose variable (did you mean FH_REG_STRATEGY?)' "$out"; echo $?)
for np in 2 3; do
    env FH_REG_STRATEGEY=bounce FH_SEGMENTS=everything FH_ZZZ_UNHEARD_OF=1 \
        timeout 60 "$FHRUN" -n $np --timeout 50 "$probe" >"$out" 2>&1
    rc=$?
    expect "3 unknown names, $np ranks: 3 lines, all from rank 0, job OK (saw $(warned), status $rc)" \
        $([ $rc -eq 0 ] && [ "$(warned)" -eq 3 ] &&
          [ "$(grep 'is not a firehose variable' "$out" | grep -vc '^firehose\[0\]')" -eq 0 ] &&
          grep -q 'FH_SEGMENTS is not a firehose variable (did you mean FH_SEGMENT?)' "$out"; echo $?)
done
env FH_CAF_FC=gfortran-12 FH_MYLIB_A=1 FH_OTHERLIB_B=2 FH_ENV_KNOWN="FH_MYLIB_A, FH_OTHERLIB_*" \
    timeout 60 "$FHRUN" -n 2 --timeout 50 "$probe" >"$out" 2>&1
rc=$?
expect "FH_CAF_FC, the launcher's variables and FH_ENV_KNOWN's names and prefix*: no line (saw $(warned), status $rc)" \
    $([ $rc -eq 0 ] && [ "$(warned)" -eq 0 ]; echo $?)

reg=$(prog env_register_test) || reg=
if [ -n "$reg" ]; then
    env FH_ERTEST_HEAP=1 FH_ERTEST_PFX_A=2 FH_ERTEST_HEAPP=3 FH_ERTEST_NOTKEPT=4 \
        timeout 60 "$reg" >"$out" 2>&1
    rc=$?
    expect "fh_env_register: its contract, and only the undeclared names are reported (status $rc)" \
        $([ $rc -eq 0 ] && [ "$(warned)" -eq 2 ] && grep -q 'FH_ERTEST_HEAPP is not' "$out" &&
          grep -q 'FH_ERTEST_NOTKEPT is not' "$out"; echo $?)
fi

if [ -x "$FHINFO" ]; then
    env FH_CAF_FC=gfortran FH_MYLIB_A=1 FH_ENV_KNOWN=FH_MYLIB_* "$FHINFO" --check-env >"$out" 2>&1
    rc=$?
    expect "fhinfo --check-env accepts FH_CAF_FC and FH_ENV_KNOWN's prefix (status $rc)" \
        $([ $rc -eq 0 ]; echo $?)
    env FH_REG_STRATEGEY=bounce "$FHINFO" --check-env >"$out" 2>&1
    rc=$?
    expect "fhinfo --check-env rejects FH_REG_STRATEGEY suggesting FH_REG_STRATEGY (status $rc)" \
        $([ $rc -eq 1 ] && grep -q 'did you mean FH_REG_STRATEGY' "$out"; echo $?)
fi
finish
