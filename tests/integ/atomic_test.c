/*
 * atomic_test.c -- remote atomics.
 *
 *   sum: every rank FETCH_ADDs 1 ITER times to a counter on every rank (self
 *     included, interleaved); each counter ends at N*ITER, and the values
 *     fetched from rank 0's counter by all ranks (fh_allgather) are exactly
 *     0..N*ITER-1, each once.
 *   lock: a CSWAP spin lock on rank 0 protects a plain get/+1/put of a word
 *     on rank 0 (not atomic by itself): the final value is N*LOCKITER and the
 *     lock word never shows a foreign owner on release (SWAP returns me).
 *   semantics: FETCH, SET, SWAP, CSWAP (hit and miss), FETCH_AND/OR/XOR and
 *     FETCH_ADD with wrap-around, fetched == NULL, on the next rank and self.
 *   errors: misaligned targets -> FH_ERR_ALIGN, op out of range ->
 *     FH_ERR_INVALID, targets outside the segment -> FH_ERR_OUT_OF_SEGMENT;
 *     nothing changes.
 *
 * Usage: atomic_test [--iters N]
 */
#include "testutil.h"

static int me, N;
static uint64_t **bases;       /* word arrays */

enum { W_COUNT = 0, W_LOCK = 1, W_DATA = 2, W_SEM = 8 /* + rank */ };

static uint64_t aop(int t, uint64_t *target, fh_atomic_op_t op, uint64_t v,
                    uint64_t cmp, const char *what)
{
    uint64_t f = 0xdeadbeefcafef00dULL;
    int rc = fh_atomic(t, target, op, v, cmp, &f);
    CHECK(rc == FH_OK, what, "fh_atomic(rank %d, op %d): expected FH_OK, saw "
          "%s [%s]", t, (int)op, fh_err_name(rc), fh_last_error());
    return f;
}

