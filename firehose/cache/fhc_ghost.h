/*
 * fhc_ghost.h -- the adaptive victim FIFO (private to firehose/cache/):
 * a ghost list of the buckets of the last victims we deregistered, and the
 * rule that moves the effective MAXVICTIM (c->mv_now) inside
 * [params.maxvictim, params.maxvictim_max] (docs/firehose-cache.md,
 * "Adaptive victim FIFO").
 *
 * The ghost holds no memory of the buckets themselves: bucket numbers in a
 * ring (oldest overwritten first) and a hash set counting how often each
 * bucket is in the ring.  A registration (move or local pin) of a range
 * with a bucket in the set is a "victim re-pin": a larger FIFO would have
 * kept that registration.  Static mode (params.victim_adaptive == 0)
 * allocates nothing and keeps mv_now == params.maxvictim.
 */
#ifndef FHC_GHOST_H
#define FHC_GHOST_H

#include <stddef.h>
#include <stdint.h>

#include "fhc_map.h"

/* Registrations per decision window, and the cap on remembered buckets
 * (bounds the ghost's memory at about 40 bytes per bucket: ring + set). */
#define FHC_GHOST_WINDOW 64u
#define FHC_GHOST_MAX_BUCKETS (1u << 16)

typedef struct fhc_ghost {
    uint64_t *ring;         /* bucket numbers, [cap]; NULL: static mode */
    size_t cap, head, n;    /* ring capacity, oldest slot, entries used */
    fhc_map_t set;          /* (0, bucket) -> count in the ring, as a pointer */
    uint32_t win_regs;      /* registrations in the current window */
    uint32_t win_repins;    /* ... of which victim re-pins */
    int pin_failed;         /* a pin() failed since the last decision */
    size_t step;            /* next growth step: R, doubling while re-pins stay high */
} fhc_ghost_t;

struct fhc;

/* Sets c->mv_now = maxvictim and, in adaptive mode, allocates the ghost
 * (G = min(maxvictim_max / B, FHC_GHOST_MAX_BUCKETS) buckets, reserved now:
 * no allocation later).  0, or FHC_ERR_NO_MEMORY. */
int  fhc_ghost_init(struct fhc *c);
void fhc_ghost_fini(struct fhc *c);
/* The victim region [base, base+len) was deregistered to keep the FIFO
 * within mv_now: remember its buckets (forgetting the oldest). */
void fhc_ghost_evicted(struct fhc *c, uintptr_t base, size_t len);
/* A move or local pin registered [base, base+len): count it, and count a
 * victim re-pin if a bucket of it is in the ghost. */
void fhc_ghost_registered(struct fhc *c, uintptr_t base, size_t len);
/* pin() failed (out of memory): the next decision shrinks at once. */
void fhc_ghost_pin_failed(struct fhc *c);
/* The decision, run where victims are trimmed (so every registration is
 * followed by one before the call that made it returns): after a pin
 * failure, mv_now = max(maxvictim, local bytes); after every window of
 * FHC_GHOST_WINDOW registrations, grow by the step while re-pins > 1/8 and
 * pinned + step <= M + maxvictim_max, shrink by R toward maxvictim while
 * re-pins < 1/64.  Never below local bytes, never past maxvictim_max. */
void fhc_ghost_adapt(struct fhc *c);

#endif /* FHC_GHOST_H */
