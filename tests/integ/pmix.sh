#!/bin/sh
# pmix.sh -- rma_integrity and am_test with 4 ranks started by Open MPI's
# mpirun (PMIx bootstrap instead of fhrun).  Skips (77) when mpirun is missing
# or firehose was built without PMIx.  Checks that the ranks really formed one
# 4-rank job (not 4 singletons).
. "$(dirname "$0")/common.sh"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }

pmix=no
for lib in "${top_builddir:+$top_builddir/.libs/libfirehose.so}" \
           ./.libs/libfirehose.so ../../.libs/libfirehose.so; do
    if [ -n "$lib" ] && [ -f "$lib" ]; then
        ldd "$lib" 2>/dev/null | grep -q pmix && pmix=yes
        break
    fi
done
FHINFO=${FHINFO:-${top_builddir:+$top_builddir/tools/fhinfo}}
if [ $pmix = no ] && [ -n "$FHINFO" ] && [ -x "$FHINFO" ] &&
   "$FHINFO" 2>/dev/null | grep -iq '^ *launchers:.*pmix'; then
    pmix=yes
fi
[ $pmix = yes ] || { echo "SKIP: firehose built without PMIx"; exit 77; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for prog in rma_integrity am_test; do
        bin=$(fh_bin $prog) || { echo "SKIP: $prog not built"; continue; }
        case $prog in rma_integrity) args="--iters 4";; *) args="--msgs 300";; esac
        before=$fail
        run_case "mpirun -np 4 $prog FH_OFI_PROVIDER=$p" "$prog" \
            mpirun --oversubscribe -np 4 --mca osc ^rdma -x FH_OFI_PROVIDER \
            "$bin" $args
        if [ "$fail" -eq "$before" ] && ! grep -q "^$prog: 4 ranks" "$tmpd/run.log"; then
            fail=$((fail + 1))
            echo "FAIL mpirun -np 4 $prog: expected the line '$prog: 4 ranks"\
                 "...' (one job), saw:"
            grep -E "^$prog: " "$tmpd/run.log" | head -5
        fi
    done
done
finish
