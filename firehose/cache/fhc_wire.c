/*
 * fhc_wire.c -- move request/reply encoding (format in fhc_wire.h).
 */
#include "fhc_wire.h"

#include <stdio.h>
#include <string.h>

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static int fail(char *why, size_t whylen, const char *what)
{
    if (why && whylen)
        snprintf(why, whylen, "%s", what);
    return FHC_ERR_INVALID;
}

/* The fixed-size control messages (REVOKE, REVOKE_ACK, RECLAIM) share one
 * head: magic, kind, 6 reserved zero bytes, the 64-bit id at offset 8. */
static void put_ctl_head(uint8_t *p, size_t n, unsigned kind, uint64_t id)
{
    memset(p, 0, n);
    p[0] = FHC_WIRE_MAGIC;
    p[1] = (uint8_t)kind;
    put64(p + 8, id);
}

/* 0 and the id of a control message whose reserved bytes are zero, else
 * FHC_ERR_INVALID (why says so). */
static int get_ctl_head(const uint8_t *p, uint64_t *id, char *why, size_t whylen)
{
    if (p[2] || p[3] || get32(p + 4))
        return fail(why, whylen, "reserved bytes not zero");
    *id = get64(p + 8);
    return 0;
}

size_t fhc_req_size(const fhc_req_t *r)
{
    return FHC_REQ_HDR + 8u * r->nrel + r->data_len;
}

size_t fhc_req_encode(const fhc_req_t *r, void *buf, size_t cap)
{
    size_t n = fhc_req_size(r);
    if (r->nrel > FHC_MAX_PIECES || r->data_len > FHC_WIRE_MAX_DATA ||
        (r->data_len && !r->data) || r->want > FHC_WIRE_MAX_WANT || n > cap)
        return 0;
    uint8_t *p = buf;
    p[0] = FHC_WIRE_MAGIC;
    p[1] = FHC_WIRE_REQ;
    p[2] = (uint8_t)r->nrel;
    p[3] = 0;
    put32(p + 4, r->data_len);
    put64(p + 8, r->token);
    put64(p + 16, r->lo);
    put64(p + 24, r->hi);
    put64(p + 32, r->data_dst);
    put32(p + 40, r->want);
    put32(p + 44, 0);
    for (unsigned i = 0; i < r->nrel; i++)
        put64(p + FHC_REQ_HDR + 8 * i, r->rel[i]);
    if (r->data_len)
        memcpy(p + FHC_REQ_HDR + 8 * r->nrel, r->data, r->data_len);
    return n;
}

int fhc_req_decode(const void *buf, size_t len, fhc_req_t *r, char *why,
                   size_t whylen)
{
    const uint8_t *p = buf;
    if (!buf || len < FHC_REQ_HDR)
        return fail(why, whylen, "request shorter than its header");
    if (p[0] != FHC_WIRE_MAGIC || p[1] != FHC_WIRE_REQ || p[3] != 0)
        return fail(why, whylen, "bad magic, kind or reserved byte");
    r->nrel = p[2];
    r->data_len = get32(p + 4);
    r->token = get64(p + 8);
    r->lo = get64(p + 16);
    r->hi = get64(p + 24);
    r->data_dst = get64(p + 32);
    r->want = get32(p + 40);
    if (get32(p + 44))
        return fail(why, whylen, "reserved bytes not zero");
    if (r->want > FHC_WIRE_MAX_WANT)
        return fail(why, whylen, "want out of range");
    if (r->nrel > FHC_MAX_PIECES)
        return fail(why, whylen, "too many releases");
    if (r->data_len > FHC_WIRE_MAX_DATA)
        return fail(why, whylen, "put data too long");
    if (len != FHC_REQ_HDR + 8u * r->nrel + r->data_len)
        return fail(why, whylen, "length does not match the counts");
    if (r->lo == 0 && r->hi == 0) {     /* release-only: answers a RECLAIM */
        if (r->data_len || r->want)
            return fail(why, whylen, "release-only request with data or want");
    } else if (r->lo >= r->hi || r->hi > UINTPTR_MAX) {
        return fail(why, whylen, "empty or inverted span");
    }
    if (r->data_len && r->data_dst > UINT64_MAX - r->data_len)
        return fail(why, whylen, "bad put destination");
    for (unsigned i = 0; i < r->nrel; i++)
        r->rel[i] = get64(p + FHC_REQ_HDR + 8 * i);
    r->data = r->data_len ? p + FHC_REQ_HDR + 8 * r->nrel : NULL;
    return 0;
}

uint64_t fhc_req_peek_token(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    if (!buf || len < 16 || p[0] != FHC_WIRE_MAGIC || p[1] != FHC_WIRE_REQ)
        return 0;
    return get64(p + 8);
}

static size_t fhc_rep_size(const fhc_rep_t *r)
{
    return FHC_REP_HDR + FHC_REP_REGION * r->nreg;
}

size_t fhc_rep_encode(const fhc_rep_t *r, void *buf, size_t cap)
{
    size_t n = fhc_rep_size(r);
    if (r->nreg > FHC_MAX_PIECES || n > cap)
        return 0;
    uint8_t *p = buf;
    p[0] = FHC_WIRE_MAGIC;
    p[1] = FHC_WIRE_REP;
    p[2] = (uint8_t)r->nreg;
    p[3] = 0;
    put32(p + 4, (uint32_t)r->status);
    put64(p + 8, r->token);
    put64(p + 16, (r->budget & ~(uint64_t)7) | (r->lowered ? 1 : 0));
    put64(p + 24, r->bver);
    for (unsigned i = 0; i < r->nreg; i++) {
        uint8_t *q = p + FHC_REP_HDR + FHC_REP_REGION * i;
        put64(q, r->reg[i].base);
        put64(q + 8, r->reg[i].len);
        put64(q + 16, r->reg[i].key[0]);
        put64(q + 24, r->reg[i].key[1]);
        put64(q + 32, (r->reg[i].granted ? 1 : 0) | (r->reg[i].reach & ~(uint64_t)1));
    }
    return n;
}

