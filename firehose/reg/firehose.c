/*
 * firehose.c -- FH_REG_STRATEGY=firehose: the registration cache (cache/fhc.h,
 * docs/firehose-cache.md) wired into the runtime.  Its companions:
 * firehose_env.c (the cache's environment), firehose_seg.c (segments and
 * counters), firehose_xfer.c (asynchronous transfers) and firehose_hit.c
 * (the lock-free per-thread hit layer); shared state in firehose_internal.h.
 *
 * One fhc_t per rank behind one mutex (g->lock; the core is single-threaded).
 * Lock order: a path lock may be held when g->lock is taken (completions and
 * the move handlers run under a path lock), never the reverse: nothing
 * sends, polls or takes a path lock while holding g->lock.
 *
 * Messages.  env->send never sends: a move REQUEST is appended to the outbox
 * (under g->lock) and sent later by fh_reg_flush() from a thread outside any
 * handler, one at a time under g->flush_lock, in order, always on the service
 * path (so requests from us to one target stay in order, as fhc expects).  A
 * move REPLY is only ever produced while serving a request in the
 * FH_H_MOVE_REQ handler; it is captured and sent as that request's AM reply.
 * Requests can be queued by any fhc call -- an acquire, a release at RDMA
 * completion, a reply that wakes waiters -- so EVERY progressing thread
 * flushes (fh_reg_progress from fh_progress, hence every wait), not only the
 * thread whose operation needs the move.  A request that cannot be sent
 * (peer dead) is answered locally with an error reply, which completes the
 * operations waiting for it with that error.
 *
 * Chunks the target will not register (FH_SEGMENT=everything: a file
 * mapping, the other run of a held region) travel by copies
 * (firehose_copy.c), whose messages fh_reg_flush sends too.
 *
 * Operations never block inside the cache: a miss returns at once and the
 * chunk proceeds when its move reply (or budget) arrives; see firehose_xfer.c.
 *
 * Local buffers that need a registration are pinned through the cache after
 * the remote firehoses (firehose_local.c, from firehose_xfer.c).  Freed memory
 * (firehose_revoke.c): pending memory-monitor events are turned into fhc_invalidate
 * before every fhc lookup, local pin and served move (fh_mm_sync_locked);
 * the hit layer checks the monitor's state word and takes the locked path
 * when events are pending (firehose_hit.c); env_pin caches only what the monitor
 * watches (fh_mm_may_cache).  A REVOKE from a peer also drops the hit
 * layer's references on the revoked firehose (reg_hit_revoke) before fhc
 * can acknowledge it.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "firehose/cache/fhc_wire.h"
#include "firehose_internal.h"
#include "reg.h"

/* ------------------------------------------------------------ messages */

/* A move request to peer could not be sent: answer it ourselves with an
 * error reply so the operations waiting for it complete with rc. */
static void fail_move(struct fh_reg *g, const reg_msg_t *m, int rc)
{
    if (fhc_wire_kind(m->bytes, m->len) != FHC_WIRE_REQ)
        return;     /* a REVOKE or REVOKE-ACK: nobody waits for a reply */
    fhc_rep_t rep = {.token = fhc_req_peek_token(m->bytes, m->len), .status = rc,
                     .nreg = 0};
    unsigned char buf[REG_REPLY_MAX];
    size_t len = fhc_rep_encode(&rep, buf, sizeof buf);
    pthread_mutex_lock(&g->lock);
    if (len != 0 && g->c != NULL) {
        fhc_on_message(g->c, m->peer, 1, buf, len);
        reg_hit_budget(g, m->peer);
    }
    pthread_mutex_unlock(&g->lock);
}

/* Whether the list l holds a message to peer. */
static bool has_peer(const reg_msg_t *l, uint32_t peer)
{
    for (; l != NULL; l = l->next)
        if (l->peer == peer)
            return true;
    return false;
}

/* Sends the queued move requests on the service path, in order per peer.
 * Outside handlers, no lock held.  If another thread is flushing, it sends
 * ours too: it loops until the outbox is empty, and looks again after
 * dropping the flush lock (a request queued just before would otherwise
 * wait for the next progressing thread).  Waits for nothing: a request
 * without a credit or transmit resources (its peer is not polling; on
 * libfabric tcp and shm also our first message to it) is kept, with every
 * later one to the same peer, and put back at the head of the outbox for
 * the next progress call (fh_reg_progress) -- so a non-blocking put or get
 * that misses returns at once, and a peer that does not poll delays only
 * the requests to it. */
