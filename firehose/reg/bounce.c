/*
 * bounce.c -- FH_REG_STRATEGY=bounce (strat_common.h): no registration at
 * all; data travels inside AMs, copied through the conduit's pre-registered
 * message buffers, in chunks of at most fh_am_max_medium() bytes.
 *
 *   put: one medium request BOUNCE_PUT per chunk, args {token, dst, off,
 *        len}; the target checks [dst, dst+len) lies in one of its segment
 *        pieces, copies, and answers BOUNCE_REP {token, status, off}.
 *   get: one short request BOUNCE_GET per chunk, args {token, src, off,
 *        len}; the target checks the range and answers BOUNCE_REP with the
 *        data as a medium reply (or only the error status).
 * Requests go on the calling thread's own path (replies come back to it, so
 * the thread that waits is the one that polls them); the AM credits bound
 * how many chunks are in flight (FH_AM_CREDITS): the chunks beyond them are
 * sent by later progress calls as replies return credits (strat_common.h,
 * "Completion"), never by a call that waits for them.  The operation completes
 * when every chunk was answered: for a put, the data is then in the
 * target's memory.  A refusal is logged at the target; the error reaches
 * the requester in the reply.  When the link of the path to the target's
 * service path is lost, the operation fails at once with FH_ERR_PEER_DEAD
 * (fh_strat_link_lost): its unanswered chunks may or may not have been
 * copied, its unsent ones are never sent.
 */
#include <stdlib.h>
#include <string.h>

#include "firehose/util/vma.h"
#include "strat_common.h"

/* ------------------------------------------------------------ target */

/* Checks a request's range; logs and returns an error if refused. */
static int check_range(struct fh_strat *s, int src, const char *what, unsigned nargs,
                       const uint64_t *args, size_t len, size_t max)
{
    fh_core_t *rt = fh_reg_core;
    int st = FH_OK;
    const char *why = NULL;
    fh_seg_range_t r;
    if (s == NULL || s->kind != FH_REG_BOUNCE) {
        st = FH_ERR_CONFIG;
        why = "FH_REG_STRATEGY is not bounce here";
    } else if (nargs != 4) {
        st = FH_ERR_INVALID;
        why = "malformed message";
    } else if (len == 0 || len > max || args[3] != len) {
        st = FH_ERR_INVALID;
        why = "bad length";
    } else if (args[1] > UINTPTR_MAX || args[1] + len < args[1]) {
        st = FH_ERR_OVERFLOW;
        why = "wrapping range";
    } else if (svc_seg_find(rt->rank, (uintptr_t)args[1], len, &r) != FH_OK) {
        st = FH_ERR_OUT_OF_SEGMENT;
        why = "outside our segments";
    } else if (!fh_vma_check((uintptr_t)args[1], len,
                             FH_VMA_READ | (what[0] == 'p' ? FH_VMA_WRITE : 0), NULL)) {
        /* The application protected or unmapped part of its segment: our
         * copy would fault (docs/reliability.md). */
        st = FH_ERR_OUT_OF_SEGMENT;
        why = what[0] == 'p' ? "not mapped writable" : "not mapped readable";
    }
    if (st != FH_OK) {
        fh_log_error("bounce: refused a %s from %s for [0x%llx, +%zu): %s", what, FH_RANK_NAME(src),
                     nargs >= 2 ? (unsigned long long)args[1] : 0ULL, len, why);
        if (s != NULL) {
            pthread_mutex_lock(&s->lock);
            s->peer[src].refused++;
            pthread_mutex_unlock(&s->lock);
        }
    }
    return st;
}

static void h_bounce_put(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                         unsigned nargs)
{
    int src;
    svc_token_source(tok, &src);
    int st = check_range(fh_reg_core->strat, src, "put", nargs, args, nbytes,
                         fh_reg_core->am_max_medium);
    if (st == FH_OK)
        memcpy((void *)(uintptr_t)args[1], buf, nbytes);
    uint64_t rep[3] = {nargs ? args[0] : 0, (uint64_t)(int64_t)st, nargs > 2 ? args[2] : 0};
    svc_am_reply(tok, FH_H_BOUNCE_REP, rep, 3);
}

static void h_bounce_get(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                         unsigned nargs)
{
    (void)buf;
    int src;
    svc_token_source(tok, &src);
    size_t len = nargs == 4 && nbytes == 0 ? (size_t)args[3] : 0;
    int st = check_range(fh_reg_core->strat, src, "get", nargs, args, len,
                         fh_reg_core->am_max_medium);
    uint64_t rep[3] = {nargs ? args[0] : 0, (uint64_t)(int64_t)st, nargs > 2 ? args[2] : 0};
    if (st == FH_OK)
        svc_am_reply_medium_args(tok, FH_H_BOUNCE_REP, (void *)(uintptr_t)args[1],
                                 len, rep, 3);
    else
        svc_am_reply(tok, FH_H_BOUNCE_REP, rep, 3);
}

/* ------------------------------------------------------------ initiator */

