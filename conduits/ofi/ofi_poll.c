/*
 * ofi_poll.c -- libfabric conduit: a path's poll -- its completions (sends,
 * RMAs, received AMs through ofi_rx.c's checks to the runtime, receive
 * buffers reposted), its completion errors (a lost connection:
 * ofi_cm_redial.c), and the scan for RMAs past FH_OFI_RMA_TIMEOUT
 * (ofi_rma_expire, probing through ofi_rma_probe.c).  The receive space
 * and the send slots it recycles are set up by ofi_path.c (its top comment).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ofi_internal.h"
#include "firehose/util/log.h"
#include "conduits/util/cu.h"

#define OFI_CQ_BATCH   32
#define OFI_ALIGN      16                   /* alignment of on_am buffers */
/* A receive longer than its buffer (FI_ETRUNC): forge_test greps for it. */
#define TRUNC_WHY "message truncated by the provider (longer than the receive space)"

static void ofi_maybe_repost(struct fh_cpath *p, struct ofi_op *rb)
{
    if (!rb->repost || rb->busy != 0 || rb->single)
        return;      /* the drain is posted by ofi_retry_reposts only */
    if (rb->conn != NULL) {
        /* A connection that is not up takes no more messages. */
        if (atomic_load_explicit(&rb->conn->state, memory_order_relaxed) != OFI_CONN_UP)
            rb->repost = 0;
        else if (ofi_post_rbuf(p, rb))
            atomic_store(&rb->conn->state, OFI_CONN_DOWN);
        return;
    }
    if (ofi_post_rbuf(p, rb))
        fh_fatal("ofi: path %d: cannot repost receive buffer", p->index);
}

/* One on_am upcall from src (rank * npaths + path) with a buffer aligned to
 * OFI_ALIGN.  The receive buffer stays busy (not reposted) during the call.
 * len <= am_max_packet (ofi_rx.c checked it), the size of a bounce buffer. */
static void ofi_upcall(void *arg, void *rbv, uint32_t src, const char *buf,
                       size_t len)
{
    struct fh_cpath *p = arg;
    struct ofi_op *rb = rbv;
    struct fh_conduit *c = p->c;
    assert(len <= c->am_max_packet && src < p->rx.nsrc);
    char *tmp = NULL;
    if (((uintptr_t)buf & (OFI_ALIGN - 1)) && len) {
        int d = p->depth;
        char *b;
        if (d < OFI_BOUNCE_DEPTH) {
            if (!p->bounce[d])
                p->bounce[d] = cu_alloc_pages(c->am_max_packet);
            b = p->bounce[d];
        } else {
            b = tmp = cu_alloc_pages(len);
        }
        if (!b)
            fh_fatal("ofi: out of memory for a receive bounce buffer");
        memcpy(b, buf, len);
        buf = b;
    }
    const uint32_t np = (uint32_t)c->cfg.npaths;
    p->depth++;
    rb->busy++;
    c->up.on_am(p->upcall_arg, (int)(src / np), (int)(src % np), buf, len);
    rb->busy--;
    p->depth--;
    free(tmp);
}

/* A dropped message: the runtime counts and logs it. */
static void ofi_drop(void *arg, int64_t src, const char *why)
{
    struct fh_cpath *p = arg;
    struct fh_conduit *c = p->c;
    int rank = src < 0 ? -1 : (int)(src / c->cfg.npaths);
    c->up.on_drop(p->upcall_arg, rank, why);
}

/* A held message keeps its receive buffer from being reposted. */
static void ofi_keep(void *arg, void *rbv, int delta)
{
    struct fh_cpath *p = arg;
    struct ofi_op *rb = rbv;
    rb->busy += delta;
    if (delta < 0)
        ofi_maybe_repost(p, rb);
}

void ofi_path_rx_reset(struct fh_cpath *p, uint32_t src)
{
    const struct ofi_rx_sink sink = {ofi_upcall, ofi_drop, ofi_keep, p};
    ofi_rx_reset(&p->rx, src, &sink);
}

/* A receive completion (from: the source the provider reported): hand the
 * message to ofi_rx.c, then repost the buffer once the provider released
 * it and nothing uses it any more. */
