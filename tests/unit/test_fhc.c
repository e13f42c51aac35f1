/*
 * test_fhc.c -- the registration cache core (firehose/cache): region
 * coalescing, the victim FIFO (order, lazy deregistration, MAXVICTIM), the
 * unused FIFO's victim choice, F at both ends, pending coalescing,
 * put-in-move, refused and malformed requests, the budget queue woken by a
 * release, a refused merge not asked again, holds that stay exact when
 * replies are reordered, the configuration and wire checks.  Freed or reused memory and a hostile
 * target: test_fhc_revoke.c.
 *
 * Two or three caches talk through a hand-driven message queue
 * (fhc_fake_env.h), so each test decides exactly when (and in which order)
 * a message arrives.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"

#define B    4096u
#define RMAX (16u * B)
#define SEG  ((uintptr_t)1 << 40)
#define SEGLEN (((size_t)1 << 20) - B)    /* ends mid-frame, on a bucket */

#include "fhc_fake_env.h"

START_TEST(adjacent_missing_buckets_become_one_region)
{
    setup_n(2, 4 * RMAX, 2 * RMAX);
    top_t t;
    /* 3 buckets (a chunk from mid-bucket 1 to mid-bucket 3) */
    ck_assert_int_eq(acquire(0, &t, 1, SEG + B + 100, 2 * B, NULL), FHC_PENDING);
    ck_assert_uint_eq(nq, 1);                 /* one move */
    deliver_all();
    ck_assert_int_eq(t.calls, 1);
    ck_assert_int_eq(t.status, FHC_HIT);
    ck_assert_uint_eq(stats(1).registrations, 1);
    ck_assert_uint_eq(stats(1).nregions, 1);
    ck_assert_uint_eq(stats(1).pinned_bytes, 3 * B);
    ck_assert_uint_eq(t.op.npieces, 1);
    ck_assert_uint_eq(t.op.piece[0].addr, SEG + B + 100);
    ck_assert_uint_eq(t.op.piece[0].len, 2 * B);
    fhc_release(ranks[0].c, &t.op);
    /* now a hit, one-sided */
    ck_assert_int_eq(acquire(0, &t, 1, SEG + 2 * B, B, NULL), FHC_HIT);
    ck_assert_uint_eq(nq, 0);
    fhc_release(ranks[0].c, &t.op);
    ck_assert_uint_eq(pstats(0, 1).hits, 1);
    ck_assert_uint_eq(pstats(0, 1).misses, 1);
    teardown_n(2);
}
END_TEST

START_TEST(a_chunk_spans_several_regions)
{
    setup_n(2, 4 * RMAX, 2 * RMAX);
    top_t a, b, t;
    acquire(0, &a, 1, SEG, 10, NULL);             /* bucket 0 */
    acquire(0, &b, 1, SEG + 2 * B, 10, NULL);     /* bucket 2 */
    deliver_all();
    /* a and b still use {0} and {2}: buckets 0..2 are regions {0}, new {1}, {2} */
    ck_assert_int_eq(acquire(0, &t, 1, SEG + 5, 3 * B - 10, NULL), FHC_PENDING);
    deliver_all();
    ck_assert_int_eq(t.status, FHC_HIT);
    ck_assert_uint_eq(t.op.npieces, 3);
    ck_assert_uint_eq(t.op.piece[1].addr, SEG + B);
    ck_assert_uint_eq(t.op.piece[1].len, B);
    ck_assert_uint_eq(t.op.piece[2].len, B - 5);
    top_t d;
    ck_assert_int_eq(acquire(0, &d, 1, SEG + RMAX - 5, 10, NULL), FHC_ERR_INVALID);
    fhc_release(ranks[0].c, &t.op);
    fhc_release(ranks[0].c, &a.op);
    fhc_release(ranks[0].c, &b.op);
    ck_assert_uint_eq(pstats(0, 1).held_regions, 3);
    /* Nothing uses them now: the next chunk over them merges them into one
     * region (one move, once) and goes out as one piece. */
    ck_assert_int_eq(acquire(0, &t, 1, SEG + 5, 3 * B - 10, NULL), FHC_PENDING);
    ck_assert_uint_eq(nq, 1);
    deliver_all();
    ck_assert_int_eq(t.status, FHC_HIT);
    ck_assert_uint_eq(t.op.npieces, 1);
    ck_assert_uint_eq(t.op.piece[0].len, 3 * B - 10);
    ck_assert_uint_eq(pstats(0, 1).merges, 1);
    ck_assert_uint_eq(pstats(0, 1).held_regions, 1);
    ck_assert_uint_eq(pstats(1, 0).target_held_regions, 1);
    ck_assert_uint_eq(stats(1).nregions, 1);
    fhc_release(ranks[0].c, &t.op);
    ck_assert_int_eq(acquire(0, &t, 1, SEG + B, B, NULL), FHC_HIT);
    fhc_release(ranks[0].c, &t.op);
    teardown_n(2);
}
END_TEST

