/*
 * node_ring.h -- a bounded single-producer, single-consumer ring of
 * messages in memory two processes share (layer L2; header-only).
 *
 * The consumer owns the memory (a node inbox, firehose/node_am.c); one
 * producer writes each ring.  Both compute the geometry (slots, slot size)
 * themselves from values every rank agrees on, so nothing in the shared
 * memory steers either side's arithmetic.  Each slot carries a stamp: the
 * producer writes message i into slot i % slots, then stores stamp i + 1
 * (sequentially consistent: node_am.c's sleep relies on it); the consumer,
 * expecting message h, finds it ready when the stamp of slot h % slots is
 * h + 1, so the one cache line it polls brings the message's first bytes
 * too, and it never reads a line the producer writes per message other
 * than the slot.  The consumer uses the slot in place (valid until it
 * pops), then frees it with a release store of `head`; the producer reads
 * `head` only when its cached copy says the ring is full.  Full: push
 * returns FH_ERR_AGAIN (the sender polls and retries); nothing is ever
 * dropped or overwritten.  Messages come out in the order they went in.
 * Neither side divides per message: the producer keeps tail % slots in its
 * own line (checked against slots before use), the consumer its head and
 * head % slots in its private memory (fh_ring_cursor_t, which node_am.c
 * polls with); fh_ring_peek / fh_ring_pop compute them from `head`.
 * A slot's length is checked by the consumer against the slot size (a
 * member could write anything there): a bad one is reported as such; a
 * stamp of another value than h + 1 is no message (yet).
 *
 * Slot layout: u64 stamp, u32 length, 4 bytes of padding, then the
 * bytes, so that a message starts 16-byte aligned (the slot size is a
 * multiple of 64).
 */
#ifndef FH_NODE_RING_H
#define FH_NODE_RING_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "firehose.h"

typedef struct fh_ring {
    alignas(64) uint64_t tail;           /* producer's own: messages pushed */
    uint64_t head_seen;                  /* producer's own: head, last read */
    uint32_t tail_idx;                   /* producer's own: tail % slots */
    alignas(64) _Atomic uint64_t head;   /* messages popped (consumer) */
} fh_ring_t;

#define FH_RING_SLOT_HDR 16u

/* Bytes of a slot that carries messages of up to max_msg bytes. */
static inline uint32_t fh_ring_slot_size(size_t max_msg)
{
    return (uint32_t)((FH_RING_SLOT_HDR + max_msg + 63) & ~(size_t)63);
}

/* Bytes of a ring of `slots` slots of slot_size bytes. */
static inline size_t fh_ring_bytes(uint32_t slots, uint32_t slot_size)
{
    return sizeof(fh_ring_t) + (size_t)slots * slot_size;
}

static inline char *fh_ring_slot(fh_ring_t *r, uint32_t slots, uint32_t slot_size, uint64_t i)
{
    return (char *)(r + 1) + (size_t)(i % slots) * slot_size;
}

static inline _Atomic uint64_t *fh_ring_stamp(char *slot)
{
    return (_Atomic uint64_t *)(void *)slot;
}

/* Producer: one message of a then b (al + bl <= slot_size - header).
 * FH_OK, or FH_ERR_AGAIN when the ring is full. */
static inline int fh_ring_push(fh_ring_t *r, uint32_t slots, uint32_t slot_size,
                               const void *a, size_t al, const void *b, size_t bl)
{
    uint64_t t = r->tail;
    if (t - r->head_seen >= slots) {
        r->head_seen = atomic_load_explicit(&r->head, memory_order_acquire);
        if (t - r->head_seen >= slots)
            return FH_ERR_AGAIN;
    }
    uint32_t idx = r->tail_idx;
    if (idx >= slots)                    /* never, unless the line was overwritten */
        idx = (uint32_t)(t % slots);
    char *s = (char *)(r + 1) + (size_t)idx * slot_size;
    uint32_t len = (uint32_t)(al + bl);
    memcpy(s + 8, &len, sizeof len);
    if (al)
        memcpy(s + FH_RING_SLOT_HDR, a, al);
    if (bl)
        memcpy(s + FH_RING_SLOT_HDR + al, b, bl);
    atomic_store_explicit(fh_ring_stamp(s), t + 1, memory_order_seq_cst);
    r->tail = t + 1;
    r->tail_idx = idx + 1 == slots ? 0 : idx + 1;
    return FH_OK;
}

/* Consumer: the oldest message, or NULL when there is none.  *len is its
 * length, or SIZE_MAX when the slot claims more than it can hold (pop it
 * anyway). */
static inline const char *fh_ring_peek(fh_ring_t *r, uint32_t slots, uint32_t slot_size,
                                       size_t *len)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    char *s = fh_ring_slot(r, slots, slot_size, h);
    if (atomic_load_explicit(fh_ring_stamp(s), memory_order_seq_cst) != h + 1)
        return NULL;
    uint32_t l;
    memcpy(&l, s + 8, sizeof l);
    *len = l > slot_size - FH_RING_SLOT_HDR ? SIZE_MAX : l;
    return s + FH_RING_SLOT_HDR;
}

/* Consumer: frees the oldest message's slot. */
static inline void fh_ring_pop(fh_ring_t *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

/* The consumer's own cursor, kept in its private memory: the next message's
 * number and slot, so that a poll of an empty ring is one load of a slot's
 * stamp (no division, nothing the producer could have changed). */
typedef struct fh_ring_cursor {
    fh_ring_t *ring;
    uint64_t head;          /* == ring->head, which only we write */
    uint32_t idx;           /* head % slots */
} fh_ring_cursor_t;

static inline void fh_ring_cursor_init(fh_ring_cursor_t *c, fh_ring_t *r, uint32_t slots)
{
    c->ring = r;
    c->head = atomic_load_explicit(&r->head, memory_order_relaxed);
    c->idx = (uint32_t)(c->head % slots);
}

/* fh_ring_peek through a cursor. */
static inline const char *fh_ring_cpeek(const fh_ring_cursor_t *c, uint32_t slot_size,
                                        size_t *len)
{
    char *s = (char *)(c->ring + 1) + (size_t)c->idx * slot_size;
    if (atomic_load_explicit(fh_ring_stamp(s), memory_order_seq_cst) != c->head + 1)
        return NULL;
    uint32_t l;
    memcpy(&l, s + 8, sizeof l);
    *len = l > slot_size - FH_RING_SLOT_HDR ? SIZE_MAX : l;
    return s + FH_RING_SLOT_HDR;
}

/* fh_ring_pop through a cursor. */
static inline void fh_ring_cpop(fh_ring_cursor_t *c, uint32_t slots)
{
    c->head++;
    c->idx = c->idx + 1 == slots ? 0 : c->idx + 1;
    atomic_store_explicit(&c->ring->head, c->head, memory_order_release);
}

#endif /* FH_NODE_RING_H */
