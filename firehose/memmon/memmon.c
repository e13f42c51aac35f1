/*
 * memmon.c -- the userfaultfd memory monitor (see memmon.h for the contract
 * and the state-word protocol, docs/firehose-cache.md for the design).
 *
 * Parts: opening the descriptor (three ways, least privileged first), the
 * monitor thread (poll, mark busy, read, record, publish), the lock-free ring
 * it fills and the consumer side the runtime calls under its cache lock.
 */
#include "memmon.h"

#include "firehose/util/vma.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

/* Ring capacity (power of two).  An overflow is not an error: the consumer
 * is told to treat everything as invalid. */
#define MM_RING 1024u

struct fh_memmon {
    int fd;                        /* userfaultfd */
    int stop_fd;                   /* eventfd: ask the thread to exit */
    int wp;                        /* 1: MODE_WP, 0: MODE_MISSING */
    size_t page;
    pthread_t thread;
    /* The thread's stack, ours (not glibc's): glibc madvise(DONTNEED)s the
     * unused part of a stack it allocated when the thread exits.  A watched
     * range (a local pin's bucket-rounded region next to the stack) may
     * cover that stack; the exiting monitor thread would then wait for its
     * own REMOVE event to be read -- a self-deadlock seen on verbs, where
     * fh_memmon_destroy's pthread_join never returned.  glibc leaves a
     * user-provided stack alone; we unmap it after closing the descriptor
     * (no event then). */
    void *stack;
    size_t stack_len;

    _Atomic uint64_t state;        /* bit 0 busy, bits 1..: events published */
    _Atomic uint64_t head;         /* ring slots written (producer) */
    _Atomic uint64_t tail;         /* ring slots consumed (consumer) */
    _Atomic int overflow;          /* ring was full: invalidate everything */
    _Atomic int stopping;          /* fh_memmon_destroy asked the thread to exit */
    fh_memmon_range_t ring[MM_RING];
};

/* ------------------------------------------------------------ opening */

/* A userfaultfd with the given flags, through the system call or (kernels
 * >= 6.1, when the call is forbidden) /dev/userfaultfd. */
static int uffd_open(int user_mode_only)
{
    int flags = O_CLOEXEC | O_NONBLOCK | (user_mode_only ? UFFD_USER_MODE_ONLY : 0);
#ifdef SYS_userfaultfd
    int fd = (int)syscall(SYS_userfaultfd, flags);
    if (fd >= 0)
        return fd;
#else
    int fd = -1;
    errno = ENOSYS;
#endif
#ifdef USERFAULTFD_IOC_NEW
    int e = errno;
    int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev >= 0) {
        fd = ioctl(dev, USERFAULTFD_IOC_NEW, flags);
        close(dev);
        if (fd >= 0)
            return fd;
    }
    errno = e;
#endif
    return -1;
}

/* Handshake asking for the events (and WP faults if wp).  0 or -errno. */
static int uffd_api(int fd, int wp)
{
    struct uffdio_api api;
    memset(&api, 0, sizeof api);
    api.api = UFFD_API;
    api.features = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE |
                   UFFD_FEATURE_EVENT_REMAP | (wp ? UFFD_FEATURE_PAGEFAULT_FLAG_WP : 0);
    if (ioctl(fd, UFFDIO_API, &api) != 0)
        return -errno;
    return 0;
}

/* Registration test on a scratch anonymous page: does this kernel accept
 * the mode for anonymous memory? */
static int probe_mode(int fd, size_t page, int wp)
{
    void *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    struct uffdio_register reg;
    memset(&reg, 0, sizeof reg);
    reg.range.start = (uintptr_t)p;
    reg.range.len = page;
    reg.mode = wp ? UFFDIO_REGISTER_MODE_WP : UFFDIO_REGISTER_MODE_MISSING;
    int rc = ioctl(fd, UFFDIO_REGISTER, &reg) == 0 ? 0 : -errno;
    /* Unregister first: no thread reads events yet, and munmap of a watched
     * range would wait for its UNMAP event to be read. */
    if (rc == 0)
        ioctl(fd, UFFDIO_UNREGISTER, &reg.range);
    munmap(p, page);
    return rc;
}

