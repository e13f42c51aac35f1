/*
 * internal.h -- state and module interfaces of the runtime core (firehose/).
 *
 * Modules
 *   init.c     fh_init/fh_finalize, the runtime object
 *   thread.c   thread -> path binding, thread exit, the checks of every entry
 *   path.c     paths: locks, progress (polling), conduit upcalls
 *   am.c       active messages: handler table, credits, dispatch, replies
 *   rma.c      put/get (blocking, NB, NBI), quiet
 *   strided.c  strided put/get: validation, the net route's AM gathering
 *   atomic.c   remote atomics (over AMs)
 *   coll.c     barrier and allgather
 *   segment.c  segments and the remote address -> key lookup
 *   node_am.c  AMs within the node group through shared rings
 *   route.c    how each destination rank is reached (self, node, net),
 *              chosen once at init; the self and node routes
 *   node_coll.c the barrier's shared-memory stage within the node group
 *   stats.c    per-peer counters
 *   peer.c     the same-host dead-peer check
 *   services.c the calls the registration strategies get (reg/services.h)
 *
 * The registration strategies live in firehose/reg/ (README there); the
 * core reaches the active one only through rt->reg_ops (reg/reg.h), and
 * they reach the core only through reg/services.h.
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
 * lock is needed.  The firehose cache lock (reg/firehose.c) comes after any
 * path lock and is never held while taking one.
 *
 * Flow control.  A path holds `credits[r]` for requests towards rank r's
 * service path (FH_AM_CREDITS each).  A request spends one.  The target
 * returns it in the header of the reply, or, for requests without a reply,
 * accumulates it in owed[]; what the service path owes a requester's
 * service path rides on its next request there, and an FH_AM_CREDIT packet
 * goes once half the window is owed or after FH_CREDIT_IDLE_POLLS empty
 * polls (am.c).  Hence at most FH_AM_CREDITS requests
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
#include <string.h>

#include "am_wire.h"
#include "firehose/cache/fhc.h"
#include "firehose/boot/bootstrap.h"
#include "conduits/conduit.h"
#include "firehose/util/config.h"
#include "firehose.h"
#include "handle.h"
#include "firehose/util/clock.h"
#include "firehose/util/log.h"
#include "firehose/util/test_point.h"
#include "firehose/node/node.h"
#include "firehose/reg/reg.h"
#include "firehose/reg/services.h"

struct fh_segmap;
struct fh_tls;

/* One barrier in progress (coll.c; under coll_lock): where it stands, so
 * that a caller may leave it and come back (fh_barrier_or_notify/try). */
enum fh_node_bar_state {
    FH_NODE_BAR_START, FH_NODE_BAR_DISSEMINATE, FH_NODE_BAR_GATHER, FH_NODE_BAR_RELEASED
};
typedef struct fh_bar_run {
    uint64_t epoch;
    uint64_t lo, hi, or;          /* the signature range and bits known so far */
    enum fh_node_bar_state node;  /* the shared-memory stage's state */
    bool lead;                    /* this rank leads its group (network stage) */
    bool in_net;                  /* the network stage runs */
    int k;                        /* the round of the stage that runs */
    bool sent;                    /* ... whose notification went out */
    bool done;                    /* complete (split barrier): rc is its result */
    int rc;
} fh_bar_run_t;

struct fh_route;
struct fh_poller;

/* A reply or credit packet that could not be sent yet (conduit said AGAIN);
 * flushed in order at the end of the next poll of the path. */
typedef struct fh_backlog {
    struct fh_backlog *next;
    int rank, rpath;
    bool stale;               /* for a link made again since: dropped, not sent */
    size_t len;
    unsigned char bytes[];    /* header + payload */
} fh_backlog_t;

/* The objects below begin with the views the registration strategies get
 * (reg/services.h): the view as a member (&p->base, to call a strategy) and
 * its fields spliced in (p->lock, for the core). */
typedef struct fh_path {
    union {
        fh_path_base_t base;
        struct { FH_PATH_FIELDS };
    };
    struct fh_rt *rt;

    uint32_t *credits;        /* [nranks] requests we may still send */
    uint32_t *credit_held;    /* [nranks] credits taken by requests that wait to
                                 be sent (am.c send_on_path) */
    uint32_t *owed;           /* [nranks*npaths] credits owed (service path) */
    uint32_t *link_lost;      /* [nranks] times this path's link to the rank's
                                 service path was lost (conduit.h on_lost);
                                 under the path lock.  A request sent while it
                                 moved may have gone with the old link. */
    uint32_t owed_total;
    unsigned idle_polls;      /* polls in a row that found nothing (am.c) */
    fh_backlog_t *backlog, **backlog_tail;
    /* Client replies held until the strategy may publish (am.c): sent
     * in order, after the backlog, once may_publish says yes. */
    fh_backlog_t *held, **held_tail;

    fh_htable_t handles;

    int nbound;               /* threads bound (protected by rt->bind_lock) */
    int polling;              /* re-entrancy guard for poll on this path */
    unsigned quiet_polls;     /* polls that skipped an idle conduit (path.c) */
    unsigned peer_polls;      /* polls since the last look at the clock for
                                 peer.c's check (path.c) */
    uint64_t ndropped;        /* packets dropped here (log rate limit) */
    uint64_t nexcess;         /* credits beyond the window received here
                                 (log rate limit, am.c) */
    _Atomic int orphaned;     /* no thread bound any more and maybe work of
                                 an exited one in flight: fh_progress polls
                                 it until idle (path.c) */

    /* Transfers waiting for transmit resources (rma_post.c, p->lock). */
    struct fh_rma_pend *rma_pend, **rma_pend_tail;
    /* Bulk waiting for the path's bulk budget (rma_post.c, p->lock). */
    struct fh_rma_pend *rma_held, **rma_held_tail;
    /* NB atomic requests waiting for a credit (atomic.c): a lock-free
     * stack, pushed by the path's threads, taken whole by whoever moves
     * them on. */
    _Atomic(struct atomic_defer *) atomic_defer;
    /* Strided operations of this path's threads waiting for AM replies
     * (strided.c, p->lock); strided_seq names them. */
    struct fh_strided_op *strided_ops;
    uint64_t strided_seq;
} fh_path_t;

