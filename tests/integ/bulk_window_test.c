/*
 * bulk_window_test.c -- the path's bulk budget under FH_REG_STRATEGY=firehose
 * (firehose/reg/services.h, FH_BULK_*; docs/reliability.md, "A small
 * operation waits for a bounded amount of bulk"), read through the test
 * hooks (FH_TP_BULK_POSTED: the path's bulk bytes in flight each time a
 * bulk chunk is posted).  Rank 0, one thread, resident working set:
 *   1. 64 NBI gets of FH_BULK_MIN (64 KiB) before one fh_wait_nbi: the
 *      budget is bytes, so more than FH_BULK_AHEAD of them are in flight
 *      together (it counted pieces: never more than FH_BULK_AHEAD, which
 *      held 64-256 KiB gets to a fraction of pin-everything's rate);
 *   2. 32 NBI puts of 1 MiB and 4 of 4 MiB: never more than FH_BULK_BYTES
 *      of bulk in flight on the path (the bound itself);
 *   3. the bytes: a 4 MiB get returns what the puts wrote.
 * Rank 1 only serves.
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "firehose/internal.h"     /* fh_test_hook, FH_BULK_* */

#define BIG ((size_t)4 << 20)

static size_t high;         /* highest bulk bytes seen (rank 0's one thread) */
static unsigned posted;

static void hook(enum fh_test_point where)
{
    if (where != FH_TP_BULK_POSTED)
        return;
    posted++;
    if (fh_test_bulk_bytes > high)
        high = fh_test_bulk_bytes;
}

int main(int argc, char **argv)
{
    fh_test_hook = hook;
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("bulk_window_test");
    fh_seg_t seg;
    char *mine;
    CHECK_OK(fh_segment_create(2 * BIG, &seg, (void **)&mine));
    char *remote;
    CHECK_OK(fh_segment_query(seg, 1, (void **)&remote, NULL));
    if (fh_rank() == 0) {
        char *local = mine + BIG;
        for (size_t i = 0; i < BIG; i++)
            local[i] = (char)(i * 7 + 1);
        CHECK_OK(fh_put(1, remote, local, BIG));      /* resident from here on */
        high = 0;
        for (int i = 0; i < 64; i++)
            CHECK_OK(fh_get_nbi(local + (size_t)i * FH_BULK_MIN, 1, remote, FH_BULK_MIN));
        CHECK_OK(fh_wait_nbi());
        CHECK(high > FH_BULK_AHEAD * FH_BULK_MIN, "64 KiB gets in flight together",
              "more than %u x 64 KiB (bytes, not pieces, are bounded), saw %zu bytes at most",
              FH_BULK_AHEAD, high);
        high = 0;
        unsigned before = posted;
        for (int i = 0; i < 32; i++)
            CHECK_OK(fh_put_nbi(1, remote, local, (size_t)1 << 20));
        for (int i = 0; i < 4; i++)
            CHECK_OK(fh_put_nbi(1, remote, local, BIG));
        CHECK_OK(fh_wait_nbi());
        CHECK(posted - before >= 48, "bulk chunks posted", "32 + 4 x 4, saw %u",
              posted - before);
        CHECK(high <= FH_BULK_BYTES, "bulk bytes in flight on the path",
              "at most FH_BULK_BYTES (%zu), saw %zu", (size_t)FH_BULK_BYTES, high);
        memset(mine, 0, BIG);
        CHECK_OK(fh_get(mine, 1, remote, BIG));
        CHECK(memcmp(mine, local, BIG) == 0, "4 MiB get", "the bytes the puts wrote");
        TU_SAY("bulk_window_test: highest bulk in flight %zu bytes over %u chunks\n", high,
               posted);
    }
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    CHECK_OK(fh_finalize());
    TU_SAY("PASS bulk_window_test\n");
    return 0;
}
