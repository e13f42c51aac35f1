/*
 * ofi_path.c -- libfabric conduit: paths (a CQ and its endpoints), made and
 * destroyed, and AM send.  Receiving, completions, errors and the RMA
 * timeout's scan are ofi_poll.c's.
 *
 * MSG mode (ofi_cm.c) has no endpoint per path: the path's connections
 * are bound to its CQ, each with rx_per_conn receive buffers of its own,
 * reposted one by one; the sender of a message is the connection its
 * buffer was posted on.  What follows describes RDM mode.
 *
 * Receive space.  Each path posts NRBUF = 2 FI_MULTI_RECV buffers of
 * (rx_msgs + 1) * P bytes (P = am_max_packet + our 16-byte header) and sets
 * FI_OPT_MIN_MULTI_RECV to P, so a buffer is retired by the provider when less than P bytes remain
 * and a message never has to be split.  Why that is enough: when buffer A is
 * retired, the other buffer B takes the following messages; B can only run
 * out after at least rx_msgs further messages (it holds >= rx_msgs * P bytes
 * before retiring), and the runtime allows at most rx_msgs unprocessed
 * messages towards this path, so by then every message of A has been through
 * on_am and A has been reposted (we repost right after the upcalls of the
 * completion that carries FI_MULTI_RECV).  Messages held for reordering
 * (see struct ofi_amh) are unprocessed, so they count against rx_msgs too.
 *
 * AM send.  am_send copies header + payload into one of the path's send
 * slots (registered when the provider wants FI_MR_LOCAL) and posts fi_send
 * with the slot as context; the slot returns to the freelist on completion.
 * We do not use fi_inject: an injected send has no context, so a failure
 * could not name the peer.  No slot or -FI_EAGAIN -> FH_ERR_AGAIN; the
 * runtime then polls this path, which drives the provider's progress.
 *
 * Drain (RDM).  A peer that ignores our credits can fill the provider's
 * receive entries with unexpected messages while both multi-recv buffers
 * are out (released, not yet reposted).  The shm provider then refuses the
 * multi-recv repost with -FI_ENOMEM on every retry -- and nothing else
 * would ever take those messages, so the path stopped receiving for good
 * (burst_test over shm under load: the honest peers' barrier hung).  A plain
 * one-message fi_recv is still accepted then and takes the oldest
 * unexpected message, freeing an entry: while a multi-recv buffer waits to
 * be reposted, every poll posts that one-packet "drain" receive again
 * (ofi_retry_reposts) until the buffer is back.  Its messages go through
 * ofi_rx_message like the others (sequence order holds).
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

#define OFI_NRBUF      2

int ofi_post_rbuf(struct fh_cpath *p, struct ofi_op *rb)
{
    if (rb->single) {
        ssize_t r = fi_recv(p->ep, rb->buf, rb->buf_len, ofi_path_desc(p, p->rbuf_mr),
                            FI_ADDR_UNSPEC, &rb->fctx);
        if (r == -FI_EAGAIN || r == -FI_ENOMEM) {
            p->repost_pending = 1;
            return 0;
        }
        if (r != 0) {
            fh_log_error("ofi: path %d: fi_recv (drain, %zu bytes): %s", p->index,
                         rb->buf_len, fi_strerror((int)-r));
            return FH_ERR_TRANSPORT;
        }
        rb->repost = 0;
        return 0;
    }
    if (rb->conn != NULL) {
        struct ofi_conn *k = rb->conn;
        ssize_t r = fi_recv(k->ep, rb->buf, rb->buf_len, ofi_path_desc(p, k->rmr),
                            0, &rb->fctx);
        if (r == -FI_EAGAIN) {
            rb->repost = 1;
            p->repost_pending = 1;
            return 0;
        }
        rb->repost = 0;
        if (r == 0)
            return 0;
        fh_log_error("ofi: path %d: fi_recv on the connection of %s: %s",
                     p->index, FH_RANK_NAME((int)(k->src / (uint32_t)p->c->cfg.npaths)),
                     fi_strerror((int)-r));
        return FH_ERR_TRANSPORT;
    }
    struct iovec iov = {.iov_base = rb->buf, .iov_len = rb->buf_len};
    void *desc = ofi_path_desc(p, p->rbuf_mr);
    struct fi_msg msg = {
        .msg_iov = &iov,
        .desc = &desc,
        .iov_count = 1,
        .addr = FI_ADDR_UNSPEC,
        .context = &rb->fctx,
    };
    ssize_t ret = fi_recvmsg(p->ep, &msg, FI_MULTI_RECV);
    if (ret == 0) {
        rb->repost = 0;
        return 0;
    }
    /* Out of receive entries (the shm provider says ENOMEM when a burst of
     * unexpected messages -- a peer that ignores our credits -- holds them
     * all): as transient as EAGAIN; the next polls retry. */
    if (ret == -FI_EAGAIN || ret == -FI_ENOMEM) {
        rb->repost = 1;
        p->repost_pending = 1;
        return 0;
    }
    fh_log_error("ofi: path %d: fi_recvmsg(multi-recv %zu bytes): %s",
                 p->index, rb->buf_len, fi_strerror((int)-ret));
    return FH_ERR_TRANSPORT;
}

