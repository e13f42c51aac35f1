/*
 * init.c -- runtime life cycle and the binding of threads to paths.
 *
 * fh_init: configuration -> bootstrap -> conduit -> paths -> address
 * exchange -> modules -> barrier.  fh_finalize undoes it in reverse after a
 * barrier and a drain (see finalize_drain()).
 *
 * Threads bind to a path on their first call (fh_tls()).  With
 * FH_PATHS=independent a thread gets the least-loaded thread path, so up to
 * FH_MAX_THREADS threads each own a path alone; with FH_PATHS=shared all use
 * the service path.  A thread's binding is dropped when it exits: the
 * thread-exit hook (tls_release, the destructor of rt->tls_key) completes
 * its NB and NBI operations and frees their handle slots, returns its
 * firehose references and frees its state.  Replies to its AM requests
 * may still be on their way: if no other thread is bound to its path, the
 * path is "orphaned" and every thread's progress polls it until it is idle
 * (fh_path_orphan, path.c), so those replies' handlers run.
 * After that the thread is "exiting": fh_tls() returns NULL and fh_enter
 * fails with FH_ERR_STATE, so a firehose call from a later pthread-key
 * destructor gets an error instead of the freed state.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

fh_rt_t *fh_rt;
fh_handler_entry_t fh_handlers[256];

/* 0 = never initialized, 1 = running, 2 = finalized. */
static _Atomic int rt_state;
static _Atomic uint32_t next_tid = 1;
static _Thread_local fh_tls_t *tls_self;
/* Set once the thread-exit hook has freed this thread's state. */
static _Thread_local bool tls_exited;

double fh_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifdef FH_TEST_HOOKS
void (*fh_test_hook)(enum fh_test_point where);
#endif

static void tls_release(void *arg)
{
    fh_tls_t *t = arg;
    fh_rt_t *rt = fh_rt;
    /* Completions of this thread's NB and NBI operations point at t (the
     * NBI counter, t->quiet_ops): they must land before t is freed.  Any
     * thread polling our path may be completing them, so the counts are
     * read under the path lock only (fh_wait_quiet; it returns after one
     * poll if none is pending).  Then the handles nobody will wait for are
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
    if (rt != NULL && rt->reg != NULL)
        fh_reg_thread_exit(t);
    if (rt != NULL && t->bound) {
        pthread_mutex_lock(&rt->bind_lock);
        if (--t->path->nbound == 0 && t->path->index != 0)
            fh_path_orphan(t->path);     /* replies to us may still come */
        pthread_mutex_unlock(&rt->bind_lock);
    }
    /* Handlers the waits above ran still needed tls_self; from here on the
     * thread is exiting and every entry point refuses (fh_tls()). */
    if (tls_self == t) {
        tls_self = NULL;
        tls_exited = true;
    }
    free(t);
}

static fh_path_t *choose_path(fh_rt_t *rt)
{
    if (rt->npaths == 1)
        return &rt->paths[0];
    fh_path_t *best = &rt->paths[1];
    for (int i = 2; i < rt->npaths; i++)
        if (rt->paths[i].nbound < best->nbound)
            best = &rt->paths[i];
    return best;
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
    pthread_mutex_lock(&rt->bind_lock);
    t->path = choose_path(rt);
    t->path->nbound++;
    if (t->path->index != 0)
        fh_path_adopt(t->path);      /* polled by its owner from now on */
    t->bound = 1;
    t->nbi.owner_ops = &t->quiet_ops;
    pthread_mutex_unlock(&rt->bind_lock);
    fh_log_verbose(3, "thread %u bound to path %d", t->tid, t->path->index);
    pthread_setspecific(rt->tls_key, t);
    tls_self = t;
    return t;
}

fh_tls_t *fh_tls_peek(void)
{
    return tls_self;
}

