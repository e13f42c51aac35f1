/*
 * strided_wire.c -- the argument checks of a received strided AM
 * (strided_wire.h).  Every number here came from the network.
 */
#include "strided_wire.h"

#include "firehose.h"

int fh_strided_wire_check(bool is_put, const uint64_t *args, unsigned nargs,
                          size_t payload_len, size_t max_bytes, fh_strided_desc_t *d,
                          const char **why)
{
    *why = NULL;
    if (nargs != (is_put ? FH_STRIDED_PUT_ARGS : FH_STRIDED_GET_ARGS) || args == NULL) {
        *why = "wrong argument count";
        return -1;
    }
    uint64_t addr = args[1], blk = args[3], count = args[4];
    int64_t stride = (int64_t)args[2];
    if (blk == 0 || count == 0) {
        *why = "zero block size or count";
        return -1;
    }
    if (addr > UINTPTR_MAX || blk > SIZE_MAX || count > SIZE_MAX ||
        blk > SIZE_MAX / count) {
        *why = "block size * count overflows";
        return -1;
    }
    size_t bytes = (size_t)(blk * count);
    if (is_put ? payload_len != bytes : (payload_len != 0 || bytes > max_bytes)) {
        *why = is_put ? "payload differs from block size * count"
                      : "get larger than a reply";
        return -1;
    }
    if (is_put && stride == 0 && count > 1) {
        *why = "zero destination stride";
        return -1;
    }
    if (stride < -(int64_t)PTRDIFF_MAX || stride > (int64_t)PTRDIFF_MAX) {
        *why = "stride out of range";
        return -1;
    }
    uint64_t mag = stride < 0 ? (uint64_t)0 - (uint64_t)stride : (uint64_t)stride;
    uint64_t steps = count - 1;
    if (mag != 0 && steps > UINT64_MAX / mag) {
        *why = "stride * count overflows";
        return -1;
    }
    uint64_t extent = mag * steps, lo = addr;
    if (stride < 0) {
        if (addr < extent) {
            *why = "negative stride wraps below 0";
            return -1;
        }
        lo = addr - extent;
    }
    if (extent > UINT64_MAX - blk || lo > UINTPTR_MAX - (extent + blk) ||
        extent + blk > SIZE_MAX) {
        *why = "hull wraps";
        return -1;
    }
    *d = (fh_strided_desc_t){.addr = (uintptr_t)addr, .stride = (ptrdiff_t)stride,
                             .blk = (size_t)blk, .count = (size_t)count,
                             .lo = (uintptr_t)lo, .span = (size_t)(extent + blk),
                             .bytes = bytes};
    return 0;
}

int fh_strided_wire_target(bool is_put, const uint64_t *args, unsigned nargs,
                           size_t payload_len, size_t max_bytes,
                           fh_strided_inside_fn inside, void *ctx, fh_strided_desc_t *d,
                           const char **why)
{
    if (fh_strided_wire_check(is_put, args, nargs, payload_len, max_bytes, d, why) != 0)
        return FH_ERR_INVALID;
    if (!inside(ctx, d->lo, d->span)) {
        *why = "the hull is not inside one of our segments";
        return FH_ERR_OUT_OF_SEGMENT;
    }
    return FH_OK;
}
