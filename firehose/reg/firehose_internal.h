/*
 * firehose_internal.h -- the state shared by the three files of
 * FH_REG_STRATEGY=firehose (docs/firehose-cache.md, "Integration"):
 *
 *   firehose.c       the per-rank cache (fhc_t) behind g->lock: env callbacks,
 *               the move AMs and their outbox, life cycle, stats
 *   firehose_xfer.c  asynchronous transfers: per-chunk op records, the per-path
 *               ready lists, posting, completion
 *   firehose_hit.c   the hit layer: per-thread caches of firehose references,
 *               reclaimed for peers whose budget queue is not empty
 *
 * Lock order (never the reverse): path lock -> g->lock.  Nothing sends,
 * polls, or takes a path lock while holding g->lock.  g->flush_lock is
 * taken with no other lock held.
 */
#ifndef FH_REG_INTERNAL_H
#define FH_REG_INTERNAL_H

#include <stdbool.h>

#include "firehose/cache/fhc.h"
#include "firehose/cache/fhc_wire.h"
#include "firehose/reg/services.h"
#include "firehose/util/map.h"

/* Largest move reply: header + FHC_MAX_PIECES regions (fhc_wire.h). */
#define REG_REPLY_MAX (FHC_REP_HDR + FHC_REP_REGION * FHC_MAX_PIECES)
/* Move request without data: header + FHC_MAX_PIECES releases. */
#define REG_REQ_FIXED (FHC_REQ_HDR + 8u * FHC_MAX_PIECES)

/* Local pins of one chunk (firehose_local.c). */
#define FH_REG_LPIN_MAX 2     /* a chunk (<= R bytes) meets <= 2 local frames */
typedef struct fh_reg_lpin {
    uintptr_t base;
    size_t len;
    unsigned npins;
    fhc_local_t pin[FH_REG_LPIN_MAX];
    struct fh_mr *temp;       /* fallback: a registration of exactly the range */
} fh_reg_lpin_t;

typedef struct reg_msg {
    struct reg_msg *next;
    uint32_t peer;
    size_t len;
    unsigned char bytes[];
} reg_msg_t;

typedef struct reg_span {
    uintptr_t base, end;
} reg_span_t;

struct reg_tc;
struct reg_ent;

struct fh_reg {
    pthread_mutex_t lock;          /* the cache, outbox, capture, spans, tcs */
    fhc_t *c;
    reg_msg_t *out, **out_tail;    /* requests to send */
    pthread_mutex_t flush_lock;    /* one sender at a time: keeps order */
    int capturing;                 /* inside the MOVE_REQ handler */
    uint32_t cap_peer;             /* ... of this peer (its reply is captured) */
    size_t cap_len;
    unsigned char cap[REG_REPLY_MAX];
    reg_span_t *spans;             /* exposed segment memory (allowed()) */
    size_t nspans, capspans;
    reg_span_t *retired;           /* unmapped at fini */
    size_t nretired, capretired;
    size_t bucket, M, maxvictim;
    size_t R;                      /* frame size: chunks never cross one */
    int check;                     /* FH_REG_CHECK: see reg_check() */
    unsigned bshift;               /* log2(bucket) */
    int nranks;

    /* Hit layer (firehose_hit.c), under lock. */
    struct reg_tc *tcs;            /* every thread cache ever made */
    struct reg_hpeer {
        uint8_t swept;             /* see reg_hit_budget() */
        uint64_t revoked_busy;     /* REVOKEs that found a busy entry */
        uint64_t copies;           /* copy messages sent to / served for it */
        uint64_t copy_refused;     /* its copy requests we refused */
    } *hpeer;                      /* [nranks] */

    /* Chunks carried by copies (firehose_copy.c), under lock. */
    struct reg_copy *copies;       /* in flight, oldest first */
    uint64_t copy_id;              /* the last id given */
    unsigned ncopies;              /* on the list (atomic stores: read
                                      unlocked by fh_reg_flush) */
};