typedef struct fh_handler_entry {
    fh_am_handler_t fn;
    const char *name;
} fh_handler_entry_t;

/* Barrier slots (coll.c): one per dissemination round, ceil(log2 nranks),
 * more than any int rank count needs. */
#define FH_BARRIER_ROUNDS 64
/* Progress registrations of each kind (path.c), more than the core uses. */
#define FH_MAX_POLLERS 8

typedef struct fh_rt {
    union {
        fh_core_t core;
        struct { FH_CORE_FIELDS };
    };
    int npaths;
    /* Every conduit's own FH_* settings, loaded and checked at init, in
     * the order of fh_conduit_settings_all (fh_conduit_settings_of). */
    fh_conduit_settings_buf_t csettings[FH_NCONDUITS];
    fh_path_t *paths;         /* [npaths]; svc_path is &paths[0] */
    /* Paths 0..paths_made-1 exist (the others are zero): all of them from
     * fh_init, or, when the conduit has lazy_paths, path 0 from fh_init and
     * each thread path when a thread first needs it (thread.c), in index
     * order, under bind_lock.  Read with acquire by whoever walks paths. */
    _Atomic int paths_made;
    bool lazy_paths;
    _Atomic bool path_making;   /* fh_path_make runs: poll the conduit always */
    bool path_make_failed;      /* a path could not be made: no more tries
                                   (bind_lock) */
    pthread_mutex_t bind_lock;
    pthread_key_t tls_key;
    bool locks_made;          /* bind/seg/coll locks and tls_key exist */
    bool modules_up;          /* fh_init got past the strategy's init */

    size_t am_max_packet;

    _Atomic(struct fh_segmap *) segmap;   /* immutable snapshot, swapped */
    pthread_mutex_t seg_lock;             /* create/destroy */
    struct fh_segment *segs;              /* [cfg.max_segments] */
    struct fh_segmap *retired;            /* old snapshots, freed once no
                                             thread can read them (segment.c
                                             "Reclaiming") or at finalize */
    _Atomic uint64_t seg_epoch;           /* bumped by every publish */
    pthread_mutex_t tls_all_lock;         /* tls_all (a leaf lock) */
    struct fh_tls *tls_all;               /* every live thread state */

    pthread_mutex_t coll_lock;            /* one collective at a time (coll.c) */
    _Atomic uint64_t barrier_epoch;       /* the last barrier begun (coll.c) */
    fh_bar_run_t bar_split;               /* fh_barrier_or_notify's barrier */
    _Atomic(struct fh_tls *) bar_split_owner;  /* its thread, NULL when none runs */
    /* What arrived per round and epoch parity: the latest epoch (0: none;
     * a notification sent again that had already come is older or equal,
     * and ignored), its signature range and the OR of the ranks' bits
     * (fh_barrier_or). */
    _Atomic uint64_t barrier_in[FH_BARRIER_ROUNDS][2];
    _Atomic uint64_t barrier_sig[FH_BARRIER_ROUNDS][2][3];
    /* The notifications this rank sent last, per round and epoch parity
     * (the last two barriers': an earlier one has come, as every rank has
     * entered the last), kept to be sent again when the link they left on
     * is lost (coll.c resend_lost); under coll_lock.  args[1], the epoch:
     * 0 for none; path: index of the path sent on, lost: its
     * link_lost[to] read before the send;
     * bar_lost_seen: am_lost_seq at the last look. */
    struct fh_bar_sent {
        uint64_t args[5];
        int to, path;
        uint32_t lost;
    } bar_sent[FH_BARRIER_ROUNDS][2];
    _Atomic uint64_t bar_lost_seen;       /* written under coll_lock */
    /* Reports from other leaders that a barrier failed on a lost
     * connection (coll.c barrier_failed): bar_fail_epoch, the highest
     * epoch reported (0: none), fails every barrier up to it;
     * bar_fail_rank the rank whose connection was lost, bar_fail_by the
     * reporter (of the last report: with two at once, a pair may come
     * from two reports, each naming a lost rank). */
    _Atomic uint64_t bar_fail_epoch;
    _Atomic int bar_fail_rank, bar_fail_by;
    /* Lost connections (am.c up_on_lost, fh_am_lost): am_lost_seq counts
     * every loss of a link that carries AMs between us and a rank;
     * am_lost_req[r] is the count just after the last loss of a link
     * carrying our requests to r's service path (and their replies),
     * am_lost_in[r] of one carrying r's thread paths' requests to ours (0:
     * none).  A wait for an AM from r that read the count before it began
     * fails once r's mark exceeds that (coll.c: am_lost_req; clients:
     * both).  am_lost_svc[r]: the same for the link between the service
     * paths, the one not made again (coll.c).  All [nranks], from before
     * the conduit opens. */
    _Atomic uint64_t am_lost_seq;
    _Atomic uint64_t *am_lost_req, *am_lost_in, *am_lost_svc;

    _Atomic int norphans;                 /* paths with `orphaned` set */
    /* Thread-exit hooks against fh_finalize (thread.c's exit gate guards
     * these three): hooks now running, whether fh_finalize has closed the
     * gate (later hooks only hand their state over), and those states,
     * freed once the paths are torn down. */
    int exit_hooks;
    bool exits_closed;
    struct fh_tls *exited;
    struct fh_peers *peers;               /* who is who on this host (peer.c) */
    /* Node group (peer.c, fh_peer_groups): node_peer[r] when rank r shares
     * its segments with us (r == rank included); node_size members.  With
     * node_size >= 2 our segment pieces are firehose/node/ memory. */
    uint8_t *node_peer;
    int node_size;
    int host_ranks;           /* ranks of the job on this host (peer.c) */
    bool oversubscribed;      /* host_ranks > the CPUs we may run on (fh_wait_init) */
    /* AMs within the group (node_am.c): node_members[node_size] in rank
     * order, node_gidx[rank] the index there (-1 outside), node_inbox[rank]
     * our mapping of that member's inbox (NULL: through the conduit);
     * ring geometry: slots into the service path [0] and a thread path [1]. */
    int *node_members, *node_gidx;
    char **node_inbox;
    fh_node_piece_t node_box;
    uint32_t node_slots[2], node_slot_size;
    bool node_all_rings;      /* every other rank is reached through rings */
    /* The rings into each of our paths (node_am.c): node_rx[p] holds
     * node_nrx[p] consumer cursors, used under path p's lock. */
    struct fh_node_rx **node_rx;
    int *node_nrx;

    /* route[r]: how rank r is reached (route.c), fixed at init;
     * cma_pid[r] > 0: member r's memory outside the shared pieces is
     * reached by cross-memory attach (its pid), else through the network
     * (set to 0 if the kernel refuses later). */
    const struct fh_route **route;
    _Atomic int64_t *cma_pid;
    /* Progress by registration (path.c): what every poll of a path runs,
     * in stage order, and what every fh_progress of a thread runs. */
    const struct fh_poller *pollers[FH_MAX_POLLERS];
    int npollers;
    void (*thread_progress[FH_MAX_POLLERS])(struct fh_tls *t);
    int nthread_progress;
    /* A long-idle waiter's sleep (path.c's fh_wait_round), or NULL. */
    bool (*idle_sleep)(struct fh_tls *t, unsigned idle);
    /* The barrier (node_coll.c, coll.c): its shared-memory stage, and the
     * ranks of its network stage, the groups' leaders: bar_leader[i] the
     * i-th in rank order, bar_lidx[rank] that index (-1: not a leader). */
    struct fh_node_coll *node_coll;
    int bar_nleaders, *bar_leader, *bar_lidx;
} fh_rt_t;

