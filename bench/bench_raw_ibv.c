/*
 * bench_raw_ibv.c -- `raw` over rdma-core verbs: the latency and bandwidth
 * loops of bench_rma.c written directly on one RC QP, as the transport's
 * own limit when the runtime runs the ibv conduit (FH_CONDUIT=ibv).
 *
 * The firehose runtime only starts the job and exchanges, with
 * fh_allgather, each rank's QP number, PSN, LID, GID, MTU, rkey and buffer
 * address; the measured loops touch nothing but verbs.  Rank 0 and rank 1
 * each open the device, create a PD, a CQ and one RC QP, register one
 * buffer (ibv_reg_mr: [0, MAX) the target area, [MAX, 2 MAX) the local
 * area) and connect the QP to the other's.  Puts are IBV_WR_RDMA_WRITE,
 * gets IBV_WR_RDMA_READ, every WR signaled, IBV_SEND_INLINE for puts up to
 * the inline size the device grants (probed as conduits/ibv does, up to
 * 256 B); completions come from ibv_poll_cq.  The target needs no CPU for
 * RDMA, so rank 1 only watches its stop and phase words (bench_pair.c).
 *
 * Device, port, GID: the choice of conduits/ibv/ibv_conduit.c, mirrored
 * (its functions are private to the conduit): FH_IBV_DEVICE or the first
 * device with an ACTIVE port, FH_IBV_PORT or the first ACTIVE port;
 * on Ethernet (RoCE) FH_IBV_GID_INDEX or the first RoCE v2 GID with an
 * IPv4-mapped address, else the first RoCE v2 one, else the first valid
 * one; on InfiniBand LID addressing unless FH_IBV_GID_INDEX is set.  QP
 * attributes as the conduit's (timeout 16, retry 6, rnr_retry 7, rd_atomic
 * up to 16).
 *
 * CSV: as bench_raw.c (put, get, put_nb_flood, get_nb_flood, the paired
 * rows); no counter variant.  The header's provider is "ibv-<device>", the
 * same as every fhbench CSV of an ibv-conduit run (bench_util.c), so raw
 * and latency rows pair up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "fhbench.h"
#include "firehose/internal.h"
#include "conduits/ibv/ibv_config.h"

#define MAX_SIZE FHB_MAX_SIZE
#define WINDOW 64
#define INLINE_MAX 256

typedef struct rawv {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    char *buf;                      /* [0, MAX) target area, [MAX, 2MAX) local */
    char devname[64];
    uint8_t port;
    struct ibv_device_attr dattr;
    struct ibv_port_attr pattr;
    int gid_index;                  /* -1: LID addressing */
    union ibv_gid gid;
    uint32_t max_inline;
    uint64_t raddr;                 /* the peer's buffer */
    uint32_t rkey;
} rawv_t;

typedef struct rawv_card {          /* what ranks exchange */
    uint64_t addr;
    uint32_t rkey, qpn, psn;
    int32_t gid_index;
    uint16_t lid;
    uint8_t mtu;                    /* enum ibv_mtu */
    uint8_t gid[16];
} rawv_card_t;

static void die(const char *what, int err)
{
    fprintf(stderr, "fhbench raw (verbs): %s: %s\n", what, strerror(err));
    fh_abort(1, "fhbench raw: verbs call failed");
}

