/*
 * am_flow_test.c -- AM flow control (include/firehose.h, "Requests ... may
 * block only for flow control"; firehose/internal.h, "Flow control"): a
 * sender that outruns its credits blocks, the target's receive buffers are
 * never exhausted, and nothing is lost.
 *
 *   stall: rank 0 stops calling firehose.  T threads on every other rank
 *     send short and medium (up to fh_am_max_medium) requests to it
 *     and count, in an out-of-band shared word (oob.h), every request call
 *     that returned.  Rank 0 waits (no firehose call) until each sender got
 *     a call back (a sender may also block earlier than its credits, when
 *     the transport's own queue is full: that is flow control too), then a
 *     grace second for a sender without flow control to run ahead,
 *     and checks that no sender rank got more than FH_AM_CREDITS x T calls
 *     back (one window per path; a thread's path is its own or shared).
 *     Then it polls: every request of every thread must arrive exactly
 *     once, short and medium in each thread's send order, each payload
 *     intact (a pattern keyed by sender, thread and sequence number).
 *   flood: the same plus long requests, with rank 0 polling and every
 *     request answered by a short reply; each thread counts its replies
 *     (exact).
 *   Afterwards rank 0's am_dropped counter is 0.
 *
 * The driver runs it with FH_AM_CREDITS=2 (the window is tiny, so the
 * senders spend most of their time out of credits) and the default.
 * Usage: am_flow_test [--threads T] [--msgs M]
 */
#include <pthread.h>

#include "oob.h"

#define MAXT 8
#define MAXN 64
#define H_REQ (FH_AM_USER_FIRST + 1)
#define H_REQ_R (FH_AM_USER_FIRST + 2)
#define H_REP (FH_AM_USER_FIRST + 3)
#define LSLOT 8192            /* one long payload area on rank 0 */
#define LRING 40              /* areas per (rank, thread): more than the
                                 requests a thread can have in flight */
#define WAIT_S 120.0

static int me, N, T;
static long M;
static long credits;
static char *lbase;           /* rank 0's segment */
static volatile uint64_t *oob;
#define RETURNED(r) (&oob[(r)])          /* calls returned on rank r (stall) */
#define STALLED (&oob[MAXN])             /* rank 0 no longer calls firehose */

/* Rank 0: per (sender, thread) the next expected in-order sequence number
 * and the long messages seen; only handlers touch them (service path). */
static uint64_t next_seq[MAXN][MAXT], longs_seen[MAXN][MAXT], handled;
static uint64_t replies[MAXT];   /* senders: replies received per thread */

static uint64_t key_of(int r, int i, uint64_t seq)
{
    return tu_mix64(((uint64_t)r << 40) ^ ((uint64_t)i << 32) ^ seq ^ 0x77);
}

/* Message k of a thread: kind 0 short, 1 medium, 2 long (not in the stall
 * phase: a long payload may need the target's help to be registered there,
 * so a long request may wait for the target as well as for credits). */
static int use_long;
static int kind_of(uint64_t k) { return (int)(use_long && k % 5 == 4 ? 2 : k % 2); }
static size_t len_of(uint64_t k, size_t maxmed)
{
    return kind_of(k) == 0 ? 0 : kind_of(k) == 1 ? 1 + (size_t)(k * 977) % maxmed
                                                : 1 + (size_t)(k * 3301) % LSLOT;
}

static void on_request(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na,
                       int reply)
{
    int src;
    CHECK_OK(fh_token_source(tok, &src));
    CHECK(na == 3 && src > 0 && src < N && a[0] < (uint64_t)T, "request",
          "3 args from a sender, saw %u args from rank %d", na, src);
    int i = (int)a[0];
    uint64_t seq = a[1];
    int kind = kind_of(seq);
    CHECK(a[2] == (uint64_t)kind, "request kind", "%d for seq %" PRIu64 ", saw %" PRIu64,
          kind, seq, a[2]);
    if (kind == 2) {
        longs_seen[src][i]++;
    } else {
        CHECK(seq == next_seq[src][i], "order of short/medium requests",
              "from rank %d thread %d: seq %" PRIu64 ", saw %" PRIu64, src, i,
              next_seq[src][i], seq);
    }
    /* next in-order number: skip the long ones (unordered) */
    if (kind != 2)
        do next_seq[src][i]++; while (kind_of(next_seq[src][i]) == 2);
    size_t want = len_of(seq, fh_am_max_medium());
    CHECK(n == want, "payload length", "%zu for seq %" PRIu64 ", saw %zu", want, seq, n);
    if (n)
        TU_VERIFY(buf, n, key_of(src, i, seq), 0, "payload of seq %" PRIu64 " from rank %d "
                  "thread %d", seq, src, i);
    __atomic_add_fetch(&handled, 1, __ATOMIC_RELEASE);
    if (reply)
        CHECK_OK(fh_am_reply_short(tok, H_REP, a, 1));
}

