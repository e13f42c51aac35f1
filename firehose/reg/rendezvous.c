/*
 * rendezvous.c -- FH_REG_STRATEGY=rendezvous and rendezvous-cache (strat_common.h).
 *
 * Both are the firehose paper's rendezvous comparison strategies: every
 * chunk of every operation costs a round trip to the target before its
 * RDMA ("rendezvous" with unpin, and "rendezvous without unpin", which
 * caches registrations forever at the target only).
 *
 * One message format both ways, on the service path:
 *   RDV_REGISTER   initiator -> target: register [addr, addr+len) (status:
 *                  1 when the initiator will write, 0 read); the target
 *                  answers with an RDV_REPLY (always, also on error), and
 *                  refuses memory the application could not access so
 *                  (protected or unmapped pages: FH_ERR_OUT_OF_SEGMENT).
 *   RDV_UNREGISTER initiator -> target (plain rendezvous, after the RDMA
 *                  completed): deregister `handle`.  No reply.  The
 *                  target does not depend on it: see "Key lifetime".
 *   RDV_REPLY      status, and on success base/len/key of the registration
 *                  covering the range and the handle naming it.
 *
 * Target rules (each refusal: error reply + one log line, nothing
 * registered): the message has exactly the expected size and a known op;
 * the range is non-empty, does not wrap, lies inside one of our segment
 * pieces and is at most R = FH_REGION_MAX bytes.  Plain rendezvous
 * registers exactly the range, per request.  rendezvous-cache serves the
 * request from its frame cache: the R-aligned frame around the range
 * clipped to the segment piece (so the key covers only segment memory) is
 * registered the first time any peer asks for it and kept until the
 * segment is destroyed; the range must not cross that frame.  A handle to
 * deregister must name a registration made for the same peer.
 *
 * Key lifetime (strat_common.h): a registration lives at most as long as its
 * segment.  Destroying the segment deregisters the cache's frames and,
 * for plain rendezvous, every registration whose RDV_UNREGISTER has not
 * arrived -- a peer that never sends it (buggy, hostile, or just slower
 * than the destroy) cannot keep a key to memory that is unmapped and
 * maybe mapped again.  Such a revoked registration keeps its handle
 * (strat_common.h: s->revoked) so that a late RDV_UNREGISTER is taken quietly:
 * freed, counted neither again nor as refused.
 *
 * Statistics (strat_common.h, strat_peer_t): the target counts, in the
 * requesting peer's row, a hit for a request served by a registration it
 * already had (rendezvous-cache: the frame was registered) and a miss for
 * one that needed a new registration (plain rendezvous: every request).
 * The initiator counts its messages (requests).
 *
 * Initiator: a transfer is cut into chunks (plain: R bytes; cache: the part
 * inside one frame).  Every chunk is requested from the target -- there is
 * no initiator-side key cache, so even a rendezvous-cache "hit" is a round
 * trip.  Up to RDV_DEPTH chunks have their registration requested ahead,
 * so the target serves chunk i+1.. while chunk i's RDMA runs; chunks
 * complete in order.  Only plain rendezvous sends RDV_UNREGISTER.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "firehose/util/vma.h"
#include "strat_common.h"

/* ------------------------------------------------------------ target */

/* Frame of `a` clipped to the segment piece [sb, se): [*lo, *hi). */
static void frame_clip(size_t R, uintptr_t a, uintptr_t sb, uintptr_t se, uintptr_t *lo,
                       uintptr_t *hi)
{
    uintptr_t f = a - a % R;
    *lo = f > sb ? f : sb;
    *hi = (se - f > R) ? f + R : se;   /* f <= a < se, so se - f does not wrap */
}

static void refuse(fh_token_t tok, struct fh_strat *s, int src, const rdv_msg_t *q,
                   int status, const char *why)
{
    fh_log_error("rendezvous: refused a registration request from %s for "
                 "[0x%llx, +%llu): %s", FH_RANK_NAME(src), (unsigned long long)q->addr,
                 (unsigned long long)q->len, why);
    if (s != NULL) {
        pthread_mutex_lock(&s->lock);
        s->peer[src].refused++;
        pthread_mutex_unlock(&s->lock);
    }
    rdv_msg_t rep = {.op = RDV_REPLY, .status = status, .token = q->token};
    svc_am_reply_medium(tok, FH_H_RDV_REP, &rep, sizeof rep);
}

