/*
 * reg.c -- FH_REG_STRATEGY=firehose: the registration cache (cache/fhc.h,
 * docs/firehose-cache.md) wired into the runtime.
 *
 * One fhc_t per rank behind one mutex (g->lock; the core is single-threaded).
 * Lock order: a path lock may be held when g->lock is taken (the move
 * handlers run under the service path lock), never the reverse: nothing
 * sends, polls or takes a path lock while holding g->lock.
 *
 * Messages.  env->send never sends: a move REQUEST is appended to the outbox
 * (under g->lock) and sent later by fh_reg_flush() from a thread outside any
 * handler, one at a time under g->flush_lock, in order, always on the service
 * path (so requests from us to one target stay in order, as fhc expects).  A
 * move REPLY is only ever produced while serving a request in the
 * FH_H_MOVE_REQ handler; it is captured and sent as that request's AM reply.
 * Every queued request belongs to an operation whose thread is waiting in
 * fh_reg_xfer and flushes while it waits, so nothing stays in the outbox.
 *
 * Operations (this first integration): fh_reg_xfer is blocking.  The transfer
 * is split with fhc_chunk_len; each chunk is acquired, on a miss the thread
 * polls (holding no lock) until the op's ready() fired, posts one RDMA per
 * piece, waits for them and releases the chunk.  NB and NBI forms therefore
 * complete before they return (their handle is FH_HANDLE_DONE).
 *
 * Local buffers that need a registration are pinned through the cache after
 * the remote firehoses (reg_local.c).  Freed memory (revoke.c): pending
 * memory-monitor events are turned into fhc_invalidate before every lookup,
 * local pin and served move (fh_mm_sync_locked), and env_pin caches only
 * what the monitor watches (fh_mm_may_cache).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cache/fhc.h"
#include "internal.h"

/* Largest move reply: header + FHC_MAX_PIECES regions (fhc_wire.h). */
#define REG_REPLY_MAX (16u + 40u * FHC_MAX_PIECES)
/* Move request without data: header + FHC_MAX_PIECES releases. */
#define REG_REQ_FIXED (40u + 8u * FHC_MAX_PIECES)

typedef struct reg_msg {
    struct reg_msg *next;
    uint32_t peer;
    size_t len;
    unsigned char bytes[];
} reg_msg_t;

typedef struct reg_span {
    uintptr_t base, end;
} reg_span_t;

struct fh_reg {
    pthread_mutex_t lock;          /* the cache, outbox, capture, spans */
    fhc_t *c;
    reg_msg_t *out, **out_tail;    /* requests to send */
    pthread_mutex_t flush_lock;    /* one sender at a time: keeps order */
    int capturing;                 /* inside the MOVE_REQ handler */
    size_t cap_len;
    unsigned char cap[REG_REPLY_MAX];
    reg_span_t *spans;             /* exposed segment memory (allowed()) */
    size_t nspans, capspans;
    reg_span_t *retired;           /* unmapped at fini */
    size_t nretired, capretired;
    size_t bucket, M, maxvictim;
};

/* ------------------------------------------------------------ env */

static int env_pin(void *arg, uintptr_t addr, size_t len, int remote, void **mr,
                   uint64_t key[2])
{
    (void)arg;
    fh_rt_t *rt = fh_rt;
    if (!fh_mm_may_cache(rt, addr, len, remote))
        return FHC_ERR_INVALID;    /* not retried: the memory cannot be watched */
    unsigned acc = FH_MR_LOCAL | (remote ? FH_MR_REMOTE_READ | FH_MR_REMOTE_WRITE : 0);
    fh_rkey_t rk = {0, 0};
    struct fh_mr *m = NULL;
    int rc = rt->cops->mr_reg(rt->conduit, (void *)addr, len, acc, &m, &rk);
    if (rc != FH_OK)
        return FHC_ERR_NO_MEMORY;
    *mr = m;
    key[0] = rk.key;
    key[1] = rk.base;
    return 0;
}

