/*
 * coll_threads_test.c -- collectives called by several threads of every
 * rank at once never deadlock (issue 19, item 4; the rule is in
 * include/firehose.h, "Collectives").
 *
 * Part 1, concurrent calls that agree: --threads threads per rank, --iters
 * rounds.  In each round the threads of a rank call, all at the same time
 * (they meet at a pthread barrier between the steps, so that siblings call
 * the same function at once),
 *   fh_segment_create (a size of its own), checking fh_segment_query of its
 *     own piece against the base it got;
 *   fh_barrier; then each puts a pattern into the next rank's piece of its
 *     segment and gets it back;
 *   fh_allgather of 8 bytes (rank, thread, round): out[r] must be a value
 *     rank r contributed in this round (which of r's threads pairs with
 *     ours is the runtime's choice);
 * then one thread destroys the round's segments in id order (the set of
 * ids is the same on every rank).
 * Part 2, calls that disagree (one thread): rank 0 calls fh_barrier while
 * the others call fh_allgather; then rank 0 destroys segment a while the
 * others destroy b.  Every call must return FH_ERR_STATE (never hang),
 * leave the segments alive, and the next agreeing calls must work.
 * The old runtime deadlocked in part 1 (the collective lock and the
 * bootstrap allgather were taken in different orders on different ranks);
 * fhrun --timeout bounds the run.
 *
 * Usage: coll_threads_test [--threads N] [--iters N]
 */
#include <pthread.h>

#include "testutil.h"

#define MAXT 8

static int nthreads, iters, me, np;
static pthread_barrier_t tbar;
static fh_seg_t round_seg[MAXT];

static void *worker(void *arg)
{
    int tid = (int)(intptr_t)arg;
    uint8_t out[256], in[256];
    uint64_t *all = calloc((size_t)np, sizeof *all);
    CHECK(all != NULL, "calloc", "memory, saw NULL");
    for (int it = 0; it < iters; it++) {
        size_t size = (size_t)(tid + 1) * 65536 + (size_t)me * 4096;
        fh_seg_t seg;
        void *base, *qb;
        size_t qs;
        CHECK_OK(fh_segment_create(size, &seg, &base));
        CHECK_OK(fh_segment_query(seg, me, &qb, &qs));
        CHECK(qb == base && qs == size, "own piece", "base %p size %zu, saw %p %zu",
              base, size, qb, qs);
        /* Every rank's creations are complete after the barrier.  The
         * pthread barriers make siblings call the same collective at once:
         * different ones racing would pair up differently on different
         * ranks (FH_ERR_STATE, part 2). */
        pthread_barrier_wait(&tbar);
        CHECK_OK(fh_barrier());
        pthread_barrier_wait(&tbar);
        int next = (me + 1) % np;
        CHECK_OK(fh_segment_query(seg, next, &qb, &qs));
        CHECK(qb != NULL && qs >= 65536, "peer piece", "at least 64 KiB, saw %p %zu", qb,
              qs);
        uint64_t key = tu_key((uint64_t)me, (uint64_t)it, (uint64_t)tid);
        tu_fill(out, sizeof out, key, 0);
        uint8_t *dst = (uint8_t *)qb + (size_t)tid * sizeof out;
        CHECK_OK(fh_put(next, dst, out, sizeof out));
        CHECK_OK(fh_get(in, next, dst, sizeof in));
        TU_VERIFY(in, sizeof in, key, 0, "round %d thread %d: round trip", it, tid);
        pthread_barrier_wait(&tbar);
        uint64_t v = ((uint64_t)me << 32) | ((uint64_t)it << 8) | (uint64_t)tid;
        CHECK_OK(fh_allgather(&v, all, sizeof v));
        for (int r = 0; r < np; r++)
            CHECK((all[r] >> 32) == (uint64_t)r && ((all[r] >> 8) & 0xffffff) ==
                  (uint64_t)it && (all[r] & 0xff) < (uint64_t)nthreads,
                  "allgather", "rank %d's entry of round %d, saw %#llx", r, it,
                  (unsigned long long)all[r]);
        round_seg[tid] = seg;
        pthread_barrier_wait(&tbar);
        if (tid == 0) {
            /* Destroys that differ must not race: one thread, id order. */
            fh_seg_t s[MAXT];
            memcpy(s, round_seg, sizeof s);
            for (int i = 1; i < nthreads; i++)
                for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
                    fh_seg_t x = s[j];
                    s[j] = s[j - 1];
                    s[j - 1] = x;
                }
            for (int i = 0; i < nthreads; i++) {
                CHECK(i == 0 || s[i] != s[i - 1], "segment ids", "distinct, saw %u twice",
                      s[i]);
                CHECK_OK(fh_segment_destroy(s[i]));
            }
        }
        pthread_barrier_wait(&tbar);
    }
    free(all);
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("coll_threads_test");
    tu_seed_init();
    nthreads = (int)tu_opt(argc, argv, "--threads", 3);
    iters = (int)tu_scale(tu_opt(argc, argv, "--iters", 10));
    me = fh_rank();
    np = fh_nranks();
    CHECK(nthreads >= 2 && nthreads <= MAXT, "--threads", "2..%d, saw %d", MAXT, nthreads);

    /* Part 1. */
    pthread_barrier_init(&tbar, NULL, (unsigned)nthreads);
    pthread_t th[MAXT];
    for (int i = 0; i < nthreads; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0,
              "pthread_create", "0, saw an error");
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&tbar);
    TU_SAY("coll_threads: %d rounds of %d threads x (create, barrier, allgather) "
           "agreed\n", iters, nthreads);

    /* Part 2: disagreeing calls fail everywhere, then the job goes on. */
    uint64_t v = (uint64_t)me, *all = calloc((size_t)np, sizeof *all);
    CHECK(all != NULL, "calloc", "memory, saw NULL");
    if (me == 0)
        CHECK_RC(fh_barrier(), FH_ERR_STATE);
    else
        CHECK_RC(fh_allgather(&v, all, sizeof v), FH_ERR_STATE);
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_allgather(&v, all, sizeof v));
    for (int r = 0; r < np; r++)
        CHECK(all[r] == (uint64_t)r, "allgather after a mismatch", "%d, saw %llu", r,
              (unsigned long long)all[r]);
    fh_seg_t a, b;
    void *ba, *bb;
    CHECK_OK(fh_segment_create(4096, &a, &ba));
    CHECK_OK(fh_segment_create(4096, &b, &bb));
    CHECK_RC(fh_segment_destroy(me == 0 ? a : b), FH_ERR_STATE);
    /* Both still alive and usable. */
    uint8_t out[64], in[64];
    int next = (me + 1) % np;
    for (int k = 0; k < 2; k++) {
        void *qb;
        CHECK_OK(fh_segment_query(k ? b : a, next, &qb, NULL));
        tu_fill(out, sizeof out, tu_key((uint64_t)me, 99, (uint64_t)k), 0);
        CHECK_OK(fh_put(next, qb, out, sizeof out));
        CHECK_OK(fh_get(in, next, qb, sizeof in));
        CHECK(memcmp(in, out, sizeof in) == 0, "segment after a refused destroy",
              "the bytes put, saw others");
    }
    CHECK_OK(fh_segment_destroy(a));
    CHECK_OK(fh_segment_destroy(b));
    TU_SAY("coll_threads: disagreeing collectives returned FH_ERR_STATE on every rank\n");
    free(all);
    CHECK_OK(fh_barrier());
    TU_SAY("PASS coll_threads_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
