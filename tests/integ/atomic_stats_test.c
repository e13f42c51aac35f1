/*
 * atomic_stats_test.c -- the per-peer statistics are exact when several
 * threads count into them at once (issue 20, defect B).
 *
 * T threads (default 4) per rank each do K remote atomics to the next rank
 * (blocking fh_atomic FETCH_ADD, every fourth one fh_atomic_nb, the last
 * ones fh_atomic32) and blocking puts, all on one counter word of the
 * target.  Run with FH_PATHS=shared (every thread counts into the service
 * path's row) and independent.  Afterwards:
 *   - fh_stats_peer(next).atomics == T*K exactly, and puts == T*K/2
 *     (a lost update shows as a smaller count);
 *   - the target's counter == T*K*(its adds), so no atomic was lost either.
 * Usage: atomic_stats_test [--threads T] [--iters K]
 */
#include "testutil.h"

#include <pthread.h>

#define MAXT 16

static int me, N, T, next;
static long K;
static fh_seg_t seg;
static uint8_t **bases;

/* Layout of each rank's piece: [0] 64-bit counter, [8] 32-bit counter,
 * [64 + 64*i] put target of thread i. */
static void *worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    uint64_t *c64 = (uint64_t *)bases[next];
    uint32_t *c32 = (uint32_t *)(bases[next] + 8);
    uint8_t *pdst = bases[next] + 64 + 64 * (size_t)i;
    uint64_t buf = (uint64_t)i;
    for (long k = 0; k < K; k++) {
        if (k >= K - 4) {
            uint32_t old;
            CHECK_OK(fh_atomic32(next, c32, FH_AOP_FETCH_ADD, 1, 0, &old));
        } else if (k % 4 == 3) {
            uint64_t old;
            fh_handle_t h;
            CHECK_OK(fh_atomic_nb(next, c64, FH_AOP_FETCH_ADD, 1, 0, &old, &h));
            CHECK_OK(fh_wait(h));
        } else {
            uint64_t old;
            CHECK_OK(fh_atomic(next, c64, FH_AOP_FETCH_ADD, 1, 0, &old));
        }
        if (k % 2 == 0)
            CHECK_OK(fh_put(next, pdst, &buf, sizeof buf));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("atomic_stats_test");
    me = fh_rank();
    N = fh_nranks();
    next = (me + 1) % N;
    T = (int)tu_opt(argc, argv, "--threads", 4);
    if (T < 1) T = 1;
    if (T > MAXT) T = MAXT;
    K = tu_opt(argc, argv, "--iters", tu_scale(2000));
    if (K < 8) K = 8;
    void *lb;
    CHECK_OK(fh_segment_create(64 + 64 * MAXT, &seg, &lb));
    bases = calloc((size_t)N, sizeof *bases);
    for (int r = 0; r < N; r++)
        CHECK_OK(fh_segment_query(seg, r, (void **)&bases[r], NULL));
    fh_peer_stats_t before = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(next, &before));
    CHECK_OK(fh_barrier());
    const char *paths = getenv("FH_PATHS");
    TU_SAY("atomic_stats_test: %d ranks x %d threads x %ld atomics, FH_PATHS=%s\n", N, T,
           K, paths ? paths : "(default)");

    pthread_t th[MAXT];
    for (int i = 0; i < T; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0,
              "pthread_create", "thread %d", i);
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    CHECK_OK(fh_barrier());

    fh_peer_stats_t after = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(next, &after));
    uint64_t atomics = after.atomics - before.atomics;
    uint64_t puts = after.puts - before.puts;
    /* Operations on one's own rank are not counted (no peer). */
    uint64_t want_atomics = N > 1 ? (uint64_t)T * (uint64_t)K : 0;
    uint64_t want_puts = N > 1 ? (uint64_t)T * (uint64_t)((K + 1) / 2) : 0;
    TU_LOG("towards rank %d: atomics %" PRIu64 " (expected %" PRIu64 "), puts %" PRIu64
           " (expected %" PRIu64 ")\n", next, atomics, want_atomics, puts, want_puts);
    CHECK(atomics == want_atomics, "fh_stats_peer atomics", "towards rank %d: expected %"
          PRIu64 ", saw %" PRIu64, next, want_atomics, atomics);
    CHECK(puts == want_puts, "fh_stats_peer puts", "towards rank %d: expected %" PRIu64
          ", saw %" PRIu64, next, want_puts, puts);
    /* The own row sums the peers: with 2+ ranks only `next` got atomics. */
    fh_peer_stats_t total = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(me, &total));
    if (N > 1)
        CHECK(total.atomics == after.atomics, "fh_stats_peer total atomics",
              "expected %" PRIu64 ", saw %" PRIu64, after.atomics, total.atomics);

    /* The atomics themselves: our piece got T*K adds from the previous rank. */
    uint64_t c64 = __atomic_load_n((uint64_t *)bases[me], __ATOMIC_SEQ_CST);
    uint32_t c32 = __atomic_load_n((uint32_t *)(bases[me] + 8), __ATOMIC_SEQ_CST);
    CHECK(c64 == (uint64_t)T * (uint64_t)(K - 4), "64-bit counter", "expected %" PRIu64
          ", saw %" PRIu64, (uint64_t)T * (uint64_t)(K - 4), c64);
    CHECK(c32 == (uint32_t)(T * 4), "32-bit counter", "expected %u, saw %u",
          (unsigned)(T * 4), c32);
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("PASS atomic_stats_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
