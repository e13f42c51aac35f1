/*
 * services.h -- what the runtime core gives a registration strategy: the
 * part of its state a strategy may read or own, completion counting, and
 * a table of the core's calls a strategy may make.  With reg.h (what a
 * strategy gives the core) this is the whole boundary: a file of
 * firehose/reg/ includes no header of the core.
 *
 * State.  The core's runtime, path and thread objects (firehose/internal.h)
 * begin with the views below, the way a UCX transport's interface begins
 * with uct_base_iface_t: fh_core_t, fh_path_base_t and fh_thread_t are the
 * first members of fh_rt_t, fh_path_t and fh_tls_t.  Each view is also
 * spliced into its object as anonymous members (FH_*_FIELDS, the pattern of
 * Linux's struct_group), so the core names the same fields directly
 * (p->lock) and a strategy through the view (p->lock on an fh_path_base_t).
 * The core passes &rt->core, &p->base, &t->base to the hooks.
 *
 * Calls.  The core fills an fh_reg_services_t and binds it with
 * fh_reg_bind() before any strategy runs; strategies call it through the
 * svc_* wrappers below.  So nothing in reg/ links against a core symbol
 * (tests/docs/layer_calls.sh checks it).
 *
 * Locks: as internal.h states.  p->lock is the path's lock; the strategy
 * fields of a path are protected as their comments say.
 */
#ifndef FH_REG_SERVICES_H
#define FH_REG_SERVICES_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conduits/conduit.h"
#include "firehose.h"
#include "firehose/boot/bootstrap.h"
#include "firehose/util/config.h"
#include "firehose/util/log.h"

struct fh_reg;
struct fh_strat;
struct fh_mm;
struct reg_xop;
struct reg_tc;
struct strat_xop;
struct fh_reg_ops;
struct fh_reg_services;

/* ---------------------------------------------------------- counters */

struct fh_path_base;

/* Completion records (like UCX's uct_completion_t).  Whatever a conduit
 * completion points to (its op_ctx) starts with an fh_compl_t, and the
 * core's completion upcall (path.c) calls its done(c, p, status): an
 * operation posted with op_ctx == c completed on path p.  Called with
 * p->lock held, p->inflight already decremented, not in a handler; done()
 * must not poll.  Every fh_ctr starts with one (fh_ctr_done, FH_CTR_INIT);
 * the firehose strategy's chunk record sets its own. */
typedef struct fh_compl fh_compl_t;
struct fh_compl {
    void (*done)(fh_compl_t *c, struct fh_path_base *p, int status);
};

/* An fh_ctr counts a set of network operations in flight: one blocking
 * call, one NB handle, or a thread's NBI operations.  A counter is touched
 * only with its path's lock held, so it needs no atomics. */
typedef struct fh_ctr {
    fh_compl_t compl;   /* first member: op_ctx == &ctr->compl == ctr */
    uint32_t pending;   /* operations not yet completed */
    int status;         /* first error seen, else FH_OK */
    uint64_t *owner_ops;  /* NULL (a blocking call's counter), or the
                             owning thread's count of NB/NBI operations in
                             flight -- what fh_quiet waits for; it moves
                             with pending, under the same path lock */
} fh_ctr_t;

static inline void fh_ctr_complete(fh_ctr_t *c, int status);

/* The done() of a counter: fh_ctr_complete(c, status). */
static inline void fh_ctr_done(fh_compl_t *c, struct fh_path_base *p, int status)
{
    (void)p;
    fh_ctr_complete((fh_ctr_t *)c, status);
}

/* An idle counter with its completion record set. */
#define FH_CTR_INIT {.compl = {.done = fh_ctr_done}, .pending = 0, .status = FH_OK}

/* One more operation counts in c. */
static inline void fh_ctr_add(fh_ctr_t *c)
{
    assert(c->compl.done != NULL);   /* initialized: FH_CTR_INIT or compl set */
    c->pending++;
    if (c->owner_ops != NULL)
        ++*c->owner_ops;
}

static inline void fh_ctr_complete(fh_ctr_t *c, int status)
{
    if (status != FH_OK && c->status == FH_OK)
        c->status = status;
    c->pending--;
    if (c->owner_ops != NULL)
        --*c->owner_ops;
}

/* Relaxed single-writer counter update: the writer holds the path lock,
 * readers (fh_stats_peer) use relaxed loads. */
#define FH_STAT_ADD(field, v) \
    __atomic_store_n(&(field), __atomic_load_n(&(field), __ATOMIC_RELAXED) + (v), \
                     __ATOMIC_RELAXED)

/* ---------------------------------------------------------- state views */

