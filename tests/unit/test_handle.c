/*
 * test_handle.c -- the NB handle table (firehose/handle.c): allocation,
 * generation counters catching stale handles, ownership catching foreign
 * handles, slot reuse, growth past one chunk, and corrupt values.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "check_main.h"
#include "firehose/handle.h"

START_TEST(alloc_lookup_free)
{
    fh_htable_t *t = malloc(sizeof *t);
    fh_ht_init(t, 5);
    fh_handle_t h;
    fh_hslot_t *s = fh_ht_alloc(t, 42, &h);
    ck_assert_ptr_nonnull(s);
    ck_assert(h != FH_HANDLE_DONE);
    ck_assert_uint_eq(fh_handle_path(h), 5);
    ck_assert_ptr_eq(fh_ht_lookup(t, h, 42), s);
    ck_assert_ptr_null(fh_ht_lookup(t, h, 43));        /* foreign thread */
    ck_assert_ptr_eq(fh_ht_lookup_any(t, h), s);
    ck_assert_uint_eq(t->live, 1);
    fh_ht_free(t, s);
    ck_assert_uint_eq(t->live, 0);
    ck_assert_ptr_null(fh_ht_lookup(t, h, 42));        /* stale */
    fh_ht_fini(t);
    free(t);
}
END_TEST

START_TEST(reused_slot_gets_new_generation)
{
    fh_htable_t *t = malloc(sizeof *t);
    fh_ht_init(t, 1);
    fh_handle_t h1, h2;
    fh_hslot_t *s1 = fh_ht_alloc(t, 1, &h1);
    fh_ht_free(t, s1);
    fh_hslot_t *s2 = fh_ht_alloc(t, 1, &h2);
    ck_assert_ptr_eq(s1, s2);                          /* same slot ... */
    ck_assert(h1 != h2);                               /* ... new name */
    ck_assert_ptr_null(fh_ht_lookup(t, h1, 1));
    ck_assert_ptr_eq(fh_ht_lookup(t, h2, 1), s2);
    fh_ht_fini(t);
    free(t);
}
END_TEST

START_TEST(corrupt_and_foreign_path_values)
{
    fh_htable_t *t = malloc(sizeof *t);
    fh_ht_init(t, 2);
    fh_handle_t h;
    fh_ht_alloc(t, 9, &h);
    ck_assert_ptr_null(fh_ht_lookup(t, FH_HANDLE_DONE, 9));
    ck_assert_ptr_null(fh_ht_lookup(t, h ^ 0x1, 9));           /* other path */
    ck_assert_ptr_null(fh_ht_lookup(t, h | (0xffffffull << 8), 9)); /* slot past end */
    ck_assert_ptr_null(fh_ht_lookup(t, h & 0xffffffffull, 9)); /* generation 0 */
    ck_assert_ptr_null(fh_ht_lookup(t, ~(fh_handle_t)0, 9));
    fh_ht_fini(t);
    free(t);
}
END_TEST

START_TEST(grows_past_a_chunk_and_slots_do_not_move)
{
    fh_htable_t *t = malloc(sizeof *t);
    fh_ht_init(t, 0);
    enum { N = 3 * FH_HT_CHUNK + 7 };
    fh_handle_t *hs = malloc(N * sizeof *hs);
    fh_hslot_t **ss = malloc(N * sizeof *ss);
    for (unsigned i = 0; i < N; i++) {
        ss[i] = fh_ht_alloc(t, 1, &hs[i]);
        ck_assert_ptr_nonnull(ss[i]);
        ss[i]->result = i;
    }
    ck_assert_uint_eq(t->live, N);
    for (unsigned i = 0; i < N; i++) {
        ck_assert_ptr_eq(fh_ht_lookup(t, hs[i], 1), ss[i]);
        ck_assert(ss[i]->result == i);
    }
    for (unsigned i = 0; i < N; i += 2)
        fh_ht_free(t, ss[i]);
    for (unsigned i = 0; i < N; i++)
        ck_assert((fh_ht_lookup(t, hs[i], 1) != NULL) == (i % 2 == 1));
    fh_ht_fini(t);
    free(hs);
    free(ss);
    free(t);
}
END_TEST

START_TEST(counter_keeps_first_error)
{
    fh_ctr_t c = FH_CTR_INIT;
    c.pending = 3;
    fh_ctr_complete(&c, FH_OK);
    fh_ctr_complete(&c, FH_ERR_PEER_DEAD);
    fh_ctr_complete(&c, FH_ERR_TRANSPORT);
    ck_assert_uint_eq(c.pending, 0);
    ck_assert_int_eq(c.status, FH_ERR_PEER_DEAD);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("handle");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, alloc_lookup_free);
    tcase_add_test(tc, reused_slot_gets_new_generation);
    tcase_add_test(tc, corrupt_and_foreign_path_values);
    tcase_add_test(tc, grows_past_a_chunk_and_slots_do_not_move);
    tcase_add_test(tc, counter_keeps_first_error);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}