/* ---- hit layer entries (firehose_hit.c) */

/* Entry state word (reg_ent_t.state), see firehose_hit.c:
 *   < REG_ENT_WANTED      LIVE, value = RDMA chunks in flight through it
 *   REG_ENT_WANTED | n    LIVE but a budget queue wants it back: no new hits;
 *                         the release that brings n to 0 returns it
 *   REG_ENT_RECLAIMING    being returned to fhc (under g->lock)
 *   REG_ENT_DEAD          returned; the owner unmaps and recycles it
 *   REG_ENT_FREE          owner-private, not mapped */
#define REG_ENT_WANTED     0x40000000u
#define REG_ENT_RECLAIMING 0xfffffffdu
#define REG_ENT_DEAD       0xfffffffeu
#define REG_ENT_FREE       0xffffffffu

/* The hot part of an entry: one cache line, written by the owner thread
 * (hits), the thread completing its RDMA (usually the owner) and, only
 * while a budget queue waits, a reclaimer. */
typedef struct reg_ent {
    _Atomic uint32_t state;
    uint32_t peer;
    uintptr_t base, end;           /* the firehose (region) [base, end) */
    uint64_t key[2];
    struct reg_tc *tc;
#ifdef FH_TEST_HOOKS
    /* Set (release) after a REVOKE made this busy entry WANTED; a hit that
     * reads it set and still succeeds broke the rule (FH_TP_HIT_REVOKED). */
    _Atomic uint32_t revoked;
#endif
} __attribute__((aligned(64))) reg_ent_t;

/* ---- op records (firehose_xfer.c) */

/* One chunk of a put/get in flight.  Allocated at submit, freed when its
 * last RDMA piece completed (or at once for errors and put-in-move).
 * Posted and completed on `path` (under its lock); ready() may run on any
 * thread, under g->lock, and only pushes it onto path->reg_ready. */
typedef struct reg_xop {
    fh_ctr_t pc;                   /* first member: the pieces in flight (+1 while
                                      posting); pc.compl is every piece's op_ctx */
    struct reg_xop *next;          /* ready list / retry list / held list */
    fh_path_base_t *path;
    fh_ctr_t *uctr;                /* the caller's: stack, handle or NBI */
    reg_ent_t *ent;                /* hit-layer reference, or NULL: fhc op */
    char *local;                   /* buffer of the whole chunk */
    struct fh_mr *lmr;             /* the caller's registration of it, or NULL */
    bool lpinned;                  /* lp is set up (fh_reg_local_pin ran) */
    int rank;
    bool is_put;
    bool noxfer;                   /* fh_reg_hit_warm: acquire, no RDMA */
    size_t bulk;                   /* bytes of the path's bulk budget this
                                      chunk holds (FH_BULK_*): its length from
                                      its first post to its last completion */
    int status;                    /* from ready(): FHC_HIT, DONE_IN_MOVE, <0;
                                      REG_COPY_DONE (firehose_copy.c) */
    int copy_rc;                   /* REG_COPY_DONE: the copies' status */
    unsigned nposted;              /* pieces posted completely so far */
    size_t poff;                   /* bytes of piece[nposted] posted */
    fhc_op_t op;                   /* pieces; fhc's record when ent == NULL */
    fh_reg_lpin_t lp;              /* local pins (firehose_local.c), when lpinned */
} reg_xop_t;

/* FH_REG_CHECK=1: fhc's invariants for peer (both sides), after a cache
 * call that touched it (g->lock held).  A violation is fatal. */
static inline void reg_check(struct fh_reg *g, uint32_t peer)
{
    char why[256];
    if (g->check && fhc_check_peer(g->c, peer, why, sizeof why) != 0)
        fh_fatal("firehose cache: invariant broken (%s): %s", FH_RANK_NAME((int)peer), why);
}

/* ---- firehose.c */
/* (fh_reg_flush, internal.h: sends queued cache messages.) */

