/*
 * ibv_selftest.c -- standalone test of the verbs conduit (conduits/ibv/).
 *
 * Usage: ibv_selftest [1|2|all|dead|badkey|cqerr] [device-of-rank-0] [device-of-rank-1]
 *   (default: all; devices default to FH_IBV_DEVICE, else rank 0 takes the
 *   first device and, in the 2-rank modes, rank 1 the second one if there
 *   are two, so that traffic really crosses a link, e.g. rxe0 <-> rxe1)
 *   1      one rank, 3 paths, the rank talks to itself (loopback QPs,
 *          including path 0's QP connected to itself)
 *   2      two ranks (fork + socketpair bootstrap), RC QPs between processes
 *   all    1, then 2, then badkey
 *   dead   rank 1 exits after connect; rank 0's RMA to it must end with
 *          FH_ERR_PEER_DEAD / FH_ERR_TRANSPORT within seconds, not hang
 *   badkey (1 rank) a put with a wrong rkey must complete with
 *          FH_ERR_TRANSPORT (IBV_WC_REM_ACCESS_ERR) and a log line naming
 *          the rank; the broken connection then refuses posts; on the
 *          responder's side of it (path 0 -> path 2, whose QP went to ERR
 *          without a completion of its own), a get ends with an error and
 *          AMs are refused within 10 s
 *   cqerr  (1 rank) path 1's CQ is shrunk (ibv_resize_cq, white box) and
 *          then overrun by 16 signaled puts: the provider loses
 *          completions and raises IBV_EVENT_CQ_ERR (rxe does), which only
 *          the async event queue tells.  Every put must still complete
 *          (ok or FH_ERR_TRANSPORT) within 10 s, later posts on path 1 are
 *          refused and its poll returns FH_ERR_TRANSPORT; path 2 works.
 * Exit status 77 (automake SKIP) with "SKIP: no RDMA device" when
 * ibv_get_device_list finds nothing.  FH_SELFTEST_NREQ sets the requests
 * per sender thread of the am phase (default 1000; emulated rxe is slow),
 * FH_SELFTEST_MAXRMA (bytes) caps the puts and gets of the rma phase
 * (default 8 MiB).
 *
 * Phases
 *   tiny    (1 rank) AMs of 0..15 bytes path 1 -> path 0, in order, intact.
 *   self    (1 rank, last) path 0 -> its own path 0: AMs, put, get.
 *   am      paths 1 and 2 (one thread each) send requests of 16..P bytes to
 *           the peer's service path with a credit window; the service path
 *           (main thread) checks order/content and replies from inside
 *           on_am; the senders check the replies.
 *   flood   (1 rank) 20 rounds of rx_msgs AMs path 1 -> path 0 without
 *           polling path 0 until the window is used up; rounds alternate
 *           between P-byte messages (send slots, signaled) and 24-byte ones
 *           (inline, unsignaled with periodic signaling).
 *   rma     puts path 1 -> (peer, 0) of 1 B .. 8 MiB at random offsets,
 *           inline-sized puts from a stack buffer scribbled right after
 *           the post, FH_POST_MORE batches, gets back; every put is checked
 *           at the target right after the initiator's completion (1 rank: in
 *           the upcall; 2 ranks: the target stops polling when told through
 *           an out-of-band socket and compares its memory against a shadow).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include <unistd.h>

#include "conduits/conduit.h"
#include "conduits/ibv/ibv_internal.h"   /* cqerr: the path's CQ */
#include "firehose/util/log.h"
#include "selftest_common.h"

/* ------------------------------------------------------------ conduit */

const fh_conduit_ops_t *const st_cd = &fh_conduit_ibv;
uint32_t st_nreq = 1000;  /* requests per sender path (am phase) */
/* Flood rounds alternate between P bytes (send slots) and 24 bytes
 * (inline). */
const size_t st_flood_small = 24;

