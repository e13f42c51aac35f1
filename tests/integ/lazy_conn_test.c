/*
 * lazy_conn_test.c -- connections made on first use: a ring job where each
 * rank puts to its right neighbour only, with two barriers.
 *
 * The program checks the data (rank me finds me - 1 in its segment); which
 * pairs were connected is checked outside, by tests/vm/lazy-conn-check.sh
 * (make check-rxe, FH_CONDUIT=ibv FH_SHM=off FH_VERBOSE=1), against the
 * pairs this traffic needs: the right neighbour and the dissemination
 * barrier's partners me +- 2^k (firehose/coll.c).  On ofi it is a ring test.
 *
 * Usage: lazy_conn_test
 */
#include "testutil.h"

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("lazy_conn_test");
    int me = fh_rank(), N = fh_nranks();
    fh_seg_t seg;
    void *lb;
    CHECK_OK(fh_segment_create(4096, &seg, &lb));
    volatile uint64_t *mine = lb;
    int next = (me + 1) % N, prev = (me + N - 1) % N;
    void *b;
    CHECK_OK(fh_segment_query(seg, next, &b, NULL));
    CHECK_OK(fh_barrier());
    uint64_t v = 1000 + (uint64_t)me;
    CHECK_OK(fh_put(next, b, &v, sizeof v));
    CHECK_OK(fh_barrier());
    CHECK(mine[0] == 1000 + (uint64_t)prev, "ring put",
          "expected %d, saw %" PRIu64, 1000 + prev, (uint64_t)mine[0]);
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("PASS lazy_conn_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
