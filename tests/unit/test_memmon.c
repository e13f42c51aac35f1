/*
 * test_memmon.c -- the memory monitor (firehose/memmon/memmon.c) on this kernel:
 * each way of freeing watched memory (munmap, mmap MAP_FIXED over it,
 * madvise DONTNEED, mremap, a partial munmap) is reported with the right
 * range; unwatched memory is not; watching never changes what the program
 * reads (also in MODE_MISSING, where the monitor resolves page faults); a
 * file mapping or a range with a hole cannot be watched; an unmap made by
 * the monitor thread itself as it exits does not hang.  Skips (77) when
 * userfaultfd is unavailable here (the runtime then falls back, see
 * firehose_revoke.c).
 */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check_main.h"
#include "firehose/memmon/memmon.h"

static fh_memmon_t *m;
static uint64_t seen;
static size_t pg;

/* Drains everything; returns how many ranges, copies the first 8. */
static size_t drain(fh_memmon_range_t *out)
{
    fh_memmon_range_t r[64];
    size_t total = 0, n;
    int all = 0;
    do {
        n = fh_memmon_drain(m, r, 64, &all, &seen);
        for (size_t i = 0; i < n; i++)
            if (total + i < 8)
                out[total + i] = r[i];
        total += n;
    } while (n == 64);
    ck_assert_int_eq(all, 0);
    return total;
}

static char *area(size_t npages)
{
    char *p = mmap(NULL, npages * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    return p;
}

static void setup(void)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    char why[160];
    ck_assert_int_eq(fh_memmon_create(&m, why, sizeof why), 0);
    seen = fh_memmon_state(m);
}

/* MODE_MISSING: every first touch of a watched page is a fault the monitor
 * thread resolves; the tests must see exactly the same. */
static void setup_missing(void)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    char why[160];
    ck_assert_int_eq(fh_memmon_create_missing(&m, why, sizeof why), 0);
    ck_assert_str_eq(fh_memmon_mode(m), "missing");
    seen = fh_memmon_state(m);
}

static void teardown(void)
{
    fh_memmon_destroy(m);
    m = NULL;
}

START_TEST(munmap_of_watched_memory_is_reported_before_munmap_returns)
{
    fh_memmon_range_t r[8];
    char *p = area(4);
    ck_assert_int_eq(fh_memmon_watch(m, (uintptr_t)p + 10, 2 * pg), 0);  /* pages 0..2 */
    ck_assert(!fh_memmon_pending(m, seen));
    ck_assert_int_eq(munmap(p, 4 * pg), 0);
    /* no sleep, no poll: the event is visible as soon as munmap returned */
    ck_assert(fh_memmon_pending(m, seen));
    ck_assert_uint_eq(drain(r), 1);
    ck_assert_uint_le(r[0].start, (uintptr_t)p);
    ck_assert_uint_ge(r[0].end, (uintptr_t)p + 3 * pg);
    ck_assert(!fh_memmon_pending(m, seen));
    ck_assert_uint_eq(fh_memmon_events(m), 1);
}
END_TEST

START_TEST(map_fixed_dontneed_mremap_and_partial_munmap_are_reported)
{
    fh_memmon_range_t r[8];
    char *p = area(8);
    ck_assert_int_eq(fh_memmon_watch(m, (uintptr_t)p, 8 * pg), 0);
    /* mmap(MAP_FIXED) over two watched pages */
    ck_assert_ptr_eq(mmap(p, 2 * pg, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), p);
    ck_assert_uint_eq(drain(r), 1);
    ck_assert_uint_eq(r[0].start, (uintptr_t)p);
    ck_assert_uint_eq(r[0].end, (uintptr_t)p + 2 * pg);
    /* madvise DONTNEED on pages 3..4 */
    ck_assert_int_eq(madvise(p + 3 * pg, 2 * pg, MADV_DONTNEED), 0);
    ck_assert_uint_eq(drain(r), 1);
    ck_assert_uint_eq(r[0].start, (uintptr_t)p + 3 * pg);
    ck_assert_uint_eq(r[0].end, (uintptr_t)p + 5 * pg);
    /* mremap pages 5..7 elsewhere: the old range is reported */
    char *q = mremap(p + 5 * pg, 3 * pg, 3 * pg, MREMAP_MAYMOVE | MREMAP_FIXED,
                     area(3));
    ck_assert_ptr_ne(q, MAP_FAILED);
    ck_assert_uint_ge(drain(r), 1);
    ck_assert_uint_eq(r[0].start, (uintptr_t)p + 5 * pg);
    ck_assert_uint_eq(r[0].end, (uintptr_t)p + 8 * pg);
    /* a partial munmap of what is left (page 2) */
    ck_assert_int_eq(munmap(p + 2 * pg, pg), 0);
    ck_assert_uint_eq(drain(r), 1);
    ck_assert_uint_eq(r[0].start, (uintptr_t)p + 2 * pg);
    munmap(q, 3 * pg);
    drain(r);
    munmap(p, 2 * pg);
    munmap(p + 3 * pg, 2 * pg);
    drain(r);
}
END_TEST

