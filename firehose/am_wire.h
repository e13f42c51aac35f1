/*
 * am_wire.h -- the active-message wire format, encode and (untrusting) decode.
 *
 * Every AM packet is a fixed 24-byte header, then nargs 64-bit arguments, then
 * the inline payload.  All fields little-endian (we only run on little-endian
 * hosts today; encode/decode are the one place to change for big-endian).
 *
 *   off size field
 *     0    1 magic        FH_AM_MAGIC
 *     1    1 kind         enum fh_am_kind
 *     2    1 handler      handler index (0..255)
 *     3    1 nargs        0..FH_AM_MAX_ARGS
 *     4    2 src_path     sender's path index
 *     6    2 credits      AM credits returned to the receiving path
 *     8    4 src_rank
 *    12    4 payload_len  bytes of inline payload (or, for LONG_RDMA, bytes
 *                         already written by RDMA at long_dst)
 *    16    8 long_dst     destination address of a long payload, else 0
 *    24 8*nargs args
 *    .. payload_len inline payload (absent for SHORT, LONG_RDMA, CREDIT)
 *
 * fh_am_decode() trusts nothing: it checks the magic, the kind, argument and
 * length arithmetic against the received length, source rank/path against
 * the job's size, payload lengths against the API maxima (a medium payload
 * and every reply's at most fh_am_max_medium(), a long request's at most
 * fh_am_max_long()), and that long_dst + payload_len does not overflow.
 * Whether src_rank/src_path are the transport's sender, whether the handler
 * is registered and whether long_dst lies inside our segment are checked by
 * the caller (they need runtime state).  It is fuzzed by
 * tests/fuzz/am_wire_fuzz.c.
 */
#ifndef FH_AM_WIRE_H
#define FH_AM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "firehose.h"

#define FH_AM_MAGIC     0xF4u
_Static_assert(FH_AM_MAX_LONG <= 0xffffffffu, "payload_len is 32 bits on the wire");
#define FH_AM_HDR_BYTES 24u

enum fh_am_kind {
    FH_AM_REQ_SHORT = 1,
    FH_AM_REQ_MEDIUM,
    FH_AM_REQ_LONG,         /* payload inline, copied to long_dst */
    FH_AM_REQ_LONG_RDMA,    /* payload already written at long_dst */
    FH_AM_REP_SHORT,
    FH_AM_REP_MEDIUM,
    FH_AM_REP_LONG,
    FH_AM_REP_LONG_RDMA,
    FH_AM_CREDIT,           /* header only: returns credits */
    FH_AM_KIND_MAX = FH_AM_CREDIT
};

typedef struct fh_am_msg {
    uint8_t  kind;
    uint8_t  handler;
    uint8_t  nargs;
    uint16_t src_path;
    uint16_t credits;
    uint32_t src_rank;
    uint32_t payload_len;
    uint64_t long_dst;
    uint64_t args[FH_AM_MAX_ARGS];
    const void *payload;    /* into the received buffer; NULL if none */
} fh_am_msg_t;

static inline int fh_am_kind_is_request(unsigned k)
{
    return k >= FH_AM_REQ_SHORT && k <= FH_AM_REQ_LONG_RDMA;
}
static inline int fh_am_kind_is_long(unsigned k)
{
    return k == FH_AM_REQ_LONG || k == FH_AM_REQ_LONG_RDMA ||
           k == FH_AM_REP_LONG || k == FH_AM_REP_LONG_RDMA;
}
/* Kinds whose payload travels inside the packet. */
static inline int fh_am_kind_has_inline(unsigned k)
{
    return k == FH_AM_REQ_MEDIUM || k == FH_AM_REQ_LONG ||
           k == FH_AM_REP_MEDIUM || k == FH_AM_REP_LONG;
}

/* Writes the header and arguments of m into buf (capacity cap); returns the
 * bytes written (FH_AM_HDR_BYTES + 8*nargs) or 0 if cap is too small or m is
 * inconsistent.  The inline payload is not copied: the caller sends it after
 * the header (m->payload_len bytes). */
size_t fh_am_encode(const fh_am_msg_t *m, void *buf, size_t cap);

/* What a received header may claim. */
typedef struct fh_am_bounds {
    uint32_t nranks, npaths;  /* src_rank < nranks, src_path < npaths */
    uint64_t max_medium;      /* MEDIUM payloads and every reply's */
    uint64_t max_long;        /* LONG / LONG_RDMA request payloads */
} fh_am_bounds_t;

/* Parses a received packet.  Returns FH_OK and fills *m, or a negative error
 * with a reason in why[0..whylen). */
int fh_am_decode(const void *buf, size_t len, const fh_am_bounds_t *b, fh_am_msg_t *m,
                 char *why, size_t whylen);

#endif /* FH_AM_WIRE_H */