static void unregister(struct fh_strat *s, int src, uint64_t handle)
{
    fh_core_t *rt = fh_reg_core;
    pthread_mutex_lock(&s->lock);
    strat_entry_t *e = s->kind == FH_REG_RENDEZVOUS
                           ? fhc_map_get(&s->tmap, (uint64_t)src, handle) : NULL;
    if (e != NULL) {
        assert(e->peer == (uint32_t)src);
        fhc_map_del(&s->tmap, (uint64_t)src, handle);
        if (e->revoked) {
            /* Its segment was destroyed first: already deregistered and
             * counted released; this is only the late message. */
            assert(e->mr == NULL && s->peer[src].revoked_kept > 0);
            strat_list_remove(&s->revoked, e);
            s->peer[src].revoked_kept--;
        } else {
            strat_list_remove(&s->tlist, e);
            s->peer[src].unregistrations++;
            s->peer[src].pinned_remote -= e->len;
        }
    } else {
        s->peer[src].refused++;
    }
    pthread_mutex_unlock(&s->lock);
    if (e == NULL) {
        fh_log_error("rendezvous: refused a deregistration request from %s: handle "
                     "%llu is not one of its registrations", FH_RANK_NAME(src),
                     (unsigned long long)handle);
        return;
    }
    if (e->mr != NULL)
        rt->cops->mr_dereg(rt->conduit, e->mr);
    free(e);
}

