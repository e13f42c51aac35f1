/*
 * handle.h -- completion counters and the per-path table of NB handles.
 *
 * The completion counter fh_ctr and its completion record fh_compl
 * (reg/services.h: the registration strategies count into it and complete
 * through it too) is embedded in every handle slot.
 *
 * Handle encoding (fh_handle_t, 64 bits):
 *   bits  0..7   path index that owns the slot
 *   bits  8..31  slot index in that path's table
 *   bits 32..63  generation (never 0, so FH_HANDLE_DONE == 0 is never live)
 * A slot's generation changes every time it is freed, so a stale handle is
 * recognized; the slot also remembers its owner thread, so a foreign handle
 * is recognized even when threads share a path.  Slots live in fixed chunks
 * that never move (completions point into them).
 */
#ifndef FH_HANDLE_H
#define FH_HANDLE_H

#include <assert.h>
#include <stdint.h>

#include "firehose.h"
#include "firehose/reg/services.h"   /* fh_ctr_t, fh_compl_t */

typedef struct fh_hslot {
    fh_ctr_t ctr;       /* first member: op_ctx == &slot->ctr.compl == slot */
    uint32_t gen;
    uint32_t owner;     /* thread id of the creator */
    uint32_t next_free; /* free-list link (slot index + 1; 0 = end) */
    uint32_t index;     /* own slot index (set once) */
    uint8_t  live;
    uint64_t result;    /* value delivered by a reply (atomics) */
    int      result_ready;
    int      peer;      /* atomics: the only rank whose reply counts */
    uint8_t  awaits_reply; /* atomics: the request left; its reply is what
                              completes the slot -- or the loss of the link
                              to peer (fh_ht_fail_peer) */
    void    *fetched;   /* NB atomics: where the reply's old value goes
                           (NULL: nowhere), written by the reply handler */
    uint8_t  width;     /* NB atomics: 4 or 8 (the size of *fetched) */
    uint8_t  rma_put;   /* NB put/get: 1 put, 0 get (for the error text) */
    int      rma_rank;  /* NB put/get: the target rank; -1 otherwise */
    uint64_t rma_addr;  /* NB put/get: the remote address */
} fh_hslot_t;

#define FH_HT_CHUNK      1024u
#define FH_HT_MAX_CHUNKS 4096u        /* 4M live handles per path */

typedef struct fh_htable {
    fh_hslot_t *chunks[FH_HT_MAX_CHUNKS];
    uint32_t nchunks;
    uint32_t free_head;  /* slot index + 1; 0 = empty */
    uint32_t live;       /* slots in use */
    unsigned path_index;
} fh_htable_t;

void fh_ht_init(fh_htable_t *t, unsigned path_index);
void fh_ht_fini(fh_htable_t *t);

/* A fresh slot owned by `owner` (ctr idle: FH_CTR_INIT) and its handle, or NULL
 * (FH_ERR_NO_MEMORY / FH_ERR_LIMIT) when the table cannot grow. */
fh_hslot_t *fh_ht_alloc(fh_htable_t *t, uint32_t owner, fh_handle_t *out);

/* Completes with `status` every live slot that awaits a reply from rank
 * `peer` (awaits_reply, one operation pending): the link its request and
 * reply travel on was lost.  Its late reply, if one ever comes, finds the
 * slot not waiting and is dropped.  Returns how many it failed. */
uint32_t fh_ht_fail_peer(fh_htable_t *t, int peer, int status);

/* The live slot named by h if it belongs to this table and to `owner`,
 * else NULL (the handle is stale, foreign or corrupt). */
fh_hslot_t *fh_ht_lookup(fh_htable_t *t, fh_handle_t h, uint32_t owner);

/* The live slot with this handle regardless of owner (replies use it). */
fh_hslot_t *fh_ht_lookup_any(fh_htable_t *t, fh_handle_t h);

void fh_ht_free(fh_htable_t *t, fh_hslot_t *s);

/* Frees every live slot of `owner` (its thread exited; each slot's
 * operations must be complete).  Returns how many. */
uint32_t fh_ht_free_owned(fh_htable_t *t, uint32_t owner);

static inline unsigned fh_handle_path(fh_handle_t h) { return (unsigned)(h & 0xffu); }

#endif /* FH_HANDLE_H */
