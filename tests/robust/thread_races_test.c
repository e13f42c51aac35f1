/*
 * thread_races_test.c -- issue 29 class 9: what threads of one rank may do
 * to each other, each case checking a promise of include/firehose.h
 * ("Thread safety", "Progress") and docs/reliability.md ("Threads").
 *
 *   --case seg    Every rank runs a thread that only polls (fh_poll) while
 *                 its main thread creates a segment 40 times and, as soon
 *                 as its fh_segment_create returns, sends an atomic and a
 *                 put into the next rank's new piece.  The next rank may
 *                 still be inside the creation exchange: its piece must be
 *                 served already (every call FH_OK, every value right
 *                 after a barrier).
 *   --case exit   A detached thread issues a 64 MiB fh_put_nbi to the next
 *                 rank and returns while the main thread calls fh_finalize
 *                 (the thread-exit hook and fh_finalize overlap): the rank
 *                 must finalize and exit 0, nothing crashes (under TSan: no
 *                 report).  The test says PASS after fh_finalize returned.
 *   --case orphan Run with FH_PATHS=independent FH_MAX_THREADS=2: threads
 *                 are bound so that a "sender" thread shares a path with an
 *                 idle thread (which never calls again) and not with the
 *                 main thread.  The sender sends 4 AM requests and exits;
 *                 the main thread then only calls fh_poll: the replies'
 *                 handlers must run (the next poller runs them).  A 60 s
 *                 bound only turns a hang into a failure.
 *   --case txwait 2 ranks, FH_PATHS=shared, the shm provider: a request
 *                 waiting for transmit room leaves the path's lock between
 *                 its rounds (see case_txwait).
 *   --case neighbour  2 ranks, FH_SHM=off, FH_MAX_THREADS=1: a thread's
 *                 small blocking put does not wait for the whole stream of
 *                 the thread it shares its path with (see case_neighbour).
 * Usage: thread_races_test --case seg|exit|orphan|txwait|neighbour [--delay-us U]
 *        [--flag-file PATH]
 * (exit: the thread returns U microseconds after issuing its put, so that
 * its hook starts at another moment of fh_finalize)
 */
#include "tests/integ/testutil.h"

#include <pthread.h>
#include <stdatomic.h>

#define H_REQ 140
#define H_REP 141
#define NREQ 4

static int me, N, next;
static atomic_int stop;

static void *poller(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        CHECK_OK(fh_poll());
    return NULL;
}

/* ---------------------------------------------------------------- seg */

#define SEG_ROUNDS 40
#define SEG_SIZE ((size_t)256 << 10)
#define SEG_PUT ((size_t)64 << 10)       /* over every eager limit */

static int case_seg(void)
{
    pthread_t pt;
    pthread_create(&pt, NULL, poller, NULL);
    uint8_t *src = malloc(SEG_PUT);
    CHECK(src != NULL, "malloc", "memory, saw NULL");
    int bad = 0;
    for (int i = 0; i < SEG_ROUNDS; i++) {
        fh_seg_t seg;
        void *base;
        CHECK_OK(fh_segment_create(SEG_SIZE, &seg, &base));
        uint8_t *rb;
        CHECK_OK(fh_segment_query(seg, next, (void **)&rb, NULL));
        uint64_t old = 0;
        int rc = fh_atomic(next, (uint64_t *)rb, FH_AOP_FETCH_ADD, 1, 0, &old);
        if (rc != FH_OK) {
            bad++;
            TU_LOG("round %d: atomic into rank %d's new piece: %s (%s)\n", i, next,
                   fh_err_name(rc), fh_last_error());
        }
        tu_fill(src, SEG_PUT, tu_key((uint64_t)me, (uint64_t)i, 1), 0);
        rc = fh_put(next, rb + 4096, src, SEG_PUT);
        if (rc != FH_OK) {
            bad++;
            TU_LOG("round %d: put into rank %d's new piece: %s (%s)\n", i, next,
                   fh_err_name(rc), fh_last_error());
        }
        CHECK_OK(fh_barrier());
        int prev = (me + N - 1) % N;
        CHECK(bad != 0 || *(uint64_t *)base == 1, "atomic landed", "1, saw %" PRIu64,
              *(uint64_t *)base);
        CHECK(bad != 0 || tu_check((uint8_t *)base + 4096, SEG_PUT,
                                   tu_key((uint64_t)prev, (uint64_t)i, 1), 0) == (size_t)-1,
              "put landed", "rank %d's pattern", prev);
        CHECK_OK(fh_segment_destroy(seg));
    }
    atomic_store(&stop, 1);
    pthread_join(pt, NULL);
    free(src);
    CHECK(bad == 0, "every atomic and put into a just-created piece", "FH_OK, saw %d errors",
          bad);
    CHECK_OK(fh_finalize());
    return 0;
}

