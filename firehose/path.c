/*
 * path.c -- communication paths: creation, receive sizing, polling (the
 * conduit, then what the modules registered: fh_progress_add_poller), the
 * upcalls the conduit makes from inside poll, and how waiting loops wait:
 * fh_wait_round, the one progress rule every waiting loop follows (a
 * waiting thread completes what other threads of its rank -- idle or
 * exited -- left in flight: include/firehose.h, "Progress"), and
 * fh_wait_idle (FH_WAIT_SPIN).
 */
#include <assert.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "firehose/util/clock.h"

static void fh_wait_idle(unsigned *idle);

/* Receive slots a path pre-posts beyond the flow-control bound below. */
#define FH_PATH_RX_MARGIN 8

/* Receive space a path needs (see the flow-control comment in internal.h).
 * Thread path: from each rank at most `credits` replies plus two credit
 * packets.  Service path: additionally every (rank, path) may have `credits`
 * requests in flight to it. */
static unsigned fh_path_rx_msgs(const fh_rt_t *rt, int index)
{
    unsigned c = (unsigned)rt->cfg.am_credits;
    unsigned n = (unsigned)rt->nranks;
    unsigned replies = n * (c + 2);
    if (index != 0)
        return replies + FH_PATH_RX_MARGIN;
    return replies + n * (unsigned)rt->npaths * c + FH_PATH_RX_MARGIN;
}

/* Of those, from one source (rank, path) at most: requests (service path
 * only: `credits` per source), and from a service path `credits` replies
 * plus two credit packets. */
static unsigned fh_path_rx_per_src(const fh_rt_t *rt, int index)
{
    unsigned c = (unsigned)rt->cfg.am_credits;
    return (index == 0 ? 2 * c : c) + 2 + 2;
}

int fh_path_setup(fh_rt_t *rt, fh_path_t *p, int index)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    p->index = index;
    p->rt = rt;
    p->backlog_tail = &p->backlog;
    p->held_tail = &p->held;
    if (rt->reg_ops->path_init != NULL)
        rt->reg_ops->path_init(&p->base);
    fh_ht_init(&p->handles, (unsigned)index);
    p->credits = malloc(sizeof *p->credits * (size_t)rt->nranks);
    p->credit_held = calloc((size_t)rt->nranks, sizeof *p->credit_held);
    p->stats = calloc((size_t)rt->nranks, sizeof *p->stats);
    p->link_lost = calloc((size_t)rt->nranks, sizeof *p->link_lost);
    if (index == 0)
        p->owed = calloc((size_t)rt->nranks * (size_t)rt->npaths, sizeof *p->owed);
    if (p->credits == NULL || p->credit_held == NULL || p->stats == NULL || p->link_lost == NULL
        || (index == 0 && p->owed == NULL))
        return FH_ERR_NO_MEMORY;
    for (int r = 0; r < rt->nranks; r++)
        p->credits[r] = (uint32_t)rt->cfg.am_credits;
    fh_path_attr_t attr = {
        .index = index,
        .rx_msgs = fh_path_rx_msgs(rt, index),
        .rx_per_src = fh_path_rx_per_src(rt, index),
        .upcall_arg = p,
    };
    return rt->cops->path_create(rt->conduit, &attr, &p->cp);
}

