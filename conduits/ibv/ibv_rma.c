/*
 * ibv_rma.c -- verbs conduit: memory registration, put and get.
 *
 * Registration.  ibv_reg_mr on the conduit's (plain) PD, which every path's
 * QPs share (a parent domain wraps the same kernel PD), so one lkey/rkey
 * serves all paths.  fh_rkey_t = {rkey, registered base}; verbs addresses
 * remote memory by virtual address, so put/get use raddr as is.
 *
 * Delivery complete.  A put is an RC RDMA WRITE posted signaled.  On a
 * reliable connection the requester completes a WRITE only after the
 * responder acknowledged it, and the responder acknowledges only after the
 * data was accepted into its memory placement path (in order with its later
 * accesses; we never register with IBV_ACCESS_RELAXED_ORDERING).  So the
 * completion upcall means the bytes are in the target's memory, which is
 * what conduit.h asks of put (tests/conduit/ibv_selftest.c checks it at the
 * target, right after the initiator's completion, without polling there).
 * A get is an RDMA READ: its completion means the data is in the local
 * buffer.
 *
 * Inline.  A put of len <= max_inline (= limits.max_inject, the QP's
 * max_inline_data) copies the source into the WQE at post time
 * (ibv_wr_set_inline_data): the source is reusable at return and needs no
 * registration.
 *
 * Batching.  Posts go through the doorbell batch of ibv_post.c (either
 * posting API, FH_IBV_POST): a post with FH_POST_MORE leaves the batch
 * open (no doorbell); the next post without it, a post to another QP, a
 * full batch (IBV_BATCH_MAX work requests) or the next poll of the path
 * rings it.  If the provider refuses a batch, its put/get contexts are
 * completed with an error at the next poll (they were already accepted).
 *
 * Signaling.  Every put and get is signaled (one WR per op: the runtime
 * needs one upcall per op_ctx), and its completion also reclaims the send
 * queue entries of the unsignaled AM sends before it on the same QP.
 *
 * Fork.  A pinned page that a fork() makes copy-on-write stays with the
 * HCA while the first writer gets a new copy: on a kernel that does not
 * copy pinned pages for the child at fork time (Linux before 5.13,
 * ibv_is_fork_initialized() != IBV_FORK_UNNEEDED), a parent that writes
 * its segment after a fork (system() and popen() fork too) would no longer
 * see what peers put there, nor send what it wrote.  rdma-core's remedy,
 * ibv_fork_init(), marks every registration MADV_DONTFORK: the child does
 * not inherit registered pages (touching them there is a segfault) and the
 * parent keeps them.  It works only before the first registration of the
 * process, so ibv_open calls ibv_fork_setup before anything else
 * (FH_IBV_FORK: auto tries, on insists, off never calls it).  Kernels with
 * copy-on-fork copy pinned pages for the child at fork: nothing to do.
 */
#include <errno.h>
#include <string.h>
#include <stdlib.h>

#include "ibv_internal.h"
#include "firehose/util/log.h"
#include "conduits/util/cu.h"

int ibv_conn_for(struct fh_cpath *p, int rank, int rpath, const char *what,
                 struct ibv_conn **out)
{
    struct fh_conduit *c = p->c;
    int ret = cu_check_dest("ibv", what, &c->cfg, c->connected, rank, rpath);
    if (ret)
        return ret;
    struct ibv_conn *k;
    if (p->index == 0) {
        k = &p->conns[(size_t)rank * (size_t)c->cfg.npaths + (size_t)rpath];
    } else {
        if (rpath != 0)
            return fh_set_error(FH_ERR_INVALID, "ibv: %s from thread path %d "
                                "to path %d of %s (thread paths reach "
                                "service paths only)", what, p->index, rpath,
                                FH_RANK_NAME(rank));
        k = &p->conns[rank];
    }
    *out = k;
    if (k->state == IBV_CONN_UP)
        return FH_OK;
    return ibv_cm_advance(p, k);     /* first use: connect (ibv_cm.c) */
}