static void ofi_deliver(struct fh_cpath *p, struct ofi_op *rb,
                        const struct fi_cq_data_entry *e, fi_addr_t from)
{
    if (rb->conn != NULL) {
        struct ofi_conn *k = rb->conn;
        int st = atomic_load_explicit(&k->state, memory_order_relaxed);
        if (st == OFI_CONN_SETUP) {
            ofi_cm_on_proof(p, rb, e->len);   /* its first message */
            return;
        }
        if (st != OFI_CONN_UP)
            return;
        rb->repost = 1;
        if (!p->c->connected) {
            p->c->up.on_drop(p->upcall_arg, (int)(k->src / (uint32_t)p->c->cfg.npaths),
                             "message before the end of start-up");
        } else {
            struct ofi_ctl_msg m;
            unsigned kind = p->index == 0 ? ofi_rx_ctl(&p->rx, rb->buf, e->len, &m) : 0;
            if (kind == OFI_AMH_REDIAL) {
                ofi_cm_on_redial(p, k->src, &m);
            } else if (kind != 0) {
                ofi_probe_on_ctl(p, k->src, kind, &m);
            } else {
                const struct ofi_rx_sink sink = {ofi_upcall, ofi_drop, ofi_keep, p};
                ofi_rx_message(&p->rx, k->src, rb->buf, e->len, rb, &sink);
            }
        }
        ofi_maybe_repost(p, rb);
        return;
    }
    int is_msg = (e->flags & FI_RECV) && !(e->len == 0 && e->buf == NULL);
    if ((e->flags & FI_MULTI_RECV) || rb->single)
        rb->repost = 1;      /* released (the drain: by its one message) */
    if (rb->single && is_msg && p->ndrained++ == 0)
        fh_log_verbose(1, "ofi: path %d: the provider refused a multi-recv buffer "
                       "(unexpected messages hold its receive entries): draining them "
                       "one by one", p->index);
    if (is_msg) {
        const struct ofi_rx_sink sink = {ofi_upcall, ofi_drop, ofi_keep, p};
        const char *buf = e->buf ? (const char *)e->buf : rb->buf;
        ofi_rx_message(&p->rx, from, buf, e->len, rb, &sink);
    }
    ofi_maybe_repost(p, rb);
}

static void ofi_retry_reposts(struct fh_cpath *p)
{
    p->repost_pending = 0;
    for (size_t i = 0; i < p->nrbufs; i++) {
        struct ofi_op *rb = &p->rbufs[i];
        ofi_maybe_repost(p, rb);
    }
    /* A multi-recv buffer the provider still refuses: take one unexpected
     * message with the drain receive ("Drain", ofi_path.c). */
    bool refused = false;
    for (size_t i = 0; i < p->nrbufs; i++)
        refused |= p->rbufs[i].repost && p->rbufs[i].busy == 0;
    if (refused && p->drain.repost && p->drain.busy == 0 && ofi_post_rbuf(p, &p->drain))
        fh_fatal("ofi: path %d: cannot post the drain receive", p->index);
    /* MSG mode: the list only grows while paths poll (ofi_cm.c conn_new). */
    for (struct ofi_conn *k = atomic_load_explicit(&p->c->conns, memory_order_acquire);
         k != NULL; k = k->next)
        if (k->p == p && k->rbufs != NULL)
            for (size_t i = 0; i < k->nrbufs; i++)
                ofi_maybe_repost(p, &k->rbufs[i]);
}

/* MSG: connection k, up until now, broke under one of its operations:
 * down, and its path looks at it (ofi_cm_redial.c: lost, made again). */
static void conn_broken(struct ofi_conn *k)
{
    int up = OFI_CONN_UP;
    if (atomic_compare_exchange_strong(&k->state, &up, OFI_CONN_DOWN))
        atomic_store(&k->p->cm_work, 1);
}

