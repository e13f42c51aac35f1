/*
 * am.c -- active messages: handler table, requests with credit flow control,
 * replies, the receive-side dispatcher, and the backlog of replies/credits
 * that the conduit could not take at once.
 *
 * Receive side (fh_am_on_packet) trusts nothing that arrives: the sender is
 * the one the conduit verified (transport identity, conduit.h), the header
 * is validated by fh_am_decode and must name that same sender, the handler
 * must be registered, and a long payload's destination must lie inside one
 * of our segments.  A rejected packet is counted (am_dropped), logged
 * (rate-limited: fh_am_drop) and dropped -- never fatal; if it was a
 * well-formed request for a missing handler or segment its credit is still
 * returned so a confused peer cannot wedge its own flow control.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct fh_token {
    fh_path_t *path;      /* path that received the request (lock held) */
    int src_rank, src_path;
    int is_request;
    int replied;
    int self;             /* loopback: no network involved */
};

fh_path_t *fh_token_path(fh_token_t tok) { return tok->path; }

/* The registration strategies' messages (firehose moves, rendezvous and
 * bounce messages) are counted in reg_moves (firehose.c, strat_common.c), not in
 * am_sent / am_received: those count what the client's operations cost in
 * AMs under any registration strategy. */
static int is_move_handler(unsigned h)
{
    return fh_am_handler_is_reg(h);
}

/* ------------------------------------------------------------ handlers */

static void set_handler(unsigned index, fh_am_handler_t fn, const char *name)
{
    __atomic_store_n(&fh_handlers[index].name, name, __ATOMIC_RELAXED);
    __atomic_store_n(&fh_handlers[index].fn, fn, __ATOMIC_RELEASE);
}

static fh_am_handler_t get_handler(unsigned index)
{
    return __atomic_load_n(&fh_handlers[index].fn, __ATOMIC_ACQUIRE);
}

void fh_am_register_internal(unsigned index, fh_am_handler_t fn, const char *name)
{
    set_handler(index, fn, name);
}

int fh_am_register(unsigned index, fh_am_handler_t fn, const char *name)
{
    fh_clear_error();
    if (atomic_load_explicit(&fh_rt_state, memory_order_acquire) == FH_RT_DOWN)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_am_register: firehose was finalized");
    if (index < FH_AM_USER_FIRST || index > FH_AM_USER_LAST)
        return fh_set_error(FH_ERR_HANDLER,
                            "fh_am_register: index %u outside the client range [%d, %d]",
                            index, FH_AM_USER_FIRST, FH_AM_USER_LAST);
    if (fn == NULL)
        return fh_set_error(FH_ERR_INVALID, "fh_am_register: NULL handler for index %u",
                            index);
    fh_tls_t *self = fh_rt != NULL ? fh_tls_peek() : NULL;
    if (self != NULL && self->in_handler)
        return fh_set_error(FH_ERR_IN_HANDLER, "fh_am_register: inside an AM handler");
    set_handler(index, fn, name ? name : "");
    return FH_OK;
}

int fh_token_source(fh_token_t token, int *rank)
{
    fh_clear_error();
    /* Tokens exist only inside handlers, which run only while firehose is
     * up: anything else is not a token, and is not read. */
    if (atomic_load_explicit(&fh_rt_state, memory_order_acquire) != FH_RT_UP)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_token_source: firehose is not initialized");
    if (token == NULL || rank == NULL)
        return fh_set_error(FH_ERR_INVALID, "fh_token_source: NULL argument");
    *rank = token->src_rank;
    return FH_OK;
}

size_t fh_am_max_medium(void) { return fh_rt ? fh_rt->am_max_medium : 0; }
size_t fh_am_max_long(void) { return fh_rt ? FH_AM_MAX_LONG : 0; }
size_t fh_am_max_long_reply(void) { return fh_am_max_medium(); }

/* ------------------------------------------------------------ sending */

/* A copy of an encoded packet, for a queue of path p (lock held). */
static void queue_packet(fh_backlog_t ***tail, int rank, int rpath, const void *hdr,
                         size_t hdr_len, const void *payload, size_t len)
{
    fh_backlog_t *b = malloc(sizeof *b + hdr_len + len);
    if (b == NULL)
        fh_fatal("out of memory queueing an AM reply");
    b->next = NULL;
    b->rank = rank;
    b->rpath = rpath;
    b->stale = false;
    b->len = hdr_len + len;
    memcpy(b->bytes, hdr, hdr_len);
    if (len)
        memcpy(b->bytes + hdr_len, payload, len);
    **tail = b;
    *tail = &b->next;
}

/* Sends an already-encoded packet on path p (lock held) or queues it. */
static void fh_am_send_or_queue(fh_path_t *p, int rank, int rpath, const void *hdr,
                                size_t hdr_len, const void *payload, size_t len)
{
    if (p->backlog == NULL) {
        int rc = fh_path_am_send(p, rank, rpath, hdr, hdr_len, payload, len);
        if (rc == FH_OK)
            return;
        if (rc != FH_ERR_AGAIN) {
            if (atomic_load(&p->rt->finalizing))
                return;
            fh_fatal("cannot send an AM reply to %s: %s", FH_RANK_NAME(rank), fh_strerror(rc));
        }
    }
    queue_packet(&p->backlog_tail, rank, rpath, hdr, hdr_len, payload, len);
}

