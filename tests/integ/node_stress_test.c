/*
 * node_stress_test.c -- atomics and ordering where the node path (loads,
 * stores and CPU atomics through shared mappings) and the network path
 * (RMA, atomics executed by the owner's CPU in an AM handler) meet on the
 * same memory (include/firehose.h: atomics, "Completion semantics",
 * fh_quiet, fh_barrier).
 *
 * Usage: fhrun -n N node_stress_test --group G [--rounds K] [--msg-rounds M]
 *                                   [--burst-ms B] [--phases MASK]
 *   G = the node group size of the run (FH_SHM_MAX_GROUP, or N for one
 *   group, 0 for FH_SHM=off).  Rank r reaches rank t by the route "self"
 *   (t == r), "node" (same group) or "net"; the test first checks, with
 *   fh_addr_local, that the job really has these routes.
 *
 * 1. atomicity: every rank hammers six words on every rank, all ranks on
 *    the same target at the same time, each word hit from every route at
 *    once:
 *      A64  FETCH_ADD 1 (blocking and NB) and CSWAP increments (a
 *           fetch-compare-retry loop), from just below 2^32 so the sum
 *           carries into the high half;
 *      A32  the same on a 32-bit word that wraps past 2^32;
 *      B32  FETCH_ADD 1 (NB, no fetch) on the other half of A32's 8 bytes;
 *      S64, S32  SWAP chains of unique tokens (blocking and NB);
 *      C32  FETCH_ADD 3 (NB, no fetch) beside S32.
 *    NB batches complete by fh_wait_all, by fh_quiet then fh_wait_all,
 *    or by fh_quiet then fh_test (which must say FH_OK at once).  The
 *    owner checks, over every rank's fetched values (fh_allgather): the
 *    FETCH_ADD olds and the successful CSWAP olds of A64/A32 are exactly
 *    start, start+1, ... (a permutation: no value fetched twice, no update
 *    lost); the final values are exact; the SWAP chains' fetched values
 *    plus the final value are exactly the initial value plus every token
 *    written, each once.  Then every rank reads every rank's totals with
 *    fh_atomic FETCH after fh_quiet + fh_barrier.
 *    Hot bursts: then, target by target, every rank increments two words
 *    (64 and 32 bits) of the target for --burst-ms as fast as its route
 *    allows (group members back to back with CPU atomics, the others with
 *    batches of NB FETCH_ADDs the owner executes in a row); the words must
 *    gain exactly the sum of every rank's increments.  (This is what makes
 *    a non-atomic read-modify-write on one route lose updates every run;
 *    the counted phase above catches it only sometimes.)
 * 2. message passing across routes: for every producer P, consumer C != P
 *    and target T, round after round, P puts a block into T (blocking,
 *    NBI + fh_quiet, NB + fh_wait, NBI + fh_wait_nbi, NB + fh_quiet,
 *    strided), and only then raises a flag on T (FETCH_ADD 64, SET 64,
 *    32-bit FETCH_ADD NB + fh_wait, or a one-byte fh_put); C polls the
 *    flag (fh_atomic FETCH, fh_atomic32 FETCH, or fh_get of the byte)
 *    and, once it is raised, gets the block (blocking, NB, NBI, strided):
 *    every byte must be the round's.  P->T and C->T take every pair of
 *    routes; the counts are printed.  (The contract: a completed put is
 *    visible "to later RMA from any rank"; nothing is assumed about
 *    incomplete operations.)
 * 3. visibility across fh_barrier: every writer W puts into every T
 *    (blocking; NB + fh_quiet; NBI + fh_wait_nbi), barrier, every reader R
 *    gets every (W, T) slot and T checks its own memory with loads;
 *    barrier; a new pattern each iteration.
 * --phases: 1 atomicity, 2 hot bursts, 4 message passing, 8 barrier
 * (default 15, all).  Every mismatch prints "FAIL <what>: expected X, saw Y" and ends the job.
 */
#include "testutil.h"

#include <sched.h>
#include <stdbool.h>
#include <string.h>

#define SEG        (16u << 20)
#define CTR_OFF    0            /* the six atomic words */
#define FLAG_OFF   4096         /* phase 2 flags */
#define BAR_OFF    (64u << 10)  /* phase 3 slots */
#define BAR_SLOT   5000
#define MSG_OFF    (1u << 20)   /* phase 2 blocks */
#define MSG_SLOT   40960
#define MAXN       16

/* Words of the counter area (byte offsets). */
#define W_A64 0
#define W_A32 8
#define W_B32 12
#define W_S64 16
#define W_S32 24
#define W_C32 28
#define W_H64 32    /* hot bursts */
#define W_H32 40

/* Per target and round, what one rank does to the A words. */
#define ADD_BLK 4
#define ADD_NB  16
#define CAS_INC 2
#define A_OPS   (ADD_BLK + ADD_NB + CAS_INC)
#define SWP_BLK 2
#define SWP_NB  2
#define S_OPS   (SWP_BLK + SWP_NB)
#define B_NB    2
#define C_NB    2

