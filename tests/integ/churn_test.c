/*
 * churn_test.c -- memory freed and reused at the same virtual addresses
 * must never be reached through a stale registration (issue 3; design in
 * docs/firehose-cache.md, "Memory that is freed or reused").
 *
 * Meant for FH_REG_STRATEGY=firehose FH_SEGMENT=everything (churn_test.sh).
 * Ranks pair up: even rank 2k is the initiator, 2k+1 the target (an odd last
 * rank only takes part in the barriers).  Each cycle:
 *   target     frees its buffer and gets memory back AT THE SAME ADDRESS,
 *              one of four ways in turn:
 *                0 munmap + mmap(MAP_FIXED_NOREPLACE) at the old address
 *                  (if another mapping took the hole, elsewhere; counted)
 *                1 mmap(MAP_FIXED) over the live mapping
 *                2 madvise(MADV_DONTNEED) (same mapping, new pages)
 *                3 free + malloc of a block above the mmap threshold (the
 *                  address repeats when glibc hands the same range back;
 *                  counted, not required)
 *              then publishes the address by AM (PUBLISH) to the initiator;
 *   initiator  also frees and re-gets ITS source and destination buffers the
 *              same ways (so its cached local pins go stale), fills the
 *              source with the cycle's pattern, puts it into the target's
 *              buffer, gets it back into the destination buffer, checks the
 *              destination, and tells the target (DONE);
 *   target     checks that its buffer holds the pattern.
 * At the end the target unmaps its buffer and publishes it once more: the
 * initiator's put must fail with FH_ERR_OUT_OF_SEGMENT (refused by the
 * target, nothing registered).
 * Every byte that differs is counted; one line per rank reports
 *   churn: cycles=N corrupted_bytes=X (remote=... local=...) reuse=...
 * Default: PASS iff no byte was corrupted.  --expect-corruption (the
 * negative control, FH_MEMMON=off) inverts that: PASS iff some byte was.
 *
 * Why the negative control only means something on a pinning conduit: with
 * FH_MEMMON=off a stale registration keeps the OLD physical pages pinned,
 * and only a NIC that DMAs to pinned pages (verbs: ibv on Soft-RoCE in the
 * VM, tests/vm/churn-rxe.sh) then writes where the program no longer looks.
 * libfabric's tcp and shm providers copy through the virtual address in the
 * target process, so on ofi the test passes with FH_MEMMON=off as well.
 *
 * Buffers are whole, bucket-aligned buckets (--bucket, default 4k = the
 * FH_BUCKET_SIZE churn_test.sh uses) inside a reserved area, so the cache
 * can register and watch them.
 *
 * --monitor: the memory monitor runs (FH_MEMMON=auto/uffd): the target must
 * also report invalidations > 0.
 *
 * Usage: churn_test [--cycles N] [--size BYTES] [--bucket BYTES]
 *                   [--expect-corruption] [--monitor]
 */
#include "testutil.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define H_PUBLISH (FH_AM_USER_FIRST + 0)
#define H_DONE    (FH_AM_USER_FIRST + 1)

static volatile uint64_t pub_addr, pub_cycle = UINT64_MAX, done_cycle = UINT64_MAX;

static void h_publish(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok; (void)buf; (void)n;
    CHECK(na == 2, "PUBLISH", "2 args, saw %u", na);
    pub_addr = a[0];
    __atomic_store_n(&pub_cycle, a[1], __ATOMIC_RELEASE);
}

static void h_done(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok; (void)buf; (void)n;
    CHECK(na == 1, "DONE", "1 arg, saw %u", na);
    __atomic_store_n(&done_cycle, a[0], __ATOMIC_RELEASE);
}

typedef struct churn_buf {
    char *p;            /* current address (what is published / used) */
    char *home;         /* the reserved, aligned address */
    size_t len;
    char *mblock;       /* way 3: the malloc'd block (p is inside it) */
    size_t align;
    long reused, moved; /* way 0/3: address came back the same / not */
} churn_buf_t;

/* Maps b->len bytes at b->home again, which must be free now; if another
 * mapping took the hole meanwhile, moves home elsewhere (never clobbers). */
