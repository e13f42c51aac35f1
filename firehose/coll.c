/*
 * coll.c -- collectives: how they are paired across ranks, the barrier
 * (node groups in shared memory, then dissemination over AMs among their
 * leaders) and allgather.
 *
 * Pairing (the rule is stated in firehose.h, "Collectives").  Every
 * collective call -- fh_barrier, fh_allgather, fh_segment_create,
 * fh_segment_destroy, fh_finalize -- runs from start to end holding the
 * rank's coll_lock (fh_coll_enter / fh_coll_leave), so a rank runs one at a
 * time, in the order its threads enter, and the k-th collective of every
 * rank pairs with the k-th of every other.  Each call begins with a barrier
 * that carries the call's signature (fh_coll_sig: which call, and the
 * argument that must agree: len of fh_allgather, the segment of
 * fh_segment_destroy, the slot of fh_segment_create).  The barrier also
 * computes the minimum and maximum signature over all ranks (both are
 * idempotent, so the dissemination pattern, and the node groups' shared
 * combination before it, give every rank the exact result); if they
 * differ, EVERY rank's call returns FH_ERR_STATE after the barrier, before
 * doing anything else, and the next calls pair again.  The same way it
 * computes the OR of a word each rank brings (fh_barrier_or; 0 for the
 * other calls): OR is idempotent too.  So
 * concurrent calls from several threads never deadlock: either they agree
 * and proceed, or all of them fail the same way.  (Before, each call took
 * the lock twice -- barrier, then the bootstrap exchange -- and two threads
 * of each rank could hold it in different phases on different ranks.)
 * A thread waiting for coll_lock keeps polling.
 *
 * Barrier, in two stages.  The shared-memory stage (node_coll.c): the
 * ranks of a node group arrive in memory the group maps, their signatures
 * combined there, and the group's leader alone goes on; a rank outside
 * any such group is a group of one and its own leader.  The network stage,
 * here, among the leaders only (rt->bar_leader, bar_nleaders of them): in
 * round k leader i notifies leader (i + 2^k) mod L and waits for the
 * notification from leader (i - 2^k) mod L, for ceil(log2 L) rounds, over
 * AMs (through the rings or the conduit, as fh_path_am_send chooses).  A
 * leader can be at most one barrier ahead of another (it cannot finish
 * barrier e+1 before the other entered it), so arrivals -- and the
 * signature range they carry -- are kept per round and per epoch parity.
 * Then the leader releases its group with the job's range (or the
 * stage's error).  Under FH_SHM=off every rank leads itself: the network
 * stage is the whole barrier, as before the node path.  In a job whose
 * ranks are all in one group there is no network stage and no AM: the
 * last member to arrive releases the others.  So the barrier AMs that
 * fh_stats_peer counts in am_sent / am_received are those between leaders
 * only.  Visibility: an arrival is a release (the AM handler's increment,
 * the shared count's RMW), a wait an acquire, the group's release a
 * release store its members acquire: what a rank completed before the
 * barrier is visible to every rank after it.
 *
 * Steps.  A barrier is a state machine (fh_bar_run_t): barrier_step takes
 * it as far as it goes without waiting -- the shared-memory stage
 * (fh_node_coll_step), then the network rounds, each sending its
 * notification once and then looking for its arrival -- and says
 * FH_ERR_AGAIN where it would wait.  The blocking calls step it between
 * fh_wait_round calls (a new wait of a stage restarts the idle count, as
 * each stage's own loop did); fh_barrier_or_notify / fh_barrier_or_try
 * (split phase) leave the stepping to the caller, holding coll_lock from
 * notify to the try that completes (bar_split_owner names the thread, so
 * its other collectives are refused rather than deadlocking on the lock).
 *
 * Lost connections: a round whose arrival has not come fails with
 * FH_ERR_PEER_DEAD naming the leader once the link between our service
 * path and its -- the one link not made again -- is lost, before or
 * during the barrier (am.c up_on_lost marks am_lost_svc; a thread path's link
 * is made again, and its loss seen during a barrier is often older than
 * the barrier: stale_key's probe): for the leader it waits for (that link's loss also
 * ends the link from its service path to ours, which its notification
 * takes when it calls from its service path) and for the leaders it
 * notified in this barrier (its notification may be gone).  A
 * notification lost with a thread path's link, which is made again, is
 * sent again by its sender (resend_lost, while it waits in this barrier or
 * the next, or in any wait outside collectives: fh_coll_resend_lost); its
 * leader keeps only the newest epoch per round and parity, so one that
 * came twice counts once.  A leader whose barrier fails on a
 * lost service connection tells the other leaders before it returns
 * (pass_on_failure): the ones that wait for its later notifications fail
 * too, naming the rank lost, rather than wait until their own connections
 * tell -- or for ever (docs/reliability.md).
 *
 * Allgather: a barrier (so every rank is inside the collective and none is
 * blocked on us for network progress), then the bootstrap's allgather.  It is
 * used for rare metadata (segment creation), not for data.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

uint64_t fh_coll_sig(enum fh_coll_kind kind, uint64_t arg)
{
    return ((uint64_t)kind << 56) | (arg & (((uint64_t)1 << 56) - 1));
}

/* "fh_segment_destroy(3)": the call and the argument that must agree. */
static void describe(uint64_t sig, char *buf, size_t len)
{
    static const char *const names[] = {"?", "fh_barrier", "fh_allgather",
                                        "fh_segment_create", "fh_segment_destroy",
                                        "fh_finalize", "fh_barrier_or"};
    static const char *const args[] = {"", "", " of %llu bytes", " into slot %llu",
                                       " of segment %llu", "", ""};
    uint64_t k = sig >> 56;
    if (k >= sizeof names / sizeof *names)
        k = 0;
    int n = snprintf(buf, len, "%s", names[k]);
    if (n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, args[k],
                 (unsigned long long)(sig & (((uint64_t)1 << 56) - 1)));
}

