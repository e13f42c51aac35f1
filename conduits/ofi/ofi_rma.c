/*
 * ofi_rma.c -- libfabric conduit: memory registration, put, get.
 *
 * Remote keys.  mr_reg (on the target) fills fh_rkey_t with
 *   key  = fi_mr_key() of the registration (provider key with FI_MR_PROV_KEY,
 *          else a random key we requested: mr_key_size random bytes, so
 *          that knowing the protocol and the port does not give a stranger
 *          a key -- docs/security.md; a collision with a live key, which
 *          the provider refuses with -FI_ENOKEY, draws again),
 *   base = the registered virtual start address (as conduit.h defines it).
 * The rkey travels to the initiator, whose conduit was opened with the same
 * provider and therefore the same mr_mode.  The initiator's put/get with
 * target virtual address raddr passes to fi_writemsg/fi_readmsg
 *   addr = raddr                 when mr_mode has FI_MR_VIRT_ADDR,
 *   addr = raddr - rkey->base    otherwise (offset into the registration),
 * and key = rkey->key.
 *
 * FI_MR_ENDPOINT: a registration is bound to one endpoint, so we create one
 * per path (mr[i] bound to path i; it is the descriptor path i uses for local
 * buffers).  Peers always target the service path, so the remote key is that
 * of mr[0].  This needs all paths to exist before mr_reg.
 *
 * Delivery complete.  Every put is posted with FI_DELIVERY_COMPLETE (plus
 * FI_COMPLETION, and FI_INJECT when len <= inject_size so the source is
 * reusable at return).  tcp;ofi_rxm forwards the flag to the tcp msg
 * endpoint, which asks the target for an ack sent after the data was
 * received into the target buffer; shm with FI_DELIVERY_COMPLETE avoids its
 * inline/inject protocols (whose completion is local) and completes after
 * the target's response (or after its own CMA write into the target).
 * Verified by tests/conduit/ofi_selftest.c (2-process mode: the target stops
 * polling when told of the completion out of band and compares its memory).
 * Negative control: without FI_DELIVERY_COMPLETE that test fails on tcp at
 * the first small put; shm passes either way (its default RMA path writes
 * the target with CMA before completing).
 */
#include <stdlib.h>
#include <string.h>

#include "ofi_internal.h"
#include "firehose/util/log.h"
#include "conduits/util/cu.h"

/* A random key of mr_key_size bytes (never 0, which some providers treat
 * as "no key"). */
static int ofi_draw_key(struct fh_conduit *c, uint64_t *key)
{
    pthread_mutex_lock(&c->key_lock);
    int rc = FH_OK;
    do {
        if (c->key_left == 0) {
            rc = ofi_random(c->key_pool, sizeof c->key_pool);
            if (rc != FH_OK)
                break;
            c->key_left = sizeof c->key_pool / sizeof c->key_pool[0];
        }
        *key = c->key_pool[--c->key_left];
        if (c->mr_key_size < 8)
            *key &= ((uint64_t)1 << (8 * c->mr_key_size)) - 1;
    } while (*key == 0);
    pthread_mutex_unlock(&c->key_lock);
    return rc;
}

static int ofi_reg_one(struct fh_conduit *c, struct fid_ep *ep, void *addr,
                       size_t len, uint64_t fi_access, struct fid_mr **out)
{
    uint64_t key = 0;
    if (!c->prov_key && ofi_draw_key(c, &key) != FH_OK)
        return FH_ERR_TRANSPORT;
    struct fid_mr *mr = NULL;
    int ret = fi_mr_reg(c->domain, addr, len, fi_access, 0, key, 0, &mr,
                        NULL);
    for (int tries = 0; ret == -FI_ENOKEY && !c->prov_key && tries < 8; tries++) {
        if (ofi_draw_key(c, &key) != FH_OK)
            return FH_ERR_TRANSPORT;
        ret = fi_mr_reg(c->domain, addr, len, fi_access, 0, key, 0, &mr, NULL);
    }
    if (ret == -FI_EFAULT)   /* not (all) mapped or accessible: see conduit.h */
        return fh_set_error(FH_ERR_INVALID, "ofi: cannot register %p (+%zu "
                            "bytes): not mapped or not accessible", addr, len);
    if (ret) {
        fh_log_error("ofi: fi_mr_reg(%p, %zu bytes): %s", addr, len,
                     fi_strerror(-ret));
        return ret == -FI_ENOMEM ? FH_ERR_NO_MEMORY : FH_ERR_TRANSPORT;
    }
    if (ep) {
        ret = fi_mr_bind(mr, &ep->fid, 0);
        if (!ret)
            ret = fi_mr_enable(mr);
        if (ret) {
            fh_log_error("ofi: binding a registration to an endpoint: %s",
                         fi_strerror(-ret));
            fi_close(&mr->fid);
            return FH_ERR_TRANSPORT;
        }
    }
    *out = mr;
    return FH_OK;
}