/* Per-thread state. */
typedef struct fh_tls {
    union {
        fh_thread_t base;
        struct { FH_THREAD_FIELDS(struct fh_path) };
    };
    fh_ctr_t nbi;             /* this thread's NBI operations (updated by
                                 completions under path->lock) */
    uint64_t quiet_ops;       /* its NB and NBI operations in flight, NB
                                 atomics included: what fh_quiet waits for
                                 (fh_ctr owner_ops; path->lock) */
    uint32_t tid;             /* unique, for handle ownership */
    unsigned node_ops;        /* load/store operations on node peers and on
                                 ourselves: every
                                 FH_NODE_PROGRESS-th makes progress (route.c) */
    int bound;                /* path->nbound counted for us */
    struct fh_tls *exited_next;   /* rt->exited (exit gate) */
    struct fh_tls *all_next;      /* rt->tls_all (tls_all_lock) */
    _Atomic uint64_t seg_seen;    /* rt->seg_epoch at the thread's last
                                     entry: it holds no segment table or
                                     hole list older (segment.c) */
    double idle_since;        /* path.c's net_sleep: when this thread's
                                 current wait passed its spinning (0: not) */
} fh_tls_t;

_Static_assert(offsetof(fh_path_t, base) == 0 && offsetof(fh_rt_t, core) == 0 &&
               offsetof(fh_tls_t, base) == 0, "a strategy's view is its object's head");
/* The object a strategy's view belongs to. */
static inline fh_path_t *fh_path_of(fh_path_base_t *b) { return (fh_path_t *)b; }
static inline fh_tls_t *fh_tls_of(fh_thread_t *b) { return (fh_tls_t *)b; }

