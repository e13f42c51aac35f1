/*
 * reg_threads_test.c -- several threads per rank through the firehose cache
 * at once (FH_REG_STRATEGY=firehose with a small FH_FIREHOSE_M, see
 * reg_threads_test.sh), on a working set larger than M.
 *
 * Each rank owns a segment of --mib MiB (default 4) and T threads (default
 * 4) per rank work on the next rank's segment (ring).  The segment is cut
 * into STRIPE-byte stripes dealt round-robin to the threads, so every bucket
 * is shared by all T threads while no byte has two writers.  Each thread
 * mixes, at random offsets over the whole segment:
 *   - blocking puts into one of its stripes, blocking gets of up to 192 KiB
 *     (many chunks and pieces; only its own stripes are checked);
 *   - NB batches and NBI batches of puts and gets on distinct stripes;
 *   - strided puts and gets over runs of its stripes.
 * Every get is checked against the thread's shadow of its stripes, and a
 * final pass reads the whole segment back.  Then the idle phase (see
 * idle_a): one thread caches references and stops calling in while another
 * needs that budget.  Then every rank checks its
 * fh_stats: the cache must have missed, moved and evicted.
 *
 * --bench N (rank 0 of >= 2 ranks, no checks): times the hit layer alone
 * (fh_reg_hit_acquire + fh_reg_hit_release, internal.h) N times on one
 * thread, then on two threads at once, and prints ns/op and the speedup.
 *
 * Usage: reg_threads_test [--threads T] [--iters N] [--mib M] [--bench N]
 */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "firehose/internal.h"
#include "firehose/reg/firehose_internal.h"   /* the hit-layer timing API */

#define STRIPE 512u
#define MAXT 16
#define BATCH 6
#define BIGGET (192u << 10)
#define HOT (128u << 10)

static int me, N, T, tgt;
static long iters;
static size_t W;
static uint8_t *tbase;       /* the target's segment base */
static uint8_t *shadow;      /* [W]: thread k writes only its stripes */
static uint64_t seed;
static pthread_barrier_t tbar;

static bool mine(size_t off, int k)
{
    return (int)((off / STRIPE) % (size_t)T) == k;
}

/* Offset of a random stripe of thread k: half of them in the first HOT
 * bytes (one frame even on 8 ranks), where the hit layer's cached
 * references are used, and given back whenever the cold half makes the
 * cache wait for budget. */
static size_t rand_stripe(tu_rng_t *rng, int k)
{
    size_t per = (tu_rng_below(rng, 2) ? HOT : W) / STRIPE / (size_t)T;
    return ((size_t)tu_rng_below(rng, per) * (size_t)T + (size_t)k) * STRIPE;
}

/* Checks the bytes of thread k's stripes in got[0..n) read from off. */
static void verify(int k, const uint8_t *got, size_t off, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (mine(off + i, k) && got[i] != shadow[off + i])
            CHECK(0, what, "thread %d rank %d offset %zu: 0x%02x, saw 0x%02x", k, tgt,
                  off + i, shadow[off + i], got[i]);
    }
}

static void fill(tu_rng_t *rng, uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)tu_rng_next(rng);
}

typedef struct batch_op {
    bool put;
    size_t off, n;
    uint8_t *buf;
} batch_op_t;

/* A batch of NB (nb) or NBI puts/gets on distinct stripes of thread k. */
static void batch(tu_rng_t *rng, int k, bool nb, uint8_t *bufs)
{
    batch_op_t ops[BATCH];
    fh_handle_t hs[BATCH];
    unsigned nops = 1 + (unsigned)tu_rng_below(rng, BATCH);
    for (unsigned i = 0; i < nops; i++) {
        size_t off;
        bool dup;
        do {
            off = rand_stripe(rng, k);
            dup = false;
            for (unsigned j = 0; j < i; j++)
                dup |= ops[j].off == off;
        } while (dup);
        size_t n = 1 + (size_t)tu_rng_below(rng, STRIPE);
        ops[i] = (batch_op_t){.put = tu_rng_below(rng, 2) == 0, .off = off, .n = n,
                              .buf = bufs + (size_t)i * STRIPE};
        if (ops[i].put) {
            fill(rng, ops[i].buf, n);
            memcpy(shadow + off, ops[i].buf, n);
            if (nb)
                CHECK_RC(fh_put_nb(tgt, tbase + off, ops[i].buf, n, &hs[i]), FH_OK);
            else
                CHECK_RC(fh_put_nbi(tgt, tbase + off, ops[i].buf, n), FH_OK);
        } else {
            memset(ops[i].buf, 0xa5, n);
            if (nb)
                CHECK_RC(fh_get_nb(ops[i].buf, tgt, tbase + off, n, &hs[i]), FH_OK);
            else
                CHECK_RC(fh_get_nbi(ops[i].buf, tgt, tbase + off, n), FH_OK);
        }
    }
    if (nb)
        CHECK_RC(fh_wait_all(hs, nops), FH_OK);
    else
        CHECK_RC(fh_wait_nbi(), FH_OK);
    for (unsigned i = 0; i < nops; i++)
        if (!ops[i].put)
            verify(k, ops[i].buf, ops[i].off, ops[i].n, nb ? "NB get" : "NBI get");
}