/* Client replies wait while the strategy may not publish (reg.h,
 * may_publish: REVOKEs of freed memory unacknowledged) -- the wait every
 * other call takes at entry, which a handler cannot.  Once it may, they
 * join the backlog in order.  Lock held. */
static bool may_publish(fh_path_t *p)
{
    fh_rt_t *rt = p->rt;
    return rt->reg_ops->may_publish == NULL || atomic_load(&rt->finalizing) ||
           rt->reg_ops->may_publish(&rt->core);
}

static void release_held(fh_path_t *p)
{
    if (p->held == NULL || !may_publish(p))
        return;
    *p->backlog_tail = p->held;
    p->backlog_tail = p->held_tail;
    p->held = NULL;
    p->held_tail = &p->held;
    fh_am_flush_backlog(p);
}

void fh_am_flush_backlog(fh_path_t *p)
{
    while (p->backlog != NULL) {
        fh_backlog_t *b = p->backlog;
        int rc = b->stale ? FH_OK : fh_path_am_send(p, b->rank, b->rpath, b->bytes, b->len,
                                                    NULL, 0);
        if (rc == FH_ERR_AGAIN)
            return;
        if (rc != FH_OK && !atomic_load(&p->rt->finalizing))
            fh_fatal("cannot send an AM reply to %s: %s", FH_RANK_NAME(b->rank), fh_strerror(rc));
        p->backlog = b->next;
        if (p->backlog == NULL)
            p->backlog_tail = &p->backlog;
        free(b);
    }
}

/* Credits owed to (rank, rpath), taken off the books (they ride on a packet
 * being built now).
 *
 * Each credit is returned exactly once: a request we accept adds one to
 * owed[] (owe_credit) or rides in its reply, and it leaves owed[] only
 * here, under the path lock, into the one packet that carries it (a
 * request, a reply or a credit message), or back into owed[] if that
 * packet was not sent (send_on_path).  owe_credit sends at half a window,
 * so what one (rank, path) is owed stays within a window: asserted.  A
 * peer that sends requests without credits (burst_test) is still owed
 * their credits, so it sees "returned more AM credits than it was given":
 * its own doing, and logged rate-limited (fh_am_on_packet). */
static uint16_t take_owed(fh_path_t *p, int rank, int rpath)
{
    if (p->owed == NULL)
        return 0;
    uint32_t *o = &p->owed[(size_t)rank * (size_t)p->rt->npaths + (size_t)rpath];
    uint32_t v = *o;
    assert(v <= (uint32_t)p->rt->cfg.am_credits && v <= p->owed_total);
    *o = 0;
    p->owed_total -= v;
    return (uint16_t)v;
}

static void send_credits(fh_path_t *p, int rank, int rpath)
{
    fh_am_msg_t m = {.kind = FH_AM_CREDIT, .src_path = (uint16_t)p->index,
                     .src_rank = (uint32_t)p->rt->rank};
    m.credits = take_owed(p, rank, rpath);
    if (m.credits == 0)
        return;
    unsigned char hdr[FH_AM_HDR_BYTES];
    size_t hl = fh_am_encode(&m, hdr, sizeof hdr);
    FH_STAT_ADD(p->stats[rank].am_credit_msgs, 1);
    fh_am_send_or_queue(p, rank, rpath, hdr, hl, NULL, 0);
}

void fh_am_flush_credits(fh_path_t *p, bool all)
{
    const fh_rt_t *rt = p->rt;
    uint32_t threshold = all ? 1 : (uint32_t)(rt->cfg.am_credits + 1) / 2;
    for (int r = 0; r < rt->nranks && p->owed_total; r++)
        for (int q = 0; q < rt->npaths; q++)
            if (p->owed[(size_t)r * (size_t)rt->npaths + (size_t)q] >= threshold)
                send_credits(p, r, q);
}

/* Polls in a row that found nothing before the service path returns every
 * credit it owes in credit messages of their own.  Until then an owed
 * credit rides on our next request or reply to its owner (take_owed), and
 * owe_credit returns half a window at once: a requester out of credits is
 * never left waiting for this.  Flushing at the first empty poll (as
 * before) cost a 2-rank barrier over tcp one credit message per rank per
 * barrier: 4 messages instead of 2. */
#define FH_CREDIT_IDLE_POLLS 64

/* Every poll of the service path sends the replies that waited for
 * transmit resources and the credits owed: half a window's worth, or all
 * of them once FH_CREDIT_IDLE_POLLS polls in a row found nothing (we are
 * going idle). */
static int am_poll_send(fh_path_t *p, int found)
{
    if (p->index != 0)
        return 0;
    if (p->backlog != NULL)
        fh_am_flush_backlog(p);
    if (p->held != NULL)
        release_held(p);
    if (found != 0)
        p->idle_polls = 0;
    else if (p->idle_polls < FH_CREDIT_IDLE_POLLS)
        p->idle_polls++;
    if (p->owed_total != 0)
        fh_am_flush_credits(p, p->idle_polls >= FH_CREDIT_IDLE_POLLS);
    return 0;
}

