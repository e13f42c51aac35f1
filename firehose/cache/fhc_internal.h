/*
 * fhc_internal.h -- the data of the registration cache, shared by its .c
 * files (fhc_core.c: lifetime, stats, dispatch; fhc_target*.c: our regions,
 * see fhc_target.h; fhc_initiator*.c: our firehoses on peers, see
 * fhc_initiator.h; fhc_check.c: invariants).
 *
 * Every object is in exactly one explicit state, kept in a field (no tagged
 * pointers, no refcounts overlaid on links); every list is an fhc_list_t
 * (fhc_list.h) with its own link in the object, so removal is O(1).
 */
#ifndef FHC_INTERNAL_H
#define FHC_INTERNAL_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "fhc.h"
#include "fhc_list.h"
#include "fhc_wire.h"
#include "fhc_map.h"
#include "fhc_ghost.h"

/* ---------------------------------------------------------------- target */

/* A registered run of 1..R/B buckets of our memory inside one frame.
 * Accounting categories (a region may be in the first two at once):
 *   remote_ref > 0          bytes count in c->remote_bytes   (<= M)
 *   local_ref  > 0          bytes count in c->local_bytes    (<= MAXVICTIM)
 *   both zero               in the victim FIFO, c->victim_bytes
 * Invariant: in_fifo == (remote_ref == 0 && local_ref == 0). */
typedef struct fhc_region {
    uintptr_t base;
    size_t len;
    void *mr;
    uint64_t key[2];
    uint64_t reach;             /* FHC_REACH_*, from pin() */
    uint32_t remote_ref;        /* number of peers holding it (a set) */
    uint32_t local_ref;         /* our own pins */
    int exposed;                /* registered for remote access (allowed) */
    uint32_t last_peer;         /* last peer that held it; UINT32_MAX: none
                                   (evictions are counted against it) */
    int in_fifo;
    /* Invalidated (fhc_invalidate): out of the bucket map, in no FIFO, its
     * holds moved to revoke records; freed when local_ref == 0 and
     * revoking == 0.  Its bytes count in c->dead_bytes, not in the
     * remote/local/victim categories. */
    int dead;
    uint32_t revoking;          /* REVOKEs not yet acknowledged */
    fhc_link_t fifo_link;       /* c->fifo */
    fhc_link_t all_link;        /* c->all: every region */
} fhc_region_t;

/* Peer `peer` holds a firehose on `reg`; in holds map under (peer, base).
 * When reg is invalidated the hold leaves the map and the peer's hold list
 * and becomes a REVOKE record (rv_id != 0) on the peer's rv list until the
 * peer acks: no allocation on that path. */
typedef struct fhc_hold {
    fhc_region_t *reg;
    uint32_t peer;
    uint64_t rv_id;                 /* 0: a hold; else the REVOKE's id */
    uintptr_t rv_base, rv_end;      /* revoke record: the region's extent */
    fhc_link_t link;                /* the peer's t_list, or its rv_list */
} fhc_hold_t;

/* ------------------------------------------------------------- initiator */

/* A firehose we hold on region [base, base+len) of `peer` (VALID: we got
 * its key in a reply that granted it).  Mapped under each of its buckets in
 * c->ibucket.  Invariant: in_unused == (inuse == 0). */
typedef struct fhc_fh {
    uint32_t peer;
    uintptr_t base;
    size_t len;
    uint64_t key[2];
    uint64_t reach;             /* FHC_REACH_* of the target's region */
    uint32_t inuse;             /* ops holding it for an RDMA in flight */
    int in_unused;
    /* The target revoked it while in use: out of the bucket map, still in
     * the held list; dropped and acked (rv_id) when inuse reaches 0. */
    int revoked;
    uint64_t rv_id;
    /* Granted by a merge move that the target answered with several
     * regions (it kept them apart: another peer holds one of them): a hit
     * over firehoses all so marked asks no merge again (fhc_step). */
    int merge_refused;
    fhc_link_t u_link;          /* peer's unused FIFO (u_list) */
    fhc_link_t h_link;          /* peer's held list (h_list) */
} fhc_fh_t;

/* A move request in flight.  The buckets of [lo, hi) that were missing when
 * it was sent map to it in c->pbucket (PENDING). */
typedef struct fhc_move {
    uint32_t peer;
    uint64_t token;
    uintptr_t lo, hi;           /* bucket-aligned span asked for */
    size_t reserved;            /* worst-case bytes the target may grant */
    fhc_op_t *owner;            /* the op that sent it */
    int put;                    /* owner's data rides in it */
    int merge;                  /* it absorbed firehoses to merge them */
    fhc_op_t *w_head, *w_tail;  /* waiting ops (owner first) */
    /* Regions the target revoked while this move was pending: a grant of
     * exactly one of them was made before the invalidation and must not be
     * installed (the REVOKE overtook the reply).  rv_all: too many, install
     * nothing that overlaps a recorded one or [rv_lo, rv_hi). */
    unsigned nrv;
    int rv_all;
    uintptr_t rv_base[FHC_MAX_PIECES], rv_end[FHC_MAX_PIECES];
} fhc_move_t;

enum fhc_op_state {
    FHC_OP_IDLE = 0,            /* not known to the cache */
    FHC_OP_WAIT_MOVE,           /* on a move's waiter list */
    FHC_OP_WAIT_BUDGET,         /* on the peer's budget queue */
    FHC_OP_ACTIVE,              /* HIT delivered: holds refs until release */
};

