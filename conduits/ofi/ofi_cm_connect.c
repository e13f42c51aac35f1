/*
 * ofi_cm_connect.c -- libfabric conduit, message-endpoint mode: dialling
 * (a fresh request per attempt), the job's connections at start-up
 * (ofi_cm_connect: every rank dials its own, accepts the ones it expects,
 * then meets the others in a bootstrap barrier, within
 * OFI_CM_SETUP_TIMEOUT) and a thread path's connections when it is made
 * after start-up (ofi_cm_path_connect).  The topology and the rules:
 * ofi_cm.c's top comment; the handshake and the events:
 * ofi_cm_handshake.c.
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
#define OFI_CM_SETUP_TIMEOUT 60.0    /* s connect() waits for the job's connections */

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
        fh_log_error("ofi: path %d: fi_connect to %s: %s", k->p->index, FH_RANK_NAME(rank),
                     fi_strerror(-ret));
        return FH_ERR_TRANSPORT;
    }
    return FH_OK;
}

static int start_connect(struct fh_conduit *c, struct fh_cpath *p, int rank)
{
    const uint32_t src = (uint32_t)rank * (uint32_t)c->cfg.npaths;
    struct ofi_conn *k = ofi_cm_conn_new(p, c->info, src, 1);
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
        int rc = ofi_cm_conn_open_ep(k, c->info);
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
                         "to %s after %.0f s (%u requests refused)", k->p->index,
                         FH_RANK_NAME((int)(k->src / (uint32_t)np)), OFI_CM_SETUP_TIMEOUT,
                         k->tries);
            return;
        }
    for (uint32_t s = 0; s < (uint32_t)(c->cfg.nranks * np); s++)
        if (!c->accepted[s] && s % (uint32_t)np <= (uint32_t)c->nthread_eager
            && (s % (uint32_t)np != 0 || s / (uint32_t)np <= (uint32_t)c->cfg.rank)) {
            fh_set_error(FH_ERR_PEER_DEAD, "ofi: %s path %u did not connect "
                         "(with a valid proof) within %.0f s",
                         FH_RANK_NAME((int)(s / (uint32_t)np)),
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
                ofi_cm_conn_kill(k, "connection still unproven at the end of start-up");
        const size_t npairs = (size_t)nr * (size_t)np;
        c->ann = calloc(npairs, sizeof *c->ann);
        c->expect_nonce = calloc(npairs, sizeof *c->expect_nonce);
        c->expect_until = calloc(npairs, sizeof *c->expect_until);
        c->svc_gone = calloc((size_t)nr, sizeof *c->svc_gone);
        if (c->ann == NULL || c->expect_nonce == NULL || c->expect_until == NULL
            || c->svc_gone == NULL
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
            return fh_set_error(FH_ERR_PEER_DEAD, "ofi: path %d: no connection to "
                                "%s (%u requests refused)", p->index, FH_RANK_NAME(r), k->tries);
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
                                    "connection to %s after %.0f s (%u requests "
                                    "refused)", p->index, FH_RANK_NAME(r), OFI_CM_SETUP_TIMEOUT,
                                    k->tries);
        }
    return FH_ERR_AGAIN;
}
