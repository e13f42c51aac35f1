/*
 * test_fhc_budget.c -- adaptive budgets in the registration cache core
 * (firehose/cache/fhc_budget.c; docs/firehose-cache.md, "Budgets"): a
 * grant on demand, a reclaim that honours the floor and waits for busy
 * firehoses, deferred moves served in arrival order, decay, a dead holder,
 * and the wire checks of the new fields.
 *
 * Four caches (rank 0 the target, ranks 1-3 initiators) talk through a
 * hand-driven queue (fhc_fake_env.h); some tests speak for an initiator
 * with hand-made requests to steer the target exactly.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"

#define B     4096u
#define R     (16u * B)             /* frame */
#define F     (2u * R)              /* floor: M / 3 */
#define POOL  (3u * F)
#define SEG   ((uintptr_t)1 << 40)
#define SEGLEN ((size_t)1 << 22)
#define N     4u
#define RMAX  R

#include "fhc_fake_env.h"

static void setup(void)
{
    fhc_params_t p = { .bucket = B, .region_max = R, .M = POOL, .maxvictim = 4 * R,
                       .put_in_move = 0, .budget = FHC_BUDGET_ADAPTIVE };
    fake_setup(N, &p);
    ck_assert_uint_eq(fhc_F(ranks[0].c), F);
    ck_assert_uint_eq(fhc_region_max(ranks[0].c), R);
}

static void teardown(void)
{
    teardown_n(N);
}

/* Acquires frame `frame` (whole) of rank 0 from rank `from`. */
static int acquire_frame(uint32_t from, top_t *t, unsigned frame)
{
    memset(t, 0, sizeof *t);
    t->status = 1;                      /* not called yet */
    t->op.peer = 0;
    t->op.raddr = SEG + (uintptr_t)frame * R;
    t->op.len = R;
    t->op.ready = t_ready;
    t->op.user = t;
    return fhc_acquire(ranks[from].c, &t->op);
}

/* Rank `from` uses frame `frame` once: acquire, everything delivered,
 * release. */
static void use_frame(uint32_t from, unsigned frame)
{
    top_t t;
    int rc = acquire_frame(from, &t, frame);
    deliver_all();
    ck_assert(rc == FHC_HIT || (t.calls == 1 && t.status == FHC_HIT));
    fhc_release(ranks[from].c, &t.op);
    deliver_all();
}

/* A hand-made move from `from` to rank 0 (one frame), delivered; returns
 * the reply, which must be the only message the target sent back unless
 * others is non-NULL (then the count of other messages is stored). */
static fhc_rep_t raw_move(uint32_t from, unsigned frame, uint32_t want,
                          const uint64_t *rel, unsigned nrel, uint64_t token)
{
    fhc_req_t q = { .token = token, .lo = SEG + (uintptr_t)frame * R,
                    .hi = SEG + (uintptr_t)frame * R + R, .nrel = nrel, .want = want };
    for (unsigned i = 0; i < nrel; i++)
        q.rel[i] = rel[i];
    uint8_t buf[512];
    size_t n = fhc_req_encode(&q, buf, sizeof buf);
    ck_assert_uint_gt(n, 0);
    fhc_on_message(ranks[0].c, from, 0, buf, n);
    fhc_rep_t rep = { .status = 1 };
    for (unsigned i = 0; i < nq; i++)
        if (queue[i].is_reply && queue[i].dst == from) {
            ck_assert_int_eq(fhc_rep_decode(queue[i].data, queue[i].len, &rep, NULL, 0), 0);
            memmove(&queue[i], &queue[i + 1], (nq - i - 1) * sizeof queue[0]);
            nq--;
            break;
        }
    return rep;
}

static unsigned count_kind(uint32_t dst, unsigned kind)
{
    unsigned n = 0;
    for (unsigned i = 0; i < nq; i++)
        n += queue[i].dst == dst && !queue[i].is_reply &&
             fhc_wire_kind(queue[i].data, queue[i].len) == kind;
    return n;
}

/* ---------------------------------------------------------------- tests */