int ofi_path_create(struct fh_conduit *c, const fh_path_attr_t *attr,
                    struct fh_cpath **out)
{
    /* MSG: a thread path may come after connect (ofi_cm_path_connect). */
    int ret = cu_check_path_create("ofi", c ? &c->cfg : NULL,
                                   c ? c->paths : NULL,
                                   c && c->connected && !(c->msg && attr && attr->index > 0),
                                   attr, out);
    if (ret)
        return ret;

    struct fh_cpath *p = calloc(1, sizeof *p);
    if (!p)
        return FH_ERR_NO_MEMORY;
    p->c = c;
    p->index = attr->index;
    p->cq_fd = -1;
    p->shm_fd = -1;
    p->rx_msgs = attr->rx_msgs ? attr->rx_msgs : 1;
    p->rx_per_conn = attr->rx_per_src ? attr->rx_per_src : p->rx_msgs;
    if (p->rx_per_conn > p->rx_msgs)
        p->rx_per_conn = p->rx_msgs;
    p->upcall_arg = attr->upcall_arg;
    const size_t P = c->am_max_packet + OFI_AMH;   /* wire size */
    const size_t nsrc = (size_t)c->cfg.nranks * (size_t)c->cfg.npaths;
    p->rstride = (P + 63) & ~(size_t)63;
    /* MSG: the connections this path will have (ofi_cm.c: path 0 about one
     * per source, a thread path one per rank), each with its buffers, and
     * the unproven ones that may come and go during start-up. */
    const size_t nconn = p->index == 0 ? nsrc + 1 : (size_t)c->cfg.nranks;
    const size_t conn_rx = c->msg ? nconn * p->rx_per_conn + 2 * 64 : 0;

    /* Sizes of the per-path pools. */
    p->nops = c->tx_size ? c->tx_size : 256;
    if (p->nops < 64)
        p->nops = 64;
    if (p->nops > 4096)
        p->nops = 4096;
    p->nslots = cu_send_slots(P);
    if (c->tx_size && p->nslots > c->tx_size)
        p->nslots = c->tx_size;
    p->nrbufs = c->msg ? 0 : OFI_NRBUF;
    p->rbuf_size = ((size_t)p->rx_msgs + 1) * P;

