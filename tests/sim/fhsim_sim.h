/*
 * fhsim_sim.h -- what the files of the simulator (tests/sim/fhsim.c and the
 * fhsim_*.c beside it) share: the options, the simulated ranks, network and
 * operations, the run's counters, and the calls between the files.
 *
 *   fhsim.c          the options, main: set-up, the step loop, teardown
 *   fhsim_net.c      the simulated network and ranks: the random draws,
 *                    the event queue, the cache's environment (pin, unpin,
 *                    send, put-in-move, log) with its per-registration checks
 *   fhsim_work.c     the workloads: which operations start (the patterns),
 *                    their completions, local pins, freed memory, the events
 *   fhsim_check.c    the checks: RDMA against the registrations, the caches'
 *                    invariants per touched pair / sampled / full, progress,
 *                    quiescence; fail() and the dump
 *   fhsim_bugs.c     the bugs --inject-bug makes on purpose, by name
 *   fhsim_report.c   the summary lines
 *   fhsim_patterns.c the hot-peer patterns (fhsim.h)
 *   fhsim_oracle.c   the oracle (fhsim_oracle.h)
 *
 * One thread; every function runs inside the step loop of main.  Runs are
 * deterministic per seed: every random draw is rnd() in a fixed order.
 */
#ifndef FHSIM_SIM_H
#define FHSIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "firehose/cache/fhc.h"
#include "firehose/cache/fhc_map.h"
#include "fhsim.h"
#include "fhsim_oracle.h"

#define SEG_BASE  ((uintptr_t)1 << 40)     /* every rank's segment */
#define HEAP_BASE ((uintptr_t)1 << 42)     /* local buffers outside it */

/* ---------------------------------------------------------- parameters */

typedef struct fhsim_opt {
    uint32_t nodes;
    uint64_t steps, seed;
    const char *pattern;
    size_t M, bucket, region_max, maxvictim, put_in_move, seg;
    unsigned rate, window, delay, rdma_delay;
    uint64_t check_every, check_sample, stall, max_age;
    unsigned bad_rate, local_rate, pin_fail, free_rate;
    int reorder_replies, quiet;
    unsigned bugs;              /* FHC_BUG_* passed to the caches */
    int skip_release, reorder_requests;
    uint32_t k;                 /* neighbors, phase: hot peers */
    uint64_t period;            /* phase: steps per hot set */
    double zipf;                /* skewed: exponent */
    size_t ws;                  /* working set per pair (0: 8 frames) */
    /* the adaptive victim FIFO (fhc_ghost.h) */
    int victim_adaptive;
    size_t maxvictim_max;       /* 0: 4 x maxvictim */
    int budget;                 /* --budget: FHC_BUDGET_STATIC | ADAPTIVE */
} fhsim_opt_t;

extern fhsim_opt_t opt;         /* fhsim.c */
extern fhsim_pattern_t pat;     /* the hot-peer patterns (fhsim.h) */
extern int pat_on;              /* --pattern is one of them */
extern fhsim_oracle_t *oracle;

/* ---------------------------------------------------------------- state */

typedef struct sim_op {
    fhc_op_t op;
    uint32_t node;
    uint64_t id, t_start;
    int expect_error;           /* outside the target's segment */
    struct sim_op *prev, *next; /* live ops, oldest first */
} sim_op_t;

typedef struct sim_local {
    uint32_t node;
    fhc_local_t l;
} sim_local_t;

typedef struct mr {
    uint32_t node;
    uintptr_t addr;
    size_t len;
    int alive, remote;
    uint64_t pin_seq;           /* free_seq when it was registered */
} mr_t;

typedef struct node {
    uint32_t id;
    fhc_t *c;
    unsigned inflight;
    size_t pinned;
} node_t;

enum { EV_MSG, EV_RDMA_DONE, EV_UNPIN_LOCAL };
typedef struct event {
    uint64_t t, seq;
    int kind;
    uint32_t src, dst;
    int is_reply;
    void *data;                 /* message bytes, sim_op_t or sim_local_t */
    size_t len;
} event_t;

/* Defined in fhsim_net.c. */
extern node_t *nodes;
extern uint64_t now, seq_no, rng_state;
extern event_t *heap;
extern size_t heap_n, heap_cap;
extern uint64_t *flow_last;     /* [src * N + dst]: last delivery of a request */
extern uint64_t *rflow_last;    /* the same for replies */
extern mr_t *mrs;
extern size_t nmrs, cap_mrs;
extern fhc_map_t pinned_buckets;        /* (node, bucket no) -> mr index + 1 of the
                                           registration of the CURRENT pages */
extern fhc_map_t freed_at;              /* (node, bucket no) -> free_seq of its last free */
extern uint64_t free_seq;
extern sim_op_t *live_head, *live_tail;
extern uint64_t live_n, last_progress, next_op_id;
extern uint32_t *touched;       /* pairs (node, peer) touched this step */
extern size_t ntouched, cap_touched;
typedef struct fhsim_counts {
    uint64_t started, completed, hits, pending, in_move, expected_errors;
    uint64_t local_pins, local_again, rdma_checks, peer_checks, full_checks, sample_checks;
    uint64_t max_latency, msgs, skipped_releases, frees, stale_rdma;
} fhsim_counts_t;
extern fhsim_counts_t st;

/* ------------------------------------------------------------- calls */

/* fhsim_net.c: random draws (one stream, seeded by main), the event queue,
 * the pairs touched this step, the caches' environment. */
uint64_t rnd(void);
uint64_t rnd_below(uint64_t n);         /* 0 for n == 0 */
int permille(unsigned p);               /* true with probability p / 1000 */
void ev_push(event_t e);
event_t ev_pop(void);                   /* the earliest event; heap_n > 0 */
void touch(uint32_t node, uint32_t peer);
int seg_contains(uintptr_t a, size_t len);
int env_allowed(void *arg, uintptr_t addr, size_t len);
int env_pin(void *arg, uintptr_t addr, size_t len, int remote, uintptr_t want,
            void **mrp, uint64_t key[2], uint64_t *reach);
void env_unpin(void *arg, void *mrp);
void env_send(void *arg, uint32_t peer, int is_reply, const void *msg, size_t len);
void env_put_in_move(void *arg, uintptr_t dst, const void *data, size_t len);
void env_log(void *arg, const char *line);

/* fhsim_work.c: one step's new work, and the events as they come due. */
void start_op(void);
void start_local_pin(void);
void free_memory(void);
void handle(event_t e);

/* fhsim_check.c: each check fails the run (fail: message, dump, exit 1). */
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void dump_state(void);
void check_rdma(const sim_op_t *o, const char *when);
void check_touched(void);
void check_one(uint32_t n);
void check_all(void);
void check_progress(void);
void check_quiescent(void);

/* fhsim_bugs.c: sets the option bits of the bug --inject-bug NAME names;
 * 0, or -1 if it names none. */
int fhsim_bug_parse(const char *name);

/* fhsim_report.c: the caches' counters summed over all ranks, read before
 * they are destroyed, and the summary lines printed from them. */
typedef struct fhsim_totals {
    uint64_t hits, misses, moves, coal, pim, waits, errs;
    uint64_t evictions, regs, refused, grants, reclaims, deferred;
    uint64_t repins, grows, shrinks, merges, splits;
    size_t mv_top;
    uint64_t o_ops, o_hits;             /* the oracle's */
} fhsim_totals_t;
void fhsim_totals(fhsim_totals_t *t);
void fhsim_report(const fhsim_totals_t *t, double secs);

#endif /* FHSIM_SIM_H */
