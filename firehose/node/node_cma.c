/*
 * node_cma.c -- cross-memory attach: copies between our memory and another
 * process's with process_vm_readv/writev (one copy, by the kernel), and
 * what the kernel asks before it allows one (node.h, "Cross-memory
 * attach").
 *
 * The kernel checks PTRACE_MODE_ATTACH_REALCREDS over the target: the
 * same user (and a dumpable target, or CAP_SYS_PTRACE), and, when the
 * Yama LSM is on, its ptrace_scope:
 *   0  no further rule;
 *   1  (relational) only an ancestor of the target, or a descendant of
 *      the process the target declared with prctl(PR_SET_PTRACER, pid)
 *      -- so a rank that declares its launcher (the parent all ranks of
 *      its group share) lets exactly the launcher's descendants in;
 *   2  only CAP_SYS_PTRACE;  3  nobody.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "node.h"
#include "firehose.h"
#include "firehose/util/log.h"

/* Blocks per system call of a strided copy (IOV_MAX allows 1024). */
#define CMA_IOV_BATCH 64

int fh_node_cma_yama(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    if (f == NULL)
        return -1;
    int scope = -1;
    if (fscanf(f, "%d", &scope) != 1)
        scope = -1;
    fclose(f);
    return scope;
}

int fh_node_cma_allow(int64_t ancestor)
{
    if (ancestor <= 1)
        return fh_set_error(FH_ERR_INVALID, "no launcher process to declare (pid %lld)",
                            (long long)ancestor);
    if (prctl(PR_SET_PTRACER, (unsigned long)ancestor, 0, 0, 0) != 0)
        return fh_set_error(FH_ERR_NOT_SUPPORTED, "prctl(PR_SET_PTRACER, %lld): %s",
                            (long long)ancestor, strerror(errno));
    return FH_OK;
}

/* What errno of a process_vm_* call means for the caller. */
static int cma_error(int err, int64_t pid, uint64_t remote)
{
    switch (err) {
    case EPERM:
        return fh_set_error(FH_ERR_NOT_SUPPORTED,
                            "cross-memory attach to pid %lld refused (EPERM)",
                            (long long)pid);
    case ESRCH:
        return fh_set_error(FH_ERR_PEER_DEAD, "pid %lld is gone", (long long)pid);
    case EFAULT:
        return fh_set_error(FH_ERR_OUT_OF_SEGMENT,
                            "0x%llx is not mapped in pid %lld (or our buffer is not)",
                            (unsigned long long)remote, (long long)pid);
    case ENOMEM:
        return fh_set_error(FH_ERR_NO_MEMORY, "process_vm: out of memory");
    default:
        return fh_set_error(FH_ERR_TRANSPORT, "process_vm to pid %lld: %s", (long long)pid,
                            strerror(err));
    }
}

/* Moves the described bytes, continuing after partial transfers (a call
 * stops at the first page it cannot reach, or early for large requests). */
static int cma_iov(int64_t pid, bool is_put, struct iovec *l, size_t nl, struct iovec *r,
                   size_t nr)
{
    while (nl > 0 && nr > 0) {
        ssize_t done = is_put ? process_vm_writev((pid_t)pid, l, nl, r, nr, 0)
                              : process_vm_readv((pid_t)pid, l, nl, r, nr, 0);
        if (done < 0) {
            if (errno == EINTR)
                continue;
            return cma_error(errno, pid, (uint64_t)(uintptr_t)r->iov_base);
        }
        if (done == 0)
            return cma_error(EFAULT, pid, (uint64_t)(uintptr_t)r->iov_base);
        /* Advance both lists by `done` bytes. */
        for (size_t left = (size_t)done; left > 0 && nl > 0;) {
            size_t k = left < l->iov_len ? left : l->iov_len;
            l->iov_base = (char *)l->iov_base + k;
            l->iov_len -= k;
            left -= k;
            if (l->iov_len == 0)
                l++, nl--;
        }
        for (size_t left = (size_t)done; left > 0 && nr > 0;) {
            size_t k = left < r->iov_len ? left : r->iov_len;
            r->iov_base = (char *)r->iov_base + k;
            r->iov_len -= k;
            left -= k;
            if (r->iov_len == 0)
                r++, nr--;
        }
    }
    return FH_OK;
}

/* Before a copy: reads one byte of every page of [remote, remote+n) of
 * pid, so a range that is not all mapped (and readable) is refused before
 * a byte is moved (docs/reliability.md; read-only pages under a put are
 * found only by the write itself). */
static int cma_probe(int64_t pid, uint64_t remote, size_t n)
{
    enum { PROBE = 256 };
    static const uint64_t pg = 4096;   /* any page size is a multiple */
    unsigned char sink[PROBE];
    struct iovec l[PROBE], r[PROBE];
    uint64_t a = remote, end = remote + n;
    while (a < end) {
        size_t k = 0;
        for (; k < PROBE && a < end; k++) {
            l[k] = (struct iovec){&sink[k], 1};
            r[k] = (struct iovec){(void *)(uintptr_t)a, 1};
            a = (a | (pg - 1)) + 1;
        }
        ssize_t got;
        do
            got = process_vm_readv((pid_t)pid, l, k, r, k, 0);
        while (got < 0 && errno == EINTR);
        if (got < 0)
            return cma_error(errno, pid, remote);
        if ((size_t)got < k)
            return cma_error(EFAULT, pid, (uint64_t)(uintptr_t)r[got].iov_base);
    }
    /* The last byte too (the walk reads each page's first byte it meets). */
    l[0] = (struct iovec){sink, 1};
    r[0] = (struct iovec){(void *)(uintptr_t)(end - 1), 1};
    ssize_t got = process_vm_readv((pid_t)pid, l, 1, r, 1, 0);
    if (got != 1)
        return cma_error(got < 0 ? errno : EFAULT, pid, end - 1);
    return FH_OK;
}

int fh_node_cma_copy(int64_t pid, bool is_put, void *local, uint64_t remote, size_t n)
{
    struct iovec l = {local, n}, r = {(void *)(uintptr_t)remote, n};
    if (n == 0)
        return FH_OK;
    int rc = cma_probe(pid, remote, n);
    if (rc != FH_OK)
        return rc;
    return cma_iov(pid, is_put, &l, 1, &r, 1);
}

int fh_node_cma_strided(int64_t pid, bool is_put, char *local, ptrdiff_t lstride,
                        uint64_t remote, ptrdiff_t rstride, size_t blk, size_t count)
{
    struct iovec l[CMA_IOV_BATCH], r[CMA_IOV_BATCH];
    for (size_t i = 0; i < count;) {
        size_t k = 0;
        for (; k < CMA_IOV_BATCH && i < count; k++, i++) {
            l[k] = (struct iovec){local + (ptrdiff_t)i * lstride, blk};
            r[k] = (struct iovec){(void *)(uintptr_t)(remote + (uint64_t)((ptrdiff_t)i * rstride)),
                                  blk};
        }
        int rc = cma_iov(pid, is_put, l, k, r, k);
        if (rc != FH_OK)
            return rc;
    }
    return FH_OK;
}
