/*
 * wait_progress_test.c -- no wait depends on another thread of the rank
 * calling the runtime (issue 20, items 2, 3 and 5; include/firehose.h,
 * "Progress").  2 ranks; rank 0 runs the scenario, rank 1 serves it.
 * Every "idle" thread below stops calling firehose until the main thread
 * releases it, or until IDLE_BOUND seconds passed (then it says it woke:
 * a wait that returned only after that depended on it -- the failure).
 *
 * --mode idle-budget   (FH_FIREHOSE_M=256k: F = one peer's budget = 256k)
 *     thread X puts 2 x 128k NBI into rank 1 -- all of F -- and goes idle;
 *     main puts 128k NBI elsewhere (it waits for budget X's chunks hold),
 *     then fh_barrier and fh_quiet must return while X is idle: the
 *     waiting thread completes X's chunks.
 * --mode idle-revoke   (FH_SEGMENT=everything FH_BUCKET_SIZE=4k)
 *     X puts into rank 1's bucket A (a firehose, cached), then one NBI put
 *     through it, and goes idle with that RDMA unreaped.  Rank 1 maps new
 *     pages over A and calls fh_barrier: its entry revokes A's region and
 *     waits for the ack, which needs X's RDMA completed.  Rank 0's
 *     fh_barrier must complete it: without that both barriers wait for X.
 * --mode stream-quiet  (FH_MAX_THREADS=1 or FH_PATHS=shared: one path)
 *     thread S streams 1 MiB NB puts to rank 1 on the path main shares,
 *     keeping 7-8 in flight.  Rank 0 then stops rank 1 (SIGSTOP: the ranks
 *     of these tests share a host), so S's operations stay in flight;
 *     main puts 4k NBI to itself and calls fh_quiet, which waits for
 *     main's operations only: it must return while S's are stuck.  A
 *     watchdog thread resumes rank 1 (SIGCONT) after IDLE_BOUND seconds if
 *     fh_quiet has not returned by then (the failure), and always at the
 *     end.  tcp only: over shm the stopped rank may hold a lock of the
 *     shared queues that any send of ours spins on.
 * --mode exited-replies
 *     thread E sends 4 AM requests whose replies count, starts 8 NB puts,
 *     and exits at once, before rank 1 (asleep for a moment) answers.  The
 *     main thread, only calling fh_poll, must see all 4 replies run, and
 *     E's handle slots must be freed (the table is read through
 *     internal.h).
 *
 * Usage: wait_progress_test --mode MODE
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "testutil.h"
#include "firehose/internal.h"     /* exited-replies: the handle tables */

#define IDLE_BOUND 20.0            /* seconds an idle thread stays idle at most */
#define SEG        ((size_t)4 << 20)
#define BUCKET     ((size_t)4096)  /* idle-revoke: = FH_BUCKET_SIZE */
#define FRAME      (16 * BUCKET)

#define H_STEP  (FH_AM_USER_FIRST + 0)
#define H_ASK   (FH_AM_USER_FIRST + 1)
#define H_ANS   (FH_AM_USER_FIRST + 2)
enum { ADDR, GO, NSTEPS };
static volatile uint64_t step_val[NSTEPS] = {UINT64_MAX, UINT64_MAX};
static atomic_int answers;

static void h_step(fh_token_t t, void *b, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)b; (void)n;
    CHECK(na == 2 && a[0] < NSTEPS, "step message", "2 args, saw %u", na);
    __atomic_store_n(&step_val[a[0]], a[1], __ATOMIC_RELEASE);
}

static void h_ask(fh_token_t t, void *b, size_t n, const uint64_t *a, unsigned na)
{
    (void)b; (void)n;
    CHECK(na == 1, "ask", "1 arg, saw %u", na);
    uint64_t v = a[0] + 1;
    CHECK_OK(fh_am_reply_short(t, H_ANS, &v, 1));
}

static void h_ans(fh_token_t t, void *b, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)b; (void)n;
    CHECK(na == 1 && a[0] >= 1 && a[0] <= 4, "answer", "1 arg in [1, 4], saw %u", na);
    atomic_fetch_add(&answers, 1);
}

static void step(int peer, int st, uint64_t v)
{
    uint64_t a[2] = {(uint64_t)st, v};
    CHECK_OK(fh_am_request_short(peer, H_STEP, a, 2));
}

/* ---- the idle / streaming thread */

static atomic_int release_x, x_ready, x_woke, e_go;
static int mode_budget, mode_revoke, mode_stream, mode_exit;
static char *rbase;                 /* rank 1's segment (or area) */
static char *src;
static char *lbase;                 /* our own segment */
static long streamed;               /* stream-quiet: puts S issued */
static double waited;               /* seconds the checked wait took */
static pid_t peer_pid;              /* stream-quiet: rank 1's pid */
static atomic_int quiet_done, watchdog_fired;

