/*
 * vma.h -- what the kernel says about our own address space: the mapping
 * (VMA) around an address, and whether a range is mapped with given
 * protections.  The runtime asks before it touches, or lets a peer touch,
 * memory it did not allocate itself (FH_SEGMENT=everything, put-in-move,
 * the comparison strategies' copies, the memory monitor's registrations),
 * so an application's or a peer's mistake becomes an error, never a fault
 * in the target's progress.
 *
 * Answers come from the PROCMAP_QUERY ioctl of /proc/self/maps (Linux >=
 * 6.11: one system call per mapping) or, where it is missing, from reading
 * /proc/self/maps.  They are a snapshot: a thread that maps or protects
 * memory at the same time may change them at once after.
 *
 * Thread-safe; no lock (a descriptor opened once, kept for the process).
 */
#ifndef FH_UTIL_VMA_H
#define FH_UTIL_VMA_H

#include <stddef.h>
#include <stdint.h>

/* Protection bits of fh_vma_t.prot (the same values as PROT_*). */
#define FH_VMA_READ  0x1
#define FH_VMA_WRITE 0x2

typedef struct fh_vma {
    uintptr_t start, end;   /* [start, end), page-aligned */
    int prot;               /* FH_VMA_READ | FH_VMA_WRITE */
    int file;               /* 1: backed by a file (an inode: the program's and
                             * libraries' own pages, mapped files, shared
                             * memory); 0: anonymous private memory */
} fh_vma_t;

/* Opens, once, what later calls ask the kernel through (on Linux >= 6.11 a
 * descriptor of /proc/self/maps, kept), so that they keep working when the
 * process has run out of descriptors.  Optional, idempotent, thread-safe;
 * fh_init calls it.  (Older kernels: each call opens /proc/self/maps and
 * fails, -EMFILE, while no descriptor is free.) */
void fh_vma_prepare(void);

/* The mapping that contains addr.  0, -ENOMEM when addr is not mapped,
 * or another -errno when the kernel could not be asked. */
int fh_vma_at(uintptr_t addr, fh_vma_t *out);

/* The mapping that contains addr or, if none does, the first one above it.
 * 0, or -ENOMEM when there is none. */
int fh_vma_next(uintptr_t addr, fh_vma_t *out);

/* 1 when every byte of [addr, addr+len) is mapped with at least the
 * protections prot (FH_VMA_*); else 0 with *bad (if not NULL) the first
 * byte that is not.  len 0 is 1; a range that wraps is 0. */
int fh_vma_check(uintptr_t addr, size_t len, int prot, uintptr_t *bad);

#endif /* FH_UTIL_VMA_H */
