/*
 * ibv_device.c -- verbs conduit: which device, port, GID and partition key,
 * and whether the device can run the conduit at all (ibv_probe_qp).
 *
 * Device, port, GID
 *   FH_IBV_DEVICE names the device (ibv_devices; of a list, this rank's
 *   entry: ibv_device_for_rank, ibv_config.c); by default the first
 *   device with an ACTIVE port.  FH_IBV_PORT picks the port (default: the
 *   first ACTIVE one).  On an Ethernet (RoCE) port the GID is FH_IBV_GID_INDEX
 *   or, by default, the first RoCE v2 entry with an IPv4-mapped address
 *   (::ffff:a.b.c.d), else the first RoCE v2 entry, else the first entry.
 *   On an InfiniBand port we address by LID unless FH_IBV_GID_INDEX is set;
 *   the port GID (index 0) is still sent to the peers, and a GRH is added
 *   towards a peer in another subnet (ibv_needs_grh).  FH_IBV_PKEY_INDEX
 *   must name a valid entry of the port's pkey table.
 *
 * What the conduit needs (ibv_probe_qp): a PD, a CQ, an SRQ and an RC QP
 * on that SRQ which reaches INIT with our port, pkey index and access
 * flags; with FH_IBV_POST=ex or auto also the extended posting API (a QP
 * created with send_ops_flags, ibv_qp_to_qp_ex).  FH_CONDUIT=auto commits
 * to ibv only when all of it works (ibv_probe = open + close).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibv_internal.h"
#include "firehose/util/log.h"

static const char *ibv_gid_str(const union ibv_gid *g, char *buf, size_t n)
{
    if (!inet_ntop(AF_INET6, g->raw, buf, (socklen_t)n))
        snprintf(buf, n, "?");
    return buf;
}

static int ibv_gid_is_v4mapped(const union ibv_gid *g)
{
    static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(g->raw, pfx, sizeof pfx) == 0;
}

static const char *ibv_gid_type_str(uint32_t t)
{
    switch (t) {
    case IBV_GID_TYPE_IB: return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
    default: return "?";
    }
}

/* Picks the GID of an Ethernet port (or the requested one anywhere). */
int ibv_pick_gid(struct fh_conduit *c)
{
    char gs[INET6_ADDRSTRLEN];
    if (!c->is_eth && c->env.gid_index < 0) {
        c->gid_index = -1;
        if (c->pattr.lid == 0)
            return fh_set_error(FH_ERR_TRANSPORT, "ibv: %s port %u has LID 0 "
                                "(no subnet manager?)", c->devname, c->port);
        /* The port GID, for a GRH towards another subnet (ibv_needs_grh). */
        if (ibv_query_gid(c->ctx, c->port, 0, &c->gid))
            memset(&c->gid, 0, sizeof c->gid);
        return FH_OK;
    }
    if (c->env.gid_index >= 0) {
        struct ibv_gid_entry ge;
        if (ibv_query_gid_ex(c->ctx, c->port, (uint32_t)c->env.gid_index,
                             &ge, 0))
            return fh_set_error(FH_ERR_CONFIG, "FH_IBV_GID_INDEX=%d: no such "
                                "GID on %s port %u: %s", c->env.gid_index,
                                c->devname, c->port, strerror(errno));
        c->gid_index = c->env.gid_index;
        c->gid = ge.gid;
        fh_log_verbose(1, "ibv: GID index %d (%s) %s, from FH_IBV_GID_INDEX",
                       c->gid_index, ibv_gid_type_str(ge.gid_type),
                       ibv_gid_str(&c->gid, gs, sizeof gs));
        return FH_OK;
    }
    size_t max = (size_t)c->pattr.gid_tbl_len * c->dattr.phys_port_cnt;
    if (max == 0)
        max = 1;
    struct ibv_gid_entry *ents = calloc(max, sizeof *ents);
    if (!ents)
        return FH_ERR_NO_MEMORY;
    ssize_t n = ibv_query_gid_table(c->ctx, ents, max, 0);
    int best = -1, rank_best = 0;
    for (ssize_t i = 0; i < n; i++) {
        if (ents[i].port_num != c->port)
            continue;
        int r = 1;
        if (ents[i].gid_type == IBV_GID_TYPE_ROCE_V2)
            r = ibv_gid_is_v4mapped(&ents[i].gid) ? 3 : 2;
        if (r > rank_best || (r == rank_best &&
                              (int)ents[i].gid_index < (int)ents[best].gid_index)) {
            rank_best = r;
            best = (int)i;
        }
    }
    if (best < 0) {
        free(ents);
        return fh_set_error(FH_ERR_TRANSPORT, "ibv: %s port %u has no valid "
                            "GID (no IP address on its netdev?)%s",
                            c->devname, c->port,
                            n < 0 ? " (ibv_query_gid_table failed)" : "");
    }
    c->gid_index = (int)ents[best].gid_index;
    c->gid = ents[best].gid;
    fh_log_verbose(1, "ibv: GID index %d (%s%s) %s", c->gid_index,
                   ibv_gid_type_str(ents[best].gid_type),
                   rank_best == 3 ? ", IPv4-mapped" : "",
                   ibv_gid_str(&c->gid, gs, sizeof gs));
    free(ents);
    return FH_OK;
}

