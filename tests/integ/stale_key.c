/*
 * stale_key.c -- a remote key dies with its memory: once a segment is
 * destroyed, no key a peer obtained for it reaches the target's memory any
 * more -- not the old pages, not memory mapped later at the same address --
 * even if the peer never gave the key back.
 *
 * Rank 0 is the attacker, rank 1 the target (other ranks only take part in
 * the collectives).  The attacker links runtime internals (internal.h):
 *
 *   1. It obtains a key for LEN bytes of rank 1's segment piece:
 *        rendezvous(-cache)  it sends its own RDV_REGISTER request to rank
 *                            1's real handler (fh_am_send_request_on on the
 *                            service path, as the strategy does) and
 *                            captures the reply (key, registered range,
 *                            handle) with its own reply handler; it never
 *                            sends RDV_UNREGISTER (a hostile or buggy peer).
 *                            Plain rendezvous: it also takes revoked_cap + 3
 *                            more small registrations, all kept;
 *        pin-everything      it reads rank 1's piece key from its segment
 *                            table (fh_seg_find).
 *      Positive control: a raw get with the key returns the target's bytes
 *      and a raw put with it lands (rank 1 checks), so the key worked.
 *   2. Both ranks call fh_segment_destroy.  Rank 1 maps new memory at the
 *      old address (MAP_FIXED_NOREPLACE; if it cannot get that address, the
 *      old pages are simply gone and the checks below still apply) and
 *      fills it with a marker.
 *   3. The attacker issues a raw put and a raw get with the old key to the
 *      old address (rt->cops->put/get through fh_post, nothing of the
 *      registration strategy involved) and polls each to completion (no
 *      completion within 10 s counts as a hang).  Each must complete with
 *      an error status, and the get must bring back neither the old nor the
 *      new bytes.  Rank 1 checks its new memory is unchanged.
 *   4. Rank 1's statistics row for rank 0: registrations minus
 *      unregistrations and bytes_pinned_remote are back to their values
 *      before step 1 (rendezvous forms: exactly one registration was made).
 *   5. rendezvous only: the attacker now sends the late RDV_UNREGISTER of
 *      every revoked handle (what a slow honest peer may do); the target
 *      must take those it remembers (revoked_cap per peer) quietly -- not
 *      count them again, not as refusals -- and refuse only the 3 beyond.
 *   6. The job is still healthy: a new segment, an honest put/get round
 *      trip.
 *
 * Side paths.  An RDMA with a key the target does not know is a protection
 * error, and the transport ends the connection it came on (libfabric tcp
 * closes it, the initiator sees FI_ECANCELED; verbs moves the QP to the
 * error state).  So the refused accesses (probe, stale put, stale get) each
 * go out on a path of their own -- the highest thread paths, to which no
 * thread of this single-threaded test is bound -- and the job's own traffic
 * (service path, our bound path) stays intact.  stale_key.sh sets
 * FH_MAX_THREADS so that enough paths exist.
 *
 * Provider probe (before step 1).  Rank 1 registers a scratch page with the
 * conduit, hands the key to rank 0 and deregisters it; rank 0 tries a raw
 * get with it.  If that succeeds, the provider does not check keys against
 * deregistration at all (libfabric 1.17 shm: a get is a direct
 * cross-process copy, process_vm_readv), so no runtime change can make a
 * stale key fail there: the program prints a SKIP line, skips the access
 * checks of step 3 (still checking the target-side revocation, steps 4-6)
 * and ends with "SKIP stale_key" instead of "PASS stale_key"; stale_key.sh
 * reports such a run as skipped, not passed.  (The probe does not try a put:
 * on 1.17 shm a put with a bad key never completes -- the target drops the
 * command without answering.)
 *
 * Strategies bounce (no keys) and firehose (segment memory stays mapped
 * until fh_finalize, so the address cannot be reused) are not covered:
 * SKIP.
 */
#include "testutil.h"

#include <assert.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "firehose/internal.h"
#include "conduits/ofi/ofi_config.h"
#include "firehose/reg/strat_common.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define SEG_SIZE ((size_t)1 << 20)
#define LEN      ((size_t)8192)
#define OLD_BYTE 0x11
#define NEW_BYTE 0x5A
#define CTL_BYTE 0x33

static int me, N, kind;

/* ---- reply capture (attacker, rendezvous) */
static volatile int got;
static rdv_msg_t got_msg;
static volatile int got_bad;

