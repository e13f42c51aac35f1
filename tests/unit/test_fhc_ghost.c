/*
 * test_fhc_ghost.c -- the adaptive victim FIFO (firehose/cache/fhc_ghost.c):
 * MAXVICTIM grows while registrations re-pin recently deregistered victims,
 * shrinks back to its configured value when they stop, shrinks at once when
 * a registration fails, and never leaves [maxvictim, maxvictim_max]; in
 * static mode it never moves.
 *
 * One cache and a fake env: local pins of whole frames at made-up addresses
 * (the fake pin() touches no memory), each unpinned at once so that its
 * region becomes a victim.  Cycling over K frames with a FIFO of fewer than
 * K frames re-pins every victim; a stream of fresh frames re-pins none.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "check_main.h"
#include "firehose/cache/fhc.h"

#define B    4096u
#define R    (16u * B)                       /* one frame: one region */
#define BASE ((uintptr_t)1 << 40)
#define MV   (2u * R)                        /* configured MAXVICTIM */
#define MVMAX (8u * R)                       /* FH_FIREHOSE_MAXVICTIM_MAX */

static unsigned pins, unpins, fail_next;
static uint64_t next_mr;

static int g_pin(void *arg, uintptr_t addr, size_t len, int remote, uintptr_t want,
                 void **mr, uint64_t key[2], uint64_t *reach)
{
    (void)arg, (void)addr, (void)len, (void)remote, (void)want;
    if (fail_next) {
        fail_next--;
        return FHC_ERR_NO_MEMORY;
    }
    pins++;
    *mr = (void *)(uintptr_t)++next_mr;
    key[0] = next_mr;
    key[1] = 0;
    *reach = 0;
    return 0;
}

static void g_unpin(void *arg, void *mr)
{
    (void)arg, (void)mr;
    unpins++;
}

static int g_allowed(void *arg, uintptr_t addr, size_t len)
{
    (void)arg, (void)addr, (void)len;
    return 1;
}

static void g_send(void *arg, uint32_t peer, int is_reply, const void *m, size_t len)
{
    (void)arg, (void)peer, (void)is_reply, (void)m, (void)len;
    ck_abort_msg("no message expected");
}

static fhc_t *make(int adaptive, unsigned bugs)
{
    pins = unpins = fail_next = 0;
    next_mr = 0;
    fhc_params_t p = { .nranks = 2, .rank = 0, .bucket = B, .region_max = R,
                       .M = 4 * R, .maxvictim = MV, .maxvictim_max = MVMAX,
                       .victim_adaptive = adaptive, .debug_bugs = bugs };
    fhc_env_t env = { .pin = g_pin, .unpin = g_unpin, .allowed = g_allowed,
                      .send = g_send };
    fhc_t *c;
    char why[128];
    ck_assert_int_eq(fhc_create(&p, &env, &c, why, sizeof why), 0);
    return c;
}

static size_t mv_now(const fhc_t *c)
{
    fhc_stats_t s;
    fhc_stats(c, &s);
    return s.maxvictim_now;
}

/* Pin and unpin frame i; the invariants hold after each call, and the
 * effective MAXVICTIM stays inside its bounds. */
