/*
 * firehose_seg.c -- FH_REG_STRATEGY=firehose: segments in the cache (split
 * from firehose.c).  A segment's pieces are spans the cache may register
 * on demand (fh_reg_expose: nothing is registered at creation); a
 * destroyed one leaves the way freed memory does (fh_reg_seg_release:
 * invalidate, REVOKE, wait for every holder's ack), a protection change
 * takes the same round with a deadline (fh_reg_seg_reprotect); and the
 * per-peer counters of the cache (fh_reg_stats).
 */
#include <stdlib.h>

#include "firehose/util/clock.h"
#include "firehose_internal.h"
#include "reg.h"

int fh_reg_seg_expose(fh_core_t *rt, void *base, size_t len, struct fh_mr **mr,
                      fh_rkey_t *rkey)
{
    /* Not registered: the cache registers on demand (rkey {0, 0}). */
    *mr = NULL;
    *rkey = (fh_rkey_t){0, 0};
    return fh_reg_expose(rt, base, len);
}

unsigned fh_reg_seg_release_op(fh_core_t *rt, fh_thread_t *t, void *base, size_t len)
{
    fh_reg_seg_release(rt, t, base, len);
    return 0;   /* the cache's deregistration failures are its own (logged) */
}

static int span_push(reg_span_t **a, size_t *n, size_t *cap, uintptr_t base, uintptr_t end)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 8;
        reg_span_t *na = realloc(*a, nc * sizeof *na);
        if (na == NULL)
            return FH_ERR_NO_MEMORY;
        *a = na;
        *cap = nc;
    }
    (*a)[(*n)++] = (reg_span_t){base, end};
    return FH_OK;
}

