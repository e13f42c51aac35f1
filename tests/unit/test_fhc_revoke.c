/*
 * test_fhc_revoke.c -- the registration cache core (firehose/cache) on
 * freed or reused memory: invalidation, revocation and its acks, a revoke
 * that overtakes its grant; and a hostile target whose grant lies outside
 * the frame asked for.  The rest of the core: test_fhc.c.
 *
 * Two caches talk through a hand-driven message queue
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

/* ------------------------------------------------ freed or reused memory */

static void check_ok(uint32_t r)
{
    char why[256];
    int rc = fhc_check_invariants(ranks[r].c, why, sizeof why);
    ck_assert_msg(rc == 0, "rank %u: %s", r, why);
}

START_TEST(invalidate_deregisters_unused_regions_at_once_and_skips_others)
{
    setup_n(2, 4 * RMAX, 4 * RMAX);
    fhc_local_t l;
    ck_assert_int_eq(fhc_pin_local(ranks[0].c, SEG + B, 10, &l), 0);
    ck_assert_uint_eq(l.nmr, 1);
    ck_assert_uint_eq(l.mr_base[0], SEG + B);   /* one bucket, whole */
    ck_assert_uint_eq(l.mr_len[0], B);
    fhc_unpin_local(ranks[0].c, &l);            /* now a victim */
    ck_assert_uint_eq(stats(0).victim_len, 1);
    /* a range that misses the region changes nothing */
    ck_assert_uint_eq(fhc_invalidate(ranks[0].c, SEG, B), 0);
    ck_assert_uint_eq(fhc_invalidate(ranks[0].c, SEG + 2 * B, B), 0);
    ck_assert_uint_eq(ranks[0].unpins, 0);
    /* one byte of it: the whole region goes, now */
    ck_assert_uint_eq(fhc_invalidate(ranks[0].c, SEG + B + 100, 1), 1);
    ck_assert_uint_eq(ranks[0].unpins, 1);
    ck_assert_uint_eq(stats(0).nregions, 0);
    ck_assert_uint_eq(stats(0).victim_len, 0);
    ck_assert_uint_eq(stats(0).invalidations, 1);
    /* the same buckets pin again: a NEW registration (the new pages) */
    ck_assert_int_eq(fhc_pin_local(ranks[0].c, SEG + B, 10, &l), 0);
    ck_assert_uint_eq(stats(0).registrations, 2);
    check_ok(0);
    fhc_unpin_local(ranks[0].c, &l);
    teardown_n(2);
}
END_TEST

START_TEST(a_locally_pinned_region_dies_at_its_last_unpin)
{
    setup_n(2, 4 * RMAX, 4 * RMAX);
    fhc_local_t a, b;
    ck_assert_int_eq(fhc_pin_local(ranks[0].c, SEG, 2 * B, &a), 0);
    ck_assert_int_eq(fhc_invalidate(ranks[0].c, SEG + B, 1), 1);
    ck_assert_uint_eq(ranks[0].unpins, 0);      /* still pinned by a */
    ck_assert_uint_eq(stats(0).dead_bytes, 2 * B);
    check_ok(0);
    /* a new pin of the same memory does not reuse the dead region */
    ck_assert_int_eq(fhc_pin_local(ranks[0].c, SEG, 2 * B, &b), 0);
    ck_assert_ptr_ne(b.mr[0], a.mr[0]);
    check_ok(0);
    fhc_unpin_local(ranks[0].c, &a);
    ck_assert_uint_eq(ranks[0].unpins, 1);
    ck_assert_uint_eq(ranks[0].unpinned[0], SEG);
    ck_assert_uint_eq(stats(0).dead_bytes, 0);
    fhc_unpin_local(ranks[0].c, &b);
    check_ok(0);
    /* everything: the victim goes too */
    ck_assert_uint_eq(fhc_invalidate(ranks[0].c, 0, SIZE_MAX), 1);
    ck_assert_uint_eq(stats(0).nregions, 0);
    teardown_n(2);
}
END_TEST

