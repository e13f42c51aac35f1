/*
 * memmon_overflow_test.c -- the runtime's answer to a full memory-monitor
 * ring is "invalidate everything" (docs/firehose-cache.md, "Memory that is
 * freed or reused").  Run with FH_SEGMENT=everything (firehose strategy):
 * rank 1's ordinary memory is registered on demand for rank 0's puts and
 * watched by rank 1's monitor.
 *
 * Rank 1 maps a keeper K (never freed) and areas A (200 pages) and B (1100
 * pages); rank 0 puts into all three, so rank 1 holds registrations of each
 * for it (bytes_pinned_remote).
 *   control: rank 1 unmaps A one page per munmap, with no firehose call in
 *     between (200 monitor events: fewer than the ring's 1024), then polls
 *     until A's registrations are released: K's and B's stay
 *     (bytes_pinned_remote > 0).
 *   overflow: the same with B (1100 events: more than the ring holds); the
 *     runtime must then drop every registration, K's included although K
 *     was never freed: bytes_pinned_remote reaches 0 (bounded wait).  A
 *     runtime that ignored the overflow would keep K and B's last pages.
 * Afterwards a put into K still delivers its bytes.
 *
 * Usage: memmon_overflow_test   (2 ranks)
 */
#include "testutil.h"

#define WAIT_S 60.0

static int me;

static fh_peer_stats_t own(void)
{
    fh_peer_stats_t s = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(me, &s));
    return s;
}

/* Rank 0: one put per 64 KiB of [p, p+len) of rank 1. */
static void put_into(char *p, size_t len, const char *src)
{
    for (size_t off = 0; off < len; off += 65536) {
        size_t n = len - off < 65536 ? len - off : 65536;
        CHECK_OK(fh_put(1, p + off, src, n));
    }
}

/* Rank 1: unmaps one page per munmap, without a firehose call. */
static void unmap_pagewise(char *p, size_t npages, size_t pg)
{
    for (size_t i = 0; i < npages; i++)
        CHECK(munmap(p + i * pg, pg) == 0, "munmap", "0");
}

/* Rank 1: polls until bytes_pinned_remote satisfies below(v); returns it. */
static uint64_t settle(uint64_t limit, const char *what)
{
    double t0 = tu_now();
    uint64_t v;
    while ((v = own().bytes_pinned_remote) > limit) {
        CHECK(tu_now() - t0 < WAIT_S, what, "bytes_pinned_remote <= %" PRIu64 " within "
              "%.0f s, saw %" PRIu64, limit, WAIT_S, v);
        CHECK_OK(fh_poll());
    }
    return v;
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("memmon_overflow_test");
    me = fh_rank();
    CHECK(fh_nranks() == 2, "rank count", "2, saw %d", fh_nranks());
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    enum { NA = 200, NB = 1100 };
    struct { char *k, *a, *b; } mine = {0}, all[2];
    if (me == 1) {
        mine.k = tu_reserve(65536, 1 << 20);
        mine.a = tu_reserve(NA * pg, 1 << 20);
        mine.b = tu_reserve(NB * pg, 1 << 20);
        memset(mine.k, 0, 65536);
        memset(mine.a, 0, NA * pg);
        memset(mine.b, 0, NB * pg);
    }
    CHECK_OK(fh_allgather(&mine, all, sizeof mine));
    char *src = malloc(65536);
    CHECK(src != NULL, "malloc", "memory");
    memset(src, 0x4b, 65536);
    if (me == 0) {
        put_into(all[1].k, 65536, src);
        put_into(all[1].a, NA * pg, src);
        put_into(all[1].b, NB * pg, src);
    }
    CHECK_OK(fh_barrier());
    if (me == 1) {
        fh_peer_stats_t s0 = own();
        CHECK(s0.bytes_pinned_remote >= 65536 + (NA + NB) * pg, "registrations for rank 0",
              "K, A and B registered (>= %zu bytes), saw %" PRIu64,
              65536 + (NA + NB) * pg, s0.bytes_pinned_remote);
        unmap_pagewise(mine.a, NA, pg);
        uint64_t v1 = settle(s0.bytes_pinned_remote - NA * pg, "control (200 unmaps)");
        CHECK(v1 >= 65536 + NB * pg, "control (200 unmaps)", "K's and B's registrations "
              "kept (>= %zu bytes), saw %" PRIu64, 65536 + NB * pg, v1);
        TU_LOG("control: bytes_pinned_remote %" PRIu64 " -> %" PRIu64 " after 200 unmaps\n",
               s0.bytes_pinned_remote, v1);
        unmap_pagewise(mine.b, NB, pg);
        uint64_t v2 = settle(0, "overflow (1100 unmaps): every registration dropped, "
                             "K's too");
        fh_peer_stats_t s2 = own();
        TU_LOG("overflow: bytes_pinned_remote %" PRIu64 " -> %" PRIu64 " after 1100 "
               "unmaps, invalidations %" PRIu64 "\n", v1, v2, s2.reg_invalidations);
        memset(mine.k, 0, 65536);
    }
    CHECK_OK(fh_barrier());
    if (me == 0)
        put_into(all[1].k, 65536, src);
    CHECK_OK(fh_barrier());
    if (me == 1)
        CHECK(tu_check_const(mine.k, 65536, 0x4b) == (size_t)-1, "put into K after the "
              "overflow", "every byte 0x4b");
    free(src);
    CHECK_OK(fh_finalize());
    TU_SAY("PASS memmon_overflow_test\n");
    return 0;
}
