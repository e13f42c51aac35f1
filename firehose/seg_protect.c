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
 *   2. sends every peer FH_H_SEG_PROT (segment, range, protection; on the
 *      service paths' connection, in round order, queued while the peer
 *      has no credit for it: "sending" below); the
 *      peer records the same hole for our piece and publishes before it
 *      acknowledges, so its transfers that look the range up afterwards
 *      are refused before anything is sent, with FH_ERR_OUT_OF_SEGMENT
 *      naming our rank and the address (rma.c, strided.c, atomic.c);
 *   3. polls until every peer acknowledged -- at most FH_SEG_PROT_WAIT
 *      seconds, and not for a peer whose link to us is lost meanwhile
 *      (tell_peers; each peer given up is named in a log line);
 *   4. lets the strategy give up what peers hold registered in the range
 *      (reg.h seg_reprotect: firehose revokes the firehoses meeting it and
 *      waits until their holders' RDMA through them completed, within the
 *      same deadline), then lets the call go on.
 * Making the range readable and writable again removes the hole the same
 * way.  The check costs the fast path nothing but a pointer test
 * (fh_seg_range_t.holes is NULL unless the piece has holes).
 *
 * What this does not cover (docs/reliability.md, Open): a transfer a peer
 * looked up *before* it applied the change (in flight, or another thread
 * of the peer between lookup and post) still reaches the provider; the
 * pin-everything get then ends by the RMA timeout, a put may still fault.
 * A peer given up in step 3 (stopped, computing, link lost) applies the
 * change when it next polls; until then what it was granted before still
 * reaches the memory (docs/reliability.md, "A protection change waits a
 * bounded time").
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
#include "firehose/util/clock.h"
#include "firehose/util/interpose.h"

#define ARGS 5   /* segment, lo, hi, prot (PROT_READ/WRITE bits, -1: unmapped), round */
#define RW (PROT_READ | PROT_WRITE)

/* Held from the local change to the last acknowledgement, so that two
 * threads' changes reach every peer in the order they were applied here. */
static pthread_mutex_t round_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t page;                /* set at init: no sysconf in the hook */
static _Atomic uint64_t round_id;     /* the round in progress */
/* Per peer: the round its acknowledgements are counted for (the bits above
 * ACK_BITS) and how many of that round came.  Allocated once per process
 * (handlers may read it until the process ends). */
#define ACK_BITS 24
#define ACK_MASK ((UINT64_C(1) << ACK_BITS) - 1)
static _Atomic uint64_t *peer_acks;
static int peer_acks_n;
static _Thread_local int in_hook;

/* ---- a piece's holes in the segment table (internal.h, segment.c) */

bool fh_seg_meets_own(fh_rt_t *rt, uintptr_t lo, uintptr_t hi, int prot)
{
    /* Any thread, one without runtime state too: counted while it reads
     * (segment.c "Reclaiming"). */
    fh_seg_hook_enter();
    struct fh_segmap *m = atomic_load(&rt->segmap);
    bool reduces = prot < 0 || (prot & (PROT_READ | PROT_WRITE)) != (PROT_READ | PROT_WRITE);
    bool meets = false;
    for (uint32_t i = 0; m != NULL && i < m->count[rt->rank] && !meets; i++) {
        const fh_seg_range_t *r = &m->ranges[rt->rank][i];
        meets = r->base < hi && r->end > lo && (reduces || r->holes != NULL);
    }
    fh_seg_hook_leave();
    return meets;
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
    int src = -1;
    fh_token_source(tok, &src);
    uint64_t cur = atomic_load_explicit(&round_id, memory_order_relaxed);
    if (na != 1 || src < 0 || src >= peer_acks_n || a[0] == 0 || a[0] > cur) {
        fh_am_drop(fh_token_path(tok), src, "a stray segment protection acknowledgement");
        return;
    }
    if (a[0] != cur) {
        /* A round that stopped waiting for this peer (tell_peers). */
        fh_log_verbose(1, "%s acknowledged protection round %llu late",
                       FH_RANK_NAME(src), (unsigned long long)a[0]);
        return;
    }
    _Atomic uint64_t *w = &peer_acks[src];
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed), nv;
    do
        nv = (v >> ACK_BITS) == a[0] ? v + 1 : (a[0] << ACK_BITS) | 1;
    while (!atomic_compare_exchange_weak_explicit(w, &v, nv, memory_order_release,
                                                  memory_order_relaxed));
}

/* Peer r's acknowledgements of round id so far. */
static unsigned acks_of(int r, uint64_t id)
{
    uint64_t v = atomic_load_explicit(&peer_acks[r], memory_order_acquire);
    return (v >> ACK_BITS) == id ? (unsigned)(v & ACK_MASK) : 0;
}

