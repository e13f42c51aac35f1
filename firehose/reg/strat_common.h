/*
 * strat_common.h -- the registration strategies kept for comparison with the
 * firehose cache (FH_REG_STRATEGY=rendezvous | rendezvous-cache | bounce):
 * state shared by strat_common.c (life cycle, segments, dispatch, stats),
 * rendezvous.c (both rendezvous forms) and bounce.c.
 *
 *   rendezvous        per chunk of at most R = FH_REGION_MAX bytes the
 *                     initiator asks the target (RDV_REQ on the service
 *                     path) to register exactly the chunk's remote range,
 *                     gets the key in the reply, does the RDMA, then tells
 *                     the target to deregister (fire and forget).  Chunks
 *                     of one transfer are pipelined, RDV_DEPTH deep.  A
 *                     registration whose deregistration never came (a
 *                     buggy or hostile peer) is revoked when its segment
 *                     is destroyed, like the cache's frames.
 *   rendezvous-cache  the paper's "rendezvous without unpin": the same
 *                     request for every chunk (a chunk stays inside one
 *                     R-aligned frame), but the target serves it from its
 *                     frame cache: it registers the whole frame (clipped to
 *                     its segment piece) the first time anyone asks and
 *                     keeps it until the segment is destroyed; no
 *                     deregistration message.  The initiator caches
 *                     nothing, so every chunk costs a round trip.
 *                     Unbounded pinning by design.
 *   bounce            nothing is registered: a put is a series of medium AMs
 *                     whose handler copies the payload into the segment and
 *                     acknowledges; a get is a series of short requests
 *                     answered by medium replies carrying the data.
 *
 * Security (target side, every strategy): a request is honoured only if its
 * whole range lies inside one of our declared segment pieces (fh_seg_find
 * on our own rank) and the message is well formed; otherwise the requester
 * gets an error reply, we log one line, and nothing is registered or
 * written.  Key lifetime: no key we handed out outlives the memory it
 * names.  fh_segment_destroy (segment.c) first unpublishes the piece and
 * waits until no service-path handler can still be using the old segment
 * table, then fh_strat_seg_destroy deregisters every registration we made
 * for peers inside the piece -- whether or not the peer gave it back --
 * and only then is the memory unmapped; fh_strat_fini deregisters the
 * rest before fh_finalize unmaps anything.  A peer that uses such a key
 * afterwards gets an error completion (the registration no longer exists
 * at the NIC / provider), never the memory mapped there next.
 *
 * Locking: s->lock protects every table and counter below.  Lock order:
 * a path lock (handlers run under one) may be held when s->lock is taken,
 * never the reverse; nothing sends, polls or registers memory with s->lock
 * held, except the target handlers, which register under the service path
 * lock only (like the firehose cache's move handler).
 *
 * Completion: an operation is a record (strat_xop_t) on its path's list,
 * counted once in the caller's counter (stack, NB handle or NBI) and in
 * path->inflight.  fh_strat_xfer starts it and returns; fh_strat_progress,
 * called by every progress and wait loop of a thread on that path, moves
 * it on -- sends the requests credits allow, posts the RDMA of chunks whose
 * key arrived, sends deregistrations -- and completes the counter when the
 * last reply or RDMA is in.  Nothing in it waits: a message without a
 * credit or transmit resources is tried again by the next progress call.
 * So a non-blocking put/get returns without the target polling.
 */
#ifndef FH_STRATEGY_H
#define FH_STRATEGY_H

#include "firehose/cache/fhc_map.h"
#include "firehose/reg/services.h"

/* The rendezvous message (FH_H_RDV_REQ payload and FH_H_RDV_REP payload;
 * host byte order, like the AM header; rendezvous.c explains the protocol). */
enum { RDV_REGISTER = 1, RDV_UNREGISTER = 2, RDV_REPLY = 3 };
typedef struct rdv_msg {
    uint32_t op;
    int32_t status;            /* reply: FH_OK or a negative fh_err_t */
    uint64_t token;            /* initiator's waiter (register, reply) */
    uint64_t addr, len;        /* request: range; reply: registration */
    uint64_t handle;           /* unregister, reply */
    uint64_t key0, key1;       /* reply */
} rdv_msg_t;
_Static_assert(sizeof(rdv_msg_t) == 56, "rdv_msg_t has no padding");

