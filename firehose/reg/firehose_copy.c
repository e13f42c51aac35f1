/*
 * firehose_copy.c -- FH_SEGMENT=everything: a chunk whose memory the target
 * will not register travels by copies through AMs.
 *
 * Under FH_SEGMENT=everything a peer may reach any mapped byte, but not
 * every mapped byte can be registered: the memory monitor cannot watch a
 * file mapping (a registration of it could outlive the mapping unseen, and
 * a file truncated under it makes the provider's access fault), and a
 * region another transfer holds registers one run of a bucket's memory
 * (firehose_env.c reach_run; docs/firehose-cache.md "Re-aim").  The cache
 * refuses such a chunk with FHC_ERR_OUT_OF_SEGMENT; the drain
 * (firehose_xfer.c) hands it here instead of failing it:
 *
 *   initiator  the chunk [raddr, +len) (never more than one frame, R) is
 *              cut into pieces of at most fh_am_max_medium() bytes; each
 *              goes as FH_H_COPY_PUT (medium, the bytes) or FH_H_COPY_GET
 *              (short), args {id, addr, off, len, chunk addr, chunk len},
 *              sent by fh_reg_flush from a progressing thread on the
 *              service path (like moves; credits bound the pieces in
 *              flight; a piece without a credit waits for the next flush).
 *   target     checks the arguments and that FH_SEGMENT=everything is in
 *              use here; for the first piece, that the whole chunk is
 *              mapped readable (and writable for a put) and every page of
 *              it can be read (one byte each, through the kernel) -- the
 *              initiator sends the other pieces only once the first was
 *              answered, and none if it failed -- then copies
 *              with process_vm_writev/readv on itself: a page that faults
 *              meanwhile (a file truncated under its mapping) is EFAULT,
 *              never SIGBUS.  It answers FH_H_COPY_REP {id, status, off}
 *              (a get's bytes as the medium reply's payload).
 *   initiator  takes a reply only for a copy in flight to that rank, an
 *              unanswered piece, and a get's exact length; the last answer
 *              puts the chunk back on its path's ready list with
 *              REG_COPY_DONE, and the drain completes it.
 * A failed put may have written the pieces answered before, and part of the
 * piece that failed only when the mapping changed between the check and the
 * copy (docs/reliability.md).  When the service paths' link with the rank
 * is lost, its copies fail with FH_ERR_PEER_DEAD (reg_copy_lost): their
 * unanswered pieces may or may not have been copied.
 *
 * Locks: the copy list and every copy's counters under g->lock; the sender
 * (one at a time, under g->flush_lock) marks a copy `sending` while it
 * reads the caller's bytes without the lock, and a copy being sent is
 * never completed until the sender is done with it.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "firehose/util/vma.h"
#include "firehose_internal.h"

typedef struct reg_copy {
    struct reg_copy *next;
    uint64_t id;
    reg_xop_t *x;               /* the chunk; alive until the copy completes */
    size_t piece;               /* bytes per message */
    uint32_t npieces, sent, answered;
    int status;                 /* first failure, else FH_OK */
    bool sending;               /* the sender reads x's bytes unlocked */
    bool lost;                  /* failed by reg_copy_lost: nothing more sent */
    uint8_t done[];             /* [npieces]: answered */
} reg_copy_t;

#define COPY_NARGS 6

/* ------------------------------------------------------------ target */

/* The copy of [addr, +len) in or out of our own memory: 0, or -1 when a
 * page faulted (EFAULT: unmapped, protected, beyond a truncated file's
 * end) or the kernel refused (no cross-memory attach). */
static int self_copy(bool to_us, void *addr, void *buf, size_t len)
{
    struct iovec mine = {buf, len}, ours = {addr, len};
    ssize_t n = to_us ? process_vm_writev(getpid(), &mine, 1, &ours, 1, 0)
                      : process_vm_readv(getpid(), &mine, 1, &ours, 1, 0);
    return n == (ssize_t)len ? 0 : -1;
}

/* One byte of every page of [addr, +len) read through the kernel: 0 when
 * every page can be read, -1 when one faults (past the end of a file
 * truncated under its mapping, where a load raises SIGBUS). */
static int probe_pages(uintptr_t addr, size_t len)
{
    enum { BATCH = 64 };
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    char sink[BATCH];
    struct iovec ours[BATCH];
    uintptr_t a = addr, end = addr + len;
    while (a < end) {
        unsigned nb = 0;
        for (; nb < BATCH && a < end; nb++, a = (a & ~(pg - 1)) + pg)
            ours[nb] = (struct iovec){(void *)a, 1};
        struct iovec mine = {sink, nb};
        if (process_vm_readv(getpid(), &mine, 1, ours, nb, 0) != (ssize_t)nb)
            return -1;
    }
    return 0;
}

