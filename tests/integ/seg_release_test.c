/*
 * seg_release_test.c -- fh_segment_destroy gives the memory back (issue 19,
 * item 1): a loop that creates a segment, touches every page of it, has
 * peers put into and get from it, and destroys it must keep the resident
 * size of the process bounded, under every registration strategy
 * (seg_release_test.sh runs firehose and pin-everything).
 *
 * Each cycle c:
 *   1. fh_segment_create(--size) and write every page of our piece;
 *   2. put a pattern keyed by (our rank, c, slot) into --slots places of the
 *      next rank's piece, spread over the whole piece (so the target's cache
 *      registers regions that we hold firehoses on), twice (the second is a
 *      hit), and get it back;
 *   3. barrier, then check that the previous rank's pattern of cycle c is in
 *      our piece -- a put through a key of an earlier cycle's segment (at the
 *      same address, if the kernel gives it back) would leave it wrong;
 *   4. fh_segment_destroy; a put to the old address is FH_ERR_OUT_OF_SEGMENT.
 * The resident size (/proc/self/statm) is read after the first cycle (the
 * baseline: the runtime's own allocations are warm by then) and after the
 * last.  PASS iff it grew by less than --bound (default: two segment sizes;
 * keeping every destroyed segment would grow it by cycles-1 segments).
 * Every rank prints
 *   seg_release: rss_first=X MiB rss_last=Y MiB growth=Z MiB bound=B MiB
 *
 * Usage: seg_release_test [--size BYTES] [--cycles N] [--slots N]
 *                         [--bound BYTES]
 */
#include "testutil.h"

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    CHECK(f != NULL, "/proc/self/statm", "a readable file, saw none");
    CHECK(fscanf(f, "%lu %lu", &size, &res) == 2, "/proc/self/statm",
          "two numbers, saw something else");
    fclose(f);
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("seg_release_test");
    tu_seed_init();
    size_t size = (size_t)tu_opt(argc, argv, "--size", 64L << 20);
    long cycles = tu_opt(argc, argv, "--cycles", 8);
    long slots = tu_opt(argc, argv, "--slots", 8);
    size_t bound = (size_t)tu_opt(argc, argv, "--bound", (long)(2 * size));
    int me = fh_rank(), n = fh_nranks();
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    const size_t blk = 4096;
    CHECK(cycles >= 2 && slots >= 1 && size >= (size_t)slots * blk, "options",
          "cycles >= 2, slots >= 1, size >= slots * 4096, saw %ld, %ld, %zu", cycles,
          slots, size);
    size_t stride = size / (size_t)slots / blk * blk;
    uint8_t *out = malloc(blk), *in = malloc(blk);
    CHECK(out && in, "malloc", "two buffers, saw NULL");
    size_t rss_first = 0, rss_last = 0;

    for (long c = 0; c < cycles; c++) {
        fh_seg_t seg;
        uint8_t *mine;
        void *rbase;
        size_t rsize;
        CHECK_OK(fh_segment_create(size, &seg, (void **)&mine));
        memset(mine, 0xa5, size);    /* every page resident */
        CHECK_OK(fh_segment_query(seg, next, &rbase, &rsize));
        CHECK(rsize == size, "peer piece", "%zu bytes, saw %zu", size, rsize);
        for (int pass = 0; pass < 2; pass++)
            for (long s = 0; s < slots; s++) {
                uint8_t *dst = (uint8_t *)rbase + (size_t)s * stride;
                uint64_t key = tu_key((uint64_t)me, (uint64_t)c, (uint64_t)s);
                tu_fill(out, blk, key, 0);
                CHECK_OK(fh_put(next, dst, out, blk));
                CHECK_OK(fh_get(in, next, dst, blk));
                TU_VERIFY(in, blk, key, 0, "cycle %ld slot %ld: get back from rank %d",
                          c, s, next);
            }
        CHECK_OK(fh_barrier());
        for (long s = 0; s < slots; s++)
            TU_VERIFY(mine + (size_t)s * stride, blk,
                      tu_key((uint64_t)prev, (uint64_t)c, (uint64_t)s), 0,
                      "cycle %ld slot %ld: rank %d's put into our piece", c, s, prev);
        CHECK_OK(fh_segment_destroy(seg));
        CHECK_RC(fh_put(next, rbase, out, blk), FH_ERR_OUT_OF_SEGMENT);
        if (c == 0)
            rss_first = rss_bytes();
    }
    rss_last = rss_bytes();
    size_t growth = rss_last > rss_first ? rss_last - rss_first : 0;
    TU_LOG("seg_release: rss_first=%zu MiB rss_last=%zu MiB growth=%zu MiB bound=%zu MiB "
           "(%ld cycles of %zu MiB)\n", rss_first >> 20, rss_last >> 20, growth >> 20,
           bound >> 20, cycles, size >> 20);
    CHECK(growth < bound, "resident size after destroying every segment",
          "growth below %zu MiB, saw %zu MiB (%zu -> %zu MiB over %ld cycles of %zu MiB)",
          bound >> 20, growth >> 20, rss_first >> 20, rss_last >> 20, cycles,
          size >> 20);
    free(out);
    free(in);
    CHECK_OK(fh_barrier());
    TU_SAY("PASS seg_release_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