int fh_path_make(fh_rt_t *rt)
{
    const int i = atomic_load_explicit(&rt->paths_made, memory_order_relaxed);
    assert(rt->lazy_paths && i > 0 && i < rt->npaths);
    fh_path_t *p = &rt->paths[i], *svc = &rt->paths[0];
    atomic_store_explicit(&rt->path_making, true, memory_order_relaxed);
    int rc = fh_path_setup(rt, p, i);
    /* The peers answer on their service paths, we on ours: poll it (and p,
     * whose completions carry our proofs) between the conduit's steps,
     * holding both locks, as path_connect requires. */
    for (unsigned idle = 0; rc == FH_OK;) {
        pthread_mutex_lock(&svc->lock);
        pthread_mutex_lock(&p->lock);
        fh_path_poll_locked(svc);
        fh_path_poll_locked(p);
        rc = rt->cops->path_connect(p->cp);
        pthread_mutex_unlock(&p->lock);
        pthread_mutex_unlock(&svc->lock);
        if (rc != FH_ERR_AGAIN)
            break;
        rc = FH_OK;
        fh_wait_idle(&idle);
    }
    atomic_store_explicit(&rt->path_making, false, memory_order_relaxed);
    if (rc != FH_OK) {
        char why[200];
        snprintf(why, sizeof why, "%s", fh_last_error());
        pthread_mutex_lock(&svc->lock);    /* path 0's poll reads its events */
        fh_path_teardown(rt, p);
        pthread_mutex_unlock(&svc->lock);
        memset(p, 0, sizeof *p);
        return fh_set_error(rc, "cannot make path %d: %s", i, why);
    }
    fh_log_verbose(2, "path %d made and connected to %d ranks", i, rt->nranks);
    atomic_store_explicit(&rt->paths_made, i + 1, memory_order_release);
    return FH_OK;
}

void fh_path_teardown(fh_rt_t *rt, fh_path_t *p)
{
    if (p->cp != NULL)
        rt->cops->path_destroy(p->cp);
    p->cp = NULL;
    while (p->backlog != NULL) {
        fh_backlog_t *b = p->backlog;
        p->backlog = b->next;
        free(b);
    }
    while (p->held != NULL) {
        fh_backlog_t *b = p->held;
        p->held = b->next;
        free(b);
    }
    if (rt->reg_ops->path_fini != NULL)
        rt->reg_ops->path_fini(&p->base);
    for (int i = 0; i < rt->npollers; i++)
        if (rt->pollers[i]->fini != NULL)
            rt->pollers[i]->fini(p);
    fh_ht_fini(&p->handles);
    free(p->credits);
    free(p->credit_held);
    p->credit_held = NULL;
    free(p->link_lost);
    p->link_lost = NULL;
    free(p->owed);
    free(p->stats);
    p->credits = NULL;
    p->owed = NULL;
    p->stats = NULL;
    pthread_mutex_destroy(&p->lock);
}

void fh_path_on_complete(void *arg, void *op_ctx, int status)
{
    fh_path_t *p = arg;
    if (status != FH_OK && !atomic_load(&p->rt->finalizing))
        fh_log_verbose(1, "RMA operation on path %d failed: %s", p->index,
                       fh_strerror(status));
    assert(p->inflight > 0);
    p->inflight--;
    fh_compl_t *c = op_ctx;
    c->done(c, &p->base, status);
}

/* Completions and packets one conduit poll may deliver (the rest wait for
 * the next poll). */
#define FH_POLL_BATCH 64
/* When every rank is reached through another transport's AMs (node_am.c
 * sets rt->node_all_rings), the conduit carries only what we post
 * ourselves (RMA outside segments) and strangers' connection attempts:
 * while nothing of ours is in flight on a path, its conduit is polled once
 * in this many polls, so a wait does not pay a system call per round. */
#define FH_POLL_IDLE_CONDUIT 64
/* peer.c's check (once a second) looks at the clock in one poll of a path
 * in this many: an idle poll of the node rings costs less than the clock. */
#define FH_POLL_PEER_CHECK 64

static bool conduit_idle(fh_path_t *p)
{
    const fh_rt_t *rt = p->rt;
    if (!rt->node_all_rings || p->inflight != 0 || p->backlog != NULL || p->held != NULL ||
        atomic_load_explicit(&rt->path_making, memory_order_relaxed))
        return false;
    return ++p->quiet_polls % FH_POLL_IDLE_CONDUIT != 0;
}

