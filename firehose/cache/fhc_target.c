/*
 * fhc_target.c -- our memory as seen by peers: the region table, the byte
 * categories and victim FIFO, peers' holds, local pins.  Serving a move is
 * in fhc_target_move.c, invalidation in fhc_target_revoke.c (map:
 * fhc_target.h).
 *
 * A region is in the bucket map under each of its buckets, in the all-list,
 * and (iff nobody references it) in the victim FIFO.  Byte accounting is done
 * by leaving a region's categories before changing its counts and entering
 * them again afterwards (fhc_cat_leave/fhc_cat_enter), so the counters cannot drift.
 *
 * Bounds (checked in fhc_check.c):
 *   remote_bytes <= sum over peers of t_held <= (N-1) F <= M
 *   local_bytes  <= MAXVICTIM (admission in fhc_pin_local)
 *   victim FIFO non-empty  =>  local_bytes + victim_bytes <= MAXVICTIM
 * so pinned_bytes <= remote + local + victim <= M + MAXVICTIM  (I1).
 * Local pins are charged against MAXVICTIM even on regions peers also hold:
 * the doc's "counted against M even if also used locally" alone would let
 * local-only bytes exceed MAXVICTIM once the peers release, breaking I1.
 *
 * Invalidation (fhc_invalidate, fhc_target_revoke.c) takes regions out of
 * all of the above into `dead`: out of the bucket map, counted in
 * dead_bytes, their holds turned into REVOKE records, deregistered when the
 * last local pin and the last revoke ack are gone (fhc_region_settle).
 */
#include "fhc_target.h"

#include <stdlib.h>

/* ------------------------------------------------------ categories, FIFO */

static void fifo_push(fhc_t *c, fhc_region_t *r)
{
    assert(!r->in_fifo);
    r->in_fifo = 1;
    fhc_list_push_tail(&c->fifo, &r->fifo_link);
    c->victim_bytes += r->len;
    c->victim_len++;
}

void fhc_fifo_remove(fhc_t *c, fhc_region_t *r)
{
    assert(r->in_fifo);
    fhc_list_unlink(&c->fifo, &r->fifo_link);
    r->in_fifo = 0;
    c->victim_bytes -= r->len;
    c->victim_len--;
}

void fhc_cat_leave(fhc_t *c, fhc_region_t *r)
{
    if (r->dead)
        return;
    if (r->remote_ref)
        c->remote_bytes -= r->len;
    if (r->local_ref)
        c->local_bytes -= r->len;
    if (r->in_fifo)
        fhc_fifo_remove(c, r);
}

void fhc_cat_enter(fhc_t *c, fhc_region_t *r)
{
    if (r->dead)
        return;
    if (r->remote_ref)
        c->remote_bytes += r->len;
    if (r->local_ref)
        c->local_bytes += r->len;
    if (!r->remote_ref && !r->local_ref)
        fifo_push(c, r);
}

/* ------------------------------------------------------------- regions */

void fhc_region_free(fhc_t *c, fhc_region_t *r)
{
    assert(!r->remote_ref && !r->local_ref && !r->in_fifo);
    c->env.unpin(c->env.arg, r->mr);
    if (r->dead) {
        c->dead_bytes -= r->len;    /* its buckets left the map when it died */
        c->dead_freed++;
    }
    else
        for (uintptr_t a = r->base; a < r->base + r->len; a += c->p.bucket)
            fhc_map_del(&c->tbucket, 0, fhc_bno(c, a));
    fhc_list_unlink(&c->all, &r->all_link);
    c->pinned_bytes -= r->len;
    c->nregions--;
    free(r);
}

/* A dead region goes once nothing can use its registration any more. */
void fhc_region_settle(fhc_t *c, fhc_region_t *r)
{
    if (r->dead && !r->local_ref && !r->revoking)
        fhc_region_free(c, r);
}

static int evict_oldest(fhc_t *c)
{
    fhc_region_t *r = fhc_entry(c->fifo.head, fhc_region_t, fifo_link);
    if (!r)
        return 0;
    fhc_fifo_remove(c, r);
    if (r->last_peer < c->p.nranks && c->peer[r->last_peer])
        c->peer[r->last_peer]->st.evictions++;
    fhc_ghost_evicted(c, r->base, r->len);
    fhc_region_free(c, r);
    c->evictions++;
    return 1;
}

