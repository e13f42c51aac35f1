/*
 * firehose_hit.c -- the hit layer of FH_REG_STRATEGY=firehose: per-thread caches
 * of firehose references, so that a hit takes no process-wide lock and
 * writes no cache line another thread writes (docs/firehose-cache.md,
 * "The hit layer").
 *
 * Each thread that transfers through the cache owns a reg_tc_t:
 *   - entries: each keeps one fhc acquisition OPEN on one firehose (a whole
 *     region of a peer), so fhc counts the firehose as in use and never
 *     picks it as a victim;
 *   - a private map (peer, bucket) -> entry for every bucket of the region
 *     (util/map.h), read and written by the owner only.
 * A hit: map lookup, range check, CAS state n -> n+1 (n < WANTED).  The
 * release (when the chunk's RDMA completed): atomic decrement.  Only the
 * owner increments; decrements come from whichever thread completes the
 * RDMA (the owner, unless paths are shared or helped).
 *
 * Giving references back.  fhc needs budget for a peer when an operation
 * waits in that peer's budget queue.  After every fhc call on a peer the
 * runtime calls reg_hit_budget() (g->lock held): if the queue is non-empty
 * it sweeps every thread cache, live or orphaned, once: an idle entry of
 * that peer (state 0) is CASed to RECLAIMING, its acquisition released in
 * fhc (which serves the queue), then marked DEAD; a busy one is marked
 * WANTED so it takes no new hits and the decrement that empties it returns
 * it the same way (reg_hit_unref).  Entries for a peer are installed only
 * while its queue is empty, so after one sweep every entry of the peer is
 * DEAD or WANTED until the queue empties (g->hpeer[peer].swept remembers the
 * sweep; an install clears it).  Hence a waiting operation gets back every
 * reference the hit layer holds on its peer as soon as the RDMA using it
 * completes: no starvation, and fhc's invariants are unchanged (an entry
 * is an ordinary fhc operation that is slow to release).
 *
 * Revocation.  When a peer revokes a firehose (it freed the memory; see
 * "Memory that is freed or reused" in the design), fhc takes it out of its
 * map but acknowledges only when every op using it was released -- and an
 * entry is such an op.  So the move handler calls reg_hit_revoke() right
 * after fhc saw the REVOKE: every entry whose acquisition holds a revoked
 * firehose is returned at once if idle (fhc then queues the ack), or
 * marked WANTED if busy, so it takes no new hits and the decrement that
 * ends its last RDMA returns it (and fhc acks).  The ack therefore never
 * leaves while an RDMA through the firehose is in flight.  The memory
 * monitor (our own freed memory) is checked inline on every hit: two
 * loads, and a miss to the locked path (which processes the events) when
 * events are pending.
 *
 * State transitions and who makes them:
 *   FREE -> LIVE(1)                 owner, install, under g->lock
 *   LIVE(n) -> LIVE(n+1)            owner, hit (CAS)
 *   LIVE(n) -> LIVE(n-1)            completer (fetch_sub)
 *   LIVE(0) -> RECLAIMING -> DEAD   sweeper or owner eviction, under g->lock
 *   LIVE(n) -> WANTED|n             sweeper (budget or revoke), under g->lock
 *   WANTED|1 -> WANTED -> RECLAIMING -> DEAD   completer, then g->lock
 *   DEAD -> FREE                    owner (unmaps it; owner-private again)
 * A DEAD entry is still mapped until its owner looks at it; it is never a
 * hit (the state check fails).  Entry fields other than state change only
 * in FREE, under g->lock; sweepers read them under g->lock.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "firehose/util/test_point.h"
#include "firehose_internal.h"

#define TC_ENTRIES 256u      /* firehoses one thread keeps referenced */
#define TC_SLOTS   8192u     /* map slots: TC_ENTRIES * 16 buckets / (3/4) */

typedef struct reg_tc {
    reg_ent_t ent[TC_ENTRIES];
    fhc_op_t op[TC_ENTRIES];       /* the open acquisitions (g->lock) */
    reg_map_t map;                 /* owner only */
    uint32_t freel[TC_ENTRIES];    /* owner only: FREE entries */
    uint32_t nfree;
    uint32_t hand;                 /* owner only: eviction clock */
    unsigned bshift;
    uint64_t *hits;                /* [nranks]: owner writes (relaxed) */
    /* The memory monitor's state word and the value last processed (both
     * NULL without a monitor; firehose_revoke.c): a hit is taken only while they
     * are equal, so pending events always go through the locked path,
     * which processes them first. */
    const _Atomic uint64_t *mm_state, *mm_seen;
    struct reg_tc *next;           /* g->tcs, under g->lock */
    int orphan;                    /* under g->lock: its thread exited */
} reg_tc_t;

