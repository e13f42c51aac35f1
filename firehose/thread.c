/*
 * thread.c -- threads: their binding to paths, and the checks every API
 * entry makes (fh_enter, fh_check_rank, fh_rank, fh_nranks).
 *
 * Threads bind to a path on their first call (fh_tls()), and join
 * rt->tls_all, whose seg_seen (stored by fh_enter) tells segment.c when a
 * replaced segment table may be freed ("Reclaiming" there).  With
 * FH_PATHS=independent a thread gets the least-loaded thread path, so up to
 * FH_MAX_THREADS threads each own a path alone; with FH_PATHS=shared all use
 * the service path.  A thread's binding is dropped when it exits: the
 * thread-exit hook (fh_tls_release, the destructor of rt->tls_key)
 * completes its NB and NBI operations and frees their handle slots, gives
 * the registration strategy back what it keeps per thread (firehose: its
 * cached references) and frees its state.  Replies to its AM requests may
 * still be on their way: its path (a thread path) is "orphaned" and every
 * thread's progress polls it until it is idle (fh_path_orphan, path.c), so
 * those replies' handlers run -- also when other threads are still bound
 * to it, since they may never call again.  After that
 * the thread is "exiting": fh_tls() returns NULL and fh_enter fails with
 * FH_ERR_STATE, so a firehose call from a later pthread-key destructor gets
 * an error instead of the freed state.
 *
 * The exit gate: a hook may run while another thread is in fh_finalize,
 * which tears down everything the hook uses.  So a hook enters through
 * exit_gate (a static lock that outlives every runtime): while the gate is
 * open it counts itself in rt->exit_hooks and runs; fh_finalize closes the
 * gate before its barrier and waits, polling, until the running hooks
 * returned (their operations may need the peers, which poll in that
 * barrier).  A hook that finds the gate closed does nothing but hand its
 * state to rt->exited: completions of its operations may still write into
 * it until the paths are torn down, after which fh_finalize frees it
 * (those operations are not waited for).  fh_finalize clears fh_rt under
 * the gate, so a hook sees either the runtime whole or none.
 */
#include <assert.h>
#include <stdlib.h>

#include "internal.h"

static _Atomic uint32_t next_tid = 1;
/* In the static TLS block (initial-exec): every entry point reads them,
 * without a __tls_get_addr call. */
static _Thread_local fh_tls_t *tls_self __attribute__((tls_model("initial-exec")));
/* Set once the thread-exit hook has freed this thread's state. */
static _Thread_local bool tls_exited __attribute__((tls_model("initial-exec")));

static pthread_mutex_t exit_gate = PTHREAD_MUTEX_INITIALIZER;

/* rt->tls_all: the thread states whose seg_seen the reclaiming of old
 * segment tables waits for (segment.c "Reclaiming"). */
static void tls_all_add(fh_rt_t *rt, fh_tls_t *t)
{
    pthread_mutex_lock(&rt->tls_all_lock);
    atomic_store_explicit(&t->seg_seen, atomic_load(&rt->seg_epoch), memory_order_relaxed);
    t->all_next = rt->tls_all;
    rt->tls_all = t;
    pthread_mutex_unlock(&rt->tls_all_lock);
}

static void tls_all_remove(fh_rt_t *rt, fh_tls_t *t)
{
    pthread_mutex_lock(&rt->tls_all_lock);
    fh_tls_t **pp = &rt->tls_all;
    while (*pp != NULL && *pp != t)
        pp = &(*pp)->all_next;
    if (*pp == t)
        *pp = t->all_next;
    pthread_mutex_unlock(&rt->tls_all_lock);
}

uint64_t fh_tls_min_seen(fh_rt_t *rt)
{
    uint64_t m = UINT64_MAX;
    pthread_mutex_lock(&rt->tls_all_lock);
    for (const fh_tls_t *t = rt->tls_all; t != NULL; t = t->all_next) {
        uint64_t s = atomic_load_explicit(&t->seg_seen, memory_order_acquire);
        if (s < m)
            m = s;
    }
    pthread_mutex_unlock(&rt->tls_all_lock);
    return m;
}

/* Marks the calling thread as exiting: entry points refuse from now on. */
static void tls_mark_exited(const fh_tls_t *t)
{
    if (tls_self == t) {
        tls_self = NULL;
        tls_exited = true;
    }
}