START_TEST(a_held_region_is_revoked_and_freed_after_the_ack)
{
    setup_n(2, 4 * RMAX, 4 * RMAX);
    top_t t;
    acquire(0, &t, 1, SEG, B, NULL);
    deliver_all();
    ck_assert_int_eq(t.status, FHC_HIT);
    fhc_release(ranks[0].c, &t.op);
    ck_assert_uint_eq(pstats(1, 0).target_held_regions, 1);
    /* rank 1 frees the memory: one REVOKE to the holder, no dereg yet */
    ck_assert_uint_eq(fhc_invalidate(ranks[1].c, SEG, B), 1);
    ck_assert_uint_eq(fhc_revokes_pending(ranks[1].c), 1);
    ck_assert_uint_eq(ranks[1].unpins, 0);
    ck_assert_uint_eq(pstats(1, 0).target_held_regions, 0);
    ck_assert_uint_eq(nq, 1);
    ck_assert(!queue[0].is_reply);
    check_ok(1);
    deliver(0);                                 /* rank 0 drops it, acks */
    ck_assert_uint_eq(pstats(0, 1).held_regions, 0);
    ck_assert_uint_eq(pstats(0, 1).revoked, 1);
    ck_assert_uint_eq(nq, 1);
    check_ok(0);
    deliver(0);                                 /* the ack: dereg now */
    ck_assert_uint_eq(fhc_revokes_pending(ranks[1].c), 0);
    ck_assert_uint_eq(ranks[1].unpins, 1);
    check_ok(1);
    /* the next access misses and gets a new registration */
    ck_assert_int_eq(acquire(0, &t, 1, SEG, B, NULL), FHC_PENDING);
    deliver_all();
    ck_assert_int_eq(t.status, FHC_HIT);
    ck_assert_uint_ne(t.op.piece[0].key[0], 1);
    fhc_release(ranks[0].c, &t.op);
    teardown_n(2);
}
END_TEST

/* A holder that dies before it acks (fhc_peer_dead, called by the runtime
 * when the service paths' connection with it is lost for good): its REVOKE
 * counts as acked, so the region is deregistered and nothing waits for
 * the ack -- the runtime waits on fhc_revokes_pending before it publishes
 * memory, and would wait for ever.  Its holds go too. */
START_TEST(a_dead_holder_s_revokes_count_as_acked)
{
    setup_n(2, 4 * RMAX, 4 * RMAX);
    top_t t, u;
    acquire(0, &t, 1, SEG, B, NULL);
    deliver_all();
    ck_assert_int_eq(t.status, FHC_HIT);
    fhc_release(ranks[0].c, &t.op);
    acquire(0, &u, 1, SEG + RMAX, B, NULL);
    deliver_all();
    ck_assert_int_eq(u.status, FHC_HIT);
    fhc_release(ranks[0].c, &u.op);
    ck_assert_uint_eq(pstats(1, 0).target_held_regions, 2);
    ck_assert_uint_eq(fhc_invalidate(ranks[1].c, SEG, B), 1);
    ck_assert_uint_eq(fhc_revokes_pending(ranks[1].c), 1);
    ck_assert_uint_eq(ranks[1].unpins, 0);
    nq = 0;                                     /* rank 0 dies: no ack */
    fhc_peer_dead(ranks[1].c, 0);
    ck_assert_uint_eq(fhc_revokes_pending(ranks[1].c), 0);
    ck_assert_uint_eq(ranks[1].unpins, 1);      /* the revoked region */
    ck_assert_uint_eq(stats(1).dead_bytes, 0);
    ck_assert_uint_eq(pstats(1, 0).target_held_regions, 0);
    ck_assert_uint_eq(pstats(1, 0).target_held_bytes, 0);
    ck_assert_uint_eq(stats(1).remote_bytes, 0);
    ck_assert_uint_eq(stats(1).victim_len, 1);  /* the other, unused now */
    check_ok(1);
    fhc_peer_dead(ranks[1].c, 0);               /* idempotent */
    ck_assert_uint_eq(fhc_revokes_pending(ranks[1].c), 0);
    check_ok(1);
    /* Rank 0's own table still lists its firehoses on rank 1: the test
     * checks rank 1 only. */
    fhc_destroy(ranks[0].c);
    fhc_destroy(ranks[1].c);
}
END_TEST

