/*
 * fhc_budget.c -- per-peer budgets (docs/firehose-cache.md, "Budgets").
 *
 * Static (FHC_BUDGET_STATIC): every peer may hold F = floor on us, for the
 * whole run; this file then only checks t_held + grant <= F.
 *
 * Adaptive, at the target (quantities per peer i: h_i = t_held, E_i =
 * t_budget the enforced budget, a_i = t_announced):
 *   commitment c_i = max(h_i, E_i) if E_i > floor, else h_i; A1: the sum of
 *   the c_i (c->commit) <= M, so every byte above a floor is backed by the
 *   pool and the holds sum to <= M;
 *   1 grant:   a served move with want > 0 raises E_i by max(want, E_i/2)
 *              at most, from M - commit (no raise while moves wait);
 *   2 reserve: the needs of deferred moves (c->def_need) are held back from
 *              grants, and later floor moves queue behind them;
 *   3 reclaim: a move of an initiator at its floor that does not fit in
 *              M - commit is deferred (FIFO), and the largest budgets above
 *              floor are lowered (RECLAIM) until the announced budgets leave
 *              room for it; never below the floor;
 *   4 decay:   a budget above floor whose holder showed no demand for
 *              FHC_DECAY_MOVES moves and holds less than half of it is
 *              lowered to max(floor, h_i), by RECLAIM too.
 * A lowered budget is announced (a_i) and enforced (E_i = a_i) only when the
 * initiator's answer arrives: its moves sent before it saw the RECLAIM
 * still count against the old budget, in order (one service path per pair).
 *
 * Adaptive, at the initiator (A3): our view of the budget comes from the
 * newest reply or RECLAIM (bver orders them); on a RECLAIM we release
 * unused firehoses at once down to the new budget, answer, and release busy
 * ones as they fall unused (fhc_budget_settle), sending no move that would
 * grow past the budget meanwhile (step() checks the view).
 */
#include "fhc_initiator.h"
#include "fhc_target.h"

#include <stdlib.h>
#include <string.h>

#define FHC_DECAY_MOVES 16u

static int adaptive(const fhc_t *c)
{
    return c->p.budget == FHC_BUDGET_ADAPTIVE;
}

/* ------------------------------------------------------- commitments */

static size_t commit_of(const fhc_t *c, const fhc_peer_t *P)
{
    if (P->t_budget > c->floor)
        return P->t_held > P->t_budget ? P->t_held : P->t_budget;
    return P->t_held;
}

void fhc_t_held_change(fhc_t *c, fhc_peer_t *P, size_t len, int add)
{
    c->commit -= commit_of(c, P);
    if (add)
        P->t_held += len;
    else
        P->t_held -= len;
    if (P->t_held <= P->t_budget)
        P->t_over = 0;
    c->commit += commit_of(c, P);
}

static void set_enforced(fhc_t *c, fhc_peer_t *P, size_t b)
{
    c->commit -= commit_of(c, P);
    P->t_budget = b;
    c->commit += commit_of(c, P);
}

size_t fhc_i_budget(const fhc_t *c, const fhc_peer_t *P)
{
    return adaptive(c) ? P->budget : c->F;
}

static size_t round_up(const fhc_t *c, size_t n)
{
    return (n + c->p.bucket - 1) / c->p.bucket * c->p.bucket;
}

void fhc_budget_refused(fhc_t *c, uint32_t peer, fhc_peer_t *P, const char *why)
{
    fhc_logf(c, "fhc: refused message from %s: %s", FHC_PEER_NAME(c, peer), why);
    c->refused++;
    P->st.refused++;
}

/* ---------------------------------------------------- target: reclaim */

static void send_reclaim(fhc_t *c, uint32_t peer, fhc_peer_t *P, size_t b)
{
    assert(b >= c->floor || (c->p.debug_bugs & FHC_BUG_NO_FLOOR));
    P->t_announced = b;
    fhc_reclaim_t m = { .id = ++P->t_bver, .budget = b };
    uint8_t buf[FHC_RECLAIM_LEN];
    size_t n = fhc_reclaim_encode(&m, buf, sizeof buf);
    assert(n == sizeof buf);
    P->st.reclaims++;
    c->env.send(c->env.arg, peer, 0, buf, n);
}

