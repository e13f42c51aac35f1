/*
 * segment.c -- segments and the lookup "remote address -> segment + key".
 *
 * Segments are created and destroyed collectively and rarely; lookups happen
 * on every RMA from every thread.  So lookups read an immutable snapshot
 * (struct fh_segmap: per rank, the non-empty pieces sorted by base address)
 * through one atomic pointer, with no lock and no write; create/destroy build
 * a new snapshot under seg_lock and publish it.
 *
 * Reclaiming.  A replaced snapshot, and a piece's replaced hole list
 * (seg_protect.c: every protection change publishes), may still be read by
 * a thread that loaded it; they are freed once no thread can.  Every
 * publish bumps rt->seg_epoch after it swapped the table; what it retired
 * is stamped with the epoch before the bump.  Every thread announces, at
 * the start of each call (fh_enter), the epoch it sees (seg_seen, a
 * release store when it changed): from then on it holds nothing it read
 * before, and all it reads is at least that new.  So an item stamped s is
 * free once every live thread state has seg_seen > s (fh_tls_min_seen;
 * thread states join rt->tls_all before they can run a handler and leave
 * it when their thread exits), and no mprotect hook is reading the table
 * (the hook may run in a thread without state: fh_seg_hook_enter counts
 * it, sequentially consistent with the swap).  A thread that made a call
 * and never calls again keeps everything retired since then (as before
 * session 26: until fh_finalize).  fh_enter's cost: one load of the epoch
 * and a compare.
 *
 * What a piece is to peers is the registration strategy's (reg/reg.h):
 * it is mapped in whole units of seg_align (the page; firehose: the
 * bucket) and handed to seg_expose, which registers it whole and returns
 * its key (pin-everything), announces it to the cache that registers on
 * demand (firehose), or does nothing (the comparison strategies register
 * per operation or not at all): then its key is {0, 0}.  Strategies with
 * FH_REG_CAP_SEG_REVOKE revoke peers' keys at destroy and need a second
 * barrier, so every rank keeps polling until all revocations are done.
 * Segments still alive at fh_finalize are retired (seg_retire: firehose
 * deregisters every region at its fini, then unmaps them).
 *
 * Key lifetime: a key must never outlive its memory -- a peer still holding
 * one would read and write whatever gets mapped at that address next.  So
 * fh_segment_destroy, after its barrier, (1) unpublishes the segment (peer
 * requests for it are refused from then on), (2) waits until no service-
 * path handler can still be using the previous table (fence_handlers), (3)
 * deregisters every registration made inside our piece for peers
 * (seg_release: the rendezvous forms all of them, given back by the peer
 * or not; firehose after the holders acknowledged) and the piece's own
 * (pin-everything), and only then (4) unmaps it.  A deregistration that
 * fails leaves the memory mapped (leaked) rather than reusable.
 * fh_finalize deregisters everything (fini_keys, then here, then the
 * strategy's fini) before unmapping.  A late use of an old key then
 * completes with an error at the initiator.
 *
 * Node groups (peer.c fh_peer_groups).  When our group has other members,
 * our piece is firehose/node/ memory (a memfd) and every member attaches
 * the others' pieces right after the creation exchange: pieces[r].local,
 * and the `local` of every range looked up, is where we can load and store
 * rank r's piece (our own base for ourselves).  A peer whose piece cannot
 * be attached is reached through the network as before.  At destroy (after
 * the barrier and the unpublish) and at finalize each rank detaches what it
 * attached and closes its descriptor; the memory goes with the last
 * mapping.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "firehose/node/node.h"

#include "segment_private.h"

/* Hole lists replaced (seg_lock held), newest first: a snapshot may still
 * point at them ("Reclaiming"). */
static struct fh_seg_holes *holes_retired;
/* mprotect hooks reading the table now (fh_seg_hook_enter). */
static _Atomic int hook_readers;

void fh_seg_hook_enter(void)
{
    atomic_fetch_add(&hook_readers, 1);
}

