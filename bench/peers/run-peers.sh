#!/bin/sh
# run-peers.sh -- firehose next to what a user might pick instead, on the
# same machine and transport, back to back, with the ratios.
#
#   bench/peers/run-peers.sh [--quick] [--builddir DIR] [--out DIR]
#
# For each transport (tcp over loopback, shared memory):
#   ours  fhbench latency (FH_REG_STRATEGY=firehose unless FHB_PEER_STRATEGY)
#         through the conduit (FH_SHM=off)
#   node  (shared memory only) fhbench latency with FH_SHM=auto: the two
#         ranks share their segments, puts are copies (firehose/node/)
#   raw   fhbench raw: the same loops directly on libfabric
#   ucx   ucx_perftest (Debian ucx-utils) ucp_put_lat -s 8, ucp_put_bw -s 64k
#         with UCX_TLS=tcp (UCX_NET_DEVICES=lo) or UCX_TLS=shm,self
#   mpi   bench/peers/mpi_rma_lat.c on Debian's Open MPI (MPI_Put +
#         MPI_Win_flush, passive target): tcp = osc pt2pt over btl tcp (lo);
#         shm = Open MPI's default one-node choice (osc sm)
# Everything runs in R rounds (2 with --quick, else 3), the four programs
# in turn within each round, so that a burst of load on the shared machine
# hits one round of everyone rather than all of one program.  Writes
# DIR/peers-rounds.csv (every round) and DIR/peers.csv (transport,who,
# put8_us,bw64k_mb_s,note: the best round of each, lowest latency and
# highest bandwidth; load only ever makes numbers worse), prints the ratios.
# A peer that is not installed is reported as skipped.
#
# Units: ucx_perftest's MB is 2^20 bytes (converted here to 10^6, as ours);
# its put latency is HALF a put ping-pong (one way), ours and MPI's are
# "put complete at the target" (a round trip); peers.csv has both.
#
# The node path (FH_SHM=auto, ranks of this machine sharing segments and
# AM rings; issue 27), in the same rounds, after the transports:
#   node    fhbench node -n 2: blocking put/get of 64 KiB, 256 KiB, 1 MiB,
#           4 MiB (MB/s) against a single-thread memcpy of the same size in
#           the same process (its per-round ratio), 8 B puts by source
#           memory and to ourselves against the same from the stack (its
#           per-round ratio; peer "stack"), and the AM short round trip
#           (us); fhbench barrier on 2, 4, 8 ranks (FHB_BARRIER_NP).
#   ucx     UCX_TLS=shm,self: ucp_put_bw and ucp_get (bandwidth, same
#           sizes, iterations scaled to the same bytes), ucp_am_lat -s 8
#           (one way: doubled here into a round trip).
#   mpi     bench/peers/mpi_barrier.c on the same rank counts (Open MPI's
#           one-node default, btl vader; --oversubscribe above 2 cores).
# Writes DIR/node-rounds.csv (round,who,metric,size,ranks,value: every
# round) and DIR/node.csv (metric,size,ranks,node,peer,who,ratio,rounds:
# the medians over rounds of each side and the median over rounds of the
# per-round ratio node / peer; for memcpy and stack the ratio is fhbench
# node's own in-process one), prints them; bench/ratios.sh holds the targets.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../csv.sh"
quick=0
builddir=
out=results
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=1 ;;
        --builddir) builddir=$2; shift ;;
        --out) out=$2; shift ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "usage: $0 [--quick] [--builddir DIR] [--out DIR]" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$builddir" ] || builddir=$(cd "$here/../.." && pwd)/_build
FHRUN=$builddir/tools/fhrun
FHBENCH=$builddir/bench/fhbench
[ -x "$FHBENCH" ] || { echo "run-peers: $FHBENCH not built" >&2; exit 1; }
mkdir -p "$out"
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_SOCKETS_IFACE=${FI_SOCKETS_IFACE:-lo}
# "ours" is the conduit over each provider, as the peers' transports are.
export FH_SHM=${FH_SHM:-off}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ $quick = 1 ]; then iters=200; ucx_n=2000; rounds=2; else iters=3000; ucx_n=20000; rounds=3; fi
strategy=${FHB_PEER_STRATEGY:-firehose}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fhpeers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

