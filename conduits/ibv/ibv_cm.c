/*
 * ibv_cm.c -- verbs conduit: connections made on first use.
 *
 * A path's slot towards a peer endpoint (ibv_internal.h, "Connections")
 * gets its RC QP when the first put, get or am_send towards it needs one,
 * never at init: a job whose ranks talk to few peers holds few QPs.
 *
 * Exchange.  connect() allgathers, through the bootstrap (authenticated:
 * docs/security.md), every rank's address record and the QP numbers of
 * one UD QP per path plus a random Q_Key per rank.  To connect slot k of
 * path p towards (r, q), p creates the RC QP (INIT) and sends REQ {its
 * rank and path, q, the QP's number} from its UD QP to (r, q)'s UD QP;
 * the responder creates its QP, moves it to RTS towards the number in the
 * request and answers REP {its QP's number, the requester's echoed}; the
 * requester moves its QP to RTS on the reply.  Requests are sent again
 * with a doubling back-off (IBV_CM_RETRY_MIN..MAX: UD may lose them)
 * until the reply comes or cm_timeout passes: the operation then fails
 * with FH_ERR_PEER_DEAD and a line naming the peer.  Replies are answered
 * only by polls (a peer answers while it polls its service path, as for
 * any request); the requester's op returns FH_ERR_AGAIN meanwhile.
 *
 * Identity.  A message counts only when the HCA says it comes from the
 * UD QP that the allgather gave for the (rank, path) it names: the source
 * QP number of the completion (set by the sender's HCA, not by its bytes)
 * and the source GID (GRH) or LID must match, its length is exact, and
 * every field is checked (ranks, paths, QP numbers of 24 bits, the
 * topology below; the checks are pure functions of ibv_cm_decode.h, unit
 * tested and fuzzed); anything else goes to on_drop.  Once connected, the RC
 * QP is the identity: it accepts packets of its one peer QP only.
 *
 * Who asks.  Traffic runs (r, p) <-> (r', 0) (conduit.h), so every
 * connection joins someone's service path: a thread path asks, a service
 * path answers; a service path asks a thread path never (its replies
 * follow that path's requests, over the QP those made: FH_ERR_INVALID
 * otherwise).  Between two service paths both may ask at once: the
 * request of the lower rank wins.  The higher rank, waiting on its own
 * request, takes the lower one's: it connects the QP it had made (the one
 * its request named) and answers; the lower rank ignores the higher one's
 * request while its own is pending.  So one QP pair per pair of paths,
 * and no wait on each other.  Path 0 to itself connects locally.
 *
 * Threads.  A path's slots, UD QP and buffers are touched only by calls on
 * that path (serialized by the runtime); address handles are shared, made
 * under c->cm_lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ibv_internal.h"
#include "firehose/util/log.h"
#include "conduits/util/cu.h"

#define IBV_CM_BUF        128           /* per UD buffer (GRH + message) */
#define IBV_CM_RX_SVC     64            /* UD receives on a service path */
#define IBV_CM_RX_THR     8             /* on a thread path (replies only) */
#define IBV_CM_RETRY_MIN  0.05          /* s before a request is sent again */
#define IBV_CM_RETRY_MAX  1.0
#define IBV_TIMEOUT      16
#define IBV_RETRY_CNT    6              /* 7 = infinite on rxe */
#define IBV_RNR_RETRY    7              /* infinite */
#define IBV_MIN_RNR      12             /* 0.64 ms */

static double ibv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ UD QP */

