/*
 * ibv_error.c -- verbs conduit: what happens when something breaks.
 *
 * Error completions (ibv_handle_error).  The first error on a connection
 * (its status) is what every later operation on it reports; a flush after
 * it reports the same cause.  RETRY_EXC and friends mean the peer is dead
 * or unreachable (FH_ERR_PEER_DEAD); the rest FH_ERR_TRANSPORT.
 *
 * Async events.  Some failures produce no completion at all: the responder
 * side of a bad remote key (on hardware its QP goes to ERR with
 * IBV_EVENT_QP_ACCESS_ERR and nothing of its own was posted; rxe raises no
 * QP event but flushes what is posted later), a CQ overrun
 * (IBV_EVENT_CQ_ERR: the completions that did not fit are lost; rxe does
 * raise this one), a dead device (IBV_EVENT_DEVICE_FATAL).  The context's
 * async fd is made non-blocking at
 * open, and every IBV_ASYNC_EVERY-th poll of each path drains it (one
 * drainer at a time: c->async_busy).  The drainer only flags: a QP error
 * on the connection's async_err (and its path's conn_err_pending), a CQ or
 * SRQ error on the path, a device fatal error on the conduit.  Each path
 * applies its own flags at its next poll (calls on one path are serialized,
 * so only the owner touches its ops):
 *   - a broken connection: its status becomes FH_ERR_TRANSPORT (later posts
 *     on it fail naming the peer), the QP is moved to ERR (so a provider
 *     flushes what it still holds), and every operation posted on it and
 *     not completed yet completes now with that error (on_complete);
 *   - a broken path or device: every outstanding operation of the path
 *     completes with FH_ERR_TRANSPORT, later posts fail, and later polls
 *     return FH_ERR_TRANSPORT.
 * An operation failed this way stays out of the free lists (a "zombie")
 * until the provider returns its completion, which then only frees it, so
 * a late flush cannot complete it twice.  Unsignaled AM sends carry no
 * context and cannot be failed: the runtime learns of them by the
 * connection's later errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "ibv_internal.h"
#include "firehose/util/log.h"

static const char *ibv_kind_str(int kind)
{
    switch (kind) {
    case IBV_OP_PUT: return "put";
    case IBV_OP_GET: return "get";
    case IBV_OP_SEND:
    case IBV_OP_UNSIG: return "active message";
    default: return "operation";
    }
}

/* Releases a send-side op (after its completion) and makes the upcall,
 * unless ibv_fail_live made it already (a zombie). */
void ibv_finish(struct fh_cpath *p, struct ibv_op *op, int status)
{
    struct fh_conduit *c = p->c;
    const int upcall = !op->zombie;
    op->live = 0;
    op->zombie = 0;
    switch (op->kind) {
    case IBV_OP_PUT:
    case IBV_OP_GET: {
        void *ctx = op->op_ctx;
        op->next = p->op_free;
        p->op_free = op;
        if (upcall)
            c->up.on_complete(p->upcall_arg, ctx, status);
        break;
    }
    case IBV_OP_SEND:
        if (op->buf) {
            op->next = p->slot_free;
            p->slot_free = op;
        } else {
            op->next = p->op_free;
            p->op_free = op;
        }
        break;
    default:
        break;              /* IBV_OP_UNSIG: nothing to release */
    }
}

void ibv_handle_error(struct fh_cpath *p, const struct ibv_ev *v)
{
    struct ibv_op *op = (struct ibv_op *)(uintptr_t)v->wr_id;
    const enum ibv_wc_status ws = (enum ibv_wc_status)v->status;
    if (!op) {
        fh_log_error("ibv: path %d: error completion without context: %s",
                     p->index, ibv_wc_status_str(ws));
        return;
    }
    if (op->kind == IBV_OP_RECV) {
        struct ibv_conn *k = ibv_conn_by_qpn(p, v->qp_num);
        if (ws != IBV_WC_WR_FLUSH_ERR)
            fh_log_error("ibv: %s: receive on path %d failed: %s "
                         "(vendor_err 0x%x)%s", k ? FH_RANK_NAME(k->rank) : "unknown peer",
                         p->index,
                         ibv_wc_status_str(ws), v->vendor_err,
                         ws == IBV_WC_LOC_LEN_ERR
                             ? " (message over am_max_packet?)" : "");
        ibv_repost(p, op);
        return;
    }
    struct ibv_conn *k = op->conn;
    int st = ibv_err_status(ws);
    if (k->status == FH_OK) {
        k->status = st;
    } else if (ws == IBV_WC_WR_FLUSH_ERR) {
        st = k->status;     /* a flush after the real error: same cause */
    }
    k->sq_used -= op->reclaim <= k->sq_used ? op->reclaim : k->sq_used;
    if (k->nerr++ == 0 || ws != IBV_WC_WR_FLUSH_ERR) {
        char what[64];
        if (op->kind == IBV_OP_PUT || op->kind == IBV_OP_GET)
            snprintf(what, sizeof what, "%s of %zu bytes",
                     ibv_kind_str(op->kind), op->len);
        else
            snprintf(what, sizeof what, "%s", ibv_kind_str(op->kind));
        fh_log_error("ibv: %s: %s from path %d to its path %d failed: "
                     "%s (vendor_err 0x%x)%s", FH_RANK_NAME(k->rank), what, p->index,
                     k->rpath, ibv_wc_status_str(ws), v->vendor_err,
                     st == FH_ERR_PEER_DEAD
                         ? "; the peer is dead or unreachable"
                         : ws == IBV_WC_REM_ACCESS_ERR
                               ? "; remote key or address out of range"
                               : "");
    }
    ibv_finish(p, op, st);
}