/* Everything about one peer, both roles.  Allocated on first use. */
typedef struct fhc_peer {
    /* initiator: our firehoses on the peer.  I2: held + reserved <= F. */
    size_t held, reserved, unused_bytes;
    uint32_t nheld, npending;
    fhc_list_t u_list;          /* unused firehoses, oldest first */
    fhc_list_t h_list;          /* every firehose we hold (and revoked ones
                                   still in use) */
    fhc_op_t *q_head, *q_tail;  /* ops waiting for budget, FIFO */
    uint64_t next_token;
    /* target: the peer's firehoses on us.  t_held <= F. */
    size_t t_held;
    uint32_t t_nheld;
    fhc_list_t t_list;          /* its holds on our regions */
    fhc_list_t rv_list;         /* REVOKEs to this peer awaiting ack */
    uint64_t rv_next;           /* id of the next REVOKE to this peer */
    fhc_peer_stats_t st;
    /* budgets (fhc_budget.c).  Initiator: our view of the target's budget
     * for us, its version, the RECLAIM being obeyed (0: none). */
    size_t budget;
    uint64_t bver, rc_id;
    /* Target: enforced budget (A2: t_held <= t_budget once our RECLAIM was
     * answered), announced budget (< t_budget while a RECLAIM waits for its
     * answer), its version, moves in a row without demand (decay), this
     * peer's deferred moves and the bytes they may need. */
    size_t t_budget, t_announced;
    uint64_t t_bver;
    uint32_t t_idle, t_ndef;
    size_t t_defneed;
    int t_over;                 /* its answer came while it held more than
                                   the lowered budget: busy ones to come */
} fhc_peer_t;

/* A move the target deferred (adaptive budgets, rule 3): its releases were
 * applied, the rest waits on c->def, FIFO. */
typedef struct fhc_deferred {
    uint32_t peer;
    size_t need;                /* bytes its grant may add (reserved) */
    fhc_link_t link;
    struct fhc_req req;         /* nrel = 0; data points into bytes[] */
    unsigned char bytes[];
} fhc_deferred_t;

struct fhc {
    fhc_params_t p;
    fhc_env_t env;
    size_t F, R;                /* per-peer budget, frame size */
    unsigned bshift;            /* log2(B) */
    fhc_peer_t **peer;          /* [nranks], lazily allocated */

    /* target */
    fhc_map_t tbucket;          /* (0, bucket no) -> fhc_region_t */
    fhc_map_t holds;            /* (peer, region base) -> fhc_hold_t */
    fhc_list_t all;             /* every region, newest first */
    fhc_list_t fifo;            /* victims, oldest first */
    size_t pinned_bytes, remote_bytes, local_bytes, victim_bytes, dead_bytes;
    uint32_t nregions, victim_len, revokes_pending;
    uint64_t registrations, evictions, moves_served, refused;
    uint64_t reaims;            /* victims freed to register another run */
    int pin_rc;                 /* the last failed pin()'s error */
    uint64_t invalidations, revokes_sent, dead_freed;

    /* initiator */
    fhc_map_t ibucket;          /* (peer, bucket no) -> fhc_fh_t */
    fhc_map_t pbucket;          /* (peer, bucket no) -> fhc_move_t */
    fhc_map_t moves;            /* (peer, token) -> fhc_move_t */

    /* adaptive victim FIFO (fhc_ghost.c): the effective MAXVICTIM */
    size_t mv_now;
    fhc_ghost_t ghost;
    uint64_t victim_repins, mv_grows, mv_shrinks;
    /* budgets (fhc_budget.c), target side: floor = F; commit = sum over
     * peers of fhc_commit_of (A1: commit <= M); the deferred moves, FIFO,
     * and the bytes they reserve. */
    size_t floor, commit, def_need;
    fhc_list_t def;
};

static inline uintptr_t fhc_bucket_down(const fhc_t *c, uintptr_t a)
{
    return a & ~(uintptr_t)(c->p.bucket - 1);
}
static inline uint64_t fhc_bno(const fhc_t *c, uintptr_t a)
{
    return (uint64_t)(a >> c->bshift);
}
static inline uintptr_t fhc_frame_of(const fhc_t *c, uintptr_t a)
{
    return a - a % c->R;
}

fhc_peer_t *fhc_peer_get(fhc_t *c, uint32_t peer);     /* NULL: no memory */
void fhc_logf(const fhc_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* peer as fhc_logf's lines name it (env.name), into buf; returns buf.
 * FHC_PEER_NAME gives it in a temporary for one statement. */
#define FHC_NAME_MAX 40
const char *fhc_peer_name(const fhc_t *c, uint32_t peer, char *buf, size_t len);
#define FHC_PEER_NAME(c, peer) \
    fhc_peer_name((c), (peer), (char[FHC_NAME_MAX]){0}, FHC_NAME_MAX)

/* fhc_target_move.c, fhc_target_revoke.c, fhc_target.c */
void fhc_target_on_request(fhc_t *c, uint32_t peer, const void *msg, size_t len);
void fhc_target_on_revoke_ack(fhc_t *c, uint32_t peer, const void *msg, size_t len);
void fhc_target_forget_revokes(fhc_t *c, fhc_peer_t *P);   /* dead peer: acked */
void fhc_target_destroy(fhc_t *c);
/* fhc_initiator_reply.c, fhc_initiator.c */
void fhc_initiator_on_reply(fhc_t *c, uint32_t peer, const void *msg, size_t len);
void fhc_initiator_on_revoke(fhc_t *c, uint32_t peer, const void *msg, size_t len);
void fhc_initiator_destroy(fhc_t *c);
void fhc_initiator_on_reclaim(fhc_t *c, uint32_t peer, const void *msg, size_t len);
/* fhc_budget.c: the budget rules (docs/firehose-cache.md, "Budgets") */
void fhc_t_held_change(fhc_t *c, fhc_peer_t *P, size_t len, int add);
size_t fhc_i_budget(const fhc_t *c, const fhc_peer_t *P);

#endif /* FHC_INTERNAL_H */
