/*
 * api_misc_test.c -- promises of include/firehose.h that fit nowhere else.
 *
 *   stats: fh_stats_print after fh_init (FH_STATS unset) writes one row per
 *     peer ("firehose[me]: stats ->r ...") and a "total" row to the FILE*
 *     given, with this rank's puts to the peer counted in its row.
 *   replace: fh_am_register on an index that has a handler replaces it: a
 *     request after the replacement runs the new handler only (and short,
 *     medium and reply handlers alike); registering again before fh_init and
 *     after it both work.
 *   --abort-main CODE: after the checks, rank N-1 calls fh_abort(CODE, msg)
 *     from the main thread while the others wait in fh_barrier.
 *   --abort-handler CODE: rank 0 sends a request to rank N-1 whose handler
 *     calls fh_abort(CODE, msg) (fh_abort is handler-safe).
 *   The driver (api_misc_test.sh) checks the job's exit status (CODE, and 1
 *   for CODE 0), the message, and that no rank is left running.
 *
 * Usage: api_misc_test [--abort-main CODE | --abort-handler CODE]
 */
#include "testutil.h"

#define H_A (FH_AM_USER_FIRST + 10)
#define H_REP (FH_AM_USER_FIRST + 11)
#define H_ABORT (FH_AM_USER_FIRST + 12)

static int me, N;
static volatile uint64_t ran_a, ran_b, replies_a, replies_b;

static void h_a(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf; (void)n; (void)a; (void)na;
    __atomic_add_fetch(&ran_a, 1, __ATOMIC_RELEASE);
    CHECK_OK(fh_am_reply_short(tok, H_REP, NULL, 0));
}

static void h_b(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)n; (void)a; (void)na;
    if (buf != NULL)
        CHECK(memcmp(buf, "replaced", 8) == 0, "medium payload to the new handler",
              "\"replaced\", saw other bytes");
    __atomic_add_fetch(&ran_b, 1, __ATOMIC_RELEASE);
    CHECK_OK(fh_am_reply_short(tok, H_REP, NULL, 0));
}

static void rep_a(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok; (void)buf; (void)n; (void)a; (void)na;
    __atomic_add_fetch(&replies_a, 1, __ATOMIC_RELEASE);
}

static void rep_b(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok; (void)buf; (void)n; (void)a; (void)na;
    __atomic_add_fetch(&replies_b, 1, __ATOMIC_RELEASE);
}

static void h_abort(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok; (void)buf; (void)n; (void)na;
    printf("[%d] api_misc_test: calling fh_abort(%d) from an AM handler\n", me, (int)a[0]);
    fflush(stdout);
    fh_abort((int)a[0], "api_misc_test: deliberate fh_abort from an AM handler");
}

/* Polls until *v == want; fails after a generous bound (never a hang). */
static void wait_for(volatile uint64_t *v, uint64_t want, const char *what)
{
    double t0 = tu_now();
    while (__atomic_load_n(v, __ATOMIC_ACQUIRE) != want) {
        CHECK(tu_now() - t0 < 60, what, "%" PRIu64 " within 60 s, saw %" PRIu64
              " (a=%" PRIu64 " b=%" PRIu64 " replies_a=%" PRIu64 " replies_b=%" PRIu64 ")",
              want, *v, ran_a, ran_b, replies_a, replies_b);
        CHECK_OK(fh_poll());
    }
}

