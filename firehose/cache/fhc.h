/*
 * fhc.h -- the firehose registration cache: pure bookkeeping, both sides.
 *
 * One fhc_t per rank holds
 *   - the TARGET side: the regions of our memory that are registered, which
 *     peers hold firehoses on them, the victim FIFO (registered, unreferenced
 *     regions, deregistered lazily), local pins;
 *   - the INITIATOR side: per peer, the firehoses we hold on that peer's
 *     memory, the unused FIFO (our victims), pending moves and the operations
 *     waiting for them or for budget.
 * The design is docs/firehose-cache.md.  This module does no I/O, takes no
 * locks and starts no threads: registration, message sending and logging go
 * through the callbacks of fhc_env_t.  The runtime serializes calls on one
 * fhc_t (the per-rank cache lock); its lock-free hit layer (firehose_hit.c) sits
 * on top and holds ordinary acquisitions of this core open.
 *
 * Vocabulary (all sizes in bytes):
 *   B      bucket size (power of two)
 *   frame  an aligned block of R bytes; R = the effective region max (a
 *          power-of-two multiple of B, <= FH_REGION_MAX, <= F and
 *          <= FHC_MAX_PIECES * B).  A region never crosses a frame boundary,
 *          and an operation CHUNK lies inside one frame (fhc_chunk_len), so a
 *          chunk's firehoses total at most R <= F bytes: any single chunk fits
 *          in a peer's budget once the other firehoses are released.
 *   F      per-peer budget, M / (N-1) rounded down to a multiple of B.
 *
 * Protocol requirements on the runtime:
 *   - every fhc_t of a job is created with the same bucket, region_max, M,
 *     maxvictim and put_in_move (F and frames must agree);
 *   - move REQUESTS from one initiator to one target are delivered in the
 *     order they were sent (one service path per pair).  Replies may be
 *     reordered;
 *   - env->send and the op->ready callbacks must not call back into the same
 *     fhc_t (queue the work instead): they are called from inside fhc calls.
 *   - exposed segments are bucket-aligned (allowed() is asked about whole
 *     buckets: a region must never expose memory outside a segment);
 *   - REVOKE and REVOKE-ACK messages (fhc_invalidate) are sent with
 *     is_reply == 0 and travel like move requests: in order with the
 *     sender's move requests to the same peer.
 *
 * Errors are negative FHC_ERR_* values whose numbers equal the runtime's
 * fh_err_t codes of the same meaning.
 */
#ifndef FHC_H
#define FHC_H

#include <stddef.h>
#include <stdint.h>

enum {
    FHC_HIT            = 0,   /* acquire: pieces are filled, do the RDMA */
    FHC_PENDING        = 1,   /* acquire: op->ready will be called later */
    FHC_DONE_IN_MOVE   = 2,   /* ready: the put travelled inside the move;
                                 no RDMA, no fhc_release needed */
};

enum {
    FHC_ERR_INVALID        = -1,   /* bad argument or malformed message */
    FHC_ERR_RANK           = -2,   /* peer outside [0, nranks) or ourselves */
    FHC_ERR_OVERFLOW       = -3,   /* address arithmetic overflows */
    FHC_ERR_OUT_OF_SEGMENT = -4,   /* target refused: not inside its segments */
    FHC_ERR_NO_MEMORY      = -10,  /* allocation or registration failed */
    FHC_ERR_LIMIT          = -11,  /* target refused: over the peer's F */
    FHC_ERR_CONFIG         = -16,  /* inconsistent parameters */
    FHC_ERR_AGAIN          = -17,  /* local pin: MAXVICTIM full, retry later;
                                      move reply: the span meets a firehose of
                                      ours being revoked, ask again (the cache
                                      retries by itself, see fhc_invalidate) */
};

/* Largest number of regions one chunk can touch (= buckets per frame). */
#define FHC_MAX_PIECES 16u