/* Checks a copy request; returns FH_OK or the refusal (logged, counted). */
static int copy_check(int src, bool is_put, const uint64_t *args, unsigned nargs,
                      size_t nbytes)
{
    fh_core_t *rt = fh_reg_core;
    struct fh_reg *g = rt->reg;
    const char *why = NULL;
    int st = FH_OK;
    if (g == NULL) {
        st = FH_ERR_CONFIG;
        why = "FH_REG_STRATEGY is not firehose here";
    } else if (nargs != COPY_NARGS) {
        st = FH_ERR_INVALID;
        why = "malformed message";
    } else if (args[3] == 0 || args[3] > rt->am_max_medium ||
               nbytes != (is_put ? args[3] : 0) || args[5] == 0 || args[5] > g->R) {
        st = FH_ERR_INVALID;
        why = "bad length";
    } else if (args[1] > UINTPTR_MAX - args[3] || args[4] > UINTPTR_MAX - args[5]) {
        st = FH_ERR_OVERFLOW;
        why = "wrapping range";
    } else if (args[1] < args[4] || args[1] + args[3] > args[4] + args[5] ||
               args[2] != args[1] - args[4]) {
        st = FH_ERR_INVALID;
        why = "piece outside its chunk";
    } else if (rt->cfg.segment_mode != FH_SEGMENT_EVERYTHING) {
        /* Our peers fall back to copies only under everything-mode. */
        st = FH_ERR_CONFIG;
        why = "FH_SEGMENT=everything is not in use here";
    } else if (args[2] == 0 &&
               !fh_vma_check((uintptr_t)args[4], (size_t)args[5],
                             FH_VMA_READ | (is_put ? FH_VMA_WRITE : 0), NULL)) {
        /* The first piece checks the whole chunk before any byte of it
         * moves; the initiator sends the others only once it was copied
         * (their own faults, if the mapping changed since, are the copy's
         * EFAULT). */
        st = FH_ERR_OUT_OF_SEGMENT;
        why = is_put ? "not mapped writable (FH_SEGMENT=everything)"
                     : "not mapped readable (FH_SEGMENT=everything)";
    } else if (args[2] == 0 && probe_pages((uintptr_t)args[4], (size_t)args[5]) != 0) {
        st = FH_ERR_OUT_OF_SEGMENT;
        why = "a page faults (past the end of a truncated file?)";
    }
    if (g != NULL && src >= 0 && src < g->nranks) {
        pthread_mutex_lock(&g->lock);
        g->hpeer[src].copies++;
        if (st != FH_OK)
            g->hpeer[src].copy_refused++;
        pthread_mutex_unlock(&g->lock);
    }
    /* A range the application's memory does not hold is its error (the
     * initiator reports it); anything else is a peer breaking the protocol. */
    if (st != FH_OK)
        fh_log_verbose(st == FH_ERR_OUT_OF_SEGMENT ? 1 : 0,
                       "firehose: refused a copy %s from %s for [0x%llx, +%llu): %s",
                       is_put ? "into our memory" : "of our memory", FH_RANK_NAME(src),
                       nargs > 1 ? (unsigned long long)args[1] : 0ULL,
                       nargs > 3 ? (unsigned long long)args[3] : 0ULL, why);
    return st;
}

static void h_copy_put(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                       unsigned nargs)
{
    int src;
    svc_token_source(tok, &src);
    int st = copy_check(src, true, args, nargs, nbytes);
    if (st == FH_OK && self_copy(true, (void *)(uintptr_t)args[1], buf, nbytes) != 0) {
        st = FH_ERR_OUT_OF_SEGMENT;
        fh_log_verbose(1, "firehose: a copy from %s into [0x%llx, +%zu) faulted: %s",
                       FH_RANK_NAME(src), (unsigned long long)args[1], nbytes, strerror(errno));
    }
    uint64_t rep[3] = {nargs ? args[0] : 0, (uint64_t)(int64_t)st, nargs > 2 ? args[2] : 0};
    svc_am_reply(tok, FH_H_COPY_REP, rep, 3);
}