const fh_poller_t fh_am_poller = {"am", FH_POLL_SEND, am_poll_send, NULL};

static void up_on_am(void *arg, int src_rank, int src_path, const void *buf, size_t len)
{
    fh_am_on_packet(arg, src_rank, src_path, buf, len);
}

static void up_on_drop(void *arg, int src_rank, const char *why)
{
    fh_am_drop(arg, src_rank, "%s", why);
}

/* Marks the packets of queue q addressed to (rank, rpath) stale; returns
 * how many.  (Marked, not unlinked: the conduit may call on_reset from the
 * send of the queue's head, fh_am_flush_backlog.) */
static unsigned mark_stale(fh_backlog_t *q, int rank, int rpath)
{
    unsigned n = 0;
    for (fh_backlog_t *b = q; b != NULL; b = b->next)
        if (b->rank == rank && b->rpath == rpath && !b->stale) {
            b->stale = true;
            n++;
        }
    return n;
}

/* The link to (rank, rpath) was made again (conduit.h on_reset): what was
 * in flight on the old one is lost, so this path's credits towards rank's
 * service path are a full window again and it owes (rank, rpath) none.
 * Replies and credit messages queued for it while the link was down go
 * too: they carry credits the peer's own reset gave back already (sent on
 * the new link they came back twice: "returned more AM credits than it was
 * given"), and they answer requests the peer has given up (on_lost; "a
 * reply ... may never come").
 * Path lock held (the conduit calls from the path's poll or send). */
static void up_on_reset(void *arg, int rank, int rpath)
{
    fh_path_t *p = arg;
    fh_rt_t *rt = p->rt;
    assert(rank >= 0 && rank < rt->nranks && rpath >= 0 && rpath < rt->npaths);
    unsigned stale = mark_stale(p->backlog, rank, rpath) + mark_stale(p->held, rank, rpath);
    if (stale != 0)
        fh_log_verbose(1, "path %d: %u replies or credit messages queued for %s path %d "
                       "while its link was down are dropped", p->index, stale,
                       FH_RANK_NAME(rank), rpath);
    if (rpath == 0) {
        /* Credits not back: requests whose processing the old link did
         * not confirm.  They are not failed (their replies, if any, may
         * never come): say so, naming the peer.  A request that holds its
         * credit while it waits to be sent (send_on_path) goes on the new
         * link: its credit stays taken. */
        const uint32_t window = (uint32_t)rt->cfg.am_credits, held = p->credit_held[rank];
        assert(p->credits[rank] + held <= window);
        uint32_t out = window - held - p->credits[rank];
        if (out != 0)
            fh_log_error("path %d: the link to %s was lost with up to %u AM requests "
                         "unconfirmed: a reply to one of them may never come", p->index,
                         FH_RANK_NAME(rank), out);
        p->credits[rank] = window - held;
    }
    if (p->owed != NULL) {
        uint32_t *o = &p->owed[(size_t)rank * (size_t)rt->npaths + (size_t)rpath];
        p->owed_total -= *o;
        *o = 0;
    }
    fh_log_verbose(1, "the link of path %d with %s path %d was made again: "
                   "credits reset", p->index, FH_RANK_NAME(rank), rpath);
}

/* The link to (rank, rpath) was lost (conduit.h on_lost).  The link to the
 * rank's service path carries this path's requests to it and their
 * replies: a request waiting for a reply fails now (FH_ERR_PEER_DEAD, the
 * log naming the peer), because it may have been lost before the target
 * ran it or its reply after: the caller cannot tell which, so nothing is
 * sent again (an atomic or a move is not idempotent).  Path lock held. */
static void up_on_lost(void *arg, int rank, int rpath)
{
    fh_path_t *p = arg;
    fh_rt_t *rt = p->rt;
    assert(rank >= 0 && rank < rt->nranks && rpath >= 0 && rpath < rt->npaths);
    FH_STAT_ADD(p->stats[rank].links_lost, 1);
    if (rpath == 0 || p->index == 0) {
        /* An AM between us and rank may be gone (ours to its service path,
         * or its to ours): waits for one fail (coll.c, fh_am_lost). */
        uint64_t seq = atomic_fetch_add(&rt->am_lost_seq, 1) + 1;
        atomic_store(rpath == 0 ? &rt->am_lost_req[rank] : &rt->am_lost_in[rank], seq);
        /* Between the service paths: never made again (coll.c). */
        if (rpath == 0 && p->index == 0)
            atomic_store(&rt->am_lost_svc[rank], seq);
    }
    if (rpath != 0)
        return;                          /* replies only: nothing waits */
    p->link_lost[rank]++;
    uint32_t n = fh_ht_fail_peer(&p->handles, rank, FH_ERR_PEER_DEAD);
    if (n != 0)
        fh_log_error("path %d: the link to %s was lost with %u atomic%s waiting for "
                     "a reply: failed (each may or may not have been applied)", p->index,
                     FH_RANK_NAME(rank), n, n == 1 ? "" : "s");
    if (rt->reg_ops->link_lost != NULL)
        rt->reg_ops->link_lost(&p->base, rank);
    /* The service paths' own connection is not made again: what the peer
     * keeps on our memory through the strategy goes (reg.h peer_lost). */
    if (p == &rt->paths[0] && rt->reg_ops->peer_lost != NULL)
        rt->reg_ops->peer_lost(&rt->core, rank);
}