typedef struct fhc_env {
    void *arg;
    /* Register [addr, addr+len); remote != 0: peers may RDMA into it.  Sets
     * *mr (opaque, passed back to unpin) and key (what peers need), and
     * *reach to 0 when peers may read and write all of it, else to what
     * they may (FHC_REACH_*: a mapping that ends inside a bucket, pages the
     * application protected); the initiator checks every transfer against
     * it before moving a byte.  want: a byte of [addr, addr+len) the peer
     * asked for (the reachable part should hold it), or 0.
     * Returns 0 or a negative error.  FHC_ERR_NO_MEMORY is retried after
     * deregistering the oldest victim; any other error fails at once (e.g.
     * memory that cannot be monitored, see fhc_invalidate). */
    int  (*pin)(void *arg, uintptr_t addr, size_t len, int remote, uintptr_t want,
                void **mr, uint64_t key[2], uint64_t *reach);
    void (*unpin)(void *arg, void *mr);
    /* Non-zero iff [addr, addr+len) lies inside our exposed segments. */
    int  (*allowed)(void *arg, uintptr_t addr, size_t len);
    /* Deliver msg[0..len) to peer's fhc_on_message(c, our rank, is_reply). */
    void (*send)(void *arg, uint32_t peer, int is_reply, const void *msg,
                 size_t len);
    /* Optional: non-zero iff put-in-move data may be written at [addr,
     * addr+len) (mapped and writable); NULL: allowed() decides. */
    int  (*data_ok)(void *arg, uintptr_t addr, size_t len);
    /* Target: write put-in-move data (memcpy in the runtime). */
    void (*put_in_move)(void *arg, uintptr_t dst, const void *data, size_t len);
    /* Optional: one line about a refused or malformed message. */
    void (*log)(void *arg, const char *line);
    /* Optional: how those lines name peer (the client's words, e.g.
     * "image 3"), NUL-terminated into buf[0..len); NULL: "rank <peer>". */
    void (*name)(void *arg, uint32_t peer, char *buf, size_t len);
} fhc_env_t;

typedef struct fhc_params {
    uint32_t nranks, rank;
    size_t bucket;        /* B: power of two */
    size_t region_max;    /* FH_REGION_MAX: largest registration */
    size_t M;             /* remote pool of this rank */
    size_t maxvictim;     /* local pins + lazily deregistered victims */
    size_t put_in_move;   /* largest put carried in a move (0: never) */
    unsigned debug_bugs;  /* tests only: FHC_BUG_* bits, 0 in production */
    /* Adaptive victim FIFO (fhc_ghost.h): with victim_adaptive != 0 the
     * effective MAXVICTIM moves inside [maxvictim, maxvictim_max] (0: equal
     * to maxvictim) and pinned bytes stay <= M + maxvictim_max. */
    size_t maxvictim_max;
    int victim_adaptive;
    int budget;           /* FHC_BUDGET_STATIC (F each, today's split) or
                             FHC_BUDGET_ADAPTIVE (docs/firehose-cache.md,
                             "Budgets"); the same on every rank of a job */
} fhc_params_t;

enum { FHC_BUDGET_STATIC = 0, FHC_BUDGET_ADAPTIVE = 1 };

/* Deliberate bugs, so the simulator can prove its checks detect them. */
enum {
    FHC_BUG_NO_F_CHECK      = 1u << 0,  /* initiator ignores F; target too */
    FHC_BUG_EVICT_HELD      = 1u << 1,  /* target deregisters held regions */
    FHC_BUG_FORGET_RELEASE  = 1u << 2,  /* victims dropped, not sent */
    FHC_BUG_STALE_INSTALL   = 1u << 3,  /* install regions a reply did not grant */
    FHC_BUG_EARLY_ACK       = 1u << 4,  /* ack a REVOKE while RDMA is in flight */
    FHC_BUG_IGNORE_REVOKE   = 1u << 5,  /* ack a REVOKE, keep the firehose */
    FHC_BUG_VICTIM_PAST_MAX = 1u << 15, /* adaptive MAXVICTIM grows past its max */
    FHC_BUG_GRANT_PAST_M    = 1u << 6,  /* adaptive: raise budgets without
                                           checking the pool (rule 1) */
    FHC_BUG_RECLAIM_BUSY    = 1u << 7,  /* adaptive: on RECLAIM, also release
                                           firehoses an RDMA still uses */
    FHC_BUG_NO_FLOOR        = 1u << 8,  /* adaptive: reclaim below the floor */
};

/* What peers may do with a region when not everything (fhc_env_t.pin; on
 * the wire in the reply's region flags, bit 0 of which is "granted"):
 * FHC_REACH_RO   read only;
 * FHC_REACH_PART only [base + lo, base + hi) is registered, lo and hi in
 *                units of FHC_REACH_GRAIN (4 KiB), 24 bits each. */