START_TEST(a_firehose_in_use_is_acked_only_after_its_rdma_completed)
{
    setup_n(2, 4 * RMAX, 4 * RMAX);
    top_t t, u;
    acquire(0, &t, 1, SEG, B, NULL);
    deliver_all();
    ck_assert_int_eq(t.status, FHC_HIT);        /* RDMA "in flight" */
    fhc_invalidate(ranks[1].c, SEG, B);
    deliver(0);                                 /* REVOKE: no ack yet */
    ck_assert_uint_eq(nq, 0);
    /* no new hit through it: a new op misses; the target answers AGAIN
     * until the ack, and the op keeps no reference while it retries */
    ck_assert_int_eq(acquire(0, &u, 1, SEG + 8, 8, NULL), FHC_PENDING);
    deliver(0);
    ck_assert_uint_eq(nq, 1);
    ck_assert(queue[0].is_reply);
    deliver(0);                                 /* AGAIN: re-sent */
    ck_assert_uint_eq(pstats(0, 1).retries, 1);
    ck_assert_uint_eq(u.calls, 0);
    ck_assert_uint_eq(nq, 1);
    deliver(0);                                 /* AGAIN again ... */
    ck_assert_uint_eq(ranks[1].unpins, 0);
    fhc_release(ranks[0].c, &t.op);             /* RDMA done: ack queued */
    ck_assert_uint_eq(fhc_revokes_pending(ranks[1].c), 1);
    deliver_all();                              /* reply, ack, retry, grant */
    ck_assert_uint_eq(fhc_revokes_pending(ranks[1].c), 0);
    ck_assert_uint_eq(ranks[1].unpins, 1);
    ck_assert_int_eq(u.calls, 1);
    ck_assert_int_eq(u.status, FHC_HIT);
    ck_assert_uint_ne(u.op.piece[0].key[0], t.op.piece[0].key[0]);
    check_ok(0);
    check_ok(1);
    fhc_release(ranks[0].c, &u.op);
    teardown_n(2);
}
END_TEST

START_TEST(a_revoke_that_overtakes_the_grant_stops_its_install)
{
    setup_n(2, 4 * RMAX, 4 * RMAX);
    top_t t;
    acquire(0, &t, 1, SEG, B, NULL);
    deliver(0);                                 /* granted; reply queued */
    fhc_invalidate(ranks[1].c, SEG, B);         /* REVOKE queued after it */
    ck_assert_uint_eq(nq, 2);
    deliver(1);                                 /* REVOKE first: ack */
    deliver(0);                                 /* the stale grant: ignored */
    ck_assert_uint_eq(pstats(0, 1).held_regions, 0);
    deliver_all();                              /* ack, then op's new move */
    ck_assert_int_eq(t.calls, 1);
    ck_assert_int_eq(t.status, FHC_HIT);
    ck_assert_uint_eq(ranks[1].unpins, 1);
    ck_assert_uint_eq(pstats(1, 0).target_held_regions, 1);
    check_ok(0);
    check_ok(1);
    fhc_release(ranks[0].c, &t.op);
    teardown_n(2);
}
END_TEST

START_TEST(a_release_of_a_revoked_region_is_accepted)
{
    setup_n(2, RMAX, 4 * RMAX);                 /* F = R: one frame held */
    top_t t;
    acquire(0, &t, 1, SEG, B, NULL);
    deliver_all();
    fhc_release(ranks[0].c, &t.op);
    fhc_invalidate(ranks[1].c, SEG, B);         /* REVOKE queued (not sent) */
    msg_t revoke = queue[0];
    nq = 0;
    /* rank 0 moves to the next frame, releasing the revoked region */
    acquire(0, &t, 1, SEG + RMAX, B, NULL);
    deliver_all();
    ck_assert_int_eq(t.status, FHC_HIT);
    ck_assert_uint_eq(stats(1).refused, 0);
    fhc_on_message(ranks[0].c, 1, 0, revoke.data, revoke.len);   /* late */
    deliver_all();                              /* the ack */
    ck_assert_uint_eq(fhc_revokes_pending(ranks[1].c), 0);
    check_ok(0);
    check_ok(1);
    fhc_release(ranks[0].c, &t.op);
    teardown_n(2);
}
END_TEST