/* Lazy deregistration: the victim FIFO shrinks only when it must.  The
 * adaptive MAXVICTIM (mv_now) is decided here first (fhc_ghost.h). */
void fhc_trim_victims(fhc_t *c)
{
    fhc_ghost_adapt(c);
    while (c->fifo.head && c->local_bytes + c->victim_bytes > c->mv_now)
        evict_oldest(c);
}

/* Registers a new region with no references (the caller takes one at once
 * and then calls cat_enter).  A failing pin() is retried after evicting the
 * oldest victim, until the FIFO is empty.  The bucket map must have room. */
fhc_region_t *fhc_region_new(fhc_t *c, uintptr_t base, size_t len, int exposed,
                             uintptr_t want)
{
    fhc_region_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    int rc;
    while ((rc = c->env.pin(c->env.arg, base, len, exposed,
                                want >= base && want - base < len ? want : 0, &r->mr,
                                r->key, &r->reach)) < 0) {
        if (rc == FHC_ERR_NO_MEMORY)
            fhc_ghost_pin_failed(c);
        if (rc != FHC_ERR_NO_MEMORY || !evict_oldest(c)) {
            c->pin_rc = rc;
            free(r);
            return NULL;
        }
    }
    c->registrations++;
    fhc_ghost_registered(c, base, len);
    r->last_peer = UINT32_MAX;
    r->base = base;
    r->len = len;
    r->exposed = exposed;
    for (uintptr_t a = base; a < base + len; a += c->p.bucket)
        fhc_map_put(&c->tbucket, 0, fhc_bno(c, a), r);
    fhc_list_push_head(&c->all, &r->all_link);
    c->pinned_bytes += len;
    c->nregions++;
    return r;
}

/* End of the run of uncovered buckets starting at a (at most hi). */
uintptr_t fhc_uncovered_end(const fhc_t *c, uintptr_t a, uintptr_t hi)
{
    while (a < hi && !fhc_region_at(c, a))
        a += c->p.bucket;
    return a;
}

/* --------------------------------------------------------------- holds */

fhc_hold_t *fhc_hold_add(fhc_t *c, fhc_peer_t *P, uint32_t peer,
                         fhc_region_t *r)
{
    fhc_hold_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    if ((c->p.debug_bugs & FHC_BUG_EVICT_HELD) && r->remote_ref) {
        /* Deliberate bug: re-register a region other peers hold. */
        c->env.unpin(c->env.arg, r->mr);
        if (c->env.pin(c->env.arg, r->base, r->len, r->exposed, 0, &r->mr, r->key,
                        &r->reach) < 0)
            r->mr = NULL;
    }
    h->reg = r;
    h->peer = peer;
    r->last_peer = peer;
    fhc_map_put(&c->holds, peer, r->base, h);
    fhc_list_push_head(&P->t_list, &h->link);
    fhc_cat_leave(c, r);
    r->remote_ref++;
    fhc_cat_enter(c, r);
    fhc_t_held_change(c, P, r->len, 1);
    P->t_nheld++;
    return h;
}

/* Drops the hold; the caller runs trim_victims afterwards. */
void fhc_hold_remove(fhc_t *c, fhc_peer_t *P, fhc_hold_t *h)
{
    fhc_region_t *r = h->reg;
    fhc_map_del(&c->holds, h->peer, r->base);
    fhc_list_unlink(&P->t_list, &h->link);
    assert(r->remote_ref > 0 && P->t_held >= r->len && P->t_nheld > 0);
    fhc_cat_leave(c, r);
    r->remote_ref--;
    fhc_cat_enter(c, r);
    fhc_t_held_change(c, P, r->len, 0);
    P->t_nheld--;
    free(h);
}

/* ---------------------------------------------------------- local pins */

