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
 *   query: fh_query before fh_init and after fh_finalize is FH_ERR_NOT_INIT;
 *     after it, it reports this rank, the job size, the FH_REG_STRATEGY,
 *     FH_SEGMENT and FH_PATHS in force (the environment's, else the
 *     defaults), the fhrun bootstrap, any_address exactly with
 *     FH_SEGMENT=everything, and works inside an AM handler; a NULL info or
 *     a size below the 8-byte header is FH_ERR_INVALID; a caller whose
 *     struct is shorter (an older header) gets exactly its bytes filled.
 *   stats size: fh_stats_peer with a size below the header is
 *     FH_ERR_INVALID; with a size of the header plus one counter it fills
 *     just those 16 bytes (size 16, version FH_PEER_STATS_VERSION); with a
 *     larger struct (a newer header) it fills sizeof(fh_peer_stats_t) and
 *     leaves the rest alone; it works inside an AM handler.
 *   poll idle: fh_poll_idle(NULL) is FH_ERR_INVALID; a round that handles
 *     nothing adds one to the idle count; the round that runs an AM
 *     handler (the reply to rank 1's request) sets it to 0.
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

static volatile int handler_query_rc = 1, handler_stats_rc = 1;

/* fh_poll_idle: NULL is FH_ERR_INVALID; a round that handles nothing
 * counts one more idle round; the round that runs a handler (the reply to
 * our request) resets the count to 0 (a rank with peers to serve keeps its
 * core). */
static void poll_idle_phase(void)
{
    CHECK_RC(fh_poll_idle(NULL), FH_ERR_INVALID);
    CHECK_OK(fh_barrier());
    if (me == 1) {
        unsigned idle = 1000;
        CHECK_OK(fh_poll_idle(&idle));
        CHECK(idle == 1001 || idle == 0, "fh_poll_idle", "an idle round to count "
              "(1000 -> 1001), saw %u", idle);
        /* H_A runs h_b since replace_phase; it replies through rep_b. */
        uint64_t before = __atomic_load_n(&replies_b, __ATOMIC_ACQUIRE);
        CHECK_OK(fh_am_request_short(0, H_A, NULL, 0));
        int rounds = 0;
        for (double t0 = tu_now(); __atomic_load_n(&replies_b, __ATOMIC_ACQUIRE) == before;
             rounds++) {
            idle = 1000;
            CHECK_OK(fh_poll_idle(&idle));
            CHECK(tu_now() - t0 < 60, "fh_poll_idle", "the reply within 60 s");
        }
        if (rounds > 0)   /* else the reply ran inside the request call */
            CHECK(idle == 0, "fh_poll_idle", "the round that ran a handler to reset "
                  "the idle count to 0, saw %u", idle);
    }
    CHECK_OK(fh_barrier());
}

static void h_a(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf; (void)n; (void)a; (void)na;
    /* Both are handler-safe (include/firehose.h). */
    fh_info_t info = FH_INFO_INIT;
    handler_query_rc = fh_query(&info);
    fh_peer_stats_t st = FH_PEER_STATS_INIT;
    handler_stats_rc = fh_stats_peer(me, &st);
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

/* The value of an enum variable in force: the environment's, else dflt. */
static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : dflt;
}

static void query_phase(void)
{
    CHECK_RC(fh_query(NULL), FH_ERR_INVALID);
    fh_info_t bad = FH_INFO_INIT;
    bad.size = 7;
    CHECK_RC(fh_query(&bad), FH_ERR_INVALID);
    bad.size = 0;
    CHECK_RC(fh_query(&bad), FH_ERR_INVALID);

    fh_info_t info = FH_INFO_INIT;
    CHECK_OK(fh_query(&info));
    CHECK(info.size == sizeof info && info.version == FH_INFO_VERSION, "fh_query header",
          "size %zu version %d, saw %u and %u", sizeof info, FH_INFO_VERSION, info.size,
          info.version);
    CHECK(info.rank == me && info.nranks == N, "fh_query rank and nranks",
          "%d of %d, saw %d of %d", me, N, info.rank, info.nranks);
    CHECK(info.conduit != NULL && (strcmp(info.conduit, "ofi") == 0 ||
                                   strcmp(info.conduit, "ibv") == 0),
          "fh_query conduit", "ofi or ibv, saw %s", info.conduit ? info.conduit : "NULL");
    const char *want = env_or("FH_REG_STRATEGY", "firehose");
    CHECK(info.reg_strategy != NULL && strcmp(info.reg_strategy, want) == 0,
          "fh_query reg_strategy", "%s, saw %s", want,
          info.reg_strategy ? info.reg_strategy : "NULL");
    want = env_or("FH_SEGMENT", "segments");
    CHECK(info.segment_mode != NULL && strcmp(info.segment_mode, want) == 0,
          "fh_query segment_mode", "%s, saw %s", want,
          info.segment_mode ? info.segment_mode : "NULL");
    CHECK(info.any_address == (strcmp(want, "everything") == 0), "fh_query any_address",
          "%d with FH_SEGMENT=%s, saw %d", strcmp(want, "everything") == 0, want,
          info.any_address);
    want = env_or("FH_PATHS", "independent");
    CHECK(info.paths != NULL && strcmp(info.paths, want) == 0, "fh_query paths",
          "%s, saw %s", want, info.paths ? info.paths : "NULL");
    CHECK(strcmp(want, "shared") == 0 ? info.npaths == 1 : info.npaths >= 2,
          "fh_query npaths", "1 path when shared, else the service path and at least "
          "one thread path; saw %d with FH_PATHS=%s", info.npaths, want);
    /* The launcher that started us: fhrun sets FH_BOOT_ADDR, a PMIx launcher
     * PMIX_RANK, and a program started alone is a singleton. */
    want = getenv("FH_BOOT_ADDR") ? "fhrun" : getenv("PMIX_RANK") ? "pmix" : "singleton";
    CHECK(info.bootstrap != NULL && strcmp(info.bootstrap, want) == 0,
          "fh_query bootstrap", "%s, saw %s", want, info.bootstrap ? info.bootstrap : "NULL");
    CHECK(info.needs_local_mr == (strcmp(info.conduit, "ibv") == 0),
          "fh_query needs_local_mr", "1 on ibv only, saw %d on %s", info.needs_local_mr,
          info.conduit);

    /* An older caller: its struct ends after `conduit`. */
    union { fh_info_t info; unsigned char b[sizeof(fh_info_t)]; } old;
    memset(&old, 0xa5, sizeof old);
    old.info.size = (uint32_t)offsetof(fh_info_t, reg_strategy);
    old.info.version = 1;
    CHECK_OK(fh_query(&old.info));
    size_t tail = offsetof(fh_info_t, reg_strategy);
    int untouched = 1;
    for (size_t i = tail; i < sizeof old; i++)
        untouched &= old.b[i] == 0xa5;
    CHECK(old.info.size == tail && old.info.conduit == info.conduit && untouched,
          "fh_query with a shorter struct", "size %zu, the conduit filled and nothing "
          "after it, saw size %u, conduit %s, bytes after it %s", tail, old.info.size,
          old.info.conduit == info.conduit ? "as expected" : "different",
          untouched ? "untouched" : "written");
    TU_SAY("query: fh_query reports %s, %s, FH_SEGMENT=%s, %d paths\n", info.conduit,
           info.reg_strategy, info.segment_mode, info.npaths);
}

static void stats_size_phase(void)
{
    fh_peer_stats_t bad = FH_PEER_STATS_INIT;
    bad.size = 7;
    CHECK_RC(fh_stats_peer(me, &bad), FH_ERR_INVALID);
    bad.size = 0;
    CHECK_RC(fh_stats_peer(me, &bad), FH_ERR_INVALID);

    /* Header plus one counter (puts): 16 bytes filled, not one more. */
    union { fh_peer_stats_t s; unsigned char b[sizeof(fh_peer_stats_t)]; } part;
    memset(&part, 0xa5, sizeof part);
    size_t want = offsetof(fh_peer_stats_t, puts) + sizeof(uint64_t);
    part.s.size = (uint32_t)want;
    part.s.version = 0;
    CHECK_OK(fh_stats_peer(me, &part.s));
    int untouched = 1;
    for (size_t i = want; i < sizeof part; i++)
        untouched &= part.b[i] == 0xa5;
    fh_peer_stats_t full = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(me, &full));
    CHECK(part.s.size == want && part.s.version == FH_PEER_STATS_VERSION && untouched &&
          part.s.puts <= full.puts, "fh_stats_peer with a 16-byte struct",
          "size %zu, version %d, puts filled, nothing after it; saw size %u, version %u, "
          "puts %" PRIu64 " (then %" PRIu64 "), bytes after it %s", want,
          FH_PEER_STATS_VERSION, part.s.size, part.s.version, part.s.puts, full.puts,
          untouched ? "untouched" : "written");
    CHECK(full.size == sizeof full && full.version == FH_PEER_STATS_VERSION,
          "fh_stats_peer header", "size %zu version %d, saw %u and %u", sizeof full,
          FH_PEER_STATS_VERSION, full.size, full.version);

    /* A newer caller: a longer struct; what the library does not know stays. */
    struct { fh_peer_stats_t s; uint64_t later[4]; } big;
    memset(&big, 0xa5, sizeof big);
    big.s.size = (uint32_t)sizeof big;
    big.s.version = FH_PEER_STATS_VERSION + 1;
    CHECK_OK(fh_stats_peer(me, &big.s));
    CHECK(big.s.size == sizeof(fh_peer_stats_t) && big.later[0] == 0xa5a5a5a5a5a5a5a5ull &&
          big.later[3] == 0xa5a5a5a5a5a5a5a5ull, "fh_stats_peer with a longer struct",
          "size %zu and the extra counters untouched, saw size %u", sizeof(fh_peer_stats_t),
          big.s.size);
    TU_SAY("stats size: fh_stats_peer fills the caller's size, refuses one below the header\n");
}

