#!/bin/sh
# config_reject.sh -- every FH_* variable, with a value it cannot take, is
# refused with a message naming it (include/firehose.h: FH_ERR_CONFIG).
#   - The variables and their types come from `fhinfo` (the config table).
#     For each non-text variable a value its type cannot parse: fh_init in a
#     single rank (no launcher) returns FH_ERR_CONFIG and fh_last_error names
#     "NAME=value"; in a 2-rank fhrun job every rank does (or fhrun, for
#     the variables it reads itself, refuses naming it); `fhinfo
#     --check-env` exits 1 naming it.
#   - Free-text variables are checked where they are used: an unknown
#     FH_OFI_PROVIDER / FH_OFI_DOMAIN / FH_IBV_DEVICE (FH_CONDUIT=ibv) makes
#     fh_init return an error (it does not end the process: exit 3 from the
#     probe) whose fh_last_error names the variable and the value; `fhinfo --conduits` reports the conduit
#     unusable for the same reason.
#   - fhinfo --check-env: an unknown FH_ variable, and a value out of range,
#     exit 1 naming them; valid settings and the launcher's own variables
#     exit 0.
. "$(dirname "$0")/common.sh"
need_fhrun
probe=$(fh_bin config_probe) || { echo "SKIP: config_probe not built"; exit 77; }
fhinfo=$(first_exe "${FHINFO:-}" "${top_builddir:+$top_builddir/tools/fhinfo}" \
    ./tools/fhinfo "$here/../../tools/fhinfo") || { echo "SKIP: fhinfo not found"; exit 77; }
# A clean slate: no FH_* from the caller, no launcher (a single rank).
for v in $(env | sed -n 's/^\(FH_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export FH_OFI_PROVIDER=tcp

# expect DESC CONDITION-RESULT(0/1) [file to show]
expect() {
    ran=$((ran + 1))
    if [ "$2" -eq 0 ]; then echo "ok   $1"
    else
        fail=$((fail + 1)); echo "FAIL $1"
        [ -n "${3:-}" ] && { echo "---- output ----"; tail -n 20 "$3"; echo "----------------"; }
    fi
}

out="$tmpd/out"
n=0
for nt in $("$fhinfo" | awk '/^FH_/ { n = $1 } /^    type:/ { print n ":" $2 }'); do
    name=${nt%%:*}; type=${nt#*:}
    case $type in
        bool) bad=maybe ;; integer) bad=12x ;; size) bad=12q ;; enum) bad=no-such-choice ;;
        string) continue ;;
        *) expect "$name: known type (saw '$type')" 1; continue ;;
    esac
    n=$((n + 1))
    env "$name=$bad" timeout 60 "$probe" >"$out" 2>&1
    rc=$?
    grep -q "^fh_init: FH_ERR_CONFIG: fh_init: $name=$bad: " "$out"
    expect "$name=$bad: single rank: exit 3, FH_ERR_CONFIG naming it (status $rc)" \
        $([ $rc -eq 3 ] && grep -q "^fh_init: FH_ERR_CONFIG: fh_init: $name=$bad: " "$out"; echo $?) "$out"
    env "$name=$bad" timeout 60 "$FHRUN" -n 2 --timeout 50 "$probe" >"$out" 2>&1
    rc=$?
    c=$(grep -c "^fh_init: FH_ERR_CONFIG: fh_init: $name=$bad: " "$out")
    # fhrun reads some variables itself (FH_BOOT_TIMEOUT) and refuses first.
    grep -q "^fhrun: $name=$bad: " "$out" && c=launcher
    expect "$name=$bad: 2 ranks: both get FH_ERR_CONFIG (saw $c), job fails (status $rc)" \
        $({ [ "$c" = 2 ] || [ "$c" = launcher ]; } && [ $rc -ne 0 ]; echo $?) "$out"
    env "$name=$bad" "$fhinfo" --check-env >"$out" 2>&1
    rc=$?
    expect "$name=$bad: fhinfo --check-env exits 1 naming it (status $rc)" \
        $([ $rc -eq 1 ] && grep -q "$name=$bad" "$out"; echo $?) "$out"
done
expect "fhinfo lists typed variables (saw $n)" $([ "$n" -ge 20 ]; echo $?)

