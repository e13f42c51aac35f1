/*
 * forge_test.c -- a hostile member of the job cannot act as another member,
 * and nothing it puts on the wire crashes a rank (docs/security.md).
 *
 * Three ranks: 0 is the forger, 1 the victim, 2 the member the forger
 * pretends to be.  The forger links runtime internals and sends hand-made
 * messages through its real endpoint, exactly what a hostile or broken
 * member could send:
 *
 *   header    an AM whose header claims to come from rank 2 (path 0) for a
 *             user handler: the victim's handler must not run for rank 2,
 *             and the packet is dropped and counted against rank 0.
 *   barrier   a barrier arrival for round 1, which only rank 2 may send to
 *             rank 1 (dissemination: (1 - 2) mod 3 = 2): dropped; after two
 *             more barriers no arrival is left over on the victim.  And one
 *             for round 0, rank 0's own to send, but two barriers ahead
 *             (no leader can be): dropped, the slot keeps its epoch.
 *   atomic    while the victim waits for an fh_atomic reply from rank 2
 *             (rank 2 sleeps 2 s before polling), the forger sends atomic
 *             replies for every handle the victim's path can have handed
 *             out (generations 1..4, slots 0..15): the victim's atomic must
 *             return rank 2's real value, never the forged one.
 *   atomic requests  honest about their sender but malformed: a width
 *             other than 4 or 8, a 32-bit operand or compare over 32 bits,
 *             an unknown op, an address misaligned for its width or outside
 *             the segment, an extra argument: each answered with the
 *             matching error, counted in the victim's atomics_refused for
 *             rank 0 (exactly), the victim's word unchanged; then a valid
 *             32-bit FETCH_ADD changes only its half of the word.
 *   raw (ofi) straight onto the victim's service endpoint, bypassing the
 *             conduit's own sender: a runt (3 bytes), a message with a
 *             wrong token of odd length, a 60,001-byte message (landing at
 *             an odd offset of the multi-receive buffer), and a replay of
 *             a sequence number already delivered.
 *
 * Then a put/get round trip and a legitimate AM from every rank must still
 * work.  The victim prints "DROPPED n" (its am_dropped total) and
 * forge_test.sh checks its log holds the reason of every kind above.
 *
 * takeover (tcp; issue 26)  roles change: rank 2 tries to become rank 1
 *             towards rank 0 (forge_takeover.c): it announces rank 1's
 *             ports from tcp;ofi_rxm endpoints of its own and sends, with
 *             rank 0's token (every member holds it) and every sequence
 *             number 0..63, a request to H_TAKE and a barrier arrival
 *             for round 1 (rank 1's turn towards rank 0) claiming rank 1
 *             [rxm generation]; and it sends FI_EP_MSG connection
 *             requests claiming rank 1 with a random or replayed proof
 *             [MSG generation].  Rank 1 sends H_TAKE 3 times, honestly.
 *             Rank 0 must see exactly those 3 from rank 1, no forged one,
 *             no barrier arrival left over, and the job must go on.
 */
#include "tests/integ/testutil.h"

#include <pthread.h>
#include <sched.h>
#include <sys/types.h>
#include <unistd.h>

#include "firehose/am_wire.h"
#include "firehose/internal.h"
#include "conduits/ofi/ofi_internal.h"
#include "tests/security/forge_takeover.h"

#define H_USER   FH_AM_USER_FIRST
#define ATOM_VAL 0x2222222222222222ull
#define FORGED   0xbadbadbadbadbad0ull

static int me, N;
static _Atomic int user_calls[3];   /* victim: handler runs per claimed source */

#define H_TAKE      (FH_AM_USER_FIRST + 1)
#define TAKE_HONEST 0x4035E57ull
#define TAKE_FORGED 0xF0F0F0F0F0ull
#define TAKE_DONE   0xD0DEull     /* rank 2: the attack is over */
static _Atomic int take_honest[3], take_forged[3];  /* per verified source */
static _Atomic int take_done;

static void user_handler(fh_token_t tok, void *buf, size_t n, const uint64_t *a,
                         unsigned na)
{
    (void)buf; (void)n; (void)a; (void)na;
    int src = -1;
    fh_token_source(tok, &src);
    if (src >= 0 && src < 3)
        atomic_fetch_add(&user_calls[src], 1);
}

