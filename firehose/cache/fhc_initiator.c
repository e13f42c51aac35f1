/*
 * fhc_initiator.c -- our firehoses on peers' memory: lookup, the move,
 * pending coalescing, the per-peer budget queue.
 *
 * An operation (one chunk, inside one frame of the target) goes through
 * step():
 *   - every bucket already covered by a firehose: take an in-use reference
 *     (fh->inuse; an entry with inuse == 0 sits in the peer's unused FIFO);
 *   - a bucket PENDING in a move someone sent: wait for that move's reply,
 *     keeping the references (a move always gets a reply, so this cannot
 *     deadlock), then step again;
 *   - buckets missing: send one move for them, releasing victims from the
 *     unused FIFO (oldest first, skipping the chunk's own frame) so that
 *     held + reserved + need <= F, where need = R minus what we hold in the
 *     chunk's frame (the most the target can grant: its regions are
 *     frame-contained and never overlap ours);
 *     if even all unused firehoses are not enough, drop every reference and
 *     join the peer's budget queue (no hold-and-wait).
 * The budget queue is FIFO and gates the peer: while it is non-empty, new
 * ops join it even if they would hit, so firehoses kept busy by a stream of
 * hits cannot starve the head.  Everything in use belongs to RDMA in flight
 * or to ops waiting for replies; both finish, so the head always gets R <= F
 * bytes eventually.
 *
 * Revocation (fhc_invalidate at the target): a REVOKE takes the firehose
 * out of the bucket map at once (no new hit can use it); it is dropped and
 * acknowledged as soon as no op uses it, i.e. after the RDMA in flight
 * through it completed.  A move answered FHC_ERR_AGAIN (the target waits
 * for our ack first) drops its ops' references and steps them again.
 *
 * A reply installs only the regions it GRANTED.  A region it lists as
 * "already held" may be one we released in a move sent after the target
 * processed this one: installing it would leave us a key to memory the
 * target is about to deregister.
 */
#include "fhc_internal.h"
#include "fhc_wire.h"

#include <stdlib.h>
#include <string.h>

enum step_mode {
    STEP_NEW,       /* from fhc_acquire: the budget queue gates it */
    STEP_WOKEN,     /* a move it waited for was answered */
    STEP_HEAD,      /* at the head of the budget queue */
};

/* ---------------------------------------------------------- unused FIFO */

static void u_push(fhc_peer_t *P, fhc_fh_t *f)
{
    assert(!f->in_unused && f->inuse == 0);
    f->in_unused = 1;
    fhc_list_push_tail(&P->u_list, &f->u_link);
    P->unused_bytes += f->len;
}

static void u_remove(fhc_peer_t *P, fhc_fh_t *f)
{
    assert(f->in_unused);
    fhc_list_unlink(&P->u_list, &f->u_link);
    f->in_unused = 0;
    P->unused_bytes -= f->len;
}

/* ----------------------------------------------------- firehose entries */

static fhc_fh_t *fh_at(const fhc_t *c, uint32_t peer, uintptr_t a)
{
    return fhc_map_get(&c->ibucket, peer, fhc_bno(c, a));
}

static int fh_install(fhc_t *c, fhc_peer_t *P, uint32_t peer,
                      const fhc_rep_region_t *g)
{
    fhc_fh_t *f = calloc(1, sizeof *f);
    if (!f || fhc_map_reserve(&c->ibucket, g->len / c->p.bucket) < 0) {
        free(f);
        return FHC_ERR_NO_MEMORY;
    }
    f->peer = peer;
    f->base = (uintptr_t)g->base;
    f->len = (size_t)g->len;
    f->key[0] = g->key[0];
    f->key[1] = g->key[1];
    f->reach = g->reach;
    for (uintptr_t a = f->base; a < f->base + f->len; a += c->p.bucket)
        fhc_map_put(&c->ibucket, peer, fhc_bno(c, a), f);
    fhc_list_push_head(&P->h_list, &f->h_link);
    P->held += f->len;
    P->nheld++;
    u_push(P, f);
    return 0;
}

/* A victim: forget it (the move that carries its release is being built). */
static void fh_drop(fhc_t *c, fhc_peer_t *P, fhc_fh_t *f)
{
    assert(f->inuse == 0);
    u_remove(P, f);
    for (uintptr_t a = f->base; a < f->base + f->len; a += c->p.bucket)
        fhc_map_del(&c->ibucket, f->peer, fhc_bno(c, a));
    fhc_list_unlink(&P->h_list, &f->h_link);
    P->held -= f->len;
    P->nheld--;
    free(f);
}