void fh_seg_hook_leave(void)
{
    atomic_fetch_sub(&hook_readers, 1);
}

void fh_seg_holes_retire(const struct fh_seg_holes *h)
{
    if (h != NULL) {
        struct fh_seg_holes *old = (struct fh_seg_holes *)h;
        old->retired_at = atomic_load(&fh_rt->seg_epoch);
        old->retired_next = holes_retired;
        holes_retired = old;
    }
}

/* Frees a segment's pieces (seg_lock held, or finalize); their hole lists
 * are retired. */
static void pieces_free(struct fh_seg_piece *pieces, int nranks)
{
    for (int r = 0; pieces != NULL && r < nranks; r++)
        fh_seg_holes_retire(pieces[r].holes);
    free(pieces);
}

static void segmap_free(struct fh_segmap *m, int nranks)
{
    if (m == NULL)
        return;
    for (int r = 0; r < nranks; r++)
        free(m->ranges[r]);
    free(m->ranges);
    free(m->count);
    free(m);
}

static int cmp_range(const void *a, const void *b)
{
    const fh_seg_range_t *x = a, *y = b;
    return (x->base > y->base) - (x->base < y->base);
}

/* Builds the snapshot from the live segments; called with seg_lock held. */
static struct fh_segmap *segmap_build(fh_rt_t *rt)
{
    int n = rt->nranks;
    struct fh_segmap *m = calloc(1, sizeof *m);
    if (m == NULL || !(m->count = calloc((size_t)n, sizeof *m->count)) ||
        !(m->ranges = calloc((size_t)n, sizeof *m->ranges))) {
        if (m)
            free(m->count);
        free(m);
        return NULL;
    }
    for (long s = 0; s < rt->cfg.max_segments; s++)
        for (int r = 0; r < n; r++)
            if (fh_seg_published(rt, &rt->segs[s], r))
                m->count[r]++;
    for (int r = 0; r < n; r++) {
        if (m->count[r] == 0)
            continue;
        m->ranges[r] = malloc(m->count[r] * sizeof **m->ranges);
        if (m->ranges[r] == NULL) {
            segmap_free(m, n);
            return NULL;
        }
        uint32_t k = 0;
        for (long s = 0; s < rt->cfg.max_segments; s++) {
            const fh_segment_t *sg = &rt->segs[s];
            if (fh_seg_published(rt, sg, r))
                m->ranges[r][k++] = (fh_seg_range_t){
                    .base = (uintptr_t)sg->pieces[r].base,
                    .end = (uintptr_t)(sg->pieces[r].base + sg->pieces[r].size),
                    .rkey = sg->pieces[r].rkey, .seg = (fh_seg_t)s,
                    .mr = r == rt->rank ? sg->mr : NULL, .local = sg->pieces[r].local,
                    .holes = sg->pieces[r].holes};
        }
        qsort(m->ranges[r], k, sizeof **m->ranges, cmp_range);
    }
    return m;
}

/* Frees what every thread is past ("Reclaiming").  seg_lock held. */
static void reclaim(fh_rt_t *rt)
{
    uint64_t seen = fh_tls_min_seen(rt);
    if (atomic_load(&hook_readers) != 0)
        return;     /* next time */
    /* Both lists are newest first: free from the first entry old enough. */
    struct fh_segmap **mp = &rt->retired;
    while (*mp != NULL && (*mp)->retired_at >= seen)
        mp = &(*mp)->retired_next;
    for (struct fh_segmap *m = *mp, *n; m != NULL; m = n) {
        n = m->retired_next;
        segmap_free(m, rt->nranks);
    }
    *mp = NULL;
    struct fh_seg_holes **hp = &holes_retired;
    while (*hp != NULL && (*hp)->retired_at >= seen)
        hp = &(*hp)->retired_next;
    for (struct fh_seg_holes *h = *hp, *n; h != NULL; h = n) {
        n = h->retired_next;
        free(h);
    }
    *hp = NULL;
}

