/*
 * fhc_initiator.c -- our firehoses on peers' memory: the entries, the ops'
 * references on them, the waiting lists; how an op goes through the cache.
 * This file holds the parts step() is made of; step() itself, the move it
 * sends and the API calls are in fhc_initiator_step.c, replies and REVOKEs
 * in fhc_initiator_reply.c (map: fhc_initiator.h).
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
#include "fhc_initiator.h"

#include <stdlib.h>

/* ---------------------------------------------------------- unused FIFO */

void fhc_u_push(fhc_peer_t *P, fhc_fh_t *f)
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

int fhc_fh_install(fhc_t *c, fhc_peer_t *P, uint32_t peer,
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
    fhc_u_push(P, f);
    return 0;
}

/* A victim: forget it (the move that carries its release is being built). */
void fhc_fh_drop(fhc_t *c, fhc_peer_t *P, fhc_fh_t *f)
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

void fhc_op_take(fhc_peer_t *P, fhc_op_t *op, fhc_fh_t *f)
{
    for (unsigned i = 0; i < op->priv.nref; i++)
        if (op->priv.ref[i] == f)
            return;
    assert(op->priv.nref < FHC_MAX_PIECES);
    op->priv.ref[op->priv.nref++] = f;
    if (f->inuse++ == 0)
        u_remove(P, f);
}

void fhc_send_revoke_ack(fhc_t *c, uint32_t peer, uint64_t id)
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
    fhc_send_revoke_ack(c, peer, id);
}

void fhc_op_drop_refs(fhc_t *c, fhc_peer_t *P, fhc_op_t *op)
{
    for (unsigned i = 0; i < op->priv.nref; i++) {
        fhc_fh_t *f = op->priv.ref[i];
        assert(f->inuse > 0);
        if (--f->inuse == 0) {
            if (f->revoked)
                fh_finish_revoked(c, P, f);
            else
                fhc_u_push(P, f);
        }
    }
    op->priv.nref = 0;
}


/* Takes references on every firehose covering the op's buckets. */
void fhc_grab_refs(fhc_t *c, fhc_peer_t *P, fhc_op_t *op)
{
    for (uintptr_t a = fhc_span_lo(c, op); a < fhc_span_hi(c, op);) {
        fhc_fh_t *f = fhc_fh_at(c, op->peer, a);
        if (f) {
            fhc_op_take(P, op, f);
            a = f->base + f->len;
        } else {
            a += c->p.bucket;
        }
    }
}

/* The op's pieces, or FHC_ERR_OUT_OF_SEGMENT when a byte lies outside
 * what its firehose lets us reach (FHC_REACH_*): checked before any byte
 * moves, so a refused transfer changes nothing at the target. */
int fhc_fill_pieces(const fhc_t *c, fhc_op_t *op)
{
    op->npieces = 0;
    uintptr_t end = op->raddr + op->len;
    for (uintptr_t a = op->raddr; a < end;) {
        const fhc_fh_t *f = fhc_fh_at(c, op->peer, a);
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

fhc_op_t *fhc_q_pop(fhc_peer_t *P)
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

void fhc_wait_on(fhc_move_t *m, fhc_op_t *op)
{
    op->priv.state = FHC_OP_WAIT_MOVE;
    op->priv.next = NULL;
    if (m->w_tail)
        m->w_tail->priv.next = op;
    else
        m->w_head = op;
    m->w_tail = op;
}

int fhc_to_budget_queue(fhc_t *c, fhc_peer_t *P, fhc_op_t *op, int front)
{
    fhc_op_drop_refs(c, P, op);
    q_push(P, op, front);
    P->st.budget_waits++;
    return FHC_PENDING;
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