static inline uint32_t ent_index(const reg_tc_t *tc, const reg_ent_t *e)
{
    return (uint32_t)(e - tc->ent);
}

/* Entry acquisitions always HIT at once (see install); fhc never calls
 * ready() for them.  Kept as a checked contract. */
static void ent_ready_never(fhc_op_t *op, int status)
{
    (void)op;
    fh_fatal("firehose hit layer: unexpected ready(%d) for a cached reference", status);
}

/* Returns entry e's acquisition to fhc.  g->lock held; e is RECLAIMING. */
static void ent_return(struct fh_reg *g, reg_ent_t *e)
{
    assert(atomic_load(&e->state) == REG_ENT_RECLAIMING);
    fhc_release(g->c, &e->tc->op[ent_index(e->tc, e)]);
}

/* Claims entry e for return, g->lock held; s is a value of e->state the
 * caller loaded.  A LIVE entry (s < WANTED) is moved, by CAS, to RECLAIMING
 * if idle (0) and to WANTED|n if n RDMA chunks are in flight (then no new
 * hits, and the unref that empties it returns it).  Returns the state it
 * replaced: 0 means the caller now holds a RECLAIMING entry and must
 * ent_return it and make it DEAD; another count means it is WANTED now.  A
 * state >= WANTED (not LIVE) is returned as it is, and nothing changes.
 * With g->lock held only the count can move meanwhile (hits and unrefs;
 * RECLAIMING is entered under g->lock only), hence the assertion. */
static uint32_t ent_claim(reg_ent_t *e, uint32_t s)
{
    while (s < REG_ENT_WANTED) {
        uint32_t to = s == 0 ? REG_ENT_RECLAIMING : (s | REG_ENT_WANTED);
        if (atomic_compare_exchange_weak(&e->state, &s, to))
            break;
        assert(s < REG_ENT_WANTED);   /* only the count moves */
    }
    return s;
}

/* Owner: unmaps a DEAD entry and makes it FREE. */
static void ent_recycle(reg_tc_t *tc, reg_ent_t *e)
{
    assert(atomic_load_explicit(&e->state, memory_order_relaxed) == REG_ENT_DEAD);
    for (uintptr_t a = e->base; a < e->end; a += (uintptr_t)1 << tc->bshift) {
        uint32_t v = reg_map_del(&tc->map, e->peer, a >> tc->bshift);
        assert(v == ent_index(tc, e) + 1);
        (void)v;
    }
    atomic_store_explicit(&e->state, REG_ENT_FREE, memory_order_relaxed);
    tc->freel[tc->nfree++] = ent_index(tc, e);
}

/* ------------------------------------------------------------ hit path */

/* The hit path proper, inlined into both entry points (no PLT call). */
static inline reg_ent_t *lookup_ref(fh_thread_t *t, uint32_t peer, uintptr_t raddr, size_t len)
{
    reg_tc_t *tc = t->reg_tc;
    if (tc == NULL)
        return NULL;
    if (tc->mm_state != NULL &&
        __builtin_expect(atomic_load_explicit(tc->mm_state, memory_order_acquire) !=
                             atomic_load_explicit(tc->mm_seen, memory_order_acquire), 0))
        return NULL;    /* freed memory not processed yet: the locked path syncs */
    uint32_t v = reg_map_get(&tc->map, peer, raddr >> tc->bshift);
    if (v == 0)
        return NULL;
    reg_ent_t *e = &tc->ent[v - 1];
#ifdef FH_TEST_HOOKS
    /* Read before the state: set after WANTED, so once it reads 1 the CAS
     * below can only fail -- unless the revoke skipped WANTED. */
    uint32_t revoked = atomic_load_explicit(&e->revoked, memory_order_acquire);
#endif
    uint32_t s = atomic_load_explicit(&e->state, memory_order_relaxed);
    if (__builtin_expect(raddr + len <= e->end, 1)) {
        while (s < REG_ENT_WANTED) {
            if (atomic_compare_exchange_weak_explicit(&e->state, &s, s + 1,
                                                      memory_order_acquire,
                                                      memory_order_relaxed)) {
                FH_STAT_ADD(tc->hits[peer], 1);
#ifdef FH_TEST_HOOKS
                if (revoked)
                    FH_TEST_POINT(FH_TP_HIT_REVOKED);
#endif
                return e;
            }
        }
    }
    if (s == REG_ENT_DEAD)
        ent_recycle(tc, e);
    return NULL;
}