/* ------------------------------------------------ a hostile target */

/* Rank 0 asks rank 1 for the bucket at addr; instead of rank 1's answer
 * it gets a forged reply granting [gbase, +glen).  The grant must not be
 * installed (nothing held, no hit, a log line), and the op asks again. */
static void forged_grant_is_rejected(uintptr_t addr, uintptr_t gbase, size_t glen)
{
    top_t t;
    unsigned logs = ranks[0].logs;
    acquire(0, &t, 1, addr, 10, NULL);
    ck_assert_uint_eq(nq, 1);
    fhc_req_t q;
    ck_assert_int_eq(fhc_req_decode(queue[0].data, queue[0].len, &q, NULL, 0), 0);
    nq = 0;                                       /* rank 1 never sees it */
    fhc_rep_t r = { .token = q.token, .status = 0, .nreg = 1,
                    .reg = { { .base = gbase, .len = glen, .key = { 99, 99 },
                               .granted = 1 } } };
    uint8_t buf[512];
    size_t n = fhc_rep_encode(&r, buf, sizeof buf);
    ck_assert_uint_gt(n, 0);
    fhc_on_message(ranks[0].c, 1, 1, buf, n);
    ck_assert_msg(pstats(0, 1).held_regions == 0,
                  "grant [%#lx, +%zu) for a move at %#lx was installed",
                  (unsigned long)gbase, glen, (unsigned long)addr);
    ck_assert_int_eq(t.calls, 0);
    ck_assert_uint_gt(ranks[0].logs, logs);
    ck_assert_uint_eq(nq, 1);                     /* asked again, honestly */
    deliver_all();
    ck_assert_int_eq(t.status, FHC_HIT);
    ck_assert_uint_ne(t.op.piece[0].key[0], 99);
    fhc_release(ranks[0].c, &t.op);
    check_ok(0);
    check_ok(1);
}

START_TEST(a_grant_outside_the_frame_asked_for_is_rejected)
{
    const uintptr_t frame = SEG + 2 * RMAX;
    const uintptr_t last = frame + RMAX - B;      /* the frame's last bucket */
    struct { uintptr_t addr, gbase; size_t glen; } v[] = {
        { frame, frame - B, 2 * B },              /* starts in the frame before */
        { last, last, 2 * B },                    /* runs into the next frame */
        { frame, frame - RMAX, 2 * RMAX },        /* covers it and both neighbours */
        { frame, frame + RMAX, B },               /* the next frame only */
        { frame, frame + 1, B },                  /* not on a bucket */
        { frame, frame, B + 1 },                  /* not whole buckets */
        { frame, frame + B, B },                  /* in the frame, not the bucket asked */
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        setup_n(2, 4 * RMAX, 2 * RMAX);
        forged_grant_is_rejected(v[i].addr, v[i].gbase, v[i].glen);
        teardown_n(2);
    }
}


int main(void)
{
    Suite *s = suite_create("fhc_revoke");
    TCase *tc = tcase_create("revoke");
    tcase_add_test(tc, invalidate_deregisters_unused_regions_at_once_and_skips_others);
    tcase_add_test(tc, a_locally_pinned_region_dies_at_its_last_unpin);
    tcase_add_test(tc, a_held_region_is_revoked_and_freed_after_the_ack);
    tcase_add_test(tc, a_firehose_in_use_is_acked_only_after_its_rdma_completed);
    tcase_add_test(tc, a_dead_holder_s_revokes_count_as_acked);
    tcase_add_test(tc, a_revoke_that_overtakes_the_grant_stops_its_install);
    tcase_add_test(tc, a_release_of_a_revoked_region_is_accepted);
    tcase_add_test(tc, a_grant_outside_the_frame_asked_for_is_rejected);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}

