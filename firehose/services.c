/*
 * services.c -- the calls the core offers the registration strategies
 * (reg/services.h): adapters from the strategies' views (fh_thread_t,
 * fh_path_base_t) to the core's objects, whose heads they are.  fh_init
 * binds the table (fh_reg_bind) before any strategy hook runs.
 */
#include "internal.h"

static int am_try_request(fh_thread_t *t, fh_path_base_t *p, int rank,
                          enum fh_svc_am_kind kind, unsigned handler, const void *payload,
                          size_t len, const uint64_t *args, unsigned nargs)
{
    unsigned k = kind == FH_SVC_AM_SHORT ? FH_AM_REQ_SHORT : FH_AM_REQ_MEDIUM;
    return fh_am_try_request(fh_tls_of(t), fh_path_of(p), rank, k, handler, payload, len,
                             args, nargs);
}

static void wait_round(fh_thread_t *t, unsigned *idle)
{
    fh_wait_round(fh_tls_of(t), idle);
}

static int wait_ctr(fh_thread_t *t, fh_ctr_t *ctr)
{
    return fh_wait_ctr(fh_tls_of(t), ctr);
}

static void progress_locked(fh_path_base_t *p)
{
    fh_progress_locked(fh_path_of(p));
}

static int seg_find(int rank, uintptr_t addr, size_t n, fh_seg_range_t *out)
{
    return fh_seg_find(fh_rt, rank, addr, n, out);
}

static int post(fh_thread_t *t, bool is_put, int rank, void *local, struct fh_mr *lmr,
                uint64_t remote, size_t n, const fh_rkey_t *rkey, fh_ctr_t *ctr, bool count)
{
    return fh_post(fh_tls_of(t), is_put, rank, local, lmr, remote, n, rkey, ctr, count);
}

const fh_reg_services_t fh_reg_services = {
    .am_register = fh_am_register_internal,
    .am_try_request = am_try_request,
    .am_reply = fh_am_reply_internal,
    .am_reply_medium = fh_am_reply_medium_internal,
    .am_reply_medium_args = fh_am_reply_medium_args_internal,
    .token_source = fh_token_source,
    .wait_round = wait_round,
    .wait_ctr = wait_ctr,
    .progress_locked = progress_locked,
    .seg_find = seg_find,
    .post = post,
    .local_mr_release = fh_rma_local_mr_release,
};
