/*
 * caf_wire.h -- what libcaf_firehose's active messages carry, and whether a
 * received one may be used.
 *
 * Every handler of the library (caf_image.c, caf_sync.c, caf_coll_msg.c,
 * caf_team.c) first hands what the runtime gave it -- the sender as the
 * runtime verified it (fh_token_source: never a rank read from the
 * payload), the payload pointer and length, the arguments -- to one of the
 * caf_wire_* functions below, with what the receiver expects.  A message
 * they refuse is dropped (caf_drop: counted and logged, rate-limited), never
 * used, never fatal.  What depends on the state of a collective or barrier
 * the receiver may not have reached yet (the length of the chunk it will
 * wait for, the slot it will grant, whose turn a round is) is checked again
 * when the receiver gets there: caf_wire_coll_due, caf_wire_grant_due,
 * caf_wire_bar_turn.
 *
 * These functions are pure (no firehose calls, no global state), so that
 * tests/fuzz/caf_am_fuzz.c can drive them with arbitrary input.  Each
 * returns true to accept, or false with a one-line reason in why[0..len)
 * (never empty when len > 0), and fills *out only when it accepts.
 *
 * May include: firehose.h (for FH_AM_USER_FIRST), nothing else of the tree.
 */
#ifndef CAF_WIRE_H
#define CAF_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "firehose.h"

/* AM handler indices of the library (firehose's client range). */
enum {
    CAF_H_STATUS = FH_AM_USER_FIRST, /* an image stopped or failed */
    CAF_H_SYNC_ALL,                  /* barrier round message */
    CAF_H_SYNC_IMAGES,               /* SYNC IMAGES notification */
    CAF_H_COLL,                      /* collectives (caf_coll_msg.c) */
    CAF_H_COLL_2,
    CAF_H_TEAM,                      /* teams (caf_team.c) */
    CAF_H_TEAM_2,
    CAF_H_EXTRA                      /* first free index */
};

/* An image's status, as CAF_H_STATUS carries it. */
enum { CAF_IMG_RUNNING = 0, CAF_IMG_STOPPED = 1, CAF_IMG_FAILED = 2 };

/* One received AM, as its handler saw it. */
typedef struct caf_am_in {
    int src;               /* the sender (fh_token_source) */
    const void *buf;       /* payload: NULL for a short AM; a medium's is the
                              runtime's buffer, a long's its place in our
                              segment */
    size_t nbytes;
    const uint64_t *args;
    unsigned nargs;
} caf_am_in_t;

/* The job as the receiver knows it: nranks images, self = our rank.  Every
 * check below first refuses a sender outside [0, nranks) or equal to self
 * (the library never sends itself an AM). */
typedef struct caf_job {
    int nranks, self;
} caf_job_t;

/* ------------------------------------------------ CAF_H_STATUS
 * Short, six arguments: CAF_IMG_STOPPED or CAF_IMG_FAILED, the sender's
 * own status; then how far it had gone when it ended: the CO_* calls it
 * entered in the initial team, the id of the team it was in, the calls it
 * entered there, and the barriers it entered as a running image in the
 * initial team and in that team (caf_coll.c and caf_sync.c decide with
 * them whether it took part in a collective or a barrier).  The counts
 * are the sender's word: they only decide a STAT= of its own job. */
typedef struct caf_status_msg {
    unsigned status;
    uint64_t seq0, team, seq;
    uint64_t bar0, bar;
} caf_status_msg_t;
bool caf_wire_status(const caf_job_t *job, const caf_am_in_t *m,
                     caf_status_msg_t *out, char *why, size_t len);

/* ---------------------------------------------- CAF_H_SYNC_ALL
 * Short, four arguments: group id, round (< CAF_BAR_ROUNDS), epoch (the
 * sender's count of barriers of the group, from 1), flags (CAF_BAR_FLAG_*).
 * In round k of a barrier, member i of a group of n notifies member
 * (i + 2^k) mod n (caf_sync.c). */
#define CAF_BAR_ROUNDS 32
#define CAF_BAR_FLAG_STOPPED 1u
#define CAF_BAR_FLAG_FAILED 2u
/* In the initial team's word only (fh_barrier_or, never on this wire): an
 * image that still runs. */
#define CAF_BAR_FLAG_RUNNING 4u
/* On this wire only: a member that synchronizes the active images (CHANGE
 * TEAM, END TEAM) rather than every image (SYNC ALL, SYNC TEAM). */
#define CAF_BAR_FLAG_ACTIVE 8u

typedef struct caf_bar_msg {
    uint64_t group;
    unsigned round;
    uint64_t epoch;
    unsigned flags;
    int src;
} caf_bar_msg_t;

bool caf_wire_bar(const caf_job_t *job, const caf_am_in_t *m,
                  caf_bar_msg_t *out, char *why, size_t len);

/* A barrier group as a member knows it: its ranks in order, n of them, our
 * index me. */
typedef struct caf_group {
    const int *ranks;
    int n, me;
} caf_group_t;

/* Whether arrival a may count in group g, `arrived` arrivals of its round
 * having counted already: the round exists for n members (2^round < n), the
 * sender is the member whose turn it is (ranks[me - 2^round mod n]) and the
 * epoch is the next one (arrived + 1: a member sends one arrival per round
 * per barrier, in order). */
bool caf_wire_bar_turn(const caf_group_t *g, uint64_t arrived,
                       const caf_bar_msg_t *a, char *why, size_t len);