/* Issue 29 class 1 (FH_SEGMENT=everything): a region over a hole registers
 * one run (fake_hole: the run that holds the move's first byte).  A later
 * op into the other run, whose firehose only it uses, re-aims: its move
 * releases the firehose and names its byte, and the target, whose region
 * nobody holds then, registers the other run.  A chunk over the hole and
 * an op inside it stay refused (the region is not freed for a byte no run
 * holds); so does a re-aim while another peer holds the region. */
START_TEST(a_region_over_a_hole_is_aimed_again_at_the_run_asked_for)
{
    setup_n(3, 4 * RMAX, 2 * RMAX);
    fake_hole = SEG + B;                      /* bucket 1 unmapped */
    top_t x, y, z, h;
    /* A chunk over buckets 0..2: the region registers bucket 0's run. */
    ck_assert_int_eq(acquire(0, &x, 1, SEG, 3 * B, NULL), FHC_PENDING);
    deliver_all();
    ck_assert_int_eq(x.status, FHC_ERR_OUT_OF_SEGMENT);   /* the hole itself */
    ck_assert_uint_eq(pstats(0, 1).reaims, 1);  /* it tried, once: nothing freed */
    ck_assert_uint_eq(stats(1).reaims, 0);
    /* Into the hole, the region idle: asked, but not freed (no run there). */
    ck_assert_int_eq(acquire(0, &y, 1, SEG + B + 5, 10, NULL), FHC_PENDING);
    deliver_all();
    ck_assert_int_eq(y.status, FHC_ERR_OUT_OF_SEGMENT);
    ck_assert_uint_eq(pstats(0, 1).reaims, 2);
    ck_assert_uint_eq(stats(1).reaims, 0);
    /* Into bucket 2, the firehose over 0..2 (reaching bucket 0) idle: re-aimed. */
    ck_assert_int_eq(acquire(0, &y, 1, SEG + 2 * B + 5, 10, NULL), FHC_PENDING);
    ck_assert_uint_eq(nq, 1);
    deliver_all();
    ck_assert_int_eq(y.status, FHC_HIT);
    ck_assert_uint_eq(y.op.npieces, 1);
    ck_assert_uint_eq(y.op.piece[0].addr, SEG + 2 * B + 5);
    ck_assert_uint_eq(stats(1).reaims, 1);
    ck_assert_uint_eq(pstats(0, 1).reaims, 3);
    fhc_release(ranks[0].c, &y.op);
    /* And back into bucket 0: aimed again. */
    ck_assert_int_eq(acquire(0, &z, 1, SEG + 7, 100, NULL), FHC_PENDING);
    deliver_all();
    ck_assert_int_eq(z.status, FHC_HIT);
    ck_assert_uint_eq(stats(1).reaims, 2);
    /* Rank 2 holds the region (bucket 0's run) while rank 0 asks for
     * bucket 2 again: not re-aimed, refused, nothing freed. */
    ck_assert_int_eq(acquire(2, &h, 1, SEG + 9, 10, NULL), FHC_PENDING);
    deliver_all();
    ck_assert_int_eq(h.status, FHC_HIT);
    fhc_release(ranks[0].c, &z.op);
    ck_assert_int_eq(acquire(0, &y, 1, SEG + 2 * B + 5, 10, NULL), FHC_PENDING);
    deliver_all();
    ck_assert_int_eq(y.status, FHC_ERR_OUT_OF_SEGMENT);
    ck_assert_uint_eq(stats(1).reaims, 2);
    fhc_release(ranks[2].c, &h.op);
    fake_hole = 0;
    teardown_n(3);
}
END_TEST

/* Issue 30: an op over a resident run and a cold one (may_split) is cut;
 * the resident run's pieces are issued (FHC_HIT) while the cold run's move
 * is still unanswered, and a put's cold run carries only its own bytes in
 * the move. */