/* ---------------------------------------------------------------- exit */

#define EXIT_PUT ((size_t)64 << 20)

static uint8_t *exit_dst;
static uint8_t *exit_src;
static atomic_int issued;
static long exit_delay_us;        /* --delay-us: the thread returns this late */
static atomic_int thread_gone;     /* set by the last pthread-key destructor */
static pthread_key_t gone_key;

/* Runs at the thread's exit, re-armed so that its last round comes after
 * firehose's own exit hook (keys' order is unspecified; rounds are not). */
static void gone(void *v)
{
    long left = (long)(intptr_t)v;
    if (left > 1)
        pthread_setspecific(gone_key, (void *)(intptr_t)(left - 1));
    else
        atomic_store(&thread_gone, 1);
}

static void *exiting_thread(void *arg)
{
    (void)arg;
    pthread_setspecific(gone_key, (void *)(intptr_t)2);
    CHECK_OK(fh_put_nbi(next, exit_dst, exit_src, EXIT_PUT));
    atomic_store(&issued, 1);
    if (exit_delay_us > 0)
        usleep((useconds_t)exit_delay_us);
    return NULL;      /* the exit hook completes the put, racing fh_finalize */
}

static int case_exit(void)
{
    fh_seg_t seg;
    CHECK_OK(fh_segment_create(EXIT_PUT, &seg, NULL));
    CHECK_OK(fh_segment_query(seg, next, (void **)&exit_dst, NULL));
    exit_src = malloc(EXIT_PUT);
    CHECK(exit_src != NULL, "malloc", "memory, saw NULL");
    memset(exit_src, me + 1, EXIT_PUT);
    CHECK_OK(fh_barrier());
    pthread_key_create(&gone_key, gone);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    pthread_create(&th, &a, exiting_thread, NULL);
    while (!atomic_load(&issued))
        ;
    CHECK_OK(fh_finalize());
    /* Let the detached thread finish its exit (hook included) before the
     * process ends: the race is between its hook and fh_finalize. */
    while (!atomic_load(&thread_gone))
        usleep(1000);
    TU_SAY("PASS thread_races_test\n");
    return 0;
}

/* ---------------------------------------------------------------- orphan */

static atomic_int replies;
static pthread_mutex_t bind_mx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bind_cv = PTHREAD_COND_INITIALIZER;
static int bound, release_idle;

static void on_req(fh_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned na)
{
    (void)buf, (void)n;
    CHECK_OK(fh_am_reply_short(tok, H_REP, args, na));
}

static void on_rep(fh_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned na)
{
    (void)tok, (void)buf, (void)n, (void)args, (void)na;
    atomic_fetch_add(&replies, 1);
}

/* Binds (its first call) and then stays idle until the end. */
static void *idle_thread(void *arg)
{
    (void)arg;
    CHECK(fh_rank() == me, "fh_rank", "%d", me);
    CHECK_OK(fh_poll());              /* bound to a path from here on */
    pthread_mutex_lock(&bind_mx);
    bound++;
    pthread_cond_broadcast(&bind_cv);
    while (!release_idle)
        pthread_cond_wait(&bind_cv, &bind_mx);
    pthread_mutex_unlock(&bind_mx);
    return NULL;
}

static void *sender_thread(void *arg)
{
    (void)arg;
    for (uint64_t i = 0; i < NREQ; i++)
        CHECK_OK(fh_am_request_short(next, H_REQ, &i, 1));
    return NULL;      /* exits with the replies on their way */
}

static void wait_bound(int n)
{
    pthread_mutex_lock(&bind_mx);
    while (bound < n)
        pthread_cond_wait(&bind_cv, &bind_mx);
    pthread_mutex_unlock(&bind_mx);
}