void fh_reg_flush(fh_thread_t *t)
{
    struct fh_reg *g = fh_reg_core->reg;
    if (g == NULL)
        return;
    bool kept_some = false;
    while (!kept_some && __atomic_load_n(&g->out, __ATOMIC_RELAXED) != NULL &&
           pthread_mutex_trylock(&g->flush_lock) == 0) {
        reg_msg_t *kept = NULL, **kept_tail = &kept;
        for (;;) {
            pthread_mutex_lock(&g->lock);
            reg_msg_t *m = g->out;
            if (m != NULL) {
                __atomic_store_n(&g->out, m->next, __ATOMIC_RELAXED);
                if (g->out == NULL)
                    g->out_tail = &g->out;
            } else if (kept != NULL) {
                /* Back, in their order (the outbox is empty now). */
                __atomic_store_n(&g->out, kept, __ATOMIC_RELAXED);
                g->out_tail = kept_tail;
                kept_some = true;
            }
            pthread_mutex_unlock(&g->lock);
            if (m == NULL)
                break;
            int rc = FH_ERR_AGAIN;
            if (!has_peer(kept, m->peer))
                rc = svc_am_try_request(t, fh_reg_core->svc_path, (int)m->peer,
                                        FH_SVC_AM_MEDIUM, FH_H_MOVE_REQ, m->bytes, m->len,
                                        NULL, 0);
            if (rc == FH_ERR_AGAIN) {
                m->next = NULL;
                *kept_tail = m;
                kept_tail = &m->next;
                continue;
            }
            if (rc != FH_OK) {
                if (!atomic_load(&fh_reg_core->finalizing))
                    fh_log_error("firehose cache: cannot send a cache message to "
                                 "%s: %s; its operations fail", FH_RANK_NAME((int)m->peer),
                                 fh_strerror(rc));
                fail_move(g, m, rc);
            }
            free(m);
        }
        pthread_mutex_unlock(&g->flush_lock);
    }
    if (__atomic_load_n(&g->ncopies, __ATOMIC_RELAXED) != 0 &&
        pthread_mutex_trylock(&g->flush_lock) == 0) {
        reg_copy_flush(t, g);     /* firehose_copy.c */
        pthread_mutex_unlock(&g->flush_lock);
    }
}

void fh_reg_progress(fh_thread_t *t)
{
    if (t->in_handler == 0)
        fh_reg_flush(t);
}

static void h_move_req(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                       unsigned nargs)
{
    (void)args;
    (void)nargs;
    struct fh_reg *g = fh_reg_core->reg;
    int src;
    svc_token_source(tok, &src);
    if (g == NULL) {
        fh_log_error("dropped a firehose move from %s: FH_REG_STRATEGY differs", FH_RANK_NAME(src));
        return;
    }
    unsigned char rep[REG_REPLY_MAX];
    size_t len;
    pthread_mutex_lock(&g->lock);
    g->capturing = 1;
    g->cap_len = 0;
    fh_mm_sync_locked(fh_reg_core, g->c);    /* never grant memory known to be freed */
    g->cap_peer = (uint32_t)src;
    fhc_on_message(g->c, (uint32_t)src, 0, buf, nbytes);
    if (fhc_wire_kind(buf, nbytes) == FHC_WIRE_REVOKE)
        reg_hit_revoke(g, (uint32_t)src);  /* cached references let go (acks) */
    else if (fhc_wire_kind(buf, nbytes) == FHC_WIRE_RECLAIM ||
             fhc_wire_kind(buf, nbytes) == FHC_WIRE_REP)
        reg_hit_budget(g, (uint32_t)src);  /* idle references back (A3) */
    else
        reg_check(g, (uint32_t)src);
    len = g->cap_len;
    memcpy(rep, g->cap, len);
    g->capturing = 0;
    g->cap_len = 0;
    pthread_mutex_unlock(&g->lock);
    if (len != 0)
        svc_am_reply_medium(tok, FH_H_MOVE_REP, rep, len);
}

static void h_move_rep(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                       unsigned nargs)
{
    (void)args;
    (void)nargs;
    struct fh_reg *g = fh_reg_core->reg;
    int src;
    svc_token_source(tok, &src);
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    fhc_on_message(g->c, (uint32_t)src, 1, buf, nbytes);
    reg_hit_budget(g, (uint32_t)src);
    pthread_mutex_unlock(&g->lock);
    /* Requests it produced (budget waiters woken) wait in the outbox for
     * the next progressing thread (fh_reg_progress). */
}

/* ------------------------------------------------------------ life cycle */

