/*
 * fhc_target.c -- our memory as seen by peers: the region table, the victim
 * FIFO, the move handler, local pins.
 *
 * A region is in the bucket map under each of its buckets, in the all-list,
 * and (iff nobody references it) in the victim FIFO.  Byte accounting is done
 * by leaving a region's categories before changing its counts and entering
 * them again afterwards (cat_leave/cat_enter), so the counters cannot drift.
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
 * Invalidation (fhc_invalidate, the end of this file) takes regions out of
 * all of the above into `dead`: out of the bucket map, counted in
 * dead_bytes, their holds turned into REVOKE records, deregistered when the
 * last local pin and the last revoke ack are gone (region_settle).
 */
#include "fhc_internal.h"
#include "fhc_wire.h"

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

static void fifo_remove(fhc_t *c, fhc_region_t *r)
{
    assert(r->in_fifo);
    fhc_list_unlink(&c->fifo, &r->fifo_link);
    r->in_fifo = 0;
    c->victim_bytes -= r->len;
    c->victim_len--;
}

static void cat_leave(fhc_t *c, fhc_region_t *r)
{
    if (r->dead)
        return;
    if (r->remote_ref)
        c->remote_bytes -= r->len;
    if (r->local_ref)
        c->local_bytes -= r->len;
    if (r->in_fifo)
        fifo_remove(c, r);
}

static void cat_enter(fhc_t *c, fhc_region_t *r)
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

static void region_free(fhc_t *c, fhc_region_t *r)
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
static void region_settle(fhc_t *c, fhc_region_t *r)
{
    if (r->dead && !r->local_ref && !r->revoking)
        region_free(c, r);
}

static int evict_oldest(fhc_t *c)
{
    fhc_region_t *r = fhc_entry(c->fifo.head, fhc_region_t, fifo_link);
    if (!r)
        return 0;
    fifo_remove(c, r);
    if (r->last_peer < c->p.nranks && c->peer[r->last_peer])
        c->peer[r->last_peer]->st.evictions++;
    region_free(c, r);
    c->evictions++;
    return 1;
}

/* Lazy deregistration: the victim FIFO shrinks only when it must. */
static void trim_victims(fhc_t *c)
{
    while (c->fifo.head && c->local_bytes + c->victim_bytes > c->p.maxvictim)
        evict_oldest(c);
}

/* Registers a new region with no references (the caller takes one at once
 * and then calls cat_enter).  A failing pin() is retried after evicting the
 * oldest victim, until the FIFO is empty.  The bucket map must have room. */
