/*
 * thread_exit_test.c -- firehose calls from pthread-key destructors, i.e.
 * while a thread exits (issue 20, defect A).
 *
 * Per rank, T "worker" threads (default 4) use firehose normally: a
 * blocking put and several NBI puts to the next rank, left incomplete when
 * the thread returns (the thread-exit hook must complete them before it
 * frees the thread's state).  Each then sets a pthread key whose destructor
 * calls firehose.  The key is created after fh_init, and its destructor
 * re-arms itself once, so its second call certainly runs after firehose's
 * own thread-exit hook (which ran in the first destructor round).  Contract
 * (include/firehose.h, "Thread safety"): once the hook has run in a thread,
 * calls that need the thread's state return FH_ERR_STATE with
 * fh_last_error() saying the thread is exiting; calls that need none
 * (fh_rank) still work.  Never a crash.  The first destructor call may run
 * before or after the hook (the order of keys is unspecified): it gets
 * FH_OK or that same FH_ERR_STATE.
 *
 * One "late" thread calls firehose for the first time from its destructor:
 * no hook ran in it yet, so the call works (FH_OK) and its data arrives.
 *
 * A "poller" thread calls fh_poll meanwhile, and each worker pauses before
 * it returns: with FH_PATHS=shared the poller reaps the workers' NBI
 * completions, so the hook must read the thread's NBI counter under the
 * path lock (ThreadSanitizer reports it otherwise).
 *
 * Then the main thread joins, checks what the destructors saw, verifies
 * every put (the workers' NBI data and the late thread's put) on the
 * target after a barrier, and finalizes.
 * Usage: thread_exit_test [--threads T]
 */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>

#define MAXT 16
#define SLOT ((size_t)64 << 10)     /* per (source rank, thread) */
#define NNBI 8                      /* NBI puts of SLOT/NNBI bytes */

static int me, N, T, peer;
static fh_seg_t seg;
static uint8_t **bases;
static pthread_key_t key;

typedef struct {
    int idx;
    int late;                       /* first firehose call from the destructor */
    int calls;                      /* destructor invocations */
    int rank_rc[2], put_rc[2], quiet_rc[2];
    int says_exiting[2];            /* fh_last_error mentions "exiting" */
    char last_error[2][160];
    uint8_t *src;
} tstate_t;

static tstate_t ts[MAXT + 1];
static atomic_int stop_polling;

static uint8_t *slot(int owner, int src_rank, int idx)
{
    return bases[owner] + ((size_t)src_rank * (MAXT + 1) + (size_t)idx) * SLOT;
}

static uint64_t slot_key(int src_rank, int idx) { return tu_key((uint64_t)src_rank, (uint64_t)idx, 20); }

static void destructor(void *v)
{
    tstate_t *s = v;
    int c = s->calls++;
    if (c >= 2)
        return;
    s->rank_rc[c] = fh_rank();
    s->put_rc[c] = fh_put(peer, slot(peer, me, s->idx), s->src, SLOT);
    const char *le = fh_last_error();
    snprintf(s->last_error[c], sizeof s->last_error[c], "%s", le ? le : "");
    s->says_exiting[c] = le != NULL && strstr(le, "exiting") != NULL;
    s->quiet_rc[c] = fh_quiet();
    if (c == 0 && !s->late)
        pthread_setspecific(key, s);   /* once more, in the next round */
}

static void *worker(void *arg)
{
    tstate_t *s = arg;
    s->src = malloc(SLOT);
    CHECK(s->src != NULL, "malloc", "source buffer");
    tu_fill(s->src, SLOT, slot_key(me, s->idx), 0);
    if (!s->late) {
        /* A blocking put binds the thread; the NBI puts are left for the
         * thread-exit hook to complete. */
        CHECK_OK(fh_put(peer, slot(peer, me, s->idx), s->src, 64));
        size_t piece = SLOT / NNBI;
        for (int k = 0; k < NNBI; k++)
            CHECK_OK(fh_put_nbi(peer, slot(peer, me, s->idx) + (size_t)k * piece,
                                s->src + (size_t)k * piece, piece));
        tu_sleep_us(3000);   /* the poller may reap the completions */
    }
    pthread_setspecific(key, s);
    return NULL;
}