static void touch(fhc_t *c, uint64_t i)
{
    fhc_local_t l;
    char why[256];
    ck_assert_int_eq(fhc_pin_local(c, BASE + i * R, R, &l), 0);
    ck_assert_msg(fhc_check_invariants(c, why, sizeof why) == 0, "%s", why);
    fhc_unpin_local(c, &l);
    ck_assert_msg(fhc_check_invariants(c, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_ge(mv_now(c), MV);
    ck_assert_uint_le(mv_now(c), MVMAX);
}

/* Cycle `rounds` times over k frames. */
static void cycle(fhc_t *c, unsigned k, unsigned rounds)
{
    for (unsigned r = 0; r < rounds; r++)
        for (unsigned i = 0; i < k; i++)
            touch(c, i);
}

START_TEST(maxvictim_grows_while_victims_are_re_pinned_until_they_hit)
{
    fhc_t *c = make(1, 0);
    cycle(c, 6, 40);                  /* 6 frames, FIFO of 2: every pin re-pins */
    fhc_stats_t s;
    fhc_stats(c, &s);
    ck_assert_uint_gt(s.victim_repins, 0);
    ck_assert_uint_gt(s.maxvictim_grows, 0);
    ck_assert_uint_ge(s.maxvictim_now, 6 * R);   /* room for the whole cycle */
    /* ...and now the cycle hits: no registration any more. */
    unsigned before = pins;
    cycle(c, 6, 5);
    ck_assert_uint_eq(pins, before);
    fhc_destroy(c);
}
END_TEST

START_TEST(maxvictim_never_passes_its_max_nor_its_configured_value)
{
    fhc_t *c = make(1, 0);
    /* 9 frames > MVMAX: re-pins forever (the ghost remembers MVMAX / B
     * buckets, so cycles much longer than MVMAX re-pin nothing it knows:
     * a larger FIFO would not help them, and MAXVICTIM stays put). */
    cycle(c, 9, 40);
    ck_assert_uint_eq(mv_now(c), MVMAX);
    cycle(c, 9, 40);
    ck_assert_uint_eq(mv_now(c), MVMAX);
    for (uint64_t i = 1000; i < 3000; i++)
        touch(c, i);                  /* fresh frames: no re-pins */
    ck_assert_uint_eq(mv_now(c), MV);
    fhc_destroy(c);
}
END_TEST

START_TEST(maxvictim_shrinks_step_by_step_when_re_pins_stop)
{
    fhc_t *c = make(1, 0);
    cycle(c, 6, 40);
    size_t grown = mv_now(c);
    ck_assert_uint_gt(grown, MV);
    /* A window of fresh frames shrinks by one frame, not more (the window
     * in progress when they start may still count re-pins). */
    uint64_t f = 1000;
    while (mv_now(c) == grown)
        touch(c, f++);
    ck_assert_uint_eq(mv_now(c), grown - R);
    ck_assert_uint_le(f - 1000, 2 * 64);
    while (mv_now(c) > MV && f < 1000 + 64 * 20)
        touch(c, f++);
    ck_assert_uint_eq(mv_now(c), MV);
    fhc_stats_t s;
    fhc_stats(c, &s);
    ck_assert_uint_ge(s.maxvictim_shrinks, (grown - MV) / R);
    fhc_destroy(c);
}
END_TEST

START_TEST(a_failed_registration_shrinks_maxvictim_at_once)
{
    fhc_t *c = make(1, 0);
    cycle(c, 6, 40);
    ck_assert_uint_gt(mv_now(c), MV);
    fail_next = 1;                    /* the next pin() fails once, then works */
    touch(c, 5000);
    ck_assert_uint_eq(mv_now(c), MV);
    fhc_stats_t s;
    fhc_stats(c, &s);
    ck_assert_uint_le(s.victim_bytes + s.local_bytes, MV);
    fhc_destroy(c);
}
END_TEST

START_TEST(static_mode_never_moves_maxvictim)
{
    fhc_t *c = make(0, 0);
    cycle(c, 6, 40);
    fhc_stats_t s;
    fhc_stats(c, &s);
    ck_assert_uint_eq(s.maxvictim_now, MV);
    ck_assert_uint_eq(s.maxvictim_grows, 0);
    ck_assert_uint_eq(s.victim_repins, 0);
    fhc_destroy(c);
}
END_TEST

START_TEST(the_check_catches_a_maxvictim_past_its_max)
{
    fhc_t *c = make(1, FHC_BUG_VICTIM_PAST_MAX);
    fhc_local_t l;
    char why[256];
    int caught = 0;
    for (unsigned r = 0; r < 40 && !caught; r++)
        for (uint64_t i = 0; i < 9 && !caught; i++) {
            ck_assert_int_eq(fhc_pin_local(c, BASE + i * R, R, &l), 0);
            fhc_unpin_local(c, &l);
            caught = fhc_check_invariants(c, why, sizeof why) != 0;
        }
    ck_assert_msg(caught, "the planted bug went unnoticed");
    fhc_destroy(c);
}
END_TEST

START_TEST(maxvictim_max_below_maxvictim_is_refused)
{
    fhc_params_t p = { .nranks = 2, .rank = 0, .bucket = B, .region_max = R,
                       .M = 4 * R, .maxvictim = MV, .maxvictim_max = MV - B,
                       .victim_adaptive = 1 };
    fhc_env_t env = { .pin = g_pin, .unpin = g_unpin, .allowed = g_allowed,
                      .send = g_send };
    fhc_t *c = NULL;
    char why[128];
    ck_assert_int_eq(fhc_create(&p, &env, &c, why, sizeof why), FHC_ERR_CONFIG);
    ck_assert_ptr_null(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fhc_ghost");
    TCase *tc = tcase_create("adaptive victim FIFO");
    tcase_add_test(tc, maxvictim_grows_while_victims_are_re_pinned_until_they_hit);
    tcase_add_test(tc, maxvictim_never_passes_its_max_nor_its_configured_value);
    tcase_add_test(tc, maxvictim_shrinks_step_by_step_when_re_pins_stop);
    tcase_add_test(tc, a_failed_registration_shrinks_maxvictim_at_once);
    tcase_add_test(tc, static_mode_never_moves_maxvictim);
    tcase_add_test(tc, the_check_catches_a_maxvictim_past_its_max);
    tcase_add_test(tc, maxvictim_max_below_maxvictim_is_refused);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}
