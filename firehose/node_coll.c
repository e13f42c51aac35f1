/*
 * node_coll.c -- the barrier's shared-memory stage: the ranks of a node
 * group meet in memory they all map, and only the group's leader takes
 * part in the network stage (coll.c: the dissemination barrier of AMs,
 * among the leaders only).  In a job whose ranks are all in one group no
 * AM is sent at all.
 *
 * Groups.  A node group of two or more ranks in which every member reaches
 * every other one's inbox (node_am.c) meets in the barrier area at the end
 * of the inbox of its first member, its leader.  Every other rank -- under
 * FH_SHM=off, alone on its host, or in a group where an inbox could not be
 * attached -- is a group of its own and leads it.  fh_node_coll_init
 * decides that from one allgather (each rank: its group's first member,
 * and whether it reached every member), so every rank computes the same
 * leaders; rt->bar_leader lists them in rank order for coll.c.
 *
 * One group that is the whole job, each rank with a CPU of its own
 * (!rt->oversubscribed; FH_NODE_BARRIER chooses): a dissemination in shared
 * memory.  In round k of
 * ceil(log2 G), member i writes the signature range it knows (lo, hi) and
 * the OR of the bits it knows (fh_barrier_or), and then the epoch (sequentially consistent: a release, and before the look
 * for sleepers) into its flag for round k, wakes member i + 2^k, waits
 * until member i - 2^k's flag of round k shows the epoch (acquire) and
 * folds that range into its own.  Each round is one line written and one
 * read, so 2 ranks meet in one cache-line transfer each way, in parallel
 * (0.21 us against 0.42 us for the count below, on 2 cores).  A flag is
 * kept per epoch parity: member i can write epoch e + 2 only after every
 * member entered e + 1, so after its reader has read epoch e's.  Release
 * and acquire chain through the rounds, and every member hears from every
 * other one, so every member sees the others' writes from before the
 * barrier, and the exact range (min and max are idempotent).  With more
 * ranks than CPUs the count below is faster (fewer hand-offs between
 * ranks waiting for a core: 8 ranks on 2 cores, 8.5-14 us against 14-28).
 *
 * The area: `arrived` counts the arrivals of every barrier so far (epoch e,
 * counted from 1 by coll.c, is complete when it reaches e * G for G
 * members); `released` is the last epoch the group left, with the
 * signature range (lo, hi), the OR of the bits (fh_barrier_or) and the
 * status it left with; then one line per member for the signature and
 * bits it brought.  One barrier, epoch e:
 *   arrive   a member stores its signature and bits in its line (relaxed),
 *            then increments `arrived` (fetch_add, sequentially consistent).
 *   one group is the whole job, oversubscribed: the member whose
 *            increment completes e * G combines the lines (min, max, OR),
 *            stores lo, hi, or, status (relaxed), then `released` = e (a
 *            sequentially consistent store, a release among other things),
 *            and wakes the others, which wait until `released` >= e
 *            (acquire) and read the range.
 *   several groups: the leader waits until `arrived` >= e * G (acquire),
 *            combines the lines and returns the group's range to coll.c;
 *            coll.c runs the network stage and calls fh_node_coll_release
 *            with the job's range (or the stage's error), stored and
 *            released as above.  The member completing the count wakes the
 *            leader.
 * Memory order.  The arrivals are release RMWs on one word (sequentially
 * consistent, which includes release and acquire), so they form one
 * release sequence: whoever acquires the final count (the last arriver's
 * own RMW, or the leader's acquire load) sees everything each member wrote
 * before it arrived -- its signature line, and the puts to group peers it
 * completed before the barrier (plain stores through the shared mapping,
 * fh_node_copy; the arrival RMW orders them, whatever fence the copy has).
 * The store of `released`, acquired by every member, passes all of
 * it on, together with what the leader learned through the network stage
 * (the AM handler's release increment, acquired by the leader's wait, as
 * before).  So puts completed before fh_barrier are visible after it on
 * every path.  The atomics are lock-free (asserted below), hence valid
 * between processes.
 *
 * Waiting is fh_wait_round (path.c): a waiting rank keeps serving its AMs
 * and conduit, yields the core after FH_WAIT_SPIN idle rounds and, when
 * every rank of the job is in its group, sleeps on its inbox's futex after
 * a long idle wait (node_am.c's idle sleep).  Whoever completes what a
 * rank waits for wakes it through its inbox (fh_node_wake).  No wakeup is
 * lost: the waiter counts itself a sleeper and reads the futex word, then
 * asks fh_node_coll_due whether its barrier's word has come, and sleeps
 * only if not; the waker stores the word, then looks for sleepers and, if
 * any, bumps the futex word and wakes them.  Both sides' store and load are
 * sequentially consistent (hence the arrival RMW and the `released` store
 * are), so either the waiter sees the word or the waker sees the sleeper
 * (node_am.c's argument, with one more thing checked).  A member that
 * dies leaves the others waiting; peer.c's check, run by every poll of
 * fh_wait_round, ends them naming it.
 *
 * A member can write anything into the area, as into its rings
 * (docs/security.md): nothing read from it is used as an index or a size,
 * only compared; a hostile member can break the barrier, as it can any
 * AM it sends.
 */
