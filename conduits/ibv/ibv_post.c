/*
 * ibv_post.c -- verbs conduit: the doorbell batch, over either posting API.
 *
 * FH_IBV_POST (chosen at open, ibv_conduit.c):
 *   ex       ibv_wr_start / ibv_wr_send, _rdma_write, _rdma_read /
 *            ibv_wr_set_sge or ibv_wr_set_inline_data / ibv_wr_complete on
 *            the QP's ibv_qp_ex (QPs created with send_ops_flags);
 *   classic  a chain of struct ibv_send_wr given to one ibv_post_send, for
 *            devices without the extended API (mlx4, irdma, siw, cxgb4,
 *            qedr, bnxt_re before rdma-core 56).
 * Both give one doorbell per batch (postlist), inline data for small
 * messages (classic: copied into p->inl_buf when added, so the caller's
 * buffer is free at return as with ex, where the provider copies at once),
 * and the same selective signaling (the wrdesc's op: NULL = unsignaled).
 *
 * A batch is open towards one connection (p->open).  A post with
 * FH_POST_MORE leaves it open; the next post without it, a post to another
 * connection, a full batch (IBV_BATCH_MAX) or the next poll of the path
 * closes it.  If the provider refuses a batch, the ops of the refused WRs
 * are completed with an error at the next poll (they were accepted): with
 * ex the whole batch, with classic the WRs from bad_wr on (those before it
 * were posted and complete normally).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ibv_internal.h"
#include "firehose/util/log.h"

int ibv_batch_close(struct fh_cpath *p)
{
    struct ibv_conn *k = p->open;
    if (!k)
        return FH_OK;
    p->open = NULL;
    const unsigned n = p->batch_n;
    p->batch_n = 0;
    unsigned first_bad = 0;
    int e;
    if (p->c->post_mode == IBV_POST_EX) {
        e = ibv_wr_complete(k->qpx);
    } else {
        for (unsigned i = 0; i + 1 < n; i++)
            p->swr[i].next = &p->swr[i + 1];
        p->swr[n - 1].next = NULL;
        struct ibv_send_wr *bad = NULL;
        e = ibv_post_send(k->qp, p->swr, &bad);
        if (e)
            first_bad = bad && bad >= p->swr && bad < p->swr + n
                            ? (unsigned)(bad - p->swr) : 0;
    }
    if (!e)
        return FH_OK;
    fh_log_error("ibv: %s: posting %u work requests from path %d to its "
                 "path %d failed: %s", FH_RANK_NAME(k->rank), n - first_bad, p->index,
                 k->rpath, strerror(e));
    if (k->status == FH_OK)
        k->status = FH_ERR_TRANSPORT;
    for (unsigned i = first_bad; i < n; i++) {
        struct ibv_op *op = p->bop[i];
        if (op) {
            op->next = p->failed;
            p->failed = op;
        }
    }
    return FH_ERR_TRANSPORT;
}

void ibv_batch_abort(struct fh_cpath *p)
{
    if (p->open && p->c->post_mode == IBV_POST_EX)
        ibv_wr_abort(p->open->qpx);
    p->open = NULL;
    p->batch_n = 0;
}

static void ibv_post_ex(struct ibv_conn *k, const struct ibv_wrdesc *d)
{
    struct ibv_qp_ex *qx = k->qpx;
    qx->wr_id = (uintptr_t)(d->op ? d->op : &k->unsig_op);
    /* IBV_SEND_INLINE is implied by ibv_wr_set_inline_data, but rxe's
     * kernel side looks only at the flag (without it the WQE fails with
     * IBV_WC_LOC_QP_OP_ERR). */
    qx->wr_flags = (d->op ? IBV_SEND_SIGNALED : 0) |
                   (d->inl ? IBV_SEND_INLINE : 0);
    switch (d->opcode) {
    case IBV_WR_RDMA_WRITE:
        ibv_wr_rdma_write(qx, d->rkey, d->raddr);
        break;
    case IBV_WR_RDMA_READ:
        ibv_wr_rdma_read(qx, d->rkey, d->raddr);
        break;
    default:
        ibv_wr_send(qx);
        break;
    }
    /* One contiguous buffer, never ibv_wr_set_inline_data_list: rxe up to
     * at least rdma-core 44 sends 0 bytes for a list. */
    if (d->inl)
        ibv_wr_set_inline_data(qx, (void *)d->inl_data, d->len);
    else
        ibv_wr_set_sge(qx, d->lkey, d->addr, d->len);
}

static void ibv_post_classic(struct fh_cpath *p, struct ibv_conn *k,
                             const struct ibv_wrdesc *d, unsigned i)
{
    struct ibv_sge *sg = &p->ssge[i];
    if (d->inl) {
        char *copy = p->inl_buf + (size_t)i * IBV_INLINE_MAX;
        assert(d->len <= IBV_INLINE_MAX);
        if (d->len)
            memcpy(copy, d->inl_data, d->len);
        *sg = (struct ibv_sge){(uintptr_t)copy, d->len, 0};
    } else {
        *sg = (struct ibv_sge){d->addr, d->len, d->lkey};
    }
    p->swr[i] = (struct ibv_send_wr){
        .wr_id = (uintptr_t)(d->op ? d->op : &k->unsig_op),
        .sg_list = sg,
        .num_sge = 1,
        .opcode = d->opcode,
        .send_flags = (d->op ? IBV_SEND_SIGNALED : 0u) |
                      (d->inl ? IBV_SEND_INLINE : 0u),
    };
    if (d->opcode != IBV_WR_SEND) {
        p->swr[i].wr.rdma.remote_addr = d->raddr;
        p->swr[i].wr.rdma.rkey = d->rkey;
    }
}

void ibv_post_wr(struct fh_cpath *p, struct ibv_conn *k,
                 const struct ibv_wrdesc *d)
{
    if (p->open != k) {
        if (p->open)
            ibv_batch_close(p);     /* its errors go to the failed list */
        if (p->c->post_mode == IBV_POST_EX)
            ibv_wr_start(k->qpx);
        p->open = k;
        p->batch_n = 0;
    }
    const unsigned i = p->batch_n++;
    assert(i < IBV_BATCH_MAX);
    if (p->c->post_mode == IBV_POST_EX)
        ibv_post_ex(k, d);
    else
        ibv_post_classic(p, k, d, i);
    p->bop[i] = d->op;
    k->sq_used++;
    if (d->op) {
        d->op->reclaim = k->unsig + 1;
        k->unsig = 0;
        d->op->conn = k;
        d->op->live = 1;
        d->op->zombie = 0;
    } else {
        k->unsig++;
    }
}
