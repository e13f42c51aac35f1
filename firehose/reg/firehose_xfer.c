/*
 * firehose_xfer.c -- asynchronous put/get through the firehose cache.
 *
 * fh_reg_xfer() splits a transfer into chunks (never crossing a frame, see
 * fhc.h; fhc cuts a chunk after its first run when it meets both resident
 * and cold buckets, fhc_op.may_split, so the resident run goes out while
 * the cold run's move is in flight) and gives each a heap record (reg_xop_t) counted in the caller's
 * counter (stack counter of a blocking call, NB handle slot, or the
 * thread's NBI counter) and in path->inflight, so fh_wait/fh_wait_nbi/
 * fh_quiet see it.  Then, per chunk:
 *   - hit-layer hit (firehose_hit.c): one piece with the cached key, posted now;
 *   - otherwise fhc_acquire under g->lock:
 *       FHC_HIT      posted now (and cached in the hit layer if one region);
 *       FHC_PENDING  the call returns; fhc calls reg_xop_ready() later, from
 *                    the move reply handler or from a release that served
 *                    the budget queue, on whatever thread holds g->lock;
 *       error        returned at once (chunks already submitted still
 *                    complete into the counter).
 * reg_xop_ready() only pushes the record on its path's lock-free ready list
 * (path->reg_ready, a Treiber stack taken whole with an exchange).  Whoever
 * polls that path next -- its owner, a thread waiting on the service path,
 * or a waiting thread's help (fh_wait_round) -- drains it in fh_path_poll_locked: errors and
 * put-in-move (FHC_DONE_IN_MOVE) complete the chunk at once, hits post one
 * RDMA per piece (split at the conduit's message limit) with the record as
 * op_ctx (&x->pc.compl, whose done is piece_done).  When the last piece completes the
 * chunk releases its reference -- the hit-layer entry, or fhc_release under
 * g->lock (path lock -> g->lock) -- and completes the caller's counter.
 * If the conduit runs out of send resources, the record waits at the head
 * of the path's retry list for the next poll.  A bulk chunk (FH_BULK_* in
 * services.h) that finds the path's bulk budget spent moves to the path's
 * held list, in order; each drain tries the held list's head first and
 * stops there while it does not fit (one check per poll, whatever the
 * number held).
 *
 * Memory monitor and local pins (docs/firehose-cache.md, "Memory that is
 * freed or reused", "Local pins"):
 *   - the locked lookup first processes pending monitor events
 *     (fh_mm_sync_locked); the hit layer checks the monitor inline and
 *     misses to it while events are pending;
 *   - a HIT chunk about to be posted pins its local buffer if the conduit
 *     needs a registration (local_pin -> firehose_local.c; remote firehoses are
 *     held by then: "pin remote before local"; a cached local pin, else a
 *     temporary registration of exactly the chunk's bytes -- never a
 *     wait); pieces are split at local region boundaries; the pin is
 *     released when the last piece completed, before the remote reference;
 *   - revocation needs nothing here: a move answered FHC_ERR_AGAIN is
 *     re-sent by fhc (the record stays pending), a revoked firehose in use
 *     by a chunk is acked by fhc when the chunk releases it, and the hit
 *     layer drops its revoked entries (reg_hit_revoke, from the handler).
 *
 * Every counter update happens under the record's path lock (counters are
 * not atomic): records are submitted and drained on the submitting thread's
 * path, where its counters live.
 */
#include <assert.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "firehose/util/test_point.h"
#include "firehose_internal.h"

static size_t post_limit(const fh_core_t *rt)
{
    size_t c = rt->cfg.xfer_chunk;
    if (rt->limits.max_msg && rt->limits.max_msg < c)
        c = rt->limits.max_msg;
    return c;
}

void reg_xop_push_ready(reg_xop_t *x)
{
    fh_path_base_t *p = x->path;
    struct reg_xop *head = atomic_load_explicit(&p->reg_ready, memory_order_relaxed);
    do {
        x->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&p->reg_ready, &head, x,
                                                    memory_order_release,
                                                    memory_order_relaxed));
}

/* fhc's ready() for chunk records (g->lock held). */
static void reg_xop_ready(fhc_op_t *op, int status)
{
    reg_xop_t *x = op->user;
    x->status = status;
    reg_xop_push_ready(x);
}

/* Chunk records are recycled per path (p->lock held): a blocking 8-byte
 * put on a hit would otherwise malloc and free ~2 KiB every time. */
#define XOP_KEEP 64

