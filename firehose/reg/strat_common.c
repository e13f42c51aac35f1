/*
 * strat_common.c -- the comparison registration strategies (strat_common.h): life
 * cycle, the operation records and their progress (strat_common.h,
 * "Completion"), segment destruction, waiters, counters.
 *
 * Segments under these strategies are mmap'ed and not registered (rkey
 * {0, 0}, see segment.c); the transfer code in rendezvous.c / bounce.c
 * decides what, if anything, gets registered.
 *
 * Key lifetime (strat_common.h, "Security"): whatever the rendezvous forms
 * registered for peers inside a segment piece is deregistered by
 * fh_strat_seg_destroy before the piece is unmapped -- the cache's frames
 * by design, plain rendezvous registrations whose RDV_UNREGISTER has not
 * come (yet, or ever) as revocations; fh_strat_fini deregisters everything
 * left before fh_finalize unmaps the segments.  Bounce registers nothing.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "reg.h"
#include "strat_common.h"

int fh_strat_init(fh_core_t *rt)
{
    struct fh_strat *s = calloc(1, sizeof *s);
    if (s == NULL || (s->peer = calloc((size_t)rt->nranks, sizeof *s->peer)) == NULL) {
        free(s);
        return fh_set_error(FH_ERR_NO_MEMORY, "fh_init: registration strategy state");
    }
    pthread_mutex_init(&s->lock, NULL);
    s->kind = rt->cfg.reg_strategy;
    s->R = rt->cfg.region_max;
    s->chunk = rt->am_max_medium;
    s->next_token = 1;
    s->next_handle = 1;
    s->revoked_cap = 2 * (uint32_t)rt->cfg.am_credits;
    fhc_map_init(&s->waits);
    fhc_map_init(&s->tmap);
    rt->strat = s;
    if (rt->cfg.verbose >= 1 && rt->rank == 0)
        fh_log_verbose(1, "registration strategy %s: max registration %zu, bounce chunk %zu",
                       rt->reg_ops->name, s->R, s->chunk);
    return FH_OK;
}

/* Frees every entry of l, deregistering those still registered; returns
 * the number of deregistrations that failed. */
static unsigned drop_list(fh_core_t *rt, strat_list_t *l)
{
    unsigned failed = 0;
    while (l->head != NULL) {
        strat_entry_t *e = l->head;
        strat_list_remove(l, e);
        if (e->mr != NULL && rt->cops->mr_dereg(rt->conduit, e->mr) != FH_OK)
            failed++;
        free(e);
    }
    return failed;
}

unsigned fh_strat_fini(fh_core_t *rt)
{
    struct fh_strat *s = rt->strat;
    if (s == NULL)
        return 0;
    pthread_mutex_lock(&s->lock);
    rt->strat = NULL;
    /* Registrations of segments still alive at finalize, and any a peer
     * never gave back: deregistered before fh_seg_fini unmaps. */
    unsigned failed = drop_list(rt, &s->tlist);
    drop_list(rt, &s->revoked);   /* no registration left */
    fhc_map_fini(&s->waits);
    fhc_map_fini(&s->tmap);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_destroy(&s->lock);
    free(s->peer);
    free(s);
    return failed;
}

/* Pushes the list [first .. last] on p's records. */
static void push_ops(fh_path_base_t *p, strat_xop_t *first, strat_xop_t *last)
{
    strat_xop_t *head = atomic_load_explicit(&p->strat_ops, memory_order_relaxed);
    do {
        last->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&p->strat_ops, &head, first,
                                                    memory_order_release,
                                                    memory_order_relaxed));
}