int fhc_pin_local(fhc_t *c, uintptr_t addr, size_t len, fhc_local_t *out)
{
    out->nmr = 0;
    if (!len || addr > UINTPTR_MAX - len - c->p.bucket)
        return FHC_ERR_OVERFLOW;
    if (fhc_chunk_len(c, addr, len) != len)
        return FHC_ERR_INVALID;
    uintptr_t lo = fhc_bucket_down(c, addr);
    uintptr_t hi = fhc_bucket_down(c, addr + len - 1) + c->p.bucket;

    /* Admission: every byte that becomes locally referenced. */
    size_t charge = 0;
    for (uintptr_t a = lo; a < hi;) {
        fhc_region_t *r = fhc_region_at(c, a);
        if (r) {
            charge += r->local_ref ? 0 : r->len;
            a = r->base + r->len;
        } else {
            charge += c->p.bucket;
            a += c->p.bucket;
        }
    }
    if (c->local_bytes + charge > c->mv_now)
        return FHC_ERR_AGAIN;
    if (fhc_map_reserve(&c->tbucket, (hi - lo) / c->p.bucket) < 0)
        return FHC_ERR_NO_MEMORY;

    for (uintptr_t a = lo; a < hi;) {
        fhc_region_t *r = fhc_region_at(c, a);
        if (!r) {
            a += c->p.bucket;
            continue;
        }
        fhc_cat_leave(c, r);
        r->local_ref++;
        fhc_cat_enter(c, r);
        out->reg[out->nmr++] = r;
        a = r->base + r->len;
    }
    /* Make room for the gaps before registering them: pinned bytes must stay
     * <= M + MAXVICTIM at every pin() call, not just afterwards. */
    size_t gaps = 0;
    for (uintptr_t a = lo; a < hi; a += c->p.bucket)
        gaps += fhc_region_at(c, a) ? 0 : c->p.bucket;
    while (c->fifo.head && c->local_bytes + c->victim_bytes + gaps > c->mv_now)
        evict_oldest(c);
    /* Gaps: one region per run of buckets that are all exposed or all not,
     * so a region handed to a peer never covers unexposed memory. */
    for (uintptr_t a = lo; a < hi;) {
        if (fhc_region_at(c, a)) {
            a = fhc_region_at(c, a)->base + fhc_region_at(c, a)->len;
            continue;
        }
        int ex = c->env.allowed(c->env.arg, a, c->p.bucket) != 0;
        uintptr_t e = a + c->p.bucket;
        while (e < hi && !fhc_region_at(c, e) &&
               (c->env.allowed(c->env.arg, e, c->p.bucket) != 0) == ex)
            e += c->p.bucket;
        fhc_region_t *r = fhc_region_new(c, a, e - a, ex, 0);
        if (!r) {
            fhc_unpin_local(c, out);
            return FHC_ERR_NO_MEMORY;
        }
        r->local_ref = 1;
        fhc_cat_enter(c, r);
        out->reg[out->nmr++] = r;
        a = e;
    }
    /* Report in address order. */
    for (unsigned i = 1; i < out->nmr; i++)
        for (unsigned j = i; j > 0 && out->reg[j - 1]->base > out->reg[j]->base; j--) {
            fhc_region_t *t = out->reg[j];
            out->reg[j] = out->reg[j - 1];
            out->reg[j - 1] = t;
        }
    for (unsigned i = 0; i < out->nmr; i++) {
        out->mr[i] = out->reg[i]->mr;
        out->mr_base[i] = out->reg[i]->base;
        out->mr_len[i] = out->reg[i]->len;
    }
    out->addr = addr;
    out->len = len;
    fhc_trim_victims(c);
    return 0;
}

void fhc_unpin_local(fhc_t *c, fhc_local_t *l)
{
    for (unsigned i = 0; i < l->nmr; i++) {
        fhc_region_t *r = l->reg[i];
        assert(r->local_ref > 0);
        fhc_cat_leave(c, r);
        r->local_ref--;
        fhc_cat_enter(c, r);
        fhc_region_settle(c, r);
    }
    l->nmr = 0;
    fhc_trim_victims(c);
}

void fhc_target_destroy(fhc_t *c)
{
    for (uint32_t i = 0; i < c->p.nranks; i++) {
        fhc_peer_t *P = c->peer[i];
        while (P && P->t_list.head)
            fhc_hold_remove(c, P, fhc_entry(P->t_list.head, fhc_hold_t, link));
        while (P && P->rv_list.head) {
            fhc_hold_t *h = fhc_entry(P->rv_list.head, fhc_hold_t, link);
            fhc_list_unlink(&P->rv_list, &h->link);
            h->reg->revoking--;
            c->revokes_pending--;
            free(h);
        }
    }
    while (c->all.head) {
        fhc_region_t *r = fhc_entry(c->all.head, fhc_region_t, all_link);
        fhc_cat_leave(c, r);
        r->local_ref = 0;
        fhc_region_free(c, r);
    }
}
