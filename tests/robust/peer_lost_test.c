/*
 * peer_lost_test.c -- a peer whose service paths' connection is lost for
 * good (it is never made again: docs/reliability.md) is released by the
 * firehose cache: its firehoses on our memory, its budget (fhc_peer_dead,
 * called through reg.h peer_lost from the runtime's on_lost upcall).  Run
 * by peer_lost.sh over tcp with message endpoints, FH_SHM=off.
 *
 *   peer    (2 ranks) see peer_lost below
 *   budget  (3 ranks, adaptive budgets) see budget_back below
 *
 * The service paths' connection is not made again, so no barrier or
 * fh_finalize can complete afterwards: the ranks end with _exit(0) once
 * the checks ran, and peer_lost.sh checks their output, not fhrun's status.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../integ/oob.h"
#include "tcp_fds.h"

static volatile uint64_t *oob;       /* the ranks' signals, by index */

/* "peer" (FH_REG_STRATEGY=firehose): rank 1 puts into PEER_PUTS frames of
 * rank 0's segment, so it holds firehoses there (rank 0's bytes_pinned_remote
 * for rank 1 > 0); then rank 0 shuts down every TCP connection it has, the
 * service paths' one included, which is never made again.  Asserted: rank
 * 0's cache releases what rank 1 held (bytes_pinned_remote for rank 1
 * drops to 0: fhc_peer_dead, called by the runtime through reg.h
 * peer_lost).  Without that call it stays where it was. */
#define PEER_PUTS 4
#define PEER_SEG (256u << 10)
#define PEER_STRIDE (PEER_SEG / PEER_PUTS)
#define PEER_LEN (16u << 10)

static uint64_t pinned_for(int rank)
{
    fh_peer_stats_t st = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(rank, &st));
    return st.bytes_pinned_remote;
}

static void peer_lost(char *seg0)
{
    if (fh_rank() == 1) {
        char *buf = calloc(1, PEER_LEN);
        CHECK(buf != NULL, "calloc", "%u bytes", PEER_LEN);
        for (int i = 0; i < PEER_PUTS; i++)
            CHECK_OK(fh_put(0, seg0 + (size_t)i * PEER_STRIDE, buf, PEER_LEN));
        free(buf);
        tu_oob_store(&oob[0], 1);
        tu_oob_wait(&oob[2], 1, 60);           /* quiet: rank 0 loses us */
        return;
    }
    double t0 = tu_now();
    while (tu_oob_load(&oob[0]) != 1) {       /* serving rank 1's moves */
        CHECK(tu_now() - t0 < 60, "rank 1's puts", "its signal");
        fh_poll();
    }
    uint64_t held = pinned_for(1);
    TU_LOG("peer: rank 1 holds %llu bytes of our memory\n", (unsigned long long)held);
    CHECK(held > 0, "rank 1's firehoses", "bytes_pinned_remote > 0 for rank 1");
    CHECK(tcp_shutdown_all() > 0, "our connections", "a TCP socket (run over tcp)");
    uint64_t left = held;
    for (t0 = tu_now(); left != 0 && tu_now() - t0 < 10;) {
        fh_poll();
        left = pinned_for(1);
    }
    TU_LOG("peer: after the loss rank 1 holds %llu bytes of our memory\n",
           (unsigned long long)left);
    CHECK(left == 0, "a lost peer's firehoses released", "bytes_pinned_remote 0 for "
          "rank 1 within 10 s of the loss, saw %llu", (unsigned long long)left);
    tu_oob_store(&oob[2], 1);
}

/* "budget" (3 ranks, firehose, adaptive budgets, FH_FIREHOSE_M = 2 F with
 * F = BUDGET_F = 4 frames of BUDGET_FRAME): rank 1 holds F on rank 0 (its
 * floor), so rank 2, cycling over 2 F of rank 0's segment, gets no budget
 * above its own floor.  Then rank 1 shuts down all its connections (rank 0
 * loses the service paths' connection with it: fhc_peer_dead) and rank 2
 * cycles again.  Asserted (rank 2): its budget on rank 0 (reg_budget) is
 * now above F -- rank 1's bytes went back to the pool.  Without the call
 * rank 1 still holds F there and the budget stays at F. */
#define BUDGET_FRAME (64u << 10)
#define BUDGET_F (4u * BUDGET_FRAME)
#define BUDGET_SEG (16u * BUDGET_FRAME)