START_TEST(demand_raises_the_budget_past_the_floor)
{
    setup();
    use_frame(1, 0);
    use_frame(1, 1);                    /* holds F */
    ck_assert_uint_eq(pstats(1, 0).budget, F);
    top_t t;
    ck_assert_int_eq(acquire_frame(1, &t, 2), FHC_PENDING);
    ck_assert_uint_eq(nq, 1);
    fhc_req_t q;
    ck_assert_int_eq(fhc_req_decode(queue[0].data, queue[0].len, &q, NULL, 0), 0);
    ck_assert_uint_eq(q.nrel, 1);       /* evicted frame 0 to fit F ... */
    ck_assert_uint_eq(q.want, R / B);   /* ... and says it would have grown */
    deliver_all();
    ck_assert(t.calls == 1 && t.status == FHC_HIT);
    fhc_release(ranks[1].c, &t.op);
    ck_assert_uint_eq(pstats(0, 1).grants, 1);
    ck_assert_uint_gt(pstats(0, 1).t_budget, F);
    ck_assert_uint_eq(pstats(1, 0).budget, pstats(0, 1).t_budget);   /* told in the reply */
    /* Frame 0 again: the grant leaves room, nothing is evicted. */
    ck_assert_int_eq(acquire_frame(1, &t, 0), FHC_PENDING);
    ck_assert_int_eq(fhc_req_decode(queue[0].data, queue[0].len, &q, NULL, 0), 0);
    ck_assert_uint_eq(q.nrel, 0);
    ck_assert_uint_eq(q.want, 0);
    deliver_all();
    fhc_release(ranks[1].c, &t.op);
    ck_assert_uint_eq(pstats(1, 0).held_bytes, 3 * R);
    teardown();
}
END_TEST

/* Rank 1 grows to the whole pool (budget 2R, 3R, 4.5R, then 6R = M: the
 * raises are max(want, budget/2), capped by the pool) and holds it all;
 * ranks 2 and 3 then need their floors. */
static void grow_rank1(void)
{
    for (unsigned f = 0; f < 9; f++)
        use_frame(1, f);
    ck_assert_uint_eq(pstats(0, 1).t_budget, POOL);
    ck_assert_uint_eq(pstats(1, 0).held_bytes, POOL);
}

START_TEST(a_floor_move_is_deferred_and_served_by_a_reclaim)
{
    setup();
    grow_rank1();
    /* Ranks 2 and 3 each want their whole floor (two frames). */
    top_t a[2], b[2];
    for (unsigned i = 0; i < 2; i++) {
        ck_assert_int_eq(acquire_frame(2, &a[i], 10 + i), FHC_PENDING);
        ck_assert_int_eq(acquire_frame(3, &b[i], 20 + i), FHC_PENDING);
    }
    for (unsigned i = 0; i < 4; i++)
        deliver(0);                     /* the four moves */
    ck_assert_uint_eq(pstats(0, 2).deferred + pstats(0, 3).deferred, 4);
    ck_assert_uint_ge(count_kind(1, FHC_WIRE_RECLAIM), 1);
    deliver_all();
    for (unsigned i = 0; i < 2; i++) {
        ck_assert(a[i].calls == 1 && a[i].status == FHC_HIT);
        ck_assert(b[i].calls == 1 && b[i].status == FHC_HIT);
    }
    /* The floor holds: rank 1 is reclaimed down to F exactly, never below,
     * and keeps F. */
    ck_assert_uint_eq(pstats(0, 1).t_budget, F);
    ck_assert_uint_eq(pstats(1, 0).budget, F);
    ck_assert_uint_eq(pstats(1, 0).held_bytes, F);
    ck_assert_uint_eq(pstats(0, 1).target_held_bytes, F);
    ck_assert_uint_ge(pstats(1, 0).reclaimed, 1);
    for (unsigned i = 0; i < 2; i++) {
        fhc_release(ranks[2].c, &a[i].op);
        fhc_release(ranks[3].c, &b[i].op);
    }
    deliver_all();
    teardown();
}
END_TEST

START_TEST(a_busy_firehose_is_given_back_only_when_its_rdma_completed)
{
    setup();
    grow_rank1();
    /* Rank 1 keeps every firehose it holds busy (an RDMA in flight). */
    top_t busy[6];
    unsigned nb = 0;
    for (unsigned f = 9; f-- > 3;) {
        top_t t;
        if (acquire_frame(1, &t, f) == FHC_HIT)
            busy[nb++] = t, busy[nb - 1].op.user = &busy[nb - 1];
        else
            ck_abort_msg("frame %u not held", f);
    }
    ck_assert_uint_eq(nb, 6);
    ck_assert_uint_eq(pstats(1, 0).unused_bytes, 0);
    top_t a;
    ck_assert_int_eq(acquire_frame(2, &a, 10), FHC_PENDING);
    deliver_all();
    /* RECLAIM answered, but nothing unused could go: still deferred. */
    ck_assert_uint_eq(pstats(0, 2).deferred, 1);
    ck_assert_int_eq(a.calls, 0);
    ck_assert_uint_ge(pstats(1, 0).reclaimed, 1);
    ck_assert(fhc_budget_waiting(ranks[1].c, 0));     /* hit layer: give back */
    for (unsigned i = 0; i < nb && a.calls == 0; i++) {
        fhc_release(ranks[1].c, &busy[i].op);
        busy[i].calls = -1;
        deliver_all();
    }
    ck_assert(a.calls == 1 && a.status == FHC_HIT);
    for (unsigned i = 0; i < nb; i++)
        if (busy[i].calls != -1)
            fhc_release(ranks[1].c, &busy[i].op);
    fhc_release(ranks[2].c, &a.op);
    deliver_all();
    teardown();
}
END_TEST