/* FH_IBV_DEVICE / FH_IBV_PORT, or the first device with an ACTIVE port. */
static void pick_device(rawv_t *v)
{
    const ibv_settings_t *is = fh_conduit_settings_of(fh_rt, &fh_ibv_settings);
    const char *want = is->device && *is->device ? is->device : NULL;
    int ndev = 0;
    struct ibv_device **list = ibv_get_device_list(&ndev);
    for (int d = 0; list && d < ndev && !v->ctx; d++) {
        const char *name = ibv_get_device_name(list[d]);
        if (want && strcmp(want, name) != 0)
            continue;
        struct ibv_context *ctx = ibv_open_device(list[d]);
        if (!ctx)
            continue;
        if (ibv_query_device(ctx, &v->dattr) != 0) {
            ibv_close_device(ctx);
            continue;
        }
        for (int port = 1; port <= v->dattr.phys_port_cnt && !v->ctx; port++) {
            if (is->port && port != is->port)
                continue;
            if (ibv_query_port(ctx, (uint8_t)port, &v->pattr) == 0 &&
                v->pattr.state == IBV_PORT_ACTIVE) {
                v->ctx = ctx;
                v->port = (uint8_t)port;
                snprintf(v->devname, sizeof v->devname, "%s", name);
            }
        }
        if (!v->ctx)
            ibv_close_device(ctx);
    }
    if (list)
        ibv_free_device_list(list);
    if (!v->ctx) {
        fprintf(stderr, "fhbench raw (verbs): no device %s with an active port\n",
                want ? want : "at all");
        fh_abort(1, "fhbench raw: no verbs device");
    }
}

/* The conduit's GID choice (see the header comment). */
static void pick_gid(rawv_t *v)
{
    long want = ((const ibv_settings_t *)fh_conduit_settings_of(
                     fh_rt, &fh_ibv_settings))->gid_index;
    v->gid_index = -1;
    if (v->pattr.link_layer != IBV_LINK_LAYER_ETHERNET && want < 0)
        return;
    if (want >= 0) {
        if (ibv_query_gid(v->ctx, v->port, (int)want, &v->gid) != 0)
            die("ibv_query_gid (FH_IBV_GID_INDEX)", errno);
        v->gid_index = (int)want;
        return;
    }
    size_t max = (size_t)v->pattr.gid_tbl_len * v->dattr.phys_port_cnt;
    struct ibv_gid_entry *e = calloc(max ? max : 1, sizeof *e);
    if (!e)
        fh_abort(1, "fhbench: out of memory");
    ssize_t n = ibv_query_gid_table(v->ctx, e, max, 0);
    int best = -1, best_rank = 0;
    for (ssize_t i = 0; i < n; i++) {
        if (e[i].port_num != v->port)
            continue;
        static const uint8_t v4pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        int v4 = memcmp(e[i].gid.raw, v4pfx, sizeof v4pfx) == 0;
        int rank = e[i].gid_type == IBV_GID_TYPE_ROCE_V2 ? (v4 ? 3 : 2) : 1;
        if (rank > best_rank || (rank == best_rank && e[i].gid_index < e[best].gid_index)) {
            best = (int)i;
            best_rank = rank;
        }
    }
    if (best < 0)
        fh_abort(1, "fhbench raw (verbs): the port has no valid GID");
    v->gid_index = (int)e[best].gid_index;
    v->gid = e[best].gid;
    free(e);
}

/* An RC QP with the largest inline size the device grants (256 B down to
 * 16 B, else none). */
static void create_qp(rawv_t *v)
{
    for (uint32_t want = INLINE_MAX;; want = want > 16 ? want / 2 : 0) {
        struct ibv_qp_init_attr a = {
            .send_cq = v->cq, .recv_cq = v->cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
            .cap = {.max_send_wr = 2 * WINDOW, .max_recv_wr = 1, .max_send_sge = 1,
                    .max_recv_sge = 1, .max_inline_data = want},
        };
        v->qp = ibv_create_qp(v->pd, &a);
        if (v->qp) {
            v->max_inline = a.cap.max_inline_data < want ? a.cap.max_inline_data : want;
            return;
        }
        if (want == 0)
            die("ibv_create_qp", errno);
    }
}

