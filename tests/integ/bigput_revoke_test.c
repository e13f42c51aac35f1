/*
 * bigput_revoke_test.c -- a large put over a mix of resident and cold
 * buckets lands byte-exact while one of its buckets is invalidated at the
 * target (issue 30; docs/firehose-cache.md, "Memory that is freed or
 * reused").
 *
 * Meant for FH_REG_STRATEGY=firehose FH_SEGMENT=everything
 * FH_BUCKET_SIZE=4k (bigput_revoke_test.sh): a frame is 16 buckets = 64
 * KiB, and the put covers AREA = 4 frames, so it goes out as several chunks,
 * each over firehoses of several regions, some made by earlier small puts
 * (resident, fragmented: the cache merges those it alone uses, see
 * fhc_initiator_step.c "absorb") and some not yet registered (cold: moves).
 * Ranks pair up: even rank 2k initiates, 2k+1 is the target.  Cycle c:
 *   target     maps a fresh AREA (nothing of it registered), fills it with
 *              0xee, sends AREA with its address;
 *   initiator  fills its source with pattern c, warms a random third of
 *              the buckets with blocking puts of one or two buckets each
 *              (the same bytes the large put carries: resident, idle), starts
 *              NBI puts of one bucket on a random eighth (the large put
 *              finds their firehoses busy, or their moves pending), picks a
 *              bucket X, sends GO(X) and at once starts the large NBI put
 *              over all of AREA;
 *   target     on GO maps fresh pages over X (mmap MAP_FIXED), fills them
 *              with 0xee and sends REMAPPED: its runtime entry turns the
 *              monitor's event into a REVOKE of X's region (if one exists)
 *              and waits for the ack, which the initiator sends only once
 *              no RDMA through that region is in flight;
 *   initiator  polls for REMAPPED (handling the REVOKE), waits for its NBI
 *              put -- which must complete without error whatever it met --
 *              puts bucket X once more (its old pages are gone; the put may
 *              have landed in them), and sends DONE;
 *   target     checks every byte of AREA against pattern c, sends CHECKED
 *              and unmaps AREA (more revocations, at its next entry).
 * No byte may differ, no call may fail, and the initiator must have seen
 * revocations (reg_revoked > 0).
 *
 * Usage: bigput_revoke_test [--cycles N]
 */
#include "testutil.h"

#define H_STEP (FH_AM_USER_FIRST + 0)
enum { AREA_READY, GO, REMAPPED, DONE, CHECKED, NSTEPS };

#define BUCKET ((size_t)4096)          /* = FH_BUCKET_SIZE */
#define FRAME  (16 * BUCKET)
#define NB     64u                     /* buckets of AREA */
#define AREA   (NB * BUCKET)           /* 4 frames */

static volatile uint64_t step_cycle[NSTEPS] = {UINT64_MAX, UINT64_MAX, UINT64_MAX,
                                               UINT64_MAX, UINT64_MAX};
static volatile uint64_t step_arg[NSTEPS];

static void h_step(fh_token_t t, void *b, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)b; (void)n;
    CHECK(na == 3 && a[0] < NSTEPS, "step message", "3 args, step < %d; saw %u args",
          NSTEPS, na);
    step_arg[a[0]] = a[2];
    __atomic_store_n(&step_cycle[a[0]], a[1], __ATOMIC_RELEASE);
}

static void step(int peer, int st, uint64_t c, uint64_t arg)
{
    uint64_t a[3] = {(uint64_t)st, c, arg};
    CHECK_OK(fh_am_request_short(peer, H_STEP, a, 3));
}

