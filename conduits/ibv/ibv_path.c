/*
 * ibv_path.c -- verbs conduit: paths, AM send/receive, completion polling.
 *
 * Independence.  A path gets, by FH_IBV_TD:
 *   independent (default)  two thread domains, of which it uses one (on
 *                          mlx5 two TDs share a UAR page, so allocating a
 *                          pair gives each path a doorbell page of its own);
 *   shared                 one thread domain;
 *   off                    none: the conduit's plain PD.
 * With a TD, a parent domain (PD + TD) is the PD of the path's QPs and CQ
 * (the CQ and its polling: ibv_cq.c).  Providers without TDs (rxe, siw,
 * ...) fail with EOPNOTSUPP; we then use the plain PD and say so once
 * (FH_VERBOSE=1), and stop trying.  A failure for want of resources
 * (ENOMEM, ...: ibv_td_error_permanent) leaves only that path on the plain
 * PD, said per path; the next path tries again.
 *
 * Receive.  One SRQ per path, with room for nrecv_max = rx_msgs + slack
 * buffers of am_max_packet bytes, of which only rx_per_src per connected
 * peer (+ slack, IBV_RX_SLACK) are allocated, registered and posted: the
 * runtime's credits bound what one source has in flight by rx_per_src and
 * the whole path by rx_msgs, so the SRQ never runs dry; it grows, in
 * chunks of at least IBV_RX_CHUNK buffers, as connections are made
 * (ibv_rx_grow).  A buffer goes back to the SRQ right after its on_am
 * returns (slack covers the buffers held by upcalls still running and the
 * batch being reposted).  Should the device limit max_srq_wr force a
 * smaller SRQ, rnr_retry = 7 makes the senders wait instead of failing.
 *
 * Order.  All AMs from one path to one destination path travel on one RC
 * QP, which delivers in order, and the receive completions of a QP arrive
 * in order on the CQ.  We copy completions into p->ev and hand them out in
 * that order even when on_am polls the path again (nested polls continue
 * the same list), so delivery order is the wire order.  No sequence numbers.
 *
 * Send.  am_send copies: messages up to max_inline go as inline data (the
 * provider copies them into the WQE: no send buffer), larger ones are copied
 * into one of the path's registered send slots.  Slot sends are signaled
 * (the slot comes back with the completion); inline sends are unsignaled
 * except one in every sig_every per QP, whose completion releases the send
 * queue entries of all WRs before it (struct ibv_op.reclaim).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibv_internal.h"
#include "firehose/util/log.h"
#include "conduits/util/cu.h"

#define IBV_NOPS       256                  /* RMA contexts per path */
#define IBV_SQ_DEPTH   128
#define IBV_SQ_DEPTH_LARGE 32               /* path 0 of large jobs */
#define IBV_RX_SLACK   (2 * IBV_CQ_BATCH + 16)
#define IBV_RX_CHUNK   64                   /* SRQ buffers per growth, at least */

/* Thread domain(s) + parent domain, or the plain PD. */
static void ibv_path_domain(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    p->qp_pd = c->pd;
    if (c->env.td == IBV_TD_OFF || c->td_unsupported)
        return;
    int ntd = c->env.td == IBV_TD_INDEPENDENT ? 2 : 1;
    for (int i = 0; i < ntd; i++) {
        struct ibv_td_init_attr ta = {.comp_mask = 0};
        p->td[i] = ibv_alloc_td(c->ctx, &ta);
        if (!p->td[i])
            goto fallback;
    }
    struct ibv_parent_domain_init_attr pa = {
        .pd = c->pd, .td = p->td[0], .comp_mask = 0};
    p->ppd = ibv_alloc_parent_domain(c->ctx, &pa);
    if (!p->ppd)
        goto fallback;
    p->qp_pd = p->ppd;
    return;
fallback: {
        int e = errno;
        const char *what = (p->td[0] && (ntd == 1 || p->td[1]))
                               ? "ibv_alloc_parent_domain" : "ibv_alloc_td";
        for (int i = 0; i < 2; i++)
            if (p->td[i]) {
                ibv_dealloc_td(p->td[i]);
                p->td[i] = NULL;
            }
        if (!ibv_td_error_permanent(e)) {
            fh_log_verbose(1, "ibv: path %d: no thread domain (%s: %s): it "
                           "uses the plain protection domain; later paths "
                           "try again", p->index, what, strerror(e));
            return;
        }
        if (!c->td_unsupported)
            fh_log_verbose(1, "ibv: %s has no thread domains (%s: %s): "
                           "paths use the plain protection domain",
                           c->devname, what, strerror(e ? e : EOPNOTSUPP));
        c->td_unsupported = 1;
    }
}