/* Times p's link to rank r's service path was lost (am.c up_on_lost). */
static uint32_t link_lost(fh_path_t *p, int r)
{
    pthread_mutex_lock(&p->lock);
    uint32_t n = p->link_lost[r];
    pthread_mutex_unlock(&p->lock);
    return n;
}

/* ---- sending: every change goes to a peer on the service paths'
 * connection, in the order of the rounds (one connection per peer: a
 * later round's request never overtakes an earlier one that a silent peer
 * has not read yet), through a FIFO per peer: what the peer has no credit
 * for (it does not poll, so it returns none) waits there and is sent by
 * any thread's progress (seg_prot_progress) once the peer answers. */
typedef struct prot_msg {
    struct prot_msg *next;
    uint64_t args[ARGS];
} prot_msg_t;
typedef struct prot_fifo {
    prot_msg_t *head, **tail;
} prot_fifo_t;
static pthread_mutex_t fifo_lock = PTHREAD_MUTEX_INITIALIZER;
static prot_fifo_t *fifos;            /* [peer_acks_n], with peer_acks */
static _Atomic unsigned fifo_msgs;    /* messages queued in all FIFOs */

/* Queues change c of round id for peer r (fifo_lock held); false when out
 * of memory (logged: that peer does not learn the change). */
static bool fifo_push(int r, const fh_seg_change_t *c, int prot, uint64_t id)
{
    prot_msg_t *m = malloc(sizeof *m);
    if (m == NULL) {
        fh_log_error("out of memory: %s is not told that [%p, %p) of segment %ld changed "
                     "its protection", FH_RANK_NAME(r), (void *)c->lo, (void *)c->hi, c->seg);
        return false;
    }
    *m = (prot_msg_t){NULL, {(uint64_t)c->seg, c->lo, c->hi,
                             (uint64_t)(int64_t)(prot < 0 ? -1 : prot & RW), id}};
    prot_fifo_t *f = &fifos[r];
    if (f->head == NULL)
        f->tail = &f->head;
    *f->tail = m;
    f->tail = &m->next;
    atomic_fetch_add_explicit(&fifo_msgs, 1, memory_order_relaxed);
    return true;
}

/* Sends what peer r's FIFO holds, in order, until the peer has no credit
 * left (fifo_lock held, no path lock). */
static void fifo_flush(fh_tls_t *t, int r)
{
    prot_fifo_t *f = &fifos[r];
    while (f->head != NULL) {
        prot_msg_t *m = f->head;
        int rc = fh_am_try_request(t, &fh_rt->paths[0], r, FH_AM_REQ_SHORT, FH_H_SEG_PROT,
                                   NULL, 0, m->args, ARGS);
        if (rc == FH_ERR_AGAIN)
            return;
        if (rc != FH_OK)
            fh_log_error("could not tell %s that [%p, %p) of segment %lld changed its "
                         "protection: %s", FH_RANK_NAME(r), (void *)(uintptr_t)m->args[1],
                         (void *)(uintptr_t)m->args[2], (long long)m->args[0],
                         fh_strerror(rc));
        f->head = m->next;
        free(m);
        atomic_fetch_sub_explicit(&fifo_msgs, 1, memory_order_relaxed);
    }
}

/* Every thread's progress (path.c fh_progress_add_thread): one relaxed
 * load while nothing waits. */
static void seg_prot_progress(fh_tls_t *t)
{
    if (atomic_load_explicit(&fifo_msgs, memory_order_relaxed) == 0 || t->in_handler != 0 ||
        pthread_mutex_trylock(&fifo_lock) != 0)
        return;
    for (int r = 0; r < peer_acks_n; r++)
        if (fifos[r].head != NULL)
            fifo_flush(t, r);
    pthread_mutex_unlock(&fifo_lock);
}

/* A peer of the round: its link's loss count when the round began,
 * whether it is still waited for. */
typedef struct round_peer {
    uint32_t lost;
    bool waiting;
} round_peer_t;

/* Steps 2-3 of the top: every peer applies the changes before we return,
 * except a peer given up: one whose service link to us is lost during the
 * round (it cannot answer: dead, or the request or its answer went with
 * the connection; am.c up_on_lost), and one that has not answered by the
 * deadline (FH_SEG_PROT_WAIT seconds after the start; none when 0), each
 * named in a log line; what it was not sent yet stays queued for it.
 * Returns the deadline for the rest of the round (step 4).  round_lock
 * held. */