/* Strided put or get over cnt consecutive stripes of thread k. */
static void strided(tu_rng_t *rng, int k, bool put, uint8_t *buf)
{
    size_t per = W / STRIPE / (size_t)T;
    size_t cnt = 1 + (size_t)tu_rng_below(rng, 64);
    size_t first = (size_t)tu_rng_below(rng, per - cnt + 1);
    size_t off = (first * (size_t)T + (size_t)k) * STRIPE;
    ptrdiff_t rs = (ptrdiff_t)((size_t)T * STRIPE);
    if (put) {
        fill(rng, buf, cnt * STRIPE);
        for (size_t i = 0; i < cnt; i++)
            memcpy(shadow + off + i * (size_t)rs, buf + i * STRIPE, STRIPE);
        CHECK_RC(fh_put_strided(tgt, tbase + off, rs, buf, STRIPE, STRIPE, cnt), FH_OK);
    } else {
        memset(buf, 0x3c, cnt * STRIPE);
        CHECK_RC(fh_get_strided(buf, STRIPE, tgt, tbase + off, rs, STRIPE, cnt), FH_OK);
        for (size_t i = 0; i < cnt; i++)
            verify(k, buf + i * STRIPE, off + i * (size_t)rs, STRIPE, "strided get");
    }
}

static void *worker(void *arg)
{
    int k = (int)(intptr_t)arg;
    tu_rng_t rng = tu_rng_make(seed, (uint64_t)me, (uint64_t)k, 3);
    uint8_t *buf = malloc(BIGGET);
    CHECK(buf != NULL, "malloc", "memory, saw NULL");
    pthread_barrier_wait(&tbar);
    for (long it = 0; it < iters; it++) {
        switch (tu_rng_below(&rng, 8)) {
        case 0:
        case 1: {
            size_t off = rand_stripe(&rng, k);
            size_t skip = (size_t)tu_rng_below(&rng, STRIPE);
            size_t n = 1 + (size_t)tu_rng_below(&rng, STRIPE - skip);
            fill(&rng, buf, n);
            memcpy(shadow + off + skip, buf, n);
            CHECK_RC(fh_put(tgt, tbase + off + skip, buf, n), FH_OK);
            break;
        }
        case 2: {
            size_t n = 1 + (size_t)tu_rng_below(&rng, BIGGET);
            size_t off = (size_t)tu_rng_below(&rng, W - n + 1);
            memset(buf, 0x5a, n);
            CHECK_RC(fh_get(buf, tgt, tbase + off, n), FH_OK);
            verify(k, buf, off, n, "blocking get");
            break;
        }
        case 3:
        case 4:
            batch(&rng, k, true, buf);
            break;
        case 5:
            batch(&rng, k, false, buf);
            break;
        case 6:
            strided(&rng, k, true, buf);
            break;
        default:
            strided(&rng, k, false, buf);
            break;
        }
    }
    pthread_barrier_wait(&tbar);
    /* Final pass: every thread reads the whole segment (all threads at
     * once: overlapping gets of the same buckets). */
    for (size_t off = 0; off < W; off += 65536) {
        CHECK_RC(fh_get(buf, tgt, tbase + off, 65536), FH_OK);
        verify(k, buf, off, 65536, "final pass");
    }
    free(buf);
    return NULL;
}

/* ------------------------------------------------------------ idle */

/* Thread A caches references on every bucket of the first MiB (puts),
 * then stops calling the runtime while thread B reads the whole segment,
 * which needs the budget A's references hold: B finishes only if the hit
 * layer takes idle threads' references back (else the run times out).
 * Then A reads its bytes back. */