void fh_progress_add_poller(fh_rt_t *rt, const fh_poller_t *pl)
{
    assert(rt->npollers < FH_MAX_POLLERS);
    int i = rt->npollers++;
    /* Stable insertion by stage: registration order within a stage. */
    for (; i > 0 && rt->pollers[i - 1]->stage > pl->stage; i--)
        rt->pollers[i] = rt->pollers[i - 1];
    rt->pollers[i] = pl;
}

void fh_progress_add_thread(fh_rt_t *rt, void (*fn)(fh_tls_t *t))
{
    assert(rt->nthread_progress < FH_MAX_POLLERS && fn != NULL);
    rt->thread_progress[rt->nthread_progress++] = fn;
}

int fh_path_poll_locked(fh_path_t *p)
{
    if (p->polling)
        return 0; /* a handler's send retried poll: events wait for the outer poll */
    fh_rt_t *rt = p->rt;
    p->polling = 1;
    if (++p->peer_polls % FH_POLL_PEER_CHECK == 0)
        fh_peer_check(rt);
    int n = conduit_idle(p) ? 0 : rt->cops->poll(p->cp, FH_POLL_BATCH);
    if (n < 0 && !atomic_load(&rt->finalizing))
        fh_fatal("polling path %d failed: %s", p->index, fh_strerror(n));
    if (n < 0)
        n = 0;
    int i = 0;
    for (; i < rt->npollers && rt->pollers[i]->stage != FH_POLL_AFTER; i++)
        if (rt->pollers[i]->poll != NULL)
            n += rt->pollers[i]->poll(p, n);
    p->polling = 0;
    for (; i < rt->npollers; i++)
        if (rt->pollers[i]->poll != NULL)
            rt->pollers[i]->poll(p, n);
    if (rt->reg_ops->poll_end != NULL)
        rt->reg_ops->poll_end(&p->base);
    return n;
}

void fh_progress_locked(fh_path_t *p)
{
    fh_path_poll_locked(p);
    fh_path_t *svc = &p->rt->paths[0];
    if (p != svc && pthread_mutex_trylock(&svc->lock) == 0) {
        fh_path_poll_locked(svc);
        pthread_mutex_unlock(&svc->lock);
    }
}

/* A path no thread is bound to any more may still receive what its last
 * thread left in flight: replies, credits, completions.  Whoever makes
 * progress polls it (trylock) until it is idle. */
static bool path_idle_locked(const fh_path_t *p)
{
    const fh_reg_ops_t *reg = p->rt->reg_ops;
    if (p->inflight != 0 || p->handles.live != 0 || p->backlog != NULL || p->held != NULL ||
        (reg->path_busy != NULL && reg->path_busy(&p->base)))
        return false;
    for (int r = 0; r < p->rt->nranks; r++)
        if (p->credits[r] != (uint32_t)p->rt->cfg.am_credits)
            return false;
    return true;
}

void fh_path_orphan(fh_path_t *p)
{
    assert(p->index != 0);
    if (!atomic_exchange(&p->orphaned, 1))
        atomic_fetch_add(&p->rt->norphans, 1);
}

void fh_path_adopt(fh_path_t *p)
{
    if (atomic_exchange(&p->orphaned, 0))
        atomic_fetch_sub(&p->rt->norphans, 1);
}

static void poll_orphans(fh_tls_t *t)
{
    fh_rt_t *rt = fh_rt;
    for (int i = 1; i < fh_paths_made(rt); i++) {
        fh_path_t *p = &rt->paths[i];
        if (p == t->path || !atomic_load_explicit(&p->orphaned, memory_order_relaxed) ||
            pthread_mutex_trylock(&p->lock) != 0)
            continue;
        fh_path_poll_locked(p);
        if (path_idle_locked(p))
            fh_path_adopt(p);     /* nothing more can arrive for it */
        pthread_mutex_unlock(&p->lock);
    }
}