static reg_xop_t *xop_alloc(fh_path_base_t *p)
{
    reg_xop_t *x = p->reg_free;
    if (x == NULL)
        return malloc(sizeof *x);
    p->reg_free = x->next;
    p->reg_nfree--;
    return x;
}

static void xop_free(fh_path_base_t *p, reg_xop_t *x)
{
    if (p->reg_nfree >= XOP_KEEP) {
        free(x);
        return;
    }
    x->next = p->reg_free;
    p->reg_free = x;
    p->reg_nfree++;
}

void fh_reg_path_fini(fh_path_base_t *p)
{
    while (p->reg_free != NULL) {
        reg_xop_t *x = p->reg_free;
        p->reg_free = x->next;
        free(x);
    }
    p->reg_nfree = 0;
}

/* The chunk is over: count it in the caller's counter.  p->lock held. */
static void chunk_done(fh_path_base_t *p, reg_xop_t *x, int status)
{
    assert(x->pc.pending == 0 && x->path == p);
    fh_ctr_complete(x->uctr, status);
    assert(p->inflight > 0);
    p->inflight--;
    xop_free(p, x);
}

/* Every piece of a HIT chunk completed: release, then finish. */
static void pieces_done(fh_path_base_t *p, reg_xop_t *x)
{
    if (x->bulk != 0) {       /* the path's bulk budget back (services.h) */
        assert(p->bulk_bytes >= x->bulk);
        p->bulk_bytes -= x->bulk;
        x->bulk = 0;
    }
    /* Local before remote (the reverse of acquisition). */
    if (x->lpinned) {
        fh_reg_local_release(fh_reg_core, &x->lp);
        x->lpinned = false;
    }
    if (x->ent != NULL) {
        reg_hit_unref(x->ent);
    } else {
        struct fh_reg *g = fh_reg_core->reg;
        pthread_mutex_lock(&g->lock);
        fhc_release(g->c, &x->op);
        reg_hit_budget(g, x->op.peer);
        pthread_mutex_unlock(&g->lock);
    }
    chunk_done(p, x, x->pc.status);
}

/* The completion record of every piece of x (x->pc.compl, x's first
 * member); path.c has already decremented p->inflight. */
static void piece_done(fh_compl_t *c, fh_path_base_t *p, int status)
{
    reg_xop_t *x = (reg_xop_t *)c;
    assert(x->path == p && x->pc.pending > 0);
    fh_ctr_complete(&x->pc, status);
    if (x->pc.pending == 0)
        pieces_done(p, x);
}

/* post_pieces: x waits for the path's bulk budget (FH_BULK_* in
 * reg/services.h); smaller records behind it may go first. */
#define POST_HELD 1

/* A chunk x to post is bulk (FH_BULK_MIN in reg/services.h). */
static bool is_bulk(const reg_xop_t *x)
{
    return x->status == FHC_HIT && !x->noxfer && x->op.len >= FH_BULK_MIN;
}

/* The path's bulk budget applies (FH_BULK_* in reg/services.h): the
 * service path, or a thread path another thread is bound to as well. */
static bool bulk_bounded(const fh_path_base_t *p)
{
    return p->index == 0 || atomic_load_explicit(&p->bulk_shared, memory_order_relaxed);
}

/* Posts the pieces of x not posted yet.  p->lock held.  Returns FH_OK (all
 * posted, or a hard error recorded in x->pc.status), FH_ERR_AGAIN (out of
 * transmit resources) or POST_HELD (bulk budget spent: nothing of x
 * posted; it goes out as earlier bulk chunks of the path complete).  A
 * bulk chunk takes its whole length of the budget at its first post and
 * gives it back in pieces_done: one check per chunk, whatever its pieces. */
