/*
 * test_seg_holes.c -- a segment piece's holes (firehose/seg_holes.c):
 * setting ranges to PROT_NONE or PROT_READ, overlapping and splitting
 * earlier ones, giving access back, and which transfers they refuse.
 */
#include <check.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "check_main.h"
#include "firehose/internal.h"

#define P 4096u

/* Sets [lo, hi) pages to prot on *h (replacing it), returns "changed". */
static bool set(const struct fh_seg_holes **h, uintptr_t lo, uintptr_t hi, int prot)
{
    bool changed = false;
    const struct fh_seg_holes *n = fh_seg_holes_set(*h, lo * P, hi * P, prot, &changed);
    free((void *)*h);
    *h = n;
    return changed;
}

static void expect(const struct fh_seg_holes *h, unsigned n, const struct fh_seg_hole *want)
{
    ck_assert_uint_eq(h != NULL ? h->n : 0, n);
    for (unsigned i = 0; i < n; i++) {
        ck_assert_uint_eq(h->h[i].lo, want[i].lo * P);
        ck_assert_uint_eq(h->h[i].hi, want[i].hi * P);
        ck_assert_int_eq(h->h[i].prot, want[i].prot);
    }
}

START_TEST(set_split_and_restore)
{
    const struct fh_seg_holes *h = NULL;
    ck_assert(!set(&h, 10, 20, PROT_READ | PROT_WRITE));     /* nothing to give back */
    ck_assert_ptr_null(h);
    ck_assert(set(&h, 10, 20, PROT_NONE));
    expect(h, 1, (struct fh_seg_hole[]){{10, 20, 0}});
    ck_assert(!set(&h, 10, 20, PROT_NONE));                   /* the same again */
    ck_assert(set(&h, 14, 16, PROT_READ));                    /* splits it */
    expect(h, 3, (struct fh_seg_hole[]){{10, 14, 0}, {14, 16, PROT_READ}, {16, 20, 0}});
    ck_assert(set(&h, 2, 4, -1));                             /* munmap, before */
    ck_assert(set(&h, 18, 30, PROT_READ | PROT_EXEC));        /* overlaps the end */
    expect(h, 5, (struct fh_seg_hole[]){{2, 4, 0}, {10, 14, 0}, {14, 16, PROT_READ},
                                         {16, 18, 0}, {18, 30, PROT_READ}});
    ck_assert(set(&h, 12, 25, PROT_READ | PROT_WRITE));       /* gives part back */
    expect(h, 3, (struct fh_seg_hole[]){{2, 4, 0}, {10, 12, 0}, {25, 30, PROT_READ}});
    ck_assert(set(&h, 0, 100, PROT_READ | PROT_WRITE | PROT_EXEC));
    ck_assert_ptr_null(h);
}
END_TEST

START_TEST(meet_refuses_what_is_not_allowed)
{
    const struct fh_seg_holes *h = NULL;
    set(&h, 10, 12, PROT_NONE);
    set(&h, 20, 22, PROT_READ);
    ck_assert_uint_eq(fh_seg_holes_meet(NULL, 0, 1 << 30, true), 0);
    ck_assert_uint_eq(fh_seg_holes_meet(h, 9 * P, P, true), 0);           /* just before */
    ck_assert_uint_eq(fh_seg_holes_meet(h, 9 * P, P + 1, false), 10 * P);  /* 1 B in */
    ck_assert_uint_eq(fh_seg_holes_meet(h, 11 * P + 5, 8, false), 11 * P + 5);
    ck_assert_uint_eq(fh_seg_holes_meet(h, 12 * P, 8 * P, true), 0);       /* between */
    ck_assert_uint_eq(fh_seg_holes_meet(h, 20 * P + 8, 8, false), 0);      /* get: read */
    ck_assert_uint_eq(fh_seg_holes_meet(h, 20 * P + 8, 8, true), 20 * P + 8);
    ck_assert_uint_eq(fh_seg_holes_meet(h, 15 * P, 10 * P, true), 20 * P); /* spans */
    ck_assert_uint_eq(fh_seg_holes_meet(h, 0, 100 * P, false), 10 * P);
    free((void *)h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("seg_holes");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, set_split_and_restore);
    tcase_add_test(tc, meet_refuses_what_is_not_allowed);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}