static void h_req(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    on_request(tok, buf, n, a, na, 0);
}

static void h_req_r(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    on_request(tok, buf, n, a, na, 1);
}

static void h_rep(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok; (void)buf; (void)n;
    CHECK(na == 1 && a[0] < (uint64_t)T, "reply", "1 arg naming a thread, saw %u", na);
    __atomic_add_fetch(&replies[a[0]], 1, __ATOMIC_RELEASE);
}

static int with_reply;

static void *sender(void *arg)
{
    int i = (int)(intptr_t)arg;
    size_t maxmed = fh_am_max_medium();
    char *buf = malloc(LSLOT > maxmed ? LSLOT : maxmed);
    char *ring = lbase + ((size_t)me * MAXT + (size_t)i) * LRING * LSLOT;
    unsigned h = with_reply ? H_REQ_R : H_REQ;
    CHECK(buf != NULL, "malloc", "memory");
    for (uint64_t k = 0; k < (uint64_t)M; k++) {
        uint64_t a[3] = {(uint64_t)i, k, (uint64_t)kind_of(k)};
        size_t n = len_of(k, maxmed);
        tu_fill(buf, n, key_of(me, i, k), 0);
        switch (kind_of(k)) {
        case 0: CHECK_OK(fh_am_request_short(0, h, a, 3)); break;
        case 1: CHECK_OK(fh_am_request_medium(0, h, buf, n, a, 3)); break;
        default: {
            char *dst = ring + (k / 5 % LRING) * LSLOT;
            CHECK_OK(fh_am_request_long(0, h, buf, n, dst, a, 3));
            break;
        }
        }
        if (!with_reply)
            tu_oob_add(RETURNED(me), 1);
    }
    if (with_reply)
        tu_wait_for(&replies[i], (uint64_t)M);
    free(buf);
    return NULL;
}

static void run_senders(void)
{
    pthread_t th[MAXT];
    for (int i = 0; i < T; i++)
        CHECK(pthread_create(&th[i], NULL, sender, (void *)(intptr_t)i) == 0,
              "pthread_create", "0");
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
}

/* Rank 0: polls until every request of the phase was handled. */
static void drain(uint64_t want)
{
    double t0 = tu_now();
    while (__atomic_load_n(&handled, __ATOMIC_ACQUIRE) != want) {
        CHECK(tu_now() - t0 < WAIT_S, "requests handled", "%" PRIu64 " within %.0f s, saw "
              "%" PRIu64 " (lost?)", want, WAIT_S, __atomic_load_n(&handled, __ATOMIC_ACQUIRE));
        CHECK_OK(fh_poll());
    }
}

