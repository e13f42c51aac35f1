/*
 * atomic.c -- remote 64-bit atomics, executed by the target over AMs.
 *
 * The target applies every operation with the CPU's atomic instructions
 * (__atomic builtins, sequentially consistent), and an operation on our own
 * rank uses the same instructions directly; hence all atomics on a location
 * are mutually atomic whichever rank or thread issues them.  The initiator
 * waits on a handle slot of its path: the reply names the slot by its
 * handle, so a late reply cannot touch a reused slot, and it must come from
 * the rank the request went to (the sender the transport verified), so
 * another rank cannot complete it.
 */
#include "internal.h"

static uint64_t apply(uint64_t *p, fh_atomic_op_t op, uint64_t v, uint64_t cmp)
{
    switch (op) {
    case FH_AOP_FETCH: return __atomic_load_n(p, __ATOMIC_SEQ_CST);
    case FH_AOP_SET: __atomic_store_n(p, v, __ATOMIC_SEQ_CST); return 0;
    case FH_AOP_FETCH_ADD: return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
    case FH_AOP_SWAP: return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
    case FH_AOP_CSWAP:
        __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        return cmp; /* the old value either way */
    case FH_AOP_FETCH_AND: return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST);
    case FH_AOP_FETCH_OR: return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST);
    case FH_AOP_FETCH_XOR: return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST);
    case FH_AOP__COUNT: break;
    }
    return 0;
}

/* args: target address, op, operand, compare, handle */
static void atomic_req(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf;
    (void)n;
    int64_t status = FH_OK;
    uint64_t old = 0;
    if (na != 5 || a[1] >= FH_AOP__COUNT) {
        status = FH_ERR_INVALID;
    } else if (a[0] % 8 != 0) {
        status = FH_ERR_ALIGN;
    } else {
        fh_seg_range_t r;
        status = fh_seg_find(fh_rt, fh_rt->rank, (uintptr_t)a[0], 8, &r);
        if (status == FH_OK)
            old = apply((uint64_t *)(uintptr_t)a[0], (fh_atomic_op_t)a[1], a[2], a[3]);
    }
    if (status != FH_OK) {
        int src = -1;
        fh_token_source(tok, &src);
        fh_log_error("refused an atomic from rank %d on 0x%llx: %s", src,
                     (unsigned long long)a[0], fh_strerror((int)status));
    }
    uint64_t rep[3] = {na == 5 ? a[4] : 0, old, (uint64_t)status};
    fh_am_reply_internal(tok, FH_H_ATOMIC_REP, rep, 3);
}

/* args: handle, old value, status; runs on the initiator's path (lock held) */
static void atomic_rep(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf;
    (void)n;
    fh_path_t *p = fh_token_path(tok);
    int src = -1;
    fh_token_source(tok, &src);
    fh_hslot_t *s = na == 3 ? fh_ht_lookup_any(&p->handles, a[0]) : NULL;
    if (s == NULL || s->ctr.pending != 1 || s->peer != src) {
        fh_am_drop(p, src, "an atomic reply for a handle %s",
                   s == NULL || s->ctr.pending != 1 ? "that is not waiting"
                                                    : "waiting for another rank");
        return;
    }
    s->result = a[1];
    s->result_ready = 1;
    fh_ctr_complete(&s->ctr, (int)(int64_t)a[2]);
}

void fh_atomic_init(void)
{
    fh_am_register_internal(FH_H_ATOMIC_REQ, atomic_req, "atomic request");
    fh_am_register_internal(FH_H_ATOMIC_REP, atomic_rep, "atomic reply");
}

int fh_atomic(int rank, uint64_t *target, fh_atomic_op_t op, uint64_t operand,
              uint64_t compare, uint64_t *fetched)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_atomic", &rc);
    if (t == NULL)
        return rc;
    if ((rc = fh_check_rank("fh_atomic", rank)) != FH_OK)
        return rc;
    if ((unsigned)op >= FH_AOP__COUNT)
        return fh_set_error(FH_ERR_INVALID, "fh_atomic: unknown operation %d", (int)op);
    if (target == NULL)
        return fh_set_error(FH_ERR_INVALID, "fh_atomic: NULL target");
    if ((uintptr_t)target % 8 != 0)
        return fh_set_error(FH_ERR_ALIGN, "fh_atomic: target %p is not 8-byte aligned",
                            (void *)target);
    fh_seg_range_t r;
    if ((rc = fh_seg_find(fh_rt, rank, (uintptr_t)target, 8, &r)) != FH_OK)
        return fh_set_error(rc, "fh_atomic: %p is not inside a segment of rank %d",
                            (void *)target, rank);
    uint64_t old;
    if (rank == fh_rt->rank) {
        old = apply(target, op, operand, compare);
        fh_progress(t);   /* a spin on a local lock must let peers in */
    } else {
        fh_path_t *p = t->path;
        fh_handle_t h;
        pthread_mutex_lock(&p->lock);
        fh_hslot_t *s = fh_ht_alloc(&p->handles, t->tid, &h);
        if (s != NULL) {
            s->ctr.pending = 1;
            s->peer = rank;
        }
        pthread_mutex_unlock(&p->lock);
        if (s == NULL)
            return fh_set_error(FH_ERR_LIMIT, "fh_atomic: too many outstanding operations");
        uint64_t args[5] = {(uint64_t)(uintptr_t)target, (uint64_t)op, operand, compare, h};
        rc = fh_am_send_request(t, rank, FH_AM_REQ_SHORT, FH_H_ATOMIC_REQ, NULL, 0, 0,
                                args, 5);
        if (rc == FH_OK)
            rc = fh_wait_ctr(t, &s->ctr);
        pthread_mutex_lock(&p->lock);
        old = s->result;
        fh_ht_free(&p->handles, s);
        pthread_mutex_unlock(&p->lock);
        if (rc != FH_OK)
            return fh_set_error(rc, "fh_atomic on rank %d failed: %s", rank, fh_strerror(rc));
        FH_STAT_ADD(p->stats[rank].atomics, 1);
    }
    if (fetched != NULL)
        *fetched = old;
    return FH_OK;
}
