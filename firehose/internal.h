/*
 * internal.h -- state and module interfaces of the runtime core (firehose/).
 *
 * Modules
 *   init.c     fh_init/fh_finalize, the runtime object, thread -> path binding
 *   path.c     paths: locks, progress (polling), conduit upcalls
 *   am.c       active messages: handler table, credits, dispatch, replies
 *   rma.c      put/get (blocking, NB, NBI, strided), quiet
 *   atomic.c   remote atomics (over AMs)
 *   coll.c     barrier and allgather
 *   segment.c  segments and the remote address -> key lookup
 *   stats.c    per-peer counters
 *   reg.c      FH_REG_STRATEGY=firehose: the registration cache (cache/fhc.h)
 *              wired to the conduit, the move AMs and the RMA path
 *   reg_xfer.c   ... its asynchronous transfers
 *   reg_hit.c    ... its lock-free per-thread hit layer (reg_map.c: the hit
 *                layer's private map; shared state in reg_internal.h)
 *   reg_local.c  ... its local pins (local buffers on verbs-like conduits)
 *   revoke.c   freed or reused memory: the memory monitor (memmon.c), cache
 *              invalidation, the revocation wait; FH_SEGMENT=everything
 *   strategy.c FH_REG_STRATEGY=rendezvous | rendezvous-cache | bounce, the
 *              strategies kept for comparison (reg_rdv.c, reg_bounce.c;
 *              strategy.h)
 *
 * Paths.  Path 0 is the service path: peers send every AM request and every
 * RMA to it, and it sends replies.  Paths 1..npaths-1 are thread paths, bound
 * to threads on first use (FH_PATHS=independent); with FH_PATHS=shared every
 * thread uses path 0.  Each path has a mutex; a thread that owns its path
 * alone takes it uncontended, so the fast path shares no lock or written
 * cache line with other threads.  The service path is polled by any thread
 * that makes progress, with trylock.
 *
 * Lock order: the collective lock (coll.c) comes before every other lock; a
 * thread holds at most one path lock, except that while holding
 * its own path lock it may trylock the service path (never block on it).
 * Handlers run with the lock of the path that received the message; a request
 * handler's reply goes out on that same path (the service path), so no other
 * lock is needed.  The firehose cache lock (reg.c) comes after any path lock
 * and is never held while taking one.
 *
 * Flow control.  A path holds `credits[r]` for requests towards rank r's
 * service path (FH_AM_CREDITS each).  A request spends one.  The target
 * returns it in the header of the reply, or, for requests without a reply,
 * accumulates it in owed[] and sends an FH_AM_CREDIT packet once half the
 * window is owed or when it goes idle.  Hence at most FH_AM_CREDITS requests
 * per (path, target) are ever in flight, and each path can size its receive
 * space exactly (see fh_path_rx_msgs()).
 */
#ifndef FH_INTERNAL_H
#define FH_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "am_wire.h"
#include "cache/fhc.h"
#include "bootstrap.h"
#include "conduit.h"
#include "config.h"
#include "firehose.h"
#include "handle.h"
#include "log.h"

struct fh_segmap;
struct fh_reg;
struct fh_strat;
struct reg_xop;
struct reg_tc;
struct reg_ent;
struct fh_mm;

/* Relaxed single-writer counter update: the writer holds the path lock,
 * readers (fh_stats_peer) use relaxed loads. */
#define FH_STAT_ADD(field, v) \
    __atomic_store_n(&(field), __atomic_load_n(&(field), __ATOMIC_RELAXED) + (v), \
                     __ATOMIC_RELAXED)

/* A reply or credit packet that could not be sent yet (conduit said AGAIN);
 * flushed in order at the end of the next poll of the path. */
typedef struct fh_backlog {
    struct fh_backlog *next;
    int rank, rpath;
    size_t len;
    unsigned char bytes[];    /* header + payload */
} fh_backlog_t;

