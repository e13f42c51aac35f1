/*
 * route.c -- how each destination rank is reached, chosen once per rank at
 * init (rt->route[rank]): the public put/get/strided/atomic calls and long
 * AMs validate, look the remote range up, and call the rank's route.
 *
 *   self  our own memory: memmove, CPU atomics; complete at once.
 *   node  a rank of our node group (peer.c, FH_SHM): loads and stores
 *         through our mapping of its segment piece (the range's `local`,
 *         segment.c); complete at once, no registration, no cache lookup,
 *         no lock, no system call.  A range without a mapping (memory
 *         outside segments under FH_SEGMENT=everything) is one kernel copy
 *         (cross-memory attach, below) when the kernel allows it, else
 *         the net route.
 *   net   the conduit: the registration strategy (fh_xfer) and AMs
 *         (rma.c, atomic.c, am.c).  The only route that reaches the
 *         strategy, so the firehose cache sees network peers only.
 *
 * Visibility on the node route.  A put's copy is followed by a release
 * fence and a get's preceded by an acquire fence, so a put is visible to
 * any thread of the group that synchronizes with us afterwards (a
 * barrier's release/acquire, an atomic, a flag read with acquire), and a
 * get sees what its owner released before.  fh_quiet and fh_wait have
 * nothing to wait for: the copies completed in the call.  Atomics are the
 * same sequentially consistent instructions the owner uses for network
 * atomics on the location (atomic.c), so every path's atomics on it are
 * mutually atomic.
 *
 * Cross-memory attach (FH_SHM_CMA, firehose/node/node_cma.c).  With
 * FH_SEGMENT=everything a member's memory outside its pieces is reached by
 * process_vm_writev/readv: one copy by the kernel, synchronous like the
 * loads and stores.  Chosen per member at init: under Yama's relational
 * scope every rank first declares its parent (the launcher, when all the
 * group's ranks share it) as its ptracer, so that exactly the launcher's
 * descendants may attach; then, after an exchange that orders every
 * declaration before every probe, each rank reads a known word of each
 * member.  A member whose probe fails, or whose kernel refuses later
 * (the launcher died, say), is reached through the network.  With Yama
 * scope 2 or 3 nothing is tried.  A put into a range that is only partly
 * mapped at the target fails, having written the bytes before the first
 * unmapped page (include/firehose.h, FH_SEGMENT=everything).
 *
 * The caller's own buffer.  Before a copy of either route, the local
 * buffer (a put's source, a get's destination, a long AM's payload) is
 * checked as the net route checks it (fh_lc_check, inline in reg/reg.h:
 * the same per-thread entries, in t; a hit is two loads and at most four
 * entries' compares, no call): an unmapped or protected buffer is FH_ERR_INVALID naming
 * the address, nothing copied, instead of a fault in memcpy.
 *
 * Progress.  Copies need no progress, but a thread that spins on a peer's
 * memory or its own (a flag, a lock) must still answer its peers'
 * messages: every FH_NODE_PROGRESS-th node or self operation of a thread
 * makes progress.  (Until session 26 every self operation did: over the
 * network that was two epoll_wait calls, ~600 ns, on each 8 B put to
 * oneself, which a coarray program makes for every access to its own
 * image.)
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define FH_NODE_PROGRESS 64

/* ThreadSanitizer does not model standalone fences (gcc refuses them
 * under -fsanitize=thread); what it checks, the synchronizing operations
 * around the copies, are atomics of their own. */
#if defined(__SANITIZE_THREAD__)
#define NODE_FENCE(order) ((void)0)
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NODE_FENCE(order) ((void)0)
#endif
#endif
#ifndef NODE_FENCE
#define NODE_FENCE(order) atomic_thread_fence(order)
#endif

/* The caller's buffer [local, +n) of a transfer to rank (remote: for the
 * error text): see the top. */
static inline int local_ok(fh_tls_t *t, bool is_put, int rank, const char *local, size_t n,
                           const void *remote)
{
    return fh_lc_check(&t->base, is_put, rank, local, n, (uint64_t)(uintptr_t)remote);
}

