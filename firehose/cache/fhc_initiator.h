/*
 * fhc_initiator.h -- what the initiator's three files share (private to
 * firehose/cache/):
 *   fhc_initiator.c        firehose entries, the ops' references on them,
 *                          the waiting lists (unused FIFO, budget queue,
 *                          a move's waiters);
 *   fhc_initiator_step.c   an op's life: step(), the move it sends
 *                          (absorb), the budget queue pump, the API calls;
 *   fhc_initiator_reply.c  what the target sends back: move replies
 *                          (grant checks, waking waiters, retries) and
 *                          REVOKEs.
 * The algorithm is described at the top of fhc_initiator.c.
 */
#ifndef FHC_INITIATOR_H
#define FHC_INITIATOR_H

#include "fhc_internal.h"
#include "fhc_wire.h"

enum step_mode {
    STEP_NEW,       /* from fhc_acquire: the budget queue gates it */
    STEP_WOKEN,     /* a move it waited for was answered */
    STEP_HEAD,      /* at the head of the budget queue */
};

/* The firehose we hold on peer's bucket containing a, or NULL. */
static inline fhc_fh_t *fhc_fh_at(const fhc_t *c, uint32_t peer, uintptr_t a)
{
    return fhc_map_get(&c->ibucket, peer, fhc_bno(c, a));
}

/* The op's buckets: [fhc_span_lo, fhc_span_hi). */
static inline uintptr_t fhc_span_lo(const fhc_t *c, const fhc_op_t *op)
{
    return fhc_bucket_down(c, op->raddr);
}
static inline uintptr_t fhc_span_hi(const fhc_t *c, const fhc_op_t *op)
{
    return fhc_bucket_down(c, op->raddr + op->len - 1) + c->p.bucket;
}

/* fhc_initiator.c */
void fhc_u_push(fhc_peer_t *P, fhc_fh_t *f);
int  fhc_fh_install(fhc_t *c, fhc_peer_t *P, uint32_t peer, const fhc_rep_region_t *g);
void fhc_fh_drop(fhc_t *c, fhc_peer_t *P, fhc_fh_t *f);
void fhc_op_take(fhc_peer_t *P, fhc_op_t *op, fhc_fh_t *f);
void fhc_send_revoke_ack(fhc_t *c, uint32_t peer, uint64_t id);
void fhc_op_drop_refs(fhc_t *c, fhc_peer_t *P, fhc_op_t *op);
void fhc_grab_refs(fhc_t *c, fhc_peer_t *P, fhc_op_t *op);
int  fhc_fill_pieces(const fhc_t *c, fhc_op_t *op);
fhc_op_t *fhc_q_pop(fhc_peer_t *P);
void fhc_wait_on(fhc_move_t *m, fhc_op_t *op);
int  fhc_to_budget_queue(fhc_t *c, fhc_peer_t *P, fhc_op_t *op, int front);

/* fhc_initiator_step.c */
int  fhc_step(fhc_t *c, fhc_op_t *op, enum step_mode mode);
void fhc_pump(fhc_t *c, fhc_peer_t *P);

/* fhc_budget.c, initiator side (A3) */
void fhc_budget_settle(fhc_t *c, uint32_t peer, fhc_peer_t *P, int force);
void fhc_budget_from_reply(fhc_t *c, uint32_t peer, fhc_peer_t *P, const fhc_rep_t *rep);

#endif /* FHC_INITIATOR_H */
