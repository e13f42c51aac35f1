#!/bin/sh
# init_errors.sh -- issue 29 classes 4 and 6: fh_init never ends the
# process, and says why it failed (include/firehose.h, fh_init).
# For every way to fail we know (an unknown FH_OFI_PROVIDER, an unknown
# FH_OFI_DOMAIN, FH_CONDUIT=ibv without a device, a bad value, more
# addresses than the shm provider holds, a libfabric that cannot be loaded:
# conduits/ofi/ofi_dl.h), in a 2-rank fhrun job (and in one rank, by
# init_retry_test at the end):
#   - every rank's fh_init returns (config_probe prints the code and
#     fh_last_error() and exits 3: a status 1 or 70 means fh_init exited);
#   - fh_last_error() names the setting (a bogus FH_OFI_DOMAIN is "no such
#     domain", not "no such provider"; the shm limit names the settings
#     that avoid it);
#   - fhrun says "rank N ... failed in fh_init: <reason>" and "exited with
#     status 3 after its fh_init failed", never "after fh_finalize", nobody
#     says "aborting", and fhrun exits 3.
# And one rank of 3 failing alone: it returns its reason, the two others'
# fh_init returns FH_ERR_BOOTSTRAP naming that rank and its reason (no
# status 70), fhrun names it.  Then init_retry_test, one rank: each of
# these failures returns naming its setting, the process goes on, and
# fh_init called again without the setting works (segment, put, barrier).
. "$(dirname "$0")/errors_lib.sh"
probe=$(prog config_probe) || { echo "SKIP: config_probe not built"; exit 77; }
[ -x "$FHRUN" ] || { echo "SKIP: fhrun not built"; exit 77; }

# check_job DESC NRANKS PATTERN: $out of a job every rank of which failed.
check_job() {
    n=$(grep -Ec "^fh_init: FH_ERR_[A-Z_]+: .*($3)" "$out")
    expect "$1: $2 ranks: each fh_init returned naming it (saw $n of $2), fhrun status 3 ($rc)" \
        $([ "$n" -eq "$2" ] && [ "$rc" -eq 3 ]; echo $?)
    expect "$1: fhrun names the failure and no rank aborted" \
        $(grep -Eq "^fhrun: rank [0-9]+ \(pid [0-9]+\) failed in fh_init: .*($3)" "$out" &&
          [ "$(grep -c 'exited with status 3 after its fh_init failed' "$out")" -eq "$2" ] &&
          ! grep -Eq 'after fh_finalize|aborting|status 70' "$out"; echo $?)
}

# case DESC PATTERN VAR=VALUE...: a 2-rank job (init_retry_test below
# makes the same failures in one rank, with a retry after each).
case_() {
    desc=$1; pat=$2; shift 2
    env "$@" timeout 60 "$FHRUN" -n 2 --timeout 50 "$probe" >"$out" 2>&1
    rc=$?
    check_job "$desc" 2 "$pat"
}

case_ FH_OFI_PROVIDER=no-such-provider 'FH_OFI_PROVIDER=no-such-provider' \
    FH_OFI_PROVIDER=no-such-provider
case_ FH_OFI_DOMAIN=no-such-domain 'FH_OFI_DOMAIN=no-such-domain: provider [a-z;_]+ has no such domain' \
    FH_OFI_DOMAIN=no-such-domain
expect "FH_OFI_DOMAIN=no-such-domain: not called a missing provider" \
    $(! grep -q 'no such provider' "$out"; echo $?)
case_ FH_MAX_THREADS=-1 'FH_MAX_THREADS=-1' FH_MAX_THREADS=-1
if "$FHINFO" --conduits 2>/dev/null | grep -A1 '^ibv$' | grep -q 'not usable'; then
    case_ "FH_CONDUIT=ibv without a device" 'ibv' FH_CONDUIT=ibv
    no_ibv=1
else
    echo "note: an RDMA device is usable here: FH_CONDUIT=ibv cannot fail"
    no_ibv=
fi
# shm's address vector: 2 ranks x 201 paths > 256
env FH_OFI_PROVIDER=shm FH_MAX_THREADS=200 timeout 60 "$FHRUN" -n 2 --timeout 50 \
    "$probe" >"$out" 2>&1
rc=$?
check_job "shm, 2 ranks x 201 paths" 2 'at most 256: set FH_PATHS=shared'

# libfabric is loaded when the ofi conduit opens: a file that is no
# library, found first, must fail fh_init with the loader's reason.
printf 'not a library\n' >"$tmpd/libfabric.so.1"
case_ "libfabric cannot be loaded" 'cannot load libfabric\.so\.1: .*libfabric\.so\.1' \
    LD_LIBRARY_PATH="$tmpd${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# One rank of three fails alone (an environment only it has).
cat >"$tmpd/rank1" <<'W'
#!/bin/sh
[ "$FH_RANK" = 1 ] && export FH_OFI_PROVIDER=no-such-provider
exec "$@"
W
chmod +x "$tmpd/rank1"
timeout 60 "$FHRUN" -n 3 --timeout 50 "$tmpd/rank1" "$probe" >"$out" 2>&1
rc=$?
n=$(grep -Ec '^fh_init: FH_ERR_BOOTSTRAP: .*rank 1 \(pid [0-9]+\) failed in fh_init: .*no-such-provider' "$out")
expect "rank 1 of 3 fails: ranks 0 and 2 return FH_ERR_BOOTSTRAP naming it and why (saw $n of 2)" \
    $([ "$n" -eq 2 ]; echo $?)
check_job "rank 1 of 3 fails" 3 'no-such-provider|rank 1 \(pid'

retry=$(prog init_retry_test) || retry=
if [ -n "$retry" ]; then
    INIT_RETRY_NO_IBV=$no_ibv timeout 60 "$retry" tcp >"$out" 2>&1
    rc=$?
    [ -n "$no_ibv" ] || unset INIT_RETRY_NO_IBV
    expect "init_retry_test: fh_init retried after each failure works (status $rc)" \
        $([ $rc -eq 0 ] && grep -q '^ok: 0 of' "$out"; echo $?)
fi
finish
