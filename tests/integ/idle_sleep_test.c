/*
 * idle_sleep_test.c -- a rank that waits long for nothing sleeps, on the
 * node path (node_am.c's futex) and on the network (path.c's net_sleep,
 * the conduit's wait_fds), instead of spinning or yielding the core for
 * the whole wait.
 *
 * Rank 0 stays out of the runtime for WAIT_S seconds (nanosleep) and then
 * enters fh_barrier; every other rank enters it at once and counts, with
 * getrusage, the voluntary context switches its wait made: a rank that
 * yields (sched_yield) stays runnable and makes none, a rank that sleeps
 * makes one per sleep (each at most 1 ms).  After the wait a put and a get
 * to rank 0 check that the sleepers still serve and are served.
 * The threshold (MIN_SLEEPS) is far below what a sleeping wait makes in
 * WAIT_S and far above what spinning and yielding make: no timing is
 * asserted, only that the wait blocked.
 *
 * Usage: idle_sleep_test [--expect-sleep] [--hold S]
 *   --expect-sleep  check the switches (idle_sleep.sh; without it the
 *                   program only waits and checks the put and get);
 *   --hold S        rank 0 stays out S seconds, default WAIT_S
 *                   (tests/robust/shm_leftovers.sh: a job that lives long).
 */
#include <stdbool.h>
#include <sys/resource.h>
#include <time.h>

#include "testutil.h"

#define WAIT_S 2
#define MIN_SLEEPS 100

static long voluntary_switches(void)
{
    struct rusage ru;
    CHECK(getrusage(RUSAGE_THREAD, &ru) == 0, "getrusage", "0, saw -1");
    return ru.ru_nvcsw;
}

/* CPU seconds this thread has used (user + system): printed, not
 * asserted, so that a run shows how much of the wait was spent on a core. */
static double thread_cpu(void)
{
    struct rusage ru;
    CHECK(getrusage(RUSAGE_THREAD, &ru) == 0, "getrusage", "0, saw -1");
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("idle_sleep_test");
    int me = fh_rank(), N = fh_nranks();
    CHECK(N >= 2, "usage", "2 or more ranks");
    long hold = WAIT_S;
    bool expect_sleep = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--hold") == 0 && i + 1 < argc)
            hold = atol(argv[i + 1]);
        expect_sleep |= strcmp(argv[i], "--expect-sleep") == 0;
    }
    CHECK(hold >= WAIT_S && hold <= 600, "usage", "--hold S, S in [2, 600]");
    fh_seg_t seg;
    uint64_t *base;
    CHECK_OK(fh_segment_create(4096, &seg, (void **)&base));
    base[0] = 1000 + (uint64_t)me;
    CHECK_OK(fh_barrier());

    long before = voluntary_switches();
    double cpu0 = thread_cpu();
    if (me == 0) {
        struct timespec ts = {(time_t)hold, 0};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
    CHECK_OK(fh_barrier());
    long slept = voluntary_switches() - before;
    double cpu = thread_cpu() - cpu0;
    if (me != 0 && expect_sleep)
        CHECK(slept >= MIN_SLEEPS, "a rank waiting in fh_barrier for 2 s",
              "at least %d voluntary context switches (sleeps), saw %ld", MIN_SLEEPS,
              slept);

    uint64_t v = 0, w = 2000 + (uint64_t)me;
    int peer = (me + 1) % N;
    char *pbase = NULL;
    CHECK_OK(fh_segment_query(seg, peer, (void **)&pbase, NULL));
    CHECK_OK(fh_get(&v, peer, pbase, sizeof v));
    CHECK(v == 1000 + (uint64_t)peer, "fh_get after the wait", "%d, saw %llu", 1000 + peer,
          (unsigned long long)v);
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_put(peer, pbase + 8, &w, sizeof w));
    CHECK_OK(fh_barrier());
    CHECK(base[1] == 2000 + (uint64_t)((me + N - 1) % N), "the put after the wait",
          "%d, saw %llu", 2000 + (me + N - 1) % N, (unsigned long long)base[1]);
    printf("idle_sleep_test: rank %d: %ld voluntary switches and %.3f s of CPU in the "
           "wait\n", me, slept, cpu);
    fflush(stdout);
    CHECK_OK(fh_barrier());
    if (me == 0)
        TU_SAY("PASS idle_sleep_test: %d ranks\n", N);
    CHECK_OK(fh_segment_destroy(seg));
    CHECK_OK(fh_finalize());
    return 0;
}