/* Issue 29: watching part of a mapping must not split it -- the
 * application's mremap of the whole mapping failed with EFAULT.  MODE_WP
 * only: MODE_MISSING watches the pages asked for (memmon.h). */
START_TEST(watching_part_of_a_mapping_keeps_its_mremap_working)
{
    fh_memmon_range_t r[8];
    char *p = area(8);
    memset(p, 7, 8 * pg);
    ck_assert_int_eq(fh_memmon_watch(m, (uintptr_t)p + 2 * pg + 100, 10), 0);
    char *q = mremap(p, 8 * pg, 64 * pg, MREMAP_MAYMOVE);
    ck_assert_ptr_ne(q, MAP_FAILED);
    ck_assert_int_eq(q[8 * pg - 1], 7);
    ck_assert_uint_ge(drain(r), 0);
    char *s = mremap(q, 64 * pg, 4 * pg, 0);     /* shrink in place */
    ck_assert_ptr_eq(s, q);
    munmap(q, 4 * pg);
    drain(r);
}
END_TEST

START_TEST(unwatched_memory_is_not_reported)
{
    fh_memmon_range_t r[8];
    /* Three mappings: p (2 pages), a PROT_NONE page, w.  The monitor
     * watches whole mappings (w's), so p must be a mapping of its own. */
    char *p = area(4);
    char *w = p + 3 * pg;
    ck_assert_int_eq(mprotect(p + 2 * pg, pg, PROT_NONE), 0);
    ck_assert_int_eq(fh_memmon_watch(m, (uintptr_t)w, pg), 0);
    ck_assert_int_eq(madvise(p, 2 * pg, MADV_DONTNEED), 0);
    ck_assert_int_eq(munmap(p, 3 * pg), 0);
    ck_assert(!fh_memmon_pending(m, seen));
    ck_assert_uint_eq(drain(r), 0);
    munmap(w, pg);
    ck_assert_uint_eq(drain(r), 1);
}
END_TEST

START_TEST(watching_changes_nothing_the_program_sees)
{
    fh_memmon_range_t r[8];
    char *p = area(4);
    memset(p, 0x5a, pg);                           /* page 0 populated */
    ck_assert_int_eq(fh_memmon_watch(m, (uintptr_t)p, 4 * pg), 0);
    ck_assert_int_eq(p[0], 0x5a);
    ck_assert_int_eq(p[2 * pg], 0);                /* untouched page reads 0 */
    p[3 * pg] = 7;                                 /* first write to a page */
    ck_assert_int_eq(p[3 * pg], 7);
    /* a kernel-mode access (read(2) into a never-touched watched page) */
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    ck_assert_int_eq(write(fd[1], "abc", 3), 3);
    ck_assert_int_eq(read(fd[0], p + pg + 100, 3), 3);
    ck_assert_int_eq(memcmp(p + pg + 100, "abc", 3), 0);
    close(fd[0]);
    close(fd[1]);
    ck_assert_uint_eq(drain(r), 0);
    munmap(p, 4 * pg);
    drain(r);
}
END_TEST

START_TEST(a_file_mapping_cannot_be_watched)
{
    char path[] = "/tmp/fh_memmon_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    ck_assert_int_eq(ftruncate(fd, (off_t)pg), 0);
    char *p = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    ck_assert_int_lt(fh_memmon_watch(m, (uintptr_t)p, pg), 0);
    munmap(p, pg);
    close(fd);
    /* a hole */
    char *q = area(3);
    munmap(q + pg, pg);
    ck_assert_int_lt(fh_memmon_watch(m, (uintptr_t)q, 3 * pg), 0);
    munmap(q, 3 * pg);
}
END_TEST

/* More unmap events than the ring holds (1024), with no drain in between:
 * the monitor keeps what fits and raises "overflow", which a drain reports
 * once (*all: the consumer must invalidate everything, docs/firehose-
 * cache.md); no event is missed by the state word; afterwards the ring
 * works as before, without a stale overflow. */
START_TEST(ring_overflow_says_invalidate_everything)
{
    enum { NP = 1100 };
    char *p = area(NP);
    ck_assert_int_eq(fh_memmon_watch(m, (uintptr_t)p, NP * pg), 0);
    for (size_t i = 0; i < NP; i++)
        ck_assert_int_eq(munmap(p + i * pg, pg), 0);
    ck_assert(fh_memmon_pending(m, seen));
    /* munmap returns once the monitor has read its event; the count is
     * published when the monitor's read loop ends (the busy bit covers the
     * gap), so wait for it -- bounded, 10 s. */
    for (int i = 0; i < 10000 && fh_memmon_events(m) != NP; i++)
        usleep(1000);
    ck_assert_uint_eq(fh_memmon_events(m), NP);
    fh_memmon_range_t r[64];
    size_t total = 0, n;
    int all = 0, alls = 0;
    do {
        n = fh_memmon_drain(m, r, 64, &all, &seen);
        alls += all;
        total += n;
    } while (n == 64);
    ck_assert_msg(alls == 1, "one drain should report the overflow, %d did", alls);
    ck_assert_msg(total < NP, "the ring holds fewer than %d ranges, drained %zu", NP, total);
    ck_assert(!fh_memmon_pending(m, seen));
    /* The ring is usable again and the overflow is not reported twice. */
    fh_memmon_range_t one[8];
    char *q = area(2);
    ck_assert_int_eq(fh_memmon_watch(m, (uintptr_t)q, 2 * pg), 0);
    ck_assert_int_eq(munmap(q, 2 * pg), 0);
    ck_assert(fh_memmon_pending(m, seen));
    ck_assert_uint_eq(drain(one), 1);   /* drain() asserts no overflow */
    ck_assert_uint_eq(one[0].start, (uintptr_t)q);
}
END_TEST