/* The runtime: set once by fh_init, cleared by fh_finalize. */
extern fh_rt_t *fh_rt;
/* One entry per value of the wire's 8-bit handler index (am_wire.h). */
#define FH_AM_NHANDLERS 256
extern fh_handler_entry_t fh_handlers[FH_AM_NHANDLERS];
/* FH_RT_NONE (never initialized), FH_RT_UP (running), FH_RT_DOWN
 * (finalized) or FH_RT_STARTING (inside fh_init).  init.c writes it. */
enum { FH_RT_NONE = 0, FH_RT_UP = 1, FH_RT_DOWN = 2, FH_RT_STARTING = 3 };
extern _Atomic int fh_rt_state;

/* ---- thread.c */
/* The calling thread's state, binding a path on first use; NULL once the
 * thread-exit hook has released it (the thread is exiting: a call from a
 * later pthread-key destructor).  A thread that is polling, and hence any
 * handler, always has one. */
fh_tls_t *fh_tls(void);
/* The smallest seg_seen of the live thread states (UINT64_MAX: none). */
uint64_t fh_tls_min_seen(fh_rt_t *rt);
/* The calling thread's state if it has one, else NULL; never binds. */
fh_tls_t *fh_tls_peek(void);
/* Common entry check: initialized, the thread not exiting (FH_ERR_STATE)
 * and not inside a handler.  Returns the thread's state or NULL with *err
 * set (and the error text recorded). */
fh_tls_t *fh_enter(const char *fn, int *err);
int fh_check_rank(const char *fn, int rank);
/* The destructor of rt->tls_key: the thread-exit hook (top of thread.c). */
void fh_tls_release(void *arg);
/* fh_finalize, before its barrier: closes the exit gate -- a thread that
 * exits from now on only hands its state over -- and waits, polling, until
 * the hooks already running have returned. */
void fh_tls_close_exits(fh_tls_t *t);
/* Runs the per-thread progress (the strategy's, then the core's
 * fh_progress_add_thread hooks) of every thread whose state was handed
 * over at the closed gate: work a strategy queued for such a thread and
 * moves on only from a thread of its path (rendezvous, bounce) would
 * otherwise never leave.  The caller (fh_finalize) is the only user of
 * those states.  No lock held. */
void fh_tls_progress_exited(fh_rt_t *rt);
/* path.c: waits, polling, until no path of the rank has RMA in flight, AM
 * replies queued or strategy work queued (path_busy): what every thread of
 * the rank (exited ones included: fh_tls_progress_exited moves their
 * strategy work on) handed to the runtime has left.  fh_finalize, before
 * its barrier: a message of the barrier must not wait behind them while
 * we stop polling.  No lock held. */
void fh_wait_rank_sent(fh_tls_t *t);
/* fh_finalize, after the paths are torn down: clears fh_rt (under the
 * gate), frees the states handed over and the calling thread's own (its
 * key is deleted). */
void fh_tls_finalize(fh_rt_t *rt);
/* The settings of the conduit with these settings (ops->settings), as
 * loaded at init: e.g. an ofi_settings_t * for &fh_ofi_settings. */
const void *fh_conduit_settings_of(const fh_rt_t *rt,
                                   const fh_conduit_settings_t *s);

/* ---- agree.c: collective, in fh_init right after the bootstrap opens.
 * FH_OK when every rank has the same value of every same_everywhere
 * setting; else FH_ERR_CONFIG on every rank, fh_last_error() naming the
 * first such variable, rank 0 and a rank that differs (and rank 0 logs
 * it); FH_ERR_BOOTSTRAP/FH_ERR_NO_MEMORY if the exchange itself fails. */
int fh_config_agree(fh_boot_t *boot, const fh_config_t *cfg);

/* ---- env_check.c: in fh_init on rank 0, one line on stderr per FH_*
 * variable that no table, launcher, FH_ENV_KNOWN or fh_env_register
 * knows (util/env.h).  Returns how many. */
int fh_env_check(const fh_config_t *cfg);

/* ---- peer.c: the runtime's own dead-peer check (no launcher needed) */
/* Collective, in fh_init: every rank's host identity, pid, start time. */
int  fh_peer_init(fh_rt_t *rt);
void fh_peer_fini(fh_rt_t *rt);
/* At most once a second (any thread): a peer on this host whose process is
 * gone ends this process with FH_EXIT_PEER_DEAD and a message naming it. */
void fh_peer_check(fh_rt_t *rt);

/* Collective, after fh_peer_init: the node group (FH_SHM,
 * FH_SHM_MAX_GROUP) into rt->node_peer and rt->node_size. */
int  fh_peer_groups(fh_rt_t *rt);
/* The pid (or, with parent, the parent's pid) rank published at fh_init,
 * as seen in its pid namespace (meaningful for node group members). */
int64_t fh_peer_pid(const fh_rt_t *rt, int rank, bool parent);
/* After fh_peer_init: this rank's index among the job's ranks on its host
 * (in rank order), and whether they all started with the same CPU
 * affinity mask (*same_cpus; false: a launcher placed them). */
int  fh_peer_host_index(const fh_rt_t *rt, bool *same_cpus);
/* place.c, in fh_init after fh_wait_init: FH_BIND. */
void fh_place_init(fh_rt_t *rt);

