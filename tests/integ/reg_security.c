/*
 * reg_security.c -- forged registration requests are refused, answered and
 * logged, and register nothing.
 *
 * Rank 0 is the attacker, rank 1 the target (other ranks only take part in
 * the barriers).  The attacker links runtime internals (internal.h) and
 * sends hand-made messages to the target's real handlers through the real
 * AM path -- exactly what a buggy or hostile peer could put on the wire --
 * and replaces its own reply handler by one that records the status, so
 * every request is checked to get an error reply (a missing reply within
 * 10 s is a FAIL: "hang").  Per FH_REG_STRATEGY:
 *
 *   firehose          FH_H_MOVE_REQ: span outside the segments, span that
 *                     wraps, span not bucket-aligned / crossing a frame,
 *                     put-in-move data outside the frame, garbage, a
 *                     truncated request, a release of a region not held,
 *                     and beyond F: one frame granted (F = R here), the
 *                     next refused with FH_ERR_LIMIT, then the grant
 *                     released by a refused request (releases in a refused
 *                     request still apply).  FH_H_COPY_PUT/GET (copies
 *                     under FH_SEGMENT=everything, firehose_copy.c):
 *                     missing arguments, length mismatch, too long, a
 *                     piece outside its chunk, a chunk longer than a
 *                     frame, wrapping; a well-formed one is refused here
 *                     (FH_SEGMENT=segments).  And a forged copy reply for
 *                     no copy in flight is dropped.
 *   rendezvous(-cache) FH_H_RDV_REQ: outside the segments, straddling the
 *                     end, wrapping, larger than FH_REGION_MAX, unknown op,
 *                     truncated, (cache) crossing a frame; plus a
 *                     deregistration of a handle that does not exist (no
 *                     reply by design: checked through the counters).
 *   bounce            FH_H_BOUNCE_PUT/GET: outside, wrapping, length
 *                     mismatch, too long, missing arguments.
 *
 * The target checks with fh_stats_peer that registrations and pinned bytes
 * did not change (firehose: exactly the one granted frame) and that
 * reg_refused grew by the number of forged requests; it prints
 * "EXPECT_REFUSAL_LOGS n" and reg_security.sh checks its log has at least n
 * "refused" lines.  Finally the attacker restores its reply handler and a
 * normal put/get round trip must still work.
 */
#include "testutil.h"

#include <sched.h>

#include "firehose/cache/fhc_wire.h"
#include "firehose/internal.h"
#include "firehose/reg/firehose_internal.h"
#include "firehose/reg/strat_common.h"

static int me, N, kind;
static uint8_t *tbase;       /* target's segment piece */
static size_t tsize;

/* ---- reply capture (attacker) */
static volatile int got;
static volatile int64_t got_status;
static fhc_rep_t got_rep;

static void cap_move_rep(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                         unsigned nargs)
{
    (void)tok; (void)args; (void)nargs;
    char why[96];
    if (fhc_rep_decode(buf, nbytes, &got_rep, why, sizeof why) != 0)
        got_status = 1;    /* not an error status: the check below fails */
    else
        got_status = got_rep.status;
    got = 1;
}

static void cap_rdv_rep(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                        unsigned nargs)
{
    (void)tok; (void)args; (void)nargs;
    rdv_msg_t m;
    got_status = 1;
    if (nbytes == sizeof m) {
        memcpy(&m, buf, sizeof m);
        got_status = m.status;
    }
    got = 1;
}

static void cap_bounce_rep(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                           unsigned nargs)
{
    (void)tok; (void)buf;
    got_status = (nargs == 3 && nbytes == 0) ? (int64_t)args[1] : 1;
    got = 1;
}

static void cap_copy_rep(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                         unsigned nargs)
{
    (void)tok; (void)buf;
    got_status = (nargs == 3 && nbytes == 0) ? (int64_t)args[1] : 1;
    got = 1;
}

/* Waits for the captured reply; returns its status. */
static int64_t await(const char *what)
{
    double end = fh_now() + 10.0;
    while (!got) {
        fh_poll();
        if (fh_now() > end)
            tu_fail("%s: no reply within 10 s (the requester would hang)", what);
        sched_yield();
    }
    got = 0;
    return got_status;
}

static int nforged;