int fhc_rep_decode(const void *buf, size_t len, fhc_rep_t *r, char *why,
                   size_t whylen)
{
    const uint8_t *p = buf;
    if (!buf || len < FHC_REP_HDR)
        return fail(why, whylen, "reply shorter than its header");
    if (p[0] != FHC_WIRE_MAGIC || p[1] != FHC_WIRE_REP || p[3] != 0)
        return fail(why, whylen, "bad magic, kind or reserved byte");
    r->nreg = p[2];
    r->status = (int32_t)get32(p + 4);
    r->token = get64(p + 8);
    r->budget = get64(p + 16);
    r->lowered = (int)(r->budget & 1);
    r->budget &= ~(uint64_t)1;
    r->bver = get64(p + 24);
    if (r->nreg > FHC_MAX_PIECES)
        return fail(why, whylen, "too many regions");
    if (r->budget % 8 || (r->bver && !r->budget))
        return fail(why, whylen, "bad budget or budget version");
    if (len != FHC_REP_HDR + FHC_REP_REGION * r->nreg)
        return fail(why, whylen, "length does not match the region count");
    if (r->status > 0 || (r->status < 0 && r->nreg))
        return fail(why, whylen, "bad status");
    for (unsigned i = 0; i < r->nreg; i++) {
        const uint8_t *q = p + FHC_REP_HDR + FHC_REP_REGION * i;
        uint64_t flags = get64(q + 32);
        r->reg[i].base = get64(q);
        r->reg[i].len = get64(q + 8);
        r->reg[i].key[0] = get64(q + 16);
        r->reg[i].key[1] = get64(q + 24);
        r->reg[i].granted = (int)(flags & 1);
        r->reg[i].reach = flags & ~(uint64_t)1;
        if (flags & ~(1 | FHC_REACH_RO | FHC_REACH_PART |
                      (flags & FHC_REACH_PART ? ~(uint64_t)0xffff : 0)))
            return fail(why, whylen, "unknown region flags");
        if (!r->reg[i].len || r->reg[i].base > UINT64_MAX - r->reg[i].len)
            return fail(why, whylen, "empty or overflowing region");
        if ((flags & FHC_REACH_PART) &&
            (fhc_reach_lo(flags) >= fhc_reach_hi(flags, r->reg[i].len) ||
             fhc_reach_hi(flags, r->reg[i].len) > r->reg[i].len))
            return fail(why, whylen, "reachable part outside its region");
    }
    return 0;
}

size_t fhc_revoke_encode(const fhc_revoke_t *r, void *buf, size_t cap)
{
    size_t n = r->kind == FHC_WIRE_REVOKE ? FHC_REVOKE_LEN
             : r->kind == FHC_WIRE_REVOKE_ACK ? FHC_REVOKE_ACK_LEN : 0;
    if (!n || n > cap || (r->kind == FHC_WIRE_REVOKE && r->lo >= r->hi))
        return 0;
    uint8_t *p = buf;
    put_ctl_head(p, n, r->kind, r->id);
    if (r->kind == FHC_WIRE_REVOKE) {
        put64(p + 16, r->lo);
        put64(p + 24, r->hi);
    }
    return n;
}

int fhc_revoke_decode(const void *buf, size_t len, fhc_revoke_t *r, char *why,
                      size_t whylen)
{
    const uint8_t *p = buf;
    unsigned kind = fhc_wire_kind(buf, len);
    size_t n = kind == FHC_WIRE_REVOKE ? FHC_REVOKE_LEN
             : kind == FHC_WIRE_REVOKE_ACK ? FHC_REVOKE_ACK_LEN : 0;
    if (!n || len != n)
        return fail(why, whylen, "not a revoke or revoke ack of the right size");
    if (get_ctl_head(p, &r->id, why, whylen) < 0)
        return FHC_ERR_INVALID;
    r->kind = kind;
    r->lo = r->hi = 0;
    if (kind == FHC_WIRE_REVOKE) {
        r->lo = get64(p + 16);
        r->hi = get64(p + 24);
        if (r->lo >= r->hi)
            return fail(why, whylen, "empty revoked range");
    }
    return 0;
}

size_t fhc_reclaim_encode(const fhc_reclaim_t *r, void *buf, size_t cap)
{
    if (cap < FHC_RECLAIM_LEN || !r->id || !r->budget)
        return 0;
    uint8_t *p = buf;
    put_ctl_head(p, FHC_RECLAIM_LEN, FHC_WIRE_RECLAIM, r->id);
    put64(p + 16, r->budget);
    return FHC_RECLAIM_LEN;
}

int fhc_reclaim_decode(const void *buf, size_t len, fhc_reclaim_t *r, char *why,
                       size_t whylen)
{
    const uint8_t *p = buf;
    if (fhc_wire_kind(buf, len) != FHC_WIRE_RECLAIM || len != FHC_RECLAIM_LEN)
        return fail(why, whylen, "not a reclaim of the right size");
    if (get_ctl_head(p, &r->id, why, whylen) < 0)
        return FHC_ERR_INVALID;
    r->budget = get64(p + 16);
    if (!r->id || !r->budget || r->budget % 8)
        return fail(why, whylen, "reclaim without id or budget");
    return 0;
}

unsigned fhc_wire_kind(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    if (!buf || len < 2 || p[0] != FHC_WIRE_MAGIC)
        return 0;
    return p[1];
}