#include <assert.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

_Static_assert(ATOMIC_LONG_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
               "the shared barrier needs lock-free 64-bit atomics");

typedef struct bar_head {
    alignas(64) _Atomic uint64_t arrived;   /* arrivals since init */
    alignas(64) _Atomic uint64_t released;  /* the last epoch left */
    _Atomic uint64_t lo, hi;                /* ... its signature range */
    _Atomic uint64_t or;                    /* ... the OR of the bits */
    _Atomic int64_t status;                 /* ... FH_OK or the stage's error */
} bar_head_t;

typedef struct bar_line {
    alignas(64) _Atomic uint64_t sig;       /* a member's, this epoch */
    _Atomic uint64_t or;                    /* ... and its bits */
} bar_line_t;

/* A whole-job group's dissemination flag: member i's for round k and
 * epoch parity p, read by member i + 2^k alone. */
typedef struct bar_flag {
    alignas(64) _Atomic uint64_t epoch;     /* the last epoch written */
    _Atomic uint64_t lo, hi;                /* ... the range i knew then */
    _Atomic uint64_t or;                    /* ... and the bits */
} bar_flag_t;

/* Rounds of a dissemination among g members: ceil(log2 g). */
static int bar_rounds(int g)
{
    int r = 0;
    while ((1L << r) < g)
        r++;
    return r;
}

struct fh_node_coll {
    bar_head_t *head;         /* NULL: a group of one */
    bar_line_t *lines;        /* [G] */
    bar_flag_t *flags;        /* [G][R][2] */
    int G, me, R;             /* members; our index (rt->node_gidx); rounds */
    bool whole_job;           /* the group is every rank: no network stage */
    bool flags_on;            /* whole_job, and a core per rank: disseminate */
    /* What this rank's barrier waits for now: *wait_word >= wait_for
     * (NULL: nothing), for fh_node_coll_due. */
    _Atomic(_Atomic uint64_t *) wait_word;
    _Atomic uint64_t wait_for;
};

size_t fh_node_coll_bytes(const fh_rt_t *rt)
{
    const size_t g = (size_t)rt->node_size;
    return sizeof(bar_head_t) + g * sizeof(bar_line_t) +
           g * (size_t)bar_rounds(rt->node_size) * 2 * sizeof(bar_flag_t);
}

struct coll_wire {
    int32_t first;            /* our group's first member */
    int32_t reached;          /* we mapped every member's inbox, ours too */
};

int fh_node_coll_init(fh_rt_t *rt)
{
    const int N = rt->nranks;
    struct fh_node_coll *nc = calloc(1, sizeof *nc);
    rt->node_coll = nc;
    rt->bar_leader = malloc(sizeof *rt->bar_leader * (size_t)N);
    rt->bar_lidx = malloc(sizeof *rt->bar_lidx * (size_t)N);
    struct coll_wire mine = {rt->node_members[0], rt->node_size >= 2},
                     *all = calloc((size_t)N, sizeof *all);
    uint8_t *split = calloc((size_t)N, 1);
    if (nc == NULL || rt->bar_leader == NULL || rt->bar_lidx == NULL || all == NULL ||
        split == NULL) {
        free(all);
        free(split);
        return FH_ERR_NO_MEMORY;
    }
    for (int i = 0; i < rt->node_size; i++)
        if (rt->node_inbox[rt->node_members[i]] == NULL)
            mine.reached = 0;
    if (rt->boot->ops->allgather(rt->boot, &mine, all, sizeof mine) != FH_OK) {
        free(all);
        free(split);
        return fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: the node barrier exchange failed");
    }
    /* A group meets in shared memory when every member reached every
     * member (split[first]: one did not); a rank of any other group leads
     * itself. */
    for (int r = 0; r < N; r++) {
        if (all[r].first < 0 || all[r].first >= N)
            all[r].first = r;
        if (!all[r].reached)
            split[all[r].first] = 1;
    }
    const bool shared = !split[mine.first];
    rt->bar_nleaders = 0;
    for (int r = 0; r < N; r++) {
        const int leader = split[all[r].first] ? r : all[r].first;
        rt->bar_lidx[r] = leader == r ? rt->bar_nleaders : -1;
        if (leader == r)
            rt->bar_leader[rt->bar_nleaders++] = r;
    }
    free(all);
    free(split);
    if (shared) {
        char *area = fh_node_bar_area(rt, mine.first);
        assert(((uintptr_t)area & 63) == 0 && rt->node_size >= 2);
        nc->head = (bar_head_t *)(void *)area;
        nc->lines = (bar_line_t *)(void *)(area + sizeof(bar_head_t));
        nc->G = rt->node_size;
        nc->me = rt->node_gidx[rt->rank];
        nc->R = bar_rounds(nc->G);
        nc->flags = (bar_flag_t *)(void *)(area + sizeof(bar_head_t) +
                                           (size_t)nc->G * sizeof(bar_line_t));
        nc->whole_job = rt->node_size == N;
        const int how = rt->cfg.node_barrier;
        nc->flags_on = nc->whole_job && (how == FH_NODE_BARRIER_DISSEMINATION ||
                                         (how == FH_NODE_BARRIER_AUTO && !rt->oversubscribed));
    }
    fh_log_verbose(2, "node barrier: %s%s; %d rank(s) in the network stage",
                   !shared ? "no shared-memory stage (a group of one)"
                   : rt->rank == mine.first ? "shared memory, this rank leads the group"
                                            : "shared memory",
                   nc->flags_on ? " (dissemination)" : "", rt->bar_nleaders);
    return FH_OK;
}