static double tell_peers(fh_rt_t *rt, fh_tls_t *t, const fh_seg_change_t *ch, int k,
                         int prot)
{
    uint64_t id = atomic_fetch_add(&round_id, 1) + 1;
    double deadline = rt->cfg.seg_prot_wait > 0 ? fh_now() + (double)rt->cfg.seg_prot_wait : 0;
    fh_path_t *svc = &rt->paths[0];
    round_peer_t *st = calloc((size_t)rt->nranks, sizeof *st);
    if (st == NULL) {
        fh_log_error("out of memory: peers are not told that segment memory changes its "
                     "protection");
        return deadline;
    }
    pthread_mutex_lock(&fifo_lock);
    for (int r = 0; r < rt->nranks; r++) {
        if (r == rt->rank)
            continue;
        st[r] = (round_peer_t){link_lost(svc, r), true};
        for (int c = 0; c < k && st[r].waiting; c++)
            st[r].waiting = fifo_push(r, &ch[c], prot, id);
    }
    pthread_mutex_unlock(&fifo_lock);
    for (unsigned idle = 0;;) {
        int waiting = 0;
        pthread_mutex_lock(&fifo_lock);
        for (int r = 0; r < rt->nranks; r++)
            if (st[r].waiting && fifos[r].head != NULL)
                fifo_flush(t, r);
        pthread_mutex_unlock(&fifo_lock);
        for (int r = 0; r < rt->nranks; r++) {
            round_peer_t *pr = &st[r];
            if (!pr->waiting)
                continue;
            if (acks_of(r, id) >= (unsigned)k) {
                pr->waiting = false;                       /* applied */
            } else if (link_lost(svc, r) != pr->lost) {
                fh_log_error("%s lost its link with us during a segment protection "
                             "change at %p: not waited for", FH_RANK_NAME(r),
                             (void *)ch[0].lo);
                pr->waiting = false;
            } else {
                waiting++;
            }
        }
        if (waiting == 0)
            break;
        if (deadline > 0 && fh_now() > deadline) {
            for (int r = 0; r < rt->nranks; r++)
                if (st[r].waiting)
                    fh_log_error("%s did not acknowledge within FH_SEG_PROT_WAIT=%ld s "
                                 "that [%p, %p) of our segment changed its protection; "
                                 "going on without it (docs/reliability.md)",
                                 FH_RANK_NAME(r), rt->cfg.seg_prot_wait, (void *)ch[0].lo,
                                 (void *)ch[0].hi);
            break;
        }
        fh_wait_round(t, &idle);
    }
    free(st);
    return deadline;
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
        double deadline = tell_peers(rt, t, ch, k, prot);
        if (rt->reg_ops->seg_reprotect != NULL)
            for (int c = 0; c < k; c++)
                rt->reg_ops->seg_reprotect(&rt->core, &t->base, (void *)ch[c].lo,
                                           ch[c].hi - ch[c].lo, deadline);
    } else if (k > 0) {
        fh_log_error("[%p, +%zu) of a segment changes its protection %s: peers are not "
                     "told", addr, len, t == NULL ? "in an exiting thread" : "in an AM handler");
    }
    if (round)
        pthread_mutex_unlock(&round_lock);
    free(ch);
    in_hook = 0;
}

int fh_seg_protect_init(fh_rt_t *rt)
{
    page = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (peer_acks_n < rt->nranks) {
        /* Kept to the end of the process (a handler may read it). */
        _Atomic uint64_t *a = calloc((size_t)rt->nranks, sizeof *a);
        prot_fifo_t *f = calloc((size_t)rt->nranks, sizeof *f);
        if (a == NULL || f == NULL) {
            free(a);
            free(f);
            return fh_set_error(FH_ERR_NO_MEMORY, "fh_init: out of memory (segment "
                                                  "protection)");
        }
        peer_acks = a;
        fifos = f;
        peer_acks_n = rt->nranks;
    }
    fh_progress_add_thread(rt, seg_prot_progress);
    fh_am_register_internal(FH_H_SEG_PROT, prot_req, "segment protection change");
    fh_am_register_internal(FH_H_SEG_PROT_ACK, prot_ack, "segment protection ack");
    fh_interpose_set(hook);
    return FH_OK;
}

void fh_seg_protect_fini(void)
{
    fh_interpose_set(NULL);
    /* What a peer never took (it stopped for good): dropped. */
    pthread_mutex_lock(&fifo_lock);
    unsigned dropped = 0;
    for (int r = 0; r < peer_acks_n; r++)
        while (fifos[r].head != NULL) {
            prot_msg_t *m = fifos[r].head;
            fifos[r].head = m->next;
            free(m);
            dropped++;
        }
    atomic_store_explicit(&fifo_msgs, 0, memory_order_relaxed);
    pthread_mutex_unlock(&fifo_lock);
    if (dropped != 0)
        fh_log_verbose(1, "fh_finalize: %u segment protection change%s never sent (the "
                       "peer took no more requests)", dropped, dropped == 1 ? "" : "s");
}