/* The runtime (fh_rt_t's head).  Set at fh_init, read-only afterwards,
 * except each strategy's own pointer (reg, strat, mm) and finalizing. */
#define FH_CORE_FIELDS                                                       \
    fh_config_t cfg;                                                         \
    fh_boot_t *boot;                                                         \
    int rank, nranks;                                                        \
    const fh_conduit_ops_t *cops;                                            \
    struct fh_conduit *conduit;                                              \
    fh_conduit_limits_t limits;                                              \
    size_t am_max_medium;                                                    \
    struct fh_path_base *svc_path;  /* path 0: AM requests and replies */     \
    const struct fh_reg_ops *reg_ops;   /* the active strategy (reg.h) */    \
    const struct fh_reg_services *svc;  /* the core's calls (below) */       \
    struct fh_reg *reg;     /* FH_REG_STRATEGY=firehose, else NULL */        \
    struct fh_strat *strat; /* rendezvous, rendezvous-cache, bounce */       \
    struct fh_mm *mm;       /* with reg: memory monitor glue */              \
    _Atomic int finalizing;

typedef struct fh_core {
    FH_CORE_FIELDS
} fh_core_t;

/* A path (fh_path_t's head): a conduit endpoint and its lock, and the
 * strategies' per-path state. */
#define FH_PATH_FIELDS                                                       \
    pthread_mutex_t lock;                                                    \
    int index;                                                               \
    struct fh_cpath *cp;                                                     \
    uint64_t inflight;        /* RMA ops posted here and not completed */    \
    size_t bulk_bytes;        /* bytes of bulk chunks in flight (FH_BULK_*) */ \
    _Atomic int bulk_shared;  /* more than one thread bound here (thread.c, */ \
                              /* under its bind lock; read relaxed) */       \
    fh_peer_stats_t *stats;   /* [nranks], under the path lock (node-path puts/gets: atomic adds) */ \
    /* FH_REG_STRATEGY=firehose (firehose_xfer.c): chunks whose firehoses    \
     * became ready, pushed by any thread under the cache lock (lock-free    \
     * stack); drained, and their RDMA posted, by whoever polls the path. */ \
    _Atomic(struct reg_xop *) reg_ready;                                     \
    struct reg_xop *reg_retry, **reg_retry_tail;  /* drained, not posted */  \
    struct reg_xop *reg_held, **reg_held_tail;  /* bulk waiting for budget */ \
    int reg_draining;                                                        \
    struct reg_xop *reg_free;  /* finished chunk records kept for reuse */   \
    unsigned reg_nfree;        /* (~2 KiB each: malloc'd per chunk, they */  \
                               /*  cost more than a hit; p->lock) */         \
    /* The comparison strategies' operations in progress (strat_common.c):   \
     * a lock-free stack pushed by the path's threads. */                    \
    _Atomic(struct strat_xop *) strat_ops;

/* The bound on a small operation's wait behind bulk transfers of another
 * thread of its path (docs/reliability.md, "Threads").  A chunk of an RMA
 * of at least FH_BULK_MIN bytes is bulk: it is posted in pieces of at most
 * FH_BULK_PIECE bytes, and it holds its length of the path's p->bulk_bytes
 * from its first post until its last piece completed.  On a path that
 * needs the bound -- the service path (it also carries the replies its
 * handlers send to other ranks) and a thread path while more than one
 * thread is bound to it (p->bulk_shared) -- at most FH_BULK_AHEAD *
 * FH_BULK_PIECE bytes of bulk chunks are in flight (a chunk larger than
 * the whole budget goes out alone); the rest waits on the path's held
 * list, in order, and is posted by the path's polls as earlier chunks
 * complete, while smaller operations pass it.  So a small operation finds
 * at most FH_BULK_AHEAD * FH_BULK_PIECE bytes of bulk queued ahead of it
 * in the conduit, whatever the size of the neighbour's transfers -- and a
 * stream of 64 KiB chunks is not held to FH_BULK_AHEAD of them (the budget
 * is bytes, not pieces).  A thread alone on its path has no neighbour to
 * protect: its bulk all goes out at once, as under pin-everything (a
 * window of 4 MiB transfers was held to two in flight; issue 30).  The
 * bytes in flight are counted on every path, so when a second thread
 * binds, new bulk waits until the path is back under the budget. */
#define FH_BULK_MIN ((size_t)64 << 10)
#define FH_BULK_PIECE ((size_t)1 << 20)
#define FH_BULK_AHEAD 8u
#define FH_BULK_BYTES (FH_BULK_AHEAD * FH_BULK_PIECE)

typedef struct fh_path_base {
    FH_PATH_FIELDS
} fh_path_base_t;

