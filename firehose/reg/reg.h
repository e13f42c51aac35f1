/*
 * reg.h -- the registration strategy contract: how the runtime core makes
 * peers' memory reachable by RDMA, one table per FH_REG_STRATEGY value.
 *
 * The core (rma.c, segment.c, init.c, thread.c, path.c, stats.c) never
 * names a strategy: it holds rt->reg_ops, picked once at fh_init
 * (fh_reg_pick), tests its capability bits and calls its hooks.  This is
 * the only registration header the core includes.
 *
 *   strategy          table                      files (firehose/reg/)
 *   pin-everything    fh_reg_pin_everything      pin_everything.c
 *   firehose          fh_reg_firehose            firehose*.c, firehose_internal.h
 *   rendezvous        fh_reg_rendezvous          rendezvous.c, strat_common.{c,h}
 *   rendezvous-cache  fh_reg_rendezvous_cache    (the same files, with a cache)
 *   bounce            fh_reg_bounce              bounce.c, strat_common.{c,h}
 *
 * What the core gives a strategy in return (its state, completion
 * counting, its calls) is services.h.
 *
 * Hooks.  Every hook but xfer may be NULL: the core then does nothing at
 * that point.  No hook but stats runs inside an AM handler; a strategy's own AM
 * handlers run under the service path's lock like every handler.  Lock
 * order (internal.h): a path lock comes before a strategy's own lock, and
 * nothing sends or polls while holding the strategy's lock.  Each hook's
 * comment says which lock the core holds when it calls it.
 */
#ifndef FH_REG_H
#define FH_REG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conduits/conduit.h"
#include "firehose.h"
#include "services.h"

enum fh_reg_cap {
    /* xfer can take ownership of a temporary local registration
     * (fh_rma_local_mr) and release it when the transfer is over, so a
     * non-blocking call stays non-blocking; without it the core completes
     * such a transfer before returning. */
    FH_REG_CAP_NB_OWNS_LMR = 1u << 0,
    /* FH_SEGMENT=everything: any mapped address of a peer is a target. */
    FH_REG_CAP_ANY_ADDRESS = 1u << 1,
    /* The core registers local buffers the conduit needs registered
     * (fh_rma_local_mr); without it the strategy pins them itself, or
     * needs no local registration at all. */
    FH_REG_CAP_LOCAL_MR    = 1u << 2,
    /* seg_release revokes keys peers hold: fh_segment_destroy runs a
     * second barrier after it, so no rank stops polling before every
     * rank's revocations were acknowledged. */
    FH_REG_CAP_SEG_REVOKE  = 1u << 3,
};

