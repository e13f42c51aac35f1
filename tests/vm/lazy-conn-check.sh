#!/bin/sh
# tests/vm/lazy-conn-check.sh -- guest side of the check-rxe test
# "lazy_conn": runs tests/integ/lazy_conn_test on N ranks (default 16) over
# FH_CONDUIT=ibv with FH_SHM=off and FH_VERBOSE=1, then checks each rank's
# exit line "ibv: connections: Q RC QPs; per peer rank (rank:QPs): r:n ..."
# (conduits/ibv/ibv_cm.c): every peer it names must be one the traffic
# needs -- the ring neighbours me +- 1 and the barrier partners me +- 2^k --
# and the right neighbour must be there.  A conduit that connects all
# pairs at init names all N - 1 peers and fails.  With "shared"
# (FH_PATHS=shared: one path, so service paths talk to each other, and the
# barrier's partners i and i + N/2 ask each other at once) every peer must
# also have exactly one QP: concurrent first use made one pair, not two.
# Each rank's exit line "ibv: CQs: X entries ... (sized for every peer: Y)"
# must have X < Y: the CQs grew with the connections.
#   usage (in /fh): tests/vm/lazy-conn-check.sh [N [shared]]
n=${1:-16}
paths=${2:-independent}
FH_PATHS=$paths FH_SHM=off FH_CONDUIT=ibv FH_VERBOSE=1 tools/fhrun -n "$n" --timeout 300 \
    tests/integ/lazy_conn_test > lclog 2>&1
st=$?
grep -v ": config FH_" lclog | grep -v "ibv: \(device\|limits\|GID\|pkey\|rxe\)" | tail -n 40
[ $st -eq 0 ] || { echo "FAIL lazy_conn: exit $st"; exit 1; }
grep -q "^PASS lazy_conn_test" lclog || { echo "FAIL lazy_conn: no PASS line"; exit 1; }
bad=0 seen=0
r=0
while [ $r -lt "$n" ]; do
    line=$(grep "^firehose\[$r\]: ibv: connections:" lclog)
    [ -n "$line" ] || { echo "FAIL lazy_conn: rank $r printed no connection line"; exit 1; }
    seen=$((seen + 1))
    ok=" "
    k=1
    while [ $k -lt "$n" ]; do
        ok="$ok$(( (r + k) % n )) $(( (r - k + n) % n )) "
        k=$((k * 2))
    done
    peers=$(echo "$line" | sed 's/.*(rank:QPs)://' | tr ' ' '\n' | sed -n 's/^\([0-9]*\):[0-9]*$/\1/p')
    np=0
    for p in $peers; do
        np=$((np + 1))
        case "$ok" in
        *" $p "*) ;;
        *) echo "FAIL lazy_conn: rank $r connected to rank $p, which it never talked to ($line)"; bad=1 ;;
        esac
    done
    echo "$peers" | grep -qx "$(( (r + 1) % n ))" ||
        { echo "FAIL lazy_conn: rank $r has no connection to its right neighbour ($line)"; bad=1; }
    if [ "$paths" = shared ] && echo "$line" | sed 's/.*(rank:QPs)://' | tr ' ' '\n' | grep ':' | grep -qv ':1$'; then
        echo "FAIL lazy_conn: rank $r has a peer with more than one QP on one path ($line)"; bad=1
    fi
    [ "$np" -lt $((n - 1)) ] ||
        { echo "FAIL lazy_conn: rank $r connected to all $np peers ($line)"; bad=1; }
    r=$((r + 1))
done
# The CQs grew with the connections (ibv_resize_cq on rxe): fewer entries
# than sizing each for every possible peer, on every rank.
r=0
while [ $r -lt "$n" ]; do
    line=$(grep "^firehose\[$r\]: ibv: CQs:" lclog)
    cqe=$(echo "$line" | sed -n 's/.* CQs: \([0-9]*\) entries .*every peer: \([0-9]*\)).*/\1/p')
    full=$(echo "$line" | sed -n 's/.* CQs: \([0-9]*\) entries .*every peer: \([0-9]*\)).*/\2/p')
    if [ -z "$cqe" ] || [ -z "$full" ] || [ "$cqe" -ge "$full" ]; then
        echo "FAIL lazy_conn: rank $r: CQs not smaller than sized for every peer ($line)"; bad=1
    fi
    r=$((r + 1))
done
[ $bad -eq 0 ] || exit 1
echo "PASS lazy_conn ($paths): $seen ranks, each connected only to peers it talked to, CQs grown with them"
grep "^firehose\[0\]: ibv: CQs:" lclog
grep "^firehose\[0\]: ibv: connections:" lclog