void fh_tls_release(void *arg)
{
    fh_tls_t *t = arg;
    pthread_mutex_lock(&exit_gate);
    fh_rt_t *rt = fh_rt;
    if (rt != NULL && rt->exits_closed) {
        tls_all_remove(rt, t);           /* reads no table from here on */
        t->exited_next = rt->exited;     /* fh_finalize frees it */
        rt->exited = t;
        pthread_mutex_unlock(&exit_gate);
        tls_mark_exited(t);
        return;
    }
    if (rt != NULL)
        rt->exit_hooks++;
    pthread_mutex_unlock(&exit_gate);
    /* Completions of this thread's NB and NBI operations point at t (the
     * NBI counter, t->quiet_ops): they must land before t is freed.  Any
     * thread polling our path may be completing them, so the counts are
     * read under the path lock only (fh_wait_quiet; it returns at once
     * if none is pending).  Then the handles nobody will wait for are
     * freed: their slots would leak. */
    if (rt != NULL) {
        fh_wait_quiet(t);
        pthread_mutex_lock(&t->path->lock);
        uint32_t n = fh_ht_free_owned(&t->path->handles, t->tid);
        pthread_mutex_unlock(&t->path->lock);
        if (n != 0)
            fh_log_verbose(2, "thread %u exited with %u handles not waited for",
                           t->tid, n);
    }
    if (rt != NULL && rt->reg_ops->thread_exit != NULL)
        rt->reg_ops->thread_exit(&t->base);
    if (rt != NULL && t->bound) {
        pthread_mutex_lock(&rt->bind_lock);
        /* Replies to us may still come, and the threads still bound to
         * the path (if any) may never poll again: polled by all until idle. */
        --t->path->nbound;
        atomic_store_explicit(&t->path->bulk_shared, t->path->nbound > 1,
                              memory_order_relaxed);
        if (t->path->index != 0)
            fh_path_orphan(t->path);
        pthread_mutex_unlock(&rt->bind_lock);
    }
    /* Handlers the waits above ran still needed tls_self; from here on the
     * thread is exiting and every entry point refuses (fh_tls()). */
    tls_mark_exited(t);
    if (rt != NULL)
        tls_all_remove(rt, t);
    free(t);
    if (rt != NULL) {
        pthread_mutex_lock(&exit_gate);
        assert(rt->exit_hooks > 0);
        rt->exit_hooks--;
        pthread_mutex_unlock(&exit_gate);
    }
}

void fh_tls_close_exits(fh_tls_t *t)
{
    fh_rt_t *rt = fh_rt;
    pthread_mutex_lock(&exit_gate);
    rt->exits_closed = true;
    for (unsigned idle = 0; rt->exit_hooks > 0;) {
        pthread_mutex_unlock(&exit_gate);
        fh_wait_round(t, &idle);
        pthread_mutex_lock(&exit_gate);
    }
    pthread_mutex_unlock(&exit_gate);
}

void fh_tls_progress_exited(fh_rt_t *rt)
{
    /* The list only grows at its head (under the gate) and its states
     * stay until fh_tls_finalize: walk from a head read under the gate. */
    pthread_mutex_lock(&exit_gate);
    fh_tls_t *head = rt->exited;
    pthread_mutex_unlock(&exit_gate);
    for (fh_tls_t *x = head; x != NULL; x = x->exited_next) {
        assert(x->in_handler == 0);
        if (rt->reg_ops->progress != NULL)
            rt->reg_ops->progress(&x->base);
        for (int i = 0; i < rt->nthread_progress; i++)
            rt->thread_progress[i](x);
    }
}

/* The least-loaded thread path, under bind_lock.  Lazy paths: the first
 * thread takes the service path, so a single-threaded rank has no other
 * path; later threads take a free path that exists, else the next one to
 * make (made here: the paths that exist are a prefix, so the first free
 * index is the next to make), else share the least loaded.  If it cannot be
 * made the thread shares the least-loaded path that exists (the service
 * path at worst), with a log line, and so do all later threads: a thread
 * always gets a path. */
static fh_path_t *choose_path(fh_rt_t *rt)
{
    if (rt->npaths == 1)
        return &rt->paths[0];
    if (rt->lazy_paths && rt->paths[0].nbound == 0)
        return &rt->paths[0];
    const int made = fh_paths_made(rt);
    int best = 1;
    for (int i = 2; i < rt->npaths; i++) {
        const int load = i < made ? rt->paths[i].nbound : 0;
        if (load < (best < made ? rt->paths[best].nbound : 0))
            best = i;
    }
    if (best < made)
        return &rt->paths[best];
    assert(rt->lazy_paths && best == made);
    if (!rt->path_make_failed) {
        int rc = fh_path_make(rt);
        if (rc == FH_OK)
            return &rt->paths[best];
        /* Once: a peer that did not answer in 60 s would stall every later
         * thread's first call as long. */
        rt->path_make_failed = true;
        fh_log_error("threads from now on share the %d paths made: %s", made,
                     fh_last_error());
    }
    best = 0;
    for (int i = 1; i < made; i++)
        if (rt->paths[i].nbound < rt->paths[best].nbound)
            best = i;
    return &rt->paths[best];
}