/* Ops of a batch the provider refused: complete them with an error. */
int ibv_deliver_failed(struct fh_cpath *p)
{
    int n = 0;
    while (p->failed) {
        struct ibv_op *op = p->failed;
        p->failed = op->next;
        int st = op->conn && op->conn->status ? op->conn->status
                                              : FH_ERR_TRANSPORT;
        ibv_finish(p, op, st);
        n++;
    }
    return n;
}


/* Every live op of p (on connection k, or all with k NULL) completes now
 * with status and becomes a zombie.  Returns the upcalls made. */
static int ibv_fail_live(struct fh_cpath *p, const struct ibv_conn *k,
                         int status)
{
    int n = 0;
    for (size_t i = 0; i < p->nops + p->nslots; i++) {
        struct ibv_op *op = i < p->nops ? &p->ops[i] : &p->slots[i - p->nops];
        if (!op->live || op->zombie || (k && op->conn != k))
            continue;
        op->zombie = 1;
        if (op->kind == IBV_OP_PUT || op->kind == IBV_OP_GET) {
            p->c->up.on_complete(p->upcall_arg, op->op_ctx, status);
            n++;
        }
    }
    return n;
}

int ibv_async_init(struct fh_conduit *c)
{
    int fl = fcntl(c->ctx->async_fd, F_GETFL);
    if (fl < 0 || fcntl(c->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return fh_set_error(FH_ERR_TRANSPORT, "ibv: %s: cannot make the "
                            "async event fd non-blocking: %s", c->devname,
                            strerror(errno));
    return FH_OK;
}

static void ibv_async_qp(struct fh_conduit *c, struct ibv_qp *qp,
                         enum ibv_event_type t)
{
    struct ibv_conn *k = qp ? qp->qp_context : NULL;
    if (!k || !k->owner) {
        fh_log_error("ibv: %s: %s on a QP of no connection", c->devname,
                     ibv_event_type_str(t));
        return;
    }
    int none = FH_OK;
    if (atomic_compare_exchange_strong(&k->async_err, &none,
                                       FH_ERR_TRANSPORT)) {
        fh_log_error("ibv: %s: %s on the connection from path %d to its "
                     "path %d: the connection is broken", FH_RANK_NAME(k->rank),
                     ibv_event_type_str(t), k->owner->index, k->rpath);
        atomic_fetch_add(&k->owner->conn_err_pending, 1);
    }
}

/* Reads every pending async event (non-blocking) and flags its object. */
static void ibv_async_drain(struct fh_conduit *c)
{
    if (atomic_flag_test_and_set(&c->async_busy))
        return;                 /* another path drains right now */
    struct ibv_async_event ev;
    while (ibv_get_async_event(c->ctx, &ev) == 0) {
        const enum ibv_event_type t = ev.event_type;
        switch (t) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_PATH_MIG_ERR:
            ibv_async_qp(c, ev.element.qp, t);
            break;
        case IBV_EVENT_CQ_ERR:
        case IBV_EVENT_SRQ_ERR: {
            struct fh_cpath *p = t == IBV_EVENT_CQ_ERR
                                     ? ev.element.cq->cq_context
                                     : ev.element.srq->srq_context;
            fh_log_error("ibv: %s: %s on path %d: its operations fail",
                         c->devname, ibv_event_type_str(t), p ? p->index : -1);
            if (p)
                atomic_store(&p->path_err, FH_ERR_TRANSPORT);
            break;
        }
        case IBV_EVENT_DEVICE_FATAL:
            fh_log_error("ibv: %s: device fatal error: every operation on "
                         "it fails", c->devname);
            atomic_store(&c->dev_err, FH_ERR_TRANSPORT);
            break;
        case IBV_EVENT_PORT_ERR:
            fh_log_error("ibv: %s port %u went down (peers unreachable until "
                         "it is back)", c->devname, c->port);
            break;
        default:
            fh_log_verbose(2, "ibv: %s: async event %s", c->devname,
                           ibv_event_type_str(t));
            break;
        }
        ibv_ack_async_event(&ev);
    }
    atomic_flag_clear(&c->async_busy);
}

int ibv_check_trouble(struct fh_cpath *p, int drain)
{
    struct fh_conduit *c = p->c;
    int n = 0;
    if (drain)
        ibv_async_drain(c);
    if (atomic_load_explicit(&p->conn_err_pending, memory_order_relaxed) &&
        atomic_exchange(&p->conn_err_pending, 0) != 0) {
        for (size_t i = 0; i < p->nconns; i++) {
            struct ibv_conn *k = &p->conns[i];
            int e = atomic_exchange(&k->async_err, FH_OK);
            if (e == FH_OK)
                continue;
            if (k->status == FH_OK)
                k->status = e;
            struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
            ibv_modify_qp(k->qp, &a, IBV_QP_STATE);  /* flush what it holds */
            int f = ibv_fail_live(p, k, k->status);
            fh_log_error("ibv: %s: connection from path %d to its path "
                         "%d broken: %d outstanding operation(s) failed, "
                         "later ones refused", FH_RANK_NAME(k->rank), p->index, k->rpath, f);
            n += f;
        }
    }
    if (p->err == FH_OK) {
        int e = atomic_load_explicit(&c->dev_err, memory_order_relaxed);
        if (e == FH_OK)
            e = atomic_load_explicit(&p->path_err, memory_order_relaxed);
        if (e != FH_OK) {
            p->err = e;
            int f = ibv_fail_live(p, NULL, e);
            fh_log_error("ibv: path %d on %s broken: %d outstanding "
                         "operation(s) failed, later calls fail", p->index,
                         c->devname, f);
            n += f;
        }
    }
    return n;
}
