/*
 * ibv_cm_fuzz.c -- libFuzzer target for the verbs conduit's connection
 * messages: ibv_cm_check (conduits/ibv/ibv_cm_decode.h), which ibv_cm.c
 * calls on every receive of a path's UD QP, where anyone on the fabric who
 * knows a QP number and the Q_Key may send.
 *
 * Input: 6 bytes of job shape -- nranks (1..8), npaths (1..4), the
 * receiving rank and path, RoCE or InfiniBand, how the table's addresses
 * look and which mode -- then either (raw) what the HCA reports (source QP
 * number, LID, GRH flag, the completion's length 0..128) and the receive
 * buffer's bytes, or (forged) choices that build a message, each field
 * right or subtly wrong, so that the accepting path is reached too.  The table
 * uses small QP numbers, LIDs and addresses so that the fuzzer can forge a
 * matching sender.  The buffer handed to the check is exactly the
 * completion's length (ASan sees any read past it).
 *
 * Checked after every call, against a direct reading of the rules: an
 * accepted message has the exact length, our magic, a REQ or REP type, a
 * rank and path inside the job, the receiving path as destination, the
 * source QP number the table gives for the rank and path it names, a
 * source address (GRH) or LID (InfiniBand only) that matches the table, a
 * QP number in 2..2^24-1 and the topology (REQ to path 0, REP from path 0,
 * never (me, 0) to (me, 0)); a refused one says why, with a verdict in
 * range whose name is a drop reason.  A violation aborts.
 *
 * IBV_CM_FUZZ_STATS=1 prints, at exit, how often each verdict was seen
 * (every one is reached within seconds).
 *
 *   clang -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -I. \
 *         tests/fuzz/ibv_cm_fuzz.c -o ibv_cm_fuzz
 *   ./ibv_cm_fuzz -max_total_time=15
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conduits/ibv/ibv_cm_decode.h"
#include "tests/fuzz/fuzz_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RANKS 8u
#define MAX_PATHS 4u
#define MAX_LEN   128u    /* the conduit's UD buffer (IBV_CM_BUF) */

static unsigned long stats[IBV_CM_NVERDICTS];

static void print_stats(void)
{
    for (int i = 0; i < IBV_CM_NVERDICTS; i++)
        fprintf(stderr, "ibv_cm_fuzz: %-70s %lu\n",
                ibv_cm_verdict_str((enum ibv_cm_verdict)i), stats[i]);
}

/* The sender check, read directly off the rules (not off the header). */
static int sender_ok(const struct ibv_cm_table *t, const struct ibv_cm_src *s,
                     const uint8_t *g, const struct ibv_cm_msg *m)
{
    const struct ibv_wire_hdr *h = &t->hdr[m->src_rank];
    if (s->src_qp != t->ud[m->src_rank * t->npaths + m->src_path])
        return 0;
    if (!s->grh)
        return !t->is_eth && s->slid == h->lid;
    if ((g[0] & 0xf0) == 0x60)
        return memcmp(g + 8, h->gid, 16) == 0;
    if ((g[20] & 0xf0) == 0x40) {
        for (int i = 0; i < 10; i++)
            if (h->gid[i])
                return 0;
        return h->gid[10] == 0xff && h->gid[11] == 0xff &&
               memcmp(g + 32, h->gid + 12, 4) == 0;
    }
    return 0;
}

/* A message built from choices the input makes, each of which is right
 * or subtly wrong (so that every check is reached, the accepting path
 * too): length, magic, type, rank, path, destination, QP number, source
 * QP, and a GRH of either IP version with either address, or none. */