static void cap_rdv_rep(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                        unsigned nargs)
{
    (void)tok; (void)args; (void)nargs;
    if (nbytes == sizeof got_msg)
        memcpy(&got_msg, buf, sizeof got_msg);
    else
        got_bad = 1;
    __atomic_store_n(&got, 1, __ATOMIC_RELEASE);
}

static void await_reply(const char *what)
{
    double end = fh_now() + 10.0;
    while (!__atomic_load_n(&got, __ATOMIC_ACQUIRE)) {
        fh_poll();
        if (fh_now() > end)
            tu_fail("%s: no reply within 10 s", what);
        sched_yield();
    }
    got = 0;
    CHECK(!got_bad, what, "a well-formed reply, saw a malformed one");
}

static void send_rdv(const rdv_msg_t *m)
{
    int rc = fh_am_send_request_on(fh_tls(), &fh_rt->paths[0], 1, FH_H_RDV_REQ, m,
                                   sizeof *m);
    CHECK(rc == FH_OK, "send a rendezvous message", "FH_OK, saw %s", tu_errname(rc));
}

/* Sends RDV_REGISTER for [addr, +len) and returns the granted reply. */
static rdv_msg_t rdv_register(uint64_t addr, uint64_t len)
{
    static uint64_t token = 700;
    fh_am_handler_t saved = fh_handlers[FH_H_RDV_REP].fn;
    const char *saved_name = fh_handlers[FH_H_RDV_REP].name;
    fh_am_register_internal(FH_H_RDV_REP, cap_rdv_rep, "stale_key capture");
    rdv_msg_t q = {.op = RDV_REGISTER, .token = ++token, .addr = addr, .len = len};
    send_rdv(&q);
    await_reply("RDV_REGISTER");
    fh_am_register_internal(FH_H_RDV_REP, saved, saved_name);
    CHECK(got_msg.op == RDV_REPLY && got_msg.status == FH_OK && got_msg.token == token,
          "RDV_REGISTER granted", "an FH_OK reply, saw op %u status %s", got_msg.op,
          tu_errname(got_msg.status));
    CHECK(got_msg.addr <= addr && addr + len <= got_msg.addr + got_msg.len,
          "RDV_REGISTER covers the range", "[0x%llx, +%llu), saw [0x%llx, +%llu)",
          (unsigned long long)addr, (unsigned long long)len,
          (unsigned long long)got_msg.addr, (unsigned long long)got_msg.len);
    return got_msg;
}

/* ---- raw RMA with a given key (attacker) */

/* RMA with a key the target does not know is a protection error, and an
 * RDMA transport ends the connection it arrived on: libfabric tcp closes
 * it (the initiator sees FI_ECANCELED), verbs moves the QP to the error
 * state.  So every access that should be refused goes out on a path of its
 * own that nothing else uses afterwards ("side" paths: the highest thread
 * paths, which no thread of this single-threaded test is bound to), and the
 * job's own traffic (service path, our bound path) stays intact. */
enum { SIDE_PROBE, SIDE_PUT, SIDE_GET, NSIDE };
static fh_tls_t side[NSIDE];

#define RAW_HANG 1   /* raw_rma: no completion within 10 s */

/* One put or get of [local, +n) <-> rank 1's `remote` with key *rk, posted
 * straight on the conduit through side path t (rt->cops->put/get via
 * fh_post, nothing of the registration strategy involved), then
 * polled to completion.  Returns the post's error, the completion status,
 * or RAW_HANG (the counter is then leaked on purpose: the conduit may still
 * complete into it). */
static int raw_rma(fh_tls_t *t, bool is_put, void *local, uint64_t remote, size_t n,
                   const fh_rkey_t *rk)
{
    struct fh_mr *lmr;
    bool temp;
    int rc = fh_rma_local_mr("stale_key", is_put, local, n, &lmr, &temp);
    CHECK(rc == FH_OK, "local registration", "FH_OK, saw %s", tu_errname(rc));
    fh_ctr_t *ctr = malloc(sizeof *ctr);
    CHECK(ctr != NULL, "malloc", "memory");
    *ctr = (fh_ctr_t)FH_CTR_INIT;
    rc = fh_post(t, is_put, 1, local, lmr, remote, n, rk, ctr, false);
    double end = fh_now() + 10.0;
    for (;;) {
        pthread_mutex_lock(&t->path->lock);
        uint32_t pending = ctr->pending;
        int status = ctr->status;
        pthread_mutex_unlock(&t->path->lock);
        if (pending == 0) {
            rc = rc != FH_OK ? rc : status;
            break;
        }
        if (fh_now() > end) {
            TU_LOG("raw %s with key 0x%llx on path %d: no completion within 10 s\n",
                   is_put ? "put" : "get", (unsigned long long)rk->key, t->path->index);
            return RAW_HANG;
        }
        fh_progress(t);
        sched_yield();
    }
    free(ctr);
    if (temp)
        fh_rma_local_mr_release(lmr);
    return rc;
}

