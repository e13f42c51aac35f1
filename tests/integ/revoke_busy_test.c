/*
 * revoke_busy_test.c -- a REVOKE that arrives while RDMA through the
 * revoked firehose is still in flight (docs/firehose-cache.md, "The hit
 * layer" and "Memory that is freed or reused").
 *
 * Meant for FH_REG_STRATEGY=firehose FH_SEGMENT=everything
 * FH_BUCKET_SIZE=4k (revoke_busy_test.sh), where a frame -- the largest
 * region, R -- is 16 buckets = 64 KiB.  Ranks pair up as in churn_test:
 * even rank 2k initiates, 2k+1 is the target.  The target's area is one
 * frame: S (all but the last bucket), which stays mapped, and A (the last
 * bucket), which is freed every cycle.  The initiator's source holds
 * pattern K0 for S and pattern c for A in cycle c.  Each cycle c:
 *   initiator  (main thread, streamer paused) puts the source over the
 *              frame (the first time: one region covering S and A), lets
 *              its streamer thread go -- NBI puts into A, two in flight,
 *              hits in the streamer's own hit-layer cache on the region
 *              holding A, so that entry is busy most of the time -- and
 *              sends GO;
 *   target     on GO, maps fresh pages over A (mmap MAP_FIXED), fills them
 *              with 0xee and publishes A by AM.  The AM's runtime entry
 *              turns the monitor's event into a REVOKE of A's region and
 *              waits for the ack, which the initiator may only send once
 *              the streamer's RDMA through that region completed (its entry
 *              goes WANTED; the last release returns it).  The streamer's
 *              next puts miss, and their move is answered only after the
 *              ack, with a region on the NEW A;
 *   initiator  (main thread, polling for PUBLISH, handles the REVOKE) stops
 *              the streamer, puts the source over the frame once more,
 *              sends DONE;
 *   target     checks S (K0) and A (pattern c) and says so (CHECKED: the
 *              next cycle's put must not race with the check).
 * Two initiator threads: the main thread handles the REVOKE (it polls for
 * PUBLISH) while the streamer's RDMA is in flight on its own path.  The
 * streamer
 * writes A because the regions do not stay as first made: after the first
 * REVOKE, S and A are re-registered as separate regions, and only A's is
 * revoked from then on.
 * At the end the initiator's reg_revoked_busy (REVOKEs that found a cached
 * reference busy) must be > 0 -- the interleaving this test is for
 * happened -- and no byte may differ.  And no hit may have been taken on a
 * firehose after its REVOKE found it busy: the runtime built with the test
 * hooks (libfhrt_hooks) reports every such hit (FH_TP_HIT_REVOKED), which
 * the bytes alone cannot show on tcp and shm (a provider that writes by
 * virtual address writes the new pages either way).  On a pinning NIC (ibv on Soft-RoCE,
 * check-rxe) a stale registration would leave A's new pages without the
 * pattern.
 *
 * The interleaving depends on scheduling, so it is not asked of a fixed
 * number of cycles: the pair runs at least N cycles (--cycles) and goes on,
 * up to --max-cycles (default 20 N), until the initiator has seen a busy
 * revocation (DONE carries "another cycle follows").  Only if none came in
 * all of them does the test fail.
 *
 * Usage: revoke_busy_test [--cycles N] [--max-cycles M]
 */
#include <pthread.h>
#include <stdatomic.h>

#include "testutil.h"
#include "firehose/internal.h"     /* fh_test_hook, FH_TP_HIT_REVOKED */

#ifndef FH_TEST_HOOKS
#error "revoke_busy_test needs the runtime built with -DFH_TEST_HOOKS"
#endif

/* Hits taken on a firehose after its REVOKE found it busy (the hit layer
 * must refuse them: the entry is WANTED).  On tcp and shm the bytes come
 * out right either way, so the rule is counted, not inferred from data. */
static atomic_long hits_after_revoke;

static void hook(enum fh_test_point where)
{
    if (where == FH_TP_HIT_REVOKED)
        atomic_fetch_add(&hits_after_revoke, 1);
}

