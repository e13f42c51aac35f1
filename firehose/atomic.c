/*
 * atomic.c -- remote 64- and 32-bit atomics, executed by the target over AMs.
 *
 * The target applies every operation with the CPU's atomic instructions
 * (__atomic builtins, sequentially consistent) of the operation's width
 * (fh_atomic_apply), and the self and node routes (route.c) use the same
 * instructions directly on our own memory or on a node group member's
 * mapped segment piece; the network's own atomics are never used.  Hence
 * all atomics on a location are mutually atomic whichever rank or thread
 * issues them, over the network or not.  A 32-bit operation touches exactly its 4 bytes.  The initiator
 * waits on a handle slot of its path: the reply names the slot by its
 * handle, so a late reply cannot touch a reused slot, and it must come from
 * the rank the request went to (the sender the transport verified), so
 * another rank cannot complete it.
 *
 * Wire format (short AMs):
 *   request FH_H_ATOMIC_REQ  args: address, op, operand, compare, handle,
 *                            width (4 or 8)
 *   reply   FH_H_ATOMIC_REP  args: handle, old value, status
 * The target refuses (error reply, log line, the sender's atomics_refused
 * counter) a request with another argument count, an unknown op or width,
 * a 32-bit operand or compare with high bits set, an address not aligned to
 * the width, or [address, +width) outside its segments.  The initiator
 * drops (am_dropped) a reply for a slot that is not waiting, or from another
 * rank than the request went to; a 32-bit operation's reply whose old value
 * does not fit in 32 bits is dropped too, and the operation fails
 * (FH_ERR_TRANSPORT) rather than hang.
 *
 * Blocking atomics read the old value from their slot after the wait.  NB
 * atomics keep the caller's fetched pointer in the slot: the reply handler
 * writes it (under the path lock, before the slot's counter completes), and
 * the slot counts in its thread's quiet_ops until then, so fh_quiet
 * completes them like NB puts.  An NB atomic never waits for a credit: a
 * request that finds none (the target has FH_AM_CREDITS of this path's
 * requests unanswered, i.e. it is not polling) goes on the path's
 * atomic_defer stack and is sent by a later progress call
 * (fh_atomic_progress); no order holds between incomplete atomics, so
 * neither does one here.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define APPLY_BODY(p, op, v, cmp)                                                        \
    switch (op) {                                                                        \
    case FH_AOP_FETCH: return __atomic_load_n(p, __ATOMIC_SEQ_CST);                      \
    case FH_AOP_SET: __atomic_store_n(p, v, __ATOMIC_SEQ_CST); return 0;                 \
    case FH_AOP_FETCH_ADD: return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);            \
    case FH_AOP_SWAP: return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);                \
    case FH_AOP_CSWAP:                                                                   \
        __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST,                 \
                                    __ATOMIC_SEQ_CST);                                   \
        return cmp; /* the old value either way */                                       \
    case FH_AOP_FETCH_AND: return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST);            \
    case FH_AOP_FETCH_OR: return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST);              \
    case FH_AOP_FETCH_XOR: return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST);            \
    case FH_AOP__COUNT: break;                                                           \
    }                                                                                    \
    return 0

static uint64_t apply64(uint64_t *p, fh_atomic_op_t op, uint64_t v, uint64_t cmp)
{
    APPLY_BODY(p, op, v, cmp);
}

static uint32_t apply32(uint32_t *p, fh_atomic_op_t op, uint32_t v, uint32_t cmp)
{
    APPLY_BODY(p, op, v, cmp);
}

#define FH_INLINE static inline __attribute__((always_inline))

/* Applies op on our own memory at the given width; returns the old value. */
FH_INLINE uint64_t apply(void *p, unsigned width, fh_atomic_op_t op, uint64_t v,
                         uint64_t cmp)
{
    if (width == 4)
        return apply32(p, op, (uint32_t)v, (uint32_t)cmp);
    return apply64(p, op, v, cmp);
}

static inline void store_fetched(void *fetched, unsigned width, uint64_t old)
{
    if (width == 4)
        *(uint32_t *)fetched = (uint32_t)old;
    else
        *(uint64_t *)fetched = old;
}

void fh_atomic_local(void *p, const fh_atomic_req_t *q)
{
    uint64_t old = apply(p, q->width, q->op, q->operand, q->compare);
    if (q->fetched != NULL)
        store_fetched(q->fetched, q->width, old);
}

enum { REQ_ARGS = 6, REP_ARGS = 3 };

