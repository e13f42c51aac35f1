/*
 * bulk_window_test.c -- the path's bulk budget under FH_REG_STRATEGY=firehose
 * (firehose/reg/services.h, FH_BULK_*; docs/reliability.md, "A small
 * operation waits for a bounded amount of bulk"), read through the test
 * hooks (FH_TP_BULK_POSTED: the path's bulk bytes in flight each time a
 * bulk chunk is posted).  Rank 0, FH_MAX_THREADS=1 (bulk_window_test.sh),
 * resident working set:
 *   1. 64 NBI gets of FH_BULK_MIN (64 KiB) before one fh_wait_nbi: more
 *      than FH_BULK_AHEAD of them are in flight together (the budget
 *      counted pieces: never more than FH_BULK_AHEAD, which held 64-256
 *      KiB gets to a fraction of pin-everything's rate);
 *   2. the thread alone on its path: 32 NBI puts of 1 MiB and 4 of 4 MiB
 *      go out without the budget -- more than FH_BULK_BYTES in flight
 *      together (the budget applied to every path: two 4 MiB transfers
 *      flew against pin-everything's whole window; issue 30);
 *   3. a second thread bound to the same path (it made one call and waits
 *      outside the runtime): the same puts never have more than
 *      FH_BULK_BYTES of bulk in flight on the path (the bound itself);
 *   4. the bytes: a 4 MiB get returns what the puts wrote.
 * Under a comparison strategy (FH_REG_STRATEGY=pin-everything, rendezvous,
 * rendezvous-cache: their RDMA goes through fh_post, firehose/rma_post.c)
 * only 3 and 4: a thread alone on its path posts there as before, without
 * piece records, so there is nothing to count.
 * Rank 1 only serves.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
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

/* 32 NBI puts of 1 MiB and 4 of 4 MiB, completed; high = the most bulk
 * bytes seen in flight meanwhile.  Returns the bulk chunks posted. */
static unsigned stream(char *remote, char *local)
{
    high = 0;
    unsigned before = posted;
    for (int i = 0; i < 32; i++)
        CHECK_OK(fh_put_nbi(1, remote, local, (size_t)1 << 20));
    for (int i = 0; i < 4; i++)
        CHECK_OK(fh_put_nbi(1, remote, local, BIG));
    CHECK_OK(fh_wait_nbi());
    return posted - before;
}

/* Binds to rank 0's one thread path (one call), then waits outside the
 * runtime until the main thread is done: 0 -> 1 (bound) -> 2 (go). */
static _Atomic int nb_state;

static void *neighbour(void *arg)
{
    (void)arg;
    CHECK_OK(fh_poll());
    atomic_store(&nb_state, 1);
    while (atomic_load(&nb_state) != 2)
        sched_yield();
    return NULL;
}

/* Parts 1 and 2 (firehose): rank 0's one thread alone on its path.
 * Returns the most bulk bytes seen in flight in part 2. */
static size_t alone_on_path(char *remote, char *local)
{
    /* 1: a window of 64 KiB gets. */
    high = 0;
    for (int i = 0; i < 64; i++)
        CHECK_OK(fh_get_nbi(local + (size_t)i * FH_BULK_MIN, 1, remote, FH_BULK_MIN));
    CHECK_OK(fh_wait_nbi());
    CHECK(high > FH_BULK_AHEAD * FH_BULK_MIN, "64 KiB gets in flight together",
          "more than %u x 64 KiB (bytes, not pieces, are bounded), saw %zu bytes at most",
          FH_BULK_AHEAD, high);
    /* 2: bulk puts. */
    unsigned c2 = stream(remote, local);
    size_t alone = high;
    CHECK(c2 >= 48, "bulk chunks posted, alone on the path", "32 + 4 x 4, saw %u", c2);
    CHECK(alone > FH_BULK_BYTES, "bulk in flight from the path's only thread",
          "more than FH_BULK_BYTES (%zu): no neighbour to bound it for, saw %zu",
          (size_t)FH_BULK_BYTES, alone);
    return alone;
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
        const char *strat = getenv("FH_REG_STRATEGY");
        const bool firehose = strat == NULL || strcmp(strat, "firehose") == 0;
        size_t alone = 0;
        if (firehose)
            alone = alone_on_path(remote, local);
        /* 3: a neighbour bound to the path. */
        pthread_t nb;
        CHECK(pthread_create(&nb, NULL, neighbour, NULL) == 0, "pthread_create", "0");
        while (atomic_load(&nb_state) != 1)
            sched_yield();
        unsigned c3 = stream(remote, local);
        atomic_store(&nb_state, 2);
        pthread_join(nb, NULL);
        CHECK(c3 >= 48, "bulk pieces posted, path shared", "32 + 4 x 4, saw %u", c3);
        CHECK(high <= FH_BULK_BYTES, "bulk bytes in flight on a path two threads share",
              "at most FH_BULK_BYTES (%zu), saw %zu", (size_t)FH_BULK_BYTES, high);
        TU_SAY("bulk_window_test: %s, highest bulk in flight %zu bytes alone, %zu shared\n",
               firehose ? "firehose" : strat, alone, high);
        memset(mine, 0, BIG);
        CHECK_OK(fh_get(mine, 1, remote, BIG));
        CHECK(memcmp(mine, local, BIG) == 0, "4 MiB get", "the bytes the puts wrote");
    }
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    CHECK_OK(fh_finalize());
    TU_SAY("PASS bulk_window_test\n");
    return 0;
}