peers=$out/peers.csv
all=$out/peers-rounds.csv
echo "transport,who,round,put8_us,bw64k_mb_s,note" > "$all"
row() { echo "$1,$2,$round,$3,$4,$5" >> "$all"; }

# ucx_run TEST SIZE TLS [ITERS] -> "col3 col6" of ucx_perftest's Final
# line (the median latency in us, one way; the bandwidth in 2^20 B/s)
ucx_run() {
    port=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 10000 ))
    UCX_TLS=$3 UCX_NET_DEVICES=lo timeout -k 5 60 ucx_perftest -p "$port" \
        > "$tmp/ucx-server.log" 2>&1 &
    spid=$!
    sleep 0.5
    UCX_TLS=$3 UCX_NET_DEVICES=lo timeout -k 5 60 ucx_perftest 127.0.0.1 -p "$port" \
        -t "$1" -s "$2" -n "${4:-$ucx_n}" > "$tmp/ucx.log" 2>&1
    wait "$spid" 2>/dev/null
    awk '/^Final:/ { print $3, $6 }' "$tmp/ucx.log"
}

mpi_bin=
mpi_barrier=
if command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
    if mpicc -O2 -o "$tmp/mpi_rma_lat" "$here/mpi_rma_lat.c" 2>"$tmp/mpicc.log"; then
        mpi_bin=$tmp/mpi_rma_lat
    else
        echo "run-peers: mpicc failed:"; cat "$tmp/mpicc.log"
    fi
    if mpicc -O2 -o "$tmp/mpi_barrier" "$here/mpi_barrier.c" 2>"$tmp/mpicc.log"; then
        mpi_barrier=$tmp/mpi_barrier
    else
        echo "run-peers: mpicc failed:"; cat "$tmp/mpicc.log"
    fi
fi

# ---- the node path (FH_SHM=auto) and its peers, one round's worth --------
nodes=$out/node-rounds.csv
echo "round,who,metric,size,ranks,value" > "$nodes"
nrow() { [ -n "$5" ] && echo "$round,$1,$2,$3,$4,$5" >> "$nodes"; }
node_sizes="65536 262144 1048576 4194304"
barrier_np=${FHB_BARRIER_NP:-2 4 8}
# the conduit under the node path: shm where libfabric has it (the node
# series above uses it too), else tcp; node traffic does not touch it
node_prov=shm
if command -v fi_info >/dev/null 2>&1 && ! fi_info -p shm >/dev/null 2>&1; then node_prov=tcp; fi
if [ $quick = 1 ]; then nq=--quick; barrier_iters=500; else nq=; barrier_iters=5000; fi