/* Sends one AM with a hand-made runtime header through the forger's path p
 * (replies to thread paths must leave from the service path: conduit.h). */
static void send_raw_am(fh_path_t *p, int to, int to_path, const fh_am_msg_t *m)
{
    unsigned char hdr[FH_AM_HDR_BYTES + 8 * FH_AM_MAX_ARGS];
    size_t hl = fh_am_encode(m, hdr, sizeof hdr);
    CHECK(hl > 0, "encode", "a forged header");
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int rc = fh_rt->cops->am_send(p->cp, to, to_path, hdr, hl, NULL, 0);
        if (rc == FH_ERR_AGAIN)
            fh_path_poll_locked(p);
        pthread_mutex_unlock(&p->lock);
        if (rc == FH_OK)
            return;
        CHECK(rc == FH_ERR_AGAIN, "am_send", "FH_OK or FH_ERR_AGAIN, saw %s", fh_strerror(rc));
        sched_yield();
    }
}

static void take_handler(fh_token_t tok, void *buf, size_t n, const uint64_t *a,
                         unsigned na)
{
    (void)buf; (void)n;
    int src = -1;
    fh_token_source(tok, &src);
    if (src < 0 || src >= 3 || na < 1)
        return;
    if (a[0] == TAKE_HONEST)
        atomic_fetch_add(&take_honest[src], 1);
    else if (a[0] == TAKE_DONE && src == 2)
        atomic_store(&take_done, 1);
    else if (a[0] == TAKE_FORGED)
        atomic_fetch_add(&take_forged[src], 1);
}

/* The takeover phase (see the top).  Over tcp only: shm names endpoints by
 * unguessable names, not by ports. */
static void takeover_phase(int ofi)
{
    pid_t pid = getpid(), pids[3];
    CHECK_RC(fh_allgather(&pid, pids, sizeof pid), FH_OK);
    const char *prov = getenv("FH_OFI_PROVIDER");
    if (!ofi || (prov && *prov && strcmp(prov, "tcp") != 0)) {
        TU_LOG("NOTE takeover phase skipped: it attacks tcp\n");
        return;
    }
    if (me == 1)
        for (int i = 0; i < 3; i++) {
            uint64_t a = TAKE_HONEST;
            CHECK_RC(fh_am_request_short(0, H_TAKE, &a, 1), FH_OK);
        }
    if (me == 0)
        for (int i = 0; i < 10000000 && atomic_load(&take_honest[1]) < 3; i++)
            fh_poll();
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 2) {
        /* The forged messages, claiming rank 1 (src_path is set per
         * connection).  The barrier arrival is for the next barrier. */
        unsigned char am[2][FH_AM_HDR_BYTES + 8 * FH_AM_MAX_ARGS];
        fh_am_msg_t m = {.kind = FH_AM_REQ_SHORT, .handler = H_TAKE, .nargs = 1,
                         .src_rank = 1};
        m.args[0] = TAKE_FORGED;
        fh_am_msg_t bm = {.kind = FH_AM_REQ_SHORT, .handler = FH_H_BARRIER, .nargs = 4,
                          .src_rank = 1};
        bm.args[0] = 1;
        bm.args[1] = fh_rt->barrier_epoch + 1;
        bm.args[2] = bm.args[3] = fh_coll_sig(FH_COLL_BARRIER, 0);
        struct ft_target t = {
            .pid0 = pids[0], .pid1 = pids[1], .npaths = fh_rt->npaths,
            /* [rxm generation] what we present to rank 0 (gone with tokens) */
            .token0 = fh_tls()->path->cp->tokens[0],
            .am = {am[0], am[1]},
            .am_len = {fh_am_encode(&m, am[0], sizeof am[0]),
                       fh_am_encode(&bm, am[1], sizeof am[1])},
            .nseq = 64, .seconds = 3.0,
        };
        struct ft_report r;
        CHECK(ft_attack(&t, &r) == 0, "takeover setup",
              "libsec_shim.so preloaded (forge_test.sh sets LD_PRELOAD), saw it missing");
        TU_LOG("takeover: rxm: %u endpoints announcing rank 1's ports, %u forged messages "
               "posted, %u not; msg: %u requests, %u refused, %u connected, %u of those "
               "closed by rank 0\n", r.rxm_eps, r.rxm_sent, r.rxm_unsent, r.msg_tried,
               r.msg_refused, r.msg_connected, r.msg_closed);
        uint64_t d = TAKE_DONE;
        CHECK_RC(fh_am_request_short(0, H_TAKE, &d, 1), FH_OK);
        CHECK_RC(fh_am_request_short(1, H_TAKE, &d, 1), FH_OK);
    } else {
        /* Rank 1 stays quiet (nothing of its own in flight to lose); rank 0
         * serves whatever arrives, until rank 2 is done (at most 40 s). */
        double t0 = tu_now();
        while (!atomic_load(&take_done) && tu_now() - t0 < 40)
            fh_poll();
        CHECK(atomic_load(&take_done), "takeover", "rank 2's end of the attack within "
              "40 s, saw none");
        for (double t1 = tu_now(); tu_now() - t1 < 0.5;)
            fh_poll();
    }
    if (me == 0) {
        /* Rank 1 is quiet: an arrival for a barrier after ours is forged. */
        unsigned left = 0;
        for (int e = 0; e < 2; e++)
            left += atomic_load(&fh_rt->barrier_in[1][e]) > fh_rt->barrier_epoch;
        int f1 = atomic_load(&take_forged[1]), h1 = atomic_load(&take_honest[1]);
        TU_LOG("takeover: H_TAKE from rank 1: %d honest, %d forged; forged from rank 2: "
               "%d; round-1 barrier arrivals waiting: %u\n", h1, f1,
               atomic_load(&take_forged[2]), left);
        CHECK(f1 == 0 && h1 == 3 && left == 0, "takeover",
              "rank 0 to run H_TAKE 'from rank 1' exactly the 3 times rank 1 sent it and "
              "no barrier arrival in rank 1's name before rank 1 arrives; saw %d honest "
              "and %d FORGED calls whose verified source was rank 1, and %u round-1 "
              "arrivals waiting (rank 2 passed for rank 1)", h1, f1, left);
    }
    CHECK_RC(fh_barrier(), FH_OK);
    CHECK_RC(fh_barrier(), FH_OK);
}