typedef struct fh_reg_ops {
    const char *name;        /* the FH_REG_STRATEGY value */
    unsigned caps;           /* enum fh_reg_cap */

    /* ---- life cycle (fh_init / fh_finalize: one thread, no lock) */
    /* Registers the strategy's AM handlers.  Called for EVERY table at
     * fh_init, whichever strategy is active, so that a peer configured
     * with another strategy gets an error reply instead of silence. */
    void     (*handlers)(void);
    /* After the conduit connected; collective (may use the bootstrap).
     * Returns FH_OK or an error with its text set. */
    int      (*init)(fh_core_t *rt);
    /* fh_finalize, before any segment is unmapped: deregisters every key
     * given to peers.  Returns the deregistrations that failed (the
     * segments then stay mapped). */
    unsigned (*fini_keys)(fh_core_t *rt);
    /* fh_finalize, after the segments are gone, before the conduit closes. */
    void     (*fini)(fh_core_t *rt);

    /* ---- segments (rt->seg_lock held unless said otherwise) */
    /* Alignment and granularity of our segment pieces; NULL: the page. */
    size_t   (*seg_align)(const fh_core_t *rt);
    /* Alignment of a piece's base when larger than seg_align (a power of
     * two; address space only, the size stays whole seg_align units);
     * NULL: seg_align. */
    size_t   (*seg_base_align)(const fh_core_t *rt);
    /* Peers may reach [base, +len) from now on: fills *mr with the piece's
     * own registration and *rkey with its key, or leaves them NULL and
     * {0, 0} (registered per operation).  An error leaves nothing behind. */
    int      (*seg_expose)(fh_core_t *rt, void *base, size_t len, struct fh_mr **mr,
                           fh_rkey_t *rkey);
    /* A piece alive at fh_finalize, or one whose creation failed after
     * seg_expose, without seg_release: the strategy keeps it mapped until
     * fini (its registrations may still cover it) and unmaps it then.
     * NULL: the core unmaps it at once. */
    void     (*seg_retire)(fh_core_t *rt, void *base, size_t len);
    /* fh_segment_destroy (after the segment was unpublished and no handler
     * still uses it) or a failed creation: deregisters everything
     * registered inside [base, +len) for peers, waiting (polling through
     * t, fh_wait_round) for what peers must acknowledge.  NO lock held,
     * not in a handler.  Returns the deregistrations that failed (the
     * piece then stays mapped). */
    unsigned (*seg_release)(fh_core_t *rt, fh_thread_t *t, void *base, size_t len);
    /* The application is about to mprotect or munmap [base, +len), inside
     * a live piece of ours (firehose/seg_protect.c; every peer already
     * refuses the range where it lost access): lets go of what peers hold
     * registered there, waiting (polling through t) for their
     * acknowledgements, so that later requests are checked against the new
     * protections.  The piece stays exposed.  NO lock held, not in a
     * handler.  NULL: nothing held there is granted per protection. */
    void     (*seg_reprotect)(fh_core_t *rt, fh_thread_t *t, void *base, size_t len);

    /* ---- transfers */
    /* A put/get of n bytes between local (registered as lmr, or NULL) and
     * [remote, +n), validated inside rank's segment (or any address with
     * FH_REG_CAP_ANY_ADDRESS), rank != ours.  rkey: the segment's key
     * ({0, 0} when registered per operation).  Counts into ctr and never
     * waits for the target: what cannot go now proceeds from progress.
     * own_lmr (only with FH_REG_CAP_NB_OWNS_LMR): lmr is a temporary
     * registration the transfer releases when over, also on failure.
     * Returns FH_OK or an error with its text set (parts already started
     * still complete into ctr).  No lock held, not in a handler. */
    int      (*xfer)(fh_thread_t *t, bool is_put, int rank, char *local,
                     struct fh_mr *lmr, uint64_t remote, size_t n, const fh_rkey_t *rkey,
                     fh_ctr_t *ctr, bool own_lmr);

    /* ---- hooks of the core's loops */
    /* Every API entry (fh_enter), after the state checks.  No lock held,
     * not in a handler; may poll. */
    void     (*on_entry)(fh_thread_t *t);
    /* Whether an address published now (a client's AM reply) cannot reach
     * a peer that may still write through a registration of memory freed
     * before: false while REVOKEs of such memory are unacknowledged (what
     * on_entry waits for; a reply cannot wait, so the core holds it).
     * Processes pending invalidations first.  May run inside a handler,
     * a path lock held; never polls.  NULL: always true. */
    bool     (*may_publish)(fh_core_t *rt);
    /* Every progress round (fh_progress).  No lock held, not in a handler. */
    void     (*progress)(fh_thread_t *t);
    /* Path set-up (before init) and teardown.  No lock held. */
    void     (*path_init)(fh_path_base_t *p);
    void     (*path_fini)(fh_path_base_t *p);
    /* End of every poll of p: moves on what the poll made ready.  p->lock
     * held; may run in the thread that runs handlers, never inside one. */
    void     (*poll_end)(fh_path_base_t *p);
    /* Whether p still holds strategy work (a path whose threads exited is
     * polled until idle).  p->lock held. */
    bool     (*path_busy)(const fh_path_base_t *p);
    /* p's link to rank's service path was lost (conduits/conduit.h
     * on_lost): the strategy fails, with FH_ERR_PEER_DEAD, every request it
     * sent over that link that waits for a reply.  p->lock held, in a poll;
     * never polls, takes only the strategy's lock.  NULL: nothing waits. */
    void     (*link_lost)(fh_path_base_t *p, int rank);
    /* The link between our service path and rank's was lost (conduits/
     * conduit.h on_lost of path 0 towards rpath 0), and that connection is
     * never made again (conduits/ofi/ofi_cm_redial.c; docs/reliability.md):
     * the pair's strategy messages have no way left, so the strategy drops
     * what rank keeps on our memory (firehose: fhc_peer_dead: its holds,
     * its unacknowledged REVOKEs, its budget back to the other peers).
     * After link_lost of the same loss.  Path 0's lock held, in a poll;
     * never polls, takes only the strategy's lock.  NULL: nothing kept. */
    void     (*peer_lost)(fh_core_t *rt, int rank);
    /* A thread's state is being released at its exit: give back what the
     * strategy keeps per thread.  No lock held. */
    void     (*thread_exit)(fh_thread_t *t);
    /* Adds the strategy's counters for peer (every peer when peer is our
     * rank).  Any thread, also a handler; takes only the strategy's lock. */
    void     (*stats)(fh_core_t *rt, int peer, fh_peer_stats_t *out);
} fh_reg_ops_t;

extern const fh_reg_ops_t fh_reg_pin_everything, fh_reg_firehose, fh_reg_rendezvous,
    fh_reg_rendezvous_cache, fh_reg_bounce;

/* The table of an FH_REG_STRATEGY value (FH_REG_*, config.h). */
const fh_reg_ops_t *fh_reg_pick(int strategy);
/* Runs every table's handlers hook (fh_init). */
void fh_reg_register_all_handlers(void);

/* The caller's own buffer, checked before any strategy's transfer is
 * posted (local_check.c: per-thread entries of mappings found mapped,
 * made stale by a memory monitor's events and by fh_lc_stale).
 * fh_lc_init at fh_init (never fails: without a monitor every check asks
 * the kernel), fh_lc_fini at fh_finalize.  fh_lc_check: FH_OK when
 * [local, +n) is mapped readable (a put's source) or writable (a get's
 * destination); else FH_ERR_INVALID, nothing posted, fh_last_error()
 * naming the first bad address, the peer rank and the remote address.
 * Any thread. */
void fh_lc_init(fh_core_t *rt);
void fh_lc_fini(void);
/* Every thread's remembered mappings are stale from now on (the
 * application takes access away: firehose/seg_protect.c).  Lock-free, one
 * atomic add: safe in a signal handler. */
void fh_lc_stale(void);
int  fh_lc_check(bool is_put, int rank, const char *local, size_t n, uint64_t remote);

#endif /* FH_REG_H */