    /* A CQ with a file descriptor, if the provider has one, so that a
     * long-idle waiter can sleep on it (ofi_wait_fds); measured on tcp:
     * no cost on the 8 B put (7.6 / 7.1 us without / with). */
    struct fi_cq_attr cq_attr = {
        .format = FI_CQ_FORMAT_DATA,   /* buf of multi-recv completions */
        .wait_obj = FI_WAIT_FD,
        .size = p->nops + p->nslots + 2 * (size_t)p->rx_msgs + 64 + conn_rx,
    };
    if (c->reset_waits) {
        /* a wait set ofi_wait_fds resets (ofi_conduit.c: c->reset_waits);
         * path 0 shares the EQ's */
        struct fi_wait_attr wa = {.wait_obj = FI_WAIT_FD};
        if (p->index == 0)
            p->ws = c->ws;
        else if (fi_wait_open(c->fabric, &wa, &p->ws) != 0)
            p->ws = NULL;
        if (p->ws != NULL) {
            cq_attr.wait_obj = FI_WAIT_SET;
            cq_attr.wait_set = p->ws;
        }
    }
    ret = fi_cq_open(c->domain, &cq_attr, &p->cq, NULL);
    if (ret) {
        cq_attr.wait_obj = FI_WAIT_NONE;
        ret = fi_cq_open(c->domain, &cq_attr, &p->cq, NULL);
    } else if (fi_control(p->ws != NULL ? &p->ws->fid : &p->cq->fid, FI_GETWAIT,
                          &p->cq_fd) != 0) {
        p->cq_fd = -1;
    }
    if (ret) {
        fh_log_error("ofi: path %d: fi_cq_open: %s", p->index,
                     fi_strerror(-ret));
        goto fail;
    }
    if (c->msg) {
        p->conn = calloc(nsrc, sizeof *p->conn);
        if (p->conn == NULL) {
            ret = FH_ERR_NO_MEMORY;
            goto fail_fh;
        }
        goto pools;
    }
    ret = fi_endpoint(c->domain, c->info, &p->ep, NULL);
    if (ret) {
        fh_log_error("ofi: path %d: fi_endpoint: %s", p->index,
                     fi_strerror(-ret));
        goto fail;
    }
    ret = fi_ep_bind(p->ep, &c->av->fid, 0);
    if (!ret)
        ret = fi_ep_bind(p->ep, &p->cq->fid, FI_TRANSMIT | FI_RECV);
    if (ret) {
        fh_log_error("ofi: path %d: fi_ep_bind: %s", p->index,
                     fi_strerror(-ret));
        goto fail;
    }
    if (ofi_shm_is(c)) {           /* ofi_shm.c: its file in /dev/shm */
        if (p->index == 0)
            ofi_shm_reclaim();
        if ((ret = ofi_shm_name(p)) != 0)
            goto fail;
    }
    ret = fi_enable(p->ep);
    if (ret) {
        fh_log_error("ofi: path %d: fi_enable: %s", p->index,
                     fi_strerror(-ret));
        goto fail;
    }
    if (ofi_shm_is(c))
        ofi_shm_hold(p);
    /* After fi_enable: shm 1.17 dereferences its receive context (created
     * by fi_enable) in setopt and crashes when called before. */
    size_t min_mr = P;
    ret = fi_setopt(&p->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
                    &min_mr, sizeof min_mr);
    if (ret) {
        fh_log_error("ofi: path %d: FI_OPT_MIN_MULTI_RECV: %s", p->index,
                     fi_strerror(-ret));
        goto fail;
    }

pools:
    /* RMA op contexts. */
    p->ops = calloc(p->nops, sizeof *p->ops);
    /* AM ordering state. */
    p->tx_seq = calloc(nsrc, sizeof *p->tx_seq);
    int rx_ok = ofi_rx_init(&p->rx, c->token, (uint32_t)nsrc, p->rx_msgs,
                            c->am_max_packet) == FH_OK;
    /* AM send slots. */
    p->slots = calloc(p->nslots, sizeof *p->slots);
    p->slot_mem = cu_alloc_pages(p->nslots * P);
    /* Receive buffers. */
    p->rbufs = calloc(p->nrbufs ? p->nrbufs : 1, sizeof *p->rbufs);
    p->rbuf_mem = p->nrbufs ? cu_alloc_pages(p->nrbufs * p->rbuf_size + P) : NULL;
    if (!p->ops || !p->slots || !p->slot_mem || !p->rbufs ||
        (p->nrbufs && !p->rbuf_mem) || !p->tx_seq || !rx_ok) {
        ret = FH_ERR_NO_MEMORY;
        fh_log_error("ofi: path %d: out of memory for %zu x %zu receive "
                     "bytes", p->index, p->nrbufs, p->rbuf_size);
        goto fail_fh;
    }
    for (size_t i = 0; i < p->nops; i++) {
        p->ops[i].next = p->op_free;
        p->op_free = &p->ops[i];
    }
    for (size_t i = 0; i < p->nslots; i++) {
        struct ofi_op *s = &p->slots[i];
        s->kind = OFI_OP_SEND;
        s->buf = p->slot_mem + i * P;
        s->next = p->slot_free;
        p->slot_free = s;
    }
    if (c->mr_local) {
        ret = ofi_mr_reg_path(p, p->slot_mem, p->nslots * P, FI_SEND,
                              &p->slot_mr);
        if (ret)
            goto fail_fh;
        if (p->nrbufs)
            ret = ofi_mr_reg_path(p, p->rbuf_mem, p->nrbufs * p->rbuf_size + P,
                                  FI_RECV, &p->rbuf_mr);
        if (ret)
            goto fail_fh;
    }
    for (size_t i = 0; i < p->nrbufs; i++) {
        struct ofi_op *rb = &p->rbufs[i];
        rb->kind = OFI_OP_RECV;
        rb->buf = p->rbuf_mem + i * p->rbuf_size;
        rb->buf_len = p->rbuf_size;
        ret = ofi_post_rbuf(p, rb);
        if (ret)
            goto fail_fh;
    }
    if (p->nrbufs) {
        /* The drain receive: not posted (repost = 1) until needed. */
        p->drain.kind = OFI_OP_RECV;
        p->drain.single = 1;
        p->drain.repost = 1;
        p->drain.buf = p->rbuf_mem + p->nrbufs * p->rbuf_size;
        p->drain.buf_len = P;
    }

    if (c->msg && c->connected)
        p->tokens = c->tokens;     /* a thread path made after connect */
    c->paths[p->index] = p;
    if (c->msg)
        fh_log_verbose(2, "ofi: path %d: %zu op contexts, %zu send slots, "
                       "%u receive buffers of %zu bytes per connection",
                       p->index, p->nops, p->nslots, p->rx_per_conn, p->rstride);
    else
        fh_log_verbose(2, "ofi: path %d: %zu op contexts, %zu send slots, "
                       "%zu x %zu bytes multi-recv (rx_msgs %u)",
                       p->index, p->nops, p->nslots, p->nrbufs, p->rbuf_size,
                       p->rx_msgs);
    *out = p;
    return FH_OK;

fail:
    ret = FH_ERR_TRANSPORT;
fail_fh:
    c->paths[p->index] = p;    /* so destroy can clear it uniformly */
    ofi_path_destroy(p);
    return ret;
}