/* What this host lets us pin: min(conduit limit, 2/3 RAM), and
 * RLIMIT_MEMLOCK only where registration really pins (limits.reg_pins):
 * over tcp or shm nothing is locked, and `ulimit -l` must not cap the job. */
static size_t fh_reg_pinnable(const fh_core_t *rt)
{
    size_t lim = SIZE_MAX;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0)
        lim = (size_t)pages / 3 * 2 * (size_t)psz;
    struct rlimit rl;
    if (rt->limits.reg_pins && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
        rl.rlim_cur != RLIM_INFINITY && (size_t)rl.rlim_cur < lim)
        lim = (size_t)rl.rlim_cur;
    if (rt->limits.max_mr_bytes && rt->limits.max_mr_bytes < lim)
        lim = rt->limits.max_mr_bytes;
    return lim;
}

/* F = M / (N-1) must hold at least one bucket.  A job with more ranks than
 * M / FH_BUCKET_SIZE + 1 gets smaller buckets (halved down to the page
 * size; every rank computes the same from the agreed M), said once by rank
 * 0.  When even a page per peer does not fit, the error says what to
 * raise.  Returns the bucket size or 0 (error set). */
static size_t fit_bucket(const fh_core_t *rt, size_t bucket, size_t page, size_t M)
{
    size_t peers = (size_t)rt->nranks - 1;
    if (peers == 0 || M / peers >= bucket)
        return bucket;
    if (M / peers < page) {
        const char *what = rt->cfg.firehose_m ? "FH_FIREHOSE_M"
                           : rt->limits.reg_pins ? "3/4 of ulimit -l (RLIMIT_MEMLOCK)"
                                                 : "3/4 of the conduit's limit";
        const char *fix = rt->cfg.firehose_m || !rt->limits.reg_pins
                              ? "raise FH_FIREHOSE_M"
                              : "raise ulimit -l or set FH_FIREHOSE_M";
        fh_set_error(FH_ERR_CONFIG, "fh_init: FH_REG_STRATEGY=firehose with %d ranks needs "
                     "FH_FIREHOSE_M >= %zu bytes (a page per peer), but M is %zu (%s, "
                     "smallest over ranks): %s, or use FH_REG_STRATEGY=rendezvous",
                     rt->nranks, page * peers, M, what, fix);
        return 0;
    }
    size_t b = bucket;
    while (M / peers < b)
        b >>= 1;
    if (rt->rank == 0)
        fh_log_error("firehose cache: FH_BUCKET_SIZE lowered from %zu to %zu so that each "
                     "of %zu peers gets a bucket of M=%zu; raise FH_FIREHOSE_M%s to keep it",
                     bucket, b, peers, M, rt->limits.reg_pins ? " (ulimit -l)" : "");
    return b;
}