int fh_seg_publish(fh_rt_t *rt)
{
    struct fh_segmap *m = segmap_build(rt);
    if (m == NULL)
        return FH_ERR_NO_MEMORY;
    struct fh_segmap *old = atomic_exchange(&rt->segmap, m);
    if (old != NULL) {
        old->retired_at = atomic_load(&rt->seg_epoch);
        old->retired_next = rt->retired;
        rt->retired = old;
    }
    atomic_fetch_add(&rt->seg_epoch, 1);
    reclaim(rt);
    return FH_OK;
}

int fh_seg_find(fh_rt_t *rt, int rank, uintptr_t addr, size_t n, fh_seg_range_t *out)
{
    struct fh_segmap *m = atomic_load_explicit(&rt->segmap, memory_order_acquire);
    if (addr + n < addr)
        return FH_ERR_OVERFLOW;
    if (m == NULL || rank < 0 || rank >= rt->nranks || m->count[rank] == 0)
        return FH_ERR_OUT_OF_SEGMENT;
    const fh_seg_range_t *r = m->ranges[rank];
    /* Last range with base <= addr. */
    uint32_t lo = 0, hi = m->count[rank];
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r[mid].base <= addr)
            lo = mid;
        else
            hi = mid;
    }
    if (r[lo].base > addr || addr + n > r[lo].end || addr >= r[lo].end)
        return FH_ERR_OUT_OF_SEGMENT;
    *out = r[lo];
    return FH_OK;
}

int fh_seg_init(fh_rt_t *rt)
{
    rt->segs = calloc((size_t)rt->cfg.max_segments, sizeof *rt->segs);
    if (rt->segs == NULL)
        return FH_ERR_NO_MEMORY;
    return fh_seg_publish(rt);
}

/* Releases our piece: its own registration (pin-everything) first, then
 * the memory, which is unmapped only if no registration of it can be left
 * -- with keep_mapped (the caller could not deregister something inside
 * it) or when this deregistration fails, it stays mapped (leaked) so that
 * nothing else is ever mapped under a live key.  A strategy with
 * seg_retire must have let go of it first (released: seg_release ran);
 * otherwise it is retired, unmapped by the strategy's fini. */
/* Unmaps the node peers' pieces we attached (not our own). */
static void seg_detach_peers(fh_segment_t *sg, int nranks)
{
    for (int r = 0; sg->pieces != NULL && r < nranks; r++)
        if (sg->pieces[r].local_len) {
            fh_node_memfd.detach(sg->pieces[r].local, sg->pieces[r].local_len);
            sg->pieces[r].local = NULL;
            sg->pieces[r].local_len = 0;
        }
}

static void seg_release_local(fh_rt_t *rt, fh_segment_t *sg, bool keep_mapped,
                              bool released)
{
    if (sg->shared && sg->np.fd >= 0) {
        close(sg->np.fd);     /* the mapping below stays what it was */
        sg->np.fd = -1;
    }
    sg->shared = 0;
    if (sg->mr != NULL && rt->cops->mr_dereg(rt->conduit, sg->mr) != FH_OK)
        keep_mapped = true;
    sg->mr = NULL;
    if (sg->base != NULL && rt->reg_ops->seg_retire != NULL && !released)
        rt->reg_ops->seg_retire(&rt->core, sg->base, sg->mapped);   /* unmapped at its fini */
    else if (sg->base != NULL && !keep_mapped)
        munmap(sg->base, sg->mapped);
    else if (sg->base != NULL)
        fh_log_error("segment memory %p (+%zu bytes) stays mapped: a registration of it "
                     "could not be deregistered", sg->base, sg->mapped);
    sg->base = NULL;
}

