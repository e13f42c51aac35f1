/*
 * ofi_cm.c -- libfabric conduit, message-endpoint mode (FH_OFI_ENDPOINT=msg,
 * the default for providers that offer FI_EP_MSG, tcp among them): the
 * listener, one connection per pair of paths that talk, the authenticated
 * handshake of ofi_auth.h, and the connection events after start-up.
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

#define OFI_CM_PROOF_TIMEOUT 10.0    /* s an accepted connection has to prove
                                        itself (a busy host: every rank
                                        connecting at once, or threads of 16
                                        ranks making paths on 2 cores) */
#define OFI_CM_SETUP_TIMEOUT 60.0    /* s connect() waits for the job's connections */
#define OFI_CM_EQ_PERIOD     0.005   /* s between event-queue reads after start-up */
#define OFI_CM_PENDING_MAX   64      /* unproven connections at once */
#define OFI_CM_DEAD_MAX      4096    /* closed connections kept; then refuse all */
#define OFI_CM_EVENT_BYTES   (sizeof(struct fi_eq_cm_entry) + 256)
#define OFI_CM_RETRY_MIN     0.002   /* s before a refused request is made again */
#define OFI_CM_RETRY_MAX     0.25    /* s: the backoff's ceiling */

double ofi_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- objects */

/* Receive buffers of a connection: n of p->rstride bytes (registered when
 * the provider wants local registrations). */
static int conn_alloc_bufs(struct ofi_conn *k, size_t n)
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
        fh_log_error("ofi: endpoint for rank %u path %u: %s",
                     k->src / (uint32_t)c->cfg.npaths, k->src % (uint32_t)c->cfg.npaths,
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
    int rc = conn_alloc_bufs(k, n);
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
static void conn_kill(struct ofi_conn *k, const char *why)
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
    c->ndead++;
    atomic_store(&k->p->cm_work, 1);    /* its path looks (ofi_cm_redial.c) */
}