/* args: round, epoch, smallest and largest signature seen so far, the OR
 * of the bits seen so far.  Only the groups' leaders take part (bar_lidx:
 * index among them). */
static void barrier_notify(fh_token_t tok, void *buf, size_t n, const uint64_t *a,
                           unsigned na)
{
    (void)buf;
    (void)n;
    int src = -1;
    fh_token_source(tok, &src);
    fh_rt_t *rt = fh_rt;
    if (na != 5 || a[0] >= FH_BARRIER_ROUNDS) {
        fh_am_drop(fh_token_path(tok), src, "a malformed barrier message");
        return;
    }
    /* In round k only the leader 2^k places before us notifies us: anyone
     * else's arrival would let us leave the barrier early. */
    const uint64_t L = (uint64_t)rt->bar_nleaders, dist = (uint64_t)1 << a[0];
    const int me = rt->bar_lidx[rt->rank];
    if (me < 0 || dist >= L || src != rt->bar_leader[((uint64_t)me + L - dist) % L]) {
        fh_am_drop(fh_token_path(tok), src, "a barrier arrival for round %llu, which is not "
                   "this rank's to send", (unsigned long long)a[0]);
        return;
    }
    /* A leader is at most one barrier ahead of us: it cannot finish
     * barrier e before we entered it, so it cannot send for e + 2.  A
     * later epoch would count as the arrival of barriers still to come. */
    if (a[1] == 0 || a[1] > atomic_load(&rt->barrier_epoch) + 1) {
        fh_am_drop(fh_token_path(tok), src, "a barrier arrival for epoch %llu, more than "
                   "one barrier ahead of this rank's", (unsigned long long)a[1]);
        return;
    }
    /* Sent again (resend_lost) and come twice, or overtaken by a later
     * barrier's on another link: not newer than what the slot holds.  Two
     * handlers that both find the epoch newer carry the same one, and so
     * the same values (one notification sent twice). */
    _Atomic uint64_t *in = &rt->barrier_in[a[0]][a[1] & 1];
    if (a[1] <= atomic_load_explicit(in, memory_order_acquire))
        return;
    _Atomic uint64_t *sig = rt->barrier_sig[a[0]][a[1] & 1];
    atomic_store_explicit(&sig[0], a[2], memory_order_relaxed);
    atomic_store_explicit(&sig[1], a[3], memory_order_relaxed);
    atomic_store_explicit(&sig[2], a[4], memory_order_relaxed);
    atomic_store_explicit(in, a[1], memory_order_release);
}