static void check_counts(uint64_t phase_total)
{
    for (int r = 1; r < N; r++)
        for (int i = 0; i < T; i++) {
            uint64_t inorder = 0;
            for (uint64_t k = 0; k < (uint64_t)M; k++)
                inorder += kind_of(k) != 2;
            uint64_t longs = (uint64_t)M - inorder;
            CHECK(longs_seen[r][i] == longs, "long requests", "from rank %d thread %d: %"
                  PRIu64 ", saw %" PRIu64, r, i, longs, longs_seen[r][i]);
            longs_seen[r][i] = 0;
            next_seq[r][i] = 0;
        }
    CHECK(handled == phase_total, "requests handled", "%" PRIu64 ", saw %" PRIu64,
          phase_total, handled);
    handled = 0;
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_am_register(H_REQ, h_req, "flow_req"));
    CHECK_OK(fh_am_register(H_REQ_R, h_req_r, "flow_req_r"));
    CHECK_OK(fh_am_register(H_REP, h_rep, "flow_rep"));
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("am_flow_test");
    me = fh_rank();
    N = fh_nranks();
    T = (int)tu_opt(argc, argv, "--threads", 2);
    M = tu_scale(tu_opt(argc, argv, "--msgs", 2000));
    CHECK(N >= 2 && N <= MAXN && T >= 1 && T <= MAXT, "arguments", "2..%d ranks and "
          "1..%d threads, saw %d and %d", MAXN, MAXT, N, T);
    const char *ce = getenv("FH_AM_CREDITS");
    credits = ce && *ce ? strtol(ce, NULL, 10) : 16;
    fh_seg_t seg;
    CHECK(credits < LRING, "FH_AM_CREDITS", "below %d for this test, saw %ld", LRING,
          credits);
    CHECK_OK(fh_segment_create(me == 0 ? (size_t)N * MAXT * LRING * LSLOT : 0, &seg, NULL));
    CHECK_OK(fh_segment_query(seg, 0, (void **)&lbase, NULL));
    oob = tu_oob_open();
    uint64_t phase_total = (uint64_t)(N - 1) * (uint64_t)T * (uint64_t)M;
    TU_SAY("am_flow_test: %d senders x %d threads x %ld requests to rank 0, "
           "FH_AM_CREDITS=%ld\n", N - 1, T, M, credits);

    /* stall: senders start once rank 0 left the barrier (in it, it polls) */
    if (me == 0) {
        tu_oob_store(STALLED, 1);
        /* Usually every sender gets its window of calls back.  Not a
         * promise: a sender thread's path whose first contact with rank 0
         * needs rank 0's progress (libfabric tcp and shm connect through
         * the target's poll) blocks in its first request -- also flow
         * control, and what the bound below allows.  Seen under ASan with
         * 4 ranks; so wait a while, then note it and go on. */
        for (int r = 1; r < N; r++) {
            double t0 = tu_now();
            while (tu_oob_load(RETURNED(r)) == 0 && tu_now() - t0 < 10.0)
                sched_yield();
            if (tu_oob_load(RETURNED(r)) == 0)
                TU_LOG("NOTE stall: rank %d got no request call back in 10 s while rank 0 "
                       "did not poll (its first contact waits for rank 0)\n", r);
        }
        tu_sleep_us(1000000);   /* grace: a sender without flow control runs on */
        for (int r = 1; r < N; r++) {
            uint64_t got = tu_oob_load(RETURNED(r));
            CHECK(got <= (uint64_t)credits * (uint64_t)T, "flow control",
                  "rank %d: at most FH_AM_CREDITS x threads = %ld request calls returned "
                  "while rank 0 did not poll, saw %" PRIu64, r, credits * T, got);
            TU_LOG("stall: rank %d got %" PRIu64 " calls back (window %ld x %d threads) "
                   "while rank 0 did not poll\n", r, got, credits, T);
        }
        drain(phase_total);
        check_counts(phase_total);
    } else {
        with_reply = 0;
        tu_oob_wait(STALLED, 1, WAIT_S);
        run_senders();
    }
    use_long = 1;   /* before the barrier: rank 0 may handle flood requests in it */
    CHECK_OK(fh_barrier());
    TU_SAY("stall: %" PRIu64 " requests arrived once each, in order, intact\n",
           phase_total);

    /* flood with replies */
    if (me == 0) {
        drain(phase_total);
        check_counts(phase_total);
    } else {
        with_reply = 1;
        run_senders();
    }
    CHECK_OK(fh_barrier());
    TU_SAY("flood: %" PRIu64 " requests answered\n", phase_total);

    /* Receive buffers never ran out: nothing was dropped. */
    if (me == 0) {
        fh_peer_stats_t st = FH_PEER_STATS_INIT;
        CHECK_OK(fh_stats_peer(0, &st));
        CHECK(st.am_dropped == 0, "am_dropped", "0, saw %" PRIu64, st.am_dropped);
    }
    CHECK_OK(fh_finalize());
    TU_SAY("PASS am_flow_test\n");
    return 0;
}
