/*
 * fhsim.h -- the access patterns of tests/sim/fhsim (fhsim_work.c) that
 * give each rank a fixed set of hot peers and a working set per pair (issue 32): they say
 * which peer an operation goes to and where in the peer's segment its
 * working set lies.  The classic patterns (random, stencil, hotspot) stay in
 * fhsim_work.c, unchanged, so their runs keep their figures.
 *
 *   neighbors      each rank works with k fixed peers, spread over the ranks
 *                  (rank i: i + 1 + j(N-1)/k mod N, j < k); every rank is
 *                  also the target of k initiators
 *   master-worker  ranks pair up (2j, 2j+1): each works only with its partner
 *                  (with N odd the last rank pairs with rank 0, which then
 *                  serves two initiators)
 *   skewed         the peer at distance d = 1..N-1 (i + d mod N) is chosen
 *                  with probability proportional to 1/d^S (Zipf, --zipf S)
 *   phase          k hot peers (i + 1 + (p k + j) mod (N-1)), where p = step
 *                  / P: the hot set moves on every P steps (--period P)
 *
 * Every operation of initiator i on target t lies in one window of --ws
 * bytes of t's segment, chosen by i (so a pair's working set is ws bytes,
 * whatever the pattern).  Pure functions of their arguments: the caller
 * supplies the random draws, so runs stay deterministic per seed.
 */
#ifndef FHSIM_H
#define FHSIM_H

#include <stddef.h>
#include <stdint.h>

enum { FHSIM_NEIGHBORS, FHSIM_MASTER_WORKER, FHSIM_SKEWED, FHSIM_PHASE };

typedef struct fhsim_pattern {
    int kind;                   /* FHSIM_* */
    uint32_t nodes;             /* >= 2 */
    uint32_t k;                 /* neighbors, phase: hot peers (clamped to N-1) */
    uint64_t period;            /* phase: steps per hot set, >= 1 */
    double zipf;                /* skewed: the exponent S >= 0 */
    size_t ws, seg, bucket;     /* working set per pair, segment, bucket */
    double *cdf;                /* skewed: cumulative weights of d = 1..N-1 */
} fhsim_pattern_t;

/* The FHSIM_* kind named `name`, or -1 if it names none of these four. */
int fhsim_pattern_kind(const char *name);

/* Validates and completes p (clamps k, builds the Zipf table): 0, or -1
 * with a message in why[len] (bad parameter or out of memory). */
int fhsim_pattern_init(fhsim_pattern_t *p, char *why, size_t len);
void fhsim_pattern_fini(fhsim_pattern_t *p);

/* The peer of rank src (never src itself) for an operation started at
 * step `now`; r is a uniform random 64-bit draw. */
uint32_t fhsim_pattern_peer(const fhsim_pattern_t *p, uint32_t src, uint64_t now,
                            uint64_t r);

/* The offset in every target's segment of src's working-set window:
 * bucket-aligned, window inside the segment. */
size_t fhsim_pattern_window(const fhsim_pattern_t *p, uint32_t src);

#endif /* FHSIM_H */
