/*
 * fhc_initiator_step.c -- an operation's life on the initiator: step()
 * (hit, wait for a move, send one, or queue for budget), the move it sends
 * (absorb: merging the op's idle firehoses into one region), the budget
 * queue's pump and the API calls fhc_acquire / fhc_release.  The algorithm
 * is described at the top of fhc_initiator.c.
 */
#include "fhc_initiator.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- move */

/* Absorb: the op's firehoses that nothing else uses (inuse == 1: only op)
 * are dropped, so the move about to be sent for the op's span asks for
 * their buckets again and the target (which deregisters victims inside a
 * span, fhc_target_move.c) registers the span as one region where it can: a
 * frame grown piece by piece (64 KiB, then 128 KiB, ...) would otherwise
 * stay cut into one region per growth step, one RDMA each, for as long as
 * it is resident.  The dropped firehoses' releases ride in that move
 * (rel[], at most one per bucket of the frame, and with the victims
 * send_move adds at most R/B = FHC_MAX_PIECES in all: absorbed firehoses
 * lie in the frame, victims outside it, and both count whole buckets).
 * [*lo, *hi) grows to cover the dropped firehoses (all in op's frame).
 * Returns the bytes dropped. */
static size_t absorb(fhc_t *c, fhc_peer_t *P, fhc_op_t *op, uint64_t *rel,
                     unsigned *nrel, uintptr_t *lo, uintptr_t *hi)
{
    size_t bytes = 0;
    unsigned keep = 0;
    for (unsigned i = 0; i < op->priv.nref; i++) {
        fhc_fh_t *f = op->priv.ref[i];
        if (f->inuse != 1 || f->revoked) {
            op->priv.ref[keep++] = f;
            continue;
        }
        assert(*nrel < FHC_MAX_PIECES);
        f->inuse = 0;
        fhc_u_push(P, f);
        rel[(*nrel)++] = f->base;
        bytes += f->len;
        if (f->base < *lo)          /* the span grows to the whole firehose */
            *lo = f->base;
        if (f->base + f->len > *hi)
            *hi = f->base + f->len;
        fhc_fh_drop(c, P, f);
    }
    op->priv.nref = keep;
    return bytes;
}

/* Re-aim (FH_SEGMENT=everything): op's bytes lie outside what one of its
 * firehoses reaches -- the target registered another run of the memory
 * in that bucket (two mappings with a hole between them: a region
 * registers one run, firehose_env.c remote_run) -- and op alone uses them
 * all: the move absorbs them (their releases ride in it) and names op's
 * first byte, so the target, finding the region nobody holds any more,
 * registers the run that holds it instead (fhc_target_move.c "Re-aim").
 * Once per op: if the region is held elsewhere, or the byte lies in no
 * run, the op is refused as before.  Not for a write into a read-only
 * run that holds the bytes (registering again cannot help). */
static int reaimable(const fhc_op_t *op)
{
    if (op->priv.reaimed || op->priv.nref == 0)
        return 0;
    const uintptr_t a = op->raddr, e = op->raddr + op->len;
    int outside = 0;
    for (unsigned i = 0; i < op->priv.nref; i++) {
        const fhc_fh_t *f = op->priv.ref[i];
        if (f->inuse != 1 || f->revoked)
            return 0;
        if (!(f->reach & FHC_REACH_PART))
            continue;
        const uintptr_t lo = a > f->base ? a : f->base;
        const uintptr_t hi = e < f->base + f->len ? e : f->base + f->len;
        outside |= lo < f->base + fhc_reach_lo(f->reach) ||
                   hi > f->base + fhc_reach_hi(f->reach, f->len);
    }
    return outside;
}

/* op is covered by the firehoses it holds: its pieces, and it runs
 * (FHC_HIT), or FHC_ERR_OUT_OF_SEGMENT with its references dropped -- or,
 * when `reaim` is given and the op is reaimable, FHC_PENDING with them
 * kept and *reaim set: the caller sends the move that aims them again. */
