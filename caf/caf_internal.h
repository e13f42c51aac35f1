/*
 * caf_internal.h -- what the files of libcaf_firehose share.
 *
 * libcaf_firehose is gfortran's coarray library (caf_abi.h) on the public
 * firehose API (firehose.h) alone.  One image = one firehose rank.  The
 * layout of the library:
 *
 *   caf_image.c    start, end, STOP / ERROR STOP / FAIL IMAGE, image status
 *   caf_sync.c     SYNC ALL, SYNC IMAGES, SYNC MEMORY (own AM protocol: an
 *                  image that has stopped keeps answering, see there)
 *   caf_heap.c     the coarray heap and register/deregister
 *   caf_xfer.c     get/send/sendget: descriptors -> contiguous blocks ->
 *                  fh_put/fh_get (one call) or strided calls
 *   caf_convert.c  type and kind conversion, packing
 *   caf_ref.c      the *_by_ref calls and is_present (components)
 *   caf_coll*.c    co_sum/min/max/broadcast/reduce (caf_coll.h: the node
 *                  path through shared memory, the message path)
 *   caf_atomic.c   atomics, locks, events, CRITICAL
 *   caf_team.c     teams
 *   caf_wire.c     what every AM carries and the checks a received one
 *                  must pass before a handler uses it (caf_wire.h)
 *
 * Memory: one firehose segment per image, created at init, of
 * FH_CAF_HEAP bytes for coarrays (allocated identically on every image:
 * registration is collective and in the same order everywhere, and the
 * allocator is deterministic) followed by FH_CAF_LOCAL_HEAP bytes for
 * memory only this image allocates (allocatable components of coarrays of
 * derived type), which other images reach through the descriptors they read.
 * Remote address of a coarray byte = peer's segment base + the same offset.
 *
 * Threads: a coarray program calls the library from one thread; the
 * library is not thread-safe beyond what firehose gives.
 */
#ifndef CAF_INTERNAL_H
#define CAF_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "caf_abi.h"
#include "caf_wire.h" /* handler indices, image status, message checks */
#include "firehose.h"

/* ------------------------------------------------------------ images */

typedef struct caf_team caf_team_s;

typedef struct caf_state {
    int rank;               /* firehose rank of this image */
    int nranks;             /* images in the initial team */
    fh_seg_t seg;
    char **bases;           /* [rank] base of each image's segment */
    size_t sym_size;        /* FH_CAF_HEAP */
    size_t local_size;      /* FH_CAF_LOCAL_HEAP */
    volatile unsigned char *status; /* [rank] CAF_IMG_*, set by CAF_H_STATUS */
    int nstopped, nfailed;  /* images with that status (self included) */
    /* [rank]: what an image that stopped or failed had done of the
     * collectives (its status message); NULL until the first one. */
    caf_status_msg_t *ended;
    caf_team_s *team;       /* current team (NULL = initial team) */
    bool stopping;          /* this image is in normal termination */
    unsigned idle_spins;    /* see caf_idle */
    uint64_t ndropped;      /* AMs dropped by our handlers (caf_drop) */
    uint64_t lost_seen;     /* fh_am_lost(-1) at the last look (caf_poll) */
} caf_state_t;

extern caf_state_t caf;

/* Starts the library once (fh_init, heap, handlers). */
void caf_start(int *argc, char ***argv);

/* Rank of 1-based image index `image` of the current team, or -1. */
int caf_image_rank(int image);
/* This image's index and the image count in the current team. */
int caf_team_this_image(void);
int caf_team_num_images(void);
/* Ranks of the current team, in image order (n entries). */
const int *caf_team_ranks(int *n);
/* Ranks of the initial team (0 .. nranks-1), whatever the current team. */
const int *caf_initial_ranks(void);
/* Identifier of the current team, the same on its members (initial: 0). */
uint64_t caf_team_id(void);
/* True inside CHANGE TEAM (the current team is not the initial team). */
bool caf_in_child_team(void);
void caf_team_init(void);

/* ------------------------------------------------------------ errors */

/* Reports an error of statement `stmt` (e.g. "SYNC ALL"): with stat, stores
 * `code` in *stat and the message in errmsg (blank padded) and returns;
 * without stat, prints "caf: image I: STMT: message" and ends every image
 * (error termination, exit code 1).  code must be nonzero. */