fh_tls_t *fh_enter(const char *fn, int *err)
{
    if (atomic_load_explicit(&rt_state, memory_order_acquire) != 1) {
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
    if (fh_rt->mm != NULL)
        fh_mm_entry(t);     /* freed memory: invalidate, revoke (revoke.c) */
    return t;
}

int fh_check_rank(const char *fn, int rank)
{
    if (rank < 0 || rank >= fh_rt->nranks)
        return fh_set_error(FH_ERR_RANK, "%s: rank %d is out of range [0, %d)", fn,
                            rank, fh_rt->nranks);
    return FH_OK;
}

int fh_rank(void)
{
    if (atomic_load_explicit(&rt_state, memory_order_acquire) != 1)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_rank: firehose is not initialized");
    return fh_rt->rank;
}

int fh_nranks(void)
{
    if (atomic_load_explicit(&rt_state, memory_order_acquire) != 1)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_nranks: firehose is not initialized");
    return fh_rt->nranks;
}

int fh_config_size(const char *name, size_t *value)
{
    if (atomic_load_explicit(&rt_state, memory_order_acquire) != 1)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_config_size: firehose is not initialized");
    if (name == NULL || value == NULL)
        return fh_set_error(FH_ERR_INVALID, "fh_config_size: NULL argument");
    for (size_t i = 0; i < fh_config_table_len; i++) {
        const fh_cfg_entry_t *e = &fh_config_table[i];
        if (strcmp(e->name, name) != 0)
            continue;
        if (e->type != FH_CFG_SIZE)
            return fh_set_error(FH_ERR_INVALID, "fh_config_size: %s is not a size", name);
        memcpy(value, (const char *)&fh_rt->cfg + e->offset, sizeof *value);
        return FH_OK;
    }
    return fh_set_error(FH_ERR_INVALID, "fh_config_size: no variable %s", name);
}

static const fh_conduit_ops_t *pick_conduit(const fh_config_t *cfg,
                                            const fh_conduit_config_t *ccfg)
{
    char why[256] = "";
    switch (cfg->conduit) {
    case FH_CONDUIT_IBV:
#ifdef FH_HAVE_IBV
        return &fh_conduit_ibv;
#else
        fh_log_error("FH_CONDUIT=ibv: this build has no ibv conduit (configure did "
                     "not find rdma-core: install libibverbs-dev and rebuild)");
        return NULL;
#endif
    case FH_CONDUIT_AUTO:
#ifdef FH_HAVE_IBV
        if (fh_conduit_ibv.probe(ccfg, why, sizeof why)) {
            fh_log_verbose(1, "FH_CONDUIT=auto: using ibv (a usable RDMA device exists)");
            return &fh_conduit_ibv;
        }
        fh_log_verbose(1, "FH_CONDUIT=auto: using ofi (ibv unusable: %s)", why);
#else
        (void)why;
        (void)ccfg;
        fh_log_verbose(1, "FH_CONDUIT=auto: using ofi (built without the ibv conduit)");
#endif
        return &fh_conduit_ofi;
    case FH_CONDUIT_OFI:
    default:
        return &fh_conduit_ofi;
    }
}

/* Tears down what fh_init built and ends the job (peers wait in the
 * bootstrap), naming the reason: fh_last_error(), set by the failing step. */
static int init_fail(fh_rt_t *rt, int err)
{
    char why[256];
    snprintf(why, sizeof why, "%s", fh_last_error());
    if (rt->paths != NULL) {
        for (int i = 0; i < rt->npaths; i++)
            if (rt->paths[i].cp != NULL)
                fh_path_teardown(rt, &rt->paths[i]);
        free(rt->paths);
    }
    if (rt->conduit != NULL)
        rt->cops->close(rt->conduit);
    if (rt->boot != NULL) {
        /* The reason, not only "fh_init failed": the job ends here. */
        fh_log_error("%s", why[0] ? why : "fh_init failed");
        rt->boot->ops->abort(rt->boot, 1, why[0] ? why : "fh_init failed");
    }
    fh_peer_fini(rt);
    free(rt);
    atomic_store(&rt_state, 0);
    return err;
}

int fh_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fh_tls_t *self = fh_tls_peek();
    if (self != NULL && self->in_handler)
        return fh_set_error(FH_ERR_IN_HANDLER, "fh_init: inside an AM handler");
    int expected = 0;
    if (!atomic_compare_exchange_strong(&rt_state, &expected, 3))
        return fh_set_error(FH_ERR_STATE, "fh_init: already %s",
                            expected == 2 ? "finalized (fh_init may be called once)"
                                          : "initialized");
    fh_rt_t *rt = calloc(1, sizeof *rt);
    if (rt == NULL) {
        atomic_store(&rt_state, 0);
        return fh_set_error(FH_ERR_NO_MEMORY, "fh_init: out of memory");
    }
    char err[256];
    if (fh_config_load(&rt->cfg, err, sizeof err) != FH_OK) {
        fh_log_error("%s", err);
        free(rt);
        atomic_store(&rt_state, 0);
        return fh_set_error(FH_ERR_CONFIG, "fh_init: %s", err);
    }
    fh_log_set_verbose((int)rt->cfg.verbose);

    fh_set_error(FH_OK, "%s", "");   /* init_fail reports what the failing step set */
    int rc = fh_boot_open(&rt->boot);
    if (rc != FH_OK) {
        free(rt);
        atomic_store(&rt_state, 0);
        return fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: bootstrap failed");
    }
    rt->rank = rt->boot->rank;
    rt->nranks = rt->boot->nranks;
    fh_log_set_rank(rt->rank);
    /* Every rank finds the same mismatch (agree.c): each returns, none waits. */
    if ((rc = fh_config_agree(rt->boot, &rt->cfg)) != FH_OK) {
        if (rc != FH_ERR_CONFIG)
            return init_fail(rt, rc);
        rt->boot->ops->finalize(rt->boot);
        free(rt);
        atomic_store(&rt_state, 0);
        return rc;
    }
    long threads = rt->cfg.max_threads;
    if (threads == 0) {
        /* One path per core: more threads than cores gain nothing from
         * private paths, and every path costs endpoint memory. */
        threads = sysconf(_SC_NPROCESSORS_ONLN);
        threads = threads < 1 ? 1 : threads > 16 ? 16 : threads;
    }
    rt->npaths = rt->cfg.paths == FH_PATHS_SHARED ? 1 : 1 + (int)threads;
    pthread_mutex_init(&rt->bind_lock, NULL);
    pthread_mutex_init(&rt->seg_lock, NULL);
    pthread_mutex_init(&rt->coll_lock, NULL);
    pthread_key_create(&rt->tls_key, tls_release);

    rt->am_max_packet = FH_AM_HDR_BYTES + 8 * FH_AM_MAX_ARGS + rt->cfg.am_max_medium;
    fh_conduit_config_t ccfg = {
        .rank = rt->rank, .nranks = rt->nranks, .npaths = rt->npaths,
        .am_max_packet = rt->am_max_packet,
        .provider = rt->cfg.ofi_provider, .domain = rt->cfg.ofi_domain,
        .all_local = rt->boot->local_nranks == rt->boot->nranks,
        .ibv_device = rt->cfg.ibv_device, .ibv_port = (int)rt->cfg.ibv_port,
        .ibv_gid_index = (int)rt->cfg.ibv_gid_index, .ibv_td = rt->cfg.ibv_td,
        .verbose = (int)rt->cfg.verbose,
    };
    rt->cops = pick_conduit(&rt->cfg, &ccfg);
    if (rt->cops == NULL)
        return init_fail(rt, fh_set_error(FH_ERR_NOT_SUPPORTED, "fh_init: no conduit"));
    fh_set_error(FH_OK, "%s", "");   /* pick_conduit's probing may have set one */
    rc = rt->cops->open(&ccfg, &fh_upcalls, &rt->conduit, &rt->limits);
    if (rc != FH_OK) {
        char why[200];   /* the conduit's own reason, e.g. FH_IBV_DEVICE=x: no such device */
        snprintf(why, sizeof why, "%s", fh_last_error());
        rt->conduit = NULL;
        return init_fail(rt, fh_set_error(rc, "fh_init: cannot open the %s conduit%s%s",
                                          rt->cops->name, why[0] ? ": " : "", why));
    }
    if (rt->limits.am_max_packet < rt->am_max_packet)
        rt->am_max_packet = rt->limits.am_max_packet;
    if (rt->am_max_packet < FH_AM_HDR_BYTES + 8 * FH_AM_MAX_ARGS + 64)
        return init_fail(rt, fh_set_error(FH_ERR_TRANSPORT,
                                          "fh_init: conduit message size %zu too small",
                                          rt->limits.am_max_packet));
    rt->am_max_medium = rt->am_max_packet - FH_AM_HDR_BYTES - 8 * FH_AM_MAX_ARGS;

    rt->paths = calloc((size_t)rt->npaths, sizeof *rt->paths);
    if (rt->paths == NULL)
        return init_fail(rt, FH_ERR_NO_MEMORY);
    for (int i = 0; i < rt->npaths; i++) {
        rc = fh_path_setup(rt, &rt->paths[i], i);
        if (rc != FH_OK)
            return init_fail(rt, fh_set_error(rc, "fh_init: cannot create path %d", i));
    }
    rc = rt->cops->connect(rt->conduit, rt->boot);
    if (rc != FH_OK)
        return init_fail(rt, fh_set_error(rc, "fh_init: address exchange failed"));
    if ((rc = fh_peer_init(rt)) != FH_OK)
        return init_fail(rt, rc);
    if ((rc = fh_seg_init(rt)) != FH_OK)
        return init_fail(rt, rc);
    if ((rc = fh_reg_init(rt)) != FH_OK)
        return init_fail(rt, rc);
    if ((rc = fh_strat_init(rt)) != FH_OK)
        return init_fail(rt, rc);
    fh_atomic_init();
    fh_coll_init();

    if (rt->cfg.verbose >= 1 && rt->rank == 0) {
        fh_log_verbose(1, "%d ranks, conduit %s (%s), %d paths (%s), boot %s",
                       rt->nranks, rt->cops->name, rt->limits.description, rt->npaths,
                       rt->cfg.paths == FH_PATHS_SHARED ? "shared" : "independent",
                       rt->boot->ops->name);
        fh_log_verbose(1, "am_max_medium=%zu max_inject=%zu max_msg=%zu needs_local_mr=%d",
                       rt->am_max_medium, rt->limits.max_inject, rt->limits.max_msg,
                       rt->limits.needs_local_mr);
        fh_config_print(&rt->cfg, stderr, "firehose[0]: config ");
    }
    fh_rt = rt;
    atomic_store_explicit(&rt_state, 1, memory_order_release);
    rc = rt->boot->ops->barrier(rt->boot);
    if (rc != FH_OK)
        fh_fatal("fh_init: bootstrap barrier failed");
    return FH_OK;
}