/* ---- route.c: how each destination rank is reached, chosen once per
 * rank at init (fh_route_init): "self" (our own memory: memmove and CPU
 * atomics), "node" (a rank of our node group: loads and stores through our
 * mapping of its segment piece, the range's `local`), "net" (the conduit,
 * through the registration strategy and AMs; rma.c, atomic.c, am.c).  The
 * public calls validate their arguments and look the remote range up, then
 * call rt->route[rank]; no operation branches on where the rank is.  Only
 * the net route reaches the registration strategy, so its statistics and
 * the firehose cache count network peers only.  A node route op given a
 * range without a mapping (memory outside segments under
 * FH_SEGMENT=everything) hands it to the net route. */
enum fh_rma_mode { FH_RMA_BLOCKING, FH_RMA_NB, FH_RMA_NBI };
typedef struct fh_rma_req {
    const char *fn;            /* the public call, for error texts */
    bool is_put;
    int rank;
    char *local, *remote;      /* contiguous: the buffers; strided: block 0 */
    size_t n;                  /* bytes, or bytes per block (strided) */
    size_t count;              /* strided: blocks */
    ptrdiff_t lstride, rstride;
    enum fh_rma_mode mode;     /* contiguous: blocking, NB (*h) or NBI */
    fh_handle_t *h;            /* NB: preset to FH_HANDLE_DONE */
    fh_seg_range_t r;          /* the remote range (zeroed: outside segments) */
} fh_rma_req_t;
typedef struct fh_atomic_req {
    const char *fn;
    int rank;
    void *target;
    unsigned width;            /* 4 or 8, target aligned to it */
    fh_atomic_op_t op;
    uint64_t operand, compare;
    void *fetched;             /* or NULL */
    bool nb;
    fh_handle_t *h;            /* NB: preset to FH_HANDLE_DONE */
    fh_seg_range_t r;
} fh_atomic_req_t;
typedef struct fh_route {
    const char *name;
    /* Contiguous put/get of q->n > 0 validated bytes. */
    int (*rma)(fh_tls_t *t, const fh_rma_req_t *q);
    /* Strided put/get, validated (the remote hull is q->r); blocking. */
    int (*strided)(fh_tls_t *t, const fh_rma_req_t *q);
    /* An atomic on q->target, validated, inside segment range q->r. */
    int (*atomic)(fh_tls_t *t, const fh_atomic_req_t *q);
    /* The payload of a long AM request, put to dst before its header is
     * sent (r: the looked-up range of [dst, +len)); complete on return. */
    int (*am_payload)(fh_tls_t *t, int rank, const void *payload, size_t len,
                      uint64_t dst, const fh_seg_range_t *r);
} fh_route_t;
extern const fh_route_t fh_route_self, fh_route_node, fh_route_net;
/* Every local block of strided request q mapped as its direction needs
 * (reg.h fh_lc_check): FH_OK, or FH_ERR_INVALID naming the first bad
 * address (route.c; strided.c for the packed AMs). */
int fh_rma_local_ok_strided(fh_tls_t *t, const fh_rma_req_t *q);
/* Where remote address `remote` of range r is in our address space (the
 * member's piece as we mapped it), or NULL: not a node group member's. */
static inline char *fh_node_addr(const fh_seg_range_t *r, const void *remote)
{
    return r->local != NULL ? r->local + ((uintptr_t)remote - r->base) : NULL;
}
/* After fh_peer_groups: rt->route for every rank. */
int  fh_route_init(fh_rt_t *rt);
void fh_route_fini(fh_rt_t *rt);
/* The net route's ops (rma.c, strided.c, atomic.c, am.c). */
int  fh_rma_net(fh_tls_t *t, const fh_rma_req_t *q);
int  fh_strided_net(fh_tls_t *t, const fh_rma_req_t *q);
int  fh_atomic_net(fh_tls_t *t, const fh_atomic_req_t *q);
int  fh_am_payload_net(fh_tls_t *t, int rank, const void *payload, size_t len,
                       uint64_t dst, const fh_seg_range_t *r);
/* q's operation on memory we can address at p (ours, or a member's
 * mapped piece) with the sequentially consistent CPU atomics atomic.c's
 * target side uses too; stores the old value to q->fetched if not NULL. */
void fh_atomic_local(void *p, const fh_atomic_req_t *q);

/* ---- node_am.c: AMs within the node group through shared rings */
/* Collective, in fh_init after fh_peer_groups and the paths: inboxes;
 * registers its poller and idle sleep (path.c) when we have one. */
int  fh_node_am_init(fh_rt_t *rt);
void fh_node_am_fini(fh_rt_t *rt);
/* Sends one packet from path p (lock held) to (rank, rpath): the ring when
 * rank is a member with an inbox, else the conduit.  The conduit's codes:
 * FH_OK, FH_ERR_AGAIN (full: poll and retry), other errors. */
int  fh_path_am_send(fh_path_t *p, int rank, int rpath, const void *hdr, size_t hl,
                     const void *payload, size_t len);

/* ---- node_coll.c: the barrier's shared-memory stage (top of node_coll.c) */
/* Collective, at the end of fh_node_am_init: the groups and their leaders. */
int  fh_node_coll_init(fh_rt_t *rt);
void fh_node_coll_fini(fh_rt_t *rt);
/* Bytes of the barrier area at the end of each inbox; where it is in
 * rank's inbox (node_am.c; NULL without a mapping). */
