/*
 * boot_pmix.c -- the bootstrap under a PMIx launcher (mpirun, srun, prun).
 * Compiled only with FH_HAVE_PMIX (OpenPMIx; link -lpmix).
 *
 * allgather: PMIx_Put(PMIX_GLOBAL, "fh.ag.<seq>", bytes), PMIx_Commit,
 * PMIx_Fence(all, PMIX_COLLECT_DATA), then PMIx_Get of every rank's value.
 * barrier:   PMIx_Fence without data.
 * An event handler ends this process (FH_EXIT_PEER_DEAD) with a message
 * naming the rank when the server reports that a peer aborted or died, or
 * when the connection to the server is lost.
 */
#ifdef FH_HAVE_PMIX

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

#include "bootstrap.h"
#include "boot_impl.h"
#include "firehose.h"
#include "firehose/util/log.h"

typedef struct pmix_priv {
    pmix_proc_t me;
    unsigned seq;
    int timeout_s;
    size_t evh_id;
    int have_evh;
} pmix_priv_t;

/* Read by the event handler (PMIx progress thread). */
static volatile int pmix_quiet;
static int pmix_my_rank = -1;

static int value_to_long(const pmix_value_t *v, long *out)
{
    switch (v->type) {
    case PMIX_UINT32: *out = (long)v->data.uint32; return 0;
    case PMIX_UINT16: *out = (long)v->data.uint16; return 0;
    case PMIX_UINT8:  *out = (long)v->data.uint8;  return 0;
    case PMIX_INT32:  *out = (long)v->data.int32;  return 0;
    case PMIX_INT:    *out = (long)v->data.integer; return 0;
    case PMIX_UINT:   *out = (long)v->data.uint;   return 0;
    case PMIX_INT16:  *out = (long)v->data.int16;  return 0;
    case PMIX_UINT64: *out = (long)v->data.uint64; return 0;
    case PMIX_INT64:  *out = (long)v->data.int64;  return 0;
    case PMIX_SIZE:   *out = (long)v->data.size;   return 0;
    case PMIX_PROC_RANK: *out = (long)v->data.rank; return 0;
    default: return -1;
    }
}

static int get_long(const pmix_proc_t *proc, const char *key, long *out)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(proc, key, NULL, 0, &v);
    if (rc != PMIX_SUCCESS || !v)
        return -1;
    int r = value_to_long(v, out);
    PMIX_VALUE_RELEASE(v);
    return r;
}

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source,
                     pmix_info_t info[], size_t ninfo, pmix_info_t results[],
                     size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc,
                     void *cbdata)
{
    (void)id;
    (void)results;
    (void)nresults;
    long rank = source ? (long)source->rank : -1;
    long exit_code = -1;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) &&
            info[i].value.type == PMIX_PROC && info[i].value.data.proc)
            rank = (long)info[i].value.data.proc->rank;
        else if (PMIX_CHECK_KEY(&info[i], PMIX_EXIT_CODE))
            value_to_long(&info[i].value, &exit_code);
    }
    fh_log_verbose(1, "bootstrap: PMIx event %s (%d) about %s, exit "
                      "code %ld", PMIx_Error_string(status), (int)status, FH_RANK_NAME((int)rank),
                   exit_code);
    int fatal = !pmix_quiet;
    if (status == PMIX_PROC_TERMINATED
#ifdef PMIX_EVENT_PROC_TERMINATED
        || status == PMIX_EVENT_PROC_TERMINATED
#endif
    )
        fatal = fatal && exit_code != 0 && exit_code != -1;
    if (status != PMIX_ERR_LOST_CONNECTION &&
        (rank == pmix_my_rank || rank == (long)PMIX_RANK_WILDCARD))
        fatal = 0;
    if (fatal) {
        if (status == PMIX_ERR_LOST_CONNECTION)
            fh_log_error("lost the launcher (PMIx server); aborting");
        else if (exit_code >= 0)
            fh_log_error("%s died: %s (exit code %ld); aborting",
                         FH_RANK_NAME((int)rank), PMIx_Error_string(status), exit_code);
        else
            fh_log_error("%s died: %s; aborting", FH_RANK_NAME((int)rank),
                         PMIx_Error_string(status));
        _exit(FH_EXIT_PEER_DEAD);
    }
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* Fence results meaning that a participant is gone. */
static int peer_died(pmix_status_t rc)
{
    switch (rc) {
    case PMIX_ERR_PARTIAL_SUCCESS:
    case PMIX_ERR_LOST_CONNECTION:
    case PMIX_ERR_UNREACH:
#ifdef PMIX_ERR_PROC_ABORTED
    case PMIX_ERR_PROC_ABORTED:
#endif
#ifdef PMIX_ERR_PROC_ABORTED_BY_SIG
    case PMIX_ERR_PROC_ABORTED_BY_SIG:
#endif
#ifdef PMIX_ERR_PROC_TERM_WO_SYNC
    case PMIX_ERR_PROC_TERM_WO_SYNC:
#endif
#ifdef PMIX_ERR_EXIT_NONZERO_TERM
    case PMIX_ERR_EXIT_NONZERO_TERM:
#endif
        return 1;
    default:
        return 0;
    }
}