int fh_reg_init(fh_core_t *rt)
{
    struct fh_reg *g = calloc(1, sizeof *g);
    if (g == NULL)
        return FH_ERR_NO_MEMORY;
    pthread_mutex_init(&g->lock, NULL);
    pthread_mutex_init(&g->flush_lock, NULL);
    g->out_tail = &g->out;
    g->bucket = rt->cfg.bucket_size;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (g->bucket < page)
        g->bucket = page;
    while (((size_t)1 << g->bshift) < g->bucket)
        g->bshift++;
    g->nranks = rt->nranks;
    g->check = rt->cfg.reg_check;
    g->hpeer = calloc((size_t)rt->nranks, sizeof *g->hpeer);
    if (g->hpeer == NULL) {
        free(g);
        return FH_ERR_NO_MEMORY;
    }

    /* Derived sizes may differ between hosts; fhc needs them equal: take
     * the minimum over all ranks. */
    size_t lim = fh_reg_pinnable(rt);
    uint64_t mine[3] = {rt->cfg.firehose_m ? rt->cfg.firehose_m : lim / 4 * 3,
                        rt->cfg.firehose_maxvictim ? rt->cfg.firehose_maxvictim : lim / 4,
                        rt->cfg.firehose_maxvictim_max};
    /* MAXVICTIM_MAX 0: 4 x MAXVICTIM, but never more than lim leaves beside
     * M (RLIMIT_MEMLOCK where registration pins), never below MAXVICTIM. */
    if (mine[2] == 0) {
        mine[2] = mine[1] <= UINT64_MAX / 4 ? mine[1] * 4 : mine[1];
        uint64_t left = lim > mine[0] ? lim - mine[0] : 0;
        if (mine[2] > left)
            mine[2] = left;
        if (mine[2] < mine[1])
            mine[2] = mine[1];
    }
    uint64_t *all = calloc((size_t)rt->nranks, sizeof mine);
    if (all == NULL || rt->boot->ops->allgather(rt->boot, mine, all, sizeof mine) != FH_OK) {
        free(all);
        free(g->hpeer);
        free(g);
        return fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: firehose cache size exchange failed");
    }
    for (int r = 0; r < rt->nranks; r++) {
        for (int k = 0; k < 3; k++)
            if (all[3 * r + k] < mine[k])
                mine[k] = all[3 * r + k];
    }
    free(all);
    g->M = (size_t)mine[0];
    g->maxvictim = (size_t)mine[1];
    size_t mvmax = mine[2] < mine[1] ? (size_t)mine[1] : (size_t)mine[2];
    if ((g->bucket = fit_bucket(rt, g->bucket, page, g->M)) == 0) {
        free(g->hpeer);
        free(g);
        return FH_ERR_CONFIG;
    }
    for (g->bshift = 0; ((size_t)1 << g->bshift) < g->bucket;)
        g->bshift++;

    size_t pim = rt->cfg.put_in_move;
    if (rt->am_max_medium < REG_REQ_FIXED + 64)
        pim = 0;
    else if (pim > rt->am_max_medium - REG_REQ_FIXED)
        pim = rt->am_max_medium - REG_REQ_FIXED;
    fhc_params_t p = {.nranks = (uint32_t)rt->nranks, .rank = (uint32_t)rt->rank,
                      .bucket = g->bucket, .region_max = rt->cfg.region_max,
                      .M = g->M, .maxvictim = g->maxvictim, .put_in_move = pim,
                      .maxvictim_max = mvmax,
                      .victim_adaptive = rt->cfg.firehose_victim == FH_VICTIM_ADAPTIVE,
                      .budget = rt->cfg.firehose_budget == FH_FIREHOSE_BUDGET_ADAPTIVE
                                    ? FHC_BUDGET_ADAPTIVE : FHC_BUDGET_STATIC};
    fhc_env_t env = fh_reg_env(g);
    char why[200] = "";
    int rc = fhc_create(&p, &env, &g->c, why, sizeof why);
    if (rc != 0) {
        size_t b = g->bucket;
        free(g->hpeer);
        free(g);
        return fh_set_error(rc == FHC_ERR_CONFIG ? FH_ERR_CONFIG : rc,
                            "fh_init: FH_REG_STRATEGY=firehose: %s (M=%zu, N=%d, "
                            "FH_BUCKET_SIZE=%zu)", why, (size_t)mine[0], rt->nranks, b);
    }
    g->R = fhc_region_max(g->c);
    rt->reg = g;
    if ((rc = fh_mm_init(rt)) != FH_OK) {
        rt->reg = NULL;
        fhc_destroy(g->c);
        free(g->hpeer);
        free(g);
        return rc;
    }
    svc_am_register(FH_H_MOVE_REQ, h_move_req, "firehose-move-req");
    svc_am_register(FH_H_MOVE_REP, h_move_rep, "firehose-move-rep");
    reg_copy_register_handlers();
    rt->reg = g;
    if (rt->cfg.verbose >= 1 && rt->rank == 0)
        fh_log_verbose(1, "firehose cache: M=%zu MAXVICTIM=%zu F=%zu R=%zu B=%zu "
                       "put_in_move=%zu victim=%s MAXVICTIM_MAX=%zu", g->M, g->maxvictim,
                       fhc_F(g->c), fhc_region_max(g->c), g->bucket, pim,
                       p.victim_adaptive ? "adaptive" : "static", p.victim_adaptive ? mvmax
                                                                                : g->maxvictim);
    return FH_OK;
}

void fh_reg_fini(fh_core_t *rt)
{
    struct fh_reg *g = rt->reg;
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    fhc_destroy(g->c);
    g->c = NULL;
    reg_hit_fini(g);
    while (g->out != NULL) {
        reg_msg_t *m = g->out;
        g->out = m->next;
        free(m);
    }
    reg_copy_fini(g);
    pthread_mutex_unlock(&g->lock);
    fh_mm_fini(rt);    /* before unmapping watched memory: no reader after this */
    for (size_t i = 0; i < g->nretired; i++)
        munmap((void *)g->retired[i].base, g->retired[i].end - g->retired[i].base);
    free(g->retired);
    free(g->spans);
    free(g->hpeer);
    rt->reg = NULL;
    free(g);
}

struct fhc *fh_reg_lock(fh_core_t *rt)
{
    pthread_mutex_lock(&rt->reg->lock);
    return rt->reg->c;
}