static void replace_phase(void)
{
    int t = (me + 1) % N;
    CHECK_OK(fh_am_request_short(t, H_A, NULL, 0));
    wait_for(&replies_a, 1, "reply from the first handler");
    CHECK_OK(fh_barrier());
    CHECK(ran_a == 1 && ran_b == 0, "handler before the replacement",
          "the first one once, saw a=%" PRIu64 " b=%" PRIu64, ran_a, ran_b);
    CHECK(handler_query_rc == FH_OK && handler_stats_rc == FH_OK,
          "fh_query and fh_stats_peer in an AM handler", "FH_OK from both, saw %d and %d",
          handler_query_rc, handler_stats_rc);
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
    fh_info_t info = FH_INFO_INIT;
    CHECK_RC(fh_query(&info), FH_ERR_NOT_INIT);
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("api_misc_test");
    me = fh_rank();
    N = fh_nranks();
    long am = tu_opt(argc, argv, "--abort-main", -1);
    long ah = tu_opt(argc, argv, "--abort-handler", -1);
    stats_phase();
    query_phase();
    stats_size_phase();
    replace_phase();
    if (N >= 2)
        poll_idle_phase();    /* after replace_phase: its counts are checked */
    if (am >= 0) {
        if (me == N - 1) {
            printf("[%d] api_misc_test: calling fh_abort(%ld) from main\n", me, am);
            fflush(stdout);
            fh_abort((int)am, "api_misc_test: deliberate fh_abort from main");
        }
        /* Never completes: the job ends.  It may fail first, naming the
         * aborting rank, whose connections went with it (coll.c: a lost
         * service connection fails the barrier) -- then we wait for the
         * launcher to end us with the job's status, as a rank polling
         * would (seen under ASan in CI's rehearsal: 1 of 9 runs). */
        int rc = fh_barrier();
        if (rc == FH_OK) {
            TU_LOG("FAIL fh_abort: the job to end, saw fh_barrier return FH_OK\n");
            return 1;
        }
        TU_LOG("fh_barrier failed while the job ends: %s\n", fh_last_error());
        for (double t0 = tu_now(); tu_now() - t0 < 90;)
            tu_sleep_us(10 * 1000);
        TU_LOG("FAIL fh_abort: the job to end, saw it still running 90 s later\n");
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
    CHECK_RC(fh_query(&info), FH_ERR_NOT_INIT);
    TU_SAY("PASS api_misc_test\n");
    return 0;
}