/* Tries, in order: user-mode-only + WP, full + WP, full + MISSING.  A
 * user-mode-only descriptor is never used with MISSING: kernel-mode faults
 * (read(2) into the buffer, ibv_reg_mr pinning it) would fail with EFAULT. */
static int open_best(size_t page, int missing_only, int *fd_out, int *wp_out, char *why,
                     size_t whylen)
{
    static const struct { int umo, wp; } tries[] = {{1, 1}, {0, 1}, {0, 0}};
    int last = -ENOSYS;
    const char *step = "userfaultfd()";
    for (size_t i = missing_only ? 2 : 0; i < sizeof tries / sizeof tries[0]; i++) {
        int fd = uffd_open(tries[i].umo);
        if (fd < 0) {
            last = -errno;
            step = "userfaultfd()";
            continue;
        }
        int rc = uffd_api(fd, tries[i].wp);
        if (rc == 0)
            rc = probe_mode(fd, page, tries[i].wp);
        if (rc == 0) {
            *fd_out = fd;
            *wp_out = tries[i].wp;
            return 0;
        }
        step = tries[i].wp ? "UFFDIO_API/REGISTER (write-protect mode)"
                           : "UFFDIO_API/REGISTER (missing mode)";
        last = rc;
        close(fd);
    }
    snprintf(why, whylen, "%s failed: %s", step, strerror(-last));
    return last;
}

/* A tool that runs one thread at a time, or NULL.  Under it an unmap of
 * watched memory waits in the kernel for the monitor thread to read the
 * event, and the tool never lets that thread run (valgrind keeps its lock
 * across munmap: the 2-rank demo hung in munmap after its measurement).
 * Found by the preload library each maps into the program. */
static const char *serializing_tool(void)
{
    static const struct { const char *lib, *tool; } known[] = {
        {"/vgpreload_", "valgrind"}, {"/librrpreload", "rr"}};
    FILE *f = fopen("/proc/self/maps", "re");
    if (f == NULL)
        return NULL;
    const char *found = NULL;
    char line[512];
    while (found == NULL && fgets(line, sizeof line, f) != NULL)
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strstr(line, known[i].lib) != NULL)
                found = known[i].tool;
    fclose(f);
    return found;
}

/* ------------------------------------------------------------ producer */

static void ring_push(fh_memmon_t *m, uintptr_t start, uintptr_t end)
{
    uint64_t h = atomic_load_explicit(&m->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&m->tail, memory_order_acquire);
    if (h - t >= MM_RING) {
        atomic_store_explicit(&m->overflow, 1, memory_order_release);
        return;
    }
    m->ring[h % MM_RING] = (fh_memmon_range_t){start, end};
    atomic_store_explicit(&m->head, h + 1, memory_order_release);
}

/* MODE_MISSING: map the zero page, as the kernel would for anonymous
 * memory; on any failure wake the thread so it retries the access. */
static void resolve_fault(fh_memmon_t *m, uint64_t addr)
{
    uintptr_t pg = (uintptr_t)addr & ~(uintptr_t)(m->page - 1);
    struct uffdio_zeropage zp;
    memset(&zp, 0, sizeof zp);
    zp.range.start = pg;
    zp.range.len = m->page;
    if (ioctl(m->fd, UFFDIO_ZEROPAGE, &zp) != 0 && errno != EEXIST) {
        struct uffdio_range r = {.start = pg, .len = m->page};
        ioctl(m->fd, UFFDIO_WAKE, &r);
    }
}

