/*
 * test_reg_map.c -- the hit layer's private map (firehose/util/map.c):
 * put/get/del, the 3/4 capacity limit, and deletion by backward shift
 * checked against a reference model over long random sequences with many
 * colliding keys (a tiny table wraps around its end all the time).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "check_main.h"
#include "firehose/util/map.h"

START_TEST(put_get_del)
{
    reg_map_t m;
    ck_assert_int_eq(reg_map_init(&m, 16), 0);
    ck_assert_uint_eq(reg_map_get(&m, 1, 100), 0);
    ck_assert_int_eq(reg_map_put(&m, 1, 100, 7), 0);
    ck_assert_int_eq(reg_map_put(&m, 2, 100, 8), 0);      /* same bucket, other peer */
    ck_assert_uint_eq(reg_map_get(&m, 1, 100), 7);
    ck_assert_uint_eq(reg_map_get(&m, 2, 100), 8);
    ck_assert_uint_eq(reg_map_get(&m, 1, 101), 0);
    ck_assert_uint_eq(reg_map_del(&m, 1, 100), 7);
    ck_assert_uint_eq(reg_map_del(&m, 1, 100), 0);
    ck_assert_uint_eq(reg_map_get(&m, 2, 100), 8);
    ck_assert_uint_eq(m.n, 1);
    reg_map_fini(&m);
}
END_TEST

START_TEST(refuses_past_three_quarters)
{
    reg_map_t m;
    ck_assert_int_eq(reg_map_init(&m, 8), 0);
    for (uint32_t i = 0; i < 6; i++)
        ck_assert_int_eq(reg_map_put(&m, 0, i, i + 1), 0);
    ck_assert_int_eq(reg_map_put(&m, 0, 99, 1), -1);
    for (uint32_t i = 0; i < 6; i++)
        ck_assert_uint_eq(reg_map_get(&m, 0, i), i + 1);
    ck_assert_uint_eq(reg_map_get(&m, 0, 99), 0);
    reg_map_fini(&m);
}
END_TEST

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Random put/del against a direct table of 3 peers x 16 buckets. */
START_TEST(random_against_model)
{
    for (uint32_t slots = 16; slots <= 64; slots *= 2) {
        reg_map_t m;
        ck_assert_int_eq(reg_map_init(&m, slots), 0);
        uint32_t model[3][16] = {{0}};
        uint32_t n = 0;
        uint64_t s = slots;
        for (int step = 0; step < 200000; step++) {
            uint32_t peer = (uint32_t)(rng(&s) % 3);
            uint64_t bno = rng(&s) % 16;
            if (rng(&s) % 2) {
                uint32_t val = (uint32_t)(rng(&s) % 1000) + 1;
                if (model[peer][bno] != 0)
                    continue;
                int rc = reg_map_put(&m, peer, bno, val);
                if ((n + 1) * 4 > slots * 3) {
                    ck_assert_int_eq(rc, -1);
                    continue;
                }
                ck_assert_int_eq(rc, 0);
                model[peer][bno] = val;
                n++;
            } else {
                ck_assert_uint_eq(reg_map_del(&m, peer, bno), model[peer][bno]);
                if (model[peer][bno])
                    n--;
                model[peer][bno] = 0;
            }
            ck_assert_uint_eq(m.n, n);
            if (step % 97 == 0)
                for (uint32_t p = 0; p < 3; p++)
                    for (uint64_t b = 0; b < 16; b++)
                        ck_assert_uint_eq(reg_map_get(&m, p, b), model[p][b]);
        }
        reg_map_fini(&m);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reg_map");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, put_get_del);
    tcase_add_test(tc, refuses_past_three_quarters);
    tcase_add_test(tc, random_against_model);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}