static void h_rdv_req(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                      unsigned nargs)
{
    (void)args;
    (void)nargs;
    fh_core_t *rt = fh_reg_core;
    struct fh_strat *s = rt->strat;
    int src;
    svc_token_source(tok, &src);
    rdv_msg_t q = {0};
    if (nbytes != sizeof q) {
        if (nbytes >= 16)
            memcpy(&q.token, (const char *)buf + 8, 8);
        refuse(tok, s, src, &q, FH_ERR_INVALID, "malformed message");
        return;
    }
    memcpy(&q, buf, sizeof q);
    if (s == NULL || s->kind == FH_REG_BOUNCE) {
        refuse(tok, s, src, &q, FH_ERR_CONFIG, "FH_REG_STRATEGY is not rendezvous here");
        return;
    }
    if (q.op == RDV_UNREGISTER) {
        unregister(s, src, q.handle);
        return;
    }
    if (q.op != RDV_REGISTER) {
        refuse(tok, s, src, &q, FH_ERR_INVALID, "unknown operation");
        return;
    }
    if (q.len == 0 || q.addr > UINTPTR_MAX || q.addr + q.len < q.addr) {
        refuse(tok, s, src, &q, FH_ERR_OVERFLOW, "empty or wrapping range");
        return;
    }
    if (q.len > s->R) {
        refuse(tok, s, src, &q, FH_ERR_LIMIT, "larger than the largest registration "
               "(FH_REGION_MAX)");
        return;
    }
    fh_seg_range_t r;
    if (svc_seg_find(rt->rank, (uintptr_t)q.addr, (size_t)q.len, &r) != FH_OK) {
        refuse(tok, s, src, &q, FH_ERR_OUT_OF_SEGMENT, "outside our segments");
        return;
    }
    /* The application may have protected or unmapped part of its segment:
     * a peer's RDMA there would fault in our conduit (docs/reliability.md). */
    if (!fh_vma_check((uintptr_t)q.addr, (size_t)q.len,
                      FH_VMA_READ | (q.status ? FH_VMA_WRITE : 0), NULL)) {
        refuse(tok, s, src, &q, FH_ERR_OUT_OF_SEGMENT, q.status
               ? "not mapped writable" : "not mapped readable");
        return;
    }
    uintptr_t lo = (uintptr_t)q.addr, hi = lo + (size_t)q.len;
    strat_entry_t *e = NULL;
    rdv_msg_t rep = {.op = RDV_REPLY, .status = FH_OK, .token = q.token};
    if (s->kind == FH_REG_RENDEZVOUS_CACHE) {
        uintptr_t flo, fhi;
        frame_clip(s->R, lo, r.base, r.end, &flo, &fhi);
        if (hi > fhi) {
            refuse(tok, s, src, &q, FH_ERR_INVALID, "range crosses a registration frame");
            return;
        }
        lo = flo;
        hi = fhi;
        pthread_mutex_lock(&s->lock);
        e = fhc_map_get(&s->tmap, 0, lo);
        if (e != NULL) {
            s->peer[src].hits++;   /* frame already registered (by any peer) */
            rep.addr = e->base;    /* copied under the lock: only a destroy */
            rep.len = e->len;      /* removes frames, and it fences the service */
            rep.key0 = e->key[0];  /* path first (segment.c), but the reply */
            rep.key1 = e->key[1];  /* needs no pointer into the table */
        }
        pthread_mutex_unlock(&s->lock);
    }
    if (e == NULL) {
        /* Only this handler (service path lock) creates target entries, so
         * no other thread registers the same frame meanwhile. */
        e = calloc(1, sizeof *e);
        fh_rkey_t rk = {0, 0};
        if (e == NULL ||
            rt->cops->mr_reg(rt->conduit, (void *)lo, hi - lo,
                             FH_MR_LOCAL | FH_MR_REMOTE_READ | FH_MR_REMOTE_WRITE, &e->mr,
                             &rk) != FH_OK) {
            free(e);
            refuse(tok, s, src, &q, FH_ERR_NO_MEMORY, "registration failed");
            return;
        }
        e->peer = (uint32_t)src;
        e->base = lo;
        e->len = hi - lo;
        e->key[0] = rk.key;
        e->key[1] = rk.base;
        pthread_mutex_lock(&s->lock);
        int ok = fhc_map_reserve(&s->tmap, 1) == 0;
        if (ok) {
            e->handle = s->kind == FH_REG_RENDEZVOUS ? s->next_handle++ : 0;
            fhc_map_put(&s->tmap, s->kind == FH_REG_RENDEZVOUS ? (uint64_t)src : 0,
                        s->kind == FH_REG_RENDEZVOUS ? e->handle : lo, e);
            strat_list_push(&s->tlist, e);
            s->peer[src].misses++;
            s->peer[src].registrations++;
            s->peer[src].pinned_remote += e->len;
            rep.addr = e->base;
            rep.len = e->len;
            rep.handle = e->handle;
            rep.key0 = e->key[0];
            rep.key1 = e->key[1];
        }
        pthread_mutex_unlock(&s->lock);
        if (!ok) {
            rt->cops->mr_dereg(rt->conduit, e->mr);
            free(e);
            refuse(tok, s, src, &q, FH_ERR_NO_MEMORY, "out of memory");
            return;
        }
        /* The reply was filled in under the lock, so nothing below needs
         * e.  Nor can the segment be unmapped under this handler: its
         * destroy fences the service path, whose lock we hold, before it
         * revokes and unmaps (segment.c). */
    }
    svc_am_reply_medium(tok, FH_H_RDV_REP, &rep, sizeof rep);
}