/* One mapping the local buffer check found mapped (reg/local_check.c):
 * [lo, hi) with prot (FH_VMA_READ | FH_VMA_WRITE), valid while the
 * monitor's state word is still `state` and fh_lc_gen still `gen`. */
#define FH_LC_ENTRIES 4
typedef struct fh_lc_entry {
    uintptr_t lo, hi;
    int prot;
    uint64_t state;
    unsigned gen;
} fh_lc_entry_t;

/* A thread (fh_tls_t's head).  path_t: the type of its path as the reader
 * sees it (the core: struct fh_path; a strategy: struct fh_path_base --
 * the same object, whose first member is the view).  The pointer is
 * written once, when the thread binds (thread.c), before any strategy
 * code can see the thread. */
#define FH_THREAD_FIELDS(path_t)                                             \
    path_t *path;                                                            \
    int in_handler;           /* depth of handler nesting */                 \
    struct reg_tc *reg_tc;    /* firehose hit layer (firehose_hit.c), or NULL */ \
    unsigned lc_next;         /* local_check.c: the entry replaced next */   \
    fh_lc_entry_t lc_tab[FH_LC_ENTRIES];  /* zeroed: no hit until filled */

typedef struct fh_thread {
    FH_THREAD_FIELDS(struct fh_path_base)
} fh_thread_t;

/* Counts one put/get of n bytes to rank in p's per-peer stats (p->lock held). */
static inline void fh_stat_rma(fh_path_base_t *p, int rank, bool is_put, size_t n)
{
    if (is_put) {
        FH_STAT_ADD(p->stats[rank].puts, 1);
        FH_STAT_ADD(p->stats[rank].put_bytes, n);
    } else {
        FH_STAT_ADD(p->stats[rank].gets, 1);
        FH_STAT_ADD(p->stats[rank].get_bytes, n);
    }
}

/* ---------------------------------------------------------- AM handlers */

/* The strategies' own AM handler indices (< FH_AM_USER_FIRST); their
 * messages count in reg_moves, not in am_sent/am_received. */
enum {
    FH_H_REG_FIRST  = 5,
    FH_H_MOVE_REQ   = 5,      /* firehose cache move request (firehose.c) */
    FH_H_MOVE_REP   = 6,      /* ... and its reply */
    FH_H_RDV_REQ    = 7,      /* rendezvous (de)registration request (rendezvous.c) */
    FH_H_RDV_REP    = 8,      /* ... and its reply */
    FH_H_BOUNCE_PUT = 9,      /* bounce: put payload (bounce.c) */
    FH_H_BOUNCE_GET = 10,     /* bounce: get request */
    FH_H_BOUNCE_REP = 11,     /* bounce: put ack / get data */
    FH_H_COPY_PUT   = 12,     /* firehose, FH_SEGMENT=everything: a chunk the
                                 target will not register, copied in
                                 (firehose_copy.c) */
    FH_H_COPY_GET   = 13,     /* ... copied out */
    FH_H_COPY_REP   = 14,     /* ... ack / data */
    FH_H_REG_LAST   = 14
};

/* ---------------------------------------------------------- segments */

/* A remote or local segment piece covering a looked-up range. */
typedef struct fh_seg_range {
    uintptr_t base, end;      /* [base, end) */
    fh_rkey_t rkey;
    fh_seg_t seg;
    struct fh_mr *mr;         /* our own pieces only: the local registration */
    char *local;              /* where we can load/store the piece at base:
                                 ours, or a node-group peer's mapped here
                                 (core only; NULL: through the network) */
    const struct fh_seg_holes *holes;  /* parts its owner protected or
                                 unmapped (core only, seg_holes.c); NULL:
                                 none, the fast path */
} fh_seg_range_t;

/* ---------------------------------------------------------- the core's calls */

/* Request kinds a strategy sends (am_try_request). */
enum fh_svc_am_kind { FH_SVC_AM_SHORT, FH_SVC_AM_MEDIUM };