static fhc_region_t *region_new(fhc_t *c, uintptr_t base, size_t len, int exposed,
                                uintptr_t want)
{
    fhc_region_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    int rc;
    while ((rc = c->env.pin(c->env.arg, base, len, exposed,
                                want >= base && want - base < len ? want : 0, &r->mr,
                                r->key, &r->reach)) < 0)
        if (rc != FHC_ERR_NO_MEMORY || !evict_oldest(c)) {
            c->pin_rc = rc;
            free(r);
            return NULL;
        }
    c->registrations++;
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

static fhc_region_t *region_at(const fhc_t *c, uintptr_t a)
{
    return fhc_map_get(&c->tbucket, 0, fhc_bno(c, a));
}

/* End of the run of uncovered buckets starting at a (at most hi). */
static uintptr_t uncovered_end(const fhc_t *c, uintptr_t a, uintptr_t hi)
{
    while (a < hi && !region_at(c, a))
        a += c->p.bucket;
    return a;
}

/* --------------------------------------------------------------- holds */

static fhc_hold_t *hold_add(fhc_t *c, fhc_peer_t *P, uint32_t peer,
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
    cat_leave(c, r);
    r->remote_ref++;
    cat_enter(c, r);
    P->t_held += r->len;
    P->t_nheld++;
    return h;
}

/* Drops the hold; the caller runs trim_victims afterwards. */
static void hold_remove(fhc_t *c, fhc_peer_t *P, fhc_hold_t *h)
{
    fhc_region_t *r = h->reg;
    fhc_map_del(&c->holds, h->peer, r->base);
    fhc_list_unlink(&P->t_list, &h->link);
    assert(r->remote_ref > 0 && P->t_held >= r->len && P->t_nheld > 0);
    cat_leave(c, r);
    r->remote_ref--;
    cat_enter(c, r);
    P->t_held -= r->len;
    P->t_nheld--;
    free(h);
}

/* ------------------------------------------------------ revoke records */

static int revoked_base(const fhc_peer_t *P, uintptr_t base)
{
    for (fhc_link_t *l = P->rv_list.head; l; l = l->next)
        if (fhc_entry(l, const fhc_hold_t, link)->rv_base == base)
            return 1;
    return 0;
}

static int revoked_overlap(const fhc_peer_t *P, uintptr_t lo, uintptr_t hi)
{
    for (fhc_link_t *l = P->rv_list.head; l; l = l->next) {
        const fhc_hold_t *h = fhc_entry(l, const fhc_hold_t, link);
        if (h->rv_base < hi && lo < h->rv_end)
            return 1;
    }
    return 0;
}

/* ------------------------------------------------------------- replies */

static void send_reply(fhc_t *c, uint32_t peer, const fhc_rep_t *rep)
{
    uint8_t buf[FHC_REP_HDR + FHC_REP_REGION * FHC_MAX_PIECES];
    size_t n = fhc_rep_encode(rep, buf, sizeof buf);
    assert(n);
    c->env.send(c->env.arg, peer, 1, buf, n);
}

static void refuse(fhc_t *c, uint32_t peer, fhc_peer_t *P, uint64_t token,
                   int status, const char *why)
{
    fhc_logf(c, "fhc: refused move from rank %u: %s", peer, why);
    c->refused++;
    if (P)
        P->st.refused++;
    fhc_rep_t rep = { .token = token, .status = status, .nreg = 0 };
    send_reply(c, peer, &rep);
}

/* ---------------------------------------------------------------- move */

/* Bytes that covering [lo, hi) for `peer` would add to its holds. */
static size_t grant_bytes(const fhc_t *c, uint32_t peer, uintptr_t lo,
                          uintptr_t hi, int *unexposed)
{
    size_t n = 0;
    for (uintptr_t a = lo; a < hi;) {
        const fhc_region_t *r = region_at(c, a);
        if (r) {
            if (!r->exposed)
                *unexposed = 1;
            if (!fhc_map_get(&c->holds, peer, r->base))
                n += r->len;
            a = r->base + r->len;
        } else {
            uintptr_t e = uncovered_end(c, a, hi);
            n += e - a;
            a = e;
        }
    }
    return n;
}

static int is_added(fhc_hold_t *const *added, unsigned nadded,
                    const fhc_region_t *r)
{
    for (unsigned i = 0; i < nadded; i++)
        if (added[i]->reg == r)
            return 1;
    return 0;
}

void fhc_target_on_request(fhc_t *c, uint32_t peer, const void *msg, size_t len)
{
    fhc_peer_t *P = fhc_peer_get(c, peer);
    fhc_req_t q;
    char why[96];
    if (!P) {
        refuse(c, peer, NULL, fhc_req_peek_token(msg, len), FHC_ERR_NO_MEMORY,
               "out of memory");
        return;
    }
    if (fhc_req_decode(msg, len, &q, why, sizeof why) < 0) {
        refuse(c, peer, P, fhc_req_peek_token(msg, len), FHC_ERR_INVALID, why);
        return;
    }
    /* 1. Releases: all must be holds of this peer, each once; otherwise
     * nothing at all is applied.  A release of a region we revoked from
     * this peer (it let go before it saw the REVOKE) is already done. */
    for (unsigned i = 0; i < q.nrel; i++) {
        int dup = 0;
        for (unsigned j = 0; j < i; j++)
            dup |= q.rel[j] == q.rel[i];
        if (dup || q.rel[i] > UINTPTR_MAX ||
            (!fhc_map_get(&c->holds, peer, (uintptr_t)q.rel[i]) &&
             !revoked_base(P, (uintptr_t)q.rel[i]))) {
            refuse(c, peer, P, q.token, FHC_ERR_INVALID,
                   "releases a region it does not hold");
            return;
        }
    }
    for (unsigned i = 0; i < q.nrel; i++) {
        fhc_hold_t *h = fhc_map_get(&c->holds, peer, (uintptr_t)q.rel[i]);
        if (h)
            hold_remove(c, P, h);
    }
    trim_victims(c);

    /* 2. The span: bucket-aligned, one frame, inside our segments; put data
     * inside the frame and our segments.  Releases above stand even when the
     * request is refused: the initiator already forgot those firehoses. */
    uintptr_t lo = (uintptr_t)q.lo, hi = (uintptr_t)q.hi;
    if (lo % c->p.bucket || hi % c->p.bucket ||
        fhc_frame_of(c, lo) != fhc_frame_of(c, hi - 1)) {
        refuse(c, peer, P, q.token, FHC_ERR_INVALID, "span not buckets of one frame");
        return;
    }
    if (revoked_overlap(P, lo, hi)) {
        /* The peer may still hold the revoked firehose there: no second
         * one until it acked (see fhc_invalidate).  It asks again. */
        fhc_rep_t rep = { .token = q.token, .status = FHC_ERR_AGAIN, .nreg = 0 };
        send_reply(c, peer, &rep);
        return;
    }
    uintptr_t frame = fhc_frame_of(c, lo);
    if (q.data_len && (q.data_len > c->p.put_in_move || !c->env.put_in_move ||
                       q.data_dst < frame || q.data_dst + q.data_len > frame + c->R)) {
        refuse(c, peer, P, q.token, FHC_ERR_INVALID, "bad put-in-move data");
        return;
    }
    int unexposed = 0;
    int (*data_ok)(void *, uintptr_t, size_t) = c->env.data_ok ? c->env.data_ok
                                                                : c->env.allowed;
    if (!c->env.allowed(c->env.arg, lo, hi - lo) ||
        (q.data_len && !data_ok(c->env.arg, (uintptr_t)q.data_dst, q.data_len))) {
        refuse(c, peer, P, q.token, FHC_ERR_OUT_OF_SEGMENT,
               "outside the memory we expose (our segments, or with "
               "FH_SEGMENT=everything our mapped memory)");
        return;
    }
    size_t grant = grant_bytes(c, peer, lo, hi, &unexposed);
    if (unexposed) {
        refuse(c, peer, P, q.token, FHC_ERR_OUT_OF_SEGMENT, "span meets a local-only region");
        return;
    }
    if (!(c->p.debug_bugs & FHC_BUG_NO_F_CHECK) && P->t_held + grant > c->F) {
        refuse(c, peer, P, q.token, FHC_ERR_LIMIT, "over its budget F");
        return;
    }
    if (fhc_map_reserve(&c->holds, FHC_MAX_PIECES) < 0 ||
        fhc_map_reserve(&c->tbucket, (hi - lo) / c->p.bucket) < 0) {
        refuse(c, peer, P, q.token, FHC_ERR_NO_MEMORY, "out of memory");
        return;
    }

    /* 3. Merge: when the span is cut into several pieces (regions and
     * gaps) and each region in it is a victim (registered, referenced by
     * nobody: e.g. the firehoses the initiator has just released to have
     * them merged, see fhc_initiator.c "absorb") lying inside the span,
     * they are deregistered, so the gaps below register the span as one
     * region: a fragmented frame costs one RDMA per region for as long as
     * it stays resident.  Otherwise existing regions are reused as they are
     * (registering again costs, on verbs). */
    unsigned runs = 0;
    int mergeable = 1;
    for (uintptr_t a = lo; a < hi; runs++) {
        fhc_region_t *r = region_at(c, a);
        if (!r) {
            a = uncovered_end(c, a, hi);
            continue;
        }
        mergeable &= r->in_fifo && r->exposed && r->base >= lo && r->base + r->len <= hi;
        a = r->base + r->len;
    }
    for (uintptr_t a = lo; mergeable && runs > 1 && a < hi;) {
        fhc_region_t *r = region_at(c, a);
        if (!r) {
            a += c->p.bucket;
            continue;
        }
        a = r->base + r->len;
        fifo_remove(c, r);
        region_free(c, r);
    }

    /* 4. Cover: first hold the existing regions (taking them out of the
     * FIFO), then register the gaps, so evictions for a failing pin() can
     * never hit a region of this span. */
    fhc_hold_t *added[FHC_MAX_PIECES];
    unsigned nadded = 0;
    int status = 0;
    for (uintptr_t a = lo; a < hi && !status;) {
        fhc_region_t *r = region_at(c, a);
        if (!r) {
            a += c->p.bucket;
            continue;
        }
        if (!fhc_map_get(&c->holds, peer, r->base)) {
            fhc_hold_t *h = hold_add(c, P, peer, r);
            if (h)
                added[nadded++] = h;
            else
                status = FHC_ERR_NO_MEMORY;
        }
        a = r->base + r->len;
    }
    for (uintptr_t a = lo; a < hi && !status;) {
        fhc_region_t *r = region_at(c, a);
        if (r) {
            a = r->base + r->len;
            continue;
        }
        uintptr_t e = uncovered_end(c, a, hi);
        r = region_new(c, a, e - a, 1, (uintptr_t)q.data_dst);
        if (r)
            P->st.registrations++;
        fhc_hold_t *h = r ? hold_add(c, P, peer, r) : NULL;
        if (h) {
            added[nadded++] = h;
        } else {
            if (r)
                cat_enter(c, r);
            /* pin() refusing the memory (nothing of it may be reached:
             * protected or unwatchable pages) is the peer's range error. */
            status = !r && c->pin_rc == FHC_ERR_INVALID ? FHC_ERR_OUT_OF_SEGMENT
                                                        : FHC_ERR_NO_MEMORY;
        }
        a = e;
    }
    if (status) {
        while (nadded)
            hold_remove(c, P, added[--nadded]);
        trim_victims(c);
        refuse(c, peer, P, q.token, status, status == FHC_ERR_OUT_OF_SEGMENT
               ? "no byte of the span may be reached (protected or unwatchable)"
               : "registration failed");
        return;
    }
    if (q.data_len)
        c->env.put_in_move(c->env.arg, (uintptr_t)q.data_dst, q.data, q.data_len);

    /* 5. Reply with every region covering the span. */
    fhc_rep_t rep = { .token = q.token, .status = 0, .nreg = 0 };
    for (uintptr_t a = lo; a < hi;) {
        fhc_region_t *r = region_at(c, a);
        assert(r && rep.nreg < FHC_MAX_PIECES);
        rep.reg[rep.nreg++] = (fhc_rep_region_t){
            .base = r->base, .len = r->len, .key = { r->key[0], r->key[1] },
            .reach = r->reach, .granted = is_added(added, nadded, r) };
        a = r->base + r->len;
    }
    c->moves_served++;
    send_reply(c, peer, &rep);
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
        fhc_region_t *r = region_at(c, a);
        if (r) {
            charge += r->local_ref ? 0 : r->len;
            a = r->base + r->len;
        } else {
            charge += c->p.bucket;
            a += c->p.bucket;
        }
    }
    if (c->local_bytes + charge > c->p.maxvictim)
        return FHC_ERR_AGAIN;
    if (fhc_map_reserve(&c->tbucket, (hi - lo) / c->p.bucket) < 0)
        return FHC_ERR_NO_MEMORY;

    for (uintptr_t a = lo; a < hi;) {
        fhc_region_t *r = region_at(c, a);
        if (!r) {
            a += c->p.bucket;
            continue;
        }
        cat_leave(c, r);
        r->local_ref++;
        cat_enter(c, r);
        out->reg[out->nmr++] = r;
        a = r->base + r->len;
    }
    /* Make room for the gaps before registering them: pinned bytes must stay
     * <= M + MAXVICTIM at every pin() call, not just afterwards. */
    size_t gaps = 0;
    for (uintptr_t a = lo; a < hi; a += c->p.bucket)
        gaps += region_at(c, a) ? 0 : c->p.bucket;
    while (c->fifo.head && c->local_bytes + c->victim_bytes + gaps > c->p.maxvictim)
        evict_oldest(c);
    /* Gaps: one region per run of buckets that are all exposed or all not,
     * so a region handed to a peer never covers unexposed memory. */
    for (uintptr_t a = lo; a < hi;) {
        if (region_at(c, a)) {
            a = region_at(c, a)->base + region_at(c, a)->len;
            continue;
        }
        int ex = c->env.allowed(c->env.arg, a, c->p.bucket) != 0;
        uintptr_t e = a + c->p.bucket;
        while (e < hi && !region_at(c, e) &&
               (c->env.allowed(c->env.arg, e, c->p.bucket) != 0) == ex)
            e += c->p.bucket;
        fhc_region_t *r = region_new(c, a, e - a, ex, 0);
        if (!r) {
            fhc_unpin_local(c, out);
            return FHC_ERR_NO_MEMORY;
        }
        r->local_ref = 1;
        cat_enter(c, r);
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
    trim_victims(c);
    return 0;
}

void fhc_unpin_local(fhc_t *c, fhc_local_t *l)
{
    for (unsigned i = 0; i < l->nmr; i++) {
        fhc_region_t *r = l->reg[i];
        assert(r->local_ref > 0);
        cat_leave(c, r);
        r->local_ref--;
        cat_enter(c, r);
        region_settle(c, r);
    }
    l->nmr = 0;
    trim_victims(c);
}

/* -------------------------------------------------------- invalidation */

/* Turns the peer's hold on dead region r into a REVOKE record and sends the
 * REVOKE.  Uses the hold's own memory: nothing to allocate, nothing to fail. */
static void hold_revoke(fhc_t *c, fhc_peer_t *P, fhc_hold_t *h)
{
    fhc_region_t *r = h->reg;
    assert(r->dead && r->remote_ref > 0);
    fhc_map_del(&c->holds, h->peer, r->base);
    fhc_list_unlink(&P->t_list, &h->link);
    P->t_held -= r->len;
    P->t_nheld--;
    r->remote_ref--;
    h->rv_id = ++P->rv_next;
    h->rv_base = r->base;
    h->rv_end = r->base + r->len;
    fhc_list_push_head(&P->rv_list, &h->link);
    r->revoking++;
    c->revokes_pending++;
    c->revokes_sent++;
    fhc_revoke_t m = { .kind = FHC_WIRE_REVOKE, .id = h->rv_id, .lo = h->rv_base,
                       .hi = h->rv_end };
    uint8_t buf[FHC_REVOKE_LEN];
    size_t n = fhc_revoke_encode(&m, buf, sizeof buf);
    assert(n == sizeof buf);
    c->env.send(c->env.arg, h->peer, 0, buf, n);
}

static void region_kill(fhc_t *c, fhc_region_t *r)
{
    assert(!r->dead);
    cat_leave(c, r);
    for (uintptr_t a = r->base; a < r->base + r->len; a += c->p.bucket)
        fhc_map_del(&c->tbucket, 0, fhc_bno(c, a));
    r->dead = 1;
    c->dead_bytes += r->len;
    c->invalidations++;
    for (uint32_t p = 0; p < c->p.nranks && r->remote_ref; p++) {
        fhc_hold_t *h = c->peer[p] ? fhc_map_get(&c->holds, p, r->base) : NULL;
        if (h && h->reg == r)
            hold_revoke(c, c->peer[p], h);
    }
    assert(r->remote_ref == 0);
    region_settle(c, r);
}

unsigned fhc_invalidate(fhc_t *c, uintptr_t addr, size_t len)
{
    if (!len)
        return 0;
    uintptr_t end = len > UINTPTR_MAX - addr ? UINTPTR_MAX : addr + len;
    uintptr_t lo = fhc_bucket_down(c, addr);
    unsigned n = 0;
    if ((end - lo) / c->p.bucket > (uintptr_t)c->nregions * 4) {
        /* A large range: walk the regions rather than the buckets. */
        for (fhc_link_t *l = c->all.head, *next; l; l = next) {
            next = l->next;
            fhc_region_t *r = fhc_entry(l, fhc_region_t, all_link);
            if (!r->dead && r->base < end && addr < r->base + r->len) {
                region_kill(c, r);
                n++;
            }
        }
        return n;
    }
    for (uintptr_t a = lo; a < end; a += c->p.bucket) {
        fhc_region_t *r = region_at(c, a);
        if (r) {
            region_kill(c, r);
            n++;
        }
    }
    return n;
}

void fhc_target_on_revoke_ack(fhc_t *c, uint32_t peer, const void *msg, size_t len)
{
    fhc_revoke_t a;
    char why[96];
    fhc_peer_t *P = c->peer[peer];
    if (fhc_revoke_decode(msg, len, &a, why, sizeof why) < 0 ||
        a.kind != FHC_WIRE_REVOKE_ACK) {
        fhc_logf(c, "fhc: malformed revoke ack from rank %u dropped", peer);
        return;
    }
    fhc_link_t *l = P ? P->rv_list.head : NULL;
    while (l && fhc_entry(l, fhc_hold_t, link)->rv_id != a.id)
        l = l->next;
    if (!l) {
        fhc_logf(c, "fhc: revoke ack from rank %u for unknown revoke %llu dropped",
                 peer, (unsigned long long)a.id);
        return;
    }
    fhc_hold_t *h = fhc_entry(l, fhc_hold_t, link);
    fhc_list_unlink(&P->rv_list, &h->link);
    fhc_region_t *r = h->reg;
    free(h);
    assert(r->revoking > 0 && c->revokes_pending > 0);
    r->revoking--;
    c->revokes_pending--;
    region_settle(c, r);
}

void fhc_target_destroy(fhc_t *c)
{
    for (uint32_t i = 0; i < c->p.nranks; i++) {
        fhc_peer_t *P = c->peer[i];
        while (P && P->t_list.head)
            hold_remove(c, P, fhc_entry(P->t_list.head, fhc_hold_t, link));
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
        cat_leave(c, r);
        r->local_ref = 0;
        region_free(c, r);
    }
}