static void env_unpin(void *arg, void *mr)
{
    (void)arg;
    fh_rt->cops->mr_dereg(fh_rt->conduit, mr);
}

/* Called with g->lock held (from inside fhc). */
static int env_allowed(void *arg, uintptr_t addr, size_t len)
{
    struct fh_reg *g = arg;
    if (addr + len < addr)
        return 0;
    if (fh_rt->cfg.segment_mode == FH_SEGMENT_EVERYTHING)
        return fh_mm_mapped(addr, len);    /* any mapped memory (revoke.c) */
    for (size_t i = 0; i < g->nspans; i++)
        if (addr >= g->spans[i].base && addr + len <= g->spans[i].end)
            return 1;
    return 0;
}

static void env_send(void *arg, uint32_t peer, int is_reply, const void *msg, size_t len)
{
    struct fh_reg *g = arg;
    if (is_reply) {
        if (!g->capturing || g->cap_len != 0 || len > sizeof g->cap) {
            fh_log_error("firehose cache: unexpected move reply to rank %u (%zu bytes) "
                         "dropped", peer, len);
            return;
        }
        memcpy(g->cap, msg, len);
        g->cap_len = len;
        return;
    }
    reg_msg_t *m = malloc(sizeof *m + len);
    if (m == NULL)
        fh_fatal("firehose cache: out of memory queueing a move");
    m->next = NULL;
    m->peer = peer;
    m->len = len;
    memcpy(m->bytes, msg, len);
    /* atomic: fh_reg_flush peeks at g->out without the lock */
    __atomic_store_n(g->out_tail, m, __ATOMIC_RELAXED);
    g->out_tail = &m->next;
}

static void env_put_in_move(void *arg, uintptr_t dst, const void *data, size_t len)
{
    (void)arg;
    memcpy((void *)dst, data, len);
}

static void env_log(void *arg, const char *line)
{
    (void)arg;
    fh_log_error("firehose cache: %s", line);
}

/* ------------------------------------------------------------ messages */

/* Sends the queued move requests, in order, on the service path.  Outside
 * handlers, no lock held.  If another thread is flushing, it sends ours too
 * or we come back (callers flush in their wait loops). */
void fh_reg_flush(fh_tls_t *t)
{
    struct fh_reg *g = fh_rt->reg;
    if (g == NULL || __atomic_load_n(&g->out, __ATOMIC_RELAXED) == NULL)
        return;
    if (pthread_mutex_trylock(&g->flush_lock) != 0)
        return;
    for (;;) {
        pthread_mutex_lock(&g->lock);
        reg_msg_t *m = g->out;
        if (m != NULL) {
            __atomic_store_n(&g->out, m->next, __ATOMIC_RELAXED);
            if (g->out == NULL)
                g->out_tail = &g->out;
        }
        pthread_mutex_unlock(&g->lock);
        if (m == NULL)
            break;
        int rc = fh_am_send_request_on(t, &fh_rt->paths[0], (int)m->peer, FH_H_MOVE_REQ,
                                       m->bytes, m->len);
        if (rc != FH_OK && !atomic_load(&fh_rt->finalizing))
            fh_fatal("firehose cache: cannot send a move to rank %u: %s", m->peer,
                     fh_strerror(rc));
        free(m);
    }
    pthread_mutex_unlock(&g->flush_lock);
}

static void h_move_req(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                       unsigned nargs)
{
    (void)args;
    (void)nargs;
    struct fh_reg *g = fh_rt->reg;
    int src;
    fh_token_source(tok, &src);
    if (g == NULL) {
        fh_log_error("dropped a firehose move from rank %d: FH_REG_STRATEGY differs", src);
        return;
    }
    unsigned char rep[REG_REPLY_MAX];
    size_t len;
    pthread_mutex_lock(&g->lock);
    g->capturing = 1;
    g->cap_len = 0;
    fh_mm_sync_locked(fh_rt, g->c);    /* never grant memory known to be freed */
    fhc_on_message(g->c, (uint32_t)src, 0, buf, nbytes);
    len = g->cap_len;
    memcpy(rep, g->cap, len);
    g->capturing = 0;
    g->cap_len = 0;
    pthread_mutex_unlock(&g->lock);
    if (len != 0)
        fh_am_reply_medium_internal(tok, FH_H_MOVE_REP, rep, len);
}