static uint64_t budget_on(int rank)
{
    fh_peer_stats_t st = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(rank, &st));
    return st.reg_budget;
}

static void budget_cycle(char *seg0, char *buf)
{
    for (int pass = 0; pass < 3; pass++)
        for (unsigned i = 0; i < 2 * BUDGET_F / BUDGET_FRAME; i++)
            CHECK_OK(fh_put(0, seg0 + BUDGET_F + (size_t)i * BUDGET_FRAME, buf,
                            BUDGET_FRAME));
}

static void budget_back(char *seg0)
{
    char *buf = calloc(1, BUDGET_FRAME);
    CHECK(buf != NULL, "calloc", "%u bytes", BUDGET_FRAME);
    if (fh_rank() == 1) {
        for (unsigned i = 0; i < BUDGET_F / BUDGET_FRAME; i++)
            CHECK_OK(fh_put(0, seg0 + (size_t)i * BUDGET_FRAME, buf, BUDGET_FRAME));
        tu_oob_store(&oob[3], 1);
        tu_oob_wait(&oob[4], 1, 60);            /* rank 2's first cycle */
        CHECK(tcp_shutdown_all() > 0, "our connections", "a TCP socket (run over tcp)");
        tu_oob_wait(&oob[6], 1, 60);
    } else if (fh_rank() == 2) {
        tu_oob_wait(&oob[3], 1, 60);
        budget_cycle(seg0, buf);
        uint64_t before = budget_on(0);
        TU_LOG("budget: beside rank 1, our budget on rank 0 is %llu (F = %u)\n",
               (unsigned long long)before, BUDGET_F);
        CHECK(before <= BUDGET_F, "no budget past the pool", "<= %u, saw %llu", BUDGET_F,
              (unsigned long long)before);
        tu_oob_store(&oob[4], 1);
        tu_oob_wait(&oob[5], 1, 60);            /* rank 0 lost rank 1 */
        budget_cycle(seg0, buf);
        uint64_t after = budget_on(0);
        TU_LOG("budget: after rank 1 was lost, our budget on rank 0 is %llu\n",
               (unsigned long long)after);
        CHECK(after > BUDGET_F, "a lost peer's budget goes to the others",
              "our budget on rank 0 above F = %u, saw %llu", BUDGET_F,
              (unsigned long long)after);
        printf("peer_lost_test budget: PASS\n");
        fflush(stdout);
        tu_oob_store(&oob[6], 1);
    } else {
        double t0 = tu_now();
        while (tu_oob_load(&oob[4]) != 1) {     /* serving ranks 1 and 2 */
            CHECK(tu_now() - t0 < 60, "rank 2's first cycle", "its signal");
            fh_poll();
        }
        /* No check here: rank 2's budget says whether rank 1 was released. */
        for (t0 = tu_now(); pinned_for(1) != 0 && tu_now() - t0 < 10;)
            fh_poll();
        TU_LOG("budget: rank 1 holds %llu bytes of our memory after its loss\n",
               (unsigned long long)pinned_for(1));
        tu_oob_store(&oob[5], 1);
        while (tu_oob_load(&oob[6]) != 1) {     /* serving rank 2 */
            CHECK(tu_now() - t0 < 60, "rank 2's second cycle", "its signal");
            fh_poll();
        }
    }
    free(buf);
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("peer_lost_test");
    int budget = argc > 1 && strcmp(argv[1], "budget") == 0;
    CHECK(argc > 1 && (budget || strcmp(argv[1], "peer") == 0), "usage",
          "peer_lost_test peer|budget");
    CHECK(fh_nranks() == (budget ? 3 : 2), "ranks", "expected %d, saw %d", budget ? 3 : 2,
          fh_nranks());
    fh_seg_t seg;
    void *mine, *s0;
    CHECK_OK(fh_segment_create(budget ? BUDGET_SEG : PEER_SEG, &seg, &mine));
    CHECK_OK(fh_segment_query(seg, 0, &s0, NULL));
    oob = tu_oob_open();
    if (budget)
        budget_back(s0);
    else
        peer_lost(s0);
    if (fh_rank() == 0)
        printf("peer_lost_test %s: PASS\n", budget ? "budget (rank 0)" : "peer");
    fflush(stdout);
    _exit(0);
}