static void semantics(int t)
{
    uint64_t *w = &bases[t][W_SEM + me];
    char what[64];
    snprintf(what, sizeof what, "semantics on rank %d", t);
#define EXPECT(got, exp, desc) CHECK((got) == (exp), what, "%s: expected "     \
        "0x%" PRIx64 ", saw 0x%" PRIx64, desc, (uint64_t)(exp), (uint64_t)(got))
    uint64_t a = 0x0123456789abcdefULL, b = 0xfedcba9876543210ULL;
    aop(t, w, FH_AOP_SET, a, 0, what);
    EXPECT(aop(t, w, FH_AOP_FETCH, 0, 0, what), a, "FETCH after SET");
    EXPECT(aop(t, w, FH_AOP_SWAP, b, 0, what), a, "SWAP returns old");
    EXPECT(aop(t, w, FH_AOP_FETCH, 0, 0, what), b, "value after SWAP");
    EXPECT(aop(t, w, FH_AOP_CSWAP, 7, a, what), b, "CSWAP miss returns old");
    EXPECT(aop(t, w, FH_AOP_FETCH, 0, 0, what), b, "CSWAP miss leaves value");
    EXPECT(aop(t, w, FH_AOP_CSWAP, 7, b, what), b, "CSWAP hit returns old");
    EXPECT(aop(t, w, FH_AOP_FETCH, 0, 0, what), 7, "CSWAP hit stores");
    aop(t, w, FH_AOP_SET, 0xff00ff00ff00ff00ULL, 0, what);
    EXPECT(aop(t, w, FH_AOP_FETCH_AND, 0x0ff00ff00ff00ff0ULL, 0, what),
           0xff00ff00ff00ff00ULL, "FETCH_AND returns old");
    EXPECT(aop(t, w, FH_AOP_FETCH, 0, 0, what), 0x0f000f000f000f00ULL,
           "AND result");
    EXPECT(aop(t, w, FH_AOP_FETCH_OR, 0x00000000000000ffULL, 0, what),
           0x0f000f000f000f00ULL, "FETCH_OR returns old");
    EXPECT(aop(t, w, FH_AOP_FETCH, 0, 0, what), 0x0f000f000f000fffULL,
           "OR result");
    EXPECT(aop(t, w, FH_AOP_FETCH_XOR, 0xffffffffffffffffULL, 0, what),
           0x0f000f000f000fffULL, "FETCH_XOR returns old");
    EXPECT(aop(t, w, FH_AOP_FETCH, 0, 0, what), 0xf0fff0fff0fff000ULL,
           "XOR result");
    aop(t, w, FH_AOP_SET, UINT64_MAX - 1, 0, what);
    EXPECT(aop(t, w, FH_AOP_FETCH_ADD, 3, 0, what), UINT64_MAX - 1,
           "FETCH_ADD returns old");
    EXPECT(aop(t, w, FH_AOP_FETCH, 0, 0, what), 1, "FETCH_ADD wraps");
    EXPECT(aop(t, w, FH_AOP_FETCH_ADD, (uint64_t)-5, 0, what), 1,
           "FETCH_ADD of -5 returns old");
    EXPECT(aop(t, w, FH_AOP_FETCH, 0, 0, what), (uint64_t)-4,
           "signed add (two's complement)");
    /* fetched NULL for ops whose old value is not wanted */
    CHECK_OK(fh_atomic(t, w, FH_AOP_SET, 100, 0, NULL));
    CHECK_OK(fh_atomic(t, w, FH_AOP_FETCH_ADD, 5, 0, NULL));
    CHECK_OK(fh_atomic(t, w, FH_AOP_SWAP, 200, 0, NULL));
    EXPECT(aop(t, w, FH_AOP_FETCH, 0, 0, what), 200,
           "SET 100, ADD 5, SWAP 200 with fetched=NULL");
    /* atomics and a plain get agree once complete */
    uint64_t g = 0;
    CHECK_OK(fh_get(&g, t, w, 8));
    EXPECT(g, 200, "fh_get of an atomically written word");

    /* errors */
    uint64_t before = aop(t, w, FH_AOP_FETCH, 0, 0, what);
    for (int m = 1; m < 8; m++) {
        uint64_t f = 0;
        uint64_t *mis = (uint64_t *)((char *)w + m);
        CHECK_RC(fh_atomic(t, mis, FH_AOP_FETCH_ADD, 1, 0, &f), FH_ERR_ALIGN);
        CHECK_RC(fh_atomic(t, mis, FH_AOP_SET, 1, 0, NULL), FH_ERR_ALIGN);
    }
    CHECK_RC(fh_atomic(t, w, FH_AOP__COUNT, 1, 0, &g), FH_ERR_INVALID);
    CHECK_RC(fh_atomic(t, w, (fh_atomic_op_t)-1, 1, 0, &g), FH_ERR_INVALID);
    CHECK_RC(fh_atomic(t, w, (fh_atomic_op_t)1000, 1, 0, &g), FH_ERR_INVALID);
    CHECK_RC(fh_atomic(t, bases[t] - 1 * 1, FH_AOP_SET, 1, 0, NULL),
             FH_ERR_OUT_OF_SEGMENT);
    CHECK_RC(fh_atomic(t, bases[t] + 512, FH_AOP_SET, 1, 0, NULL),
             FH_ERR_OUT_OF_SEGMENT);        /* segment is 4096 B */
    EXPECT(aop(t, w, FH_AOP_FETCH, 0, 0, what), before,
           "value unchanged by failed calls");