enum route { R_SELF, R_NODE, R_NET };
static const char *route_name[] = {"self", "node", "net"};

static int me, n;
static long grp;
static char *base[MAXN];
static char *mine;

static enum route route_of(int from, int to)
{
    if (from == to)
        return R_SELF;
    if (grp > 0 && from / grp == to / grp)
        return R_NODE;
    return R_NET;
}

static void *at(int rank, size_t off) { return base[rank] + off; }

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The job has the routes the driver says: fh_addr_local is non-NULL for
 * self and node, NULL for net. */
static void check_routes(void)
{
    for (int t = 0; t < n; t++) {
        void *p = fh_addr_local(t, base[t]);
        bool want = route_of(me, t) != R_NET;
        CHECK((p != NULL) == want, "routes",
              "fh_addr_local(%d) %s (route %s with --group %ld), saw %p", t,
              want ? "non-NULL" : "NULL", route_name[route_of(me, t)], grp, p);
    }
}

/* ---------------------------------------------------------- 1. atomicity */

static uint64_t start64, final_a64, final_b32, final_c32;
static uint32_t start32;
static long rounds, mrounds;   /* phase 1 and 3 rounds, phase 2 rounds */

/* Completes a batch of NB handles in one of three ways the contract
 * allows. */
static void complete_batch(fh_handle_t *hs, size_t nh, long how)
{
    switch (how % 3) {
    case 0:
        CHECK_OK(fh_wait_all(hs, nh));
        break;
    case 1:
        CHECK_OK(fh_quiet());
        CHECK_OK(fh_wait_all(hs, nh));
        break;
    default:
        CHECK_OK(fh_quiet());
        for (size_t i = 0; i < nh; i++) {
            int rc = fh_test(hs[i]);
            CHECK(rc == FH_OK, "fh_test after fh_quiet",
                  "FH_OK at once for NB atomic %zu of %zu, saw %s", i, nh, fh_err_name(rc));
            hs[i] = FH_HANDLE_DONE;
        }
    }
}

/* One rank's share of the hammering of target t in round k; fetched
 * values go to a64[], a32[], s64[], s32[] (this target's arrays). */
static void hammer(int t, long k, uint64_t *a64, uint32_t *a32, uint64_t *s64, uint32_t *s32,
                   uint64_t *guess64, uint32_t *guess32)
{
    uint64_t *A64 = at(t, CTR_OFF + W_A64), *S64 = at(t, CTR_OFF + W_S64);
    uint32_t *A32 = at(t, CTR_OFF + W_A32), *B32 = at(t, CTR_OFF + W_B32);
    uint32_t *S32 = at(t, CTR_OFF + W_S32), *C32 = at(t, CTR_OFF + W_C32);
    size_t ai = (size_t)k * A_OPS, si = (size_t)k * S_OPS;
    fh_handle_t hs[2 * ADD_NB + 2 * SWP_NB + B_NB + C_NB];
    size_t nh = 0;

    /* NB first, completed at once (fh_quiet must not rely on the
     * blocking ones behind them) */
    for (int i = 0; i < ADD_NB; i++) {
        CHECK_OK(fh_atomic_nb(t, A64, FH_AOP_FETCH_ADD, 1, 0, &a64[ai + i], &hs[nh++]));
        CHECK_OK(fh_atomic32_nb(t, A32, FH_AOP_FETCH_ADD, 1, 0, &a32[ai + i], &hs[nh++]));
    }
    for (int i = 0; i < SWP_NB; i++) {
        uint64_t seq = (uint64_t)(si + i) + 1;
        CHECK_OK(fh_atomic_nb(t, S64, FH_AOP_SWAP, ((uint64_t)(me + 1) << 32) | seq, 0,
                              &s64[si + i], &hs[nh++]));
        CHECK_OK(fh_atomic32_nb(t, S32, FH_AOP_SWAP, ((uint32_t)(me + 1) << 24) | (uint32_t)seq,
                                0, &s32[si + i], &hs[nh++]));
    }
    for (int i = 0; i < B_NB; i++)
        CHECK_OK(fh_atomic32_nb(t, B32, FH_AOP_FETCH_ADD, 1, 0, NULL, &hs[nh++]));
    for (int i = 0; i < C_NB; i++)
        CHECK_OK(fh_atomic32_nb(t, C32, FH_AOP_FETCH_ADD, 3, 0, NULL, &hs[nh++]));
    complete_batch(hs, nh, k + t);

    for (int i = 0; i < ADD_BLK; i++) {
        CHECK_OK(fh_atomic(t, A64, FH_AOP_FETCH_ADD, 1, 0, &a64[ai + ADD_NB + i]));
        CHECK_OK(fh_atomic32(t, A32, FH_AOP_FETCH_ADD, 1, 0, &a32[ai + ADD_NB + i]));
    }
    for (int i = 0; i < SWP_BLK; i++) {
        uint64_t seq = (uint64_t)(si + SWP_NB + i) + 1;
        CHECK_OK(fh_atomic(t, S64, FH_AOP_SWAP, ((uint64_t)(me + 1) << 32) | seq, 0,
                           &s64[si + SWP_NB + i]));
        CHECK_OK(fh_atomic32(t, S32, FH_AOP_SWAP, ((uint32_t)(me + 1) << 24) | (uint32_t)seq, 0,
                             &s32[si + SWP_NB + i]));
    }
    /* CSWAP increments: guess, compare-and-swap, retry with what we saw */
    for (int i = 0; i < CAS_INC; i++) {
        uint64_t g = *guess64, old;
        for (long tries = 0;; tries++) {
            CHECK(tries < 10000000, "CSWAP loop on A64", "success within 1e7 tries on rank %d", t);
            CHECK_OK(fh_atomic(t, A64, FH_AOP_CSWAP, g + 1, g, &old));
            if (old == g)
                break;
            g = old;
        }
        a64[ai + ADD_NB + ADD_BLK + i] = g;
        *guess64 = g + 1;
        uint32_t g32 = *guess32, old32;
        for (long tries = 0;; tries++) {
            CHECK(tries < 10000000, "CSWAP loop on A32", "success within 1e7 tries on rank %d", t);
            CHECK_OK(fh_atomic32(t, A32, FH_AOP_CSWAP, g32 + 1, g32, &old32));
            if (old32 == g32)
                break;
            g32 = old32;
        }
        a32[ai + ADD_NB + ADD_BLK + i] = g32;
        *guess32 = g32 + 1;
    }
}

