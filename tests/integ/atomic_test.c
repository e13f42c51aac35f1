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
 *   hammer32: every rank (rank 0 included) interleaves 32-bit FETCH_ADD,
 *     FETCH_OR, FETCH_AND, FETCH_XOR (a different 32-bit mask per rank and
 *     round) and CSWAP increments on six 32-bit locations of rank 0, paired
 *     in three 8-byte words; the final values are exact, the FETCH_ADD
 *     counter starts at 2^32 - 256 and wraps (its neighbour, a sentinel,
 *     must not see a carry), the fetched FETCH_ADD values are a permutation.
 *   semantics32: every op on a 32-bit location in the low and in the high
 *     half of an 8-byte word, the other half holding a sentinel that must
 *     never change; misaligned (offsets 1..3) -> FH_ERR_ALIGN, bad op,
 *     outside the segment; next rank and self.
 *   nb: 2*N*K outstanding fh_atomic_nb/fh_atomic32_nb FETCH_ADDs to every
 *     rank, then fh_wait_all: fetched values distinct, counters exact; one
 *     32-bit NB atomic polled with fh_test (then its handle is consumed);
 *     K NB atomics completed by fh_quiet alone (fetched written and the
 *     target updated before any handle is waited on); NB to self completes
 *     at once (FH_HANDLE_DONE).
 *
 * Usage: atomic_test [--iters N]
 */
#include "testutil.h"

static int me, N;
static uint64_t **bases;       /* word arrays */

enum { W_COUNT = 0, W_LOCK = 1, W_DATA = 2, W_SEM = 8 /* + rank */,
       W_Q = 128 /* + rank: fh_quiet test, 64-bit counter */,
       W_H32 = 200 /* 3 words: hammer32 on rank 0 */,
       W_NB = 208 /* nb: 64-bit counter; W_NB + 1: 32-bit counter | sentinel */,
       W_SEM32 = 256 /* + rank */ };
#define MAXN 64          /* the layout above holds up to 64 ranks */
#define SENT32 0x5a5aa5a5u
#define ADD32_START 0xffffff00u

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

static uint32_t a32(int t, uint32_t *target, fh_atomic_op_t op, uint32_t v,
                    uint32_t cmp, const char *what)
{
    uint32_t f = 0xdeadbeefu;
    int rc = fh_atomic32(t, target, op, v, cmp, &f);
    CHECK(rc == FH_OK, what, "fh_atomic32(rank %d, %p, op %d): expected FH_OK, saw "
          "%s [%s]", t, (void *)target, (int)op, fh_err_name(rc), fh_last_error());
    return f;
}

static uint32_t xor_mask(int r, long i)
{
    return (uint32_t)tu_mix64(((uint64_t)r << 32) ^ (uint64_t)i ^ 0x9e3779b9u);
}

