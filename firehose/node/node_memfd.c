/*
 * node_memfd.c -- fh_node_memfd: group-shared pieces as memfds (node.h).
 */
#include "node.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "firehose.h"
#include "firehose/util/log.h"

#define NODE_HUGE ((size_t)2 << 20)

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif

/* Reserves size + align bytes of address space and returns the aligned
 * start inside it (the rest is unmapped again by the caller's MAP_FIXED
 * and trim). */
static char *reserve(size_t size, size_t align, char **raw, size_t *rawlen)
{
    *rawlen = size + align;
    *raw = mmap(NULL, *rawlen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (*raw == MAP_FAILED)
        return NULL;
    return (char *)(((uintptr_t)*raw + align - 1) & ~(uintptr_t)(align - 1));
}

/* One attempt: a memfd of size bytes (huge or not) mapped at an aligned
 * address.  FH_OK or -1 (errno set), nothing left behind on failure. */
static int try_create(size_t size, size_t align, int huge, fh_node_piece_t *out)
{
    int fd = memfd_create("firehose-segment", MFD_CLOEXEC | (huge ? MFD_HUGETLB : 0));
    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)size) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    char *raw;
    size_t rawlen;
    char *al = reserve(size, align, &raw, &rawlen);
    if (al == NULL) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    void *m = mmap(al, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    if (m == MAP_FAILED) {
        int e = errno;
        munmap(raw, rawlen);
        close(fd);
        errno = e;
        return -1;
    }
    if (al > raw)
        munmap(raw, (size_t)(al - raw));
    size_t tail = (size_t)(raw + rawlen - (al + size));
    if (tail)
        munmap(al + size, tail);
    out->base = al;
    out->size = size;
    out->fd = fd;
    out->huge = huge;
    return FH_OK;
}

static int memfd_create_piece(size_t size, size_t align, fh_node_piece_t *out)
{
    memset(out, 0, sizeof *out);
    out->fd = -1;
    size = (size + align - 1) & ~(align - 1);
    /* Hugepages when the piece is made of them; silently not otherwise
     * (no pages reserved, no hugetlbfs: mmap or ftruncate fails). */
    if (size % NODE_HUGE == 0 &&
        try_create(size, align > NODE_HUGE ? align : NODE_HUGE, 1, out) == FH_OK)
        return FH_OK;
    if (try_create(size, align, 0, out) == FH_OK)
        return FH_OK;
    int e = errno;
    return fh_set_error(e == ENOSYS ? FH_ERR_NOT_SUPPORTED : FH_ERR_NO_MEMORY,
                        "node: cannot create a shared piece of %zu bytes: %s", size,
                        strerror(e));
}

static void memfd_destroy(fh_node_piece_t *p)
{
    if (p->base != NULL)
        munmap(p->base, p->size);
    if (p->fd >= 0)
        close(p->fd);
    p->base = NULL;
    p->fd = -1;
}

static int memfd_attach(int64_t pid, int fd, size_t size, void **out)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld/fd/%d", (long long)pid, fd);
    int f = open(path, O_RDWR | O_CLOEXEC);
    if (f < 0)
        return fh_set_error(FH_ERR_NOT_SUPPORTED, "node: cannot open %s: %s", path,
                            strerror(errno));
    struct stat st;
    if (fstat(f, &st) != 0 || (size_t)st.st_size < size) {
        close(f);
        return fh_set_error(FH_ERR_INVALID, "node: %s is not the piece announced "
                            "(%zu bytes)", path, size);
    }
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    int e = errno;
    close(f);
    if (m == MAP_FAILED)
        return fh_set_error(FH_ERR_NO_MEMORY, "node: cannot map %s: %s", path, strerror(e));
    *out = m;
    return FH_OK;
}

static void memfd_detach(void *addr, size_t size)
{
    if (addr != NULL)
        munmap(addr, size);
}

const fh_node_ops_t fh_node_memfd = {
    .name = "memfd",
    .create = memfd_create_piece,
    .destroy = memfd_destroy,
    .attach = memfd_attach,
    .detach = memfd_detach,
};
