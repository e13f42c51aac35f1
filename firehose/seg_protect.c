/*
 * seg_protect.c -- the application's mprotect/pkey_mprotect/munmap of its
 * own segment memory (docs/reliability.md, "A peer's protected memory").
 *
 * Peers reach a segment piece with keys handed out before (pin-everything:
 * the whole piece at creation; firehose and rendezvous-cache: regions
 * granted earlier), and the target's provider touches the memory with no
 * check of ours: a put into a page the owner made PROT_NONE or read-only
 * afterwards faulted the *target*, inside its own poll.  Userfaultfd has no
 * event for mprotect, and an unmap event comes after the fact; but the
 * application's calls reach libfirehose's wrappers first
 * (firehose/util/interpose.c).  So before the kernel changes a range that
 * meets one of our published pieces, the hook here:
 *   1. records the range as a hole of the piece with what stays allowed
 *      (PROT_READ, or nothing; seg_holes.c) and publishes the segment
 *      table: our own transfers into it are refused from now on;
 *   2. sends every peer FH_H_SEG_PROT (segment, range, protection); the
 *      peer records the same hole for our piece and publishes before it
 *      acknowledges, so its transfers that look the range up afterwards
 *      are refused before anything is sent, with FH_ERR_OUT_OF_SEGMENT
 *      naming our rank and the address (rma.c, strided.c, atomic.c);
 *   3. polls until every peer acknowledged;
 *   4. lets the strategy give up what peers hold registered in the range
 *      (reg.h seg_reprotect: firehose revokes the firehoses meeting it and
 *      waits until their holders' RDMA through them completed), then lets
 *      the call go on.
 * Making the range readable and writable again removes the hole the same
 * way.  The check costs the fast path nothing but a pointer test
 * (fh_seg_range_t.holes is NULL unless the piece has holes).
 *
 * What this does not cover (docs/reliability.md, Open): a transfer a peer
 * looked up *before* it applied the change (in flight, or another thread
 * of the peer between lookup and post) still reaches the provider; the
 * pin-everything get then ends by the RMA timeout, a put may still fault.
 * A call from inside an AM handler, or from a thread with no runtime state
 * left (exiting), records the hole locally and tells no peer.  An mprotect
 * the kernel then refuses leaves the hole (transfers are refused that
 * would have worked).
 *
 * Any call that takes access away also makes the local buffer check's
 * remembered mappings stale (fh_lc_stale, reg/local_check.c).
 *
 * Safety of the hook: before fh_init, after fh_finalize, and for a range
 * that meets no piece of ours it does only lock-free loads (a signal
 * handler may call mprotect); it never recurses (a per-thread flag: the
 * round itself may unmap memory); it leaves errno to the wrapper.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "segment_private.h"
#include "firehose/util/interpose.h"

#define ARGS 5   /* segment, lo, hi, prot (PROT_READ/WRITE bits, -1: unmapped), round */
#define RW (PROT_READ | PROT_WRITE)

/* Held from the local change to the last acknowledgement, so that two
 * threads' changes reach every peer in the order they were applied here. */
static pthread_mutex_t round_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t page;                /* set at init: no sysconf in the hook */
static _Atomic uint64_t round_id;     /* the round in progress */
static _Atomic unsigned round_acks;   /* its acknowledgements so far */
static _Thread_local int in_hook;

/* ---- a piece's holes in the segment table (internal.h, segment.c) */

bool fh_seg_meets_own(fh_rt_t *rt, uintptr_t lo, uintptr_t hi, int prot)
{
    struct fh_segmap *m = atomic_load_explicit(&rt->segmap, memory_order_acquire);
    if (m == NULL)
        return false;
    bool reduces = prot < 0 || (prot & (PROT_READ | PROT_WRITE)) != (PROT_READ | PROT_WRITE);
    for (uint32_t i = 0; i < m->count[rt->rank]; i++) {
        const fh_seg_range_t *r = &m->ranges[rt->rank][i];
        if (r->base < hi && r->end > lo && (reduces || r->holes != NULL))
            return true;
    }
    return false;
}

