#!/bin/sh
# tests/vm/pair.sh SERVER_CMD CLIENT_CMD -- run inside the VM: start a server
# command in the background, then its client; while the client fails only
# because the server is not listening yet ("Couldn't connect"), retry it
# (PAIR_TRIES times, default 60, 0.5 s apart).  Exit 0 iff both exit 0.
# Output is shown prefixed "server| " / "client| ".
srv=$1 cli=$2
tries=${PAIR_TRIES:-60}
out=/tmp/pair.$$
sh -c "$srv" > "$out.srv" 2>&1 &
spid=$!
i=0
while :; do
    sh -c "$cli" > "$out.cli" 2>&1
    cst=$?
    [ "$cst" -eq 0 ] && break
    if grep -q "connect" "$out.cli" && kill -0 "$spid" 2>/dev/null && [ "$i" -lt "$tries" ]; then
        i=$((i + 1))
        sleep 0.5
        continue
    fi
    break
done
if [ "$cst" -ne 0 ]; then
    kill "$spid" 2>/dev/null
fi
wait "$spid"
sst=$?
[ "$i" -gt 0 ] && echo "pair: client retried $i time(s) while the server started"
sed 's/^/server| /' "$out.srv"
sed 's/^/client| /' "$out.cli"
rm -f "$out.srv" "$out.cli"
echo "pair: server exit $sst, client exit $cst"
[ "$sst" -eq 0 ] && [ "$cst" -eq 0 ]
