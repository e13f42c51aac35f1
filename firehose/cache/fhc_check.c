/*
 * fhc_check.c -- the cache's invariants, checked from the outside.
 *
 *   I1   pinned bytes <= M + MAXVICTIM (and the bounds that imply it:
 *        remote <= M, local <= MAXVICTIM, FIFO non-empty => local + victim
 *        <= MAXVICTIM), where MAXVICTIM is the effective one (mv_now, in
 *        [maxvictim, maxvictim_max]: fhc_ghost.h), so also
 *        pinned <= M + maxvictim_max, the hard limit
 *   I2   per peer: our held + reserved <= F (initiator) and the peer's holds
 *        on us <= F (target); with adaptive budgets (fhc_budget.c):
 *   A1   the target's commitments (sum of max(h_i, b_i) over budgets above
 *        floor, h_i otherwise) <= M, and they equal the sum over peers;
 *   A2   b_i >= floor, announced <= enforced, h_i + deferred <= b_i unless
 *        a RECLAIM's busy releases are still to come;
 *   A3   our held + reserved <= the budget we were told, unless we are
 *        obeying a RECLAIM; our view of the budget >= floor
 *   and the bookkeeping: counters equal the sums over the lists, FIFO
 *   membership <=> zero references, every bucket map entry <=> a live
 *   region/firehose covering that bucket, holds <=> remote_ref.
 * The simulator calls fhc_check_peer for every (rank, peer) a step touched
 * and fhc_check_invariants on every rank periodically.
 */