static void ofi_handle_error(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    struct fi_cq_err_entry e;
    memset(&e, 0, sizeof e);
    ssize_t r = fi_cq_readerr(p->cq, &e, 0);
    if (r != 1) {
        if (r != -FI_EAGAIN)
            fh_log_error("ofi: path %d: fi_cq_readerr: %s", p->index,
                         fi_strerror((int)-r));
        return;
    }
    char sbuf[256];
    const char *detail = fi_cq_strerror(p->cq, e.prov_errno, e.err_data,
                                        sbuf, sizeof sbuf);
    if (!detail)
        detail = "";
    struct ofi_op *op = e.op_context;
    if (!op) {
        /* shm 1.17 reports failed fast-path (CMA) RMA, e.g. to an exited
         * peer, without the operation's context: we cannot say which op or
         * peer it was (the launcher's watchdog reports dead ranks). */
        if (p->ctxless_errors++ < 5 || p->ctxless_errors % 1000 == 0)
            fh_log_error("ofi: path %d: error completion without context "
                         "(#%lu): %s (%s)", p->index, p->ctxless_errors,
                         fi_strerror(e.err), detail);
        return;
    }
    switch (op->kind) {
    case OFI_OP_LOST:
        break;                  /* failed already (ofi_rma_expire) */
    case OFI_OP_PUT:
    case OFI_OP_GET: {
        ofi_rma_done(p, op);
        int st = ofi_err_to_fh(e.err);
        /* tcp reports a dropped connection as FI_ECANCELED with the socket
         * errno (ENOTCONN, ECONNRESET, ...) as prov_errno. */
        if (st != FH_ERR_PEER_DEAD && e.prov_errno > 0 &&
            ofi_err_to_fh(e.prov_errno) == FH_ERR_PEER_DEAD)
            st = FH_ERR_PEER_DEAD;
        /* MSG: the provider failed it with its connection (a socket error,
         * or cancelled as the connection broke: the RMAs of a connection
         * we close are failed before, fail_live).  No event may say so
         * (a socket that broke on our side), and every later RMA on it
         * would fail the same way: it is down, and made again. */
        if (op->conn != NULL && (st == FH_ERR_PEER_DEAD || e.err == FI_ECANCELED)) {
            st = FH_ERR_PEER_DEAD;
            conn_broken(op->conn);
        }
        if (st == FH_ERR_AGAIN || st == FH_ERR_NO_MEMORY)
            st = FH_ERR_TRANSPORT;
        fh_log_error("ofi: path %d: %s %s (path %d) at 0x%llx (+%zu) failed: %s (%s)",
                     p->index, op->kind == OFI_OP_PUT ? "put to" : "get from",
                     FH_RANK_NAME(op->rank), op->rpath, (unsigned long long)op->raddr, op->len,
                     fi_strerror(e.err), detail);
        void *ctx = op->op_ctx;
        op->next = p->op_free;
        p->op_free = op;
        c->up.on_complete(p->upcall_arg, ctx, st);
        break;
    }
    case OFI_OP_SEND:
        if (c->msg && c->connected) {
            /* Its connection was lost: made again (ofi_cm_redial.c), the
             * message is not. */
            fh_log_error("ofi: path %d: active message to %s path %d lost with its "
                         "connection: %s (%s)", p->index, FH_RANK_NAME(op->rank), op->rpath,
                         fi_strerror(e.err), detail);
            op->conn = NULL;
            op->next = p->slot_free;
            p->slot_free = op;
            break;
        }
        fh_fatal("ofi: path %d: active message to %s path %d failed, "
                 "%s unreachable: %s (%s)", p->index, FH_RANK_NAME(op->rank),
                 op->rpath, FH_RANK_NAME(op->rank), fi_strerror(e.err), detail);
    case OFI_OP_RECV:
        if (op->conn != NULL) {
            /* A connection's receive failed: the connection is over (its
             * peer is gone, or we closed it).  The provider may have
             * reported the shutdown on the event queue first (path 0's
             * poll then marked it DOWN, and this path's may have closed it
             * since, before reading this entry): a truncation is a drop
             * in every state, counted against the sender if it was ever
             * proven. */
            int st = atomic_load(&op->conn->state);
            int rank = (int)(op->conn->src / (uint32_t)c->cfg.npaths);
            if (e.err == FI_ETRUNC && !op->conn->proven)
                ofi_drop(p, -1, TRUNC_WHY " on an unproven connection");
            else if (e.err == FI_ETRUNC)
                c->up.on_drop(p->upcall_arg, rank, TRUNC_WHY "; its connection ends");
            else if (e.err != FI_ECANCELED && st == OFI_CONN_UP)
                fh_log_verbose(1, "ofi: path %d: receive from %s failed: %s",
                               p->index, FH_RANK_NAME(rank), fi_strerror(e.err));
            else if (e.err != FI_ECANCELED && st == OFI_CONN_SETUP && op->conn->pending)
                ofi_drop(p, -1, "connection whose proof could not be received");
            if (st == OFI_CONN_UP)      /* cancelled too: ours are DEAD first */
                conn_broken(op->conn);
            op->repost = 0;
            break;
        }
        if (e.err == FI_ECANCELED)
            break;              /* endpoint shutting down */
        if (e.err == FI_ETRUNC)
            ofi_drop(p, -1, TRUNC_WHY);
        else
            fh_log_error("ofi: path %d: receive failed: %s (%s)", p->index,
                         fi_strerror(e.err), detail);
        if (op->single) {
            op->repost = 1;     /* the drain is free again (ofi_retry_reposts) */
            p->repost_pending = 1;
        } else if (e.flags & FI_MULTI_RECV) {
            op->repost = 1;
            if (op->busy == 0 && ofi_post_rbuf(p, op))
                fh_fatal("ofi: path %d: cannot repost receive buffer",
                         p->index);
        }
        break;
    default:
        fh_log_error("ofi: path %d: error completion with unknown context: "
                     "%s (%s)", p->index, fi_strerror(e.err), detail);
    }
}