static void h_move_rep(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                       unsigned nargs)
{
    (void)args;
    (void)nargs;
    struct fh_reg *g = fh_rt->reg;
    int src;
    fh_token_source(tok, &src);
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    fhc_on_message(g->c, (uint32_t)src, 1, buf, nbytes);
    pthread_mutex_unlock(&g->lock);
    /* Requests it produced (budget waiters woken) wait in the outbox for
     * their waiting threads to flush them. */
}

/* ------------------------------------------------------------ life cycle */

/* What this host lets us pin: min(RLIMIT_MEMLOCK, conduit limit, 2/3 RAM). */
static size_t pinnable(const fh_rt_t *rt)
{
    size_t lim = SIZE_MAX;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0)
        lim = (size_t)pages / 3 * 2 * (size_t)psz;
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (size_t)rl.rlim_cur < lim)
        lim = (size_t)rl.rlim_cur;
    if (rt->limits.max_mr_bytes && rt->limits.max_mr_bytes < lim)
        lim = rt->limits.max_mr_bytes;
    return lim;
}

int fh_reg_init(fh_rt_t *rt)
{
    if (rt->cfg.reg_strategy != FH_REG_FIREHOSE)
        return FH_OK;
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

    /* Derived sizes may differ between hosts; fhc needs them equal: take
     * the minimum over all ranks. */
    size_t lim = pinnable(rt);
    uint64_t mine[2] = {rt->cfg.firehose_m ? rt->cfg.firehose_m : lim / 4 * 3,
                        rt->cfg.firehose_maxvictim ? rt->cfg.firehose_maxvictim : lim / 4};
    uint64_t *all = calloc((size_t)rt->nranks, sizeof mine);
    if (all == NULL || rt->boot->ops->allgather(rt->boot, mine, all, sizeof mine) != FH_OK) {
        free(all);
        free(g);
        return fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: firehose cache size exchange failed");
    }
    for (int r = 0; r < rt->nranks; r++) {
        if (all[2 * r] < mine[0])
            mine[0] = all[2 * r];
        if (all[2 * r + 1] < mine[1])
            mine[1] = all[2 * r + 1];
    }
    free(all);
    g->M = (size_t)mine[0];
    g->maxvictim = (size_t)mine[1];

    size_t pim = rt->cfg.put_in_move;
    if (rt->am_max_medium < REG_REQ_FIXED + 64)
        pim = 0;
    else if (pim > rt->am_max_medium - REG_REQ_FIXED)
        pim = rt->am_max_medium - REG_REQ_FIXED;
    fhc_params_t p = {.nranks = (uint32_t)rt->nranks, .rank = (uint32_t)rt->rank,
                      .bucket = g->bucket, .region_max = rt->cfg.region_max,
                      .M = g->M, .maxvictim = g->maxvictim, .put_in_move = pim};
    fhc_env_t env = {.arg = g, .pin = env_pin, .unpin = env_unpin,
                     .allowed = env_allowed, .send = env_send,
                     .put_in_move = env_put_in_move, .log = env_log};
    char why[200] = "";
    int rc = fhc_create(&p, &env, &g->c, why, sizeof why);
    if (rc != 0) {
        size_t b = g->bucket;
        free(g);
        return fh_set_error(rc == FHC_ERR_CONFIG ? FH_ERR_CONFIG : rc,
                            "fh_init: FH_REG_STRATEGY=firehose: %s (M=%zu, N=%d, "
                            "FH_BUCKET_SIZE=%zu)", why, (size_t)mine[0], rt->nranks, b);
    }
    rt->reg = g;
    if ((rc = fh_mm_init(rt)) != FH_OK) {
        rt->reg = NULL;
        fhc_destroy(g->c);
        free(g);
        return rc;
    }
    fh_am_register_internal(FH_H_MOVE_REQ, h_move_req, "firehose-move-req");
    fh_am_register_internal(FH_H_MOVE_REP, h_move_rep, "firehose-move-rep");
    rt->reg = g;
    if (rt->cfg.verbose >= 1 && rt->rank == 0)
        fh_log_verbose(1, "firehose cache: M=%zu MAXVICTIM=%zu F=%zu R=%zu B=%zu "
                       "put_in_move=%zu", g->M, g->maxvictim, fhc_F(g->c),
                       fhc_region_max(g->c), g->bucket, pim);
    return FH_OK;
}