void st_open(struct test *t)
{
    fh_conduit_config_t cfg = {
        .rank = t->rank, .nranks = t->nranks, .npaths = NPATHS,
        .am_max_packet = 65536,   /* settings NULL: FH_IBV_* from the environment */
        .verbose = getenv("FH_VERBOSE") ? atoi(getenv("FH_VERBOSE")) : 0,
    };
    fh_log_set_rank(t->rank);
    fh_log_set_verbose(cfg.verbose);
    if (t->dev)
        setenv("FH_IBV_DEVICE", t->dev, 1);
    int rc = CD.open(&cfg, &st_upcalls, &t->c, &t->lim);
    CHECK(rc == FH_OK, "open(%s): %d", t->dev ? t->dev : "default", rc);
    printf("[rank %d] conduit: %s, max_msg %zu, max_inject %zu, "
           "am_max_packet %zu, needs_local_mr %d, max_mr_count %zu, "
           "max_mr_bytes %zu\n", t->rank, t->lim.description,
           t->lim.max_msg, t->lim.max_inject, t->lim.am_max_packet,
           t->lim.needs_local_mr, t->lim.max_mr_count, t->lim.max_mr_bytes);
}

/* ------------------------------------------------------------ phases */

/* (1 rank) path 0 -> (0, 0): path 0's QP connected to itself.  Tiny AMs
 * (delivered through the tiny check) and a put + get. */
static void phase_self(struct test *t)
{
    struct tpath *p0 = &t->paths[0];
    char m[16];
    t->tiny_expect = 0;
    for (uint32_t len = 0; len < 16; len++) {
        for (size_t i = 0; i < len; i++)
            m[i] = (char)pat(len, 1, i);
        int rc;
        while ((rc = CD.am_send(p0->cp, 0, 0, m, len, NULL, 0)) ==
               FH_ERR_AGAIN)
            do_poll(p0);
        CHECK(rc == FH_OK, "self send: %d", rc);
    }
    double t0 = now();
    while (t->tiny_expect < 16) {
        do_poll(p0);
        CHECK(now() - t0 < 30, "self: only %u of 16 arrived", t->tiny_expect);
    }
    gen(t->S, 100000, 4242);
    int rc;
    p0->rma_pending++;
    t->v_expect = t->S;
    t->v_off = 0;
    t->v_len = 100000;
    while ((rc = CD.put(p0->cp, 0, 0, t->S, 100000, t->mrS, t->tbase[0],
                        &t->rk[0], p0, 0)) == FH_ERR_AGAIN)
        do_poll(p0);
    CHECK(rc == FH_OK, "self put: %d", rc);
    while (p0->rma_pending)
        do_poll(p0);
    CHECK(t->v_expect == NULL, "self put not verified");
    p0->rma_pending++;
    while ((rc = CD.get(p0->cp, 0, 0, t->G, 100000, t->mrG, t->tbase[0],
                        &t->rk[0], p0, 0)) == FH_ERR_AGAIN)
        do_poll(p0);
    CHECK(rc == FH_OK, "self get: %d", rc);
    while (p0->rma_pending)
        do_poll(p0);
    CHECK(memcmp(t->G, t->S, 100000) == 0, "self get: wrong data");
    memset(t->T, 0xEE, 100000);
    printf("PASS self: path 0 -> path 0 of the same rank (QP connected to "
           "itself): 16 AMs in order, put + get of 100000 B\n");
}

/* ------------------------------------------------------------ drivers */

static int run_one(const char *dev)
{
    struct test *t = st_run_one(NULL, dev);
    phase_self(t);
    printf("PASS 1-rank (%s): upcall-verified puts %ld\n",
           t->lim.description, t->verified_in_upcall);
    st_finish(t);
    return 0;
}

static int run_two(const char *dev0, const char *dev1)
{
    st_run_two(NULL, dev0, dev1);
    printf("PASS 2-rank (%s <-> %s)\n", dev0 ? dev0 : "default",
           dev1 ? dev1 : "default");
    return 0;
}

/* Mode "badkey" (1 rank): a put with a corrupted rkey must complete with an
 * error (REM_ACCESS_ERR -> FH_ERR_TRANSPORT), and later posts on the broken
 * connection are refused at once.  Uses path 2 only. */