int fh_progress(fh_tls_t *t)
{
    fh_path_t *own = t->path;
    fh_path_t *svc = &fh_rt->paths[0];
    pthread_mutex_lock(&own->lock);
    int n = fh_path_poll_locked(own);
    pthread_mutex_unlock(&own->lock);
    if (own != svc && pthread_mutex_trylock(&svc->lock) == 0) {
        n += fh_path_poll_locked(svc);
        pthread_mutex_unlock(&svc->lock);
    }
    if (atomic_load_explicit(&fh_rt->norphans, memory_order_relaxed) != 0)
        poll_orphans(t);
    /* The registration strategy's queued work leaves from here (firehose:
     * moves, revokes and revoke acks handlers produced; the comparison
     * strategies' operations). */
    if (fh_rt->reg_ops->progress != NULL)
        fh_rt->reg_ops->progress(&t->base);
    for (int i = 0; i < fh_rt->nthread_progress; i++)
        fh_rt->thread_progress[i](t);
    return n;
}

void fh_wait_init(fh_rt_t *rt)
{
    cpu_set_t set;
    int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                             : (int)sysconf(_SC_NPROCESSORS_ONLN);
    rt->oversubscribed = cores > 0 && rt->host_ranks > cores;
    if (getenv("FH_WAIT_SPIN") != NULL || cores <= 0)
        return;
    if (!rt->oversubscribed) {
        /* Every rank of the job here can have a core: a waiting rank keeps
         * its own, polling at full speed for peers that need it (a target
         * of RMA over the network, whose service no event announces), and
         * gives it away only after a long idle wait (docs/caf.md, "Waiting":
         * a 2-image SYNC ALL on a loaded machine 71 us yielding after 1000
         * idle polls, 0.46 us spinning). */
        rt->cfg.wait_spin = FH_WAIT_SPIN_LONG;
        return;
    }
    /* More of our ranks than cores here: a rank that waits is waiting for
     * one that has no core, so it gives its own away at once (measured on
     * 2 cores: a 4-rank barrier 15 -> 3 us, 8 ranks 50 -> 8 us). */
    rt->cfg.wait_spin = 0;
    fh_log_verbose(1, "%d ranks on %d cores here: waits yield at once (FH_WAIT_SPIN=0)",
                   rt->host_ranks, cores);
}

/* The wait policy of every loop that polls until something arrives: call it
 * after each round of progress that found nothing, with *idle counting those
 * rounds (start at 0).  Once more than FH_WAIT_SPIN rounds in a row were idle
 * it gives the core away (sched_yield) -- ranks often outnumber cores --
 * unless FH_WAIT_SPIN is -1.  FH_WAIT_SPIN unset: 0 when the job's ranks on
 * this host outnumber its cores, else FH_WAIT_SPIN_LONG (fh_wait_init).
 * Takes no lock. */
static void fh_wait_idle(unsigned *idle)
{
    long spin = fh_rt->cfg.wait_spin;
    assert(spin >= -1 && spin <= FH_WAIT_SPIN_MAX);   /* config.c checked it */
    if (*idle < UINT_MAX)
        ++*idle;
    if (spin >= 0 && *idle > (unsigned long)spin)
        sched_yield();
}

/* Idle rounds of a wait before it starts polling the other paths of the
 * rank (every 8th round after that): few waits last that long, and a
 * thread that still calls in polls its own path anyway. */
#define WAIT_HELP_AFTER 32

/* Trylock-polls every path but the caller's and the service path (which
 * fh_progress polled): completions, replies and ready chunks another
 * thread left there -- one that stopped calling the runtime, or exited --
 * are handled by us; returns how many.  No lock held. */
static int help_paths(fh_tls_t *t)
{
    fh_rt_t *rt = fh_rt;
    int n = 0;
    for (int i = 1; i < fh_paths_made(rt); i++) {
        fh_path_t *p = &rt->paths[i];
        if (p == t->path || pthread_mutex_trylock(&p->lock) != 0)
            continue;
        n += fh_path_poll_locked(p);
        pthread_mutex_unlock(&p->lock);
    }
    return n;
}