static void h_copy_get(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                       unsigned nargs)
{
    (void)buf;
    int src;
    svc_token_source(tok, &src);
    int st = copy_check(src, false, args, nargs, nbytes);
    uint64_t rep[3] = {nargs ? args[0] : 0, (uint64_t)(int64_t)st, nargs > 2 ? args[2] : 0};
    void *tmp = st == FH_OK ? malloc((size_t)args[3]) : NULL;
    if (st == FH_OK && tmp == NULL)
        rep[1] = (uint64_t)(int64_t)FH_ERR_NO_MEMORY;
    else if (st == FH_OK && self_copy(false, (void *)(uintptr_t)args[1], tmp,
                                      (size_t)args[3]) != 0) {
        rep[1] = (uint64_t)(int64_t)FH_ERR_OUT_OF_SEGMENT;
        fh_log_verbose(1, "firehose: a copy to %s of [0x%llx, +%llu) faulted: %s",
                       FH_RANK_NAME(src), (unsigned long long)args[1],
                       (unsigned long long)args[3], strerror(errno));
    }
    if (rep[1] == FH_OK)
        svc_am_reply_medium_args(tok, FH_H_COPY_REP, tmp, (size_t)args[3], rep, 3);
    else
        svc_am_reply(tok, FH_H_COPY_REP, rep, 3);
    free(tmp);
}

/* ------------------------------------------------------------ initiator */

/* c is over: off the list, its chunk back to its path.  g->lock held. */
static void copy_finish(struct fh_reg *g, reg_copy_t *c)
{
    assert(c->answered == c->npieces && !c->sending);
    reg_copy_t **pp = &g->copies;
    while (*pp != c)
        pp = &(*pp)->next;
    *pp = c->next;
    __atomic_store_n(&g->ncopies, g->ncopies - 1, __ATOMIC_RELAXED);
    reg_xop_t *x = c->x;
    x->copy_rc = c->status;
    x->status = REG_COPY_DONE;
    free(c);
    reg_xop_push_ready(x);
}

static reg_copy_t *copy_find(struct fh_reg *g, uint64_t id)
{
    reg_copy_t *c = g->copies;
    while (c != NULL && c->id != id)
        c = c->next;
    return c;
}

static void h_copy_rep(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                       unsigned nargs)
{
    struct fh_reg *g = fh_reg_core->reg;
    int src;
    svc_token_source(tok, &src);
    if (g == NULL || nargs != 3) {
        fh_log_error("firehose: dropped a malformed copy reply from %s", FH_RANK_NAME(src));
        return;
    }
    int st = (int)(int64_t)args[1];
    const char *bad = NULL;
    pthread_mutex_lock(&g->lock);
    reg_copy_t *c = copy_find(g, args[0]);
    uint64_t k = c != NULL ? args[2] / c->piece : 0;
    if (c == NULL || c->x->rank != src || c->lost) {
        bad = "for no copy in flight to it";
    } else if (args[2] % c->piece || k >= c->sent || c->done[k]) {
        bad = "for no piece awaiting one";
    } else {
        reg_xop_t *x = c->x;
        size_t len = x->op.len - args[2] < c->piece ? x->op.len - args[2] : c->piece;
        if (st > 0)
            st = FH_ERR_INVALID;
        if (st == FH_OK && nbytes != (x->is_put ? 0 : len)) {
            st = FH_ERR_TRANSPORT;
            bad = "of the wrong length";
        } else if (st == FH_OK && nbytes != 0) {
            memcpy(x->local + args[2], buf, nbytes);
        }
        if (st != FH_OK && c->status == FH_OK)
            c->status = st;
        c->done[k] = 1;
        c->answered++;
        if (k == 0 && st != FH_OK && c->sent == 1) {
            /* The chunk's check failed: the other pieces are never sent. */
            for (uint32_t j = 1; j < c->npieces; j++)
                c->done[j] = 1;
            c->answered = c->sent = c->npieces;
        }
        if (c->answered == c->npieces && !c->sending)
            copy_finish(g, c);
    }
    pthread_mutex_unlock(&g->lock);
    if (bad != NULL)
        fh_log_error("firehose: dropped a copy reply from %s %s (id %llu, offset %llu)",
                     FH_RANK_NAME(src), bad, (unsigned long long)args[0],
                     (unsigned long long)args[2]);
}

void reg_copy_register_handlers(void)
{
    svc_am_register(FH_H_COPY_PUT, h_copy_put, "firehose-copy-put");
    svc_am_register(FH_H_COPY_GET, h_copy_get, "firehose-copy-get");
    svc_am_register(FH_H_COPY_REP, h_copy_rep, "firehose-copy-rep");
}

bool reg_copy_start(fh_path_base_t *p, reg_xop_t *x)
{
    fh_core_t *rt = fh_reg_core;
    struct fh_reg *g = rt->reg;
    (void)p;
    assert(x->path == p && x->status == FHC_ERR_OUT_OF_SEGMENT);
    if (rt->cfg.segment_mode != FH_SEGMENT_EVERYTHING || x->noxfer || x->op.len == 0 ||
        rt->am_max_medium == 0)
        return false;
    size_t piece = rt->am_max_medium;
    size_t n = (x->op.len + piece - 1) / piece;
    reg_copy_t *c = calloc(1, sizeof *c + n);
    if (c == NULL)
        return false;
    c->x = x;
    c->piece = piece;
    c->npieces = (uint32_t)n;
    fh_log_verbose(2, "firehose: %s %s [0x%llx, +%zu) goes by copies (%zu messages)",
                   x->is_put ? "put to" : "get from", FH_RANK_NAME(x->rank),
                   (unsigned long long)x->op.raddr, x->op.len, n);
    pthread_mutex_lock(&g->lock);
    c->id = ++g->copy_id;
    reg_copy_t **tail = &g->copies;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = c;
    __atomic_store_n(&g->ncopies, g->ncopies + 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g->lock);
    return true;     /* still counted in p->inflight and its caller's counter */
}