#define FHC_REACH_RO     (1ull << 1)
#define FHC_REACH_PART   (1ull << 2)
#define FHC_REACH_GRAIN  4096u
#define FHC_REACH_MAXG   ((1ull << 24) - 1)
static inline uint64_t fhc_reach_part(uint64_t lo_off, uint64_t hi_off)
{
    return FHC_REACH_PART | (lo_off / FHC_REACH_GRAIN) << 16 |
           (hi_off / FHC_REACH_GRAIN) << 40;
}
static inline uint64_t fhc_reach_lo(uint64_t reach)
{
    return reach & FHC_REACH_PART ? (reach >> 16 & FHC_REACH_MAXG) * FHC_REACH_GRAIN : 0;
}
/* The end of what is registered, as an offset into a region of len bytes. */
static inline uint64_t fhc_reach_hi(uint64_t reach, uint64_t len)
{
    return reach & FHC_REACH_PART ? (reach >> 40) * FHC_REACH_GRAIN : len;
}

typedef struct fhc_piece {
    uintptr_t addr;       /* remote address */
    size_t len;
    uint64_t key[2];      /* the target region's key */
    uintptr_t rbase;      /* the whole firehose (region) the piece lies in: */
    size_t rlen;          /* [rbase, rbase+rlen) is one valid chunk */
    uint64_t reach;       /* the region's FHC_REACH_* (0: all of it) */
} fhc_piece_t;

struct fhc_fh;
struct fhc_move;
struct fhc_region;
typedef struct fhc_op fhc_op_t;

/* One operation chunk.  The caller owns the memory and fills the first
 * block; it must stay valid until ready() ran or fhc_release returned. */
struct fhc_op {
    uint32_t peer;
    uintptr_t raddr;          /* remote address */
    size_t len;               /* 1 .. fhc_chunk_len(c, raddr, len) */
    const void *put_data;     /* a put's source (may ride in a move), else NULL */
    void (*ready)(fhc_op_t *op, int status); /* FHC_HIT, FHC_DONE_IN_MOVE or <0 */
    void *user;
    /* Non-zero: fhc_acquire may shorten len (before it returns FHC_HIT or
     * FHC_PENDING) to the first run of the op's buckets that we hold
     * firehoses on, or to the first run we do not, when the op meets both:
     * the resident run goes out at once while the cold run's move is in
     * flight.  The caller acquires [raddr + len, end) as further ops. */
    int may_split;

    /* Filled before FHC_HIT is returned or ready(op, FHC_HIT) is called. */
    unsigned npieces;
    fhc_piece_t piece[FHC_MAX_PIECES];

    /* Private to fhc. */
    struct {
        struct fhc_fh *ref[FHC_MAX_PIECES]; /* firehoses this op holds in use */
        unsigned nref;
        fhc_op_t *next;                     /* move waiters or budget queue */
        int prio;                           /* was at the budget queue head */
        int state;                          /* enum fhc_op_state (internal) */
        int absorbed;                       /* sent a move that absorbed: never again */
        int reaimed;                        /* sent a move to re-aim: never again */
    } priv;
};

typedef struct fhc fhc_t;

/* Checks the parameters and creates the cache.  why gets a sentence on
 * FHC_ERR_CONFIG.  Not handler-related: plain allocation. */
int  fhc_create(const fhc_params_t *p, const fhc_env_t *env, fhc_t **out,
                char *why, size_t whylen);
/* Unpins everything still registered.  Ops still pending are abandoned. */
void fhc_destroy(fhc_t *c);

size_t fhc_F(const fhc_t *c);            /* per-peer budget */
size_t fhc_region_max(const fhc_t *c);   /* effective R (frame size) */
/* Length of the first chunk of [addr, addr+len): <= R, inside one frame. */
size_t fhc_chunk_len(const fhc_t *c, uintptr_t addr, size_t len);

/* Initiator.  Returns FHC_HIT (pieces filled: RDMA, then fhc_release),
 * FHC_PENDING (op->ready(op, status) comes later, from fhc_on_message or
 * fhc_release), or a negative error (nothing changed).  Never waits.
 * With op->may_split, op->len may be shorter on return (see fhc_op). */
int  fhc_acquire(fhc_t *c, fhc_op_t *op);
/* The RDMA of a HIT op completed: drop its in-use references.  May call
 * ready() of ops that waited for budget.  No-op for ops holding nothing. */
void fhc_release(fhc_t *c, fhc_op_t *op);

/* Non-zero iff operations towards peer wait in its budget queue.  While
 * they do, the runtime must not keep idle references of its own on that
 * peer's firehoses (the hit layer returns them, see firehose_hit.c). */
