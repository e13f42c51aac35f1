/*
 * test_node_ring.c -- the node rings (firehose/node/node_ring.h): messages
 * come out whole and in order across wrap-around, a full ring refuses
 * (FH_ERR_AGAIN) instead of overwriting, and a slot that claims more than
 * it holds is reported as bad, and a stamp of another lap is no message;
 * the consumer's private cursor (fh_ring_cpeek / fh_ring_cpop) and the
 * producer's kept slot index agree with the counts across many laps, and a
 * producer index overwritten out of range is not used.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "firehose/node/node_ring.h"
#include "check_main.h"

#define SLOTS 4
#define MAXMSG 100

static fh_ring_t *ring;
static uint32_t ssz;

static void setup(void)
{
    ssz = fh_ring_slot_size(MAXMSG);
    ring = aligned_alloc(64, fh_ring_bytes(SLOTS, ssz));
    ck_assert_ptr_nonnull(ring);
    memset(ring, 0, fh_ring_bytes(SLOTS, ssz));
}
static void teardown(void) { free(ring); }

START_TEST(order_and_wrap)
{
    ck_assert_uint_eq(ssz % 64, 0);
    ck_assert_uint_ge(ssz, FH_RING_SLOT_HDR + MAXMSG);
    char hdr[8], pay[MAXMSG];
    for (unsigned i = 0; i < 10 * SLOTS; i++) {
        memset(hdr, (int)i, sizeof hdr);
        size_t pl = i % (MAXMSG - sizeof hdr);
        memset(pay, (int)(i + 1), pl);
        ck_assert_int_eq(fh_ring_push(ring, SLOTS, ssz, hdr, sizeof hdr, pay, pl), FH_OK);
        size_t len;
        const char *m = fh_ring_peek(ring, SLOTS, ssz, &len);
        ck_assert_ptr_nonnull(m);
        ck_assert_uint_eq((uintptr_t)m % 16, 0);
        ck_assert_uint_eq(len, sizeof hdr + pl);
        ck_assert_mem_eq(m, hdr, sizeof hdr);
        if (pl)
            ck_assert_mem_eq(m + sizeof hdr, pay, pl);
        fh_ring_pop(ring);
        ck_assert_ptr_null(fh_ring_peek(ring, SLOTS, ssz, &len));
    }
}
END_TEST

START_TEST(full_refuses)
{
    for (unsigned i = 0; i < SLOTS; i++)
        ck_assert_int_eq(fh_ring_push(ring, SLOTS, ssz, &i, sizeof i, NULL, 0), FH_OK);
    unsigned x = 99;
    ck_assert_int_eq(fh_ring_push(ring, SLOTS, ssz, &x, sizeof x, NULL, 0), FH_ERR_AGAIN);
    for (unsigned i = 0; i < SLOTS; i++) {     /* nothing was overwritten */
        size_t len;
        const char *m = fh_ring_peek(ring, SLOTS, ssz, &len);
        ck_assert_ptr_nonnull(m);
        unsigned v;
        memcpy(&v, m, sizeof v);
        ck_assert_uint_eq(v, i);
        fh_ring_pop(ring);
        if (i == 0)   /* one slot free again */
            ck_assert_int_eq(fh_ring_push(ring, SLOTS, ssz, &x, sizeof x, NULL, 0), FH_OK);
    }
}
END_TEST

START_TEST(bad_slots_reported)
{
    unsigned v = 7;
    ck_assert_int_eq(fh_ring_push(ring, SLOTS, ssz, &v, sizeof v, NULL, 0), FH_OK);
    uint32_t big = ssz;                              /* a length past the slot */
    memcpy(fh_ring_slot(ring, SLOTS, ssz, 0) + 8, &big, sizeof big);
    size_t len;
    ck_assert_ptr_nonnull(fh_ring_peek(ring, SLOTS, ssz, &len));
    ck_assert_uint_eq(len, SIZE_MAX);
    fh_ring_pop(ring);
    /* Message 1 is expected in slot 1: a stamp of a later lap there, or
     * message 1's stamp in another slot, is no message. */
    atomic_store(fh_ring_stamp(fh_ring_slot(ring, SLOTS, ssz, 1)), 2 + SLOTS);
    atomic_store(fh_ring_stamp(fh_ring_slot(ring, SLOTS, ssz, 2)), 2);
    ck_assert_ptr_null(fh_ring_peek(ring, SLOTS, ssz, &len));
}
END_TEST

START_TEST(producer_rereads_head_only_when_full)
{
    for (unsigned i = 0; i < SLOTS; i++)
        ck_assert_int_eq(fh_ring_push(ring, SLOTS, ssz, &i, sizeof i, NULL, 0), FH_OK);
    ck_assert_uint_eq(ring->head_seen, 0);          /* never looked while room */
    size_t len;
    ck_assert_ptr_nonnull(fh_ring_peek(ring, SLOTS, ssz, &len));
    fh_ring_pop(ring);
    unsigned x = 5;
    ck_assert_int_eq(fh_ring_push(ring, SLOTS, ssz, &x, sizeof x, NULL, 0), FH_OK);
    ck_assert_uint_eq(ring->head_seen, 1);          /* looked when full */
}
END_TEST

START_TEST(cursor_and_kept_index)
{
    fh_ring_cursor_t c;
    fh_ring_cursor_init(&c, ring, SLOTS);
    size_t len;
    ck_assert_ptr_null(fh_ring_cpeek(&c, ssz, &len));
    for (unsigned i = 0; i < 7 * SLOTS + 3; i++) {
        if (i == 2 * SLOTS + 1)
            ring->tail_idx = 1000;       /* overwritten: recomputed from tail */
        ck_assert_int_eq(fh_ring_push(ring, SLOTS, ssz, &i, sizeof i, NULL, 0), FH_OK);
        ck_assert_uint_eq(ring->tail_idx, (i + 1) % SLOTS);
        const char *m = fh_ring_cpeek(&c, ssz, &len);
        ck_assert_ptr_nonnull(m);
        ck_assert_ptr_eq(m, fh_ring_slot(ring, SLOTS, ssz, i) + FH_RING_SLOT_HDR);
        ck_assert_ptr_eq(m, fh_ring_peek(ring, SLOTS, ssz, &len));
        unsigned v;
        memcpy(&v, m, sizeof v);
        ck_assert_uint_eq(v, i);
        fh_ring_cpop(&c, SLOTS);
        ck_assert_uint_eq(atomic_load(&ring->head), i + 1);
        ck_assert_uint_eq(c.idx, (i + 1) % SLOTS);
        ck_assert_ptr_null(fh_ring_cpeek(&c, ssz, &len));
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("node_ring");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, order_and_wrap);
    tcase_add_test(tc, full_refuses);
    tcase_add_test(tc, bad_slots_reported);
    tcase_add_test(tc, producer_rereads_head_only_when_full);
    tcase_add_test(tc, cursor_and_kept_index);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}
