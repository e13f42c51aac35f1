/*
 * am_wire.c -- AM header encode/decode.  See am_wire.h for the layout.
 */
#include "am_wire.h"

#include <stdio.h>
#include <string.h>

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

size_t fh_am_encode(const fh_am_msg_t *m, void *buf, size_t cap)
{
    if (m->nargs > FH_AM_MAX_ARGS || m->kind == 0 || m->kind > FH_AM_KIND_MAX)
        return 0;
    size_t len = FH_AM_HDR_BYTES + 8u * m->nargs;
    if (cap < len)
        return 0;
    uint8_t *p = buf;
    p[0] = FH_AM_MAGIC;
    p[1] = m->kind;
    p[2] = m->handler;
    p[3] = m->nargs;
    put16(p + 4, m->src_path);
    put16(p + 6, m->credits);
    put32(p + 8, m->src_rank);
    put32(p + 12, m->payload_len);
    put64(p + 16, m->long_dst);
    for (unsigned i = 0; i < m->nargs; i++)
        put64(p + FH_AM_HDR_BYTES + 8 * i, m->args[i]);
    return len;
}

#define REJECT(...) do { snprintf(why, whylen, __VA_ARGS__); return FH_ERR_INVALID; } while (0)

int fh_am_decode(const void *buf, size_t len, const fh_am_bounds_t *b, fh_am_msg_t *m,
                 char *why, size_t whylen)
{
    const uint8_t *p = buf;
    if (buf == NULL || len < FH_AM_HDR_BYTES)
        REJECT("packet of %zu bytes is shorter than the %u-byte header", len,
               FH_AM_HDR_BYTES);
    if (p[0] != FH_AM_MAGIC)
        REJECT("bad magic 0x%02x", p[0]);
    memset(m, 0, sizeof *m);
    m->kind = p[1];
    m->handler = p[2];
    m->nargs = p[3];
    m->src_path = get16(p + 4);
    m->credits = get16(p + 6);
    m->src_rank = get32(p + 8);
    m->payload_len = get32(p + 12);
    m->long_dst = get64(p + 16);
    if (m->kind == 0 || m->kind > FH_AM_KIND_MAX)
        REJECT("unknown kind %u", m->kind);
    if (m->nargs > FH_AM_MAX_ARGS)
        REJECT("%u arguments (max %u)", m->nargs, FH_AM_MAX_ARGS);
    if (m->src_rank >= b->nranks)
        REJECT("source rank %u outside the job of %u", m->src_rank, b->nranks);
    if (m->src_path >= b->npaths)
        REJECT("source path %u outside [0,%u)", m->src_path, b->npaths);
    uint64_t max_payload = (fh_am_kind_is_request(m->kind) && fh_am_kind_is_long(m->kind))
                               ? b->max_long : b->max_medium;
    if (m->payload_len > max_payload)
        REJECT("payload of %u bytes over the %llu allowed for kind %u", m->payload_len,
               (unsigned long long)max_payload, m->kind);
    size_t hdr = FH_AM_HDR_BYTES + 8u * m->nargs;
    if (len < hdr)
        REJECT("packet of %zu bytes too short for %u arguments", len, m->nargs);
    size_t expect = hdr + (fh_am_kind_has_inline(m->kind) ? m->payload_len : 0);
    if (len != expect)
        REJECT("packet of %zu bytes but header implies %zu", len, expect);
    if (m->kind == FH_AM_CREDIT && (m->nargs || m->payload_len))
        REJECT("credit packet with arguments or payload");
    if ((m->kind == FH_AM_REQ_SHORT || m->kind == FH_AM_REP_SHORT) && m->payload_len)
        REJECT("short message with a payload length");
    if (fh_am_kind_is_long(m->kind)) {
        if (m->payload_len && m->long_dst == 0)
            REJECT("long message with NULL destination");
        if (m->long_dst + m->payload_len < m->long_dst)
            REJECT("long destination range overflows");
    } else if (m->long_dst != 0) {
        REJECT("destination address on a non-long message");
    }
    for (unsigned i = 0; i < m->nargs; i++)
        m->args[i] = get64(p + FH_AM_HDR_BYTES + 8 * i);
    m->payload = (fh_am_kind_has_inline(m->kind) && m->payload_len) ? p + hdr : NULL;
    return FH_OK;
}
