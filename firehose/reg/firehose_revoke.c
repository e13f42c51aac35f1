/*
 * firehose_revoke.c -- memory that is freed or reused, in the runtime: the memory
 * monitor's life cycle (FH_MEMMON), turning its events into cache
 * invalidations, the revocation wait at runtime entry, and which memory
 * may be registered and cached at all (FH_SEGMENT).  The protocol itself
 * (REVOKE / REVOKE-ACK) is in the cache core (cache/fhc_target_revoke.c,
 * fhc_initiator_reply.c); the design and its guarantee in docs/firehose-cache.md,
 * "Memory that is freed or reused".
 *
 * When invalidations are processed (fh_mm_sync_locked, bounded work):
 *   - at every runtime entry (fh_mm_entry, from fh_enter),
 *   - before serving a move (firehose.c, move handler),
 *   - before every fhc lookup and local pin (firehose_xfer.c, firehose_local.c);
 *   - the hit layer (firehose_hit.c) compares the monitor's state word with
 *     `seen` on every hit (two loads, inline) and misses to the locked path
 *     -- which syncs -- when they differ.
 * At runtime entry the thread then waits, polling and holding no lock,
 * until every REVOKE we sent is acknowledged.  So nothing the thread does
 * next -- in particular an AM or a collective that publishes an address --
 * leaves this rank while a peer may still write through a firehose on
 * memory that was freed before the call.  A client's AM reply, sent from
 * a handler that cannot wait, asks fh_mm_may_publish (sync, then "no
 * REVOKE unacknowledged?") and is held by the core until it says yes
 * (am.c).
 *
 * Locking: fh_mm_sync_locked and fh_mm_may_cache run under the cache lock
 * (firehose.c's g->lock); fh_mm_entry takes it briefly and never holds it while
 * polling.  The monitor thread takes no lock at all (memmon.h).
 *
 * Revocations we RECEIVE (a peer freed memory we hold a firehose on) are
 * handled in firehose.c's move handler: fhc drops the firehose from its map and
 * the hit layer drops its cached references on it (reg_hit_revoke), so the
 * ack leaves only after the RDMA through it completed.
 *
 * A peer lost for good (fh_reg_peer_lost, reg.h peer_lost: the service
 * paths' connection with it is gone and never made again) will ack none of
 * our REVOKEs: fhc_peer_dead counts them as acked, with its holds on our
 * memory, so runtime entry does not wait for it for ever.
 */
#include <stdlib.h>
#include <string.h>

#include "firehose/cache/fhc.h"
#include "firehose/memmon/memmon.h"
#include "firehose/util/test_point.h"
#include "firehose_internal.h"

struct fh_mm {
    fh_memmon_t *mon;              /* NULL: no monitor */
    int cache_unwatched;           /* FH_MEMMON=off: cache without watching */
    _Atomic uint64_t seen;         /* monitor state processed (written locked,
                                      release, after revoking) */
    _Atomic uint32_t revoking;     /* fhc_revokes_pending as of the last store
                                      (every store under the cache lock) */
    _Atomic int said_uncached;     /* the fallback was logged */
};

int fh_mm_init(fh_core_t *rt)
{
    struct fh_mm *mm = calloc(1, sizeof *mm);
    if (mm == NULL)
        return FH_ERR_NO_MEMORY;
    int mode = rt->cfg.memmon;
    int everything = rt->cfg.segment_mode == FH_SEGMENT_EVERYTHING;
    if (mode == FH_MEMMON_OFF) {
        mm->cache_unwatched = 1;
        if (rt->rank == 0)
            fh_log_verbose(1, "memory monitor: off (FH_MEMMON=off): cached registrations "
                           "are never invalidated; memory must not be freed or reused");
    } else {
        char why[160] = "";
        int rc = fh_memmon_create(&mm->mon, why, sizeof why);
        if (rc != 0 && (mode == FH_MEMMON_UFFD || everything)) {
            free(mm);
            return fh_set_error(FH_ERR_CONFIG, "fh_init: %s needs the memory monitor, "
                                "which is unavailable: %s (FH_MEMMON=off accepts stale "
                                "registrations)", mode == FH_MEMMON_UFFD ? "FH_MEMMON=uffd"
                                : "FH_SEGMENT=everything", why);
        }
        if (rc != 0)
            fh_log_verbose(1, "memory monitor unavailable (%s): local buffers outside "
                           "segments are registered per operation, not cached", why);
        else if (rt->rank == 0)
            fh_log_verbose(1, "memory monitor: userfaultfd, %s mode",
                           fh_memmon_mode(mm->mon));
    }
    rt->mm = mm;
    return FH_OK;
}