static void remap_home(churn_buf_t *b)
{
    char *q = mmap(b->home, b->len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (q == b->home) {
        b->reused++;
    } else {
        if (q != MAP_FAILED)
            munmap(q, b->len);
        b->home = tu_reserve(b->len, b->align);
        b->moved++;
    }
    b->p = b->home;
}

/* Frees b's memory and gets memory back, way `how` (see the top). */
static void churn(churn_buf_t *b, int how)
{
    if (b->mblock) {               /* leaving way 3: back to the home area */
        free(b->mblock);
        b->mblock = NULL;
        b->p = b->home;
        remap_home(b);
        return;
    }
    switch (how) {
    case 0:
        CHECK(munmap(b->p, b->len) == 0, "munmap", "0, saw an error");
        remap_home(b);
        break;
    case 1: {
        char *q = mmap(b->p, b->len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        CHECK(q == b->p, "mmap MAP_FIXED", "%p, saw %p", (void *)b->p, (void *)q);
        break;
    }
    case 2:
        CHECK(madvise(b->p, b->len, MADV_DONTNEED) == 0, "madvise", "0, saw an error");
        break;
    case 3: {
        /* malloc above the mmap threshold: glibc mmaps and, on free,
         * munmaps.  The first block replaces the home mapping's place only
         * by chance; count how often the address repeats. */
        static char *last;
        size_t want = b->len + b->align;
        CHECK(munmap(b->home, b->len) == 0, "munmap", "0, saw an error");
        b->mblock = malloc(want + (256u << 10));
        CHECK(b->mblock != NULL, "malloc", "a block, saw NULL");
        b->p = (char *)(((uintptr_t)b->mblock + b->align - 1) & ~(uintptr_t)(b->align - 1));
        if (b->p == last)
            b->reused++;
        else
            b->moved++;
        last = b->p;
        break;
    }
    }
}

int main(int argc, char **argv)
{
    long cycles = tu_opt(argc, argv, "--cycles", 10000);
    size_t size = (size_t)tu_opt(argc, argv, "--size", 16384);
    size_t bucket = (size_t)tu_opt(argc, argv, "--bucket", 4096);
    int expect_corruption = tu_flag(argc, argv, "--expect-corruption");
    int monitor = tu_flag(argc, argv, "--monitor");
    CHECK_OK(fh_am_register(H_PUBLISH, h_publish, "churn-publish"));
    CHECK_OK(fh_am_register(H_DONE, h_done, "churn-done"));
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("churn_test");
    int me = fh_rank(), N = fh_nranks();
    uint64_t seed = tu_seed_init();
    size = (size + bucket - 1) & ~(bucket - 1);
    int initiator = me % 2 == 0 && me + 1 < N, target = me % 2 == 1;
    int peer = initiator ? me + 1 : me - 1;

    churn_buf_t tb = {0}, src = {0}, dst = {0};
    churn_buf_t *mine[2] = {&tb, NULL};
    if (target) {
        tb.home = tb.p = tu_reserve(size, bucket);
        tb.len = size;
        tb.align = bucket;
    } else if (initiator) {
        src.home = src.p = tu_reserve(size, bucket);
        dst.home = dst.p = tu_reserve(size, bucket);
        src.len = dst.len = size;
        src.align = dst.align = bucket;
        mine[0] = &src;
        mine[1] = &dst;
    }
    CHECK_OK(fh_barrier());

    uint64_t bad_remote = 0, bad_local = 0;
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    for (long c = 0; c < cycles && (initiator || target); c++) {
        int how = (int)(c % 4);
        uint64_t key = seed ^ ((uint64_t)me << 40) ^ (uint64_t)c;
        if (target) {
            churn(&tb, how);
            memset(tb.p, 0xee, size);            /* the program's new data */
            uint64_t a[2] = {(uint64_t)(uintptr_t)tb.p, (uint64_t)c};
            CHECK_OK(fh_am_request_short(peer, H_PUBLISH, a, 2));
            tu_wait_for(&done_cycle, (uint64_t)c);
            uint64_t pkey = seed ^ ((uint64_t)peer << 40) ^ (uint64_t)c;
            for (size_t k = 0; k < size; k++)
                bad_remote += (uint8_t)tb.p[k] != tu_pat(pkey, k);
        } else {
            churn(&src, how);
            churn(&dst, (how + 1) % 4);
            tu_fill(src.p, size, key, 0);
            memset(dst.p, 0x11, size);
            tu_wait_for(&pub_cycle, (uint64_t)c);
            char *remote = (char *)(uintptr_t)pub_addr;
            /* two puts (two chunks when size > R) and one get back */
            size_t half = size / 2;
            CHECK_OK(fh_put(peer, remote, src.p, half));
            CHECK_OK(fh_put(peer, remote + half, src.p + half, size - half));
            CHECK_OK(fh_get(dst.p, peer, remote, size));
            for (size_t k = 0; k < size; k++)
                bad_local += (uint8_t)dst.p[k] != tu_pat(key, k);
            uint64_t a[1] = {(uint64_t)c};
            CHECK_OK(fh_am_request_short(peer, H_DONE, a, 1));
        }
    }
    /* Security: with FH_SEGMENT=everything the target still refuses memory
     * that is not mapped (error to the requester, a log line, nothing
     * registered).  Only with the monitor: with FH_MEMMON=off the initiator
     * still holds a (stale) firehose there and its put would hit. */
    if (cycles > 0 && target && monitor) {
        char *gone = tu_reserve(size, bucket);     /* (tb.p may be malloc's) */
        CHECK(munmap(gone, size) == 0, "munmap", "0, saw an error");
        uint64_t a[2] = {(uint64_t)(uintptr_t)gone, (uint64_t)cycles};
        CHECK_OK(fh_am_request_short(peer, H_PUBLISH, a, 2));
        tu_wait_for(&done_cycle, (uint64_t)cycles);
    } else if (cycles > 0 && initiator && monitor) {
        tu_wait_for(&pub_cycle, (uint64_t)cycles);
        int rc = fh_put(peer, (char *)(uintptr_t)pub_addr, src.p, size);
        CHECK(rc == FH_ERR_OUT_OF_SEGMENT, "put to unmapped memory",
              "FH_ERR_OUT_OF_SEGMENT, saw %s", tu_errname(rc));
        uint64_t a[1] = {(uint64_t)cycles};
        CHECK_OK(fh_am_request_short(peer, H_DONE, a, 1));
    }
    double secs = (double)clock() / CLOCKS_PER_SEC - t0;
    uint64_t bad = bad_remote + bad_local;
    long reused = mine[0]->reused + (mine[1] ? mine[1]->reused : 0);
    long moved = mine[0]->moved + (mine[1] ? mine[1]->moved : 0);
    if (initiator || target)
        TU_LOG("churn: role=%s cycles=%ld size=%zu corrupted_bytes=%llu (remote=%llu "
               "local=%llu) munmap+malloc address reuse=%ld moved=%ld cpu=%.1fs\n",
               target ? "target" : "initiator", cycles, size, (unsigned long long)bad,
               (unsigned long long)bad_remote, (unsigned long long)bad_local, reused,
               moved, secs);
    fh_peer_stats_t st = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(me, &st));
    TU_LOG("churn: invalidations=%llu revokes_sent=%llu revoked=%llu\n",
           (unsigned long long)st.reg_invalidations,
           (unsigned long long)st.reg_revokes_sent, (unsigned long long)st.reg_revoked);

    /* Everyone's verdict: the job's total of corrupted bytes. */
    uint64_t total = tu_job_sum(bad);
    TU_SAY("churn: job total corrupted_bytes=%llu over %ld cycles (%s)\n",
           (unsigned long long)total, cycles,
           expect_corruption ? "negative control: corruption expected" : "must be 0");
    if (expect_corruption)
        CHECK(total > 0, "negative control", "corrupted bytes > 0 with stale "
              "registrations, saw %llu", (unsigned long long)total);
    else
        CHECK(total == 0, "churn", "0 corrupted bytes, saw %llu", (unsigned long long)total);
    if (cycles > 0 && target && monitor)
        CHECK(st.reg_invalidations > 0, "invalidations",
              "> 0 on a target whose memory was freed %ld times, saw 0", cycles);
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_finalize());
    TU_SAY("PASS churn_test\n");
    return 0;
}
