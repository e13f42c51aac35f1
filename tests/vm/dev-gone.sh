#!/bin/sh
# tests/vm/dev-gone.sh -- guest side of the check-rxe test "dev_gone": the
# device goes away under a running job, and nobody may hang.  Rank 0 on
# rxe0, rank 1 on rxe1, tests/integ/dev_gone_test putting and getting
# 64 KiB to each other; once traffic flows, `rdma link delete rxe1`, then
# the network device under it goes (`ip link delete veth1`, which takes
# veth0 too).  rxe cannot take its device from a process that has it open
# (it has no disassociate_ucontext: `rdma link delete` waits until the
# job's contexts close), so its queue pairs fail only once their netdev is
# gone.  Checks: the job ends by itself (not by its --bound alarm, not by
# fhrun's timeout) with a non-zero status; each rank either reported a
# failed call (exit 70, "[r] dev_gone: fh_put|fh_get returned FH_ERR_...")
# or was ended by the launcher; a conduit error line names the peer rank;
# and the pending `rdma link delete` returns once the job is gone (the
# ranks released the device).  Breaks the VM's network for later tests:
# run it last.
#   usage (in /fh): tests/vm/dev-gone.sh
up() { cut -d' ' -f1 /proc/uptime; }
FH_SHM=off FH_CONDUIT=ibv FH_IBV_DEVICE=rxe0,rxe1 tools/fhrun -n 2 --timeout 120 \
    tests/integ/dev_gone_test --bound 60 > dglog 2>&1 &
job=$!
i=0
while [ $i -lt 600 ] && ! grep -q "traffic flowing" dglog; do
    kill -0 $job 2>/dev/null || break
    sleep 0.1; i=$((i + 1))
done
grep -q "traffic flowing" dglog || { cat dglog; echo "FAIL dev_gone: no traffic"; exit 1; }
/usr/bin/rdma link delete rxe1 > rdlog 2>&1 &
del=$!
sleep 1
kill -0 $job 2>/dev/null && echo "dev_gone: rdma link delete rxe1 pending, job still running (rxe waits for its users)"
t0=$(up)
/usr/sbin/ip link delete veth1
wait $job
st=$?
t1=$(up)
grep -v ": config FH_" dglog | tail -n 20
echo "dev_gone: job ended with status $st, $t0 -> $t1 s (uptime) after the netdev went"
fail=0
case $st in
    0) echo "FAIL dev_gone: the job passed although its device went away"; fail=1 ;;
    143|124) echo "FAIL dev_gone: the job had to be killed (status $st)"; fail=1 ;;
esac
if grep -q "FAIL dev_gone: stuck" dglog; then
    echo "FAIL dev_gone: a rank hung in a call"; fail=1
fi
grep -q "^\[[01]\] dev_gone: fh_\(put\|get\) returned FH_ERR_" dglog ||
    { echo "FAIL dev_gone: no rank saw an error from its call"; fail=1; }
grep -q "^firehose\[[01]\]: ibv: rank [01]: .*failed" dglog ||
    { echo "FAIL dev_gone: no error line of the conduit names the peer"; fail=1; }
i=0
while [ $i -lt 300 ] && kill -0 $del 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
if kill -0 $del 2>/dev/null; then
    echo "FAIL dev_gone: rdma link delete rxe1 still waits 30 s after the job ended"
    kill $del; fail=1
else
    wait $del; echo "dev_gone: rdma link delete rxe1 returned $? after the job"
fi
[ $fail -eq 0 ] && echo "PASS dev_gone"
exit $fail