fh_tls_t *fh_tls(void)
{
    fh_tls_t *t = tls_self;
    if (t != NULL)
        return t;
    if (tls_exited)
        return NULL;
    fh_rt_t *rt = fh_rt;
    t = calloc(1, sizeof *t);
    if (t == NULL)
        fh_fatal("out of memory binding a thread");
    t->tid = atomic_fetch_add(&next_tid, 1);
    t->nbi = (fh_ctr_t)FH_CTR_INIT;
    t->nbi.owner_ops = &t->quiet_ops;
    tls_all_add(rt, t);    /* before it runs a handler (binding may) */
    pthread_mutex_lock(&rt->bind_lock);
    /* Making a path runs AM handlers on the service path, which need our
     * state: until bound, it points at the service path (unbound, nothing
     * in flight). */
    t->path = &rt->paths[0];
    tls_self = t;
    t->path = choose_path(rt);
    t->path->nbound++;
    atomic_store_explicit(&t->path->bulk_shared, t->path->nbound > 1, memory_order_relaxed);
    if (t->path->index != 0)
        fh_path_adopt(t->path);      /* polled by its owner from now on */
    t->bound = 1;
    pthread_mutex_unlock(&rt->bind_lock);
    fh_log_verbose(3, "thread %u bound to path %d", t->tid, t->path->index);
    pthread_setspecific(rt->tls_key, t);
    return t;
}

fh_tls_t *fh_tls_peek(void)
{
    return tls_self;
}

fh_tls_t *fh_enter(const char *fn, int *err)
{
    fh_clear_error();
    if (atomic_load_explicit(&fh_rt_state, memory_order_acquire) != FH_RT_UP) {
        *err = fh_set_error(FH_ERR_NOT_INIT, "%s: firehose is not initialized", fn);
        return NULL;
    }
    fh_tls_t *t = fh_tls();
    if (t == NULL) {
        *err = fh_set_error(FH_ERR_STATE, "%s: the calling thread is exiting (firehose "
                            "released its state at thread exit)", fn);
        return NULL;
    }
    if (t->in_handler) {
        *err = fh_set_error(FH_ERR_IN_HANDLER, "%s: not allowed inside an AM handler", fn);
        return NULL;
    }
    /* A call's start: nothing this thread read of the segment tables
     * before is in use any more (segment.c "Reclaiming"). */
    uint64_t e = atomic_load_explicit(&fh_rt->seg_epoch, memory_order_acquire);
    if (atomic_load_explicit(&t->seg_seen, memory_order_relaxed) != e)
        atomic_store_explicit(&t->seg_seen, e, memory_order_release);
    const fh_reg_ops_t *reg = fh_rt->reg_ops;
    if (reg->on_entry != NULL)
        reg->on_entry(&t->base);   /* firehose: freed memory is revoked (firehose_revoke.c) */
    return t;
}

/* The caller's argument, in the API's numbering (include/firehose.h's
 * example), not a peer's name: "rank 7 is out of range [0, 4)". */
int fh_check_rank(const char *fn, int rank)
{
    if (rank < 0 || rank >= fh_rt->nranks)
        return fh_set_error(FH_ERR_RANK, "%s: rank %d is out of range [0, %d)", fn,
                            rank, fh_rt->nranks);
    return FH_OK;
}

int fh_rank(void)
{
    fh_clear_error();
    if (atomic_load_explicit(&fh_rt_state, memory_order_acquire) != FH_RT_UP)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_rank: firehose is not initialized");
    return fh_rt->rank;
}

int fh_nranks(void)
{
    fh_clear_error();
    if (atomic_load_explicit(&fh_rt_state, memory_order_acquire) != FH_RT_UP)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_nranks: firehose is not initialized");
    return fh_rt->nranks;
}

void fh_tls_finalize(fh_rt_t *rt)
{
    pthread_mutex_lock(&exit_gate);
    assert(rt->exit_hooks == 0 && fh_rt == rt);
    fh_rt = NULL;
    fh_tls_t *list = rt->exited;
    rt->exited = NULL;
    pthread_mutex_unlock(&exit_gate);
    while (list != NULL) {
        fh_tls_t *n = list->exited_next;
        free(list);
        list = n;
    }
    free(tls_self);
    tls_self = NULL;
}