/* args: target address, op, operand, compare, handle, width */
static void atomic_req(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf;
    (void)n;
    int64_t status = FH_OK;
    uint64_t old = 0;
    uint64_t w = na == REQ_ARGS ? a[5] : 0;
    if (na != REQ_ARGS || a[1] >= FH_AOP__COUNT || (w != 4 && w != 8) ||
        (w == 4 && (a[2] > UINT32_MAX || a[3] > UINT32_MAX))) {
        status = FH_ERR_INVALID;
    } else if (a[0] % w != 0) {
        status = FH_ERR_ALIGN;
    } else {
        fh_seg_range_t r;
        status = fh_seg_find(fh_rt, fh_rt->rank, (uintptr_t)a[0], (size_t)w, &r);
        if (status == FH_OK && fh_seg_holes_meet(r.holes, (uintptr_t)a[0], (size_t)w, true))
            status = FH_ERR_OUT_OF_SEGMENT;   /* protected since (seg_protect.c) */
        if (status == FH_OK)
            old = apply((void *)(uintptr_t)a[0], (unsigned)w, (fh_atomic_op_t)a[1], a[2],
                        a[3]);
    }
    if (status != FH_OK) {
        int src = -1;
        fh_token_source(tok, &src);
        if (src >= 0 && src < fh_rt->nranks)   /* handler: under this path's lock */
            FH_STAT_ADD(fh_token_path(tok)->stats[src].atomics_refused, 1);
        fh_log_error("refused a %llu-byte atomic (op %llu, %u args) from %s on "
                     "0x%llx: %s", (unsigned long long)(na >= 6 ? a[5] : 0),
                     (unsigned long long)(na >= 2 ? a[1] : 0), na, FH_RANK_NAME(src),
                     (unsigned long long)(na >= 1 ? a[0] : 0), fh_strerror((int)status));
    }
    /* A malformed request still gets its answer when it names a handle. */
    uint64_t rep[REP_ARGS] = {na >= 5 ? a[4] : 0, old, (uint64_t)status};
    fh_am_reply_internal(tok, FH_H_ATOMIC_REP, rep, REP_ARGS);
}

/* args: handle, old value, status; runs on the initiator's path (lock held) */
static void atomic_rep(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf;
    (void)n;
    fh_path_t *p = fh_token_path(tok);
    int src = -1;
    fh_token_source(tok, &src);
    fh_hslot_t *s = na == REP_ARGS ? fh_ht_lookup_any(&p->handles, a[0]) : NULL;
    if (s == NULL || s->ctr.pending != 1 || s->peer != src) {
        fh_am_drop(p, src, "an atomic reply for a handle %s",
                   s == NULL || s->ctr.pending != 1 ? "that is not waiting"
                                                    : "waiting for another rank");
        return;
    }
    int status = (int)(int64_t)a[2];
    if (status == FH_OK && s->width == 4 && a[1] > UINT32_MAX) {
        fh_am_drop(p, src, "an atomic reply with a 64-bit value for a 32-bit atomic");
        status = FH_ERR_TRANSPORT;
    }
    s->result = a[1];
    s->result_ready = 1;
    if (status == FH_OK) {
        if (s->fetched != NULL)
            store_fetched(s->fetched, s->width, a[1]);
        /* Under p->lock (the handler's path), like every write to p->stats:
         * exact however many threads share p (FH_PATHS=shared). */
        FH_STAT_ADD(p->stats[src].atomics, 1);
    }
    fh_ctr_complete(&s->ctr, status);
}

/* An NB atomic request waiting for a credit (see the top). */
typedef struct atomic_defer {
    struct atomic_defer *next;
    int rank;
    uint64_t args[REQ_ARGS];
} atomic_defer_t;

static void defer_push(fh_path_t *p, atomic_defer_t *first, atomic_defer_t *last)
{
    atomic_defer_t *head = atomic_load_explicit(&p->atomic_defer, memory_order_relaxed);
    do {
        last->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&p->atomic_defer, &head, first,
                                                    memory_order_release,
                                                    memory_order_relaxed));
}

/* The request of handle h left for rank (under no lock): from now on its reply
 * completes the slot, or the loss of the link (am.c up_on_lost,
 * fh_ht_fail_peer).  `lost` is p->link_lost[rank] read before the send: if
 * the link was lost meanwhile, the request may have gone with it, and the
 * slot fails now. */
static void sent(fh_path_t *p, fh_handle_t h, int rank, uint32_t lost)
{
    pthread_mutex_lock(&p->lock);
    fh_hslot_t *s = fh_ht_lookup_any(&p->handles, h);
    if (s != NULL && s->ctr.pending == 1 && s->peer == rank) {
        if (p->link_lost[rank] == lost) {
            s->awaits_reply = 1;
        } else {
            fh_log_error("path %d: the link to %s was lost while an atomic was sent: "
                         "failed (it may or may not have been applied)", p->index,
                         FH_RANK_NAME(rank));
            fh_ctr_complete(&s->ctr, FH_ERR_PEER_DEAD);
        }
    }
    pthread_mutex_unlock(&p->lock);
}