/* ---- firehose_xfer.c */
/* Puts x on its path's ready list (any thread, any lock): the path's next
 * poll drains it (fh_reg_drain_locked). */
void reg_xop_push_ready(reg_xop_t *x);

/* ---- firehose_copy.c: FH_SEGMENT=everything, chunks the target will not
 * register, carried by copies through AMs */
/* A chunk's status after its copies (reg_xop_t.status; not an FHC_* value). */
#define REG_COPY_DONE 3
/* x (p->lock held, on no list) was refused by the cache with
 * FHC_ERR_OUT_OF_SEGMENT: true when it now travels by copies (it completes
 * through p's ready list with REG_COPY_DONE), false when it fails as it is
 * (not FH_SEGMENT=everything, no transfer, out of memory). */
bool reg_copy_start(fh_path_base_t *p, reg_xop_t *x);
/* Sends the copy messages credits allow (from fh_reg_flush: outside
 * handlers, no lock held, g->flush_lock held). */
void reg_copy_flush(fh_thread_t *t, struct fh_reg *g);
/* The service paths' link with rank is lost: its copies fail with status
 * (g->lock held).  Returns how many transfers failed. */
unsigned reg_copy_lost(struct fh_reg *g, int rank, int status);
void reg_copy_register_handlers(void);
/* fh_reg_fini (g->lock held): frees what is left (after fh_finalize's
 * quiet, nothing). */
void reg_copy_fini(struct fh_reg *g);

/* ---- firehose_hit.c (all under g->lock unless said otherwise) */
/* A peer may have a budget queue now: return idle hit-layer references on
 * it and mark busy ones wanted.  Call after every fhc call on that peer
 * (it also runs reg_check). */
void reg_hit_budget(struct fh_reg *g, uint32_t peer);
/* A REVOKE from peer was just given to fhc: return idle entries holding a
 * revoked firehose of peer, mark busy ones WANTED (returned when their
 * RDMA completes), so fhc's ack waits for that RDMA.  Then as
 * reg_hit_budget. */
void reg_hit_revoke(struct fh_reg *g, uint32_t peer);
/* After fhc_acquire(&x->op) returned FHC_HIT with one piece: moves the
 * reference into a new entry of the thread's cache (x->ent set, x->op
 * released), or leaves x alone when no entry is available. */
void reg_hit_install(struct fh_reg *g, fh_thread_t *t, reg_xop_t *x);
/* The calling thread's hit lookup of [raddr, +len) missed: return its idle
 * entries on that span to fhc, so that fhc sees firehoses used by nobody
 * and may merge them into one region (fhc_initiator_step.c, absorb) instead of
 * the chunk going out as one RDMA per region for as long as it stays
 * resident.  Busy entries stay.  g->lock held, before fhc_acquire. */
void reg_hit_drop_span(struct fh_reg *g, fh_thread_t *t, uint32_t peer, uintptr_t raddr,
                       size_t len);
/* Lock-free lookup + reference on the calling thread's cache. */
reg_ent_t *reg_hit_lookup(fh_thread_t *t, uint32_t peer, uintptr_t raddr, size_t len);
/* Drops one reference (any thread; no lock, or a path lock, held). */
void reg_hit_unref(reg_ent_t *e);
/* The calling thread's cache, created on first use (takes g->lock). */
struct reg_tc *reg_hit_tc(fh_thread_t *t);
/* fh_reg_fini: frees every cache (fhc is being destroyed). */
void reg_hit_fini(struct fh_reg *g);
/* Adds hit-layer hits towards peer (all peers if peer < 0). */
uint64_t reg_hit_count(struct fh_reg *g, int peer);

/* ================= the strategy's functions (FH_REG_STRATEGY=firehose) */

/* ---- firehose.c (FH_REG_STRATEGY=firehose) */
/* Creates rt->reg (collective: agrees on the derived M/MAXVICTIM through the
 * bootstrap).  Called in fh_init after connect. */
