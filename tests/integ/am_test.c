/*
 * am_test.c -- active messages: integrity, replies, ordering, flow control.
 *
 *   roundtrip: to every rank (self included), every request kind (short,
 *     medium, long) x every reply kind (short, medium, long), 0..8 args,
 *     payloads 0..fh_am_max_medium (medium) and up to 2 MiB (long, above the
 *     medium limit); handlers check args, payload, nbytes, the long
 *     destination address and fh_token_source.
 *   stream: many short/medium requests to every rank (self included), with
 *     short/medium replies; the plan of message #k from s to t (kind, nargs,
 *     size, reply) is a function of (seed, s, t, k), so the target checks that
 *     handlers run in send order (one sequence per sender->target, short and
 *     medium mixed) and that every byte and argument is right.
 *   flood: every rank but 0 sends 10000 short requests to rank 0 while
 *     rank 0 does not poll for 1 s (senders must block in flow control, not
 *     fail or drop), then 10000 more that each get a reply; all counted.
 *   restrictions: inside a request handler a second reply is FH_ERR_STATE,
 *     non-handler-safe calls (fh_init and fh_stats_print among them) are
 *     FH_ERR_IN_HANDLER, handler-safe ones work;
 *     inside a reply handler replying is FH_ERR_IN_HANDLER.
 *
 * Usage: am_test [--msgs N] [--flood N]
 */
#include "testutil.h"

#include <stdbool.h>

#define MiB ((size_t)1 << 20)
#define LSLOT (2 * MiB + 4096)

enum {
    H_RT_REQ = 130,          /* + kind 0 short, 1 medium, 2 long */
    H_RT_REP = 140,          /* + kind */
    H_ST_REQ = 150,          /* + kind 0 short, 1 medium */
    H_ST_REP = 160,          /* + kind */
    H_FLOOD = 170, H_FLOOD_R = 171, H_FLOOD_REP = 172,
    H_RESTRICT = 180, H_RESTRICT_REP = 181,
    H_UNUSED = 250           /* never registered */
};

static int me, N;
static fh_seg_t seg;
static uint8_t **bases;
static size_t maxmed, maxlong, lmax, lrepmax;
static size_t LREQ_OFF, LREP_OFF;

static int tok_src(fh_token_t tok, const char *where)
{
    int src = -1;
    int rc = fh_token_source(tok, &src);
    CHECK(rc == FH_OK, where, "fh_token_source: expected FH_OK, saw %s",
          fh_err_name(rc));
    CHECK(src >= 0 && src < N, where, "fh_token_source: expected a rank in "
          "[0,%d), saw %d", N, src);
    return src;
}

static uint64_t argval(int s, int t, uint64_t id, unsigned i)
{
    return tu_mix64(((uint64_t)s << 48) ^ ((uint64_t)t << 32) ^ (id << 4) ^ i);
}

static void poll_until(volatile int *flag, const char *what)
{
    double t0 = tu_now();
    while (!*flag) {
        CHECK_OK(fh_poll());
        CHECK(tu_now() - t0 < 60, what, "not done after 60 s of fh_poll");
    }
}

/* ============================================================ roundtrip */

static struct {
    int peer;              /* target of the outstanding request */
    uint64_t j;
    int rkind;             /* expected reply kind */
    size_t rsize;
    unsigned rnargs;
    volatile int done;
} rt;