/* Creates one RC QP on the path (RESET state): with send_ops_flags for
 * the ex posting API, else a plain QP (ibv_create_qp where no parent
 * domain is involved: the most widely supported call). */
int ibv_conn_create(struct fh_cpath *p, struct ibv_conn *k)
{
    struct fh_conduit *c = p->c;
    const int ex = c->post_mode == IBV_POST_EX;
    int ret = ibv_cq_fit(p, p->nrecv, p->nqps + 1);
    if (ret != FH_OK)
        return ret;
    p->nqps++;
    struct ibv_qp_init_attr_ex a = {
        .qp_context = k,
        .send_cq = p->cq,
        .recv_cq = p->cq,
        .srq = p->srq,
        .cap = {.max_send_wr = p->sq_depth, .max_recv_wr = 0,
                .max_send_sge = 1, .max_recv_sge = 0,
                .max_inline_data = c->max_inline},
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
        .comp_mask = IBV_QP_INIT_ATTR_PD |
                     (ex ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0u),
        .pd = p->qp_pd,
        .send_ops_flags = ex ? IBV_QP_EX_WITH_RDMA_WRITE |
                               IBV_QP_EX_WITH_RDMA_READ |
                               IBV_QP_EX_WITH_SEND : 0u,
    };
    if (!ex && p->qp_pd == c->pd) {
        struct ibv_qp_init_attr ca = {
            .qp_context = k, .send_cq = p->cq, .recv_cq = p->cq,
            .srq = p->srq, .cap = a.cap, .qp_type = IBV_QPT_RC,
            .sq_sig_all = 0};
        k->qp = ibv_create_qp(c->pd, &ca);
    } else {
        k->qp = ibv_create_qp_ex(c->ctx, &a);
    }
    if (!k->qp) {
        fh_log_error("ibv: path %d: cannot create the RC QP for %s path "
                     "%d (send depth %u, inline %u): %s", p->index, FH_RANK_NAME(k->rank),
                     k->rpath, p->sq_depth, c->max_inline, strerror(errno));
        return errno == ENOMEM ? FH_ERR_NO_MEMORY : FH_ERR_TRANSPORT;
    }
    if (ex && !(k->qpx = ibv_qp_to_qp_ex(k->qp))) {
        fh_log_error("ibv: %s does not support the ibv_wr_* post API",
                     c->devname);
        return FH_ERR_NOT_SUPPORTED;
    }
    k->owner = p;
    atomic_init(&k->async_err, FH_OK);
    k->unsig_op.kind = IBV_OP_UNSIG;
    k->unsig_op.conn = k;
    k->status = FH_OK;
    return FH_OK;
}

static uint32_t ibv_qpn_hash(uint32_t qpn);

/* Sizes p->qpn_tab (see ibv_internal.h) for every slot: at most half
 * full; filled as slots get their QPs (ibv_qpn_insert). */
static int ibv_qpn_index(struct fh_cpath *p)
{
    size_t size = 4;
    while (size < 2 * p->nconns)
        size *= 2;
    p->qpn_tab = calloc(size, sizeof *p->qpn_tab);
    if (!p->qpn_tab)
        return FH_ERR_NO_MEMORY;
    p->qpn_mask = (uint32_t)(size - 1);
    return FH_OK;
}

void ibv_qpn_insert(struct fh_cpath *p, struct ibv_conn *k)
{
    uint32_t h = ibv_qpn_hash(k->qp->qp_num) & p->qpn_mask;
    while (p->qpn_tab[h] != 0)
        h = (h + 1) & p->qpn_mask;
    p->qpn_tab[h] = (uint32_t)(k - p->conns) + 1;
}

static void ibv_repost_flush(struct fh_cpath *p);

/* Posts n receive buffers from r[0..n) to the SRQ, in chains (with any
 * buffers already queued for reposting). */
static int ibv_rx_post(struct fh_cpath *p, struct ibv_op *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ibv_repost(p, &r[i]);
    ibv_repost_flush(p);
    return FH_OK;
}

