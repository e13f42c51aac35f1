/*
 * credit_ride_test.c -- AM credits ride on traffic (firehose/am.c,
 * FH_CREDIT_IDLE_POLLS): a rank that owes its peer a credit for a request
 * sends it on its own next request or reply to that peer, not in a
 * message of its own, as long as it is not idle for long.
 *
 * Two ranks run R rounds of "fh_poll, then fh_barrier" (a program that
 * polls between barriers; a coarray SYNC ALL's fh_quiet polled too, until
 * it stopped polling with nothing in flight).  With FH_PATHS=lazy and
 * FH_SHM=off each barrier is one request each way between the service
 * paths, so each rank owes the other one credit between two barriers, and
 * its one empty poll (the fh_poll) comes before its next barrier
 * request.  Checked: the credit messages each rank sent its peer
 * (fh_stats_peer's am_credit_msgs) are at most R / 10.  (Returning what was owed at the first empty poll cost
 * one credit message per rank per round: 4 messages per barrier instead
 * of 2.)  The count does not depend on timing: while a rank waits in a
 * barrier it owes nothing (its request carried the credit).
 *
 * Usage: credit_ride_test [--rounds R]
 */
#include "testutil.h"

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("credit_ride_test");
    int me = fh_rank(), N = fh_nranks();
    long rounds = tu_opt(argc, argv, "--rounds", 2000);
    CHECK(N == 2, "ranks", "run on 2 ranks, not %d", N);
    int peer = 1 - me;
    CHECK_OK(fh_barrier());
    fh_peer_stats_t s0 = FH_PEER_STATS_INIT, s1 = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(peer, &s0));
    CHECK(s0.version >= 2 && s0.size == sizeof s0, "fh_stats_peer",
          "version %u size %u: no am_credit_msgs", s0.version, s0.size);
    for (long k = 0; k < rounds; k++) {
        CHECK_OK(fh_poll());
        CHECK_OK(fh_barrier());
    }
    CHECK_OK(fh_stats_peer(peer, &s1));
    uint64_t sent = s1.am_credit_msgs - s0.am_credit_msgs;
    TU_LOG("%ld rounds of fh_poll + fh_barrier: %llu credit messages to rank %d\n",
           rounds, (unsigned long long)sent, peer);
    CHECK(sent <= (uint64_t)rounds / 10, "credits",
          "%llu credit messages of their own in %ld barriers (at most %ld expected: "
          "owed credits ride on the next barrier request)",
          (unsigned long long)sent, rounds, rounds / 10);
    CHECK_OK(fh_barrier());
    TU_SAY("PASS credit_ride_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
