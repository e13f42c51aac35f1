/*
 * init.c -- the runtime's life cycle: fh_init, fh_finalize, fh_abort.
 *
 * fh_init: configuration -> bootstrap -> conduit -> paths -> address
 * exchange -> modules (the registration strategy through its table,
 * reg/reg.h) -> barrier.  fh_finalize undoes it in reverse after a barrier
 * and a drain (see finalize_drain()).  Threads and their paths: thread.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "firehose/util/vma.h"

fh_rt_t *fh_rt;
fh_handler_entry_t fh_handlers[FH_AM_NHANDLERS];
_Atomic int fh_rt_state;

/* The smallest medium AM payload a conduit's packet must leave room for
 * after the header and FH_AM_MAX_ARGS arguments. */
#define FH_AM_MIN_MEDIUM 64
/* Each finalize drain round polls this long (seconds) for the last credits
 * and replies before its barrier. */
#define FH_FINALIZE_QUIET_S 0.02

#ifdef FH_TEST_HOOKS
void (*fh_test_hook)(enum fh_test_point where);
size_t fh_test_bulk_bytes;
#endif

int fh_config_size(const char *name, size_t *value)
{
    fh_clear_error();
    if (atomic_load_explicit(&fh_rt_state, memory_order_acquire) != FH_RT_UP)
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

const void *fh_conduit_settings_of(const fh_rt_t *rt,
                                   const fh_conduit_settings_t *s)
{
    for (int i = 0; i < FH_NCONDUITS; i++)
        if (fh_conduit_settings_all[i] == s)
            return &rt->csettings[i];
    return NULL;
}

/* Every conduit's settings, so that a bad value fails fh_init whichever
 * conduit runs (as when they sat in the core table). */
static int load_conduit_settings(fh_rt_t *rt, char *err, size_t errlen)
{
    for (int i = 0; i < FH_NCONDUITS; i++) {
        int rc = fh_conduit_settings_load(fh_conduit_settings_all[i],
                                          &rt->csettings[i], err, errlen);
        if (rc != FH_OK)
            return rc;
    }
    return FH_OK;
}

static const fh_conduit_ops_t *pick_conduit(const fh_rt_t *rt,
                                            const fh_conduit_config_t *ccfg)
{
    const fh_config_t *cfg = &rt->cfg;
    char why[256] = "";
    switch (cfg->conduit) {
    case FH_CONDUIT_LOCAL:
        /* Only where the node path will reach every rank: one host, one
         * node group (fh_peer_groups cuts FH_SHM_MAX_GROUP runs), shared
         * segments on; fh_init checks the rings once they are up. */
        if (ccfg->all_local && cfg->shm != FH_SHM_OFF &&
            (cfg->shm_max_group <= 0 || cfg->shm_max_group >= rt->nranks)) {
            fh_log_verbose(1, "FH_CONDUIT=local: no network conduit (every rank on "
                           "this host)");
            return &fh_conduit_local;
        }
        fh_log_verbose(1, "FH_CONDUIT=local: %s: as auto", !ccfg->all_local
                       ? "ranks on other hosts" : cfg->shm == FH_SHM_OFF
                       ? "FH_SHM=off" : "FH_SHM_MAX_GROUP splits the host");
        /* fall through */
    case FH_CONDUIT_AUTO:
        break;
    case FH_CONDUIT_IBV:
#ifdef FH_HAVE_IBV
        return &fh_conduit_ibv;
#else
        fh_log_error("FH_CONDUIT=ibv: this build has no ibv conduit (configure did "
                     "not find rdma-core: install libibverbs-dev and rebuild)");
        return NULL;
#endif
    case FH_CONDUIT_OFI:
    default:
        return &fh_conduit_ofi;
    }
    /* auto */
    {
#ifdef FH_HAVE_IBV
        fh_conduit_config_t pcfg = *ccfg;
        pcfg.settings = fh_conduit_settings_of(rt, fh_conduit_ibv.settings);
        if (fh_conduit_ibv.probe(&pcfg, why, sizeof why)) {
            fh_log_verbose(1, "FH_CONDUIT=auto: using ibv (a usable RDMA device exists)");
            return &fh_conduit_ibv;
        }
        fh_log_verbose(1, "FH_CONDUIT=auto: using ofi (ibv unusable: %s)", why);
#else
        (void)why;
        (void)ccfg;
        (void)rt;
        fh_log_verbose(1, "FH_CONDUIT=auto: using ofi (built without the ibv conduit)");
#endif
        return &fh_conduit_ofi;
    }
}

/* FH_CONDUIT=local carries nothing: every other rank must be reached by
 * the node path, its rings attached (node_am.c may have fallen back to the
 * conduit for a member whose inbox it could not map; both sides of a pair
 * agree, so both fail here). */
static int local_reach_check(const fh_rt_t *rt)
{
    if (rt->cops != &fh_conduit_local)
        return FH_OK;
    for (int r = 0; r < rt->nranks; r++) {
        if (r == rt->rank)
            continue;
        if (!rt->node_peer[r])
            return fh_set_error(FH_ERR_NOT_SUPPORTED, "fh_init: FH_CONDUIT=local: %s is "
                                "not in this rank's node group (the ranks disagree on "
                                "which share a host), and no network conduit is open: "
                                "set FH_CONDUIT=auto", FH_RANK_NAME(r));
        if (rt->node_inbox == NULL || rt->node_inbox[r] == NULL)
            return fh_set_error(FH_ERR_NOT_SUPPORTED, "fh_init: FH_CONDUIT=local: %s is "
                                "on this host but its shared-memory inbox could not be "
                                "attached (FH_VERBOSE=1 says why), and no network conduit "
                                "is open: set FH_CONDUIT=auto", FH_RANK_NAME(r));
    }
    return FH_OK;
}

/* Why an earlier fh_init failed after the network was opened: what it built
 * is not all undone, so fh_init is not tried again ("" while none did).
 * Written only by the one fh_init that runs (fh_rt_state STARTING). */
static char init_failed_late[512];

/* Tears down what fh_init built, tells the other ranks that our fh_init
 * failed (their fh_init fails too, boot->ops->fail) and returns err, the
 * reason in fh_last_error() (set by the failing step).  Never ends the
 * process.  A failure before the conduit was opened leaves nothing behind:
 * fh_init may be called again (e.g. with another FH_OFI_PROVIDER). */
static int init_fail(fh_rt_t *rt, int err)
{
    char why[512];
    snprintf(why, sizeof why, "%s", fh_last_error()[0] ? fh_last_error() : "fh_init failed");
    bool late = rt->conduit != NULL;
    if (rt->modules_up) {
        /* Only the final barrier fails after this: undo as fh_finalize. */
        const fh_reg_ops_t *reg = rt->reg_ops;
        unsigned undead = reg->fini_keys != NULL ? reg->fini_keys(&rt->core) : 0;
        fh_seg_fini(rt, undead != 0);
        fh_lc_fini();             /* before reg->fini: it may share its monitor */
        if (reg->fini != NULL)
            reg->fini(&rt->core);
    } else if (rt->segs != NULL) {
        fh_seg_fini(rt, false);   /* tables only: no segment is live yet */
    }
    if (rt->paths != NULL) {
        for (int i = 0; i < rt->npaths; i++)
            if (rt->paths[i].cp != NULL)
                fh_path_teardown(rt, &rt->paths[i]);
        free(rt->paths);
    }
    if (rt->conduit != NULL)
        rt->cops->close(rt->conduit);
    fh_log_error("%s", why);
    if (rt->boot != NULL)
        rt->boot->ops->fail(rt->boot, why);
    fh_node_am_fini(rt);
    fh_route_fini(rt);
    fh_peer_fini(rt);
    fh_reg_bind(NULL);
    if (rt->locks_made) {
        pthread_key_delete(rt->tls_key);
        pthread_mutex_destroy(&rt->bind_lock);
        pthread_mutex_destroy(&rt->seg_lock);
        pthread_mutex_destroy(&rt->coll_lock);
        pthread_mutex_destroy(&rt->tls_all_lock);
    }
    free(rt->am_lost_req);
    free(rt->am_lost_in);
    free(rt->am_lost_svc);
    free(rt);
    if (late)
        snprintf(init_failed_late, sizeof init_failed_late, "%s", why);
    atomic_store(&fh_rt_state, late ? FH_RT_DOWN : FH_RT_NONE);
    return fh_set_error(err, "%s", why);
}

/* A configuration error found before the bootstrap: still tell the
 * launcher (if one can be reached) so the other ranks' fh_init fails too
 * rather than waits, and the launcher says which rank failed and why. */
static int init_fail_early(fh_rt_t *rt, int err, const char *why)
{
    fh_log_error("%s", why);
    fh_boot_t *b = NULL;
    if (fh_boot_open(&b) == FH_OK)
        b->ops->fail(b, why);
    free(rt->am_lost_req);
    free(rt->am_lost_in);
    free(rt->am_lost_svc);
    free(rt);
    atomic_store(&fh_rt_state, FH_RT_NONE);
    return fh_set_error(err, "fh_init: %s", why);
}

/* fh_set_rank_names was called: FH_RANK_NAMES is not read. */
static _Atomic int names_given;

int fh_set_rank_names(const char *label, int first)
{
    if (atomic_load_explicit(&fh_rt_state, memory_order_acquire) != FH_RT_NONE)
        return fh_set_error(FH_ERR_STATE, "fh_set_rank_names: after fh_init");
    char err[200];
    if (fh_log_set_names(label, first, err, sizeof err) != 0)
        return fh_set_error(FH_ERR_INVALID, "fh_set_rank_names: %s", err);
    atomic_store(&names_given, 1);
    return FH_OK;
}

/* FH_MAX_THREADS=0: one path per core this rank can use
 * (fh_auto_threads: the host's cores over its ranks), the smallest over
 * the job, since every rank must have the same number of paths and hosts
 * may differ in cores or ranks. */
static int auto_threads(fh_rt_t *rt, long *out)
{
    long t = fh_auto_threads(sysconf(_SC_NPROCESSORS_ONLN), rt->boot->local_nranks);
    int32_t mine = (int32_t)t;
    int32_t *all = calloc((size_t)rt->nranks, sizeof *all);
    if (all == NULL)
        return fh_set_error(FH_ERR_NO_MEMORY, "fh_init: out of memory");
    if (rt->boot->ops->allgather(rt->boot, &mine, all, sizeof mine) != FH_OK) {
        free(all);
        return fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: bootstrap allgather failed");
    }
    for (int r = 0; r < rt->nranks; r++)
        if (all[r] >= 1 && all[r] < t)     /* a peer's bytes: 1..t only */
            t = all[r];
    free(all);
    *out = t;
    return FH_OK;
}

int fh_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fh_clear_error();
    fh_tls_t *self = fh_tls_peek();
    if (self != NULL && self->in_handler)
        return fh_set_error(FH_ERR_IN_HANDLER, "fh_init: inside an AM handler");
    int expected = FH_RT_NONE;
    if (!atomic_compare_exchange_strong(&fh_rt_state, &expected, FH_RT_STARTING)) {
        if (expected == FH_RT_DOWN && init_failed_late[0])
            return fh_set_error(FH_ERR_STATE, "fh_init: an earlier fh_init failed after "
                                "opening the network (%s); it cannot be retried in this "
                                "process", init_failed_late);
        return fh_set_error(FH_ERR_STATE, "fh_init: already %s",
                            expected == FH_RT_DOWN ? "finalized (fh_init may be called once)"
                            : expected == FH_RT_STARTING ? "initializing in another thread"
                                                         : "initialized");
    }
    fh_rt_t *rt = calloc(1, sizeof *rt);
    if (rt == NULL) {
        atomic_store(&fh_rt_state, FH_RT_NONE);
        return fh_set_error(FH_ERR_NO_MEMORY, "fh_init: out of memory");
    }
    char err[256];
    if (fh_config_load(&rt->cfg, err, sizeof err) != FH_OK ||
        load_conduit_settings(rt, err, sizeof err) != FH_OK ||
        (!atomic_load(&names_given) &&
         fh_log_set_names_spec(rt->cfg.rank_names, err, sizeof err) != 0))
        return init_fail_early(rt, FH_ERR_CONFIG, err);
    fh_log_set_verbose((int)rt->cfg.verbose);
    rt->reg_ops = fh_reg_pick(rt->cfg.reg_strategy);

    fh_set_error(FH_OK, "%s", "");   /* init_fail reports what the failing step set */
    int rc = fh_boot_open(&rt->boot);
    if (rc != FH_OK) {
        free(rt);
        atomic_store(&fh_rt_state, FH_RT_NONE);
        return fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: bootstrap failed (the reason is "
                            "on stderr, \"firehose[?]: bootstrap: ...\")");
    }
    rt->rank = rt->boot->rank;
    rt->nranks = rt->boot->nranks;
    fh_log_set_rank(rt->rank);
    if (rt->rank == 0)
        fh_env_check(&rt->cfg);   /* misspelt names: warn, go on */
    /* Every rank finds the same mismatch (agree.c): each returns, none waits. */
    if ((rc = fh_config_agree(rt->boot, &rt->cfg)) != FH_OK)
        return init_fail(rt, rc);
    rt->svc = &fh_reg_services;
    fh_reg_bind(&rt->core);     /* from here on the strategy's hooks may run */
    fh_vma_prepare();           /* memory checks that need no new descriptor */
    long threads = rt->cfg.max_threads;
    if (threads == 0 && (rc = auto_threads(rt, &threads)) != FH_OK)
        return init_fail(rt, rc);
    rt->npaths = rt->cfg.paths == FH_PATHS_SHARED ? 1 : 1 + (int)threads;
    pthread_mutex_init(&rt->bind_lock, NULL);
    pthread_mutex_init(&rt->seg_lock, NULL);
    pthread_mutex_init(&rt->coll_lock, NULL);
    pthread_mutex_init(&rt->tls_all_lock, NULL);
    atomic_store(&rt->seg_epoch, 1);
    if (pthread_key_create(&rt->tls_key, fh_tls_release) != 0) {
        pthread_mutex_destroy(&rt->bind_lock);
        pthread_mutex_destroy(&rt->seg_lock);
        pthread_mutex_destroy(&rt->coll_lock);
        pthread_mutex_destroy(&rt->tls_all_lock);
        return init_fail(rt, fh_set_error(FH_ERR_NO_MEMORY, "fh_init: pthread_key_create "
                                          "failed (too many thread-specific keys)"));
    }
    rt->locks_made = true;
    rt->am_lost_req = calloc((size_t)rt->nranks, sizeof *rt->am_lost_req);
    rt->am_lost_in = calloc((size_t)rt->nranks, sizeof *rt->am_lost_in);
    rt->am_lost_svc = calloc((size_t)rt->nranks, sizeof *rt->am_lost_svc);
    if (rt->am_lost_req == NULL || rt->am_lost_in == NULL || rt->am_lost_svc == NULL)
        return init_fail(rt, fh_set_error(FH_ERR_NO_MEMORY, "fh_init: out of memory"));

    rt->am_max_packet = FH_AM_HDR_BYTES + 8 * FH_AM_MAX_ARGS + rt->cfg.am_max_medium;
    fh_conduit_config_t ccfg = {
        .rank = rt->rank, .nranks = rt->nranks, .npaths = rt->npaths,
        .am_max_packet = rt->am_max_packet,
        .all_local = rt->boot->local_nranks == rt->boot->nranks,
        .verbose = (int)rt->cfg.verbose,
    };
    rt->cops = pick_conduit(rt, &ccfg);
    if (rt->cops == NULL)
        return init_fail(rt, fh_set_error(FH_ERR_NOT_SUPPORTED, "fh_init: no conduit"));
    ccfg.settings = fh_conduit_settings_of(rt, rt->cops->settings);
    fh_set_error(FH_OK, "%s", "");   /* pick_conduit's probing may have set one */
    rc = rt->cops->open(&ccfg, &fh_upcalls, &rt->conduit, &rt->limits);
    if (rc != FH_OK) {
        char why[460];   /* the conduit's own reason, e.g. FH_IBV_DEVICE=x: no such device */
        snprintf(why, sizeof why, "%s", fh_last_error());
        rt->conduit = NULL;
        return init_fail(rt, fh_set_error(rc, "fh_init: cannot open the %s conduit%s%s",
                                          rt->cops->name, why[0] ? ": " : "", why));
    }
    if (rt->limits.am_max_packet < rt->am_max_packet)
        rt->am_max_packet = rt->limits.am_max_packet;
    if (rt->am_max_packet < FH_AM_HDR_BYTES + 8 * FH_AM_MAX_ARGS + FH_AM_MIN_MEDIUM)
        return init_fail(rt, fh_set_error(FH_ERR_TRANSPORT,
                                          "fh_init: conduit message size %zu too small",
                                          rt->limits.am_max_packet));
    rt->am_max_medium = rt->am_max_packet - FH_AM_HDR_BYTES - 8 * FH_AM_MAX_ARGS;

    /* What every poll and every progress call runs besides the conduit
     * (path.c); node_am.c adds its rings if it has any. */
    fh_progress_add_poller(rt, &fh_am_poller);
    fh_progress_add_poller(rt, &fh_rma_poller);
    fh_progress_add_poller(rt, &fh_atomic_poller);
    fh_progress_add_thread(rt, fh_atomic_progress);
    rt->paths = calloc((size_t)rt->npaths, sizeof *rt->paths);
    if (rt->paths == NULL)
        return init_fail(rt, fh_set_error(FH_ERR_NO_MEMORY, "fh_init: out of memory"));
    rt->svc_path = &rt->paths[0].base;
    /* FH_PATHS=lazy, with a conduit that connects paths later
     * (limits.lazy_paths): only the service path now; a thread path costs
     * an endpoint and a connection per rank, and is made when a thread
     * first needs it (thread.c). */
    rt->lazy_paths = rt->cfg.paths == FH_PATHS_LAZY && rt->limits.lazy_paths &&
                     rt->cops->path_connect != NULL && rt->npaths > 1;
    const int eager = rt->lazy_paths ? 1 : rt->npaths;
    for (int i = 0; i < eager; i++) {
        rc = fh_path_setup(rt, &rt->paths[i], i);
        if (rc != FH_OK)
            return init_fail(rt, fh_set_error(rc, "fh_init: cannot create path %d", i));
        atomic_store_explicit(&rt->paths_made, i + 1, memory_order_release);
    }
    rc = rt->cops->connect(rt->conduit, rt->boot);
    if (rc != FH_OK) {
        char why[460];   /* e.g. a peer's fh_init failed (boot_fhrun.c) */
        snprintf(why, sizeof why, "%s", fh_last_error());
        return init_fail(rt, fh_set_error(rc, "fh_init: address exchange failed%s%s",
                                          why[0] ? ": " : "", why));
    }
    if ((rc = fh_peer_init(rt)) != FH_OK || (rc = fh_peer_groups(rt)) != FH_OK)
        return init_fail(rt, rc);
    fh_wait_init(rt);                 /* before the node barrier's choice */
    fh_place_init(rt);
    if ((rc = fh_route_init(rt)) != FH_OK || (rc = fh_node_am_init(rt)) != FH_OK ||
        (rc = local_reach_check(rt)) != FH_OK)
        return init_fail(rt, rc);
    fh_net_sleep_init(rt);
    if ((rc = fh_seg_init(rt)) != FH_OK)
        return init_fail(rt, rc);
    fh_reg_register_all_handlers();
    if (rt->reg_ops->init != NULL && (rc = rt->reg_ops->init(&rt->core)) != FH_OK)
        return init_fail(rt, rc);
    fh_lc_init(&rt->core);
    rt->modules_up = true;
    fh_atomic_init();
    fh_strided_init();
    if ((rc = fh_seg_protect_init(rt)) != FH_OK)
        return init_fail(rt, rc);
    fh_coll_init();

    if (rt->cfg.verbose >= 1 && rt->rank == 0) {
        fh_log_verbose(1, "%d ranks, conduit %s (%s), %d paths (%s%s), boot %s",
                       rt->nranks, rt->cops->name, rt->limits.description, rt->npaths,
                       rt->cfg.paths == FH_PATHS_SHARED ? "shared"
                       : rt->cfg.paths == FH_PATHS_LAZY ? "lazy" : "independent",
                       rt->lazy_paths ? ": thread paths made on first use" : "",
                       rt->boot->ops->name);
        fh_log_verbose(1, "am_max_medium=%zu max_inject=%zu max_msg=%zu needs_local_mr=%d",
                       rt->am_max_medium, rt->limits.max_inject, rt->limits.max_msg,
                       rt->limits.needs_local_mr);
        fh_config_print(&rt->cfg, stderr, "firehose[0]: config ");
        for (int i = 0; i < FH_NCONDUITS; i++)
            fh_config_print_table(fh_conduit_settings_all[i]->table,
                                  fh_conduit_settings_all[i]->len, &rt->csettings[i],
                                  stderr, "firehose[0]: config ");
    }
    fh_rt = rt;
    atomic_store_explicit(&fh_rt_state, FH_RT_UP, memory_order_release);
    rc = rt->boot->ops->barrier(rt->boot);
    if (rc != FH_OK) {
        /* A peer failed (its reason in fh_last_error()) or the launcher
         * timed out: no rank got past this barrier, none uses us. */
        char why[460];
        snprintf(why, sizeof why, "%s", fh_last_error());
        atomic_store(&fh_rt_state, FH_RT_STARTING);
        fh_rt = NULL;
        return init_fail(rt, fh_set_error(rc, "fh_init: the final barrier failed%s%s",
                                          why[0] ? ": " : "", why));
    }
    return FH_OK;
}