/* The owner's checks of its own words, from every rank's fetched values. */
static void check_owner(const uint64_t *all64, const uint32_t *all32, const uint64_t *alls64,
                        const uint32_t *alls32, size_t per_a, size_t per_s)
{
    size_t na = per_a * (size_t)n, ns = per_s * (size_t)n;
    uint64_t *v = malloc((ns + 1 > na ? ns + 1 : na) * sizeof *v);
    uint64_t *w = malloc((ns + 1) * sizeof *w);
    CHECK(v && w, "malloc", "check buffers");

    /* A64: FETCH_ADD olds and successful CSWAP olds are start64 + 0..na-1 */
    memcpy(v, all64, na * sizeof *v);
    qsort(v, na, sizeof *v, cmp_u64);
    for (size_t i = 0; i < na; i++)
        CHECK(v[i] == start64 + i, "A64 fetched values (FETCH_ADD + CSWAP, every route)",
              "a permutation of %llu..%llu: sorted value %zu = %llu, saw %llu (%s)",
              (unsigned long long)start64, (unsigned long long)(start64 + na - 1), i,
              (unsigned long long)(start64 + i), (unsigned long long)v[i],
              i > 0 && v[i] == v[i - 1] ? "fetched twice: an update was lost" : "a gap");
    /* A32: the same modulo 2^32 */
    for (size_t i = 0; i < na; i++)
        v[i] = (uint32_t)(all32[i] - start32);
    qsort(v, na, sizeof *v, cmp_u64);
    for (size_t i = 0; i < na; i++)
        CHECK(v[i] == i, "A32 fetched values (FETCH_ADD + CSWAP, every route, wrapping)",
              "a permutation of start+0..%zu mod 2^32: sorted offset %zu = %zu, saw %llu (%s)",
              na - 1, i, i, (unsigned long long)v[i],
              i > 0 && v[i] == v[i - 1] ? "fetched twice: an update was lost" : "a gap");

    volatile uint64_t *ctr64 = (volatile uint64_t *)(void *)(mine + CTR_OFF);
    volatile uint32_t *ctr32 = (volatile uint32_t *)(void *)(mine + CTR_OFF);
    CHECK(ctr64[W_A64 / 8] == final_a64, "A64 final value", "%llu, saw %llu",
          (unsigned long long)final_a64, (unsigned long long)ctr64[W_A64 / 8]);
    CHECK(ctr32[W_A32 / 4] == (uint32_t)(start32 + na), "A32 final value", "%u, saw %u",
          (uint32_t)(start32 + na), ctr32[W_A32 / 4]);
    CHECK(ctr32[W_B32 / 4] == final_b32, "B32 (beside A32) final value", "%llu, saw %u",
          (unsigned long long)final_b32, ctr32[W_B32 / 4]);
    CHECK(ctr32[W_C32 / 4] == final_c32, "C32 (beside S32) final value", "%llu, saw %u",
          (unsigned long long)final_c32, ctr32[W_C32 / 4]);

    /* SWAP chains: fetched + final == {0} + every token, each once */
    for (int width = 64; width >= 32; width -= 32) {
        size_t m = 0;
        for (size_t i = 0; i < ns; i++)
            v[m++] = width == 64 ? alls64[i] : alls32[i];
        v[m++] = width == 64 ? ctr64[W_S64 / 8] : ctr32[W_S32 / 4];
        size_t q = 0;
        w[q++] = 0;
        for (int r = 0; r < n; r++)
            for (size_t s = 1; s <= per_s; s++)
                w[q++] = width == 64 ? ((uint64_t)(r + 1) << 32) | s
                                     : (uint64_t)(((uint32_t)(r + 1) << 24) | (uint32_t)s);
        qsort(v, m, sizeof *v, cmp_u64);
        qsort(w, q, sizeof *w, cmp_u64);
        for (size_t i = 0; i < m; i++)
            CHECK(v[i] == w[i], width == 64 ? "S64 SWAP chain" : "S32 SWAP chain",
                  "fetched values + final = the initial 0 and every token once: sorted "
                  "element %zu = 0x%llx, saw 0x%llx (%s)", i, (unsigned long long)w[i],
                  (unsigned long long)v[i],
                  i > 0 && v[i] == v[i - 1] ? "seen twice: a swap was lost" : "missing");
    }
    free(v);
    free(w);
}