static void h_bounce_rep(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                         unsigned nargs)
{
    struct fh_strat *s = fh_reg_core->strat;
    int src;
    svc_token_source(tok, &src);
    if (s == NULL || nargs != 3) {
        fh_log_error("bounce: dropped a malformed reply from %s", FH_RANK_NAME(src));
        return;
    }
    int st = (int)(int64_t)args[1];
    const char *bad = NULL;
    pthread_mutex_lock(&s->lock);
    strat_wait_t *w = strat_wait_find(s, src, args[0]);
    if (w == NULL || atomic_load_explicit(&w->pending, memory_order_relaxed) == 0) {
        bad = "for no pending operation";
    } else {
        if (st > 0)
            st = FH_ERR_INVALID;
        if (st == FH_OK && nbytes != 0) {
            /* get data: must land inside the waiting operation's buffer */
            if (w->local == NULL || args[2] > w->n || nbytes > w->n - args[2]) {
                st = FH_ERR_TRANSPORT;
                bad = "with data outside the operation";
            } else {
                memcpy(w->local + args[2], buf, nbytes);
            }
        }
        if (st != FH_OK && w->status == FH_OK)
            w->status = st;
        atomic_fetch_sub_explicit(&w->pending, 1, memory_order_release);
    }
    pthread_mutex_unlock(&s->lock);
    if (bad != NULL)
        fh_log_error("bounce: dropped a reply from %s %s (token %llu)", FH_RANK_NAME(src), bad,
                     (unsigned long long)args[0]);
}

void strat_bounce_register_handlers(void)
{
    svc_am_register(FH_H_BOUNCE_PUT, h_bounce_put, "bounce-put");
    svc_am_register(FH_H_BOUNCE_GET, h_bounce_get, "bounce-get");
    svc_am_register(FH_H_BOUNCE_REP, h_bounce_rep, "bounce-rep");
}

int strat_bounce_start(struct fh_strat *s, strat_xop_t *x)
{
    size_t C = s->chunk;
    x->nchunks = (x->n + C - 1) / C;
    if (x->nchunks > UINT32_MAX)
        return fh_set_error(FH_ERR_TOO_BIG, "%s to %s: %zu bytes is too many bounce "
                            "chunks", x->is_put ? "put" : "get", FH_RANK_NAME(x->rank), x->n);
    x->w.local = x->is_put ? NULL : x->local;
    x->w.n = x->n;
    x->token = strat_wait_begin(s, x->rank, &x->w, (uint32_t)x->nchunks);
    if (x->token == 0)
        return fh_set_error(FH_ERR_NO_MEMORY, "%s to %s: out of memory",
                            x->is_put ? "put" : "get", FH_RANK_NAME(x->rank));
    return FH_OK;
}

/* Sends the chunks the path's credits allow; over once every chunk sent
 * was answered. */
bool strat_bounce_step(fh_thread_t *t, struct fh_strat *s, strat_xop_t *x)
{
    size_t C = s->chunk, sent = x->sent;
    int rc = FH_OK;
    /* While chunks are unsent, pending counts them: 0 means the link was
     * lost (fh_strat_link_lost failed the operation): send no more. */
    if (x->sent < x->nchunks && atomic_load_explicit(&x->w.pending, memory_order_acquire) == 0)
        x->sent = sent = x->nchunks;
    while (x->sent < x->nchunks) {
        size_t off = x->sent * C;
        size_t len = x->n - off < C ? x->n - off : C;
        uint64_t args[4] = {x->token, x->remote + off, off, len};
        rc = x->is_put ? svc_am_try_request(t, t->path, x->rank, FH_SVC_AM_MEDIUM,
                                            FH_H_BOUNCE_PUT, x->local + off, len, args, 4)
                       : svc_am_try_request(t, t->path, x->rank, FH_SVC_AM_SHORT,
                                            FH_H_BOUNCE_GET, NULL, 0, args, 4);
        if (rc != FH_OK)
            break;
        x->sent++;
    }
    if (x->sent != sent || (rc != FH_OK && rc != FH_ERR_AGAIN)) {
        pthread_mutex_lock(&s->lock);
        s->peer[x->rank].requests += x->sent - sent;
        if (rc != FH_OK && rc != FH_ERR_AGAIN) {
            /* Never sent: no reply will count them down (unless the link's
             * loss failed the whole operation meanwhile: pending is 0). */
            if (atomic_load_explicit(&x->w.pending, memory_order_relaxed) != 0)
                atomic_fetch_sub_explicit(&x->w.pending, (uint32_t)(x->nchunks - x->sent),
                                          memory_order_relaxed);
            x->status = rc;
            x->sent = x->nchunks;
        }
        pthread_mutex_unlock(&s->lock);
    }
    if (x->sent < x->nchunks || atomic_load_explicit(&x->w.pending, memory_order_acquire))
        return false;
    strat_wait_end(s, x->rank, x->token);
    if (x->status == FH_OK)
        x->status = x->w.status;
    return true;
}