int fh_reg_expose(fh_core_t *rt, void *base, size_t len)
{
    struct fh_reg *g = rt->reg;
    pthread_mutex_lock(&g->lock);
    int rc = span_push(&g->spans, &g->nspans, &g->capspans, (uintptr_t)base,
                       (uintptr_t)base + len);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* Removes the span starting at base (g->lock held). */
static void span_remove(struct fh_reg *g, uintptr_t base)
{
    for (size_t i = 0; i < g->nspans; i++)
        if (g->spans[i].base == base) {
            g->spans[i] = g->spans[--g->nspans];
            return;
        }
}

void fh_reg_unexpose_and_retire(fh_core_t *rt, void *base, size_t len)
{
    struct fh_reg *g = rt->reg;
    pthread_mutex_lock(&g->lock);
    span_remove(g, (uintptr_t)base);
    int rc = span_push(&g->retired, &g->nretired, &g->capretired, (uintptr_t)base,
                       (uintptr_t)base + len);
    pthread_mutex_unlock(&g->lock);
    if (rc != FH_OK)
        fh_log_error("firehose cache: out of memory retiring a segment; its memory stays "
                     "mapped");
}

/* The segment's memory leaves the cache the way freed memory does
 * (firehose_revoke.c, docs/firehose-cache.md "Remote firehoses: the revocation
 * protocol"), only announced by the runtime instead of the monitor: in one
 * cache-lock section the span stops being allowed() (later moves for it are
 * refused) and every region meeting it is invalidated (idle ones and
 * victims deregistered now, held ones REVOKEd); then we wait, polling with
 * no lock held, until every holder acknowledged.  An ack leaves a holder
 * only after its RDMA through the firehose completed and the firehose is
 * gone from its tables and its threads' hit caches; fhc deregisters the
 * region on the last ack.  The caller's peers poll meanwhile (they are in
 * the same collective).  A region still pinned locally (an operation of
 * ours from this memory still in flight, against the destroy contract) is
 * deregistered at its last unpin; no peer holds its key any more. */
static void invalidate_wait(fh_core_t *rt, fh_thread_t *t, void *base, size_t len,
                            bool unexpose, double deadline);

void fh_reg_seg_release(fh_core_t *rt, fh_thread_t *t, void *base, size_t len)
{
    invalidate_wait(rt, t, base, len, true, 0);
}

/* The owner mprotects or unmaps part of a live piece (reg.h seg_reprotect):
 * the same round, the span staying allowed -- the regions made again on
 * demand are checked against the new protections (reach_run).  Past the
 * deadline (a holder that does not poll: stopped, computing) we go on: the
 * REVOKEs stay pending, each region is deregistered at its last ack as
 * always, and until then its holder's RDMA through it can still reach the
 * pages (docs/reliability.md, "A silent peer"). */
void fh_reg_seg_reprotect(fh_core_t *rt, fh_thread_t *t, void *base, size_t len,
                          double deadline)
{
    invalidate_wait(rt, t, base, len, false, deadline);
}

static void invalidate_wait(fh_core_t *rt, fh_thread_t *t, void *base, size_t len,
                            bool unexpose, double deadline)
{
    struct fh_reg *g = rt->reg;
    pthread_mutex_lock(&g->lock);
    if (unexpose)
        span_remove(g, (uintptr_t)base);
    unsigned n = fhc_invalidate(g->c, (uintptr_t)base, len);
    reg_check(g, (uint32_t)rt->rank);     /* the global invariants */
    pthread_mutex_unlock(&g->lock);
    fh_log_verbose(2, "segment memory %p (+%zu bytes): %u cached regions invalidated",
                   base, len, n);
    for (unsigned idle = 0;;) {
        fh_reg_flush(t);
        pthread_mutex_lock(&g->lock);
        uint32_t pending = fhc_revokes_pending(g->c);
        pthread_mutex_unlock(&g->lock);
        if (pending == 0)
            return;
        if (deadline > 0 && fh_now() > deadline) {
            fh_log_error("firehose cache: %u revocation%s (of %p +%zu or earlier) not "
                         "acknowledged within FH_SEG_PROT_WAIT: going on; those holders "
                         "keep their firehoses until they answer", pending,
                         pending == 1 ? "" : "s", base, len);
            return;
        }
        svc_wait_round(t, &idle);
    }
}

/* ------------------------------------------------------------ stats */

void fh_reg_stats(fh_core_t *rt, int peer, fh_peer_stats_t *out)
{
    struct fh_reg *g = rt->reg;
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    if (g->c == NULL) {
        pthread_mutex_unlock(&g->lock);
        return;
    }
    for (int r = 0; r < rt->nranks; r++) {
        if (r == rt->rank || (peer != rt->rank && r != peer))
            continue;
        fhc_peer_stats_t s;
        fhc_peer_stats(g->c, (uint32_t)r, &s);
        out->reg_hits += s.hits + reg_hit_count(g, r);
        out->reg_misses += s.misses;
        out->reg_moves += s.moves;
        out->reg_pending_coalesced += s.coalesced;
        out->reg_put_in_move += s.put_in_move;
        out->bytes_pinned_remote += s.target_held_bytes;
        out->reg_refused += s.refused;
        if (peer != rt->rank) {
            /* Per peer: evictions of regions it held last, regions made for
             * it, our victims on it.  Our own row takes the totals below
             * (they include regions no peer ever held). */
            out->reg_evictions += s.evictions;
            out->reg_unregistrations += s.evictions;
            out->reg_registrations += s.registrations;
            out->reg_victims += s.unused_regions;
        }
        out->reg_revoked += s.revoked;
        out->reg_revoked_busy += g->hpeer[r].revoked_busy;
        out->reg_budget += s.budget;
        out->reg_grants += s.grants;
        out->reg_reclaims += s.reclaims + s.reclaimed;
        out->reg_deferred += s.deferred;
        out->reg_reaims += s.reaims;
        out->reg_copies += g->hpeer[r].copies;
        out->reg_refused += g->hpeer[r].copy_refused;
    }
    if (peer == rt->rank) {
        fhc_stats_t s;
        fhc_stats(g->c, &s);
        out->reg_evictions += s.evictions;
        /* Deregistrations: evicted victims and invalidated regions. */
        out->reg_unregistrations += s.evictions + s.dead_freed;
        out->reg_registrations += s.registrations;
        out->reg_victims += s.victim_len;
        out->reg_invalidations += s.invalidations;
        out->reg_revokes_sent += s.revokes_sent;
        out->bytes_pinned_local += s.local_bytes;
        out->reg_maxvictim_now = s.maxvictim_now;
        out->reg_victim_repins += s.victim_repins;
        out->reg_reaims += s.reaims;
    }
    pthread_mutex_unlock(&g->lock);
}