static void connect_qp(rawv_t *v, const rawv_card_t *me, const rawv_card_t *peer)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = v->port,
                            .qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
                                               IBV_ACCESS_REMOTE_WRITE |
                                               IBV_ACCESS_REMOTE_READ};
    int e = ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                     IBV_QP_ACCESS_FLAGS);
    if (e)
        die("QP to INIT", e);
    int rd = v->dattr.max_qp_rd_atom < 16 ? v->dattr.max_qp_rd_atom : 16;
    int ird = v->dattr.max_qp_init_rd_atom < 16 ? v->dattr.max_qp_init_rd_atom : 16;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = peer->mtu < v->pattr.active_mtu ? (enum ibv_mtu)peer->mtu
                                                  : v->pattr.active_mtu;
    a.dest_qp_num = peer->qpn;
    a.rq_psn = peer->psn;
    a.max_dest_rd_atomic = (uint8_t)(rd > 0 ? rd : 1);
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = v->port;
    if (v->gid_index >= 0) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)v->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    } else {
        a.ah_attr.dlid = peer->lid;
    }
    e = ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                 IBV_QP_MIN_RNR_TIMER);
    if (e)
        die("QP to RTR", e);
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 16;
    a.retry_cnt = 6;
    a.rnr_retry = 7;
    a.sq_psn = me->psn;
    a.max_rd_atomic = (uint8_t)(ird > 0 ? ird : 1);
    e = ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (e)
        die("QP to RTS", e);
}

/* Collective: ranks 0 and 1 open and connect; the others only exchange. */
static void rawv_open(rawv_t *v)
{
    int me = fh_rank(), peer = me == 0 ? 1 : 0;
    rawv_card_t card;
    memset(&card, 0, sizeof card);
    if (me <= 1) {
        pick_device(v);
        pick_gid(v);
        if (!(v->pd = ibv_alloc_pd(v->ctx)))
            die("ibv_alloc_pd", errno);
        if (!(v->cq = ibv_create_cq(v->ctx, 4 * WINDOW, NULL, NULL, 0)))
            die("ibv_create_cq", errno);
        create_qp(v);
        if (posix_memalign((void **)&v->buf, 4096, 2 * MAX_SIZE) != 0)
            fh_abort(1, "fhbench: out of memory");
        memset(v->buf, 0, 2 * MAX_SIZE);
        v->mr = ibv_reg_mr(v->pd, v->buf, 2 * MAX_SIZE, IBV_ACCESS_LOCAL_WRITE |
                           IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
        if (!v->mr)
            die("ibv_reg_mr", errno);
        card.addr = (uint64_t)(uintptr_t)v->buf;
        card.rkey = v->mr->rkey;
        card.qpn = v->qp->qp_num;
        card.psn = ((uint32_t)getpid() * 2654435761u) & 0xffffff;
        card.gid_index = v->gid_index;
        card.lid = v->pattr.lid;
        card.mtu = (uint8_t)v->pattr.active_mtu;
        memcpy(card.gid, v->gid.raw, 16);
    }
    rawv_card_t *all = calloc((size_t)fh_nranks(), sizeof *all);
    if (!all)
        fh_abort(1, "fhbench: out of memory");
    FHB_TRY(fh_allgather(&card, all, sizeof card));
    if (me <= 1) {
        connect_qp(v, &card, &all[peer]);
        v->raddr = all[peer].addr;
        v->rkey = all[peer].rkey;
    }
    free(all);
    FHB_TRY(fh_barrier());          /* both QPs are ready before any RDMA */
}

static void rawv_close(rawv_t *v)
{
    if (v->qp)
        ibv_destroy_qp(v->qp);
    if (v->mr)
        ibv_dereg_mr(v->mr);
    if (v->cq)
        ibv_destroy_cq(v->cq);
    if (v->pd)
        ibv_dealloc_pd(v->pd);
    if (v->ctx)
        ibv_close_device(v->ctx);
    free(v->buf);
}

/* A put/get of n bytes between our local area at loff and the peer's
 * target area at off. */
static void post_at(rawv_t *v, int is_put, size_t off, size_t loff, size_t n)
{
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)(v->buf + loff), .length = (uint32_t)n,
                          .lkey = v->mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1,
                             .opcode = is_put ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ,
                             .send_flags = IBV_SEND_SIGNALED};
    wr.wr.rdma.remote_addr = v->raddr + off;
    wr.wr.rdma.rkey = v->rkey;
    if (is_put && n <= v->max_inline)
        wr.send_flags |= IBV_SEND_INLINE;
    struct ibv_send_wr *bad;
    int e = ibv_post_send(v->qp, &wr, &bad);
    if (e)
        die("ibv_post_send", e);
}

