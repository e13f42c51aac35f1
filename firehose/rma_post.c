/*
 * rma_post.c -- fh_post(): the comparison strategies' RDMA (pin-everything,
 * rendezvous, rendezvous-cache; firehose posts its own chunks,
 * reg/firehose_xfer.c) on the calling thread's path.
 *
 * A transfer is split into FH_XFER_CHUNK / conduit max_msg pieces, each
 * posted and counted in the caller's counter.  What the conduit cannot
 * take now (FH_ERR_AGAIN: a full transmit queue, or on libfabric tcp and
 * shm a first contact the peer has not accepted yet) is queued on the path
 * in order (p->rma_pend) and posted by whoever polls the path next, so no
 * call waits for the target here.
 *
 * The bulk bound (reg/services.h, FH_BULK_*; docs/reliability.md, "A small
 * operation waits for a bounded amount of bulk"): on a path that needs it
 * (the service path, or a thread path more than one thread is bound to), a
 * transfer of at least FH_BULK_MIN bytes is posted in pieces of at most
 * FH_BULK_PIECE, each with a record of its own (fh_rma_piece_t: its
 * length and the caller's counter), and at most FH_BULK_BYTES of such
 * pieces are in flight on the path (p->bulk_bytes: a piece holds its
 * length from its post to its completion; a lone piece larger than the
 * budget goes out anyway).  The rest of such a transfer waits on the
 * path's held list (p->rma_held), in order, and is posted by the path's
 * polls as pieces complete; smaller transfers pass it.  A thread alone on
 * its path posts as before: one record per transfer, no piece records.
 */
#include <assert.h>
#include <stdlib.h>

#include "firehose/util/test_point.h"
#include "internal.h"

static size_t chunk_limit(const fh_rt_t *rt)
{
    size_t c = rt->cfg.xfer_chunk;
    if (rt->limits.max_msg && rt->limits.max_msg < c)
        c = rt->limits.max_msg;
    return c;
}

/* The rest of a transfer not posted yet, queued on its path (p->rma_pend:
 * out of transmit resources; p->rma_held: bulk waiting for the budget).
 * Counted once in ctr and p->inflight until the last byte is posted, so
 * fh_wait/fh_wait_nbi/fh_quiet wait for it. */
typedef struct fh_rma_pend {
    struct fh_rma_pend *next;
    bool is_put;
    int rank;
    char *local;
    struct fh_mr *lmr;
    uint64_t remote;
    size_t off, n;             /* [off, n) not posted yet */
    fh_rkey_t rkey;
    fh_ctr_t *ctr;
} fh_rma_pend_t;

/* A bulk piece on a bounded path: its completion gives its length back to
 * the path's budget, then counts in the caller's counter. */
typedef struct fh_rma_piece {
    fh_compl_t compl;          /* first member: the piece's op_ctx */
    fh_ctr_t *ctr;
    size_t len;
} fh_rma_piece_t;

/* post_from: the bulk budget is spent; the rest waits on p->rma_held. */
#define POST_HELD 1

/* The path's bulk budget applies: the service path, or a thread path
 * another thread is bound to as well (thread.c). */
static bool bulk_bounded(const fh_path_t *p)
{
    return p->index == 0 || atomic_load_explicit(&p->bulk_shared, memory_order_relaxed);
}

/* The piece's completion (path.c has decremented p->inflight). */
static void piece_done(fh_compl_t *c, fh_path_base_t *p, int status)
{
    fh_rma_piece_t *q = (fh_rma_piece_t *)c;
    assert(p->bulk_bytes >= q->len);
    p->bulk_bytes -= q->len;
    fh_ctr_complete(q->ctr, status);
    free(q);
}

/* Posts bytes [*off, n) of a transfer on p (lock held), advancing *off.
 * Returns FH_OK (all posted), FH_ERR_AGAIN (out of transmit resources),
 * POST_HELD (bulk budget spent) or the conduit's error. */
static int post_from(fh_path_t *p, bool is_put, int rank, char *local, struct fh_mr *lmr,
                     uint64_t remote, size_t n, size_t *off, const fh_rkey_t *rkey,
                     fh_ctr_t *ctr)
{
    const fh_rt_t *rt = p->rt;
    size_t chunk = chunk_limit(rt);
    const bool bound = n >= FH_BULK_MIN && bulk_bounded(p);
    if (bound && chunk > FH_BULK_PIECE)
        chunk = FH_BULK_PIECE;
    while (*off < n) {
        size_t len = n - *off < chunk ? n - *off : chunk;
        unsigned flags = (*off + len < n) ? FH_POST_MORE : 0;
        char *l = local + *off;
        fh_compl_t *cc = &ctr->compl;
        fh_rma_piece_t *pc = NULL;
        if (bound) {
            if (p->bulk_bytes != 0 && p->bulk_bytes + len > FH_BULK_BYTES)
                return POST_HELD;
            pc = malloc(sizeof *pc);
            if (pc == NULL)
                return FH_ERR_NO_MEMORY;
            *pc = (fh_rma_piece_t){.compl = {.done = piece_done}, .ctr = ctr, .len = len};
            cc = &pc->compl;
        }
        int rc = is_put ? rt->cops->put(p->cp, rank, 0, l, len, lmr, remote + *off, rkey, cc,
                                        flags)
                        : rt->cops->get(p->cp, rank, 0, l, len, lmr, remote + *off, rkey, cc,
                                        flags);
        if (rc != FH_OK) {
            free(pc);
            return rc;
        }
        if (pc != NULL) {
            p->bulk_bytes += len;
#ifdef FH_TEST_HOOKS
            fh_test_bulk_bytes = p->bulk_bytes;
            FH_TEST_POINT(FH_TP_BULK_POSTED);
#endif
        }
        fh_ctr_add(ctr);
        p->inflight++;
        *off += len;
    }
    return FH_OK;
}

