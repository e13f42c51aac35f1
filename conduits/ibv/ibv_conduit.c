/*
 * ibv_conduit.c -- verbs conduit: open / close / connect / limits.
 *
 * Device, port, GID
 *   FH_IBV_DEVICE names the device (ibv_devices); by default the first
 *   device with an ACTIVE port.  FH_IBV_PORT picks the port (default: the
 *   first ACTIVE one).  On an Ethernet (RoCE) port the GID is FH_IBV_GID_INDEX
 *   or, by default, the first RoCE v2 entry with an IPv4-mapped address
 *   (::ffff:a.b.c.d), else the first RoCE v2 entry, else the first entry.
 *   On an InfiniBand port we address by LID (no GRH) unless FH_IBV_GID_INDEX
 *   is set.
 *
 * Connect
 *   One allgather carries, per rank, a header (LID, GID, MTU) and the QP
 *   numbers of all its paths: nranks * npaths for path 0 (indexed by the
 *   peer endpoint (r, q)) and nranks for each thread path (indexed by r).
 *   Every QP goes RESET -> INIT -> RTR -> RTS, then a bootstrap barrier makes
 *   sure no rank sends to a QP that is not ready yet.  The table grows as
 *   nranks * (2 * npaths - 1) * 4 bytes per rank; fine for hundreds of
 *   ranks, a candidate for XRC/DC (or lazy connection) beyond that.
 *
 * Dead peers
 *   RTS with timeout 16 (4.096 us * 2^16 = 268 ms) and retry_cnt 6: a peer
 *   that stops acking makes the QP fail with IBV_WC_RETRY_EXC_ERR after about
 *   2 s; later WRs flush with IBV_WC_WR_FLUSH_ERR.  Not 7: rxe treats
 *   retry_cnt 7 like rnr_retry 7, as "retry forever" (a dead peer hung).  rnr_retry 7 (infinite)
 *   with min_rnr_timer 0.64 ms: a live receiver without a posted buffer
 *   only delays the sender (it cannot happen within the runtime's credits).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include "ibv_config.h"
#include "ibv_internal.h"
#include "firehose/boot/bootstrap.h"
#include "firehose/util/log.h"
#include "conduits/util/cu.h"

#define IBV_MAX_MSG_CAP  ((size_t)1 << 30)   /* 1 GiB */
#define IBV_TIMEOUT      16
#define IBV_RETRY_CNT    6                    /* 7 = infinite on rxe */
#define IBV_RNR_RETRY    7                    /* infinite */
#define IBV_MIN_RNR      12                   /* 0.64 ms */
#define IBV_MAGIC        0x46484942u          /* "FHIB" */

int ibv_err_status(enum ibv_wc_status st)
{
    switch (st) {
    case IBV_WC_SUCCESS:
        return FH_OK;
    case IBV_WC_RETRY_EXC_ERR:       /* no ack: peer gone or unreachable */
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_RESP_TIMEOUT_ERR:
        return FH_ERR_PEER_DEAD;
    default:
        return FH_ERR_TRANSPORT;
    }
}

/* The FH_IBV_* settings (ibv_config.c): the runtime's, already loaded and
 * range-checked, or (cfg->settings NULL: the self-tests) loaded here from
 * the environment through the same table. */