static void post(rawv_t *v, int is_put, size_t n)
{
    post_at(v, is_put, 0, MAX_SIZE, n);
}

/* Reaps exactly `want` completions (never more: they are all ours). */
static void reap(rawv_t *v, long want)
{
    struct ibv_wc wc[16];
    while (want > 0) {
        int n = ibv_poll_cq(v->cq, want < 16 ? (int)want : 16, wc);
        if (n < 0)
            die("ibv_poll_cq", EIO);
        for (int i = 0; i < n; i++)
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr, "fhbench raw (verbs): completion error: %s\n",
                        ibv_wc_status_str(wc[i].status));
                fh_abort(1, "fhbench raw: completion error");
            }
        want -= n;
    }
}

/* fhb_lat_fn */
static void lat(void *ctx, int is_put, size_t n, long it, double *med, double *p99)
{
    rawv_t *v = ctx;
    double *t = malloc(sizeof(double) * (size_t)it);
    if (!t)
        fh_abort(1, "fhbench: out of memory");
    for (long i = 0; i < it / 10 + 2; i++) {
        post(v, is_put, n);
        reap(v, 1);
    }
    for (long i = 0; i < it; i++) {
        double t0 = fhb_now_ns();
        post(v, is_put, n);
        reap(v, 1);
        t[i] = (fhb_now_ns() - t0) / 1e3;
    }
    *med = fhb_quantile(t, (size_t)it, 0.5);
    *p99 = fhb_quantile(t, (size_t)it, 0.99);
    free(t);
}

/* fhb_flood_fn */
static double flood(void *ctx, int is_put, size_t n, long it)
{
    rawv_t *v = ctx;
    double t0 = fhb_now_ns();
    for (long done = 0; done < it;) {
        long w = it - done < WINDOW ? it - done : WINDOW;
        for (long i = 0; i < w; i++)
            post(v, is_put, n);
        reap(v, w);
        done += w;
    }
    return (fhb_now_ns() - t0) / 1e9;
}

static double lat_one(void *ctx, size_t n)
{
    double t0 = fhb_now_ns();
    post(ctx, 1, n);
    reap(ctx, 1);
    return (fhb_now_ns() - t0) / 1e3;
}

/* v into the peer's buffer at off, from the same offset of our local area. */
static void put_word(void *ctx, size_t off, uint64_t val)
{
    rawv_t *v = ctx;
    memcpy(v->buf + MAX_SIZE + off, &val, sizeof val);
    post_at(v, 1, off, MAX_SIZE + off, sizeof val);
    reap(v, 1);
}

int fhb_raw_ibv(const fhb_opts_t *o)
{
    rawv_t v;
    memset(&v, 0, sizeof v);
    rawv_open(&v);
    char title[160] = "";
    if (fh_rank() == 0)
        snprintf(title, sizeof title, "raw verbs: device %s port %u, GID index %d, "
                 "MTU %d, max_inline %u", v.devname, v.port, v.gid_index,
                 128 << v.pattr.active_mtu, v.max_inline);
    fhb_raw_ops_t ops = {.ctx = &v, .buf = v.buf, .title = title, .lat = lat, .flood = flood,
                         .lat_one = lat_one, .put_word = put_word};
    fhb_raw_body(o, &ops);
    rawv_close(&v);
    return 0;
}