static void rt_req(fh_token_t tok, void *buf, size_t nbytes,
                   const uint64_t *args, unsigned nargs, int kind)
{
    char w[64];
    snprintf(w, sizeof w, "roundtrip request handler (kind %d)", kind);
    int src = tok_src(tok, w);
    CHECK(nargs >= 6, w, "nargs: expected >= 6, saw %u", nargs);
    uint64_t j = args[0];
    CHECK(args[1] == (uint64_t)src, w, "args[1] (sender): expected %d "
          "(token source), saw %" PRIu64, src, args[1]);
    for (unsigned i = 6; i < nargs; i++)
        CHECK(args[i] == argval(src, me, j, i), w, "args[%u] of %u: expected "
              "0x%" PRIx64 ", saw 0x%" PRIx64, i, nargs, argval(src, me, j, i),
              args[i]);
    size_t n = (size_t)args[3];
    CHECK(nbytes == n, w, "nbytes: expected %zu, saw %zu", n, nbytes);
    uint64_t key = tu_key((uint64_t)src, 1000000 + j, (uint64_t)me);
    if (kind == 0) {
        CHECK(buf == NULL, w, "short: buf expected NULL, saw %p", buf);
    } else if (kind == 1) {
        CHECK(n == 0 || buf != NULL, w, "medium: buf NULL with %zu bytes", n);
        TU_VERIFY(buf, n, key, 0, "medium request payload from rank %d "
                  "(round %" PRIu64 ")", src, j);
    } else {
        uint8_t *exp = bases[me] + LREQ_OFF + (size_t)src * LSLOT + j % 61;
        CHECK(buf == exp || (n == 0 && buf == NULL), w, "long: buf expected "
              "%p (the request's dst), saw %p", (void *)exp, buf);
        TU_VERIFY(buf, n, key, 0, "long request payload from rank %d "
                  "(round %" PRIu64 ", %zu B)", src, j, n);
    }
    /* Reply as asked. */
    int rkind = (int)args[2];
    size_t rsize = (size_t)args[4];
    unsigned rnargs = (unsigned)args[5];
    uint64_t ra[FH_AM_MAX_ARGS];
    for (unsigned i = 0; i < rnargs; i++)
        ra[i] = argval(me, src, j + 5000, i);
    uint64_t rkey = tu_key((uint64_t)me, 2000000 + j, (uint64_t)src);
    int rc;
    if (rkind == 0) {
        rc = fh_am_reply_short(tok, H_RT_REP + 0, ra, rnargs);
    } else {
        uint8_t *tmp = malloc(rsize + 1);
        tu_fill(tmp, rsize, rkey, 0);
        if (rkind == 1)
            rc = fh_am_reply_medium(tok, H_RT_REP + 1, tmp, rsize, ra, rnargs);
        else
            rc = fh_am_reply_long(tok, H_RT_REP + 2, tmp, rsize,
                                  bases[src] + LREP_OFF + (size_t)me * LSLOT +
                                  j % 37, ra, rnargs);
        memset(tmp, 0xEE, rsize);   /* source may be reused on return */
        free(tmp);
    }
    CHECK(rc == FH_OK, w, "fh_am_reply (kind %d, %zu B, %u args) to rank %d: "
          "expected FH_OK, saw %s [%s]", rkind, rsize, rnargs, src,
          fh_err_name(rc), fh_last_error());
}

static void rt_rep(fh_token_t tok, void *buf, size_t nbytes,
                   const uint64_t *args, unsigned nargs, int kind)
{
    char w[64];
    snprintf(w, sizeof w, "roundtrip reply handler (kind %d)", kind);
    int src = tok_src(tok, w);
    CHECK(!rt.done, w, "unexpected reply (none outstanding) from rank %d", src);
    CHECK(src == rt.peer, w, "token source: expected %d, saw %d", rt.peer, src);
    CHECK(kind == rt.rkind, w, "reply kind: expected %d, saw %d", rt.rkind,
          kind);
    CHECK(nargs == rt.rnargs, w, "nargs: expected %u, saw %u", rt.rnargs,
          nargs);
    for (unsigned i = 0; i < nargs; i++)
        CHECK(args[i] == argval(src, me, rt.j + 5000, i), w, "args[%u]: "
              "expected 0x%" PRIx64 ", saw 0x%" PRIx64, i,
              argval(src, me, rt.j + 5000, i), args[i]);
    size_t n = kind == 0 ? 0 : rt.rsize;
    CHECK(nbytes == n, w, "nbytes: expected %zu, saw %zu", n, nbytes);
    uint64_t key = tu_key((uint64_t)src, 2000000 + rt.j, (uint64_t)me);
    if (kind == 2) {
        uint8_t *exp = bases[me] + LREP_OFF + (size_t)src * LSLOT + rt.j % 37;
        CHECK(buf == exp || (n == 0 && buf == NULL), w, "long reply (%zu B):"
              " buf expected %p, saw %p", n, (void *)exp, buf);
    }
    if (kind > 0)
        TU_VERIFY(buf, n, key, 0, "reply payload (kind %d) from rank %d round "
                  "%" PRIu64, kind, src, rt.j);
    rt.done = 1;
}