const fh_conduit_upcalls_t fh_upcalls = {
    .on_am = up_on_am,
    .on_drop = up_on_drop,
    .on_complete = fh_path_on_complete,
    .on_reset = up_on_reset,
    .on_lost = up_on_lost,
};

static int run_self(fh_tls_t *t, unsigned kind, unsigned handler, const void *payload,
                    size_t len, uint64_t long_dst, const uint64_t *args, unsigned nargs)
{
    fh_am_handler_t fn = get_handler(handler);
    struct fh_token tok = {.path = t->path, .src_rank = fh_rt->rank,
                           .src_path = t->path->index,
                           .is_request = fh_am_kind_is_request(kind), .self = 1};
    void *buf = NULL;
    if (fh_am_kind_is_long(kind)) {
        buf = (void *)(uintptr_t)long_dst;
        if (len)
            memmove(buf, payload, len);
    } else if (len) {
        /* The handler may scribble on its buffer: give it a copy. */
        buf = malloc(len);
        if (buf == NULL)
            return fh_set_error(FH_ERR_NO_MEMORY, "AM to self: out of memory");
        memcpy(buf, payload, len);
    }
    uint64_t a[FH_AM_MAX_ARGS] = {0};
    if (nargs)
        memcpy(a, args, nargs * sizeof *a);
    fh_error_stash_t keep;
    fh_error_stash(&keep);                /* the caller's error text survives */
    t->in_handler++;
    fn(&tok, buf, len, a, nargs);
    t->in_handler--;
    fh_error_unstash(&keep);
    if (!fh_am_kind_is_long(kind))
        free(buf);
    return FH_OK;
}

static int send_on_path(fh_tls_t *t, fh_path_t *p, int rank, unsigned kind,
                        unsigned handler, const void *payload, size_t len,
                        uint64_t long_dst, const uint64_t *args, unsigned nargs, bool wait);

int fh_am_payload_net(fh_tls_t *t, int rank, const void *payload, size_t len,
                      uint64_t dst, const fh_seg_range_t *r)
{
    struct fh_mr *lmr;
    bool temp;
    int rc = fh_rma_local_mr("fh_am_request_long", true, payload, len, &lmr, &temp);
    if (rc != FH_OK)
        return rc;
    fh_ctr_t ctr = FH_CTR_INIT;
    rc = fh_xfer(t, true, rank, (char *)payload, lmr, dst, len, &r->rkey, &ctr, false);
    int wrc = fh_wait_ctr(t, &ctr);
    if (temp)
        fh_rma_local_mr_release(lmr);
    return rc != FH_OK ? rc : wrc;
}

int fh_am_send_request(fh_tls_t *t, int rank, unsigned kind, unsigned handler,
                       const void *payload, size_t len, uint64_t long_dst,
                       const uint64_t *args, unsigned nargs)
{
    fh_rt_t *rt = fh_rt;
    if (rank == rt->rank) {
        int rc = run_self(t, kind, handler, payload, len, long_dst, args, nargs);
        fh_progress(t);
        return rc;
    }

    if (kind == FH_AM_REQ_LONG && len > rt->am_max_medium) {
        /* Payload first, by the rank's route; the header follows once it
         * is visible. */
        fh_seg_range_t r;
        int rc = fh_seg_find(rt, rank, (uintptr_t)long_dst, len, &r);
        if (rc == FH_OK && r.holes != NULL)
            rc = fh_seg_holes_check("fh_am_request_long", rank, true, (void *)long_dst,
                                    len, &r);
        if (rc != FH_OK ||
            (rc = rt->route[rank]->am_payload(t, rank, payload, len, long_dst, &r)) != FH_OK)
            return rc;
        kind = FH_AM_REQ_LONG_RDMA;
    }

    return send_on_path(t, t->path, rank, kind, handler, payload, len, long_dst, args,
                        nargs, true);
}

int fh_am_send_request_on(fh_tls_t *t, fh_path_t *p, int rank, unsigned handler,
                          const void *payload, size_t len)
{
    return send_on_path(t, p, rank, FH_AM_REQ_MEDIUM, handler, payload, len, 0, NULL, 0,
                        true);
}

int fh_am_try_request(fh_tls_t *t, fh_path_t *p, int rank, unsigned kind, unsigned handler,
                      const void *payload, size_t len, const uint64_t *args, unsigned nargs)
{
    assert(rank != fh_rt->rank && kind != FH_AM_REQ_LONG);
    return send_on_path(t, p, rank, kind, handler, payload, len, 0, args, nargs, false);
}