/* ---- code that is not ours, run by the monitor thread as it exits.
 * Tools that wrap pthread_create run destructors in every thread after its
 * start routine returns; ASan's unmaps the thread's alternate signal
 * stack, which the kernel may have merged into an application mapping we
 * watch whole.  This interposer does the same: while exit_unmap is set,
 * a thread created runs munmap(exit_unmap, pg) after its start routine. */
static void *_Atomic exit_unmap;

struct trampoline {
    void *(*fn)(void *);
    void *arg;
};

static void *trampoline_main(void *p)
{
    struct trampoline t = *(struct trampoline *)p;
    free(p);
    void *ret = t.fn(t.arg);
    void *u = atomic_exchange(&exit_unmap, NULL);
    if (u != NULL)
        munmap(u, pg);
    return ret;
}

/* Interposes the C library's (or the sanitizer's) pthread_create for this
 * program, memmon.c's call included; the same contract. */
int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    create_fn real = (create_fn)(uintptr_t)dlsym(RTLD_NEXT, "pthread_create");
    if (real == NULL)   /* also called outside the tests (main): no ck_assert */
        abort();
    struct trampoline *t;
    if (atomic_load(&exit_unmap) == NULL || (t = malloc(sizeof *t)) == NULL)
        return real(th, attr, fn, arg);
    *t = (struct trampoline){fn, arg};
    int rc = real(th, attr, trampoline_main, t);
    if (rc != 0)
        free(t);
    return rc;
}

/* The hang that got robust-memory reverted: the monitor thread waited for
 * its own UNMAP event while fh_finalize joined it.  Destroying the monitor
 * must return (Check's timeout fails a hang) and the unmap must be done. */
START_TEST(an_unmap_by_the_exiting_monitor_thread_does_not_wait_on_it)
{
    char *q = area(3);
    atomic_store(&exit_unmap, q + 2 * pg);
    fh_memmon_t *own;
    char why[160];
    int missing = strcmp(fh_memmon_mode(m), "missing") == 0;   /* the fixture's mode */
    ck_assert_int_eq(missing ? fh_memmon_create_missing(&own, why, sizeof why)
                             : fh_memmon_create(&own, why, sizeof why), 0);
    /* The first page only: the whole mapping is watched, its last page too. */
    ck_assert_int_eq(fh_memmon_watch(own, (uintptr_t)q, pg), 0);
    fh_memmon_destroy(own);
    ck_assert_ptr_null(atomic_load(&exit_unmap));       /* the thread ran it */
    unsigned char v;
    ck_assert_int_ne(mincore(q + 2 * pg, pg, &v), 0);   /* gone: ENOMEM */
    munmap(q, 2 * pg);
}
END_TEST

/* The same tests run in each userfaultfd mode; only the fixture differs. */
static TCase *mode_tcase(const char *name, void (*setup_fn)(void))
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup_fn, teardown);
    tcase_add_test(tc, munmap_of_watched_memory_is_reported_before_munmap_returns);
    tcase_add_test(tc, map_fixed_dontneed_mremap_and_partial_munmap_are_reported);
    tcase_add_test(tc, unwatched_memory_is_not_reported);
    if (setup_fn == setup)
        tcase_add_test(tc, watching_part_of_a_mapping_keeps_its_mremap_working);
    tcase_add_test(tc, watching_changes_nothing_the_program_sees);
    tcase_add_test(tc, a_file_mapping_cannot_be_watched);
    tcase_add_test(tc, ring_overflow_says_invalidate_everything);
    tcase_add_test(tc, an_unmap_by_the_exiting_monitor_thread_does_not_wait_on_it);
    return tc;
}

int main(void)
{
    fh_memmon_t *probe;
    char why[160];
    if (fh_memmon_create(&probe, why, sizeof why) != 0) {
        printf("SKIP test_memmon: %s\n", why);
        return 77;
    }
    printf("test_memmon: userfaultfd in %s mode\n", fh_memmon_mode(probe));
    fh_memmon_destroy(probe);
    Suite *s = suite_create("memmon");
    suite_add_tcase(s, mode_tcase("uffd", setup));
    fh_memmon_t *mp;
    if (fh_memmon_create_missing(&mp, why, sizeof why) == 0) {
        fh_memmon_destroy(mp);
        suite_add_tcase(s, mode_tcase("uffd-missing", setup_missing));
    } else {
        printf("test_memmon: missing mode not testable here: %s\n", why);
    }
    return fh_check_run(s);
}