/* After the final barrier, peers may still have credit packets in flight to
 * us.  Poll until the service and own paths stay quiet, with a bootstrap
 * barrier on each side so nobody closes an endpoint a peer still writes to. */
static void finalize_drain(fh_rt_t *rt, fh_tls_t *t)
{
    for (int round = 0; round < 2; round++) {
        pthread_mutex_lock(&rt->paths[0].lock);
        fh_am_flush_credits(&rt->paths[0], true);
        fh_am_flush_backlog(&rt->paths[0]);
        pthread_mutex_unlock(&rt->paths[0].lock);
        double end = fh_now() + 0.02;
        for (unsigned idle = 0; fh_now() < end;)
            fh_wait_round(t, &idle);
        rt->boot->ops->barrier(rt->boot);
    }
}

int fh_finalize(void)
{
    int err;
    fh_tls_t *t = fh_enter("fh_finalize", &err);
    if (t == NULL)
        return err;
    fh_rt_t *rt = fh_rt;
    fh_quiet();
    /* A peer may still be in another collective (a mismatch its call
     * reports): pair with its next calls until every rank is here. */
    fh_coll_enter(t);
    while (fh_barrier_internal(t, fh_coll_sig(FH_COLL_FINALIZE, 0), "fh_finalize") ==
           FH_ERR_STATE)
        ;
    fh_coll_leave();
    atomic_store(&rt->finalizing, 1);
    finalize_drain(rt, t);
    if (rt->cfg.stats)
        fh_stats_at_finalize(rt);
    atomic_store(&rt_state, 2);
    /* Keys die before their memory: every registration for peers is
     * deregistered before any segment is unmapped. */
    unsigned undead = fh_strat_fini(rt);
    fh_seg_fini(rt, undead != 0);
    fh_reg_fini(rt);   /* unpins everything; before the conduit closes */
    for (int i = 0; i < rt->npaths; i++)
        fh_path_teardown(rt, &rt->paths[i]);
    rt->cops->close(rt->conduit);
    rt->boot->ops->finalize(rt->boot);
    fh_peer_fini(rt);
    fh_rt = NULL;
    /* Thread states of other threads are freed by their exit; ours now. */
    pthread_setspecific(rt->tls_key, NULL);
    pthread_key_delete(rt->tls_key);
    free(tls_self);
    tls_self = NULL;
    free(rt->paths);
    free(rt);
    return FH_OK;
}

void fh_abort(int code, const char *msg)
{
    fh_rt_t *rt = fh_rt;
    if (code == 0)
        code = 1;
    if (rt != NULL && rt->boot != NULL)
        rt->boot->ops->abort(rt->boot, code, msg ? msg : "fh_abort");
    fh_log_error("fh_abort(%d): %s", code, msg ? msg : "");
    _exit(code);
}