/* Encodes and sends a request on path p.  wait: for a credit and for
 * transmit resources if needed; else FH_ERR_AGAIN (nothing sent, nothing
 * taken, no error text) when either is missing; FH_ERR_PEER_DEAD when no
 * credit is left and none may come (the service paths' connection lost). */
static int send_on_path(fh_tls_t *t, fh_path_t *p, int rank, unsigned kind,
                        unsigned handler, const void *payload, size_t len,
                        uint64_t long_dst, const uint64_t *args, unsigned nargs, bool wait)
{
    fh_rt_t *rt = fh_rt;
    assert(len <= FH_AM_MAX_LONG && nargs <= FH_AM_MAX_ARGS);   /* the wire's fields */
    fh_am_msg_t m = {.kind = (uint8_t)kind, .handler = (uint8_t)handler,
                     .nargs = (uint8_t)nargs, .src_rank = (uint32_t)rt->rank,
                     .payload_len = (uint32_t)len, .long_dst = long_dst};
    if (nargs)
        memcpy(m.args, args, nargs * sizeof *args);
    const void *inline_payload = fh_am_kind_has_inline(kind) ? payload : NULL;
    size_t inline_len = inline_payload ? len : 0;
    unsigned char hdr[FH_AM_HDR_BYTES + 8 * FH_AM_MAX_ARGS];

    pthread_mutex_lock(&p->lock);
    for (unsigned idle = 0; p->credits[rank] == 0;) {
        fh_progress_locked(p);
        if (p->credits[rank] != 0)
            break;
        /* The service paths' connection is never made again (up_on_lost):
         * the credits the rank owes us may never come. */
        if (atomic_load(&rt->am_lost_svc[rank]) != 0) {
            pthread_mutex_unlock(&p->lock);
            return fh_set_error(FH_ERR_PEER_DEAD, "AM request to %s: no credit left and "
                                "the service paths' connection with it was lost: none "
                                "may come", FH_RANK_NAME(rank));
        }
        if (!wait) {
            pthread_mutex_unlock(&p->lock);
            return FH_ERR_AGAIN;
        }
        pthread_mutex_unlock(&p->lock);
        fh_wait_round(t, &idle);
        pthread_mutex_lock(&p->lock);
    }
    p->credits[rank]--;
    p->credit_held[rank]++;
    m.src_path = (uint16_t)p->index;
    int rc;
    /* A text set from here on is the conduit's reason: kept below. */
    const bool quiet = fh_last_error()[0] == '\0';
    /* Out of transmit resources: wait as every waiting loop does, without
     * the path lock between rounds (other threads of the path go on).  The
     * credit stays ours meanwhile (credit_held: a reset of the link leaves
     * it out of the window it restores); the owed credits that ride along
     * are taken at each attempt and given back when it fails, so a reset
     * meanwhile (which zeroes them) sends none twice. */
    for (unsigned idle = 0;;) {
        m.credits = take_owed(p, rank, 0);   /* service path: piggyback owed credits */
        size_t hl = fh_am_encode(&m, hdr, sizeof hdr);
        rc = fh_path_am_send(p, rank, 0, hdr, hl, inline_payload, inline_len);
        if (rc == FH_ERR_AGAIN && m.credits != 0) {
            /* Not sent: the credits we owed rank's service path stay owed. */
            p->owed[(size_t)rank * (size_t)rt->npaths] += m.credits;
            p->owed_total += m.credits;
        }
        if (rc != FH_ERR_AGAIN || !wait)
            break;
        pthread_mutex_unlock(&p->lock);
        fh_wait_round(t, &idle);
        pthread_mutex_lock(&p->lock);
    }
    assert(p->credit_held[rank] > 0);
    p->credit_held[rank]--;
    if (rc == FH_OK && !is_move_handler(handler))
        FH_STAT_ADD(p->stats[rank].am_sent, 1);
    else if (rc != FH_OK)
        p->credits[rank]++;
    pthread_mutex_unlock(&p->lock);
    if (rc == FH_ERR_AGAIN)
        return rc;
    if (rc != FH_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s",
                 quiet && fh_last_error()[0] != '\0' ? fh_last_error() : fh_strerror(rc));
        return fh_set_error(rc, "AM request to %s failed: %s", FH_RANK_NAME(rank), why);
    }
    return FH_OK;
}

/* Validation shared by the public request functions. */
static int check_send(const char *fn, int rank, unsigned handler, const void *src,
                      size_t nbytes, const uint64_t *args, unsigned nargs)
{
    int rc = fh_check_rank(fn, rank);
    if (rc != FH_OK)
        return rc;
    if (handler < FH_AM_USER_FIRST || handler > FH_AM_USER_LAST)
        return fh_set_error(FH_ERR_HANDLER, "%s: handler %u is outside the client range "
                            "[%d, %d]", fn, handler, FH_AM_USER_FIRST, FH_AM_USER_LAST);
    if (get_handler(handler) == NULL)
        return fh_set_error(FH_ERR_HANDLER, "%s: handler %u is not registered", fn, handler);
    if (nargs > FH_AM_MAX_ARGS)
        return fh_set_error(FH_ERR_TOO_BIG, "%s: %u arguments (max %d)", fn, nargs,
                            FH_AM_MAX_ARGS);
    if (nargs > 0 && args == NULL)
        return fh_set_error(FH_ERR_INVALID, "%s: NULL args with nargs %u", fn, nargs);
    if (nbytes > 0 && src == NULL)
        return fh_set_error(FH_ERR_INVALID, "%s: NULL payload with %zu bytes", fn, nbytes);
    if ((uintptr_t)src + nbytes < (uintptr_t)src)
        return fh_set_error(FH_ERR_OVERFLOW, "%s: source range overflows", fn);
    return FH_OK;
}