size_t fh_node_coll_bytes(const fh_rt_t *rt);
char *fh_node_bar_area(const fh_rt_t *rt, int rank);
/* After a sequentially consistent store of what they wait for: wakes
 * rank's sleepers, if any, through its inbox futex (node_am.c). */
void fh_node_wake(fh_rt_t *rt, int rank);
/* Under coll_lock: takes barrier b (b->epoch, b->lo == b->hi, b->or set,
 * b->node FH_NODE_BAR_START at first) as far as it can go without
 * waiting: FH_ERR_AGAIN while the group is not in.  Then FH_OK, and
 * b->lead: the caller leads its group, b->lo, hi, or are the group's, and
 * it must run the network stage and then fh_node_coll_release; else the
 * barrier is complete and b->lo, hi, or are the job's (FH_ERR_*, the
 * leader's stage failed).  Between FH_ERR_AGAIN and the next call the
 * caller polls (fh_wait_round sleeps only until what b waits for came). */
int  fh_node_coll_step(fh_tls_t *t, fh_bar_run_t *b);
void fh_node_coll_release(fh_tls_t *t, uint64_t epoch, uint64_t lo, uint64_t hi,
                          uint64_t or, int status);
/* Has what this rank's barrier waits for come (node_am.c's idle sleep
 * looks before it sleeps)? */
bool fh_node_coll_due(const fh_rt_t *rt);

/* ---- path.c */
/* Progress by registration: path.c polls the conduit and runs what the
 * modules registered, never naming them.  Every poll of a path (its lock
 * held) runs the pollers in stage order: RECEIVE delivers what arrived
 * other than through the conduit and returns how many; SEND sends what
 * the path owes, given how many packets this poll delivered (`found`);
 * both run under the poll's re-entrancy guard (a nested poll from a
 * handler or a send is a no-op).  AFTER runs once the guard is released:
 * it may wait for transmit resources (and so poll).  A thread progress
 * function runs in every fh_progress, no lock held.  Registered at init,
 * before anything polls. */
enum fh_poll_stage { FH_POLL_RECEIVE, FH_POLL_SEND, FH_POLL_AFTER };
typedef struct fh_poller {
    const char *name;
    enum fh_poll_stage stage;
    int (*poll)(fh_path_t *p, int found);     /* or NULL: fini only */
    void (*fini)(fh_path_t *p);               /* path teardown, or NULL */
} fh_poller_t;
void fh_progress_add_poller(fh_rt_t *rt, const fh_poller_t *pl);
void fh_progress_add_thread(fh_rt_t *rt, void (*fn)(fh_tls_t *t));
/* The pollers of am.c (backlog and owed credits), rma.c (queued
 * transfers) and atomic.c (teardown of deferred requests). */
extern const fh_poller_t fh_am_poller, fh_rma_poller, fh_atomic_poller;
/* After fh_peer_groups: the wait policy's default for this host (FH_WAIT_SPIN
 * unset and more of the job's ranks here than cores: yield at once). */
void fh_wait_init(fh_rt_t *rt);
int  fh_path_setup(fh_rt_t *rt, fh_path_t *p, int index);
void fh_path_teardown(fh_rt_t *rt, fh_path_t *p);
/* Lazy paths: creates thread path paths[paths_made] and connects it to every
 * rank (conduit path_connect), polling the service path meanwhile, then
 * publishes it (paths_made).  The caller holds bind_lock, and its thread
 * state exists (AM handlers run while it waits).  FH_OK, or the error of
 * a connection that could not be made (the path is gone again). */
int  fh_path_make(fh_rt_t *rt);
/* Paths that exist (acquire): loops over paths stop there. */
static inline int fh_paths_made(const fh_rt_t *rt)
{
    return atomic_load_explicit(&rt->paths_made, memory_order_acquire);
}
/* One round of progress for the calling thread: polls its path, (trylock)
 * the service path and paths whose threads exited with work in flight, and
 * sends queued cache messages.  Returns what the polls of its own and the
 * service path handled (0: nothing came).  Must be called without holding
 * any path lock. */
int  fh_progress(fh_tls_t *t);
/* The progress rule of every loop that waits (include/firehose.h,
 * "Progress"): one round of fh_progress; once the wait has lasted
 * (*idle rounds), also trylock-polls every other path of the rank, so what
 * a thread that stopped calling in (or exited) left in flight completes --
 * the firehoses, budget and REVOKE acks its RDMA holds, replies to it;
 * then the wait policy (path.c, fh_wait_idle): a round that handled
 * something resets *idle to 0.  *idle starts at 0.  No lock held.
 * fh_wait_round may sleep (rt->idle_sleep); fh_wait_round_awake never
 * does, for waits on what no message announces (fh_poll_idle). */
void fh_wait_round(fh_tls_t *t, unsigned *idle);
/* After the node path's init: registers the network's sleep (path.c) as
 * rt->idle_sleep when no rank is reached through shared rings and the
 * conduit has wait_fds. */
