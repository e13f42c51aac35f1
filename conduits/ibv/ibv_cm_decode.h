/*
 * ibv_cm_decode.h -- the verbs conduit's connection messages (ibv_cm.c)
 * and their checks: pure functions, bytes and what the HCA said about them
 * in, a parsed message or the reason to drop it out, no verbs call.  Both
 * ibv_cm.c (on every UD receive of the connection exchange) and the tests
 * call them -- tests/unit/test_ibv_cm_decode.c with crafted messages,
 * tests/fuzz/ibv_cm_fuzz.c with hostile bytes -- so this header includes
 * no verbs header: the fuzzer builds without rdma-core.
 *
 * A UD receive buffer holds IBV_CM_GRH bytes of room for the global route
 * header (filled by the HCA when the sender's packet had one: always on
 * RoCE) followed by the message.  A message counts only when
 *   - its length (the completion's byte_len, GRH room included) is exact;
 *   - its magic is ours, its type REQ or REP, its ranks and paths inside
 *     the job and its dst_path the receiving path;
 *   - it comes from the UD QP the allgathered table gives for the (rank,
 *     path) it names: the completion's source QP number (the sender's HCA
 *     sets it, not the sender's bytes) matches, and so does the source
 *     address -- the GRH's source GID (IPv6 header, or the IPv4 header of
 *     RoCE v2 over IPv4 against the peer's IPv4-mapped GID), or without a
 *     GRH the source LID, which InfiniBand only has;
 *   - it fits the topology: requests go to a service path (path 0) from
 *     any path, replies come from a service path; never from (me, 0) to
 *     (me, 0) (that one connects locally); QP numbers have 24 bits and
 *     0 and 1 are special.
 * ibv_cm_check reads only the len bytes it is given.
 */
#ifndef FH_IBV_CM_DECODE_H
#define FH_IBV_CM_DECODE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define IBV_CM_MAGIC 0x4d434846u   /* "FHCM" */
#define IBV_CM_REQ   1u
#define IBV_CM_REP   2u
#define IBV_CM_GRH   40            /* UD receive: GRH room */

/* The connection record every rank sends in connect's allgather, followed
 * by npaths UD QP numbers (one per path). */
struct ibv_wire_hdr {
    uint32_t magic;
    uint32_t npaths;
    uint16_t lid;
    uint8_t  mtu;             /* enum ibv_mtu */
    uint8_t  is_eth;
    int32_t  gid_index;       /* -1: LID addressing */
    uint8_t  gid[16];
    uint8_t  rd_atom;         /* its responder resources (max_qp_rd_atom) */
    uint8_t  init_rd_atom;    /* its initiator depth (max_qp_init_rd_atom) */
    uint8_t  pad[2];
    uint32_t qkey;            /* its UD QPs' Q_Key */
};

/* A connection message on the wire, little-endian as the hosts of a job
 * are (the allgather's record is host order too). */
struct ibv_cm_msg {
    uint32_t magic;
    uint32_t type;            /* IBV_CM_REQ or IBV_CM_REP */
    uint32_t src_rank, src_path, dst_path;
    uint32_t qpn;             /* the sender's RC QP for this pair */
    uint32_t echo;            /* REP: the requester's QP it answers */
    uint32_t pad;
};

#define IBV_CM_LEN (IBV_CM_GRH + sizeof(struct ibv_cm_msg))

/* What the HCA said about one UD receive (from its work completion). */
struct ibv_cm_src {
    uint32_t len;             /* byte_len: GRH room + message */
    uint32_t src_qp;          /* the sending QP's number */
    uint16_t slid;            /* the sender's LID (InfiniBand) */
    uint8_t  grh;             /* a GRH fills the first IBV_CM_GRH bytes */
};

/* The job as the checks see it: the allgathered table and who receives. */
struct ibv_cm_table {
    uint32_t nranks, npaths;
    uint32_t me;              /* the receiving rank */
    uint32_t path;            /* the receiving path */
    int is_eth;               /* RoCE: a GRH is always there */
    const struct ibv_wire_hdr *hdr;   /* [nranks] */
    const uint32_t *ud;               /* [nranks * npaths] UD QP numbers */
};