void fh_reg_fini(fh_rt_t *rt)
{
    struct fh_reg *g = rt->reg;
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    fhc_destroy(g->c);
    g->c = NULL;
    while (g->out != NULL) {
        reg_msg_t *m = g->out;
        g->out = m->next;
        free(m);
    }
    pthread_mutex_unlock(&g->lock);
    fh_mm_fini(rt);    /* before unmapping watched memory: no reader after this */
    for (size_t i = 0; i < g->nretired; i++)
        munmap((void *)g->retired[i].base, g->retired[i].end - g->retired[i].base);
    free(g->retired);
    free(g->spans);
    rt->reg = NULL;
    free(g);
}

struct fhc *fh_reg_lock(fh_rt_t *rt)
{
    pthread_mutex_lock(&rt->reg->lock);
    return rt->reg->c;
}

void fh_reg_unlock(fh_rt_t *rt)
{
    pthread_mutex_unlock(&rt->reg->lock);
}

size_t fh_reg_bucket(const fh_rt_t *rt)
{
    return rt->reg ? rt->reg->bucket : 0;
}

static int span_push(reg_span_t **a, size_t *n, size_t *cap, uintptr_t base, uintptr_t end)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 8;
        reg_span_t *na = realloc(*a, nc * sizeof *na);
        if (na == NULL)
            return FH_ERR_NO_MEMORY;
        *a = na;
        *cap = nc;
    }
    (*a)[(*n)++] = (reg_span_t){base, end};
    return FH_OK;
}

int fh_reg_expose(fh_rt_t *rt, void *base, size_t len)
{
    struct fh_reg *g = rt->reg;
    pthread_mutex_lock(&g->lock);
    int rc = span_push(&g->spans, &g->nspans, &g->capspans, (uintptr_t)base,
                       (uintptr_t)base + len);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

void fh_reg_unexpose_and_retire(fh_rt_t *rt, void *base, size_t len)
{
    struct fh_reg *g = rt->reg;
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < g->nspans; i++)
        if (g->spans[i].base == (uintptr_t)base) {
            g->spans[i] = g->spans[--g->nspans];
            break;
        }
    int rc = span_push(&g->retired, &g->nretired, &g->capretired, (uintptr_t)base,
                       (uintptr_t)base + len);
    pthread_mutex_unlock(&g->lock);
    if (rc != FH_OK)
        fh_log_error("firehose cache: out of memory retiring a segment; its memory stays "
                     "mapped");
}

/* ------------------------------------------------------------ transfers */

typedef struct reg_op {
    fhc_op_t op;
    _Atomic int done;
    int status;
} reg_op_t;

/* Called with g->lock held, from fhc_on_message or fhc_release. */
static void op_ready(fhc_op_t *op, int status)
{
    reg_op_t *x = op->user;
    x->status = status;
    atomic_store_explicit(&x->done, 1, memory_order_release);
}