static int slot_is_free(const struct fh_cpath *cp, const struct ofi_op *s)
{
    for (const struct ofi_op *f = cp->slot_free; f != NULL; f = f->next)
        if (f == s)
            return 1;
    return 0;
}

/* ofi: bytes straight onto the victim's service endpoint, with a send slot's
 * context so that the completion returns the slot; returns once it has (the
 * provider may read `bytes` until then). */
static void send_ofi_bytes(const void *bytes, size_t len)
{
    fh_path_t *p = fh_tls()->path;
    struct fh_cpath *cp = p->cp;
    struct ofi_op *s = NULL;
    /* rdm: the victim's AV entry; msg: our connection to it. */
    struct fid_ep *ep = NULL;
    fi_addr_t addr = 0;
    CHECK_RC(ofi_route(cp, 1, 0, &ep, &addr), FH_OK);
    for (;;) {
        pthread_mutex_lock(&p->lock);
        s = cp->slot_free;
        ssize_t r = -FI_EAGAIN;
        if (s != NULL) {
            r = fi_send(ep, bytes, len, NULL, addr, &s->fctx);
            if (r == 0)
                cp->slot_free = s->next;
        }
        if (r == -FI_EAGAIN)
            fh_path_poll_locked(p);
        pthread_mutex_unlock(&p->lock);
        if (r == 0)
            break;
        CHECK(r == -FI_EAGAIN, "fi_send", "0 or -FI_EAGAIN, saw %zd", r);
        sched_yield();
    }
    for (int done = 0, i = 0; !done; i++) {
        CHECK(i < 10000000, "raw send", "its completion, saw none");
        fh_poll();
        pthread_mutex_lock(&p->lock);
        done = slot_is_free(cp, s);
        pthread_mutex_unlock(&p->lock);
    }
}

/* The oversized message.  rdm: dropped by the conduit's length check;
 * msg: longer than the connection's receive buffers, so the tcp provider
 * reports it truncated and ends that connection (a stream cannot skip a
 * message it has no buffer for) -- the victim drops it and goes on, the
 * sender has lost its own connection.  So in msg mode it leaves from a
 * thread of its own (its own path), and the main thread's path still
 * reaches the victim afterwards. */