int fh_am_request_short(int rank, unsigned handler, const uint64_t *args, unsigned nargs)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_am_request_short", &rc);
    if (t == NULL)
        return rc;
    if ((rc = check_send("fh_am_request_short", rank, handler, NULL, 0, args, nargs)))
        return rc;
    return fh_am_send_request(t, rank, FH_AM_REQ_SHORT, handler, NULL, 0, 0, args, nargs);
}

int fh_am_request_medium(int rank, unsigned handler, const void *src, size_t nbytes,
                         const uint64_t *args, unsigned nargs)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_am_request_medium", &rc);
    if (t == NULL)
        return rc;
    if ((rc = check_send("fh_am_request_medium", rank, handler, src, nbytes, args, nargs)))
        return rc;
    if (nbytes > fh_rt->am_max_medium)
        return fh_set_error(FH_ERR_TOO_BIG, "fh_am_request_medium: %zu bytes (max %zu)",
                            nbytes, fh_rt->am_max_medium);
    return fh_am_send_request(t, rank, FH_AM_REQ_MEDIUM, handler, src, nbytes, 0, args,
                              nargs);
}

static int check_long_dst(const char *fn, int rank, const void *dst, size_t nbytes)
{
    if (nbytes == 0)
        return FH_OK;
    if (dst == NULL)
        return fh_set_error(FH_ERR_INVALID, "%s: NULL destination with %zu bytes", fn,
                            nbytes);
    fh_seg_range_t r;
    return fh_seg_find(fh_rt, rank, (uintptr_t)dst, nbytes, &r);
}

int fh_am_request_long(int rank, unsigned handler, const void *src, size_t nbytes,
                       void *dst, const uint64_t *args, unsigned nargs)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_am_request_long", &rc);
    if (t == NULL)
        return rc;
    if ((rc = check_send("fh_am_request_long", rank, handler, src, nbytes, args, nargs)))
        return rc;
    if (nbytes > FH_AM_MAX_LONG)
        return fh_set_error(FH_ERR_TOO_BIG, "fh_am_request_long: %zu bytes (max %zu: "
                            "FH_AM_MAX_LONG)", nbytes, FH_AM_MAX_LONG);
    if ((rc = check_long_dst("fh_am_request_long", rank, dst, nbytes)))
        return rc;
    return fh_am_send_request(t, rank, FH_AM_REQ_LONG, handler, src, nbytes,
                              nbytes ? (uint64_t)(uintptr_t)dst : 0, args, nargs);
}

/* ------------------------------------------------------------ replies */

static int reply(const char *fn, fh_token_t tok, unsigned kind, unsigned handler,
                 const void *src, size_t nbytes, void *dst, const uint64_t *args,
                 unsigned nargs)
{
    if (fh_rt == NULL)
        return fh_set_error(FH_ERR_NOT_INIT, "%s: firehose is not initialized", fn);
    fh_tls_t *t = fh_tls_peek();
    if (tok == NULL || t == NULL || !t->in_handler)
        return fh_set_error(FH_ERR_IN_HANDLER, "%s: only a request handler may reply", fn);
    if (!tok->is_request)
        return fh_set_error(FH_ERR_IN_HANDLER, "%s: a reply handler cannot reply", fn);
    if (tok->replied)
        return fh_set_error(FH_ERR_STATE, "%s: this request was already replied to", fn);
    if (handler >= FH_AM_NHANDLERS || get_handler(handler) == NULL)
        return fh_set_error(FH_ERR_HANDLER, "%s: handler %u is not registered", fn, handler);
    if (nargs > FH_AM_MAX_ARGS)
        return fh_set_error(FH_ERR_TOO_BIG, "%s: %u arguments (max %d)", fn, nargs,
                            FH_AM_MAX_ARGS);
    if ((nargs && args == NULL) || (nbytes && src == NULL))
        return fh_set_error(FH_ERR_INVALID, "%s: NULL with a length", fn);
    if (nbytes > fh_rt->am_max_medium)
        return fh_set_error(FH_ERR_TOO_BIG, "%s: %zu bytes (max %zu)", fn, nbytes,
                            fh_rt->am_max_medium);
    if (kind == FH_AM_REP_LONG) {
        int rc = check_long_dst(fn, tok->src_rank, dst, nbytes);
        if (rc != FH_OK)
            return rc;
    }
    tok->replied = 1;
    uint64_t long_dst = (kind == FH_AM_REP_LONG && nbytes) ? (uint64_t)(uintptr_t)dst : 0;
    if (tok->self) {
        /* Replies to ourselves run at once; we are already inside a handler. */
        return run_self(t, kind, handler, src, nbytes, long_dst, args, nargs);
    }
    fh_path_t *p = tok->path;
    assert(nbytes <= UINT32_MAX);            /* checked against am_max_medium */
    fh_am_msg_t m = {.kind = (uint8_t)kind, .handler = (uint8_t)handler,
                     .nargs = (uint8_t)nargs, .src_path = (uint16_t)p->index,
                     .src_rank = (uint32_t)fh_rt->rank, .payload_len = (uint32_t)nbytes,
                     .long_dst = long_dst};
    /* The request's own credit, plus any owed to the same requester. */
    m.credits = (uint16_t)(1 + take_owed(p, tok->src_rank, tok->src_path));
    if (nargs)
        memcpy(m.args, args, nargs * sizeof *args);
    unsigned char hdr[FH_AM_HDR_BYTES + 8 * FH_AM_MAX_ARGS];
    size_t hl = fh_am_encode(&m, hdr, sizeof hdr);
    bool client = handler >= FH_AM_USER_FIRST && handler <= FH_AM_USER_LAST;
    if (client && (p->held != NULL || !may_publish(p)))
        queue_packet(&p->held_tail, tok->src_rank, tok->src_path, hdr, hl, src, nbytes);
    else
        fh_am_send_or_queue(p, tok->src_rank, tok->src_path, hdr, hl, src, nbytes);
    if (!is_move_handler(handler))
        FH_STAT_ADD(p->stats[tok->src_rank].am_sent, 1);
    return FH_OK;
}