/* ------------------------------------------- CAF_H_SYNC_IMAGES
 * Short, no arguments.  received/sent: the notifications counted from the
 * sender and sent to it so far.  A sender can be at most one SYNC IMAGES
 * ahead of us (it waits for our notification before its next one), so one
 * more is accepted only while received <= sent. */
bool caf_wire_sync_images(const caf_job_t *job, const caf_am_in_t *m,
                          uint64_t received, uint64_t sent, char *why,
                          size_t len);

/* ------------------------------------------ CAF_H_COLL, CAF_H_COLL_2
 * Both start with three arguments: team id, sequence number, chunk; then
 *   CAF_H_COLL (data):    0 = eager (medium AM of four arguments, the
 *                         payload is the chunk), or 1 = written (short AM
 *                         of six: 1, the slot's offset in our segment, the
 *                         chunk's bytes; sent once the sender's put into a
 *                         slot of our scratch that we granted completed);
 *   CAF_H_COLL_2 (short): the granted slot's offset in the segment
 *                         ("clear to send"), or, with chunk
 *                         CAF_COLL_CHUNK_ABORT, an ABORT: STAT code
 *                         (0, CAF_STAT_STOPPED_IMAGE, CAF_STAT_FAILED_IMAGE)
 *                         | image (0..nranks) << 32.
 * chunk = phase << CAF_COLL_PHASE_SHIFT | index; the phases are
 * CAF_COLL_UP/DOWN (tree; index = chunk number), RD (recursive doubling;
 * index = round < 64), FOLD and UNFOLD (index = chunk number; UNFOLD also
 * carries a reduction's result from image 1 to RESULT_IMAGE), RS and AG
 * (reduce-scatter and allgather; index = round < 64 << CAF_COLL_ROUND_SHIFT
 * | chunk number); every phase but RD may use slots (RD fits one eager
 * message). */
#define CAF_COLL_PHASE_SHIFT 48
#define CAF_COLL_ROUND_SHIFT 32
enum {
    CAF_COLL_UP = 0, CAF_COLL_DOWN, CAF_COLL_RD, CAF_COLL_FOLD,
    CAF_COLL_UNFOLD, CAF_COLL_RS, CAF_COLL_AG, CAF_COLL_PHASES
};
#define CAF_COLL_CHUNK_ABORT UINT64_MAX

/* The receiver's collective scratch: nslots slots of `chunk` bytes from
 * offset scratch_off of the segment (the same offsets on every image),
 * ours at base + scratch_off; chunks of at most `eager` bytes travel
 * eagerly.  Chunk c uses a slot of parity c % 2. */
typedef struct caf_coll_geom {
    const char *base;
    size_t scratch_off;
    size_t chunk;
    size_t eager;
    unsigned nslots;
} caf_coll_geom_t;

typedef struct caf_coll_data {
    uint64_t team, seq, chunk;
    const void *data;      /* eager: the runtime's buffer (copy it);
                              written: the slot */
    size_t len;
    bool written;
} caf_coll_data_t;

/* A data message: eager ones 1..eager bytes; written ones eager+1..chunk
 * bytes at the start of one of our slots of the chunk's parity. */
bool caf_wire_coll_data(const caf_job_t *job, const caf_coll_geom_t *g,
                        const caf_am_in_t *m, caf_coll_data_t *out,
                        char *why, size_t len);

/* Whether data d may be consumed where len_due bytes are due: exactly that
 * many, eagerly when len_due <= eager, else written into the slot at offset
 * slot_off, the one we granted for it. */
bool caf_wire_coll_due(const caf_coll_geom_t *g, const caf_coll_data_t *d,
                       size_t len_due, size_t slot_off, char *why,
                       size_t len);

typedef struct caf_coll_cts {
    uint64_t team, seq, chunk; /* chunk 0 for an ABORT */
    bool abort;
    size_t off;            /* grant: the slot's offset in the segment */
    int err, err_image;    /* ABORT: STAT code, image (1-based, 0: none) */
} caf_coll_cts_t;

/* A grant of one of the sender's slots (same geometry as ours) for a
 * chunk of any phase but RD, or an ABORT. */
bool caf_wire_coll_cts(const caf_job_t *job, const caf_coll_geom_t *g,
                       const caf_am_in_t *m, caf_coll_cts_t *out, char *why,
                       size_t len);

/* Whether grant c is the slot we must write to: slot_off, the receiver's
 * slot for our level in its tree. */
bool caf_wire_grant_due(const caf_coll_cts_t *c, size_t slot_off, char *why,
                        size_t len);

/* ----------------------------------------------------- CAF_H_TEAM
 * Short, three arguments: the parent team's id, the team number (1 ..
 * INT_MAX) and NEW_INDEX= (0 = none, else 1 .. INT_MAX) of the sender's
 * FORM TEAM.  pending: the sender's records not yet consumed; a member is
 * at most a few FORM TEAMs ahead, so over CAF_FORM_PENDING_MAX are
 * refused. */
#define CAF_FORM_PENDING_MAX 16

typedef struct caf_form_msg {
    uint64_t parent;
    int src;
    int number, index;
} caf_form_msg_t;

bool caf_wire_form(const caf_job_t *job, const caf_am_in_t *m,
                   size_t pending, caf_form_msg_t *out, char *why,
                   size_t len);

#endif /* CAF_WIRE_H */