START_TEST(deferred_moves_are_served_in_arrival_order)
{
    setup();
    grow_rank1();
    top_t a, b;
    ck_assert_int_eq(acquire_frame(3, &b, 20), FHC_PENDING);
    ck_assert_int_eq(acquire_frame(2, &a, 10), FHC_PENDING);
    deliver(0);                         /* rank 3 first */
    deliver(0);
    ck_assert_uint_eq(pstats(0, 3).deferred, 1);
    ck_assert_uint_eq(pstats(0, 2).deferred, 1);
    /* Deliver only what rank 1 exchanges with rank 0 until replies show. */
    int first = -1;
    while (nq && first < 0) {
        unsigned i = 0;
        while (i < nq && queue[i].is_reply)
            i++;
        if (i == nq)
            break;
        deliver(i);
        for (unsigned j = 0; j < nq && first < 0; j++)
            if (queue[j].is_reply && queue[j].src == 0)
                first = (int)queue[j].dst;
    }
    ck_assert_int_eq(first, 3);         /* FIFO: rank 3 asked first */
    deliver_all();
    ck_assert(a.calls == 1 && a.status == FHC_HIT);
    ck_assert(b.calls == 1 && b.status == FHC_HIT);
    fhc_release(ranks[2].c, &a.op);
    fhc_release(ranks[3].c, &b.op);
    deliver_all();
    teardown();
}
END_TEST

START_TEST(an_idle_budget_decays_to_what_is_held)
{
    setup();
    /* Hand-made moves of rank 1: one with demand (a grant), then moves
     * without demand that each release the frame before, so that rank 1
     * holds one frame of a larger budget. */
    fhc_rep_t rep = raw_move(1, 0, R / B, NULL, 0, 1);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_uint_gt(rep.budget, F);
    ck_assert_int_eq(rep.lowered, 0);
    uint64_t prev = rep.reg[0].base;
    int lowered = 0;
    for (unsigned i = 1; i <= 20 && !lowered; i++) {
        rep = raw_move(1, i, 0, &prev, 1, 1 + i);
        ck_assert_int_eq(rep.status, 0);
        prev = rep.reg[0].base;
        lowered = rep.lowered;
    }
    ck_assert_int_eq(lowered, 1);
    ck_assert_uint_eq(rep.budget, F);   /* max(floor, held = one frame) */
    ck_assert_uint_eq(count_kind(1, FHC_WIRE_RECLAIM), 1);
    ck_assert_uint_eq(pstats(0, 1).reclaims, 1);
    nq = 0;                             /* rank 1 is played by hand */
    /* Its answer (a release-only request with the RECLAIM's id) makes the
     * lower budget the enforced one. */
    fhc_req_t q = { .token = rep.bver };
    uint8_t buf[128];
    size_t n = fhc_req_encode(&q, buf, sizeof buf);
    fhc_on_message(ranks[0].c, 1, 0, buf, n);
    ck_assert_uint_eq(nq, 0);           /* no reply to an answer */
    ck_assert_uint_eq(pstats(0, 1).t_budget, F);
    /* Drop the last hold so the invariants see a quiet rank 1. */
    fhc_req_t last = { .token = 99, .lo = SEG + 30 * R, .hi = SEG + 30 * R + B,
                       .nrel = 1, .rel = { prev } };
    n = fhc_req_encode(&last, buf, sizeof buf);
    fhc_on_message(ranks[0].c, 1, 0, buf, n);
    nq = 0;
    fhc_peer_dead(ranks[0].c, 1);
    teardown();
}
END_TEST

