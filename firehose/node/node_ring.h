/*
 * node_ring.h -- a bounded single-producer, single-consumer ring of
 * messages in memory two processes share (layer L2; header-only).
 *
 * The consumer owns the memory (a node inbox, firehose/node_am.c); one
 * producer writes each ring.  Both compute the geometry (slots, slot size)
 * themselves from values every rank agrees on, so nothing in the shared
 * header steers either side's arithmetic.  The producer writes a slot,
 * then publishes it with a release store of `tail`; the consumer reads
 * `tail` with acquire, uses the slot in place (the message's bytes are
 * valid until it pops), then frees it with a release store of `head`,
 * which the producer reads with acquire before it reuses the slot.  Full:
 * push returns FH_ERR_AGAIN (the sender polls and retries); nothing is
 * ever dropped or overwritten.  Messages come out in the order they went
 * in.  A slot's length is checked by the consumer against the slot size
 * (a member could write anything there): a bad one is reported as such.
 *
 * Slot layout: u32 length, 12 bytes of padding, then the bytes, so that a
 * message starts 16-byte aligned (the slot size is a multiple of 64).
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
    alignas(64) _Atomic uint64_t tail;   /* messages pushed (producer) */
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

/* Producer: one message of a then b (al + bl <= slot_size - header).
 * FH_OK, or FH_ERR_AGAIN when the ring is full. */
static inline int fh_ring_push(fh_ring_t *r, uint32_t slots, uint32_t slot_size,
                               const void *a, size_t al, const void *b, size_t bl)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    if (t - h >= slots)
        return FH_ERR_AGAIN;
    char *s = fh_ring_slot(r, slots, slot_size, t);
    uint32_t len = (uint32_t)(al + bl);
    memcpy(s, &len, sizeof len);
    if (al)
        memcpy(s + FH_RING_SLOT_HDR, a, al);
    if (bl)
        memcpy(s + FH_RING_SLOT_HDR + al, b, bl);
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    return FH_OK;
}

/* Consumer: the oldest message, or NULL when empty.  *len is its length,
 * or SIZE_MAX when the slot claims more than it can hold (pop it anyway). */
static inline const char *fh_ring_peek(fh_ring_t *r, uint32_t slots, uint32_t slot_size,
                                       size_t *len)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (t == h)
        return NULL;
    const char *s = fh_ring_slot(r, slots, slot_size, h);
    uint32_t l;
    memcpy(&l, s, sizeof l);
    *len = (t - h > slots || l > slot_size - FH_RING_SLOT_HDR) ? SIZE_MAX : l;
    return s + FH_RING_SLOT_HDR;
}

/* Consumer: frees the oldest message's slot. */
static inline void fh_ring_pop(fh_ring_t *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

#endif /* FH_NODE_RING_H */
