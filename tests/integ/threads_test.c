/*
 * threads_test.c -- concurrent communication from several threads per rank.
 *
 * T threads (default 4) per rank.  Thread (r, i) owns slot (r, i) in every
 * rank's put area.  Each iteration it writes a fresh pattern into its slot on
 * every rank (self included) with blocking / NB / NBI puts (several in
 * flight), reads it back with blocking / NB / NBI gets and verifies, reads a
 * random range of the owner's read-only pattern area and verifies, and sends
 * short + medium AM requests to every rank (each answered by a short reply
 * routed back to the sending thread; the thread waits for all its replies).
 * Targets count requests per (source rank, source thread) and check the
 * sequence numbers: include/firehose.h promises that short and medium
 * requests from one thread to one rank are delivered in order, and requests
 * only arrive at the service path, whose handlers run under its lock (one
 * at a time, docs/design.md), so a sequence number other than the next one
 * expected is a failure.
 *
 * Handle rules (first two threads of each rank): a pending handle created by
 * thread A and waited/tested by thread B -> FH_ERR_HANDLE and it stays valid
 * for A; a consumed handle waited/tested again -> FH_ERR_HANDLE; garbage
 * values -> FH_ERR_HANDLE (fh_wait, fh_test, fh_wait_all).
 *
 * Run it with FH_PATHS=independent and FH_PATHS=shared.
 * Usage: threads_test [--threads T] [--iters N]
 */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define KiB ((size_t)1 << 10)
#define SLOT (256 * KiB)
#define RAREA (1024 * KiB)
#define MAXT 16
#define H_REQ 140
#define H_REQM 141
#define H_REP 142

static int me, N, T;
static long iters;
static fh_seg_t seg;
static uint8_t **bases;
static size_t PAREA;
static pthread_barrier_t tbar;

static atomic_ulong replies[MAXT];
static atomic_ulong *rx_count;       /* [src * MAXT + tid] */
static atomic_ulong *rx_next;        /* [src * MAXT + tid] expected seq */

static uint64_t rarea_key(int owner) { return tu_key((uint64_t)owner, 77, 77); }

static void on_req(fh_token_t tok, void *buf, size_t nbytes,
                   const uint64_t *args, unsigned nargs)
{
    int src = -1;
    CHECK_OK(fh_token_source(tok, &src));
    CHECK(nargs == 3 && src >= 0 && src < N && args[2] == (uint64_t)src &&
          args[0] < MAXT, "thread AM handler", "expected 3 args [tid, seq, "
          "src=%d], saw %u args src arg %" PRIu64, src, nargs,
          nargs >= 3 ? args[2] : 0);
    unsigned tid = (unsigned)args[0];
    uint64_t seq = args[1];
    if (buf) {
        TU_VERIFY(buf, nbytes, tu_key((uint64_t)src, tid, seq), 0,
                  "medium from rank %d thread %u seq %" PRIu64, src, tid, seq);
    }
    unsigned long exp = atomic_fetch_add(&rx_next[src * MAXT + tid], 1);
    CHECK(exp == seq, "AM order", "from rank %d thread %u: expected seq %lu "
          "(requests of one thread to one rank arrive in order), saw %" PRIu64,
          src, tid, exp, seq);
    atomic_fetch_add(&rx_count[src * MAXT + tid], 1);
    uint64_t ra[2] = {tid, seq};
    int rc = fh_am_reply_short(tok, H_REP, ra, 2);
    CHECK(rc == FH_OK, "thread AM reply", "expected FH_OK, saw %s [%s]",
          fh_err_name(rc), fh_last_error());
}

static void on_rep(fh_token_t tok, void *buf, size_t nbytes,
                   const uint64_t *args, unsigned nargs)
{
    (void)tok; (void)buf; (void)nbytes;
    CHECK(nargs == 2 && args[0] < MAXT, "thread AM reply handler",
          "expected 2 args [tid, seq], saw %u", nargs);
    atomic_fetch_add(&replies[args[0]], 1);
}