/* Opens FH_IBV_DEVICE, or the first device with an active port. */
int ibv_pick_device(struct fh_conduit *c)
{
    int ndev = 0;
    struct ibv_device **list = ibv_get_device_list(&ndev);
    if (!list || ndev == 0) {
        if (list)
            ibv_free_device_list(list);
        fh_log_verbose(1, "ibv: no RDMA device found");
        return fh_set_error(FH_ERR_NOT_SUPPORTED, "ibv: no RDMA device found");
    }
    int found = 0;
    char names[256] = "";
    for (int d = 0; d < ndev && !c->ctx; d++) {
        const char *name = ibv_get_device_name(list[d]);
        size_t nl = strlen(names);
        snprintf(names + nl, sizeof names - nl, "%s%s", nl ? " " : "", name);
        if (c->env.device && strcmp(c->env.device, name))
            continue;
        found = 1;
        struct ibv_context *ctx = ibv_open_device(list[d]);
        if (!ctx) {
            fh_log_verbose(1, "ibv: cannot open %s: %s", name, strerror(errno));
            continue;
        }
        struct ibv_device_attr da;
        if (ibv_query_device(ctx, &da)) {
            fh_log_verbose(1, "ibv: ibv_query_device(%s): %s", name,
                           strerror(errno));
            ibv_close_device(ctx);
            continue;
        }
        for (int port = 1; port <= da.phys_port_cnt; port++) {
            if (c->env.port && port != c->env.port)
                continue;
            struct ibv_port_attr pa;
            if (ibv_query_port(ctx, (uint8_t)port, &pa))
                continue;
            if (pa.state != IBV_PORT_ACTIVE) {
                fh_log_verbose(1, "ibv: %s port %d is not active (state %s)",
                               name, port, ibv_port_state_str(pa.state));
                continue;
            }
            c->ctx = ctx;
            c->dattr = da;
            c->pattr = pa;
            c->port = (uint8_t)port;
            c->is_eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
            snprintf(c->devname, sizeof c->devname, "%s", name);
            break;
        }
        if (!c->ctx)
            ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    if (c->ctx)
        return FH_OK;
    if (c->env.device && !found)
        return fh_set_error(FH_ERR_CONFIG, "FH_IBV_DEVICE=%s: no such device "
                            "(have: %s)", c->env.device, names);
    if (c->env.port)
        return fh_set_error(FH_ERR_TRANSPORT, "ibv: port %d of %s is not "
                            "active or does not exist", c->env.port,
                            c->env.device ? c->env.device : names);
    return fh_set_error(FH_ERR_TRANSPORT, "ibv: no active port on %s", names);
}

/* The port's pkey at FH_IBV_PKEY_INDEX: must exist and be valid. */
int ibv_check_pkey(struct fh_conduit *c)
{
    const int idx = c->env.pkey_index;
    __be16 pkey = 0;
    if (idx >= c->pattr.pkey_tbl_len ||
        ibv_query_pkey(c->ctx, c->port, idx, &pkey) != 0)
        return fh_set_error(FH_ERR_CONFIG, "FH_IBV_PKEY_INDEX=%d: %s port %u "
                            "has %d pkey entries", idx, c->devname, c->port,
                            c->pattr.pkey_tbl_len);
    if ((ntohs(pkey) & 0x7fff) == 0)
        return fh_set_error(FH_ERR_CONFIG, "FH_IBV_PKEY_INDEX=%d: entry of "
                            "%s port %u is empty (pkey 0x%04x)", idx,
                            c->devname, c->port, ntohs(pkey));
    fh_log_verbose(2, "ibv: pkey index %d = 0x%04x", idx, ntohs(pkey));
    return FH_OK;
}

/* One probe QP of the given mode on cq/srq, with `want` bytes of inline
 * data; moved to INIT.  Returns the QP (caller destroys) or NULL (errno). */
static struct ibv_qp *ibv_probe_one(struct fh_conduit *c, struct ibv_cq *cq,
                                    struct ibv_srq *srq, int ex,
                                    uint32_t want, uint32_t *got)
{
    struct ibv_qp_cap cap = {.max_send_wr = 16, .max_send_sge = 1,
                             .max_inline_data = want};
    struct ibv_qp *qp;
    if (ex) {
        struct ibv_qp_init_attr_ex a = {
            .send_cq = cq, .recv_cq = cq, .srq = srq, .cap = cap,
            .qp_type = IBV_QPT_RC,
            .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            .pd = c->pd,
            .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE |
                              IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND,
        };
        qp = ibv_create_qp_ex(c->ctx, &a);
        if (qp && !ibv_qp_to_qp_ex(qp)) {
            ibv_destroy_qp(qp);
            errno = EOPNOTSUPP;
            return NULL;
        }
        cap = a.cap;
    } else {
        struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq,
                                     .srq = srq, .cap = cap,
                                     .qp_type = IBV_QPT_RC};
        qp = ibv_create_qp(c->pd, &a);
        cap = a.cap;
    }
    if (!qp)
        return NULL;
    *got = cap.max_inline_data >= want ? want : cap.max_inline_data;
    struct ibv_qp_attr ia = {
        .qp_state = IBV_QPS_INIT, .pkey_index = c->env.pkey_index,
        .port_num = c->port,
        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ};
    int e = ibv_modify_qp(qp, &ia, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                          IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (e) {
        ibv_destroy_qp(qp);
        errno = e;
        return NULL;
    }
    return qp;
}

/* Proves that the conduit can run on c's device (see the header) and sets
 * c->post_mode and c->max_inline (the largest inline size granted). */
int ibv_probe_qp(struct fh_conduit *c)
{
    struct ibv_cq *cq = ibv_create_cq(c->ctx, 16, NULL, NULL, 0);
    if (!cq)
        return fh_set_error(FH_ERR_NOT_SUPPORTED, "ibv: %s: cannot create a "
                            "completion queue: %s", c->devname, strerror(errno));
    struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
    struct ibv_srq *srq = ibv_create_srq(c->pd, &sa);
    if (!srq) {
        int e = errno;
        ibv_destroy_cq(cq);
        return fh_set_error(FH_ERR_NOT_SUPPORTED, "ibv: %s: cannot create a "
                            "shared receive queue: %s", c->devname, strerror(e));
    }
    int ret = FH_OK;
    struct ibv_qp *qp = NULL;
    for (int ex = c->env.post != IBV_POST_CLASSIC; !qp && ex >= 0; ex--) {
        /* inline: the largest of 256, 128, ... 16 (or none) granted */
        int e = 0;
        for (uint32_t want = IBV_INLINE_MAX; !qp; want /= 2) {
            if (want < 16)
                want = 0;
            qp = ibv_probe_one(c, cq, srq, ex, want, &c->max_inline);
            e = errno;
            if (want == 0)
                break;
        }
        if (qp) {
            c->post_mode = ex ? IBV_POST_EX : IBV_POST_CLASSIC;
        } else if (ex) {
            if (c->env.post == IBV_POST_EX) {
                ret = fh_set_error(FH_ERR_NOT_SUPPORTED, "FH_IBV_POST=ex: %s "
                                   "has no usable extended posting API "
                                   "(ibv_qp_to_qp_ex): %s", c->devname,
                                   strerror(e));
                break;
            }
            fh_log_verbose(1, "ibv: %s: no extended posting API (%s): "
                           "posting with ibv_post_send (classic)",
                           c->devname, strerror(e));
        } else {
            ret = fh_set_error(FH_ERR_NOT_SUPPORTED, "ibv: %s cannot create "
                               "an RC queue pair on a shared receive queue "
                               "and move it to INIT (port %u, pkey index %d): "
                               "%s", c->devname, c->port, c->env.pkey_index,
                               strerror(e));
        }
    }
    if (qp)
        ibv_destroy_qp(qp);
    ibv_destroy_srq(srq);
    ibv_destroy_cq(cq);
    if (ret == FH_OK)
        fh_log_verbose(1, "ibv: %s: posting with %s, max_inline %u",
                       c->devname, c->post_mode == IBV_POST_EX
                           ? "ibv_wr_* (ex)" : "ibv_post_send (classic)",
                       c->max_inline);
    return ret;
}