static struct fh_mr *ofi_mr_alloc(void *addr, size_t len, int nmr)
{
    struct fh_mr *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->addr = addr;
    m->len = len;
    m->nmr = nmr;
    m->mr = calloc((size_t)nmr, sizeof *m->mr);
    m->desc = calloc((size_t)nmr, sizeof *m->desc);
    if (!m->mr || !m->desc) {
        free(m->mr);
        free(m->desc);
        free(m);
        return NULL;
    }
    return m;
}

int ofi_mr_dereg(struct fh_conduit *c, struct fh_mr *m)
{
    (void)c;
    if (!m)
        return FH_ERR_INVALID;
    int err = FH_OK;
    for (int i = 0; i < m->nmr; i++) {
        if (m->mr[i]) {
            int ret = fi_close(&m->mr[i]->fid);
            if (ret) {
                fh_log_error("ofi: fi_close(mr): %s", fi_strerror(-ret));
                err = FH_ERR_TRANSPORT;
            }
        }
    }
    free(m->mr);
    free(m->desc);
    free(m);
    return err;
}

int ofi_mr_reg(struct fh_conduit *c, void *addr, size_t len, unsigned access,
               struct fh_mr **out, fh_rkey_t *rkey)
{
    int ret = cu_check_mr_reg("ofi", c, out, addr, len, access);
    if (ret)
        return ret;
    uint64_t fa = 0;
    if (access & FH_MR_LOCAL)
        fa |= FI_SEND | FI_RECV | FI_READ | FI_WRITE;
    if (access & FH_MR_REMOTE_READ)
        fa |= FI_REMOTE_READ;
    if (access & FH_MR_REMOTE_WRITE)
        fa |= FI_REMOTE_WRITE;

    int nmr = 1;
    if (c->mr_endpoint) {
        nmr = c->cfg.npaths;
        for (int i = 0; i < nmr; i++)
            if (!c->paths[i])
                return fh_set_error(FH_ERR_STATE,
                                    "ofi: mr_reg before path %d exists "
                                    "(FI_MR_ENDPOINT)", i);
    }
    struct fh_mr *m = ofi_mr_alloc(addr, len, nmr);
    if (!m)
        return FH_ERR_NO_MEMORY;
    for (int i = 0; i < nmr; i++) {
        int ret = ofi_reg_one(c, c->mr_endpoint ? c->paths[i]->ep : NULL,
                              addr, len, fa, &m->mr[i]);
        if (ret) {
            ofi_mr_dereg(c, m);
            return ret;
        }
        m->desc[i] = fi_mr_desc(m->mr[i]);
    }
    if (rkey) {
        uint64_t key = fi_mr_key(m->mr[0]);
        if (key == FI_KEY_NOTAVAIL) {
            ofi_mr_dereg(c, m);
            return fh_set_error(FH_ERR_NOT_SUPPORTED,
                                "ofi: provider uses raw (>64-bit) keys");
        }
        rkey->key = key;
        rkey->base = (uint64_t)(uintptr_t)addr;
    }
    *out = m;
    return FH_OK;
}

int ofi_mr_reg_path(struct fh_cpath *p, void *addr, size_t len,
                    uint64_t fi_access, struct fh_mr **out)
{
    struct fh_conduit *c = p->c;
    struct fh_mr *m = ofi_mr_alloc(addr, len, 1);
    if (!m)
        return FH_ERR_NO_MEMORY;
    int ret = ofi_reg_one(c, c->mr_endpoint ? p->ep : NULL, addr, len,
                          fi_access, &m->mr[0]);
    if (ret) {
        ofi_mr_dereg(c, m);
        return ret;
    }
    m->desc[0] = fi_mr_desc(m->mr[0]);
    *out = m;
    return FH_OK;
}

/* The destination and key of a put/get (conduits/util/cu.h). */
static inline int ofi_rma_check(struct fh_cpath *p, const char *what, int rank,
                                int rpath, const fh_rkey_t *rkey)
{
    int ret = cu_check_dest("ofi", what, &p->c->cfg, p->c->connected, rank,
                            rpath);
    return ret ? ret : cu_check_rkey("ofi", what, rkey);
}

static inline uint64_t ofi_raddr(const struct fh_conduit *c, uint64_t raddr,
                                 const fh_rkey_t *rkey)
{
    return c->virt_addr ? raddr : raddr - rkey->base;
}