#define RTH(k) \
    static void rt_req##k(fh_token_t t, void *b, size_t n, const uint64_t *a, \
                          unsigned na) { rt_req(t, b, n, a, na, k); }         \
    static void rt_rep##k(fh_token_t t, void *b, size_t n, const uint64_t *a, \
                          unsigned na) { rt_rep(t, b, n, a, na, k); }
RTH(0) RTH(1) RTH(2)

static size_t pick_size(tu_rng_t *r, size_t max)
{
    switch (tu_rng_below(r, 6)) {
    case 0: return 0;
    case 1: return max;
    case 2: return max > 0 ? max - 1 : 0;
    case 3: return 1 + tu_rng_below(r, 16);
    default: return tu_rng_below(r, max + 1);
    }
}

static void roundtrip_phase(int rounds)
{
    uint8_t *src = malloc(lmax + 64);
    unsigned long long n = 0;
    for (int d = 0; d < N; d++) {
        int t = (me + d) % N;
        for (int j = 0; j < rounds; j++) {
            tu_rng_t r = tu_rng_make(tu_seed, (uint64_t)me, (uint64_t)t,
                                     (uint64_t)j + 42);
            int kind = j % 3, rkind = (j / 3) % 3;
            size_t size = kind == 0 ? 0 : kind == 1 ? pick_size(&r, maxmed)
                        : (j % 2 ? maxmed + 1 + tu_rng_below(&r, lmax - maxmed)
                                 : pick_size(&r, lmax));
            if (kind == 2 && j < 9) size = lmax;     /* largest once per kind */
            /* Replies never block, so long replies have their own (smaller)
             * limit: fh_am_max_long_reply(). */
            size_t rsize = rkind == 0 ? 0 : rkind == 1 ? pick_size(&r, maxmed)
                         : pick_size(&r, lrepmax);
            unsigned nargs = 6 + (unsigned)tu_rng_below(&r, 3);
            unsigned rnargs = (unsigned)tu_rng_below(&r, FH_AM_MAX_ARGS + 1);
            uint64_t a[FH_AM_MAX_ARGS] = {(uint64_t)j, (uint64_t)me,
                                          (uint64_t)rkind, size, rsize, rnargs};
            for (unsigned i = 6; i < nargs; i++)
                a[i] = argval(me, t, (uint64_t)j, i);
            rt.peer = t; rt.j = (uint64_t)j; rt.rkind = rkind;
            rt.rsize = rsize; rt.rnargs = rnargs; rt.done = 0;
            uint64_t key = tu_key((uint64_t)me, 1000000 + (uint64_t)j,
                                  (uint64_t)t);
            tu_fill(src, size, key, 0);
            int rc;
            if (kind == 0)
                rc = fh_am_request_short(t, H_RT_REQ, a, nargs);
            else if (kind == 1)
                rc = fh_am_request_medium(t, H_RT_REQ + 1, src, size, a, nargs);
            else
                rc = fh_am_request_long(t, H_RT_REQ + 2, src, size,
                                        bases[t] + LREQ_OFF +
                                        (size_t)me * LSLOT + (size_t)j % 61,
                                        a, nargs);
            CHECK(rc == FH_OK, "roundtrip request", "kind %d, %zu B, %u args "
                  "to rank %d: expected FH_OK, saw %s [%s]", kind, size, nargs,
                  t, fh_err_name(rc), fh_last_error());
            memset(src, 0xEE, size);   /* reusable on return */
            char w[96];
            snprintf(w, sizeof w, "reply to roundtrip %d (req kind %d, reply "
                     "kind %d) from rank %d", j, kind, rkind, t);
            poll_until(&rt.done, w);
            n++;
        }
    }
    free(src);
    CHECK_OK(fh_barrier());
    TU_LOG("roundtrip: %llu request->reply round trips (3x3 kinds, self "
           "included) verified\n", n);
}