void fh_net_sleep_init(fh_rt_t *rt);
void fh_wait_round_awake(fh_tls_t *t, unsigned *idle);
/* The last thread bound to p exited (fh_path_orphan): its replies and
 * completions may still arrive, and fh_progress polls p until it is idle or
 * a thread binds to it again (fh_path_adopt).  Atomic; no lock needed. */
void fh_path_orphan(fh_path_t *p);
void fh_path_adopt(fh_path_t *p);
/* Poll path p; caller holds p->lock. */
/* Returns what the poll handled (completions, packets; 0: nothing). */
int  fh_path_poll_locked(fh_path_t *p);
/* Poll path p (lock held) and trylock-poll the service path: what a loop
 * waiting for transmit resources must do, since freeing them may need the
 * peer to see our service path progress (e.g. connection setup). */
void fh_progress_locked(fh_path_t *p);

/* ---- am.c */
/* What the conduit calls from inside its poll (am.c receives, path.c
 * completes RMA: fh_path_on_complete). */
extern const fh_conduit_upcalls_t fh_upcalls;
/* An RMA operation on path p finished (the conduit's on_complete). */
void fh_path_on_complete(void *p, void *op_ctx, int status);
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

/* Runtime-internal handler indices (< FH_AM_USER_FIRST); the strategies'
 * own, FH_H_REG_FIRST..FH_H_REG_LAST, are in reg/services.h. */
enum {
    FH_H_ATOMIC_REQ = 1,
    FH_H_ATOMIC_REP = 2,
    FH_H_BARRIER    = 3,
    FH_H_NOP        = 4,
    /* 5..14: the strategies' (reg/services.h) */
    FH_H_STRIDED_PUT = 15,    /* strided.c: packed blocks to scatter */
    FH_H_STRIDED_GET = 16,    /* strided.c: blocks to gather and send back */
    FH_H_STRIDED_REP = 17,    /* strided.c: acknowledgement or gathered data */
    FH_H_SEG_PROT    = 18,    /* seg_protect.c: a piece's holes changed */
    FH_H_SEG_PROT_ACK = 19,   /* ... applied */
    FH_H_BARRIER_FAIL = 20    /* coll.c: a leader's barrier failed */
};
/* Handlers of the registration strategies' own protocols: their messages
 * count in reg_moves, not in am_sent/am_received. */
