#!/bin/sh
# rankcost.sh -- what a rank (and a coarray image) costs, for the tables of
# docs/design.md ("What a rank costs") and docs/caf.md ("What an image
# costs").  Run from a build directory:
#
#   ../bench/rankcost.sh [--ranks "2 4 8 16"] [--threads "1 2 16"] [--rounds 3] [--caf]
#
# Per rank: bench/fhrankcost under tools/fhrun (an empty job: fh_init, a
# barrier, fh_finalize; T = FH_MAX_THREADS threads per rank each make one
# call, so each has its path) for each rank count and T, printing the
# mean resident memory, file descriptors, threads, /dev/shm files, fh_init's
# time and the job's wall time (median over the rounds).  --caf: an empty
# coarray program (bench/caf/imagecost.f90) under caf/cafrun and under
# OpenCoarrays (cafrun.openmpi), rounds interleaved, medians.
set -u
ranks="2 4 8 16"; threads="1 2 16"; rounds=3; caf=0
while [ $# -gt 0 ]; do
    case $1 in
        --ranks) ranks=$2; shift ;;
        --threads) threads=$2; shift ;;
        --rounds) rounds=$2; shift ;;
        --caf) caf=1 ;;
        *) echo "usage: $0 [--ranks LIST] [--threads LIST] [--rounds N] [--caf]" >&2; exit 2 ;;
    esac
    shift
done
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
median() { sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "-")}'; }
field() { awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) print $(i+1)}'; }
wall() {  # wall seconds of "$@", its stdout appended to $tmp/out
    t0=$(date +%s.%N); "$@" >>"$tmp/out" 2>>"$tmp/err"; t1=$(date +%s.%N)
    echo "$t0 $t1" | awk '{printf "%.2f\n", $2 - $1}'
}
echo "| ranks | threads calling in (= FH_MAX_THREADS) | RSS/rank MiB | anon MiB | fds/rank | threads/rank | /dev/shm files | fh_init s | job wall s |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in $ranks; do
    for t in $threads; do
        : >"$tmp/out"; : >"$tmp/w"
        for r in $(seq "$rounds"); do
            FH_MAX_THREADS=$t wall tools/fhrun -n "$n" bench/fhrankcost "$t" >>"$tmp/w"
        done
        m() { field "$1" <"$tmp/out" | median; }
        echo "| $n | $t | $(m rss_mib) | $(m anon_mib) | $(m fds) | $(m threads) | $(m devshm_files) | $(m init_max_s) | $(median <"$tmp/w") |"
    done
done
[ "$caf" = 1 ] || exit 0
command -v cafrun.openmpi >/dev/null || { echo "no cafrun.openmpi: OpenCoarrays column skipped" >&2; exit 0; }
export OMPI_MCA_rmaps_base_oversubscribe=1
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
caf/caf "$src/bench/caf/imagecost.f90" -o "$tmp/ic_fh" || exit 1
caf.openmpi "$src/bench/caf/imagecost.f90" -o "$tmp/ic_oc" 2>/dev/null || exit 1
echo
echo "| images | ours: RSS/image MiB | fds | threads | start+end s | OpenCoarrays: RSS/image MiB | fds | threads | start+end s |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in $ranks; do
    : >"$tmp/wf"; : >"$tmp/wo"; : >"$tmp/of"; : >"$tmp/oo"
    for r in $(seq "$rounds"); do
        : >"$tmp/out"; wall caf/cafrun -n "$n" "$tmp/ic_fh" >>"$tmp/wf"; cat "$tmp/out" >>"$tmp/of"
        : >"$tmp/out"; wall cafrun.openmpi -n "$n" "$tmp/ic_oc" >>"$tmp/wo"; cat "$tmp/out" >>"$tmp/oo"
    done
    mf() { field "$1" <"$tmp/$2" | median; }
    rf=$(field rss_kb <"$tmp/of" | median | awk '{printf "%.1f", $1 / 1024}')
    ro=$(field rss_kb <"$tmp/oo" | median | awk '{printf "%.1f", $1 / 1024}')
    echo "| $n | $rf | $(mf fds of) | $(mf threads of) | $(median <"$tmp/wf") | $ro | $(mf fds oo) | $(mf threads oo) | $(median <"$tmp/wo") |"
done