# free text, checked by the conduit: fh_init returns the error, not a crash
# and not an exit from inside it (tests/robust/init_errors.sh: many more)
text_case() {  # DESC PATTERN VAR=VALUE...
    desc=$1; pat=$2; shift 2
    env "$@" timeout 60 "$probe" >"$out" 2>&1
    rc=$?
    expect "$desc: fh_init returns an error naming the value (status $rc)" \
        $([ $rc -eq 3 ] && grep -Eq "^fh_init: FH_ERR_[A-Z_]*: .*($pat)" "$out"; echo $?) "$out"
}
text_case FH_OFI_PROVIDER=no-such-provider 'FH_OFI_PROVIDER=no-such-provider' FH_OFI_PROVIDER=no-such-provider
text_case FH_OFI_DOMAIN=no-such-domain 'FH_OFI_DOMAIN=no-such-domain' FH_OFI_DOMAIN=no-such-domain
text_case "FH_CONDUIT=ibv FH_IBV_DEVICE=no-such-device" \
    'FH_IBV_DEVICE=no-such-device|ibv: no RDMA device found' \
    FH_CONDUIT=ibv FH_IBV_DEVICE=no-such-device

# fhinfo --check-env on its own
FH_NO_SUCH_VARIABLE=1 "$fhinfo" --check-env >"$out" 2>&1
rc=$?
expect "fhinfo --check-env: unknown FH_NO_SUCH_VARIABLE exits 1 naming it (status $rc)" \
    $([ $rc -eq 1 ] && grep -q "FH_NO_SUCH_VARIABLE is not a firehose variable" "$out"; echo $?) "$out"
FH_AM_CREDITS=0 "$fhinfo" --check-env >"$out" 2>&1
rc=$?
expect "fhinfo --check-env: FH_AM_CREDITS=0 (out of range) exits 1 naming it (status $rc)" \
    $([ $rc -eq 1 ] && grep -q "FH_AM_CREDITS=0" "$out"; echo $?) "$out"
FH_AM_CREDITS=8 FH_STATS=yes FH_RANK=0 FH_NRANKS=1 FH_OFI_DOMAIN= FH_IBV_TD=shared \
    "$fhinfo" --check-env >"$out" 2>&1
rc=$?
expect "fhinfo --check-env: valid settings (conduits' included, FH_OFI_PROVIDER from above) and launcher variables exit 0 (status $rc)" \
    $([ $rc -eq 0 ] && grep -q "environment is valid (5 variables set)" "$out"; echo $?) "$out"
FH_IBV_PORT=256 "$fhinfo" --check-env >"$out" 2>&1
rc=$?
expect "fhinfo --check-env: FH_IBV_PORT=256 (a conduit's range) exits 1 naming it (status $rc)" \
    $([ $rc -eq 1 ] && grep -q "FH_IBV_PORT=256: expected 0..255" "$out"; echo $?) "$out"

# fhinfo --conduits: every conduit built in, its verdict and its variables
"$fhinfo" --conduits >"$out" 2>&1
rc=$?
expect "fhinfo --conduits: ofi usable over tcp, its variables listed (status $rc)" \
    $([ $rc -eq 0 ] && grep -q "^ofi$" "$out" && grep -q "^    usable" "$out" &&
      grep -q "^    FH_OFI_PROVIDER=tcp" "$out" && grep -q "^    FH_OFI_DOMAIN=" "$out"; echo $?) "$out"
FH_OFI_PROVIDER=no-such-provider "$fhinfo" --conduits >"$out" 2>&1
rc=$?
expect "fhinfo --conduits: FH_OFI_PROVIDER=no-such-provider: not usable, naming it (status $rc)" \
    $([ $rc -eq 0 ] &&
      grep -q "^    not usable: FH_OFI_PROVIDER=no-such-provider: " "$out"; echo $?) "$out"
FH_AM_CREDITS=8 timeout 60 "$probe" >"$out" 2>&1
rc=$?
expect "a valid setting: fh_init FH_OK in a single rank (status $rc)" \
    $([ $rc -eq 0 ] && grep -q "^fh_init: FH_OK" "$out"; echo $?) "$out"
finish