START_TEST(a_dead_holder_frees_the_bytes_deferred_moves_wait_for)
{
    setup();
    grow_rank1();
    size_t held = pstats(0, 1).target_held_bytes;
    ck_assert_uint_gt(held, F);
    top_t a;
    ck_assert_int_eq(acquire_frame(2, &a, 10), FHC_PENDING);
    deliver(0);
    ck_assert_uint_eq(pstats(0, 2).deferred, 1);
    nq = 0;                             /* rank 1 never answers: it died */
    fhc_peer_dead(ranks[0].c, 1);
    ck_assert_uint_eq(pstats(0, 1).target_held_bytes, 0);
    ck_assert_uint_eq(pstats(0, 1).t_budget, F);
    ck_assert_uint_eq(nq, 1);           /* the deferred move's reply */
    deliver_all();
    ck_assert(a.calls == 1 && a.status == FHC_HIT);
    fhc_release(ranks[2].c, &a.op);
    deliver_all();
    /* Rank 1's own table still lists firehoses the dead target side
     * forgot: destroy it before the cross-rank check would matter. */
    char why[256];
    for (uint32_t i = 0; i < N; i++) {
        ck_assert_msg(fhc_check_invariants(ranks[i].c, why, sizeof why) == 0, "%s", why);
        fhc_destroy(ranks[i].c);
    }
}
END_TEST

START_TEST(budget_fields_are_range_checked)
{
    setup();
    uint8_t buf[128];
    /* want past FHC_WIRE_MAX_WANT, and a release-only request with want */
    fhc_req_t q = { .token = 5, .lo = SEG, .hi = SEG + B, .want = FHC_WIRE_MAX_WANT };
    size_t n = fhc_req_encode(&q, buf, sizeof buf);
    ck_assert_uint_gt(n, 0);
    buf[40] = 0xff, buf[41] = 0xff, buf[42] = 0xff, buf[43] = 0x7f;
    fhc_req_t d;
    ck_assert_int_lt(fhc_req_decode(buf, n, &d, NULL, 0), 0);
    fhc_req_t ro = { .token = 5, .want = 1 };
    ck_assert_uint_eq(fhc_req_encode(&ro, buf, sizeof buf), FHC_REQ_HDR);
    ck_assert_int_lt(fhc_req_decode(buf, FHC_REQ_HDR, &d, NULL, 0), 0);
    /* a reply whose budget is not a multiple of 8 */
    fhc_rep_t r = { .token = 1, .budget = F, .bver = 1 };
    n = fhc_rep_encode(&r, buf, sizeof buf);
    buf[16] |= 4;
    fhc_rep_t rd;
    ck_assert_int_lt(fhc_rep_decode(buf, n, &rd, NULL, 0), 0);
    /* a RECLAIM below the floor, or not a multiple of B, is refused and
     * changes nothing (no answer, budget kept) */
    fhc_reclaim_t rc = { .id = 7, .budget = F - B };
    n = fhc_reclaim_encode(&rc, buf, sizeof buf);
    ck_assert_uint_eq(n, FHC_RECLAIM_LEN);
    fhc_on_message(ranks[1].c, 0, 0, buf, n);
    rc.budget = F + 8;
    n = fhc_reclaim_encode(&rc, buf, sizeof buf);
    fhc_on_message(ranks[1].c, 0, 0, buf, n);
    ck_assert_uint_eq(nq, 0);
    ck_assert_uint_eq(pstats(1, 0).budget, F);
    ck_assert_uint_eq(pstats(1, 0).refused, 2);
    /* an answer to no RECLAIM is refused */
    fhc_req_t ans = { .token = 3 };
    n = fhc_req_encode(&ans, buf, sizeof buf);
    fhc_on_message(ranks[0].c, 1, 0, buf, n);
    ck_assert_uint_eq(nq, 0);
    ck_assert_uint_eq(pstats(0, 1).refused, 1);
    teardown();
}
END_TEST

START_TEST(static_budgets_ignore_demand)
{
    fhc_params_t p = { .bucket = B, .region_max = R, .M = POOL, .maxvictim = 4 * R };
    fake_setup(N, &p);
    fhc_rep_t rep = raw_move(1, 0, R / B, NULL, 0, 1);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_uint_eq(rep.budget, 0);   /* no budget on the wire */
    ck_assert_uint_eq(pstats(0, 1).grants, 0);
    ck_assert_uint_eq(pstats(0, 1).t_budget, F);
    nq = 0;
    fhc_peer_dead(ranks[0].c, 1);
    teardown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fhc_budget");
    TCase *tc = tcase_create("adaptive");
    tcase_add_test(tc, demand_raises_the_budget_past_the_floor);
    tcase_add_test(tc, a_floor_move_is_deferred_and_served_by_a_reclaim);
    tcase_add_test(tc, a_busy_firehose_is_given_back_only_when_its_rdma_completed);
    tcase_add_test(tc, deferred_moves_are_served_in_arrival_order);
    tcase_add_test(tc, an_idle_budget_decays_to_what_is_held);
    tcase_add_test(tc, a_dead_holder_frees_the_bytes_deferred_moves_wait_for);
    tcase_add_test(tc, budget_fields_are_range_checked);
    tcase_add_test(tc, static_budgets_ignore_demand);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}