reg_ent_t *reg_hit_lookup(fh_thread_t *t, uint32_t peer, uintptr_t raddr, size_t len)
{
    return lookup_ref(t, peer, raddr, len);
}

/* WANTED and we dropped the last use: return it.  Nobody else moves it
 * out of WANTED (hits refuse it; sweeps skip it). */
static void unref_wanted(reg_ent_t *e)
{
    struct fh_reg *g = fh_reg_core->reg;
    pthread_mutex_lock(&g->lock);
    uint32_t want = REG_ENT_WANTED;
    int ok = atomic_compare_exchange_strong(&e->state, &want, REG_ENT_RECLAIMING);
    assert(ok);
    (void)ok;
    uint32_t peer = e->peer;
    ent_return(g, e);
    atomic_store_explicit(&e->state, REG_ENT_DEAD, memory_order_release);
    reg_hit_budget(g, peer);
    pthread_mutex_unlock(&g->lock);
}

static inline void unref(reg_ent_t *e)
{
    uint32_t old = atomic_fetch_sub_explicit(&e->state, 1, memory_order_release);
    assert((old & ~REG_ENT_WANTED) >= 1 && old < REG_ENT_RECLAIMING);
    if (__builtin_expect(old == (REG_ENT_WANTED | 1), 0))
        unref_wanted(e);
}

void reg_hit_unref(reg_ent_t *e)
{
    unref(e);
}

/* ------------------------------------------------------------ the API */

int fh_reg_hit_acquire(fh_thread_t *t, int rank, uintptr_t raddr, size_t len, fh_reg_hit_t *h)
{
    reg_ent_t *e = lookup_ref(t, (uint32_t)rank, raddr, len);
    if (e == NULL)
        return FH_REG_MISS;
    h->ent = e;
    h->raddr = raddr;
    h->len = len;
    h->key[0] = e->key[0];
    h->key[1] = e->key[1];
    return FH_OK;
}

void fh_reg_hit_release(fh_thread_t *t, fh_reg_hit_t *h)
{
    (void)t;
    assert(h->ent != NULL);
    unref(h->ent);
    h->ent = NULL;
}

/* ------------------------------------------------------------ sweeps */

void reg_hit_budget(struct fh_reg *g, uint32_t peer)
{
    reg_check(g, peer);
    if (g->hpeer[peer].swept || !fhc_budget_waiting(g->c, peer))
        return;
    g->hpeer[peer].swept = 1;
    for (reg_tc_t *tc = g->tcs; tc != NULL; tc = tc->next) {
        for (uint32_t i = 0; i < TC_ENTRIES; i++) {
            reg_ent_t *e = &tc->ent[i];
            uint32_t s = atomic_load_explicit(&e->state, memory_order_acquire);
            if (s >= REG_ENT_WANTED || e->peer != peer)
                continue;
            if (ent_claim(e, s) == 0) {
                ent_return(g, e);
                atomic_store_explicit(&e->state, REG_ENT_DEAD, memory_order_release);
            }
        }
    }
    reg_check(g, peer);
}

void reg_hit_revoke(struct fh_reg *g, uint32_t peer)
{
    for (reg_tc_t *tc = g->tcs; tc != NULL; tc = tc->next) {
        for (uint32_t i = 0; i < TC_ENTRIES; i++) {
            reg_ent_t *e = &tc->ent[i];
            uint32_t s = atomic_load_explicit(&e->state, memory_order_acquire);
            if (s >= REG_ENT_WANTED || e->peer != peer ||
                !fhc_op_revoked(g->c, &tc->op[i]))
                continue;     /* WANTED ones are returned by their last unref */
            if (ent_claim(e, s) == 0) {   /* idle: fhc drops it and queues the ack now */
                ent_return(g, e);
                atomic_store_explicit(&e->state, REG_ENT_DEAD, memory_order_release);
            } else {           /* RDMA in flight: its last release acks */
                g->hpeer[peer].revoked_busy++;
#ifdef FH_TEST_HOOKS
                atomic_store_explicit(&e->revoked, 1, memory_order_release);
#endif
            }
        }
    }
    reg_hit_budget(g, peer);
}