static void *watchdog(void *arg)
{
    (void)arg;
    double end = tu_now() + IDLE_BOUND;
    while (!atomic_load(&quiet_done) && tu_now() < end)
        tu_sleep_us(1000);
    if (!atomic_load(&quiet_done))
        atomic_store(&watchdog_fired, 1);
    kill(peer_pid, SIGCONT);
    return NULL;
}

/* Idle: no firehose call until released or IDLE_BOUND passed. */
static void go_idle(void)
{
    atomic_store(&x_ready, 1);
    double end = tu_now() + IDLE_BOUND;
    while (!atomic_load(&release_x) && tu_now() < end)
        tu_sleep_us(1000);
    atomic_store(&x_woke, 1);
}

static void *thread_x(void *arg)
{
    (void)arg;
    if (mode_budget) {
        CHECK_OK(fh_put_nbi(1, rbase, src, 128 << 10));
        CHECK_OK(fh_put_nbi(1, rbase + (128 << 10), src, 128 << 10));
        go_idle();
        CHECK_OK(fh_wait_nbi());
    } else if (mode_revoke) {
        CHECK_OK(fh_put(1, rbase, src, BUCKET));      /* A's firehose, cached */
        CHECK_OK(fh_put_nbi(1, rbase, src, BUCKET));  /* a hit: RDMA now */
        go_idle();
        /* the put may fail: A's old pages are gone (it is revoked) */
        int rc = fh_wait_nbi();
        (void)rc;
    } else if (mode_stream) {
        /* A window of 8 NB puts: each new one waits for the oldest only,
         * so S always has 7 or 8 in flight until it stops. */
        fh_handle_t win[8] = {0};
        long n = 0;
        double end = tu_now() + IDLE_BOUND;
        while (!atomic_load(&release_x) && tu_now() < end) {
            CHECK_OK(fh_wait(win[n % 8]));
            CHECK_OK(fh_put_nb(1, rbase + (size_t)(n % 4) * (1 << 20), src, 1 << 20,
                               &win[n % 8]));
            if (++n == 8)
                atomic_store(&x_ready, 1);
        }
        streamed = n;
        atomic_store(&x_woke, 1);      /* stopped streaming */
        CHECK_OK(fh_wait_all(win, 8));
    } else {
        fh_handle_t h[8];
        for (int k = 0; k < 8; k++)
            CHECK_OK(fh_put_nb(1, rbase + (size_t)k * 4096, src, 4096, &h[k]));
        CHECK_OK(fh_quiet());          /* complete, but the handles stay live */
        atomic_store(&x_ready, 1);
        while (!atomic_load(&e_go))    /* rank 1 is about to nap */
            tu_sleep_us(100);
        for (uint64_t k = 0; k < 4; k++)
            CHECK_OK(fh_am_request_short(1, H_ASK, &k, 1));
        /* and exits before the answers come, waiting for nothing */
    }
    return NULL;
}

static void wait_ready(void)
{
    while (!atomic_load(&x_ready))
        CHECK_OK(fh_poll());
}

static uint32_t live_handles(void)
{
    uint32_t live = 0;
    for (int i = 0; i < fh_rt->npaths; i++) {
        fh_path_t *p = &fh_rt->paths[i];
        pthread_mutex_lock(&p->lock);
        live += p->handles.live;
        pthread_mutex_unlock(&p->lock);
    }
    return live;
}