void fh_mm_fini(fh_core_t *rt)
{
    struct fh_mm *mm = rt->mm;
    if (mm == NULL)
        return;
    fh_memmon_destroy(mm->mon);
    free(mm);
    rt->mm = NULL;
}

int fh_mm_may_cache(fh_core_t *rt, uintptr_t addr, size_t len, int exposed)
{
    struct fh_mm *mm = rt->mm;
    if (mm->mon != NULL && fh_memmon_watch(mm->mon, addr, len) == 0)
        return 1;
    if (mm->cache_unwatched)
        return 1;
    /* Segment memory is the runtime's own: it is unmapped only after the
     * cache invalidated it (segment.c), so a registration of it cannot go stale
     * unless the application discards it with madvise, which the segment
     * contract forbids. */
    if (exposed && rt->cfg.segment_mode == FH_SEGMENT_SEGMENTS)
        return 1;
    if (!atomic_exchange(&mm->said_uncached, 1))
        fh_log_verbose(1, "memory monitor: cannot watch [%p, +%zu) (%s); such local "
                       "buffers are registered per operation", (void *)addr, len,
                       mm->mon ? "not anonymous memory, or a hole" : "no monitor");
    return 0;
}

void fh_mm_sync_locked(fh_core_t *rt, struct fhc *c)
{
    struct fh_mm *mm = rt->mm;
    if (mm == NULL || mm->mon == NULL || c == NULL ||
        !fh_memmon_pending(mm->mon, atomic_load_explicit(&mm->seen, memory_order_relaxed)))
        return;
    fh_memmon_range_t r[64];
    int all;
    uint64_t state;
    size_t n;
    do {
        n = fh_memmon_drain(mm->mon, r, 64, &all, &state);
        if (all)
            fhc_invalidate(c, 0, SIZE_MAX);
        for (size_t i = 0; i < n; i++)
            fhc_invalidate(c, r[i].start, r[i].end - r[i].start);
    } while (n == 64);
    /* Publication order (docs/firehose-cache.md, "Publication order"):
     * the REVOKEs are queued, then `revoking` says so, and only then does
     * `seen` (release) tell lock-free readers that the events are
     * processed.  The other order lets a thread read "processed, nothing
     * pending" in between and publish before its REVOKE left. */
    atomic_store_explicit(&mm->revoking, fhc_revokes_pending(c), memory_order_relaxed);
    FH_TEST_POINT(FH_TP_MM_PUBLISH);
    atomic_store_explicit(&mm->seen, state, memory_order_release);
}