static void stats_phase(void)
{
    int t = (me + 1) % N;
    fh_seg_t seg;
    void *lb;
    CHECK_OK(fh_segment_create(4096, &seg, &lb));
    char *tb;
    CHECK_OK(fh_segment_query(seg, t, (void **)&tb, NULL));
    uint8_t v[16] = {1};
    for (int i = 0; i < 3; i++)
        CHECK_OK(fh_put(t, tb, v, sizeof v));
    FILE *f = tmpfile();
    CHECK(f != NULL, "tmpfile", "a FILE*");
    CHECK_OK(fh_stats_print(f));
    rewind(f);
    char line[2048], want_peer[64], want_total[64];
    int peers = 0, totals = 0, puts_to_t = -1;
    snprintf(want_total, sizeof want_total, "firehose[%d]: stats total ", me);
    while (fgets(line, sizeof line, f)) {
        for (int r = 0; r < N; r++) {
            snprintf(want_peer, sizeof want_peer, "firehose[%d]: stats ->%d ", me, r);
            if (strncmp(line, want_peer, strlen(want_peer)) == 0) {
                peers++;
                if (r == t)
                    sscanf(strstr(line, "puts="), "puts=%d", &puts_to_t);
            }
        }
        totals += strncmp(line, want_total, strlen(want_total)) == 0;
    }
    fclose(f);
    int want_rows = t == me ? 0 : N - 1;
    CHECK(peers == want_rows && totals == 1, "fh_stats_print after fh_init",
          "%d peer rows and 1 total row, saw %d and %d", want_rows, peers, totals);
    if (t != me)
        CHECK(puts_to_t >= 3, "fh_stats_print puts", "at least 3 puts to rank %d, saw %d",
              t, puts_to_t);
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("stats: fh_stats_print wrote %d peer rows and the total\n", peers);
}

static void replace_phase(void)
{
    int t = (me + 1) % N;
    CHECK_OK(fh_am_request_short(t, H_A, NULL, 0));
    wait_for(&replies_a, 1, "reply from the first handler");
    CHECK_OK(fh_barrier());
    CHECK(ran_a == 1 && ran_b == 0, "handler before the replacement",
          "the first one once, saw a=%" PRIu64 " b=%" PRIu64, ran_a, ran_b);
    /* Replace the request handler and the reply handler, after fh_init. */
    CHECK_OK(fh_am_register(H_A, h_b, "replacement"));
    CHECK_OK(fh_am_register(H_REP, rep_b, "replacement reply"));
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_am_request_short(t, H_A, NULL, 0));
    CHECK_OK(fh_am_request_medium(t, H_A, "replaced", 8, NULL, 0));
    wait_for(&replies_b, 2, "replies through the replaced handlers");
    CHECK_OK(fh_barrier());
    CHECK(ran_a == 1 && ran_b == 2 && replies_a == 1, "handler after the replacement",
          "the new request and reply handlers only (a=1 b=2 replies_a=1), saw a=%" PRIu64
          " b=%" PRIu64 " replies_a=%" PRIu64, ran_a, ran_b, replies_a);
    TU_SAY("replace: a re-registered index runs the new handler only\n");
}

int main(int argc, char **argv)
{
    /* Registered twice before fh_init: the second one is the one in force. */
    CHECK_OK(fh_am_register(H_A, h_b, "first"));
    CHECK_OK(fh_am_register(H_A, h_a, "a"));
    CHECK_OK(fh_am_register(H_REP, rep_a, "reply a"));
    CHECK_OK(fh_am_register(H_ABORT, h_abort, "abort"));
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("api_misc_test");
    me = fh_rank();
    N = fh_nranks();
    long am = tu_opt(argc, argv, "--abort-main", -1);
    long ah = tu_opt(argc, argv, "--abort-handler", -1);
    stats_phase();
    replace_phase();
    if (am >= 0) {
        if (me == N - 1) {
            printf("[%d] api_misc_test: calling fh_abort(%ld) from main\n", me, am);
            fflush(stdout);
            fh_abort((int)am, "api_misc_test: deliberate fh_abort from main");
        }
        fh_barrier();   /* never completes: the job ends */
        TU_LOG("FAIL fh_abort: the job to end, saw fh_barrier return\n");
        return 1;
    }
    if (ah >= 0) {
        if (me == 0) {
            uint64_t code = (uint64_t)ah;
            CHECK_OK(fh_am_request_short(N - 1, H_ABORT, &code, 1));
        }
        /* Everybody polls (the handler runs in rank N-1's fh_poll) until
         * the job ends; a barrier could complete before the handler ran. */
        for (double t0 = tu_now(); tu_now() - t0 < 90;)
            fh_poll();
        TU_LOG("FAIL fh_abort: the job to end, saw fh_barrier return\n");
        return 1;
    }
    CHECK_OK(fh_finalize());
    TU_SAY("PASS api_misc_test\n");
    return 0;
}