int fh_rma_local_ok_strided(fh_tls_t *t, const fh_rma_req_t *q)
{
    for (size_t i = 0; i < q->count; i++) {
        int rc = local_ok(t, q->is_put, q->rank, q->local + (ptrdiff_t)i * q->lstride, q->n,
                          q->remote + (ptrdiff_t)i * q->rstride);
        if (rc != FH_OK)
            return rc;
    }
    return FH_OK;
}

/* Every FH_NODE_PROGRESS-th copy of a thread makes progress ("Progress"). */
static inline void node_progress(fh_tls_t *t)
{
    if (++t->node_ops % FH_NODE_PROGRESS == 0)
        fh_progress(t);
}

/* ------------------------------------------------------------------ self */

static void copy_self(bool is_put, char *mine, char *theirs, size_t n)
{
    if (is_put)
        memmove(theirs, mine, n);
    else
        memmove(mine, theirs, n);
}

static int self_rma(fh_tls_t *t, const fh_rma_req_t *q)
{
    int rc = local_ok(t, q->is_put, q->rank, q->local, q->n, q->remote);
    if (rc != FH_OK)
        return rc;
    copy_self(q->is_put, q->local, q->remote, q->n);
    /* Still a call into the runtime: peers waiting on us progress even if
     * this thread only ever talks to itself. */
    node_progress(t);
    return FH_OK;
}

static int self_strided(fh_tls_t *t, const fh_rma_req_t *q)
{
    int rc = fh_rma_local_ok_strided(t, q);
    if (rc != FH_OK)
        return rc;
    for (size_t i = 0; i < q->count; i++)
        copy_self(q->is_put, q->local + (ptrdiff_t)i * q->lstride,
                  q->remote + (ptrdiff_t)i * q->rstride, q->n);
    node_progress(t);
    return FH_OK;
}

static int self_atomic(fh_tls_t *t, const fh_atomic_req_t *q)
{
    fh_atomic_local(q->target, q);
    node_progress(t);   /* a spin on a local lock must let peers in */
    return FH_OK;
}

/* am.c runs a long AM to ourselves in place before asking a route; this
 * is the same copy. */
static int self_am_payload(fh_tls_t *t, int rank, const void *payload, size_t len,
                           uint64_t dst, const fh_seg_range_t *r)
{
    (void)t, (void)r;
    int rc = local_ok(t, true, rank, payload, len, (void *)(uintptr_t)dst);
    if (rc != FH_OK)
        return rc;
    memmove((void *)(uintptr_t)dst, payload, len);
    return FH_OK;
}

const fh_route_t fh_route_self = {"self", self_rma, self_strided, self_atomic,
                                  self_am_payload};

/* ------------------------------------------------------------------ node */

static inline void node_copy(bool is_put, char *mine, char *theirs, size_t n)
{
    if (is_put) {
        memcpy(theirs, mine, n);
        NODE_FENCE(memory_order_release);
    } else {
        NODE_FENCE(memory_order_acquire);
        memcpy(mine, theirs, n);
    }
}


/* The per-peer put/get counters: taken without the path lock, so atomic
 * adds (the path may be shared by threads). */