/* Sleeping on the network.  A rank whose every peer is reached through
 * the conduit (no shared rings: node_am.c's futex sleep serves those) and
 * whose conduit gives file descriptors (wait_fds) sleeps in poll(2) on
 * those of its own path and of the service path, for at most
 * FH_NET_SLEEP_MS, once a wait has been idle, past its spinning
 * (FH_WAIT_SPIN rounds) and FH_NET_SLEEP_AFTER yielding rounds, for
 * FH_NET_SLEEP_IDLE seconds, and while nothing of its own is in flight (a
 * transfer the provider progresses only when called must not wait for a
 * timeout).  Between two sleeps it polls FH_NET_SLEEP_EVERY rounds.  The
 * conduit checks for pending events (fi_trywait) under the path's lock,
 * and most that come later make an fd readable -- but not all: over
 * libfabric 1.17's tcp, a put into a sleeping target completed after the
 * 1 ms timeout in about 1 of 100 (p99 0.5-1 ms, measured with FH_WAIT_SPIN=0
 * and sleeping after 1024 rounds).  Hence the idle time before the first
 * sleep: a wait that has found nothing for 10 ms may pay at most 1 ms on
 * what ends it; a rank that waits for seconds gives its core away instead
 * of yielding in a loop (tests/integ/idle_sleep.sh). */
#define FH_NET_SLEEP_AFTER 1024
#define FH_NET_SLEEP_IDLE 0.010
#define FH_NET_SLEEP_EVERY 16
#define FH_NET_SLEEP_MS 1

/* Nothing of ours in flight or waiting to leave on p (lock held). */
static bool nothing_queued(const fh_path_t *p)
{
    return p->inflight == 0 && p->backlog == NULL && p->held == NULL && !p->polling;
}

