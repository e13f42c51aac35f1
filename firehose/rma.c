/*
 * rma.c -- one-sided put and get: blocking, non-blocking with a handle,
 * implicit (NBI), strided, and quiet.
 *
 * Every form validates (rank, NULL with a length, overflow, remote range
 * inside one segment of the target) before anything is sent, then hands
 * the transfer to the target rank's route (route.c: self, node or net).
 * The net route, here, goes on in two steps:
 *   1. choose the completion counter: a stack counter (blocking), a handle
 *      slot (NB) or the path's NBI counter;
 *   2. fh_xfer(): the active registration strategy's transfer (reg/reg.h),
 *      which reaches the network through fh_post() (rma_post.c: pieces on
 *      the calling thread's path, what the conduit cannot take now queued
 *      there and posted by its next poll, bulk bounded on a shared path),
 *      so no form waits for the target here; the blocking forms wait on
 *      the counter afterwards.
 * The self and node routes (route.c) copy and are complete at once.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int fh_rma_local_mr(const char *fn, bool is_put, const void *local, size_t n,
                    struct fh_mr **lmr, bool *temp)
{
    fh_rt_t *rt = fh_rt;
    *lmr = NULL;
    *temp = false;
    /* Without FH_REG_CAP_LOCAL_MR the strategy pins local buffers itself
     * (firehose: through its cache) or does no RDMA from them (bounce). */
    if (!rt->limits.needs_local_mr || (is_put && n <= rt->limits.max_inject) ||
        !(rt->reg_ops->caps & FH_REG_CAP_LOCAL_MR))
        return FH_OK;
    fh_seg_range_t r;
    if (fh_seg_find(rt, rt->rank, (uintptr_t)local, n, &r) == FH_OK && r.mr != NULL) {
        *lmr = r.mr;
        return FH_OK;
    }
    fh_rkey_t unused;
    int rc = rt->cops->mr_reg(rt->conduit, (void *)local, n, FH_MR_LOCAL, lmr, &unused);
    if (rc != FH_OK) {
        *lmr = NULL;
        return fh_set_error(rc == FH_ERR_NO_MEMORY ? FH_ERR_NO_MEMORY : rc,
                            "%s: cannot register the local buffer %p (+%zu): %s", fn,
                            local, n, fh_strerror(rc));
    }
    *temp = true;
    return FH_OK;
}

void fh_rma_local_mr_release(struct fh_mr *lmr)
{
    if (lmr != NULL)
        fh_rt->cops->mr_dereg(fh_rt->conduit, lmr);
}

int fh_xfer(fh_tls_t *t, bool is_put, int rank, char *local, struct fh_mr *lmr,
            uint64_t remote, size_t n, const fh_rkey_t *rkey, fh_ctr_t *ctr, bool own_lmr)
{
    assert(rank != fh_rt->rank);   /* callers copy to themselves */
    assert(!own_lmr || (fh_rt->reg_ops->caps & FH_REG_CAP_NB_OWNS_LMR));
    /* Every strategy hands the caller's buffer to a copy (put-in-move,
     * bounce) or to the conduit (an inject copy, a socket call): an
     * unmapped one must be refused here, not fault there. */
    int rc = fh_lc_check(&t->base, is_put, rank, local, n, remote);
    if (rc != FH_OK) {
        if (own_lmr)
            fh_rma_local_mr_release(lmr);
        return rc;
    }
    return fh_rt->reg_ops->xfer(&t->base, is_put, rank, local, lmr, remote, n, rkey, ctr,
                                 own_lmr);
}