static int fence(pmix_priv_t *p, int collect, const char *what)
{
    pmix_proc_t all;
    pmix_info_t info[2];
    bool yes = true;
    int tmo = p->timeout_s;
    size_t n = 0;
    PMIX_PROC_LOAD(&all, p->me.nspace, PMIX_RANK_WILDCARD);
    if (collect)
        PMIX_INFO_LOAD(&info[n++], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[n++], PMIX_TIMEOUT, &tmo, PMIX_INT);
    pmix_status_t rc = PMIx_Fence(&all, 1, info, n);
    for (size_t i = 0; i < n; i++)
        PMIX_INFO_DESTRUCT(&info[i]);
    if (rc == PMIX_SUCCESS)
        return FH_OK;
    if (!pmix_quiet && peer_died(rc)) {
        /* As under fhrun: a dead peer ends the survivors.  The server does
         * not say which peer; the launcher (mpirun) names it. */
        if (rc == PMIX_ERR_LOST_CONNECTION)
            fh_log_error("lost the launcher (PMIx server) in the %s; aborting",
                         what);
        else
            fh_log_error("a peer died during the %s (PMIx_Fence: %s); "
                         "aborting", what, PMIx_Error_string(rc));
        _exit(FH_EXIT_PEER_DEAD);
    }
    if (rc == PMIX_ERR_TIMEOUT)
        fh_log_error("bootstrap: timed out after %d s (FH_BOOT_TIMEOUT) in the "
                     "%s: waiting for all ranks in PMIx_Fence", p->timeout_s,
                     what);
    else
        fh_log_error("bootstrap: PMIx_Fence in the %s failed: %s", what,
                     PMIx_Error_string(rc));
    return FH_ERR_BOOTSTRAP;
}

static int pmix_allgather(fh_boot_t *b, const void *in, void *out, size_t len)
{
    pmix_priv_t *p = b->priv;
    char what[64], key[32];
    snprintf(what, sizeof what, "allgather of %zu bytes", len);
    if (len == 0)
        return fence(p, 0, what);
    snprintf(key, sizeof key, "fh.ag.%u", p->seq++);

    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)in;  /* PMIx_Put copies */
    v.data.bo.size = len;
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    if (rc == PMIX_SUCCESS)
        rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) {
        fh_log_error("bootstrap: PMIx_Put/Commit in the %s failed: %s", what,
                     PMIx_Error_string(rc));
        return FH_ERR_BOOTSTRAP;
    }
    /* Keep our own contribution before `out` (which may alias `in`) is
     * written. */
    memmove((char *)out + (size_t)b->rank * len, in, len);
    if (fence(p, 1, what) != FH_OK)
        return FH_ERR_BOOTSTRAP;
    for (int r = 0; r < b->nranks; r++) {
        if (r == b->rank)
            continue;
        pmix_proc_t proc;
        pmix_value_t *val = NULL;
        PMIX_PROC_LOAD(&proc, p->me.nspace, (pmix_rank_t)r);
        rc = PMIx_Get(&proc, key, NULL, 0, &val);
        if (rc != PMIX_SUCCESS || !val || val->type != PMIX_BYTE_OBJECT ||
            val->data.bo.size != len) {
            fh_log_error("bootstrap: %s: %s's contribution is %s", what, FH_RANK_NAME(r),
                         rc != PMIX_SUCCESS ? PMIx_Error_string(rc)
                                            : "of the wrong type or length");
            if (val)
                PMIX_VALUE_RELEASE(val);
            return FH_ERR_BOOTSTRAP;
        }
        memcpy((char *)out + (size_t)r * len, val->data.bo.bytes, len);
        PMIX_VALUE_RELEASE(val);
    }
    return FH_OK;
}

static int pmix_barrier(fh_boot_t *b)
{
    return fence(b->priv, 0, "barrier");
}

__attribute__((noreturn)) static void pmix_abort(fh_boot_t *b, int code,
                                              const char *msg)
{
    (void)b;
    if (code == 0)
        code = 1;
    pmix_quiet = 1;
    fh_log_error("aborting the job (code %d): %s", code, msg ? msg : "");
    PMIx_Abort(code, msg ? msg : "", NULL, 0);
    _exit(code & 0xff ? code & 0xff : 1);
}

static void pmix_finalize(fh_boot_t *b)
{
    pmix_priv_t *p = b->priv;
    pmix_quiet = 1;
    if (p->have_evh)
        PMIx_Deregister_event_handler(p->evh_id, NULL, NULL);
    pmix_status_t rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS)
        fh_log_verbose(1, "bootstrap: PMIx_Finalize: %s", PMIx_Error_string(rc));
    free(p);
    free(b);
}