static size_t count_byte(const uint8_t *p, size_t n, uint8_t b)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += p[i] == b;
    return k;
}

/* Where in rank 1's piece the attacker asks for a key: LEN bytes that stay
 * inside one rendezvous-cache frame. */
static uintptr_t pick_range(uintptr_t base)
{
    uintptr_t a = base + 2 * LEN;
    size_t R = fh_rt->cfg.region_max;
    if (a / R != (a + LEN - 1) / R)
        a = (a + R - 1) / R * R;
    return a;
}

/* ---- the provider probe: does a conduit-level deregistration stop RMA? */

struct probe_wire { uint64_t addr, key, kbase; };

static bool provider_enforces(void)
{
    fh_rt_t *rt = fh_rt;
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t *page = NULL;
    struct probe_wire w = {0};
    if (me == 1) {
        page = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
        CHECK(page != MAP_FAILED, "probe mmap", "a page");
        memset(page, 0x77, (size_t)pg);
        struct fh_mr *mr;
        fh_rkey_t rk;
        CHECK_RC(rt->cops->mr_reg(rt->conduit, page, (size_t)pg,
                                  FH_MR_LOCAL | FH_MR_REMOTE_READ | FH_MR_REMOTE_WRITE,
                                  &mr, &rk), FH_OK);
        CHECK_RC(rt->cops->mr_dereg(rt->conduit, mr), FH_OK);
        w = (struct probe_wire){(uintptr_t)page, rk.key, rk.base};
    }
    struct probe_wire *all = calloc((size_t)N, sizeof *all);
    CHECK(all != NULL, "calloc", "memory");
    CHECK_RC(fh_allgather(&w, all, sizeof w), FH_OK);
    int verdict = 1;   /* rank 0's: 1 enforced, 0 not */
    if (me == 0) {
        /* A get only: if reads bypass the keys there is nothing to test,
         * and a put with a bad key may not even complete (libfabric 1.17
         * shm: the target drops the command and never answers). */
        uint8_t buf[256];
        memset(buf, 0, sizeof buf);
        fh_rkey_t rk = {all[1].key, all[1].kbase};
        int grc = raw_rma(&side[SIDE_PROBE], false, buf, all[1].addr, sizeof buf, &rk);
        TU_LOG("probe: get with a key the conduit deregistered: %s%s\n",
               grc == RAW_HANG ? "no completion" : tu_errname(grc),
               grc == FH_OK && count_byte(buf, sizeof buf, 0x77) == sizeof buf
                   ? " (read the page)" : "");
        verdict = grc < 0;
    }
    int *v = calloc((size_t)N, sizeof *v);
    CHECK(v != NULL, "calloc", "memory");
    CHECK_RC(fh_allgather(&verdict, v, sizeof verdict), FH_OK);
    verdict = v[0];
    if (me == 1) {
        if (verdict)   /* refused: the page must be untouched */
            CHECK(count_byte(page, (size_t)pg, 0x77) == (size_t)pg, "probe page untouched",
                  "all 0x77, saw %zu other bytes",
                  (size_t)pg - count_byte(page, (size_t)pg, 0x77));
        munmap(page, (size_t)pg);
    }
    free(v);
    free(all);
    return verdict != 0;
}

/* ---- main */

struct attack_wire { int64_t same_addr; };
struct result_wire { int64_t put_rc, get_rc, get_old, get_new; };

