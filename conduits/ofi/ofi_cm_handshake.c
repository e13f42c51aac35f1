/*
 * ofi_cm_handshake.c -- libfabric conduit, message-endpoint mode: the
 * listener's side of the authenticated handshake (ofi_auth.h: a request
 * checked and answered, the proof that completes it) and the connection
 * manager's event queue (ofi_cm_events: requests, answers, shut-downs),
 * read by connect() during start-up and by path 0's poll after it
 * (ofi_cm_poll_events, every OFI_CM_EQ_PERIOD).  The objects and the
 * listener are ofi_cm.c's; who dials whom and start-up's deadline are
 * ofi_cm_connect.c's (the design: ofi_cm.c's top comment).
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
#define OFI_CM_EQ_PERIOD     0.005   /* s between event-queue reads after start-up */
#define OFI_CM_PENDING_MAX   64      /* unproven connections at once */
#define OFI_CM_DEAD_MAX      4096    /* closed connections kept; then refuse all */
#define OFI_CM_EVENT_BYTES   (sizeof(struct fi_eq_cm_entry) + 256)
#define OFI_CM_RETRY_MIN     0.002   /* s before a refused request is made again */
#define OFI_CM_RETRY_MAX     0.25    /* s: the backoff's ceiling */

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
        else if (c->npending >= OFI_CM_PENDING_MAX
                 || atomic_load_explicit(&c->ndead, memory_order_relaxed) >= OFI_CM_DEAD_MAX) {
            /* Most likely one of our own ranks, which asks again (see the
             * top): refused and counted, but not reported as a stranger. */
            fi_reject(c->pep, e->info->handle, NULL, 0);
            c->cm_refused++;
            fh_log_verbose(2, "ofi: refused a request of %s path %u: %u unproven "
                           "connections", FH_RANK_NAME((int)(le32toh(req.src_rank))),
                           le32toh(req.src_path),
                           c->npending);
            fi_freeinfo(e->info);
            return;
        } else {
            struct ofi_conn *k = ofi_cm_conn_new(c->paths[0], e->info, src, 0);
            struct ofi_cm_acc acc;
            int rc = k == NULL ? FH_ERR_TRANSPORT : ofi_cm_conn_alloc_bufs(k, 1);
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
                ofi_cm_conn_kill(k, NULL);
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
        fh_log_error("ofi: path %d: %s refused as our peer: %s", k->p->index,
                     FH_RANK_NAME((int)(k->src / (uint32_t)np)), why);
        ofi_cm_conn_kill(k, NULL);
        return FH_ERR_TRANSPORT;
    }
    int rc = ofi_cm_conn_bufs(k, k->p->rx_per_conn);
    if (!rc)
        rc = ofi_cm_send_proof(k);
    if (rc) {
        ofi_cm_conn_kill(k, NULL);
        return rc;
    }
    k->proven = 1;
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
        fh_log_error("ofi: path %d: sending the connection proof to %s: %s",
                     k->p->index, FH_RANK_NAME(s->rank), fi_strerror((int)-ret));
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
        ofi_cm_conn_kill(k, why);
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
    int rc = ofi_cm_conn_bufs(k, p->rx_per_conn);
    /* The old record is the completion being handled: keep it, retired. */
    old->conn = NULL;
    old->repost = 0;
    k->retired = old;
    if (rc) {
        ofi_cm_conn_kill(k, "connection that could not get its receive buffers");
        return;
    }
    k->pending = 0;
    c->npending--;
    k->proven = 1;
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
    fh_log_verbose(3, "ofi: accepted %s path %u",
                   FH_RANK_NAME((int)(k->src / (uint32_t)c->cfg.npaths)),
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
    fh_log_verbose(2, "ofi: path %d: %s refused or closed our connection (%u times); again "
                   "in %.0f ms", k->p->index,
                   FH_RANK_NAME((int)(k->src / (uint32_t)k->p->c->cfg.npaths)),
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
    struct ofi_conn *k2 = ofi_cm_conn_new(p, p->c->info, k->src, 1);
    if (k2 == NULL)
        return;                      /* logged; set-up reports the rank */
    k2->tries = k->tries;
    p->conn[k->src] = k2;
    ofi_cm_conn_kill(k, NULL);
    retry_later(k2);
}

/* k is down (the peer shut it down, or an event says it failed), unless
 * already closed; returns the state it had. */
static int mark_down(struct fh_conduit *c, struct ofi_conn *k, const char *cause)
{
    int st = atomic_load(&k->state);
    while (st != OFI_CONN_DEAD && st != OFI_CONN_DOWN
           && !atomic_compare_exchange_weak(&k->state, &st, OFI_CONN_DOWN))
        ;                               /* a closed one stays DEAD */
    if (st == OFI_CONN_UP)
        fh_log_verbose(1, "ofi: path %d: the connection with %s path %u went down: %s",
                       k->p->index, FH_RANK_NAME((int)(k->src / (uint32_t)c->cfg.npaths)),
                       k->src % (uint32_t)c->cfg.npaths, cause);
    return st;
}

/* Path 0's poll ends connection k after an event.  Another path's
 * connection after start-up (one up, or one being made again) is only
 * marked down: that path may be using its endpoint at this moment, and it
 * closes it in its own poll (ofi_cm_redial.c: a lost pair, or a successor
 * dialled again).  Path 0's own, and any during start-up or during its
 * path's path_connect (whose caller holds path 0's lock), are closed here. */
static void end_conn(struct fh_conduit *c, struct ofi_conn *k, const char *why,
                     const char *cause)
{
    if (!c->connected || k->p == c->paths[0] || k->p->connecting) {
        ofi_cm_conn_kill(k, why);
        return;
    }
    (void)mark_down(c, k, cause);
    atomic_store(&k->p->cm_work, 1);
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
                /* Its own path makes a new one after a backoff. */
                fh_log_verbose(2, "ofi: path %d: %s refused our new connection: %s",
                               k->p->index, FH_RANK_NAME((int)(k->src / (uint32_t)np)),
                               fi_strerror(err.err));
                end_conn(c, k, NULL, "our new connection refused");
                continue;
            }
            if (setup && atomic_load(&k->state) == OFI_CONN_SETUP && err.err == FI_ECONNREFUSED) {
                retry_later(k);
                continue;
            }
            if (setup && c->connected) {       /* path_connect reports it */
                fh_log_error("ofi: path %d: cannot connect to %s: %s", k->p->index,
                             FH_RANK_NAME((int)(k->src / (uint32_t)np)), fi_strerror(err.err));
                ofi_cm_conn_kill(k, NULL);
                continue;
            }
            if (k->initiator && !c->connected) {
                fh_log_error("ofi: path %d: cannot connect to %s: %s", k->p->index,
                             FH_RANK_NAME((int)(k->src / (uint32_t)np)), fi_strerror(err.err));
                ofi_cm_conn_kill(k, NULL);
                return FH_ERR_PEER_DEAD;
            }
            end_conn(c, k, k->pending ? "connection that failed during its handshake" : NULL,
                     fi_strerror(err.err));
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
                fh_log_error("ofi: path %d: %s refused as our peer: %s", k->p->index,
                             FH_RANK_NAME((int)(k->src / (uint32_t)np)), why);
                end_conn(c, k, NULL, "the peer failed its proof");
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
                ofi_cm_conn_kill(k, "connection closed during its handshake");
            } else if (k->redial && atomic_load(&k->state) == OFI_CONN_SETUP) {
                end_conn(c, k, NULL, "closed by the peer"); /* its path dials again */
            } else if (mark_down(c, k, "closed by the peer") == OFI_CONN_UP) {
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
            ofi_cm_conn_kill(k, "connection that did not prove itself in time");
}

void ofi_cm_poll_events(struct fh_conduit *c)
{
    double t = ofi_now();
    if (t < c->next_eq)
        return;
    c->next_eq = t + OFI_CM_EQ_PERIOD;
    (void)ofi_cm_events(c);
}