/* Sets [lo, hi) of piece p to prot; whether it changed.  seg_lock held.
 * The old list stays readable (a snapshot may point at it) until
 * fh_finalize.  Out of memory: the hole is not recorded (logged). */
static bool piece_set(struct fh_seg_piece *p, uintptr_t lo, uintptr_t hi, int prot)
{
    uintptr_t b = (uintptr_t)p->base, e = b + p->size;
    if (p->size == 0 || lo >= e || hi <= b)
        return false;
    bool changed = false;
    const struct fh_seg_holes *h =
        fh_seg_holes_set(p->holes, lo > b ? lo : b, hi < e ? hi : e, prot, &changed);
    if (!changed) {
        free((void *)h);
        return false;
    }
    fh_seg_holes_retire(p->holes);
    p->holes = h;
    return true;
}

int fh_seg_protect_own(fh_rt_t *rt, uintptr_t lo, uintptr_t hi, int prot,
                       fh_seg_change_t *out, int max)
{
    int k = 0;
    pthread_mutex_lock(&rt->seg_lock);
    for (long s = 0; s < rt->cfg.max_segments && k < max; s++) {
        fh_segment_t *sg = &rt->segs[s];
        if (!fh_seg_published(rt, sg, rt->rank))
            continue;
        struct fh_seg_piece *p = &sg->pieces[rt->rank];
        uintptr_t b = (uintptr_t)p->base, e = b + p->size;
        if (piece_set(p, lo, hi, prot))
            out[k++] = (fh_seg_change_t){s, lo > b ? lo : b, hi < e ? hi : e};
    }
    if (k > 0 && fh_seg_publish(rt) != FH_OK)
        fh_fatal("out of memory publishing the segment table");
    pthread_mutex_unlock(&rt->seg_lock);
    return k;
}

void fh_seg_protect_peer(fh_rt_t *rt, int rank, long seg, uintptr_t lo, uintptr_t hi,
                         int prot)
{
    pthread_mutex_lock(&rt->seg_lock);
    if (seg >= 0 && seg < rt->cfg.max_segments && rank >= 0 && rank < rt->nranks &&
        fh_seg_published(rt, &rt->segs[seg], rank) &&
        piece_set(&rt->segs[seg].pieces[rank], lo, hi, prot) && fh_seg_publish(rt) != FH_OK)
        fh_fatal("out of memory publishing the segment table");
    pthread_mutex_unlock(&rt->seg_lock);
}

/* A peer changed its piece's holes: apply the same, then acknowledge. */
static void prot_req(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf;
    (void)n;
    int src = -1;
    fh_token_source(tok, &src);
    int prot = na == ARGS ? (int)(int64_t)a[3] : 0;
    if (na != ARGS || src < 0 || a[1] >= a[2] || a[1] % (uint64_t)page != 0 ||
        a[2] % (uint64_t)page != 0 || (prot != -1 && (prot & ~(PROT_READ | PROT_WRITE)))) {
        fh_am_drop(fh_token_path(tok), src, "a malformed segment protection change");
        return;   /* no acknowledgement: the sender is not one of ours */
    }
    fh_seg_protect_peer(fh_rt, src, (long)a[0], (uintptr_t)a[1], (uintptr_t)a[2], prot);
    uint64_t ack = a[4];
    fh_am_reply_internal(tok, FH_H_SEG_PROT_ACK, &ack, 1);
}

static void prot_ack(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf;
    (void)n;
    if (na == 1 && a[0] == atomic_load_explicit(&round_id, memory_order_relaxed))
        atomic_fetch_add_explicit(&round_acks, 1, memory_order_release);
    else
        fh_am_drop(fh_token_path(tok), -1, "a stray segment protection acknowledgement");
}