static int post_pieces(fh_path_base_t *p, reg_xop_t *x)
{
    fh_core_t *rt = fh_reg_core;
    size_t lim = post_limit(rt);
    const bool bulk = x->op.len >= FH_BULK_MIN;
    if (bulk && lim > FH_BULK_PIECE)
        lim = FH_BULK_PIECE;
    if (bulk && x->bulk == 0) {
        assert(x->nposted == 0 && x->poff == 0);
        if (bulk_bounded(p) && p->bulk_bytes != 0 &&
            p->bulk_bytes + x->op.len > FH_BULK_BYTES)
            return POST_HELD;
        x->bulk = x->op.len;
        p->bulk_bytes += x->bulk;
#ifdef FH_TEST_HOOKS
        fh_test_bulk_bytes = p->bulk_bytes;
        FH_TEST_POINT(FH_TP_BULK_POSTED);
#endif
    }
    void *ctx = &x->pc.compl;
    while (x->nposted < x->op.npieces) {
        const fhc_piece_t *pc = &x->op.piece[x->nposted];
        fh_rkey_t rk = {pc->key[0], pc->key[1]};
        size_t len = pc->len - x->poff < lim ? pc->len - x->poff : lim;
        uintptr_t ra = pc->addr + x->poff;
        char *l = x->local + (ra - x->op.raddr);
        struct fh_mr *lmr = x->lmr;
        if (x->lpinned) {
            /* Split where the local registrations change (firehose_local.c). */
            size_t max;
            lmr = fh_reg_local_mr(&x->lp, (uintptr_t)l, &max);
            if (len > max)
                len = max;
        }
        bool last = x->nposted + 1 == x->op.npieces && x->poff + len == pc->len;
        unsigned flags = last ? 0 : FH_POST_MORE;
        int rc = x->is_put
                     ? rt->cops->put(p->cp, x->rank, 0, l, len, lmr, ra, &rk, ctx, flags)
                     : rt->cops->get(p->cp, x->rank, 0, l, len, lmr, ra, &rk, ctx, flags);
        if (rc == FH_ERR_AGAIN)
            return rc;
        if (rc != FH_OK) {
            fh_log_verbose(1, "%s to %s failed at post: %s", x->is_put ? "put" : "get",
                           FH_RANK_NAME(x->rank), fh_strerror(rc));
            if (x->pc.status == FH_OK)
                x->pc.status = rc;
            x->nposted = x->op.npieces;
            break;
        }
        x->pc.pending++;
        p->inflight++;
        x->poff += len;
        if (x->poff == pc->len) {
            x->poff = 0;
            x->nposted++;
        }
    }
    return FH_OK;
}

/* The chunk's remote firehoses are held: pin its local buffer if the
 * conduit needs that (cached local pin, else a temporary registration;
 * never waits).  On failure the chunk completes with the error without
 * posting anything.  p->lock held (then g->lock inside). */
static void local_pin(reg_xop_t *x)
{
    int rc = fh_reg_local_pin(fh_reg_core, x->is_put, x->local, x->op.len, &x->lp);
    x->lpinned = true;     /* lp is valid (empty on failure) */
    if (rc != FH_OK) {
        if (x->pc.status == FH_OK)
            x->pc.status = rc;
        x->nposted = x->op.npieces;    /* nothing to post */
    }
}

/* x left the retry or held list with everything of it posted (or
 * nothing to post): drop the posting reference, or finish a chunk that
 * moves no data.  p->lock held. */
static void posted(fh_path_base_t *p, reg_xop_t *x)
{
    x->next = NULL;
    if (x->status == FHC_HIT) {
        assert(x->pc.pending > 0);    /* the posting reference */
        if (--x->pc.pending == 0)
            pieces_done(p, x);
    } else {
        x->pc.pending = 0;
        chunk_done(p, x, x->status == FHC_DONE_IN_MOVE ? FH_OK
                         : x->status == REG_COPY_DONE  ? x->copy_rc
                                                        : x->status);
    }
}

/* Appends x to p's held list (bulk waiting for the budget, in order). */
static void hold(fh_path_base_t *p, reg_xop_t *x)
{
    x->next = NULL;
    *p->reg_held_tail = x;
    p->reg_held_tail = &x->next;
}

/* Posts the held bulk chunks, oldest first, while the budget lasts.
 * Returns FH_ERR_AGAIN when the conduit is out of transmit resources (the
 * head stays; the next poll goes on), else FH_OK.  p->lock held. */
static int drain_held(fh_path_base_t *p)
{
    reg_xop_t *x;
    while ((x = p->reg_held) != NULL) {
        int rc = post_pieces(p, x);
        if (rc == POST_HELD)
            return FH_OK;
        if (rc == FH_ERR_AGAIN)
            return rc;
        p->reg_held = x->next;
        if (p->reg_held == NULL)
            p->reg_held_tail = &p->reg_held;
        posted(p, x);
    }
    return FH_OK;
}