static pthread_barrier_t ibar;

static void *idle_a(void *arg)
{
    (void)arg;
    tu_rng_t rng = tu_rng_make(seed, (uint64_t)me, 100, 4);
    uint8_t buf[STRIPE];
    size_t span = W < (1u << 20) ? W : (1u << 20);
    for (size_t off = 0; off < span; off += 65536) {     /* thread 0's stripes */
        fill(&rng, buf, STRIPE);
        memcpy(shadow + off, buf, STRIPE);
        CHECK_RC(fh_put(tgt, tbase + off, buf, STRIPE), FH_OK);
    }
    pthread_barrier_wait(&ibar);     /* idle while B works */
    pthread_barrier_wait(&ibar);
    for (size_t off = 0; off < span; off += 65536) {
        CHECK_RC(fh_get(buf, tgt, tbase + off, STRIPE), FH_OK);
        CHECK(memcmp(buf, shadow + off, STRIPE) == 0, "idle phase",
              "thread A's bytes at %zu unchanged, saw a difference", off);
    }
    return NULL;
}

static void *idle_b(void *arg)
{
    (void)arg;
    uint8_t *buf = malloc(65536);
    CHECK(buf != NULL, "malloc", "memory, saw NULL");
    pthread_barrier_wait(&ibar);
    for (size_t off = 0; off < W; off += 65536) {
        CHECK_RC(fh_get(buf, tgt, tbase + off, 65536), FH_OK);
        for (int k = 0; k < T; k++)
            verify(k, buf, off, 65536, "idle phase get");
    }
    pthread_barrier_wait(&ibar);
    free(buf);
    return NULL;
}

static void idle_phase(void)
{
    pthread_barrier_init(&ibar, NULL, 2);
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, idle_a, NULL) == 0, "pthread_create", "0, saw an error");
    CHECK(pthread_create(&b, NULL, idle_b, NULL) == 0, "pthread_create", "0, saw an error");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_barrier_destroy(&ibar);
}

/* ------------------------------------------------------------ bench */

static long bench_n;
static double bench_ns[2], bench_min[2];
static atomic_int bench_done;
#define H_BENCH_DONE 150

static void on_bench_done(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                          unsigned nargs)
{
    (void)tok, (void)buf, (void)nbytes, (void)args, (void)nargs;
    atomic_store(&bench_done, 1);
}

#define BENCH_ROUNDS 7

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Thread k: BENCH_ROUNDS timed rounds of bench_n / BENCH_ROUNDS hits each
 * (the threads start each round together); bench_ns[k] = its median. */
static void *bench_thread(void *arg)
{
    int k = (int)(intptr_t)arg;
    fh_thread_t *t = &fh_tls()->base;
    uintptr_t ra = (uintptr_t)tbase + (uintptr_t)k * 4096;
    CHECK_RC(fh_reg_hit_warm(t, tgt, ra, 64), FH_OK);
    fh_reg_hit_t h;
    long n = bench_n / BENCH_ROUNDS + 1, misses = 0;
    double ns[BENCH_ROUNDS];
    for (int round = 0; round < BENCH_ROUNDS; round++) {
        pthread_barrier_wait(&tbar);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++) {
            if (fh_reg_hit_acquire(t, tgt, ra, 64, &h) != FH_OK) {
                misses++;
                continue;
            }
            fh_reg_hit_release(t, &h);
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        ns[round] = ((double)(b.tv_sec - a.tv_sec) * 1e9 +
                     (double)(b.tv_nsec - a.tv_nsec)) / (double)n;
    }
    qsort(ns, BENCH_ROUNDS, sizeof ns[0], cmp_double);
    bench_ns[k] = ns[BENCH_ROUNDS / 2];
    bench_min[k] = ns[0];
    CHECK(misses == 0, "bench", "no misses after warming, saw %ld", misses);
    return NULL;
}

/* Rank 0 times; the others only serve its moves, sleeping between polls
 * so they do not take the cores the timed threads run on. */