int ibv_rx_grow(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    size_t want = (size_t)p->rx_per_src * p->nconnected + IBV_RX_SLACK;
    if (want > p->nrecv_max)
        want = p->nrecv_max;
    if (want <= p->nrecv)
        return FH_OK;
    size_t n = want - p->nrecv;
    if (n < IBV_RX_CHUNK)
        n = p->nrecv_max - p->nrecv < IBV_RX_CHUNK ? p->nrecv_max - p->nrecv
                                                   : IBV_RX_CHUNK;
    int ret = ibv_cq_fit(p, p->nrecv + n, p->nqps);
    if (ret != FH_OK)
        return ret;
    struct ibv_rx_chunk *ch = calloc(1, sizeof *ch);
    if (!ch)
        return FH_ERR_NO_MEMORY;
    ch->next = p->rx_chunks;
    p->rx_chunks = ch;
    ch->ops = calloc(n, sizeof *ch->ops);
    ch->mem = cu_alloc_pages(n * c->rbuf_stride);
    if (!ch->ops || !ch->mem) {
        fh_log_error("ibv: path %d: out of memory for %zu x %zu receive "
                     "bytes", p->index, n, c->rbuf_stride);
        return FH_ERR_NO_MEMORY;
    }
    ch->mr = ibv_reg_mr(c->pd, ch->mem, n * c->rbuf_stride,
                        IBV_ACCESS_LOCAL_WRITE);
    if (!ch->mr) {
        fh_log_error("ibv: path %d: registering %zu bytes of receive "
                     "buffers: %s", p->index, n * c->rbuf_stride,
                     strerror(errno));
        return FH_ERR_NO_MEMORY;
    }
    ch->n = n;
    for (size_t i = 0; i < n; i++) {
        ch->ops[i].kind = IBV_OP_RECV;
        ch->ops[i].buf = ch->mem + i * c->rbuf_stride;
        ch->ops[i].lkey = ch->mr->lkey;
    }
    p->nrecv += n;
    fh_log_verbose(3, "ibv: path %d: %zu receive buffers for %zu "
                   "connections", p->index, p->nrecv, p->nconnected);
    return ibv_rx_post(p, ch->ops, n);
}

int ibv_path_create(struct fh_conduit *c, const fh_path_attr_t *attr,
                    struct fh_cpath **out)
{
    int ret = cu_check_path_create("ibv", c ? &c->cfg : NULL,
                                   c ? c->paths : NULL, c && c->connected,
                                   attr, out);
    if (ret)
        return ret;

    struct fh_cpath *p = calloc(1, sizeof *p);
    if (!p)
        return FH_ERR_NO_MEMORY;
    p->c = c;
    p->index = attr->index;
    atomic_init(&p->conn_err_pending, 0u);
    atomic_init(&p->path_err, FH_OK);
    p->err = FH_OK;
    p->rx_msgs = attr->rx_msgs ? attr->rx_msgs : 1;
    p->rx_per_src = attr->rx_per_src ? attr->rx_per_src : p->rx_msgs;
    p->upcall_arg = attr->upcall_arg;
    c->paths[p->index] = p;     /* so that destroy can clear it uniformly */

    const int nr = c->cfg.nranks, np = c->cfg.npaths;
    p->nconns = p->index == 0 ? (size_t)nr * (size_t)np : (size_t)nr;
    p->sq_depth = p->nconns > 1024 ? IBV_SQ_DEPTH_LARGE : IBV_SQ_DEPTH;
    if (c->dattr.max_qp_wr > 0 && p->sq_depth > (uint32_t)c->dattr.max_qp_wr)
        p->sq_depth = (uint32_t)c->dattr.max_qp_wr;
    p->sig_every = p->sq_depth / 2 ? p->sq_depth / 2 : 1;
    p->nops = IBV_NOPS;
    p->nslots = cu_send_slots(c->rbuf_stride);
    p->nrecv_max = (size_t)p->rx_msgs + IBV_RX_SLACK;
    if (c->dattr.max_srq_wr > 0 &&
        p->nrecv_max > (size_t)c->dattr.max_srq_wr) {
        fh_log_verbose(1, "ibv: path %d: rx_msgs %u exceeds max_srq_wr %d: "
                       "senders may see RNR back-off", p->index, p->rx_msgs,
                       c->dattr.max_srq_wr);
        p->nrecv_max = (size_t)c->dattr.max_srq_wr;
    }
    /* The CQ starts with room for the first receive chunk and no RC QP,
     * and grows as they come (ibv_cq_fit); cqe_full is every peer's. */
    size_t cqe = ibv_cq_need(p, p->nrecv_max, p->nconns);
    size_t cqe0 = ibv_cq_need(p, IBV_RX_SLACK + IBV_RX_CHUNK, 0);
    if (c->dattr.max_cqe > 0 && cqe > (size_t)c->dattr.max_cqe)
        cqe = (size_t)c->dattr.max_cqe;
    p->cqe_full = (int)cqe;
    p->cqe = (int)(cqe0 < cqe ? cqe0 : cqe);