int main(int argc, char **argv)
{
    long cycles = tu_scale(tu_opt(argc, argv, "--cycles", 20));
    CHECK_OK(fh_am_register(H_STEP, h_step, "bigput-revoke-step"));
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("bigput_revoke_test");
    int me = fh_rank(), N = fh_nranks();
    uint64_t seed = tu_seed_init();
    int initiator = me % 2 == 0 && me + 1 < N, target = me % 2 == 1;
    int peer = initiator ? me + 1 : me - 1;
    char *src = NULL;
    if (initiator) {
        src = malloc(AREA);
        CHECK(src != NULL, "malloc", "AREA bytes, saw NULL");
    }
    tu_rng_t rng = tu_rng_make(seed, (uint64_t)(me & ~1), 0x5ca1ab1eull, 30);
    uint64_t bad = 0, warmed = 0;
    CHECK_OK(fh_barrier());
    for (long c = 0; c < cycles && (initiator || target); c++) {
        uint64_t key = tu_key((uint64_t)(me & ~1), (uint64_t)c, 30);
        if (target) {
            char *area = tu_reserve(AREA, FRAME);
            memset(area, 0xee, AREA);
            step(peer, AREA_READY, (uint64_t)c, (uint64_t)(uintptr_t)area);
            tu_wait_for(&step_cycle[GO], (uint64_t)c);
            char *x = area + step_arg[GO] * BUCKET;
            char *q = mmap(x, BUCKET, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            CHECK(q == x, "mmap MAP_FIXED", "%p, saw %p", (void *)x, (void *)q);
            memset(x, 0xee, BUCKET);
            step(peer, REMAPPED, (uint64_t)c, 0);
            tu_wait_for(&step_cycle[DONE], (uint64_t)c);
            size_t first = tu_check(area, AREA, key, 0);
            if (first != SIZE_MAX) {
                for (size_t k = first; k < AREA; k++)
                    bad += (uint8_t)area[k] != tu_pat(key, k);
                TU_LOG("bigput_revoke: cycle %ld: first bad byte at %zu (bucket %zu; "
                       "X = %llu)\n", c, first, first / BUCKET,
                       (unsigned long long)step_arg[GO]);
            }
            step(peer, CHECKED, (uint64_t)c, 0);
            CHECK(munmap(area, AREA) == 0, "munmap", "0");
        } else {
            tu_wait_for(&step_cycle[AREA_READY], (uint64_t)c);
            char *remote = (char *)(uintptr_t)step_arg[AREA_READY];
            tu_fill(src, AREA, key, 0);
            for (size_t b = 0; b < NB; b++) {     /* a random third: resident, idle */
                if (tu_rng_below(&rng, 3) != 0)
                    continue;
                size_t len = (b + 1 < NB && tu_rng_below(&rng, 2)) ? 2 * BUCKET : BUCKET;
                CHECK_OK(fh_put(peer, remote + b * BUCKET, src + b * BUCKET, len));
                warmed++;
            }
            for (size_t b = 0; b < NB; b++) {     /* a random eighth: still in flight */
                if (tu_rng_below(&rng, 8) == 0) {
                    CHECK_OK(fh_put_nbi(peer, remote + b * BUCKET, src + b * BUCKET, BUCKET));
                    warmed++;
                }
            }
            uint64_t x = tu_rng_below(&rng, NB);
            step(peer, GO, (uint64_t)c, x);
            CHECK_OK(fh_put_nbi(peer, remote, src, AREA));
            tu_wait_for(&step_cycle[REMAPPED], (uint64_t)c);
            CHECK_OK(fh_wait_nbi());
            CHECK_OK(fh_put(peer, remote + x * BUCKET, src + x * BUCKET, BUCKET));
            step(peer, DONE, (uint64_t)c, 0);
            tu_wait_for(&step_cycle[CHECKED], (uint64_t)c);
        }
    }
    fh_peer_stats_t st = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(me, &st));
    if (initiator || target)
        TU_LOG("bigput_revoke: role=%s cycles=%ld warm_puts=%llu corrupted_bytes=%llu "
               "revoked=%llu revoked_busy=%llu moves=%llu\n",
               target ? "target" : "initiator", cycles, (unsigned long long)warmed,
               (unsigned long long)bad, (unsigned long long)st.reg_revoked,
               (unsigned long long)st.reg_revoked_busy, (unsigned long long)st.reg_moves);
    uint64_t total = tu_job_sum(bad);
    CHECK(total == 0, "bigput_revoke", "0 corrupted bytes, saw %llu",
          (unsigned long long)total);
    if (initiator && cycles > 0)
        CHECK(st.reg_revoked > 0, "revocations", "> 0 on the initiator, saw 0");
    CHECK_OK(fh_barrier());
    free(src);
    CHECK_OK(fh_finalize());
    TU_SAY("PASS bigput_revoke_test\n");
    return 0;
}