/* Appends q to a queue of p given by its head and tail pointers. */
static void enqueue(fh_rma_pend_t **head, fh_rma_pend_t ***tail, fh_rma_pend_t *q)
{
    q->next = NULL;
    if (*head == NULL)
        *tail = head;
    **tail = q;
    *tail = &q->next;
}

/* q is over (all posted, or failed with rc): counts it out. */
static void pend_done(fh_path_t *p, fh_rma_pend_t *q, int rc)
{
    if (rc != FH_OK)
        fh_log_verbose(1, "queued %s to %s failed at post: %s", q->is_put ? "put" : "get",
                       FH_RANK_NAME(q->rank), fh_strerror(rc));
    fh_ctr_complete(q->ctr, rc);
    assert(p->inflight > 0);
    p->inflight--;
    free(q);
}

/* Posts the held bulk transfers, oldest first, while the budget lasts.
 * Returns false when the conduit is out of transmit resources. */
static bool drain_held(fh_path_t *p)
{
    fh_rma_pend_t *q;
    while ((q = p->rma_held) != NULL) {
        int rc = post_from(p, q->is_put, q->rank, q->local, q->lmr, q->remote, q->n, &q->off,
                           &q->rkey, q->ctr);
        if (rc == POST_HELD)
            return true;
        if (rc == FH_ERR_AGAIN)
            return false;
        p->rma_held = q->next;
        pend_done(p, q, rc);
    }
    return true;
}

/* Posts the transfers queued on p, in order: the held bulk while the
 * budget lasts, then those that waited for transmit resources until the
 * conduit has none again (p->lock held; the path's poll, rma_poll_after). */
static void drain_locked(fh_path_t *p)
{
    if (!drain_held(p))
        return;
    fh_rma_pend_t *q;
    while ((q = p->rma_pend) != NULL) {
        /* Bulk keeps its order behind held bulk; the rest passes it. */
        int rc = p->rma_held != NULL && q->n >= FH_BULK_MIN && bulk_bounded(p)
                     ? POST_HELD
                     : post_from(p, q->is_put, q->rank, q->local, q->lmr, q->remote, q->n,
                                 &q->off, &q->rkey, q->ctr);
        if (rc == FH_ERR_AGAIN)
            return;                 /* the next poll goes on, in order */
        p->rma_pend = q->next;
        if (rc == POST_HELD)
            enqueue(&p->rma_held, &p->rma_held_tail, q);
        else
            pend_done(p, q, rc);
    }
}

static int rma_poll_after(fh_path_t *p, int found)
{
    (void)found;
    if (p->rma_pend != NULL || p->rma_held != NULL)
        drain_locked(p);
    return 0;
}

/* Frees what is still queued on p (teardown). */
static void rma_path_fini(fh_path_t *p)
{
    fh_rma_pend_t **lists[] = {&p->rma_pend, &p->rma_held};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        while (*lists[i] != NULL) {
            fh_rma_pend_t *q = *lists[i];
            *lists[i] = q->next;
            free(q);
        }
}

const fh_poller_t fh_rma_poller = {"rma", FH_POLL_AFTER, rma_poll_after, rma_path_fini};

/* Queues [off, n) on p's pending (held: held) list (p->lock held).
 * Returns false when out of memory. */
static bool queue_rest(fh_path_t *p, bool held, bool is_put, int rank, char *local,
                       struct fh_mr *lmr, uint64_t remote, size_t off, size_t n,
                       const fh_rkey_t *rkey, fh_ctr_t *ctr)
{
    fh_rma_pend_t *q = malloc(sizeof *q);
    if (q == NULL)
        return false;
    *q = (fh_rma_pend_t){.is_put = is_put, .rank = rank, .local = local, .lmr = lmr,
                         .remote = remote, .off = off, .n = n, .rkey = *rkey, .ctr = ctr};
    if (held)
        enqueue(&p->rma_held, &p->rma_held_tail, q);
    else
        enqueue(&p->rma_pend, &p->rma_pend_tail, q);
    fh_ctr_add(ctr);
    p->inflight++;
    return true;
}

int fh_post(fh_tls_t *t, bool is_put, int rank, void *local, struct fh_mr *lmr,
            uint64_t remote, size_t n, const fh_rkey_t *rkey, fh_ctr_t *ctr, bool count)
{
    fh_path_t *p = t->path;
    int rc = FH_ERR_AGAIN;
    size_t off = 0;
    pthread_mutex_lock(&p->lock);
    /* Behind transfers already queued: they wait for the same transmit
     * resources; bulk also behind held bulk (the budget), which smaller
     * transfers pass. */
    if (p->rma_held != NULL && n >= FH_BULK_MIN && bulk_bounded(p))
        rc = POST_HELD;
    else if (p->rma_pend == NULL)
        rc = post_from(p, is_put, rank, local, lmr, remote, n, &off, rkey, ctr);
    if (rc == FH_ERR_AGAIN || rc == POST_HELD)
        rc = queue_rest(p, rc == POST_HELD, is_put, rank, local, lmr, remote, off, n, rkey,
                        ctr)
                 ? FH_OK : FH_ERR_NO_MEMORY;
    if (rc == FH_OK && count)
        fh_stat_rma(&p->base, rank, is_put, n);
    pthread_mutex_unlock(&p->lock);
    if (rc != FH_OK)
        return fh_set_error(rc, "%s %s %s at 0x%llx (+%zu) failed: %s",
                            is_put ? "put" : "get", is_put ? "to" : "from", FH_RANK_NAME(rank),
                            (unsigned long long)remote, n, fh_strerror(rc));
    return FH_OK;
}