static bool net_sleep(fh_tls_t *t, unsigned idle)
{
    fh_rt_t *rt = fh_rt;
    fh_path_t *own = t->path, *svc = &rt->paths[0];
    const unsigned long after = FH_NET_SLEEP_AFTER + (unsigned long)rt->cfg.wait_spin;
    if (rt->cfg.wait_spin < 0 || idle < after) {
        t->idle_since = 0;
        return false;
    }
    if ((idle - after) % FH_NET_SLEEP_EVERY != 0)
        return false;
    double now = fh_now();
    if (t->idle_since == 0 || idle == after)
        t->idle_since = now;
    if (now - t->idle_since < FH_NET_SLEEP_IDLE)
        return false;
    struct pollfd pfd[4];
    int fds[4], n = 0;
    pthread_mutex_lock(&own->lock);
    if (nothing_queued(own))
        n = rt->cops->wait_fds(own->cp, fds, 2);
    pthread_mutex_unlock(&own->lock);
    if (n > 0 && own != svc && pthread_mutex_trylock(&svc->lock) == 0) {
        int m = nothing_queued(svc) ? rt->cops->wait_fds(svc->cp, fds + n, 2) : -1;
        pthread_mutex_unlock(&svc->lock);
        n = m < 0 ? -1 : n + m;
    }
    if (n <= 0)
        return false;
    for (int i = 0; i < n; i++)
        pfd[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    (void)poll(pfd, (nfds_t)n, FH_NET_SLEEP_MS);
    return true;
}

void fh_net_sleep_init(fh_rt_t *rt)
{
    if (rt->idle_sleep != NULL || rt->cops->wait_fds == NULL)
        return;
    for (int r = 0; rt->node_inbox != NULL && r < rt->nranks; r++)
        if (r != rt->rank && rt->node_inbox[r] != NULL)
            return;      /* some through rings: no fd announces their AMs */
    rt->idle_sleep = net_sleep;
}

static void wait_round(fh_tls_t *t, unsigned *idle, bool may_sleep)
{
    /* A long-idle wait may sleep first (rt->idle_sleep, registered by a
     * transport that knows when something arrives: node_am.c's futex), and
     * then polls: what the caller waits for is checked right after what
     * woke us ran. */
    bool slept = may_sleep && fh_rt->idle_sleep != NULL && fh_rt->idle_sleep(t, *idle);
    int n = fh_progress(t);
    fh_coll_resend_lost(t);
    if (*idle > WAIT_HELP_AFTER && *idle % 8 == 0)
        n += help_paths(t);
    if (n > 0)
        *idle = 0;      /* peers are being served: keep the core, poll again */
    else if (!slept)
        fh_wait_idle(idle);
    else if (*idle < UINT_MAX)
        ++*idle;
}

void fh_wait_round(fh_tls_t *t, unsigned *idle)
{
    wait_round(t, idle, true);
}

void fh_wait_round_awake(fh_tls_t *t, unsigned *idle)
{
    wait_round(t, idle, false);
}

void fh_wait_rank_sent(fh_tls_t *t)
{
    fh_rt_t *rt = fh_rt;
    const fh_reg_ops_t *reg = rt->reg_ops;
    for (unsigned idle = 0;;) {
        /* Threads that exited at the closed gate: their strategy work
         * moves on only from their own progress (rendezvous, bounce). */
        fh_tls_progress_exited(rt);
        bool busy = false;
        for (int i = 0; i < fh_paths_made(rt) && !busy; i++) {
            fh_path_t *p = &rt->paths[i];
            pthread_mutex_lock(&p->lock);
            fh_path_poll_locked(p);
            busy = p->inflight != 0 || p->backlog != NULL || p->held != NULL ||
                   (reg->path_busy != NULL && reg->path_busy(&p->base));
            pthread_mutex_unlock(&p->lock);
        }
        if (!busy)
            return;
        fh_wait_round(t, &idle);
    }
}

/* A spinning wait makes only every WAIT_FULL_EVERY-th round a full one
 * (fh_wait_round: the service path, the strategy's and the threads'
 * progress); the others poll the caller's own path, where the completion
 * it waits for arrives.  An 8 B put over net, paired with raw libfabric:
 * 1.08 -> 1.05 (docs/performance.md, "Findings at 871a041"). */
#define WAIT_FULL_EVERY 4

int fh_wait_ctr(fh_tls_t *t, fh_ctr_t *ctr)
{
    fh_path_t *own = t->path;
    const long spin = fh_rt->cfg.wait_spin;
    for (unsigned idle = 0, round = 1;; round++) {
        /* The previous round's polls may have completed it: checked first. */
        pthread_mutex_lock(&own->lock);
        int n = 0;
        if (ctr->pending != 0)
            n = fh_path_poll_locked(own);
        int done = ctr->pending == 0;
        int status = ctr->status;
        pthread_mutex_unlock(&own->lock);
        if (done)
            return status;
        /* Own-path rounds only while spinning: a wait that yields (ranks
         * outnumber cores, FH_WAIT_SPIN=0, or a long wait) serves its peers
         * in every round it keeps the core for. */
        if (round % WAIT_FULL_EVERY != 0 && (spin < 0 || idle < (unsigned long)spin)) {
            if (n > 0)
                idle = 0;
            else if (idle < UINT_MAX)
                idle++;
            continue;
        }
        fh_wait_round(t, &idle);
    }
}

int fh_poll_idle(unsigned *idle)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_poll_idle", &rc);
    if (t == NULL)
        return rc;
    if (idle == NULL)
        return fh_set_error(FH_ERR_INVALID, "fh_poll_idle: NULL idle");
    fh_wait_round_awake(t, idle);
    return FH_OK;
}

int fh_poll(void)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_poll", &rc);
    if (t == NULL)
        return rc;
    fh_progress(t);
    fh_coll_resend_lost(t);
    return FH_OK;
}