/* Where the commitments go once every RECLAIM sent is obeyed. */
static size_t future_commit(const fhc_t *c)
{
    size_t sum = 0;
    for (uint32_t j = 0; j < c->p.nranks; j++) {
        const fhc_peer_t *Q = c->peer[j];
        if (!Q)
            continue;
        if (Q->t_announced > c->floor)
            sum += Q->t_announced;
        else
            sum += Q->t_held < c->floor ? Q->t_held : c->floor;
    }
    return sum;
}

/* Rule 3: lower the largest announced budgets above floor until the
 * future commitments plus the deferred needs fit in M. */
static void reclaim_for_deferred(fhc_t *c)
{
    size_t fut = future_commit(c) + c->def_need;
    size_t lowest = c->p.debug_bugs & FHC_BUG_NO_FLOOR ? c->p.bucket : c->floor;
    while (fut > c->p.M) {
        uint32_t best = UINT32_MAX;
        size_t most = 0;
        for (uint32_t j = 0; j < c->p.nranks; j++) {
            const fhc_peer_t *Q = c->peer[j];
            if (Q && Q->t_announced > lowest && Q->t_announced - lowest > most &&
                !Q->t_ndef) {
                most = Q->t_announced - lowest;
                best = j;
            }
        }
        if (best == UINT32_MAX)
            return;         /* nothing above floor: the bytes come from releases */
        fhc_peer_t *Q = c->peer[best];
        size_t cut = fut - c->p.M;
        size_t nb = Q->t_announced - lowest > cut ? round_up(c, Q->t_announced - cut)
                                                  : lowest;
        if (nb < lowest)
            nb = lowest;
        if (nb >= Q->t_announced)
            return;
        size_t before = Q->t_announced > c->floor ? Q->t_announced
                      : Q->t_held < c->floor ? Q->t_held : c->floor;
        send_reclaim(c, best, Q, nb);
        size_t after = nb > c->floor ? nb : Q->t_held < c->floor ? Q->t_held : c->floor;
        if (after >= before)
            return;
        fut -= before - after;
    }
}

/* --------------------------------------------------- target: the rules */

int fhc_budget_admit(fhc_t *c, uint32_t peer, fhc_peer_t *P, const fhc_req_t *q,
                     size_t grant, fhc_deferred_t *d)
{
    if (c->p.debug_bugs & FHC_BUG_NO_F_CHECK)
        return 0;
    if (!adaptive(c))
        return P->t_held + grant > c->F ? FHC_ERR_LIMIT : 0;
    if (d) {                        /* a deferred move, retried in order */
        if (c->commit + grant <= c->p.M)
            return 0;
        d->need = grant;            /* what it needs now (regions changed) */
        return 1;
    }
    if (P->t_held + P->t_defneed + grant > P->t_budget)
        return FHC_ERR_LIMIT;
    if (P->t_budget > c->floor)
        return 0;                   /* within an excess the pool backs */
    if (!c->def.head && c->commit + grant <= c->p.M)
        return 0;
    /* Rule 3: defer, reserve, reclaim. */
    size_t n = sizeof(fhc_deferred_t) + q->data_len;
    fhc_deferred_t *nd = malloc(n);
    if (!nd)
        return FHC_ERR_NO_MEMORY;
    memset(nd, 0, sizeof *nd);
    nd->peer = peer;
    nd->need = grant;
    nd->req = *q;
    nd->req.nrel = 0;
    if (q->data_len) {
        memcpy(nd->bytes, q->data, q->data_len);
        nd->req.data = nd->bytes;
    }
    fhc_list_push_tail(&c->def, &nd->link);
    c->def_need += grant;
    P->t_defneed += grant;
    P->t_ndef++;
    P->st.deferred++;
    reclaim_for_deferred(c);
    return 1;
}