int fh_strat_xfer(fh_thread_t *t, bool is_put, int rank, char *local, struct fh_mr *lmr,
                  uint64_t remote, size_t n, fh_ctr_t *ctr, bool own_lmr)
{
    struct fh_strat *s = fh_reg_core->strat;
    strat_xop_t *x = calloc(1, sizeof *x);
    int rc = FH_ERR_NO_MEMORY;
    if (x != NULL) {
        *x = (strat_xop_t){.uctr = ctr, .is_put = is_put, .rank = rank, .local = local,
                           .lmr = lmr, .own_lmr = own_lmr, .remote = remote, .n = n,
                           .status = FH_OK};
        x->w.path = t->path;     /* bounce: its chunks leave on it (link_lost) */
        rc = s->kind == FH_REG_BOUNCE ? strat_bounce_start(s, x) : strat_rdv_start(s, x);
    } else {
        fh_set_error(rc, "%s to %s: out of memory", is_put ? "put" : "get", FH_RANK_NAME(rank));
    }
    if (rc != FH_OK) {
        free(x);
        if (own_lmr)
            svc_local_mr_release(lmr);
        return rc;
    }
    fh_path_base_t *p = t->path;
    pthread_mutex_lock(&p->lock);
    fh_ctr_add(ctr);
    p->inflight++;
    fh_stat_rma(p, rank, is_put, n);
    pthread_mutex_unlock(&p->lock);
    push_ops(p, x, x);
    fh_strat_progress(t);     /* send what can be sent now */
    return FH_OK;
}

void fh_strat_progress(fh_thread_t *t)
{
    struct fh_strat *s = fh_reg_core->strat;
    fh_path_base_t *p = t->path;
    if (s == NULL || t->in_handler != 0 ||
        atomic_load_explicit(&p->strat_ops, memory_order_relaxed) == NULL)
        return;
    /* Take them all: another thread of a shared path finds none and leaves
     * these records to us meanwhile. */
    strat_xop_t *l = atomic_exchange_explicit(&p->strat_ops, NULL, memory_order_acquire);
    strat_xop_t *keep = NULL, *keep_last = NULL, *done = NULL;
    while (l != NULL) {
        strat_xop_t *x = l;
        l = x->next;
        bool over = s->kind == FH_REG_BOUNCE ? strat_bounce_step(t, s, x)
                                             : strat_rdv_step(t, s, x);
        if (over && x->own_lmr) {
            svc_local_mr_release(x->lmr);   /* no RDMA of x is in flight */
            x->own_lmr = false;
        }
        if (over) {
            x->next = done;
            done = x;
        } else {
            if (keep == NULL)
                keep_last = x;
            x->next = keep;
            keep = x;
        }
    }
    if (keep != NULL)
        push_ops(p, keep, keep_last);
    if (done == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    for (strat_xop_t *x = done; x != NULL; x = x->next) {
        fh_ctr_complete(x->uctr, x->status);
        assert(p->inflight > 0);
        p->inflight--;
    }
    pthread_mutex_unlock(&p->lock);
    while (done != NULL) {
        strat_xop_t *x = done;
        done = x->next;
        if (x->status != FH_OK)
            fh_log_verbose(1, "%s to %s failed: %s", x->is_put ? "put" : "get",
                           FH_RANK_NAME(x->rank), fh_strerror(x->status));
        free(x);
    }
}

void fh_strat_path_fini(fh_path_base_t *p)
{
    strat_xop_t *x = atomic_exchange_explicit(&p->strat_ops, NULL, memory_order_acquire);
    while (x != NULL) {
        strat_xop_t *next = x->next;
        free(x);
        x = next;
    }
}

void fh_strat_link_lost(fh_path_base_t *p, int rank)
{
    struct fh_strat *s = fh_reg_core->strat;
    const bool bounce = s != NULL && s->kind == FH_REG_BOUNCE;
    if (s == NULL || (!bounce && p != fh_reg_core->svc_path))
        return;
    unsigned n = 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->waits.cap; i++) {
        strat_wait_t *w = s->waits.slot[i].val;
        if (w == NULL || s->waits.slot[i].k1 != (uint64_t)rank
            || atomic_load_explicit(&w->pending, memory_order_relaxed) == 0
            || (bounce ? w->path != p
                       : atomic_load_explicit(&w->pending, memory_order_relaxed) != 1))
            continue;
        w->status = FH_ERR_PEER_DEAD;
        atomic_store_explicit(&w->pending, 0, memory_order_release);
        n++;
    }
    pthread_mutex_unlock(&s->lock);
    if (n != 0)
        fh_log_error("%s: the link to %s was lost with %u %s waiting for a reply: "
                     "failed (%s)", bounce ? "bounce" : "rendezvous", FH_RANK_NAME(rank), n,
                     bounce ? (n == 1 ? "transfer" : "transfers")
                            : (n == 1 ? "key request" : "key requests"),
                     bounce ? "the chunks sent may or may not have been copied"
                            : "their transfers fail");
}