/* PMIx has no way to fail the peers' fences without killing this process
 * too (PMIx_Abort), so we only stop listening: the launcher ends the job
 * when this process exits without PMIx_Finalize, as for any rank that
 * leaves early.  PMIx stays initialized (a retried fh_init reuses it). */
static void pmix_fail(fh_boot_t *b, const char *why)
{
    pmix_priv_t *p = b->priv;
    pmix_quiet = 1;
    if (p->have_evh)
        PMIx_Deregister_event_handler(p->evh_id, NULL, NULL);
    fh_log_verbose(1, "bootstrap: fh_init failed (%s); the launcher ends the "
                   "job when this process exits", why ? why : "");
    free(p);
    free(b);
}

static const fh_boot_ops_t pmix_ops = {
    .name = "pmix",
    .allgather = pmix_allgather,
    .barrier = pmix_barrier,
    .abort = pmix_abort,
    .fail = pmix_fail,
    .finalize = pmix_finalize,
};

int fh_boot_pmix_open(fh_boot_t **out, int timeout_s)
{
    fh_boot_t *b = calloc(1, sizeof *b);
    pmix_priv_t *p = calloc(1, sizeof *p);
    if (!b || !p) {
        free(b);
        free(p);
        fh_log_error("bootstrap: out of memory");
        return FH_ERR_BOOTSTRAP;
    }
    pmix_quiet = 0;   /* a retry after a failed fh_init listens again */
    pmix_status_t rc = PMIx_Init(&p->me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fh_log_error("bootstrap: PMIx_Init failed (PMIX_NAMESPACE=%s): %s",
                     getenv("PMIX_NAMESPACE"), PMIx_Error_string(rc));
        free(b);
        free(p);
        return FH_ERR_BOOTSTRAP;
    }
    p->timeout_s = timeout_s;
    fh_log_set_rank((int)p->me.rank);
    pmix_proc_t wild;
    PMIX_PROC_LOAD(&wild, p->me.nspace, PMIX_RANK_WILDCARD);
    long n, lr, ln;
    if (get_long(&wild, PMIX_JOB_SIZE, &n) < 0 || n < 1 || n > (1L << 24)) {
        fh_log_error("bootstrap: PMIx did not give the job size (PMIX_JOB_SIZE)");
        PMIx_Finalize(NULL, 0);
        free(b);
        free(p);
        return FH_ERR_BOOTSTRAP;
    }
    b->ops = &pmix_ops;
    b->rank = (int)p->me.rank;
    b->nranks = (int)n;
    b->priv = p;
    if (get_long(&p->me, PMIX_LOCAL_RANK, &lr) == 0 &&
        get_long(&wild, PMIX_LOCAL_SIZE, &ln) == 0 && lr >= 0 && lr < ln) {
        b->local_rank = (int)lr;
        b->local_nranks = (int)ln;
    } else {
        fh_log_verbose(1, "bootstrap: PMIx gave no PMIX_LOCAL_RANK/SIZE; "
                          "assuming no other rank on this host");
        b->local_rank = 0;
        b->local_nranks = 1;
    }
    pmix_my_rank = b->rank;

    pmix_status_t codes[] = {
#ifdef PMIX_ERR_PROC_ABORTED
        PMIX_ERR_PROC_ABORTED,
#endif
#ifdef PMIX_ERR_PROC_ABORTED_BY_SIG
        PMIX_ERR_PROC_ABORTED_BY_SIG,
#endif
#ifdef PMIX_ERR_PROC_REQUESTED_ABORT
        PMIX_ERR_PROC_REQUESTED_ABORT,
#endif
#ifdef PMIX_ERR_PROC_TERM_WO_SYNC
        PMIX_ERR_PROC_TERM_WO_SYNC,
#endif
#ifdef PMIX_ERR_EXIT_NONZERO_TERM
        PMIX_ERR_EXIT_NONZERO_TERM,
#endif
#ifdef PMIX_ERR_PROC_KILLED_BY_CMD
        PMIX_ERR_PROC_KILLED_BY_CMD,
#endif
#ifdef PMIX_EVENT_PROC_TERMINATED
        PMIX_EVENT_PROC_TERMINATED,
#endif
        PMIX_PROC_TERMINATED,
        PMIX_ERR_LOST_CONNECTION,
    };
    rc = PMIx_Register_event_handler(codes, sizeof codes / sizeof codes[0],
                                     NULL, 0, on_event, NULL, NULL);
    if (rc >= 0) {
        p->evh_id = (size_t)rc;
        p->have_evh = 1;
    } else {
        fh_log_verbose(1, "bootstrap: cannot register a PMIx event handler "
                          "(%s); the launcher alone handles dead ranks",
                       PMIx_Error_string(rc));
    }
    *out = b;
    return FH_OK;
}

#else  /* !FH_HAVE_PMIX */
/* ISO C forbids an empty translation unit. */
typedef int fh_boot_pmix_unused;
#endif