int main(int argc, char **argv)
{
    const char *mode = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--mode") == 0)
            mode = argv[i + 1];
    if (mode == NULL) {
        fprintf(stderr, "usage: wait_progress_test --mode idle-budget|idle-revoke|"
                "stream-quiet|exited-replies\n");
        return 2;
    }
    mode_budget = strcmp(mode, "idle-budget") == 0;
    mode_revoke = strcmp(mode, "idle-revoke") == 0;
    mode_stream = strcmp(mode, "stream-quiet") == 0;
    mode_exit = strcmp(mode, "exited-replies") == 0;
    if (!mode_budget && !mode_revoke && !mode_stream && !mode_exit) {
        fprintf(stderr, "wait_progress_test: unknown mode %s\n", mode);
        return 2;
    }
    CHECK_OK(fh_am_register(H_STEP, h_step, "wait-step"));
    CHECK_OK(fh_am_register(H_ASK, h_ask, "wait-ask"));
    CHECK_OK(fh_am_register(H_ANS, h_ans, "wait-answer"));
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("wait_progress_test");
    int me = fh_rank();
    CHECK(fh_nranks() == 2, "rank count", "2 ranks, saw %d", fh_nranks());
    src = malloc(SEG);
    CHECK(src != NULL, "malloc", "source");
    memset(src, 0x5a, SEG);

    char *area = NULL;
    if (mode_revoke) {
        if (me == 1) {
            area = tu_reserve(FRAME, FRAME);
            memset(area, 0xee, FRAME);
        }
        CHECK_OK(fh_barrier());
        if (me == 1)
            step(0, ADDR, (uint64_t)(uintptr_t)area);
    } else {
        fh_seg_t seg;
        CHECK_OK(fh_segment_create(SEG, &seg, (void **)&lbase));
        CHECK_OK(fh_segment_query(seg, 1, (void **)&rbase, NULL));
        uint64_t pids[2], mine = (uint64_t)getpid();
        CHECK_OK(fh_allgather(&mine, pids, sizeof mine));
        peer_pid = (pid_t)pids[1];
    }
    if (mode_revoke && me == 0) {
        while (__atomic_load_n(&step_val[ADDR], __ATOMIC_ACQUIRE) == UINT64_MAX)
            CHECK_OK(fh_poll());
        rbase = (char *)(uintptr_t)step_val[ADDR];
    }

    if (me == 0) {
        pthread_t xt;
        CHECK(pthread_create(&xt, NULL, thread_x, NULL) == 0, "pthread_create", "0");
        wait_ready();
        if (mode_budget) {
            CHECK_OK(fh_put_nbi(1, rbase + (1 << 20), src, 128 << 10));
            CHECK_OK(fh_barrier());
            CHECK_OK(fh_quiet());
            CHECK(!atomic_load(&x_woke), "quiet while another thread holds the budget",
                  "fh_barrier and fh_quiet return while the thread is idle; they "
                  "returned only after it woke (%.0f s)", IDLE_BOUND);
        } else if (mode_revoke) {
            step(1, GO, 0);
            CHECK_OK(fh_barrier());
            CHECK(!atomic_load(&x_woke), "revoke meeting an idle thread's RDMA",
                  "both ranks' barriers return while the thread is idle; they "
                  "returned only after it woke (%.0f s)", IDLE_BOUND);
        } else if (mode_exit) {
            step(1, GO, 0);
            atomic_store(&e_go, 1);
        } else if (mode_stream) {
            pthread_t wd;
            CHECK(kill(peer_pid, SIGSTOP) == 0, "SIGSTOP rank 1", "0");
            CHECK(pthread_create(&wd, NULL, watchdog, NULL) == 0, "pthread_create", "0");
            CHECK_OK(fh_put_nbi(0, lbase, src, 4096));
            double t0 = tu_now();
            CHECK_OK(fh_quiet());
            waited = tu_now() - t0;
            atomic_store(&quiet_done, 1);
            CHECK(pthread_join(wd, NULL) == 0, "pthread_join", "watchdog");
            CHECK(!atomic_load(&watchdog_fired), "quiet under a streaming neighbour",
                  "fh_quiet returns while another thread's operations on the path are "
                  "in flight; it returned only after they could complete (%.0f s)",
                  IDLE_BOUND);
        }
        atomic_store(&release_x, 1);
        CHECK(pthread_join(xt, NULL) == 0, "pthread_join", "0");
        if (mode_exit) {
            double end = tu_now() + IDLE_BOUND;
            while (atomic_load(&answers) < 4 && tu_now() < end)
                CHECK_OK(fh_poll());
            CHECK(atomic_load(&answers) == 4, "replies to an exited thread",
                  "all 4 run by the polling main thread, saw %d after %.0f s",
                  atomic_load(&answers), IDLE_BOUND);
            CHECK(live_handles() == 0, "handles of an exited thread",
                  "its 8 NB handles freed at exit, saw %u live", live_handles());
        }
        step(1, GO, 1);
    } else {
        if (mode_exit) {
            tu_wait_for(&step_val[GO], 0);
            tu_sleep_us(500000);   /* E exits before its requests are answered */
        }
        if (mode_budget)
            CHECK_OK(fh_barrier());
        if (mode_revoke) {
            tu_wait_for(&step_val[GO], 0);
            char *q = mmap(area, BUCKET, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            CHECK(q == area, "mmap MAP_FIXED", "%p, saw %p", (void *)area, (void *)q);
            CHECK_OK(fh_barrier());   /* its entry waits for the REVOKE's ack */
        }
        tu_wait_for(&step_val[GO], 1);
    }
    CHECK_OK(fh_barrier());
    if (me == 0)
        TU_LOG("wait_progress: mode=%s answers=%d streamed=%ld quiet_s=%.3f\n", mode,
               atomic_load(&answers), streamed, waited);
    CHECK_OK(fh_finalize());
    free(src);
    TU_SAY("PASS wait_progress_test\n");
    return 0;
}
