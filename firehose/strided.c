/*
 * strided.c -- fh_put_strided / fh_get_strided: validation, and the net
 * route's two ways of moving many blocks (route.c: the self and node
 * routes copy block by block themselves).
 *
 * Validation (strided()): rank, NULL, a zero destination stride, both
 * hulls without wrapping, the remote hull inside one segment of the
 * target (fh_rma_validate) -- all before anything is sent, so an argument
 * error changes nothing.
 *
 * Net route (fh_strided_net), chosen per call by the block size:
 *   - small blocks (blk <= FH_STRIDED_AM_MAX, capped at the medium AM
 *     maximum) whose remote hull lies in a segment: gathered into AMs,
 *     floor(max_medium / blk) blocks per message (strided_wire.h has the
 *     format).  A put packs the blocks into medium requests that the
 *     target scatters and acknowledges; a get sends short requests that
 *     the target answers with the gathered blocks as medium replies,
 *     scattered here.  The AM credits bound what is in flight; the call
 *     returns when every message was answered, so a put's data is then
 *     visible at the target (the blocking contract).  1M blocks of 8 B
 *     are 2048 messages of 4 KiB instead of 1M RDMA operations.
 *   - larger blocks, or a hull outside segments (FH_SEGMENT=everything:
 *     the registration strategy checks the target's mapped memory): one
 *     fh_xfer per block, all posted before waiting once at the end
 *     (pipelined; the conduit contract, conduits/conduit.h, has no I/O
 *     vector operation, so each block is one network operation).
 *
 * The target (h_put, h_get) trusts nothing: the arguments pass
 * fh_strided_wire_check (lengths, counts, strides, overflow), the whole
 * hull must lie inside one of its segments (fh_seg_find) -- both in
 * fh_strided_wire_target, fuzzed -- and only then is memory touched; a refusal is answered with its error code and
 * logged (verbose).  The initiator trusts the replies no more: a reply must
 * name a live operation of this path to the same rank, and a get's data
 * must have exactly the length its offset calls for.
 *
 * A put whose target refuses a later message (its segment destroyed
 * meanwhile) may have written the blocks of earlier messages: the call
 * returns the error (include/firehose.h says so).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "strided_wire.h"

/* A strided AM operation of the calling thread, on its path's list while
 * its messages are answered (fh_path_t.strided_ops, p->lock). */
typedef struct fh_strided_op {
    struct fh_strided_op *next;
    uint64_t id;               /* unique on the path (strided_seq) */
    int rank;
    bool is_put;
    char *local;               /* block 0 */
    ptrdiff_t lstride;
    size_t blk, count;
    size_t msg_bytes;          /* bytes of a full message: per_msg * blk */
    size_t pending;            /* messages not answered yet */
    int status;                /* first failure */
} fh_strided_op_t;

/* ------------------------------------------------------------ target */

static bool inside_our_segments(void *ctx, uintptr_t lo, size_t span)
{
    fh_rt_t *rt = ctx;
    fh_seg_range_t r;
    return fh_seg_find(rt, rt->rank, lo, span, &r) == FH_OK &&
           fh_seg_holes_meet(r.holes, lo, span, true) == 0;
}

/* The checks of a received request and its hull against our segments
 * (strided_wire.c).  Returns FH_OK or the error to answer with. */
static int target_check(fh_token_t tok, bool is_put, const uint64_t *args, unsigned nargs,
                        size_t nbytes, fh_strided_desc_t *d)
{
    fh_rt_t *rt = fh_rt;
    const char *why;
    int st = fh_strided_wire_target(is_put, args, nargs, nbytes, rt->am_max_medium,
                                    inside_our_segments, rt, d, &why);
    if (st != FH_OK) {
        int src = -1;
        fh_token_source(tok, &src);
        fh_log_verbose(1, "strided %s from %s refused: %s", is_put ? "put" : "get",
                       FH_RANK_NAME(src), why);
    }
    return st;
}

static void h_put(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                  unsigned nargs)
{
    fh_strided_desc_t d;
    int st = target_check(tok, true, args, nargs, nbytes, &d);
    if (st == FH_OK) {
        const char *src = buf;
        for (size_t i = 0; i < d.count; i++)
            memcpy((char *)d.addr + (ptrdiff_t)i * d.stride, src + i * d.blk, d.blk);
    }
    uint64_t rep[FH_STRIDED_REP_ARGS] = {nargs ? args[0] : 0, (uint64_t)(int64_t)st, 0};
    fh_am_reply_internal(tok, FH_H_STRIDED_REP, rep, FH_STRIDED_REP_ARGS);
}