void fh_reg_drain_locked(fh_path_base_t *p)
{
    if (p->reg_draining)
        return;
    p->reg_draining = 1;
    struct reg_xop *l = atomic_exchange_explicit(&p->reg_ready, NULL, memory_order_acquire);
    /* The stack is newest first: reverse it onto the retry list's tail. */
    struct reg_xop *fifo = NULL;
    while (l != NULL) {
        struct reg_xop *n = l->next;
        l->next = fifo;
        fifo = l;
        l = n;
    }
    if (fifo != NULL) {
        *p->reg_retry_tail = fifo;
        while (fifo->next != NULL)
            fifo = fifo->next;
        p->reg_retry_tail = &fifo->next;
    }
    /* Held bulk first (older than any bulk on the retry list); a poll with
     * the budget spent then costs one check, not one per held chunk. */
    if (drain_held(p) == FH_ERR_AGAIN) {
        p->reg_draining = 0;
        return;
    }
    reg_xop_t *x;
    while ((x = p->reg_retry) != NULL) {
        if (x->status == FHC_ERR_OUT_OF_SEGMENT && !x->noxfer) {
            /* Refused by the cache: FH_SEGMENT=everything carries it by
             * copies (firehose_copy.c); it leaves the list either way. */
            p->reg_retry = x->next;
            if (p->reg_retry == NULL)
                p->reg_retry_tail = &p->reg_retry;
            if (!reg_copy_start(p, x))
                posted(p, x);
            continue;
        }
        if (x->status == FHC_HIT && !x->noxfer && !x->lpinned && x->lmr == NULL)
            local_pin(x);
        /* Bulk keeps its order behind held bulk; the rest passes it. */
        int rc = is_bulk(x) && x->bulk == 0 && p->reg_held != NULL ? POST_HELD
                 : x->status == FHC_HIT && !x->noxfer              ? post_pieces(p, x)
                                                                    : FH_OK;
        if (rc == FH_ERR_AGAIN)
            break;     /* the next poll retries, in order */
        p->reg_retry = x->next;
        if (p->reg_retry == NULL)
            p->reg_retry_tail = &p->reg_retry;
        if (rc == POST_HELD)
            hold(p, x);
        else
            posted(p, x);
    }
    p->reg_draining = 0;
}

/* A new record for [raddr, raddr+len) of rank, counted in ctr.  The
 * thread's path lock is held. */
static reg_xop_t *xop_new(fh_thread_t *t, bool is_put, int rank, char *local,
                          struct fh_mr *lmr, uintptr_t raddr, size_t len, fh_ctr_t *ctr)
{
    reg_xop_t *x = xop_alloc(t->path);
    if (x == NULL)
        return NULL;
    /* pending 1: released once every piece is posted; counts for no thread.
     * Its completion record is the chunk's: pieces complete in piece_done. */
    x->pc = (fh_ctr_t){.compl = {.done = piece_done}, .pending = 1, .status = FH_OK};
    x->next = NULL;
    x->path = t->path;
    x->uctr = ctr;
    x->ent = NULL;
    x->local = local;
    x->lmr = lmr;
    x->lpinned = false;
    x->rank = rank;
    x->is_put = is_put;
    x->noxfer = false;
    x->bulk = 0;
    x->status = FHC_PENDING;
    x->nposted = 0;
    x->poff = 0;
    x->op.peer = (uint32_t)rank;
    x->op.raddr = raddr;
    x->op.len = len;
    x->op.put_data = is_put ? local : NULL;
    x->op.ready = reg_xop_ready;
    x->op.user = x;
    x->op.may_split = 0;
    x->op.npieces = 0;
    return x;
}

/* Submits one chunk: p->lock held.  Returns FH_OK or an fhc error. */
static int submit(fh_thread_t *t, reg_xop_t *x)
{
    struct fh_reg *g = fh_reg_core->reg;
    fh_path_base_t *p = t->path;
    fh_ctr_add(x->uctr);
    p->inflight++;
    reg_ent_t *e = reg_hit_lookup(t, x->op.peer, x->op.raddr, x->op.len);
    if (e != NULL) {
        x->ent = e;
        x->status = FHC_HIT;
        x->op.npieces = 1;
        x->op.piece[0] = (fhc_piece_t){.addr = x->op.raddr, .len = x->op.len,
                                       .key = {e->key[0], e->key[1]},
                                       .rbase = e->base, .rlen = e->end - e->base};
    } else {
        pthread_mutex_lock(&g->lock);
        fh_mm_sync_locked(fh_reg_core, g->c);    /* never a stale lookup (firehose_revoke.c) */
        reg_hit_drop_span(g, t, x->op.peer, x->op.raddr, x->op.len);
        int a = fhc_acquire(g->c, &x->op);
        if (a == FHC_HIT) {
            x->status = FHC_HIT;
            if (x->op.npieces == 1)
                reg_hit_install(g, t, x);
        }
        reg_hit_budget(g, x->op.peer);
        pthread_mutex_unlock(&g->lock);
        if (a == FHC_ERR_OUT_OF_SEGMENT && !x->noxfer &&
            fh_reg_core->cfg.segment_mode == FH_SEGMENT_EVERYTHING) {
            x->status = a;    /* the drain carries it by copies */
        } else if (a < 0) {
            fh_ctr_complete(x->uctr, FH_OK);    /* not submitted after all */
            p->inflight--;
            return a;
        }
        if (a == FHC_PENDING)
            return FH_OK;       /* ready() queues it on p->reg_ready */
    }
    *p->reg_retry_tail = x;
    p->reg_retry_tail = &x->next;
    return FH_OK;
}

