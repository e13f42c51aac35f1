/*
 * ofi_cm.c -- libfabric conduit, message-endpoint mode (FH_OFI_ENDPOINT=msg,
 * the default for providers that offer FI_EP_MSG, tcp among them): the
 * design of its connections, their objects and the listener.  The
 * authenticated handshake of ofi_auth.h and the connection events are in
 * ofi_cm_handshake.c, dialling and start-up in ofi_cm_connect.c, the
 * reconnection of a lost pair in ofi_cm_redial.c.
 *
 * Why not FI_EP_RDM over tcp;ofi_rxm: rxm names the sender of a message by
 * the listening port the *connecting* peer announces, and a second request
 * for a connected peer replaces the connection, so a stranger on the host
 * could become a member (docs/security.md).  Here the conduit owns its
 * connections: a peer is who proved, with the secret only the two ranks
 * hold, that it is; the sender of every message is the connection it
 * arrived on (ofi_op.conn), never a claim in the bytes.
 *
 * Topology (conduit.h: traffic (r,p) -> (r',0) and back):
 *   - thread path (r, p >= 1) connects to the service path of every rank,
 *     r itself included;
 *   - service path (r, 0) connects to the service path of every rank r' >= r
 *     (r' == r: a loop, for the single-rank case of the self-test) and
 *     accepts from r' <= r.
 * Each rank has one passive endpoint (c->pep), bound to the service path.
 * Connections are made eagerly in connect(): every rank initiates its
 * connections, accepts the ones it expects, checks every handshake, and
 * when all of its own are up meets the others in a bootstrap barrier; no
 * rank sends a message before that barrier, so the only messages seen
 * during set-up are proofs.  A listener holds at most OFI_CM_PENDING_MAX
 * unproven connections (strangers cannot pin its memory) and refuses
 * requests beyond them; the job's own ranks reach that many at once when
 * paths x ranks is large (4 ranks x 17 paths: 68 requests per listener),
 * so a connector whose request is refused during start-up asks again
 * after a backoff (OFI_CM_RETRY_MIN doubling up to OFI_CM_RETRY_MAX, with
 * jitter) until the set-up deadline: the cap holds, and the job still
 * starts, a little later.  Memory: each connection posts rx_per_src
 * receive buffers of one AM packet (the runtime's credits bound what one
 * source may have in flight; tcp holds back anything beyond what is
 * posted).
 *
 * After start-up the listener stays open only to refuse: path 0's poll
 * reads the event queue at most every OFI_CM_EQ_PERIOD, refuses and counts
 * every connection request (on_drop, rank -1), and marks connections a peer
 * shut down (later sends to it fail with FH_ERR_PEER_DEAD).  A request that
 * fails any check is refused and counted; it never touches an established
 * connection.  An accepted connection that does not prove itself within
 * OFI_CM_PROOF_TIMEOUT is closed.  A dead connection keeps its operation
 * records (not its buffers) until its path is destroyed, because the
 * provider may still report their cancellation.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <endian.h>

#include "ofi_internal.h"
#include "firehose/boot/bootstrap.h"
#include "firehose/util/log.h"
#include "conduits/util/cu.h"

double ofi_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- objects */

/* Receive buffers of a connection: n of p->rstride bytes (registered when
 * the provider wants local registrations). */
int ofi_cm_conn_alloc_bufs(struct ofi_conn *k, size_t n)
{
    struct fh_cpath *p = k->p;
    k->rbufs = calloc(n, sizeof *k->rbufs);
    k->rmem = cu_alloc_pages(n * p->rstride);
    if (k->rbufs == NULL || k->rmem == NULL)
        return FH_ERR_NO_MEMORY;
    k->nrbufs = n;
    if (p->c->mr_local) {
        int rc = ofi_mr_reg_path(p, k->rmem, n * p->rstride, FI_RECV, &k->rmr);
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < n; i++) {
        struct ofi_op *rb = &k->rbufs[i];
        rb->kind = OFI_OP_RECV;
        rb->conn = k;
        rb->buf = k->rmem + i * p->rstride;
        rb->buf_len = p->rstride;
    }
    return FH_OK;
}