/* Rendezvous chunks of one transfer whose registration may be in flight. */
#define RDV_DEPTH 4

typedef struct strat_peer {
    /* Target side, per request of the peer (rendezvous.c): */
    uint64_t hits;             /* rendezvous-cache: frame already registered */
    uint64_t misses;           /* a registration was made for it */
    uint64_t requests;         /* strategy messages we sent to the peer */
    uint64_t registrations;    /* registrations we made for the peer */
    uint64_t unregistrations;  /* ... and released */
    uint64_t refused;          /* its requests we refused */
    uint64_t pinned_remote;    /* bytes registered here for it now */
    uint32_t revoked_kept;     /* its entries on s->revoked */
} strat_peer_t;

/* One registration we made for a peer's request (target side).  On
 * s->tlist while registered; a plain rendezvous entry revoked at segment
 * destroy moves to s->revoked (mr NULL, still in tmap under its handle) so
 * that the peer's late RDV_UNREGISTER is recognized rather than refused. */
typedef struct strat_entry {
    struct strat_entry *prev, *next;
    uint32_t peer;             /* who asked (cache: who asked first) */
    bool revoked;              /* deregistered by a segment destroy */
    uint64_t handle;           /* plain rendezvous: name used to deregister */
    uintptr_t base;
    size_t len;
    uint64_t key[2];
    struct fh_mr *mr;          /* NULL once revoked */
} strat_entry_t;

/* An operation waiting for replies from `peer`, found by (peer, token). */
typedef struct strat_wait {
    _Atomic uint32_t pending;  /* replies still expected */
    int status;                /* first error reported, else FH_OK */
    /* rendezvous reply */
    uintptr_t base;
    size_t len;
    uint64_t key[2];
    uint64_t handle;
    /* bounce get: where the data goes */
    char *local;
    size_t n;
    /* bounce: the path its requests leave on (their replies come back to
     * it); NULL for rendezvous key requests (the service path's) */
    const fh_path_base_t *path;
} strat_wait_t;

typedef struct strat_list {
    strat_entry_t *head;
} strat_list_t;

struct fh_strat {
    int kind;                  /* FH_REG_RENDEZVOUS, ..._CACHE, FH_REG_BOUNCE */
    pthread_mutex_t lock;
    size_t R;                  /* rendezvous: largest registration / frame */
    size_t chunk;              /* bounce: payload bytes per AM */
    uint64_t next_token, next_handle;
    fhc_map_t waits;           /* (peer, token) -> strat_wait_t */
    fhc_map_t tmap;            /* target: (peer, handle) or (0, frame) -> entry */
    strat_list_t tlist;        /* registered entries */
    /* Plain rendezvous entries revoked by a segment destroy before their
     * RDV_UNREGISTER came.  An honest peer sends it before it enters the
     * destroy's barrier, but from its service path while the barrier
     * travels on its thread path, so it can arrive after we revoked; it is
     * then taken quietly.  An honest peer has at most FH_AM_CREDITS
     * requests in flight to us from its service path, so we keep at most
     * revoked_cap = 2 * FH_AM_CREDITS per peer; beyond that (a peer that
     * keeps registrations on purpose) a revoked entry is freed at once and
     * a late deregistration of it is refused and logged like any unknown
     * handle. */
    strat_list_t revoked;
    uint32_t revoked_cap;
    strat_peer_t *peer;        /* [nranks] */
};

/* One rendezvous chunk of an operation (rendezvous.c). */
enum { RDV_FREE, RDV_ASKING, RDV_WAITING, RDV_RDMA, RDV_UNREG };
typedef struct rdv_slot {
    int state;                 /* RDV_*: what the chunk waits for */
    strat_wait_t w;            /* the target's reply */
    uint64_t token;
    uint64_t raddr;
    size_t off, len;
    uint64_t key[2];
    fh_ctr_t rdma;             /* its RDMA (path lock) */
    int status;
} rdv_slot_t;

/* A put/get in progress (see "Completion"); on its path's strat_ops stack
 * (lock-free) or owned by the one thread that took the stack whole. */
