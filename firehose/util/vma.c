/*
 * vma.c -- the mapping around an address (vma.h): PROCMAP_QUERY where the
 * kernel has it (Linux >= 6.11), else a scan of /proc/self/maps.
 */
#include "vma.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* The ABI of linux/fs.h (6.11), spelled out: older headers lack it. */
struct fh_procmap_query {
    uint64_t size, query_flags, query_addr;
    uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
};
#define FH_PROCMAP_QUERY _IOWR('f', 17, struct fh_procmap_query)
#define FH_PQ_READABLE 0x01
#define FH_PQ_WRITABLE 0x02
#define FH_PQ_COVERING_OR_NEXT 0x10

static _Atomic int maps_fd = -2;     /* -2 not opened yet, -1 no ioctl */

/* The descriptor PROCMAP_QUERY goes through, opened once and kept (so a
 * process that later runs out of descriptors -- a stranger flooding its
 * listener -- can still ask); -1 when the kernel has no ioctl, or when the
 * open failed (not remembered: the next call tries again). */
static int query_fd(void)
{
    int fd = atomic_load_explicit(&maps_fd, memory_order_acquire);
    if (fd != -2)
        return fd;
    int nfd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (nfd < 0)
        return -1;
    struct fh_procmap_query q = {.size = sizeof q, .query_flags = FH_PQ_COVERING_OR_NEXT,
                                 .query_addr = 0};
    if (ioctl(nfd, FH_PROCMAP_QUERY, &q) != 0 && errno != ENOENT) {
        close(nfd);
        nfd = -1;
    }
    int expect = -2;
    if (!atomic_compare_exchange_strong(&maps_fd, &expect, nfd)) {
        if (nfd >= 0)
            close(nfd);
        return expect;
    }
    return nfd;
}

/* The scan of /proc/self/maps: the first line whose end is above addr. */
static int scan_next(uintptr_t addr, fh_vma_t *out)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (f == NULL)
        return -errno;
    char line[512];
    int rc = -ENOMEM;
    while (fgets(line, sizeof line, f) != NULL) {
        size_t l = strlen(line);
        int whole = l > 0 && line[l - 1] == '\n';
        char *p = line;
        unsigned long long s = strtoull(p, &p, 16);
        unsigned long long e = *p == '-' ? strtoull(p + 1, &p, 16) : 0;
        int prot = (p[0] == ' ' && p[1] == 'r' ? FH_VMA_READ : 0) |
                   (p[0] == ' ' && p[2] == 'w' ? FH_VMA_WRITE : 0);
        /* " rwxp offset dev inode": the inode is the 4th field after it. */
        unsigned long long inode = 0;
        if (strlen(p) > 5) {
            char *q = p + 5;
            (void)strtoull(q, &q, 16);                       /* offset */
            while (*q == ' ')
                q++;
            while (*q != ' ' && *q != '\0' && *q != '\n')  /* dev */
                q++;
            inode = strtoull(q, NULL, 10);
        }
        while (!whole && fgets(line, sizeof line, f) != NULL) {
            l = strlen(line);
            whole = l > 0 && line[l - 1] == '\n';
        }
        if (e > addr) {
            *out = (fh_vma_t){(uintptr_t)s, (uintptr_t)e, prot, inode != 0};
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

void fh_vma_prepare(void)
{
    (void)query_fd();
}

int fh_vma_next(uintptr_t addr, fh_vma_t *out)
{
    int fd = query_fd();
    if (fd < 0)
        return scan_next(addr, out);
    struct fh_procmap_query q = {.size = sizeof q, .query_flags = FH_PQ_COVERING_OR_NEXT,
                                 .query_addr = addr};
    if (ioctl(fd, FH_PROCMAP_QUERY, &q) != 0)
        return errno == ENOENT ? -ENOMEM : -errno;
    *out = (fh_vma_t){(uintptr_t)q.vma_start, (uintptr_t)q.vma_end,
                      (q.vma_flags & FH_PQ_READABLE ? FH_VMA_READ : 0) |
                          (q.vma_flags & FH_PQ_WRITABLE ? FH_VMA_WRITE : 0),
                      q.inode != 0};
    return 0;
}

int fh_vma_at(uintptr_t addr, fh_vma_t *out)
{
    int rc = fh_vma_next(addr, out);
    if (rc == 0 && out->start > addr)
        rc = -ENOMEM;
    return rc;
}

int fh_vma_check(uintptr_t addr, size_t len, int prot, uintptr_t *bad)
{
    if (len == 0)
        return 1;
    uintptr_t end = addr + len;
    if (end < addr) {
        if (bad)
            *bad = addr;
        return 0;
    }
    for (uintptr_t a = addr; a < end;) {
        fh_vma_t v;
        if (fh_vma_at(a, &v) != 0 || (v.prot & prot) != prot) {
            if (bad)
                *bad = a;
            return 0;
        }
        a = v.end;
    }
    return 1;
}
