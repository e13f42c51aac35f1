/*
 * reg_internal.h -- the state shared by the three files of
 * FH_REG_STRATEGY=firehose (docs/firehose-cache.md, "Integration"):
 *
 *   reg.c       the per-rank cache (fhc_t) behind g->lock: env callbacks,
 *               the move AMs and their outbox, life cycle, stats
 *   reg_xfer.c  asynchronous transfers: per-chunk op records, the per-path
 *               ready lists, posting, completion
 *   reg_hit.c   the hit layer: per-thread caches of firehose references,
 *               reclaimed for peers whose budget queue is not empty
 *
 * Lock order (never the reverse): path lock -> g->lock.  Nothing sends,
 * polls, or takes a path lock while holding g->lock.  g->flush_lock is
 * taken with no other lock held.
 */
#ifndef FH_REG_INTERNAL_H
#define FH_REG_INTERNAL_H

#include "cache/fhc.h"
#include "internal.h"
#include "reg_map.h"

/* Largest move reply: header + FHC_MAX_PIECES regions (fhc_wire.h). */
#define REG_REPLY_MAX (16u + 40u * FHC_MAX_PIECES)
/* Move request without data: header + FHC_MAX_PIECES releases. */
#define REG_REQ_FIXED (40u + 8u * FHC_MAX_PIECES)

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

struct fh_reg {
    pthread_mutex_t lock;          /* the cache, outbox, capture, spans, tcs */
    fhc_t *c;
    reg_msg_t *out, **out_tail;    /* requests to send */
    pthread_mutex_t flush_lock;    /* one sender at a time: keeps order */
    int capturing;                 /* inside the MOVE_REQ handler */
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

    /* Hit layer (reg_hit.c), under lock. */
    struct reg_tc *tcs;            /* every thread cache ever made */
    struct reg_hpeer {
        uint8_t swept;             /* see reg_hit_budget() */
        uint64_t revoked_busy;     /* REVOKEs that found a busy entry */
    } *hpeer;                      /* [nranks] */
};

/* ---- hit layer entries (reg_hit.c) */

/* Entry state word (reg_ent_t.state), see reg_hit.c:
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
} __attribute__((aligned(64))) reg_ent_t;

/* ---- op records (reg_xfer.c) */

/* One chunk of a put/get in flight.  Allocated at submit, freed when its
 * last RDMA piece completed (or at once for errors and put-in-move).
 * Posted and completed on `path` (under its lock); ready() may run on any
 * thread, under g->lock, and only pushes it onto path->reg_ready. */
typedef struct reg_xop {
    fh_ctr_t pc;                   /* first member: the pieces in flight (+1 while
                                      posting); pc.compl is every piece's op_ctx */
    struct reg_xop *next;          /* ready list / retry list */
    fh_path_t *path;
    fh_ctr_t *uctr;                /* the caller's: stack, handle or NBI */
    reg_ent_t *ent;                /* hit-layer reference, or NULL: fhc op */
    char *local;                   /* buffer of the whole chunk */
    struct fh_mr *lmr;             /* the caller's registration of it, or NULL */
    bool lpinned;                  /* lp is set up (fh_reg_local_pin ran) */
    int rank;
    bool is_put;
    bool noxfer;                   /* fh_reg_hit_warm: acquire, no RDMA */
    int status;                    /* from ready(): FHC_HIT, DONE_IN_MOVE, <0 */
    unsigned nposted;              /* pieces posted completely so far */
    size_t poff;                   /* bytes of piece[nposted] posted */
    fhc_op_t op;                   /* pieces; fhc's record when ent == NULL */
    fh_reg_lpin_t lp;              /* local pins (reg_local.c), when lpinned */
} reg_xop_t;

/* FH_REG_CHECK=1: fhc's invariants for peer (both sides), after a cache
 * call that touched it (g->lock held).  A violation is fatal. */
static inline void reg_check(struct fh_reg *g, uint32_t peer)
{
    char why[256];
    if (g->check && fhc_check_peer(g->c, peer, why, sizeof why) != 0)
        fh_fatal("firehose cache: invariant broken (peer %u): %s", peer, why);
}

/* ---- reg.c */
/* (fh_reg_flush, internal.h: sends queued cache messages.) */

/* ---- reg_hit.c (all under g->lock unless said otherwise) */
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
void reg_hit_install(struct fh_reg *g, fh_tls_t *t, reg_xop_t *x);
/* Lock-free lookup + reference on the calling thread's cache. */
reg_ent_t *reg_hit_lookup(fh_tls_t *t, uint32_t peer, uintptr_t raddr, size_t len);
/* Drops one reference (any thread; no lock, or a path lock, held). */
void reg_hit_unref(reg_ent_t *e);
/* The calling thread's cache, created on first use (takes g->lock). */
struct reg_tc *reg_hit_tc(fh_tls_t *t);
/* fh_reg_fini: frees every cache (fhc is being destroyed). */
void reg_hit_fini(struct fh_reg *g);
/* Adds hit-layer hits towards peer (all peers if peer < 0). */
uint64_t reg_hit_count(struct fh_reg *g, int peer);

#endif /* FH_REG_INTERNAL_H */
