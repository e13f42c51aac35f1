/*
 * fhc_target.h -- what the target's three files share (private to
 * firehose/cache/):
 *   fhc_target.c         the region table, byte categories and victim
 *                        FIFO, peers' holds, local pins;
 *   fhc_target_move.c    serving a move request (releases, checks, merge,
 *                        cover, reply);
 *   fhc_target_revoke.c  invalidation: REVOKEs to holders, their acks.
 * The accounting rules are described at the top of fhc_target.c.
 */
#ifndef FHC_TARGET_H
#define FHC_TARGET_H

#include "fhc_internal.h"

/* The live region covering our bucket containing a, or NULL. */
static inline fhc_region_t *fhc_region_at(const fhc_t *c, uintptr_t a)
{
    return fhc_map_get(&c->tbucket, 0, fhc_bno(c, a));
}

/* fhc_target.c */
void fhc_fifo_remove(fhc_t *c, fhc_region_t *r);
void fhc_cat_leave(fhc_t *c, fhc_region_t *r);
void fhc_cat_enter(fhc_t *c, fhc_region_t *r);
void fhc_region_free(fhc_t *c, fhc_region_t *r);
void fhc_region_settle(fhc_t *c, fhc_region_t *r);
void fhc_trim_victims(fhc_t *c);
fhc_region_t *fhc_region_new(fhc_t *c, uintptr_t base, size_t len, int exposed,
                             uintptr_t want);
uintptr_t fhc_uncovered_end(const fhc_t *c, uintptr_t a, uintptr_t hi);
fhc_hold_t *fhc_hold_add(fhc_t *c, fhc_peer_t *P, uint32_t peer, fhc_region_t *r);
void fhc_hold_remove(fhc_t *c, fhc_peer_t *P, fhc_hold_t *h);

/* fhc_target_move.c: 1 iff q (the deferred move d) must still wait. */
int  fhc_target_serve(fhc_t *c, uint32_t peer, fhc_peer_t *P, const fhc_req_t *q,
                      fhc_deferred_t *d);

/* fhc_budget.c, target side (rules 1-4; static budgets: F, nothing else) */
/* 0: serve; 1: deferred (or still deferred, d != NULL); <0: refuse. */
int  fhc_budget_admit(fhc_t *c, uint32_t peer, fhc_peer_t *P, const fhc_req_t *q,
                      size_t grant, fhc_deferred_t *d);
/* After serving q: grant (rule 1) or decay (rule 4); fills rep's budget. */
void fhc_budget_reply(fhc_t *c, uint32_t peer, fhc_peer_t *P, const fhc_req_t *q,
                      fhc_rep_t *rep);
void fhc_budget_on_answer(fhc_t *c, uint32_t peer, fhc_peer_t *P, uint64_t id);
void fhc_budget_retry(fhc_t *c);
void fhc_budget_refused(fhc_t *c, uint32_t peer, fhc_peer_t *P, const char *why);

#endif /* FHC_TARGET_H */