void fhc_budget_reply(fhc_t *c, uint32_t peer, fhc_peer_t *P, const fhc_req_t *q,
                      fhc_rep_t *rep)
{
    if (!adaptive(c))
        return;
    if (q->want)
        P->t_idle = 0;
    else if (P->t_idle < FHC_DECAY_MOVES)
        P->t_idle++;
    int settled = P->t_announced == P->t_budget;
    if (q->want && settled && !c->def.head) {
        /* Rule 1: raise by min(max(want, half the budget), free): the
         * budget grows geometrically while the demand lasts (a frame at a
         * time took ~15 evicting moves per pair to reach a working set of
         * 2F in fhsim, each evicted firehose a later miss). */
        size_t want = (size_t)q->want * c->p.bucket;
        size_t raise = round_up(c, want > P->t_budget / 2 ? want : P->t_budget / 2);
        size_t cur = commit_of(c, P);
        size_t nb = P->t_budget + raise;
        size_t newc = P->t_held > nb ? P->t_held : nb;
        if (!(c->p.debug_bugs & FHC_BUG_GRANT_PAST_M)) {
            size_t room = c->p.M - c->commit;   /* def_need is 0 here */
            if (newc > cur + room) {
                size_t over = newc - cur - room;
                nb = nb - over > P->t_budget ? (nb - over) / c->p.bucket * c->p.bucket
                                             : P->t_budget;
            }
        }
        if (nb > P->t_budget && nb <= c->p.M) {
            set_enforced(c, P, nb);
            P->t_announced = nb;
            P->t_bver++;
            P->st.grants++;
        }
    } else if (settled && P->t_idle >= FHC_DECAY_MOVES && P->t_budget > c->floor &&
               P->t_held < P->t_budget / 2) {
        /* Rule 4: decay; nothing is held above the new budget, the answer
         * comes at once. */
        size_t nb = round_up(c, P->t_held);
        send_reclaim(c, peer, P, nb > c->floor ? nb : c->floor);
        P->t_idle = 0;
    }
    rep->budget = P->t_announced;
    rep->bver = P->t_bver;
    rep->lowered = P->t_announced < P->t_budget;
}

void fhc_budget_on_answer(fhc_t *c, uint32_t peer, fhc_peer_t *P, uint64_t id)
{
    if (!adaptive(c) || !id || id > P->t_bver) {
        fhc_budget_refused(c, peer, P, "release-only request answers no reclaim");
        return;
    }
    if (id == P->t_bver && P->t_announced < P->t_budget) {
        set_enforced(c, P, P->t_announced);
        P->t_over = P->t_held > P->t_budget;
    }
    fhc_budget_retry(c);
}

void fhc_budget_retry(fhc_t *c)
{
    int again = 0;
    while (c->def.head) {
        fhc_deferred_t *d = fhc_entry(c->def.head, fhc_deferred_t, link);
        fhc_peer_t *P = c->peer[d->peer];
        /* Its own need stops being reserved while it is tried. */
        fhc_list_unlink(&c->def, &d->link);
        c->def_need -= d->need;
        P->t_defneed -= d->need;
        P->t_ndef--;
        if (fhc_target_serve(c, d->peer, P, &d->req, d)) {
            /* still waits: back at the head */
            fhc_list_push_head(&c->def, &d->link);
            c->def_need += d->need;
            P->t_defneed += d->need;
            P->t_ndef++;
            again = 1;
            break;
        }
        free(d);
    }
    if (again)
        reclaim_for_deferred(c);
}

/* ------------------------------------------------------------- death */

void fhc_peer_dead(fhc_t *c, uint32_t peer)
{
    if (peer >= c->p.nranks || peer == c->p.rank || !c->peer[peer])
        return;
    fhc_peer_t *P = c->peer[peer];
    for (fhc_link_t *l = c->def.head; l;) {
        fhc_deferred_t *d = fhc_entry(l, fhc_deferred_t, link);
        l = l->next;
        if (d->peer != peer)
            continue;
        fhc_list_unlink(&c->def, &d->link);
        c->def_need -= d->need;
        free(d);
    }
    P->t_ndef = 0;
    P->t_defneed = 0;
    while (P->t_list.head)
        fhc_hold_remove(c, P, fhc_entry(P->t_list.head, fhc_hold_t, link));
    fhc_target_forget_revokes(c, P);
    fhc_trim_victims(c);
    P->t_announced = c->floor;
    P->t_over = 0;
    P->t_idle = 0;
    set_enforced(c, P, c->floor);
    assert(P->t_held == 0 && P->t_nheld == 0 && !P->rv_list.head);
    fhc_budget_retry(c);
}