/* The deferred request could not be sent at all: its operation fails. */
static void defer_fail(fh_path_t *p, const atomic_defer_t *d, int rc)
{
    pthread_mutex_lock(&p->lock);
    fh_hslot_t *s = fh_ht_lookup_any(&p->handles, d->args[4]);
    if (s != NULL && s->ctr.pending == 1 && s->peer == d->rank)
        fh_ctr_complete(&s->ctr, rc);   /* and its thread's quiet_ops */
    pthread_mutex_unlock(&p->lock);
    fh_log_verbose(1, "atomic to %s failed: %s", FH_RANK_NAME(d->rank), fh_strerror(rc));
}

void fh_atomic_progress(fh_tls_t *t)
{
    fh_path_t *p = t->path;
    if (t->in_handler != 0 ||
        atomic_load_explicit(&p->atomic_defer, memory_order_relaxed) == NULL)
        return;
    atomic_defer_t *l = atomic_exchange_explicit(&p->atomic_defer, NULL,
                                                 memory_order_acquire);
    atomic_defer_t *keep = NULL, *keep_last = NULL;
    while (l != NULL) {
        atomic_defer_t *d = l;
        l = d->next;
        pthread_mutex_lock(&p->lock);
        uint32_t lost = p->link_lost[d->rank];
        const fh_hslot_t *s = fh_ht_lookup_any(&p->handles, d->args[4]);
        const int waiting = s != NULL && s->ctr.pending == 1 && s->peer == d->rank;
        pthread_mutex_unlock(&p->lock);
        if (!waiting) {                 /* (failed meanwhile: never sent) */
            free(d);
            continue;
        }
        int rc = fh_am_try_request(t, p, d->rank, FH_AM_REQ_SHORT, FH_H_ATOMIC_REQ, NULL, 0,
                                   d->args, REQ_ARGS);
        if (rc == FH_ERR_AGAIN) {
            if (keep == NULL)
                keep_last = d;
            d->next = keep;
            keep = d;
            continue;
        }
        if (rc != FH_OK)
            defer_fail(p, d, rc);
        else
            sent(p, d->args[4], d->rank, lost);
        free(d);
    }
    if (keep != NULL)
        defer_push(p, keep, keep_last);
}

/* Frees the requests still waiting on p (teardown). */
static void atomic_path_fini(fh_path_t *p)
{
    atomic_defer_t *d = atomic_exchange_explicit(&p->atomic_defer, NULL,
                                                 memory_order_acquire);
    while (d != NULL) {
        atomic_defer_t *next = d->next;
        free(d);
        d = next;
    }
}

/* Deferred requests are sent by fh_atomic_progress (a thread progress
 * function); the path poller only frees them at teardown. */
const fh_poller_t fh_atomic_poller = {"atomic", FH_POLL_AFTER, NULL, atomic_path_fini};

void fh_atomic_init(void)
{
    fh_am_register_internal(FH_H_ATOMIC_REQ, atomic_req, "atomic request");
    fh_am_register_internal(FH_H_ATOMIC_REP, atomic_rep, "atomic reply");
}

/* Every atomic entry point: blocking (nb false, h unused) or NB; validates,
 * then the rank's route does it. */
static int atomic_op(const char *fn, int rank, void *target, unsigned width,
                     fh_atomic_op_t op, uint64_t operand, uint64_t compare, void *fetched,
                     bool nb, fh_handle_t *h)
{
    int rc;
    fh_tls_t *t = fh_enter(fn, &rc);
    if (t == NULL)
        return rc;
    if (nb) {
        if (h == NULL)
            return fh_set_error(FH_ERR_INVALID, "%s: NULL handle pointer", fn);
        *h = FH_HANDLE_DONE;
    }
    if ((rc = fh_check_rank(fn, rank)) != FH_OK)
        return rc;
    if ((unsigned)op >= FH_AOP__COUNT)
        return fh_set_error(FH_ERR_INVALID, "%s: unknown operation %d", fn, (int)op);
    if (target == NULL)
        return fh_set_error(FH_ERR_INVALID, "%s: NULL target", fn);
    if (((uintptr_t)target & (width - 1)) != 0)
        return fh_set_error(FH_ERR_ALIGN, "%s: target %p is not %u-byte aligned", fn,
                            target, width);
    fh_atomic_req_t q;     /* field by field: no zeroing on the fast path */
    q.fn = fn, q.rank = rank, q.target = target, q.width = width, q.op = op;
    q.operand = operand, q.compare = compare, q.fetched = fetched, q.nb = nb, q.h = h;
    if ((rc = fh_seg_find(fh_rt, rank, (uintptr_t)target, width, &q.r)) != FH_OK)
        return fh_set_error(rc, "%s: %p is not inside a segment of %s", fn, target,
                            FH_RANK_NAME(rank));
    if (q.r.holes != NULL &&   /* reads and writes (seg_protect.c) */
        (rc = fh_seg_holes_check(fn, rank, true, target, width, &q.r)) != FH_OK)
        return rc;
    return fh_rt->route[rank]->atomic(t, &q);
}