static int hit_now(fhc_t *c, fhc_peer_t *P, fhc_op_t *op, int *reaim)
{
    if (fhc_fill_pieces(c, op) < 0) {
        op->npieces = 0;
        if (reaim != NULL && reaimable(op)) {
            *reaim = 1;
            return FHC_PENDING;
        }
        fhc_op_drop_refs(c, P, op);
        return FHC_ERR_OUT_OF_SEGMENT;
    }
    op->priv.state = FHC_OP_ACTIVE;
    op->priv.prio = 0;
    return FHC_HIT;
}

/* Non-zero iff every firehose op holds is used by op alone (absorb would
 * drop them all) and one of them at least is new since the target last
 * refused to merge them: asked again, a merge the target refused (another
 * peer holds one of the regions) costs a round trip per op for nothing --
 * in fhsim's neighbors pattern 94 % of the merge moves, one in four moves. */
static int all_absorbable(const fhc_op_t *op)
{
    int fresh = 0;
    for (unsigned i = 0; i < op->priv.nref; i++) {
        if (op->priv.ref[i]->inuse != 1 || op->priv.ref[i]->revoked)
            return 0;
        fresh |= !op->priv.ref[i]->merge_refused;
    }
    return fresh;
}

/* Sends the move for [mlo, mhi) (the op's span when it absorbs firehoses:
 * see absorb), op waiting on it.  need: what the target may grant, R minus
 * what we hold in the frame. */
static int send_move(fhc_t *c, fhc_peer_t *P, fhc_op_t *op, uintptr_t mlo,
                     uintptr_t mhi, size_t need, int put, int reaim)
{
    uint32_t peer = op->peer;
    fhc_move_t *m = calloc(1, sizeof *m);
    if (!m || fhc_map_reserve(&c->pbucket, c->R / c->p.bucket) < 0 ||
        fhc_map_reserve(&c->moves, 1) < 0) {
        free(m);
        return FHC_ERR_NO_MEMORY;
    }
    fhc_req_t q = { .token = ++P->next_token, .lo = mlo, .hi = mhi };
    /* Absorbing leaves held + need as they were: the caller's budget check
     * stands.  Nothing fails after this point (the releases must go out). */
    uintptr_t alo = fhc_span_lo(c, op), ahi = fhc_span_hi(c, op);
    if (!op->priv.absorbed || reaim)
        need += absorb(c, P, op, q.rel, &q.nrel, &alo, &ahi);
    if (q.nrel) {
        q.lo = mlo = alo;
        q.hi = mhi = ahi;
        if (reaim)
            P->st.reaims++;
        else
            P->st.merges++;
        m->merge = !reaim;
        op->priv.absorbed = 1;      /* if the target keeps them apart, so be it */
    }
    int nocheck = (c->p.debug_bugs & FHC_BUG_NO_F_CHECK) != 0;
    uintptr_t frame = fhc_frame_of(c, mlo);
    fhc_fh_t *v = fhc_entry(P->u_list.head, fhc_fh_t, u_link);
    size_t budget = fhc_i_budget(c, P);
    /* Adaptive budgets: how far past the budget we would grow instead of
     * evicting (a demand signal for the target, rule 1). */
    if (c->p.budget == FHC_BUDGET_ADAPTIVE && !P->rc_id &&
        P->held + P->reserved + need > budget && P->u_list.head) {
        size_t over = (P->held + P->reserved + need - budget) / c->p.bucket;
        q.want = over < FHC_WIRE_MAX_WANT ? (uint32_t)over : FHC_WIRE_MAX_WANT;
    }
    while (!nocheck && P->held + P->reserved + need > budget) {
        while (v && fhc_frame_of(c, v->base) == frame)
            v = fhc_entry(v->u_link.next, fhc_fh_t, u_link);
        assert(v && q.nrel < FHC_MAX_PIECES);
        fhc_fh_t *next = fhc_entry(v->u_link.next, fhc_fh_t, u_link);
        q.rel[q.nrel++] = v->base;
        fhc_fh_drop(c, P, v);
        v = next;
    }
    if (c->p.debug_bugs & FHC_BUG_FORGET_RELEASE)
        q.nrel = 0;
    m->peer = peer;
    m->token = q.token;
    m->lo = mlo;
    m->hi = mhi;
    m->reserved = need;
    m->owner = op;
    m->put = put;
    P->reserved += need;
    P->npending++;
    for (uintptr_t a = mlo; a < mhi; a += c->p.bucket)
        if (!fhc_fh_at(c, peer, a))
            fhc_map_put(&c->pbucket, peer, fhc_bno(c, a), m);
    fhc_map_put(&c->moves, peer, m->token, m);
    fhc_wait_on(m, op);
    q.data_dst = op->raddr > mlo ? op->raddr : mlo;
    if (put) {
        q.data_dst = op->raddr;
        q.data_len = (uint32_t)op->len;
        q.data = op->put_data;
        fhc_op_drop_refs(c, P, op);    /* after choosing victims: not among them */
        P->st.put_in_move++;
    }
    uint8_t stackbuf[1024];
    size_t n = fhc_req_size(&q);
    uint8_t *buf = n <= sizeof stackbuf ? stackbuf : malloc(n);
    if (buf && fhc_req_encode(&q, buf, n) == n)
        c->env.send(c->env.arg, peer, 0, buf, n);
    if (buf != stackbuf)
        free(buf);
    P->st.moves++;
    return FHC_PENDING;
}