    ibv_path_domain(p);
    if ((ret = ibv_path_cq(p)) != FH_OK)
        goto fail;

    struct ibv_srq_init_attr sa = {
        .srq_context = p,
        .attr = {.max_wr = (uint32_t)p->nrecv_max, .max_sge = 1},
    };
    p->srq = ibv_create_srq(c->pd, &sa);
    if (!p->srq) {
        fh_log_error("ibv: path %d: ibv_create_srq(%zu entries): %s",
                     p->index, p->nrecv_max, strerror(errno));
        ret = FH_ERR_TRANSPORT;
        goto fail;
    }

    p->ops = calloc(p->nops, sizeof *p->ops);
    p->slots = calloc(p->nslots, sizeof *p->slots);
    p->conns = calloc(p->nconns, sizeof *p->conns);
    p->slot_mem = cu_alloc_pages(p->nslots * c->rbuf_stride);
    if (c->post_mode == IBV_POST_CLASSIC)
        p->inl_buf = malloc((size_t)IBV_BATCH_MAX * IBV_INLINE_MAX);
    if (!p->ops || !p->slots || !p->conns || !p->slot_mem ||
        (c->post_mode == IBV_POST_CLASSIC && !p->inl_buf)) {
        fh_log_error("ibv: path %d: out of memory for %zu x %zu send "
                     "bytes", p->index, p->nslots, c->rbuf_stride);
        ret = FH_ERR_NO_MEMORY;
        goto fail;
    }
    p->slot_mr = ibv_reg_mr(c->pd, p->slot_mem, p->nslots * c->rbuf_stride,
                            IBV_ACCESS_LOCAL_WRITE);
    if (!p->slot_mr) {
        fh_log_error("ibv: path %d: registering %zu bytes of AM send slots: "
                     "%s", p->index, p->nslots * c->rbuf_stride,
                     strerror(errno));
        ret = FH_ERR_NO_MEMORY;
        goto fail;
    }
    for (size_t i = 0; i < p->nops; i++) {
        p->ops[i].next = p->op_free;
        p->op_free = &p->ops[i];
    }
    for (size_t i = 0; i < p->nslots; i++) {
        struct ibv_op *s = &p->slots[i];
        s->kind = IBV_OP_SEND;
        s->buf = p->slot_mem + i * c->rbuf_stride;
        s->next = p->slot_free;
        p->slot_free = s;
    }
    for (size_t k = 0; k < p->nconns; k++) {
        struct ibv_conn *cn = &p->conns[k];
        if (p->index == 0) {
            cn->rank = (int)(k / (size_t)np);
            cn->rpath = (int)(k % (size_t)np);
        } else {
            cn->rank = (int)k;
            cn->rpath = 0;
        }
        cn->owner = p;
        cn->state = IBV_CONN_NONE;
    }
    if ((ret = ibv_qpn_index(p)) != FH_OK ||
        (ret = ibv_rx_grow(p)) != FH_OK ||
        (ret = ibv_cm_path_init(p)) != FH_OK)
        goto fail;
    const char *cqs = p->poll_ex ? "extended, polled with ibv_start_poll"
                      : p->cqx   ? "extended, polled with ibv_poll_cq"
                                 : "polled with ibv_poll_cq";
    fh_log_verbose(2, "ibv: path %d: up to %zu RC QPs, made on first use "
                   "(send depth %u, signal every %u), SRQ %zu (up to %zu) x "
                   "%zu bytes (rx_msgs %u, %u per peer), %zu send slots, "
                   "CQ %d entries (%s), %s %d, %s, %s posting", p->index,
                   p->nconns, p->sq_depth, p->sig_every, p->nrecv,
                   p->nrecv_max, c->rbuf_stride, p->rx_msgs, p->rx_per_src,
                   p->nslots, p->cqe, cqs,
                   p->cq_grows ? "growing with the connections up to"
                               : "sized for every peer:", p->cqe_full,
                   p->ppd ? (p->td[1] ? "2 TDs (independent)" : "1 TD")
                          : "plain PD",
                   c->post_mode == IBV_POST_EX ? "ibv_wr_* (ex)"
                                               : "ibv_post_send (classic)");
    *out = p;
    return FH_OK;

fail:
    ibv_path_destroy(p);
    return ret;
}