static inline __attribute__((always_inline)) int
validate(const char *fn, int rank, const void *local, const void *remote, size_t n,
         fh_seg_range_t *r)
{
    int rc = fh_check_rank(fn, rank);
    if (rc != FH_OK)
        return rc;
    if (n == 0)
        return FH_OK;
    if (local == NULL)
        return fh_set_error(FH_ERR_INVALID, "%s: NULL local buffer with %zu bytes", fn, n);
    if (remote == NULL)
        return fh_set_error(FH_ERR_INVALID, "%s: NULL remote address with %zu bytes", fn, n);
    if (n > FH_MAX_XFER)
        return fh_set_error(FH_ERR_TOO_BIG, "%s: %zu bytes (max %zu)", fn, n,
                            (size_t)FH_MAX_XFER);
    if ((uintptr_t)local + n < (uintptr_t)local || (uintptr_t)remote + n < (uintptr_t)remote)
        return fh_set_error(FH_ERR_OVERFLOW, "%s: address + %zu bytes overflows", fn, n);
    rc = fh_seg_find(fh_rt, rank, (uintptr_t)remote, n, r);
    if (rc == FH_ERR_OUT_OF_SEGMENT && fh_rt->cfg.segment_mode == FH_SEGMENT_EVERYTHING &&
        (fh_rt->reg_ops->caps & FH_REG_CAP_ANY_ADDRESS)) {
        /* Any address: the target's cache refuses unmapped memory. */
        memset(r, 0, sizeof *r);
        return FH_OK;
    }
    if (rc != FH_OK)
        return fh_set_error(rc, "%s: [%p, +%zu) is not inside one segment of %s", fn,
                            remote, n, FH_RANK_NAME(rank));
    return FH_OK;
}

int fh_rma_validate(const char *fn, int rank, const void *local, const void *remote,
                    size_t n, fh_seg_range_t *r)
{
    return validate(fn, rank, local, remote, n, r);
}

/* Inlined into each public call: the mode is a constant there. */
static inline __attribute__((always_inline)) int
rma(const char *fn, bool is_put, int rank, void *local, void *remote, size_t n,
               enum fh_rma_mode mode, fh_handle_t *h)
{
    int rc;
    fh_tls_t *t = fh_enter(fn, &rc);
    if (t == NULL)
        return rc;
    if (mode == FH_RMA_NB) {
        if (h == NULL)
            return fh_set_error(FH_ERR_INVALID, "%s: NULL handle pointer", fn);
        *h = FH_HANDLE_DONE;
    }
    /* Field by field: the strides are not read for a contiguous transfer,
     * and the range is validate's to fill (no zeroing on the fast path). */
    fh_rma_req_t q;
    if ((rc = validate(fn, rank, local, remote, n, &q.r)) != FH_OK || n == 0)
        return rc;
    /* Memory the owner protected or unmapped since (seg_protect.c). */
    if (__builtin_expect(q.r.holes != NULL, 0) &&
        (rc = fh_seg_holes_check(fn, rank, is_put, remote, n, &q.r)) != FH_OK)
        return rc;
    q.fn = fn, q.is_put = is_put, q.rank = rank, q.local = local, q.remote = remote;
    q.n = n, q.count = 1, q.lstride = q.rstride = 0, q.mode = mode, q.h = h;
    return fh_rt->route[rank]->rma(t, &q);
}