int fhc_step(fhc_t *c, fhc_op_t *op, enum step_mode mode)
{
    fhc_peer_t *P = c->peer[op->peer];
    int head = mode == STEP_HEAD || op->priv.prio;
    if (mode == STEP_NEW && P->q_head)
        return fhc_to_budget_queue(c, P, op, 0);

    fhc_move_t *wait = NULL;
    uintptr_t mlo = 0, mhi = 0;
    for (uintptr_t a = fhc_span_lo(c, op); a < fhc_span_hi(c, op);) {
        fhc_fh_t *f = fhc_fh_at(c, op->peer, a);
        if (f) {
            fhc_op_take(P, op, f);
            a = f->base + f->len;
            continue;
        }
        fhc_move_t *m = fhc_map_get(&c->pbucket, op->peer, fhc_bno(c, a));
        if (m) {
            if (!wait)
                wait = m;
        } else {
            if (!mhi)
                mlo = a;
            mhi = a + c->p.bucket;
        }
        a += c->p.bucket;
    }
    if (wait) {
        fhc_wait_on(wait, op);
        P->st.coalesced++;
        return FHC_PENDING;
    }
    /* A hit on several firehoses that only this op uses: one move merges
     * them into one region (absorb), once; otherwise hit as they are. */
    int merge = !mhi && op->priv.nref > 1 && !op->priv.absorbed && all_absorbable(op) &&
                !(!head && P->q_head);
    int reaim = 0;                      /* set: its references kept for absorb */
    if (!mhi && !merge) {
        int rc = hit_now(c, P, op, &reaim);
        if (!reaim)
            return rc;
    }
    if (!head && P->q_head)
        return fhc_to_budget_queue(c, P, op, 0);
    if (merge || reaim) {
        mlo = fhc_span_lo(c, op);
        mhi = fhc_span_hi(c, op);
    }
    /* The target can grant at most the frame minus what we hold in it. */
    uintptr_t frame = fhc_frame_of(c, op->raddr);
    size_t frame_held = 0, frame_unused = 0;
    for (uintptr_t a = frame; a < frame + c->R;) {
        fhc_fh_t *f = fhc_fh_at(c, op->peer, a);
        if (!f) {
            a += c->p.bucket;
            continue;
        }
        frame_held += f->len;
        frame_unused += f->inuse ? 0 : f->len;
        a = f->base + f->len;
    }
    assert(merge || reaim || frame_held < c->R);
    size_t need = c->R - frame_held;
    /* Victims in the same frame would raise need as much as they free. */
    if (!(c->p.debug_bugs & FHC_BUG_NO_F_CHECK) &&
        P->held + P->reserved + need > fhc_i_budget(c, P) + P->unused_bytes - frame_unused) {
        if (merge)          /* no budget to merge now: hit as they are */
            return hit_now(c, P, op, NULL);
        return fhc_to_budget_queue(c, P, op, head);
    }
    int put = op->put_data && op->len <= c->p.put_in_move;
    op->priv.reaimed |= reaim;
    int rc = send_move(c, P, op, mlo, mhi, need, put, reaim);
    if (rc < 0)
        fhc_op_drop_refs(c, P, op);
    return rc;
}

