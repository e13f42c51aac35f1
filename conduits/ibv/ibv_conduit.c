/*
 * ibv_conduit.c -- verbs conduit: open / close / connect / limits.
 *
 * Device, port, GID, pkey, posting API: ibv_device.c.  FH_CONDUIT=auto
 *   takes ibv only if open would succeed (ibv_probe runs it and closes).
 *
 * Connect
 *   One allgather carries, per rank, a header (LID, GID, MTU, read/atomic
 *   depths) and the QP
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
#include <stdatomic.h>
#include <sys/random.h>
#include <sys/resource.h>

#include "ibv_config.h"
#include "ibv_internal.h"
#include "firehose/boot/bootstrap.h"
#include "firehose/util/log.h"
#include "conduits/util/cu.h"

#define IBV_MAX_MSG_CAP  ((size_t)1 << 30)   /* 1 GiB */
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
    if (e->device && strchr(e->device, ',')) {     /* one per rank */
        if (ibv_device_for_rank(e->device, cfg->rank, e->device_buf,
                                sizeof e->device_buf) < 0)
            return fh_set_error(FH_ERR_CONFIG, "FH_IBV_DEVICE=%s: %s's "
                                "entry is empty or too long", e->device,
                                FH_RANK_NAME(cfg->rank));
        e->device = e->device_buf;
    }
    e->port = (int)s->port;
    e->gid_index = (int)s->gid_index;
    switch (s->td) {
    case 0: e->td = IBV_TD_OFF; break;
    case 1: e->td = IBV_TD_SHARED; break;
    default: e->td = IBV_TD_INDEPENDENT; break;
    }
    e->post = s->post == 1 ? IBV_POST_EX
              : s->post == 2 ? IBV_POST_CLASSIC : IBV_POST_AUTO;
    e->poll = s->poll == 1 ? IBV_POLL_EX
              : s->poll == 2 ? IBV_POLL_CLASSIC : IBV_POLL_AUTO;
    e->sl = (uint8_t)s->sl;
    e->tclass = (uint8_t)s->tclass;
    e->pkey_index = (uint16_t)s->pkey_index;
    e->connect_timeout = (double)s->connect_timeout;
    e->fork = s->fork == 1 ? IBV_FORKMODE_ON
              : s->fork == 2 ? IBV_FORKMODE_OFF : IBV_FORKMODE_AUTO;
    return FH_OK;
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
    pthread_mutex_init(&c->cm_lock, NULL);
    atomic_flag_clear(&c->av_said);
    c->paths = calloc((size_t)cfg->npaths, sizeof *c->paths);
    if (!c->paths) {
        free(c);
        return FH_ERR_NO_MEMORY;
    }
    if ((ret = ibv_read_env(&c->env, cfg)) != FH_OK)
        goto fail;
    if ((ret = ibv_fork_setup(&c->env)) != FH_OK)
        goto fail;
    if ((ret = ibv_pick_device(c)) != FH_OK)
        goto fail;
    if ((ret = ibv_pick_gid(c)) != FH_OK)
        goto fail;
    if ((ret = ibv_check_pkey(c)) != FH_OK)
        goto fail;
    c->pd = ibv_alloc_pd(c->ctx);
    if (!c->pd) {
        ret = fh_set_error(FH_ERR_TRANSPORT, "ibv: ibv_alloc_pd(%s): %s",
                           c->devname, strerror(errno));
        goto fail;
    }
    if ((ret = ibv_probe_qp(c)) != FH_OK)
        goto fail;
    if ((ret = ibv_async_init(c)) != FH_OK)
        goto fail;
    atomic_flag_clear(&c->async_busy);
    atomic_init(&c->dev_err, FH_OK);
    c->cm_timeout = c->env.connect_timeout;
    /* Our UD QPs' Q_Key: random, known to the job only (the allgather);
     * the high bit is reserved (privileged Q_Keys). */
    if (getrandom(&c->qkey, sizeof c->qkey, 0) != (ssize_t)sizeof c->qkey) {
        ret = fh_set_error(FH_ERR_TRANSPORT, "ibv: getrandom: %s",
                           strerror(errno));
        goto fail;
    }
    c->qkey &= 0x7fffffffu;
    c->max_rd_atom = (uint8_t)(c->dattr.max_qp_rd_atom > 16
                                   ? 16 : c->dattr.max_qp_rd_atom);
    c->max_init_rd_atom = (uint8_t)(c->dattr.max_qp_init_rd_atom > 16
                                        ? 16 : c->dattr.max_qp_init_rd_atom);

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
             "ibv %s port %u (%s, %s posting)", c->devname, c->port,
             c->is_eth ? "RoCE" : "InfiniBand",
             c->post_mode == IBV_POST_EX ? "ex" : "classic");
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
    ibv_cm_report(c);
    if (c->paths) {
        for (int i = c->cfg.npaths - 1; i >= 0; i--)
            if (c->paths[i])
                ibv_path_destroy(c->paths[i]);
    }
    /* What the CQs grew to, against sizing them for every peer (summed by
     * ibv_path_destroy; the runtime destroys its paths before close). */
    if (c->connected)
        fh_log_verbose(1, "ibv: CQs: %ld entries on %d paths for %zu RC QPs "
                       "(sized for every peer: %ld)", c->cq_sum.cqe,
                       c->cq_sum.paths, c->cq_sum.qps, c->cq_sum.full);
    if (c->ah) {
        for (int r = 0; r < c->cfg.nranks; r++)
            if (c->ah[r])
                ibv_destroy_ah(c->ah[r]);
    }
    free(c->ah);
    free(c->peer_hdr);
    free(c->peer_ud);
    free(c->peer_qps);
    pthread_mutex_destroy(&c->cm_lock);
    if (c->pd)
        ibv_dealloc_pd(c->pd);
    if (c->ctx)
        ibv_close_device(c->ctx);
    free(c->paths);
    free(c);
}