static void complete(fh_handle_t *hs, int *modes, int n, int tid,
                     const char *what)
{
    for (int i = 0; i < n; i++) {
        if (modes[i] == 1) {
            int rc = fh_wait(hs[i]);
            CHECK(rc == FH_OK, what, "thread %d fh_wait: expected FH_OK, saw "
                  "%s [%s]", tid, fh_err_name(rc), fh_last_error());
        } else if (modes[i] == 2) {
            int rc;
            double t0 = tu_now();
            while ((rc = fh_test(hs[i])) == FH_ERR_AGAIN)
                CHECK(tu_now() - t0 < 60, what, "fh_test pending > 60 s");
            CHECK(rc == FH_OK, what, "thread %d fh_test: expected FH_OK, saw "
                  "%s [%s]", tid, fh_err_name(rc), fh_last_error());
        }
    }
    CHECK_OK(fh_wait_nbi());
}

/* ----------------------------------------------------------- handles */

static fh_handle_t shared_h;
static uint8_t *hbuf;

static void handle_checks(int tid)
{
    int peer = (me + 1) % N;
    if (tid == 0) {
        size_t n = 1024 * KiB;
        shared_h = FH_HANDLE_DONE;
        for (int tries = 0; tries < 20 && shared_h == FH_HANDLE_DONE; tries++) {
            CHECK_OK(fh_get_nb(hbuf, peer, bases[peer] + PAREA, n, &shared_h));
            if (shared_h == FH_HANDLE_DONE) continue;
        }
    }
    pthread_barrier_wait(&tbar);
    if (shared_h == FH_HANDLE_DONE) {
        if (tid == 0)
            TU_LOG("SKIP foreign-handle check: 1 MiB get_nb completed at "
                   "initiation 20 times\n");
        pthread_barrier_wait(&tbar);
    } else {
        if (tid == 1) {
            CHECK_RC(fh_wait(shared_h), FH_ERR_HANDLE);
            CHECK_RC(fh_test(shared_h), FH_ERR_HANDLE);
            fh_handle_t one = shared_h;
            CHECK_RC(fh_wait_all(&one, 1), FH_ERR_HANDLE);
        }
        pthread_barrier_wait(&tbar);
        if (tid == 0) {
            /* B's attempts must not have consumed it. */
            CHECK_OK(fh_wait(shared_h));
            TU_VERIFY(hbuf, 1024 * KiB, rarea_key(peer), 0,
                      "get_nb whose handle another thread tried to wait on");
            CHECK_RC(fh_wait(shared_h), FH_ERR_HANDLE);
            CHECK_RC(fh_test(shared_h), FH_ERR_HANDLE);
        }
    }
    if (tid == 0) {
        /* consumed by fh_test */
        fh_handle_t h;
        uint64_t v;
        CHECK_OK(fh_get_nb(&v, peer, bases[peer] + PAREA, 8, &h));
        int rc;
        double t0 = tu_now();
        while ((rc = fh_test(h)) == FH_ERR_AGAIN)
            CHECK(tu_now() - t0 < 60, "fh_test", "pending > 60 s");
        CHECK_RC(rc, FH_OK);
        if (h != FH_HANDLE_DONE) {
            CHECK_RC(fh_test(h), FH_ERR_HANDLE);
            CHECK_RC(fh_wait(h), FH_ERR_HANDLE);
        }
        /* consumed by fh_wait_all */
        fh_handle_t hs[2];
        CHECK_OK(fh_get_nb(&v, peer, bases[peer] + PAREA, 8, &hs[0]));
        CHECK_OK(fh_put_nb(me, bases[me] + PAREA - 8, &v, 8, &hs[1]));
        fh_handle_t keep[2] = {hs[0], hs[1]};
        CHECK_OK(fh_wait_all(hs, 2));
        for (int i = 0; i < 2; i++)
            if (keep[i] != FH_HANDLE_DONE)
                CHECK_RC(fh_wait(keep[i]), FH_ERR_HANDLE);
        /* garbage */
        fh_handle_t g[] = {0xdeadbeefdeadbeefULL, 0x1ULL, ~(fh_handle_t)0,
                           0x8000000000000000ULL, 0x00000000ffffffffULL};
        for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
            CHECK_RC(fh_wait(g[i]), FH_ERR_HANDLE);
            CHECK_RC(fh_test(g[i]), FH_ERR_HANDLE);
        }
        CHECK_RC(fh_wait_all(g, 2), FH_ERR_HANDLE);
        CHECK_RC(fh_wait(FH_HANDLE_DONE), FH_OK);
        CHECK_RC(fh_test(FH_HANDLE_DONE), FH_OK);
    }
    pthread_barrier_wait(&tbar);
}

