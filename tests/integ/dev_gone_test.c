/*
 * dev_gone_test.c -- the network device goes away under a running job;
 * nobody may hang.  Run by `make check-rxe` (tests/vm/dev-gone.sh), where
 * the guest deletes an rxe device (`rdma link delete`) while the ranks
 * transfer; it needs no device of its own and runs on any conduit.
 *
 * Every rank puts, then gets, 64 KiB to and from its partner (rank ^ 1, or
 * itself when alone) in a loop, checking the bytes it gets back.  Rank 0
 * prints "dev_gone: traffic flowing" after 20 rounds (the cue to delete
 * the device).  A call that returns an error prints
 *   [r] dev_gone: <call> returned <error> after <n> rounds [<last error>]
 * and the rank exits 70 (the runtime may also end the process itself with
 * a message).  Still transferring --bound s (default 60) after the start:
 * "FAIL dev_gone: no error" and exit 1; inside one call that long (SIGALRM:
 * the call may never return): "FAIL dev_gone: stuck in <call>", exit 1.
 * (One alarm covers both: the message names the call it was in.)
 * Without a deletion the loop ends after --rounds rounds (default: none)
 * with "PASS dev_gone_test" (the loop itself works).
 *
 * Usage: dev_gone_test [--bound S] [--rounds N]
 */
#include "testutil.h"

#include <signal.h>

static const char *stuck_in = "?";
static int stuck_rank = -1;

/* SIGALRM: --bound s passed inside a call or without an error. */
static void on_alarm(int sig)
{
    (void)sig;
    char m[160];
    int n = snprintf(m, sizeof m, "[%d] FAIL dev_gone: stuck in %s: no error "
                     "within the bound\n", stuck_rank, stuck_in);
    if (n > 0 && write(1, m, (size_t)n) < 0)
        _exit(2);
    _exit(1);
}

int main(int argc, char **argv)
{
    long bound = 60, rounds = -1;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--bound") == 0)
            bound = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = atol(argv[i + 1]);
    }
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("dev_gone");
    const int me = fh_rank(), N = fh_nranks();
    const int peer = (me ^ 1) < N ? (me ^ 1) : me;
    enum { LEN = 65536 };
    fh_seg_t seg;
    uint8_t *local, *remote;
    CHECK_OK(fh_segment_create(2 * LEN, &seg, (void **)&local));
    CHECK_OK(fh_segment_query(seg, peer, (void **)&remote, NULL));
    static uint8_t src[LEN], back[LEN];
    CHECK_OK(fh_barrier());
    stuck_rank = me;
    signal(SIGALRM, on_alarm);
    alarm((unsigned)bound);
    /* Each rank writes the second half of its partner's segment (its own
     * partner writes the second half of its own: no two ranks share). */
    for (long n = 0; rounds < 0 || n < rounds; n++) {
        tu_fill(src, LEN, (uint64_t)me << 32 | (uint64_t)n, 0);
        stuck_in = "fh_put";
        int rc = fh_put(peer, remote + LEN, src, LEN);
        if (rc == FH_OK) {
            stuck_in = "fh_get";
            rc = fh_get(back, peer, remote + LEN, LEN);
        }
        if (rc != FH_OK) {
            printf("[%d] dev_gone: %s returned %s after %ld rounds [%s]\n", me,
                   stuck_in, fh_err_name(rc), n, fh_last_error());
            fflush(stdout);
            _exit(70);
        }
        CHECK(memcmp(back, src, LEN) == 0, "dev_gone",
              "round %ld: expected the bytes put, got others back", n);
        if (n == 20 && me == 0)
            TU_SAY("dev_gone: traffic flowing\n");
    }
    alarm(0);
    CHECK_OK(fh_barrier());
    TU_SAY("PASS dev_gone_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