static uint8_t *forge(in_t *in, const struct ibv_cm_table *t,
                      struct ibv_cm_src *s)
{
    const uint8_t c = u8(in), d = u8(in);
    s->len = (c & 7) ? IBV_CM_LEN : u8(in) % (MAX_LEN + 1);
    uint8_t *buf = calloc(1, s->len > IBV_CM_LEN ? s->len : IBV_CM_LEN);
    CHECK(buf != NULL);
    struct ibv_cm_msg m;
    m.magic = (c & 8) ? u32(in) : IBV_CM_MAGIC;
    m.type = u8(in) % 4;
    m.src_rank = u8(in) % (t->nranks + 1);
    m.src_path = u8(in) % (t->npaths + 1);
    m.dst_path = (c & 16) ? u8(in) % (t->npaths + 1) : t->path;
    static const uint32_t qpns[] = {0, 1, 2, 0xffffff, 0x1000000};
    const uint8_t qc = u8(in);
    m.qpn = qc < 5 ? qpns[qc] : u32(in);
    m.echo = u32(in);
    m.pad = 0;
    memcpy(buf + IBV_CM_GRH, &m, sizeof m);
    /* The sender really is (sr, sq): the one named, or another one. */
    uint32_t sr = m.src_rank % t->nranks, sq = m.src_path % t->npaths;
    if (d & 1)
        sr = u8(in) % t->nranks;
    if (d & 2)
        sq = u8(in) % t->npaths;
    s->src_qp = (d & 4) ? u32(in) & 0xffffff : t->ud[sr * t->npaths + sq];
    s->slid = (d & 8) ? (uint16_t)u8(in) : t->hdr[sr].lid;
    s->grh = (d & 16) == 0;
    const uint8_t *gid = t->hdr[sr].gid;
    if (d & 32) {                            /* IPv6 header */
        buf[0] = 0x60;
        memcpy(buf + 8, gid, 16);
    } else {                                 /* RoCE v2 over IPv4 */
        buf[20] = 0x45;
        memcpy(buf + 32, gid + 12, 4);
    }
    if (d & 64)                              /* one byte of the GRH */
        buf[u8(in) % IBV_CM_GRH] ^= (uint8_t)(1 + u8(in) % 255);
    if (s->len < IBV_CM_LEN) {               /* exactly len bytes */
        uint8_t *b = malloc(s->len ? s->len : 1);
        CHECK(b != NULL);
        memcpy(b, buf, s->len);
        free(buf);
        buf = b;
    }
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int stats_on = -1;
    if (stats_on < 0) {
        const char *e = getenv("IBV_CM_FUZZ_STATS");
        stats_on = e && *e == '1';
        if (stats_on)
            atexit(print_stats);
    }
    in_t in = {data, size, 0};
    const uint32_t nr = 1 + u8(&in) % MAX_RANKS;
    const uint32_t np = 1 + u8(&in) % MAX_PATHS;
    const uint32_t me = u8(&in) % nr, path = u8(&in) % np;
    const int is_eth = u8(&in) & 1;
    const uint8_t look = u8(&in);
    struct ibv_wire_hdr hdr[MAX_RANKS];
    uint32_t ud[MAX_RANKS * MAX_PATHS];
    memset(hdr, 0, sizeof hdr);
    for (uint32_t r = 0; r < nr; r++) {
        hdr[r].lid = (uint16_t)(r + 1);
        if (look & 1) {                      /* an IPv4-mapped GID */
            hdr[r].gid[10] = hdr[r].gid[11] = 0xff;
            hdr[r].gid[12] = 10;
        } else {                             /* a link-local one */
            hdr[r].gid[0] = 0xfe;
            hdr[r].gid[1] = 0x80;
        }
        hdr[r].gid[15] = (uint8_t)(r + 1);
        for (uint32_t q = 0; q < np; q++)
            ud[r * np + q] = 16 + r * np + q;
    }
    const struct ibv_cm_table t = {.nranks = nr, .npaths = np, .me = me,
                                   .path = path, .is_eth = is_eth,
                                   .hdr = hdr, .ud = ud};
    struct ibv_cm_src s;
    uint8_t *buf;
    if (look & 0x80) {
        buf = forge(&in, &t, &s);
    } else {                                 /* raw bytes */
        s.src_qp = u32(&in) & 0xffffff;
        s.slid = (uint16_t)(u8(&in) | (u8(&in) << 8));
        s.grh = u8(&in) & 1;
        s.len = u8(&in) % (MAX_LEN + 1);
        buf = malloc(s.len ? s.len : 1);
        CHECK(buf != NULL);
        for (uint32_t i = 0; i < s.len; i++)
            buf[i] = u8(&in);
    }

    struct ibv_cm_msg m;
    const enum ibv_cm_verdict v = ibv_cm_check(&t, &s, buf, &m);
    CHECK(v >= IBV_CM_OK && v < IBV_CM_NVERDICTS);
    CHECK(strstr(ibv_cm_verdict_str(v), v ? "connection message" : "accept"));
    stats[v]++;
    if (v == IBV_CM_BAD_SIZE) {
        CHECK(s.len != IBV_CM_LEN);
    } else {
        CHECK(s.len == IBV_CM_LEN);
        struct ibv_cm_msg raw;
        memcpy(&raw, buf + IBV_CM_GRH, sizeof raw);
        CHECK(memcmp(&raw, &m, sizeof m) == 0);
        const int shape = m.magic == IBV_CM_MAGIC &&
                          (m.type == IBV_CM_REQ || m.type == IBV_CM_REP) &&
                          m.src_rank < nr && m.src_path < np &&
                          m.dst_path == path;
        CHECK(shape == (v != IBV_CM_MALFORMED));
        if (shape) {
            const int from = sender_ok(&t, &s, buf, &m);
            CHECK(from == (v != IBV_CM_NOT_SENDER));
            if (from) {
                const int topo =
                    (m.type == IBV_CM_REQ ? path == 0 : m.src_path == 0) &&
                    m.qpn >= 2 && m.qpn <= 0xffffff &&
                    !(m.src_rank == me && m.src_path == 0 && path == 0);
                CHECK(topo == (v == IBV_CM_OK));
            }
        }
    }
    free(buf);
    return 0;
}