START_TEST(a_resident_run_goes_out_before_the_cold_runs_move_is_answered)
{
    setup_n(2, 4 * RMAX, 2 * RMAX);
    top_t w, t, u;
    ck_assert_int_eq(acquire(0, &w, 1, SEG, RMAX / 2, NULL), FHC_PENDING);
    deliver_all();                          /* first half of the frame resident */
    ck_assert_int_eq(w.status, FHC_HIT);
    fhc_release(ranks[0].c, &w.op);
    ck_assert_int_eq(acquire_ex(0, &t, 1, SEG + 8, RMAX - 8, NULL, 1), FHC_HIT);
    ck_assert_uint_eq(t.op.len, RMAX / 2 - 8);
    ck_assert_uint_eq(t.op.npieces, 1);
    ck_assert_uint_eq(t.op.piece[0].addr, SEG + 8);
    ck_assert_uint_eq(t.op.piece[0].len, RMAX / 2 - 8);
    ck_assert_uint_eq(nq, 0);
    /* The rest, cold: its move goes out; t's pieces came before its reply. */
    ck_assert_int_eq(acquire_ex(0, &u, 1, SEG + RMAX / 2, RMAX / 2, NULL, 1), FHC_PENDING);
    ck_assert_uint_eq(u.op.len, RMAX / 2);
    ck_assert_uint_eq(nq, 1);
    ck_assert_int_eq(queue[0].is_reply, 0);
    ck_assert_uint_eq(pstats(0, 1).pending_moves, 1);
    deliver_all();
    ck_assert_int_eq(u.status, FHC_HIT);
    ck_assert_uint_eq(u.op.npieces, 1);
    ck_assert_uint_eq(u.op.piece[0].addr, SEG + RMAX / 2);
    ck_assert_uint_eq(u.op.piece[0].len, RMAX / 2);
    fhc_release(ranks[0].c, &t.op);
    fhc_release(ranks[0].c, &u.op);
    ck_assert_uint_eq(pstats(0, 1).splits, 1);
    /* A put: bucket 0 of the next frame resident, 1000 bytes there and 2000
     * in cold bucket 1 (small enough to ride in a move). */
    static const char data[3000];
    ck_assert_int_eq(acquire(0, &w, 1, SEG + RMAX, 10, NULL), FHC_PENDING);
    deliver_all();
    fhc_release(ranks[0].c, &w.op);
    ck_assert_int_eq(acquire_ex(0, &t, 1, SEG + RMAX + B - 1000, sizeof data, data, 1),
                     FHC_HIT);
    ck_assert_uint_eq(t.op.len, 1000);
    ck_assert_int_eq(acquire_ex(0, &u, 1, SEG + RMAX + B, 2000, data + 1000, 1), FHC_PENDING);
    deliver_all();
    ck_assert_int_eq(u.status, FHC_DONE_IN_MOVE);
    ck_assert_uint_eq(ranks[1].puts, 1);
    ck_assert_uint_eq(ranks[1].put_dst, SEG + RMAX + B);
    ck_assert_uint_eq(ranks[1].put_len, 2000);
    fhc_release(ranks[0].c, &t.op);
    teardown_n(2);
}
END_TEST