static void expect(const char *what, int64_t st, int want)
{
    nforged++;
    if (want != 0)
        CHECK(st == want, what, "expected %s, saw %lld", tu_errname(want), (long long)st);
    else
        CHECK(st < 0, what, "expected an error status, saw %lld", (long long)st);
    TU_LOG("error reply as expected: %s (%s)\n", what, tu_errname((int)st));
}

/* ---- firehose */

static void send_move(const void *msg, size_t len)
{
    int rc = fh_am_send_request_on(fh_tls(), &fh_rt->paths[0], 1, FH_H_MOVE_REQ, msg, len);
    CHECK(rc == FH_OK, "send a forged move", "FH_OK, saw %s", tu_errname(rc));
}

static void move(const char *what, uint64_t lo, uint64_t hi, unsigned nrel,
                 const uint64_t *rel, uint64_t ddst, uint32_t dlen, int want)
{
    static uint64_t token = 1000;
    static uint8_t data[64];
    fhc_req_t q = {.token = token++, .lo = lo, .hi = hi, .nrel = nrel, .data_dst = ddst,
                   .data_len = dlen, .data = dlen ? data : NULL};
    for (unsigned i = 0; i < nrel; i++)
        q.rel[i] = rel[i];
    uint8_t buf[1024];
    size_t n = fhc_req_encode(&q, buf, sizeof buf);
    CHECK(n > 0, "encode a move", "bytes, saw 0 for %s", what);
    send_move(buf, n);
    int64_t st = await(what);
    if (want == 1) {   /* the one legitimate grant */
        CHECK(st == 0, what, "granted, saw %s", tu_errname((int)st));
        return;
    }
    expect(what, st, want);
}

/* Returns the number of refusals the F test adds. */
static void attack_firehose(uint64_t *granted_bases, unsigned *ngranted)
{
    size_t B = fh_reg_bucket(&fh_rt->core);
    uintptr_t b = (uintptr_t)tbase;
    uint64_t end = (uint64_t)(b + ((tsize + B - 1) & ~(B - 1)));
    move("move: span outside the segments", end + 16 * B, end + 17 * B, 0, NULL, 0, 0,
         FH_ERR_OUT_OF_SEGMENT);
    move("move: span at address 0", 0, B, 0, NULL, 0, 0, FH_ERR_OUT_OF_SEGMENT);
    move("move: span that wraps", UINT64_MAX - B + 1, B, 0, NULL, 0, 0, 0);
    move("move: span not bucket-aligned", b + 1, b + B, 0, NULL, 0, 0, FH_ERR_INVALID);
    move("move: span of two frames", b, b + 32 * B, 0, NULL, 0, 0, FH_ERR_INVALID);
    move("move: put-in-move data outside the frame", b, b + B, 0, NULL, end + B, 8,
         FH_ERR_INVALID);
    uint64_t bogus = b + 3 * B;
    move("move: releases a region it does not hold", b, b + B, 1, &bogus, 0, 0,
         FH_ERR_INVALID);
    uint8_t garbage[48];
    memset(garbage, 0x5A, sizeof garbage);
    send_move(garbage, sizeof garbage);
    expect("move: garbage bytes", await("move: garbage bytes"), FH_ERR_INVALID);
    fhc_req_t q = {.token = 7, .lo = b, .hi = b + B};
    uint8_t buf[256];
    size_t n = fhc_req_encode(&q, buf, sizeof buf);
    send_move(buf, n - 3);
    expect("move: truncated request", await("move: truncated request"), FH_ERR_INVALID);

    /* Beyond F: this job runs with F == R (reg_security.sh), so one whole
     * frame fills the budget and the next one is refused. */
    size_t M = fh_rt->cfg.firehose_m, F = M / (size_t)(N - 1) / B * B;
    size_t R = B;
    while (2 * R <= F && 2 * R <= fh_rt->cfg.region_max && 2 * R <= 16 * B)
        R *= 2;
    CHECK(M != 0 && R == F, "test setup", "FH_FIREHOSE_M with F == R, saw F=%zu R=%zu", F,
          R);
    uintptr_t f1 = (b + R - 1) / R * R;
    CHECK(f1 + 2 * R <= b + tsize, "test setup", "segment of 2 frames after %p", (void *)f1);
    move("move: one frame (legitimate, fills F)", f1, f1 + R, 0, NULL, 0, 0, 1);
    *ngranted = 0;
    for (unsigned i = 0; i < got_rep.nreg; i++)
        if (got_rep.reg[i].granted)
            granted_bases[(*ngranted)++] = got_rep.reg[i].base;
    move("move: beyond F", f1 + R, f1 + 2 * R, 0, NULL, 0, 0, FH_ERR_LIMIT);
    move("move: release the grant, span outside", end + 16 * B, end + 17 * B, *ngranted,
         granted_bases, 0, 0, FH_ERR_OUT_OF_SEGMENT);
}