int ibv_cm_path_init(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    p->cm_nrx = p->index == 0 ? IBV_CM_RX_SVC : IBV_CM_RX_THR;
    const size_t n = (size_t)p->cm_nrx + IBV_CM_SQ;
    p->cm_rx = calloc(p->cm_nrx, sizeof *p->cm_rx);
    p->cm_mem = cu_alloc_pages(n * IBV_CM_BUF);
    if (!p->cm_rx || !p->cm_mem)
        return FH_ERR_NO_MEMORY;
    p->cm_mr = ibv_reg_mr(c->pd, p->cm_mem, n * IBV_CM_BUF,
                          IBV_ACCESS_LOCAL_WRITE);
    if (!p->cm_mr) {
        fh_log_error("ibv: path %d: registering connection buffers: %s",
                     p->index, strerror(errno));
        return FH_ERR_NO_MEMORY;
    }
    struct ibv_qp_init_attr a = {
        .qp_context = NULL, .send_cq = p->cq, .recv_cq = p->cq,
        .cap = {.max_send_wr = IBV_CM_SQ, .max_recv_wr = p->cm_nrx,
                .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_UD, .sq_sig_all = 1};
    p->udqp = ibv_create_qp(c->pd, &a);
    if (!p->udqp) {
        fh_log_error("ibv: path %d: cannot create the UD QP of the "
                     "connection exchange: %s", p->index, strerror(errno));
        return FH_ERR_TRANSPORT;
    }
    struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT,
                             .pkey_index = c->env.pkey_index,
                             .port_num = c->port, .qkey = c->qkey};
    int e = ibv_modify_qp(p->udqp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                          IBV_QP_PORT | IBV_QP_QKEY);
    if (!e) {
        qa = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
        e = ibv_modify_qp(p->udqp, &qa, IBV_QP_STATE);
    }
    if (!e) {
        qa = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 0};
        e = ibv_modify_qp(p->udqp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
    if (e) {
        fh_log_error("ibv: path %d: UD QP to RTS: %s", p->index, strerror(e));
        return FH_ERR_TRANSPORT;
    }
    p->cm_sop.kind = IBV_OP_CMSEND;
    for (unsigned i = 0; i < p->cm_nrx; i++) {
        struct ibv_op *r = &p->cm_rx[i];
        r->kind = IBV_OP_CMRECV;
        r->buf = p->cm_mem + (size_t)i * IBV_CM_BUF;
        r->lkey = p->cm_mr->lkey;
        struct ibv_sge sg = {(uintptr_t)r->buf, IBV_CM_BUF, r->lkey};
        struct ibv_recv_wr wr = {.wr_id = (uintptr_t)r, .sg_list = &sg,
                                 .num_sge = 1}, *bad = NULL;
        if ((e = ibv_post_recv(p->udqp, &wr, &bad))) {
            fh_log_error("ibv: path %d: UD receive: %s", p->index,
                         strerror(e));
            return FH_ERR_TRANSPORT;
        }
    }
    return FH_OK;
}

void ibv_cm_path_fini(struct fh_cpath *p)
{
    if (p->udqp)
        ibv_destroy_qp(p->udqp);
    if (p->cm_mr)
        ibv_dereg_mr(p->cm_mr);
    free(p->cm_mem);
    free(p->cm_rx);
}

/* The address vector towards rank r (RC and UD alike). */
static void ibv_peer_av(struct fh_conduit *c, int r, struct ibv_ah_attr *ah)
{
    const struct ibv_wire_hdr *h = &c->peer_hdr[r];
    struct ibv_peer_addr pa = {
        .lid = h->lid,
        .sgid_index = c->gid_index >= 0 ? c->gid_index
                      : ibv_needs_grh(c->gid.raw, h->gid) ? 0 : -1,
        .port = c->port, .sl = c->env.sl, .tclass = c->env.tclass,
    };
    memcpy(pa.gid, h->gid, 16);
    ibv_fill_av(ah, &pa);
}

/* Sends one message to (r, q)'s UD QP.  Best effort: with the send queue
 * full or no address handle the peer's resend (or ours) covers it. */
static void ibv_cm_send(struct fh_cpath *p, int r, int q, uint32_t type,
                        uint32_t qpn, uint32_t echo)
{
    struct fh_conduit *c = p->c;
    if (p->cm_sq_used >= IBV_CM_SQ)
        return;
    pthread_mutex_lock(&c->cm_lock);
    if (!c->ah[r]) {
        struct ibv_ah_attr aa;
        ibv_peer_av(c, r, &aa);
        c->ah[r] = ibv_create_ah(c->pd, &aa);
        if (!c->ah[r])
            fh_log_error("ibv: %s: cannot make an address handle: %s",
                         FH_RANK_NAME(r), strerror(errno));
    }
    struct ibv_ah *ah = c->ah[r];
    pthread_mutex_unlock(&c->cm_lock);
    if (!ah)
        return;
    struct ibv_cm_msg m = {IBV_CM_MAGIC, type, (uint32_t)c->cfg.rank,
                           (uint32_t)p->index, (uint32_t)q, qpn, echo, 0};
    char *buf = p->cm_mem + (size_t)(p->cm_nrx + p->cm_next) * IBV_CM_BUF;
    p->cm_next = (p->cm_next + 1) % IBV_CM_SQ;
    memcpy(buf, &m, sizeof m);
    struct ibv_sge sg = {(uintptr_t)buf, sizeof m, p->cm_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = (uintptr_t)&p->cm_sop, .sg_list = &sg,
                             .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED}, *bad = NULL;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = c->peer_ud[(size_t)r * (size_t)c->cfg.npaths +
                                     (size_t)q];
    wr.wr.ud.remote_qkey = c->peer_hdr[r].qkey;
    int e = ibv_post_send(p->udqp, &wr, &bad);
    if (e)
        fh_log_verbose(1, "ibv: path %d: connection message to %s: %s",
                       p->index, FH_RANK_NAME(r), strerror(e));
    else
        p->cm_sq_used++;
}

/* ------------------------------------------------------------ RC QP */

static int ibv_qp_init(struct fh_conduit *c, struct ibv_conn *k)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                            .pkey_index = c->env.pkey_index,
                            .port_num = c->port,
                            .qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
                                               IBV_ACCESS_REMOTE_WRITE |
                                               IBV_ACCESS_REMOTE_READ};
    int e = ibv_modify_qp(k->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                          IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (e) {
        fh_log_error("ibv: %s: QP to INIT: %s", FH_RANK_NAME(k->rank), strerror(e));
        return FH_ERR_TRANSPORT;
    }
    return FH_OK;
}