typedef struct fh_reg_services {
    /* AM.  am_register: a runtime-internal handler (FH_H_REG_*), at init.
     * am_try_request: a short or medium request on path p that waits for
     * nothing -- FH_ERR_AGAIN (nothing sent, no error text) when p has no
     * credit towards rank or no transmit resources (FH_ERR_PEER_DEAD when
     * no credit may come: the service paths' connection with rank was
     * lost); not to ourselves, not
     * from a handler, no lock held.  am_reply*: from a request handler
     * only, with its token (valid while the handler runs).  token_source:
     * the rank the transport says sent the token's message. */
    void (*am_register)(unsigned index, fh_am_handler_t fn, const char *name);
    int  (*am_try_request)(fh_thread_t *t, fh_path_base_t *p, int rank,
                           enum fh_svc_am_kind kind,
                           unsigned handler, const void *payload, size_t len,
                           const uint64_t *args, unsigned nargs);
    int  (*am_reply)(fh_token_t tok, unsigned h, const uint64_t *args, unsigned nargs);
    int  (*am_reply_medium)(fh_token_t tok, unsigned h, const void *src, size_t nbytes);
    int  (*am_reply_medium_args)(fh_token_t tok, unsigned h, const void *src,
                                 size_t nbytes, const uint64_t *args, unsigned nargs);
    int  (*token_source)(fh_token_t tok, int *rank);
    /* Waiting.  wait_round: one round of the progress rule of every
     * waiting loop (*idle starts at 0); no lock held, not in a handler.
     * wait_ctr: polls until ctr->pending == 0, returns ctr->status.
     * progress_locked: polls p (p->lock held) and trylocks the service
     * path, to reap transmit resources. */
    void (*wait_round)(fh_thread_t *t, unsigned *idle);
    int  (*wait_ctr)(fh_thread_t *t, fh_ctr_t *ctr);
    void (*progress_locked)(fh_path_base_t *p);
    /* Segments: [addr, +n) of rank inside one segment piece -> FH_OK and
     * *out, or FH_ERR_OUT_OF_SEGMENT / FH_ERR_OVERFLOW.  Lock-free. */
    int  (*seg_find)(int rank, uintptr_t addr, size_t n, fh_seg_range_t *out);
    /* RDMA with a known key (fh_post, internal.h): on t's path, counting
     * into ctr (and the per-peer put/get counters with count); never waits
     * for transmit resources.  local_mr_release: frees a temporary local
     * registration the core made (FH_REG_CAP_NB_OWNS_LMR). */
    int  (*post)(fh_thread_t *t, bool is_put, int rank, void *local, struct fh_mr *lmr,
                 uint64_t remote, size_t n, const fh_rkey_t *rkey, fh_ctr_t *ctr,
                 bool count);
    void (*local_mr_release)(struct fh_mr *lmr);
} fh_reg_services_t;

/* The runtime the strategies serve: set by fh_reg_bind() in fh_init (before
 * any hook runs), NULL again at the end of fh_finalize. */
extern fh_core_t *fh_reg_core;
void fh_reg_bind(fh_core_t *core);

#define FH_SVC (fh_reg_core->svc)
static inline void svc_am_register(unsigned index, fh_am_handler_t fn, const char *name)
{ FH_SVC->am_register(index, fn, name); }
static inline int svc_am_try_request(fh_thread_t *t, fh_path_base_t *p, int rank,
                                     enum fh_svc_am_kind kind, unsigned handler,
                                     const void *payload, size_t len, const uint64_t *args,
                                     unsigned nargs)
{ return FH_SVC->am_try_request(t, p, rank, kind, handler, payload, len, args, nargs); }
static inline int svc_am_reply(fh_token_t tok, unsigned h, const uint64_t *args,
                               unsigned nargs)
{ return FH_SVC->am_reply(tok, h, args, nargs); }
static inline int svc_am_reply_medium(fh_token_t tok, unsigned h, const void *src,
                                      size_t nbytes)
{ return FH_SVC->am_reply_medium(tok, h, src, nbytes); }
static inline int svc_am_reply_medium_args(fh_token_t tok, unsigned h, const void *src,
                                           size_t nbytes, const uint64_t *args,
                                           unsigned nargs)
{ return FH_SVC->am_reply_medium_args(tok, h, src, nbytes, args, nargs); }
static inline int svc_token_source(fh_token_t tok, int *rank)
{ return FH_SVC->token_source(tok, rank); }
static inline void svc_wait_round(fh_thread_t *t, unsigned *idle)
{ FH_SVC->wait_round(t, idle); }
static inline int svc_wait_ctr(fh_thread_t *t, fh_ctr_t *ctr)
{ return FH_SVC->wait_ctr(t, ctr); }
static inline void svc_progress_locked(fh_path_base_t *p)
{ FH_SVC->progress_locked(p); }
static inline int svc_seg_find(int rank, uintptr_t addr, size_t n, fh_seg_range_t *out)
{ return FH_SVC->seg_find(rank, addr, n, out); }
static inline int svc_post(fh_thread_t *t, bool is_put, int rank, void *local,
                           struct fh_mr *lmr, uint64_t remote, size_t n,
                           const fh_rkey_t *rkey, fh_ctr_t *ctr, bool count)
{ return FH_SVC->post(t, is_put, rank, local, lmr, remote, n, rkey, ctr, count); }
static inline void svc_local_mr_release(struct fh_mr *lmr)
{ FH_SVC->local_mr_release(lmr); }

#endif /* FH_REG_SERVICES_H */