/* The net route: a request to the target's service path, waited for on a
 * handle slot (blocking) or left in it (NB). */
int fh_atomic_net(fh_tls_t *t, const fh_atomic_req_t *q)
{
    const char *fn = q->fn;
    int rank = q->rank;
    unsigned width = q->width;
    bool nb = q->nb;
    int rc;
    fh_path_t *p = t->path;
    fh_handle_t hh;
    pthread_mutex_lock(&p->lock);
    fh_hslot_t *s = fh_ht_alloc(&p->handles, t->tid, &hh);
    uint32_t lost = p->link_lost[rank];
    if (s != NULL) {
        s->peer = rank;
        s->width = (uint8_t)width;
        if (nb) {
            s->fetched = q->fetched;
            s->ctr.owner_ops = &t->quiet_ops;   /* fh_quiet waits for the reply */
        }
        fh_ctr_add(&s->ctr);
    }
    pthread_mutex_unlock(&p->lock);
    if (s == NULL)
        return fh_set_error(FH_ERR_LIMIT, "%s: too many outstanding operations", fn);
    uint64_t args[REQ_ARGS] = {(uint64_t)(uintptr_t)q->target, (uint64_t)q->op, q->operand,
                               q->compare, hh, width};
    const fh_hslot_t *d_sent = s;   /* NB: NULL while deferred (not sent) */
    if (nb) {
        rc = fh_am_try_request(t, p, rank, FH_AM_REQ_SHORT, FH_H_ATOMIC_REQ, NULL, 0, args,
                               REQ_ARGS);
        atomic_defer_t *d = rc == FH_ERR_AGAIN ? malloc(sizeof *d) : NULL;
        d_sent = rc == FH_OK ? s : NULL;
        if (d != NULL) {
            d->rank = rank;
            memcpy(d->args, args, sizeof args);
            defer_push(p, d, d);
            rc = FH_OK;
        } else if (rc == FH_ERR_AGAIN) {
            rc = FH_ERR_NO_MEMORY;
        }
    } else {
        rc = fh_am_send_request(t, rank, FH_AM_REQ_SHORT, FH_H_ATOMIC_REQ, NULL, 0, 0, args,
                                REQ_ARGS);
    }
    if (rc == FH_OK && !(nb && d_sent == NULL))
        sent(p, hh, rank, lost);
    if (nb && rc == FH_OK) {
        *q->h = hh;
        return FH_OK;
    }
    if (rc == FH_OK)
        rc = fh_wait_ctr(t, &s->ctr);
    pthread_mutex_lock(&p->lock);
    uint64_t old = s->result;
    if (nb)                /* NB whose request could not be sent */
        fh_ctr_complete(&s->ctr, rc);
    fh_ht_free(&p->handles, s);
    pthread_mutex_unlock(&p->lock);
    if (rc != FH_OK)
        return fh_set_error(rc, "%s on %s failed: %s", fn, FH_RANK_NAME(rank), fh_strerror(rc));
    if (q->fetched != NULL)
        store_fetched(q->fetched, width, old);
    return FH_OK;
}

int fh_atomic(int rank, uint64_t *target, fh_atomic_op_t op, uint64_t operand,
              uint64_t compare, uint64_t *fetched)
{
    return atomic_op("fh_atomic", rank, target, 8, op, operand, compare, fetched, false,
                     NULL);
}

int fh_atomic32(int rank, uint32_t *target, fh_atomic_op_t op, uint32_t operand,
                uint32_t compare, uint32_t *fetched)
{
    return atomic_op("fh_atomic32", rank, target, 4, op, operand, compare, fetched, false,
                     NULL);
}

int fh_atomic_nb(int rank, uint64_t *target, fh_atomic_op_t op, uint64_t operand,
                 uint64_t compare, uint64_t *fetched, fh_handle_t *h)
{
    return atomic_op("fh_atomic_nb", rank, target, 8, op, operand, compare, fetched, true,
                     h);
}

int fh_atomic32_nb(int rank, uint32_t *target, fh_atomic_op_t op, uint32_t operand,
                   uint32_t compare, uint32_t *fetched, fh_handle_t *h)
{
    return atomic_op("fh_atomic32_nb", rank, target, 4, op, operand, compare, fetched, true,
                     h);
}
