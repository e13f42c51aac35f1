/*
 * oob.h -- an out-of-band channel between the ranks of one host for the
 * integration tests: a page of shared memory (a MAP_SHARED temporary file)
 * that every rank maps, read and written with C11-style atomics and no
 * firehose call.  A test uses it to observe what a rank did without any
 * message that could itself complete or progress the thing observed.
 *
 *   tu_oob_open()        collective (fh_allgather, fh_barrier): rank 0
 *                        creates the file, every rank maps it; returns
 *                        TU_OOB_WORDS zeroed 64-bit words.  All ranks must
 *                        run on one host.
 *   tu_oob_store/load    release store / acquire load of one word.
 *   tu_oob_wait(w, v, s) spins (sched_yield, no firehose call) until
 *                        *w == v; fails the test after s seconds.
 */
#ifndef FH_TEST_OOB_H
#define FH_TEST_OOB_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>

#include "testutil.h"

#define TU_OOB_WORDS 512

static inline volatile uint64_t *tu_oob_open(void)
{
    char path[256] = "";
    if (fh_rank() == 0) {
        snprintf(path, sizeof path, "%s/fh_oob.XXXXXX",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        int fd = mkstemp(path);
        CHECK(fd >= 0, "out-of-band file", "mkstemp(%s) to work, saw %s", path,
              strerror(errno));
        CHECK(ftruncate(fd, TU_OOB_WORDS * 8) == 0, "out-of-band file",
              "ftruncate to work");
        close(fd);
    }
    char *all = malloc(sizeof path * (size_t)fh_nranks());
    CHECK(all != NULL, "malloc", "memory");
    CHECK_OK(fh_allgather(path, all, sizeof path));
    memcpy(path, all, sizeof path);
    free(all);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0, "out-of-band file", "open(%s) to work (all ranks on one host), "
          "saw %s", path, strerror(errno));
    void *p = mmap(NULL, TU_OOB_WORDS * 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED, "out-of-band file", "mmap to work");
    close(fd);
    CHECK_OK(fh_barrier());
    if (fh_rank() == 0)
        unlink(path);
    return p;
}

static inline void tu_oob_store(volatile uint64_t *w, uint64_t v)
{
    __atomic_store_n(w, v, __ATOMIC_RELEASE);
}

static inline uint64_t tu_oob_load(volatile uint64_t *w)
{
    return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

static inline uint64_t tu_oob_add(volatile uint64_t *w, uint64_t v)
{
    return __atomic_add_fetch(w, v, __ATOMIC_ACQ_REL);
}

static inline void tu_oob_wait(volatile uint64_t *w, uint64_t v, double seconds)
{
    double t0 = tu_now();
    while (tu_oob_load(w) != v) {
        CHECK(tu_now() - t0 < seconds, "out-of-band wait",
              "the word to become %" PRIu64 " within %.0f s, saw %" PRIu64, v, seconds,
              tu_oob_load(w));
        sched_yield();
    }
}

#endif /* FH_TEST_OOB_H */