int  fh_reg_init(fh_core_t *rt);
/* Destroys the cache (unpins everything) and unmaps retired segment memory;
 * before the conduit closes. */
void fh_reg_fini(fh_core_t *rt);
/* Our segment memory [base, base+len) may / may no longer be registered for
 * peers.  unexpose_and_retire keeps the mapping until fh_reg_fini (regions
 * may still cover it; the memory must not be reused while they exist):
 * for fh_finalize and failed creations.  fh_reg_seg_release (segment
 * destroy, after its barrier; no lock held, not in a handler) instead
 * invalidates every cached region of it and waits, polling, until every
 * peer holding a firehose on it acknowledged the revocation: at return no
 * peer can reach it and the caller may unmap it. */
int  fh_reg_expose(fh_core_t *rt, void *base, size_t len);
void fh_reg_unexpose_and_retire(fh_core_t *rt, void *base, size_t len);
void fh_reg_seg_release(fh_core_t *rt, fh_thread_t *t, void *base, size_t len);
/* The cache's environment: its callbacks with g as their argument
 * (firehose_env.c). */
fhc_env_t fh_reg_env(struct fh_reg *g);
/* The strategy table's segment entries (reg.h seg_expose, seg_release,
 * seg_reprotect), in firehose_seg.c. */
int fh_reg_seg_expose(fh_core_t *rt, void *base, size_t len, struct fh_mr **mr,
                      fh_rkey_t *rkey);
unsigned fh_reg_seg_release_op(fh_core_t *rt, fh_thread_t *t, void *base, size_t len);
void fh_reg_seg_reprotect(fh_core_t *rt, fh_thread_t *t, void *base, size_t len,
                          double deadline);
size_t fh_reg_bucket(const fh_core_t *rt);
/* M: the cache's agreed value under firehose, else what it would default to. */
size_t fh_reg_m(const fh_core_t *rt);
/* A put/get of n bytes with [remote, remote+n) validated in rank's segment,
 * rank != us.  Non-blocking: every chunk counts one in ctr->pending (and in
 * path->inflight) until it completed, with its error if any; a chunk that
 * misses proceeds when its move reply arrives.  Returns FH_OK, or an error
 * for a chunk that could not even be submitted (earlier chunks still
 * complete into ctr).  No lock held, not in a handler. */
int  fh_reg_xfer(fh_thread_t *t, bool is_put, int rank, char *local, struct fh_mr *lmr,
                 uint64_t remote, size_t n, fh_ctr_t *ctr);
/* Drains p's ready list: posts chunks whose firehoses are ready.  p->lock
 * held; called at the end of every poll of p. */
void fh_reg_drain_locked(fh_path_base_t *p);
/* Frees p's recycled chunk records (path teardown). */
void fh_reg_path_fini(fh_path_base_t *p);
/* Progress duties of every thread (no lock held): sends queued moves. */
void fh_reg_progress(fh_thread_t *t);
/* Thread exit: returns the thread's cached firehose references. */
void fh_reg_thread_exit(fh_thread_t *t);

/* The hit layer alone (firehose_hit.c), for benchmarks and tests: lookup +
 * reference of a firehose covering [raddr, raddr+len) of rank in the
 * calling thread's cache.  FH_OK: h holds it (h->key is the region key)
 * until fh_reg_hit_release; no process-wide lock was taken and no line
 * shared with another thread's hits was written.  FH_REG_MISS: not cached
 * (nothing held).  fh_reg_hit_warm (blocking, may send a move) makes the
 * range cached if it fits in one firehose: FH_OK, or an error
 * (FH_ERR_INVALID if the range crosses a frame). */
#define FH_REG_MISS 1
typedef struct fh_reg_hit {
    struct reg_ent *ent;
    uintptr_t raddr;
    size_t len;
    uint64_t key[2];
} fh_reg_hit_t;
int  fh_reg_hit_acquire(fh_thread_t *t, int rank, uintptr_t raddr, size_t len,
                        fh_reg_hit_t *h);