static int conn_post_all(struct ofi_conn *k)
{
    for (size_t i = 0; i < k->nrbufs; i++) {
        int rc = ofi_post_rbuf(k->p, &k->rbufs[i]);
        if (rc)
            return rc;
    }
    return FH_OK;
}

/* k's endpoint (info: the connection request's, or the conduit's for a
 * connector), bound to the conduit's EQ and k's path's CQ. */
static int conn_open_ep(struct ofi_conn *k, struct fi_info *info)
{
    struct fh_conduit *c = k->p->c;
    int ret = fi_endpoint(c->domain, info, &k->ep, k);
    if (!ret)
        ret = fi_ep_bind(k->ep, &c->eq->fid, 0);
    if (!ret)
        ret = fi_ep_bind(k->ep, &k->p->cq->fid, FI_TRANSMIT | FI_RECV);
    if (!ret)
        ret = fi_enable(k->ep);
    if (ret) {
        fh_log_error("ofi: endpoint for %s path %u: %s",
                     FH_RANK_NAME((int)(k->src / (uint32_t)c->cfg.npaths)),
                     k->src % (uint32_t)c->cfg.npaths,
                     fi_strerror(-ret));
        if (k->ep != NULL)
            fi_close(&k->ep->fid);
        k->ep = NULL;
        return FH_ERR_TRANSPORT;
    }
    return FH_OK;
}

int ofi_cm_conn_open_ep(struct ofi_conn *k, struct fi_info *info)
{
    return conn_open_ep(k, info);
}

int ofi_cm_conn_bufs(struct ofi_conn *k, size_t n)
{
    int rc = ofi_cm_conn_alloc_bufs(k, n);
    return rc ? rc : conn_post_all(k);
}

/* A new connection on path p, its endpoint opened (see conn_open_ep). */
static struct ofi_conn *conn_new(struct fh_cpath *p, struct fi_info *info,
                                 uint32_t src, int initiator)
{
    struct fh_conduit *c = p->c;
    struct ofi_conn *k = calloc(1, sizeof *k);
    if (k == NULL)
        return NULL;
    k->p = p;
    k->src = src;
    k->initiator = initiator;
    atomic_init(&k->state, OFI_CONN_SETUP);
    /* Pushed by path 0 or, after start-up, by a thread path dialling again
     * (ofi_cm_redial.c) while path 0 walks the list: a lock-free push. */
    k->next = atomic_load_explicit(&c->conns, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&c->conns, &k->next, k, memory_order_release,
                                                  memory_order_relaxed))
        ;
    if (conn_open_ep(k, info) != FH_OK) {
        atomic_store(&k->state, OFI_CONN_DEAD);
        return NULL;
    }
    return k;
}

struct ofi_conn *ofi_cm_conn_new(struct fh_cpath *p, struct fi_info *info, uint32_t src,
                                 int initiator)
{
    return conn_new(p, info, src, initiator);
}

/* Ends a connection that is not (or no longer) wanted: the endpoint is
 * closed, the buffers freed; the operation records stay (see the top). */
void ofi_cm_conn_kill(struct ofi_conn *k, const char *why)
{
    struct fh_conduit *c = k->p->c;
    int was = atomic_exchange(&k->state, OFI_CONN_DEAD);
    if (was == OFI_CONN_DEAD)
        return;
    if (k->pending) {
        k->pending = 0;
        c->npending--;
    }
    if (why != NULL)
        c->up.on_drop(c->paths[0]->upcall_arg, -1, why);
    if (k->ep != NULL) {
        fi_close(&k->ep->fid);
        k->ep = NULL;
    }
    if (k->rmr != NULL) {
        ofi_mr_dereg(c, k->rmr);
        k->rmr = NULL;
    }
    free(k->rmem);
    k->rmem = NULL;
    atomic_fetch_add_explicit(&c->ndead, 1, memory_order_relaxed);
    atomic_store(&k->p->cm_work, 1);    /* its path looks (ofi_cm_redial.c) */
}

