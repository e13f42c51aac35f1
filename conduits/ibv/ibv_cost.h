/*
 * ibv_cost.h -- what one process of a job costs on the verbs conduit:
 * queue pairs, CQ entries and pinned receive memory, from the conduit's
 * own sizing rules (ibv_path.c, ibv_cm.c).  No verbs header: used by
 * tools/fhinfo (--cost) and unit-tested (tests/unit/test_ibv_addr).
 * docs/running-on-clusters.md "Resources per process" states the formula.
 */
#ifndef FH_IBV_COST_H
#define FH_IBV_COST_H

#include <stddef.h>

/* The conduit's constants the formula uses (ibv_path.c, ibv_cm.c). */
#define IBV_COST_NOPS      256     /* RMA contexts per path */
#define IBV_COST_RX_SLACK  80      /* SRQ buffers beyond the connections' */
#define IBV_COST_CM_SQ     16      /* UD sends per path */
#define IBV_COST_CM_RX_SVC 64      /* UD receives, service path */
#define IBV_COST_CM_RX_THR 8       /* UD receives, thread path */
#define IBV_COST_CM_BUF    128     /* bytes per UD buffer */

typedef struct ibv_cost_shape {
    long nranks;       /* N */
    long npaths;       /* P = 1 + thread paths (fh_auto_threads or FH_MAX_THREADS) */
    long used_paths;   /* thread paths that talk (<= P - 1); with P = 1 the
                          service path talks */
    long peers;        /* K: ranks each talking path reaches (<= N) */
    long credits;      /* FH_AM_CREDITS */
    size_t stride;     /* one AM packet, rounded up to 64 bytes */
    size_t nslots;     /* send slots per path (cu_send_slots(stride)) */
} ibv_cost_shape_t;

typedef struct ibv_cost {
    double rc_qps;        /* RC QPs when every rank talks as the shape says */
    double rc_qps_max;    /* every (path, peer path) pair connected */
    double rc_qps_eager;  /* what connecting everything at init cost:
                             N * (2P - 1) */
    double ud_qps;        /* P */
    double cq_entries;    /* sum over the paths' CQs, grown for the
                             shape's connections (at least this, at most
                             1.25 x + 64 per path) */
    double cq_entries_max; /* sized for every possible peer (devices that
                              cannot resize a CQ; what all did before) */
    double rx_bytes;      /* pinned SRQ buffers, the shape's traffic */
    double rx_bytes_max;  /* every pair connected (= the old eager sizing) */
    double other_bytes;   /* pinned send slots and UD buffers */
} ibv_cost_t;

/* Fills *out for a job where every rank behaves alike (symmetric: each
 * rank's talking paths reach K peers and K peers' paths reach it). */
void ibv_cost(const ibv_cost_shape_t *s, ibv_cost_t *out);

#endif /* FH_IBV_COST_H */
