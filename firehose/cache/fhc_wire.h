/*
 * fhc_wire.h -- the move request and reply, encode and untrusting decode.
 *
 * All fields little-endian.  Request (48 + 8*nrel + data_len bytes):
 *   off size
 *     0    1  magic FHC_WIRE_MAGIC
 *     1    1  kind  FHC_WIRE_REQ
 *     2    1  nrel  victims released, 0..FHC_MAX_PIECES
 *     3    1  0
 *     4    4  data_len  put-in-move bytes (0: none)
 *     8    8  token     the initiator's name for this move
 *    16    8  lo        span asked for: [lo, hi), lo < hi
 *    24    8  hi
 *    32    8  data_dst  where the data goes; without data, the first byte
 *                       the operation wants (a hint: the target registers
 *                       the part of a partly mapped bucket that holds it)
 *    40    4  want      buckets the initiator would have grown past its
 *                       budget instead of releasing victims (0: none; a
 *                       demand signal, never a claim; <= FHC_WIRE_MAX_WANT)
 *    44    4  0
 *    48 8*nrel  base of each released region
 *   A RELEASE-ONLY request (lo = hi = 0, no data) answers a RECLAIM: token
 *   is the RECLAIM's id, rel[] the firehoses given back; it gets no reply.
 *    ..  data_len bytes of data
 * Reply (32 + 40*nreg bytes):
 *     0    1  magic, 1 1 kind FHC_WIRE_REP, 2 1 nreg (0..FHC_MAX_PIECES), 3 1 0
 *     4    4  status (int32: 0 or a negative FHC_ERR_*)
 *     8    8  token
 *    16    8  budget   bits 3..: the budget in force for the requester
 *                      (bytes; the handler checks: a multiple of B, floor <=
 *                      budget <= M); bit 0: it was lowered and waits for the
 *                      requester's answer (as a RECLAIM does); bits 1-2: 0
 *    24    8  bver     its version (the target's count of budget changes for
 *                      this requester; the initiator ignores older ones)
 *    32 40*nreg  base, len, key[0], key[1], flags (bit 0: granted by this
 *                move, else the requester already held it; bits 1..: what
 *                peers may reach of it, FHC_REACH_* of fhc.h)
 * Revoke (32 bytes, target -> holder; fhc_invalidate):
 *     0    1  magic, 1 1 kind FHC_WIRE_REVOKE, 2 2 0, 4 4 0
 *     8    8  id       the target's name for this revoke
 *    16    8  lo       the revoked region: [lo, hi), lo < hi
 *    24    8  hi
 * Revoke ack (16 bytes, holder -> target): magic, kind FHC_WIRE_REVOKE_ACK,
 *     2 2 0, 4 4 0, 8 8 id.
 * Reclaim (24 bytes, target -> initiator, adaptive budgets): magic, kind
 *     FHC_WIRE_RECLAIM, 2 2 0, 4 4 0, 8 8 id (the new bver, > 0),
 *     16 8 budget (the lowered budget; range-checked by the handler).
 * Decode checks only what the bytes alone can tell (sizes, counts, ranges
 * that overflow); bucket alignment, frames, segments and holds are checked
 * by the handlers, which know the parameters.
 */
#ifndef FHC_WIRE_H
#define FHC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "fhc.h"

#define FHC_WIRE_MAGIC   0xFCu
#define FHC_WIRE_REQ     1u
#define FHC_WIRE_REP     2u
#define FHC_WIRE_REVOKE  3u
#define FHC_WIRE_REVOKE_ACK 4u
#define FHC_WIRE_RECLAIM 5u
#define FHC_REVOKE_LEN   32u
#define FHC_REVOKE_ACK_LEN 16u
#define FHC_RECLAIM_LEN  24u
#define FHC_REQ_HDR      48u
#define FHC_REP_HDR      32u
#define FHC_WIRE_MAX_WANT (1u << 24)  /* want, in buckets */
#define FHC_REP_REGION   40u
#define FHC_WIRE_MAX_DATA 65536u

typedef struct fhc_req {
    uint64_t token, lo, hi;
    unsigned nrel;
    uint64_t rel[FHC_MAX_PIECES];
    uint64_t data_dst;
    uint32_t data_len;
    const void *data;       /* into the received buffer */
    uint32_t want;          /* buckets of demand past the budget (0: none) */
} fhc_req_t;

typedef struct fhc_rep_region {
    uint64_t base, len, key[2];
    uint64_t reach;         /* FHC_REACH_* (fhc.h): flags bits 1.. */
    int granted;
} fhc_rep_region_t;

typedef struct fhc_rep {
    uint64_t token;
    int32_t status;
    unsigned nreg;
    fhc_rep_region_t reg[FHC_MAX_PIECES];
    uint64_t budget;        /* the requester's budget now (0: none given) */
    int lowered;            /* budget bit 0: answer it like a RECLAIM */
    uint64_t bver;          /* its version */
} fhc_rep_t;

size_t fhc_req_size(const fhc_req_t *r);
/* Encode into buf[0..cap); returns bytes written, or 0 if cap is too small
 * or r is inconsistent. */
size_t fhc_req_encode(const fhc_req_t *r, void *buf, size_t cap);
int    fhc_req_decode(const void *buf, size_t len, fhc_req_t *r,
                      char *why, size_t whylen);
size_t fhc_rep_encode(const fhc_rep_t *r, void *buf, size_t cap);
int    fhc_rep_decode(const void *buf, size_t len, fhc_rep_t *r,
                      char *why, size_t whylen);
/* Revoke (ack: lo = hi = 0 and kind FHC_WIRE_REVOKE_ACK). */
typedef struct fhc_revoke {
    unsigned kind;          /* FHC_WIRE_REVOKE or FHC_WIRE_REVOKE_ACK */
    uint64_t id, lo, hi;
} fhc_revoke_t;
/* Encode into buf[0..cap); returns FHC_REVOKE_LEN / FHC_REVOKE_ACK_LEN or 0. */
size_t fhc_revoke_encode(const fhc_revoke_t *r, void *buf, size_t cap);
int    fhc_revoke_decode(const void *buf, size_t len, fhc_revoke_t *r,
                         char *why, size_t whylen);
/* Reclaim (adaptive budgets): lower your budget on us to `budget`. */
typedef struct fhc_reclaim {
    uint64_t id, budget;
} fhc_reclaim_t;
/* Encode into buf[0..cap); returns FHC_RECLAIM_LEN or 0. */
size_t fhc_reclaim_encode(const fhc_reclaim_t *r, void *buf, size_t cap);
int    fhc_reclaim_decode(const void *buf, size_t len, fhc_reclaim_t *r,
                          char *why, size_t whylen);
/* The kind byte of a message (0 if too short or not ours). */
unsigned fhc_wire_kind(const void *buf, size_t len);

/* The token of anything that starts like a request, else 0 (used to answer
 * a malformed request so its sender's move still completes). */
uint64_t fhc_req_peek_token(const void *buf, size_t len);

#endif /* FHC_WIRE_H */