void fh_reg_unlock(fh_core_t *rt)
{
    pthread_mutex_unlock(&rt->reg->lock);
}

size_t fh_reg_bucket(const fh_core_t *rt)
{
    return rt->reg ? rt->reg->bucket : 0;
}

/* Segment bases on a frame (R) boundary: the cache cuts transfers at
 * frames, so a transfer at an R-aligned offset of a segment is one chunk
 * per R bytes, not one more (one more RDMA, lookup and completion) where
 * it would straddle a frame. */
static size_t reg_frame(const fh_core_t *rt)
{
    return rt->reg ? rt->reg->R : 0;
}

size_t fh_reg_m(const fh_core_t *rt)
{
    if (rt->reg != NULL)
        return rt->reg->M;
    return rt->cfg.firehose_m ? rt->cfg.firehose_m : fh_reg_pinnable(rt) / 4 * 3;
}

/* ------------------------------------------------------------ table */

static int fhs_xfer(fh_thread_t *t, bool is_put, int rank, char *local, struct fh_mr *lmr,
                    uint64_t remote, size_t n, const fh_rkey_t *rkey, fh_ctr_t *ctr,
                    bool own_lmr)
{
    (void)rkey;      /* the key comes with the firehose */
    (void)own_lmr;   /* no FH_REG_CAP_NB_OWNS_LMR: local pins are the cache's */
    return fh_reg_xfer(t, is_put, rank, local, lmr, remote, n, ctr);
}

static void fhs_on_entry(fh_thread_t *t)
{
    if (fh_reg_core->mm != NULL)
        fh_mm_entry(t);     /* freed memory: invalidate, revoke (firehose_revoke.c) */
}

static void fhs_path_init(fh_path_base_t *p)
{
    p->reg_retry_tail = &p->reg_retry;
    p->reg_held_tail = &p->reg_held;
}

static bool fhs_path_busy(const fh_path_base_t *p)
{
    return p->reg_retry != NULL || p->reg_held != NULL ||
           atomic_load_explicit(&p->reg_ready, memory_order_relaxed) != NULL;
}

static void fhs_poll_end(fh_path_base_t *p)
{
    if (fhs_path_busy(p))
        fh_reg_drain_locked(p);
}

/* reg.h link_lost: moves travel on the service path, to the peer's; when
 * that link is lost their replies never come: each move in flight fails as
 * if refused (fhc_peer_lost), its transfers with FH_ERR_PEER_DEAD.  The
 * link is not made again: later moves fail when sent (fh_reg_flush). */
static void fhs_link_lost(fh_path_base_t *p, int rank)
{
    struct fh_reg *g = fh_reg_core->reg;
    if (g == NULL || p != fh_reg_core->svc_path)
        return;
    unsigned n = 0;
    pthread_mutex_lock(&g->lock);
    if (g->c != NULL) {
        n = fhc_peer_lost(g->c, (uint32_t)rank, FH_ERR_PEER_DEAD);
        reg_hit_budget(g, (uint32_t)rank);
    }
    n += reg_copy_lost(g, rank, FH_ERR_PEER_DEAD);
    pthread_mutex_unlock(&g->lock);
    if (n != 0)
        fh_log_error("firehose cache: the link to %s was lost with %u move%s or copied "
                     "chunk%s waiting for a reply: %s transfers fail", FH_RANK_NAME(rank), n,
                     n == 1 ? "" : "s", n == 1 ? "" : "s", n == 1 ? "its" : "their");
}

const fh_reg_ops_t fh_reg_firehose = {
    .name = "firehose",
    .caps = FH_REG_CAP_ANY_ADDRESS | FH_REG_CAP_SEG_REVOKE,
    .init = fh_reg_init,
    .fini = fh_reg_fini,
    .seg_align = fh_reg_bucket,
    .seg_base_align = reg_frame,
    .seg_expose = fh_reg_seg_expose,
    .seg_retire = fh_reg_unexpose_and_retire,
    .seg_release = fh_reg_seg_release_op,
    .seg_reprotect = fh_reg_seg_reprotect,
    .xfer = fhs_xfer,
    .on_entry = fhs_on_entry,
    .may_publish = fh_mm_may_publish,
    .progress = fh_reg_progress,
    .path_init = fhs_path_init,
    .path_fini = fh_reg_path_fini,
    .poll_end = fhs_poll_end,
    .path_busy = fhs_path_busy,
    .link_lost = fhs_link_lost,
    .peer_lost = fh_reg_peer_lost,
    .thread_exit = fh_reg_thread_exit,
    .stats = fh_reg_stats,
};