static int ibv_read_env(struct ibv_env *e, const fh_conduit_config_t *cfg)
{
    ibv_settings_t own;
    const ibv_settings_t *s = cfg->settings;
    if (s == NULL) {
        char err[256];
        if (fh_conduit_settings_load(&fh_ibv_settings, &own, err, sizeof err))
            return fh_set_error(FH_ERR_CONFIG, "ibv: %s", err);
        s = &own;
    }
    e->device = (s->device && s->device[0]) ? s->device : NULL;
    e->port = (int)s->port;
    e->gid_index = (int)s->gid_index;
    switch (s->td) {
    case 0: e->td = IBV_TD_OFF; break;
    case 1: e->td = IBV_TD_SHARED; break;
    default: e->td = IBV_TD_INDEPENDENT; break;
    }
    return FH_OK;
}

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
static int ibv_pick_gid(struct fh_conduit *c)
{
    char gs[INET6_ADDRSTRLEN];
    if (!c->is_eth && c->env.gid_index < 0) {
        c->gid_index = -1;
        if (c->pattr.lid == 0)
            return fh_set_error(FH_ERR_TRANSPORT, "ibv: %s port %u has LID 0 "
                                "(no subnet manager?)", c->devname, c->port);
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
static int ibv_pick_device(struct fh_conduit *c)
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

/* Largest inline size the provider grants an RC QP: a probe QP. */
static uint32_t ibv_probe_inline(struct fh_conduit *c)
{
    struct ibv_cq *cq = ibv_create_cq(c->ctx, 4, NULL, NULL, 0);
    if (!cq)
        return 0;
    uint32_t got = 0;
    for (uint32_t want = (uint32_t)IBV_INLINE_MAX; want >= 16; want /= 2) {
        struct ibv_qp_init_attr_ex a = {
            .send_cq = cq, .recv_cq = cq,
            .cap = {.max_send_wr = 16, .max_recv_wr = 1, .max_send_sge = 1,
                    .max_recv_sge = 1, .max_inline_data = want},
            .qp_type = IBV_QPT_RC,
            .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            .pd = c->pd,
            .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE |
                              IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND,
        };
        struct ibv_qp *qp = ibv_create_qp_ex(c->ctx, &a);
        if (qp) {
            got = a.cap.max_inline_data >= want ? want : a.cap.max_inline_data;
            ibv_destroy_qp(qp);
            break;
        }
    }
    ibv_destroy_cq(cq);
    return got;
}

static void ibv_close(struct fh_conduit *c);

static int ibv_open(const fh_conduit_config_t *cfg,
                    const fh_conduit_upcalls_t *up,
                    struct fh_conduit **out, fh_conduit_limits_t *limits)
{
    int ret = cu_check_open("ibv", cfg, up, out, limits);
    if (ret)
        return ret;

    struct fh_conduit *c = calloc(1, sizeof *c);
    if (!c)
        return FH_ERR_NO_MEMORY;
    c->cfg = *cfg;
    c->cfg.settings = NULL;   /* read during open only (ibv_read_env) */
    c->up = *up;
    c->gid_index = -1;
    c->paths = calloc((size_t)cfg->npaths, sizeof *c->paths);
    if (!c->paths) {
        free(c);
        return FH_ERR_NO_MEMORY;
    }
    if ((ret = ibv_read_env(&c->env, cfg)) != FH_OK)
        goto fail;
    if ((ret = ibv_pick_device(c)) != FH_OK)
        goto fail;
    if ((ret = ibv_pick_gid(c)) != FH_OK)
        goto fail;
    c->pd = ibv_alloc_pd(c->ctx);
    if (!c->pd) {
        ret = fh_set_error(FH_ERR_TRANSPORT, "ibv: ibv_alloc_pd(%s): %s",
                           c->devname, strerror(errno));
        goto fail;
    }
    c->max_inline = ibv_probe_inline(c);

    size_t max_msg = c->pattr.max_msg_sz;
    if (max_msg == 0 || max_msg > IBV_MAX_MSG_CAP)
        max_msg = IBV_MAX_MSG_CAP;
    c->am_max_packet = cfg->am_max_packet < max_msg ? cfg->am_max_packet
                                                    : max_msg;
    c->rbuf_stride = (c->am_max_packet + 63) & ~(size_t)63;

    struct rlimit rl;
    size_t memlock = 0;          /* 0 = unlimited / unknown */
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        memlock = (size_t)rl.rlim_cur;
    size_t mr_bytes = (size_t)c->dattr.max_mr_size;
    if (memlock && (mr_bytes == 0 || memlock < mr_bytes))
        mr_bytes = memlock;

    memset(&c->limits, 0, sizeof c->limits);
    c->limits.max_msg = max_msg;
    c->limits.max_inject = c->max_inline;
    c->limits.am_max_packet = c->am_max_packet;
    c->limits.needs_local_mr = 1;      /* lkeys (inline puts excepted) */
    c->limits.max_mr_count = c->dattr.max_mr > 0 ? (size_t)c->dattr.max_mr : 0;
    c->limits.max_mr_bytes = mr_bytes;
    c->limits.reg_pins = 1;            /* ibv_reg_mr pins the pages */
    snprintf(c->limits.description, sizeof c->limits.description,
             "ibv %s port %u (%s)", c->devname, c->port,
             c->is_eth ? "RoCE" : "InfiniBand");
    *limits = c->limits;

    if (cfg->verbose >= 1) {
        char ml[32];
        if (memlock)
            snprintf(ml, sizeof ml, "%zu", memlock);
        else
            snprintf(ml, sizeof ml, "unlimited");
        fh_log_verbose(1, "ibv: device %s port %u, %s, LID %u, active MTU %d, "
                       "max_msg %zu, max_inline %u, am_max_packet %zu",
                       c->devname, c->port,
                       c->is_eth ? "Ethernet (RoCE)" : "InfiniBand",
                       c->pattr.lid, 128 << c->pattr.active_mtu, max_msg,
                       c->max_inline, c->am_max_packet);
        fh_log_verbose(1, "ibv: limits: max_mr %d, max_mr_size %" PRIu64
                       ", RLIMIT_MEMLOCK %s, max_qp %d, max_qp_wr %d, "
                       "max_srq_wr %d, max_cqe %d, comp vectors %d",
                       c->dattr.max_mr, (uint64_t)c->dattr.max_mr_size, ml,
                       c->dattr.max_qp, c->dattr.max_qp_wr,
                       c->dattr.max_srq_wr, c->dattr.max_cqe,
                       c->ctx->num_comp_vectors);
        if (memlock && memlock < ((size_t)64 << 20))
            fh_log_verbose(1, "ibv: RLIMIT_MEMLOCK is only %zu bytes: "
                           "registrations beyond it fail (ulimit -l)",
                           memlock);
    }
    *out = c;
    return FH_OK;

fail:
    ibv_close(c);
    return ret;
}

static void ibv_close(struct fh_conduit *c)
{
    if (!c)
        return;
    if (c->paths) {
        for (int i = c->cfg.npaths - 1; i >= 0; i--)
            if (c->paths[i])
                ibv_path_destroy(c->paths[i]);
    }
    if (c->pd)
        ibv_dealloc_pd(c->pd);
    if (c->ctx)
        ibv_close_device(c->ctx);
    free(c->paths);
    free(c);
}

/* Connection exchange: per rank a header, then the QP numbers. */
struct ibv_wire_hdr {
    uint32_t magic;
    uint32_t npaths;
    uint16_t lid;
    uint8_t  mtu;             /* enum ibv_mtu */
    uint8_t  is_eth;
    int32_t  gid_index;       /* -1: LID addressing */
    uint8_t  gid[16];
};

static int ibv_qp_to_rts(struct fh_conduit *c, struct ibv_conn *k,
                         const struct ibv_wire_hdr *peer, uint32_t rqpn)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = c->port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                        IBV_ACCESS_REMOTE_READ;
    int e = ibv_modify_qp(k->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                          IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (e) {
        fh_log_error("ibv: rank %d: QP to INIT: %s", k->rank, strerror(e));
        return FH_ERR_TRANSPORT;
    }
    int rd = c->dattr.max_qp_rd_atom < 16 ? c->dattr.max_qp_rd_atom : 16;
    int ird = c->dattr.max_qp_init_rd_atom < 16 ? c->dattr.max_qp_init_rd_atom
                                                : 16;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = peer->mtu < c->pattr.active_mtu
                     ? (enum ibv_mtu)peer->mtu : c->pattr.active_mtu;
    a.dest_qp_num = rqpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = (uint8_t)(rd > 0 ? rd : 1);
    a.min_rnr_timer = IBV_MIN_RNR;
    a.ah_attr.port_num = c->port;
    if (c->gid_index >= 0) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)c->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    } else {
        a.ah_attr.dlid = peer->lid;
    }
    e = ibv_modify_qp(k->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (e) {
        fh_log_error("ibv: rank %d: QP to RTR (remote QP %u, path %d): %s",
                     k->rank, rqpn, k->rpath, strerror(e));
        return FH_ERR_TRANSPORT;
    }
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = IBV_TIMEOUT;
    a.retry_cnt = IBV_RETRY_CNT;
    a.rnr_retry = IBV_RNR_RETRY;
    a.sq_psn = 0;
    a.max_rd_atomic = (uint8_t)(ird > 0 ? ird : 1);
    e = ibv_modify_qp(k->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC);
    if (e) {
        fh_log_error("ibv: rank %d: QP to RTS: %s", k->rank, strerror(e));
        return FH_ERR_TRANSPORT;
    }
    return FH_OK;
}

static int ibv_connect(struct fh_conduit *c, struct fh_boot *boot)
{
    const int np = c->cfg.npaths, nr = c->cfg.nranks, me = c->cfg.rank;
    int ret;
    if (c->connected)
        return fh_set_error(FH_ERR_STATE, "ibv: connect called twice");
    if (!boot || boot->nranks != nr)
        return fh_set_error(FH_ERR_INVALID,
                            "ibv: bootstrap has %d ranks, conduit %d",
                            boot ? boot->nranks : -1, nr);
    for (int i = 0; i < np; i++)
        if (!c->paths[i])
            return fh_set_error(FH_ERR_STATE,
                                "ibv: connect before path %d was created", i);

    /* Layout of one rank's blob: header, path 0 table (nr * np), then
     * (np - 1) thread-path tables of nr entries. */
    const size_t nq = (size_t)nr * (size_t)np + (size_t)(np - 1) * (size_t)nr;
    const size_t blob = sizeof(struct ibv_wire_hdr) + nq * sizeof(uint32_t);
    char *mine = calloc(1, blob);
    char *all = calloc((size_t)nr, blob);
    if (!mine || !all) {
        free(mine);
        free(all);
        return FH_ERR_NO_MEMORY;
    }
    struct ibv_wire_hdr h = {
        .magic = IBV_MAGIC,
        .npaths = (uint32_t)np,
        .lid = c->pattr.lid,
        .mtu = (uint8_t)c->pattr.active_mtu,
        .is_eth = (uint8_t)c->is_eth,
        .gid_index = c->gid_index,
    };
    memcpy(h.gid, c->gid.raw, 16);
    memcpy(mine, &h, sizeof h);
    uint32_t *tab = (uint32_t *)(mine + sizeof h);
    for (int i = 0; i < np; i++) {
        struct fh_cpath *p = c->paths[i];
        size_t off = i == 0 ? 0 : (size_t)nr * (size_t)np +
                                  (size_t)(i - 1) * (size_t)nr;
        for (size_t k = 0; k < p->nconns; k++)
            tab[off + k] = p->conns[k].qp->qp_num;
    }
    ret = boot->ops->allgather(boot, mine, all, blob);
    if (ret) {
        fh_log_error("ibv: QP-number allgather failed (%d)", ret);
        ret = FH_ERR_BOOTSTRAP;
        goto out;
    }
    for (int r = 0; r < nr; r++) {
        struct ibv_wire_hdr ph;
        memcpy(&ph, all + (size_t)r * blob, sizeof ph);
        if (ph.magic != IBV_MAGIC || ph.npaths != (uint32_t)np) {
            ret = fh_set_error(FH_ERR_BOOTSTRAP, "ibv: rank %d sent a bad "
                               "connection record", r);
            goto out;
        }
        if (ph.is_eth != c->is_eth || (ph.gid_index >= 0) !=
                                          (c->gid_index >= 0)) {
            ret = fh_set_error(FH_ERR_CONFIG, "ibv: rank %d uses %s%s, this "
                               "rank %s%s: set FH_IBV_DEVICE/FH_IBV_PORT/"
                               "FH_IBV_GID_INDEX consistently", r,
                               ph.is_eth ? "RoCE" : "InfiniBand",
                               ph.gid_index >= 0 ? " with GIDs" : " with LIDs",
                               c->is_eth ? "RoCE" : "InfiniBand",
                               c->gid_index >= 0 ? " with GIDs" : " with LIDs");
            goto out;
        }
    }
    for (int i = 0; i < np; i++) {
        struct fh_cpath *p = c->paths[i];
        for (size_t k = 0; k < p->nconns; k++) {
            struct ibv_conn *cn = &p->conns[k];
            const char *rb = all + (size_t)cn->rank * blob;
            struct ibv_wire_hdr ph;
            memcpy(&ph, rb, sizeof ph);
            const uint32_t *rt = (const uint32_t *)(rb + sizeof ph);
            uint32_t rqpn;
            if (i == 0 && cn->rpath == 0)
                rqpn = rt[(size_t)me * (size_t)np];           /* its path 0 */
            else if (i == 0)
                rqpn = rt[(size_t)nr * (size_t)np +           /* its path q */
                          (size_t)(cn->rpath - 1) * (size_t)nr + (size_t)me];
            else
                rqpn = rt[(size_t)me * (size_t)np + (size_t)i]; /* its path 0 */
            ret = ibv_qp_to_rts(c, cn, &ph, rqpn);
            if (ret)
                goto out;
        }
    }
    /* Nobody sends before every QP of the job is ready to receive. */
    ret = boot->ops->barrier(boot);
    if (ret) {
        fh_log_error("ibv: barrier after connecting failed (%d)", ret);
        ret = FH_ERR_BOOTSTRAP;
        goto out;
    }
    c->connected = 1;
    fh_log_verbose(2, "ibv: connected %d ranks x %d paths (%zu QPs on path 0)",
                   nr, np, c->paths[0]->nconns);
    ret = FH_OK;
out:
    free(mine);
    free(all);
    return ret;
}

/* FH_CONDUIT=auto: usable when a device with an active port (matching
 * FH_IBV_DEVICE/FH_IBV_PORT) exists.  Opens and closes it. */
static int ibv_probe(const fh_conduit_config_t *cfg, char *why, size_t whylen)
{
    struct fh_conduit *c = calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(why, whylen, "out of memory");
        return 0;
    }
    int ok = ibv_read_env(&c->env, cfg) == FH_OK && ibv_pick_device(c) == FH_OK;
    if (ok)
        ibv_close_device(c->ctx);
    else
        snprintf(why, whylen, "%s", fh_last_error());
    free(c);
    return ok;
}

const fh_conduit_ops_t fh_conduit_ibv = {
    .name = "ibv",
    .settings = &fh_ibv_settings,
    .probe = ibv_probe,
    .open = ibv_open,
    .close = ibv_close,
    .path_create = ibv_path_create,
    .path_destroy = ibv_path_destroy,
    .connect = ibv_connect,
    .mr_reg = ibv_mr_reg,
    .mr_dereg = ibv_mr_dereg,
    .put = ibv_put,
    .get = ibv_get,
    .am_send = ibv_am_send,
    .poll = ibv_poll,
};