int  fhc_budget_waiting(const fhc_t *c, uint32_t peer);
/* Non-zero iff the HIT op holds a firehose its target revoked (a REVOKE
 * arrived while the op was in use; fhc acknowledges it when the op's
 * fhc_release drops the last use).  The runtime's hit layer keeps ops open
 * across many RDMAs: after a REVOKE it must stop using such an op and
 * release it once its RDMA in flight completed (firehose_hit.c). */
int  fhc_op_revoked(const fhc_t *c, const fhc_op_t *op);

/* A move request (is_reply == 0) or reply from peer.  Never trusts msg. */
void fhc_on_message(fhc_t *c, uint32_t peer, int is_reply, const void *msg,
                    size_t len);

/* Local pins (our buffers as RDMA source/destination), charged against
 * MAXVICTIM.  [addr, addr+len) must be one chunk (fhc_chunk_len).  Fills
 * mr[0..*nmr).  FHC_ERR_AGAIN when MAXVICTIM is full of local pins. */
typedef struct fhc_local {
    uintptr_t addr;
    size_t len;
    unsigned nmr;
    void *mr[FHC_MAX_PIECES];
    uintptr_t mr_base[FHC_MAX_PIECES];        /* extent of mr[i], address order */
    size_t mr_len[FHC_MAX_PIECES];
    struct fhc_region *reg[FHC_MAX_PIECES];   /* private */
} fhc_local_t;
int  fhc_pin_local(fhc_t *c, uintptr_t addr, size_t len, fhc_local_t *out);
void fhc_unpin_local(fhc_t *c, fhc_local_t *l);

/* Memory that was freed or reused (docs/firehose-cache.md, "Memory that is
 * freed or reused").  Our memory [addr, addr+len) was unmapped, moved or
 * discarded (the runtime learns it from its memory monitor): no registration
 * of the old pages may be used again.  Every region meeting the range is
 * invalidated at once: it leaves the bucket map, so no later move, hit or
 * local pin can reach it (new ones register the new pages).  A region
 *   - nobody references is deregistered now;
 *   - with local pins is deregistered by its last fhc_unpin_local;
 *   - held by peers is REVOKED: each holder gets a REVOKE message; it stops
 *     using its firehose, waits for its RDMA through it to complete, and
 *     answers REVOKE-ACK.  Until then that peer's moves meeting the range
 *     are answered FHC_ERR_AGAIN (its cache asks again by itself), so the
 *     peer can never hold a new and a revoked firehose on one bucket.
 *     The region is deregistered once every holder acked and no local pin
 *     remains.
 * Returns the number of regions invalidated.  len == SIZE_MAX - addr + 1
 * (e.g. fhc_invalidate(c, 0, SIZE_MAX)) means everything.  Pinned bytes may
 * exceed M + MAXVICTIM by the invalidated regions still awaiting acks
 * (fhc_stats.dead_bytes). */
unsigned fhc_invalidate(fhc_t *c, uintptr_t addr, size_t len);
/* REVOKEs we sent that are not acknowledged yet (0: no peer can still write
 * through a firehose on invalidated memory). */
uint32_t fhc_revokes_pending(const fhc_t *c);

typedef struct fhc_peer_stats {
    /* initiator side: our operations towards this peer */
    uint64_t hits;            /* acquires satisfied at once */
    uint64_t misses;          /* acquires that had to wait */
    uint64_t moves;           /* move requests sent */
    uint64_t coalesced;       /* waits on a move another op had sent */
    uint64_t put_in_move;     /* moves that carried put data */
    uint64_t budget_waits;    /* times an op queued for F budget */
    uint64_t errors;          /* error replies received */
    uint64_t retries;         /* moves answered FHC_ERR_AGAIN and re-sent */
    uint64_t revoked;         /* our firehoses the peer revoked */
    size_t held_bytes;        /* firehoses we hold on the peer */
    size_t reserved_bytes;    /* worst case of our pending moves */
    size_t unused_bytes;      /* held but no op in flight (victims) */
    uint32_t held_regions;
    uint32_t pending_moves;
    uint32_t budget_queue;    /* ops waiting for budget now */
    /* target side: the peer's firehoses on us */
    size_t target_held_bytes;
    uint32_t target_held_regions;
    uint64_t refused;         /* requests of this peer we refused */
    uint64_t registrations;   /* regions registered for its moves */
    uint64_t evictions;       /* victims deregistered whose last holder it was */
    /* initiator side again */
    uint32_t unused_regions;  /* our unused FIFO towards it (our victims) */
    uint64_t merges;          /* moves that re-asked for firehoses of ours
                                 to merge them into one region (absorb) */
    uint64_t splits;          /* ops cut after their resident (or cold) first
                                 run (fhc_op.may_split) */
    uint64_t reaims;          /* moves that re-asked for firehoses of ours
                                 whose region reached another run of the
                                 memory than the op's bytes (re-aim) */
    /* budgets (adaptive; static: budget == t_budget == F, counters 0) */
    size_t budget;            /* initiator: our budget on the peer now */
    size_t t_budget;          /* target: the budget we enforce for it */
    uint64_t grants;          /* target: raises of its budget we granted */
    uint64_t reclaims;        /* target: RECLAIMs we sent it (incl. decay) */
    uint64_t reclaimed;       /* initiator: its RECLAIMs we obeyed */
    uint64_t deferred;        /* target: its moves we deferred (rule 3) */
} fhc_peer_stats_t;