/* payload: epoch, the rank whose connection was lost.  Sent by a leader
 * whose barrier failed on a lost connection (pass_on_failure) to the other
 * leaders, who may wait for its later notifications: without it they fail
 * only once their own connections tell -- naming the wrong rank, when the
 * connection lost is with a survivor that gave up -- or never (a leader
 * on another host that never talked to the dead rank and whose partners
 * keep running). */
static void barrier_failed(fh_token_t tok, void *buf, size_t n, const uint64_t *a,
                           unsigned na)
{
    (void)a;
    (void)na;
    int src = -1;
    fh_token_source(tok, &src);
    fh_rt_t *rt = fh_rt;
    uint64_t m[2];
    if (n != sizeof m || src < 0 || rt->bar_lidx[src] < 0 || rt->bar_lidx[rt->rank] < 0) {
        fh_am_drop(fh_token_path(tok), src, "a malformed barrier failure report");
        return;
    }
    memcpy(m, buf, sizeof m);
    if (m[0] == 0 || m[1] >= (uint64_t)rt->nranks) {
        fh_am_drop(fh_token_path(tok), src, "a barrier failure report for epoch %llu naming "
                   "rank index %llu", (unsigned long long)m[0], (unsigned long long)m[1]);
        return;
    }
    atomic_store(&rt->bar_fail_rank, (int)m[1]);
    atomic_store(&rt->bar_fail_by, src);
    uint64_t e = atomic_load(&rt->bar_fail_epoch);
    while (m[0] > e && !atomic_compare_exchange_weak(&rt->bar_fail_epoch, &e, m[0]))
        ;
}

void fh_coll_init(void)
{
    fh_am_register_internal(FH_H_BARRIER, barrier_notify, "barrier");
    fh_am_register_internal(FH_H_BARRIER_FAIL, barrier_failed, "barrier failure");
}

int fh_coll_enter(fh_tls_t *t, const char *fn)
{
    fh_rt_t *rt = fh_rt;
    if (atomic_load(&rt->bar_split_owner) == t)
        return fh_set_error(FH_ERR_STATE, "%s: this thread has not completed the barrier "
                            "it began with fh_barrier_or_notify (fh_barrier_or_try first)",
                            fn);
    for (unsigned idle = 0; pthread_mutex_trylock(&rt->coll_lock) != 0;)
        fh_wait_round(t, &idle);
    return FH_OK;
}

void fh_coll_leave(void)
{
    pthread_mutex_unlock(&fh_rt->coll_lock);
}

/* Sends barrier notification r (to r->to) on t's path, remembering the
 * path and its link count first. */
static int send_notify(fh_tls_t *t, struct fh_bar_sent *r)
{
    fh_path_t *p = t->path;
    pthread_mutex_lock(&p->lock);
    r->path = p->index;
    r->lost = p->link_lost[r->to];
    pthread_mutex_unlock(&p->lock);
    return fh_am_send_request(t, r->to, FH_AM_REQ_SHORT, FH_H_BARRIER, NULL, 0, 0, r->args,
                              5);
}

