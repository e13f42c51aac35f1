/*
 * ofi_cm_redial.c -- libfabric conduit, message-endpoint mode: a pair of
 * paths whose connection was lost after start-up is connected again.
 *
 * Why: a connection ends without either rank ending -- FH_OFI_RMA_TIMEOUT
 * closes one whose provider stopped serving it (a get from memory its owner
 * protected, docs/reliability.md), or the peer's provider shut it down --
 * and the runtime's later traffic between the two ranks (a barrier,
 * fh_finalize) has no other way.
 *
 * Who: the side that made the connection at start-up (the initiator: a
 * thread path, or the lower rank's service path) dials again, with the same
 * authenticated handshake as at start-up (ofi_auth.h: a fresh request, the
 * acceptor's answer checked, the proof): a peer is who the handshake proves,
 * exactly as before.  The acceptor takes a proven connection for a (rank,
 * path) it already had as that pair's replacement (ofi_cm_replace_accepted):
 * only the peer holding the pair secret can make one, and making one means
 * it gave up the old connection.  A request that fails a check never
 * touches the established connection.
 *
 * What is lost: the RMAs live on the old connection fail (FH_ERR_PEER_DEAD,
 * the log naming rank, path, address and length); the AMs in flight on it
 * are gone (a send that completes in error is logged, not fatal); both ends
 * start the new connection with sequence 0 and tell the runtime
 * (conduit.h on_reset), which resets the pair's credits.  Meanwhile sends
 * and RMAs on the pair wait (FH_ERR_AGAIN: the runtime polls and retries),
 * for OFI_CM_REDIAL_WAIT at most after the loss; after that they fail with
 * FH_ERR_PEER_DEAD and the pair is not dialled again.
 *
 * Threads: every step that touches a path's endpoints, slots, sequence
 * numbers or conn[] runs in that path's own poll or send (the runtime
 * serializes them); path 0's event poll only checks the acceptor's answer
 * and sets flags (ready, cm_work) and marks connections down (state), and
 * the path closes what is down (ofi_cm_handshake.c end_conn).
 */
#include <stdlib.h>
#include <string.h>

#include "ofi_internal.h"

#define OFI_CM_REDIAL_PERIOD 0.005   /* s between a path's looks at its lost pairs */
#define OFI_CM_ANNOUNCE_LIFE 10.0    /* s an announced request may arrive in */
_Static_assert(OFI_REDIAL_NONCE == OFI_NONCE_BYTES, "the announcement carries a request nonce");

/* The live RMAs of path p on connection k fail: the provider will not
 * complete them (the connection is closed).  Their records are never
 * reused (OFI_OP_LOST): a late cancellation is ignored. */
static void fail_live(struct fh_cpath *p, struct ofi_conn *k)
{
    struct fh_conduit *c = p->c;
    for (size_t j = 0; j < p->nops; j++) {
        struct ofi_op *o = &p->ops[j];
        if (!o->live || o->conn != k)
            continue;
        fh_log_error("ofi: path %d: %s %s (path %d) at 0x%llx (+%zu) lost with its "
                     "connection", p->index, o->kind == OFI_OP_PUT ? "put to" : "get from",
                     FH_RANK_NAME(o->rank), o->rpath, (unsigned long long)o->raddr, o->len);
        ofi_rma_done(p, o);
        o->kind = OFI_OP_LOST;
        c->up.on_complete(p->upcall_arg, o->op_ctx, FH_ERR_PEER_DEAD);
    }
}

void ofi_cm_lost(struct fh_cpath *p, struct ofi_conn *k)
{
    struct fh_conduit *c = p->c;
    if (k->lost_at != 0)
        return;
    k->lost_at = ofi_now();
    if (k->lost_at == 0)
        k->lost_at = 1e-9;
    ofi_cm_conn_abort(k);               /* closed before its RMAs fail */
    const uint32_t np = (uint32_t)c->cfg.npaths;
    if (c->up.on_lost != NULL)          /* its unanswered requests fail */
        c->up.on_lost(p->upcall_arg, (int)(k->src / np), (int)(k->src % np));
    fail_live(p, k);
    fh_log_verbose(1, "ofi: path %d: the connection with %s path %u was lost; %s",
                   p->index, FH_RANK_NAME((int)(k->src / np)), k->src % np,
                   k->initiator ? "connecting again" : "waiting for it to connect again");
    /* Only a thread path's connection is made again: its announcement
     * travels on the service paths' connection.  That one itself (and so
     * every pair of a job with one path) is not: its traffic fails now. */
    if (k->src % np == 0 && p->index == 0) {
        k->gave_up = 1;
        atomic_store(&c->svc_gone[k->src / np], 1);
        fh_log_error("ofi: the service paths' connection with %s was lost and is not "
                     "made again: traffic with it fails", FH_RANK_NAME((int)(k->src / np)));
    } else if (k->initiator) {
        p->lost++;
        k->retry_at = k->lost_at;
        atomic_store(&p->cm_work, 1);
    }
}

