/*
 * fhc_ghost.c -- the adaptive victim FIFO: the ghost list of deregistered
 * victims and the rule that grows and shrinks MAXVICTIM (fhc_ghost.h).
 *
 * Invariants (fhc_check.c):
 *   params.maxvictim <= mv_now <= params.maxvictim_max (== maxvictim in
 *   static mode), and local bytes <= mv_now, so I1 becomes
 *   pinned <= M + mv_now <= M + maxvictim_max.
 * mv_now only shrinks inside fhc_ghost_adapt, which the caller follows by
 * trimming the FIFO to it (fhc_trim_victims).
 */
#include "fhc_internal.h"

#include <stdlib.h>

int fhc_ghost_init(fhc_t *c)
{
    fhc_ghost_t *g = &c->ghost;
    c->mv_now = c->p.maxvictim;
    g->step = c->R;
    fhc_map_init(&g->set);
    if (!c->p.victim_adaptive)
        return 0;
    size_t cap = c->p.maxvictim_max / c->p.bucket;
    if (cap > FHC_GHOST_MAX_BUCKETS)
        cap = FHC_GHOST_MAX_BUCKETS;
    if (cap == 0)
        cap = 1;
    g->ring = calloc(cap, sizeof *g->ring);
    if (!g->ring || fhc_map_reserve(&g->set, cap) < 0) {
        fhc_ghost_fini(c);
        return FHC_ERR_NO_MEMORY;
    }
    g->cap = cap;
    return 0;
}

void fhc_ghost_fini(fhc_t *c)
{
    free(c->ghost.ring);
    c->ghost.ring = NULL;
    fhc_map_fini(&c->ghost.set);
}

static void set_add(fhc_ghost_t *g, uint64_t bno, long d)
{
    uintptr_t n = (uintptr_t)fhc_map_get(&g->set, 0, bno);
    n = (uintptr_t)((long)n + d);
    if (n)
        fhc_map_put(&g->set, 0, bno, (void *)n);   /* reserved: never fails */
    else
        fhc_map_del(&g->set, 0, bno);
}

void fhc_ghost_evicted(fhc_t *c, uintptr_t base, size_t len)
{
    fhc_ghost_t *g = &c->ghost;
    if (!g->ring)
        return;
    for (uintptr_t a = base; a < base + len; a += c->p.bucket) {
        if (g->n == g->cap) {           /* forget the oldest */
            set_add(g, g->ring[g->head], -1);
            g->head = (g->head + 1) % g->cap;
            g->n--;
        }
        uint64_t bno = fhc_bno(c, a);
        g->ring[(g->head + g->n++) % g->cap] = bno;
        set_add(g, bno, +1);
    }
    assert(g->set.n <= g->cap);
}

void fhc_ghost_registered(fhc_t *c, uintptr_t base, size_t len)
{
    fhc_ghost_t *g = &c->ghost;
    if (!g->ring)
        return;
    g->win_regs++;
    for (uintptr_t a = base; a < base + len; a += c->p.bucket)
        if (fhc_map_get(&g->set, 0, fhc_bno(c, a))) {
            g->win_repins++;
            c->victim_repins++;
            return;
        }
}

void fhc_ghost_pin_failed(fhc_t *c)
{
    if (c->ghost.ring)
        c->ghost.pin_failed = 1;
}

static size_t at_least(size_t v, size_t lo)
{
    return v < lo ? lo : v;
}

void fhc_ghost_adapt(fhc_t *c)
{
    fhc_ghost_t *g = &c->ghost;
    if (!g->ring)
        return;
    size_t lo = c->p.maxvictim, hi = c->p.maxvictim_max;
    if (g->pin_failed) {
        g->pin_failed = 0;
        g->win_regs = g->win_repins = 0;
        g->step = c->R;
        if (c->mv_now > lo) {
            c->mv_now = at_least(lo, c->local_bytes);
            c->mv_shrinks++;
        }
        return;
    }
    if (g->win_regs < FHC_GHOST_WINDOW)
        return;
    uint32_t regs = g->win_regs, rep = g->win_repins;
    g->win_regs = g->win_repins = 0;
    if ((uint64_t)rep * 8 > regs) {
        size_t room = hi - c->mv_now;
        size_t step = g->step < room ? g->step : room;
        if (c->p.debug_bugs & FHC_BUG_VICTIM_PAST_MAX)
            step = g->step;             /* deliberate bug: ignore the bound */
        else if (step == 0 || c->pinned_bytes + step > c->p.M + hi)
            return;
        c->mv_now += step;
        c->mv_grows++;
        if (g->step <= SIZE_MAX / 2)
            g->step *= 2;
        return;
    }
    g->step = c->R;
    if ((uint64_t)rep * 64 < regs && c->mv_now > lo) {
        size_t v = c->mv_now - lo > c->R ? c->mv_now - c->R : lo;
        v = at_least(v, c->local_bytes);
        if (v < c->mv_now) {
            c->mv_now = v;
            c->mv_shrinks++;
        }
    }
}