/* A notification this rank sent in one of the last two barriers may have
 * been lost with the link it left on, which is made again (a thread
 * path's; the service paths' one fails the barrier instead): its leader
 * then waits for it for ever, and for us (it cannot go on).  Sends again
 * every one whose link was lost since it was sent, once any link was
 * (am_lost_seq moved); the leader ignores one that had come
 * (barrier_notify).  Called while we wait in a barrier: the leader that
 * lacks ours keeps every rank from completing the barrier after it, so we
 * wait in one -- unless the program waits for that rank otherwise. */
static int resend_lost(fh_tls_t *t, const char *fn)
{
    fh_rt_t *rt = fh_rt;
    const uint64_t seq = atomic_load(&rt->am_lost_seq);
    if (seq == atomic_load(&rt->bar_lost_seen))
        return FH_OK;
    atomic_store(&rt->bar_lost_seen, seq);
    for (unsigned k = 0; (1u << k) < (unsigned)rt->bar_nleaders; k++)
        for (int e = 0; e < 2; e++) {
            struct fh_bar_sent *r = &rt->bar_sent[k][e];
            if (r->args[1] == 0)
                continue;
            fh_path_t *p = &rt->paths[r->path];
            pthread_mutex_lock(&p->lock);
            const bool lost = p->link_lost[r->to] != r->lost;
            pthread_mutex_unlock(&p->lock);
            if (!lost)
                continue;
            fh_log_verbose(1, "%s: the link of path %d to %s was lost after our barrier "
                           "message (epoch %llu, round %u) left: sent again", fn, r->path,
                           FH_RANK_NAME(r->to), (unsigned long long)r->args[1], k);
            int rc = send_notify(t, r);
            if (rc != FH_OK)
                return rc;
        }
    return FH_OK;
}

/* Our barrier `epoch` fails because the connection with rank `lost` was
 * lost: tells every other leader we still reach, on the service path (the
 * report then comes before that connection's own loss, if we end).  Each
 * is sent once, at most one per leader and failed barrier; one that
 * cannot be sent is left (its leader has its own connections to tell).
 * The caller's error text, if set, is kept. */
static void pass_on_failure(fh_tls_t *t, uint64_t epoch, int lost)
{
    fh_rt_t *rt = fh_rt;
    const uint64_t m[2] = {epoch, (uint64_t)lost};
    fh_error_stash_t why;
    fh_error_stash(&why);
    for (int l = 0; l < rt->bar_nleaders; l++) {
        int r = rt->bar_leader[l];
        if (r != rt->rank && r != lost && atomic_load(&rt->am_lost_svc[r]) == 0)
            (void)fh_am_send_request_on(t, &rt->paths[0], r, FH_H_BARRIER_FAIL, m,
                                        sizeof m);
    }
    fh_error_unstash(&why);
}

/* FH_ERR_PEER_DEAD when another leader reported this barrier failed. */
static int reported_failure(const fh_bar_run_t *b, const char *fn)
{
    fh_rt_t *rt = fh_rt;
    if (atomic_load(&rt->bar_fail_epoch) < b->epoch)
        return FH_OK;
    int lost = atomic_load(&rt->bar_fail_rank), by = atomic_load(&rt->bar_fail_by);
    return fh_set_error(FH_ERR_PEER_DEAD, "%s: %s may have died: %s lost its connection "
                        "with it and gave up this barrier", fn, FH_RANK_NAME(lost),
                        FH_RANK_NAME(by));
}

/* internal.h.  A rank out of its barrier may wait for something that a
 * leader lacking our notification does only after its own barrier (a
 * client's AM wait, a flag polled with fh_get): that wait sends again. */
void fh_coll_resend_lost(fh_tls_t *t)
{
    fh_rt_t *rt = fh_rt;
    if (atomic_load_explicit(&rt->am_lost_seq, memory_order_relaxed) ==
            atomic_load_explicit(&rt->bar_lost_seen, memory_order_relaxed) ||
        t->in_handler)
        return;
    if (pthread_mutex_trylock(&rt->coll_lock) != 0)
        return;      /* a collective runs: its own wait sends again (leaders_step) */
    (void)resend_lost(t, "a wait outside barriers");
    pthread_mutex_unlock(&rt->coll_lock);
}