void ofi_cm_on_redial(struct fh_cpath *p, uint32_t src, const struct ofi_ctl_msg *m)
{
    struct fh_conduit *c = p->c;
    const uint32_t np = (uint32_t)c->cfg.npaths;
    if (m->a == 0 || m->a >= np) {
        c->up.on_drop(p->upcall_arg, (int)(src / np), "reconnection announced for a path "
                      "out of range");
        return;
    }
    /* Its rank is the connection's, never a claim in the bytes. */
    const size_t x = (size_t)(src / np) * np + m->a;
    memcpy(c->expect_nonce[x], m->nonce, OFI_REDIAL_NONCE);
    c->expect_until[x] = ofi_now() + OFI_CM_ANNOUNCE_LIFE;
}

int ofi_cm_redial_expected(struct fh_conduit *c, uint32_t src, const uint8_t *nonce)
{
    if (c->expect_until == NULL || c->expect_until[src] == 0)
        return 0;
    const int ok = ofi_now() < c->expect_until[src]
                   && memcmp(c->expect_nonce[src], nonce, OFI_REDIAL_NONCE) == 0;
    if (ok)
        c->expect_until[src] = 0;       /* once */
    return ok;
}

/* Path 0: sends the announcements the thread paths left (c->ann) on its
 * connection to each rank's service path. */
static void announce(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    const uint32_t np = (uint32_t)c->cfg.npaths;
    const size_t n = (size_t)c->cfg.nranks * np;
    for (size_t x = 0; x < n; x++) {
        struct ofi_conn *s = atomic_exchange(&c->ann[x], NULL);
        if (s == NULL)
            continue;
        struct ofi_ctl_msg m = {.a = (uint32_t)(x % np)};
        memcpy(m.nonce, s->req.nonce, OFI_REDIAL_NONCE);
        int rc = ofi_ctl_send(p, (uint32_t)(x / np) * np, OFI_AMH_REDIAL, &m);
        if (rc == FH_ERR_AGAIN) {
            struct ofi_conn *none = NULL;
            if (atomic_compare_exchange_strong(&c->ann[x], &none, s))
                atomic_store(&p->cm_work, 1);        /* again at the next poll */
            continue;
        }
        /* Without the service paths' connection (lost, said once by
         * ofi_cm_lost) no announcement can travel: not said again. */
        if (rc == FH_ERR_PEER_DEAD)
            fh_log_verbose(1, "ofi: cannot announce path %u's new connection to %s: "
                           "the service paths' connection is lost", (unsigned)(x % np),
                           FH_RANK_NAME((int)(x / np)));
        else if (rc != FH_OK)
            fh_log_error("ofi: cannot announce path %u's new connection to %s "
                         "(error %d): it is not made again", (unsigned)(x % np),
                         FH_RANK_NAME((int)(x / np)), rc);
        else
            atomic_store(&s->announced, 1);
        atomic_store(&s->p->cm_work, 1);
    }
}

void ofi_cm_reset_pair(struct fh_cpath *p, uint32_t dst)
{
    struct fh_conduit *c = p->c;
    const uint32_t np = (uint32_t)c->cfg.npaths;
    p->tx_seq[dst] = 0;
    /* Held messages of the old connection are released, not delivered;
     * their buffers are not reposted (the connection is not up). */
    ofi_path_rx_reset(p, dst);
    if (c->up.on_reset != NULL)
        c->up.on_reset(p->upcall_arg, (int)(dst / np), (int)(dst % np));
}

void ofi_cm_redial_accepted(struct ofi_conn *k)
{
    atomic_store(&k->ready, 1);
    atomic_store(&k->p->cm_work, 1);
}

void ofi_cm_replace_accepted(struct ofi_conn *k)
{
    struct fh_cpath *p = k->p;          /* path 0: acceptors are its */
    struct fh_conduit *c = p->c;
    const uint32_t np = (uint32_t)c->cfg.npaths;
    struct ofi_conn *old = NULL;
    for (struct ofi_conn *o = atomic_load_explicit(&c->conns, memory_order_acquire); o != NULL; o = o->next)
        if (o != k && !o->initiator && o->src == k->src && !o->pending
            && atomic_load(&o->state) != OFI_CONN_SETUP && !o->gave_up)
            old = o;
    if (old != NULL) {
        ofi_cm_lost(p, old);            /* once: lost_at says */
        old->gave_up = 1;               /* replaced: never waited on again */
    }
    if (p->conn[k->src] == NULL || p->conn[k->src] == old)
        p->conn[k->src] = k;
    ofi_cm_reset_pair(p, k->src);
    fh_log_verbose(1, "ofi: %s path %u connected again", FH_RANK_NAME((int)(k->src / np)),
                   k->src % np);
}