void fh_node_coll_fini(fh_rt_t *rt)
{
    free(rt->node_coll);
    free(rt->bar_leader);
    free(rt->bar_lidx);
    rt->node_coll = NULL;
    rt->bar_leader = NULL;
    rt->bar_lidx = NULL;
}

bool fh_node_coll_due(const fh_rt_t *rt)
{
    struct fh_node_coll *nc = rt->node_coll;
    _Atomic uint64_t *w = nc != NULL ? atomic_load_explicit(&nc->wait_word,
                                                            memory_order_relaxed) : NULL;
    return w != NULL &&
           atomic_load(w) >= atomic_load_explicit(&nc->wait_for, memory_order_relaxed);
}

/* Whether *w >= v (acquire).  When not, records it as what this rank's
 * barrier waits for (fh_node_coll_due) until it holds. */
static bool reached(struct fh_node_coll *nc, _Atomic uint64_t *w, uint64_t v)
{
    if (atomic_load_explicit(w, memory_order_acquire) >= v) {
        atomic_store_explicit(&nc->wait_word, NULL, memory_order_relaxed);
        return true;
    }
    atomic_store_explicit(&nc->wait_for, v, memory_order_relaxed);
    atomic_store_explicit(&nc->wait_word, w, memory_order_relaxed);
    return false;
}

/* The members' signature range and OR (after the final count was acquired). */
static void combine(const struct fh_node_coll *nc, uint64_t *lo, uint64_t *hi,
                    uint64_t *or)
{
    for (int i = 0; i < nc->G; i++) {
        uint64_t s = atomic_load_explicit(&nc->lines[i].sig, memory_order_relaxed);
        *lo = s < *lo ? s : *lo;
        *hi = s > *hi ? s : *hi;
        *or |= atomic_load_explicit(&nc->lines[i].or, memory_order_relaxed);
    }
}

/* Publishes epoch's outcome and wakes every other member. */
static void release(fh_tls_t *t, struct fh_node_coll *nc, uint64_t epoch, uint64_t lo,
                    uint64_t hi, uint64_t or, int status)
{
    fh_rt_t *rt = t->path->rt;
    bar_head_t *h = nc->head;
    atomic_store_explicit(&h->lo, lo, memory_order_relaxed);
    atomic_store_explicit(&h->hi, hi, memory_order_relaxed);
    atomic_store_explicit(&h->or, or, memory_order_relaxed);
    atomic_store_explicit(&h->status, status, memory_order_relaxed);
    atomic_store(&h->released, epoch);   /* seq_cst: before fh_node_wake's look */
    for (int i = 0; i < nc->G; i++)
        if (i != nc->me)
            fh_node_wake(rt, rt->node_members[i]);
}

static bar_flag_t *flag(const struct fh_node_coll *nc, int member, int round,
                       uint64_t epoch)
{
    return &nc->flags[((size_t)member * (size_t)nc->R + (size_t)round) * 2 + (epoch & 1)];
}

/* The whole job in one group: a dissemination among the members (see the
 * top), each round one flag written and one read. */