static void h_get(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                  unsigned nargs)
{
    (void)buf;
    fh_strided_desc_t d;
    int st = target_check(tok, false, args, nargs, nbytes, &d);
    char *tmp = NULL;
    if (st == FH_OK && (tmp = malloc(d.bytes)) == NULL)
        st = FH_ERR_NO_MEMORY;
    uint64_t rep[FH_STRIDED_REP_ARGS] = {nargs ? args[0] : 0, (uint64_t)(int64_t)st,
                                         nargs == FH_STRIDED_GET_ARGS ? args[5] : 0};
    if (st == FH_OK) {
        for (size_t i = 0; i < d.count; i++)
            memcpy(tmp + i * d.blk, (const char *)d.addr + (ptrdiff_t)i * d.stride, d.blk);
        fh_am_reply_medium_args_internal(tok, FH_H_STRIDED_REP, tmp, d.bytes, rep,
                                         FH_STRIDED_REP_ARGS);
    } else {
        fh_am_reply_internal(tok, FH_H_STRIDED_REP, rep, FH_STRIDED_REP_ARGS);
    }
    free(tmp);
}

/* ------------------------------------------------------------ initiator */

static fh_strided_op_t *find_op(fh_path_t *p, uint64_t id)
{
    for (fh_strided_op_t *o = p->strided_ops; o != NULL; o = o->next)
        if (o->id == id)
            return o;
    return NULL;
}

/* A put's acknowledgement or a get's data; runs under the lock of the
 * path that sent the request. */
static void h_rep(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                  unsigned nargs)
{
    fh_path_t *p = fh_token_path(tok);
    int src = -1;
    fh_token_source(tok, &src);
    if (nargs != FH_STRIDED_REP_ARGS) {
        fh_am_drop(p, src, "strided reply with %u arguments", nargs);
        return;
    }
    fh_strided_op_t *o = find_op(p, args[0]);
    if (o == NULL || o->rank != src || o->pending == 0) {
        fh_am_drop(p, src, "strided reply for no operation in flight");
        return;
    }
    int64_t st = (int64_t)args[1];
    if (st > 0 || st < FH_ERR_STATE)
        st = FH_ERR_TRANSPORT;          /* not one of our codes */
    uint64_t off = args[2];
    size_t total = o->blk * o->count;
    if (st == FH_OK && o->is_put && nbytes != 0)
        st = FH_ERR_TRANSPORT;
    if (st == FH_OK && !o->is_put) {
        size_t want = off < total ? total - (size_t)off : 0;
        if (want > o->msg_bytes)
            want = o->msg_bytes;
        if (off >= total || off % o->msg_bytes != 0 || nbytes != want) {
            fh_am_drop(p, src, "strided get reply of %zu bytes at offset %llu does not "
                       "match the operation", nbytes, (unsigned long long)off);
            st = FH_ERR_TRANSPORT;
        } else {
            size_t first = (size_t)off / o->blk, k = nbytes / o->blk;
            const char *from = buf;
            for (size_t i = 0; i < k; i++)
                memcpy(o->local + (ptrdiff_t)(first + i) * o->lstride, from + i * o->blk,
                       o->blk);
        }
    }
    if (st != FH_OK && o->status == FH_OK)
        o->status = (int)st;
    o->pending--;
}

void fh_strided_init(void)
{
    fh_am_register_internal(FH_H_STRIDED_PUT, h_put, "strided put");
    fh_am_register_internal(FH_H_STRIDED_GET, h_get, "strided get");
    fh_am_register_internal(FH_H_STRIDED_REP, h_rep, "strided reply");
}