# Each run's CSV is removed first: a run that fails adds no row to
# node-rounds.csv (never the numbers of an earlier run in the same DIR).
node_ours() {
    rm -f "$out/node-fh.csv"
    FH_SHM=auto FH_OFI_PROVIDER=$node_prov FH_REG_STRATEGY=$strategy timeout -k 5 300 "$FHRUN" -n 2 \
        "$FHBENCH" node $nq --csv "$out/node-fh.csv" > "$tmp/nodefh.log" 2>&1 ||
        { echo "run-peers: fhbench node failed"; cat "$tmp/nodefh.log"; return; }
    grep -q '^# node_path=yes' "$out/node-fh.csv" ||
        echo "run-peers: WARNING: fhbench node did not run on the node path (see $out/node-fh.csv)"
    for n in $node_sizes; do
        nrow node put_mb_s "$n" 2 "$(csv_get "$out/node-fh.csv" mb_s op copy_put size "$n")"
        nrow node get_mb_s "$n" 2 "$(csv_get "$out/node-fh.csv" mb_s op copy_get size "$n")"
        nrow memcpy copy_mb_s "$n" 2 "$(csv_get "$out/node-fh.csv" mb_s op copy_memcpy size "$n")"
        nrow node put_per_memcpy "$n" 2 "$(csv_get "$out/node-fh.csv" mb_s op copy_ratio_put size "$n")"
        nrow node get_per_memcpy "$n" 2 "$(csv_get "$out/node-fh.csv" mb_s op copy_ratio_get size "$n")"
    done
    nrow node am_rtt_us 8 2 "$(csv_get "$out/node-fh.csv" median_us op am_short_rtt size 8)"
    # 8 B puts by source memory, against the same put from the stack
    nrow stack put8_stack_us 8 2 "$(csv_get "$out/node-fh.csv" median_us op small_put_stack size 8)"
    for src in seg data heap self; do
        nrow node "put8_${src}_us" 8 2 "$(csv_get "$out/node-fh.csv" median_us op "small_put_$src" size 8)"
        nrow node "put8_${src}_per_stack" 8 2 "$(csv_get "$out/node-fh.csv" mb_s op "small_ratio_$src" size 8)"
    done
}

node_ucx() {
    for n in $node_sizes; do
        it=$(( ucx_n * 65536 / n )); [ "$it" -ge 100 ] || it=100
        for tst in ucp_put_bw:put_mb_s ucp_get:get_mb_s; do
            set -- $(ucx_run "${tst%%:*}" "$n" shm,self "$it")
            nrow ucx "${tst#*:}" "$n" 2 "$(awk -v b="${2:-}" 'BEGIN { if (b != "") printf "%.1f", b * 1.048576 }')"
        done
    done
    set -- $(ucx_run ucp_am_lat 8 shm,self)
    nrow ucx am_rtt_us 8 2 "$(awk -v l="${1:-}" 'BEGIN { if (l != "") printf "%.3f", 2 * l }')"
}

node_barrier() {
    np=$1
    rm -f "$out/node-barrier-np$np.csv"
    FH_SHM=auto FH_OFI_PROVIDER=$node_prov timeout -k 5 300 "$FHRUN" -n "$np" "$FHBENCH" barrier \
        --iters "$barrier_iters" --csv "$out/node-barrier-np$np.csv" > "$tmp/nodeb.log" 2>&1 ||
        { echo "run-peers: fhbench barrier -n $np failed"; cat "$tmp/nodeb.log"; return; }
    nrow node barrier_us 0 "$np" "$(csv_get "$out/node-barrier-np$np.csv" median_us op barrier)"
}

mpi_barrier_run() {
    np=$1
    timeout -k 5 120 mpirun -np "$np" --oversubscribe --mca osc ^rdma "$mpi_barrier" "$barrier_iters" \
        > "$out/mpi-barrier-np$np.csv" 2>"$tmp/mpib.log" ||
        { echo "run-peers: mpi_barrier -np $np failed"; tail -5 "$tmp/mpib.log"; return; }
    nrow mpi barrier_us 0 "$np" "$(csv_get "$out/mpi-barrier-np$np.csv" median_us op barrier)"
}

node_round() {
    echo "== node path (round $round of $rounds)"
    node_ours
    if command -v ucx_perftest >/dev/null 2>&1; then
        node_ucx
    else
        echo "run-peers: SKIP ucx (node path): ucx_perftest not installed (Debian ucx-utils)"
    fi
    for np in $barrier_np; do
        # ours and Open MPI back to back, the order alternating with the round
        if [ $(( round % 2 )) = 1 ] || [ -z "$mpi_barrier" ]; then
            node_barrier "$np"
            [ -n "$mpi_barrier" ] && mpi_barrier_run "$np"
        else
            mpi_barrier_run "$np"
            node_barrier "$np"
        fi
    done
    [ -n "$mpi_barrier" ] ||
        echo "run-peers: SKIP mpi barrier: mpicc/mpirun not installed (Debian libopenmpi-dev openmpi-bin)"
}