static int case_orphan(void)
{
    /* FH_MAX_THREADS=2: the main thread holds thread path 1.  The first
     * idle thread takes path 2, the second shares path 1 (tie: the lower
     * index), the sender then path 2 (1 thread against 2): it shares with
     * an idle thread, not with us. */
    CHECK_OK(fh_poll());
    pthread_t idle[2], snd;
    for (int i = 0; i < 2; i++) {
        pthread_create(&idle[i], NULL, idle_thread, NULL);
        wait_bound(i + 1);
    }
    CHECK_OK(fh_barrier());       /* every rank's handlers are registered */
    pthread_create(&snd, NULL, sender_thread, NULL);
    pthread_join(snd, NULL);
    time_t end = time(NULL) + 60;
    while (atomic_load(&replies) < NREQ && time(NULL) < end)
        CHECK_OK(fh_poll());
    int got = atomic_load(&replies);
    CHECK(got == NREQ, "replies to an exited thread run by the next poller",
          "%d, saw %d (after fh_poll only)", NREQ, got);
    pthread_mutex_lock(&bind_mx);
    release_idle = 1;
    pthread_cond_broadcast(&bind_cv);
    pthread_mutex_unlock(&bind_mx);
    for (int i = 0; i < 2; i++)
        pthread_join(idle[i], NULL);
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_finalize());
    return 0;
}

/* ---------------------------------------------------------------- txwait */

#define H_NOP 142
#define NFLOOD 4000

static const char *flag_file;
static atomic_int flood_sent;
static atomic_long nops;

static void on_nop(fh_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned na)
{
    (void)tok, (void)buf, (void)n, (void)args, (void)na;
    atomic_fetch_add(&nops, 1);
}

static void *flooder(void *arg)
{
    (void)arg;
    char msg[1024] = {0};
    for (int i = 0; i < NFLOOD; i++) {
        CHECK_OK(fh_am_request_medium(1, H_NOP, msg, sizeof msg, NULL, 0));
        atomic_store(&flood_sent, i + 1);
    }
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Rank 0: one thread floods rank 1, which does not poll, until the
 * network has no room (its request waits for transmit resources); then
 * another thread of the same path (FH_PATHS=shared) calls fh_poll, which
 * must return: the waiting request holds the path lock only while it
 * tries.  Rank 1 starts polling only once that fh_poll returned (a file
 * says so), so a wait that keeps the lock never ends (bounded at 60 s). */
static int case_txwait(void)
{
    CHECK(N == 2, "ranks", "2, saw %d", N);
    CHECK(flag_file != NULL, "--flag-file", "a path");
    CHECK_OK(fh_barrier());
    if (me == 0) {
        pthread_t f;
        pthread_create(&f, NULL, flooder, NULL);
        /* Stalled: no progress for 200 ms (or all sent: nothing to test). */
        int last = -1;
        double since = now_s();
        for (;;) {
            int k = atomic_load(&flood_sent);
            if (k == NFLOOD)
                break;
            if (k != last) {
                last = k;
                since = now_s();
            } else if (now_s() - since > 0.2) {
                break;
            }
            usleep(1000);
        }
        int stalled_at = atomic_load(&flood_sent);
        CHECK_OK(fh_poll());       /* the path's lock must come free */
        FILE *fp = fopen(flag_file, "w");
        CHECK(fp != NULL, "flag file", "created");
        fclose(fp);
        pthread_join(f, NULL);
        TU_LOG("NOTE the flooding thread waited for the network after %d of %d "
               "requests\n", stalled_at, NFLOOD);
    } else {
        double end = now_s() + 60;
        while (access(flag_file, F_OK) != 0 && now_s() < end)
            usleep(2000);
        CHECK(access(flag_file, F_OK) == 0, "rank 0's fh_poll beside a request waiting "
              "for the network", "to return, saw no return in 60 s");
        while (atomic_load(&nops) < NFLOOD)
            CHECK_OK(fh_poll());
    }
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_finalize());
    return 0;
}

/* ---------------------------------------------------------------- neighbour */

#define NB_PIECE ((size_t)1 << 20)
#define NB_PIECES 64

static char *nb_remote, *nb_src;
static atomic_int nb_posted;

/* Thread A: one round of 64 MiB in 1 MiB NBI puts, then its NBI wait. */
static void *streamer(void *arg)
{
    int round = (int)(intptr_t)arg;
    for (int i = 0; i < NB_PIECES; i++)
        CHECK_OK(fh_put_nbi(1, nb_remote + (size_t)i * NB_PIECE, nb_src + (size_t)i * NB_PIECE,
                            NB_PIECE));
    atomic_store(&nb_posted, round);
    CHECK_OK(fh_wait_nbi());
    return NULL;
}