void ibv_path_destroy(struct fh_cpath *p)
{
    if (!p)
        return;
    struct fh_conduit *c = p->c;
    if (c->connected && p->cq) {
        c->cq_sum.cqe += p->cqe;
        c->cq_sum.full += p->cqe_full;
        c->cq_sum.qps += p->nqps;
        c->cq_sum.paths++;
    }
    ibv_batch_abort(p);
    if (p->conns) {
        for (size_t k = 0; k < p->nconns; k++)
            if (p->conns[k].qp)
                ibv_destroy_qp(p->conns[k].qp);
    }
    ibv_cm_path_fini(p);
    if (p->srq)
        ibv_destroy_srq(p->srq);
    ibv_path_cq_destroy(p);
    if (p->slot_mr)
        ibv_dereg_mr(p->slot_mr);
    while (p->rx_chunks) {
        struct ibv_rx_chunk *ch = p->rx_chunks;
        p->rx_chunks = ch->next;
        if (ch->mr)
            ibv_dereg_mr(ch->mr);
        free(ch->mem);
        free(ch->ops);
        free(ch);
    }
    if (p->ppd)
        ibv_dealloc_pd(p->ppd);
    for (int i = 0; i < 2; i++)
        if (p->td[i])
            ibv_dealloc_td(p->td[i]);
    free(p->conns);
    free(p->qpn_tab);
    free(p->ops);
    free(p->slots);
    free(p->slot_mem);
    free(p->inl_buf);
    if (c->paths[p->index] == p)
        c->paths[p->index] = NULL;
    free(p);
}

int ibv_am_send(struct fh_cpath *p, int rank, int rpath, const void *hdr,
                size_t hdr_len, const void *payload, size_t len)
{
    struct fh_conduit *c = p->c;
    const size_t total = hdr_len + len;
    int ret = cu_check_am_size("ibv", hdr_len, len, c->am_max_packet);
    if (ret)
        return ret;
    struct ibv_conn *k = NULL;
    if ((ret = ibv_conn_for(p, rank, rpath, "am_send", &k)))
        return ret;
    if (p->err != FH_OK)
        return fh_set_error(p->err, "ibv: am_send to %s: path %d is "
                            "broken (device %s)", FH_RANK_NAME(rank), p->index, c->devname);
    if (k->status != FH_OK)
        return fh_set_error(k->status, "ibv: %s: connection from path "
                            "%d to its path %d is broken", FH_RANK_NAME(rank), p->index,
                            rpath);
    const int inl = total <= c->max_inline;
    struct ibv_op *op = NULL;
    if (k->sq_used >= p->sq_depth)
        goto again;
    if (!inl) {
        if (!(op = p->slot_free))
            goto again;
        p->slot_free = op->next;
        memcpy(op->buf, hdr, hdr_len);
        if (len)
            memcpy(op->buf + hdr_len, payload, len);
    } else if (k->unsig + 1 >= p->sig_every) {
        if (!(op = p->op_free))
            goto again;
        p->op_free = op->next;
        op->kind = IBV_OP_SEND;
        op->buf = NULL;
    }
    char tmp[IBV_INLINE_MAX];
    struct ibv_wrdesc d = {.opcode = IBV_WR_SEND, .op = op, .inl = inl,
                           .len = (uint32_t)total};
    if (inl) {
        /* One contiguous buffer: header and payload in one inline copy. */
        if (hdr_len)
            memcpy(tmp, hdr, hdr_len);
        if (len)
            memcpy(tmp + hdr_len, payload, len);
        d.inl_data = tmp;
    } else {
        d.lkey = p->slot_mr->lkey;
        d.addr = (uintptr_t)op->buf;
    }
    ibv_post_wr(p, k, &d);
    return ibv_batch_close(p);

again:
    /* Ring what is pending so that completions (and slots) can come. */
    ibv_batch_close(p);
    return FH_ERR_AGAIN;
}

/* ------------------------------------------------------------ polling */

