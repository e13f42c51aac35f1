/*
 * fhc_initiator_reply.c -- what the target sends the initiator: the reply
 * to a move (checked grant by grant, installed, its waiters woken; an
 * FHC_ERR_AGAIN makes them step again) and REVOKEs (a firehose leaves the
 * bucket map at once, is dropped and acked once no op uses it).
 */
#include "fhc_initiator.h"

#include <assert.h>
#include <stdlib.h>


/* Did the target revoke this granted region while the move was pending? */
static int revoked_in_move(const fhc_move_t *m, const fhc_rep_region_t *g)
{
    if (m->rv_all)
        return 1;
    for (unsigned i = 0; i < m->nrv; i++)
        if (m->rv_base[i] == g->base && m->rv_end[i] == g->base + g->len)
            return 1;
    return 0;
}

/* The next op of a woken move's waiter list *w, off the list; NULL at
 * its end. */
static fhc_op_t *w_pop(fhc_op_t **w)
{
    fhc_op_t *op = *w;
    if (op) {
        *w = op->priv.next;
        op->priv.next = NULL;
        op->priv.state = FHC_OP_IDLE;
    }
    return op;
}

/* A woken op steps again; it hears now if that hit or failed (else it
 * waits again and hears later). */
static void restep(fhc_t *c, fhc_op_t *op)
{
    int rc = fhc_step(c, op, STEP_WOKEN);
    if (rc == FHC_HIT)
        op->ready(op, FHC_HIT);
    else if (rc < 0)
        op->ready(op, rc);
}

/* The target answered FHC_ERR_AGAIN: it waits for our ack of a REVOKE in
 * the span.  Every waiter lets go of its references (so the revoked firehose
 * can be dropped and acked) and steps again; the owner's put data, if any,
 * rides in the new move. */
static void retry_waiters(fhc_t *c, fhc_peer_t *P, fhc_move_t *m)
{
    P->st.retries++;
    uint32_t m_peer = m->peer;
    fhc_op_t *w = m->w_head;
    free(m);
    for (fhc_op_t *op = w; op; op = op->priv.next)
        fhc_op_drop_refs(c, P, op);
    for (fhc_op_t *op; (op = w_pop(&w));)
        restep(c, op);
    fhc_budget_settle(c, m_peer, P, 0);
    if (P->q_head)
        fhc_pump(c, P);
}

void fhc_initiator_on_revoke(fhc_t *c, uint32_t peer, const void *msg, size_t len)
{
    fhc_revoke_t v;
    char why[96];
    if (fhc_revoke_decode(msg, len, &v, why, sizeof why) < 0 ||
        v.kind != FHC_WIRE_REVOKE) {
        fhc_logf(c, "fhc: malformed revoke from %s dropped: %s", FHC_PEER_NAME(c, peer), why);
        return;
    }
    fhc_peer_t *P = fhc_peer_get(c, peer);
    if (!P || v.lo % c->p.bucket || v.hi % c->p.bucket || v.hi - v.lo > c->R ||
        v.hi > UINTPTR_MAX) {
        /* Not a region of ours to drop; ack so the target does not wait. */
        fhc_logf(c, "fhc: revoke from %s names no region (%#llx..%#llx)", FHC_PEER_NAME(c, peer),
                 (unsigned long long)v.lo, (unsigned long long)v.hi);
        fhc_send_revoke_ack(c, peer, v.id);
        return;
    }
    unsigned waiting = 0;
    for (uintptr_t a = (uintptr_t)v.lo; a < (uintptr_t)v.hi;) {
        fhc_fh_t *f = fhc_fh_at(c, peer, a);
        if (!f) {
            fhc_move_t *m = fhc_map_get(&c->pbucket, peer, fhc_bno(c, a));
            if (m && !m->rv_all) {
                unsigned i = 0;
                while (i < m->nrv && !(m->rv_base[i] == v.lo && m->rv_end[i] == v.hi))
                    i++;
                if (i == m->nrv && m->nrv == FHC_MAX_PIECES)
                    m->rv_all = 1;
                else if (i == m->nrv) {
                    m->rv_base[m->nrv] = (uintptr_t)v.lo;
                    m->rv_end[m->nrv++] = (uintptr_t)v.hi;
                }
            }
            a += c->p.bucket;
            continue;
        }
        uintptr_t next = f->base + f->len;
        P->st.revoked++;
        if (c->p.debug_bugs & FHC_BUG_IGNORE_REVOKE) {
            a = next;
            continue;
        }
        if (f->inuse == 0 || (c->p.debug_bugs & FHC_BUG_EARLY_ACK)) {
            if (f->inuse) {        /* deliberate bug: forget it while in use */
                for (uintptr_t b = f->base; b < f->base + f->len; b += c->p.bucket)
                    fhc_map_del(&c->ibucket, peer, fhc_bno(c, b));
                f->revoked = 1;
                f->rv_id = 0;
                a = next;
                continue;
            }
            fhc_fh_drop(c, P, f);
        } else {
            for (uintptr_t b = f->base; b < f->base + f->len; b += c->p.bucket)
                fhc_map_del(&c->ibucket, peer, fhc_bno(c, b));
            f->revoked = 1;
            f->rv_id = v.id;
            waiting++;
        }
        a = next;
    }
    if (!waiting)
        fhc_send_revoke_ack(c, peer, v.id);
}