/* Why a message was dropped (IBV_CM_OK: it was not). */
enum ibv_cm_verdict {
    IBV_CM_OK = 0,
    IBV_CM_BAD_SIZE,          /* length not exact */
    IBV_CM_MALFORMED,         /* magic, type, rank, path out of the job */
    IBV_CM_NOT_SENDER,        /* not from the UD QP it names */
    IBV_CM_TOPOLOGY,          /* against who-asks-whom, or a bad QP number */
    IBV_CM_NVERDICTS
};

/* The drop reason on_drop is given, for a verdict other than IBV_CM_OK. */
static inline const char *ibv_cm_verdict_str(enum ibv_cm_verdict v)
{
    switch (v) {
    case IBV_CM_OK:         return "accepted";
    case IBV_CM_BAD_SIZE:   return "connection message of a wrong size";
    case IBV_CM_MALFORMED:  return "malformed connection message";
    case IBV_CM_NOT_SENDER: return "connection message from a QP that is "
                                   "not the one it names";
    case IBV_CM_TOPOLOGY:   return "connection message against the topology";
    default:                return "?";
    }
}

/* Does a receive whose first IBV_CM_GRH bytes are g come from the UD QP
 * of (r, q) as the table gives it?  r < nranks, q < npaths. */
static inline int ibv_cm_from(const struct ibv_cm_table *t,
                              const struct ibv_cm_src *s, const uint8_t *g,
                              uint32_t r, uint32_t q)
{
    const struct ibv_wire_hdr *h = &t->hdr[r];
    if (s->src_qp != t->ud[(size_t)r * t->npaths + q])
        return 0;
    if (!s->grh)
        return !t->is_eth && s->slid == h->lid;
    if ((g[0] >> 4) == 6)                     /* IB / RoCE v1/v2 over IPv6: */
        return memcmp(g + 8, h->gid, 16) == 0;   /* sgid at 8..24 */
    if ((g[20] >> 4) == 4) {   /* RoCE v2 over IPv4: the IPv4 header in the
                                  last 20 bytes, source address at 32..36 */
        static const uint8_t v4map[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                          0xff, 0xff};
        return memcmp(h->gid, v4map, 12) == 0 &&
               memcmp(g + 32, h->gid + 12, 4) == 0;
    }
    return 0;
}

/* Checks one UD receive of len = s->len bytes at buf (GRH room, then the
 * message) against the table t.  Returns IBV_CM_OK with *m the message, or
 * why it must be dropped; *m is filled whenever the length was right (so
 * that the caller can name the rank in its drop report). */
static inline enum ibv_cm_verdict ibv_cm_check(const struct ibv_cm_table *t,
                                               const struct ibv_cm_src *s,
                                               const uint8_t *buf,
                                               struct ibv_cm_msg *m)
{
    if (s->len != IBV_CM_LEN)
        return IBV_CM_BAD_SIZE;
    memcpy(m, buf + IBV_CM_GRH, sizeof *m);
    if (m->magic != IBV_CM_MAGIC ||
        (m->type != IBV_CM_REQ && m->type != IBV_CM_REP) ||
        m->src_rank >= t->nranks || m->src_path >= t->npaths ||
        m->dst_path != t->path)
        return IBV_CM_MALFORMED;
    if (!ibv_cm_from(t, s, buf, m->src_rank, m->src_path))
        return IBV_CM_NOT_SENDER;
    const int topo_ok = m->type == IBV_CM_REQ ? t->path == 0
                                              : m->src_path == 0;
    if (!topo_ok || m->qpn < 2 || m->qpn >= (1u << 24) ||
        (m->src_rank == t->me && m->src_path == 0 && t->path == 0))
        return IBV_CM_TOPOLOGY;
    return IBV_CM_OK;
}

#endif