/* One AM handler for the four protocol steps: args {step, cycle, addr}. */
#define H_STEP (FH_AM_USER_FIRST + 0)
enum { GO, PUBLISH, DONE, CHECKED, NSTEPS };

/* One frame R: with FH_BUCKET_SIZE=4k, R = 16 buckets (FHC_MAX_PIECES) */
#define BUCKET  ((size_t)4096)      /* = FH_BUCKET_SIZE */
#define FRAME   (16 * BUCKET)

static volatile uint64_t step_cycle[NSTEPS] = {UINT64_MAX, UINT64_MAX, UINT64_MAX,
                                               UINT64_MAX};
static volatile uint64_t area_addr;     /* the target's frame (PUBLISH) */
static volatile uint64_t done_more;     /* DONE: another cycle follows */

static void h_step(fh_token_t t, void *b, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)b; (void)n;
    CHECK(na == 3 && a[0] < NSTEPS, "step message", "3 args, step < %d; saw %u args",
          NSTEPS, na);
    if (a[0] == PUBLISH)
        area_addr = a[2];
    if (a[0] == DONE)
        done_more = a[2];
    __atomic_store_n(&step_cycle[a[0]], a[1], __ATOMIC_RELEASE);
}

/* Sends step `step` of cycle c to peer. */
static void step(int peer, int step, uint64_t c, uint64_t addr)
{
    uint64_t a[3] = {(uint64_t)step, c, addr};
    CHECK_OK(fh_am_request_short(peer, H_STEP, a, 3));
}

/* The streamer: while `go` is set, NBI puts into A (two in flight);
 * `idle` says it has stopped and its puts completed. */
typedef struct streamer {
    int peer;
    char *remote, *src;
    size_t len;
    atomic_int go, idle, quit;
    long puts;
} streamer_t;

static void *stream_main(void *arg)
{
    streamer_t *w = arg;
    while (!atomic_load(&w->quit)) {
        if (!atomic_load(&w->go)) {
            CHECK_OK(fh_poll());
            continue;
        }
        atomic_store(&w->idle, 0);
        while (atomic_load(&w->go)) {
            CHECK_OK(fh_put_nbi(w->peer, w->remote, w->src, w->len));
            if (++w->puts % 2 == 0)
                CHECK_OK(fh_wait_nbi());
        }
        CHECK_OK(fh_wait_nbi());
        atomic_store(&w->idle, 1);
    }
    return NULL;
}

static void stream_stop(streamer_t *w)
{
    atomic_store(&w->go, 0);
    while (!atomic_load(&w->idle))
        CHECK_OK(fh_poll());
}