static void h_rdv_rep(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                      unsigned nargs)
{
    (void)args;
    (void)nargs;
    struct fh_strat *s = fh_reg_core->strat;
    int src;
    svc_token_source(tok, &src);
    rdv_msg_t m;
    if (s == NULL || nbytes != sizeof m) {
        fh_log_error("rendezvous: dropped a malformed reply from %s (%zu bytes)", FH_RANK_NAME(src),
                     nbytes);
        return;
    }
    memcpy(&m, buf, sizeof m);
    pthread_mutex_lock(&s->lock);
    strat_wait_t *w = m.op == RDV_REPLY ? strat_wait_find(s, src, m.token) : NULL;
    if (w != NULL && atomic_load_explicit(&w->pending, memory_order_relaxed) == 1) {
        w->status = m.status > 0 ? FH_ERR_INVALID : m.status;
        w->base = (uintptr_t)m.addr;
        w->len = (size_t)m.len;
        w->key[0] = m.key0;
        w->key[1] = m.key1;
        w->handle = m.handle;
        atomic_store_explicit(&w->pending, 0, memory_order_release);
    } else {
        w = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    if (w == NULL)
        fh_log_error("rendezvous: dropped a reply from %s for no pending request "
                     "(token %llu)", FH_RANK_NAME(src), (unsigned long long)m.token);
}

void strat_rdv_register_handlers(void)
{
    svc_am_register(FH_H_RDV_REQ, h_rdv_req, "rendezvous-req");
    svc_am_register(FH_H_RDV_REP, h_rdv_rep, "rendezvous-rep");
}

/* ------------------------------------------------------------ initiator */

static int try_send(fh_thread_t *t, struct fh_strat *s, int rank, const rdv_msg_t *m)
{
    int rc = svc_am_try_request(t, fh_reg_core->svc_path, rank, FH_SVC_AM_MEDIUM,
                                FH_H_RDV_REQ, m, sizeof *m, NULL, 0);
    if (rc == FH_OK) {
        pthread_mutex_lock(&s->lock);
        s->peer[rank].requests++;
        pthread_mutex_unlock(&s->lock);
    }
    return rc;
}

int strat_rdv_start(struct fh_strat *s, strat_xop_t *x)
{
    (void)s;
    fh_seg_range_t seg;
    if (svc_seg_find(x->rank, (uintptr_t)x->remote, x->n, &seg) != FH_OK)
        return fh_set_error(FH_ERR_OUT_OF_SEGMENT, "%s to %s: not inside a segment",
                            x->is_put ? "put" : "get", FH_RANK_NAME(x->rank));
    x->seg_base = seg.base;
    x->seg_end = seg.end;
    return FH_OK;
}

/* The next chunk's range and waiter (slot RDV_FREE -> RDV_ASKING). */
static int prepare(struct fh_strat *s, strat_xop_t *x, rdv_slot_t *sl)
{
    memset(sl, 0, sizeof *sl);
    sl->rdma = (fh_ctr_t)FH_CTR_INIT;
    sl->raddr = x->remote + x->issued;
    sl->off = x->issued;
    size_t len = x->n - x->issued;
    uintptr_t lo = (uintptr_t)sl->raddr, hi = lo + len;
    if (s->kind == FH_REG_RENDEZVOUS_CACHE)
        frame_clip(s->R, (uintptr_t)sl->raddr, x->seg_base, x->seg_end, &lo, &hi);
    else if (len > s->R)
        hi = lo + s->R;
    if ((uintptr_t)sl->raddr + len > hi)
        len = hi - (uintptr_t)sl->raddr;
    assert(len > 0 && len <= s->R);
    sl->len = len;
    sl->token = strat_wait_begin(s, x->rank, &sl->w, 1);
    if (sl->token == 0)
        return FH_ERR_NO_MEMORY;
    sl->state = RDV_ASKING;
    return FH_OK;
}

/* Asks for registrations ahead, up to RDV_DEPTH chunks (both forms, every
 * chunk: no initiator-side key cache). */
static void ask_ahead(fh_thread_t *t, struct fh_strat *s, strat_xop_t *x)
{
    while (x->status == FH_OK && x->issued < x->n && x->head - x->tail < RDV_DEPTH) {
        rdv_slot_t *sl = &x->slot[x->head % RDV_DEPTH];
        int rc = sl->state == RDV_FREE ? prepare(s, x, sl) : FH_OK;
        if (rc == FH_OK) {
            rdv_msg_t m = {.op = RDV_REGISTER, .status = x->is_put, .token = sl->token,
                           .addr = sl->raddr, .len = sl->len};
            rc = try_send(t, s, x->rank, &m);
            if (rc == FH_ERR_AGAIN)
                return;          /* the slot stays RDV_ASKING: next time */
            if (rc != FH_OK) {
                strat_wait_end(s, x->rank, sl->token);
                sl->state = RDV_FREE;
            }
        }
        if (rc != FH_OK) {
            x->status = rc;
            fh_log_verbose(1, "%s to %s: cannot send a rendezvous request: %s",
                           x->is_put ? "put" : "get", FH_RANK_NAME(x->rank), fh_strerror(rc));
            return;
        }
        sl->state = RDV_WAITING;
        x->head++;
        x->issued += sl->len;
    }
}

/* The reply of sl is in: checks that it covers the chunk and posts the
 * chunk's RDMA (queued by rma.c if the conduit cannot take it now). */
static void got_key(fh_thread_t *t, struct fh_strat *s, strat_xop_t *x, rdv_slot_t *sl)
{
    strat_wait_end(s, x->rank, sl->token);
    const strat_wait_t *w = &sl->w;
    sl->state = RDV_RDMA;
    sl->status = w->status;
    if (sl->status == FH_OK && (w->base > sl->raddr || sl->raddr + sl->len > w->base + w->len)) {
        fh_log_error("rendezvous: %s answered [0x%llx, +%zu) with a registration "
                     "that does not cover it", FH_RANK_NAME(x->rank), (unsigned long long)sl->raddr,
                     sl->len);
        sl->status = FH_ERR_TRANSPORT;
    }
    if (sl->status != FH_OK || x->status != FH_OK)
        return;
    fh_rkey_t rk = {w->key[0], w->key[1]};
    sl->status = svc_post(t, x->is_put, x->rank, x->local + sl->off, x->lmr, sl->raddr,
                          sl->len, &rk, &sl->rdma, false);
}

bool strat_rdv_step(fh_thread_t *t, struct fh_strat *s, strat_xop_t *x)
{
    ask_ahead(t, s, x);
    /* Chunks complete in order. */
    while (x->tail != x->head) {
        rdv_slot_t *sl = &x->slot[x->tail % RDV_DEPTH];
        if (sl->state == RDV_WAITING) {
            if (atomic_load_explicit(&sl->w.pending, memory_order_acquire) != 0)
                return false;
            got_key(t, s, x, sl);
        }
        if (sl->state == RDV_RDMA) {
            fh_path_base_t *p = t->path;
            pthread_mutex_lock(&p->lock);
            bool busy = sl->rdma.pending != 0;
            int st = sl->rdma.status;
            pthread_mutex_unlock(&p->lock);
            if (busy)
                return false;
            if (sl->status == FH_OK)
                sl->status = st;
            /* Only plain rendezvous gives registrations back. */
            sl->state = s->kind == FH_REG_RENDEZVOUS && sl->w.status == FH_OK ? RDV_UNREG
                                                                               : RDV_FREE;
        }
        if (sl->state == RDV_UNREG) {
            rdv_msg_t m = {.op = RDV_UNREGISTER, .handle = sl->w.handle};
            int urc = try_send(t, s, x->rank, &m);
            if (urc == FH_ERR_AGAIN)
                return false;
            if (sl->status == FH_OK)
                sl->status = urc;
            sl->state = RDV_FREE;
        }
        if (sl->status != FH_OK && x->status == FH_OK) {
            x->status = sl->status;
            fh_log_verbose(1, "%s to %s: rendezvous for [0x%llx, +%zu) failed: %s",
                           x->is_put ? "put" : "get", FH_RANK_NAME(x->rank),
                           (unsigned long long)sl->raddr, sl->len, fh_strerror(sl->status));
        }
        x->tail++;
        ask_ahead(t, s, x);
    }
    if (x->status == FH_OK && x->issued < x->n)
        return false;          /* the next request is waiting for a credit */
    /* Over: a prepared request that was never sent has a waiter left. */
    rdv_slot_t *sl = &x->slot[x->head % RDV_DEPTH];
    if (sl->state == RDV_ASKING) {
        strat_wait_end(s, x->rank, sl->token);
        sl->state = RDV_FREE;
    }
    return true;
}