int main(int argc, char **argv)
{
    CHECK_RC(fh_init(&argc, &argv), FH_OK);
    tu_init_rank("stale_key");
    me = fh_rank();
    N = fh_nranks();
    kind = fh_rt->cfg.reg_strategy;
    const ofi_settings_t *os = fh_conduit_settings_of(fh_rt, &fh_ofi_settings);
    const char *prov = os->provider ? os->provider : "?";
    if (N < 2 || (kind != FH_REG_RENDEZVOUS && kind != FH_REG_RENDEZVOUS_CACHE &&
                  kind != FH_REG_PIN_EVERYTHING)) {
        TU_SAY("[0] SKIP: needs 2 ranks and FH_REG_STRATEGY rendezvous, rendezvous-cache "
               "or pin-everything\n");
        TU_SAY("SKIP stale_key\n");
        CHECK_RC(fh_finalize(), FH_OK);
        return 0;
    }
    if (fh_rt->npaths < 2 + NSIDE) {
        TU_SAY("[0] SKIP: needs %d paths (FH_PATHS=independent, FH_MAX_THREADS>=%d), "
               "have %d\n", 2 + NSIDE, 1 + NSIDE, fh_rt->npaths);
        TU_SAY("SKIP stale_key\n");
        CHECK_RC(fh_finalize(), FH_OK);
        return 0;
    }
    for (int i = 0; i < NSIDE; i++) {
        side[i].path = &fh_rt->paths[fh_rt->npaths - 1 - i];
        assert(side[i].path->nbound == 0);   /* nobody else uses it */
    }
    bool enforced = provider_enforces();
    if (!enforced)
        TU_SAY("[0] SKIP stale-key access checks: provider %s (%s) does not refuse RMA "
               "with a key the conduit deregistered (probe above), so no runtime can "
               "refuse a stale key there; only the target-side revocation is checked\n",
               prov, fh_rt->limits.description);

    fh_seg_t seg;
    void *mine;
    CHECK_RC(fh_segment_create(SEG_SIZE, &seg, &mine), FH_OK);
    memset(mine, OLD_BYTE, SEG_SIZE);
    uint8_t *tbase;
    size_t tsize;
    CHECK_RC(fh_segment_query(seg, 1, (void **)&tbase, &tsize), FH_OK);
    uintptr_t a = pick_range((uintptr_t)tbase);
    CHECK(a + LEN <= (uintptr_t)tbase + tsize, "test setup", "a range inside the piece");

    fh_peer_stats_t s0 = FH_PEER_STATS_INIT, s1 = FH_PEER_STATS_INIT;
    if (me == 1)
        CHECK_RC(fh_stats_peer(0, &s0), FH_OK);
    CHECK_RC(fh_barrier(), FH_OK);

    /* 1. the attacker gets a key.  Plain rendezvous: and more registrations
     * it never gives back, beyond the number of revoked handles the target
     * remembers per peer (revoked_cap; the same configuration everywhere),
     * so that both kinds of revocation are exercised (step 5). */
    fh_rkey_t key = {0, 0};
    uint32_t nkeys = kind == FH_REG_RENDEZVOUS ? fh_rt->strat->revoked_cap + 3 : 1;
    uint64_t *handle = calloc(nkeys, sizeof *handle);
    CHECK(handle != NULL, "calloc", "memory");
    if (me == 0) {
        if (kind == FH_REG_PIN_EVERYTHING) {
            fh_seg_range_t r;
            CHECK_RC(fh_seg_find(fh_rt, 1, a, LEN, &r), FH_OK);
            key = r.rkey;
        } else {
            rdv_msg_t m = rdv_register(a, LEN);
            key = (fh_rkey_t){m.key0, m.key1};
            handle[0] = m.handle;
            for (uint32_t i = 1; i < nkeys; i++)
                handle[i] = rdv_register(a + (i % (LEN / 64)) * 64, 64).handle;
        }
        TU_LOG("key 0x%llx for [0x%llx, +%zu) of rank 1 (%u registration(s) held)\n",
               (unsigned long long)key.key, (unsigned long long)a, LEN, nkeys);
        /* positive control: the key works now */
        static uint8_t buf[LEN];
        memset(buf, 0, sizeof buf);
        CHECK_RC(raw_rma(&side[SIDE_GET], false, buf, a, LEN, &key), FH_OK);
        CHECK(count_byte(buf, LEN, OLD_BYTE) == LEN, "control get with the fresh key",
              "%zu bytes 0x%02x, saw %zu", LEN, OLD_BYTE, count_byte(buf, LEN, OLD_BYTE));
        memset(buf, CTL_BYTE, 64);
        CHECK_RC(raw_rma(&side[SIDE_PUT], true, buf, a, 64, &key), FH_OK);
    }
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 1) {
        const uint8_t *p = (const uint8_t *)a;
        CHECK(count_byte(p, 64, CTL_BYTE) == 64, "control put with the fresh key landed",
              "64 bytes 0x%02x, saw %zu", CTL_BYTE, count_byte(p, 64, CTL_BYTE));
    }

    /* 2. destroy; rank 1 maps new memory at the old address */
    CHECK_RC(fh_segment_destroy(seg), FH_OK);
    long pg = sysconf(_SC_PAGESIZE);
    size_t maplen = (tsize + (size_t)pg - 1) & ~((size_t)pg - 1);
    uint8_t *fresh = NULL;
    struct attack_wire aw = {0};
    if (me == 1) {
        fresh = mmap(tbase, maplen, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (fresh != MAP_FAILED && fresh != tbase) {   /* old kernel: only a hint */
            munmap(fresh, maplen);
            fresh = MAP_FAILED;
        }
        aw.same_addr = fresh != MAP_FAILED;
        if (fresh == MAP_FAILED) {
            TU_LOG("NOTE: could not map new memory at the old address %p; checking that "
                   "the old pages are unreachable instead\n", (void *)tbase);
            fresh = NULL;
        } else {
            memset(fresh, NEW_BYTE, maplen);
            TU_LOG("new memory mapped at the old address %p\n", (void *)fresh);
        }
        CHECK_RC(fh_stats_peer(0, &s1), FH_OK);
    }
    struct attack_wire *aws = calloc((size_t)N, sizeof *aws);
    CHECK(aws != NULL, "calloc", "memory");
    CHECK_RC(fh_allgather(&aw, aws, sizeof aw), FH_OK);

    /* 3. the attacker uses the old key */
    struct result_wire res = {FH_OK, FH_OK, 0, 0};
    if (me == 0 && enforced) {
        static uint8_t buf[LEN];
        memset(buf, 0xEE, sizeof buf);
        res.put_rc = raw_rma(&side[SIDE_PUT], true, buf, a, LEN, &key);
        memset(buf, 0, sizeof buf);
        res.get_rc = raw_rma(&side[SIDE_GET], false, buf, a, LEN, &key);
        res.get_old = (int64_t)count_byte(buf, LEN, OLD_BYTE);
        res.get_new = (int64_t)count_byte(buf, LEN, NEW_BYTE);
        TU_LOG("stale key after destroy (%s address): put %s, get %s\n",
               aws[1].same_addr ? "memory re-mapped at the" : "nothing mapped at the old",
               res.put_rc == RAW_HANG ? "no completion" : tu_errname((int)res.put_rc),
               res.get_rc == RAW_HANG ? "no completion" : tu_errname((int)res.get_rc));
    }
    struct result_wire *rs = calloc((size_t)N, sizeof *rs);
    CHECK(rs != NULL, "calloc", "memory");
    CHECK_RC(fh_allgather(&res, rs, sizeof res), FH_OK);
    /* (The job ends at the first failed CHECK: what each rank saw is
     * logged first.) */
    if (me == 1 && fresh != NULL) {
        size_t ok = count_byte(fresh, maplen, NEW_BYTE);
        TU_LOG("new memory at the old address: %zu of %zu bytes changed (%zu to the "
               "attacker's 0xEE)\n", maplen - ok, maplen, count_byte(fresh, maplen, 0xEE));
        CHECK(ok == maplen, "new memory at the old address unchanged",
              "all %zu bytes 0x%02x, saw %zu changed", maplen, NEW_BYTE, maplen - ok);
    }
    CHECK_RC(fh_barrier(), FH_OK);
    if (enforced) {
        CHECK(rs[0].put_rc < 0, "put with a key of a destroyed segment",
              "an error at the initiator, saw %s", rs[0].put_rc == RAW_HANG ? "no completion"
              : tu_errname((int)rs[0].put_rc));
        CHECK(rs[0].get_rc < 0, "get with a key of a destroyed segment",
              "an error at the initiator, saw %s", rs[0].get_rc == RAW_HANG ? "no completion"
              : tu_errname((int)rs[0].get_rc));
        CHECK(rs[0].get_old == 0 && rs[0].get_new == 0, "get with a stale key read nothing",
              "no old (0x%02x) or new (0x%02x) bytes, saw %lld old, %lld new", OLD_BYTE,
              NEW_BYTE, (long long)rs[0].get_old, (long long)rs[0].get_new);
    }

    /* 4. the target's counters for the attacker are back where they were */
    if (me == 1) {
        TU_LOG("rank 0's row: %llu registration(s) made, %llu released; pinned %llu bytes, "
               "%llu before\n",
               (unsigned long long)(s1.reg_registrations - s0.reg_registrations),
               (unsigned long long)(s1.reg_unregistrations - s0.reg_unregistrations),
               (unsigned long long)s1.bytes_pinned_remote,
               (unsigned long long)s0.bytes_pinned_remote);
        uint64_t want_regs = kind == FH_REG_PIN_EVERYTHING ? 0 : nkeys;
        CHECK(s1.reg_registrations - s0.reg_registrations == want_regs,
              "registrations made for rank 0", "%llu, saw %llu",
              (unsigned long long)want_regs,
              (unsigned long long)(s1.reg_registrations - s0.reg_registrations));
        CHECK(s1.reg_registrations - s1.reg_unregistrations ==
              s0.reg_registrations - s0.reg_unregistrations, "registrations released",
              "registrations - unregistrations %llu as before, saw %llu",
              (unsigned long long)(s0.reg_registrations - s0.reg_unregistrations),
              (unsigned long long)(s1.reg_registrations - s1.reg_unregistrations));
        CHECK(s1.bytes_pinned_remote == s0.bytes_pinned_remote, "pinned bytes released",
              "bytes_pinned_remote %llu as before, saw %llu",
              (unsigned long long)s0.bytes_pinned_remote,
              (unsigned long long)s1.bytes_pinned_remote);
    }

    /* 5. late deregistrations of revoked handles are taken quietly -- those
     * the target remembers (revoked_cap); the rest count as refused like
     * any unknown handle */
    fh_peer_stats_t s2 = FH_PEER_STATS_INIT;
    if (me == 1)
        CHECK_RC(fh_stats_peer(0, &s2), FH_OK);
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 0 && kind == FH_REG_RENDEZVOUS) {
        for (uint32_t i = 0; i < nkeys; i++) {
            rdv_msg_t un = {.op = RDV_UNREGISTER, .handle = handle[i]};
            send_rdv(&un);
        }
        /* No reply by design: an unknown operation on the same path (in
         * order) is answered, so once its reply is here the target has
         * handled the deregistrations. */
        fh_am_handler_t saved = fh_handlers[FH_H_RDV_REP].fn;
        const char *saved_name = fh_handlers[FH_H_RDV_REP].name;
        fh_am_register_internal(FH_H_RDV_REP, cap_rdv_rep, "stale_key capture");
        rdv_msg_t q = {.op = 77, .token = 99};
        send_rdv(&q);
        await_reply("marker request");
        fh_am_register_internal(FH_H_RDV_REP, saved, saved_name);
    }
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 1 && kind == FH_REG_RENDEZVOUS) {
        fh_peer_stats_t s3 = FH_PEER_STATS_INIT;
        CHECK_RC(fh_stats_peer(0, &s3), FH_OK);
        uint64_t forgotten = nkeys - fh_rt->strat->revoked_cap;
        TU_LOG("%u late deregistrations: %llu more released, %llu more refused (the "
               "marker and %llu beyond what is remembered)\n", nkeys,
               (unsigned long long)(s3.reg_unregistrations - s2.reg_unregistrations),
               (unsigned long long)(s3.reg_refused - s2.reg_refused),
               (unsigned long long)forgotten);
        CHECK(s3.reg_unregistrations == s2.reg_unregistrations,
              "late deregistrations not counted twice", "%llu, saw %llu",
              (unsigned long long)s2.reg_unregistrations,
              (unsigned long long)s3.reg_unregistrations);
        CHECK(s3.reg_refused - s2.reg_refused == 1 + forgotten,
              "late deregistrations of remembered handles not refused",
              "%llu refusals (the marker, the forgotten), saw %llu",
              (unsigned long long)(1 + forgotten),
              (unsigned long long)(s3.reg_refused - s2.reg_refused));
    }

    /* 6. still in service */
    if (me == 1 && fresh != NULL)
        munmap(fresh, maplen);
    CHECK_RC(fh_segment_create(SEG_SIZE, &seg, &mine), FH_OK);
    CHECK_RC(fh_segment_query(seg, 1, (void **)&tbase, &tsize), FH_OK);
    if (me == 0)
        tu_round_trip(1, tbase + 12345);
    CHECK_RC(fh_barrier(), FH_OK);
    CHECK_RC(fh_segment_destroy(seg), FH_OK);
    free(rs);
    free(aws);
    free(handle);
    if (enforced)
        TU_SAY("PASS stale_key\n");
    else
        TU_SAY("SKIP stale_key (provider %s cannot refuse stale keys; target-side checks "
               "passed)\n", prov);
    CHECK_RC(fh_finalize(), FH_OK);
    return 0;
}