int ofi_wait_fds(struct fh_cpath *p, int *fds, int max)
{
    struct fh_conduit *c = p->c;
    struct fid *fid[2];
    int n = 0;
    if (p->cq_fd >= 0 && n < max) {
        fid[n] = &p->cq->fid;
        fds[n++] = p->cq_fd;
    }
    if (p->index == 0 && c->msg && c->eq_fd >= 0 && n < max) {
        fid[n] = &c->eq->fid;
        fds[n++] = c->eq_fd;
        c->next_eq = 0;            /* the poll after the sleep reads it */
    }
    if (n == 0 || p->repost_pending)
        return 0;
    if (p->ws != NULL && p->cq_fd >= 0) {
        /* reset_waits: fi_wait with no timeout resets the set's signal and
         * says whether anything is ready (0) or not (-FI_ETIMEDOUT). */
        int ret = fi_wait(p->ws, 0);
        return ret == -FI_ETIMEDOUT ? n : ret == 0 ? -1 : 0;
    }
    int ret = fi_trywait(c->fabric, fid, n);
    return ret == 0 ? n : ret == -FI_EAGAIN ? -1 : 0;
}

int ofi_poll(struct fh_cpath *p, int max)
{
    struct fh_conduit *c = p->c;
    struct fi_cq_data_entry ent[OFI_CQ_BATCH];
    fi_addr_t from[OFI_CQ_BATCH];
    int done = 0;

    if (p->repost_pending)
        ofi_retry_reposts(p);
    if (c->msg && p->index == 0 && c->connected)
        ofi_cm_poll_events(c);
    while (done < max) {
        size_t want = (size_t)(max - done);
        if (want > OFI_CQ_BATCH)
            want = OFI_CQ_BATCH;
        ssize_t n = c->msg ? fi_cq_read(p->cq, ent, want)
                           : fi_cq_readfrom(p->cq, ent, want, from);
        if (n == -FI_EAGAIN)
            break;
        if (n == -FI_EAVAIL) {
            ofi_handle_error(p);
            done++;
            continue;
        }
        if (n < 0) {
            fh_log_error("ofi: path %d: fi_cq_read: %s", p->index,
                         fi_strerror((int)-n));
            return FH_ERR_TRANSPORT;
        }
        for (ssize_t i = 0; i < n; i++) {
            struct ofi_op *op = ent[i].op_context;
            if (!op)
                continue;
            switch (op->kind) {
            case OFI_OP_LOST:
                break;                /* failed already (ofi_rma_expire) */
            case OFI_OP_PUT:
            case OFI_OP_GET: {
                ofi_rma_done(p, op);
                void *ctx = op->op_ctx;
                op->next = p->op_free;
                p->op_free = op;
                c->up.on_complete(p->upcall_arg, ctx, FH_OK);
                break;
            }
            case OFI_OP_SEND:
                if (op->conn != NULL) {       /* a handshake proof */
                    op->conn->proof_sent = 1;
                    op->conn = NULL;
                }
                op->next = p->slot_free;
                p->slot_free = op;
                break;
            case OFI_OP_RECV:
                ofi_deliver(p, op, &ent[i], c->msg ? FI_ADDR_NOTAVAIL : from[i]);
                break;
            default:
                fh_log_error("ofi: path %d: completion with unknown context",
                             p->index);
            }
        }
        done += (int)n;
        if ((size_t)n < want)
            break;
    }
    if (p->repost_pending)
        ofi_retry_reposts(p);
    if (c->msg && p->index == 0 && c->connected && c->npending != 0)
        ofi_cm_expire(c);
    p->npolls++;
    if (c->msg && c->connected
        && (p->lost != 0 || atomic_load_explicit(&p->cm_work, memory_order_relaxed)))
        ofi_cm_redial_poll(p);
    if (p->rma_live != 0 && c->rma_timeout > 0 && (++p->scan_tick & 255) == 0)
        ofi_rma_expire(p);
    return done;
}