static void copy(const char *what, bool put, uint64_t addr, uint64_t len, size_t n,
                 uint64_t caddr, uint64_t clen, unsigned nargs, int want)
{
    static uint8_t payload[256];
    uint64_t args[6] = {77, addr, addr - caddr, len, caddr, clen};
    int rc = fh_am_send_request(fh_tls(), 1, put ? FH_AM_REQ_MEDIUM : FH_AM_REQ_SHORT,
                                put ? FH_H_COPY_PUT : FH_H_COPY_GET, put ? payload : NULL,
                                n, 0, args, nargs);
    CHECK(rc == FH_OK, "send a forged copy request", "FH_OK, saw %s", tu_errname(rc));
    expect(what, await(what), want);
}

static void attack_copy(void)
{
    uintptr_t b = (uintptr_t)tbase;
    fh_am_handler_t saved = fh_handlers[FH_H_COPY_REP].fn;
    const char *saved_name = fh_handlers[FH_H_COPY_REP].name;
    fh_am_register_internal(FH_H_COPY_REP, cap_copy_rep, "reg_security capture");
    size_t R = fh_rt->cfg.region_max;
    copy("copy: put without arguments", true, b, 64, 64, b, 64, 4, FH_ERR_INVALID);
    copy("copy: put length mismatch", true, b, 200, 64, b, 200, 6, FH_ERR_INVALID);
    copy("copy: get longer than a medium reply", false, b, fh_am_max_medium() + 1, 0, b,
         fh_am_max_medium() + 1, 6, FH_ERR_INVALID);
    copy("copy: piece outside its chunk", true, b + 4096, 64, 64, b, 64, 6, FH_ERR_INVALID);
    copy("copy: chunk longer than a frame", false, b, 64, 0, b, 2 * R, 6, FH_ERR_INVALID);
    copy("copy: put wraps", true, UINT64_MAX - 10, 64, 64, UINT64_MAX - 10, 64, 6,
         FH_ERR_OVERFLOW);
    copy("copy: well-formed, FH_SEGMENT=segments at the target", true, b, 64, 64, b, 64, 6,
         FH_ERR_CONFIG);
    fh_am_register_internal(FH_H_COPY_REP, saved, saved_name);
    /* A reply for no copy in flight: dropped (logged), nothing else. */
    uint64_t rep[3] = {12345, 0, 0};
    CHECK_RC(fh_am_send_request(fh_tls(), 1, FH_AM_REQ_SHORT, FH_H_COPY_REP, NULL, 0, 0,
                                rep, 3), FH_OK);
}

/* ---- rendezvous */

static void rdv(const char *what, uint32_t op, uint64_t addr, uint64_t len, size_t trunc,
                int want)
{
    static uint64_t token = 5000;
    rdv_msg_t m = {.op = op, .token = token++, .addr = addr, .len = len};
    int rc = fh_am_send_request_on(fh_tls(), &fh_rt->paths[0], 1, FH_H_RDV_REQ, &m,
                                   sizeof m - trunc);
    CHECK(rc == FH_OK, "send a forged rendezvous request", "FH_OK, saw %s", tu_errname(rc));
    expect(what, await(what), want);
}