typedef struct strat_xop {
    struct strat_xop *next;
    fh_ctr_t *uctr;            /* the caller's counter */
    bool is_put;
    int rank;
    char *local;
    struct fh_mr *lmr;
    bool own_lmr;              /* lmr is temporary: released when over */
    uint64_t remote;
    size_t n;
    int status;                /* first error, else FH_OK */
    /* bounce (bounce.c): one waiter for all chunk replies */
    strat_wait_t w;
    uint64_t token;
    size_t nchunks, sent;
    /* rendezvous (rendezvous.c): chunks [tail, head) asked for, in order */
    uintptr_t seg_base, seg_end;
    size_t issued;
    unsigned head, tail;
    rdv_slot_t slot[RDV_DEPTH];
} strat_xop_t;

/* ---- strat_common.c */
/* Registers a waiter for one reply-bearing token; returns the token or 0
 * when out of memory.  The caller removes it with strat_wait_end. */
uint64_t strat_wait_begin(struct fh_strat *s, int peer, strat_wait_t *w, uint32_t pending);
void     strat_wait_end(struct fh_strat *s, int peer, uint64_t token);
/* The waiter of (peer, token) or NULL; s->lock held. */
strat_wait_t *strat_wait_find(struct fh_strat *s, int peer, uint64_t token);
void     strat_list_push(strat_list_t *l, strat_entry_t *e);
void     strat_list_remove(strat_list_t *l, strat_entry_t *e);
/* ---- rendezvous.c, bounce.c: the two kinds of operation.  start fills
 * in its part of x (FH_OK, or an error and nothing started); step moves x
 * on without waiting and returns true once x is over (x->status final, no
 * reply or RDMA of it outstanding, no waiter registered).  No lock held. */
void strat_rdv_register_handlers(void);
int  strat_rdv_start(struct fh_strat *s, strat_xop_t *x);
bool strat_rdv_step(fh_thread_t *t, struct fh_strat *s, strat_xop_t *x);

void strat_bounce_register_handlers(void);
int  strat_bounce_start(struct fh_strat *s, strat_xop_t *x);
bool strat_bounce_step(fh_thread_t *t, struct fh_strat *s, strat_xop_t *x);

/* ---- strat_common.c (FH_REG_STRATEGY=rendezvous | rendezvous-cache | bounce) */
/* Creates rt->strat (the table's init hook); after connect. */
int  fh_strat_init(fh_core_t *rt);
/* Deregisters everything it registered; before the segments are unmapped.
 * Returns the number of deregistrations that failed (the segments must then
 * stay mapped: fh_seg_fini). */
unsigned fh_strat_fini(fh_core_t *rt);
/* A put/get of n bytes with [remote, remote+n) validated in rank's segment,
 * rank != us, counted into ctr like every xfer hook: it starts what it can and
 * returns; fh_strat_progress does the rest (waits for nothing).  own_lmr:
 * lmr is a temporary registration (fh_rma_local_mr) that the operation
 * releases once it is over -- also when the call fails. */
int  fh_strat_xfer(fh_thread_t *t, bool is_put, int rank, char *local, struct fh_mr *lmr,
                   uint64_t remote, size_t n, fh_ctr_t *ctr, bool own_lmr);
/* Moves the strategy operations of the calling thread's path on (sends
 * what credits allow, posts RDMA whose key arrived, completes what is
 * done).  No lock held, not in a handler; no-op without rt->strat. */
void fh_strat_progress(fh_thread_t *t);
/* Frees the operation records left on p (teardown). */
void fh_strat_path_fini(fh_path_base_t *p);
/* reg.h link_lost: rendezvous key requests (sent on the service path, one
 * reply each) to rank fail with FH_ERR_PEER_DEAD, and so do bounce
 * operations to rank whose chunks leave on p: pending drops to 0 at once
 * (strat_bounce_step then sends no more chunks); late replies find no
 * waiting request and are dropped. */
void fh_strat_link_lost(fh_path_base_t *p, int rank);
/* Our segment piece [base, base+size) is being destroyed (after the
 * destroy barrier, unpublished, no handler still using it): deregisters
 * everything registered inside it for peers, released or not -- before it
 * is unmapped.  Returns the number of deregistrations that failed (the
 * piece must then stay mapped). */
unsigned fh_strat_seg_destroy(fh_core_t *rt, uintptr_t base, size_t size);
/* Adds the strategy's counters for peer (or all peers if peer == our rank). */
void fh_strat_stats(fh_core_t *rt, int peer, fh_peer_stats_t *out);

#endif /* FH_STRATEGY_H */
