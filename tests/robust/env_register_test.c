/*
 * env_register_test.c -- issue 29 class 6: fh_env_register's contract
 * (include/firehose.h).  Refuses what is not a name or prefix* of FH_*
 * (FH_ERR_INVALID, nothing kept) and more than 64 in all (FH_ERR_LIMIT),
 * accepts FH_ERTEST_HEAP and FH_ERTEST_PFX_*, then fh_init runs: the
 * script (unknown_env.sh) sets FH_ERTEST_HEAP, FH_ERTEST_PFX_A and the
 * misspelt FH_ERTEST_HEAPP and checks that only the last is reported.
 * After fh_finalize the call returns FH_ERR_NOT_INIT.
 */
#include <stdio.h>
#include <string.h>

#include "firehose.h"

static int failures, checks;

static void expect(const char *what, int rc, int want)
{
    checks++;
    if (rc != want || (want != FH_OK && strstr(fh_last_error(), "fh_env_register") == NULL)) {
        failures++;
        printf("FAIL %s: %s, expected %s (fh_last_error: \"%s\")\n", what, fh_err_name(rc),
               fh_err_name(want), fh_last_error());
    }
}

int main(int argc, char **argv)
{
    static const char *const bad[][1] = {
        {"XX_FOO"}, {"FH_A*B"}, {"FH_A=1"}, {""}, {NULL},
        {"FH_0123456789012345678901234567890123456789012345678901234567890"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[120];
        snprintf(what, sizeof what, "fh_env_register(\"%s\")", bad[i][0] ? bad[i][0] : "NULL");
        expect(what, fh_env_register(bad[i], 1), FH_ERR_INVALID);
    }
    expect("fh_env_register(NULL, 1)", fh_env_register(NULL, 1), FH_ERR_INVALID);
    expect("fh_env_register(NULL, 0)", fh_env_register(NULL, 0), FH_OK);
    /* A bad name anywhere keeps none: FH_ERTEST_NOTKEPT is reported. */
    const char *mixed[] = {"FH_ERTEST_NOTKEPT", "bad"};
    expect("a list with one bad name", fh_env_register(mixed, 2), FH_ERR_INVALID);
    static char many[65][16];
    const char *manyp[65];
    for (int i = 0; i < 65; i++) {
        snprintf(many[i], sizeof many[i], "FH_MANY_%d", i);
        manyp[i] = many[i];
    }
    expect("65 names", fh_env_register(manyp, 65), FH_ERR_LIMIT);
    const char *good[] = {"FH_ERTEST_HEAP", "FH_ERTEST_PFX_*", "FH_ERTEST_HEAP"};
    expect("two good names (one twice)", fh_env_register(good, 3), FH_OK);
    expect("the same again", fh_env_register(good, 3), FH_OK);
    int rc = fh_init(&argc, &argv);
    if (rc != FH_OK) {
        printf("FAIL fh_init: %s\n", fh_last_error());
        return 1;
    }
    fh_finalize();
    expect("after fh_finalize", fh_env_register(good, 1), FH_ERR_NOT_INIT);
    printf("%s: %d of %d checks failed\n", failures ? "FAIL" : "ok", failures, checks);
    return failures ? 1 : 0;
}