static void attack_rdv(void)
{
    uintptr_t b = (uintptr_t)tbase;
    size_t R = fh_rt->cfg.region_max;
    /* No reply by design; the next request (same path, in order) proves it
     * was handled, and the counters show it was refused. */
    rdv_msg_t un = {.op = RDV_UNREGISTER, .handle = 424242};
    CHECK(fh_am_send_request_on(fh_tls(), &fh_rt->paths[0], 1, FH_H_RDV_REQ, &un,
                                sizeof un) == FH_OK, "send a forged deregistration", "FH_OK");
    nforged++;
    rdv("rendezvous: outside the segments", RDV_REGISTER, b + tsize + 4096, 64, 0,
        FH_ERR_OUT_OF_SEGMENT);
    rdv("rendezvous: straddles the segment end", RDV_REGISTER, b + tsize - 10, 100, 0,
        FH_ERR_OUT_OF_SEGMENT);
    rdv("rendezvous: address 0", RDV_REGISTER, 0, 64, 0, FH_ERR_OUT_OF_SEGMENT);
    rdv("rendezvous: range wraps", RDV_REGISTER, UINT64_MAX - 10, 100, 0, FH_ERR_OVERFLOW);
    rdv("rendezvous: empty range", RDV_REGISTER, b, 0, 0, FH_ERR_OVERFLOW);
    rdv("rendezvous: larger than FH_REGION_MAX", RDV_REGISTER, b, R + 1, 0, FH_ERR_LIMIT);
    rdv("rendezvous: unknown operation", 77, b, 64, 0, FH_ERR_INVALID);
    rdv("rendezvous: truncated request", RDV_REGISTER, b, 64, 5, FH_ERR_INVALID);
    if (kind == FH_REG_RENDEZVOUS_CACHE) {
        uintptr_t f = (b / R + 1) * R;   /* a frame boundary inside the piece */
        rdv("rendezvous-cache: crosses a frame", RDV_REGISTER, f - 8, 16, 0, FH_ERR_INVALID);
    }
}

/* ---- bounce */

static void bounce(const char *what, unsigned h, uint64_t addr, uint64_t len, size_t n,
                   unsigned nargs, int want)
{
    static uint8_t payload[256];
    uint64_t args[4] = {9000, addr, 0, len};
    int rc = fh_am_send_request(fh_tls(), 1, h == FH_H_BOUNCE_PUT ? FH_AM_REQ_MEDIUM
                                                                  : FH_AM_REQ_SHORT,
                                h, h == FH_H_BOUNCE_PUT ? payload : NULL, n, 0, args, nargs);
    CHECK(rc == FH_OK, "send a forged bounce request", "FH_OK, saw %s", tu_errname(rc));
    expect(what, await(what), want);
}

static void attack_bounce(void)
{
    uintptr_t b = (uintptr_t)tbase;
    bounce("bounce: put outside the segments", FH_H_BOUNCE_PUT, b + tsize + 4096, 64, 64, 4,
           FH_ERR_OUT_OF_SEGMENT);
    bounce("bounce: put straddles the end", FH_H_BOUNCE_PUT, b + tsize - 10, 64, 64, 4,
           FH_ERR_OUT_OF_SEGMENT);
    bounce("bounce: put wraps", FH_H_BOUNCE_PUT, UINT64_MAX - 10, 64, 64, 4,
           FH_ERR_OVERFLOW);
    bounce("bounce: put length mismatch", FH_H_BOUNCE_PUT, b, 200, 64, 4, FH_ERR_INVALID);
    bounce("bounce: put without arguments", FH_H_BOUNCE_PUT, b, 64, 64, 2, FH_ERR_INVALID);
    bounce("bounce: get outside the segments", FH_H_BOUNCE_GET, b + tsize + 4096, 64, 0, 4,
           FH_ERR_OUT_OF_SEGMENT);
    bounce("bounce: get wraps", FH_H_BOUNCE_GET, UINT64_MAX - 10, 64, 0, 4, FH_ERR_OVERFLOW);
    bounce("bounce: get longer than a medium reply", FH_H_BOUNCE_GET, b,
           fh_am_max_medium() + 1, 0, 4, FH_ERR_INVALID);
}

/* ---- target-side accounting */

static void snap(fh_peer_stats_t *peer0, fh_peer_stats_t *total)
{
    CHECK_RC(fh_stats_peer(0, peer0), FH_OK);
    CHECK_RC(fh_stats_peer(me, total), FH_OK);
}