/* ------------------------------------------------------ initiator: A3 */

/* Releases unused firehoses while we hold more than our budget: one
 * release-only request per FHC_MAX_PIECES (force: at least one, the
 * RECLAIM's first answer).  Done when held + reserved fit again. */
void fhc_budget_settle(fhc_t *c, uint32_t peer, fhc_peer_t *P, int force)
{
    if (!P->rc_id)
        return;
    for (;;) {
        fhc_req_t q = { .token = P->rc_id };
        while (P->held + P->reserved > P->budget && P->u_list.head &&
               q.nrel < FHC_MAX_PIECES) {
            fhc_fh_t *v = fhc_entry(P->u_list.head, fhc_fh_t, u_link);
            q.rel[q.nrel++] = v->base;
            fhc_fh_drop(c, P, v);
        }
        if (c->p.debug_bugs & FHC_BUG_RECLAIM_BUSY) {
            /* Deliberate bug: give back firehoses an RDMA still uses. */
            for (fhc_link_t *l = P->h_list.head; l && q.nrel < FHC_MAX_PIECES; l = l->next) {
                const fhc_fh_t *f = fhc_entry(l, const fhc_fh_t, h_link);
                if (f->inuse && !f->revoked)
                    q.rel[q.nrel++] = f->base;
            }
        }
        if (q.nrel || force) {
            uint8_t buf[FHC_REQ_HDR + 8 * FHC_MAX_PIECES];
            size_t n = fhc_req_encode(&q, buf, sizeof buf);
            assert(n);
            c->env.send(c->env.arg, peer, 0, buf, n);
            force = 0;
        }
        if (P->held + P->reserved <= P->budget) {
            P->rc_id = 0;           /* obeyed */
            return;
        }
        if (q.nrel < FHC_MAX_PIECES || (c->p.debug_bugs & FHC_BUG_RECLAIM_BUSY))
            return;                 /* the rest is busy: on its release */
    }
}

void fhc_initiator_on_reclaim(fhc_t *c, uint32_t peer, const void *msg, size_t len)
{
    fhc_reclaim_t r;
    char why[96];
    fhc_peer_t *P = fhc_peer_get(c, peer);
    if (!P)
        return;
    if (fhc_reclaim_decode(msg, len, &r, why, sizeof why) < 0 || !adaptive(c) ||
        r.budget % c->p.bucket || r.budget < c->F || r.budget > c->p.M) {
        fhc_logf(c, "fhc: bad reclaim from %s dropped: %s", FHC_PEER_NAME(c, peer),
                 !adaptive(c) ? "budgets are static" : "budget out of range");
        c->refused++;
        P->st.refused++;
        return;
    }
    if (r.id <= P->bver)
        return;                     /* a newer budget arrived in a reply */
    P->budget = (size_t)r.budget;
    P->bver = r.id;
    P->rc_id = r.id;
    P->st.reclaimed++;
    fhc_budget_settle(c, peer, P, 1);
}

/* A reply's budget (checked), if it is newer than what we know. */
void fhc_budget_from_reply(fhc_t *c, uint32_t peer, fhc_peer_t *P, const fhc_rep_t *rep)
{
    if (!adaptive(c) || !rep->bver || rep->bver <= P->bver)
        return;
    if (rep->budget % c->p.bucket || rep->budget < c->F || rep->budget > c->p.M) {
        fhc_logf(c, "fhc: %s announced a budget out of range; ignored", FHC_PEER_NAME(c, peer));
        return;
    }
    /* A lowering (decay or reclaim; perhaps after a raise we have not seen
     * yet): answer it like its RECLAIM. */
    int lower = rep->lowered || rep->budget < P->budget;
    P->budget = (size_t)rep->budget;
    P->bver = rep->bver;
    if (lower) {
        /* The reply overtook its RECLAIM (same version): obey it now; the
         * RECLAIM, when it comes, is then old news. */
        P->rc_id = rep->bver;
        P->st.reclaimed++;
        fhc_budget_settle(c, peer, P, 1);
    } else if (P->rc_id && P->held + P->reserved <= P->budget) {
        P->rc_id = 0;               /* a raise after the reclaim: obeyed */
    }
}
