#!/bin/sh
# config_mismatch.sh -- a setting that must be equal on all ranks (`fhinfo`:
# "Must be equal on all ranks") but differs between them ends fh_init on
# every rank with FH_ERR_CONFIG, fh_last_error() naming the variable, rank 0
# and a rank that differs with both values -- a clear error, not a hang or a
# protocol failure later (firehose/agree.c).
#   - FH_AM_CREDITS=8 on rank 2 of 3 (default 16 elsewhere): all 3 ranks
#     get the error naming rank 0 (16) and rank 2 (8); the job fails.
#   - FH_REG_STRATEGY=bounce on rank 1 of 2: the same for an enum.
#   - Equal values spelled differently (FH_AM_MAX_MEDIUM=4096 on rank 1,
#     4k elsewhere) agree: values are compared as parsed; fh_init FH_OK.
#   - A setting that may differ (FH_WAIT_SPIN=0 on rank 1): fh_init FH_OK.
#   - FH_OFI_PROVIDER=net,tcp (equal everywhere) where rank 1's libfabric
#     has no net (FI_PROVIDER=^net there): the list resolves to net on rank
#     0 and tcp on rank 1; both ranks get FH_ERR_CONFIG naming the other
#     rank and both providers (ofi_agree_provider), and the job fails.
#     Skipped when this libfabric has no net provider.
# fhrun passes one environment to every rank, so a one-line wrapper sets
# the variable from the rank's FH_RANK.  Every run is bounded (timeout).
. "$(dirname "$0")/common.sh"
need_fhrun
probe=$(fh_bin config_probe) || { echo "SKIP: config_probe not built"; exit 77; }
fhinfo=$(first_exe "${FHINFO:-}" "${top_builddir:+$top_builddir/tools/fhinfo}" \
    ./tools/fhinfo "$here/../../tools/fhinfo") || fhinfo=false
for v in $(env | sed -n 's/^\(FH_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export FH_OFI_PROVIDER=tcp
out="$tmpd/out"

# run NP RANK VAR=VALUE: the probe on NP ranks, VAR=VALUE on rank RANK only.
run() {
    timeout -k 10 120 "$FHRUN" -n "$1" --timeout 100 \
        sh -c '[ "$FH_RANK" = "$0" ] && export "$1"; shift; exec "$@"' \
        "$2" "$3" "$probe" >"$out" 2>&1
}

# mismatch DESC NP RANK VAR=VALUE DEFAULT
mismatch() {
    ran=$((ran + 1))
    run "$2" "$3" "$4"
    rc=$?
    var=${4%%=*}; val=${4#*=}
    want="fh_init: FH_ERR_CONFIG: fh_init: $var differs between ranks: rank 0 has $var=$5, rank $3 has $var=$val (it must be equal on all ranks)"
    c=$(grep -cxF "$want" "$out")
    if [ "$c" -eq "$2" ] && [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ]; then
        echo "ok   $1: all $2 ranks get FH_ERR_CONFIG naming $var, ranks 0 and $3 (status $rc)"
    else
        fail=$((fail + 1))
        echo "FAIL $1: expected all $2 ranks to print: $want"
        echo "     and the job to fail; saw $c such lines, exit status $rc"
        echo "---- output ----"; tail -n 20 "$out"; echo "----------------"
    fi
}

# agree DESC NP RANK VAR=VALUE
agree() {
    ran=$((ran + 1))
    run "$2" "$3" "$4"
    rc=$?
    c=$(grep -cx "fh_init: FH_OK" "$out")
    if [ "$c" -eq "$2" ] && [ "$rc" -eq 0 ]; then
        echo "ok   $1: fh_init FH_OK on all $2 ranks"
    else
        fail=$((fail + 1))
        echo "FAIL $1: expected fh_init FH_OK on all $2 ranks and status 0; saw $c, status $rc"
        echo "---- output ----"; tail -n 20 "$out"; echo "----------------"
    fi
}

mismatch "FH_AM_CREDITS=8 on rank 2 of 3" 3 2 FH_AM_CREDITS=8 16
mismatch "FH_REG_STRATEGY=bounce on rank 1 of 2" 2 1 FH_REG_STRATEGY=bounce firehose
agree "FH_AM_MAX_MEDIUM=4096 on rank 1 of 2 (4k elsewhere)" 2 1 FH_AM_MAX_MEDIUM=4096
agree "FH_WAIT_SPIN=0 on rank 1 of 2 (may differ)" 2 1 FH_WAIT_SPIN=0

if FH_OFI_PROVIDER=net "$fhinfo" --conduits 2>/dev/null | grep -q 'provider net'; then
    ran=$((ran + 1))
    FH_OFI_PROVIDER=net,tcp FH_SHM=off run 2 1 FI_PROVIDER=^net
    rc=$?
    a="fh_init: FH_ERR_CONFIG: fh_init: address exchange failed: ofi: FH_OFI_PROVIDER's list gave provider tcp on rank 1 and net here: their libfabrics differ; set FH_OFI_PROVIDER to one provider every host has"
    b="fh_init: FH_ERR_CONFIG: fh_init: address exchange failed: ofi: FH_OFI_PROVIDER's list gave provider net on rank 0 and tcp here: their libfabrics differ; set FH_OFI_PROVIDER to one provider every host has"
    if grep -qxF "$a" "$out" && grep -qxF "$b" "$out" && [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ]; then
        echo "ok   FH_OFI_PROVIDER=net,tcp resolving to net and tcp: both ranks get FH_ERR_CONFIG naming the other and both providers (status $rc)"
    else
        fail=$((fail + 1))
        echo "FAIL FH_OFI_PROVIDER=net,tcp resolving to net on rank 0 and tcp on rank 1: expected both ranks to print"
        echo "     $a"; echo "     $b"; echo "     and the job to fail (status $rc)"
        echo "---- output ----"; tail -n 20 "$out"; echo "----------------"
    fi
else
    echo "skip FH_OFI_PROVIDER=net,tcp resolving differently: this libfabric has no net provider"
fi
finish