/* Checks a granted region against the move that asked for it. */
static int grant_ok(const fhc_t *c, const fhc_move_t *m,
                    const fhc_rep_region_t *g, size_t *granted)
{
    uintptr_t frame = fhc_frame_of(c, m->lo);
    if (g->base % c->p.bucket || g->len % c->p.bucket || g->base < frame ||
        g->base + g->len > frame + c->R || g->base >= m->hi ||
        g->base + g->len <= m->lo)
        return 0;
    for (uintptr_t a = (uintptr_t)g->base; a < g->base + g->len; a += c->p.bucket)
        if (fhc_fh_at(c, m->peer, a))
            return 0;
    if (!(c->p.debug_bugs & (FHC_BUG_NO_F_CHECK | FHC_BUG_STALE_INSTALL)) &&
        *granted + g->len > m->reserved)
        return 0;
    *granted += g->len;
    return 1;
}

static void on_rep(fhc_t *c, uint32_t peer, const fhc_rep_t *r);

void fhc_initiator_on_reply(fhc_t *c, uint32_t peer, const void *msg, size_t len)
{
    fhc_rep_t rep;
    char why[96];
    if (fhc_rep_decode(msg, len, &rep, why, sizeof why) < 0) {
        fhc_logf(c, "fhc: malformed reply from %s dropped: %s", FHC_PEER_NAME(c, peer), why);
        return;
    }
    on_rep(c, peer, &rep);
}

unsigned fhc_peer_lost(fhc_t *c, uint32_t peer, int status)
{
    assert(status < 0 && status != FHC_ERR_AGAIN);
    fhc_peer_t *P = peer < c->p.nranks ? c->peer[peer] : NULL;
    if (P == NULL || P->npending == 0)
        return 0;
    /* The moves in flight now, first: their waiters step again, and a move
     * that sends (to the lost peer: it fails when sent) is not one of them. */
    uint64_t *tok = malloc(P->npending * sizeof *tok);
    unsigned n = 0;
    if (tok == NULL)
        return 0;
    for (size_t i = 0; i < c->moves.cap && n < P->npending; i++) {
        const fhc_move_t *m = c->moves.slot[i].val;
        if (m != NULL && m->peer == peer)
            tok[n++] = m->token;
    }
    for (unsigned i = 0; i < n; i++) {
        fhc_rep_t rep = {.token = tok[i], .status = status, .nreg = 0};
        on_rep(c, peer, &rep);
    }
    free(tok);
    return n;
}

static void on_rep(fhc_t *c, uint32_t peer, const fhc_rep_t *r)
{
    fhc_rep_t rep = *r;
    fhc_move_t *m = fhc_map_get(&c->moves, peer, rep.token);
    fhc_peer_t *P = c->peer[peer];
    if (!m || !P) {
        fhc_logf(c, "fhc: reply from %s for unknown move %llu dropped",
                 FHC_PEER_NAME(c, peer), (unsigned long long)rep.token);
        return;
    }
    fhc_map_del(&c->moves, peer, rep.token);
    for (uintptr_t a = m->lo; a < m->hi; a += c->p.bucket)
        if (fhc_map_get(&c->pbucket, peer, fhc_bno(c, a)) == m)
            fhc_map_del(&c->pbucket, peer, fhc_bno(c, a));
    fhc_budget_from_reply(c, peer, P, &rep);  /* this move still reserved */
    P->reserved -= m->reserved;
    P->npending--;

    int status = rep.status;
    if (status == FHC_ERR_AGAIN) {
        retry_waiters(c, P, m);
        return;
    }
    if (status < 0)
        P->st.errors++;
    size_t granted = 0;
    for (unsigned i = 0; i < rep.nreg; i++) {
        int install = rep.reg[i].granted ||
                      (c->p.debug_bugs & FHC_BUG_STALE_INSTALL);
        if (!install)
            continue;
        if (revoked_in_move(m, &rep.reg[i]))
            continue;       /* granted before its invalidation; acked already */
        if (!grant_ok(c, m, &rep.reg[i], &granted)) {
            if (rep.reg[i].granted)
                fhc_logf(c, "fhc: %s granted a region that does not fit "
                         "the move; ignored", FHC_PEER_NAME(c, peer));
            continue;
        }
        if (fhc_fh_install(c, P, peer, &rep.reg[i]) < 0)
            fhc_logf(c, "fhc: out of memory installing a firehose on %s", FHC_PEER_NAME(c, peer));
        else if (m->merge && rep.nreg > 1)
            fhc_fh_at(c, peer, (uintptr_t)rep.reg[i].base)->merge_refused = 1;
    }

    /* Wake the waiters: first all take their references (so one waiter's
     * victims cannot be another's firehoses), then each steps again. */
    fhc_op_t *w = m->w_head;
    for (fhc_op_t *op = w; op; op = op->priv.next)
        if (!(op == m->owner && (m->put || status < 0)))
            fhc_grab_refs(c, P, op);
    for (fhc_op_t *op; (op = w_pop(&w));) {
        if (op == m->owner && status < 0) {
            fhc_op_drop_refs(c, P, op);
            op->ready(op, status);
        } else if (op == m->owner && m->put) {
            op->ready(op, FHC_DONE_IN_MOVE);
        } else {
            restep(c, op);
        }
    }
    free(m);
    fhc_budget_settle(c, peer, P, 0);
    if (P->q_head)
        fhc_pump(c, P);
}