int fh_rma_net(fh_tls_t *t, const fh_rma_req_t *q)
{
    const char *fn = q->fn;
    bool is_put = q->is_put;
    int rank = q->rank;
    char *local = q->local;
    size_t n = q->n;
    enum fh_rma_mode mode = q->mode;
    fh_handle_t *h = q->h;
    int rc;
    struct fh_mr *lmr;
    bool temp;
    if ((rc = fh_rma_local_mr(fn, is_put, local, n, &lmr, &temp)) != FH_OK)
        return rc;
    /* A temporary registration of the local buffer is released when the
     * transfer completed: by the strategy when it can own it (the
     * comparison strategies' records wait for the target), else here --
     * the wait is for our NIC, never for the target's CPU (firehose.h,
     * "Blocking"). */
    bool strat_owns = temp && (fh_rt->reg_ops->caps & FH_REG_CAP_NB_OWNS_LMR);
    if (temp && !strat_owns)
        mode = FH_RMA_BLOCKING;   /* complete now: *h stays FH_HANDLE_DONE */
    fh_ctr_t stack_ctr = FH_CTR_INIT;
    fh_ctr_t *ctr = &stack_ctr;
    fh_hslot_t *slot = NULL;
    fh_path_t *p = t->path;
    if (mode == FH_RMA_NB) {
        pthread_mutex_lock(&p->lock);
        slot = fh_ht_alloc(&p->handles, t->tid, h);
        if (slot != NULL) {
            slot->ctr.owner_ops = &t->quiet_ops;   /* fh_quiet waits for it */
            slot->rma_rank = rank;                 /* for fh_wait's error text */
            slot->rma_put = is_put;
            slot->rma_addr = (uint64_t)(uintptr_t)q->remote;
        }
        pthread_mutex_unlock(&p->lock);
        if (slot == NULL)
            return fh_set_error(FH_ERR_LIMIT, "%s: too many outstanding handles", fn);
        ctr = &slot->ctr;
    } else if (mode == FH_RMA_NBI) {
        ctr = &t->nbi;
    }
    rc = fh_xfer(t, is_put, rank, local, lmr, (uint64_t)(uintptr_t)q->remote, n, &q->r.rkey,
                 ctr, strat_owns);
    if (mode == FH_RMA_BLOCKING) {
        int wrc = fh_wait_ctr(t, ctr);
        if (temp && !strat_owns)
            fh_rma_local_mr_release(lmr);
        if (rc == FH_OK && wrc != FH_OK)
            rc = fh_set_error(wrc, "%s: transfer to %s at %p (+%zu) failed: %s", fn,
                              FH_RANK_NAME(rank), q->remote, n,
                              fh_xfer_strerror(wrc, fh_rt->cfg.segment_mode ==
                                                        FH_SEGMENT_EVERYTHING));
        return rc;
    }
    if (rc != FH_OK && mode == FH_RMA_NB) {
        /* Part of the transfer may be in flight into the slot, and the
         * caller may reuse its buffer once we return: then the failure is
         * the operation's, reported by fh_wait/fh_test, and nobody waits
         * here.  Otherwise nothing started: no handle. */
        pthread_mutex_lock(&p->lock);
        bool started = ctr->pending != 0;
        if (started && ctr->status == FH_OK)
            ctr->status = rc;
        if (!started)
            fh_ht_free(&p->handles, slot);
        pthread_mutex_unlock(&p->lock);
        if (started)
            return FH_OK;
        *h = FH_HANDLE_DONE;
    }
    return rc;
}

int fh_put(int rank, void *dst, const void *src, size_t n)
{
    return rma("fh_put", true, rank, (void *)src, dst, n, FH_RMA_BLOCKING, NULL);
}

int fh_get(void *dst, int rank, const void *src, size_t n)
{
    return rma("fh_get", false, rank, dst, (void *)src, n, FH_RMA_BLOCKING, NULL);
}

int fh_put_nb(int rank, void *dst, const void *src, size_t n, fh_handle_t *h)
{
    return rma("fh_put_nb", true, rank, (void *)src, dst, n, FH_RMA_NB, h);
}

int fh_get_nb(void *dst, int rank, const void *src, size_t n, fh_handle_t *h)
{
    return rma("fh_get_nb", false, rank, dst, (void *)src, n, FH_RMA_NB, h);
}

int fh_put_nbi(int rank, void *dst, const void *src, size_t n)
{
    return rma("fh_put_nbi", true, rank, (void *)src, dst, n, FH_RMA_NBI, NULL);
}

int fh_get_nbi(void *dst, int rank, const void *src, size_t n)
{
    return rma("fh_get_nbi", false, rank, dst, (void *)src, n, FH_RMA_NBI, NULL);
}

/* The live slot of h, owned by this thread, or NULL with the error set. */
static fh_hslot_t *own_slot(const char *fn, fh_tls_t *t, fh_handle_t h, int *err)
{
    fh_path_t *p = t->path;
    fh_hslot_t *s = NULL;
    if (fh_handle_path(h) == (unsigned)p->index) {
        pthread_mutex_lock(&p->lock);
        s = fh_ht_lookup(&p->handles, h, t->tid);
        pthread_mutex_unlock(&p->lock);
    }
    if (s == NULL)
        *err = fh_set_error(FH_ERR_HANDLE,
                            "%s: handle 0x%llx is stale, already completed, or belongs to "
                            "another thread", fn, (unsigned long long)h);
    return s;
}

