/*
 * place_test.c -- where fh_init leaves a rank (place.c, FH_BIND).
 *
 * Each rank records its CPU affinity before fh_init and after, and the
 * ranks exchange both (fh_allgather).  All ranks of these tests run on one
 * host.  With --expect:
 *   bound   every rank started with the same mask holding at least one CPU
 *           per rank, and after fh_init the masks are non-empty, pairwise
 *           disjoint, inside the starting mask, and together cover it
 *           (FH_BIND=auto: slices of the starting mask);
 *   same    every rank's mask after fh_init is the one it started with
 *           (FH_BIND=off, more ranks than CPUs, or ranks that a launcher
 *           placed: different starting masks).
 * A thread the program started before fh_init is checked too: it is moved
 * with the rank (bound) or left alone (same).
 *
 * Usage: place_test --expect bound|same
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

#include "testutil.h"

typedef struct masks {
    cpu_set_t before, after, thread;
} masks_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase;                 /* 1: main asks the thread for its mask; 2: done */
static cpu_set_t thread_mask;

static void *idle_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (phase != 1)
        pthread_cond_wait(&cv, &mu);
    sched_getaffinity(0, sizeof thread_mask, &thread_mask);
    phase = 2;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static bool subset(const cpu_set_t *a, const cpu_set_t *b)
{
    cpu_set_t x;
    CPU_AND(&x, a, b);
    return CPU_EQUAL(&x, a);
}

int main(int argc, char **argv)
{
    masks_t mine;
    CHECK(sched_getaffinity(0, sizeof mine.before, &mine.before) == 0, "sched_getaffinity",
          "0, saw -1");
    pthread_t th;
    CHECK(pthread_create(&th, NULL, idle_thread, NULL) == 0, "pthread_create", "0");
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("place_test");
    int me = fh_rank(), N = fh_nranks();
    const char *expect = "";
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--expect") == 0)
            expect = argv[i + 1];
    bool bound = strcmp(expect, "bound") == 0;
    CHECK(bound || strcmp(expect, "same") == 0, "usage", "--expect bound|same");
    CHECK(sched_getaffinity(0, sizeof mine.after, &mine.after) == 0, "sched_getaffinity",
          "0, saw -1");
    pthread_mutex_lock(&mu);
    phase = 1;
    pthread_cond_broadcast(&cv);
    while (phase != 2)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
    mine.thread = thread_mask;
    CHECK(CPU_EQUAL(&mine.thread, &mine.after), "the earlier thread",
          "the rank's mask (%d CPUs), saw %d CPUs", CPU_COUNT(&mine.after),
          CPU_COUNT(&mine.thread));

    masks_t *all = calloc((size_t)N, sizeof *all);
    CHECK(all != NULL, "calloc", "memory");
    CHECK_OK(fh_allgather(&mine, all, sizeof mine));
    if (!bound) {
        CHECK(CPU_EQUAL(&mine.before, &mine.after), "--expect same",
              "the starting mask (%d CPUs), saw %d CPUs", CPU_COUNT(&mine.before),
              CPU_COUNT(&mine.after));
    } else {
        cpu_set_t cover;
        CPU_ZERO(&cover);
        for (int r = 0; r < N; r++) {
            CHECK(CPU_EQUAL(&all[r].before, &mine.before), "--expect bound",
                  "rank %d started with our mask", r);
            CHECK(CPU_COUNT(&all[r].after) > 0 && subset(&all[r].after, &mine.before),
                  "--expect bound", "rank %d's mask non-empty, inside the starting one", r);
            for (int q = 0; q < r; q++) {
                cpu_set_t x;
                CPU_AND(&x, &all[r].after, &all[q].after);
                CHECK(CPU_COUNT(&x) == 0, "--expect bound",
                      "ranks %d and %d on disjoint CPUs, saw %d in common", q, r,
                      CPU_COUNT(&x));
            }
            CPU_OR(&cover, &cover, &all[r].after);
        }
        CHECK(CPU_EQUAL(&cover, &mine.before), "--expect bound",
              "the slices cover the starting mask (%d CPUs), saw %d", CPU_COUNT(&mine.before),
              CPU_COUNT(&cover));
    }
    free(all);
    if (me == 0)
        TU_SAY("PASS place_test (%s): %d ranks, %d CPUs each\n", expect, N,
               CPU_COUNT(&mine.after));
    CHECK_OK(fh_finalize());
    return 0;
}