void ofi_path_destroy(struct fh_cpath *p)
{
    if (!p)
        return;
    struct fh_conduit *c = p->c;
    if (c->msg)
        ofi_cm_path_destroy(p);     /* its connections, before their CQ */
    free(p->conn);
    /* Closing the endpoint cancels the posted receives. */
    if (p->ep)
        fi_close(&p->ep->fid);
    ofi_shm_release(p);            /* after the provider removed the file */
    if (p->cq)
        fi_close(&p->cq->fid);
    if (p->ws != NULL && p->ws != c->ws)
        fi_close(&p->ws->fid);      /* after the CQ on it */
    if (p->slot_mr)
        ofi_mr_dereg(c, p->slot_mr);
    if (p->rbuf_mr)
        ofi_mr_dereg(c, p->rbuf_mr);
    for (int i = 0; i < OFI_BOUNCE_DEPTH; i++)
        free(p->bounce[i]);
    free(p->ops);
    free(p->tx_seq);
    ofi_rx_fini(&p->rx);
    free(p->slots);
    free(p->slot_mem);
    free(p->rbufs);
    free(p->rbuf_mem);
    if (c->paths[p->index] == p)
        c->paths[p->index] = NULL;
    free(p);
}

int ofi_am_send(struct fh_cpath *p, int rank, int rpath, const void *hdr,
                size_t hdr_len, const void *payload, size_t len)
{
    struct fh_conduit *c = p->c;
    const size_t total = hdr_len + len;
    int bad = cu_check_am_size("ofi", hdr_len, len, c->am_max_packet);
    if (!bad)
        bad = cu_check_dest("ofi", "am_send", &c->cfg, c->connected, rank,
                            rpath);
    if (bad)
        return bad;

    struct fid_ep *ep = NULL;
    fi_addr_t addr = 0;
    if ((bad = ofi_route(p, rank, rpath, &ep, &addr)) != FH_OK)
        return bad;
    struct ofi_op *s = p->slot_free;
    if (!s)
        return FH_ERR_AGAIN;
    const size_t dst = (size_t)rank * (size_t)c->cfg.npaths + (size_t)rpath;
    struct ofi_amh h = {.token = p->tokens[rank], .seq = p->tx_seq[dst]};
    memcpy(s->buf, &h, OFI_AMH);
    if (hdr_len)
        memcpy(s->buf + OFI_AMH, hdr, hdr_len);
    if (len)
        memcpy(s->buf + OFI_AMH + hdr_len, payload, len);
    s->rank = rank;
    s->rpath = rpath;
    ssize_t ret = fi_send(ep, s->buf, OFI_AMH + total,
                          ofi_path_desc(p, p->slot_mr), addr, &s->fctx);
    if (ret == 0) {
        p->slot_free = s->next;
        p->tx_seq[dst]++;
        return FH_OK;
    }
    if (ret == -FI_EAGAIN)
        return FH_ERR_AGAIN;
    fh_log_error("ofi: path %d: fi_send to %s path %d: %s", p->index,
                 FH_RANK_NAME(rank), rpath, fi_strerror((int)-ret));
    return ofi_err_to_fh((int)ret);
}

int ofi_ctl_send(struct fh_cpath *p, uint32_t dst, unsigned kind, const struct ofi_ctl_msg *m)
{
    struct fid_ep *ep = NULL;
    fi_addr_t addr = 0;
    const uint32_t np = (uint32_t)p->c->cfg.npaths;
    int bad = ofi_route(p, (int)(dst / np), (int)(dst % np), &ep, &addr);
    if (bad != FH_OK)
        return bad;
    struct ofi_op *s = p->slot_free;
    if (!s)
        return FH_ERR_AGAIN;
    struct ofi_amh h = {.token = p->tokens[dst / np], .rsvd = kind};
    memcpy(s->buf, &h, OFI_AMH);
    memcpy(s->buf + OFI_AMH, m, sizeof *m);
    s->rank = (int)(dst / np);
    s->rpath = (int)(dst % np);
    ssize_t ret = fi_send(ep, s->buf, OFI_AMH + sizeof *m, ofi_path_desc(p, p->slot_mr), addr,
                          &s->fctx);
    if (ret == 0) {
        p->slot_free = s->next;
        return FH_OK;
    }
    return ret == -FI_EAGAIN ? FH_ERR_AGAIN : ofi_err_to_fh((int)ret);
}