static void *send_big(void *arg)
{
    int *sent = arg;
    struct fh_cpath *cp = fh_tls()->path->cp;
    const size_t dst = (size_t)1 * (size_t)fh_rt->npaths;   /* (victim, path 0) */
    size_t big = 60001;
    char *b = calloc(1, big);
    CHECK(b != NULL, "calloc", "%zu bytes", big);
    struct ofi_amh h = {.token = cp->tokens[1], .seq = cp->tx_seq[dst]};
    memcpy(b, &h, sizeof h);                                 /* right token, too long */
    send_ofi_bytes(b, big);
    free(b);
    *sent = 1;
    return NULL;
}

static void forge_raw_ofi(void)
{
    struct fh_cpath *cp = fh_tls()->path->cp;
    const size_t dst = (size_t)1 * (size_t)fh_rt->npaths;   /* (victim, path 0) */
    char runt[3] = {1, 2, 3};
    send_ofi_bytes(runt, sizeof runt);

    char odd[37];
    memset(odd, 0x5a, sizeof odd);                           /* wrong token */
    send_ofi_bytes(odd, sizeof odd);

    int sent = 0;
    if (cp->conn == NULL) {
        send_big(&sent);
    } else {
        CHECK(fh_rt->npaths >= 3, "paths", "two thread paths for the oversized message "
              "(FH_MAX_THREADS >= 2), saw %d paths", fh_rt->npaths);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, send_big, &sent) == 0, "pthread_create", "0");
        CHECK(pthread_join(t, NULL) == 0, "pthread_join", "0");
    }
    CHECK(sent, "oversized", "sent");

    /* A replay: the sequence number of the last message actually delivered
     * from this path (tx_seq was never advanced by the raw sends). */
    unsigned char msg[sizeof(struct ofi_amh) + FH_AM_HDR_BYTES];
    fh_am_msg_t m = {.kind = FH_AM_REQ_SHORT, .handler = H_USER, .src_rank = 0,
                     .src_path = (uint16_t)fh_tls()->path->index};
    struct ofi_amh old = {.token = cp->tokens[1], .seq = cp->tx_seq[dst] - 1};
    memcpy(msg, &old, sizeof old);
    fh_am_encode(&m, msg + sizeof old, FH_AM_HDR_BYTES);
    send_ofi_bytes(msg, sizeof msg);
}

/* An atomic request with hand-made arguments (a[4] becomes the handle),
 * sent honestly from our path and waited on like fh_atomic; returns the
 * target's status, *old the value it replied. */