/* ------------------------------------------------------ op references */

static void op_take(fhc_peer_t *P, fhc_op_t *op, fhc_fh_t *f)
{
    for (unsigned i = 0; i < op->priv.nref; i++)
        if (op->priv.ref[i] == f)
            return;
    assert(op->priv.nref < FHC_MAX_PIECES);
    op->priv.ref[op->priv.nref++] = f;
    if (f->inuse++ == 0)
        u_remove(P, f);
}

static void send_revoke_ack(fhc_t *c, uint32_t peer, uint64_t id)
{
    fhc_revoke_t a = { .kind = FHC_WIRE_REVOKE_ACK, .id = id };
    uint8_t buf[FHC_REVOKE_ACK_LEN];
    size_t n = fhc_revoke_encode(&a, buf, sizeof buf);
    assert(n == sizeof buf);
    c->env.send(c->env.arg, peer, 0, buf, n);
}

/* A revoked firehose whose last op let go: forget it; ack its REVOKE once
 * no other firehose waits under the same id. */
static void fh_finish_revoked(fhc_t *c, fhc_peer_t *P, fhc_fh_t *f)
{
    assert(f->revoked && f->inuse == 0 && !f->in_unused);
    fhc_list_unlink(&P->h_list, &f->h_link);
    P->held -= f->len;
    P->nheld--;
    uint64_t id = f->rv_id;
    uint32_t peer = f->peer;
    free(f);
    for (fhc_link_t *l = P->h_list.head; l; l = l->next) {
        const fhc_fh_t *g = fhc_entry(l, const fhc_fh_t, h_link);
        if (g->revoked && g->rv_id == id)
            return;
    }
    send_revoke_ack(c, peer, id);
}

static void op_drop_refs(fhc_t *c, fhc_peer_t *P, fhc_op_t *op)
{
    for (unsigned i = 0; i < op->priv.nref; i++) {
        fhc_fh_t *f = op->priv.ref[i];
        assert(f->inuse > 0);
        if (--f->inuse == 0) {
            if (f->revoked)
                fh_finish_revoked(c, P, f);
            else
                u_push(P, f);
        }
    }
    op->priv.nref = 0;
}

static uintptr_t span_lo(const fhc_t *c, const fhc_op_t *op)
{
    return fhc_bucket_down(c, op->raddr);
}
static uintptr_t span_hi(const fhc_t *c, const fhc_op_t *op)
{
    return fhc_bucket_down(c, op->raddr + op->len - 1) + c->p.bucket;
}

/* Takes references on every firehose covering the op's buckets. */
static void grab_refs(fhc_t *c, fhc_peer_t *P, fhc_op_t *op)
{
    for (uintptr_t a = span_lo(c, op); a < span_hi(c, op);) {
        fhc_fh_t *f = fh_at(c, op->peer, a);
        if (f) {
            op_take(P, op, f);
            a = f->base + f->len;
        } else {
            a += c->p.bucket;
        }
    }
}

/* The op's pieces, or FHC_ERR_OUT_OF_SEGMENT when a byte lies outside
 * what its firehose lets us reach (FHC_REACH_*): checked before any byte
 * moves, so a refused transfer changes nothing at the target. */
static int fill_pieces(const fhc_t *c, fhc_op_t *op)
{
    op->npieces = 0;
    uintptr_t end = op->raddr + op->len;
    for (uintptr_t a = op->raddr; a < end;) {
        const fhc_fh_t *f = fh_at(c, op->peer, a);
        assert(f && f->inuse > 0 && op->npieces < FHC_MAX_PIECES);
        uintptr_t e = f->base + f->len < end ? f->base + f->len : end;
        if (f->reach && ((op->put_data && (f->reach & FHC_REACH_RO)) ||
                         a < f->base + fhc_reach_lo(f->reach) ||
                         e > f->base + fhc_reach_hi(f->reach, f->len)))
            return FHC_ERR_OUT_OF_SEGMENT;
        op->piece[op->npieces++] = (fhc_piece_t){
            .addr = a, .len = e - a, .key = { f->key[0], f->key[1] },
            .rbase = f->base, .rlen = f->len, .reach = f->reach };
        a = e;
    }
    return 0;
}

/* ------------------------------------------------------------- queues */