/* ------------------------------------------------------------ merging */

void reg_hit_drop_span(struct fh_reg *g, fh_thread_t *t, uint32_t peer, uintptr_t raddr,
                       size_t len)
{
    reg_tc_t *tc = t->reg_tc;
    if (tc == NULL)
        return;
    uintptr_t b = (uintptr_t)1 << tc->bshift;
    for (uintptr_t a = raddr & ~(b - 1); a < raddr + len; a += b) {
        uint32_t v = reg_map_get(&tc->map, peer, a >> tc->bshift);
        if (v == 0)
            continue;
        reg_ent_t *e = &tc->ent[v - 1];
        uint32_t s = atomic_load_explicit(&e->state, memory_order_acquire);
        if (s == 0 && ent_claim(e, s) == 0) {
            ent_return(g, e);
            atomic_store_explicit(&e->state, REG_ENT_DEAD, memory_order_relaxed);
            s = REG_ENT_DEAD;
        }
        if (s == REG_ENT_DEAD)
            ent_recycle(tc, e);     /* unmaps every bucket of its region */
    }
}

/* ------------------------------------------------------------ install */

/* Owner, g->lock held: a FREE entry index, evicting an idle one if needed;
 * UINT32_MAX when every entry is busy. */
static uint32_t tc_alloc(struct fh_reg *g, reg_tc_t *tc)
{
    if (tc->nfree > 0)
        return tc->freel[--tc->nfree];
    for (uint32_t k = 0; k < TC_ENTRIES; k++) {
        reg_ent_t *e = &tc->ent[tc->hand];
        tc->hand = (tc->hand + 1) % TC_ENTRIES;
        uint32_t s = 0;
        if (atomic_compare_exchange_strong(&e->state, &s, REG_ENT_RECLAIMING)) {
            ent_return(g, e);
            atomic_store_explicit(&e->state, REG_ENT_DEAD, memory_order_relaxed);
            s = REG_ENT_DEAD;
        }
        if (s == REG_ENT_DEAD) {
            ent_recycle(tc, e);
            return tc->freel[--tc->nfree];
        }
    }
    return UINT32_MAX;
}

void reg_hit_install(struct fh_reg *g, fh_thread_t *t, reg_xop_t *x)
{
    reg_tc_t *tc = t->reg_tc;
    const fhc_piece_t *pc = &x->op.piece[0];
    uint32_t peer = x->op.peer;
    assert(x->op.npieces == 1 && x->ent == NULL);
    if (tc == NULL || fhc_budget_waiting(g->c, peer) || pc->reach != 0)
        return;     /* nothing cached while others wait for budget; a region
                       peers reach only in part is checked by fhc on every use */
    size_t nb = pc->rlen >> tc->bshift;
    /* Buckets of the region still mapped: only to DEAD entries (any live
     * entry holds a firehose, and held firehoses never overlap), or to a
     * WANTED one on this same region -- then we do not cache it twice. */
    for (uintptr_t a = pc->rbase; a < pc->rbase + pc->rlen; a += (uintptr_t)1 << tc->bshift) {
        uint32_t v = reg_map_get(&tc->map, peer, a >> tc->bshift);
        if (v == 0)
            continue;
        reg_ent_t *o = &tc->ent[v - 1];
        if (atomic_load_explicit(&o->state, memory_order_relaxed) != REG_ENT_DEAD)
            return;
        ent_recycle(tc, o);
    }
    if ((uint64_t)(tc->map.n + nb) * 4 > (uint64_t)TC_SLOTS * 3)
        return;
    uint32_t i = tc_alloc(g, tc);
    if (i == UINT32_MAX)
        return;
    reg_ent_t *e = &tc->ent[i];
    fhc_op_t *op = &tc->op[i];
    memset(op, 0, sizeof *op);
    op->peer = peer;
    op->raddr = pc->rbase;
    op->len = pc->rlen;
    op->ready = ent_ready_never;
    op->user = e;
    /* The queue is empty and x holds the whole region: a hit. */
    int rc = fhc_acquire(g->c, op);
    assert(rc == FHC_HIT && op->npieces == 1);
    if (rc != FHC_HIT) {
        fh_log_error("firehose hit layer: caching a held region failed (%d)", rc);
        if (rc == FHC_PENDING)
            fh_fatal("firehose hit layer: a cached reference went pending");
        tc->freel[tc->nfree++] = i;
        return;
    }
    e->peer = peer;
    e->base = pc->rbase;
    e->end = pc->rbase + pc->rlen;
    e->key[0] = pc->key[0];
    e->key[1] = pc->key[1];
    for (uintptr_t a = e->base; a < e->end; a += (uintptr_t)1 << tc->bshift) {
        int prc = reg_map_put(&tc->map, peer, a >> tc->bshift, i + 1);
        assert(prc == 0);
        (void)prc;
    }
#ifdef FH_TEST_HOOKS
    atomic_store_explicit(&e->revoked, 0, memory_order_relaxed);
#endif
    atomic_store_explicit(&e->state, 1, memory_order_release);
    fhc_release(g->c, &x->op);     /* the entry holds the firehose now */
    x->ent = e;
    g->hpeer[peer].swept = 0;
}