/* ------------------------------------------------------------ MR */

int ibv_mr_reg(struct fh_conduit *c, void *addr, size_t len, unsigned access,
               struct fh_mr **out, fh_rkey_t *rkey)
{
    int ret = cu_check_mr_reg("ibv", c, out, addr, len, access);
    if (ret)
        return ret;
    int a = 0;
    if (access & FH_MR_LOCAL)
        a |= IBV_ACCESS_LOCAL_WRITE;
    if (access & FH_MR_REMOTE_READ)
        a |= IBV_ACCESS_REMOTE_READ;
    if (access & FH_MR_REMOTE_WRITE)   /* verbs requires LOCAL_WRITE too */
        a |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    struct fh_mr *m = calloc(1, sizeof *m);
    if (!m)
        return FH_ERR_NO_MEMORY;
    m->mr = ibv_reg_mr(c->pd, addr, len ? len : 1, a);
    if (!m->mr) {
        int e = errno;
        free(m);
        if (e == EFAULT)   /* not (all) mapped or accessible: see conduit.h */
            return fh_set_error(FH_ERR_INVALID, "ibv: cannot register %p (+%zu "
                                "bytes): not mapped or not accessible", addr, len);
        fh_log_error("ibv: ibv_reg_mr(%p, %zu bytes) on %s: %s%s", addr, len,
                     c->devname, strerror(e),
                     e == ENOMEM || e == EPERM
                         ? " (RLIMIT_MEMLOCK too low? see ulimit -l)" : "");
        return fh_set_error(FH_ERR_NO_MEMORY, "ibv: cannot register %zu "
                            "bytes: %s", len, strerror(e));
    }
    m->addr = addr;
    m->len = len;
    if (rkey) {
        rkey->key = m->mr->rkey;
        rkey->base = (uint64_t)(uintptr_t)addr;
    }
    *out = m;
    return FH_OK;
}

int ibv_mr_dereg(struct fh_conduit *c, struct fh_mr *m)
{
    if (!m)
        return FH_ERR_INVALID;
    int e = ibv_dereg_mr(m->mr);
    free(m);
    if (e) {
        fh_log_error("ibv: ibv_dereg_mr on %s: %s", c ? c->devname : "?",
                     strerror(e));
        return FH_ERR_TRANSPORT;
    }
    return FH_OK;
}

/* ------------------------------------------------------------ RMA */

static int ibv_rma_post(struct fh_cpath *p, int is_put, int rank, int rpath,
                        void *lbuf, size_t len, struct fh_mr *lmr,
                        uint64_t raddr, const fh_rkey_t *rkey, void *op_ctx,
                        unsigned flags)
{
    struct fh_conduit *c = p->c;
    const char *what = is_put ? "put" : "get";
    struct ibv_conn *k = NULL;
    int ret = ibv_conn_for(p, rank, rpath, what, &k);
    if (ret)
        return ret;
    if ((ret = cu_check_rkey("ibv", what, rkey)))
        return ret;
    if (len > c->limits.max_msg)
        return fh_set_error(FH_ERR_TOO_BIG, "ibv: %s of %zu bytes over "
                            "max_msg %zu", what, len, c->limits.max_msg);
    const int inl = is_put && len <= c->max_inline;
    if (!inl) {
        if (!lmr)
            return fh_set_error(FH_ERR_INVALID, "ibv: %s of %zu bytes needs "
                                "a local registration", what, len);
        if ((char *)lbuf < lmr->addr ||
            (char *)lbuf + len > lmr->addr + lmr->len)
            return fh_set_error(FH_ERR_INVALID, "ibv: %s buffer %p+%zu "
                                "outside its registration %p+%zu", what, lbuf,
                                len, (void *)lmr->addr, lmr->len);
    }
    if (p->err != FH_OK)
        return fh_set_error(p->err, "ibv: %s to %s: path %d is broken "
                            "(device %s)", what, FH_RANK_NAME(rank), p->index, c->devname);
    if (k->status != FH_OK)
        return fh_set_error(k->status, "ibv: %s: %s: connection from "
                            "path %d to its path %d is broken", FH_RANK_NAME(rank), what,
                            p->index, rpath);
    struct ibv_op *op = p->op_free;
    if (!op || k->sq_used >= p->sq_depth) {
        ibv_batch_close(p);
        return FH_ERR_AGAIN;
    }
    p->op_free = op->next;
    op->kind = is_put ? IBV_OP_PUT : IBV_OP_GET;
    op->op_ctx = op_ctx;
    op->len = len;
    op->buf = NULL;
    struct ibv_wrdesc d = {
        .opcode = is_put ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ,
        .op = op, .inl = inl, .inl_data = lbuf,
        .lkey = inl ? 0 : lmr->mr->lkey, .len = (uint32_t)len,
        .rkey = (uint32_t)rkey->key,
        .addr = (uintptr_t)lbuf, .raddr = raddr,
    };
    ibv_post_wr(p, k, &d);
    if (!(flags & FH_POST_MORE) || p->batch_n >= IBV_BATCH_MAX)
        ibv_batch_close(p);     /* a refusal is reported through on_complete */
    return FH_OK;
}

