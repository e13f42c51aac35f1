/*
 * dead_rank.c -- a rank dies with SIGKILL; nobody may hang.
 *
 * After a barrier, rank N-1 kills itself with SIGKILL.  The survivors loop
 * in one kind of call to it: even ranks in fh_barrier, odd ranks in fh_get
 * from rank N-1 (mode "mixed", the default), or all in one of
 *   barrier   fh_barrier
 *   get       fh_get from the victim
 *   put       fh_put to the victim
 *   atomic    fh_atomic FETCH_ADD on the victim
 *   wait      fh_get_nb from the victim, then fh_wait
 *   am        fh_am_request_short to the victim, fh_poll
 *   finalize  fh_finalize (once)
 *   finalize_seen  fh_poll until fh_am_lost reports a lost connection
 *             with the victim (at most --bound s; over a conduit that
 *             reports none, the same as finalize), then fh_finalize: the
 *             loss is known before its barrier begins
 * Under fhrun the launcher's watchdog ends every survivor with a message
 * naming rank N-1 (exit status FH_EXIT_PEER_DEAD = 70).  With no launcher
 * help (mpirun --enable-recovery, tests/integ/pmix.sh) the runtime must see
 * the death itself: a call returns an error -- the survivor prints
 * "<call> returned <error>" and exits 70 -- or the runtime ends the process
 * with a message naming the rank.  A survivor still in its call --bound
 * seconds (default 30) after the death prints "FAIL dead_rank: stuck in
 * <call>" and exits 1 (SIGALRM: the call itself may never return).
 * dead_rank.sh and pmix.sh check the exit status, timing, message and
 * leftovers.
 *
 * Usage: dead_rank [MODE] [--bound S] [--marker=STRING (ignored)]
 */
#include "testutil.h"

#include <signal.h>

static void h_noop(fh_token_t t, void *b, size_t n, const uint64_t *a,
                   unsigned na)
{
    (void)t; (void)b; (void)n; (void)a; (void)na;
}

static const char *stuck_in = "?";
static int stuck_rank = -1, stuck_victim = -1;

/* SIGALRM: the survivor is still inside its call --bound s after the death. */
static void on_alarm(int sig)
{
    (void)sig;
    char m[200];
    int n = snprintf(m, sizeof m, "[%d] FAIL dead_rank: stuck in %s: still running "
                     "after victim %d died; expected an error or the runtime "
                     "to end this process\n", stuck_rank, stuck_in, stuck_victim);
    if (n > 0 && write(1, m, (size_t)n) < 0)
        _exit(2);
    _exit(1);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 && argv[1][0] != '-' ? argv[1] : "mixed";
    long bound = 30;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--bound") == 0)
            bound = atol(argv[i + 1]);
    CHECK_OK(fh_am_register(130, h_noop, "noop"));
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("dead_rank");
    int me = fh_rank(), N = fh_nranks(), victim = N - 1;
    fh_seg_t seg;
    void *lb;
    CHECK_OK(fh_segment_create(1 << 20, &seg, &lb));
    uint8_t *vb;
    CHECK_OK(fh_segment_query(seg, victim, (void **)&vb, NULL));
    CHECK_OK(fh_barrier());
    TU_SAY("dead_rank: %d ranks, the last (%d) will SIGKILL itself, mode %s\n", N,
           victim, mode);
    CHECK_OK(fh_barrier());

    if (me == victim) {
        struct timespec ts;
        tu_sleep_us(100000);
        clock_gettime(CLOCK_REALTIME, &ts);
        printf("[%d] dead_rank: kill(getpid(), SIGKILL) at epoch_ms=%lld\n",
               me, (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
        fflush(stdout);
        kill(getpid(), SIGKILL);
        for (;;) pause();
    }

    if (!strcmp(mode, "mixed"))
        mode = me % 2 == 1 ? "get" : "barrier";
    if (!strcmp(mode, "finalize_seen")) {
        uint64_t mark = 0;
        for (long i = 0; i < (long)bound * 1000 && mark == 0; i++) {
            fh_poll();
            tu_sleep_us(1000);
            fh_am_lost(victim, &mark);
        }
        mode = "finalize";
    }
    stuck_in = !strcmp(mode, "am") ? "fh_am_request_short"
             : !strcmp(mode, "wait") ? "fh_get_nb/fh_wait"
             : !strcmp(mode, "atomic") ? "fh_atomic" : mode;
    char call[32];
    if (strncmp(stuck_in, "fh_", 3) != 0) {
        snprintf(call, sizeof call, "fh_%s", mode);
        stuck_in = call;
    }
    stuck_rank = me;
    stuck_victim = victim;
    signal(SIGALRM, on_alarm);
    tu_sleep_us(300000);         /* the victim is dead by now (mostly) */
    alarm((unsigned)bound);
    static uint8_t buf[65536];
    long loops = 0;
    for (;;) {
        int rc;
        if (!strcmp(mode, "am")) {
            uint64_t a = (uint64_t)loops;
            rc = fh_am_request_short(victim, 130, &a, 1);
            if (rc == FH_OK) rc = fh_poll();
        } else if (!strcmp(mode, "get")) {
            rc = fh_get(buf, victim, vb, sizeof buf);
        } else if (!strcmp(mode, "put")) {
            rc = fh_put(victim, vb, buf, sizeof buf);
        } else if (!strcmp(mode, "atomic")) {
            uint64_t old;
            rc = fh_atomic(victim, (uint64_t *)(void *)vb, FH_AOP_FETCH_ADD, 1, 0, &old);
        } else if (!strcmp(mode, "wait")) {
            fh_handle_t h;
            rc = fh_get_nb(buf, victim, vb, sizeof buf, &h);
            if (rc == FH_OK) rc = fh_wait(h);
        } else if (!strcmp(mode, "finalize")) {
            rc = fh_finalize();
            if (rc == FH_OK) {
                printf("[%d] FAIL dead_rank: fh_finalize returned FH_OK although "
                       "rank %d died\n", me, victim);
                fflush(stdout);
                _exit(1);
            }
        } else if (!strcmp(mode, "barrier")) {
            rc = fh_barrier();
        } else {
            tu_fail("unknown mode %s", mode);
        }
        loops++;
        if (rc != FH_OK) {
            printf("[%d] dead_rank: %s returned %s after %ld calls [%s]; "
                   "exiting 70\n", me, stuck_in, fh_err_name(rc), loops,
                   fh_last_error());
            fflush(stdout);
            _exit(70);
        }
    }
}