#undef EXPECT
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("atomic_test");
    me = fh_rank();
    N = fh_nranks();
    tu_seed_init();
    long iters = tu_opt(argc, argv, "--iters", tu_scale(N <= 4 ? 2000 : 500));
    long lockiters = iters / 10 ? iters / 10 : 1;

    fh_seg_t seg;
    void *lb;
    CHECK_OK(fh_segment_create(4096, &seg, &lb));
    bases = calloc((size_t)N, sizeof *bases);
    for (int r = 0; r < N; r++)
        CHECK_OK(fh_segment_query(seg, r, (void **)&bases[r], NULL));
    uint64_t *mine = lb;
    CHECK_OK(fh_barrier());
    TU_SAY("atomic_test: %d ranks, %ld FETCH_ADDs per rank per counter, %ld "
           "lock rounds per rank\n", N, iters, lockiters);

    /* ---- sum */
    uint64_t *fetched0 = malloc((size_t)iters * sizeof *fetched0);
    for (long i = 0; i < iters; i++)
        for (int d = 0; d < N; d++) {
            int t = (me + d) % N;
            uint64_t f = aop(t, &bases[t][W_COUNT], FH_AOP_FETCH_ADD, 1, 0,
                             "sum");
            if (t == 0) fetched0[i] = f;
        }
    CHECK_OK(fh_barrier());
    uint64_t total = (uint64_t)N * (uint64_t)iters;
    CHECK(*(volatile uint64_t *)&mine[W_COUNT] == total, "sum", "counter on "
          "rank %d (local load): expected %" PRIu64 ", saw %" PRIu64, me,
          total, mine[W_COUNT]);
    for (int t = 0; t < N; t++) {
        uint64_t v = aop(t, &bases[t][W_COUNT], FH_AOP_FETCH, 0, 0, "sum");
        CHECK(v == total, "sum", "counter on rank %d: expected %" PRIu64
              ", saw %" PRIu64, t, total, v);
    }
    uint64_t *all = malloc((size_t)N * (size_t)iters * sizeof *all);
    CHECK_OK(fh_allgather(fetched0, all, (size_t)iters * sizeof *fetched0));
    unsigned char *seen = calloc(total, 1);
    for (uint64_t i = 0; i < total; i++) {
        CHECK(all[i] < total && !seen[all[i]], "sum", "fetched values of "
              "rank 0's counter: value %" PRIu64 " (from rank %" PRIu64 ") "
              "%s", all[i], i / (uint64_t)iters,
              all[i] >= total ? "out of range" : "fetched twice");
        seen[all[i]] = 1;
    }
    TU_LOG("sum: %ld x %d FETCH_ADDs, all counters = %" PRIu64 ", fetched "
           "values a permutation\n", iters, N, total);
    free(seen); free(all); free(fetched0);
    CHECK_OK(fh_barrier());

    /* ---- lock */
    uint64_t *lock = &bases[0][W_LOCK], *data = &bases[0][W_DATA];
    long spins = 0;
    for (long i = 0; i < lockiters; i++) {
        uint64_t myid = (uint64_t)me + 1;
        while (aop(0, lock, FH_AOP_CSWAP, myid, 0, "lock acquire") != 0)
            spins++;
        uint64_t v = 0;
        CHECK_OK(fh_get(&v, 0, data, 8));
        v++;
        CHECK_OK(fh_put(0, data, &v, 8));
        uint64_t o = aop(0, lock, FH_AOP_SWAP, 0, 0, "lock release");
        CHECK(o == myid, "lock", "release: expected owner %" PRIu64
              " in the lock word, saw %" PRIu64, myid, o);
    }
    CHECK_OK(fh_barrier());
    uint64_t d = 0;
    CHECK_OK(fh_get(&d, 0, data, 8));
    CHECK(d == (uint64_t)N * (uint64_t)lockiters, "lock", "protected counter: "
          "expected %" PRIu64 ", saw %" PRIu64 " (mutual exclusion broken?)",
          (uint64_t)N * (uint64_t)lockiters, d);
    TU_LOG("lock: %ld critical sections, counter %" PRIu64 ", %ld failed "
           "CSWAPs\n", lockiters, d, spins);
    CHECK_OK(fh_barrier());

    /* ---- semantics and errors */
    semantics((me + 1) % N);
    semantics(me);
    CHECK_OK(fh_barrier());
    TU_LOG("semantics: all ops, NULL fetched, ALIGN/INVALID/OUT_OF_SEGMENT "
           "checked on next rank and self\n");

    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("PASS atomic_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