int ibv_put(struct fh_cpath *p, int rank, int rpath, const void *src,
            size_t len, struct fh_mr *lmr, uint64_t raddr,
            const fh_rkey_t *rkey, void *op_ctx, unsigned flags)
{
    return ibv_rma_post(p, 1, rank, rpath, (void *)src, len, lmr, raddr, rkey,
                        op_ctx, flags);
}

int ibv_get(struct fh_cpath *p, int rank, int rpath, void *dst, size_t len,
            struct fh_mr *lmr, uint64_t raddr, const fh_rkey_t *rkey,
            void *op_ctx, unsigned flags)
{
    return ibv_rma_post(p, 0, rank, rpath, dst, len, lmr, raddr, rkey, op_ctx,
                        flags);
}

int ibv_fork_setup(const struct ibv_env *e)
{
    static const char *const mode[] = {"auto", "on", "off"};
    enum ibv_fork_status st = ibv_is_fork_initialized();
    if (st == IBV_FORK_UNNEEDED) {
        fh_log_verbose(1, "ibv: fork: the kernel copies registered pages for "
                       "a child (copy-on-fork): fork() is safe, FH_IBV_FORK=%s "
                       "has nothing to do", mode[e->fork]);
        return FH_OK;
    }
    if (st == IBV_FORK_ENABLED) {
        fh_log_verbose(1, "ibv: fork: fork support is already on "
                       "(RDMAV_FORK_SAFE or the application's ibv_fork_init): "
                       "children do not inherit registered pages");
        return FH_OK;
    }
    if (e->fork == IBV_FORKMODE_OFF) {
        fh_log_verbose(1, "ibv: fork: FH_IBV_FORK=off on a kernel without "
                       "copy-on-fork: after a fork() (or system()) the "
                       "parent's writes to registered memory may be lost to "
                       "RDMA");
        return FH_OK;
    }
    int err = ibv_fork_init();
    if (err == 0) {
        fh_log_verbose(1, "ibv: fork: the kernel does not copy registered "
                       "pages on fork: ibv_fork_init() done, children do not "
                       "inherit registered pages (FH_IBV_FORK=%s)",
                       mode[e->fork]);
        return FH_OK;
    }
    if (e->fork == IBV_FORKMODE_ON)
        return fh_set_error(FH_ERR_TRANSPORT, "ibv: FH_IBV_FORK=on: "
                            "ibv_fork_init failed (%s; was memory registered "
                            "before fh_init?)", strerror(err));
    fh_log_verbose(1, "ibv: fork: ibv_fork_init failed (%s): a fork() while "
                   "memory is registered is unsafe on this kernel",
                   strerror(err));
    return FH_OK;
}