static uint32_t ibv_qpn_hash(uint32_t qpn)
{
    return qpn * 0x9E3779B1u;     /* QP numbers are often consecutive */
}

struct ibv_conn *ibv_conn_by_qpn(struct fh_cpath *p, uint32_t qpn)
{
    for (uint32_t h = ibv_qpn_hash(qpn) & p->qpn_mask;; h = (h + 1) & p->qpn_mask) {
        uint32_t v = p->qpn_tab[h];
        if (v == 0)
            return NULL;
        if (p->conns[v - 1].qp->qp_num == qpn)
            return &p->conns[v - 1];
    }
}

static void ibv_repost_flush(struct fh_cpath *p)
{
    if (!p->nrepost)
        return;
    for (int q = 0; q + 1 < p->nrepost; q++)
        p->rwr[q].next = &p->rwr[q + 1];
    p->rwr[p->nrepost - 1].next = NULL;
    struct ibv_recv_wr *bad = NULL;
    int e = ibv_post_srq_recv(p->srq, p->rwr, &bad);
    p->nrepost = 0;
    if (e)
        fh_fatal("ibv: path %d: cannot repost receive buffers: %s", p->index,
                 strerror(e));
}

void ibv_repost(struct fh_cpath *p, struct ibv_op *r)
{
    int j = p->nrepost++;
    p->rsge[j] = (struct ibv_sge){(uintptr_t)r->buf,
                                  (uint32_t)p->c->rbuf_stride, r->lkey};
    p->rwr[j] = (struct ibv_recv_wr){.wr_id = (uintptr_t)r,
                                     .sg_list = &p->rsge[j], .num_sge = 1};
    if (p->nrepost == IBV_CQ_BATCH)
        ibv_repost_flush(p);
}

int ibv_poll(struct fh_cpath *p, int max)
{
    struct fh_conduit *c = p->c;
    int done = 0;
    if (p->open)
        ibv_batch_close(p);
    if (p->failed)
        done += ibv_deliver_failed(p);
    done += ibv_check_trouble(p, ++p->npoll % IBV_ASYNC_EVERY == 0);
    if (p->err != FH_OK) {
        if (done > 0)
            return done;        /* the failures; the error comes next time */
        return fh_set_error(p->err, "ibv: path %d on %s is broken (see the "
                            "error above)", p->index, c->devname);
    }
    while (done < max) {
        if (p->ev_head == p->ev_n) {
            int want = max - done < IBV_CQ_BATCH ? max - done : IBV_CQ_BATCH;
            p->ev_head = p->ev_n = 0;
            int n = ibv_fetch(p, want);
            if (n < 0) {
                ibv_repost_flush(p);
                return n;
            }
            if (n == 0)
                break;
            p->ev_n = n;
        }
        /* Take the event first: a nested poll continues after it. */
        struct ibv_ev v = p->ev[p->ev_head++];
        struct ibv_op *op = (struct ibv_op *)(uintptr_t)v.wr_id;
        done++;
        if (op && (op->kind == IBV_OP_CMRECV || op->kind == IBV_OP_CMSEND)) {
            ibv_cm_event(p, &v, op);
            continue;
        }
        if (v.status != IBV_WC_SUCCESS) {
            ibv_handle_error(p, &v);
            continue;
        }
        if (!op) {
            fh_log_error("ibv: path %d: completion without context (qp %u, "
                         "%u bytes)", p->index, v.qp_num, v.len);
            continue;
        }
        switch (op->kind) {
        case IBV_OP_RECV: {
            /* The sender is the QP's peer, whatever the bytes say. */
            const struct ibv_conn *k = ibv_conn_by_qpn(p, v.qp_num);
            if (!k)
                c->up.on_drop(p->upcall_arg, -1, "a message on a QP of no connection");
            else if (v.len > c->am_max_packet)
                c->up.on_drop(p->upcall_arg, k->rank, "message longer than an AM packet");
            else
                c->up.on_am(p->upcall_arg, k->rank, k->rpath, op->buf, v.len);
            ibv_repost(p, op);
            break;
        }
        case IBV_OP_PUT:
        case IBV_OP_GET:
        case IBV_OP_SEND:
            op->conn->sq_used -= op->reclaim;
            ibv_finish(p, op, FH_OK);
            break;
        default:
            fh_log_error("ibv: path %d: completion of an unsignaled send",
                         p->index);
        }
    }
    ibv_repost_flush(p);
    return done;
}