int fh_wait(fh_handle_t h)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_wait", &rc);
    if (t == NULL)
        return rc;
    if (h == FH_HANDLE_DONE)
        return FH_OK;
    fh_hslot_t *s = own_slot("fh_wait", t, h, &rc);
    if (s == NULL)
        return rc;
    rc = fh_wait_ctr(t, &s->ctr);
    int rrank = s->rma_rank;
    bool rput = s->rma_put;
    uint64_t raddr = s->rma_addr;
    int arank = s->width != 0 ? s->peer : -1;   /* an NB atomic's target */
    pthread_mutex_lock(&t->path->lock);
    fh_ht_free(&t->path->handles, s);
    pthread_mutex_unlock(&t->path->lock);
    if (rc != FH_OK && arank >= 0)
        return fh_set_error(rc, "fh_wait: the atomic on %s failed: %s", FH_RANK_NAME(arank),
                            fh_strerror(rc));
    if (rc != FH_OK && rrank >= 0)
        return fh_set_error(rc, "fh_wait: the %s %s %s at 0x%llx failed: %s",
                            rput ? "put" : "get", rput ? "to" : "from", FH_RANK_NAME(rrank),
                            (unsigned long long)raddr,
                            fh_xfer_strerror(rc, fh_rt->cfg.segment_mode ==
                                                     FH_SEGMENT_EVERYTHING));
    if (rc != FH_OK)
        return fh_set_error(rc, "fh_wait: the operation failed: %s", fh_strerror(rc));
    return rc;
}

int fh_test(fh_handle_t h)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_test", &rc);
    if (t == NULL)
        return rc;
    if (h == FH_HANDLE_DONE)
        return FH_OK;
    fh_hslot_t *s = own_slot("fh_test", t, h, &rc);
    if (s == NULL)
        return rc;
    fh_progress(t);
    fh_path_t *p = t->path;
    pthread_mutex_lock(&p->lock);
    if (s->ctr.pending != 0) {
        pthread_mutex_unlock(&p->lock);
        return FH_ERR_AGAIN;
    }
    rc = s->ctr.status;
    fh_ht_free(&p->handles, s);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int fh_wait_all(fh_handle_t *hs, size_t n)
{
    fh_clear_error();
    if (atomic_load_explicit(&fh_rt_state, memory_order_acquire) != FH_RT_UP)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_wait_all: firehose is not initialized");
    if (n > 0 && hs == NULL)
        return fh_set_error(FH_ERR_INVALID, "fh_wait_all: NULL array with %zu handles", n);
    int first = FH_OK;
    for (size_t i = 0; i < n; i++) {
        int rc = fh_wait(hs[i]);
        if (rc != FH_OK && first == FH_OK)
            first = rc;
        hs[i] = FH_HANDLE_DONE;
    }
    return first;
}

int fh_wait_nbi(void)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_wait_nbi", &rc);
    if (t == NULL)
        return rc;
    rc = fh_wait_ctr(t, &t->nbi);
    pthread_mutex_lock(&t->path->lock);
    t->nbi.status = FH_OK;   /* an error is reported once */
    pthread_mutex_unlock(&t->path->lock);
    if (rc != FH_OK)
        return fh_set_error(rc, "fh_wait_nbi: an implicit operation failed: %s",
                            fh_strerror(rc));
    return rc;
}

int fh_wait_quiet(fh_tls_t *t)
{
    fh_path_t *p = t->path;
    /* t->quiet_ops counts this thread's NB and NBI transfers and NB atomics
     * (their replies need the target's CPU: hence the wait rule).  Other
     * threads' operations on a shared path are not ours to wait for. */
    for (unsigned idle = 0;;) {
        pthread_mutex_lock(&p->lock);
        /* Nothing of ours in flight: nothing to poll for (a poll is a
         * system call on most conduits: over tcp it was 1 us of a coarray
         * SYNC ALL's 6.3, which calls fh_quiet before its barrier). */
        int done = t->quiet_ops == 0;
        if (!done) {
            fh_path_poll_locked(p);
            done = t->quiet_ops == 0;
        }
        pthread_mutex_unlock(&p->lock);
        if (done)
            return FH_OK;
        fh_wait_round(t, &idle);
    }
}

int fh_quiet(void)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_quiet", &rc);
    if (t == NULL)
        return rc;
    return fh_wait_quiet(t);
}
