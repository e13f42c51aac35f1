/*
 * boot_test.c -- exercises the bootstrap layer alone (firehose/boot/ sources +
 * firehose/util/log.c).  Works under fhrun, mpirun (PMIx build) or alone.
 *
 *   boot_test                 3 allgathers (0, 8, 100000 bytes), barrier,
 *                             finalize; prints "rank r: ok"
 *   boot_test die R           rank R SIGKILLs itself after the first barrier,
 *                             the others block in a barrier (must be ended
 *                             by the bootstrap, FH_EXIT_PEER_DEAD)
 *   boot_test exit R S        rank R exits S after the first barrier
 *   boot_test exitafter R S   everyone finalizes, then rank R exits S
 *   boot_test abort R C       rank R calls the bootstrap abort with code C
 *   boot_test noinit R        rank R exits 0 without opening the bootstrap
 *   boot_test sleep R S       rank R sleeps S s before opening the bootstrap
 *   boot_test wait FILE       rank 0 writes FH_BOOT_ADDR and FH_JOB_KEY to
 *                             FILE, then all wait for FILE.go before the test
 *   boot_test hang            ranks block forever after a barrier
 *                             ("hang noterm": and ignore SIGTERM)
 *   boot_test mismatch        allgather lengths differ between ranks
 *   boot_test print           each rank prints two lines to stdout and stderr
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "firehose/boot/bootstrap.h"
#include "firehose.h"
#include "firehose/util/log.h"

/* log.c refers to fh_err_name(), which lives in the runtime proper. */
__attribute__((weak)) const char *fh_err_name(int err)
{
    (void)err;
    return "FH_ERR_?";
}

static int me = -1;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "boot_test[%d]: FAIL %s:%d: ", me, __FILE__,     \
                    __LINE__);                                               \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static unsigned char pattern(int rank, size_t i, size_t len)
{
    return (unsigned char)(rank * 131 + i * 7 + len);
}

static void test_allgather(fh_boot_t *b, size_t len)
{
    unsigned char *in = malloc(len ? len : 1);
    unsigned char *out = malloc(len * (size_t)b->nranks + 1);
    CHECK(in && out, "out of memory");
    for (size_t i = 0; i < len; i++)
        in[i] = pattern(b->rank, i, len);
    memset(out, 0xee, len * (size_t)b->nranks + 1);
    int rc = b->ops->allgather(b, in, out, len);
    CHECK(rc == FH_OK, "allgather of %zu bytes returned %d", len, rc);
    for (int r = 0; r < b->nranks; r++)
        for (size_t i = 0; i < len; i++)
            CHECK(out[(size_t)r * len + i] == pattern(r, i, len),
                  "allgather of %zu bytes: rank %d byte %zu is %u, expected %u",
                  len, r, i, out[(size_t)r * len + i], pattern(r, i, len));
    CHECK(out[len * (size_t)b->nranks] == 0xee, "allgather wrote past the end");
    free(in);
    free(out);
}

static long arg(int argc, char **argv, int i)
{
    CHECK(argc > i, "missing argument %d for mode %s", i, argv[1]);
    return strtol(argv[i], NULL, 10);
}

static int env_rank(void)
{
    const char *s = getenv("FH_RANK");
    if (!s)
        s = getenv("PMIX_RANK");
    return s ? atoi(s) : 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "basic";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FH_VERBOSE"))
        fh_log_set_verbose(atoi(getenv("FH_VERBOSE")));

    if (!strcmp(mode, "noinit") && env_rank() == arg(argc, argv, 2))
        return 0;
    if (!strcmp(mode, "sleep") && env_rank() == arg(argc, argv, 2))
        sleep((unsigned)arg(argc, argv, 3));

    fh_boot_t *b;
    int rc = fh_boot_open(&b);
    CHECK(rc == FH_OK, "fh_boot_open returned %d", rc);
    me = b->rank;
    printf("boot_test: rank %d/%d (local %d/%d) via %s\n", b->rank, b->nranks,
           b->local_rank, b->local_nranks, b->ops->name);
    CHECK(b->rank >= 0 && b->rank < b->nranks, "bad rank");
    CHECK(b->local_rank >= 0 && b->local_rank < b->local_nranks &&
              b->local_nranks <= b->nranks, "bad local rank/size");

    if (!strcmp(mode, "print")) {
        printf("out line 1 from rank %d\nout line 2 from rank %d\n", me, me);
        fprintf(stderr, "err line from rank %d\n", me);
    }
    if (!strcmp(mode, "wait")) {
        CHECK(argc > 2, "wait needs a FILE");
        char tmp[4096], go[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
        snprintf(go, sizeof go, "%s.go", argv[2]);
        if (me == 0) {
            FILE *f = fopen(tmp, "w");
            CHECK(f, "cannot write %s", tmp);
            fprintf(f, "%s\n%s\n", getenv("FH_BOOT_ADDR") ? getenv("FH_BOOT_ADDR") : "",
                    getenv("FH_JOB_KEY") ? getenv("FH_JOB_KEY") : "");
            fclose(f);
            rename(tmp, argv[2]);
        }
        struct stat sb;
        for (int i = 0; i < 1200 && stat(go, &sb) != 0; i++)
            usleep(50000);
        CHECK(stat(go, &sb) == 0, "%s never appeared", go);
    }
    if (!strcmp(mode, "mismatch")) {
        char buf[16 * 4096];
        size_t len = me == 0 ? 8 : 16;
        rc = b->ops->allgather(b, buf, buf, len);
        CHECK(0, "mismatched allgather returned %d", rc);
    }

    test_allgather(b, 0);
    test_allgather(b, 8);
    test_allgather(b, 100000);
    rc = b->ops->barrier(b);
    CHECK(rc == FH_OK, "barrier returned %d", rc);

    if (!strcmp(mode, "die") || !strcmp(mode, "exit") ||
        !strcmp(mode, "abort") || !strcmp(mode, "noinit")) {
        long who = arg(argc, argv, 2);
        if (me == who) {
            if (!strcmp(mode, "die")) {
                printf("boot_test: rank %d: killing myself\n", me);
                kill(getpid(), SIGKILL);
            } else if (!strcmp(mode, "exit")) {
                exit((int)arg(argc, argv, 3));
            } else if (!strcmp(mode, "abort")) {
                char m[64];
                snprintf(m, sizeof m, "test abort from rank %d", me);
                b->ops->abort(b, (int)arg(argc, argv, 3), m);
            }
        }
        rc = b->ops->barrier(b);
        CHECK(0, "barrier after rank %ld left returned %d instead of ending "
              "this process", who, rc);
    }
    if (!strcmp(mode, "hang")) {
        if (argc > 2 && !strcmp(argv[2], "noterm"))
            signal(SIGTERM, SIG_IGN);
        if (me == 0)
            printf("boot_test: ready\n");
        for (;;)
            pause();
    }

    b->ops->finalize(b);
    printf("boot_test: rank %d: ok\n", me);
    if (!strcmp(mode, "exitafter") && me == arg(argc, argv, 2))
        return (int)arg(argc, argv, 3);
    return 0;
}