void fh_seg_fini(fh_rt_t *rt, bool keep_mapped)
{
    for (long s = 0; s < rt->cfg.max_segments; s++) {
        fh_segment_t *sg = &rt->segs[s];
        seg_detach_peers(sg, rt->nranks);
        if (sg->live)
            seg_release_local(rt, sg, keep_mapped, false);
        pieces_free(sg->pieces, rt->nranks);
    }
    free(rt->segs);
    rt->segs = NULL;
    segmap_free(atomic_exchange(&rt->segmap, NULL), rt->nranks);
    while (rt->retired != NULL) {
        struct fh_segmap *m = rt->retired;
        rt->retired = m->retired_next;
        segmap_free(m, rt->nranks);
    }
    while (holes_retired != NULL) {
        struct fh_seg_holes *h = holes_retired;
        holes_retired = h->retired_next;
        free(h);
    }
}

/* Maps sg's piece of size bytes: whole units of the strategy's alignment
 * (the page, or the firehose bucket), aligned to it (or to seg_base_align:
 * firehose's frame), not yet reachable by peers.  Sets sg->base and sg->mapped; FH_ERR_NO_MEMORY leaves base NULL. */
static int map_piece(const fh_rt_t *rt, fh_segment_t *sg, size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t b = rt->reg_ops->seg_align != NULL ? rt->reg_ops->seg_align(&rt->core) : page;
    assert(b >= page && (b & (b - 1)) == 0);
    sg->shared = 0;
    sg->np.fd = -1;
    if (rt->node_size >= 2) {
        /* Group-shared memory; the network path is the fallback. */
        if (fh_node_memfd.create(size, b, &sg->np) == FH_OK) {
            sg->shared = 1;
            sg->base = sg->np.base;
            sg->mapped = sg->np.size;
            return FH_OK;
        }
        fh_log_verbose(1, "segment piece of %zu bytes not shared with the node group: %s",
                       size, fh_last_error());
    }
    sg->mapped = (size + b - 1) & ~(b - 1);
    size_t ba = rt->reg_ops->seg_base_align != NULL ? rt->reg_ops->seg_base_align(&rt->core) : 0;
    if (ba > b) {
        assert((ba & (ba - 1)) == 0);
        b = ba;                         /* the base only: mapped stays as is */
    }
    size_t extra = b > page ? b : 0;   /* room to align inside */
    char *raw = mmap(NULL, sg->mapped + extra, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) {
        sg->base = NULL;
        return FH_ERR_NO_MEMORY;
    }
    uintptr_t al = ((uintptr_t)raw + b - 1) & ~(uintptr_t)(b - 1);
    size_t head = al - (uintptr_t)raw;
    if (head)
        munmap(raw, head);
    if (extra - head)
        munmap((char *)al + sg->mapped, extra - head);
    sg->base = (void *)al;
    return FH_OK;
}

static void fence_handlers(fh_rt_t *rt);

/* What each rank contributes to the creation exchange. */
struct seg_wire {
    int64_t status;
    uint64_t base, size, key, kbase;
    int64_t pid, fd;          /* node memory: where group members attach (fd -1: none) */
    uint64_t mapped;          /* its length */
};