/* =============================================================== stream */

typedef struct {
    int kind;          /* 0 short, 1 medium */
    unsigned nargs;
    size_t size;
    int reply;         /* 0 none, 1 short, 2 medium */
    unsigned rnargs;   /* 1..8 */
    size_t rsize;
} plan_t;

static plan_t msg_plan(int s, int t, uint64_t k)
{
    tu_rng_t r = tu_rng_make(tu_seed, (uint64_t)s, (uint64_t)t, k + 777777);
    plan_t p;
    p.kind = (int)tu_rng_below(&r, 2);
    p.nargs = (unsigned)tu_rng_below(&r, FH_AM_MAX_ARGS + 1);
    p.size = p.kind ? pick_size(&r, maxmed) : 0;
    p.reply = (int)tu_rng_below(&r, 3);
    p.rnargs = 1 + (unsigned)tu_rng_below(&r, FH_AM_MAX_ARGS);
    p.rsize = p.reply == 2 ? pick_size(&r, maxmed) : 0;
    return p;
}

static uint64_t *st_next;       /* next expected seq from each source */
static uint64_t st_replies;     /* replies received */
static uint64_t st_received;    /* requests handled */

static void st_req(fh_token_t tok, void *buf, size_t nbytes,
                   const uint64_t *args, unsigned nargs, int kind)
{
    const char *w = kind ? "stream medium handler" : "stream short handler";
    int src = tok_src(tok, w);
    uint64_t k = st_next[src]++;
    plan_t p = msg_plan(src, me, k);
    CHECK(kind == p.kind && nargs == p.nargs, w, "message #%" PRIu64 " from "
          "rank %d: expected %s with %u args, saw %s with %u args "
          "(out of order or lost message)", k, src,
          p.kind ? "medium" : "short", p.nargs, kind ? "medium" : "short",
          nargs);
    if (nargs >= 1)
        CHECK(args[0] == k, w, "order: expected sequence %" PRIu64 " from rank "
              "%d, saw %" PRIu64, k, src, args[0]);
    if (nargs >= 2)
        CHECK(args[1] == (uint64_t)src, w, "args[1] (sender): token source "
              "says %d, args say %" PRIu64, src, args[1]);
    for (unsigned i = 2; i < nargs; i++)
        CHECK(args[i] == argval(src, me, k, i), w, "message #%" PRIu64
              " from %d args[%u]: expected 0x%" PRIx64 ", saw 0x%" PRIx64, k,
              src, i, argval(src, me, k, i), args[i]);
    CHECK(nbytes == p.size, w, "message #%" PRIu64 " from %d: nbytes expected "
          "%zu, saw %zu", k, src, p.size, nbytes);
    if (kind)
        TU_VERIFY(buf, nbytes, tu_key((uint64_t)src, 3000000 + k,
                                      (uint64_t)me), 0,
                  "stream medium #%" PRIu64 " from rank %d", k, src);
    st_received++;
    if (p.reply) {
        uint64_t ra[FH_AM_MAX_ARGS];
        ra[0] = k;
        for (unsigned i = 1; i < p.rnargs; i++)
            ra[i] = argval(me, src, k + 9000000, i);
        int rc;
        if (p.reply == 1) {
            rc = fh_am_reply_short(tok, H_ST_REP, ra, p.rnargs);
        } else {
            uint8_t tmp[65536];
            uint8_t *b = p.rsize <= sizeof tmp ? tmp : malloc(p.rsize);
            tu_fill(b, p.rsize, tu_key((uint64_t)me, 4000000 + k,
                                       (uint64_t)src), 0);
            rc = fh_am_reply_medium(tok, H_ST_REP + 1, b, p.rsize, ra,
                                    p.rnargs);
            if (b != tmp) free(b);
        }
        CHECK(rc == FH_OK, w, "reply to #%" PRIu64 " of rank %d: expected "
              "FH_OK, saw %s [%s]", k, src, fh_err_name(rc), fh_last_error());
    }
}