/* The network stage, among the leaders: dissemination over AMs, combining
 * the signature range [b->lo, b->hi] and the bits b->or; FH_ERR_AGAIN
 * while a round's arrival has not come. */
static int leaders_step(fh_tls_t *t, fh_bar_run_t *b, const char *fn)
{
    fh_rt_t *rt = fh_rt;
    const unsigned L = (unsigned)rt->bar_nleaders, me = (unsigned)rt->bar_lidx[rt->rank];
    for (; (1u << b->k) < L; b->k++, b->sent = false) {
        const unsigned dist = 1u << b->k, k = (unsigned)b->k;
        if (!b->sent) {
            struct fh_bar_sent *r = &rt->bar_sent[k][b->epoch & 1];
            *r = (struct fh_bar_sent){.args = {k, b->epoch, b->lo, b->hi, b->or},
                                      .to = rt->bar_leader[(me + dist) % L]};
            int rc = send_notify(t, r);
            /* A report names the rank lost; without one, we pass ours on. */
            if (rc == FH_ERR_PEER_DEAD && reported_failure(b, fn) == FH_OK)
                pass_on_failure(t, b->epoch, r->to);
            if (rc != FH_OK)
                return rc;
            b->sent = true;
        }
        _Atomic uint64_t *slot = &rt->barrier_in[k][b->epoch & 1];
        if (atomic_load_explicit(slot, memory_order_acquire) < b->epoch) {
            /* A notification may have been lost with the service paths'
             * connection (am.c up_on_lost), which is never made again: the
             * one we wait for, or one we sent (its leader then waits for
             * ever).  Lost before the barrier began counts too: the
             * notification cannot travel on it (pmix.sh dead_rank
             * finalize, where the victim dies before fh_finalize). */
            if (reported_failure(b, fn) != FH_OK)
                return FH_ERR_PEER_DEAD;
            int from = rt->bar_leader[(me + L - dist) % L];
            if (atomic_load(&rt->am_lost_svc[from]) != 0) {
                pass_on_failure(t, b->epoch, from);
                return fh_set_error(FH_ERR_PEER_DEAD, "%s: the connection with %s was "
                                    "lost before its barrier message (round %u) came: "
                                    "it may never come", fn, FH_RANK_NAME(from), k);
            }
            for (unsigned j = 0; j <= k; j++) {
                int to = rt->bar_leader[(me + (1u << j)) % L];
                if (atomic_load(&rt->am_lost_svc[to]) != 0) {
                    pass_on_failure(t, b->epoch, to);
                    return fh_set_error(FH_ERR_PEER_DEAD, "%s: the connection with %s "
                                        "was lost after this rank's barrier message "
                                        "(round %u) left: it may never arrive", fn,
                                        FH_RANK_NAME(to), j);
                }
            }
            int rc = resend_lost(t, fn);
            return rc != FH_OK ? rc : FH_ERR_AGAIN;
        }
        _Atomic uint64_t *in = rt->barrier_sig[k][b->epoch & 1];
        uint64_t ilo = atomic_load_explicit(&in[0], memory_order_relaxed);
        uint64_t ihi = atomic_load_explicit(&in[1], memory_order_relaxed);
        b->or |= atomic_load_explicit(&in[2], memory_order_relaxed);
        b->lo = ilo < b->lo ? ilo : b->lo;
        b->hi = ihi > b->hi ? ihi : b->hi;
    }
    return FH_OK;
}

/* Under coll_lock: begins a barrier in *b with signature sig and bits or. */
static void barrier_begin(fh_bar_run_t *b, uint64_t sig, uint64_t or)
{
    fh_rt_t *rt = fh_rt;
    assert(pthread_mutex_trylock(&rt->coll_lock) != 0);   /* held (by us) */
    *b = (fh_bar_run_t){.epoch = rt->nranks > 1 ? ++rt->barrier_epoch : 0, .lo = sig,
                        .hi = sig, .or = or, .node = FH_NODE_BAR_START};
}