static void *poller(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_polling))
        CHECK_OK(fh_poll());
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("thread_exit_test");
    me = fh_rank();
    N = fh_nranks();
    peer = (me + 1) % N;
    tu_seed_init();
    T = (int)tu_opt(argc, argv, "--threads", 4);
    if (T < 1) T = 1;
    if (T > MAXT) T = MAXT;
    CHECK(pthread_key_create(&key, destructor) == 0, "pthread_key_create", "key");
    void *lb;
    CHECK_OK(fh_segment_create((size_t)N * (MAXT + 1) * SLOT, &seg, &lb));
    bases = calloc((size_t)N, sizeof *bases);
    for (int r = 0; r < N; r++)
        CHECK_OK(fh_segment_query(seg, r, (void **)&bases[r], NULL));
    CHECK_OK(fh_barrier());
    const char *paths = getenv("FH_PATHS");
    TU_SAY("thread_exit_test: %d ranks x %d threads + 1 late, FH_PATHS=%s\n", N, T,
           paths ? paths : "(default)");

    pthread_t th[MAXT + 1], pth;
    CHECK(pthread_create(&pth, NULL, poller, NULL) == 0, "pthread_create", "poller");
    for (int i = 0; i <= T; i++) {
        ts[i].idx = i;
        ts[i].late = i == T;
        CHECK(pthread_create(&th[i], NULL, worker, &ts[i]) == 0, "pthread_create",
              "thread %d", i);
    }
    for (int i = 0; i <= T; i++)
        pthread_join(th[i], NULL);
    atomic_store(&stop_polling, 1);
    pthread_join(pth, NULL);

    for (int i = 0; i <= T; i++) {
        tstate_t *s = &ts[i];
        int want_calls = s->late ? 1 : 2;
        CHECK(s->calls == want_calls, "destructor calls", "thread %d: expected %d, saw %d",
              i, want_calls, s->calls);
        for (int c = 0; c < want_calls; c++) {
            CHECK(s->rank_rc[c] == me, "fh_rank in a key destructor",
                  "thread %d call %d: expected %d, saw %d", i, c, me, s->rank_rc[c]);
            /* The late thread never ran the hook: its call works.  A
             * worker's second call certainly comes after the hook. */
            int must_fail = !s->late && c == 1;
            int may_fail = !s->late;
            int rc = s->put_rc[c];
            CHECK(rc == FH_OK ? !must_fail : may_fail && rc == FH_ERR_STATE,
                  "fh_put in a key destructor", "thread %d call %d: expected %s, saw %s "
                  "[last_error: %s]", i, c,
                  must_fail ? "FH_ERR_STATE" : may_fail ? "FH_OK or FH_ERR_STATE" : "FH_OK",
                  tu_errname(rc), s->last_error[c]);
            if (rc == FH_ERR_STATE)
                CHECK(s->says_exiting[c], "fh_last_error after the thread-exit hook",
                      "thread %d call %d: expected a mention of \"exiting\", saw \"%s\"",
                      i, c, s->last_error[c]);
            CHECK(s->quiet_rc[c] == rc, "fh_quiet in a key destructor",
                  "thread %d call %d: expected %s (as fh_put), saw %s", i, c,
                  tu_errname(rc), tu_errname(s->quiet_rc[c]));
        }
    }
    TU_LOG("destructors: worker calls after the exit hook gave %s (\"%s\"), "
           "the late thread's first call %s\n", tu_errname(ts[0].put_rc[1]),
           ts[0].last_error[1], tu_errname(ts[T].put_rc[0]));

    /* Every put from the previous rank landed: the workers' NBI puts
     * (completed by the exit hook) and the late thread's destructor put. */
    CHECK_OK(fh_barrier());
    int from = (me + N - 1) % N;
    for (int i = 0; i <= T; i++)
        TU_VERIFY(slot(me, from, i), SLOT, slot_key(from, i), 0,
                  "slot of rank %d thread %d", from, i);
    CHECK_OK(fh_barrier());
    for (int i = 0; i <= T; i++)
        free(ts[i].src);
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("PASS thread_exit_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