static int run_badkey(const char *dev)
{
    struct test *t = st_new_one(NULL, dev);
    st_setup(t);
    struct tpath *p2 = &t->paths[2];
    fh_rkey_t bad = t->rk[0];
    bad.key ^= 0x5a5a00;
    t->expect_err = 1;
    p2->rma_pending++;
    int rc;
    while ((rc = CD.put(p2->cp, 0, 0, t->S, 4096, t->mrS, t->tbase[0], &bad,
                        p2, 0)) == FH_ERR_AGAIN)
        pump(p2);             /* the first put makes the connection */
    CHECK(rc == FH_OK, "bad-key put not accepted: %d", rc);
    double t0 = now();
    while (p2->rma_pending > 0) {
        do_poll(p2);
        do_poll(&t->paths[0]);
        CHECK(now() - t0 < 30, "bad-key put never completed");
    }
    rc = CD.put(p2->cp, 0, 0, t->S, 4096, t->mrS, t->tbase[0], &t->rk[0], p2,
                0);
    CHECK(rc == FH_ERR_TRANSPORT || rc == FH_ERR_PEER_DEAD,
          "post on a broken connection: %d", rc);
    const int refused = rc;
    /* the other paths are unaffected */
    t->expect_err = 0;
    struct tpath *p1 = &t->paths[1];
    p1->rma_pending++;
    while ((rc = CD.put(p1->cp, 0, 0, t->S, 4096, t->mrS, t->tbase[0],
                        &t->rk[0], p1, 0)) == FH_ERR_AGAIN)
        pump(p1);
    CHECK(rc == FH_OK, "put on a healthy path: %d", rc);
    wait_rma(t, p1);
    printf("PASS badkey: put with a wrong rkey completed with %s after %.2f "
           "s; the broken connection refuses posts (%s); other paths work\n",
           fh_err_name(t->got_err), now() - t0, fh_err_name(refused));

    /* The responder's side of that connection: path 0's QP towards (0, 2)
     * took the bad access and went to ERR with no completion of its own
     * (rxe raises no async event for it either, but flushes what is posted
     * on the QP afterwards).  A get posted on it must end with an error,
     * and AMs on it must be refused, within seconds (not accepted and
     * lost). */
    struct tpath *p0 = &t->paths[0];
    t->expect_err = 1;
    t->got_err = FH_OK;
    t0 = now();
    p0->rma_pending++;
    while ((rc = CD.get(p0->cp, 0, 2, t->G, 4096, t->mrG, t->tbase[0],
                        &t->rk[0], p0, 0)) == FH_ERR_AGAIN)
        do_poll(p0);
    const int get_rc = rc;
    if (rc != FH_OK)
        p0->rma_pending--;      /* refused at post: fine, it is an error */
    CHECK(rc == FH_OK || rc == FH_ERR_TRANSPORT || rc == FH_ERR_PEER_DEAD,
          "get on the responder's QP: %d", rc);
    while (p0->rma_pending > 0) {
        do_poll(p0);
        CHECK(now() - t0 < 10, "a get on the responder side of the bad-key "
              "put's connection (path 0 -> path 2) never completed");
    }
    unsigned accepted = 0;
    for (;;) {
        rc = CD.am_send(p0->cp, 0, 2, "x", 1, NULL, 0);
        if (rc != FH_OK && rc != FH_ERR_AGAIN)
            break;
        accepted += rc == FH_OK;
        do_poll(p0);
        CHECK(now() - t0 < 10, "path 0 -> path 2: %u AMs accepted on a QP "
              "in error for 10 s (the async event went unnoticed)", accepted);
    }
    CHECK(rc == FH_ERR_TRANSPORT || rc == FH_ERR_PEER_DEAD,
          "AM on the responder's broken QP: %d", rc);
    printf("PASS badkey-responder: the responder's QP error was noticed "
           "after %.2f s: get %s, AMs refused with %s after %u accepted\n",
           now() - t0, get_rc == FH_OK ? "completed with an error" : "refused",
           fh_err_name(rc), accepted);
    st_finish(t);
    return 0;
}