static void bench(void)
{
    CHECK_RC(fh_am_register(H_BENCH_DONE, on_bench_done, "bench-done"), FH_OK);
    CHECK_RC(fh_barrier(), FH_OK);
    if (me != 0 || N < 2) {
        while (!atomic_load(&bench_done)) {
            CHECK_RC(fh_poll(), FH_OK);
            usleep(5000);
        }
        CHECK_RC(fh_barrier(), FH_OK);
        return;
    }
    pthread_barrier_init(&tbar, NULL, 1);
    bench_thread((void *)(intptr_t)0);
    double one = bench_ns[0], one_min = bench_min[0];
    pthread_barrier_destroy(&tbar);
    pthread_barrier_init(&tbar, NULL, 2);
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        pthread_create(&th[k], NULL, bench_thread, (void *)(intptr_t)k);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    double slow = bench_ns[0] > bench_ns[1] ? bench_ns[0] : bench_ns[1];
    printf("[0] hit path (acquire + release, median of %d rounds): 1 thread %.1f ns/op "
           "(best %.1f); 2 threads %.1f and %.1f ns/op (best %.1f, %.1f), aggregate "
           "%.2fx one thread (%ld ops per thread)\n", BENCH_ROUNDS, one, one_min,
           bench_ns[0], bench_ns[1], bench_min[0], bench_min[1], 2.0 * one / slow, bench_n);
    pthread_barrier_destroy(&tbar);
    for (int r = 1; r < N; r++)
        CHECK_RC(fh_am_request_short(r, H_BENCH_DONE, NULL, 0), FH_OK);
    CHECK_RC(fh_barrier(), FH_OK);
}

int main(int argc, char **argv)
{
    T = (int)tu_opt(argc, argv, "--threads", 4);
    iters = tu_opt(argc, argv, "--iters", 1500);
    size_t mib = (size_t)tu_opt(argc, argv, "--mib", 4);
    bench_n = tu_opt(argc, argv, "--bench", bench_n);
    if (T < 1 || T > MAXT)
        T = 4;
    CHECK_RC(fh_init(&argc, &argv), FH_OK);
    tu_init_rank("reg_threads_test");
    me = fh_rank();
    N = fh_nranks();
    seed = tu_seed_init();
    W = mib << 20;
    CHECK(W >= (size_t)T * STRIPE * 64 && W >= BIGGET, "--mib", "a larger segment, saw %zu",
          W);
    fh_seg_t seg;
    void *mybase;
    CHECK_RC(fh_segment_create(W, &seg, &mybase), FH_OK);
    tgt = (me + 1) % N;
    void *tb;
    size_t tsize;
    CHECK_RC(fh_segment_query(seg, tgt, &tb, &tsize), FH_OK);
    tbase = tb;
    CHECK_RC(fh_barrier(), FH_OK);

    if (bench_n > 0) {
        bench();
    } else {
        shadow = calloc(1, W);     /* segments start zeroed */
        CHECK(shadow != NULL, "calloc", "memory, saw NULL");
        pthread_barrier_init(&tbar, NULL, (unsigned)T);
        pthread_t th[MAXT];
        for (int k = 0; k < T; k++)
            CHECK(pthread_create(&th[k], NULL, worker, (void *)(intptr_t)k) == 0,
                  "pthread_create", "0, saw an error");
        for (int k = 0; k < T; k++)
            pthread_join(th[k], NULL);
        pthread_barrier_destroy(&tbar);
        CHECK_RC(fh_barrier(), FH_OK);
        idle_phase();
        CHECK_RC(fh_barrier(), FH_OK);
        fh_peer_stats_t s = FH_PEER_STATS_INIT;
        CHECK_RC(fh_stats_peer(me, &s), FH_OK);
        printf("[%d] %d threads x %ld ops on rank %d verified: reg_hits=%llu "
               "reg_misses=%llu moves=%llu evictions=%llu coalesced=%llu\n", me, T, iters,
               tgt, (unsigned long long)s.reg_hits, (unsigned long long)s.reg_misses,
               (unsigned long long)s.reg_moves, (unsigned long long)s.reg_evictions,
               (unsigned long long)s.reg_pending_coalesced);
        /* (Hits are not required: on 8 ranks F = M/7 and four threads
         * sweeping 4 MiB may never find a firehose still held.) */
        CHECK(s.reg_misses > 0 && s.reg_moves > 0, "stats",
              "misses and moves > 0, saw %llu %llu", (unsigned long long)s.reg_misses,
              (unsigned long long)s.reg_moves);
        CHECK(s.reg_evictions > 0, "stats", "evictions > 0 (working set > M), saw 0");
        free(shadow);
    }
    CHECK_RC(fh_segment_destroy(seg), FH_OK);
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 0)
        printf("PASS reg_threads_test\n");
    CHECK_RC(fh_finalize(), FH_OK);
    return 0;
}