static void st_rep(fh_token_t tok, void *buf, size_t nbytes,
                   const uint64_t *args, unsigned nargs, int kind)
{
    const char *w = kind ? "stream medium reply handler"
                         : "stream short reply handler";
    int src = tok_src(tok, w);
    CHECK(nargs >= 1, w, "nargs: expected >= 1, saw %u", nargs);
    uint64_t k = args[0];
    plan_t p = msg_plan(me, src, k);
    CHECK(p.reply == kind + 1, w, "reply to #%" PRIu64 " from %d: expected "
          "reply kind %d, saw %d", k, src, p.reply, kind + 1);
    CHECK(nargs == p.rnargs, w, "reply to #%" PRIu64 ": nargs expected %u, "
          "saw %u", k, p.rnargs, nargs);
    for (unsigned i = 1; i < nargs; i++)
        CHECK(args[i] == argval(src, me, k + 9000000, i), w, "reply args[%u] "
              "wrong", i);
    CHECK(nbytes == p.rsize, w, "reply to #%" PRIu64 ": nbytes expected %zu, "
          "saw %zu", k, p.rsize, nbytes);
    if (kind)
        TU_VERIFY(buf, nbytes, tu_key((uint64_t)src, 4000000 + k,
                                      (uint64_t)me), 0,
                  "stream medium reply to #%" PRIu64 " from %d", k, src);
    st_replies++;
}

#define STH(k) \
    static void st_req##k(fh_token_t t, void *b, size_t n, const uint64_t *a, \
                          unsigned na) { st_req(t, b, n, a, na, k); }         \
    static void st_rep##k(fh_token_t t, void *b, size_t n, const uint64_t *a, \
                          unsigned na) { st_rep(t, b, n, a, na, k); }
STH(0) STH(1)

static void stream_phase(long msgs)
{
    uint8_t *buf = malloc(maxmed + 1);
    uint64_t want_replies = 0;
    for (long k = 0; k < msgs; k++) {
        for (int d = 0; d < N; d++) {
            int t = (me + d) % N;
            plan_t p = msg_plan(me, t, (uint64_t)k);
            uint64_t a[FH_AM_MAX_ARGS];
            a[0] = (uint64_t)k;
            a[1] = (uint64_t)me;
            for (unsigned i = 2; i < FH_AM_MAX_ARGS; i++)
                a[i] = argval(me, t, (uint64_t)k, i);
            int rc;
            if (p.kind == 0) {
                rc = fh_am_request_short(t, H_ST_REQ, a, p.nargs);
            } else {
                tu_fill(buf, p.size, tu_key((uint64_t)me, 3000000 + (uint64_t)k,
                                            (uint64_t)t), 0);
                rc = fh_am_request_medium(t, H_ST_REQ + 1, buf, p.size, a,
                                          p.nargs);
            }
            CHECK(rc == FH_OK, "stream request", "#%ld to rank %d (%s, %u "
                  "args, %zu B): expected FH_OK, saw %s [%s]", k, t,
                  p.kind ? "medium" : "short", p.nargs, p.size,
                  fh_err_name(rc), fh_last_error());
            if (p.reply) want_replies++;
        }
    }
    double t0 = tu_now();
    while (st_replies < want_replies || st_received < (uint64_t)(msgs * N)) {
        CHECK_OK(fh_poll());
        CHECK(tu_now() - t0 < 60, "stream", "after 60 s: replies %" PRIu64
              "/%" PRIu64 ", requests handled %" PRIu64 "/%ld", st_replies,
              want_replies, st_received, msgs * N);
    }
    CHECK_OK(fh_barrier());
    CHECK(st_replies == want_replies, "stream", "replies: expected %" PRIu64
          ", saw %" PRIu64, want_replies, st_replies);
    TU_LOG("stream: sent %ld short/medium requests to each of %d ranks, "
           "handled %" PRIu64 " in order, %" PRIu64 " replies verified\n",
           msgs, N, st_received, st_replies);
    free(buf);
}

