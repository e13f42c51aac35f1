#!/bin/sh
# local_conduit.sh -- FH_CONDUIT=local (conduits/local/): a job whose ranks
# are all on this host in one node group opens no network conduit, and
# everything still works through the node path; anywhere else the runtime
# makes auto's choice.
#   - node_local_test (every put/get form, atomics, fh_addr_local),
#     am_test (AMs through the rings), barrier_test and rma_integrity on 3
#     ranks with FH_CONDUIT=local;
#   - no rank loaded libfabric (LD_DEBUG=files names every library the
#     loader maps, dlopen included) and every rank logs the choice; the
#     control, FH_CONDUIT=auto, maps it;
#   - FH_SHM=off, and FH_SHM_MAX_GROUP=2 on 4 ranks (two groups): the job
#     runs on the network conduit and says why.
. "$(dirname "$0")/common.sh"
need_fhrun
FH_CONDUIT=local FH_SHM=auto; export FH_CONDUIT FH_SHM
run_np node_local_test 3 --group 3
run_np am_test 3
run_np barrier_test 3
run_np rma_integrity 3

# libfabric_loads DESC EXPECT(0|1) ENV...: a 2-rank node_local_test job;
# whether any rank's loader mapped libfabric, and the verbose choice.
libfabric_loads() {
    desc=$1; want=$2; shift 2
    ran=$((ran + 1))
    env "$@" FH_VERBOSE=1 LD_DEBUG=files timeout 120 "$FHRUN" -n 2 --timeout 60 \
        "$(fh_bin node_local_test)" --group 2 >"$tmpd/ld.log" 2>&1
    rc=$?
    n=$(grep -c 'file=libfabric\.so' "$tmpd/ld.log")
    got=$([ "$n" -gt 0 ] && echo 1 || echo 0)
    if [ $rc -eq 0 ] && [ "$got" = "$want" ] && grep -q '^PASS node_local_test' "$tmpd/ld.log"; then
        echo "ok   $desc (libfabric mapped: $got, as due)"
    else
        echo "FAIL $desc: status $rc, libfabric mapped $n time(s), expected $( [ "$want" = 1 ] && echo some || echo none)"
        grep -E 'FH_CONDUIT|FAIL|rror' "$tmpd/ld.log" | grep -v '^ *[0-9]*:' | head -10
        fail=$((fail + 1))
    fi
}
libfabric_loads "FH_CONDUIT=local: no rank loads libfabric" 0 FH_CONDUIT=local
c=$(grep -c 'FH_CONDUIT=local: no network conduit (every rank on this host)' "$tmpd/ld.log")
ran=$((ran + 1))
if [ "$c" -eq 2 ]; then echo "ok   both ranks log the choice"
else echo "FAIL expected 2 ranks to log 'FH_CONDUIT=local: no network conduit', saw $c"; fail=$((fail + 1)); fi
libfabric_loads "FH_CONDUIT=auto (control): the ofi conduit loads it" 1 FH_CONDUIT=auto

# Where the node path does not reach every rank: as auto, and why.
FH_SHM=off
run_np rma_integrity 2
ran=$((ran + 1))
if FH_VERBOSE=1 "$FHRUN" -n 2 --timeout 60 "$(fh_bin am_test)" >"$tmpd/off.log" 2>&1 &&
   [ "$(grep -c 'FH_CONDUIT=local: FH_SHM=off: as auto' "$tmpd/off.log")" -eq 2 ]; then
    echo "ok   FH_SHM=off: both ranks say so and take the network conduit"
else
    echo "FAIL FH_SHM=off: expected 2 ranks to log 'FH_CONDUIT=local: FH_SHM=off: as auto':"
    grep -E 'FH_CONDUIT|FAIL' "$tmpd/off.log" | head -5
    fail=$((fail + 1))
fi
FH_SHM=auto FH_SHM_MAX_GROUP=2; export FH_SHM_MAX_GROUP
run_np node_local_test 4 --group 2
finish
