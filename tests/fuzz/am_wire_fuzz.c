/*
 * am_wire_fuzz.c -- libFuzzer target for the AM header decoder.
 *
 * Feeds arbitrary bytes to fh_am_decode as if they had arrived from the
 * network and checks, for every accepted packet, the properties the
 * dispatcher relies on: the kind is known, arguments and inline payload lie
 * inside the received bytes, the source is inside the job, payload lengths
 * respect the API maxima (medium and replies, long requests), and a long
 * destination range does not wrap.  Re-encoding an accepted header must give
 * back the same header bytes.
 *
 *   clang -fsanitize=fuzzer,address,undefined -Iinclude -I. \
 *         tests/fuzz/am_wire_fuzz.c firehose/am_wire.c -o am_wire_fuzz
 *   ./am_wire_fuzz -max_total_time=60
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "firehose/am_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The job shape comes from the first two bytes, so the fuzzer explores
     * the bounds checks too. */
    uint32_t nranks = 1 + (size > 0 ? data[0] : 0);
    uint32_t npaths = 1 + (size > 1 ? data[1] % 32 : 0);
    const fh_am_bounds_t b = {.nranks = nranks, .npaths = npaths,
                              .max_medium = 64u + (size > 2 ? data[2] * 16u : 0),
                              .max_long = 1u << 20};
    fh_am_msg_t m;
    char why[160];
    if (fh_am_decode(data, size, &b, &m, why, sizeof why) != FH_OK) {
        if (strlen(why) == 0)
            abort(); /* every rejection explains itself */
        return 0;
    }
    if (m.kind == 0 || m.kind > FH_AM_KIND_MAX || m.nargs > FH_AM_MAX_ARGS)
        abort();
    if (m.src_rank >= nranks || m.src_path >= npaths)
        abort();
    const int long_req = fh_am_kind_is_request(m.kind) && fh_am_kind_is_long(m.kind);
    if (m.payload_len > (long_req ? b.max_long : b.max_medium))
        abort();
    size_t hdr = FH_AM_HDR_BYTES + 8u * m.nargs;
    if (hdr > size)
        abort();
    if (m.payload != NULL) {
        const uint8_t *p = m.payload;
        if (p < data + hdr || p + m.payload_len > data + size)
            abort();
        volatile uint8_t sink = 0;
        for (uint32_t i = 0; i < m.payload_len; i++)
            sink ^= p[i];
        (void)sink;
    }
    if (fh_am_kind_is_long(m.kind) && m.long_dst + m.payload_len < m.long_dst)
        abort();
    uint8_t again[FH_AM_HDR_BYTES + 8 * FH_AM_MAX_ARGS];
    size_t n = fh_am_encode(&m, again, sizeof again);
    if (n != hdr || memcmp(again, data, hdr) != 0)
        abort();
    return 0;
}