static void phase_atomics(void)
{
    const size_t per_a = (size_t)rounds * A_OPS, per_s = (size_t)rounds * S_OPS;
    const size_t na = per_a * (size_t)n;
    start64 = 0xffffffffull - na / 2;
    start32 = (uint32_t)(0xffffffffu - (uint32_t)(na / 2));
    final_a64 = start64 + na;
    final_b32 = (uint64_t)rounds * B_NB * (uint64_t)n;
    final_c32 = 3ull * (uint64_t)rounds * C_NB * (uint64_t)n;
    memset(mine + CTR_OFF, 0, 64);
    *(uint64_t *)(void *)(mine + CTR_OFF + W_A64) = start64;
    *(uint32_t *)(void *)(mine + CTR_OFF + W_A32) = start32;
    CHECK_OK(fh_barrier());

    uint64_t *a64 = calloc((size_t)n * per_a, sizeof *a64);
    uint32_t *a32 = calloc((size_t)n * per_a, sizeof *a32);
    uint64_t *s64 = calloc((size_t)n * per_s, sizeof *s64);
    uint32_t *s32 = calloc((size_t)n * per_s, sizeof *s32);
    uint64_t g64[MAXN];
    uint32_t g32[MAXN];
    CHECK(a64 && a32 && s64 && s32, "calloc", "fetch buffers");
    for (int t = 0; t < n; t++) {
        g64[t] = start64;
        g32[t] = start32;
    }
    double t0 = tu_now();
    for (long k = 0; k < rounds; k++) {
        if (k % 2 == 0)   /* line the ranks up */
            CHECK_OK(fh_barrier());
        for (int j = 0; j < n; j++) {
            /* even rounds: everybody on the same target at once; odd: each
             * starts at its own rank */
            int t = (int)((k + j + (k % 2 ? me : 0)) % n);
            hammer(t, k, a64 + (size_t)t * per_a, a32 + (size_t)t * per_a,
                   s64 + (size_t)t * per_s, s32 + (size_t)t * per_s, &g64[t], &g32[t]);
        }
    }
    CHECK_OK(fh_quiet());
    CHECK_OK(fh_barrier());
    TU_LOG("NOTE atomics: %ld rounds on %d ranks in %.2f s\n", rounds, n, tu_now() - t0);

    /* every rank reads every rank's totals over its route */
    for (int t = 0; t < n; t++) {
        uint64_t v;
        uint32_t v32;
        CHECK_OK(fh_atomic(t, at(t, CTR_OFF + W_A64), FH_AOP_FETCH, 0, 0, &v));
        CHECK(v == final_a64, "A64 total read by FETCH", "%llu on rank %d (route %s), saw %llu",
              (unsigned long long)final_a64, t, route_name[route_of(me, t)],
              (unsigned long long)v);
        CHECK_OK(fh_atomic32(t, at(t, CTR_OFF + W_B32), FH_AOP_FETCH, 0, 0, &v32));
        CHECK(v32 == final_b32, "B32 total read by FETCH", "%llu on rank %d (route %s), saw %u",
              (unsigned long long)final_b32, t, route_name[route_of(me, t)], v32);
        CHECK_OK(fh_atomic32(t, at(t, CTR_OFF + W_C32), FH_AOP_FETCH, 0, 0, &v32));
        CHECK(v32 == final_c32, "C32 total read by FETCH", "%llu on rank %d (route %s), saw %u",
              (unsigned long long)final_c32, t, route_name[route_of(me, t)], v32);
    }

    /* the owner gets every rank's fetched values for its words */
    uint64_t *all64 = malloc((size_t)n * per_a * sizeof *all64);
    uint32_t *all32 = malloc((size_t)n * per_a * sizeof *all32);
    uint64_t *alls64 = malloc((size_t)n * per_s * sizeof *alls64);
    uint32_t *alls32 = malloc((size_t)n * per_s * sizeof *alls32);
    CHECK(all64 && all32 && alls64 && alls32, "malloc", "gather buffers");
    for (int t = 0; t < n; t++) {
        CHECK_OK(fh_allgather(a64 + (size_t)t * per_a, all64, per_a * sizeof *all64));
        CHECK_OK(fh_allgather(a32 + (size_t)t * per_a, all32, per_a * sizeof *all32));
        CHECK_OK(fh_allgather(s64 + (size_t)t * per_s, alls64, per_s * sizeof *alls64));
        CHECK_OK(fh_allgather(s32 + (size_t)t * per_s, alls32, per_s * sizeof *alls32));
        if (t == me)
            check_owner(all64, all32, alls64, alls32, per_a, per_s);
    }
    CHECK_OK(fh_barrier());
    TU_SAY("ok   atomicity: %zu FETCH_ADD/CSWAP increments per word, SWAP chains, "
           "neighbouring 32-bit words, every route at once\n", na);
    free(all64); free(all32); free(alls64); free(alls32);
    free(a64); free(a32); free(s64); free(s32);
}