/* After the final barrier, peers may still have credit packets in flight to
 * us.  Poll until the service and own paths stay quiet, with a bootstrap
 * barrier on each side so nobody closes an endpoint a peer still writes to.
 * After a failed final barrier (a peer lost: `all` false) one quiet round
 * and no bootstrap barrier: the lost rank never comes to it, and a
 * launcher that keeps the job going without it (mpirun --enable-recovery)
 * may hold the survivors in it until FH_BOOT_TIMEOUT (pmix.sh dead_rank
 * finalize). */
static void finalize_drain(fh_rt_t *rt, fh_tls_t *t, bool all)
{
    for (int round = 0; round < (all ? 2 : 1); round++) {
        pthread_mutex_lock(&rt->paths[0].lock);
        fh_am_flush_credits(&rt->paths[0], true);
        fh_am_flush_backlog(&rt->paths[0]);
        pthread_mutex_unlock(&rt->paths[0].lock);
        double end = fh_now() + FH_FINALIZE_QUIET_S;
        for (unsigned idle = 0; fh_now() < end;)
            fh_wait_round(t, &idle);
        if (all)
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
    if (atomic_load(&rt->bar_split_owner) == t)
        return fh_coll_enter(t, "fh_finalize");   /* FH_ERR_STATE, nothing done */
    fh_quiet();
    /* Threads exiting now: running hooks finish first, later ones only
     * hand their state over (thread.c, "The exit gate"). */
    fh_tls_close_exits(t);
    /* What the rank's threads (exited ones too) put on the network leaves
     * first: the barrier's messages must not queue behind it while we sit
     * in the bootstrap's barriers below, polling nothing. */
    fh_wait_rank_sent(t);
    /* A peer may still be in another collective (a mismatch its call
     * reports): pair with its next calls until every rank is here. */
    if ((err = fh_coll_enter(t, "fh_finalize")) != FH_OK)
        return err;   /* only before anything was done: see the top */
    int brc;
    while ((brc = fh_barrier_internal(t, fh_coll_sig(FH_COLL_FINALIZE, 0), "fh_finalize")) ==
           FH_ERR_STATE)
        ;
    fh_coll_leave();
    /* A peer's service link lost for good (coll.c): the barrier cannot
     * complete, so we finalize anyway and say so at the end. */
    char why[256] = "";
    if (brc != FH_OK)
        snprintf(why, sizeof why, "%s", fh_last_error());
    atomic_store(&rt->finalizing, 1);
    finalize_drain(rt, t, brc == FH_OK);
    FH_TEST_POINT(FH_TP_FINALIZE_DRAINED);
    if (rt->cfg.stats)
        fh_stats_print(stderr);
    atomic_store(&fh_rt_state, FH_RT_DOWN);
    fh_seg_protect_fini();    /* the wrappers pass through from here */
    /* Keys die before their memory: every registration for peers is
     * deregistered before any segment is unmapped. */
    const fh_reg_ops_t *reg = rt->reg_ops;
    unsigned undead = reg->fini_keys != NULL ? reg->fini_keys(&rt->core) : 0;
    fh_seg_fini(rt, undead != 0);
    fh_lc_fini();             /* before reg->fini: it may share its monitor */
    if (reg->fini != NULL)
        reg->fini(&rt->core);   /* firehose: unpins everything; before the conduit closes */
    for (int i = 0; i < fh_paths_made(rt); i++)
        fh_path_teardown(rt, &rt->paths[i]);
    rt->cops->close(rt->conduit);
    rt->boot->ops->finalize(rt->boot);
    fh_node_am_fini(rt);
    fh_route_fini(rt);
    fh_peer_fini(rt);
    fh_reg_bind(NULL);
    /* Thread states of other threads are freed by their exit, or here if
     * their hook came too late to run; ours now. */
    fh_tls_finalize(rt);
    pthread_setspecific(rt->tls_key, NULL);
    pthread_key_delete(rt->tls_key);
    free(rt->paths);
    free(rt->am_lost_req);
    free(rt->am_lost_in);
    free(rt->am_lost_svc);
    free(rt);
    if (brc != FH_OK)
        return fh_set_error(brc, "%s; finalized anyway: what that rank sent us may not "
                            "all have landed", why);
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