int fh_segment_create(size_t size, fh_seg_t *seg, void **local_base)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_segment_create", &rc);
    if (t == NULL)
        return rc;
    if (seg == NULL)
        return fh_set_error(FH_ERR_INVALID, "fh_segment_create: NULL seg");
    fh_rt_t *rt = fh_rt;
    if (size > (SIZE_MAX >> 2))
        return fh_set_error(FH_ERR_OVERFLOW, "fh_segment_create: size %zu is too large", size);

    if ((rc = fh_coll_enter(t, "fh_segment_create")) != FH_OK)
        return rc;
    pthread_mutex_lock(&rt->seg_lock);
    long id = 0;
    while (id < rt->cfg.max_segments &&
           (rt->segs[id].live || rt->segs[id].dying || rt->segs[id].pending))
        id++;
    /* Every rank reaches the same slot: creations and destructions are
     * collective and paired in order (coll.c), and the exchange below
     * checks that the slots agree. */
    struct seg_wire mine = {.fd = -1};
    fh_segment_t *sg = id < rt->cfg.max_segments ? &rt->segs[id] : NULL;
    if (sg != NULL) {
        sg->shared = 0;
        sg->np.fd = -1;
    }
    if (sg == NULL) {
        mine.status = FH_ERR_LIMIT;
    } else if (size > 0) {
        rc = map_piece(rt, sg, size);
        fh_rkey_t rk = {0, 0};
        sg->mr = NULL;
        if (rc == FH_OK && rt->reg_ops->seg_expose != NULL &&
            rt->reg_ops->seg_expose(&rt->core, sg->base, sg->mapped, &sg->mr, &rk) != FH_OK) {
            if (sg->shared)
                close(sg->np.fd);
            sg->shared = 0;
            sg->np.fd = -1;
            munmap(sg->base, sg->mapped);
            sg->base = NULL;
            sg->mr = NULL;
            rc = FH_ERR_NO_MEMORY;
        }
        if (rc != FH_OK) {
            mine.status = FH_ERR_NO_MEMORY;
        } else {
            mine.base = (uint64_t)(uintptr_t)sg->base;
            mine.size = size;
            mine.key = rk.key;
            mine.kbase = rk.base;
            if (sg->shared) {
                mine.pid = (int64_t)getpid();
                mine.fd = sg->np.fd;
                mine.mapped = sg->mapped;
            }
        }
    }
    struct seg_wire *all = calloc((size_t)rt->nranks, sizeof *all);
    struct fh_seg_piece *pieces = calloc((size_t)rt->nranks, sizeof *pieces);
    if (all == NULL || pieces == NULL) {
        free(all);
        free(pieces);
        if (sg)
            seg_release_local(rt, sg, false, false);
        pthread_mutex_unlock(&rt->seg_lock);
        /* Peers are waiting in the exchange; we cannot leave them there. */
        fh_fatal("fh_segment_create: out of memory");
    }
    if (sg != NULL && mine.status == FH_OK && size > 0) {
        /* Served before the exchange: a peer that finishes it before us may
         * reach our piece at once (an atomic, a rendezvous or bounce put)
         * while this or another thread of ours polls. */
        pieces[rt->rank] = (struct fh_seg_piece){mine.base, mine.size,
                                                 {mine.key, mine.kbase}, sg->base, 0, NULL};
        sg->pieces = pieces;
        sg->pending = 1;
        if (fh_seg_publish(rt) != FH_OK) {
            sg->pending = 0;
            sg->pieces = NULL;
            mine.status = FH_ERR_NO_MEMORY;
        }
    }
    pthread_mutex_unlock(&rt->seg_lock);
    rc = fh_allgather_internal(t, fh_coll_sig(FH_COLL_SEG_CREATE, (uint64_t)id),
                               "fh_segment_create", &mine, all, sizeof mine);
    pthread_mutex_lock(&rt->seg_lock);
    int bad = -1;
    for (int r = 0; r < rt->nranks && rc == FH_OK; r++)
        if (all[r].status != FH_OK) {
            bad = r;
            rc = (int)all[r].status;
        }
    if (rc != FH_OK) {
        /* Our piece was served (pending): unpublished first, and no
         * handler may still use it (fence_handlers), as at destroy.  Under
         * firehose it was announced to the cache: that lets go next. */
        if (sg != NULL && sg->pending) {
            sg->pending = 0;
            sg->pieces = NULL;
            if (fh_seg_publish(rt) != FH_OK)
                fh_fatal("fh_segment_create: out of memory publishing the segment table");
            pthread_mutex_unlock(&rt->seg_lock);
            fence_handlers(rt);
            pthread_mutex_lock(&rt->seg_lock);
        }
        unsigned undead = 0;
        if (sg && sg->base != NULL && rt->reg_ops->seg_release != NULL) {
            pthread_mutex_unlock(&rt->seg_lock);
            undead = rt->reg_ops->seg_release(&rt->core, &t->base, sg->base, sg->mapped);
            pthread_mutex_lock(&rt->seg_lock);
        }
        if (sg)
            seg_release_local(rt, sg, undead != 0, true);
        pthread_mutex_unlock(&rt->seg_lock);
        fh_coll_leave();
        free(all);
        free(pieces);
        if (bad < 0)    /* the exchange itself failed; it said why */
            return rc;
        return fh_set_error(rc, "fh_segment_create: %s could not create its piece of "
                            "%zu bytes: %s", FH_RANK_NAME(bad), size, fh_strerror(rc));
    }
    for (int r = 0; r < rt->nranks; r++) {
        if (r == rt->rank) {
            /* holes: what we protected while the exchange ran */
            pieces[r] = (struct fh_seg_piece){all[r].base, all[r].size,
                                              {all[r].key, all[r].kbase}, sg->base, 0,
                                              pieces[r].holes};
            continue;
        }
        pieces[r] = (struct fh_seg_piece){all[r].base, all[r].size,
                                          {all[r].key, all[r].kbase}, NULL, 0, NULL};
        if (rt->node_peer[r] && all[r].fd >= 0 && all[r].size > 0 &&
            all[r].mapped >= all[r].size) {
            void *m = NULL;
            if (fh_node_memfd.attach(all[r].pid, (int)all[r].fd, (size_t)all[r].mapped,
                                     &m) == FH_OK) {
                pieces[r].local = m;
                pieces[r].local_len = (size_t)all[r].mapped;
            } else {
                fh_log_verbose(1, "segment %ld: %s is reached through the network: %s",
                               id, FH_RANK_NAME(r), fh_last_error());
            }
        }
    }
    free(all);
    sg->pieces = pieces;
    sg->size = size;
    sg->pending = 0;
    sg->live = 1;
    rc = fh_seg_publish(rt);
    pthread_mutex_unlock(&rt->seg_lock);
    fh_coll_leave();
    if (rc != FH_OK)
        fh_fatal("fh_segment_create: out of memory publishing the segment table");
    *seg = (fh_seg_t)id;
    if (local_base)
        *local_base = sg->base;
    fh_log_verbose(2, "segment %ld: %zu bytes at %p", id, size, sg->base);
    return FH_OK;
}

