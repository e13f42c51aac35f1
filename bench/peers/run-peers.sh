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

# ucx_final TEST SIZE TLS -> "col3 col6" of ucx_perftest's Final line
ucx_run() {
    port=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 10000 ))
    UCX_TLS=$3 UCX_NET_DEVICES=lo timeout -k 5 60 ucx_perftest -p "$port" \
        > "$tmp/ucx-server.log" 2>&1 &
    spid=$!
    sleep 0.5
    UCX_TLS=$3 UCX_NET_DEVICES=lo timeout -k 5 60 ucx_perftest 127.0.0.1 -p "$port" \
        -t "$1" -s "$2" -n "$ucx_n" > "$tmp/ucx.log" 2>&1
    wait "$spid" 2>/dev/null
    awk '/^Final:/ { print $3, $6 }' "$tmp/ucx.log"
}

mpi_bin=
if command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
    if mpicc -O2 -o "$tmp/mpi_rma_lat" "$here/mpi_rma_lat.c" 2>"$tmp/mpicc.log"; then
        mpi_bin=$tmp/mpi_rma_lat
    else
        echo "run-peers: mpicc failed:"; cat "$tmp/mpicc.log"
    fi
fi

for round in $(seq "$rounds"); do
for t in tcp shm; do
    if command -v fi_info >/dev/null 2>&1 && ! fi_info -p "$t" >/dev/null 2>&1; then
        echo "run-peers: SKIP $t: libfabric provider not available"
        continue
    fi
    echo "== $t (round $round of $rounds)"
    FH_OFI_PROVIDER=$t FH_REG_STRATEGY=$strategy timeout -k 5 300 "$FHRUN" -n 2 "$FHBENCH" \
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
