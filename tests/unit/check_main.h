/*
 * check_main.h -- how every unit test (tests/unit/test_<x>.c) runs its Check
 * suite, so that the test programs differ only in their tests.
 *
 * A test's main() builds its Suite and returns fh_check_run(s).  The exit
 * status is what the automake test driver reads: 0 when every test passed,
 * 1 otherwise.  A test that must be skipped (77) decides so before building
 * its suite.
 */
#ifndef FH_CHECK_MAIN_H
#define FH_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

/* Runs every test of s (forking each, Check's default), prints Check's
 * summary and failures, frees s and returns the exit status for main(). */
static inline int fh_check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif /* FH_CHECK_MAIN_H */