/* Takes barrier b as far as it goes without waiting: FH_ERR_AGAIN while
 * not complete, then FH_OK (b->or: the job's bits) or the error. */
static int barrier_step(fh_tls_t *t, fh_bar_run_t *b, const char *fn)
{
    if (b->epoch == 0)
        return FH_OK;                     /* one rank */
    int rc = FH_OK;
    if (!b->in_net) {
        rc = fh_node_coll_step(t, b);
        if (rc == FH_ERR_AGAIN)
            return rc;
        if (rc == FH_OK && b->lead) {
            b->in_net = true;
            b->k = 0;
            b->sent = false;
        }
    }
    if (b->in_net) {
        rc = leaders_step(t, b, fn);
        if (rc == FH_ERR_AGAIN)
            return rc;
        fh_node_coll_release(t, b->epoch, b->lo, b->hi, b->or, rc);
    }
    if (rc != FH_OK)
        return rc;
    if (b->lo != b->hi) {
        char x[64], y[64];
        describe(b->lo, x, sizeof x);
        describe(b->hi, y, sizeof y);
        return fh_set_error(FH_ERR_STATE, "%s: the ranks' collectives do not pair up (%s "
                            "met %s); nothing done: concurrent collectives that differ "
                            "must be ordered (firehose.h: Collectives)", fn, x, y);
    }
    return FH_OK;
}

/* Where barrier b stands (which wait). */
static unsigned barrier_at(const fh_bar_run_t *b)
{
    return (unsigned)b->node | (unsigned)b->in_net << 4 | (unsigned)b->k << 5;
}

int fh_barrier_internal(fh_tls_t *t, uint64_t sig, const char *fn)
{
    uint64_t or = 0;
    return fh_barrier_or_internal(t, sig, fn, &or);
}

int fh_barrier_or_internal(fh_tls_t *t, uint64_t sig, const char *fn, uint64_t *or)
{
    fh_bar_run_t b;
    barrier_begin(&b, sig, *or);
    int rc;
    for (unsigned idle = 0; (rc = barrier_step(t, &b, fn)) == FH_ERR_AGAIN;) {
        const unsigned at = barrier_at(&b);
        fh_wait_round(t, &idle);
        if (barrier_at(&b) != at)
            idle = 0;   /* a new wait (as each wait of the stages had its own) */
    }
    *or = b.or;
    return rc;
}

int fh_allgather_internal(fh_tls_t *t, uint64_t sig, const char *fn, const void *in,
                          void *out, size_t len)
{
    int rc = fh_barrier_internal(t, sig, fn);
    if (rc != FH_OK)
        return rc;
    rc = fh_rt->boot->ops->allgather(fh_rt->boot, in, out, len);
    return rc == FH_OK ? FH_OK : fh_set_error(FH_ERR_BOOTSTRAP, "%s: the bootstrap's "
                                              "allgather failed", fn);
}

int fh_barrier(void)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_barrier", &rc);
    if (t == NULL)
        return rc;
    if ((rc = fh_coll_enter(t, "fh_barrier")) != FH_OK)
        return rc;
    rc = fh_barrier_internal(t, fh_coll_sig(FH_COLL_BARRIER, 0), "fh_barrier");
    fh_coll_leave();
    return rc;
}

int fh_barrier_or(uint64_t in, uint64_t *out)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_barrier_or", &rc);
    if (t == NULL)
        return rc;
    if (out == NULL)
        return fh_set_error(FH_ERR_INVALID, "fh_barrier_or: NULL out");
    if ((rc = fh_coll_enter(t, "fh_barrier_or")) != FH_OK)
        return rc;
    uint64_t or = in;
    rc = fh_barrier_or_internal(t, fh_coll_sig(FH_COLL_BARRIER_OR, 0), "fh_barrier_or",
                                &or);
    fh_coll_leave();
    if (rc == FH_OK)
        *out = or;
    return rc;
}