int ofi_put(struct fh_cpath *p, int rank, int rpath, const void *src,
            size_t len, struct fh_mr *lmr, uint64_t raddr,
            const fh_rkey_t *rkey, void *op_ctx, unsigned flags)
{
    struct fh_conduit *c = p->c;
    int ret = ofi_rma_check(p, "put", rank, rpath, rkey);
    if (ret)
        return ret;
    if (len > c->limits.max_msg)
        return fh_set_error(FH_ERR_TOO_BIG, "ofi: put of %zu bytes", len);
    const int inject = len <= c->inject_size;
    if (!lmr && c->mr_local && !inject)
        return fh_set_error(FH_ERR_INVALID,
                            "ofi: put of %zu bytes needs a local "
                            "registration", len);
    struct fid_ep *ep = NULL;
    fi_addr_t addr = 0;
    if ((ret = ofi_route(p, rank, rpath, &ep, &addr)) != FH_OK)
        return ret;
    struct ofi_op *op = p->op_free;
    if (!op)
        return FH_ERR_AGAIN;
    op->kind = OFI_OP_PUT;
    op->rank = rank;
    op->rpath = rpath;
    op->op_ctx = op_ctx;

    struct iovec iov = {.iov_base = (void *)src, .iov_len = len};
    void *desc = ofi_path_desc(p, lmr);
    struct fi_rma_iov riov = {
        .addr = ofi_raddr(c, raddr, rkey), .len = len, .key = rkey->key};
    struct fi_msg_rma m = {
        .msg_iov = &iov,
        .desc = &desc,
        .iov_count = 1,
        .addr = addr,
        .rma_iov = &riov,
        .rma_iov_count = 1,
        .context = &op->fctx,
    };
    uint64_t f = FI_COMPLETION | FI_DELIVERY_COMPLETE;
    if (inject)
        f |= FI_INJECT;
    if (flags & FH_POST_MORE)
        f |= FI_MORE;
    ssize_t r = fi_writemsg(ep, &m, f);
    if (r == 0) {
        p->op_free = op->next;
        ofi_rma_posted(p, op, rank, rpath, raddr, len);
        return FH_OK;
    }
    if (r == -FI_EAGAIN)
        return FH_ERR_AGAIN;
    fh_log_error("ofi: path %d: put of %zu bytes to %s: %s", p->index,
                 len, FH_RANK_NAME(rank), fi_strerror((int)-r));
    return ofi_err_to_fh((int)r);
}

int ofi_get(struct fh_cpath *p, int rank, int rpath, void *dst, size_t len,
            struct fh_mr *lmr, uint64_t raddr, const fh_rkey_t *rkey,
            void *op_ctx, unsigned flags)
{
    struct fh_conduit *c = p->c;
    int ret = ofi_rma_check(p, "get", rank, rpath, rkey);
    if (ret)
        return ret;
    if (len > c->limits.max_msg)
        return fh_set_error(FH_ERR_TOO_BIG, "ofi: get of %zu bytes", len);
    if (!lmr && c->mr_local)
        return fh_set_error(FH_ERR_INVALID,
                            "ofi: get needs a local registration");
    struct fid_ep *ep = NULL;
    fi_addr_t addr = 0;
    if ((ret = ofi_route(p, rank, rpath, &ep, &addr)) != FH_OK)
        return ret;
    struct ofi_op *op = p->op_free;
    if (!op)
        return FH_ERR_AGAIN;
    op->kind = OFI_OP_GET;
    op->rank = rank;
    op->rpath = rpath;
    op->op_ctx = op_ctx;

    struct iovec iov = {.iov_base = dst, .iov_len = len};
    void *desc = ofi_path_desc(p, lmr);
    struct fi_rma_iov riov = {
        .addr = ofi_raddr(c, raddr, rkey), .len = len, .key = rkey->key};
    struct fi_msg_rma m = {
        .msg_iov = &iov,
        .desc = &desc,
        .iov_count = 1,
        .addr = addr,
        .rma_iov = &riov,
        .rma_iov_count = 1,
        .context = &op->fctx,
    };
    uint64_t f = FI_COMPLETION;
    if (flags & FH_POST_MORE)
        f |= FI_MORE;
    ssize_t r = fi_readmsg(ep, &m, f);
    if (r == 0) {
        p->op_free = op->next;
        ofi_rma_posted(p, op, rank, rpath, raddr, len);
        return FH_OK;
    }
    if (r == -FI_EAGAIN)
        return FH_ERR_AGAIN;
    fh_log_error("ofi: path %d: get of %zu bytes from %s: %s", p->index,
                 len, FH_RANK_NAME(rank), fi_strerror((int)-r));
    return ofi_err_to_fh((int)r);
}