for round in $(seq "$rounds"); do
for t in tcp shm; do
    if command -v fi_info >/dev/null 2>&1 && ! fi_info -p "$t" >/dev/null 2>&1; then
        echo "run-peers: SKIP $t: libfabric provider not available"
        continue
    fi
    echo "== $t (round $round of $rounds)"
    # ours over TCP sockets is the default network provider (net, else tcp)
    prov=$t
    [ "$t" = tcp ] && prov=${FHB_NET_PROVIDER:-net,tcp}
    FH_OFI_PROVIDER=$prov FH_REG_STRATEGY=$strategy timeout -k 5 300 "$FHRUN" -n 2 "$FHBENCH" \
        latency --max-size 64k --iters "$iters" --csv "$out/peers-ours-$t.csv" \
        > "$tmp/ours.log" 2>&1 || { echo "run-peers: ours failed on $t"; cat "$tmp/ours.log"; }
    FH_OFI_PROVIDER=$t timeout -k 5 300 "$FHRUN" -n 2 "$FHBENCH" raw --max-size 64k \
        --iters "$iters" --csv "$out/peers-raw-$t.csv" > "$tmp/raw.log" 2>&1 ||
        { echo "run-peers: raw failed on $t"; cat "$tmp/raw.log"; }
    whos="ours raw"
    if [ $t = shm ]; then
        whos="ours node raw"
        FH_SHM=auto FH_OFI_PROVIDER=$t FH_REG_STRATEGY=$strategy timeout -k 5 300 "$FHRUN" -n 2 \
            "$FHBENCH" latency --max-size 64k --iters "$iters" \
            --csv "$out/peers-node-$t.csv" > "$tmp/node.log" 2>&1 ||
            { echo "run-peers: node failed"; cat "$tmp/node.log"; }
    fi
    for who in $whos; do
        case $who in
            ours) note="fhbench latency (FH_REG_STRATEGY=$strategy)" ;;
            node) note="fhbench latency, FH_SHM=auto (node path: shared segments)" ;;
            *) note="fhbench raw" ;;
        esac
        row "$t" "$who" "$(csv_get "$out/peers-$who-$t.csv" median_us op put size 8)" \
            "$(csv_get "$out/peers-$who-$t.csv" mb_s op put_nb_flood size 65536)" "$note"
    done
    if command -v ucx_perftest >/dev/null 2>&1; then
        tls=tcp; [ $t = shm ] && tls=shm,self
        set -- $(ucx_run ucp_put_lat 8 "$tls")
        lat1=${1:-}
        set -- $(ucx_run ucp_put_bw 65536 "$tls")
        bw=$(awk -v b="${2:-}" 'BEGIN { if (b != "") printf "%.1f", b * 1.048576 }')
        rt=$(awk -v l="$lat1" 'BEGIN { if (l != "") printf "%.3f", 2 * l }')
        row "$t" ucx "$rt" "$bw" "ucx_perftest UCX_TLS=$tls: put8 = 2 x ucp_put_lat (one-way)"
    else
        echo "run-peers: SKIP ucx: ucx_perftest not installed (Debian ucx-utils)"
    fi
    if [ -n "$mpi_bin" ]; then
        if [ $t = tcp ]; then
            mca="--mca osc pt2pt --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo"
            note="Open MPI osc pt2pt over btl tcp"
        else
            mca="--mca osc ^rdma"
            note="Open MPI default one-node RMA (osc sm)"
        fi
        # shellcheck disable=SC2086
        timeout -k 5 120 mpirun -np 2 $mca "$mpi_bin" "$iters" 65536 \
            > "$out/peers-mpi-$t.csv" 2>"$tmp/mpi.log" ||
            { echo "run-peers: mpi failed on $t"; tail -5 "$tmp/mpi.log"; }
        row "$t" mpi "$(csv_get "$out/peers-mpi-$t.csv" median_us op put size 8)" "" "$note"
    else
        echo "run-peers: SKIP mpi: mpicc/mpirun not installed (Debian libopenmpi-dev openmpi-bin)"
    fi