int fh_reg_xfer(fh_tls_t *t, bool is_put, int rank, char *local, struct fh_mr *lmr,
                uint64_t remote, size_t n)
{
    fh_rt_t *rt = fh_rt;
    struct fh_reg *g = rt->reg;
    const char *what = is_put ? "put" : "get";
    size_t off = 0;
    while (off < n) {
        reg_op_t x;
        memset(&x, 0, sizeof x);
        uintptr_t raddr = (uintptr_t)(remote + off);
        pthread_mutex_lock(&g->lock);
        fh_mm_sync_locked(rt, g->c);
        size_t len = fhc_chunk_len(g->c, raddr, n - off);
        x.op.peer = (uint32_t)rank;
        x.op.raddr = raddr;
        x.op.len = len;
        x.op.put_data = is_put ? local + off : NULL;
        x.op.ready = op_ready;
        x.op.user = &x;
        int a = fhc_acquire(g->c, &x.op);
        pthread_mutex_unlock(&g->lock);
        if (a == FHC_PENDING) {
            for (unsigned idle = 0;
                 !atomic_load_explicit(&x.done, memory_order_acquire); idle++) {
                fh_reg_flush(t);
                fh_progress(t);
                if (idle > 32)
                    sched_yield();
            }
            a = x.status;
        }
        fh_reg_flush(t);
        if (a < 0)
            return fh_set_error(a, "%s to rank %d: the firehose cache could not map "
                                "[0x%llx, +%zu): %s", what, rank,
                                (unsigned long long)raddr, len, fh_strerror(a));
        if (a == FHC_HIT) {
            fh_ctr_t ctr = {0, FH_OK};
            /* Remote firehoses first (above), then the local pins. */
            fh_reg_lpin_t lp;
            int rc = lmr ? FH_OK : fh_reg_local_pin(rt, is_put, local + off, len, &lp);
            for (unsigned i = 0; i < x.op.npieces && rc == FH_OK; i++) {
                const fhc_piece_t *pc = &x.op.piece[i];
                fh_rkey_t rk = {pc->key[0], pc->key[1]};
                char *l = local + off + (pc->addr - raddr);
                rc = lmr ? fh_rma_post_ex(t, is_put, rank, l, lmr, pc->addr, pc->len, &rk,
                                          &ctr, false)
                         : fh_reg_local_post(t, is_put, rank, &lp, l, pc->addr, pc->len,
                                             &rk, &ctr);
            }
            int wrc = fh_wait_ctr(t, &ctr);
            if (!lmr)
                fh_reg_local_release(rt, &lp);
            pthread_mutex_lock(&g->lock);
            fhc_release(g->c, &x.op);
            pthread_mutex_unlock(&g->lock);
            fh_reg_flush(t);
            if (rc == FH_OK)
                rc = wrc;
            if (rc != FH_OK)
                return fh_set_error(rc, "%s to rank %d failed: %s", what, rank,
                                    fh_strerror(rc));
        }
        off += len;
    }
    fh_path_t *p = t->path;
    pthread_mutex_lock(&p->lock);
    fh_stat_rma(p, rank, is_put, n);
    pthread_mutex_unlock(&p->lock);
    return FH_OK;
}

/* ------------------------------------------------------------ stats */

void fh_reg_stats(fh_rt_t *rt, int peer, fh_peer_stats_t *out)
{
    struct fh_reg *g = rt->reg;
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    if (g->c == NULL) {
        pthread_mutex_unlock(&g->lock);
        return;
    }
    for (int r = 0; r < rt->nranks; r++) {
        if (r == rt->rank || (peer != rt->rank && r != peer))
            continue;
        fhc_peer_stats_t s;
        fhc_peer_stats(g->c, (uint32_t)r, &s);
        out->reg_hits += s.hits;
        out->reg_misses += s.misses;
        out->reg_moves += s.moves;
        out->reg_pending_coalesced += s.coalesced;
        out->reg_put_in_move += s.put_in_move;
        out->bytes_pinned_remote += s.target_held_bytes;
        out->reg_revoked += s.revoked;
    }
    if (peer == rt->rank) {
        /* Evictions are not per peer: the total row carries them. */
        fhc_stats_t s;
        fhc_stats(g->c, &s);
        out->reg_evictions += s.evictions;
        out->reg_invalidations += s.invalidations;
        out->reg_revokes_sent += s.revokes_sent;
        out->bytes_pinned_local += s.local_bytes;
    }
    pthread_mutex_unlock(&g->lock);
}