void ofi_cm_conn_abort(struct ofi_conn *k)
{
    ofi_cm_conn_kill(k, NULL);
}

void ofi_cm_path_destroy(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    /* No path polls now (the runtime destroys paths at the end): the list
     * is taken whole and what stays pushed back. */
    struct ofi_conn *all = atomic_exchange(&c->conns, NULL), *next;
    for (struct ofi_conn *k = all; k != NULL; k = next) {
        next = k->next;
        if (k->p != p) {
            k->next = atomic_load_explicit(&c->conns, memory_order_relaxed);
            atomic_store_explicit(&c->conns, k, memory_order_relaxed);
            continue;
        }
        if (atomic_load(&k->state) != OFI_CONN_DEAD) {
            if (k->pending)
                c->npending--;
            if (k->ep != NULL)
                fi_close(&k->ep->fid);
            if (k->rmr != NULL)
                ofi_mr_dereg(c, k->rmr);
            free(k->rmem);
        }
        free(k->rbufs);
        free(k->retired);
        free(k);
    }
}

/* ------------------------------------------------------------- listener */

int ofi_cm_open(struct fh_conduit *c)
{
    struct fi_eq_attr ea = {.size = 256, .wait_obj = FI_WAIT_FD};
    if (c->reset_waits) {       /* path 0's wait set (ofi_conduit.c) */
        ea.wait_obj = FI_WAIT_SET;
        ea.wait_set = c->ws;
    }
    c->eq_fd = -1;
    int ret = fi_eq_open(c->fabric, &ea, &c->eq, NULL);
    if (ret) {
        ea.wait_obj = FI_WAIT_UNSPEC;
        ret = fi_eq_open(c->fabric, &ea, &c->eq, NULL);
    } else if (c->reset_waits || fi_control(&c->eq->fid, FI_GETWAIT, &c->eq_fd) != 0) {
        c->eq_fd = -1;          /* reset_waits: path 0's wait set has it */
    }
    if (!ret)
        ret = fi_passive_ep(c->fabric, c->info, &c->pep, NULL);
    if (!ret)
        ret = fi_pep_bind(c->pep, &c->eq->fid, 0);
    if (!ret)
        ret = fi_listen(c->pep);
    if (ret) {
        fh_log_error("ofi: listener: %s", fi_strerror(-ret));
        return FH_ERR_TRANSPORT;
    }
    c->lname_len = 0;
    ret = fi_getname(&c->pep->fid, NULL, &c->lname_len);
    if (ret != -FI_ETOOSMALL && ret != 0) {
        fh_log_error("ofi: fi_getname(listener): %s", fi_strerror(-ret));
        return FH_ERR_TRANSPORT;
    }
    return ofi_auth_init(&c->auth, c->cfg.rank, c->cfg.nranks, c->cfg.npaths);
}

void ofi_cm_close(struct fh_conduit *c)
{
    if (c->pep != NULL)
        fi_close(&c->pep->fid);
    if (c->eq != NULL)
        fi_close(&c->eq->fid);
    c->pep = NULL;
    c->eq = NULL;
    ofi_auth_fini(&c->auth);
    free(c->peer_names);
    free(c->accepted);
    free(c->ann);
    free(c->svc_gone);
    free(c->expect_nonce);
    free(c->expect_until);
    c->ann = NULL;
    c->svc_gone = NULL;
    c->expect_nonce = NULL;
    c->expect_until = NULL;
    ofi_probe_free(c);
    c->peer_names = NULL;
    c->accepted = NULL;
}