static inline int fh_am_handler_is_reg(unsigned h)
{
    return h >= FH_H_REG_FIRST && h <= FH_H_REG_LAST;
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
/* Moves bytes with the active registration strategy (rt->reg_ops->xfer;
 * its contract in reg/reg.h): every transfer to a remote rank goes through
 * here.  rank != ours. */
int  fh_xfer(fh_tls_t *t, bool is_put, int rank, char *local, struct fh_mr *lmr,
             uint64_t remote, size_t n, const fh_rkey_t *rkey, fh_ctr_t *ctr, bool own_lmr);
/* Posts RDMA with a known key: [chunks of] a put/get on the calling
 * thread's path, counting into ctr and, with count, in the per-peer
 * put/get counters.  Arguments already validated; rank != ours.  Never
 * waits for transmit resources: what the conduit cannot take now is
 * queued on the path (counted in ctr) and posted by its next poll. */
int  fh_post(fh_tls_t *t, bool is_put, int rank, void *local, struct fh_mr *lmr,
             uint64_t remote, size_t n, const fh_rkey_t *rkey, fh_ctr_t *ctr, bool count);
/* The registration to pass as lmr for a local buffer: NULL when the conduit
 * does not need one or the strategy has no FH_REG_CAP_LOCAL_MR; the
 * covering segment's when the buffer is in one of our segments; otherwise a
 * temporary registration (*temp = true) that the caller must release with
 * fh_rma_local_mr_release() once the operation has completed (or hand to
 * a strategy with FH_REG_CAP_NB_OWNS_LMR). */
int  fh_rma_local_mr(const char *fn, bool is_put, const void *local, size_t n,
                     struct fh_mr **lmr, bool *temp);
void fh_rma_local_mr_release(struct fh_mr *lmr);
/* Validates a transfer of n bytes between local memory and [remote,
 * remote+n) of rank; on success fills *r (unless n == 0 or rank is us;
 * zeroed when the range is outside segments under FH_SEGMENT=everything). */
int  fh_rma_validate(const char *fn, int rank, const void *local, const void *remote,
                     size_t n, fh_seg_range_t *r);
/* Polls until ctr->pending == 0 (own-path rounds while spinning, every
 * 4th a full fh_wait_round); returns ctr->status. */
int  fh_wait_ctr(fh_tls_t *t, fh_ctr_t *ctr);
/* Polls until every NB/NBI operation of t is complete (t->quiet_ops == 0;
 * no poll when it already is): fh_quiet, and the thread-exit hook. */
int  fh_wait_quiet(fh_tls_t *t);

/* ---- seg_holes.c: what a piece's owner protected or unmapped */
struct fh_seg_hole {
    uintptr_t lo, hi;          /* [lo, hi), whole pages */
    int prot;                  /* still allowed: PROT_READ or 0 */
};
struct fh_seg_holes {
    struct fh_seg_holes *retired_next;   /* segment.c's list of old ones */
    uint64_t retired_at;                 /* rt->seg_epoch then */
    uint32_t n;
    struct fh_seg_hole h[];    /* sorted, disjoint */
};
/* A new list: old with [lo, hi) set to prot (-1: unmapped; PROT_READ |
 * PROT_WRITE removes the holes there).  *changed says whether it differs
 * from old.  NULL: no hole left (*changed set), or out of memory
 * (*changed false).  old stays as it is. */
const struct fh_seg_holes *fh_seg_holes_set(const struct fh_seg_holes *old, uintptr_t lo,
                                            uintptr_t hi, int prot, bool *changed);
/* The first address of [addr, +n) that a put (write) or get may not
 * touch, or 0. */
uintptr_t fh_seg_holes_meet(const struct fh_seg_holes *h, uintptr_t addr, size_t n,
                            bool write);
/* FH_OK, or FH_ERR_OUT_OF_SEGMENT with fh_last_error() naming rank and the
 * first address a transfer into range r (r->holes != NULL) may not touch. */
int fh_seg_holes_check(const char *fn, int rank, bool write, const void *remote, size_t n,
                       const fh_seg_range_t *r);

/* ---- seg_protect.c: the application's mprotect/munmap of segment memory */
/* fh_init, after fh_seg_init: registers the handlers and the hook;
 * FH_ERR_NO_MEMORY (nothing registered). */
int  fh_seg_protect_init(fh_rt_t *rt);
/* fh_finalize: the wrappers pass straight through from now on. */
void fh_seg_protect_fini(void);

/* ---- segment.c */
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
/* seg_protect.c, on segment.c's table (segment_private.h): */
/* Whether [lo, hi) meets one of our own published pieces where setting it
 * to prot changes something (prot lacks read or write, or a hole is
 * there).  Lock-free, no write: safe in a signal handler. */
bool fh_seg_meets_own(fh_rt_t *rt, uintptr_t lo, uintptr_t hi, int prot);
/* A change of a piece's holes: segment id and the part of the range in it. */
typedef struct fh_seg_change {
    long seg;
    uintptr_t lo, hi;
} fh_seg_change_t;
/* Sets [lo, hi) of every published piece of ours it meets to prot
 * (fh_seg_holes_set) and publishes; out[0..ret) says what changed (at most
 * max).  Takes seg_lock. */
int  fh_seg_protect_own(fh_rt_t *rt, uintptr_t lo, uintptr_t hi, int prot,
                        fh_seg_change_t *out, int max);
/* The same for rank's piece of segment seg, as rank told us (clipped to
 * the piece; a segment not published, or a range outside it, changes
 * nothing).  Takes seg_lock: may run in a handler. */
void fh_seg_protect_peer(fh_rt_t *rt, int rank, long seg, uintptr_t lo, uintptr_t hi,
                         int prot);

/* ---- services.c: the table of calls the strategies get (reg/services.h) */
extern const fh_reg_services_t fh_reg_services;

/* ---- atomic.c */
void fh_atomic_init(void);

/* ---- strided.c: registers the strided AM handlers (fh_init). */
void fh_strided_init(void);

/* ---- coll.c: collectives pair in order and must agree (coll.c, top) */
enum fh_coll_kind {
    FH_COLL_BARRIER = 1, FH_COLL_ALLGATHER, FH_COLL_SEG_CREATE, FH_COLL_SEG_DESTROY,
    FH_COLL_FINALIZE, FH_COLL_BARRIER_OR
};
/* What every rank's paired call must agree on: the kind and an argument
 * (its low 56 bits). */
uint64_t fh_coll_sig(enum fh_coll_kind kind, uint64_t arg);
/* Sends the calling thread's path's NB atomic requests that waited for a
 * credit (no lock held, not in a handler: then a no-op). */
void fh_atomic_progress(fh_tls_t *t);
void fh_coll_init(void);
/* A collective call holds the rank's coll_lock from start to end; enter
 * polls while it waits.  Not in a handler, no other lock held.
 * FH_ERR_STATE (lock not taken) when thread t holds it for a split
 * barrier it has not completed (fh_barrier_or_notify). */
int  fh_coll_enter(fh_tls_t *t, const char *fn);
void fh_coll_leave(void);
/* Under coll_lock.  A barrier that also checks that every rank's sig is
 * the same: FH_ERR_STATE on every rank when not (after the barrier; fn
 * names the caller in the error text). */
int  fh_barrier_internal(fh_tls_t *t, uint64_t sig, const char *fn);
/* The same, also combining *or: in, this rank's bits; out, the OR of every
 * rank's (fh_barrier_or). */
int  fh_barrier_or_internal(fh_tls_t *t, uint64_t sig, const char *fn, uint64_t *or);
/* From a wait outside collectives (path.c wait_round, fh_poll), no lock
 * held, not from a handler: once a link was lost, sends again this rank's
 * barrier notifications that left on a lost link (coll.c resend_lost), as
 * a barrier's own wait does -- unless a collective holds coll_lock. */
void fh_coll_resend_lost(fh_tls_t *t);
/* Under coll_lock: fh_barrier_internal, then the bootstrap's allgather. */
int  fh_allgather_internal(fh_tls_t *t, uint64_t sig, const char *fn, const void *in,
                           void *out, size_t len);


#endif /* FH_INTERNAL_H */