void fh_reg_hit_release(fh_thread_t *t, fh_reg_hit_t *h);
int  fh_reg_hit_warm(fh_thread_t *t, int rank, uintptr_t raddr, size_t len);
/* Adds the cache's counters for peer (or all peers if peer == our rank). */
void fh_reg_stats(fh_core_t *rt, int peer, fh_peer_stats_t *out);
/* The cache under its lock (NULL after fh_reg_fini began); every
 * fh_reg_lock is paired with fh_reg_unlock.  Nothing that sends, polls or
 * takes a path lock may run in between. */
struct fhc *fh_reg_lock(fh_core_t *rt);
void fh_reg_unlock(fh_core_t *rt);
/* Sends queued cache messages (moves, revokes, acks) on the service path.
 * Outside handlers, no lock held; called from progress too. */
void fh_reg_flush(fh_thread_t *t);

/* ---- firehose_local.c: local pins through the cache (firehose_xfer.c's chunks) */
/* Makes [l, l+n) (n <= R) usable as the local side of a transfer: nothing
 * when the conduit needs no registration for it, else cached local pins,
 * else a temporary registration.  Takes the cache lock (a path lock may be
 * held); never waits on a peer.  Call after acquiring the remote
 * firehoses; release after the RDMA completed, before the firehoses. */
int  fh_reg_local_pin(fh_core_t *rt, bool is_put, char *l, size_t n, fh_reg_lpin_t *lp);
/* The registration to use for local address a (inside lp's range; NULL
 * when none is needed) and, in *max, how many bytes from a it covers:
 * a piece is posted in sub-pieces split there. */
struct fh_mr *fh_reg_local_mr(const fh_reg_lpin_t *lp, uintptr_t a, size_t *max);
void fh_reg_local_release(fh_core_t *rt, fh_reg_lpin_t *lp);

/* ---- firehose_revoke.c: freed or reused memory (with rt->reg only) */
int  fh_mm_init(fh_core_t *rt);          /* FH_MEMMON / FH_SEGMENT; sets rt->mm */
/* The firehose strategy's monitor (NULL without one): local_check.c shares
 * it, since a mapping can be watched by one userfaultfd only. */
struct fh_memmon *fh_mm_monitor(const fh_core_t *rt);
void fh_mm_fini(fh_core_t *rt);
/* env->pin: may a registration of [addr, +len) be cached?  Watches it with
 * the monitor.  Under the cache lock. */
int  fh_mm_may_cache(fh_core_t *rt, uintptr_t addr, size_t len, int exposed);
/* Turns pending monitor events into fhc_invalidate calls (REVOKEs are
 * queued).  Under the cache lock; cheap when nothing is pending. */
void fh_mm_sync_locked(fh_core_t *rt, struct fhc *c);
/* Runtime entry (fh_enter): sync, then wait (polling, no lock held) until
 * every REVOKE we sent is acknowledged. */
void fh_mm_entry(fh_thread_t *t);
/* may_publish (reg.h): sync, then whether no REVOKE we sent is still
 * unacknowledged.  Handler-safe; takes the cache lock briefly. */
bool fh_mm_may_publish(fh_core_t *rt);
/* reg.h peer_lost: fhc_peer_dead(rank) under the cache lock (the REVOKEs
 * it counts as acked no longer hold up runtime entry), logged at
 * FH_VERBOSE=1 with what was released. */
void fh_reg_peer_lost(fh_core_t *rt, int rank);
/* For the hit layer's inline check: the monitor's state word (NULL: no
 * monitor) and the value last processed; they differ while events wait. */
void fh_mm_hit_words(const fh_core_t *rt, const _Atomic uint64_t **state,
                     const _Atomic uint64_t **seen);

#endif /* FH_REG_INTERNAL_H */