static void node_stat(fh_tls_t *t, int rank, bool is_put, size_t n)
{
    fh_peer_stats_t *s = &t->path->stats[rank];
    __atomic_fetch_add(is_put ? &s->puts : &s->gets, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(is_put ? &s->put_bytes : &s->get_bytes, n, __ATOMIC_RELAXED);
}

/* A failed cross-memory copy to member q->rank: FH_ERR_AGAIN when the
 * kernel refused (the member is then reached through the network from now
 * on: the caller retries there), else the error, named. */
static int cma_failed(const fh_rma_req_t *q, int rc)
{
    if (rc == FH_ERR_NOT_SUPPORTED) {
        int64_t pid = atomic_exchange(&fh_rt->cma_pid[q->rank], 0);
        if (pid != 0)
            fh_log_verbose(1, "cross-memory attach to %s: %s; the network from now on",
                           FH_RANK_NAME(q->rank), fh_last_error());
        return FH_ERR_AGAIN;
    }
    return fh_set_error(rc, "%s: %s of [%p, +%zu) at %s: %s", q->fn,
                        q->is_put ? "put" : "get", (void *)q->remote, q->n * q->count,
                        FH_RANK_NAME(q->rank), fh_last_error());
}

/* Memory of the member that is not in a shared piece. */
static int node_unmapped(fh_tls_t *t, const fh_rma_req_t *q, bool strided)
{
    int64_t pid = atomic_load_explicit(&fh_rt->cma_pid[q->rank], memory_order_relaxed);
    if (pid > 0) {
        /* The kernel's copy would say EFAULT for either side: ours first. */
        int rc = strided ? fh_rma_local_ok_strided(t, q)
                         : local_ok(t, q->is_put, q->rank, q->local, q->n, q->remote);
        if (rc != FH_OK)
            return rc;
        rc = strided ? fh_node_cma_strided(pid, q->is_put, q->local, q->lstride,
                                               (uint64_t)(uintptr_t)q->remote, q->rstride,
                                               q->n, q->count)
                         : fh_node_cma_copy(pid, q->is_put, q->local,
                                            (uint64_t)(uintptr_t)q->remote, q->n);
        if (rc == FH_OK) {
            node_stat(t, q->rank, q->is_put, q->n * q->count);
            node_progress(t);
            return FH_OK;
        }
        if ((rc = cma_failed(q, rc)) != FH_ERR_AGAIN)
            return rc;
    }
    return strided ? fh_strided_net(t, q) : fh_rma_net(t, q);
}

static int node_rma(fh_tls_t *t, const fh_rma_req_t *q)
{
    char *mapped = fh_node_addr(&q->r, q->remote);
    if (mapped == NULL)
        return node_unmapped(t, q, false);
    int rc = local_ok(t, q->is_put, q->rank, q->local, q->n, q->remote);
    if (__builtin_expect(rc != FH_OK, 0))
        return rc;             /* NB: no handle, *h is FH_HANDLE_DONE */
    node_copy(q->is_put, q->local, mapped, q->n);
    node_stat(t, q->rank, q->is_put, q->n);
    node_progress(t);
    return FH_OK;              /* NB: complete, *h is FH_HANDLE_DONE */
}

static int node_strided(fh_tls_t *t, const fh_rma_req_t *q)
{
    if (q->r.local == NULL)
        return node_unmapped(t, q, true);
    int rc = fh_rma_local_ok_strided(t, q);
    if (rc != FH_OK)
        return rc;
    for (size_t i = 0; i < q->count; i++)
        node_copy(q->is_put, q->local + (ptrdiff_t)i * q->lstride,
                  fh_node_addr(&q->r, q->remote + (ptrdiff_t)i * q->rstride), q->n);
    node_stat(t, q->rank, q->is_put, q->n * q->count);
    node_progress(t);
    return FH_OK;
}

static int node_atomic(fh_tls_t *t, const fh_atomic_req_t *q)
{
    char *mapped = fh_node_addr(&q->r, q->target);
    if (mapped == NULL)
        return fh_atomic_net(t, q);
    fh_atomic_local(mapped, q);
    /* Counted like a completed network atomic (atomic.c), without the
     * path lock: an atomic add. */
    __atomic_fetch_add(&t->path->stats[q->rank].atomics, 1, __ATOMIC_RELAXED);
    node_progress(t);
    return FH_OK;
}

/* Visible at once: the header that follows (through the rings or the
 * conduit) is released after the copy. */
static int node_am_payload(fh_tls_t *t, int rank, const void *payload, size_t len,
                           uint64_t dst, const fh_seg_range_t *r)
{
    char *mapped = fh_node_addr(r, (void *)(uintptr_t)dst);
    if (mapped == NULL)
        return fh_am_payload_net(t, rank, payload, len, dst, r);
    int rc = local_ok(t, true, rank, payload, len, (void *)(uintptr_t)dst);
    if (rc != FH_OK)
        return rc;
    node_copy(true, (char *)payload, mapped, len);
    return FH_OK;
}

const fh_route_t fh_route_node = {"node", node_rma, node_strided, node_atomic,
                                  node_am_payload};

/* ------------------------------------------------------------------- net */

const fh_route_t fh_route_net = {"net", fh_rma_net, fh_strided_net, fh_atomic_net,
                                 fh_am_payload_net};

/* -------------------------------------------------------------- choosing */

/* The word every rank's probe reads from every member (cma_init). */
static const uint64_t cma_probe_word = 0x66682d636d612d31ULL;   /* "fh-cma-1" */

/* Collective when FH_SEGMENT=everything with FH_SHM and FH_SHM_CMA on
 * (settings every rank agrees on): rt->cma_pid. */
static int cma_init(fh_rt_t *rt, int nnode)
{
    rt->cma_pid = calloc((size_t)rt->nranks, sizeof *rt->cma_pid);
    if (rt->cma_pid == NULL)
        return fh_set_error(FH_ERR_NO_MEMORY, "fh_init: out of memory (routes)");
    if (rt->cfg.segment_mode != FH_SEGMENT_EVERYTHING || rt->cfg.shm == FH_SHM_OFF ||
        rt->cfg.shm_cma == FH_SHM_CMA_OFF)
        return FH_OK;
    int yama = fh_node_cma_yama();
    const char *how = yama < 0 ? "no Yama" : yama == 0 ? "Yama scope 0" : NULL;
    if (yama == 1 && nnode > 0) {
        /* Declare the launcher if the whole group descends from it. */
        int64_t parent = fh_peer_pid(rt, rt->rank, true);
        bool shared = true;
        for (int r = 0; r < rt->nranks; r++)
            if (rt->route[r] == &fh_route_node && fh_peer_pid(rt, r, true) != parent)
                shared = false;
        if (shared && fh_node_cma_allow(parent) == FH_OK)
            how = "Yama scope 1, the launcher's descendants allowed";
        else
            how = shared ? "Yama scope 1, PR_SET_PTRACER failed"
                         : "Yama scope 1, the group has no common launcher";
    } else if (yama >= 2) {
        how = yama == 2 ? "Yama scope 2: administrators only" : "Yama scope 3: nobody";
    }
    uint64_t mine = (uint64_t)(uintptr_t)&cma_probe_word;
    uint64_t *addr = calloc((size_t)rt->nranks, sizeof *addr);
    if (addr == NULL)
        return fh_set_error(FH_ERR_NO_MEMORY, "fh_init: out of memory (routes)");
    /* Every declaration above happens before any probe below. */
    if (rt->boot->ops->allgather(rt->boot, &mine, addr, sizeof mine) != FH_OK) {
        free(addr);
        return fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: the cross-memory probe exchange "
                                              "failed");
    }
    int ok = 0;
    for (int r = 0; r < rt->nranks && yama < 2; r++) {
        if (rt->route[r] != &fh_route_node)
            continue;
        uint64_t v = 0;
        int64_t pid = fh_peer_pid(rt, r, false);
        if (fh_node_cma_copy(pid, false, &v, addr[r], sizeof v) == FH_OK &&
            v == cma_probe_word) {
            atomic_store(&rt->cma_pid[r], pid);
            ok++;
        } else {
            fh_log_verbose(2, "cross-memory attach to %s: %s", FH_RANK_NAME(r), fh_last_error());
        }
    }
    free(addr);
    fh_log_verbose(1, "memory outside segments: cross-memory attach to %d of %d node "
                   "member(s)%s%s%s", ok, nnode, how != NULL ? " (" : "",
                   how != NULL ? how : "", how != NULL ? ")" : "");
    return FH_OK;
}

int fh_route_init(fh_rt_t *rt)
{
    rt->route = malloc(sizeof *rt->route * (size_t)rt->nranks);
    if (rt->route == NULL)
        return fh_set_error(FH_ERR_NO_MEMORY, "fh_init: out of memory (routes)");
    int nnode = 0;
    for (int r = 0; r < rt->nranks; r++) {
        if (r == rt->rank)
            rt->route[r] = &fh_route_self;
        else if (rt->node_peer[r])
            rt->route[r] = &fh_route_node, nnode++;
        else
            rt->route[r] = &fh_route_net;
    }
    fh_log_verbose(1, "routes: self, node to %d rank(s) (shared memory), net to %d",
                   nnode, rt->nranks - 1 - nnode);
    return cma_init(rt, nnode);
}

void fh_route_fini(fh_rt_t *rt)
{
    free(rt->route);
    free(rt->cma_pid);
    rt->route = NULL;
    rt->cma_pid = NULL;
}