static void *monitor_main(void *arg)
{
    fh_memmon_t *m = arg;
    uint64_t published = 0;
    struct uffd_msg msg[32];
    for (;;) {
        struct pollfd pf[2] = {{.fd = m->fd, .events = POLLIN},
                               {.fd = m->stop_fd, .events = POLLIN}};
        if (poll(pf, 2, -1) < 0) {
            /* Never exit on an error (ENOMEM): the runtime would go on
             * caching registrations nobody watches.  Retry, and leave
             * only when asked. */
            if (atomic_load_explicit(&m->stopping, memory_order_acquire))
                break;
            if (errno != EINTR)
                usleep(1000);
            continue;
        }
        if (pf[1].revents)
            break;
        if (!(pf[0].revents & POLLIN))
            continue;
        /* Busy before read(): read() is what releases the unmapping thread. */
        atomic_fetch_or_explicit(&m->state, 1, memory_order_seq_cst);
        ssize_t n;
        while ((n = read(m->fd, msg, sizeof msg)) > 0) {
            for (size_t i = 0; i < (size_t)n / sizeof msg[0]; i++) {
                const struct uffd_msg *e = &msg[i];
                switch (e->event) {
                case UFFD_EVENT_PAGEFAULT:
                    resolve_fault(m, e->arg.pagefault.address);
                    continue;
                case UFFD_EVENT_REMOVE:
                case UFFD_EVENT_UNMAP:
                    ring_push(m, (uintptr_t)e->arg.remove.start, (uintptr_t)e->arg.remove.end);
                    break;
                case UFFD_EVENT_REMAP:
                    ring_push(m, (uintptr_t)e->arg.remap.from,
                              (uintptr_t)(e->arg.remap.from + e->arg.remap.len));
                    break;
                default:
                    continue;
                }
                published++;
            }
        }
        atomic_store_explicit(&m->state, published << 1, memory_order_release);
    }
    /* Close the descriptor here, before this thread exits: closing it
     * unregisters every watched range and releases any thread waiting for
     * an event to be read.  After this function returns, the thread's own
     * exit runs code that is not ours (glibc's and the sanitizers' thread
     * destructors: ASan unmaps the thread's alternate signal stack), and
     * an unmap of a watched range would wait for the one thread that reads
     * the events -- itself.  Watching whole mappings makes that likely:
     * the kernel merges such runtime allocations with the application's
     * anonymous memory (a hang in fh_finalize's pthread_join under ASan
     * with FH_SEGMENT=everything). */
    close(m->fd);   /* m->fd is left as it was: other threads read it */
    return NULL;
}

/* ------------------------------------------------------------ lifetime */

static int create(fh_memmon_t **out, int missing_only, char *why, size_t whylen);

int fh_memmon_create(fh_memmon_t **out, char *why, size_t whylen)
{
    return create(out, 0, why, whylen);
}

int fh_memmon_create_missing(fh_memmon_t **out, char *why, size_t whylen)
{
    return create(out, 1, why, whylen);
}

static int create(fh_memmon_t **out, int missing_only, char *why, size_t whylen)
{
    *out = NULL;
    fh_memmon_t *m = calloc(1, sizeof *m);
    if (m == NULL) {
        snprintf(why, whylen, "out of memory");
        return -ENOMEM;
    }
    m->page = (size_t)sysconf(_SC_PAGESIZE);
    const char *tool = serializing_tool();
    if (tool != NULL) {
        snprintf(why, whylen, "running under %s, which runs one thread at a time: an "
                 "unmap of watched memory would wait for ever for the monitor thread", tool);
        free(m);
        return -ENOTSUP;
    }
    int rc = open_best(m->page, missing_only, &m->fd, &m->wp, why, whylen);
    if (rc != 0) {
        free(m);
        return rc;
    }
    m->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (m->stop_fd < 0) {
        rc = -errno;
        snprintf(why, whylen, "eventfd: %s", strerror(errno));
        close(m->fd);
        free(m);
        return rc;
    }
    /* 2 MiB of address space, touched only as deep as the thread goes:
     * ThreadSanitizer alone wants ~0.9 MiB of a thread's stack (with 256
     * KiB, pthread_create failed under TSan and the monitor never ran). */
    /* A PROT_NONE page on each side keeps the stack a mapping of its own:
     * fh_memmon_watch registers whole mappings, and an anonymous mapping
     * the kernel merged with this stack would make the monitor wait on
     * itself (MODE_MISSING faults on its own stack). */
    m->stack_len = 2u << 20;
    m->stack = mmap(NULL, m->stack_len + 2 * m->page, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (m->stack != MAP_FAILED) {
        m->stack = (char *)m->stack + m->page;
        if (mprotect(m->stack, m->stack_len, PROT_READ | PROT_WRITE) != 0) {
            munmap((char *)m->stack - m->page, m->stack_len + 2 * m->page);
            m->stack = MAP_FAILED;
        }
    }
    pthread_attr_t attr;
    if (m->stack == MAP_FAILED) {
        rc = -errno;
        snprintf(why, whylen, "mmap of the monitor stack: %s", strerror(errno));
        close(m->stop_fd);
        close(m->fd);
        free(m);
        return rc;
    }
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, m->stack, m->stack_len);
    /* The thread takes no signal meant for the application. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = -pthread_create(&m->thread, &attr, monitor_main, m);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        snprintf(why, whylen, "pthread_create: %s", strerror(-rc));
        munmap((char *)m->stack - m->page, m->stack_len + 2 * m->page);
        close(m->stop_fd);
        close(m->fd);
        free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void fh_memmon_destroy(fh_memmon_t *m)
{
    if (m == NULL)
        return;
    uint64_t one = 1;
    atomic_store_explicit(&m->stopping, 1, memory_order_release);
    if (write(m->stop_fd, &one, sizeof one) != (ssize_t)sizeof one)
        perror("firehose: memmon: eventfd write");
    pthread_join(m->thread, NULL);   /* the thread closed m->fd */
    close(m->stop_fd);
    munmap((char *)m->stack - m->page, m->stack_len + 2 * m->page);
    free(m);
}

