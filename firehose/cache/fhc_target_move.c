/*
 * fhc_target_move.c -- serving a peer's move request: its releases, the
 * checks of the span and of put-in-move data, the merge of a fragmented
 * span, covering it with held or new regions, the reply.  Also what a
 * request must not meet: a region we revoked from that peer, not yet acked.
 */
#include "fhc_target.h"
#include "fhc_wire.h"

#include <stdlib.h>

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
    fhc_logf(c, "fhc: refused move from %s: %s", FHC_PEER_NAME(c, peer), why);
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
        const fhc_region_t *r = fhc_region_at(c, a);
        if (r) {
            if (!r->exposed)
                *unexposed = 1;
            if (!fhc_map_get(&c->holds, peer, r->base))
                n += r->len;
            a = r->base + r->len;
        } else {
            uintptr_t e = fhc_uncovered_end(c, a, hi);
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

/* 1. Releases: all must be holds of this peer, each once; otherwise
 * nothing at all is applied (refused: -1).  A release of a region we
 * revoked from this peer (it let go before it saw the REVOKE) is already
 * done. */
static int apply_releases(fhc_t *c, uint32_t peer, fhc_peer_t *P, const fhc_req_t *q)
{
    for (unsigned i = 0; i < q->nrel; i++) {
        int dup = 0;
        for (unsigned j = 0; j < i; j++)
            dup |= q->rel[j] == q->rel[i];
        if (dup || q->rel[i] > UINTPTR_MAX ||
            (!fhc_map_get(&c->holds, peer, (uintptr_t)q->rel[i]) &&
             !revoked_base(P, (uintptr_t)q->rel[i]))) {
            if (q->lo || q->hi)
                refuse(c, peer, P, q->token, FHC_ERR_INVALID,
                       "releases a region it does not hold");
            else
                fhc_budget_refused(c, peer, P, "a reclaim answer releases a region "
                                   "it does not hold");
            return -1;
        }
    }
    for (unsigned i = 0; i < q->nrel; i++) {
        fhc_hold_t *h = fhc_map_get(&c->holds, peer, (uintptr_t)q->rel[i]);
        if (h)
            fhc_hold_remove(c, P, h);
    }
    fhc_trim_victims(c);
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
    if (apply_releases(c, peer, P, &q) < 0)
        return;
    if (!q.lo && !q.hi) {           /* release-only: a RECLAIM's answer */
        fhc_budget_on_answer(c, peer, P, q.token);
        return;
    }
    (void)fhc_target_serve(c, peer, P, &q, NULL);
    fhc_budget_retry(c);            /* the releases may serve deferred moves */
}

/* Serves (or refuses, or defers) the decoded move q of peer, its releases
 * applied.  d: q is that deferred move being retried (no reply while it
 * must still wait). */
int fhc_target_serve(fhc_t *c, uint32_t peer, fhc_peer_t *P, const fhc_req_t *qp,
                     fhc_deferred_t *d)
{
    const fhc_req_t q = *qp;
    /* 2. The span: bucket-aligned, one frame, inside our segments; put data
     * inside the frame and our segments.  Releases above stand even when the
     * request is refused: the initiator already forgot those firehoses. */
    uintptr_t lo = (uintptr_t)q.lo, hi = (uintptr_t)q.hi;
    if (lo % c->p.bucket || hi % c->p.bucket ||
        fhc_frame_of(c, lo) != fhc_frame_of(c, hi - 1)) {
        refuse(c, peer, P, q.token, FHC_ERR_INVALID, "span not buckets of one frame");
        return 0;
    }
    if (revoked_overlap(P, lo, hi)) {
        /* The peer may still hold the revoked firehose there: no second
         * one until it acked (see fhc_invalidate).  It asks again. */
        fhc_rep_t rep = { .token = q.token, .status = FHC_ERR_AGAIN, .nreg = 0 };
        send_reply(c, peer, &rep);
        return 0;
    }
    uintptr_t frame = fhc_frame_of(c, lo);
    if (q.data_len && (q.data_len > c->p.put_in_move || !c->env.put_in_move ||
                       q.data_dst < frame || q.data_dst + q.data_len > frame + c->R)) {
        refuse(c, peer, P, q.token, FHC_ERR_INVALID, "bad put-in-move data");
        return 0;
    }
    int unexposed = 0;
    int (*data_ok)(void *, uintptr_t, size_t) = c->env.data_ok ? c->env.data_ok
                                                                : c->env.allowed;
    if (!c->env.allowed(c->env.arg, lo, hi - lo) ||
        (q.data_len && !data_ok(c->env.arg, (uintptr_t)q.data_dst, q.data_len))) {
        refuse(c, peer, P, q.token, FHC_ERR_OUT_OF_SEGMENT,
               "outside the memory we expose (our segments, or with "
               "FH_SEGMENT=everything our mapped memory)");
        return 0;
    }
    size_t grant = grant_bytes(c, peer, lo, hi, &unexposed);
    if (unexposed) {
        refuse(c, peer, P, q.token, FHC_ERR_OUT_OF_SEGMENT, "span meets a local-only region");
        return 0;
    }
    int adm = fhc_budget_admit(c, peer, P, &q, grant, d);
    if (adm == FHC_ERR_LIMIT) {
        refuse(c, peer, P, q.token, FHC_ERR_LIMIT, "over its budget");
        return 0;
    }
    if (adm < 0) {
        refuse(c, peer, P, q.token, adm, "out of memory deferring its move");
        return 0;
    }
    if (adm > 0)
        return 1;                   /* deferred: answered when bytes come */
    if (fhc_map_reserve(&c->holds, FHC_MAX_PIECES) < 0 ||
        fhc_map_reserve(&c->tbucket, (hi - lo) / c->p.bucket) < 0) {
        refuse(c, peer, P, q.token, FHC_ERR_NO_MEMORY, "out of memory");
        return 0;
    }

    /* 3. Merge: when the span is cut into several pieces (regions and
     * gaps) and each region in it is a victim (registered, referenced by
     * nobody: e.g. the firehoses the initiator has just released to have
     * them merged, see fhc_initiator_step.c "absorb") lying inside the span,
     * they are deregistered, so the gaps below register the span as one
     * region: a fragmented frame costs one RDMA per region for as long as
     * it stays resident.  Otherwise existing regions are reused as they are
     * (registering again costs, on verbs). */
    unsigned runs = 0;
    int mergeable = 1;
    for (uintptr_t a = lo; a < hi; runs++) {
        fhc_region_t *r = fhc_region_at(c, a);
        if (!r) {
            a = fhc_uncovered_end(c, a, hi);
            continue;
        }
        mergeable &= r->in_fifo && r->exposed && r->base >= lo && r->base + r->len <= hi;
        a = r->base + r->len;
    }
    for (uintptr_t a = lo; mergeable && runs > 1 && a < hi;) {
        fhc_region_t *r = fhc_region_at(c, a);
        if (!r) {
            a += c->p.bucket;
            continue;
        }
        a = r->base + r->len;
        fhc_fifo_remove(c, r);
        fhc_region_free(c, r);
    }
    /* Re-aim: the region over the byte the move wants (q.data_dst)
     * registers another run of the memory there (FH_SEGMENT=everything: a
     * bucket holding two mappings with a hole between them; the region
     * was registered for the run of the first request, remote_run) and
     * nobody holds it (the initiator released its firehose in this very
     * request: fhc_initiator_step.c "re-aim"): it goes, and the gap below
     * registers the run that holds the byte.  A region someone holds
     * stays as it is, and the initiator refuses the transfer; so does one
     * whose byte no run may reach (unmapped, or a file mapping the
     * monitor cannot watch: freeing it would only register it again). */
    fhc_region_t *w = q.data_dst >= lo && q.data_dst < hi
                          ? fhc_region_at(c, (uintptr_t)q.data_dst) : NULL;
    if (w && w->in_fifo && w->exposed && (w->reach & FHC_REACH_PART) &&
        w->base >= lo && w->base + w->len <= hi &&
        (q.data_dst < w->base + fhc_reach_lo(w->reach) ||
         q.data_dst >= w->base + fhc_reach_hi(w->reach, w->len)) &&
        c->env.allowed(c->env.arg, (uintptr_t)q.data_dst, 1)) {
        fhc_fifo_remove(c, w);
        fhc_region_free(c, w);
        c->reaims++;
    }

    /* 4. Cover: first hold the existing regions (taking them out of the
     * FIFO), then register the gaps, so evictions for a failing pin() can
     * never hit a region of this span. */
    fhc_hold_t *added[FHC_MAX_PIECES];
    unsigned nadded = 0;
    int status = 0;
    for (uintptr_t a = lo; a < hi && !status;) {
        fhc_region_t *r = fhc_region_at(c, a);
        if (!r) {
            a += c->p.bucket;
            continue;
        }
        if (!fhc_map_get(&c->holds, peer, r->base)) {
            fhc_hold_t *h = fhc_hold_add(c, P, peer, r);
            if (h)
                added[nadded++] = h;
            else
                status = FHC_ERR_NO_MEMORY;
        }
        a = r->base + r->len;
    }
    for (uintptr_t a = lo; a < hi && !status;) {
        fhc_region_t *r = fhc_region_at(c, a);
        if (r) {
            a = r->base + r->len;
            continue;
        }
        uintptr_t e = fhc_uncovered_end(c, a, hi);
        r = fhc_region_new(c, a, e - a, 1, (uintptr_t)q.data_dst);
        if (r)
            P->st.registrations++;
        fhc_hold_t *h = r ? fhc_hold_add(c, P, peer, r) : NULL;
        if (h) {
            added[nadded++] = h;
        } else {
            if (r)
                fhc_cat_enter(c, r);
            /* pin() refusing the memory (nothing of it may be reached:
             * protected or unwatchable pages) is the peer's range error. */
            status = !r && c->pin_rc == FHC_ERR_INVALID ? FHC_ERR_OUT_OF_SEGMENT
                                                        : FHC_ERR_NO_MEMORY;
        }
        a = e;
    }
    if (status) {
        while (nadded)
            fhc_hold_remove(c, P, added[--nadded]);
        fhc_trim_victims(c);
        refuse(c, peer, P, q.token, status, status == FHC_ERR_OUT_OF_SEGMENT
               ? "no byte of the span may be reached (protected or unwatchable)"
               : "registration failed");
        return 0;
    }
    if (q.data_len)
        c->env.put_in_move(c->env.arg, (uintptr_t)q.data_dst, q.data, q.data_len);

    /* 5. Reply with every region covering the span. */
    fhc_rep_t rep = { .token = q.token, .status = 0, .nreg = 0 };
    for (uintptr_t a = lo; a < hi;) {
        fhc_region_t *r = fhc_region_at(c, a);
        assert(r && rep.nreg < FHC_MAX_PIECES);
        rep.reg[rep.nreg++] = (fhc_rep_region_t){
            .base = r->base, .len = r->len, .key = { r->key[0], r->key[1] },
            .reach = r->reach, .granted = is_added(added, nadded, r) };
        a = r->base + r->len;
    }
    c->moves_served++;
    fhc_budget_reply(c, peer, P, &q, &rep);
    send_reply(c, peer, &rep);
    return 0;
}