/* Sends c's next piece (g->lock held on entry and on return; dropped while
 * sending).  Returns the send's status. */
static int send_piece(fh_thread_t *t, struct fh_reg *g, reg_copy_t *c)
{
    reg_xop_t *x = c->x;
    uint32_t k = c->sent++;
    size_t off = (size_t)k * c->piece;
    size_t len = x->op.len - off < c->piece ? x->op.len - off : c->piece;
    uint64_t id = c->id, args[COPY_NARGS] = {c->id, x->op.raddr + off, off, len,
                                             x->op.raddr, x->op.len};
    int rank = x->rank;
    c->sending = true;
    pthread_mutex_unlock(&g->lock);
    int rc = x->is_put ? svc_am_try_request(t, fh_reg_core->svc_path, rank, FH_SVC_AM_MEDIUM,
                                            FH_H_COPY_PUT, x->local + off, len, args,
                                            COPY_NARGS)
                       : svc_am_try_request(t, fh_reg_core->svc_path, rank, FH_SVC_AM_SHORT,
                                            FH_H_COPY_GET, NULL, 0, args, COPY_NARGS);
    pthread_mutex_lock(&g->lock);
    /* c cannot have completed: its piece k was sending (and is unanswered
     * unless sent). */
    assert(copy_find(g, id) == c);
    c->sending = false;
    if (c->lost) {
        /* reg_copy_lost counted every piece answered meanwhile. */
    } else if (rc == FH_OK) {
        g->hpeer[rank].copies++;
    } else {
        c->sent--;
        if (rc != FH_ERR_AGAIN) {
            /* Never sent, nor the rest: count them answered, failed. */
            if (c->status == FH_OK)
                c->status = rc;
            for (uint32_t j = c->sent; j < c->npieces; j++)
                c->done[j] = 1;
            c->answered += c->npieces - c->sent;
            c->sent = c->npieces;
        }
    }
    if (c->answered == c->npieces)
        copy_finish(g, c);
    return rc;
}

void reg_copy_flush(fh_thread_t *t, struct fh_reg *g)
{
    /* Ranks that had no credit this time: their later copies wait too. */
    enum { NBLOCKED = 8 };
    int blocked[NBLOCKED], nblocked = 0;
    pthread_mutex_lock(&g->lock);
    for (reg_copy_t *c = g->copies; c != NULL;) {
        /* The first piece alone until it is answered (it checks the
         * whole chunk at the target). */
        bool skip = c->lost || c->sent == c->npieces || (c->sent == 1 && !c->done[0]);
        for (int i = 0; i < nblocked && !skip; i++)
            skip = blocked[i] == c->x->rank;
        if (skip) {
            c = c->next;
            continue;
        }
        uint64_t id = c->id;
        int rank = c->x->rank, rc = send_piece(t, g, c);
        if (rc == FH_ERR_AGAIN) {
            if (nblocked == NBLOCKED)
                break;
            blocked[nblocked++] = rank;
        }
        /* c may be gone (finished): go on from the first copy after id. */
        c = g->copies;
        while (c != NULL && c->id <= id && (c->id != id || rc != FH_OK))
            c = c->next;
    }
    pthread_mutex_unlock(&g->lock);
}

unsigned reg_copy_lost(struct fh_reg *g, int rank, int status)
{
    unsigned n = 0;
    for (reg_copy_t *c = g->copies, *next; c != NULL; c = next) {
        next = c->next;
        if (c->x->rank != rank || c->lost)
            continue;
        c->lost = true;
        if (c->status == FH_OK)
            c->status = status;
        for (uint32_t j = 0; j < c->npieces; j++)
            c->done[j] = 1;
        c->answered = c->npieces;
        c->sent = c->npieces;
        n++;
        if (!c->sending)
            copy_finish(g, c);
    }
    return n;
}

void reg_copy_fini(struct fh_reg *g)
{
    while (g->copies != NULL) {
        reg_copy_t *c = g->copies;
        g->copies = c->next;
        free(c);
    }
    __atomic_store_n(&g->ncopies, 0, __ATOMIC_RELAXED);
}