/* Deregisters every registration we made for peers inside [base,
 * base+size) (s->lock held) and counts it released in its peer's row: the
 * cache's frames, and plain rendezvous registrations whose RDV_UNREGISTER
 * did not come.  Those keep their handle on s->revoked (up to revoked_cap
 * per peer, see strat_common.h).  Returns the number of deregistrations that
 * failed; revoked[peer] counts plain rendezvous revocations per peer. */
static unsigned revoke_range(fh_core_t *rt, struct fh_strat *s, uintptr_t base, size_t size,
                             uint32_t *revoked)
{
    unsigned failed = 0;
    for (strat_entry_t *e = s->tlist.head, *nx; e != NULL; e = nx) {
        nx = e->next;
        if (e->base >= base + size || e->base + e->len <= base)
            continue;
        /* Requests are honoured only inside one segment piece. */
        assert(e->base >= base && e->base + e->len <= base + size);
        assert(!e->revoked && e->mr != NULL);
        strat_list_remove(&s->tlist, e);
        if (rt->cops->mr_dereg(rt->conduit, e->mr) != FH_OK)
            failed++;
        e->mr = NULL;
        s->peer[e->peer].unregistrations++;
        s->peer[e->peer].pinned_remote -= e->len;
        if (s->kind == FH_REG_RENDEZVOUS_CACHE) {
            fhc_map_del(&s->tmap, 0, e->base);
            free(e);
            continue;
        }
        revoked[e->peer]++;
        if (s->peer[e->peer].revoked_kept < s->revoked_cap) {
            e->revoked = true;
            s->peer[e->peer].revoked_kept++;
            strat_list_push(&s->revoked, e);
        } else {
            fhc_map_del(&s->tmap, e->peer, e->handle);
            free(e);
        }
    }
    return failed;
}

unsigned fh_strat_seg_destroy(fh_core_t *rt, uintptr_t base, size_t size)
{
    struct fh_strat *s = rt->strat;
    if (s == NULL || s->kind == FH_REG_BOUNCE || size == 0)
        return 0;   /* bounce registers nothing; initiators cache nothing */
    uint32_t *revoked = calloc((size_t)rt->nranks, sizeof *revoked);
    if (revoked == NULL)
        fh_fatal("fh_segment_destroy: out of memory revoking registrations");
    /* Every rank passed the destroy barrier, so honest peers are done with
     * the piece; segment.c made sure no handler still sees it. */
    pthread_mutex_lock(&s->lock);
    unsigned failed = revoke_range(rt, s, base, size, revoked);
    pthread_mutex_unlock(&s->lock);
    for (int r = 0; r < rt->nranks; r++)
        if (revoked[r] != 0)
            fh_log_verbose(1, "rendezvous: segment at %p destroyed: revoked %u "
                           "registration(s) %s had not released", (void *)base,
                           revoked[r], FH_RANK_NAME(r));
    free(revoked);
    if (failed != 0)
        fh_log_error("rendezvous: segment at %p destroyed: %u registration(s) for peers "
                     "could not be deregistered", (void *)base, failed);
    return failed;
}

/* ------------------------------------------------------------ helpers */

void strat_list_push(strat_list_t *l, strat_entry_t *e)
{
    e->prev = NULL;
    e->next = l->head;
    if (l->head != NULL)
        l->head->prev = e;
    l->head = e;
}