/* 1b. Hot bursts: for a window of --burst-ms, after a barrier, every rank
 * increments target t's H64 and H32 as fast as its route allows (node and
 * self: blocking FETCH_ADD and CSWAP increments back to back; net: batches
 * of NB FETCH_ADDs, which the owner's CPU executes in a row, and blocking
 * CSWAP increments).  Counts differ per rank; the sum of every rank's
 * increments must be exactly what the words gained. */
static uint64_t cas_inc64(int t, uint64_t *w, uint64_t *guess)
{
    uint64_t g = *guess, old;
    for (long tries = 0;; tries++) {
        CHECK(tries < 10000000, "CSWAP loop on H64", "success within 1e7 tries on rank %d", t);
        CHECK_OK(fh_atomic(t, w, FH_AOP_CSWAP, g + 1, g, &old));
        if (old == g)
            break;
        g = old;
    }
    *guess = g + 1;
    return g;
}

static uint32_t cas_inc32(int t, uint32_t *w, uint32_t *guess)
{
    uint32_t g = *guess, old;
    for (long tries = 0;; tries++) {
        CHECK(tries < 10000000, "CSWAP loop on H32", "success within 1e7 tries on rank %d", t);
        CHECK_OK(fh_atomic32(t, w, FH_AOP_CSWAP, g + 1, g, &old));
        if (old == g)
            break;
        g = old;
    }
    *guess = g + 1;
    return g;
}

static void phase_hot(long burst_ms)
{
    memset(mine + CTR_OFF + W_H64, 0, 16);
    CHECK_OK(fh_barrier());
    uint64_t total_ops = 0;
    for (int t = 0; t < n; t++) {
        uint64_t *H64 = at(t, CTR_OFF + W_H64);
        uint32_t *H32 = at(t, CTR_OFF + W_H32);
        uint64_t add64 = 0, add32 = 0, g64 = 0;
        uint32_t g32 = 0;
        bool net = route_of(me, t) == R_NET;
        CHECK_OK(fh_barrier());
        double end = tu_now() + (double)burst_ms / 1000;
        for (long i = 0; tu_now() < end; i++) {
            if (net && i % 4 != 3) {
                fh_handle_t hs[16];
                for (int j = 0; j < 16; j += 2) {
                    CHECK_OK(fh_atomic_nb(t, H64, FH_AOP_FETCH_ADD, 1, 0, NULL, &hs[j]));
                    CHECK_OK(fh_atomic32_nb(t, H32, FH_AOP_FETCH_ADD, 1, 0, NULL, &hs[j + 1]));
                }
                CHECK_OK(fh_wait_all(hs, 16));
                add64 += 8;
                add32 += 8;
                continue;
            }
            for (int j = 0; j < (net ? 1 : 64); j++) {
                switch ((i + j) % 4) {
                case 0:
                    CHECK_OK(fh_atomic(t, H64, FH_AOP_FETCH_ADD, 1, 0, NULL));
                    add64++;
                    break;
                case 1:
                    CHECK_OK(fh_atomic32(t, H32, FH_AOP_FETCH_ADD, 1, 0, NULL));
                    add32++;
                    break;
                case 2:
                    cas_inc64(t, H64, &g64);
                    add64++;
                    break;
                default:
                    cas_inc32(t, H32, &g32);
                    add32++;
                }
            }
        }
        CHECK_OK(fh_quiet());
        CHECK_OK(fh_barrier());
        uint64_t want64 = tu_job_sum(add64), want32 = tu_job_sum(add32), v;
        uint32_t v32;
        CHECK_OK(fh_atomic(t, H64, FH_AOP_FETCH, 0, 0, &v));
        CHECK(v == want64, "H64 after a hot burst", "the %llu increments of every rank "
              "(%llu of them ours, route %s) on rank %d, saw %llu (%s)",
              (unsigned long long)want64, (unsigned long long)add64,
              route_name[route_of(me, t)], t, (unsigned long long)v,
              v < want64 ? "updates lost" : "too many");
        CHECK_OK(fh_atomic32(t, H32, FH_AOP_FETCH, 0, 0, &v32));
        CHECK(v32 == (uint32_t)want32, "H32 after a hot burst", "the %llu increments of every "
              "rank (%llu of them ours, route %s) on rank %d, saw %u (%s)",
              (unsigned long long)want32, (unsigned long long)add32,
              route_name[route_of(me, t)], t, v32,
              v32 < (uint32_t)want32 ? "updates lost" : "too many");
        total_ops += add64 + add32;
    }
    CHECK_OK(fh_barrier());
    TU_LOG("NOTE hot bursts: %llu increments of ours, %ld ms per target\n",
           (unsigned long long)total_ops, burst_ms);
    TU_SAY("ok   hot bursts: exact totals after every rank incremented one word at once "
           "over every route\n");
}