static bool disseminate(fh_tls_t *t, struct fh_node_coll *nc, fh_bar_run_t *b)
{
    fh_rt_t *rt = t->path->rt;
    for (; b->k < nc->R; b->k++, b->sent = false) {
        const int d = 1 << b->k;
        bar_flag_t *mine = flag(nc, nc->me, b->k, b->epoch);
        bar_flag_t *from = flag(nc, (nc->me - d % nc->G + nc->G) % nc->G, b->k, b->epoch);
        if (!b->sent) {
            atomic_store_explicit(&mine->lo, b->lo, memory_order_relaxed);
            atomic_store_explicit(&mine->hi, b->hi, memory_order_relaxed);
            atomic_store_explicit(&mine->or, b->or, memory_order_relaxed);
            atomic_store(&mine->epoch, b->epoch);   /* seq_cst: before fh_node_wake's look */
            fh_node_wake(rt, rt->node_members[(nc->me + d) % nc->G]);
            b->sent = true;
        }
        if (!reached(nc, &from->epoch, b->epoch))
            return false;
        const uint64_t l = atomic_load_explicit(&from->lo, memory_order_relaxed),
                       h = atomic_load_explicit(&from->hi, memory_order_relaxed);
        b->lo = l < b->lo ? l : b->lo;
        b->hi = h > b->hi ? h : b->hi;
        b->or |= atomic_load_explicit(&from->or, memory_order_relaxed);
    }
    return true;
}

int fh_node_coll_step(fh_tls_t *t, fh_bar_run_t *b)
{
    fh_rt_t *rt = t->path->rt;
    struct fh_node_coll *nc = rt->node_coll;
    bar_head_t *h = nc->head;
    const int leader = rt->node_members[0];
    switch (b->node) {
    case FH_NODE_BAR_START:
        b->lead = h == NULL;
        if (b->lead)
            return FH_OK;             /* a group of one */
        assert(b->lo == b->hi);
        b->k = 0;
        b->sent = false;
        if (nc->whole_job && nc->flags_on) {
            b->node = FH_NODE_BAR_DISSEMINATE;
            return disseminate(t, nc, b) ? FH_OK : FH_ERR_AGAIN;
        }
        atomic_store_explicit(&nc->lines[nc->me].sig, b->lo, memory_order_relaxed);
        atomic_store_explicit(&nc->lines[nc->me].or, b->or, memory_order_relaxed);
        const uint64_t all = b->epoch * (uint64_t)nc->G;
        uint64_t before = atomic_fetch_add(&h->arrived, 1);   /* seq_cst, see the top */
        assert(before < all);
        if (nc->whole_job && before + 1 == all) {
            combine(nc, &b->lo, &b->hi, &b->or);   /* the last one in lets everyone out */
            release(t, nc, b->epoch, b->lo, b->hi, b->or, FH_OK);
            return FH_OK;
        }
        if (!nc->whole_job && rt->rank == leader) {
            b->node = FH_NODE_BAR_GATHER;
            return fh_node_coll_step(t, b);
        }
        if (!nc->whole_job && before + 1 == all)
            fh_node_wake(rt, leader); /* the leader may sleep on its count */
        b->node = FH_NODE_BAR_RELEASED;
        return fh_node_coll_step(t, b);
    case FH_NODE_BAR_DISSEMINATE:
        return disseminate(t, nc, b) ? FH_OK : FH_ERR_AGAIN;
    case FH_NODE_BAR_GATHER:
        if (!reached(nc, &h->arrived, b->epoch * (uint64_t)nc->G))
            return FH_ERR_AGAIN;
        combine(nc, &b->lo, &b->hi, &b->or);
        b->lead = true;
        return FH_OK;
    case FH_NODE_BAR_RELEASED:
        break;
    }
    if (!reached(nc, &h->released, b->epoch))
        return FH_ERR_AGAIN;
    b->lo = atomic_load_explicit(&h->lo, memory_order_relaxed);
    b->hi = atomic_load_explicit(&h->hi, memory_order_relaxed);
    b->or = atomic_load_explicit(&h->or, memory_order_relaxed);
    int status = (int)atomic_load_explicit(&h->status, memory_order_relaxed);
    if (status != FH_OK)
        return fh_set_error(status, "the barrier's network stage failed on %s, "
                            "which leads our node group (%s)", FH_RANK_NAME(leader),
                            fh_strerror(status));
    return FH_OK;
}

void fh_node_coll_release(fh_tls_t *t, uint64_t epoch, uint64_t lo, uint64_t hi,
                          uint64_t or, int status)
{
    struct fh_node_coll *nc = t->path->rt->node_coll;
    if (nc->head != NULL)
        release(t, nc, epoch, lo, hi, or, status);
}