typedef struct fh_path {
    pthread_mutex_t lock;
    int index;
    struct fh_cpath *cp;
    struct fh_rt *rt;

    uint32_t *credits;        /* [nranks] requests we may still send */
    uint32_t *owed;           /* [nranks*npaths] credits owed (service path) */
    uint32_t owed_total;
    fh_backlog_t *backlog, **backlog_tail;

    fh_htable_t handles;
    uint64_t inflight;        /* RMA ops posted here and not completed */

    int nbound;               /* threads bound (protected by rt->bind_lock) */
    fh_peer_stats_t *stats;   /* [nranks], written under the path lock */
    int polling;              /* re-entrancy guard for poll on this path */
    uint64_t ndropped;        /* packets dropped here (log rate limit) */
    _Atomic int orphaned;     /* no thread bound any more and maybe work of
                                 an exited one in flight: fh_progress polls
                                 it until idle (path.c) */

    /* FH_REG_STRATEGY=firehose (reg_xfer.c): chunks whose firehoses became
     * ready, pushed by any thread under the cache lock (lock-free stack);
     * drained, and their RDMA posted, by whoever polls this path. */
    _Atomic(struct reg_xop *) reg_ready;
    struct reg_xop *reg_retry, **reg_retry_tail;  /* drained, not all posted */
    int reg_draining;
    struct reg_xop *reg_free;      /* finished chunk records kept for reuse */
    unsigned reg_nfree;            /* (~2 KiB each: malloc'd per chunk, they */
                                   /*  cost more than a hit; p->lock) */
    /* Transfers waiting for transmit resources (rma.c, p->lock). */
    struct fh_rma_pend *rma_pend, **rma_pend_tail;
    /* Comparison strategies' operations in progress (strategy.c) and NB
     * atomic requests waiting for a credit (atomic.c): lock-free stacks,
     * pushed by the path's threads, taken whole by whoever moves them on. */
    _Atomic(struct strat_xop *) strat_ops;
    _Atomic(struct atomic_defer *) atomic_defer;
} fh_path_t;

typedef struct fh_handler_entry {
    fh_am_handler_t fn;
    const char *name;
} fh_handler_entry_t;

typedef struct fh_rt {
    fh_config_t cfg;
    fh_boot_t *boot;
    int rank, nranks;
    int npaths;

    const fh_conduit_ops_t *cops;
    struct fh_conduit *conduit;
    fh_conduit_limits_t limits;

    fh_path_t *paths;         /* [npaths] */
    pthread_mutex_t bind_lock;
    pthread_key_t tls_key;

    size_t am_max_medium;
    size_t am_max_packet;

    _Atomic(struct fh_segmap *) segmap;   /* immutable snapshot, swapped */
    pthread_mutex_t seg_lock;             /* create/destroy */
    struct fh_segment *segs;              /* [cfg.max_segments] */
    struct fh_segmap *retired;            /* old snapshots, freed at finalize */

    pthread_mutex_t coll_lock;            /* one collective at a time (coll.c) */
    uint64_t barrier_epoch;
    _Atomic uint32_t barrier_arrived[64][2];
    _Atomic uint64_t barrier_sig[64][2][2];   /* signature range that arrived */

    struct fh_reg *reg;                   /* FH_REG_STRATEGY=firehose, else NULL */
    struct fh_strat *strat;               /* rendezvous, rendezvous-cache, bounce;
                                             else NULL (strategy.c) */
    struct fh_mm *mm;                     /* with reg: memory monitor glue (revoke.c) */

    _Atomic int norphans;                 /* paths with `orphaned` set */
    struct fh_peers *peers;               /* who is who on this host (peer.c) */

    _Atomic int finalizing;
} fh_rt_t;