/* ------------------------------------------------------------ workers */

static void *worker(void *arg)
{
    int tid = (int)(intptr_t)arg;
    tu_rng_t r = tu_rng_make(tu_seed, (uint64_t)me, (uint64_t)tid, 4242);
    size_t maxmed = fh_am_max_medium();
    uint8_t *src = malloc(SLOT), *dst = malloc(SLOT + 64), *med = malloc(maxmed);
    fh_handle_t hs[32];
    int modes[32];
    unsigned long sent = 0;
    uint64_t *seq = calloc((size_t)N, sizeof *seq);
    char what[64];

    handle_checks(tid);

    for (long it = 0; it < iters; it++) {
        for (int d = 0; d < N; d++) {
            int t = (me + d + tid) % N;
            uint8_t *slot = bases[t] + (size_t)(me * T + tid) * SLOT;
            uint64_t key = tu_key((uint64_t)(me * MAXT + tid), (uint64_t)it,
                                  (uint64_t)t);
            snprintf(what, sizeof what, "thread %d it %ld rank %d", tid, it, t);
            tu_fill(src, SLOT, key, 0);
            /* put the slot in k pieces with mixed modes */
            int k = 1 + (int)tu_rng_below(&r, 8);
            size_t piece = SLOT / (size_t)k;
            for (int j = 0; j < k; j++) {
                size_t off = (size_t)j * piece;
                size_t n = j == k - 1 ? SLOT - off : piece;
                modes[j] = (int)tu_rng_below(&r, 4);
                hs[j] = FH_HANDLE_DONE;
                int rc;
                switch (modes[j]) {
                case 0: rc = fh_put(t, slot + off, src + off, n); break;
                case 1: case 2:
                    rc = fh_put_nb(t, slot + off, src + off, n, &hs[j]); break;
                default: rc = fh_put_nbi(t, slot + off, src + off, n);
                }
                CHECK(rc == FH_OK, what, "put mode %d %zu B: expected FH_OK, "
                      "saw %s [%s]", modes[j], n, fh_err_name(rc),
                      fh_last_error());
            }
            complete(hs, modes, k, tid, what);
            /* read back a random range */
            size_t n = 1 + tu_rng_below(&r, SLOT);
            size_t off = tu_rng_below(&r, SLOT - n + 1);
            size_t mis = tu_rng_below(&r, 64);
            memset(dst, 0, n + mis);
            int m = (int)tu_rng_below(&r, 4);
            modes[0] = m;
            hs[0] = FH_HANDLE_DONE;
            int rc = m == 0 ? fh_get(dst + mis, t, slot + off, n)
                   : m == 3 ? fh_get_nbi(dst + mis, t, slot + off, n)
                   : fh_get_nb(dst + mis, t, slot + off, n, &hs[0]);
            CHECK(rc == FH_OK, what, "get back: expected FH_OK, saw %s [%s]",
                  fh_err_name(rc), fh_last_error());
            complete(hs, modes, 1, tid, what);
            TU_VERIFY(dst + mis, n, key, off, "%s: get back of own slot "
                      "(mode %d, %zu B at +%zu)", what, m, n, off);
            /* read the owner's read-only area */
            n = 1 + tu_rng_below(&r, RAREA / 4);
            off = tu_rng_below(&r, RAREA - n + 1);
            CHECK_OK(fh_get(dst, t, bases[t] + PAREA + off, n));
            TU_VERIFY(dst, n, rarea_key(t), off, "%s: read-only area", what);
            /* AMs */
            for (int a = 0; a < 4; a++) {
                uint64_t args[3] = {(uint64_t)tid, seq[t]++, (uint64_t)me};
                if (a & 1) {
                    size_t mn = tu_rng_below(&r, maxmed + 1);
                    tu_fill(med, mn, tu_key((uint64_t)me, (uint64_t)tid,
                                            args[1]), 0);
                    rc = fh_am_request_medium(t, H_REQM, med, mn, args, 3);
                } else {
                    rc = fh_am_request_short(t, H_REQ, args, 3);
                }
                CHECK(rc == FH_OK, what, "AM request: expected FH_OK, saw %s "
                      "[%s]", fh_err_name(rc), fh_last_error());
                sent++;
            }
        }
        double t0 = tu_now();
        while (atomic_load(&replies[tid]) < sent) {
            CHECK_OK(fh_poll());
            CHECK(tu_now() - t0 < 60, "thread replies", "thread %d: %lu of %lu"
                  " replies after 60 s", tid, atomic_load(&replies[tid]), sent);
        }
    }
    CHECK_OK(fh_quiet());
    free(src); free(dst); free(med); free(seq);
    return NULL;
}