static int raw_atomic(int rank, uint64_t *a, unsigned na, uint64_t *old)
{
    fh_tls_t *t = fh_tls();
    fh_path_t *p = t->path;
    fh_handle_t h;
    pthread_mutex_lock(&p->lock);
    fh_hslot_t *s = fh_ht_alloc(&p->handles, t->tid, &h);
    CHECK(s != NULL, "raw atomic", "a handle slot");
    s->ctr.pending = 1;
    s->peer = rank;
    s->width = 8;
    pthread_mutex_unlock(&p->lock);
    a[4] = h;
    int rc = fh_am_send_request(t, rank, FH_AM_REQ_SHORT, FH_H_ATOMIC_REQ, NULL, 0, 0, a, na);
    CHECK(rc == FH_OK, "raw atomic", "sent, saw %s", fh_strerror(rc));
    rc = fh_wait_ctr(t, &s->ctr);
    pthread_mutex_lock(&p->lock);
    *old = s->result;
    fh_ht_free(&p->handles, s);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

#define AWORD 0x1111111122222222ull

static void forge_atomic_requests(uint64_t *r1, unsigned *nrefused)
{
    uint64_t w = (uint64_t)(uintptr_t)&r1[8];
    struct { uint64_t addr, op, operand, compare, width; unsigned na; int want; } c[] = {
        {w, FH_AOP_FETCH_ADD, 1, 0, 3, 6, FH_ERR_INVALID},
        {w, FH_AOP_FETCH_ADD, 1, 0, 16, 6, FH_ERR_INVALID},
        {w, FH_AOP_FETCH_ADD, 1, 0, 0, 6, FH_ERR_INVALID},
        {w, FH_AOP_FETCH_ADD, 1ull << 32, 0, 4, 6, FH_ERR_INVALID},
        {w, FH_AOP_CSWAP, 5, 0x122222222ull, 4, 6, FH_ERR_INVALID},
        {w, FH_AOP__COUNT, 1, 0, 8, 6, FH_ERR_INVALID},
        {w, FH_AOP__COUNT, 1, 0, 4, 6, FH_ERR_INVALID},
        {w, FH_AOP_FETCH_ADD, 1, 0, 4, 7, FH_ERR_INVALID},     /* extra argument */
        {w, FH_AOP_FETCH_ADD, 1, 0, 4, 5, FH_ERR_INVALID},     /* no width */
        {w + 2, FH_AOP_FETCH_ADD, 1, 0, 4, 6, FH_ERR_ALIGN},
        {w + 4, FH_AOP_FETCH_ADD, 1, 0, 8, 6, FH_ERR_ALIGN},
        {(uint64_t)(uintptr_t)r1 + 4096, FH_AOP_SET, 1, 0, 4, 6, FH_ERR_OUT_OF_SEGMENT},
        {(uint64_t)(uintptr_t)r1 - 4, FH_AOP_SET, 1, 0, 4, 6, FH_ERR_OUT_OF_SEGMENT},
    };
    unsigned n = (unsigned)(sizeof c / sizeof c[0]);
    for (unsigned i = 0; i < n; i++) {
        uint64_t a[7] = {c[i].addr, c[i].op, c[i].operand, c[i].compare, 0, c[i].width, 0};
        uint64_t old = 0;
        int rc = raw_atomic(1, a, c[i].na, &old);
        CHECK(rc == c[i].want, "malformed atomic request",
              "case %u (width %llu, op %llu, %u args): %s, saw %s", i,
              (unsigned long long)c[i].width, (unsigned long long)c[i].op, c[i].na,
              fh_err_name(c[i].want), fh_err_name(rc));
    }
    *nrefused = n;
    uint64_t v = 0;
    CHECK_RC(fh_get(&v, 1, &r1[8], 8), FH_OK);
    CHECK(v == AWORD, "malformed atomic request", "the word unchanged (0x%llx), saw 0x%llx",
          (unsigned long long)AWORD, (unsigned long long)v);
    /* valid, 32-bit, on the low half (little-endian: the 0x22222222 half) */
    uint64_t a[6] = {w, FH_AOP_FETCH_ADD, 1, 0, 0, 4}, old = 0;
    CHECK_RC(raw_atomic(1, a, 6, &old), FH_OK);
    CHECK_RC(fh_get(&v, 1, &r1[8], 8), FH_OK);
    CHECK(old == 0x22222222u && v == AWORD + 1, "32-bit atomic request",
          "old 0x22222222 and word 0x%llx, saw 0x%llx and 0x%llx",
          (unsigned long long)(AWORD + 1), (unsigned long long)old, (unsigned long long)v);
}

static void victim_atomic(uint64_t *target)
{
    uint64_t got = 0;
    CHECK_RC(fh_atomic(2, target, FH_AOP_FETCH, 0, 0, &got), FH_OK);
    CHECK(got == ATOM_VAL, "atomic reply", "0x%llx (rank 2's value), saw 0x%llx%s",
          (unsigned long long)ATOM_VAL, (unsigned long long)got,
          got == FORGED ? ": the forged reply completed it" : "");
}

int main(int argc, char **argv)
{
    CHECK_RC(fh_init(&argc, &argv), FH_OK);
    tu_init_rank("forge_test");
    me = fh_rank();
    N = fh_nranks();
    CHECK(N == 3, "job size", "3 ranks, saw %d", N);
    CHECK_RC(fh_am_register(H_USER, user_handler, "user"), FH_OK);
    CHECK_RC(fh_am_register(H_TAKE, take_handler, "take"), FH_OK);
    fh_seg_t seg;
    uint64_t *mine;
    CHECK_RC(fh_segment_create(4096, &seg, (void **)&mine), FH_OK);
    mine[0] = me == 2 ? ATOM_VAL : 0;
    mine[8] = AWORD;
    uint64_t *r1, *r2;
    CHECK_RC(fh_segment_query(seg, 1, (void **)&r1, NULL), FH_OK);
    CHECK_RC(fh_segment_query(seg, 2, (void **)&r2, NULL), FH_OK);
    const int ofi = fh_rt->cops == &fh_conduit_ofi;
    CHECK_RC(fh_barrier(), FH_OK);

    /* header + barrier + raw */
    if (me == 0) {
        const uint16_t mypath = (uint16_t)fh_tls()->path->index;
        fh_am_msg_t m = {.kind = FH_AM_REQ_SHORT, .handler = H_USER, .src_rank = 2,
                         .src_path = mypath, .credits = 0};
        send_raw_am(fh_tls()->path, 1, 0, &m);
        /* Honest about who sends it, but round 1 is rank 2's to send.  The
         * epoch is the next barrier's. */
        fh_am_msg_t bm = {.kind = FH_AM_REQ_SHORT, .handler = FH_H_BARRIER, .nargs = 5,
                          .src_rank = 0, .src_path = mypath};
        bm.args[0] = 1;
        bm.args[1] = fh_rt->barrier_epoch + 1;
        bm.args[2] = bm.args[3] = fh_coll_sig(FH_COLL_BARRIER, 0);
        bm.args[4] = 0;                   /* the OR of fh_barrier_or */
        send_raw_am(fh_tls()->path, 1, 0, &bm);
        /* Round 0 is ours to send to rank 1, but not for the barrier after
         * the next: that would count as its arrival before we entered it. */
        bm.args[0] = 0;
        bm.args[1] = fh_rt->barrier_epoch + 2;
        send_raw_am(fh_tls()->path, 1, 0, &bm);
        if (ofi)
            forge_raw_ofi();
        else
            TU_LOG("NOTE raw ofi forgeries skipped: the conduit is %s\n", fh_rt->cops->name);
    }
    /* The forged arrival is for the next barrier's round 1.  Rank 1, before
     * it enters that barrier, waits (at most 10 s) until a message from
     * rank 0 was dropped (and 0.2 s more), and then holds no round-1
     * arrival for it: rank
     * 2's real one needs our own round-0 notification first (rank 0 may
     * already have notified us for its round 0).  Had the forgery counted,
     * the slot would hold the next barrier's epoch. */
    if (me == 1) {
        fh_peer_stats_t s0 = FH_PEER_STATS_INIT;
        for (double t0 = tu_now(); s0.am_dropped == 0 && tu_now() - t0 < 10;) {
            fh_poll();
            CHECK_RC(fh_stats_peer(0, &s0), FH_OK);
        }
        for (double t1 = tu_now(); tu_now() - t1 < 0.2;)
            fh_poll();                    /* what followed it on the connection */
        for (int e = 0; e < 2; e++)
            CHECK(atomic_load(&fh_rt->barrier_in[1][e]) <= fh_rt->barrier_epoch,
                  "forged barrier", "no round-1 arrival for the next barrier (%llu) before "
                  "we notified anyone, saw one for epoch %llu (parity %d)",
                  (unsigned long long)fh_rt->barrier_epoch + 1,
                  (unsigned long long)atomic_load(&fh_rt->barrier_in[1][e]), e);
        for (int e = 0; e < 2; e++)
            CHECK(atomic_load(&fh_rt->barrier_in[0][e]) <= fh_rt->barrier_epoch + 1,
                  "forged barrier epoch", "no round-0 arrival beyond the next barrier "
                  "(%llu), saw one for epoch %llu (parity %d)",
                  (unsigned long long)fh_rt->barrier_epoch + 1,
                  (unsigned long long)atomic_load(&fh_rt->barrier_in[0][e]), e);
    }
    CHECK_RC(fh_barrier(), FH_OK);
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 1)
        CHECK(atomic_load(&user_calls[2]) == 0, "forged header",
              "no handler run for rank 2, saw %d", atomic_load(&user_calls[2]));

    /* atomic: rank 2 does not poll for 2 s; rank 1 waits for its reply on
     * its main thread's path, which the forger learns (a path nobody polls
     * would not take the forger's messages at all over tcp). */
    int mypath = fh_tls()->path->index, paths[3];
    CHECK_RC(fh_allgather(&mypath, paths, sizeof mypath), FH_OK);
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 1) {
        victim_atomic(r2);
    } else if (me == 2) {
        sleep(2);
    } else {
        usleep(200 * 1000);        /* the victim's request is out */
        for (uint32_t gen = 1; gen <= 4; gen++)
            for (uint32_t idx = 0; idx < 16; idx++)
                for (int path = paths[1]; path == paths[1]; path++) {
                    fh_am_msg_t m = {.kind = FH_AM_REP_SHORT, .handler = FH_H_ATOMIC_REP,
                                     .nargs = 3, .src_rank = 0, .src_path = 0};
                    m.args[0] = ((uint64_t)gen << 32) | ((uint64_t)idx << 8) | (uint64_t)path;
                    m.args[1] = FORGED;
                    m.args[2] = FH_OK;
                    send_raw_am(&fh_rt->paths[0], 1, path, &m);
                }
    }
    CHECK_RC(fh_barrier(), FH_OK);

    /* malformed atomic requests: the victim answers them from its barrier */
    unsigned nrefused = 0;
    if (me == 0)
        forge_atomic_requests(r1, &nrefused);
    CHECK_RC(fh_allgather(&nrefused, paths, sizeof nrefused), FH_OK);
    if (me == 1) {
        fh_peer_stats_t s0 = FH_PEER_STATS_INIT, s2 = FH_PEER_STATS_INIT;
        CHECK_RC(fh_stats_peer(0, &s0), FH_OK);
        CHECK_RC(fh_stats_peer(2, &s2), FH_OK);
        CHECK(s0.atomics_refused == (uint64_t)paths[0] && s2.atomics_refused == 0,
              "atomics_refused", "%d from rank 0 and 0 from rank 2, saw %llu and %llu",
              paths[0], (unsigned long long)s0.atomics_refused,
              (unsigned long long)s2.atomics_refused);
        TU_LOG("REFUSED %llu malformed atomic requests from rank 0\n",
               (unsigned long long)s0.atomics_refused);
    }
    CHECK_RC(fh_barrier(), FH_OK);

    /* Still working: a round trip and one AM from every rank. */
    uint64_t *right;
    int peer = (me + 1) % N;
    CHECK_RC(fh_segment_query(seg, peer, (void **)&right, NULL), FH_OK);
    uint64_t v = 0x1000 + (uint64_t)me, back = 0;
    CHECK_RC(fh_put(peer, right + 1, &v, sizeof v), FH_OK);
    CHECK_RC(fh_get(&back, peer, right + 1, sizeof back), FH_OK);
    CHECK(back == v, "round trip", "0x%llx, saw 0x%llx", (unsigned long long)v,
          (unsigned long long)back);
    if (me != 1)
        CHECK_RC(fh_am_request_short(1, H_USER, NULL, 0), FH_OK);
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 1) {
        for (int i = 0; i < 100000 && (atomic_load(&user_calls[0]) < 1 ||
                                       atomic_load(&user_calls[2]) < 1); i++)
            fh_poll();
        CHECK(atomic_load(&user_calls[0]) == 1 && atomic_load(&user_calls[2]) == 1,
              "legitimate AMs", "one from rank 0 and one from rank 2, saw %d and %d",
              atomic_load(&user_calls[0]), atomic_load(&user_calls[2]));
        fh_peer_stats_t s0 = FH_PEER_STATS_INIT, st = FH_PEER_STATS_INIT;
        CHECK_RC(fh_stats_peer(0, &s0), FH_OK);
        CHECK_RC(fh_stats_peer(1, &st), FH_OK);
        /* header 1 + barrier 1 + raw 4 (ofi) + at least one atomic reply. */
        unsigned want = 2 + (ofi ? 4 : 0) + 1;
        CHECK(st.am_dropped >= want, "drop count", "at least %u dropped packets, saw %llu",
              want, (unsigned long long)st.am_dropped);
        TU_LOG("DROPPED %llu (from rank 0: %llu)\n", (unsigned long long)st.am_dropped,
               (unsigned long long)s0.am_dropped);
    }
    CHECK_RC(fh_barrier(), FH_OK);
    takeover_phase(ofi);
    CHECK_RC(fh_segment_destroy(seg), FH_OK);
    TU_SAY("PASS forge_test\n");
    CHECK_RC(fh_finalize(), FH_OK);
    return 0;
}