static void hammer32(long iters)
{
    uint32_t *h = (uint32_t *)&bases[0][W_H32];
    if (me == 0) {
        uint32_t init[6] = {ADD32_START, SENT32, 0, 0xffffffffu, 0x0f0f0f0fu, 0};
        memcpy(h, init, sizeof init);
    }
    CHECK_OK(fh_barrier());
    uint32_t *fetched = malloc((size_t)iters * sizeof *fetched);
    long ncas = 0;
    for (long i = 0; i < iters; i++) {
        fetched[i] = a32(0, &h[0], FH_AOP_FETCH_ADD, 1, 0, "hammer32 add");
        a32(0, &h[2], FH_AOP_FETCH_OR, 1u << (me % 32), 0, "hammer32 or");
        a32(0, &h[3], FH_AOP_FETCH_AND, ~(1u << ((me + 7) % 32)), 0, "hammer32 and");
        a32(0, &h[4], FH_AOP_FETCH_XOR, xor_mask(me, i), 0, "hammer32 xor");
        if (i % 4 == 0) {
            uint32_t v = a32(0, &h[5], FH_AOP_FETCH, 0, 0, "hammer32 fetch");
            for (;;) {
                uint32_t got = a32(0, &h[5], FH_AOP_CSWAP, v + 1, v, "hammer32 cswap");
                if (got == v)
                    break;
                v = got;
            }
            ncas++;
        }
    }
    CHECK_OK(fh_barrier());
    uint32_t total = (uint32_t)N * (uint32_t)iters;
    uint32_t exp[6] = {ADD32_START + total, SENT32, 0, 0xffffffffu, 0x0f0f0f0fu,
                       (uint32_t)N * (uint32_t)ncas};
    for (int r = 0; r < N; r++) {
        exp[2] |= 1u << (r % 32);
        exp[3] &= ~(1u << ((r + 7) % 32));
        for (long i = 0; i < iters; i++)
            exp[4] ^= xor_mask(r, i);
    }
    static const char *names[6] = {"FETCH_ADD counter (wrapped)", "sentinel next to it",
                                   "FETCH_OR word", "FETCH_AND word (next to OR)",
                                   "FETCH_XOR word", "CSWAP counter (next to XOR)"};
    uint32_t got[6];
    for (int k = 0; k < 6; k++)
        got[k] = a32(0, &h[k], FH_AOP_FETCH, 0, 0, "hammer32 final");
    if (me == 0)
        for (int k = 0; k < 6; k++)
            CHECK(h[k] == got[k], "hammer32", "%s: local load 0x%x, FETCH 0x%x",
                  names[k], h[k], got[k]);
    for (int k = 0; k < 6; k++)
        CHECK(got[k] == exp[k], "hammer32", "%s on rank 0: expected 0x%08x, saw 0x%08x",
              names[k], exp[k], got[k]);
    uint64_t words[3];
    CHECK_OK(fh_get(words, 0, h, sizeof words));
    CHECK(memcmp(words, exp, sizeof words) == 0, "hammer32", "fh_get of the three words "
          "differs from the expected pairs");
    uint32_t *all = malloc((size_t)total * sizeof *all);
    CHECK_OK(fh_allgather(fetched, all, (size_t)iters * sizeof *fetched));
    unsigned char *seen = calloc(total, 1);
    for (uint32_t i = 0; i < total; i++) {
        uint32_t k = all[i] - ADD32_START;
        CHECK(k < total && !seen[k], "hammer32", "fetched 32-bit FETCH_ADD value 0x%x "
              "(from rank %u) %s", all[i], i / (uint32_t)iters,
              k >= total ? "out of range" : "fetched twice");
        seen[k] = 1;
    }
    TU_LOG("hammer32: %ld rounds x %d ranks of add/or/and/xor (+%ld CSWAP increments) "
           "on rank 0: exact, neighbours intact, add wrapped\n", iters, N, ncas);
    free(seen); free(all); free(fetched);
    CHECK_OK(fh_barrier());
}