static int check_user_handler(const char *fn, unsigned h)
{
    if (h < FH_AM_USER_FIRST || h > FH_AM_USER_LAST)
        return fh_set_error(FH_ERR_HANDLER, "%s: handler %u is outside the client range "
                            "[%d, %d]", fn, h, FH_AM_USER_FIRST, FH_AM_USER_LAST);
    return FH_OK;
}

int fh_am_reply_internal(fh_token_t tok, unsigned h, const uint64_t *args, unsigned nargs)
{
    return reply("fh_am_reply_internal", tok, FH_AM_REP_SHORT, h, NULL, 0, NULL, args,
                 nargs);
}

int fh_am_reply_medium_internal(fh_token_t tok, unsigned h, const void *src, size_t nbytes)
{
    return reply("fh_am_reply_medium_internal", tok, FH_AM_REP_MEDIUM, h, src, nbytes, NULL,
                 NULL, 0);
}

int fh_am_reply_medium_args_internal(fh_token_t tok, unsigned h, const void *src,
                                     size_t nbytes, const uint64_t *args, unsigned nargs)
{
    return reply("fh_am_reply_medium_args_internal", tok, FH_AM_REP_MEDIUM, h, src, nbytes,
                 NULL, args, nargs);
}

int fh_am_reply_short(fh_token_t tok, unsigned h, const uint64_t *args, unsigned nargs)
{
    int rc = check_user_handler("fh_am_reply_short", h);
    if (rc != FH_OK)
        return rc;
    return reply("fh_am_reply_short", tok, FH_AM_REP_SHORT, h, NULL, 0, NULL, args, nargs);
}

int fh_am_reply_medium(fh_token_t tok, unsigned h, const void *src, size_t nbytes,
                       const uint64_t *args, unsigned nargs)
{
    int rc = check_user_handler("fh_am_reply_medium", h);
    if (rc != FH_OK)
        return rc;
    return reply("fh_am_reply_medium", tok, FH_AM_REP_MEDIUM, h, src, nbytes, NULL, args,
                 nargs);
}

int fh_am_reply_long(fh_token_t tok, unsigned h, const void *src, size_t nbytes,
                     void *dst, const uint64_t *args, unsigned nargs)
{
    int rc = check_user_handler("fh_am_reply_long", h);
    if (rc != FH_OK)
        return rc;
    return reply("fh_am_reply_long", tok, FH_AM_REP_LONG, h, src, nbytes, dst, args,
                 nargs);
}

/* ------------------------------------------------------------ receiving */

static void owe_credit(fh_path_t *p, int rank, int rpath)
{
    if (p->owed == NULL)
        return; /* requests only ever arrive at the service path */
    p->owed[(size_t)rank * (size_t)p->rt->npaths + (size_t)rpath]++;
    p->owed_total++;
    if (p->owed[(size_t)rank * (size_t)p->rt->npaths + (size_t)rpath] >=
        (uint32_t)(p->rt->cfg.am_credits + 1) / 2)
        send_credits(p, rank, rpath);
}

/* Dropped packets logged per path: the first FH_DROP_LOG_FIRST, then every
 * FH_DROP_LOG_EVERY-th. */
#define FH_DROP_LOG_FIRST 10
#define FH_DROP_LOG_EVERY 1000   /* the "every 1000th" of the log lines */