int main(int argc, char **argv)
{
    CHECK_RC(fh_init(&argc, &argv), FH_OK);
    tu_init_rank("reg_security");
    me = fh_rank();
    N = fh_nranks();
    kind = fh_rt->cfg.reg_strategy;
    if (N < 2 || kind == FH_REG_PIN_EVERYTHING) {
        TU_SAY("SKIP: needs 2 ranks and FH_REG_STRATEGY other than pin-everything\n");
        TU_SAY("PASS reg_security\n");
        CHECK_RC(fh_finalize(), FH_OK);
        return 0;
    }
    fh_seg_t seg;
    void *mine;
    CHECK_RC(fh_segment_create((size_t)4 << 20, &seg, &mine), FH_OK);
    CHECK_RC(fh_segment_query(seg, 1, (void **)&tbase, &tsize), FH_OK);
    memset(mine, 0x11, (size_t)4 << 20);

    fh_peer_stats_t p0 = FH_PEER_STATS_INIT, t0 = FH_PEER_STATS_INIT, p1 = FH_PEER_STATS_INIT, t1 = FH_PEER_STATS_INIT;
    if (me == 1)
        snap(&p0, &t0);
    CHECK_RC(fh_barrier(), FH_OK);

    unsigned hidx = kind == FH_REG_FIREHOSE ? FH_H_MOVE_REP
                    : kind == FH_REG_BOUNCE ? FH_H_BOUNCE_REP : FH_H_RDV_REP;
    fh_am_handler_t saved = fh_handlers[hidx].fn;
    const char *saved_name = fh_handlers[hidx].name;
    uint64_t granted[FHC_MAX_PIECES];
    unsigned ngranted = 0;
    if (me == 0) {
        fh_am_register_internal(hidx, kind == FH_REG_FIREHOSE ? cap_move_rep
                                      : kind == FH_REG_BOUNCE ? cap_bounce_rep : cap_rdv_rep,
                                "reg_security capture");
        if (kind == FH_REG_FIREHOSE) {
            attack_firehose(granted, &ngranted);
            attack_copy();
        }
        else if (kind == FH_REG_BOUNCE)
            attack_bounce();
        else
            attack_rdv();
        fh_am_register_internal(hidx, saved, saved_name);
    }
    /* The attacker's count of forged requests and of granted regions. */
    uint64_t mine_counts[2] = {(uint64_t)nforged, ngranted}, *all = calloc((size_t)N, 16);
    CHECK(all != NULL, "calloc", "memory");
    CHECK_RC(fh_allgather(mine_counts, all, 16), FH_OK);
    uint64_t forged = all[0], ngr = all[1];
    if (me == 1) {
        snap(&p1, &t1);
        CHECK(p1.reg_refused - p0.reg_refused == forged, "refusals counted",
              "%" PRIu64 " refused requests of rank 0, saw %" PRIu64, forged,
              p1.reg_refused - p0.reg_refused);
        /* firehose: exactly the granted frame's regions were registered; it
         * was released again, so rank 0 holds nothing here. */
        CHECK(p1.reg_registrations - p0.reg_registrations == ngr &&
              t1.reg_registrations - t0.reg_registrations == ngr, "nothing registered",
              "%" PRIu64 " registrations (the legitimate grant), saw %" PRIu64
              " for rank 0, %" PRIu64 " in total", ngr,
              p1.reg_registrations - p0.reg_registrations,
              t1.reg_registrations - t0.reg_registrations);
        CHECK(p1.bytes_pinned_remote == p0.bytes_pinned_remote &&
              t1.bytes_pinned_remote == t0.bytes_pinned_remote, "nothing pinned",
              "pinned_remote %" PRIu64 "/%" PRIu64 ", saw %" PRIu64 "/%" PRIu64,
              p0.bytes_pinned_remote, t0.bytes_pinned_remote, p1.bytes_pinned_remote,
              t1.bytes_pinned_remote);
        uint8_t *m8 = mine;
        for (size_t i = 0; i < ((size_t)4 << 20); i++)
            CHECK(m8[i] == 0x11, "segment untouched", "0x11 at %zu, saw 0x%02x", i, m8[i]);
        TU_LOG("EXPECT_REFUSAL_LOGS %" PRIu64 "\n", forged);
    }
    free(all);
    CHECK_RC(fh_barrier(), FH_OK);

    /* Still in service: an honest round trip. */
    if (me == 0)
        tu_round_trip(1, tbase + 12345);
    CHECK_RC(fh_barrier(), FH_OK);
    CHECK_RC(fh_segment_destroy(seg), FH_OK);
    TU_SAY("PASS reg_security\n");
    CHECK_RC(fh_finalize(), FH_OK);
    return 0;
}