static void semantics32(int t, int hi)
{
    uint32_t *pair = (uint32_t *)&bases[t][W_SEM32 + me];
    uint32_t *w = &pair[hi], *nb = &pair[!hi];
    char what[80];
    snprintf(what, sizeof what, "semantics32 on rank %d, %s half", t, hi ? "high" : "low");
#define EXPECT(got, exp, desc) CHECK((got) == (exp), what, "%s: expected "     \
        "0x%08x, saw 0x%08x", desc, (uint32_t)(exp), (uint32_t)(got))
    a32(t, nb, FH_AOP_SET, SENT32, 0, what);
    uint32_t a = 0x89abcdefu, b = 0x76543210u;
    a32(t, w, FH_AOP_SET, a, 0, what);
    EXPECT(a32(t, w, FH_AOP_FETCH, 0, 0, what), a, "FETCH after SET");
    EXPECT(a32(t, w, FH_AOP_SWAP, b, 0, what), a, "SWAP returns old");
    EXPECT(a32(t, w, FH_AOP_FETCH, 0, 0, what), b, "value after SWAP");
    EXPECT(a32(t, w, FH_AOP_CSWAP, 7, a, what), b, "CSWAP miss returns old");
    EXPECT(a32(t, w, FH_AOP_FETCH, 0, 0, what), b, "CSWAP miss leaves value");
    EXPECT(a32(t, w, FH_AOP_CSWAP, 7, b, what), b, "CSWAP hit returns old");
    EXPECT(a32(t, w, FH_AOP_FETCH, 0, 0, what), 7, "CSWAP hit stores");
    a32(t, w, FH_AOP_SET, 0xff00ff00u, 0, what);
    EXPECT(a32(t, w, FH_AOP_FETCH_AND, 0x0ff00ff0u, 0, what), 0xff00ff00u,
           "FETCH_AND returns old");
    EXPECT(a32(t, w, FH_AOP_FETCH, 0, 0, what), 0x0f000f00u, "AND result");
    EXPECT(a32(t, w, FH_AOP_FETCH_OR, 0x000000ffu, 0, what), 0x0f000f00u,
           "FETCH_OR returns old");
    EXPECT(a32(t, w, FH_AOP_FETCH, 0, 0, what), 0x0f000fffu, "OR result");
    EXPECT(a32(t, w, FH_AOP_FETCH_XOR, 0xffffffffu, 0, what), 0x0f000fffu,
           "FETCH_XOR returns old");
    EXPECT(a32(t, w, FH_AOP_FETCH, 0, 0, what), 0xf0fff000u, "XOR result");
    a32(t, w, FH_AOP_SET, UINT32_MAX - 1, 0, what);
    EXPECT(a32(t, w, FH_AOP_FETCH_ADD, 3, 0, what), UINT32_MAX - 1, "FETCH_ADD returns old");
    EXPECT(a32(t, w, FH_AOP_FETCH, 0, 0, what), 1, "FETCH_ADD wraps at 2^32");
    EXPECT(a32(t, w, FH_AOP_FETCH_ADD, (uint32_t)-5, 0, what), 1,
           "FETCH_ADD of -5 returns old");
    EXPECT(a32(t, w, FH_AOP_FETCH, 0, 0, what), (uint32_t)-4, "signed add");
    CHECK_OK(fh_atomic32(t, w, FH_AOP_SET, 100, 0, NULL));
    CHECK_OK(fh_atomic32(t, w, FH_AOP_FETCH_ADD, 5, 0, NULL));
    CHECK_OK(fh_atomic32(t, w, FH_AOP_SWAP, 200, 0, NULL));
    EXPECT(a32(t, w, FH_AOP_FETCH, 0, 0, what), 200, "SET, ADD, SWAP with fetched=NULL");
    EXPECT(a32(t, nb, FH_AOP_FETCH, 0, 0, what), SENT32, "the other half (sentinel)");
    uint32_t g[2] = {0, 0};
    CHECK_OK(fh_get(g, t, pair, 8));
    EXPECT(g[hi], 200, "fh_get of the location");
    EXPECT(g[!hi], SENT32, "fh_get of the other half");
    /* errors */
    uint32_t f = 0;
    for (int m = 1; m < 4; m++) {
        uint32_t *mis = (uint32_t *)((char *)w + m);
        CHECK_RC(fh_atomic32(t, mis, FH_AOP_FETCH_ADD, 1, 0, &f), FH_ERR_ALIGN);
        CHECK_RC(fh_atomic32(t, mis, FH_AOP_SET, 1, 0, NULL), FH_ERR_ALIGN);
    }
    CHECK_RC(fh_atomic32(t, w, FH_AOP__COUNT, 1, 0, &f), FH_ERR_INVALID);
    CHECK_RC(fh_atomic32(t, w, (fh_atomic_op_t)-1, 1, 0, &f), FH_ERR_INVALID);
    CHECK_RC(fh_atomic32(t, (uint32_t *)bases[t] - 1, FH_AOP_SET, 1, 0, NULL),
             FH_ERR_OUT_OF_SEGMENT);
    CHECK_RC(fh_atomic32(t, (uint32_t *)(bases[t] + 512), FH_AOP_SET, 1, 0, NULL),
             FH_ERR_OUT_OF_SEGMENT);
    CHECK_OK(fh_get(g, t, pair, 8));
    EXPECT(g[hi], 200, "location unchanged by failed calls");
    EXPECT(g[!hi], SENT32, "other half unchanged by failed calls");
#undef EXPECT
}