static void am_noop(fh_token_t t, void *b, size_t n, const uint64_t *a,
                    unsigned na)
{
    (void)t; (void)b; (void)n; (void)a; (void)na;
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("threads_test");
    me = fh_rank();
    N = fh_nranks();
    tu_seed_init();
    T = (int)tu_opt(argc, argv, "--threads", 4);
    if (T < 2) T = 2;
    if (T > MAXT) T = MAXT;
    iters = tu_opt(argc, argv, "--iters", tu_scale(N <= 4 ? 20 : 6));
    CHECK_OK(fh_am_register(H_REQ, on_req, "thr_req"));
    CHECK_OK(fh_am_register(H_REQM, on_req, "thr_req_medium"));
    CHECK_OK(fh_am_register(H_REP, on_rep, "thr_rep"));
    CHECK_OK(fh_am_register(H_REP + 1, am_noop, "noop"));
    rx_count = calloc((size_t)N * MAXT, sizeof *rx_count);
    rx_next = calloc((size_t)N * MAXT, sizeof *rx_next);

    PAREA = (size_t)N * (size_t)T * SLOT;
    void *lb;
    CHECK_OK(fh_segment_create(PAREA + RAREA, &seg, &lb));
    bases = calloc((size_t)N, sizeof *bases);
    for (int r = 0; r < N; r++)
        CHECK_OK(fh_segment_query(seg, r, (void **)&bases[r], NULL));
    tu_fill(bases[me] + PAREA, RAREA, rarea_key(me), 0);
    hbuf = malloc(1024 * KiB);
    pthread_barrier_init(&tbar, NULL, (unsigned)T);
    CHECK_OK(fh_barrier());
    const char *paths = getenv("FH_PATHS");
    TU_SAY("threads_test: %d ranks x %d threads, %ld iterations, FH_PATHS=%s\n",
           N, T, iters, paths ? paths : "(default)");

    pthread_t th[MAXT];
    double t0 = tu_now();
    for (int i = 0; i < T; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0,
              "pthread_create", "thread %d", i);
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    double dt = tu_now() - t0;
    CHECK_OK(fh_barrier());

    /* every (source, thread) sent 4 AMs per iteration to every rank */
    unsigned long want = (unsigned long)iters * 4;
    for (int s = 0; s < N; s++)
        for (int i = 0; i < T; i++) {
            unsigned long got = atomic_load(&rx_count[s * MAXT + i]);
            CHECK(got == want, "AM count", "from rank %d thread %d: expected "
                  "%lu, saw %lu", s, i, want, got);
        }
    TU_LOG("%d threads: puts/gets verified, %lu AMs per (rank, thread) "
           "received in order, handle rules hold (%.2f s)\n", T, want, dt);
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("PASS threads_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