int fh_barrier_or_notify(uint64_t in)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_barrier_or_notify", &rc);
    if (t == NULL)
        return rc;
    if ((rc = fh_coll_enter(t, "fh_barrier_or_notify")) != FH_OK)
        return rc;
    fh_rt_t *rt = fh_rt;
    barrier_begin(&rt->bar_split, fh_coll_sig(FH_COLL_BARRIER_OR, 0), in);
    atomic_store(&rt->bar_split_owner, t);
    /* What needs no wait is done now: the arrival is announced. */
    rc = barrier_step(t, &rt->bar_split, "fh_barrier_or_notify");
    if (rc != FH_ERR_AGAIN) {
        rt->bar_split.done = true;   /* fh_barrier_or_try reports rc */
        rt->bar_split.rc = rc;
    }
    return FH_OK;
}

/* fh_barrier_or_try (!waits) and fh_barrier_or_try_idle (waits). */
static int split_try(uint64_t *out, bool waits, unsigned *idle, const char *fn)
{
    int rc;
    fh_tls_t *t = fh_enter(fn, &rc);
    if (t == NULL)
        return rc;
    fh_rt_t *rt = fh_rt;
    if (atomic_load(&rt->bar_split_owner) != t)
        return fh_set_error(FH_ERR_STATE, "%s: no barrier begun by "
                            "fh_barrier_or_notify in this thread", fn);
    if (out == NULL || (waits && idle == NULL))
        return fh_set_error(FH_ERR_INVALID, "%s: NULL %s", fn, out == NULL ? "out" : "idle");
    fh_bar_run_t *b = &rt->bar_split;
    if (b->done) {
        rc = b->rc;                   /* completed in fh_barrier_or_notify */
    } else if (!waits) {
        fh_progress(t);
        rc = barrier_step(t, b, fn);
        if (rc == FH_ERR_AGAIN)
            return rc;
    } else {
        /* As fh_barrier_or_internal's loop: a step, the wait, a step. */
        const unsigned at = barrier_at(b);
        rc = barrier_step(t, b, fn);
        if (rc == FH_ERR_AGAIN) {
            fh_wait_round(t, idle);
            rc = barrier_step(t, b, fn);
        }
        if (barrier_at(b) != at)
            *idle = 0;   /* a new wait */
        if (rc == FH_ERR_AGAIN)
            return rc;
    }
    atomic_store(&rt->bar_split_owner, NULL);
    fh_coll_leave();
    if (rc == FH_OK)
        *out = b->or;
    return rc;
}

int fh_barrier_or_try(uint64_t *out)
{
    return split_try(out, false, NULL, "fh_barrier_or_try");
}

int fh_barrier_or_try_idle(uint64_t *out, unsigned *idle)
{
    return split_try(out, true, idle, "fh_barrier_or_try_idle");
}

int fh_allgather(const void *in, void *out, size_t len)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_allgather", &rc);
    if (t == NULL)
        return rc;
    if (len > 0 && (in == NULL || out == NULL))
        return fh_set_error(FH_ERR_INVALID, "fh_allgather: NULL buffer with %zu bytes", len);
    if (len > ((size_t)1 << 30) / (size_t)fh_rt->nranks)
        return fh_set_error(FH_ERR_TOO_BIG, "fh_allgather: %zu bytes per rank is too much",
                            len);
    if ((rc = fh_coll_enter(t, "fh_allgather")) != FH_OK)
        return rc;
    rc = fh_allgather_internal(t, fh_coll_sig(FH_COLL_ALLGATHER, len), "fh_allgather", in,
                               out, len);
    fh_coll_leave();
    return rc;
}