void strat_list_remove(strat_list_t *l, strat_entry_t *e)
{
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        l->head = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    e->prev = e->next = NULL;
}

uint64_t strat_wait_begin(struct fh_strat *s, int peer, strat_wait_t *w, uint32_t pending)
{
    atomic_store_explicit(&w->pending, pending, memory_order_relaxed);
    w->status = FH_OK;
    pthread_mutex_lock(&s->lock);
    uint64_t tok = 0;
    if (fhc_map_reserve(&s->waits, 1) == 0) {
        tok = s->next_token++;
        fhc_map_put(&s->waits, (uint64_t)peer, tok, w);
    }
    pthread_mutex_unlock(&s->lock);
    return tok;
}

strat_wait_t *strat_wait_find(struct fh_strat *s, int peer, uint64_t token)
{
    return fhc_map_get(&s->waits, (uint64_t)peer, token);
}

void strat_wait_end(struct fh_strat *s, int peer, uint64_t token)
{
    /* Reply handlers update a waiter only under s->lock, so once we hold it
     * no handler is still touching the waiter. */
    pthread_mutex_lock(&s->lock);
    fhc_map_del(&s->waits, (uint64_t)peer, token);
    pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------ stats */

void fh_strat_stats(fh_core_t *rt, int peer, fh_peer_stats_t *out)
{
    struct fh_strat *s = rt->strat;
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    for (int r = 0; r < rt->nranks; r++) {
        if (r == rt->rank || (peer != rt->rank && r != peer))
            continue;
        const strat_peer_t *p = &s->peer[r];
        out->reg_hits += p->hits;
        out->reg_misses += p->misses;
        out->reg_moves += p->requests;
        out->reg_registrations += p->registrations;
        out->reg_unregistrations += p->unregistrations;
        out->reg_refused += p->refused;
        out->bytes_pinned_remote += p->pinned_remote;
    }
    pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------ tables */

static int strat_xfer(fh_thread_t *t, bool is_put, int rank, char *local, struct fh_mr *lmr,
                      uint64_t remote, size_t n, const fh_rkey_t *rkey, fh_ctr_t *ctr,
                      bool own_lmr)
{
    (void)rkey;   /* segments have none: keys come per operation */
    return fh_strat_xfer(t, is_put, rank, local, lmr, remote, n, ctr, own_lmr);
}

static unsigned strat_seg_release(fh_core_t *rt, fh_thread_t *t, void *base, size_t len)
{
    (void)t;      /* nothing to wait for: peers' keys die with our deregistration */
    return fh_strat_seg_destroy(rt, (uintptr_t)base, len);
}

/* Segments are mapped and not registered (no seg_expose: rkey {0, 0});
 * each transfer asks the target (rendezvous) or sends the bytes (bounce). */
#define STRAT_TABLE(name_, caps_, handlers_)                                 \
    {                                                                        \
        .name = name_, .caps = caps_, .handlers = handlers_,                 \
        .init = fh_strat_init, .fini_keys = fh_strat_fini,                   \
        .seg_release = strat_seg_release, .xfer = strat_xfer,                \
        .progress = fh_strat_progress, .path_fini = fh_strat_path_fini,      \
        .link_lost = fh_strat_link_lost,                                     \
        .stats = fh_strat_stats,                                             \
    }

const fh_reg_ops_t fh_reg_rendezvous =
    STRAT_TABLE("rendezvous", FH_REG_CAP_LOCAL_MR | FH_REG_CAP_NB_OWNS_LMR,
                strat_rdv_register_handlers);
/* (Its handlers are the rendezvous ones, registered by that table.) */
const fh_reg_ops_t fh_reg_rendezvous_cache =
    STRAT_TABLE("rendezvous-cache", FH_REG_CAP_LOCAL_MR | FH_REG_CAP_NB_OWNS_LMR, NULL);
const fh_reg_ops_t fh_reg_bounce =
    STRAT_TABLE("bounce", FH_REG_CAP_NB_OWNS_LMR, strat_bounce_register_handlers);
