/*
 * after_finalize_test.c -- issue 29 class 6: errors are accurate.
 *
 * Every public call of include/firehose.h is made in three states:
 *   before fh_init   each returns FH_ERR_NOT_INIT (fh_am_register, which
 *                    may be called before fh_init, succeeds), and
 *                    fh_last_error() names the call;
 *   running          after a failed call, a successful one leaves
 *                    fh_last_error() empty, and each failing call's message
 *                    names that call, never the previous call's (no stale
 *                    message);
 *   after fh_finalize each returns FH_ERR_NOT_INIT, fh_last_error() naming
 *                    the call; the size_t limits return 0, fh_addr_local
 *                    NULL; fh_init returns FH_ERR_STATE.
 * Run on 1 rank and under fhrun on 2 (tests/robust/run_robust.sh).  Prints
 * one line per failed check and exits 1 if any.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "firehose.h"

static int failures, checks;

static void handler(fh_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)buf; (void)n; (void)a; (void)na;
}

/* rc must be want, and fh_last_error() must mention name. */
static void expect(const char *state, const char *name, int rc, int want)
{
    checks++;
    const char *le = fh_last_error();
    if (rc != want) {
        failures++;
        printf("FAIL %s: %s returned %s, expected %s (fh_last_error: \"%s\")\n", state,
               name, fh_err_name(rc), fh_err_name(want), le);
    } else if (want != FH_OK && strstr(le, name) == NULL) {
        failures++;
        printf("FAIL %s: %s returned %s but fh_last_error() is \"%s\" (stale: does not "
               "name %s)\n", state, name, fh_err_name(rc), le, name);
    }
}

/* Every call that reports an error through its return value, in a state
 * where each must return `want` (the not-running states). */
static void every_call(const char *state, int want)
{
    uint64_t word = 0, fetched = 0;
    uint32_t w32 = 0, f32 = 0;
    char buf[64] = {0};
    uint64_t args[1] = {1};
    fh_handle_t h = FH_HANDLE_DONE;
    fh_seg_t seg = 0;
    void *base = NULL;
    size_t sz = 0;
    fh_peer_stats_t ps = FH_PEER_STATS_INIT;
    fh_info_t info = FH_INFO_INIT;
    int src = -1;

    /* A different call fails first each time: its message must be replaced. */
#define CALL(name, expr)                                   \
    do {                                                   \
        fh_put(-1, buf, buf, 1); /* some other message */  \
        expect(state, name, (expr), want);                 \
    } while (0)
    CALL("fh_finalize", fh_finalize());
    CALL("fh_rank", fh_rank());
    CALL("fh_nranks", fh_nranks());
    CALL("fh_segment_create", fh_segment_create(4096, &seg, &base));
    CALL("fh_segment_query", fh_segment_query(seg, 0, &base, &sz));
    CALL("fh_segment_destroy", fh_segment_destroy(seg));
    CALL("fh_token_source", fh_token_source((fh_token_t)buf, &src));
    CALL("fh_am_request_short", fh_am_request_short(0, FH_AM_USER_FIRST, args, 1));
    CALL("fh_am_request_medium", fh_am_request_medium(0, FH_AM_USER_FIRST, buf, 8, args, 1));
    CALL("fh_am_request_long", fh_am_request_long(0, FH_AM_USER_FIRST, buf, 8, buf, args, 1));
    CALL("fh_am_reply_short", fh_am_reply_short((fh_token_t)buf, FH_AM_USER_FIRST, args, 1));
    CALL("fh_am_reply_medium",
         fh_am_reply_medium((fh_token_t)buf, FH_AM_USER_FIRST, buf, 8, args, 1));
    CALL("fh_am_reply_long",
         fh_am_reply_long((fh_token_t)buf, FH_AM_USER_FIRST, buf, 8, buf, args, 1));
    CALL("fh_put", fh_put(0, buf, buf, 8));
    CALL("fh_get", fh_get(buf, 0, buf, 8));
    CALL("fh_put_nb", fh_put_nb(0, buf, buf, 8, &h));
    CALL("fh_get_nb", fh_get_nb(buf, 0, buf, 8, &h));
    CALL("fh_wait", fh_wait((fh_handle_t)12345));
    CALL("fh_test", fh_test((fh_handle_t)12345));
    fh_handle_t hs[2] = {(fh_handle_t)12345, (fh_handle_t)678};
    CALL("fh_wait_all", fh_wait_all(hs, 2));
    CALL("fh_put_nbi", fh_put_nbi(0, buf, buf, 8));
    CALL("fh_get_nbi", fh_get_nbi(buf, 0, buf, 8));
    CALL("fh_wait_nbi", fh_wait_nbi());
    CALL("fh_put_strided", fh_put_strided(0, buf, 8, buf, 8, 8, 2));
    CALL("fh_get_strided", fh_get_strided(buf, 8, 0, buf, 8, 8, 2));
    CALL("fh_quiet", fh_quiet());
    CALL("fh_atomic", fh_atomic(0, &word, FH_AOP_FETCH_ADD, 1, 0, &fetched));
    CALL("fh_atomic32", fh_atomic32(0, &w32, FH_AOP_FETCH_ADD, 1, 0, &f32));
    CALL("fh_atomic_nb", fh_atomic_nb(0, &word, FH_AOP_FETCH_ADD, 1, 0, &fetched, &h));
    CALL("fh_atomic32_nb", fh_atomic32_nb(0, &w32, FH_AOP_FETCH_ADD, 1, 0, &f32, &h));
    CALL("fh_barrier", fh_barrier());
    CALL("fh_poll", fh_poll());
    CALL("fh_allgather", fh_allgather(buf, buf, 1));
    CALL("fh_config_size", fh_config_size("FH_AM_MAX_MEDIUM", &sz));
    CALL("fh_stats_peer", fh_stats_peer(0, &ps));
    CALL("fh_stats_print", fh_stats_print(stderr));
    CALL("fh_query", fh_query(&info));
#undef CALL
    fh_put(-1, buf, buf, 1);
    checks++;
    if (fh_addr_local(0, buf) != NULL || strstr(fh_last_error(), "fh_addr_local") == NULL) {
        failures++;
        printf("FAIL %s: fh_addr_local: not NULL or fh_last_error() \"%s\" does not name it\n",
               state, fh_last_error());
    }
    checks++;
    if (fh_am_max_medium() != 0 || fh_am_max_long() != 0 || fh_am_max_long_reply() != 0) {
        failures++;
        printf("FAIL %s: the fh_am_max_* limits are not 0\n", state);
    }
}