static void nb_tests(long k)
{
    char what[64] = "nb";
    /* ---- many outstanding, then fh_wait_all */
    size_t nh = 2 * (size_t)N * (size_t)k;
    fh_handle_t *hs = malloc(nh * sizeof *hs);
    uint64_t *f64 = malloc((size_t)N * (size_t)k * sizeof *f64);
    uint32_t *f32 = malloc((size_t)N * (size_t)k * sizeof *f32);
    ((uint32_t *)&bases[me][W_NB + 1])[1] = SENT32;   /* own sentinel */
    CHECK_OK(fh_barrier());
    size_t n = 0;
    for (long i = 0; i < k; i++)
        for (int d = 0; d < N; d++) {
            int t = (me + d) % N;
            CHECK_OK(fh_atomic_nb(t, &bases[t][W_NB], FH_AOP_FETCH_ADD, 1, 0,
                                  &f64[(size_t)t * k + i], &hs[n++]));
            CHECK_OK(fh_atomic32_nb(t, (uint32_t *)&bases[t][W_NB + 1], FH_AOP_FETCH_ADD, 1,
                                    0, &f32[(size_t)t * k + i], &hs[n++]));
            if (t == me)
                CHECK(hs[n - 1] == FH_HANDLE_DONE && hs[n - 2] == FH_HANDLE_DONE, what,
                      "NB atomic to self: expected FH_HANDLE_DONE, saw 0x%llx 0x%llx",
                      (unsigned long long)hs[n - 2], (unsigned long long)hs[n - 1]);
        }
    CHECK_OK(fh_wait_all(hs, n));
    for (size_t i = 0; i < n; i++)
        CHECK(hs[i] == FH_HANDLE_DONE, what, "fh_wait_all left handle %zu", i);
    uint64_t total = (uint64_t)N * (uint64_t)k;
    unsigned char *seen = malloc(total);
    for (int t = 0; t < N; t++) {
        /* this rank's k values from t's counters: distinct, < N*k */
        for (int w = 0; w < 2; w++) {
            memset(seen, 0, total);
            for (long i = 0; i < k; i++) {
                uint64_t v = w ? f32[(size_t)t * k + i] : f64[(size_t)t * k + i];
                CHECK(v < total && !seen[v], what, "%s fetched from rank %d: %" PRIu64
                      " %s", w ? "32-bit" : "64-bit", t, v,
                      v >= total ? "out of range" : "twice");
                seen[v] = 1;
            }
        }
    }
    CHECK_OK(fh_barrier());
    for (int t = 0; t < N; t++) {
        uint64_t v = aop(t, &bases[t][W_NB], FH_AOP_FETCH, 0, 0, what);
        CHECK(v == total, what, "64-bit NB counter on rank %d: expected %" PRIu64
              ", saw %" PRIu64, t, total, v);
        uint32_t c[2];
        CHECK_OK(fh_get(c, t, &bases[t][W_NB + 1], 8));
        CHECK(c[0] == (uint32_t)total && c[1] == SENT32, what, "32-bit NB counter on "
              "rank %d: expected %u (sentinel 0x%x), saw %u (0x%x)", t, (uint32_t)total,
              SENT32, c[0], c[1]);
    }
    TU_LOG("nb: %zu NB atomics (64/32-bit) outstanding at once, fh_wait_all: counters "
           "exact, fetched values distinct\n", n);
    free(seen);
    CHECK_OK(fh_barrier());

    /* ---- fh_test polling */
    int peer = (me + 1) % N;
    uint32_t *loc = &((uint32_t *)&bases[peer][W_SEM32 + me])[1];
    CHECK_OK(fh_atomic32(peer, loc, FH_AOP_SET, 41, 0, NULL));
    fh_handle_t h;
    uint32_t got = 0xdeadbeefu;
    CHECK_OK(fh_atomic32_nb(peer, loc, FH_AOP_FETCH_ADD, 1, 0, &got, &h));
    long again = 0;
    int rc;
    double t0 = tu_now();
    while ((rc = fh_test(h)) == FH_ERR_AGAIN) {
        again++;
        CHECK(tu_now() - t0 < 60, what, "fh_test: not complete after 60 s");
    }
    CHECK(rc == FH_OK, what, "fh_test: expected FH_OK, saw %s", fh_err_name(rc));
    CHECK(got == 41, what, "fh_test: fetched expected 41, saw %u", got);
    if (h != FH_HANDLE_DONE) {
        CHECK_RC(fh_test(h), FH_ERR_HANDLE);   /* consumed */
        CHECK_RC(fh_wait(h), FH_ERR_HANDLE);
    }
    CHECK(a32(peer, loc, FH_AOP_FETCH, 0, 0, what) == 42, what, "after the fh_test'ed "
          "FETCH_ADD: expected 42");
    /* fetched == NULL; a CSWAP through NB; FH_ERR_ALIGN leaves *h DONE */
    CHECK_OK(fh_atomic32_nb(peer, loc, FH_AOP_CSWAP, 7, 42, NULL, &h));
    CHECK_OK(fh_wait(h));
    CHECK(a32(peer, loc, FH_AOP_FETCH, 0, 0, what) == 7, what, "NB CSWAP hit");
    h = 99;
    CHECK_RC(fh_atomic32_nb(peer, (uint32_t *)((char *)loc + 2), FH_AOP_SET, 1, 0, NULL,
                            &h), FH_ERR_ALIGN);
    CHECK(h == FH_HANDLE_DONE, what, "misaligned NB: *h not FH_HANDLE_DONE");
    h = 99;
    CHECK_RC(fh_atomic_nb(peer, (uint64_t *)((char *)&bases[peer][W_NB] + 4),
                          FH_AOP_SET, 1, 0, NULL, &h), FH_ERR_ALIGN);
    CHECK(h == FH_HANDLE_DONE, what, "misaligned NB: *h not FH_HANDLE_DONE");
    TU_LOG("nb: fh_test polled %ld times before FH_OK; consumed handle -> "
           "FH_ERR_HANDLE\n", again);
    CHECK_OK(fh_barrier());

    /* ---- fh_quiet completes NB atomics */
    uint64_t *q64 = &bases[peer][W_Q + me];
    uint32_t *q32 = (uint32_t *)&bases[peer][W_SEM32 + me];   /* low half */
    CHECK_OK(fh_atomic32(peer, q32, FH_AOP_SET, 0, 0, NULL));
    n = 0;
    for (long i = 0; i < k; i++) {
        f64[i] = UINT64_MAX;
        f32[i] = UINT32_MAX;
    }
    for (long i = 0; i < k; i++) {
        CHECK_OK(fh_atomic_nb(peer, q64, FH_AOP_FETCH_ADD, 1, 0, &f64[i], &hs[n++]));
        CHECK_OK(fh_atomic32_nb(peer, q32, FH_AOP_FETCH_ADD, 1, 0, &f32[i], &hs[n++]));
    }
    CHECK_OK(fh_quiet());
    /* complete now: fetched written and the target updated */
    seen = calloc((size_t)k, 1);
    unsigned char *seen32 = calloc((size_t)k, 1);
    for (long i = 0; i < k; i++) {
        CHECK(f64[i] < (uint64_t)k && !seen[f64[i]], what, "after fh_quiet: 64-bit "
              "fetched[%ld] = 0x%" PRIx64 " (not written, or twice)", i, f64[i]);
        CHECK(f32[i] < (uint32_t)k && !seen32[f32[i]], what, "after fh_quiet: 32-bit "
              "fetched[%ld] = 0x%x (not written, or twice)", i, f32[i]);
        seen[f64[i]] = 1;
        seen32[f32[i]] = 1;
    }
    uint64_t qv = 0;
    uint32_t qv32[2] = {0, 0};
    CHECK_OK(fh_get(&qv, peer, q64, 8));
    CHECK_OK(fh_get(qv32, peer, q32, 8));
    /* (the high half is loc above, left at 7 by the NB CSWAP) */
    CHECK(qv == (uint64_t)k && qv32[0] == (uint32_t)k && qv32[1] == 7, what,
          "after fh_quiet: targets expected %ld / %ld (neighbour 7), saw %" PRIu64
          " / %u (neighbour %u)", k, k, qv, qv32[0], qv32[1]);
    fh_handle_t first = hs[0];
    CHECK_OK(fh_wait_all(hs, n));            /* consumed: complete at once */
    if (first != FH_HANDLE_DONE)
        CHECK_RC(fh_wait(first), FH_ERR_HANDLE);
    TU_LOG("nb: fh_quiet completed %zu NB atomics (fetched values and targets), "
           "handles then consumed by fh_wait_all\n", n);
    free(seen32); free(seen); free(f32); free(f64); free(hs);
    CHECK_OK(fh_barrier());
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

    /* ---- 32-bit and NB atomics */
    CHECK(N <= MAXN, "layout", "at most %d ranks, have %d", MAXN, N);
    hammer32(iters);
    for (int hi = 0; hi < 2; hi++) {
        semantics32((me + 1) % N, hi);
        semantics32(me, hi);
    }
    CHECK_OK(fh_barrier());
    TU_LOG("semantics32: all ops on both halves of a word, the other half intact, "
           "ALIGN/INVALID/OUT_OF_SEGMENT, next rank and self\n");
    nb_tests(tu_opt(argc, argv, "--nb", N <= 4 ? 256 : 64));

    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("PASS atomic_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