/* Connection exchange: per rank a record (struct ibv_wire_hdr) and the
 * UD QP number of each of its paths; the RC QPs come on first use
 * (ibv_cm.c). */
static int ibv_connect(struct fh_conduit *c, struct fh_boot *boot)
{
    const int np = c->cfg.npaths, nr = c->cfg.nranks;
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

    const size_t blob = sizeof(struct ibv_wire_hdr) +
                        (size_t)np * sizeof(uint32_t);
    char *mine = calloc(1, blob);
    char *all = calloc((size_t)nr, blob);
    c->peer_hdr = calloc((size_t)nr, sizeof *c->peer_hdr);
    c->peer_ud = calloc((size_t)nr * (size_t)np, sizeof *c->peer_ud);
    c->ah = calloc((size_t)nr, sizeof *c->ah);
    c->peer_qps = calloc((size_t)nr, sizeof *c->peer_qps);
    if (!mine || !all || !c->peer_hdr || !c->peer_ud || !c->ah ||
        !c->peer_qps) {
        ret = FH_ERR_NO_MEMORY;
        goto out;
    }
    struct ibv_wire_hdr h = {
        .magic = IBV_MAGIC,
        .npaths = (uint32_t)np,
        .lid = c->pattr.lid,
        .mtu = (uint8_t)c->pattr.active_mtu,
        .is_eth = (uint8_t)c->is_eth,
        .gid_index = c->gid_index,
        .rd_atom = c->max_rd_atom,
        .init_rd_atom = c->max_init_rd_atom,
        .qkey = c->qkey,
    };
    memcpy(h.gid, c->gid.raw, 16);
    memcpy(mine, &h, sizeof h);
    for (int i = 0; i < np; i++) {
        uint32_t qpn = c->paths[i]->udqp->qp_num;
        memcpy(mine + sizeof h + (size_t)i * sizeof qpn, &qpn, sizeof qpn);
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
        if (ph.magic != IBV_MAGIC || ph.npaths != (uint32_t)np ||
            ph.mtu < IBV_MTU_256 || ph.mtu > IBV_MTU_4096 ||
            (ph.qkey & 0x80000000u)) {
            ret = fh_set_error(FH_ERR_BOOTSTRAP, "ibv: %s sent a bad "
                               "connection record", FH_RANK_NAME(r));
            goto out;
        }
        if (ph.is_eth != c->is_eth || (ph.gid_index >= 0) !=
                                          (c->gid_index >= 0)) {
            ret = fh_set_error(FH_ERR_CONFIG, "ibv: %s uses %s%s, %s (this one) "
                               "%s%s: set FH_IBV_DEVICE/FH_IBV_PORT/"
                               "FH_IBV_GID_INDEX consistently", FH_RANK_NAME(r),
                               FH_RANK_NAME(c->cfg.rank),
                               ph.is_eth ? "RoCE" : "InfiniBand",
                               ph.gid_index >= 0 ? " with GIDs" : " with LIDs",
                               c->is_eth ? "RoCE" : "InfiniBand",
                               c->gid_index >= 0 ? " with GIDs" : " with LIDs");
            goto out;
        }
        c->peer_hdr[r] = ph;
        memcpy(&c->peer_ud[(size_t)r * (size_t)np], all + (size_t)r * blob +
               sizeof ph, (size_t)np * sizeof(uint32_t));
    }
    /* Nobody asks for a connection before every UD QP is up (they are
     * since path_create): the barrier keeps the first requests from
     * meeting a rank still in connect, whose record is not read yet. */
    ret = boot->ops->barrier(boot);
    if (ret) {
        fh_log_error("ibv: barrier after the exchange failed (%d)", ret);
        ret = FH_ERR_BOOTSTRAP;
        goto out;
    }
    c->connected = 1;
    fh_log_verbose(2, "ibv: %d ranks x %d paths: connections made on first "
                   "use", nr, np);
    ret = FH_OK;
out:
    free(mine);
    free(all);
    return ret;
}

/* FH_CONDUIT=auto: usable when open succeeds (device, port, GID, pkey,
 * and a PD, CQ, SRQ and RC QP in INIT with the posting API it will use:
 * ibv_device.c ibv_probe_qp).  Opens and closes it. */
static void ibv_probe_am(void *a, int r, int q, const void *b, size_t n)
{
    (void)a; (void)r; (void)q; (void)b; (void)n;
}
static void ibv_probe_drop(void *a, int r, const char *why)
{
    (void)a; (void)r; (void)why;
}
static void ibv_probe_complete(void *a, void *ctx, int st)
{
    (void)a; (void)ctx; (void)st;
}

static int ibv_probe(const fh_conduit_config_t *cfg, char *why, size_t whylen)
{
    static const fh_conduit_upcalls_t none = {
        ibv_probe_am, ibv_probe_drop, ibv_probe_complete, NULL, NULL};
    struct fh_conduit *c = NULL;
    fh_conduit_limits_t lim;
    memset(&lim, 0, sizeof lim);
    fh_conduit_config_t pcfg = *cfg;
    pcfg.verbose = 0;             /* open says it all again if chosen */
    if (ibv_open(&pcfg, &none, &c, &lim) != FH_OK) {
        snprintf(why, whylen, "%s", fh_last_error());
        return 0;
    }
    snprintf(why, whylen, "%s", lim.description);
    ibv_close(c);
    return 1;
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
    .wait_fds = ibv_wait_fds,
};