static fh_segment_t *live_seg(const char *fn, fh_seg_t seg, int *err)
{
    if (fh_rt == NULL) {
        *err = fh_set_error(FH_ERR_NOT_INIT, "%s: firehose is not initialized", fn);
        return NULL;
    }
    if ((long)seg >= fh_rt->cfg.max_segments || !fh_rt->segs[seg].live) {
        *err = fh_set_error(FH_ERR_INVALID, "%s: segment %u does not exist", fn, seg);
        return NULL;
    }
    return &fh_rt->segs[seg];
}

int fh_segment_query(fh_seg_t seg, int rank, void **base, size_t *size)
{
    fh_clear_error();
    int rc;
    if (fh_rank() < 0)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_segment_query: firehose is not initialized");
    if ((rc = fh_check_rank("fh_segment_query", rank)) != FH_OK)
        return rc;
    pthread_mutex_lock(&fh_rt->seg_lock);
    fh_segment_t *sg = live_seg("fh_segment_query", seg, &rc);
    if (sg != NULL) {
        if (base)
            *base = (void *)(uintptr_t)sg->pieces[rank].base;
        if (size)
            *size = (size_t)sg->pieces[rank].size;
    }
    pthread_mutex_unlock(&fh_rt->seg_lock);
    return sg ? FH_OK : rc;
}

/* Returns once no handler that may have looked up a segment table older
 * than the current one is still running.  Peers' requests -- rendezvous
 * registrations, bounce copies, atomics, firehose moves -- are all handled
 * on the service path under its lock (internal.h), and a handler looks up
 * the table after that lock was taken; so once we have held the lock, the
 * handlers that might have seen an old table have returned, and later ones
 * see the table we published.  Called without seg_lock: a handler may take
 * it (fh_segment_query is handler-safe). */
static void fence_handlers(fh_rt_t *rt)
{
    pthread_mutex_lock(&rt->paths[0].lock);
    pthread_mutex_unlock(&rt->paths[0].lock);
}

