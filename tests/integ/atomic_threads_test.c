/*
 * atomic_threads_test.c -- "All atomics on one location are mutually
 * atomic, whichever rank (or thread) issues them, including the owner"
 * (include/firehose.h), with several threads of several ranks at once.
 *
 * T threads on every rank (rank 0, the owner, included) hammer four
 * locations in rank 0's segment at the same time, K rounds each:
 *   C   64-bit FETCH_ADD 1 (blocking; every third one fh_atomic_nb + fh_wait)
 *   D   32-bit FETCH_ADD 1, starting at 2^32 - 1000 (wraps), next to a
 *       32-bit sentinel in the same 8-byte word that must never change
 *   X   64-bit FETCH_XOR with a mask unique to (rank, thread, round)
 *   E   64-bit CSWAP increment (FETCH, then CSWAP until it succeeds)
 * Afterwards exactly: C = N*T*K, D = 2^32 - 1000 + N*T*K (mod 2^32),
 * X = the XOR of every mask, E = N*T*K/2, sentinel unchanged; and the
 * values fetched from C by all threads of all ranks are 0..N*T*K-1, each
 * exactly once (a lost or doubled update shows as a gap or a repeat).
 *
 * Usage: atomic_threads_test [--threads T] [--iters K]
 */
#include <pthread.h>

#include "testutil.h"

#define MAXT 16
#define D_START 0xfffffc18u    /* 2^32 - 1000 */
#define SENTINEL 0x600dcafeu

static int me, N, T;
static long K;
static uint64_t *words;        /* rank 0's piece: C, D|sentinel, X, E */
static uint64_t *fetched;      /* [T][K] this rank's values fetched from C */

static uint64_t mask_of(int rank, int thread, long k)
{
    return tu_mix64(((uint64_t)rank << 48) ^ ((uint64_t)thread << 32) ^ (uint64_t)k ^
                    0xa5a5a5a5ULL);
}

static void *worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    uint64_t *c = &words[0], *x = &words[2], *e = &words[3];
    uint32_t *d = (uint32_t *)&words[1];
    for (long k = 0; k < K; k++) {
        uint64_t *f = &fetched[(size_t)i * (size_t)K + (size_t)k];
        if (k % 3 == 2) {
            fh_handle_t h;
            CHECK_OK(fh_atomic_nb(0, c, FH_AOP_FETCH_ADD, 1, 0, f, &h));
            CHECK_OK(fh_wait(h));
        } else {
            CHECK_OK(fh_atomic(0, c, FH_AOP_FETCH_ADD, 1, 0, f));
        }
        uint32_t old32;
        CHECK_OK(fh_atomic32(0, d, FH_AOP_FETCH_ADD, 1, 0, &old32));
        uint64_t old;
        CHECK_OK(fh_atomic(0, x, FH_AOP_FETCH_XOR, mask_of(me, i, k), 0, &old));
        if (k % 2 == 0) {
            uint64_t seen;
            CHECK_OK(fh_atomic(0, e, FH_AOP_FETCH, 0, 0, &seen));
            for (;;) {
                CHECK_OK(fh_atomic(0, e, FH_AOP_CSWAP, seen + 1, seen, &old));
                if (old == seen)
                    break;
                seen = old;
            }
        }
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("atomic_threads_test");
    me = fh_rank();
    N = fh_nranks();
    T = (int)tu_opt(argc, argv, "--threads", 4);
    K = tu_scale(tu_opt(argc, argv, "--iters", 300));
    CHECK(T >= 1 && T <= MAXT, "--threads", "1..%d, saw %d", MAXT, T);
    fh_seg_t seg;
    void *lb;
    CHECK_OK(fh_segment_create(64, &seg, &lb));
    CHECK_OK(fh_segment_query(seg, 0, (void **)&words, NULL));
    if (me == 0) {
        uint32_t d[2] = {D_START, SENTINEL};   /* D is the low half */
        memcpy(&((uint64_t *)lb)[1], d, sizeof d);
    }
    fetched = calloc((size_t)T * (size_t)K, sizeof *fetched);
    CHECK(fetched != NULL, "calloc", "memory");
    CHECK_OK(fh_barrier());
    TU_SAY("atomic_threads_test: %d ranks x %d threads x %ld rounds on four words of "
           "rank 0\n", N, T, K);

    pthread_t th[MAXT];
    for (int i = 0; i < T; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0,
              "pthread_create", "0");
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    CHECK_OK(fh_barrier());

    uint64_t total = (uint64_t)N * (uint64_t)T * (uint64_t)K;
    if (me == 0) {
        uint64_t *w = lb;
        uint32_t d[2];
        memcpy(d, &w[1], sizeof d);
        uint64_t xw = 0;
        for (int r = 0; r < N; r++)
            for (int i = 0; i < T; i++)
                for (long k = 0; k < K; k++)
                    xw ^= mask_of(r, i, k);
        uint64_t ew = (uint64_t)N * (uint64_t)T * (uint64_t)((K + 1) / 2);
        CHECK(w[0] == total, "64-bit FETCH_ADD total", "%" PRIu64 ", saw %" PRIu64, total,
              w[0]);
        CHECK(d[0] == (uint32_t)(D_START + total), "32-bit FETCH_ADD total (wrapping)",
              "0x%08x, saw 0x%08x", (uint32_t)(D_START + total), d[0]);
        CHECK(d[1] == SENTINEL, "32-bit neighbour", "0x%08x untouched, saw 0x%08x",
              SENTINEL, d[1]);
        CHECK(w[2] == xw, "FETCH_XOR of every mask", "0x%016" PRIx64 ", saw 0x%016" PRIx64,
              xw, w[2]);
        CHECK(w[3] == ew, "CSWAP increments", "%" PRIu64 ", saw %" PRIu64, ew, w[3]);
    }
    /* The fetched values of C, from all threads of all ranks: a permutation. */
    size_t mine = (size_t)T * (size_t)K;
    uint64_t *all = malloc(mine * (size_t)N * sizeof *all);
    CHECK(all != NULL, "malloc", "memory");
    CHECK_OK(fh_allgather(fetched, all, mine * sizeof *fetched));
    if (me == 0) {
        qsort(all, mine * (size_t)N, sizeof *all, cmp_u64);
        for (uint64_t v = 0; v < total; v++)
            CHECK(all[v] == v, "values fetched from the FETCH_ADD counter",
                  "0..%" PRIu64 " each once; sorted position %" PRIu64 " = %" PRIu64
                  ", saw %" PRIu64 " (a lost or doubled update)", total - 1, v, v, all[v]);
        TU_SAY("atomic_threads_test: %" PRIu64 " updates per word exact, fetched values a "
               "permutation\n", total);
    }
    free(all);
    free(fetched);
    CHECK_OK(fh_finalize());
    TU_SAY("PASS atomic_threads_test\n");
    return 0;
}
