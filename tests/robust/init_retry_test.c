/*
 * init_retry_test.c -- issue 29 class 4: a failed fh_init returns, leaves
 * nothing behind, and may be retried.  One rank (no launcher):
 *   for each way to fail before the network is open -- an unknown
 *   FH_OFI_PROVIDER, FH_CONDUIT=ibv without a device (skipped where one
 *   exists), an unknown FH_OFI_DOMAIN, a bad FH_MAX_THREADS -- fh_init
 *   returns an error (the process goes on: we are here to check), its
 *   fh_last_error() names the setting, fh_rank() says FH_ERR_NOT_INIT;
 *   then, with the setting removed, fh_init succeeds, a segment, a put to
 *   ourselves and a barrier work, fh_finalize succeeds, and a further
 *   fh_init returns FH_ERR_STATE.
 * argv[1]: the provider to succeed with (default tcp).  Exits 1 on any
 * failed check, printing "FAIL ..." lines; "ok: N checks" otherwise.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "firehose.h"

static int failures, checks;

static void check(int cond, const char *what, const char *detail)
{
    checks++;
    if (!cond) {
        failures++;
        printf("FAIL %s (%s)\n", what, detail);
    }
}

/* fh_init with NAME=VALUE set must fail naming want. */
static void fail_with(const char *name, const char *value, const char *want)
{
    char what[160];
    setenv(name, value, 1);
    int rc = fh_init(NULL, NULL);
    snprintf(what, sizeof what, "%s=%s: fh_init returns an error naming \"%s\"", name, value,
             want);
    check(rc != FH_OK && strstr(fh_last_error(), want) != NULL, what, fh_last_error());
    snprintf(what, sizeof what, "%s=%s: afterwards fh_rank() is FH_ERR_NOT_INIT", name, value);
    check(fh_rank() == FH_ERR_NOT_INIT, what, fh_last_error());
    unsetenv(name);
    if (rc == FH_OK)
        fh_finalize();   /* cannot go on: the rest would be meaningless */
}

int main(int argc, char **argv)
{
    const char *good = argc > 1 ? argv[1] : "tcp";
    setenv("FH_OFI_PROVIDER", good, 1);
    fail_with("FH_MAX_THREADS", "-1", "FH_MAX_THREADS=-1");
    unsetenv("FH_OFI_PROVIDER");
    fail_with("FH_OFI_PROVIDER", "no-such-provider", "FH_OFI_PROVIDER=no-such-provider");
    setenv("FH_OFI_PROVIDER", "tcp", 1);
    fail_with("FH_OFI_DOMAIN", "no-such-domain", "has no such domain");
    if (getenv("INIT_RETRY_NO_IBV") != NULL) {   /* the script knows there is no device */
        setenv("FH_CONDUIT", "ibv", 1);
        fail_with("FH_CONDUIT", "ibv", "ibv");
    }
    setenv("FH_OFI_PROVIDER", good, 1);
    int rc = fh_init(&argc, &argv);
    check(rc == FH_OK, "after the failures fh_init succeeds", fh_last_error());
    if (rc == FH_OK) {
        fh_seg_t seg;
        long *mine;
        rc = fh_segment_create(4096, &seg, (void **)&mine);
        check(rc == FH_OK, "fh_segment_create after a retried fh_init", fh_last_error());
        if (rc == FH_OK) {
            long x = 42;
            check(fh_put(fh_rank(), mine, &x, sizeof x) == FH_OK && *mine == 42,
                  "a put to ourselves lands", fh_last_error());
        }
        check(fh_barrier() == FH_OK, "fh_barrier", fh_last_error());
        check(fh_finalize() == FH_OK, "fh_finalize", fh_last_error());
        check(fh_init(NULL, NULL) == FH_ERR_STATE, "fh_init after fh_finalize: FH_ERR_STATE",
              fh_last_error());
    }
    printf("%s: %d of %d checks failed\n", failures ? "FAIL" : "ok", failures, checks);
    return failures ? 1 : 0;
}