/* ------------------------------------------------- 2. message passing */

static const size_t msg_size[] = {8, 1000, 8200, MSG_SLOT};
#define NSIZES (sizeof msg_size / sizeof msg_size[0])
enum { F_ADD64, F_SET64, F_ADD32, F_BYTE, NFLAGS };
static const char *flag_name[] = {"FETCH_ADD 64", "SET 64", "FETCH_ADD 32 NB",
                                  "one-byte put"};
enum { D_PUT, D_NBI_QUIET, D_NB_WAIT, D_NBI_WAITNBI, D_NB_QUIET, D_STRIDED, NDATA };
static const char *data_name[] = {"fh_put", "fh_put_nbi + fh_quiet", "fh_put_nb + fh_wait",
                                  "fh_put_nbi + fh_wait_nbi", "fh_put_nb + fh_quiet",
                                  "fh_put_strided"};
static const char *get_name[] = {"fh_get", "fh_get_nb + fh_wait", "fh_get_nbi + fh_wait_nbi",
                                 "fh_get_strided"};

static int flag_kind(long k, int p, int c) { return (int)((k + p + 2 * c) % NFLAGS); }
static int data_kind(long k, int p, int c, int t) { return (int)((k + c + 3 * t + p) % NDATA); }
static size_t msg_len(long k, int p, int t) { return msg_size[(size_t)(k + p + t) % NSIZES]; }

/* Flags on T for the pair (P, C): one word per kind. */
static size_t flag_off(int p, int c, int kind)
{
    return FLAG_OFF + ((size_t)kind * MAXN * MAXN + (size_t)p * MAXN + (size_t)c) * 8;
}
static size_t msg_off(int p, int c, long k)
{
    return MSG_OFF + (((size_t)p * (size_t)n + (size_t)c) * (size_t)mrounds + (size_t)k) *
                         MSG_SLOT;
}

/* The value flag (p, c) of kind f on T has once round k is published. */
static uint64_t flag_want(long k, int p, int c, int f)
{
    if (f == F_SET64 || f == F_BYTE)
        return (uint64_t)k + 1;
    uint64_t m = 0;
    for (long j = 0; j <= k; j++)
        m += flag_kind(j, p, c) == f;
    return m;
}

static void produce(long k, int t, int c, char *buf)
{
    size_t len = msg_len(k, me, t);
    char *dst = at(t, msg_off(me, c, k));
    tu_fill(buf, len, tu_key((uint64_t)me * MAXN + (uint64_t)c, (uint64_t)k, (uint64_t)t), 0);
    fh_handle_t h = FH_HANDLE_DONE;
    switch (data_kind(k, me, c, t)) {
    case D_PUT:
        CHECK_OK(fh_put(t, dst, buf, len));
        break;
    case D_NBI_QUIET:
        CHECK_OK(fh_put_nbi(t, dst, buf, len / 2));
        CHECK_OK(fh_put_nbi(t, dst + len / 2, buf + len / 2, len - len / 2));
        CHECK_OK(fh_quiet());
        break;
    case D_NB_WAIT:
        CHECK_OK(fh_put_nb(t, dst, buf, len, &h));
        CHECK_OK(fh_wait(h));
        h = FH_HANDLE_DONE;
        break;
    case D_NBI_WAITNBI:
        CHECK_OK(fh_put_nbi(t, dst, buf, len));
        CHECK_OK(fh_wait_nbi());
        break;
    case D_NB_QUIET:   /* the handle is waited for only after the flag */
        CHECK_OK(fh_put_nb(t, dst, buf, len, &h));
        CHECK_OK(fh_quiet());
        break;
    default:           /* 8-byte blocks, even then odd */
        CHECK_OK(fh_put_strided(t, dst, 16, buf, 16, 8, len / 16));
        CHECK_OK(fh_put_strided(t, dst + 8, 16, buf + 8, 16, 8, len / 16));
        if (len % 16)
            CHECK_OK(fh_put(t, dst + len - len % 16, buf + len - len % 16, len % 16));
    }
    int f = flag_kind(k, me, c);
    void *flag = at(t, flag_off(me, c, f));
    switch (f) {
    case F_ADD64:
        CHECK_OK(fh_atomic(t, flag, FH_AOP_FETCH_ADD, 1, 0, NULL));
        break;
    case F_SET64:
        CHECK_OK(fh_atomic(t, flag, FH_AOP_SET, (uint64_t)k + 1, 0, NULL));
        break;
    case F_ADD32: {
        fh_handle_t fh;
        CHECK_OK(fh_atomic32_nb(t, flag, FH_AOP_FETCH_ADD, 1, 0, NULL, &fh));
        CHECK_OK(fh_wait(fh));
        break;
    }
    default: {
        uint8_t b = (uint8_t)(k + 1);
        CHECK_OK(fh_put(t, flag, &b, 1));
    }
    }
    CHECK_OK(fh_wait(h));
}