/* Per-thread state. */
typedef struct fh_tls {
    fh_path_t *path;
    fh_ctr_t nbi;             /* this thread's NBI operations (updated by
                                 completions under path->lock) */
    uint64_t quiet_ops;       /* its NB and NBI operations in flight, NB
                                 atomics included: what fh_quiet waits for
                                 (fh_ctr owner_ops; path->lock) */
    uint32_t tid;             /* unique, for handle ownership */
    int in_handler;           /* depth of handler nesting */
    int bound;                /* path->nbound counted for us */
    struct reg_tc *reg_tc;    /* firehose hit layer (reg_hit.c), or NULL */
} fh_tls_t;

/* The runtime: set once by fh_init, cleared by fh_finalize. */
extern fh_rt_t *fh_rt;
extern fh_handler_entry_t fh_handlers[256];

/* ---- init.c */
/* The calling thread's state, binding a path on first use; NULL once the
 * thread-exit hook has released it (the thread is exiting: a call from a
 * later pthread-key destructor).  A thread that is polling, and hence any
 * handler, always has one. */
fh_tls_t *fh_tls(void);
/* The calling thread's state if it has one, else NULL; never binds. */
fh_tls_t *fh_tls_peek(void);
/* Common entry check: initialized, the thread not exiting (FH_ERR_STATE)
 * and not inside a handler.  Returns the thread's state or NULL with *err
 * set (and the error text recorded). */
fh_tls_t *fh_enter(const char *fn, int *err);
int fh_check_rank(const char *fn, int rank);

/* ---- agree.c: collective, in fh_init right after the bootstrap opens.
 * FH_OK when every rank has the same value of every same_everywhere
 * setting; else FH_ERR_CONFIG on every rank, fh_last_error() naming the
 * first such variable, rank 0 and a rank that differs (and rank 0 logs
 * it); FH_ERR_BOOTSTRAP/FH_ERR_NO_MEMORY if the exchange itself fails. */
int fh_config_agree(fh_boot_t *boot, const fh_config_t *cfg);

/* ---- peer.c: the runtime's own dead-peer check (no launcher needed) */
/* Collective, in fh_init: every rank's host identity, pid, start time. */
int  fh_peer_init(fh_rt_t *rt);
void fh_peer_fini(fh_rt_t *rt);
/* At most once a second (any thread): a peer on this host whose process is
 * gone ends this process with FH_EXIT_PEER_DEAD and a message naming it. */
void fh_peer_check(fh_rt_t *rt);

/* ---- path.c */
int  fh_path_setup(fh_rt_t *rt, fh_path_t *p, int index);
void fh_path_teardown(fh_rt_t *rt, fh_path_t *p);
unsigned fh_path_rx_msgs(const fh_rt_t *rt, int index);
/* One round of progress for the calling thread: polls its path, (trylock)
 * the service path and paths whose threads exited with work in flight, and
 * sends queued cache messages.  Must be called without holding any path
 * lock. */
void fh_progress(fh_tls_t *t);
/* The progress rule of every loop that waits (include/firehose.h,
 * "Progress"): one round of fh_progress; once the wait has lasted
 * (*idle rounds), also trylock-polls every other path of the rank, so what
 * a thread that stopped calling in (or exited) left in flight completes --
 * the firehoses, budget and REVOKE acks its RDMA holds, replies to it;
 * then fh_wait_idle.  *idle starts at 0.  No lock held. */
void fh_wait_round(fh_tls_t *t, unsigned *idle);
/* The last thread bound to p exited (fh_path_orphan): its replies and
 * completions may still arrive, and fh_progress polls p until it is idle or
 * a thread binds to it again (fh_path_adopt).  Atomic; no lock needed. */
void fh_path_orphan(fh_path_t *p);
void fh_path_adopt(fh_path_t *p);
/* Poll path p; caller holds p->lock. */
void fh_path_poll_locked(fh_path_t *p);
/* The wait policy of every loop that polls until something arrives: call it
 * after each round of progress that found nothing, with *idle counting those
 * rounds (start at 0).  Once more than FH_WAIT_SPIN rounds in a row were idle
 * it gives the core away (sched_yield) -- ranks often outnumber cores --
 * unless FH_WAIT_SPIN is -1.  Takes no lock. */