void fh_mm_entry(fh_thread_t *t)
{
    fh_core_t *rt = fh_reg_core;
    struct fh_mm *mm = rt->mm;
    if (mm == NULL)
        return;
    /* Acquire: a `seen` that covers our event brings the `revoking` its
     * sync stored before it (see fh_mm_sync_locked and the proof in
     * docs/firehose-cache.md, "Publication order"). */
    if (fh_memmon_pending(mm->mon, atomic_load_explicit(&mm->seen, memory_order_acquire))) {
        struct fhc *c = fh_reg_lock(rt);
        fh_mm_sync_locked(rt, c);
        fh_reg_unlock(rt);
    }
    /* Every store to `revoking` happens under the cache lock and stores
     * fhc_revokes_pending at that moment, so a zero read here means no
     * REVOKE of an event we have seen is outstanding. */
    if (atomic_load_explicit(&mm->revoking, memory_order_relaxed) == 0)
        return;
    for (unsigned idle = 0;;) {
        fh_reg_flush(t);
        struct fhc *c = fh_reg_lock(rt);
        uint32_t n = c ? fhc_revokes_pending(c) : 0;
        /* Under the lock: stored after unlocking, a count taken before
         * another thread's sync could overwrite the larger one it stored. */
        atomic_store_explicit(&mm->revoking, n, memory_order_relaxed);
        fh_reg_unlock(rt);
        FH_TEST_POINT(FH_TP_MM_WAIT_COUNT);
        if (n == 0 || atomic_load(&rt->finalizing))
            return;
        svc_wait_round(t, &idle);
    }
}

bool fh_mm_may_publish(fh_core_t *rt)
{
    struct fh_mm *mm = rt->mm;
    if (mm == NULL)
        return true;
    /* As fh_mm_entry, without the wait: the caller holds what it would
     * have sent until this says yes (am.c, held replies). */
    if (fh_memmon_pending(mm->mon, atomic_load_explicit(&mm->seen, memory_order_acquire))) {
        struct fhc *c = fh_reg_lock(rt);
        fh_mm_sync_locked(rt, c);
        fh_reg_unlock(rt);
    }
    if (atomic_load_explicit(&mm->revoking, memory_order_relaxed) == 0)
        return true;
    struct fhc *c = fh_reg_lock(rt);
    uint32_t n = c ? fhc_revokes_pending(c) : 0;
    atomic_store_explicit(&mm->revoking, n, memory_order_relaxed);
    fh_reg_unlock(rt);
    return n == 0 || atomic_load(&rt->finalizing);
}

fh_memmon_t *fh_mm_monitor(const fh_core_t *rt)
{
    return rt->mm != NULL ? rt->mm->mon : NULL;
}

void fh_mm_hit_words(const fh_core_t *rt, const _Atomic uint64_t **state,
                     const _Atomic uint64_t **seen)
{
    struct fh_mm *mm = rt->mm;
    *state = mm != NULL && mm->mon != NULL ? fh_memmon_state_word(mm->mon) : NULL;
    *seen = mm != NULL ? &mm->seen : NULL;
}

void fh_reg_peer_lost(fh_core_t *rt, int rank)
{
    struct fh_reg *g = rt->reg;
    if (g == NULL || rank < 0 || rank >= rt->nranks || rank == rt->rank)
        return;
    pthread_mutex_lock(&g->lock);
    if (g->c == NULL) {
        pthread_mutex_unlock(&g->lock);
        return;
    }
    fhc_peer_stats_t before;
    fhc_peer_stats(g->c, (uint32_t)rank, &before);
    uint32_t revoking = fhc_revokes_pending(g->c);
    fhc_peer_dead(g->c, (uint32_t)rank);
    reg_copy_lost(g, rank, FH_ERR_PEER_DEAD);   /* its copies' replies never come */
    uint32_t left = fhc_revokes_pending(g->c);
    if (rt->mm != NULL)     /* stored under the cache lock, as every store */
        atomic_store_explicit(&rt->mm->revoking, left, memory_order_relaxed);
    reg_check(g, (uint32_t)rank);
    pthread_mutex_unlock(&g->lock);
    fh_log_verbose(1, "firehose cache: %s is lost for good: its %u firehose%s on our "
                   "memory (%zu bytes) and %u unacknowledged revoke%s released, its "
                   "budget back to the floor", FH_RANK_NAME(rank),
                   before.target_held_regions, before.target_held_regions == 1 ? "" : "s",
                   before.target_held_bytes, revoking - left,
                   revoking - left == 1 ? "" : "s");
}