static void q_push(fhc_peer_t *P, fhc_op_t *op, int front)
{
    op->priv.state = FHC_OP_WAIT_BUDGET;
    op->priv.next = NULL;
    if (!P->q_head) {
        P->q_head = P->q_tail = op;
    } else if (front) {
        op->priv.next = P->q_head;
        P->q_head = op;
    } else {
        P->q_tail->priv.next = op;
        P->q_tail = op;
    }
}

static fhc_op_t *q_pop(fhc_peer_t *P)
{
    fhc_op_t *op = P->q_head;
    if (op) {
        P->q_head = op->priv.next;
        if (!P->q_head)
            P->q_tail = NULL;
        op->priv.next = NULL;
        op->priv.state = FHC_OP_IDLE;
    }
    return op;
}

static void wait_on(fhc_move_t *m, fhc_op_t *op)
{
    op->priv.state = FHC_OP_WAIT_MOVE;
    op->priv.next = NULL;
    if (m->w_tail)
        m->w_tail->priv.next = op;
    else
        m->w_head = op;
    m->w_tail = op;
}

static int to_budget_queue(fhc_t *c, fhc_peer_t *P, fhc_op_t *op, int front)
{
    op_drop_refs(c, P, op);
    q_push(P, op, front);
    P->st.budget_waits++;
    return FHC_PENDING;
}

/* ---------------------------------------------------------------- move */

/* Absorb: the op's firehoses that nothing else uses (inuse == 1: only op)
 * are dropped, so the move about to be sent for the op's span asks for
 * their buckets again and the target (which deregisters victims inside a
 * span, fhc_target.c) registers the span as one region where it can: a
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
        u_push(P, f);
        rel[(*nrel)++] = f->base;
        bytes += f->len;
        if (f->base < *lo)          /* the span grows to the whole firehose */
            *lo = f->base;
        if (f->base + f->len > *hi)
            *hi = f->base + f->len;
        fh_drop(c, P, f);
    }
    op->priv.nref = keep;
    return bytes;
}

/* op is covered by the firehoses it holds: its pieces, and it runs
 * (FHC_HIT), or FHC_ERR_OUT_OF_SEGMENT with its references dropped. */
static int hit_now(fhc_t *c, fhc_peer_t *P, fhc_op_t *op)
{
    if (fill_pieces(c, op) < 0) {
        op_drop_refs(c, P, op);
        op->npieces = 0;
        return FHC_ERR_OUT_OF_SEGMENT;
    }
    op->priv.state = FHC_OP_ACTIVE;
    op->priv.prio = 0;
    return FHC_HIT;
}

/* Non-zero iff every firehose op holds is used by op alone (absorb would
 * drop them all). */
static int all_absorbable(const fhc_op_t *op)
{
    for (unsigned i = 0; i < op->priv.nref; i++)
        if (op->priv.ref[i]->inuse != 1 || op->priv.ref[i]->revoked)
            return 0;
    return 1;
}

/* Sends the move for [mlo, mhi) (the op's span when it absorbs firehoses:
 * see absorb), op waiting on it.  need: what the target may grant, R minus
 * what we hold in the frame. */