void fh_am_drop(fh_path_t *p, int src_rank, const char *fmt, ...)
{
    fh_rt_t *rt = p->rt;
    int row = src_rank >= 0 && src_rank < rt->nranks ? src_rank : rt->rank;
    FH_STAT_ADD(p->stats[row].am_dropped, 1);
    uint64_t n = ++p->ndropped;
    if (n > FH_DROP_LOG_FIRST && n % FH_DROP_LOG_EVERY != 0)
        return;    /* a flood must not turn into a flood of log lines */
    char why[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    char from[48];
    if (src_rank >= 0)
        fh_rank_name(src_rank, from, sizeof from);
    else
        snprintf(from, sizeof from, "outside the job");
    char more[48] = "";
    if (n == FH_DROP_LOG_FIRST)
        snprintf(more, sizeof more, "; logging every %dth from now on", FH_DROP_LOG_EVERY);
    fh_log_error("dropped a packet from %s on path %d: %s (%llu dropped on this path%s)",
                 from, p->index, why, (unsigned long long)n, more);
}

void fh_am_on_packet(fh_path_t *p, int src_rank, int src_path, const void *buf, size_t len)
{
    fh_rt_t *rt = p->rt;
    assert(src_rank >= 0 && src_rank < rt->nranks && src_path >= 0 && src_path < rt->npaths);
    fh_am_msg_t m;
    char why[160];
    const fh_am_bounds_t bounds = {.nranks = (uint32_t)rt->nranks,
                                   .npaths = (uint32_t)rt->npaths,
                                   .max_medium = rt->am_max_medium,
                                   .max_long = FH_AM_MAX_LONG};
    if (fh_am_decode(buf, len, &bounds, &m, why, sizeof why) != FH_OK) {
        fh_am_drop(p, src_rank, "malformed: %s", why);
        return;
    }
    /* The sender is who the transport says; a header that claims otherwise
     * is forged (or broken) and its credits and handler are not honoured. */
    if ((int)m.src_rank != src_rank || (int)m.src_path != src_path) {
        fh_am_drop(p, src_rank, "header claims %s path %u, the transport says "
                   "path %d", FH_RANK_NAME((int)m.src_rank), m.src_path, src_path);
        return;
    }
    int src = src_rank;
    if (m.credits) {
        /* Credits held by requests waiting to be sent are out too. */
        const uint32_t room = (uint32_t)rt->cfg.am_credits - p->credit_held[src];
        p->credits[src] += m.credits;
        if (p->credits[src] > room) {
            /* Credits for requests it says we sent without one (we never
             * do): a peer's error, or the answer to our own flood. */
            uint64_t n = ++p->nexcess;
            if (n <= FH_DROP_LOG_FIRST || n % FH_DROP_LOG_EVERY == 0)
                fh_log_error("%s returned more AM credits than it was given; "
                             "ignored (%llu times on path %d%s)", FH_RANK_NAME(src),
                             (unsigned long long)n, p->index,
                             n == FH_DROP_LOG_FIRST ? "; logging every 1000th from now on"
                                                    : "");
            p->credits[src] = room;
        }
    }
    if (m.kind == FH_AM_CREDIT)
        return;
    int is_req = fh_am_kind_is_request(m.kind);
    if (!is_move_handler(m.handler))
        FH_STAT_ADD(p->stats[src].am_received, 1);
    if (is_req && p->index != 0) {
        fh_am_drop(p, src, "a request on thread path %d (requests go to path 0)", p->index);
        return;
    }
    fh_am_handler_t fn = get_handler(m.handler);
    if (fn == NULL) {
        fh_am_drop(p, src, "handler %u is not registered", m.handler);
        if (is_req)
            owe_credit(p, src, m.src_path);
        return;
    }
    void *hbuf = (void *)(uintptr_t)m.payload;
    if (fh_am_kind_is_long(m.kind)) {
        fh_seg_range_t r;
        if (m.payload_len &&
            (fh_seg_find(rt, rt->rank, (uintptr_t)m.long_dst, m.payload_len, &r) != FH_OK ||
             fh_seg_holes_meet(r.holes, (uintptr_t)m.long_dst, m.payload_len, true))) {
            fh_am_drop(p, src, "long destination 0x%llx+%u is outside our segments",
                       (unsigned long long)m.long_dst, m.payload_len);
            if (is_req)
                owe_credit(p, src, m.src_path);
            return;
        }
        hbuf = (void *)(uintptr_t)m.long_dst;
        if (fh_am_kind_has_inline(m.kind) && m.payload_len)
            memcpy(hbuf, m.payload, m.payload_len);
    }
    struct fh_token tok = {.path = p, .src_rank = src, .src_path = m.src_path,
                           .is_request = is_req};
    fh_tls_t *t = fh_tls();
    assert(t != NULL);      /* the polling thread has its state */
    fh_error_stash_t keep;
    fh_error_stash(&keep);                /* the polling call's error text survives */
    t->in_handler++;
    fn(&tok, hbuf, m.payload_len, m.args, m.nargs);
    t->in_handler--;
    fh_error_unstash(&keep);
    if (is_req && !tok.replied)
        owe_credit(p, src, m.src_path);
}