/* Steps 2-3 of the top: every peer applies the changes before we return.
 * round_lock held. */
static void tell_peers(fh_rt_t *rt, fh_tls_t *t, const fh_seg_change_t *ch, int k, int prot)
{
    uint64_t id = atomic_fetch_add(&round_id, 1) + 1;
    atomic_store(&round_acks, 0);
    unsigned want = 0;
    for (int c = 0; c < k; c++)
        for (int r = 0; r < rt->nranks; r++) {
            if (r == rt->rank)
                continue;
            uint64_t args[ARGS] = {(uint64_t)ch[c].seg, ch[c].lo, ch[c].hi,
                                   (uint64_t)(int64_t)(prot < 0 ? -1 : prot & RW), id};
            int rc = fh_am_send_request(t, r, FH_AM_REQ_SHORT, FH_H_SEG_PROT, NULL, 0, 0,
                                        args, ARGS);
            if (rc == FH_OK)
                want++;
            else
                fh_log_error("could not tell %s that [%p, %p) of segment %ld changed "
                             "its protection: %s", FH_RANK_NAME(r), (void *)ch[c].lo,
                             (void *)ch[c].hi,
                             ch[c].seg, fh_strerror(rc));
        }
    unsigned idle = 0;
    while (atomic_load_explicit(&round_acks, memory_order_acquire) < want)
        fh_wait_round(t, &idle);
}

static void hook(void *addr, size_t len, int prot)
{
    if (atomic_load_explicit(&fh_rt_state, memory_order_acquire) != FH_RT_UP)
        return;
    fh_rt_t *rt = fh_rt;
    uintptr_t lo = (uintptr_t)addr, hi = lo + len + page - 1;
    if (len == 0 || lo % page != 0 || hi < lo)
        return;   /* the kernel refuses it (EINVAL) or changes nothing */
    hi &= ~(page - 1);
    if (prot < 0 || (prot & RW) != RW)
        fh_lc_stale();   /* the caller's own buffers: local_check.c */
    if (!fh_seg_meets_own(rt, lo, hi, prot) || in_hook)
        return;
    in_hook = 1;
    /* Not in a handler (it may not wait): then only our own table. */
    fh_tls_t *t = fh_tls();
    bool round = t != NULL && !t->in_handler;
    if (round)
        pthread_mutex_lock(&round_lock);
    int max = (int)rt->cfg.max_segments;
    fh_seg_change_t *ch = malloc((size_t)max * sizeof *ch);
    int k = ch != NULL ? fh_seg_protect_own(rt, lo, hi, prot, ch, max) : 0;
    if (ch == NULL)
        fh_log_error("out of memory: [%p, +%zu) of a segment changes its protection "
                     "unseen by peers", addr, len);
    if (round && k > 0) {
        tell_peers(rt, t, ch, k, prot);
        if (rt->reg_ops->seg_reprotect != NULL)
            for (int c = 0; c < k; c++)
                rt->reg_ops->seg_reprotect(&rt->core, &t->base, (void *)ch[c].lo,
                                           ch[c].hi - ch[c].lo);
    } else if (k > 0) {
        fh_log_error("[%p, +%zu) of a segment changes its protection %s: peers are not "
                     "told", addr, len, t == NULL ? "in an exiting thread" : "in an AM handler");
    }
    if (round)
        pthread_mutex_unlock(&round_lock);
    free(ch);
    in_hook = 0;
}

void fh_seg_protect_init(void)
{
    page = (uintptr_t)sysconf(_SC_PAGESIZE);
    fh_am_register_internal(FH_H_SEG_PROT, prot_req, "segment protection change");
    fh_am_register_internal(FH_H_SEG_PROT_ACK, prot_ack, "segment protection ack");
    fh_interpose_set(hook);
}

void fh_seg_protect_fini(void)
{
    fh_interpose_set(NULL);
}
