#!/bin/sh
# after_finalize.sh -- issue 29 class 6: every public call before fh_init
# and after fh_finalize returns FH_ERR_NOT_INIT naming itself, and
# fh_last_error() never shows an earlier call's message
# (after_finalize_test.c says what exactly), on 1 rank and on 2.
. "$(dirname "$0")/errors_lib.sh"
bin=$(prog after_finalize_test) || { echo "SKIP: after_finalize_test not built"; exit 77; }
timeout 60 "$bin" >"$out" 2>&1
rc=$?
expect "1 rank: every call in every state (status $rc)" \
    $([ $rc -eq 0 ] && grep -q '^ok: 0 of' "$out"; echo $?)
if [ -x "$FHRUN" ]; then
    timeout 60 "$FHRUN" -n 2 --timeout 50 "$bin" >"$out" 2>&1
    rc=$?
    expect "2 ranks: every call in every state (status $rc)" \
        $([ $rc -eq 0 ] && [ "$(grep -c '^ok: 0 of' "$out")" -eq 2 ]; echo $?)
fi
finish