done
node_round
done

# The best round of each (transport, who).
awk -F, 'NR == 1 { print "transport,who,put8_us,bw64k_mb_s,note"; next }
    { k = $1 "," $2
      if (!(k in note)) { order[++n] = k; note[k] = $6 }
      if ($4 != "" && (lat[k] == "" || $4 + 0 < lat[k] + 0)) lat[k] = $4
      if ($5 != "" && (bw[k] == "" || $5 + 0 > bw[k] + 0)) bw[k] = $5 }
    END { for (i = 1; i <= n; i++) { k = order[i]; print k "," lat[k] "," bw[k] "," note[k] } }' \
    "$all" > "$peers"

echo
echo "8-byte blocking put latency (us) and 64 KiB put bandwidth (MB/s), best of $rounds rounds; ratio = ours / peer"
printf '%-5s %-5s %10s %10s %12s %12s\n' transport peer put8_us bw64k "lat ratio" "bw ratio"
for t in tcp shm; do
    o_lat=$(csv_get "$peers" put8_us transport "$t" who ours)
    o_bw=$(csv_get "$peers" bw64k_mb_s transport "$t" who ours)
    for who in raw ucx mpi; do
        l=$(csv_get "$peers" put8_us transport "$t" who "$who")
        b=$(csv_get "$peers" bw64k_mb_s transport "$t" who "$who")
        [ -n "$l$b" ] || continue
        printf '%-9s %-5s %10s %10s %12s %12s\n' "$t" "$who" "${l:--}" "${b:--}" \
            "$(ratio "$o_lat" "$l")" "$(ratio "$o_bw" "$b")"
    done
    printf '%-9s %-5s %10s %10s\n' "$t" ours "${o_lat:--}" "${o_bw:--}"
done
n_lat=$(csv_get "$peers" put8_us transport shm who node)
n_bw=$(csv_get "$peers" bw64k_mb_s transport shm who node)
if [ -n "$n_lat$n_bw" ]; then
    echo "node path (FH_SHM=auto), ratio = node / peer:"
    for who in ucx mpi; do
        l=$(csv_get "$peers" put8_us transport shm who "$who")
        b=$(csv_get "$peers" bw64k_mb_s transport shm who "$who")
        [ -n "$l$b" ] || continue
        printf '%-9s %-5s %10s %10s %12s %12s\n' shm "$who" "${l:--}" "${b:--}" \
            "$(ratio "$n_lat" "$l")" "$(ratio "$n_bw" "$b")"
    done
    printf '%-9s %-5s %10s %10s\n' shm node "${n_lat:--}" "${n_bw:--}"
fi

