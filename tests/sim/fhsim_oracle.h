/*
 * fhsim_oracle.h -- the reference the simulator measures the cache against
 * (issue 32, docs/plans/adaptive-budgets.md "The simulator").
 *
 * For each target, one LRU over every (initiator, bucket) pair, with room
 * for M/B entries: the hit rate a target would reach if its whole pool M
 * followed demand perfectly, with no per-initiator split, no region
 * granularity and no victim FIFO.  An operation hits when every bucket it
 * touches is resident; all of them then become most recently used (misses
 * are inserted, evicting the least recently used entries of that target).
 * Deterministic: no randomness, the order of calls is the only input.
 */
#ifndef FHSIM_ORACLE_H
#define FHSIM_ORACLE_H

#include <stdint.h>

typedef struct fhsim_oracle fhsim_oracle_t;

/* An oracle for `ntargets` targets, each with room for `cap` entries
 * (cap >= 1).  NULL if out of memory.  Free with fhsim_oracle_destroy. */
fhsim_oracle_t *fhsim_oracle_create(uint32_t ntargets, uint64_t cap);
void fhsim_oracle_destroy(fhsim_oracle_t *o);

/* One operation of `initiator` on target `target` over buckets
 * first..last (first <= last; last - first < cap).  Returns 1 if every
 * bucket was resident (a hit), 0 otherwise; -1 if out of memory. */
int fhsim_oracle_access(fhsim_oracle_t *o, uint32_t target, uint32_t initiator,
                        uint64_t first, uint64_t last);

/* Operations seen and hits counted so far. */
void fhsim_oracle_counts(const fhsim_oracle_t *o, uint64_t *ops, uint64_t *hits);

/* Runs fixed, hand-computed cases; 0 if all hold, else -1 with a message
 * on stderr. */
int fhsim_oracle_selftest(void);

#endif /* FHSIM_ORACLE_H */