/* ================================================================ flood */

static uint64_t *fl_next;
static uint64_t fl_count, fl_replies;

static void fl_req(fh_token_t tok, void *buf, size_t nbytes,
                   const uint64_t *args, unsigned nargs)
{
    (void)buf;
    int src = tok_src(tok, "flood handler");
    CHECK(nargs == 1 && nbytes == 0, "flood handler", "expected 1 arg 0 bytes,"
          " saw %u args %zu bytes", nargs, nbytes);
    CHECK(args[0] == fl_next[src], "flood handler", "order from rank %d: "
          "expected seq %" PRIu64 ", saw %" PRIu64, src, fl_next[src], args[0]);
    fl_next[src]++;
    fl_count++;
}

static void fl_req_r(fh_token_t tok, void *buf, size_t nbytes,
                     const uint64_t *args, unsigned nargs)
{
    fl_req(tok, buf, nbytes, args, nargs);
    uint64_t a = args[0] * 3;
    int rc = fh_am_reply_short(tok, H_FLOOD_REP, &a, 1);
    CHECK(rc == FH_OK, "flood reply", "reply to seq %" PRIu64 ": expected "
          "FH_OK, saw %s [%s]", args[0], fh_err_name(rc), fh_last_error());
}

static void fl_rep(fh_token_t tok, void *buf, size_t nbytes,
                   const uint64_t *args, unsigned nargs)
{
    (void)buf; (void)nbytes;
    int src = tok_src(tok, "flood reply handler");
    CHECK(src == 0 && nargs == 1 && args[0] % 3 == 0, "flood reply handler",
          "expected 1 arg from rank 0, saw %u args from %d", nargs, src);
    fl_replies++;
}

static void flood_phase(long nflood)
{
    for (int round = 0; round < 2; round++) {
        unsigned h = round == 0 ? H_FLOOD : H_FLOOD_R;
        fl_count = 0;
        fl_replies = 0;
        for (int r = 0; r < N; r++) fl_next[r] = 0;
        CHECK_OK(fh_barrier());
        double t0 = tu_now();
        if (me == 0) {
            if (round == 0)
                tu_sleep_us(1000000);   /* let senders hit flow control */
            long cnt = round == 0 ? nflood : nflood / 5;
            uint64_t want = (uint64_t)(N - 1) * (uint64_t)cnt;
            while (fl_count < want) {
                CHECK_OK(fh_poll());
                CHECK(tu_now() - t0 < 120, "flood", "round %d: handled %"
                      PRIu64 " of %" PRIu64 " after 120 s", round, fl_count,
                      want);
            }
            for (int r = 1; r < N; r++)
                CHECK(fl_next[r] == (uint64_t)cnt, "flood", "from rank %d: "
                      "expected %ld, saw %" PRIu64, r, cnt, fl_next[r]);
        } else {
            long cnt = round == 0 ? nflood : nflood / 5;
            for (long k = 0; k < cnt; k++) {
                uint64_t a = (uint64_t)k;
                int rc = fh_am_request_short(0, h, &a, 1);
                CHECK(rc == FH_OK, "flood request", "#%ld to rank 0: expected "
                      "FH_OK, saw %s [%s]", k, fh_err_name(rc),
                      fh_last_error());
            }
            if (round == 1)
                while (fl_replies < (uint64_t)cnt) {
                    CHECK_OK(fh_poll());
                    CHECK(tu_now() - t0 < 120, "flood", "replies %" PRIu64
                          " of %ld after 120 s", fl_replies, cnt);
                }
        }
        double dt = tu_now() - t0;
        CHECK_OK(fh_barrier());
        if (me == 0)
            TU_LOG("flood %s: %ld requests from each of %d ranks handled in "
                   "order (%.2f s)\n", round ? "with replies" : "(target "
                   "asleep 1 s)", round ? nflood / 5 : nflood, N - 1, dt);
    }
}