/* Expiry (FH_OFI_RMA_TIMEOUT, MSG mode).  The libfabric tcp provider that
 * meets a fault in the target's memory (a get from pages made PROT_NONE
 * after their key was given out: its send fails with EFAULT after the
 * header left) logs a warning and stops serving the connection: the get
 * would wait for ever.  So every live RMA ages by one per scan (a scan
 * every timeout/4 at most, from the poll); one seen in 5 scans is at least
 * the timeout old.  Its target is then probed (ofi_rma_probe.c: a target
 * that computes is waited for); when the answers show it polled and the
 * RMA is still incomplete, it fails (FH_ERR_TRANSPORT, rank, path, address and
 * length in the log and, through the runtime, in fh_last_error()), and so
 * does every other live RMA of its connection, which is closed: its
 * endpoint closed first, so the provider writes into none of their
 * buffers afterwards.  Their records are never reused (OFI_OP_LOST). */
#define OFI_RMA_SCANS 5
void ofi_rma_expire(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    double t = ofi_now();
    if (t < p->next_scan)
        return;
    p->next_scan = t + c->rma_timeout / (OFI_RMA_SCANS - 1);
    for (size_t i = 0; i < p->nops; i++) {
        struct ofi_op *op = &p->ops[i];
        if (!op->live || ++op->age < OFI_RMA_SCANS || !ofi_probe_fail(p, op, t))
            continue;
        struct ofi_conn *k = op->conn;
        fh_log_error("ofi: path %d: %s %s (path %d) at 0x%llx (+%zu) did not complete "
                     "in %.0f s (FH_OFI_RMA_TIMEOUT) while we polled: failed, and the "
                     "connection is closed (a provider that met a fault in the target's "
                     "memory stops serving it); the pair is connected again",
                     p->index, op->kind == OFI_OP_PUT ? "put to" : "get from",
                     FH_RANK_NAME(op->rank),
                     op->rpath, (unsigned long long)op->raddr, op->len, c->rma_timeout);
        if (k != NULL)
            ofi_cm_conn_abort(k);
        for (size_t j = 0; j < p->nops; j++) {
            struct ofi_op *o = &p->ops[j];
            if (!o->live || o->conn != k)
                continue;
            ofi_rma_done(p, o);
            o->kind = OFI_OP_LOST;
            c->up.on_complete(p->upcall_arg, o->op_ctx, FH_ERR_TRANSPORT);
        }
        if (k != NULL && c->connected)
            ofi_cm_lost(p, k);          /* made again (ofi_cm_redial.c) */
    }
}