static long polls;

static void consume(long k, int p, int t, char *buf, long route_pairs[3][3])
{
    int f = flag_kind(k, p, me);
    uint64_t want = flag_want(k, p, me, f), v = 0;
    void *flag = at(t, flag_off(p, me, f));
    double deadline = tu_now() + 60;
    for (;;) {
        if (f == F_ADD64 || f == F_SET64) {
            CHECK_OK(fh_atomic(t, flag, FH_AOP_FETCH, 0, 0, &v));
        } else if (f == F_ADD32) {
            uint32_t v32;
            CHECK_OK(fh_atomic32(t, flag, FH_AOP_FETCH, 0, 0, &v32));
            v = v32;
        } else {
            uint8_t b;
            CHECK_OK(fh_get(&b, t, flag, 1));
            v = b;
        }
        polls++;
        if (v >= want)
            break;
        if (polls % 8 == 0)   /* 2 cores: let the producer run */
            sched_yield();
        CHECK(tu_now() < deadline, "flag", "round %ld's flag (%s) from rank %d on rank %d to "
              "reach %llu within 60 s, saw %llu", k, flag_name[f], p, t,
              (unsigned long long)want, (unsigned long long)v);
    }
    size_t len = msg_len(k, p, t);
    const char *src = at(t, msg_off(p, me, k));
    memset(buf, 0, len);
    int g = (int)((k + me + t) % 4);
    switch (g) {
    case 0:
        CHECK_OK(fh_get(buf, t, src, len));
        break;
    case 1: {
        fh_handle_t h;
        CHECK_OK(fh_get_nb(buf, t, src, len, &h));
        CHECK_OK(fh_wait(h));
        break;
    }
    case 2:
        CHECK_OK(fh_get_nbi(buf, t, src, len));
        CHECK_OK(fh_wait_nbi());
        break;
    default:
        CHECK_OK(fh_get_strided(buf, 8, t, src, 8, 8, len / 8));
    }
    TU_VERIFY(buf, len, tu_key((uint64_t)p * MAXN + (uint64_t)me, (uint64_t)k, (uint64_t)t), 0,
              "round %ld: %zu bytes rank %d put into rank %d (route %s, %s) before raising "
              "the flag (%s), read by us (route %s, %s) after seeing it", k, len, p, t,
              route_name[route_of(p, t)], data_name[data_kind(k, p, me, t)], flag_name[f],
              route_name[route_of(me, t)], get_name[g]);
    route_pairs[route_of(p, t)][route_of(me, t)]++;
}

static void phase_messages(void)
{
    memset(mine + FLAG_OFF, 0, BAR_OFF - FLAG_OFF);
    CHECK_OK(fh_barrier());
    char *buf = malloc(MSG_SLOT);
    CHECK(buf != NULL, "malloc", "message buffer");
    long pairs[3][3] = {{0}};
    double t0 = tu_now();
    for (long k = 0; k < mrounds; k++) {
        for (int j = 0; j < n; j++) {          /* every target, every consumer */
            int t = (me + j) % n;
            for (int c = 0; c < n; c++)
                if (c != me)
                    produce(k, t, c, buf);
        }
        for (int j = 0; j < n; j++) {          /* every target, every producer */
            int t = (me + n - j) % n;
            for (int p = 0; p < n; p++)
                if (p != me)
                    consume(k, p, t, buf, pairs);
        }
    }
    CHECK_OK(fh_barrier());
    TU_LOG("NOTE messages: %ld rounds in %.2f s, %ld flag polls; producer->target / "
           "consumer->target routes: self/node %ld self/net %ld node/self %ld node/node %ld "
           "node/net %ld net/self %ld net/node %ld net/net %ld\n", mrounds, tu_now() - t0, polls,
           pairs[R_SELF][R_NODE], pairs[R_SELF][R_NET], pairs[R_NODE][R_SELF],
           pairs[R_NODE][R_NODE], pairs[R_NODE][R_NET], pairs[R_NET][R_SELF],
           pairs[R_NET][R_NODE], pairs[R_NET][R_NET]);
    /* the pairs every route mix of the job offers must have been seen */
    long mixed = tu_job_sum((uint64_t)(pairs[R_NODE][R_NET] + pairs[R_NET][R_NODE]));
    long local = tu_job_sum((uint64_t)(pairs[R_NODE][R_NODE] + pairs[R_SELF][R_NODE] +
                                       pairs[R_NODE][R_SELF]));
    if (grp >= 2 && grp < n)
        CHECK(mixed > 0 && local > 0, "route coverage",
              "node/net and node-only message pairs, saw %ld and %ld", mixed, local);
    TU_SAY("ok   message passing: data completed, then a flag; readers on other routes "
           "see the data once they see the flag\n");
    free(buf);
}