/* While running: a success after a failure leaves no message behind, and
 * each failure names its own call. */
static void running(void)
{
    const char *st = "running";
    char buf[64];
    int me = fh_rank();
    /* Each message is read right after its call. */
#define BAD(name, expr)                                                          \
    do {                                                                         \
        int rc_ = (expr);                                                        \
        checks++;                                                                \
        if (rc_ == FH_OK || strstr(fh_last_error(), name) == NULL) {             \
            failures++;                                                          \
            printf("FAIL %s: %s returned %s, fh_last_error() \"%s\" (expected an " \
                   "error naming the call)\n", st, name, fh_err_name(rc_),          \
                   fh_last_error());                                              \
        }                                                                        \
        int ok_ = fh_poll();                                                     \
        checks++;                                                                \
        if (ok_ != FH_OK || fh_last_error()[0] != '\0') {                        \
            failures++;                                                          \
            printf("FAIL %s: fh_poll after a failed %s returned %s, fh_last_error() " \
                   "\"%s\" (expected FH_OK and \"\": stale)\n", st, name,            \
                   fh_err_name(ok_), fh_last_error());                            \
        }                                                                        \
    } while (0)
    BAD("fh_put", fh_put(-1, buf, buf, 8));
    BAD("fh_get", fh_get(buf, fh_nranks(), buf, 8));
    BAD("fh_segment_query", fh_segment_query(9999, 0, NULL, NULL));
    BAD("fh_config_size", fh_config_size("FH_NO_SUCH", NULL));
    BAD("fh_am_request_short", fh_am_request_short(me, 3, NULL, 0));
    BAD("fh_atomic", fh_atomic(me, NULL, FH_AOP__COUNT, 0, 0, NULL));
    BAD("fh_wait", fh_wait((fh_handle_t)0x7777777));
    BAD("fh_am_register", fh_am_register(3, handler, "bad index"));
    BAD("fh_put_strided", fh_put_strided(me, buf, 8, buf, 8, 8, SIZE_MAX));
    BAD("fh_stats_peer", fh_stats_peer(-5, NULL));
    BAD("fh_query", fh_query(NULL));
    BAD("fh_init", fh_init(NULL, NULL));
#undef BAD
}

int main(int argc, char **argv)
{
    every_call("before fh_init", FH_ERR_NOT_INIT);
    /* fh_am_register may be called before fh_init: it succeeds. */
    checks++;
    if (fh_am_register(FH_AM_USER_FIRST, handler, "h") != FH_OK) {
        failures++;
        printf("FAIL before fh_init: fh_am_register: %s\n", fh_last_error());
    }
    int rc = fh_init(&argc, &argv);
    if (rc != FH_OK) {
        printf("FAIL fh_init: %s: %s\n", fh_err_name(rc), fh_last_error());
        return 1;
    }
    running();
    if ((rc = fh_finalize()) != FH_OK) {
        printf("FAIL fh_finalize: %s: %s\n", fh_err_name(rc), fh_last_error());
        return 1;
    }
    every_call("after fh_finalize", FH_ERR_NOT_INIT);
    fh_put(-1, NULL, NULL, 1);
    expect("after fh_finalize", "fh_am_register",
           fh_am_register(FH_AM_USER_FIRST, handler, "h"), FH_ERR_NOT_INIT);
    fh_put(-1, NULL, NULL, 1);
    expect("after fh_finalize", "fh_init", fh_init(&argc, &argv), FH_ERR_STATE);
    printf("%s: %d of %d checks failed\n", failures ? "FAIL" : "ok", failures, checks);
    return failures ? 1 : 0;
}
