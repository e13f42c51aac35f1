#!/bin/sh
# reg_threads_test.sh -- runs reg_threads_test (4 threads per rank on
# overlapping buckets, working set 4 MiB = 4 x M) with FH_REG_STRATEGY=firehose,
# FH_FIREHOSE_M=1m, FH_FIREHOSE_MAXVICTIM=256k, FH_BUCKET_SIZE=64k, under
# tools/fhrun for every rank count in FH_TEST_NP (default 2 3 4 8) and every
# provider in FH_TEST_PROVIDERS (net shm) with FH_PATHS=independent, plus
# FH_PATHS=shared on 2 ranks, with FH_REG_CHECK=1 (the cache checks its
# invariants after every call).  The program checks every byte and its own
# fh_stats (misses, moves, evictions).  Then one timing run of the hit layer
# alone (--bench, 2 ranks): it prints ns/op and asserts nothing about time.
# FH_REG_THREADS_ITERS / FH_REG_BENCH_OPS override the operation counts.
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_REG_STRATEGY=firehose FH_FIREHOSE_M=1m FH_FIREHOSE_MAXVICTIM=256k
export FH_BUCKET_SIZE=64k FH_REG_CHECK=1
# Sanitizer builds (TSan runs this test in CI) are 10-50x slower: fewer ops.
iters=1000 bench=2000000
if bin=$(fh_bin reg_threads_test); then
    # (a libtool wrapper script runs .libs/<name>)
    case "$(ldd "$bin" "$(dirname "$bin")/.libs/reg_threads_test" 2>/dev/null)" in
        *libtsan*|*libasan*) iters=200 bench=100000 ;;
    esac
fi
iters=${FH_REG_THREADS_ITERS:-$iters}
bench=${FH_REG_BENCH_OPS:-$bench}
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    export FH_PATHS=independent
    for n in $NP_LIST; do
        run_np reg_threads_test "$n" --iters "$iters"
    done
    export FH_PATHS=shared
    run_np reg_threads_test 2 --iters "$iters"
    unset FH_PATHS
done
run_np reg_threads_test 2 --bench "$bench"
[ -f "${log:-}" ] && grep 'hit path' "$log"
finish
