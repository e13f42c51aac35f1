/*
 * coll_mismatch_test.c -- collectives whose calls differ between ranks fail
 * on every rank with FH_ERR_STATE, whichever rank differs (firehose.h,
 * "Collectives"; coll.c: every collective's barrier computes the minimum
 * and maximum of the calls' signatures).  On the node path that range is
 * combined in the node group's shared barrier before its leader takes it
 * to the other groups (node_coll.c), so the rank that differs is, in turn,
 * every rank: a group's leader, a member, the last rank, a group of one.
 *
 * For each rank d, three disagreements:
 *   kind      d calls fh_barrier, the others fh_allgather (8 bytes)
 *   argument  d calls fh_allgather with 16 bytes, the others with 8
 *   segment   d calls fh_segment_destroy(b), the others fh_segment_destroy(a)
 * Each call must return FH_ERR_STATE with fh_last_error() saying that the
 * collectives "do not pair up"; after each, fh_allgather agrees again
 * (FH_OK, every rank's value in place).  Segments a and b survive the
 * refused destroys and are destroyed at the end.
 *
 * Usage: coll_mismatch_test
 */
#include "testutil.h"

static void expect_state(int rc, const char *what, int d)
{
    CHECK(rc == FH_ERR_STATE, what, "rank %d differs: FH_ERR_STATE, saw %s (%s)", d,
          fh_err_name(rc), fh_last_error());
    CHECK(strstr(fh_last_error(), "do not pair up") != NULL, what,
          "rank %d differs: an error text saying the collectives do not pair up, "
          "saw \"%s\"", d, fh_last_error());
}

/* The next agreeing collective works: an allgather of (rank, round). */
static void agree(int me, int N, int d, uint64_t *all)
{
    uint64_t v = ((uint64_t)me << 32) | (uint64_t)d;
    CHECK_OK(fh_allgather(&v, all, sizeof v));
    for (int r = 0; r < N; r++)
        CHECK(all[r] == (((uint64_t)r << 32) | (uint64_t)d), "allgather after a mismatch",
              "rank %d's entry %#llx, saw %#llx", r,
              (unsigned long long)(((uint64_t)r << 32) | (uint64_t)d),
              (unsigned long long)all[r]);
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("coll_mismatch_test");
    int me = fh_rank(), N = fh_nranks();
    uint64_t *all = calloc(2 * (size_t)N, sizeof *all), v[2] = {(uint64_t)me, 0};
    CHECK(all != NULL, "calloc", "memory, saw NULL");
    fh_seg_t a, b;
    void *ba, *bb;
    CHECK_OK(fh_segment_create(4096, &a, &ba));
    CHECK_OK(fh_segment_create(4096, &b, &bb));
    for (int d = 0; d < N; d++) {
        if (me == d)
            expect_state(fh_barrier(), "barrier against allgather", d);
        else
            expect_state(fh_allgather(v, all, sizeof v[0]), "allgather against barrier", d);
        agree(me, N, d, all);
        expect_state(fh_allgather(v, all, me == d ? sizeof v : sizeof v[0]),
                     "allgather of another length", d);
        agree(me, N, d, all);
        expect_state(fh_segment_destroy(me == d ? b : a), "destroy of another segment", d);
        agree(me, N, d, all);
    }
    TU_SAY("coll_mismatch: %d ranks, each in turn differing in the call, its length and "
           "its segment: FH_ERR_STATE on every rank\n", N);
    CHECK_OK(fh_segment_destroy(a));
    CHECK_OK(fh_segment_destroy(b));
    free(all);
    CHECK_OK(fh_barrier());
    TU_SAY("PASS coll_mismatch_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