static int send_move(fhc_t *c, fhc_peer_t *P, fhc_op_t *op, uintptr_t mlo,
                     uintptr_t mhi, size_t need, int put)
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
    uintptr_t alo = span_lo(c, op), ahi = span_hi(c, op);
    if (!op->priv.absorbed)
        need += absorb(c, P, op, q.rel, &q.nrel, &alo, &ahi);
    if (q.nrel) {
        q.lo = mlo = alo;
        q.hi = mhi = ahi;
        P->st.merges++;
        op->priv.absorbed = 1;      /* if the target keeps them apart, so be it */
    }
    int nocheck = (c->p.debug_bugs & FHC_BUG_NO_F_CHECK) != 0;
    uintptr_t frame = fhc_frame_of(c, mlo);
    fhc_fh_t *v = fhc_entry(P->u_list.head, fhc_fh_t, u_link);
    while (!nocheck && P->held + P->reserved + need > c->F) {
        while (v && fhc_frame_of(c, v->base) == frame)
            v = fhc_entry(v->u_link.next, fhc_fh_t, u_link);
        assert(v && q.nrel < FHC_MAX_PIECES);
        fhc_fh_t *next = fhc_entry(v->u_link.next, fhc_fh_t, u_link);
        q.rel[q.nrel++] = v->base;
        fh_drop(c, P, v);
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
        if (!fh_at(c, peer, a))
            fhc_map_put(&c->pbucket, peer, fhc_bno(c, a), m);
    fhc_map_put(&c->moves, peer, m->token, m);
    wait_on(m, op);
    q.data_dst = op->raddr > mlo ? op->raddr : mlo;
    if (put) {
        q.data_dst = op->raddr;
        q.data_len = (uint32_t)op->len;
        q.data = op->put_data;
        op_drop_refs(c, P, op);    /* after choosing victims: not among them */
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

static int step(fhc_t *c, fhc_op_t *op, enum step_mode mode)
{
    fhc_peer_t *P = c->peer[op->peer];
    int head = mode == STEP_HEAD || op->priv.prio;
    if (mode == STEP_NEW && P->q_head)
        return to_budget_queue(c, P, op, 0);

    fhc_move_t *wait = NULL;
    uintptr_t mlo = 0, mhi = 0;
    for (uintptr_t a = span_lo(c, op); a < span_hi(c, op);) {
        fhc_fh_t *f = fh_at(c, op->peer, a);
        if (f) {
            op_take(P, op, f);
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
        wait_on(wait, op);
        P->st.coalesced++;
        return FHC_PENDING;
    }
    /* A hit on several firehoses that only this op uses: one move merges
     * them into one region (absorb), once; otherwise hit as they are. */
    int merge = !mhi && op->priv.nref > 1 && !op->priv.absorbed && all_absorbable(op) &&
                !(!head && P->q_head);
    if (!mhi && !merge)
        return hit_now(c, P, op);
    if (!head && P->q_head)
        return to_budget_queue(c, P, op, 0);
    if (merge) {
        mlo = span_lo(c, op);
        mhi = span_hi(c, op);
    }
    /* The target can grant at most the frame minus what we hold in it. */
    uintptr_t frame = fhc_frame_of(c, op->raddr);
    size_t frame_held = 0, frame_unused = 0;
    for (uintptr_t a = frame; a < frame + c->R;) {
        fhc_fh_t *f = fh_at(c, op->peer, a);
        if (!f) {
            a += c->p.bucket;
            continue;
        }
        frame_held += f->len;
        frame_unused += f->inuse ? 0 : f->len;
        a = f->base + f->len;
    }
    assert(merge || frame_held < c->R);
    size_t need = c->R - frame_held;
    /* Victims in the same frame would raise need as much as they free. */
    if (!(c->p.debug_bugs & FHC_BUG_NO_F_CHECK) &&
        P->held + P->reserved + need > c->F + P->unused_bytes - frame_unused) {
        if (merge)          /* no budget to merge now: hit as they are */
            return hit_now(c, P, op);
        return to_budget_queue(c, P, op, head);
    }
    int put = op->put_data && op->len <= c->p.put_in_move;
    int rc = send_move(c, P, op, mlo, mhi, need, put);
    if (rc < 0)
        op_drop_refs(c, P, op);
    return rc;
}

/* Serves the budget queue from its head until the head must wait again. */
static void pump(fhc_t *c, fhc_peer_t *P)
{
    fhc_op_t *op;
    while ((op = q_pop(P))) {
        op->priv.prio = 1;
        int rc = step(c, op, STEP_HEAD);
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
    int rc = step(c, op, STEP_NEW);
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
    op_drop_refs(c, P, op);
    op->priv.state = FHC_OP_IDLE;
    if (P->q_head)
        pump(c, P);
}

int fhc_budget_waiting(const fhc_t *c, uint32_t peer)
{
    return peer < c->p.nranks && c->peer[peer] && c->peer[peer]->q_head != NULL;
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

/* The target answered FHC_ERR_AGAIN: it waits for our ack of a REVOKE in
 * the span.  Every waiter lets go of its references (so the revoked firehose
 * can be dropped and acked) and steps again; the owner's put data, if any,
 * rides in the new move. */
static void retry_waiters(fhc_t *c, fhc_peer_t *P, fhc_move_t *m)
{
    P->st.retries++;
    fhc_op_t *w = m->w_head;
    free(m);
    for (fhc_op_t *op = w; op; op = op->priv.next)
        op_drop_refs(c, P, op);
    while (w) {
        fhc_op_t *op = w;
        w = op->priv.next;
        op->priv.next = NULL;
        op->priv.state = FHC_OP_IDLE;
        int rc = step(c, op, STEP_WOKEN);
        if (rc == FHC_HIT)
            op->ready(op, FHC_HIT);
        else if (rc < 0)
            op->ready(op, rc);
    }
    if (P->q_head)
        pump(c, P);
}

void fhc_initiator_on_revoke(fhc_t *c, uint32_t peer, const void *msg, size_t len)
{
    fhc_revoke_t v;
    char why[96];
    if (fhc_revoke_decode(msg, len, &v, why, sizeof why) < 0 ||
        v.kind != FHC_WIRE_REVOKE) {
        fhc_logf(c, "fhc: malformed revoke from rank %u dropped: %s", peer, why);
        return;
    }
    fhc_peer_t *P = fhc_peer_get(c, peer);
    if (!P || v.lo % c->p.bucket || v.hi % c->p.bucket || v.hi - v.lo > c->R ||
        v.hi > UINTPTR_MAX) {
        /* Not a region of ours to drop; ack so the target does not wait. */
        fhc_logf(c, "fhc: revoke from rank %u names no region (%#llx..%#llx)", peer,
                 (unsigned long long)v.lo, (unsigned long long)v.hi);
        send_revoke_ack(c, peer, v.id);
        return;
    }
    unsigned waiting = 0;
    for (uintptr_t a = (uintptr_t)v.lo; a < (uintptr_t)v.hi;) {
        fhc_fh_t *f = fh_at(c, peer, a);
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
            fh_drop(c, P, f);
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
        send_revoke_ack(c, peer, v.id);
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
        if (fh_at(c, m->peer, a))
            return 0;
    if (!(c->p.debug_bugs & (FHC_BUG_NO_F_CHECK | FHC_BUG_STALE_INSTALL)) &&
        *granted + g->len > m->reserved)
        return 0;
    *granted += g->len;
    return 1;
}

void fhc_initiator_on_reply(fhc_t *c, uint32_t peer, const void *msg, size_t len)
{
    fhc_rep_t rep;
    char why[96];
    if (fhc_rep_decode(msg, len, &rep, why, sizeof why) < 0) {
        fhc_logf(c, "fhc: malformed reply from rank %u dropped: %s", peer, why);
        return;
    }
    fhc_move_t *m = fhc_map_get(&c->moves, peer, rep.token);
    fhc_peer_t *P = c->peer[peer];
    if (!m || !P) {
        fhc_logf(c, "fhc: reply from rank %u for unknown move %llu dropped",
                 peer, (unsigned long long)rep.token);
        return;
    }
    fhc_map_del(&c->moves, peer, rep.token);
    for (uintptr_t a = m->lo; a < m->hi; a += c->p.bucket)
        if (fhc_map_get(&c->pbucket, peer, fhc_bno(c, a)) == m)
            fhc_map_del(&c->pbucket, peer, fhc_bno(c, a));
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
                fhc_logf(c, "fhc: rank %u granted a region that does not fit "
                         "the move; ignored", peer);
            continue;
        }
        if (fh_install(c, P, peer, &rep.reg[i]) < 0)
            fhc_logf(c, "fhc: out of memory installing a firehose on rank %u", peer);
    }

    /* Wake the waiters: first all take their references (so one waiter's
     * victims cannot be another's firehoses), then each steps again. */
    fhc_op_t *w = m->w_head;
    for (fhc_op_t *op = w; op; op = op->priv.next)
        if (!(op == m->owner && (m->put || status < 0)))
            grab_refs(c, P, op);
    while (w) {
        fhc_op_t *op = w;
        w = op->priv.next;
        op->priv.next = NULL;
        op->priv.state = FHC_OP_IDLE;
        if (op == m->owner && status < 0) {
            op_drop_refs(c, P, op);
            op->ready(op, status);
        } else if (op == m->owner && m->put) {
            op->ready(op, FHC_DONE_IN_MOVE);
        } else {
            int rc = step(c, op, STEP_WOKEN);
            if (rc == FHC_HIT)
                op->ready(op, FHC_HIT);
            else if (rc < 0)
                op->ready(op, rc);
        }
    }
    free(m);
    if (P->q_head)
        pump(c, P);
}

void fhc_initiator_destroy(fhc_t *c)
{
    for (size_t i = 0; i < c->moves.cap; i++)
        if (c->moves.slot[i].val)
            free(c->moves.slot[i].val);
    for (uint32_t p = 0; p < c->p.nranks; p++) {
        fhc_peer_t *P = c->peer[p];
        while (P && P->h_list.head) {
            fhc_fh_t *f = fhc_entry(P->h_list.head, fhc_fh_t, h_link);
            /* (A revoked one's ack is not sent: the cache is going away.) */
            fhc_list_unlink(&P->h_list, &f->h_link);
            free(f);
        }
    }
}