/* ------------------------------------------------------------ life cycle */

reg_tc_t *reg_hit_tc(fh_thread_t *t)
{
    if (t->reg_tc != NULL)
        return t->reg_tc;
    struct fh_reg *g = fh_reg_core->reg;
    pthread_mutex_lock(&g->lock);
    reg_tc_t *tc = g->tcs;
    while (tc != NULL && !tc->orphan)
        tc = tc->next;
    if (tc != NULL) {
        tc->orphan = 0;
    } else {
        /* Own cache lines only: nothing here is near another thread's data. */
        size_t hbytes = ((size_t)g->nranks * sizeof(uint64_t) + 63) / 64 * 64;
        tc = aligned_alloc(64, (sizeof *tc + 63) / 64 * 64);
        uint64_t *hits = aligned_alloc(64, hbytes);
        if (tc == NULL || hits == NULL || reg_map_init(&tc->map, TC_SLOTS) != 0)
            fh_fatal("firehose hit layer: out of memory for a thread cache");
        memset(hits, 0, hbytes);
        memset(tc->ent, 0, sizeof tc->ent);
        for (uint32_t i = 0; i < TC_ENTRIES; i++) {
            atomic_init(&tc->ent[i].state, REG_ENT_FREE);
            tc->ent[i].tc = tc;
            tc->freel[i] = TC_ENTRIES - 1 - i;
        }
        tc->nfree = TC_ENTRIES;
        tc->hand = 0;
        tc->bshift = g->bshift;
        tc->hits = hits;
        fh_mm_hit_words(fh_reg_core, &tc->mm_state, &tc->mm_seen);
        tc->orphan = 0;
        tc->next = g->tcs;
        g->tcs = tc;
    }
    pthread_mutex_unlock(&g->lock);
    t->reg_tc = tc;
    return tc;
}

void fh_reg_thread_exit(fh_thread_t *t)
{
    reg_tc_t *tc = t->reg_tc;
    struct fh_reg *g = fh_reg_core->reg;
    if (tc == NULL || g == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    for (uint32_t i = 0; i < TC_ENTRIES; i++) {
        reg_ent_t *e = &tc->ent[i];
        /* FREE and DEAD are >= WANTED: ent_claim leaves them (and WANTED) */
        if (ent_claim(e, atomic_load(&e->state)) == 0) {
            ent_return(g, e);
            atomic_store(&e->state, REG_ENT_DEAD);
            reg_hit_budget(g, e->peer);
        }
        if (atomic_load(&e->state) == REG_ENT_DEAD)
            ent_recycle(tc, e);
    }
    tc->orphan = 1;     /* busy (WANTED) entries die at completion */
    pthread_mutex_unlock(&g->lock);
    t->reg_tc = NULL;
}

void reg_hit_fini(struct fh_reg *g)
{
    while (g->tcs != NULL) {
        reg_tc_t *tc = g->tcs;
        g->tcs = tc->next;
        reg_map_fini(&tc->map);
        free(tc->hits);
        free(tc);
    }
}

uint64_t reg_hit_count(struct fh_reg *g, int peer)
{
    uint64_t n = 0;
    for (reg_tc_t *tc = g->tcs; tc != NULL; tc = tc->next)
        for (int r = 0; r < g->nranks; r++)
            if (peer < 0 || r == peer)
                n += __atomic_load_n(&tc->hits[r], __ATOMIC_RELAXED);
    return n;
}