#include "fhc_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int bad(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t whylen, const char *fmt, ...)
{
    if (why && whylen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int check_global(const fhc_t *c, char *why, size_t n)
{
    const fhc_params_t *p = &c->p;
    if (c->remote_bytes > p->M)
        return bad(why, n, "remote bytes %zu > M %zu", c->remote_bytes, p->M);
    if (c->mv_now < p->maxvictim || c->mv_now > p->maxvictim_max)
        return bad(why, n, "MAXVICTIM now %zu outside [%zu, %zu]", c->mv_now,
                   p->maxvictim, p->maxvictim_max);
    if (c->local_bytes > c->mv_now)
        return bad(why, n, "local bytes %zu > MAXVICTIM %zu", c->local_bytes, c->mv_now);
    if (c->victim_len && c->local_bytes + c->victim_bytes > c->mv_now)
        return bad(why, n, "victims %zu + local %zu > MAXVICTIM %zu",
                   c->victim_bytes, c->local_bytes, c->mv_now);
    if (c->pinned_bytes > p->M + c->mv_now + c->dead_bytes ||
        c->pinned_bytes > p->M + p->maxvictim_max + c->dead_bytes)
        return bad(why, n, "I1: pinned %zu > M + MAXVICTIM %zu (max %zu, + dead %zu)",
                   c->pinned_bytes, p->M + c->mv_now, p->maxvictim_max, c->dead_bytes);
    if (c->pinned_bytes > c->remote_bytes + c->local_bytes + c->victim_bytes + c->dead_bytes)
        return bad(why, n, "pinned %zu not covered by categories", c->pinned_bytes);
    if ((c->victim_len == 0) != (c->victim_bytes == 0) || (c->fifo.head == NULL) != (c->victim_len == 0))
        return bad(why, n, "victim FIFO length/bytes disagree");
    if (c->commit > p->M)
        return bad(why, n, "A1: commitments %zu > M %zu", c->commit, p->M);
    if (!c->def.head && c->def_need)
        return bad(why, n, "deferred moves and their reserved bytes disagree");
    return 0;
}

/* A1-A2 of one peer at the target (adaptive budgets). */
static int check_peer_budget(const fhc_t *c, uint32_t peer, const fhc_peer_t *P,
                             char *why, size_t n)
{
    if (c->p.budget != FHC_BUDGET_ADAPTIVE)
        return P->t_held > c->F
            ? bad(why, n, "I2: %s holds %zu on us > F %zu", FHC_PEER_NAME(c, peer),
                  P->t_held, c->F)
            : 0;
    if (P->t_budget < c->floor || P->t_announced < c->floor)
        return bad(why, n, "A2: %s's budget %zu (announced %zu) below floor %zu",
                   FHC_PEER_NAME(c, peer), P->t_budget, P->t_announced, c->floor);
    if (P->t_announced > P->t_budget)
        return bad(why, n, "A2: %s announced %zu > enforced %zu", FHC_PEER_NAME(c, peer),
                   P->t_announced, P->t_budget);
    if (P->t_held + P->t_defneed > P->t_budget && !P->t_over)
        return bad(why, n, "A2: %s holds %zu (+ deferred %zu) > its budget %zu",
                   FHC_PEER_NAME(c, peer), P->t_held, P->t_defneed, P->t_budget);
    if (P->budget < c->floor)
        return bad(why, n, "A3: our budget %zu on %s below floor %zu", P->budget,
                   FHC_PEER_NAME(c, peer), c->floor);
    return 0;
}

static int check_peer_initiator(const fhc_t *c, uint32_t peer,
                                 const fhc_peer_t *P, char *why, size_t n)
{
    size_t budget = c->p.budget == FHC_BUDGET_ADAPTIVE ? P->budget : c->F;
    if (P->held + P->reserved > budget && !P->rc_id)
        return bad(why, n, "I2: held %zu + reserved %zu > F %zu on peer %u",
                   P->held, P->reserved, budget, peer);
    size_t bytes = 0;
    uint32_t cnt = 0;
    for (fhc_link_t *l = P->h_list.head; l; l = l->next) {
        const fhc_fh_t *f = fhc_entry(l, const fhc_fh_t, h_link);
        if (f->peer != peer || !f->len || f->len % c->p.bucket || f->len > c->R)
            return bad(why, n, "firehose on peer %u has bad extent", peer);
        if (f->in_unused != (f->inuse == 0))
            return bad(why, n, "firehose %#lx on peer %u: unused FIFO <=> inuse==0 broken",
                       (unsigned long)f->base, peer);
        if (f->revoked && !f->inuse)
            return bad(why, n, "revoked firehose %#lx on peer %u not dropped at inuse 0",
                       (unsigned long)f->base, peer);
        for (uintptr_t a = f->base; a < f->base + f->len; a += c->p.bucket)
            if (f->revoked ? fhc_map_get(&c->ibucket, peer, fhc_bno(c, a)) == f
                           : fhc_map_get(&c->ibucket, peer, fhc_bno(c, a)) != f)
                return bad(why, n, "bucket %#lx of a firehose on peer %u not mapped to it",
                           (unsigned long)a, peer);
        bytes += f->len;
        cnt++;
        if (l->next && l->next->prev != l)
            return bad(why, n, "held list links broken (peer %u)", peer);
    }
    if (bytes != P->held || cnt != P->nheld)
        return bad(why, n, "peer %u: held %zu/%u but list sums %zu/%u", peer,
                   P->held, P->nheld, bytes, cnt);
    bytes = 0;
    for (fhc_link_t *l = P->u_list.head; l; l = l->next) {
        const fhc_fh_t *f = fhc_entry(l, const fhc_fh_t, u_link);
        if (!f->in_unused || f->inuse)
            return bad(why, n, "peer %u: in-use firehose in the unused FIFO", peer);
        bytes += f->len;
    }
    if (bytes != P->unused_bytes)
        return bad(why, n, "peer %u: unused bytes %zu, FIFO sums %zu", peer,
                   P->unused_bytes, bytes);
    for (const fhc_op_t *op = P->q_head; op; op = op->priv.next)
        if (op->priv.state != FHC_OP_WAIT_BUDGET || op->priv.nref)
            return bad(why, n, "peer %u: budget-queued op holds firehoses", peer);
    return 0;
}

static int check_peer_target(const fhc_t *c, uint32_t peer, const fhc_peer_t *P,
                             char *why, size_t n)
{
    if (check_peer_budget(c, peer, P, why, n))
        return -1;
    size_t bytes = 0;
    uint32_t cnt = 0;
    for (fhc_link_t *l = P->t_list.head; l; l = l->next) {
        const fhc_hold_t *h = fhc_entry(l, const fhc_hold_t, link);
        const fhc_region_t *r = h->reg;
        if (h->peer != peer || fhc_map_get(&c->holds, peer, r->base) != h)
            return bad(why, n, "hold of %s not in the holds map", FHC_PEER_NAME(c, peer));
        if (!r->remote_ref || r->in_fifo)
            return bad(why, n, "held region %#lx has no remote ref or is a victim",
                       (unsigned long)r->base);
        if (fhc_map_get(&c->tbucket, 0, fhc_bno(c, r->base)) != r)
            return bad(why, n, "held region %#lx not in the bucket map",
                       (unsigned long)r->base);
        bytes += r->len;
        cnt++;
    }
    if (bytes != P->t_held || cnt != P->t_nheld)
        return bad(why, n, "%s: t_held %zu/%u but holds sum %zu/%u", FHC_PEER_NAME(c, peer),
                   P->t_held, P->t_nheld, bytes, cnt);
    for (fhc_link_t *l = P->rv_list.head; l; l = l->next) {
        const fhc_hold_t *h = fhc_entry(l, const fhc_hold_t, link);
        if (!h->rv_id || !h->reg->dead || !h->reg->revoking ||
            h->rv_base != h->reg->base || h->rv_end != h->reg->base + h->reg->len)
            return bad(why, n, "revoke record for %s does not match a dead region",
                       FHC_PEER_NAME(c, peer));
    }
    return 0;
}

int fhc_check_peer(const fhc_t *c, uint32_t peer, char *why, size_t n)
{
    if (check_global(c, why, n))
        return -1;
    if (peer >= c->p.nranks)
        return bad(why, n, "peer %u out of range", peer);
    const fhc_peer_t *P = c->peer[peer];
    if (!P)
        return 0;
    if (check_peer_initiator(c, peer, P, why, n) ||
        check_peer_target(c, peer, P, why, n))
        return -1;
    return 0;
}

static int check_regions(const fhc_t *c, char *why, size_t n)
{
    size_t pinned = 0, remote = 0, local = 0, victim = 0, buckets = 0, dead = 0;
    uint64_t refs = 0, revoking = 0;
    uint32_t cnt = 0;
    for (fhc_link_t *l = c->all.head; l; l = l->next) {
        const fhc_region_t *r = fhc_entry(l, const fhc_region_t, all_link);
        if (!r->len || r->base % c->p.bucket || r->len % c->p.bucket ||
            fhc_frame_of(c, r->base) != fhc_frame_of(c, r->base + r->len - 1))
            return bad(why, n, "region %#lx+%zu: bad extent", (unsigned long)r->base, r->len);
        if (r->dead) {
            if (r->remote_ref || r->in_fifo || (!r->local_ref && !r->revoking))
                return bad(why, n, "dead region %#lx: held, a victim, or unused but "
                           "still registered", (unsigned long)r->base);
            pinned += r->len;
            dead += r->len;
            revoking += r->revoking;
            cnt++;
            continue;
        }
        if (r->revoking)
            return bad(why, n, "live region %#lx being revoked", (unsigned long)r->base);
        if (r->in_fifo != (!r->remote_ref && !r->local_ref))
            return bad(why, n, "region %#lx: FIFO membership <=> zero refs broken",
                       (unsigned long)r->base);
        if (r->remote_ref && !r->exposed)
            return bad(why, n, "region %#lx: unexposed but held by peers",
                       (unsigned long)r->base);
        for (uintptr_t a = r->base; a < r->base + r->len; a += c->p.bucket)
            if (fhc_map_get(&c->tbucket, 0, fhc_bno(c, a)) != r)
                return bad(why, n, "bucket %#lx not mapped to its region", (unsigned long)a);
        pinned += r->len;
        remote += r->remote_ref ? r->len : 0;
        local += r->local_ref ? r->len : 0;
        victim += r->in_fifo ? r->len : 0;
        buckets += r->len / c->p.bucket;
        refs += r->remote_ref;
        cnt++;
    }
    if (pinned != c->pinned_bytes || remote != c->remote_bytes ||
        local != c->local_bytes || victim != c->victim_bytes || cnt != c->nregions ||
        dead != c->dead_bytes || revoking != c->revokes_pending)
        return bad(why, n, "region sums disagree with the counters");
    if (buckets != c->tbucket.n)
        return bad(why, n, "bucket map has %zu entries, regions cover %zu", c->tbucket.n, buckets);
    if (refs != c->holds.n)
        return bad(why, n, "sum of remote_ref %llu != holds %zu",
                   (unsigned long long)refs, c->holds.n);
    uint32_t flen = 0;
    for (fhc_link_t *l = c->fifo.head; l; l = l->next) {
        if (!fhc_entry(l, const fhc_region_t, fifo_link)->in_fifo ||
            (l->next && l->next->prev != l))
            return bad(why, n, "victim FIFO links broken");
        flen++;
    }
    if (flen != c->victim_len)
        return bad(why, n, "victim FIFO has %u, counter says %u", flen, c->victim_len);
    return 0;
}

static int check_moves(const fhc_t *c, char *why, size_t n)
{
    size_t *res = calloc(c->p.nranks, sizeof *res);
    uint32_t *cnt = calloc(c->p.nranks, sizeof *cnt);
    int rc = 0;
    if (!res || !cnt) {
        rc = bad(why, n, "out of memory while checking");
        goto out;
    }
    for (size_t i = 0; i < c->moves.cap; i++) {
        const fhc_move_t *m = c->moves.slot[i].val;
        if (!m)
            continue;
        if (m->peer >= c->p.nranks || !m->w_head || m->w_head != m->owner) {
            rc = bad(why, n, "move %llu: bad peer or owner", (unsigned long long)m->token);
            goto out;
        }
        res[m->peer] += m->reserved;
        cnt[m->peer]++;
    }
    for (size_t i = 0; i < c->pbucket.cap; i++) {
        const fhc_move_t *m = c->pbucket.slot[i].val;
        if (m && fhc_map_get(&c->moves, m->peer, m->token) != m) {
            rc = bad(why, n, "pending bucket points to a finished move");
            goto out;
        }
    }
    for (uint32_t p = 0; p < c->p.nranks; p++) {
        const fhc_peer_t *P = c->peer[p];
        size_t r = P ? P->reserved : 0;
        uint32_t k = P ? P->npending : 0;
        if (r != res[p] || k != cnt[p]) {
            rc = bad(why, n, "peer %u: reserved %zu/%u, moves sum %zu/%u", p, r, k,
                     res[p], cnt[p]);
            goto out;
        }
    }
out:
    free(res);
    free(cnt);
    return rc;
}

int fhc_check_invariants(const fhc_t *c, char *why, size_t n)
{
    if (check_global(c, why, n) || check_regions(c, why, n) || check_moves(c, why, n))
        return -1;
    size_t fh_buckets = 0, tholds = 0, commit = 0, defneed = 0;
    uint64_t ev = 0, regs = 0;
    for (uint32_t p = 0; p < c->p.nranks; p++) {
        const fhc_peer_t *P = c->peer[p];
        if (!P)
            continue;
        if (check_peer_initiator(c, p, P, why, n) || check_peer_target(c, p, P, why, n))
            return -1;
        fh_buckets += P->held / c->p.bucket;
        for (fhc_link_t *l = P->h_list.head; l; l = l->next) {
            const fhc_fh_t *f = fhc_entry(l, const fhc_fh_t, h_link);
            fh_buckets -= f->revoked ? f->len / c->p.bucket : 0;   /* out of the map */
        }
        tholds += P->t_nheld;
        commit += P->t_budget > c->floor && P->t_budget > P->t_held ? P->t_budget : P->t_held;
        defneed += P->t_defneed;
        ev += P->st.evictions;
        regs += P->st.registrations;
    }
    /* Per-peer attribution never invents work: every eviction or
     * registration charged to a peer is one of the rank's. */
    if (ev > c->evictions || regs > c->registrations)
        return bad(why, n, "peers are charged %llu evictions / %llu registrations, the rank "
                   "made %llu / %llu", (unsigned long long)ev, (unsigned long long)regs,
                   (unsigned long long)c->evictions, (unsigned long long)c->registrations);
    if (fh_buckets != c->ibucket.n)
        return bad(why, n, "firehose bucket map has %zu entries, firehoses cover %zu",
                   c->ibucket.n, fh_buckets);
    if (tholds != c->holds.n)
        return bad(why, n, "holds map has %zu entries, peers' lists %zu", c->holds.n, tholds);
    size_t listed = 0;
    for (fhc_link_t *l = c->def.head; l; l = l->next)
        listed += fhc_entry(l, const fhc_deferred_t, link)->need;
    if (commit != c->commit || defneed != c->def_need || listed != c->def_need)
        return bad(why, n, "A1: commitments %zu (sum %zu), deferred needs %zu (peers "
                   "%zu, list %zu) disagree", c->commit, commit, c->def_need, defneed,
                   listed);
    return 0;
}