int fh_reg_xfer(fh_thread_t *t, bool is_put, int rank, char *local, struct fh_mr *lmr,
                uint64_t remote, size_t n, fh_ctr_t *ctr)
{
    fh_core_t *rt = fh_reg_core;
    struct fh_reg *g = rt->reg;
    fh_path_base_t *p = t->path;
    reg_hit_tc(t);
    int rc = FH_OK;
    size_t off = 0;
    pthread_mutex_lock(&p->lock);
    while (off < n) {
        uintptr_t raddr = (uintptr_t)(remote + off);
        size_t len = g->R - raddr % g->R;
        if (len > n - off)
            len = n - off;
        reg_xop_t *x = xop_new(t, is_put, rank, local + off, lmr, raddr, len, ctr);
        if (x == NULL) {
            rc = fh_set_error(FH_ERR_NO_MEMORY, "%s to %s: out of memory",
                              is_put ? "put" : "get", FH_RANK_NAME(rank));
            break;
        }
        x->op.may_split = 1;
        int a = submit(t, x);
        if (a < 0) {
            xop_free(p, x);
            rc = fh_set_error(a, "%s to %s: the firehose cache could not map "
                              "[0x%llx, +%zu): %s", is_put ? "put" : "get", FH_RANK_NAME(rank),
                              (unsigned long long)raddr, len,
                              fh_xfer_strerror(a, fh_reg_core->cfg.segment_mode ==
                                                      FH_SEGMENT_EVERYTHING));
            break;
        }
        len = x->op.len;        /* fhc cut it after a resident run: rest next */
        fh_reg_drain_locked(p);
        if (p->reg_retry != NULL || p->reg_held != NULL)
            svc_progress_locked(p);      /* out of send resources: reap some */
        off += len;
    }
    if (rc == FH_OK)
        fh_stat_rma(p, rank, is_put, n);
    pthread_mutex_unlock(&p->lock);
    fh_reg_flush(t);     /* moves our acquires queued */
    return rc;
}

/* ------------------------------------------------------------ warm */

int fh_reg_hit_warm(fh_thread_t *t, int rank, uintptr_t raddr, size_t len)
{
    fh_core_t *rt = fh_reg_core;
    struct fh_reg *g = rt->reg;
    if (g == NULL || rank < 0 || rank >= rt->nranks || rank == rt->rank || len == 0 ||
        raddr % g->R + len > g->R)
        return FH_ERR_INVALID;
    reg_hit_tc(t);
    for (int attempt = 0; attempt < 100; attempt++) {
        fh_reg_hit_t h;
        if (fh_reg_hit_acquire(t, rank, raddr, len, &h) == FH_OK) {
            fh_reg_hit_release(t, &h);
            return FH_OK;
        }
        /* An acquisition without RDMA: installs the entry on an fhc hit,
         * or waits for the move and releases (the next round hits fhc). */
        fh_ctr_t ctr = FH_CTR_INIT;
        fh_path_base_t *p = t->path;
        pthread_mutex_lock(&p->lock);
        reg_xop_t *x = xop_new(t, false, rank, NULL, NULL, raddr, len, &ctr);
        if (x == NULL) {
            pthread_mutex_unlock(&p->lock);
            return FH_ERR_NO_MEMORY;
        }
        x->noxfer = true;
        int a = submit(t, x);
        if (a == FH_OK)
            fh_reg_drain_locked(p);
        else
            xop_free(p, x);
        pthread_mutex_unlock(&p->lock);
        if (a < 0)
            return a;
        fh_reg_flush(t);
        int rc = svc_wait_ctr(t, &ctr);
        if (rc != FH_OK)
            return rc;
    }
    return FH_ERR_AGAIN;
}