/* Small blocks: gathered into AMs (top of file). */
static int strided_am(fh_tls_t *t, const fh_rma_req_t *q)
{
    fh_path_t *p = t->path;
    size_t per = fh_rt->am_max_medium / q->n;
    assert(per >= 1);
    fh_strided_op_t op = {.rank = q->rank, .is_put = q->is_put, .local = q->local,
                          .lstride = q->lstride, .blk = q->n, .count = q->count,
                          .msg_bytes = per * q->n, .status = FH_OK};
    char *pack = NULL;
    if (q->is_put && (pack = malloc(op.msg_bytes)) == NULL)
        return fh_set_error(FH_ERR_NO_MEMORY, "%s: out of memory", q->fn);
    pthread_mutex_lock(&p->lock);
    op.id = ++p->strided_seq;
    op.next = p->strided_ops;
    p->strided_ops = &op;
    pthread_mutex_unlock(&p->lock);

    int rc = FH_OK;
    for (size_t i = 0; i < q->count && rc == FH_OK; i += per) {
        size_t k = q->count - i < per ? q->count - i : per;
        char *rm = q->remote + (ptrdiff_t)i * q->rstride;
        uint64_t a[FH_STRIDED_GET_ARGS] = {op.id, (uint64_t)(uintptr_t)rm,
                                           (uint64_t)(int64_t)q->rstride, q->n, k,
                                           i * q->n};
        if (q->is_put)
            for (size_t j = 0; j < k; j++)
                memcpy(pack + j * q->n, q->local + (ptrdiff_t)(i + j) * q->lstride, q->n);
        pthread_mutex_lock(&p->lock);
        op.pending++;
        pthread_mutex_unlock(&p->lock);
        rc = q->is_put ? fh_am_send_request(t, q->rank, FH_AM_REQ_MEDIUM, FH_H_STRIDED_PUT,
                                            pack, k * q->n, 0, a, FH_STRIDED_PUT_ARGS)
                       : fh_am_send_request(t, q->rank, FH_AM_REQ_SHORT, FH_H_STRIDED_GET,
                                            NULL, 0, 0, a, FH_STRIDED_GET_ARGS);
        if (rc != FH_OK) {
            pthread_mutex_lock(&p->lock);
            op.pending--;
            pthread_mutex_unlock(&p->lock);
        }
    }
    /* Every message sent is answered before op leaves the stack. */
    for (unsigned idle = 0;;) {
        pthread_mutex_lock(&p->lock);
        fh_path_poll_locked(p);
        bool done = op.pending == 0;
        if (done) {
            fh_strided_op_t **pp = &p->strided_ops;
            while (*pp != &op)
                pp = &(*pp)->next;
            *pp = op.next;
            if (rc == FH_OK && op.status == FH_OK)
                fh_stat_rma(&p->base, q->rank, q->is_put, q->n * q->count);
        }
        pthread_mutex_unlock(&p->lock);
        if (done)
            break;
        fh_wait_round(t, &idle);
    }
    free(pack);
    if (rc == FH_OK && op.status != FH_OK)
        rc = fh_set_error(op.status, "%s: %s failed a strided %s: %s", q->fn, FH_RANK_NAME(q->rank),
                          q->is_put ? "put" : "get", fh_strerror(op.status));
    return rc;
}

/* Larger blocks: one transfer per block (the strategy's fh_xfer), all
 * posted before one wait at the end; a temporary registration of a
 * block's local buffer is waited for and released before the next block. */
static int strided_rma(fh_tls_t *t, const fh_rma_req_t *q)
{
    int rc = FH_OK;
    fh_ctr_t ctr = FH_CTR_INIT;
    for (size_t i = 0; i < q->count && rc == FH_OK; i++) {
        char *l = q->local + (ptrdiff_t)i * q->lstride;
        char *rm = q->remote + (ptrdiff_t)i * q->rstride;
        struct fh_mr *lmr;
        bool temp;
        if ((rc = fh_rma_local_mr(q->fn, q->is_put, l, q->n, &lmr, &temp)) != FH_OK)
            break;
        rc = fh_xfer(t, q->is_put, q->rank, l, lmr, (uint64_t)(uintptr_t)rm, q->n,
                     &q->r.rkey, &ctr, false);
        if (temp) {
            int wrc = fh_wait_ctr(t, &ctr);
            fh_rma_local_mr_release(lmr);
            if (rc == FH_OK)
                rc = wrc;
        }
    }
    int wrc = fh_wait_ctr(t, &ctr);
    return rc != FH_OK ? rc : wrc;
}