void caf_error(int *stat, char *errmsg, size_t errmsg_len, int code,
               const char *stmt, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Clears STAT= (0) on success. */
static inline void caf_ok(int *stat)
{
    if (stat)
        *stat = 0;
}
/* Fatal internal or firehose error: message and error termination. */
void caf_fatal(const char *stmt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
/* An error that every running image of the initial team finds at the
 * same barrier (caf_sync.c): each prints "caf: image I: STMT: message",
 * they meet in one more barrier (stopped images take part from their
 * termination loop), and the job ends (exit code 1). */
void caf_error_all(const char *stmt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
/* Copies a message into a Fortran character (blank padded). */
void caf_set_errmsg(char *errmsg, size_t len, const char *msg);

/* Drops a received AM that failed its check (caf_wire.h): counts it in
 * caf.ndropped and logs "caf: image I: dropped a WHAT from image S: WHY"
 * (I, S: ranks + 1) -- the first CAF_DROP_LOG_FIRST, then every
 * CAF_DROP_LOG_EVERY-th, as the runtime logs its own drops.  Never fatal;
 * callable from a handler.  src may be -1 (unknown). */
#define CAF_DROP_LOG_FIRST 10
#define CAF_DROP_LOG_EVERY 1000
void caf_drop(const char *what, int src, const char *why);
/* The job as the checks of caf_wire.h see it. */
static inline caf_job_t caf_job(void)
{
    return (caf_job_t){.nranks = caf.nranks, .self = caf.rank};
}

/* Polls firehose once; a firehose error is fatal, and so is a lost
 * connection with an image (fh_am_lost): what this image waits for from
 * it -- a message, a reply -- may never come (caf's messages travel on the
 * service paths' connections, which are not made again), so the image
 * ends naming it rather than waiting.  caf_idle likewise. */
void caf_poll(void);
/* One turn of a wait loop (spins starts at 0): fh_poll_idle, the
 * runtime's wait policy (docs/caf.md, "Waiting"): a turn that served a
 * peer resets spins; after FH_WAIT_SPIN idle turns (unset: 0 when the job
 * has more images than this machine has cores -- the image we wait for
 * needs ours --, else 262144) each turn yields the core.  The termination
 * loop's own polls yield after caf.idle_spins (CAF_IDLE_SPINS, or 1 with
 * more images than cores). */
#define CAF_IDLE_SPINS 64
void caf_idle(unsigned *spins);

/* Resolves image (1-based, current team) for statement stmt: returns the
 * rank, or -1 after caf_error (stat given) with the STAT code of an image
 * that is out of range, failed (CAF_STAT_FAILED_IMAGE) or -- when
 * stopped_is_error -- stopped. */
int caf_target(int image, int *stat, char *errmsg, size_t errmsg_len,
               const char *stmt, bool stopped_is_error);

/* ------------------------------------------------------------- memory */

/* A token: what a registered coarray (or component) is. */
typedef struct caf_tok {
    uint32_t magic;         /* CAF_TOK_MAGIC while valid */
    caf_register_t type;
    size_t off;             /* offset in the segment (symmetric part: the
                               same on every image) */
    size_t size;            /* bytes (0: no memory yet) */
    char *local;            /* this image's memory (bases[rank] + off) */
    bool symmetric;         /* in the symmetric part */
    uint64_t serial;        /* symmetric: its allocation number (1, 2, ...;
                               the same on every image), for messages */
    gfc_descriptor_t *desc; /* an allocatable array coarray's descriptor
                               (this image's; the bounds are the same on
                               every image), for the *_by_ref calls */
} caf_tok_t;
#define CAF_TOK_MAGIC 0xcaf70ce5u

/* Checks a token from the compiler; fatal if it is not one of ours. */
caf_tok_t *caf_tok(caf_token_t token, const char *stmt);
/* Remote address of local address `p` inside a symmetric token, on rank. */
static inline char *caf_remote(const caf_tok_t *t, int rank, size_t offset)
{
    return caf.bases[rank] + t->off + offset;
}

/* Heap for init/finalize (caf_heap.c).  caf_heap_init: the segment, from
 * FH_CAF_HEAP and FH_CAF_LOCAL_HEAP (a bad value is fatal, named);
 * caf_heap_started, once start-up's own symmetric allocations are made (the
 * collectives' scratch): checks that FH_CAF_HEAP holds them (else fatal,
 * naming the range), and only from then on bounds the symmetric part. */
int caf_heap_init(void);
void caf_heap_started(void);
void caf_heap_fini(void);
/* Symmetric scratch memory for the library itself (collectives): collective,
 * same order everywhere; returns the offset in the segment or (size_t)-1. */
size_t caf_sym_alloc(size_t size);
void caf_sym_free(size_t off, size_t size);
/* Image-local memory other images can reach (NULL when full). */
void *caf_local_alloc(size_t size);
void caf_local_free(void *p, size_t size);
/* True when [p, p+n) lies in this image's segment. */
bool caf_in_segment(const void *p, size_t n);

/* ---------------------------------------------------------- transfers */

/* A strided array of elements of esz bytes: per dimension either a
 * regular step (offs NULL) or explicit byte offsets (vector subscripts). */
typedef struct caf_dimspec {
    size_t n;
    ptrdiff_t step;          /* bytes */
    const ptrdiff_t *offs;   /* n byte offsets, or NULL */
} caf_dimspec_t;

typedef struct caf_layout {
    char *base;
    size_t esz;
    int rank;
    caf_dimspec_t dim[CAF_MAX_DIMENSIONS];
} caf_layout_t;

/* Element count (product of the dimension sizes). */
size_t caf_layout_count(const caf_layout_t *l);
/* Layout of a descriptor's array, starting at base (its own base_addr when
 * base is NULL). */
void caf_layout_desc(caf_layout_t *l, const gfc_descriptor_t *d, char *base);
/* Contiguous layout of n elements. */
void caf_layout_flat(caf_layout_t *l, char *base, size_t esz, size_t n);
/* True when the layout is one contiguous block. */
bool caf_layout_contiguous(const caf_layout_t *l);

/* Element-by-element walk of a layout, first dimension fastest. */
typedef struct caf_iter {
    const caf_layout_t *l;
    size_t idx[CAF_MAX_DIMENSIONS];
    char *addr;              /* the current element */
} caf_iter_t;

void caf_iter_init(caf_iter_t *it, const caf_layout_t *l);
static inline char *caf_iter_addr(const caf_iter_t *it)
{
    return it->addr;
}
void caf_iter_next(caf_iter_t *it);
/* Elements from the current one on that are contiguous in memory along
 * the first dimension (at least 1). */
size_t caf_iter_run(const caf_iter_t *it);
/* Advances k elements, k <= caf_iter_run(it). */
void caf_iter_skip(caf_iter_t *it, size_t k);
/* Lowest and highest byte offsets (from base) the layout touches:
 * [*lo, *hi) covers every element.  Count must be nonzero. */
void caf_layout_span(const caf_layout_t *l, ptrdiff_t *lo, ptrdiff_t *hi);

/* Moves count elements between rank's memory (remote layout) and ours
 * (local layout, same esz, same count): put when is_put, else get.
 * Contiguous: one fh_put/fh_get; otherwise fh_put_strided/fh_get_strided
 * per plane or row; vector subscripts in runs of constant steps (caf_xfer.c).
 * Returns FH_OK or a firehose error. */
int caf_rma(int rank, bool is_put, const caf_layout_t *remote,
            const caf_layout_t *local);

/* ------------------------------------------------------- conversions */

/* A value's type: CAF_BT_* and its byte size (character: len * kind). */
typedef struct caf_type {
    int bt;
    int kind;
    size_t size;
} caf_type_t;

/* True when converting between the two types is a byte copy. */
bool caf_same_type(caf_type_t a, caf_type_t b);
/* Converts one element src (type st) into dst (type dt) as Fortran
 * intrinsic assignment does.  Returns false for an impossible pair. */
bool caf_convert(void *dst, caf_type_t dt, const void *src, caf_type_t st);
/* Copies/converts count elements between layouts (local memory only). */
bool caf_copy_layout(const caf_layout_t *dst, caf_type_t dt,
                     const caf_layout_t *src, caf_type_t st, size_t count);

/* Local data (ll, type lt) -> remote layout rl (type rt) on rank, through
 * a packed temporary of the remote type when the types differ, when one
 * local element fills every remote element, or -- with may_tmp -- when the
 * target is this image (source and target may overlap).  Errors go through
 * caf_error(stat, ..., stmt).  Returns true on success. */
bool caf_put_layout(int rank, const caf_layout_t *rl, caf_type_t rt,
                    const caf_layout_t *ll, caf_type_t lt, bool may_tmp,
                    int *stat, const char *stmt);
/* Remote layout rl (type rt) on rank -> local layout ll (type lt), the same
 * element count. */
bool caf_get_layout(int rank, const caf_layout_t *rl, caf_type_t rt,
                    const caf_layout_t *ll, caf_type_t lt, int *stat,
                    const char *stmt);

/* Collectives' scratch memory (caf_coll_msg.c; and the node path's,
 * after the images agree it exists): collective, called by caf_start. */
void caf_coll_init(void);
/* CO_* calls this image entered in team `team` (0: the initial team). */
uint64_t caf_coll_count(uint64_t team);
/* Whether rank, which has stopped or failed, had entered call `seq` of
 * team `team` before it did (its status message says). */
bool caf_coll_took_part(int rank, uint64_t team, uint64_t seq);

/* ----------------------------------------------------------- sync */
void caf_sync_init(void);
/* After caf_heap_init: the SYNC IMAGES counts in the symmetric heap. */
void caf_sync_heap_init(void);
/* Barrier over the ranks of the current team that keeps working when
 * images have stopped (they take part from their termination loop), for
 * a statement of one of two kinds (F2018 11.6.11):
 *   CAF_SYNC_IMAGES  SYNC ALL, SYNC TEAM: the team's images synchronize;
 *                    once one is known to have stopped the statement has
 *                    the effect of SYNC MEMORY -- no wait (if that is
 *                    learnt during the wait, it ends there);
 *   CAF_SYNC_ACTIVE  CHANGE TEAM, END TEAM, ALLOCATE / DEALLOCATE of a
 *                    coarray: the active images synchronize, whatever
 *                    stopped.
 * Returns 0, or CAF_STAT_STOPPED_IMAGE / CAF_STAT_FAILED_IMAGE when such
 * images exist (the barrier happened among the others). */
enum { CAF_SYNC_IMAGES = 1, CAF_SYNC_ACTIVE = 2 };
int caf_barrier(int kind);
/* caf_barrier for the initial team's ALLOCATE (CAF_BAR_ALLOCATE) or
 * DEALLOCATE (CAF_BAR_DEALLOCATE) of a coarray, after caf_heap recorded
 * the statement: when the images do not all bring the same statement and
 * heap record (caf_heap_stamp), every image reports it and the job ends. */
enum { CAF_BAR_SYNC = 1, CAF_BAR_ALLOCATE = 2, CAF_BAR_DEALLOCATE = 4 };
int caf_barrier_heap(unsigned stmt);
/* What this image brings to every barrier of the initial team: the number
 * of ALLOCATE / DEALLOCATE statements of coarrays it executed and a hash
 * of its record of the last one (caf_heap.c's ledger). */
void caf_heap_stamp(uint64_t *seq, uint64_t *hash);
/* Called by every image at the barrier whose stamps differ: which images'
 * ledgers differ from ours and how, into buf. */
void caf_heap_disagreement(char *buf, size_t len);
/* The same over an explicit group: id (same on every member), its ranks
 * in image order, our index there. */
int caf_barrier_group(uint64_t id, const int *ranks, int n, int me, int kind);
/* Barriers this image entered as a running image in team `team` (0: the
 * initial team), for its status message. */
uint64_t caf_sync_entered(uint64_t team);
/* Run by the termination loop of a stopped (or failed) image, over and
 * over; never waits.  Takes part in the initial team's barriers (one
 * fh_barrier_or_notify / fh_barrier_or_try after the other) until the last
 * one (every image ended), and in the barriers of the other groups it is a
 * member of (caf_sync.c, serve_groups); polls.  Returns whether the last
 * initial-team barrier is done; *moved: whether a barrier completed now. */
bool caf_sync_serve(bool *moved);
/* FORM TEAM made group id (ranks[0..n), this image's index me): a member
 * that stops before it enters the group's first barrier still knows the
 * group and serves its barriers. */
void caf_sync_team_formed(uint64_t id, const int *ranks, int n, int me);

#endif /* CAF_INTERNAL_H */