void ofi_cm_conn_abort(struct ofi_conn *k)
{
    conn_kill(k, NULL);
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
    c->eq_fd = -1;
    int ret = fi_eq_open(c->fabric, &ea, &c->eq, NULL);
    if (ret) {
        ea.wait_obj = FI_WAIT_UNSPEC;
        ret = fi_eq_open(c->fabric, &ea, &c->eq, NULL);
    } else if (fi_control(&c->eq->fid, FI_GETWAIT, &c->eq_fd) != 0) {
        c->eq_fd = -1;
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
    free(c->expect_nonce);
    free(c->expect_until);
    c->ann = NULL;
    c->expect_nonce = NULL;
    c->expect_until = NULL;
    ofi_probe_free(c);
    c->peer_names = NULL;
    c->accepted = NULL;
}

/* ------------------------------------------------------------ handshake */

static void refuse(struct fh_conduit *c, struct fi_info *info, const char *why)
{
    fi_reject(c->pep, info->handle, NULL, 0);
    c->cm_refused++;
    c->up.on_drop(c->paths[0]->upcall_arg, -1, why);
}

static void on_connreq(struct fh_conduit *c, struct fi_eq_cm_entry *e, size_t dlen)
{
    struct ofi_cm_req req;
    const char *why = NULL;
    if ((why = ofi_cm_req_check(&c->auth, e->data, dlen, &req)) == NULL) {
        uint32_t src = le32toh(req.src_rank) * (uint32_t)c->cfg.npaths + le32toh(req.src_path);
        /* After start-up a thread path made since asks (path_connect), and
         * a peer whose connection was lost asks again, having announced the
         * request on another of its authenticated connections
         * (ofi_cm_redial.c): only a proof can replace an established
         * connection, and no stranger's request gets an endpoint for one
         * (the provider would serve RMA on it before the proof). */
        const int sp = (int)le32toh(req.src_path);
        if (!c->connected && c->accepted[src])
            why = "connection request for a (rank, path) already connected";
        else if (c->connected && (c->accepted[src] || sp <= c->nthread_eager)
                 && !ofi_cm_redial_expected(c, src, req.nonce))
            why = "connection request after start-up (not announced by its rank)";
        else if (c->npending >= OFI_CM_PENDING_MAX || c->ndead >= OFI_CM_DEAD_MAX) {
            /* Most likely one of our own ranks, which asks again (see the
             * top): refused and counted, but not reported as a stranger. */
            fi_reject(c->pep, e->info->handle, NULL, 0);
            c->cm_refused++;
            fh_log_verbose(2, "ofi: refused a request of rank %u path %u: %u unproven "
                           "connections", le32toh(req.src_rank), le32toh(req.src_path),
                           c->npending);
            fi_freeinfo(e->info);
            return;
        } else {
            struct ofi_conn *k = conn_new(c->paths[0], e->info, src, 0);
            struct ofi_cm_acc acc;
            int rc = k == NULL ? FH_ERR_TRANSPORT : conn_alloc_bufs(k, 1);
            if (!rc)
                rc = ofi_cm_acc_make(&c->auth, &req, &acc);
            if (!rc)
                rc = ofi_post_rbuf(k->p, &k->rbufs[0]);
            if (!rc) {
                k->req = req;
                k->acc = acc;
                k->pending = 1;
                c->npending++;
                k->deadline = ofi_now() + OFI_CM_PROOF_TIMEOUT;
                int ret = fi_accept(k->ep, &acc, sizeof acc);
                if (ret == 0) {
                    fi_freeinfo(e->info);
                    return;
                }
                fh_log_error("ofi: fi_accept: %s", fi_strerror(-ret));
            }
            if (k != NULL)
                conn_kill(k, NULL);
            why = "connection request that could not be accepted";
        }
    }
    refuse(c, e->info, why);
    fi_freeinfo(e->info);
}

/* The connector's side: our request was accepted; check the acceptor. */
static int on_accepted(struct fh_conduit *c, struct ofi_conn *k, const void *data,
                       size_t dlen)
{
    const int np = c->cfg.npaths;
    const char *why = ofi_cm_acc_check(&c->auth, &k->req, data, dlen, &k->acc);
    if (why != NULL) {
        fh_log_error("ofi: path %d: rank %u refused as our peer: %s", k->p->index,
                     k->src / (uint32_t)np, why);
        conn_kill(k, NULL);
        return FH_ERR_TRANSPORT;
    }
    int rc = conn_alloc_bufs(k, k->p->rx_per_conn);
    if (!rc)
        rc = conn_post_all(k);
    if (!rc)
        rc = ofi_cm_send_proof(k);
    if (rc) {
        conn_kill(k, NULL);
        return rc;
    }
    atomic_store(&k->state, OFI_CONN_UP);
    return FH_OK;
}

/* The connector's proof on k (its third handshake message), from a slot of
 * its path; k->proof_sent when its send completed. */
int ofi_cm_send_proof(struct ofi_conn *k)
{
    struct fh_conduit *c = k->p->c;
    const int np = c->cfg.npaths;
    struct ofi_op *s = k->p->slot_free;
    if (s == NULL)
        return FH_ERR_NO_MEMORY;     /* set-up sends one proof per connection */
    struct ofi_cm_proof pr;
    ofi_cm_proof_make(&c->auth, &k->req, &k->acc, &pr);
    memcpy(s->buf, &pr, sizeof pr);
    s->rank = (int)(k->src / (uint32_t)np);
    s->rpath = 0;
    s->conn = k;
    ssize_t ret = fi_send(k->ep, s->buf, sizeof pr, ofi_path_desc(k->p, k->p->slot_mr), 0,
                          &s->fctx);
    if (ret) {
        fh_log_error("ofi: path %d: sending the connection proof to rank %d: %s",
                     k->p->index, s->rank, fi_strerror((int)-ret));
        s->conn = NULL;
        return FH_ERR_TRANSPORT;
    }
    k->p->slot_free = s->next;
    return FH_OK;
}

/* The acceptor's side: the first message of a pending connection. */
void ofi_cm_on_proof(struct fh_cpath *p, struct ofi_op *rb, size_t len)
{
    struct fh_conduit *c = p->c;
    struct ofi_conn *k = rb->conn;
    if (atomic_load(&k->state) != OFI_CONN_SETUP || k->initiator)
        return;
    const char *why = ofi_cm_proof_check(&c->auth, &k->req, &k->acc, rb->buf, len);
    const int again = why == NULL && c->accepted[k->src];
    if (again && !c->connected)
        why = "connection proof for a (rank, path) already connected";
    if (why != NULL) {
        conn_kill(k, why);
        return;
    }
    /* Proven: the full set of receive buffers replaces the proof's. */
    struct ofi_op *old = k->rbufs;
    k->rbufs = NULL;
    if (k->rmr != NULL)
        ofi_mr_dereg(c, k->rmr);
    k->rmr = NULL;
    free(k->rmem);
    k->rmem = NULL;
    int rc = conn_alloc_bufs(k, p->rx_per_conn);
    if (!rc)
        rc = conn_post_all(k);
    /* The old record is the completion being handled: keep it, retired. */
    old->conn = NULL;
    old->repost = 0;
    k->retired = old;
    if (rc) {
        conn_kill(k, "connection that could not get its receive buffers");
        return;
    }
    k->pending = 0;
    c->npending--;
    if (again) {                 /* after start-up: the pair's new connection */
        atomic_store(&k->state, OFI_CONN_UP);
        ofi_cm_replace_accepted(k);
        return;
    }
    c->accepted[k->src] = 1;
    c->naccepted++;
    if (p->conn[k->src] == NULL)
        p->conn[k->src] = k;     /* the self loop keeps its connector for sends */
    atomic_store(&k->state, OFI_CONN_UP);
    fh_log_verbose(3, "ofi: accepted rank %u path %u", k->src / (uint32_t)c->cfg.npaths,
                   k->src % (uint32_t)c->cfg.npaths);
}

/* --------------------------------------------------------------- events */

/* Our request k was refused during start-up (the listener was full, see
 * the top): its endpoint is closed -- it never had buffers or a proof --
 * and connect() opens a new one at k->retry_at. */
static void retry_later(struct ofi_conn *k)
{
    fi_close(&k->ep->fid);
    k->ep = NULL;
    ofi_cm_backoff(k);
    fh_log_verbose(2, "ofi: path %d: rank %u refused or closed our connection (%u times); again "
                   "in %.0f ms", k->p->index, k->src / (uint32_t)k->p->c->cfg.npaths,
                   k->tries, (k->retry_at - ofi_now()) * 1e3);
}

/* k->retry_at: the next request after a backoff of OFI_CM_RETRY_MIN
 * doubling per try up to OFI_CM_RETRY_MAX, with jitter. */
void ofi_cm_backoff(struct ofi_conn *k)
{
    k->tries++;
    double d = OFI_CM_RETRY_MIN;
    for (unsigned i = 1; i < k->tries && d < OFI_CM_RETRY_MAX; i++)
        d *= 2;
    d = d < OFI_CM_RETRY_MAX ? d : OFI_CM_RETRY_MAX;
    uint8_t r = 128;
    (void)ofi_random(&r, sizeof r);          /* jitter: 0.5..1.5 x d */
    k->retry_at = ofi_now() + d * (0.5 + r / 256.0);
}

/* Connector k, which the listener accepted, was closed by it during
 * set-up: k ends (its records stay, see the top), and a new connector for
 * the same (path, rank) asks again after a backoff (redial_due). */
static void redo_later(struct ofi_conn *k)
{
    struct fh_cpath *p = k->p;
    struct ofi_conn *k2 = conn_new(p, p->c->info, k->src, 1);
    if (k2 == NULL)
        return;                      /* logged; set-up reports the rank */
    k2->tries = k->tries;
    p->conn[k->src] = k2;
    conn_kill(k, NULL);
    retry_later(k2);
}

/* Reads the event queue until it is empty.  During set-up an error is
 * returned for failures of our own connections; after it, FH_OK. */
int ofi_cm_events(struct fh_conduit *c)
{
    union {
        struct fi_eq_cm_entry e;
        char bytes[OFI_CM_EVENT_BYTES];
    } ev;
    const int np = c->cfg.npaths;
    for (;;) {
        uint32_t event = 0;
        ssize_t n = fi_eq_read(c->eq, &event, &ev, sizeof ev, 0);
        if (n == -FI_EAGAIN)
            return FH_OK;
        if (n == -FI_EAVAIL) {
            struct fi_eq_err_entry err;
            memset(&err, 0, sizeof err);
            if (fi_eq_readerr(c->eq, &err, 0) < 0)
                return FH_OK;
            struct ofi_conn *k = err.fid != NULL && err.fid != &c->pep->fid
                                     ? err.fid->context : NULL;
            if (k == NULL || k->ep == NULL || err.fid != &k->ep->fid)
                continue;            /* an endpoint closed since */
            const int setup = k->initiator
                              && (!c->connected || k->p->connecting || k->redial);
            if (k->redial && atomic_load(&k->state) == OFI_CONN_SETUP) {
                /* Its own path makes a new one after a backoff (state is
                 * all that path 0 writes of another path's connection). */
                fh_log_verbose(2, "ofi: path %d: rank %u refused our new connection: %s",
                               k->p->index, k->src / (uint32_t)np, fi_strerror(err.err));
                conn_kill(k, NULL);
                continue;
            }
            if (setup && atomic_load(&k->state) == OFI_CONN_SETUP && err.err == FI_ECONNREFUSED) {
                retry_later(k);
                continue;
            }
            if (setup && c->connected) {       /* path_connect reports it */
                fh_log_error("ofi: path %d: cannot connect to rank %u: %s", k->p->index,
                             k->src / (uint32_t)np, fi_strerror(err.err));
                conn_kill(k, NULL);
                continue;
            }
            if (k->initiator && !c->connected) {
                fh_log_error("ofi: path %d: cannot connect to rank %u: %s", k->p->index,
                             k->src / (uint32_t)np, fi_strerror(err.err));
                conn_kill(k, NULL);
                return FH_ERR_PEER_DEAD;
            }
            conn_kill(k, k->pending ? "connection that failed during its handshake" : NULL);
            continue;
        }
        if (n < 0) {
            fh_log_error("ofi: fi_eq_read: %s", fi_strerror((int)-n));
            return FH_ERR_TRANSPORT;
        }
        size_t dlen = (size_t)n > sizeof ev.e ? (size_t)n - sizeof ev.e : 0;
        if (event == FI_CONNREQ) {
            on_connreq(c, &ev.e, dlen);
            continue;
        }
        struct ofi_conn *k = ev.e.fid != NULL ? ev.e.fid->context : NULL;
        if (k == NULL || atomic_load(&k->state) == OFI_CONN_DEAD || k->ep == NULL
            || ev.e.fid != &k->ep->fid)
            continue;
        if (event == FI_CONNECTED && k->initiator && k->redial) {
            /* Made again after start-up: its own path finishes it. */
            const char *why = ofi_cm_acc_check(&c->auth, &k->req, ev.e.data, dlen, &k->acc);
            if (why != NULL) {
                fh_log_error("ofi: path %d: rank %u refused as our peer: %s", k->p->index,
                             k->src / (uint32_t)np, why);
                conn_kill(k, NULL);
            } else {
                ofi_cm_redial_accepted(k);
            }
        } else if (event == FI_CONNECTED && k->initiator) {
            int rc = on_accepted(c, k, ev.e.data, dlen);
            if (rc && !c->connected)
                return rc;
        } else if (event == FI_SHUTDOWN) {
            if (k->initiator && (!c->connected || k->p->connecting)) {
                /* The listener gave up on us (our proof was late: a busy
                 * host at start-up): ask again on a new connection. */
                redo_later(k);
            } else if (k->pending) {
                conn_kill(k, "connection closed during its handshake");
            } else if (k->redial && atomic_load(&k->state) == OFI_CONN_SETUP) {
                conn_kill(k, NULL);          /* its path dials again */
            } else if (atomic_exchange(&k->state, OFI_CONN_DOWN) == OFI_CONN_UP) {
                fh_log_verbose(1, "ofi: rank %u path %u closed its connection",
                               k->src / (uint32_t)np, k->src % (uint32_t)np);
                /* Its path fails what was live on it; an initiator's path
                 * connects again, an acceptor waits for its peer to
                 * (ofi_cm_redial.c; a thread path made after start-up
                 * whose path_connect failed may so be made again). */
                atomic_store(&k->p->cm_work, 1);
            }
        }
        /* FI_CONNECTED of an accepted connection: it still owes its proof. */
    }
}

/* Closes the accepted connections whose proof is overdue.  Called after
 * the service path's completions were read, so that a proof that arrived
 * is checked before its connection is judged late. */
void ofi_cm_expire(struct fh_conduit *c)
{
    double t = ofi_now();
    for (struct ofi_conn *k = atomic_load_explicit(&c->conns, memory_order_acquire); k != NULL; k = k->next)
        if (k->pending && t > k->deadline)
            conn_kill(k, "connection that did not prove itself in time");
}

void ofi_cm_poll_events(struct fh_conduit *c)
{
    double t = ofi_now();
    if (t < c->next_eq)
        return;
    c->next_eq = t + OFI_CM_EQ_PERIOD;
    (void)ofi_cm_events(c);
}

/* -------------------------------------------------------------- connect */

/* Sends connector k's request (a fresh nonce each time) to its rank's
 * listener. */
int ofi_cm_dial(struct ofi_conn *k)
{
    struct fh_conduit *c = k->p->c;
    const int rank = (int)(k->src / (uint32_t)c->cfg.npaths);
    int rc = ofi_cm_req_make(&c->auth, k->p->index, rank, 0, &k->req);
    return rc ? rc : ofi_cm_connect_req(k);
}

int ofi_cm_connect_req(struct ofi_conn *k)
{
    struct fh_conduit *c = k->p->c;
    const int rank = (int)(k->src / (uint32_t)c->cfg.npaths);
    const char *name = c->peer_names + (size_t)rank * c->lname_len;
    int ret = fi_connect(k->ep, name, &k->req, sizeof k->req);
    if (ret) {
        fh_log_error("ofi: path %d: fi_connect to rank %d: %s", k->p->index, rank,
                     fi_strerror(-ret));
        return FH_ERR_TRANSPORT;
    }
    return FH_OK;
}

static int start_connect(struct fh_conduit *c, struct fh_cpath *p, int rank)
{
    const uint32_t src = (uint32_t)rank * (uint32_t)c->cfg.npaths;
    struct ofi_conn *k = conn_new(p, c->info, src, 1);
    if (k == NULL)
        return FH_ERR_TRANSPORT;
    p->conn[src] = k;
    return ofi_cm_dial(k);
}

/* Asks again for the refused connections (of path p, or of any path when
 * p is NULL) whose backoff is over. */
static int redial_due(struct fh_conduit *c, const struct fh_cpath *p)
{
    const double t = ofi_now();
    for (struct ofi_conn *k = atomic_load_explicit(&c->conns, memory_order_acquire); k != NULL; k = k->next) {
        if (!k->initiator || k->redial || k->ep != NULL || t < k->retry_at
            || (p != NULL && k->p != p)
            || atomic_load(&k->state) != OFI_CONN_SETUP)
            continue;
        int rc = conn_open_ep(k, c->info);
        if (!rc)
            rc = ofi_cm_dial(k);
        if (rc)
            return rc;
    }
    return FH_OK;
}

/* Our connections are up and their proofs sent; we accepted all we expect. */
static int setup_done(const struct fh_conduit *c, unsigned expect_in)
{
    if (c->naccepted < expect_in)
        return 0;
    for (const struct ofi_conn *k = atomic_load_explicit(&c->conns, memory_order_acquire); k != NULL; k = k->next)
        if (k->initiator && k->p->conn[k->src] == k      /* not one replaced */
            && (atomic_load(&k->state) != OFI_CONN_UP || !k->proof_sent))
            return 0;
    return 1;
}

/* Names the first peer we are still waiting for. */
static void report_missing(const struct fh_conduit *c)
{
    const int np = c->cfg.npaths;
    for (const struct ofi_conn *k = atomic_load_explicit(&c->conns, memory_order_acquire); k != NULL; k = k->next)
        if (k->initiator && k->p->conn[k->src] == k
            && (atomic_load(&k->state) != OFI_CONN_UP || !k->proof_sent)) {
            fh_set_error(FH_ERR_PEER_DEAD, "ofi: path %d: no authenticated connection "
                         "to rank %u after %.0f s (%u requests refused)", k->p->index,
                         k->src / (uint32_t)np, OFI_CM_SETUP_TIMEOUT, k->tries);
            return;
        }
    for (uint32_t s = 0; s < (uint32_t)(c->cfg.nranks * np); s++)
        if (!c->accepted[s] && s % (uint32_t)np <= (uint32_t)c->nthread_eager
            && (s % (uint32_t)np != 0 || s / (uint32_t)np <= (uint32_t)c->cfg.rank)) {
            fh_set_error(FH_ERR_PEER_DEAD, "ofi: rank %u path %u did not connect "
                         "(with a valid proof) within %.0f s", s / (uint32_t)np,
                         s % (uint32_t)np, OFI_CM_SETUP_TIMEOUT);
            return;
        }
}

/* Collective: exchanges listener names and public keys, makes and accepts
 * this rank's connections, then a bootstrap barrier. */
int ofi_cm_connect(struct fh_conduit *c, struct fh_boot *boot)
{
    const int np = c->cfg.npaths, nr = c->cfg.nranks, me = c->cfg.rank;
    uint64_t mylen = c->lname_len, *lens = calloc((size_t)nr, sizeof *lens);
    if (lens == NULL)
        return FH_ERR_NO_MEMORY;
    int rc = boot->ops->allgather(boot, &mylen, lens, sizeof mylen);
    size_t L = 0;
    for (int r = 0; r < nr && !rc; r++)
        L = lens[r] > L ? (size_t)lens[r] : L;
    free(lens);
    if (rc)
        return cu_boot_failed("ofi", "listener-name");
    if (L == 0 || L > 4096)
        return fh_set_error(FH_ERR_BOOTSTRAP, "ofi: listener-name allgather failed");

    const size_t R = L + OFI_PUB_BYTES;
    char *mine = calloc(1, R), *all = calloc((size_t)nr, R);
    c->peer_names = calloc((size_t)nr, L);
    c->accepted = calloc((size_t)nr * (size_t)np, 1);
    uint8_t *pubs = calloc((size_t)nr, OFI_PUB_BYTES);
    rc = FH_ERR_NO_MEMORY;
    if (!mine || !all || !c->peer_names || !c->accepted || !pubs)
        goto out;
    size_t len = L;
    if (fi_getname(&c->pep->fid, mine, &len) != 0) {
        rc = fh_set_error(FH_ERR_TRANSPORT, "ofi: fi_getname(listener) failed");
        goto out;
    }
    memcpy(mine + L, c->auth.pub, OFI_PUB_BYTES);
    if (boot->ops->allgather(boot, mine, all, R) != 0) {
        rc = cu_boot_failed("ofi", "address");
        goto out;
    }
    for (int r = 0; r < nr; r++) {
        memcpy(c->peer_names + (size_t)r * L, all + (size_t)r * R, L);
        memcpy(pubs + (size_t)r * OFI_PUB_BYTES, all + (size_t)r * R + L, OFI_PUB_BYTES);
    }
    c->lname_len = L;
    if ((rc = ofi_auth_derive(&c->auth, pubs)) != FH_OK)
        goto out;

    /* Thread paths made before connect are connected now (every rank made
     * the same ones: conduit.h); the others when first needed. */
    int made = 1;
    while (made < np && c->paths[made] != NULL)
        made++;
    c->nthread_eager = made - 1;
    for (int i = 0; i < made && !rc; i++)
        for (int r = i == 0 ? me : 0; r < nr && !rc; r++)
            rc = start_connect(c, c->paths[i], r);
    const unsigned expect_in = (unsigned)nr * (unsigned)(made - 1) + (unsigned)me + 1;
    const double deadline = ofi_now() + OFI_CM_SETUP_TIMEOUT;
    while (!rc && !setup_done(c, expect_in)) {
        rc = ofi_cm_events(c);
        if (!rc)
            rc = redial_due(c, NULL);
        for (int i = 0; i < made && !rc; i++) {
            int n = ofi_poll(c->paths[i], 64);
            rc = n < 0 ? n : FH_OK;
        }
        ofi_cm_expire(c);
        if (!rc && ofi_now() > deadline) {
            report_missing(c);
            rc = FH_ERR_PEER_DEAD;
        }
    }
    if (!rc && boot->ops->barrier(boot) != 0)
        rc = fh_set_error(FH_ERR_BOOTSTRAP, "ofi: barrier after connecting failed");
    if (!rc) {
        /* Strangers' half-made connections end here; requests from now on are
         * refused by path 0's poll. */
        for (struct ofi_conn *k = atomic_load_explicit(&c->conns, memory_order_acquire); k != NULL; k = k->next)
            if (k->pending)
                conn_kill(k, "connection still unproven at the end of start-up");
        const size_t npairs = (size_t)nr * (size_t)np;
        c->ann = calloc(npairs, sizeof *c->ann);
        c->expect_nonce = calloc(npairs, sizeof *c->expect_nonce);
        c->expect_until = calloc(npairs, sizeof *c->expect_until);
        if (c->ann == NULL || c->expect_nonce == NULL || c->expect_until == NULL
            || ofi_probe_alloc(c) != FH_OK)
            rc = FH_ERR_NO_MEMORY;
        c->connected = 1;
        fh_log_verbose(2, "ofi: %u connections made, %u accepted, %lu refused",
                       (unsigned)(made - 1) * (unsigned)nr + (unsigned)(nr - me),
                       c->naccepted, c->cm_refused);
    }
out:
    free(mine);
    free(all);
    free(pubs);
    return rc;
}

/* conduit.h path_connect: thread path p, made after start-up, connects to
 * the service path of every rank (itself included), as connect() does for
 * the paths made before it, with the same handshake; refused requests are
 * made again after a backoff.  The runtime holds path 0's lock and p's:
 * events (ofi_cm_events, read by path 0's poll) and p's own completions
 * (its proofs) are handled between our calls. */
int ofi_cm_path_connect(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    const int np = c->cfg.npaths, nr = c->cfg.nranks;
    if (!c->msg || !c->connected || p->index <= c->nthread_eager)
        return fh_set_error(FH_ERR_STATE, "ofi: path_connect of path %d: not a thread "
                            "path made after connect", p->index);
    if (!p->connecting) {
        p->connecting = 1;
        p->connect_by = ofi_now() + OFI_CM_SETUP_TIMEOUT;
        for (int r = 0; r < nr; r++) {
            int rc = start_connect(c, p, r);
            if (rc)
                return rc;
        }
        return FH_ERR_AGAIN;
    }
    int rc = redial_due(c, p);
    if (rc)
        return rc;
    int up = 0;
    for (int r = 0; r < nr; r++) {
        const struct ofi_conn *k = p->conn[(size_t)r * (size_t)np];
        int st = atomic_load(&k->state);
        if (st == OFI_CONN_DEAD || st == OFI_CONN_DOWN)
            return fh_set_error(FH_ERR_PEER_DEAD, "ofi: path %d: no connection to rank "
                                "%d (%u requests refused)", p->index, r, k->tries);
        up += st == OFI_CONN_UP && k->proof_sent;
    }
    if (up == nr) {
        p->connecting = 0;
        fh_log_verbose(3, "ofi: path %d connected to %d ranks", p->index, nr);
        return FH_OK;
    }
    if (ofi_now() > p->connect_by)
        for (int r = 0; r < nr; r++) {
            const struct ofi_conn *k = p->conn[(size_t)r * (size_t)np];
            if (atomic_load(&k->state) != OFI_CONN_UP || !k->proof_sent)
                return fh_set_error(FH_ERR_PEER_DEAD, "ofi: path %d: no authenticated "
                                    "connection to rank %d after %.0f s (%u requests "
                                    "refused)", p->index, r, OFI_CM_SETUP_TIMEOUT, k->tries);
        }
    return FH_ERR_AGAIN;
}
