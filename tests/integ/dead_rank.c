/*
 * dead_rank.c -- a rank dies with SIGKILL; nobody may hang.
 *
 * After a barrier, rank N-1 kills itself with SIGKILL.  The survivors loop:
 * even ranks in fh_barrier, odd ranks in fh_get from rank N-1 (mode "mixed",
 * the default), or all in one of them ("barrier", "get", "am").  The runtime
 * must end every survivor with a message naming rank N-1 (exit status
 * FH_EXIT_PEER_DEAD = 70).  If a call instead returns an error, the
 * survivor prints it and exits 70 itself; if a survivor is still looping
 * after 30 s it reports FAIL (the script's clock is tighter).
 * dead_rank.sh checks the exit status, timing, message and leftovers.
 *
 * Usage: dead_rank [mixed|barrier|get|am] [--marker=STRING (ignored)]
 */
#include "testutil.h"

#include <signal.h>

static void h_noop(fh_token_t t, void *b, size_t n, const uint64_t *a,
                   unsigned na)
{
    (void)t; (void)b; (void)n; (void)a; (void)na;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 && argv[1][0] != '-' ? argv[1] : "mixed";
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

    int use_get = strcmp(mode, "get") == 0 ||
                  (strcmp(mode, "mixed") == 0 && me % 2 == 1);
    int use_am = strcmp(mode, "am") == 0;
    static uint8_t buf[65536];
    double t0 = tu_now();
    long loops = 0;
    for (;;) {
        int rc;
        if (use_am) {
            uint64_t a = (uint64_t)loops;
            rc = fh_am_request_short(victim, 130, &a, 1);
            if (rc == FH_OK) rc = fh_poll();
        } else if (use_get) {
            rc = fh_get(buf, victim, vb, sizeof buf);
        } else {
            rc = fh_barrier();
        }
        loops++;
        if (rc != FH_OK) {
            printf("[%d] dead_rank: %s returned %s after %ld calls [%s]; "
                   "exiting 70\n", me, use_am ? "fh_am_request_short"
                   : use_get ? "fh_get" : "fh_barrier", fh_err_name(rc),
                   loops, fh_last_error());
            fflush(stdout);
            exit(70);
        }
        if (tu_now() - t0 > 30) {
            printf("[%d] FAIL dead_rank: still running %ld %s calls 30 s after "
                   "victim %d died: expected the runtime to end this process\n",
                   me, loops, use_get ? "get" : use_am ? "am" : "barrier",
                   victim);
            fflush(stdout);
            exit(1);
        }
    }
}