int fh_strided_net(fh_tls_t *t, const fh_rma_req_t *q)
{
    size_t am_max = fh_rt->cfg.strided_am_max;
    if (am_max > fh_rt->am_max_medium)
        am_max = fh_rt->am_max_medium;
    /* q->r is zeroed for a hull outside segments (FH_SEGMENT=everything). */
    bool in_segment = q->r.end > q->r.base;
    if (q->count > 1 && q->n <= am_max && in_segment) {
        /* Packed from / unpacked into the caller's blocks by memcpy: they
         * are checked here (strided_rma's, block by block in fh_xfer). */
        int rc = fh_rma_local_ok_strided(t, q);
        return rc != FH_OK ? rc : strided_am(t, q);
    }
    return strided_rma(t, q);
}

/* ------------------------------------------------------------ validation */

/* Lowest and highest byte touched by count blocks of blk bytes at stride
 * from base; FH_ERR_OVERFLOW if the arithmetic wraps. */
static int hull(const char *fn, uintptr_t base, ptrdiff_t stride, size_t blk, size_t count,
                uintptr_t *lo, size_t *span)
{
    size_t mag = (size_t)(stride < 0 ? -(size_t)stride : (size_t)stride);
    size_t steps = count - 1;
    if (mag && steps > SIZE_MAX / mag)
        return fh_set_error(FH_ERR_OVERFLOW, "%s: stride * count overflows", fn);
    size_t extent = mag * steps;
    if (stride < 0) {
        if (base < extent)
            return fh_set_error(FH_ERR_OVERFLOW, "%s: negative stride wraps below 0", fn);
        *lo = base - extent;
    } else {
        *lo = base;
    }
    if (extent > SIZE_MAX - blk)
        return fh_set_error(FH_ERR_OVERFLOW, "%s: strided extent overflows", fn);
    *span = extent + blk;
    return FH_OK;
}

static int strided(const char *fn, bool is_put, int rank, char *local, ptrdiff_t lstride,
                   char *remote, ptrdiff_t rstride, size_t blk, size_t count)
{
    int rc;
    fh_tls_t *t = fh_enter(fn, &rc);
    if (t == NULL)
        return rc;
    if ((rc = fh_check_rank(fn, rank)) != FH_OK)
        return rc;
    if (blk == 0 || count == 0)
        return FH_OK;
    if (local == NULL || remote == NULL)
        return fh_set_error(FH_ERR_INVALID, "%s: NULL address with %zu blocks", fn, count);
    if ((is_put ? rstride : lstride) == 0 && count > 1)
        return fh_set_error(FH_ERR_INVALID, "%s: zero stride on the destination", fn);
    uintptr_t llo, rlo;
    size_t lspan, rspan;
    if ((rc = hull(fn, (uintptr_t)local, lstride, blk, count, &llo, &lspan)) ||
        (rc = hull(fn, (uintptr_t)remote, rstride, blk, count, &rlo, &rspan)))
        return rc;
    fh_seg_range_t r;
    if ((rc = fh_rma_validate(fn, rank, (void *)llo, (void *)rlo, rspan, &r)) != FH_OK)
        return rc;
    if (r.holes != NULL &&   /* the hull, conservatively (seg_protect.c) */
        (rc = fh_seg_holes_check(fn, rank, is_put, (void *)rlo, rspan, &r)) != FH_OK)
        return rc;
    if ((uintptr_t)llo + lspan < llo)
        return fh_set_error(FH_ERR_OVERFLOW, "%s: local range overflows", fn);
    fh_rma_req_t q = {.fn = fn, .is_put = is_put, .rank = rank, .local = local,
                      .remote = remote, .n = blk, .count = count, .lstride = lstride,
                      .rstride = rstride, .r = r};
    return fh_rt->route[rank]->strided(t, &q);
}

int fh_put_strided(int rank, void *dst, ptrdiff_t dst_stride, const void *src,
                   ptrdiff_t src_stride, size_t blksize, size_t count)
{
    return strided("fh_put_strided", true, rank, (char *)src, src_stride, dst, dst_stride,
                   blksize, count);
}

int fh_get_strided(void *dst, ptrdiff_t dst_stride, int rank, const void *src,
                   ptrdiff_t src_stride, size_t blksize, size_t count)
{
    return strided("fh_get_strided", false, rank, dst, dst_stride, (char *)src, src_stride,
                   blksize, count);
}