int fh_segment_destroy(fh_seg_t seg)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_segment_destroy", &rc);
    if (t == NULL)
        return rc;
    fh_rt_t *rt = fh_rt;
    pthread_mutex_lock(&rt->seg_lock);
    fh_segment_t *sg = live_seg("fh_segment_destroy", seg, &rc);
    pthread_mutex_unlock(&rt->seg_lock);
    if (sg == NULL)
        return rc;
    if ((rc = fh_coll_enter(t, "fh_segment_destroy")) != FH_OK)
        return rc;
    pthread_mutex_lock(&rt->seg_lock);
    sg = live_seg("fh_segment_destroy", seg, &rc);    /* another thread's destroy? */
    pthread_mutex_unlock(&rt->seg_lock);
    /* Everyone's operations on it are complete once all have arrived; every
     * rank destroys the same segment (else FH_ERR_STATE, nothing done). */
    uint64_t sig = fh_coll_sig(FH_COLL_SEG_DESTROY, seg);
    if (sg == NULL || (rc = fh_barrier_internal(t, sig, "fh_segment_destroy")) != FH_OK) {
        fh_coll_leave();
        return rc;
    }
    /* The order below is the key-lifetime rule (top of file). */
    pthread_mutex_lock(&rt->seg_lock);
    sg->live = 0;
    sg->dying = 1;
    rc = fh_seg_publish(rt);
    pthread_mutex_unlock(&rt->seg_lock);
    if (rc != FH_OK)   /* lookups would still find memory we are about to unmap */
        fh_fatal("fh_segment_destroy: out of memory publishing the segment table");
    fence_handlers(rt);
    /* What the strategy registered inside our piece for peers goes before
     * the memory (no lock held: it may wait for peers' acknowledgements). */
    unsigned undead = 0;
    if (sg->base != NULL && rt->reg_ops->seg_release != NULL)
        undead = rt->reg_ops->seg_release(&rt->core, &t->base, sg->base, sg->mapped);
    if (rt->reg_ops->caps & FH_REG_CAP_SEG_REVOKE) {
        /* A second barrier, so that no rank leaves (and stops polling)
         * before every rank's revocations were acknowledged. */
        if ((rc = fh_barrier_internal(t, sig, "fh_segment_destroy")) != FH_OK)
            fh_fatal("fh_segment_destroy: the barrier after the revocations failed: %s",
                     fh_strerror(rc));
    }
    pthread_mutex_lock(&rt->seg_lock);
    assert(sg->dying && !sg->live);
    seg_detach_peers(sg, rt->nranks);
    seg_release_local(rt, sg, undead != 0, true);
    pieces_free(sg->pieces, rt->nranks);
    sg->pieces = NULL;
    sg->dying = 0;
    pthread_mutex_unlock(&rt->seg_lock);
    fh_coll_leave();
    return FH_OK;
}

void *fh_addr_local(int rank, const void *addr)
{
    fh_clear_error();
    fh_rt_t *rt = fh_rt;
    if (rt == NULL || atomic_load(&fh_rt_state) != FH_RT_UP) {
        fh_set_error(FH_ERR_NOT_INIT, "fh_addr_local: firehose is not initialized");
        return NULL;
    }
    if (fh_check_rank("fh_addr_local", rank) != FH_OK)
        return NULL;
    fh_seg_range_t r;
    int rc = fh_seg_find(rt, rank, (uintptr_t)addr, 1, &r);
    if (rc != FH_OK) {
        fh_set_error(rc, "fh_addr_local: %p is not inside a segment of %s", addr,
                     FH_RANK_NAME(rank));
        return NULL;
    }
    char *p = fh_node_addr(&r, addr);
    if (p == NULL)
        fh_set_error(FH_ERR_NOT_SUPPORTED, "fh_addr_local: %s does not share its "
                     "segments with this rank (another node group, or FH_SHM=off)",
                     FH_RANK_NAME(rank));
    return p;
}