/* Mode "cqerr" (1 rank): see the header comment. */
static int run_cqerr(const char *dev)
{
    struct test *t = st_new_one(NULL, dev);
    st_setup(t);
    struct tpath *p1 = &t->paths[1];
    /* Connect path 1 first (one put): the exchange needs room in its CQ. */
    int rc0;
    p1->rma_pending++;
    while ((rc0 = CD.put(p1->cp, 0, 0, t->S, 8, t->mrS, t->tbase[0],
                         &t->rk[0], p1, 0)) == FH_ERR_AGAIN)
        pump(p1);
    CHECK(rc0 == FH_OK, "cqerr: first put: %d", rc0);
    wait_rma(t, p1);
    int e = ibv_resize_cq(p1->cp->cq, 2);
    if (e) {
        printf("SKIP cqerr: ibv_resize_cq: %s\n", strerror(e));
        st_finish(t);
        return 0;
    }
    t->expect_err = 2;
    t->got_err = 0;
    enum { N = 16 };
    for (int i = 0; i < N; i++) {
        p1->rma_pending++;
        int rc = CD.put(p1->cp, 0, 0, t->S + 64 * i, 8, t->mrS,
                        t->tbase[0] + 64 * (uint64_t)i, &t->rk[0], p1,
                        i + 1 < N ? FH_POST_MORE : 0);
        CHECK(rc == FH_OK, "cqerr put %d: %d", i, rc);
    }
    usleep(500000);     /* let the provider overrun the CQ before we poll */
    double t0 = now();
    int prc = 0;
    while (p1->rma_pending > 0) {
        prc = CD.poll(p1->cp, 64);
        CHECK(prc >= 0 || p1->rma_pending == 0, "poll path 1 returned %s "
              "with %d puts outstanding", fh_err_name(prc), p1->rma_pending);
        do_poll(&t->paths[0]);
        CHECK(now() - t0 < 10, "cqerr: %d of %d puts never completed "
              "(completions lost to the CQ overrun)", p1->rma_pending, N);
    }
    const int failed = t->got_err;
    CHECK(failed > 0, "cqerr: all %d puts completed fine: no CQ overrun?", N);
    for (int i = 0; i < 3 && prc >= 0; i++)
        prc = CD.poll(p1->cp, 64);
    CHECK(prc == FH_ERR_TRANSPORT, "poll of the broken path: %s",
          fh_err_name(prc));
    int rc = CD.put(p1->cp, 0, 0, t->S, 8, t->mrS, t->tbase[0], &t->rk[0],
                    p1, 0);
    CHECK(rc == FH_ERR_TRANSPORT, "put on the broken path: %s",
          fh_err_name(rc));
    t->expect_err = 0;
    struct tpath *p2 = &t->paths[2];
    p2->rma_pending++;
    while ((rc = CD.put(p2->cp, 0, 0, t->S, 4096, t->mrS, t->tbase[0],
                        &t->rk[0], p2, 0)) == FH_ERR_AGAIN)
        pump(p2);
    CHECK(rc == FH_OK, "put on a healthy path: %d", rc);
    wait_rma(t, p2);
    printf("PASS cqerr: CQ overrun on path 1: %d of %d puts completed with "
           "FH_ERR_TRANSPORT after %.2f s, later posts and polls there "
           "fail, path 2 works\n", failed, N, now() - t0);
    st_finish(t);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    const char *dev0 = argc > 2 ? argv[2] : getenv("FH_IBV_DEVICE");
    const char *dev1 = argc > 3 ? argv[3] : dev0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FH_SELFTEST_NREQ"))
        st_nreq = (uint32_t)atoi(getenv("FH_SELFTEST_NREQ"));
    if (getenv("FH_SELFTEST_MAXRMA")) {
        long m = atol(getenv("FH_SELFTEST_MAXRMA"));
        if (m > 0 && (size_t)m < MAXRMA)
            st_maxrma = (size_t)m;
    }
    int ndev = 0;
    struct ibv_device **list = ibv_get_device_list(&ndev);
    static char second[64];
    if (list && ndev >= 2 && !dev0 && argc <= 3) {
        snprintf(second, sizeof second, "%s", ibv_get_device_name(list[1]));
        dev1 = second;
    }
    if (list)
        ibv_free_device_list(list);
    if (ndev == 0) {
        printf("SKIP: no RDMA device\n");
        return 77;
    }
    if (!strcmp(mode, "1") || !strcmp(mode, "all"))
        run_one(dev0);
    if (!strcmp(mode, "2") || !strcmp(mode, "all"))
        run_two(dev0, dev1);
    if (!strcmp(mode, "badkey") || !strcmp(mode, "all"))
        run_badkey(dev0);
    if (!strcmp(mode, "cqerr"))
        run_cqerr(dev0);
    if (!strcmp(mode, "dead"))
        st_run_dead(NULL, dev0, dev1);
    printf("ALL PASS (ibv, mode %s)\n", mode);
    return 0;
}
