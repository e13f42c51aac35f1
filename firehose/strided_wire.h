/*
 * strided_wire.h -- the checks a strided AM (strided.c) passes at its
 * target before any byte of memory is touched.  Pure functions over what
 * arrived (arguments, payload length) and a segment lookup passed in (the
 * handler's is fh_seg_find), fuzzed by tests/fuzz/strided_wire_fuzz.c
 * with a table of fake segments.
 *
 * Messages (handler indices in internal.h, FH_H_STRIDED_*):
 *   PUT  medium request, args {op, addr, stride, blk, count},
 *        payload: the count blocks of blk bytes, packed;
 *   GET  short request, args {op, addr, stride, blk, count, off};
 *        blk * count <= the medium maximum (the reply carries it);
 *   REP  reply, args {op, status, off}: a put's acknowledgement (no
 *        payload) or a get's packed blocks (medium).
 * Block i of a request is at addr + i * stride (stride signed, in bytes).
 */
#ifndef FH_STRIDED_WIRE_H
#define FH_STRIDED_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FH_STRIDED_PUT_ARGS 5u
#define FH_STRIDED_GET_ARGS 6u
#define FH_STRIDED_REP_ARGS 3u

typedef struct fh_strided_desc {
    uintptr_t addr;      /* block 0 */
    ptrdiff_t stride;
    size_t blk, count;
    uintptr_t lo;        /* the hull: [lo, lo + span) holds every block */
    size_t span;
    size_t bytes;        /* blk * count */
} fh_strided_desc_t;

/* Checks a PUT (is_put: payload_len bytes arrived) or GET request's
 * arguments: the argument count, blk and count non-zero, blk * count
 * without overflow and (put) equal to the payload or (get) at most
 * max_bytes with no payload, a put's stride non-zero when count > 1, the
 * hull without wrapping.  Returns 0 and fills *d, or -1 with *why set (a
 * static string). */
int fh_strided_wire_check(bool is_put, const uint64_t *args, unsigned nargs,
                          size_t payload_len, size_t max_bytes, fh_strided_desc_t *d,
                          const char **why);

/* Whether [lo, lo + span) lies inside one segment of ours (span >= 1). */
typedef bool (*fh_strided_inside_fn)(void *ctx, uintptr_t lo, size_t span);

/* Everything the target decides about a request before touching memory:
 * fh_strided_wire_check, then the hull against the segments
 * (inside(ctx, d->lo, d->span)).  Returns FH_OK and fills *d, or the code
 * to answer with -- FH_ERR_INVALID (arguments) or FH_ERR_OUT_OF_SEGMENT --
 * with *why set (a static string).  Memory inside the hull is then safe to
 * touch: block i is [d->addr + i * d->stride, + d->blk), i < d->count. */
int fh_strided_wire_target(bool is_put, const uint64_t *args, unsigned nargs,
                           size_t payload_len, size_t max_bytes,
                           fh_strided_inside_fn inside, void *ctx, fh_strided_desc_t *d,
                           const char **why);

#endif /* FH_STRIDED_WIRE_H */