/* Serves the budget queue from its head until the head must wait again. */
void fhc_pump(fhc_t *c, fhc_peer_t *P)
{
    fhc_op_t *op;
    while ((op = fhc_q_pop(P))) {
        op->priv.prio = 1;
        int rc = fhc_step(c, op, STEP_HEAD);
        if (rc == FHC_HIT) {
            op->ready(op, FHC_HIT);
        } else if (rc < 0) {
            op->priv.state = FHC_OP_IDLE;
            op->ready(op, rc);
        } else if (op->priv.state == FHC_OP_WAIT_BUDGET) {
            break;
        }
    }
}

/* ------------------------------------------------------------- the API */

/* An op over buckets we hold firehoses on and buckets we do not (missing,
 * or pending in a move) is cut after its first run of one kind: a resident
 * run hits now instead of waiting for the move of the cold one, which the
 * caller asks for as the next op (its put-in-move data is its own bytes).
 * The resident run does not merge its firehoses (absorb): that move would
 * make it wait as well; a later op over the whole chunk merges them.
 * Returns non-zero iff op->len was shortened. */
static int split_resident(const fhc_t *c, fhc_op_t *op)
{
    uintptr_t a = fhc_span_lo(c, op), hi = fhc_span_hi(c, op);
    int resident = fhc_fh_at(c, op->peer, a) != NULL;
    while (a < hi && (fhc_fh_at(c, op->peer, a) != NULL) == resident)
        a += c->p.bucket;
    if (a >= hi)
        return 0;
    assert(a > op->raddr && a < op->raddr + op->len);
    op->len = a - op->raddr;
    op->priv.absorbed = resident;
    return 1;
}


int fhc_acquire(fhc_t *c, fhc_op_t *op)
{
    if (!op || !op->ready || op->len == 0)
        return FHC_ERR_INVALID;
    if (op->peer >= c->p.nranks || op->peer == c->p.rank)
        return FHC_ERR_RANK;
    if (op->raddr > UINTPTR_MAX - op->len - c->p.bucket)
        return FHC_ERR_OVERFLOW;
    if (fhc_chunk_len(c, op->raddr, op->len) != op->len)
        return FHC_ERR_INVALID;
    fhc_peer_t *P = fhc_peer_get(c, op->peer);
    if (!P)
        return FHC_ERR_NO_MEMORY;
    memset(&op->priv, 0, sizeof op->priv);
    op->npieces = 0;
    if (op->may_split && split_resident(c, op))
        P->st.splits++;
    int rc = fhc_step(c, op, STEP_NEW);
    if (rc == FHC_HIT)
        P->st.hits++;
    else if (rc == FHC_PENDING)
        P->st.misses++;
    return rc;
}

void fhc_release(fhc_t *c, fhc_op_t *op)
{
    if (op->priv.state != FHC_OP_ACTIVE)
        return;
    fhc_peer_t *P = c->peer[op->peer];
    fhc_op_drop_refs(c, P, op);
    op->priv.state = FHC_OP_IDLE;
    fhc_budget_settle(c, op->peer, P, 0);   /* A3: busy ones go on release */
    if (P->q_head)
        fhc_pump(c, P);
}

int fhc_budget_waiting(const fhc_t *c, uint32_t peer)
{
    const fhc_peer_t *P = peer < c->p.nranks ? c->peer[peer] : NULL;
    /* A RECLAIM not yet obeyed also needs our idle references back. */
    return P && (P->q_head != NULL || (P->rc_id && P->held + P->reserved > P->budget));
}

int fhc_op_revoked(const fhc_t *c, const fhc_op_t *op)
{
    (void)c;
    if (op->priv.state != FHC_OP_ACTIVE)
        return 0;
    for (unsigned i = 0; i < op->priv.nref; i++)
        if (op->priv.ref[i]->revoked)
            return 1;
    return 0;
}