/* ----------------------------------------- 3. visibility across barrier */

static void phase_barrier(void)
{
    char *buf = malloc(BAR_SLOT);
    CHECK(buf != NULL, "malloc", "slot buffer");
    long iters = rounds / 2 > 2 ? rounds / 2 : 2;
    for (long it = 0; it < iters; it++) {
        fh_handle_t hs[MAXN];
        size_t nh = 0;
        char *srcs = malloc((size_t)n * BAR_SLOT);
        CHECK(srcs != NULL, "malloc", "sources");
        for (int j = 0; j < n; j++) {
            int t = (me + j) % n;
            char *src = srcs + (size_t)t * BAR_SLOT;
            char *dst = at(t, BAR_OFF + (size_t)me * BAR_SLOT);
            tu_fill(src, BAR_SLOT, tu_key(1000 + (uint64_t)me, (uint64_t)it, (uint64_t)t), 0);
            switch ((it + t) % 3) {
            case 0:
                CHECK_OK(fh_put(t, dst, src, BAR_SLOT));
                break;
            case 1:
                CHECK_OK(fh_put_nb(t, dst, src, BAR_SLOT, &hs[nh++]));
                break;
            default:
                CHECK_OK(fh_put_nbi(t, dst, src, BAR_SLOT));
            }
        }
        CHECK_OK(fh_quiet());       /* completes the NB ones */
        CHECK_OK(fh_wait_nbi());
        CHECK_OK(fh_barrier());
        CHECK_OK(fh_wait_all(hs, nh));
        free(srcs);
        for (int w = 0; w < n; w++)   /* the owner, with loads */
            TU_VERIFY(mine + BAR_OFF + (size_t)w * BAR_SLOT, BAR_SLOT,
                      tu_key(1000 + (uint64_t)w, (uint64_t)it, (uint64_t)me), 0,
                      "iteration %ld: rank %d's put (route %s) read by us with loads after "
                      "fh_barrier", it, w, route_name[route_of(w, me)]);
        for (int j = 0; j < n; j++) {
            int t = (me + j) % n;
            for (int w = 0; w < n; w++) {
                memset(buf, 0, BAR_SLOT);
                CHECK_OK(fh_get(buf, t, at(t, BAR_OFF + (size_t)w * BAR_SLOT), BAR_SLOT));
                TU_VERIFY(buf, BAR_SLOT, tu_key(1000 + (uint64_t)w, (uint64_t)it, (uint64_t)t),
                          0, "iteration %ld: rank %d's put into rank %d (route %s) read by us "
                          "(route %s) after fh_barrier", it, w, t, route_name[route_of(w, t)],
                          route_name[route_of(me, t)]);
            }
        }
        CHECK_OK(fh_barrier());
    }
    free(buf);
    TU_SAY("ok   barrier: puts of every writer completed before fh_barrier, read after "
           "it by every reader, every pair of routes\n");
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("node_stress_test");
    me = fh_rank();
    n = fh_nranks();
    grp = tu_opt(argc, argv, "--group", n);
    rounds = tu_scale(tu_opt(argc, argv, "--rounds", 30));
    mrounds = tu_scale(tu_opt(argc, argv, "--msg-rounds", 8));
    long burst_ms = tu_opt(argc, argv, "--burst-ms", 100);
    CHECK(n <= MAXN, "setup", "at most %d ranks, saw %d", MAXN, n);
    CHECK(mrounds < 255 && MSG_OFF + (size_t)n * (size_t)n * (size_t)mrounds * MSG_SLOT <= SEG,
          "setup", "--msg-rounds at most %zu for %d ranks, saw %ld",
          (SEG - MSG_OFF) / ((size_t)n * (size_t)n * MSG_SLOT), n, mrounds);
    CHECK(BAR_OFF + (size_t)n * BAR_SLOT <= MSG_OFF, "setup", "phase 3 slots fit");
    tu_seed_init();
    fh_seg_t seg;
    CHECK_OK(fh_segment_create(SEG, &seg, (void **)&mine));
    for (int r = 0; r < n; r++)
        CHECK_OK(fh_segment_query(seg, r, (void **)&base[r], NULL));
    check_routes();
    TU_SAY("node_stress_test: %d ranks, node groups of %ld, %ld rounds\n", n, grp, rounds);

    long phases = tu_opt(argc, argv, "--phases", 15);
    if (phases & 1)
        phase_atomics();
    if (phases & 2)
        phase_hot(burst_ms);
    if (phases & 4)
        phase_messages();
    if (phases & 8)
        phase_barrier();

    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("PASS node_stress_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