/* ========================================================= restrictions */

static volatile int rs_done;

static void rs_req(fh_token_t tok, void *buf, size_t nbytes,
                   const uint64_t *args, unsigned nargs)
{
    (void)buf; (void)nbytes; (void)args; (void)nargs;
    const char *w = "inside a request handler";
    int src = tok_src(tok, w);
    int peer = (me + 1) % N;
    uint64_t v = 0, a = 1;
    fh_handle_t h = FH_HANDLE_DONE;
    fh_peer_stats_t st = FH_PEER_STATS_INIT;
    void *b; size_t sz;
    CHECK_RC(fh_put(peer, bases[peer], &v, 8), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_get(&v, peer, bases[peer], 8), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_put_nb(peer, bases[peer], &v, 8, &h), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_put_nbi(peer, bases[peer], &v, 8), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_wait(FH_HANDLE_DONE), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_wait_nbi(), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_quiet(), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_barrier(), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_poll(), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_atomic(peer, (uint64_t *)bases[peer], FH_AOP_FETCH, 0, 0, &v),
             FH_ERR_IN_HANDLER);
    CHECK_RC(fh_am_request_short(peer, H_RESTRICT, &a, 1), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_am_register(H_UNUSED - 1, fl_rep, "x"), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_allgather(&v, &v, 0), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_init(NULL, NULL), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_stats_print(NULL), FH_ERR_IN_HANDLER);
    /* handler-safe */
    CHECK_RC(fh_rank(), me);
    CHECK_RC(fh_nranks(), N);
    CHECK_OK(fh_segment_query(seg, peer, &b, &sz));
    CHECK(b == bases[peer], w, "fh_segment_query base differs");
    CHECK_OK(fh_stats_peer(src, &st));
    CHECK(fh_am_max_medium() == maxmed, w, "fh_am_max_medium changed");
    CHECK(fh_strerror(FH_ERR_RANK) != NULL, w, "fh_strerror NULL");
    /* one reply, a second is FH_ERR_STATE */
    CHECK_OK(fh_am_reply_short(tok, H_RESTRICT_REP, &a, 1));
    CHECK_RC(fh_am_reply_short(tok, H_RESTRICT_REP, &a, 1), FH_ERR_STATE);
    CHECK_RC(fh_am_reply_medium(tok, H_RESTRICT_REP, &v, 8, &a, 1),
             FH_ERR_STATE);
}

static void rs_rep(fh_token_t tok, void *buf, size_t nbytes,
                   const uint64_t *args, unsigned nargs)
{
    (void)buf; (void)nbytes; (void)args; (void)nargs;
    uint64_t a = 2;
    tok_src(tok, "inside a reply handler");
    CHECK_RC(fh_am_reply_short(tok, H_RESTRICT_REP, &a, 1), FH_ERR_IN_HANDLER);
    CHECK_RC(fh_put(me, bases[me], &a, 8), FH_ERR_IN_HANDLER);
    rs_done = 1;
}