typedef struct fhc_stats {
    uint64_t registrations, evictions;  /* pin calls; victim deregistrations */
    uint64_t moves_served, refused;
    uint64_t reaims;                    /* victims freed to register the run
                                           a move wanted (re-aim) */
    uint64_t invalidations;             /* regions invalidated (fhc_invalidate) */
    uint64_t dead_freed;                /* ... of which deregistered since */
    uint64_t revokes_sent;              /* REVOKE messages to holders */
    size_t dead_bytes;                  /* invalidated, still registered */
    size_t pinned_bytes;                /* all registered regions */
    size_t remote_bytes;                /* regions some peer holds (<= M) */
    size_t local_bytes;                 /* regions with local pins */
    size_t victim_bytes;                /* victim FIFO */
    uint32_t victim_len, nregions;
    /* adaptive victim FIFO (fhc_ghost.h) */
    size_t maxvictim_now;               /* effective MAXVICTIM now */
    uint64_t victim_repins;             /* registrations of ghost buckets */
    uint64_t maxvictim_grows, maxvictim_shrinks;
} fhc_stats_t;

void fhc_peer_stats(const fhc_t *c, uint32_t peer, fhc_peer_stats_t *s);
void fhc_stats(const fhc_t *c, fhc_stats_t *s);

/* Target side: peer is dead (the runtime declared it so: firehose/reg
 * calls it when the service paths' connection with peer is lost, which is
 * never made again).  Its holds on us are dropped (their regions become
 * victims, trimmed to MAXVICTIM), the REVOKEs it has not acked count as
 * acked (their regions are deregistered once nothing else keeps them, and
 * fhc_revokes_pending stops counting them), its deferred moves are
 * forgotten (no reply), its budget goes back to the floor with nothing
 * committed to it, and the moves other peers had deferred are retried with
 * the bytes freed.  Our own firehoses on peer (initiator side) are kept:
 * ops using them end with their RDMA's error and release as usual.  A
 * message that comes from peer later is handled as from any peer.
 * Idempotent; no-op for ourselves or a rank out of range. */
void fhc_peer_dead(fhc_t *c, uint32_t peer);
/* Initiator side: our link to peer was lost, so the replies to the moves we
 * sent it will never come: each is answered here as if peer had refused it
 * with status (< 0): its owner's ready(op, status), its other waiters step
 * again (a move they then send fails when sent, or a firehose they find
 * serves them).  Returns the number of moves failed. */
unsigned fhc_peer_lost(fhc_t *c, uint32_t peer, int status);

/* Consistency check.  Returns 0, or -1 with a sentence in why.
 * fhc_check_invariants: everything (O(size of the tables)).
 * fhc_check_peer: global counters plus one peer's state on both sides
 * (O(that peer's firehoses)). */
int  fhc_check_invariants(const fhc_t *c, char *why, size_t whylen);
int  fhc_check_peer(const fhc_t *c, uint32_t peer, char *why, size_t whylen);

/* Target-side query for tests: 1 iff [addr, addr+len) lies in one registered
 * region held by peer whose key is key. */
int  fhc_target_holds(const fhc_t *c, uint32_t peer, uintptr_t addr,
                      size_t len, const uint64_t key[2]);

/* Target-side query for tests: 1 iff we sent peer a REVOKE, not yet acked,
 * for the region [addr, addr+len) lies in, whose key is key. */
int  fhc_target_revoking(const fhc_t *c, uint32_t peer, uintptr_t addr,
                         size_t len, const uint64_t key[2]);

#endif /* FHC_H */