/* Rank 0's threads A and B share a path (FH_MAX_THREADS=1).  Once A has
 * handed its 64 MiB (round 2's bytes: 2) to the runtime, B's blocking 8 B
 * put writes the round into rank 1's marker word.  Over one connection the
 * bytes land in the order they were posted, so rank 1, polling, counts the
 * pieces of A that had landed when the marker did: B's put must not have
 * waited for most of A's stream (docs/reliability.md, "A small operation
 * waits for a bounded amount of bulk": at most FH_BULK_BYTES, and
 * then a few A posts as those complete; before, all 64).  Round 1 warms
 * both (moves, connections). */
static int case_neighbour(void)
{
    fh_seg_t seg;
    char *base;
    const size_t total = NB_PIECE * NB_PIECES;
    CHECK_OK(fh_segment_create(total + NB_PIECE, &seg, (void **)&base));
    CHECK_OK(fh_segment_query(seg, 1, (void **)&nb_remote, NULL));
    volatile uint64_t *flag = (volatile uint64_t *)(base + total);
    volatile uint64_t *marker = flag + 1;
    if (me == 0) {
        nb_src = base;
        for (uint64_t round = 1; round <= 2; round++) {
            memset(nb_src, (int)round, total);
            pthread_t a;
            pthread_create(&a, NULL, streamer, (void *)(intptr_t)round);
            while (atomic_load(&nb_posted) != (int)round)
                ;
            CHECK_OK(fh_put(1, nb_remote + total + 8, &round, sizeof round));
            pthread_join(a, NULL);
        }
        uint64_t one = 1;
        CHECK_OK(fh_put(1, nb_remote + total, &one, sizeof one));
    } else if (me == 1) {
        /* Polling with naps: rank 0's two threads need the cores of a
         * small machine more than we do. */
        while (*marker != 2) {
            CHECK_OK(fh_poll());
            usleep(50);
        }
        int landed = 0;
        for (int i = 0; i < NB_PIECES; i++)
            landed += ((volatile char *)base)[(size_t)(i + 1) * NB_PIECE - 1] == 2;
        /* Ahead of B: at most FH_BULK_BYTES (8 pieces) in the runtime and the
         * provider, plus what the kernel's socket buffers took (several
         * MiB each way on loopback) and what A posted while B waited for
         * a core: 32-34 of 64 seen in 5 of 22 runs on a loaded 2-core
         * machine; without the bound all 64, every run. */
        CHECK(landed < NB_PIECES * 3 / 4, "B's 8 B put behind A's 64 MiB stream on its path",
              "it to land before three quarters of A's 64 pieces, saw %d landed", landed);
        while (*flag == 0)
            CHECK_OK(fh_poll());
    }
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    CHECK_OK(fh_finalize());
    return 0;
}

int main(int argc, char **argv)
{
    const char *which = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--case") == 0)
            which = argv[i + 1];
        else if (strcmp(argv[i], "--flag-file") == 0)
            flag_file = argv[i + 1];
        else if (strcmp(argv[i], "--delay-us") == 0)
            exit_delay_us = atol(argv[i + 1]);
    if (which == NULL) {
        fprintf(stderr, "usage: thread_races_test --case seg|exit|orphan|txwait|neighbour\n");
        return 2;
    }
    CHECK_OK(fh_am_register(H_REQ, on_req, "races_req"));
    CHECK_OK(fh_am_register(H_REP, on_rep, "races_rep"));
    CHECK_OK(fh_am_register(H_NOP, on_nop, "races_nop"));
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("thread_races_test");
    me = fh_rank();
    N = fh_nranks();
    next = (me + 1) % N;
    int rc;
    if (strcmp(which, "seg") == 0)
        rc = case_seg();
    else if (strcmp(which, "exit") == 0)
        return case_exit();
    else if (strcmp(which, "orphan") == 0)
        rc = case_orphan();
    else if (strcmp(which, "txwait") == 0)
        rc = case_txwait();
    else if (strcmp(which, "neighbour") == 0)
        rc = case_neighbour();
    else
        tu_fail("unknown case %s", which);
    TU_SAY("PASS thread_races_test\n");
    return rc;
}