/* Successor of lost connection k at dst, accepted and checked: its buffers,
 * its proof, and it takes k's place. */
static void finish(struct fh_cpath *p, struct ofi_conn *k, size_t dst)
{
    struct ofi_conn *s = k->succ;
    const uint32_t np = (uint32_t)p->c->cfg.npaths;
    int rc = ofi_cm_conn_bufs(s, p->rx_per_conn);
    if (!rc)
        rc = ofi_cm_send_proof(s);
    int setup = OFI_CONN_SETUP;         /* path 0 may have marked it down */
    if (rc || !atomic_compare_exchange_strong(&s->state, &setup, OFI_CONN_UP)) {
        ofi_cm_conn_abort(s);
        return;                         /* dialled again after a backoff */
    }
    s->proven = 1;
    p->conn[dst] = s;
    k->succ = NULL;
    k->gave_up = 1;
    p->lost--;
    ofi_cm_reset_pair(p, (uint32_t)dst);
    fh_log_verbose(1, "ofi: path %d: connected again to %s path %u", p->index,
                   FH_RANK_NAME((int)((uint32_t)dst / np)), (uint32_t)dst % np);
}

/* One lost initiator's connection k at dst: one step towards its
 * successor. */
static void step(struct fh_cpath *p, struct ofi_conn *k, size_t dst, double t)
{
    struct fh_conduit *c = p->c;
    const uint32_t np = (uint32_t)c->cfg.npaths;
    struct ofi_conn *s = k->succ;
    const bool gone = atomic_load(&c->svc_gone[k->src / np]);
    if (gone || t > k->lost_at + OFI_CM_REDIAL_WAIT) {
        if (gone)                       /* said once by ofi_cm_lost */
            fh_log_verbose(1, "ofi: path %d: %s path %u is not connected again: the "
                           "service paths' connection with it is lost", p->index,
                           FH_RANK_NAME((int)(k->src / np)), k->src % np);
        else
            fh_log_error("ofi: path %d: %s path %u not connected again within %.0f s: "
                         "traffic with it fails", p->index,
                         FH_RANK_NAME((int)(k->src / np)), k->src % np,
                         OFI_CM_REDIAL_WAIT);
        if (s != NULL)
            ofi_cm_conn_abort(s);
        k->succ = NULL;
        k->gave_up = 1;
        p->lost--;
        return;
    }
    const int sst = s != NULL ? atomic_load(&s->state) : OFI_CONN_DEAD;
    if (s != NULL && (sst == OFI_CONN_DEAD || sst == OFI_CONN_DOWN)) {
        if (sst == OFI_CONN_DOWN)       /* path 0 saw it fail: ours to close */
            ofi_cm_conn_abort(s);
        k->succ = s = NULL;             /* refused (not announced yet, or the
                                           listener was full), or failed */
        ofi_cm_backoff(k);
    }
    if (s == NULL) {
        /* A successor with a fresh request, which path 0 announces on the
         * service paths' connection before we dial (ofi_cm_on_redial). */
        if (t < k->retry_at)
            return;
        s = ofi_cm_conn_new(p, c->info, k->src, 1);
        if (s == NULL || ofi_cm_req_make(&c->auth, p->index, (int)(k->src / np), 0,
                                         &s->req) != FH_OK) {
            if (s != NULL)
                ofi_cm_conn_abort(s);
            ofi_cm_backoff(k);
            return;
        }
        s->redial = 1;
        k->succ = s;
        atomic_store(&c->ann[(size_t)(k->src / np) * np + (uint32_t)p->index], s);
        atomic_store(&c->paths[0]->cm_work, 1);
        return;
    }
    if (atomic_load(&s->announced) == 1) {
        atomic_store(&s->announced, 2);
        if (ofi_cm_connect_req(s) != FH_OK)
            ofi_cm_conn_abort(s);
        return;
    }
    if (atomic_load(&s->ready))
        finish(p, k, dst);
}

void ofi_cm_redial_poll(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    const double t = ofi_now();
    if (atomic_exchange(&p->cm_work, 0) == 0 && (p->lost == 0 || t < p->next_redial))
        return;
    p->next_redial = t + OFI_CM_REDIAL_PERIOD;
    if (p->index == 0 && c->ann != NULL)
        announce(p);
    if (p->index == 0 && c->ans_owed != NULL)
        ofi_probe_poll(p);
    const size_t n = (size_t)c->cfg.nranks * (size_t)c->cfg.npaths;
    for (size_t dst = 0; dst < n; dst++) {
        struct ofi_conn *k = p->conn[dst];
        if (k == NULL || k->gave_up || atomic_load(&k->state) == OFI_CONN_UP)
            continue;
        if (k->lost_at == 0) {
            if (atomic_load(&k->state) == OFI_CONN_SETUP)
                continue;               /* a thread path still connecting */
            ofi_cm_lost(p, k);
        }
        if (k->initiator)
            step(p, k, dst, t);
    }
}