START_TEST(victim_fifo_is_lazy_ordered_and_bounded_by_maxvictim)
{
    setup_n(2, 4 * RMAX, 3 * B);          /* MAXVICTIM: three buckets */
    fhc_local_t l[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(fhc_pin_local(ranks[0].c, SEG + (uintptr_t)i * RMAX, 10, &l[i]) , i < 3 ? 0 : FHC_ERR_AGAIN);
    ck_assert_uint_eq(stats(0).local_bytes, 3 * B);
    fhc_unpin_local(ranks[0].c, &l[1]);
    fhc_unpin_local(ranks[0].c, &l[0]);
    fhc_unpin_local(ranks[0].c, &l[2]);
    /* lazy: all three still registered, in the FIFO in release order */
    ck_assert_uint_eq(stats(0).victim_len, 3);
    ck_assert_uint_eq(ranks[0].unpins, 0);
    /* re-pinning a victim costs no registration and leaves the FIFO */
    unsigned pins = ranks[0].pins;
    ck_assert_int_eq(fhc_pin_local(ranks[0].c, SEG + 2 * RMAX, 10, &l[2]), 0);
    ck_assert_uint_eq(ranks[0].pins, pins);
    ck_assert_uint_eq(stats(0).victim_len, 2);
    /* a new pin needs room: the oldest victim (region 1) goes first */
    ck_assert_int_eq(fhc_pin_local(ranks[0].c, SEG + 3 * RMAX, 10, &l[3]), 0);
    ck_assert_uint_eq(ranks[0].unpins, 1);
    ck_assert_uint_eq(ranks[0].unpinned[0], SEG + 1 * RMAX);
    ck_assert_uint_eq(stats(0).evictions, 1);
    fhc_unpin_local(ranks[0].c, &l[2]);
    fhc_unpin_local(ranks[0].c, &l[3]);
    ck_assert_uint_le(stats(0).victim_bytes + stats(0).local_bytes, 3 * B);
    teardown_n(2);
}
END_TEST

START_TEST(remote_release_feeds_the_victim_fifo_and_evicts_at_maxvictim)
{
    setup_n(2, 2 * RMAX, 0);              /* F = 2R, no victims kept */
    top_t t;
    acquire(0, &t, 1, SEG, RMAX, NULL);
    deliver_all();
    fhc_release(ranks[0].c, &t.op);
    acquire(0, &t, 1, SEG + RMAX, RMAX, NULL);
    deliver_all();
    fhc_release(ranks[0].c, &t.op);
    ck_assert_uint_eq(ranks[1].unpins, 0);
    /* third frame: rank 0 must release frame 0 in the same move; rank 1
     * applies the release first, and with MAXVICTIM 0 deregisters at once */
    acquire(0, &t, 1, SEG + 2 * RMAX, 10, NULL);
    deliver_all();
    ck_assert_int_eq(t.status, FHC_HIT);
    ck_assert_uint_eq(ranks[1].unpins, 1);
    ck_assert_uint_eq(ranks[1].unpinned[0], SEG);
    ck_assert_uint_eq(stats(1).evictions, 1);
    fhc_release(ranks[0].c, &t.op);
    teardown_n(2);
}
END_TEST

START_TEST(unused_fifo_gives_the_least_recently_used_victim)
{
    setup_n(2, 2 * RMAX, 4 * RMAX);
    top_t t;
    acquire(0, &t, 1, SEG, RMAX, NULL);                   /* frame X */
    deliver_all();
    fhc_release(ranks[0].c, &t.op);
    acquire(0, &t, 1, SEG + RMAX, RMAX, NULL);            /* frame Y */
    deliver_all();
    fhc_release(ranks[0].c, &t.op);
    ck_assert_int_eq(acquire(0, &t, 1, SEG + 7, 1, NULL), FHC_HIT);  /* X again */
    fhc_release(ranks[0].c, &t.op);
    ck_assert_int_eq(acquire(0, &t, 1, SEG + 2 * RMAX, 1, NULL), FHC_PENDING);
    ck_assert_uint_eq(nq, 1);
    fhc_req_t q;
    ck_assert_int_eq(fhc_req_decode(queue[0].data, queue[0].len, &q, NULL, 0), 0);
    ck_assert_uint_eq(q.nrel, 1);
    ck_assert_uint_eq(q.rel[0], SEG + RMAX);              /* Y, not X */
    deliver_all();
    fhc_release(ranks[0].c, &t.op);
    ck_assert_uint_eq(pstats(0, 1).held_bytes, RMAX + B);
    ck_assert_uint_eq(pstats(1, 0).target_held_bytes, RMAX + B);
    teardown_n(2);
}
END_TEST

START_TEST(release_to_zero_wakes_an_op_waiting_for_budget)
{
    setup_n(2, RMAX, RMAX);               /* F = R: one frame */
    top_t a, b, c;
    acquire(0, &a, 1, SEG, 100, NULL);
    deliver_all();
    ck_assert_int_eq(a.status, FHC_HIT);
    /* another frame: no room while a is in flight; no move is sent */
    ck_assert_int_eq(acquire(0, &b, 1, SEG + RMAX, 100, NULL), FHC_PENDING);
    ck_assert_uint_eq(nq, 0);
    ck_assert_uint_eq(pstats(0, 1).budget_queue, 1);
    /* the queue gates the peer: even a would-be hit waits behind b */
    ck_assert_int_eq(acquire(0, &c, 1, SEG + 10, 1, NULL), FHC_PENDING);
    ck_assert_uint_eq(pstats(0, 1).budget_queue, 2);
    fhc_release(ranks[0].c, &a.op);       /* to zero: b sends its move */
    ck_assert_uint_eq(nq, 1);
    ck_assert_int_eq(b.calls, 0);
    deliver_all();
    ck_assert_int_eq(b.calls, 1);
    ck_assert_int_eq(b.status, FHC_HIT);
    ck_assert_uint_le(pstats(0, 1).held_bytes, fhc_F(ranks[0].c));
    fhc_release(ranks[0].c, &b.op);
    deliver_all();
    ck_assert_int_eq(c.calls, 1);
    ck_assert_int_eq(c.status, FHC_HIT);
    fhc_release(ranks[0].c, &c.op);
    ck_assert_uint_eq(pstats(0, 1).budget_queue, 0);
    teardown_n(2);
}
END_TEST

START_TEST(target_enforces_F_and_initiator_stays_within_it)
{
    setup_n(2, RMAX, RMAX);               /* F = R */
    /* a hand-made request for two frames' worth in one: not one frame */
    fhc_rep_t rep = request(0, 1, SEG, SEG + 2 * RMAX, NULL, 0);
    ck_assert_int_eq(rep.status, FHC_ERR_INVALID);
    /* a full frame is allowed, a second one is over F */
    rep = request(0, 1, SEG, SEG + RMAX, NULL, 0);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_uint_eq(rep.nreg, 1);
    unsigned regs = stats(1).registrations;
    rep = request(0, 1, SEG + RMAX, SEG + RMAX + B, NULL, 0);
    ck_assert_int_eq(rep.status, FHC_ERR_LIMIT);
    ck_assert_uint_eq(stats(1).registrations, regs);
    ck_assert_uint_eq(pstats(1, 0).refused, 2);
    ck_assert_uint_ge(ranks[1].logs, 2);
    /* releasing in the same message makes room */
    uint64_t rel = SEG;
    rep = request(0, 1, SEG + RMAX, SEG + RMAX + B, &rel, 1);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_uint_eq(pstats(1, 0).target_held_bytes, B);
    teardown_n(2);
}
END_TEST

START_TEST(a_merge_the_target_refused_is_not_asked_again)
{
    setup_n(3, 8 * RMAX, 2 * RMAX);
    top_t t;
    /* Rank 0 gets buckets 0 and 1 of rank 1 by two moves: two firehoses. */
    for (unsigned b = 0; b < 2; b++) {
        ck_assert_int_eq(acquire(0, &t, 1, SEG + b * B, 8, NULL), FHC_PENDING);
        deliver_all();
        ck_assert(t.calls == 1 && t.status == FHC_HIT);
        fhc_release(ranks[0].c, &t.op);
    }
    /* Rank 2 holds bucket 1's region too: rank 1 cannot merge it. */
    ck_assert_int_eq(acquire(2, &t, 1, SEG + B, 8, NULL), FHC_PENDING);
    deliver_all();
    fhc_release(ranks[2].c, &t.op);
    /* An op over both firehoses asks once to merge them; kept apart. */
    ck_assert_int_eq(acquire(0, &t, 1, SEG + 100, B, NULL), FHC_PENDING);
    ck_assert_uint_eq(nq, 1);
    deliver_all();
    ck_assert(t.calls == 1 && t.status == FHC_HIT);
    ck_assert_uint_eq(t.op.npieces, 2);
    fhc_release(ranks[0].c, &t.op);
    ck_assert_uint_eq(pstats(0, 1).merges, 1);
    /* The next op over them hits at once: no second merge move. */
    ck_assert_int_eq(acquire(0, &t, 1, SEG + 200, B, NULL), FHC_HIT);
    ck_assert_uint_eq(nq, 0);
    ck_assert_uint_eq(t.op.npieces, 2);
    fhc_release(ranks[0].c, &t.op);
    ck_assert_uint_eq(pstats(0, 1).merges, 1);
    teardown_n(3);
}
END_TEST

START_TEST(two_ops_on_one_missing_bucket_share_one_move)
{
    setup_n(2, 4 * RMAX, 2 * RMAX);
    top_t a, b;
    ck_assert_int_eq(acquire(0, &a, 1, SEG + 10, 10, NULL), FHC_PENDING);
    ck_assert_int_eq(acquire(0, &b, 1, SEG + 100, 10, NULL), FHC_PENDING);
    ck_assert_uint_eq(nq, 1);
    ck_assert_uint_eq(pstats(0, 1).coalesced, 1);
    deliver(0);                           /* request */
    ck_assert_uint_eq(nq, 1);
    deliver(0);                           /* the one reply */
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(b.calls, 1);
    ck_assert_int_eq(a.status, FHC_HIT);
    ck_assert_int_eq(b.status, FHC_HIT);
    ck_assert_uint_eq(pstats(0, 1).moves, 1);
    fhc_release(ranks[0].c, &a.op);
    fhc_release(ranks[0].c, &b.op);
    teardown_n(2);
}
END_TEST

/* The link to the target was lost (fhc_peer_lost): the move's owner fails
 * with the status, the op that shared the move steps again and sends a
 * move of its own; a second loss fails that one too.  The invariants hold
 * throughout, and a late message of the lost link changes nothing. */
START_TEST(a_lost_link_fails_the_moves_in_flight)
{
    enum { LOST = -14 };
    setup_n(2, 4 * RMAX, 2 * RMAX);
    top_t a, b;
    char why[256];
    ck_assert_int_eq(acquire(0, &a, 1, SEG + 10, 10, NULL), FHC_PENDING);
    ck_assert_int_eq(acquire(0, &b, 1, SEG + 100, 10, NULL), FHC_PENDING);
    ck_assert_uint_eq(nq, 1);                  /* one move, shared */
    ck_assert_uint_eq(fhc_peer_lost(ranks[0].c, 1, LOST), 1);
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.status, LOST);
    ck_assert_int_eq(b.calls, 0);              /* stepped again: a new move */
    ck_assert_uint_eq(nq, 2);
    ck_assert_msg(fhc_check_peer(ranks[0].c, 1, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(fhc_peer_lost(ranks[0].c, 1, LOST), 1);
    ck_assert_int_eq(b.calls, 1);
    ck_assert_int_eq(b.status, LOST);
    ck_assert_uint_eq(fhc_peer_lost(ranks[0].c, 1, LOST), 0);   /* nothing left */
    ck_assert_msg(fhc_check_peer(ranks[0].c, 1, why, sizeof why) == 0, "%s", why);
    nq = 0;                                    /* the lost link's messages */
    teardown_n(2);
}
END_TEST

START_TEST(small_put_rides_in_the_move)
{
    setup_n(2, 4 * RMAX, 2 * RMAX);
    static const char data[100] = "payload";
    top_t t;
    ck_assert_int_eq(acquire(0, &t, 1, SEG + 40, sizeof data, data), FHC_PENDING);
    deliver_all();
    ck_assert_int_eq(t.status, FHC_DONE_IN_MOVE);
    ck_assert_uint_eq(ranks[1].puts, 1);
    ck_assert_uint_eq(ranks[1].put_dst, SEG + 40);
    ck_assert_uint_eq(ranks[1].put_len, sizeof data);
    fhc_release(ranks[0].c, &t.op);       /* harmless no-op */
    /* the firehose was established anyway: the next put hits */
    ck_assert_int_eq(acquire(0, &t, 1, SEG + 40, sizeof data, data), FHC_HIT);
    fhc_release(ranks[0].c, &t.op);
    ck_assert_uint_eq(pstats(0, 1).put_in_move, 1);
    /* too large for a move: plain RDMA after the move */
    static char big[4000];
    ck_assert_int_eq(acquire(0, &t, 1, SEG + RMAX, sizeof big, big), FHC_PENDING);
    deliver_all();
    ck_assert_int_eq(t.status, FHC_HIT);
    fhc_release(ranks[0].c, &t.op);
    ck_assert_uint_eq(ranks[1].puts, 1);
    teardown_n(2);
}
END_TEST

START_TEST(requests_outside_the_segment_are_refused)
{
    setup_n(2, 4 * RMAX, 2 * RMAX);
    top_t t;
    ck_assert_int_eq(acquire(0, &t, 1, SEG + SEGLEN + 5, 10, NULL), FHC_PENDING);
    deliver_all();
    ck_assert_int_eq(t.status, FHC_ERR_OUT_OF_SEGMENT);
    ck_assert_uint_eq(stats(1).registrations, 0);
    ck_assert_uint_eq(ranks[1].logs, 1);
    ck_assert_uint_eq(pstats(0, 1).reserved_bytes, 0);
    /* a region pinned locally outside the segment is never handed out,
     * even to a span that looks allowed next to it */
    fhc_local_t l;
    ck_assert_int_eq(fhc_pin_local(ranks[1].c, SEG + SEGLEN - 2 * B, 3 * B, &l), 0);
    ck_assert_uint_eq(l.nmr, 2);          /* split at the segment boundary */
    fhc_rep_t rep = request(0, 1, SEG + SEGLEN - 2 * B, SEG + SEGLEN - B, NULL, 0);
    ck_assert_int_eq(rep.status, 0);      /* gets the inside half only */
    ck_assert_uint_eq(rep.nreg, 1);
    ck_assert_uint_eq(rep.reg[0].base, SEG + SEGLEN - 2 * B);
    ck_assert_uint_eq(rep.reg[0].len, 2 * B);
    uint64_t rel = rep.reg[0].base;
    ck_assert_int_eq(request(0, 1, SEG, SEG + B, &rel, 1).status, 0);
    fhc_unpin_local(ranks[1].c, &l);
    teardown_n(2);
}
END_TEST

START_TEST(malformed_requests_change_nothing)
{
    setup_n(2, 4 * RMAX, 2 * RMAX);
    fhc_req_t q = { .token = 5, .lo = SEG, .hi = SEG + B };
    uint8_t buf[512];
    size_t n = fhc_req_encode(&q, buf, sizeof buf);
    /* truncated, bad magic, trailing garbage */
    ck_assert_int_eq(raw_request(0, 1, buf, n - 1).status, FHC_ERR_INVALID);
    buf[0] ^= 1;
    ck_assert_int_eq(raw_request(0, 1, buf, n).status, FHC_ERR_INVALID);
    buf[0] ^= 1;
    ck_assert_int_eq(raw_request(0, 1, buf, n + 8).status, FHC_ERR_INVALID);
    /* unaligned span, inverted span */
    ck_assert_int_eq(request(0, 1, SEG + 1, SEG + B, NULL, 0).status, FHC_ERR_INVALID);
    ck_assert_int_eq(request(0, 1, SEG + B, SEG, NULL, 0).status, FHC_ERR_INVALID);
    /* releasing what it does not hold, or twice */
    uint64_t rel[2] = { SEG, SEG };
    ck_assert_int_eq(request(0, 1, SEG, SEG + B, rel, 1).status, FHC_ERR_INVALID);
    ck_assert_int_eq(request(0, 1, SEG, SEG + B, NULL, 0).status, 0);
    ck_assert_int_eq(request(0, 1, SEG + B, SEG + 2 * B, rel, 2).status, FHC_ERR_INVALID);
    ck_assert_uint_eq(pstats(1, 0).target_held_bytes, B);   /* nothing applied */
    ck_assert_uint_eq(stats(1).registrations, 1);
    /* random bytes never crash the decoders */
    srand(7);
    for (int i = 0; i < 20000; i++) {
        size_t len = (size_t)rand() % 200;
        for (size_t k = 0; k < len; k++)
            buf[k] = (uint8_t)rand();
        if (len && rand() % 2)
            buf[0] = FHC_WIRE_MAGIC;
        if (len > 1)
            buf[1] = (uint8_t)(1 + rand() % 2);
        nq = 0;
        fhc_on_message(ranks[1].c, 0, 0, buf, len);
        fhc_on_message(ranks[0].c, 1, 1, buf, len);
    }
    nq = 0;
    teardown_n(2);
}
END_TEST

START_TEST(holds_stay_exact_when_moves_overlap_and_replies_reorder)
{
    setup_n(2, 4 * RMAX, 2 * RMAX);
    /* rank 1 has a 4-bucket region (from a local pin, now a victim) */
    fhc_local_t l;
    ck_assert_int_eq(fhc_pin_local(ranks[1].c, SEG, 4 * B, &l), 0);
    fhc_unpin_local(ranks[1].c, &l);
    top_t a, b;
    acquire(0, &a, 1, SEG, 10, NULL);             /* move 1: bucket 0 */
    acquire(0, &b, 1, SEG + 2 * B, 10, NULL);     /* move 2: bucket 2 */
    ck_assert_uint_eq(nq, 2);
    deliver(0);
    deliver(0);                                   /* both requests */
    ck_assert_uint_eq(nq, 2);
    ck_assert_uint_eq(pstats(1, 0).target_held_regions, 1);   /* one hold */
    deliver(1);                   /* reply 2 first: "already held", not installed */
    ck_assert_uint_eq(pstats(0, 1).held_regions, 0);
    ck_assert_int_eq(b.calls, 0);                 /* b asked again */
    deliver_all();
    ck_assert_int_eq(a.status, FHC_HIT);
    ck_assert_int_eq(b.status, FHC_HIT);
    ck_assert_uint_eq(b.op.piece[0].key[0], a.op.piece[0].key[0]);
    ck_assert_uint_eq(pstats(0, 1).held_regions, 1);
    ck_assert_uint_eq(pstats(1, 0).target_held_regions, 1);
    ck_assert_uint_eq(pstats(1, 0).target_held_bytes, 4 * B);
    fhc_release(ranks[0].c, &a.op);
    fhc_release(ranks[0].c, &b.op);
    teardown_n(2);
}
END_TEST

START_TEST(config_is_checked)
{
    fhc_params_t p = { .nranks = 3, .rank = 0, .bucket = B, .region_max = RMAX,
                       .M = B, .maxvictim = 0 };
    fhc_env_t env = { .pin = t_pin, .unpin = t_unpin, .allowed = t_allowed,
                      .send = t_send };
    fhc_t *c;
    char why[128];
    ck_assert_int_eq(fhc_create(&p, &env, &c, why, sizeof why), FHC_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(why, "M too small"));
    p.M = 2 * 3 * B;                      /* F = 3 buckets -> R = 2 buckets */
    ck_assert_int_eq(fhc_create(&p, &env, &c, why, sizeof why), 0);
    ck_assert_uint_eq(fhc_F(c), 3 * B);
    ck_assert_uint_eq(fhc_region_max(c), 2 * B);
    ck_assert_uint_eq(fhc_chunk_len(c, 2 * B - 1, 100), 1);
    fhc_destroy(c);
    p.bucket = 3000;
    ck_assert_int_eq(fhc_create(&p, &env, &c, why, sizeof why), FHC_ERR_CONFIG);
}
END_TEST

START_TEST(wire_round_trips)
{
    static const char data[5] = "abcd";
    fhc_req_t q = { .token = 9, .lo = 4096, .hi = 8192, .nrel = 2,
                    .rel = { 1, 2 }, .data_dst = 5000, .data_len = 5, .data = data }, q2;
    uint8_t buf[1024];
    size_t n = fhc_req_encode(&q, buf, sizeof buf);
    ck_assert_uint_eq(n, FHC_REQ_HDR + 16 + 5);
    ck_assert_int_eq(fhc_req_decode(buf, n, &q2, NULL, 0), 0);
    ck_assert_uint_eq(q2.token, 9);
    ck_assert_uint_eq(q2.rel[1], 2);
    ck_assert_int_eq(memcmp(q2.data, data, 5), 0);
    ck_assert_uint_eq(fhc_req_encode(&q, buf, n - 1), 0);
    fhc_rep_t r = { .token = 3, .nreg = 1,
                    .reg = { { .base = 4096, .len = 4096, .key = { 7, 8 }, .granted = 1 } } }, r2;
    n = fhc_rep_encode(&r, buf, sizeof buf);
    ck_assert_int_eq(fhc_rep_decode(buf, n, &r2, NULL, 0), 0);
    ck_assert_uint_eq(r2.reg[0].key[1], 8);
    ck_assert_int_eq(r2.reg[0].granted, 1);
    buf[FHC_REP_HDR + 32] = 8;            /* unknown flag */
    ck_assert_int_eq(fhc_rep_decode(buf, n, &r2, NULL, 0), FHC_ERR_INVALID);
    /* What peers may reach travels in the flags: read-only, [4 KiB, 8 KiB)
     * of a 16 KiB region; a part outside the region is refused. */
    r.reg[0].len = 16384;
    r.reg[0].reach = FHC_REACH_RO | fhc_reach_part(4096, 8192);
    n = fhc_rep_encode(&r, buf, sizeof buf);
    ck_assert_int_eq(fhc_rep_decode(buf, n, &r2, NULL, 0), 0);
    ck_assert_uint_eq(r2.reg[0].reach, r.reg[0].reach);
    ck_assert_int_eq(r2.reg[0].granted, 1);
    ck_assert_uint_eq(fhc_reach_lo(r2.reg[0].reach), 4096);
    ck_assert_uint_eq(fhc_reach_hi(r2.reg[0].reach, 16384), 8192);
    r.reg[0].reach = fhc_reach_part(8192, 8192);      /* empty */
    n = fhc_rep_encode(&r, buf, sizeof buf);
    ck_assert_int_eq(fhc_rep_decode(buf, n, &r2, NULL, 0), FHC_ERR_INVALID);
    r.reg[0].reach = fhc_reach_part(0, 20480);        /* past the region */
    n = fhc_rep_encode(&r, buf, sizeof buf);
    ck_assert_int_eq(fhc_rep_decode(buf, n, &r2, NULL, 0), FHC_ERR_INVALID);
}
END_TEST


int main(void)
{
    Suite *s = suite_create("fhc");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, adjacent_missing_buckets_become_one_region);
    tcase_add_test(tc, a_chunk_spans_several_regions);
    tcase_add_test(tc, a_resident_run_goes_out_before_the_cold_runs_move_is_answered);
    tcase_add_test(tc, a_region_over_a_hole_is_aimed_again_at_the_run_asked_for);
    tcase_add_test(tc, victim_fifo_is_lazy_ordered_and_bounded_by_maxvictim);
    tcase_add_test(tc, remote_release_feeds_the_victim_fifo_and_evicts_at_maxvictim);
    tcase_add_test(tc, unused_fifo_gives_the_least_recently_used_victim);
    tcase_add_test(tc, release_to_zero_wakes_an_op_waiting_for_budget);
    tcase_add_test(tc, target_enforces_F_and_initiator_stays_within_it);
    tcase_add_test(tc, a_merge_the_target_refused_is_not_asked_again);
    tcase_add_test(tc, two_ops_on_one_missing_bucket_share_one_move);
    tcase_add_test(tc, a_lost_link_fails_the_moves_in_flight);
    tcase_add_test(tc, small_put_rides_in_the_move);
    tcase_add_test(tc, requests_outside_the_segment_are_refused);
    tcase_add_test(tc, malformed_requests_change_nothing);
    tcase_add_test(tc, holds_stay_exact_when_moves_overlap_and_replies_reorder);
    tcase_add_test(tc, config_is_checked);
    tcase_add_test(tc, wire_round_trips);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}