const char *fh_memmon_mode(const fh_memmon_t *m)
{
    return m->wp ? "wp" : "missing";
}

int fh_memmon_watch(fh_memmon_t *m, uintptr_t addr, size_t len)
{
    uintptr_t lo = addr & ~(uintptr_t)(m->page - 1);
    uintptr_t hi = (addr + len + m->page - 1) & ~(uintptr_t)(m->page - 1);
    /* MODE_WP: whole mappings, never a part: registering part of a
     * mapping splits it in the kernel, and the application's own mremap of
     * the mapping (which must lie in one) would then fail with EFAULT.
     * Watching more than asked costs only events for memory nobody
     * registered.  MODE_MISSING: the pages asked for, no more: there every
     * first touch of a watched page waits for the monitor thread, and a
     * whole mapping may hold memory the kernel merged in from code that is
     * not ours (the sanitizers' stack depot, touched by the monitor thread
     * itself as it starts: a self-deadlock seen in test_memmon under
     * ASan).  Holes are refused: newer kernels register the mappings of a
     * range with holes and succeed, and memory mapped into a hole later
     * would not be watched. */
    for (uintptr_t a = lo; a < hi;) {
        fh_vma_t v;
        int rc = fh_vma_at(a, &v);
        if (rc != 0)
            return rc;
        if (!m->wp) {
            v.start = a;
            v.end = v.end < hi ? v.end : hi;
        }
        struct uffdio_register reg;
        memset(&reg, 0, sizeof reg);
        reg.range.start = v.start;
        reg.range.len = v.end - v.start;
        reg.mode = m->wp ? UFFDIO_REGISTER_MODE_WP : UFFDIO_REGISTER_MODE_MISSING;
        if (ioctl(m->fd, UFFDIO_REGISTER, &reg) != 0)
            return -errno;
        a = v.end;
    }
    return 0;
}

/* ------------------------------------------------------------ consumer */

uint64_t fh_memmon_state(const fh_memmon_t *m)
{
    return atomic_load_explicit(&((fh_memmon_t *)m)->state, memory_order_acquire);
}

const _Atomic uint64_t *fh_memmon_state_word(const fh_memmon_t *m)
{
    return &m->state;
}

uint64_t fh_memmon_events(const fh_memmon_t *m)
{
    return fh_memmon_state(m) >> 1;
}

size_t fh_memmon_drain(fh_memmon_t *m, fh_memmon_range_t *out, size_t max, int *all,
                       uint64_t *state)
{
    uint64_t s;
    /* The monitor holds no lock and does a bounded amount of work while
     * busy; it may be descheduled, hence the yield. */
    for (unsigned spin = 0; (s = atomic_load_explicit(&m->state, memory_order_acquire)) & 1;
         spin++)
        if (spin > 64)
            sched_yield();
    *state = s;
    *all = atomic_exchange_explicit(&m->overflow, 0, memory_order_acq_rel);
    uint64_t t = atomic_load_explicit(&m->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&m->head, memory_order_acquire);
    size_t n = 0;
    while (t < h && n < max)
        out[n++] = m->ring[t++ % MM_RING];
    atomic_store_explicit(&m->tail, t, memory_order_release);
    return n;
}