# The node path: medians over rounds and the per-round ratios' median.
# node.csv: metric,size,ranks,node,peer,who,ratio,rounds (ratio = node /
# peer; for who=memcpy, fhbench node's in-process per-round ratio; rounds =
# how many rounds had both sides).
awk -F, '
    function med(list,   n, v, i, j, t) {
        n = split(list, v, " ")
        for (i = 2; i <= n; i++) {
            t = v[i] + 0
            for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]
            v[j + 1] = t
        }
        return n == 0 ? "" : (n % 2) ? v[(n + 1) / 2] + 0 : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    function get(who, m, sz, np,   k) { k = who SUBSEP m SUBSEP sz SUBSEP np; return (k in vals) ? med(vals[k]) : "" }
    # ratio list of who against peer over the rounds where both ran
    function rounds_ratio(m, sz, np, peer, pm,   r, a, b, l) {
        l = ""; nr = 0
        if (pm == "") pm = m
        for (r = 1; r <= maxr; r++) {
            a = (r SUBSEP "node" SUBSEP m SUBSEP sz SUBSEP np) in one ? one[r, "node", m, sz, np] : ""
            b = (r SUBSEP peer SUBSEP pm SUBSEP sz SUBSEP np) in one ? one[r, peer, pm, sz, np] : ""
            if (a != "" && b != "" && b + 0 != 0) { l = l " " a / b; nr++ }
        }
        return l
    }
    function out(m, sz, np, peer, pm, ratio_list,   o, p, x, f) {
        if (pm == "") pm = m
        o = get("node", m, sz, np); p = get(peer, pm, sz, np)
        if (o == "" && p == "") return
        x = med(ratio_list); f = (m ~ /_us$/) ? "%.3f" : "%.1f"
        printf "%s,%s,%s,%s,%s,%s,%s,%d\n", m, sz, np, o == "" ? "" : sprintf(f, o),
            p == "" ? "" : sprintf(f, p), peer, x == "" ? "" : sprintf("%.3f", x), nr
    }
    NR == 1 { next }
    { k = $2 SUBSEP $3 SUBSEP $4 SUBSEP $5; vals[k] = vals[k] " " $6
      one[$1, $2, $3, $4, $5] = $6; if ($1 + 0 > maxr) maxr = $1 + 0
      if (!(($3 SUBSEP $4 SUBSEP $5) in seen)) { seen[$3, $4, $5] = 1; key[++nk] = $3 SUBSEP $4 SUBSEP $5 } }
    END {
        print "metric,size,ranks,node,peer,who,ratio,rounds"
        for (i = 1; i <= nk; i++) {
            split(key[i], x, SUBSEP); m = x[1]; sz = x[2]; np = x[3]
            if (m == "put_mb_s" || m == "get_mb_s") {
                # against memcpy: the in-process per-round ratios, per round
                pm = (m == "put_mb_s") ? "put_per_memcpy" : "get_per_memcpy"
                l = ""; nr = 0
                for (r = 1; r <= maxr; r++)
                    if ((r SUBSEP "node" SUBSEP pm SUBSEP sz SUBSEP np) in one) { l = l " " one[r, "node", pm, sz, np]; nr++ }
                out(m, sz, np, "memcpy", "copy_mb_s", l)
                out(m, sz, np, "ucx", "", rounds_ratio(m, sz, np, "ucx"))
            } else if (m ~ /^put8_[a-z]+_us$/ && m != "put8_stack_us") {
                # against the same put from the stack: the in-process per-round ratios
                pm = m; sub(/_us$/, "_per_stack", pm)
                l = ""; nr = 0
                for (r = 1; r <= maxr; r++)
                    if ((r SUBSEP "node" SUBSEP pm SUBSEP sz SUBSEP np) in one) { l = l " " one[r, "node", pm, sz, np]; nr++ }
                out(m, sz, np, "stack", "put8_stack_us", l)
            } else if (m == "am_rtt_us") {
                out(m, sz, np, "ucx", "", rounds_ratio(m, sz, np, "ucx"))
            } else if (m == "barrier_us") {
                out(m, sz, np, "mpi", "", rounds_ratio(m, sz, np, "mpi"))
            }
        }
    }' "$nodes" > "$out/node.csv"

echo
echo "node path (FH_SHM=auto): medians over $rounds rounds; ratio = node / peer, the median of the per-round ratios"
echo "(MB/s: > 1 node faster; us: < 1 node faster; memcpy: fhbench node's own paired ratio)"
printf '%-11s %8s %5s %11s %11s %-7s %7s\n' metric size ranks node peer peer ratio
awk -F, 'NR > 1 { printf "%-11s %8s %5s %11s %11s %-7s %7s\n", $1, $2, $3, ($4 == "" ? "-" : $4),
                        ($5 == "" ? "-" : $5), $6, ($7 == "" ? "n/a" : $7) }' "$out/node.csv"