static void restrict_phase(void)
{
    for (int d = 0; d < 2; d++) {
        int t = (me + d) % N;
        uint64_t a = 0;
        rs_done = 0;
        CHECK_OK(fh_am_request_short(t, H_RESTRICT, &a, 1));
        poll_until(&rs_done, "restriction round trip");
    }
    CHECK_OK(fh_barrier());
    TU_LOG("restrictions: in-handler calls gave FH_ERR_IN_HANDLER / "
           "FH_ERR_STATE as documented (peer and self)\n");
}

int main(int argc, char **argv)
{
    /* Registration is allowed before fh_init. */
    CHECK_OK(fh_am_register(H_RT_REQ + 0, rt_req0, "rt_req_short"));
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("am_test");
    CHECK_OK(fh_am_register(H_RT_REQ + 1, rt_req1, "rt_req_medium"));
    CHECK_OK(fh_am_register(H_RT_REQ + 2, rt_req2, "rt_req_long"));
    CHECK_OK(fh_am_register(H_RT_REP + 0, rt_rep0, "rt_rep_short"));
    CHECK_OK(fh_am_register(H_RT_REP + 1, rt_rep1, "rt_rep_medium"));
    CHECK_OK(fh_am_register(H_RT_REP + 2, rt_rep2, "rt_rep_long"));
    CHECK_OK(fh_am_register(H_ST_REQ + 0, st_req0, "st_req_short"));
    CHECK_OK(fh_am_register(H_ST_REQ + 1, st_req1, "st_req_medium"));
    CHECK_OK(fh_am_register(H_ST_REP + 0, st_rep0, "st_rep_short"));
    CHECK_OK(fh_am_register(H_ST_REP + 1, st_rep1, "st_rep_medium"));
    CHECK_OK(fh_am_register(H_FLOOD, fl_req, "flood"));
    CHECK_OK(fh_am_register(H_FLOOD_R, fl_req_r, "flood_r"));
    CHECK_OK(fh_am_register(H_FLOOD_REP, fl_rep, "flood_rep"));
    CHECK_OK(fh_am_register(H_RESTRICT, rs_req, "restrict"));
    CHECK_OK(fh_am_register(H_RESTRICT_REP, rs_rep, "restrict_rep"));
    me = fh_rank();
    N = fh_nranks();
    tu_seed_init();
    long msgs = tu_opt(argc, argv, "--msgs", tu_scale(N <= 4 ? 2000 : 600));
    long nflood = tu_opt(argc, argv, "--flood", 10000);

    maxmed = fh_am_max_medium();
    maxlong = fh_am_max_long();
    CHECK(maxmed > 0 && maxlong > maxmed, "limits", "fh_am_max_medium %zu, "
          "fh_am_max_long %zu: expected 0 < medium < long", maxmed, maxlong);
    lmax = maxlong < 2 * MiB ? maxlong : 2 * MiB;
    lrepmax = fh_am_max_long_reply();
    CHECK(lrepmax > 0 && lrepmax <= lmax, "limits", "fh_am_max_long_reply %zu: expected "
          "0 < it <= %zu", lrepmax, lmax);
    LREQ_OFF = 0;
    LREP_OFF = (size_t)N * LSLOT;
    void *lb;
    CHECK_OK(fh_segment_create(2 * (size_t)N * LSLOT, &seg, &lb));
    bases = calloc((size_t)N, sizeof *bases);
    for (int r = 0; r < N; r++)
        CHECK_OK(fh_segment_query(seg, r, (void **)&bases[r], NULL));
    st_next = calloc((size_t)N, sizeof *st_next);
    fl_next = calloc((size_t)N, sizeof *fl_next);
    TU_SAY("am_test: %d ranks, max medium %zu B, max long %zu B (testing long "
           "up to %zu B)\n", N, maxmed, maxlong, lmax);
    CHECK_OK(fh_barrier());

    roundtrip_phase(18);
    stream_phase(msgs);
    if (N > 1)
        flood_phase(nflood);
    restrict_phase();

    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("PASS am_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