int main(int argc, char **argv)
{
    long cycles = tu_opt(argc, argv, "--cycles", 300);
    long max_cycles = tu_opt(argc, argv, "--max-cycles", -1);
    if (max_cycles < cycles)
        max_cycles = 20 * cycles;
    fh_test_hook = hook;                       /* before any runtime thread */
    CHECK_OK(fh_am_register(H_STEP, h_step, "revoke-busy-step"));
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("revoke_busy_test");
    int me = fh_rank(), N = fh_nranks();
    uint64_t seed = tu_seed_init();
    int initiator = me % 2 == 0 && me + 1 < N, target = me % 2 == 1;
    int peer = initiator ? me + 1 : me - 1;
    const size_t slen = FRAME - BUCKET;              /* S = [0, slen), A after */

    char *area = NULL, *src = NULL;
    if (target) {
        area = tu_reserve(FRAME, FRAME);
        memset(area, 0xee, FRAME);
    } else if (initiator) {
        src = malloc(FRAME);
        CHECK(src != NULL, "malloc", "a frame, saw NULL");
    }
    CHECK_OK(fh_barrier());
    if (target) {                                     /* where the frame is */
        step(peer, PUBLISH, UINT64_MAX - 1, (uint64_t)(uintptr_t)area);
    } else if (initiator) {
        tu_wait_for(&step_cycle[PUBLISH], UINT64_MAX - 1);
    }

    uint64_t bad = 0;
    uint64_t k0 = seed ^ ((uint64_t)(me & ~1) << 40) ^ 0xabcdefull;
    streamer_t w = {.peer = peer, .len = BUCKET};
    pthread_t wt;
    if (initiator) {
        w.remote = (char *)(uintptr_t)area_addr + slen;   /* A */
        w.src = src + slen;
        atomic_store(&w.idle, 1);
        tu_fill(src, slen, k0, 0);
        CHECK(pthread_create(&wt, NULL, stream_main, &w) == 0, "pthread_create", "0");
    }
    long c = 0;
    for (int more = cycles > 0 && (initiator || target); more; c++) {
        uint64_t key = seed ^ ((uint64_t)(me & ~1) << 40) ^ (uint64_t)c;
        if (initiator) {
            char *remote = (char *)(uintptr_t)area_addr;
            tu_fill(src + slen, BUCKET, key, slen);
            CHECK_OK(fh_put(peer, remote, src, FRAME));   /* A's region exists */
            atomic_store(&w.go, 1);
            step(peer, GO, (uint64_t)c, 0);
            tu_wait_for(&step_cycle[PUBLISH], (uint64_t)c);   /* the REVOKE comes first */
            stream_stop(&w);
            CHECK_OK(fh_put(peer, remote, src, FRAME));   /* what the target checks */
            fh_peer_stats_t now = FH_PEER_STATS_INIT;
            CHECK_OK(fh_stats_peer(me, &now));
            more = c + 1 < cycles || (now.reg_revoked_busy == 0 && c + 1 < max_cycles);
            step(peer, DONE, (uint64_t)c, (uint64_t)more);
            tu_wait_for(&step_cycle[CHECKED], (uint64_t)c);   /* before the next fill */
        } else {
            tu_wait_for(&step_cycle[GO], (uint64_t)c);
            char *A = area + slen;
            char *q = mmap(A, BUCKET, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            CHECK(q == A, "mmap MAP_FIXED", "%p, saw %p", (void *)A, (void *)q);
            memset(A, 0xee, BUCKET);
            step(peer, PUBLISH, (uint64_t)c, (uint64_t)(uintptr_t)area);
            tu_wait_for(&step_cycle[DONE], (uint64_t)c);
            more = done_more != 0;
            for (size_t k = 0; k < slen; k++)
                bad += (uint8_t)area[k] != tu_pat(k0, k);
            for (size_t k = slen; k < FRAME; k++)
                bad += (uint8_t)area[k] != tu_pat(key, k);
            step(peer, CHECKED, (uint64_t)c, 0);
        }
    }
    long streamed = w.puts;
    if (initiator) {
        atomic_store(&w.quit, 1);
        CHECK(pthread_join(wt, NULL) == 0, "pthread_join", "0");
    }

    fh_peer_stats_t st = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(me, &st));
    if (initiator || target)
        TU_LOG("revoke_busy: role=%s cycles=%ld nbi_puts=%ld corrupted_bytes=%llu "
               "revoked=%llu revoked_busy=%llu revokes_sent=%llu\n",
               target ? "target" : "initiator", c, streamed, (unsigned long long)bad,
               (unsigned long long)st.reg_revoked, (unsigned long long)st.reg_revoked_busy,
               (unsigned long long)st.reg_revokes_sent);
    uint64_t total = tu_job_sum(bad);
    CHECK(total == 0, "revoke_busy", "0 corrupted bytes, saw %llu",
          (unsigned long long)total);
    if (initiator && cycles > 0) {
        CHECK(st.reg_revoked > 0, "revocations", "> 0 on the initiator, saw 0");
        CHECK(st.reg_revoked_busy > 0, "busy revocations",
              "> 0 (a REVOKE finding RDMA in flight) after %ld cycles (the most "
              "--max-cycles allows) and %ld NBI puts, saw 0", c, streamed);
        long h = atomic_load(&hits_after_revoke);
        CHECK(h == 0, "hits after a busy revocation",
              "0 (a REVOKE that finds a cached reference busy stops its hits), "
              "saw %ld in %llu busy revocations", h,
              (unsigned long long)st.reg_revoked_busy);
    }
    CHECK_OK(fh_barrier());
    free(src);
    CHECK_OK(fh_finalize());
    TU_SAY("PASS revoke_busy_test\n");
    return 0;
}