/* INIT -> RTR -> RTS towards the peer's QP rqpn. */
static int ibv_qp_connect(struct fh_conduit *c, struct ibv_conn *k,
                          uint32_t rqpn)
{
    const struct ibv_wire_hdr *peer = &c->peer_hdr[k->rank];
    uint8_t resp, init;
    ibv_rd_depths(c->max_rd_atom, c->max_init_rd_atom, peer->rd_atom,
                  peer->init_rd_atom, &resp, &init);
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = peer->mtu < c->pattr.active_mtu
                     ? (enum ibv_mtu)peer->mtu : c->pattr.active_mtu;
    a.dest_qp_num = rqpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = resp;
    a.min_rnr_timer = IBV_MIN_RNR;
    ibv_peer_av(c, k->rank, &a.ah_attr);
    int e = ibv_modify_qp(k->qp, &a, IBV_QP_STATE | IBV_QP_AV |
                          IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (e) {
        fh_log_error("ibv: %s: QP to RTR (remote QP %u, path %d): %s",
                     FH_RANK_NAME(k->rank), rqpn, k->rpath, strerror(e));
        return FH_ERR_TRANSPORT;
    }
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = IBV_TIMEOUT;
    a.retry_cnt = IBV_RETRY_CNT;
    a.rnr_retry = IBV_RNR_RETRY;
    a.sq_psn = 0;
    a.max_rd_atomic = init;
    e = ibv_modify_qp(k->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC);
    if (e) {
        fh_log_error("ibv: %s: QP to RTS: %s", FH_RANK_NAME(k->rank), strerror(e));
        return FH_ERR_TRANSPORT;
    }
    k->rqpn = rqpn;
    k->state = IBV_CONN_UP;
    atomic_fetch_add(&c->peer_qps[k->rank], 1u);
    if (!atomic_flag_test_and_set(&c->av_said)) {  /* the first one, once */
        struct ibv_ah_attr av;
        ibv_peer_av(c, k->rank, &av);
        fh_log_verbose(1, "ibv: to %s: dlid %u, %s (sgid index %d, "
                       "tclass %u), sl %u, pkey index %u, reads/atomics "
                       "%u out / %u in", FH_RANK_NAME(k->rank), peer->lid,
                       av.is_global ? "GRH" : "no GRH",
                       av.is_global ? av.grh.sgid_index : -1,
                       c->env.tclass, c->env.sl, c->env.pkey_index, init,
                       resp);
    }
    fh_log_verbose(2, "ibv: path %d connected to %s path %d (QP %u <-> "
                   "%u, reads/atomics %u out / %u in)", k->owner->index,
                   FH_RANK_NAME(k->rank), k->rpath, k->qp->qp_num, rqpn, init, resp);
    return FH_OK;
}

/* Slot k gets its QP in INIT, indexed, and receive room for its peer. */
static int ibv_cm_make(struct fh_cpath *p, struct ibv_conn *k)
{
    int ret = ibv_conn_create(p, k);
    if (ret == FH_OK)
        ret = ibv_qp_init(p->c, k);
    if (ret != FH_OK) {
        if (k->qp)
            ibv_destroy_qp(k->qp);
        k->qp = NULL;
        k->qpx = NULL;
        return ret;
    }
    ibv_qpn_insert(p, k);
    p->nconnected++;
    return ibv_rx_grow(p);
}

static int ibv_cm_fail(struct ibv_conn *k, int err)
{
    k->state = IBV_CONN_FAILED;
    k->status = err;
    return err;
}

int ibv_cm_advance(struct fh_cpath *p, struct ibv_conn *k)
{
    struct fh_conduit *c = p->c;
    const int me = c->cfg.rank;
    int ret;
    switch (k->state) {
    case IBV_CONN_UP:
        return FH_OK;
    case IBV_CONN_FAILED:
        return fh_set_error(k->status, "ibv: %s: connection from path "
                            "%d to its path %d failed", FH_RANK_NAME(k->rank), p->index,
                            k->rpath);
    case IBV_CONN_NONE:
        if (p->index == 0 && k->rpath != 0)
            return fh_set_error(FH_ERR_INVALID, "ibv: service path to path %d "
                                "of %s, which never sent to it (a service "
                                "path answers thread paths only)", k->rpath,
                                FH_RANK_NAME(k->rank));
        if ((ret = ibv_cm_make(p, k)) != FH_OK)
            return ibv_cm_fail(k, ret);
        if (k->rank == me && p->index == 0) {      /* path 0 to itself */
            if ((ret = ibv_qp_connect(c, k, k->qp->qp_num)) != FH_OK)
                return ibv_cm_fail(k, ret);
            return FH_OK;
        }
        k->state = IBV_CONN_WAIT;
        k->backoff = IBV_CM_RETRY_MIN;
        k->deadline = ibv_now() + c->cm_timeout;
        k->next_try = 0;
        /* fall through */
    case IBV_CONN_WAIT: {
        double now = ibv_now();
        if (now >= k->deadline) {
            fh_log_error("ibv: %s did not answer the connection request "
                         "from path %d to its path %d within %.0f s: dead, or "
                         "not polling", FH_RANK_NAME(k->rank), p->index, k->rpath,
                         c->cm_timeout);
            return fh_set_error(ibv_cm_fail(k, FH_ERR_PEER_DEAD),
                                "ibv: %s did not answer a connection "
                                "request within %.0f s", FH_RANK_NAME(k->rank),
                                c->cm_timeout);
        }
        if (now >= k->next_try) {
            ibv_cm_send(p, k->rank, k->rpath, IBV_CM_REQ, k->qp->qp_num, 0);
            k->next_try = now + k->backoff;
            k->backoff = k->backoff * 2 > IBV_CM_RETRY_MAX
                             ? IBV_CM_RETRY_MAX : k->backoff * 2;
        }
        return FH_ERR_AGAIN;
    }
    default:
        return fh_set_error(FH_ERR_STATE, "ibv: bad connection state %d",
                            k->state);
    }
}

/* ------------------------------------------------------------ receive */

static void ibv_cm_on_req(struct fh_cpath *p, struct ibv_conn *k,
                          const struct ibv_cm_msg *m)
{
    struct fh_conduit *c = p->c;
    const int r = (int)m->src_rank, q = (int)m->src_path;
    switch (k->state) {
    case IBV_CONN_NONE:
        if (ibv_cm_make(p, k) != FH_OK) {
            ibv_cm_fail(k, FH_ERR_TRANSPORT);
            return;
        }
        break;
    case IBV_CONN_WAIT:       /* both service paths asked: lower rank wins */
        if (r > c->cfg.rank)
            return;
        break;
    case IBV_CONN_UP:         /* our reply was lost: again */
        if (m->qpn == k->rqpn)
            ibv_cm_send(p, r, q, IBV_CM_REP, k->qp->qp_num, m->qpn);
        else
            c->up.on_drop(p->upcall_arg, r, "connection request for a "
                          "connected pair of paths");
        return;
    default:
        return;
    }
    if (ibv_qp_connect(c, k, m->qpn) != FH_OK) {
        ibv_cm_fail(k, FH_ERR_TRANSPORT);
        return;
    }
    ibv_cm_send(p, r, q, IBV_CM_REP, k->qp->qp_num, m->qpn);
}

static void ibv_cm_on_rep(struct fh_cpath *p, struct ibv_conn *k,
                          const struct ibv_cm_msg *m)
{
    if (k->state == IBV_CONN_WAIT && m->echo == k->qp->qp_num) {
        if (ibv_qp_connect(p->c, k, m->qpn) != FH_OK)
            ibv_cm_fail(k, FH_ERR_TRANSPORT);
        return;
    }
    if (k->state == IBV_CONN_UP && m->qpn == k->rqpn)
        return;               /* a duplicate (we had asked twice) */
    p->c->up.on_drop(p->upcall_arg, k->rank, "connection reply nobody asked "
                     "for");
}

/* Checks a UD receive (ibv_cm_decode.h) and acts on it. */
static void ibv_cm_recv(struct fh_cpath *p, const struct ibv_ev *v,
                        const char *buf)
{
    struct fh_conduit *c = p->c;
    const uint32_t np = (uint32_t)c->cfg.npaths;
    const struct ibv_cm_table t = {
        .nranks = (uint32_t)c->cfg.nranks, .npaths = np,
        .me = (uint32_t)c->cfg.rank, .path = (uint32_t)p->index,
        .is_eth = c->is_eth, .hdr = c->peer_hdr, .ud = c->peer_ud};
    const struct ibv_cm_src s = {.len = v->len, .src_qp = v->src_qp,
                                 .slid = v->slid, .grh = v->grh};
    struct ibv_cm_msg m;
    const enum ibv_cm_verdict vd = ibv_cm_check(&t, &s, (const uint8_t *)buf,
                                                &m);
    if (vd == IBV_CM_NOT_SENDER) {
        const uint8_t *g = (const uint8_t *)buf;
        fh_log_verbose(2, "ibv: path %d: connection message naming %s "
                       "path %u from QP %u (expected %u), grh %d, bytes "
                       "0/20: %02x %02x, 32..35: %u.%u.%u.%u", p->index,
                       FH_RANK_NAME((int)m.src_rank), m.src_path, v->src_qp,
                       c->peer_ud[(size_t)m.src_rank * np + m.src_path],
                       v->grh, g[0], g[20], g[32], g[33], g[34], g[35]);
    }
    if (vd != IBV_CM_OK) {
        c->up.on_drop(p->upcall_arg, vd == IBV_CM_TOPOLOGY
                      ? (int)m.src_rank : -1, ibv_cm_verdict_str(vd));
        return;
    }
    const int r = (int)m.src_rank;
    struct ibv_conn *k = p->index == 0
        ? &p->conns[(size_t)r * np + m.src_path] : &p->conns[r];
    if (m.type == IBV_CM_REQ)
        ibv_cm_on_req(p, k, &m);
    else
        ibv_cm_on_rep(p, k, &m);
}

void ibv_cm_event(struct fh_cpath *p, const struct ibv_ev *v,
                  struct ibv_op *op)
{
    if (op->kind == IBV_OP_CMSEND) {
        if (p->cm_sq_used)
            p->cm_sq_used--;
        if (v->status != IBV_WC_SUCCESS)
            fh_log_verbose(1, "ibv: path %d: connection message lost: %s",
                           p->index, ibv_wc_status_str(v->status));
        return;
    }
    if (v->status != IBV_WC_SUCCESS)
        return;               /* flushed: the UD QP is gone or broken */
    ibv_cm_recv(p, v, op->buf);
    struct ibv_sge sg = {(uintptr_t)op->buf, IBV_CM_BUF, op->lkey};
    struct ibv_recv_wr wr = {.wr_id = (uintptr_t)op, .sg_list = &sg,
                             .num_sge = 1}, *bad = NULL;
    int e = ibv_post_recv(p->udqp, &wr, &bad);
    if (e)
        fh_log_error("ibv: path %d: UD receive: %s", p->index, strerror(e));
}

void ibv_cm_report(struct fh_conduit *c)
{
    if (c->cfg.verbose < 1 || !c->connected || !c->peer_qps)
        return;
    size_t qps = 0, off = 0;
    char line[1024];
    for (int r = 0; r < c->cfg.nranks; r++) {
        unsigned n = atomic_load(&c->peer_qps[r]);
        qps += n;
        if (n && off < sizeof line - 32)
            off += (size_t)snprintf(line + off, sizeof line - off, " %d:%u",
                                    r, n);
    }
    fh_log_verbose(1, "ibv: connections: %zu RC QPs; per peer rank "
                   "(rank:QPs):%s", qps, off ? line : " none");
}