void fh_wait_idle(unsigned *idle);
/* Poll path p (lock held) and trylock-poll the service path: what a loop
 * waiting for transmit resources must do, since freeing them may need the
 * peer to see our service path progress (e.g. connection setup). */
void fh_progress_locked(fh_path_t *p);
extern const fh_conduit_upcalls_t fh_upcalls;

/* ---- am.c */
/* A packet from (src_rank, src_path) as the conduit verified them. */
void fh_am_on_packet(fh_path_t *p, int src_rank, int src_path, const void *buf,
                     size_t len);
/* Counts a dropped packet in src_rank's am_dropped (-1: from outside the job,
 * counted in our own row) and logs it, rate-limited per path. */
void fh_am_drop(fh_path_t *p, int src_rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sends a request from the calling thread's path; blocks only for credits. */
int  fh_am_send_request(fh_tls_t *t, int rank, unsigned kind, unsigned handler,
                        const void *payload, size_t len, uint64_t long_dst,
                        const uint64_t *args, unsigned nargs);
/* Sends an already-encoded packet on path p (lock held) or queues it. */
void fh_am_send_or_queue(fh_path_t *p, int rank, int rpath,
                         const void *hdr, size_t hdr_len,
                         const void *payload, size_t len);
void fh_am_flush_backlog(fh_path_t *p);
void fh_am_flush_credits(fh_path_t *p, bool all);
/* Medium request with a runtime-internal handler, sent on path p (not the
 * caller's own path; the service path for the firehose moves).  Not from a
 * handler, and without holding any lock. */
int  fh_am_send_request_on(fh_tls_t *t, fh_path_t *p, int rank, unsigned handler,
                           const void *payload, size_t len);
/* A short or medium request on path p that waits for nothing: FH_ERR_AGAIN
 * (nothing sent, no error text) when p has no credit towards rank or the
 * conduit no transmit resources; the caller retries from progress.  Not to
 * ourselves, not from a handler, no lock held. */
int  fh_am_try_request(fh_tls_t *t, fh_path_t *p, int rank, unsigned kind,
                       unsigned handler, const void *payload, size_t len,
                       const uint64_t *args, unsigned nargs);

/* Runtime-internal handler indices (< FH_AM_USER_FIRST). */
enum {
    FH_H_ATOMIC_REQ = 1,
    FH_H_ATOMIC_REP = 2,
    FH_H_BARRIER    = 3,
    FH_H_NOP        = 4,
    FH_H_MOVE_REQ   = 5,      /* firehose cache move request (reg.c) */
    FH_H_MOVE_REP   = 6,      /* ... and its reply */
    FH_H_RDV_REQ    = 7,      /* rendezvous (de)registration request (reg_rdv.c) */
    FH_H_RDV_REP    = 8,      /* ... and its reply */
    FH_H_BOUNCE_PUT = 9,      /* bounce: put payload (reg_bounce.c) */
    FH_H_BOUNCE_GET = 10,     /* bounce: get request */
    FH_H_BOUNCE_REP = 11      /* bounce: put ack / get data */
};
/* Handlers of the registration strategies' own protocols: their messages
 * count in reg_moves, not in am_sent/am_received. */
static inline int fh_am_handler_is_reg(unsigned h)
{
    return h >= FH_H_MOVE_REQ && h <= FH_H_BOUNCE_REP;
}
/* Short reply with a runtime-internal handler index. */
int fh_am_reply_internal(fh_token_t tok, unsigned h, const uint64_t *args, unsigned nargs);
/* Medium reply with a runtime-internal handler index. */
int fh_am_reply_medium_internal(fh_token_t tok, unsigned h, const void *src, size_t nbytes);
/* ... with arguments too. */
int fh_am_reply_medium_args_internal(fh_token_t tok, unsigned h, const void *src,
                                     size_t nbytes, const uint64_t *args, unsigned nargs);
void fh_am_register_internal(unsigned index, fh_am_handler_t fn, const char *name);
/* The path whose lock the current handler runs under (valid in handlers). */
fh_path_t *fh_token_path(fh_token_t tok);

/* ---- rma.c */
/* Posts [chunks of] a put/get on the calling thread's path, counting into
 * ctr.  Arguments already validated; rank != self.  Never waits for
 * transmit resources: what the conduit cannot take now is queued on the
 * path (counted in ctr) and posted by its next poll. */
int  fh_rma_post(fh_tls_t *t, bool is_put, int rank, void *local, struct fh_mr *lmr,
                 uint64_t remote, size_t n, const fh_rkey_t *rkey, fh_ctr_t *ctr);
/* The registration to pass as lmr for a local buffer: NULL when the conduit
 * does not need one; the covering segment's when the buffer is in one of our
 * segments; otherwise a temporary registration (*temp = true) that the
 * caller must release with fh_rma_local_mr_release() once the operation has
 * completed -- such operations are therefore completed before the call
 * returns.  (The firehose cache's local pins replace the temporary path.) */
int  fh_rma_local_mr(const char *fn, bool is_put, const void *local, size_t n,
                     struct fh_mr **lmr, bool *temp);
void fh_rma_local_mr_release(struct fh_mr *lmr);
/* Polls until ctr->pending == 0 (fh_wait_round); returns ctr->status. */
int  fh_wait_ctr(fh_tls_t *t, fh_ctr_t *ctr);
/* Polls until every NB/NBI operation of t is complete (t->quiet_ops == 0):
 * fh_quiet, and the thread-exit hook. */
int  fh_wait_quiet(fh_tls_t *t);
/* Posts the transfers queued on p for lack of transmit resources, in order,
 * until the conduit has none again (p->lock held; from fh_path_poll_locked). */
void fh_rma_drain_locked(fh_path_t *p);
/* Frees what is still queued on p (teardown). */
void fh_rma_path_fini(fh_path_t *p);
/* fh_rma_post without the per-peer put/get counters (count = false). */
int  fh_rma_post_ex(fh_tls_t *t, bool is_put, int rank, void *local, struct fh_mr *lmr,
                    uint64_t remote, size_t n, const fh_rkey_t *rkey, fh_ctr_t *ctr,
                    bool count);
/* What every transfer to a remote segment goes through: fh_rma_post, or with
 * FH_REG_STRATEGY=firehose fh_reg_xfer.  Either way the transfer counts into
 * ctr and may still be in flight at return.  rkey is ignored in the
 * firehose case. */
int  fh_rma_xfer(fh_tls_t *t, bool is_put, int rank, void *local, struct fh_mr *lmr,
                 uint64_t remote, size_t n, const fh_rkey_t *rkey, fh_ctr_t *ctr);

/* Counts one put/get of n bytes to rank in p's per-peer stats (p->lock held). */
void fh_stat_rma(fh_path_t *p, int rank, bool is_put, size_t n);

/* ---- segment.c */
typedef struct fh_seg_range {
    uintptr_t base, end;      /* [base, end) */
    fh_rkey_t rkey;
    fh_seg_t seg;
    struct fh_mr *mr;         /* our own pieces only: the local registration */
} fh_seg_range_t;

/* Looks up [addr, addr+n) of `rank`; returns FH_OK and the range, or
 * FH_ERR_OUT_OF_SEGMENT / FH_ERR_OVERFLOW.  Lock-free. */
int  fh_seg_find(fh_rt_t *rt, int rank, uintptr_t addr, size_t n,
                 fh_seg_range_t *out);
int  fh_seg_init(fh_rt_t *rt);
/* At finalize, after fh_strat_fini (every registration for peers is gone):
 * deregisters pin-everything pieces and unmaps the segments -- unless
 * keep_mapped (a deregistration failed: the memory must never be reused
 * while a key may still name it). */
void fh_seg_fini(fh_rt_t *rt, bool keep_mapped);

/* ---- reg.c (FH_REG_STRATEGY=firehose) */
/* Creates rt->reg (collective: agrees on the derived M/MAXVICTIM through the
 * bootstrap).  Called in fh_init after connect. */
int  fh_reg_init(fh_rt_t *rt);
/* Destroys the cache (unpins everything) and unmaps retired segment memory;
 * before the conduit closes. */
void fh_reg_fini(fh_rt_t *rt);
/* Our segment memory [base, base+len) may / may no longer be registered for
 * peers.  unexpose_and_retire keeps the mapping until fh_reg_fini (regions
 * may still cover it; the memory must not be reused while they exist):
 * for fh_finalize and failed creations.  fh_reg_seg_release (segment
 * destroy, after its barrier; no lock held, not in a handler) instead
 * invalidates every cached region of it and waits, polling, until every
 * peer holding a firehose on it acknowledged the revocation: at return no
 * peer can reach it and the caller may unmap it. */
int  fh_reg_expose(fh_rt_t *rt, void *base, size_t len);
void fh_reg_unexpose_and_retire(fh_rt_t *rt, void *base, size_t len);
void fh_reg_seg_release(fh_rt_t *rt, fh_tls_t *t, void *base, size_t len);
size_t fh_reg_bucket(const fh_rt_t *rt);
/* What this host lets us pin: min(RLIMIT_MEMLOCK, conduit limit, 2/3 RAM). */
size_t fh_reg_pinnable(const fh_rt_t *rt);
/* M: the cache's agreed value under firehose, else what it would default to. */
size_t fh_reg_m(const fh_rt_t *rt);
/* A put/get of n bytes with [remote, remote+n) validated in rank's segment,
 * rank != us.  Non-blocking: every chunk counts one in ctr->pending (and in
 * path->inflight) until it completed, with its error if any; a chunk that
 * misses proceeds when its move reply arrives.  Returns FH_OK, or an error
 * for a chunk that could not even be submitted (earlier chunks still
 * complete into ctr).  No lock held, not in a handler. */
int  fh_reg_xfer(fh_tls_t *t, bool is_put, int rank, char *local, struct fh_mr *lmr,
                 uint64_t remote, size_t n, fh_ctr_t *ctr);
/* RMA completions whose op_ctx has this bit set belong to reg_xfer.c (a
 * chunk record, not an fh_ctr); path.c hands them to fh_reg_piece_done. */
#define FH_OPCTX_REG ((uintptr_t)1)
void fh_reg_piece_done(fh_path_t *p, void *op_ctx, int status);
/* Drains p's ready list: posts chunks whose firehoses are ready.  p->lock
 * held; called at the end of every poll of p. */
void fh_reg_drain_locked(fh_path_t *p);
/* Frees p's recycled chunk records (path teardown). */
void fh_reg_path_fini(fh_path_t *p);
/* Progress duties of every thread (no lock held): sends queued moves. */
void fh_reg_progress(fh_tls_t *t);
/* Thread exit: returns the thread's cached firehose references. */
void fh_reg_thread_exit(fh_tls_t *t);

/* The hit layer alone (reg_hit.c), for benchmarks and tests: lookup +
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
int  fh_reg_hit_acquire(fh_tls_t *t, int rank, uintptr_t raddr, size_t len,
                        fh_reg_hit_t *h);
void fh_reg_hit_release(fh_tls_t *t, fh_reg_hit_t *h);
int  fh_reg_hit_warm(fh_tls_t *t, int rank, uintptr_t raddr, size_t len);
/* Adds the cache's counters for peer (or all peers if peer == our rank). */
void fh_reg_stats(fh_rt_t *rt, int peer, fh_peer_stats_t *out);
/* The cache under its lock (NULL after fh_reg_fini began); every
 * fh_reg_lock is paired with fh_reg_unlock.  Nothing that sends, polls or
 * takes a path lock may run in between. */
struct fhc *fh_reg_lock(fh_rt_t *rt);
void fh_reg_unlock(fh_rt_t *rt);
/* Sends queued cache messages (moves, revokes, acks) on the service path.
 * Outside handlers, no lock held; called from progress too. */
void fh_reg_flush(fh_tls_t *t);

/* ---- reg_local.c: local pins through the cache (reg_xfer.c's chunks) */
#define FH_REG_LPIN_MAX 2     /* a chunk (<= R bytes) meets <= 2 local frames */
typedef struct fh_reg_lpin {
    uintptr_t base;
    size_t len;
    unsigned npins;
    fhc_local_t pin[FH_REG_LPIN_MAX];
    struct fh_mr *temp;       /* fallback: a registration of exactly the range */
} fh_reg_lpin_t;
/* Makes [l, l+n) (n <= R) usable as the local side of a transfer: nothing
 * when the conduit needs no registration for it, else cached local pins,
 * else a temporary registration.  Takes the cache lock (a path lock may be
 * held); never waits on a peer.  Call after acquiring the remote
 * firehoses; release after the RDMA completed, before the firehoses. */
int  fh_reg_local_pin(fh_rt_t *rt, bool is_put, char *l, size_t n, fh_reg_lpin_t *lp);
/* The registration to use for local address a (inside lp's range; NULL
 * when none is needed) and, in *max, how many bytes from a it covers:
 * a piece is posted in sub-pieces split there. */
struct fh_mr *fh_reg_local_mr(const fh_reg_lpin_t *lp, uintptr_t a, size_t *max);
void fh_reg_local_release(fh_rt_t *rt, fh_reg_lpin_t *lp);

/* ---- revoke.c: freed or reused memory (with rt->reg only) */
int  fh_mm_init(fh_rt_t *rt);          /* FH_MEMMON / FH_SEGMENT; sets rt->mm */
void fh_mm_fini(fh_rt_t *rt);
/* env->pin: may a registration of [addr, +len) be cached?  Watches it with
 * the monitor.  Under the cache lock. */
int  fh_mm_may_cache(fh_rt_t *rt, uintptr_t addr, size_t len, int exposed);
/* Turns pending monitor events into fhc_invalidate calls (REVOKEs are
 * queued).  Under the cache lock; cheap when nothing is pending. */
void fh_mm_sync_locked(fh_rt_t *rt, struct fhc *c);
/* Runtime entry (fh_enter): sync, then wait (polling, no lock held) until
 * every REVOKE we sent is acknowledged. */
void fh_mm_entry(fh_tls_t *t);
uint64_t fh_mm_invalidations(const fh_rt_t *rt);
/* For the hit layer's inline check: the monitor's state word (NULL: no
 * monitor) and the value last processed; they differ while events wait. */
void fh_mm_hit_words(const fh_rt_t *rt, const _Atomic uint64_t **state,
                     const _Atomic uint64_t **seen);
/* 1 iff every page of [addr, +len) (page-aligned) is mapped. */
int  fh_mm_mapped(uintptr_t addr, size_t len);

/* ---- strategy.c (FH_REG_STRATEGY=rendezvous | rendezvous-cache | bounce) */
/* Creates rt->strat for those strategies (no-op otherwise); after connect. */
int  fh_strat_init(fh_rt_t *rt);
/* Deregisters everything it registered; before the segments are unmapped.
 * Returns the number of deregistrations that failed (the segments must then
 * stay mapped: fh_seg_fini). */
unsigned fh_strat_fini(fh_rt_t *rt);
/* A put/get of n bytes with [remote, remote+n) validated in rank's segment,
 * rank != us, counted into ctr like fh_rma_xfer: it starts what it can and
 * returns; fh_strat_progress does the rest (waits for nothing).  own_lmr:
 * lmr is a temporary registration (fh_rma_local_mr) that the operation
 * releases once it is over -- also when the call fails. */
int  fh_strat_xfer(fh_tls_t *t, bool is_put, int rank, char *local, struct fh_mr *lmr,
                   uint64_t remote, size_t n, fh_ctr_t *ctr, bool own_lmr);
/* Moves the strategy operations of the calling thread's path on (sends
 * what credits allow, posts RDMA whose key arrived, completes what is
 * done).  No lock held, not in a handler; no-op without rt->strat. */
void fh_strat_progress(fh_tls_t *t);
/* Frees the operation records left on p (teardown). */
void fh_strat_path_fini(fh_path_t *p);
/* Our segment piece [base, base+size) is being destroyed (after the
 * destroy barrier, unpublished, no handler still using it): deregisters
 * everything registered inside it for peers, released or not -- before it
 * is unmapped.  Returns the number of deregistrations that failed (the
 * piece must then stay mapped). */
unsigned fh_strat_seg_destroy(fh_rt_t *rt, uintptr_t base, size_t size);
/* Adds the strategy's counters for peer (or all peers if peer == our rank). */
void fh_strat_stats(fh_rt_t *rt, int peer, fh_peer_stats_t *out);

/* ---- atomic.c */
void fh_atomic_init(void);

/* ---- coll.c: collectives pair in order and must agree (coll.c, top) */
enum fh_coll_kind {
    FH_COLL_BARRIER = 1, FH_COLL_ALLGATHER, FH_COLL_SEG_CREATE, FH_COLL_SEG_DESTROY,
    FH_COLL_FINALIZE
};
/* What every rank's paired call must agree on: the kind and an argument
 * (its low 56 bits). */
uint64_t fh_coll_sig(enum fh_coll_kind kind, uint64_t arg);
/* Sends the calling thread's path's NB atomic requests that waited for a
 * credit (no lock held, not in a handler: then a no-op). */
void fh_atomic_progress(fh_tls_t *t);
/* Frees the requests still waiting on p (teardown). */
void fh_atomic_path_fini(fh_path_t *p);
void fh_coll_init(void);
/* A collective call holds the rank's coll_lock from start to end; enter
 * polls while it waits.  Not in a handler, no other lock held. */
void fh_coll_enter(fh_tls_t *t);
void fh_coll_leave(void);
/* Under coll_lock.  A barrier that also checks that every rank's sig is
 * the same: FH_ERR_STATE on every rank when not (after the barrier; fn
 * names the caller in the error text). */
int  fh_barrier_internal(fh_tls_t *t, uint64_t sig, const char *fn);
/* Under coll_lock: fh_barrier_internal, then the bootstrap's allgather. */
int  fh_allgather_internal(fh_tls_t *t, uint64_t sig, const char *fn, const void *in,
                           void *out, size_t len);

/* ---- stats.c */
void fh_stats_at_finalize(fh_rt_t *rt);

/* Time in seconds (monotonic). */
double fh_now(void);

/* ---- test hooks: points where a test build (-DFH_TEST_HOOKS, only in
 * check_LTLIBRARIES libfhrt_hooks.la) calls fh_test_hook to widen a race
 * window on purpose.  Normal builds compile them out. */
enum fh_test_point {
    FH_TP_MM_PUBLISH,         /* revoke.c: sync stored revoking, not yet seen */
    FH_TP_MM_WAIT_COUNT       /* revoke.c: the wait loop took its count */
};
#ifdef FH_TEST_HOOKS
extern void (*fh_test_hook)(enum fh_test_point where);
#define FH_TEST_POINT(where) do {                       \
        void (*fh_th_)(enum fh_test_point) = fh_test_hook; \
        if (fh_th_ != NULL)                             \
            fh_th_(where);                              \
    } while (0)
#else
#define FH_TEST_POINT(where) ((void)0)
#endif

#endif /* FH_INTERNAL_H */
