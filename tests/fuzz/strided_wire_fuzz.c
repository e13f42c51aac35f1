/*
 * strided_wire_fuzz.c -- libFuzzer target for what the target of a strided
 * AM decides before touching memory (fh_strided_wire_target,
 * firehose/strided_wire.c).
 *
 * Each input is one received request: the first bytes choose put or get,
 * the medium maximum, a table of fake segments (real buffers of their
 * exact size, so AddressSanitizer guards their edges), then the arguments
 * -- the address mostly relative to a segment, sometimes anywhere -- and
 * the payload length, mostly blk * count.  A rejection must give a reason
 * and one of the two codes the handler answers with.  For every accepted
 * request the target asserts what the handlers rely on (argument count,
 * lengths, the payload or reply size, first and last block inside the
 * hull and the hull inside one segment), then moves the blocks exactly as
 * h_put and h_get in firehose/strided.c do, so ASan sees any byte the
 * checks let through out of bounds and UBSan any overflow of i * stride.
 *
 *   clang -fsanitize=fuzzer,address,undefined -Iinclude -I. \
 *         tests/fuzz/strided_wire_fuzz.c firehose/strided_wire.c \
 *         -o strided_wire_fuzz
 *   ./strided_wire_fuzz -max_total_time=30
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "firehose.h"
#include "firehose/strided_wire.h"
#include "tests/fuzz/fuzz_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SEGS 4

/* The fake segment table: what fh_seg_find answers on the target. */
typedef struct segs {
    char *buf[MAX_SEGS];
    size_t len[MAX_SEGS];
    unsigned n;
} segs_t;

/* The segment that holds [lo, lo + span) whole, or -1. */
static int seg_of(const segs_t *s, uintptr_t lo, size_t span)
{
    for (unsigned k = 0; k < s->n; k++) {
        uintptr_t base = (uintptr_t)s->buf[k];
        if (lo >= base && lo - base <= s->len[k] && span <= s->len[k] - (lo - base))
            return (int)k;
    }
    return -1;
}

static bool inside(void *ctx, uintptr_t lo, size_t span)
{
    return seg_of(ctx, lo, span) >= 0;
}

/* a * b into *r; false when it does not fit in 64 bits. */
static bool mul64(uint64_t a, uint64_t b, uint64_t *r)
{
    if (a != 0 && b > UINT64_MAX / a)
        return false;
    *r = a * b;
    return true;
}

/* Block i of d lies inside the hull [d->lo, d->lo + d->span). */
static void check_block(const fh_strided_desc_t *d, uint64_t i)
{
    uint64_t mag = d->stride < 0 ? (uint64_t)0 - (uint64_t)d->stride : (uint64_t)d->stride;
    uint64_t dist;
    CHECK(mul64(mag, i, &dist));
    uint64_t at = d->stride < 0 ? (uint64_t)d->addr - dist : (uint64_t)d->addr + dist;
    if (d->stride < 0)
        CHECK(dist <= d->addr);
    else
        CHECK(dist <= UINT64_MAX - d->addr);
    CHECK(at >= d->lo && at - d->lo <= d->span && d->blk <= d->span - (at - d->lo));
}

static volatile uint8_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    in_t in = {data, size, 0};
    const bool is_put = u8(&in) & 1;
    const size_t max_bytes = 1 + u16(&in) % 8192;  /* the medium maximum */
    char *payload = NULL;

    segs_t s = {.n = 1 + u8(&in) % MAX_SEGS};
    for (unsigned k = 0; k < s.n; k++) {
        s.len[k] = 1 + (size_t)u16(&in) % 4096;
        s.buf[k] = malloc(s.len[k]);
        if (s.buf[k] == NULL) {
            s.n = k;
            goto out;
        }
        memset(s.buf[k], (int)k, s.len[k]);
    }

    /* The arguments {op, addr, stride, blk, count[, off]}, mostly as many
     * as the request has. */
    uint64_t args[8];
    const unsigned want = is_put ? FH_STRIDED_PUT_ARGS : FH_STRIDED_GET_ARGS;
    uint8_t how = u8(&in);
    unsigned nargs = how & 1 ? want : how / 2 % 8;
    const unsigned k = u8(&in) % s.n;
    uint64_t addr = (uint64_t)(uintptr_t)s.buf[k];
    switch (u8(&in) % 4) {
    case 0: addr += u16(&in) % (s.len[k] + 1); break;     /* inside */
    case 1: addr += (uint64_t)(int64_t)(int16_t)u16(&in); break; /* near */
    case 2: addr += arg(&in); break;
    default: addr = arg(&in); break;                       /* anywhere */
    }
    args[0] = u64(&in);
    args[1] = addr;
    args[2] = arg(&in);
    args[3] = arg(&in);
    args[4] = arg(&in);
    args[5] = arg(&in);
    args[6] = args[7] = 0;

    /* The payload the runtime hands over: a medium's buffer of exactly
     * payload_len bytes, at most 64 KiB; mostly blk * count. */
    uint64_t bytes;
    size_t payload_len = u16(&in);
    if (u8(&in) & 1 && mul64(args[3], args[4], &bytes) && bytes <= 65536)
        payload_len = is_put ? (size_t)bytes : 0;
    if (is_put && (payload = malloc(payload_len ? payload_len : 1)) == NULL)
        goto out;
    if (is_put)
        memset(payload, 0x5a, payload_len);

    fh_strided_desc_t d;
    const char *why = NULL;
    int st = fh_strided_wire_target(is_put, args, nargs, payload_len, max_bytes, inside, &s,
                                    &d, &why);
    if (st != FH_OK) {
        CHECK(st == FH_ERR_INVALID || st == FH_ERR_OUT_OF_SEGMENT);
        CHECK(why != NULL && why[0] != '\0');
        goto out;
    }

    /* What the handlers rely on. */
    CHECK(nargs == want);
    CHECK(d.addr == addr && d.stride == (ptrdiff_t)(int64_t)args[2] && d.blk == args[3] &&
          d.count == args[4]);
    CHECK(d.blk >= 1 && d.count >= 1);
    CHECK(mul64(d.blk, d.count, &bytes) && bytes == d.bytes);
    if (is_put)
        CHECK(d.bytes == payload_len && (d.stride != 0 || d.count == 1));
    else
        CHECK(payload_len == 0 && d.bytes <= max_bytes);
    check_block(&d, 0);
    check_block(&d, d.count - 1);
    const int sk = seg_of(&s, d.lo, d.span);
    CHECK(sk >= 0);

    /* The handlers' copies (firehose/strided.c, h_put and h_get). */
    if (is_put) {
        const char *src = payload;
        for (size_t i = 0; i < d.count; i++)
            memcpy((char *)d.addr + (ptrdiff_t)i * d.stride, src + i * d.blk, d.blk);
    } else {
        char *tmp = malloc(d.bytes);
        if (tmp == NULL)
            goto out;
        for (size_t i = 0; i < d.count; i++)
            memcpy(tmp + i * d.blk, (const char *)d.addr + (ptrdiff_t)i * d.stride, d.blk);
        sink ^= (uint8_t)tmp[d.bytes - 1];
        free(tmp);
    }

out:
    free(payload);
    for (unsigned j = 0; j < s.n; j++)
        free(s.buf[j]);
    return 0;
}
