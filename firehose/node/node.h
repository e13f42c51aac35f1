/*
 * node.h -- memory the ranks of one node group share (layer L2).
 *
 * A segment piece of a rank whose node group has other members is created
 * here instead of as anonymous memory, so that the group's other ranks can
 * map it and reach it with loads and stores (firehose/segment.c attaches
 * them, firehose/rma.c and atomic.c use the mappings).
 *
 * The one implementation, fh_node_memfd (node_memfd.c):
 *   create   memfd_create(MFD_CLOEXEC), with MFD_HUGETLB first when the
 *            piece is a multiple of 2 MiB and the system has hugepages
 *            (falling back silently), sized with ftruncate (sparse: pages
 *            exist once touched), mapped MAP_SHARED at an address aligned
 *            to `align`.  The descriptor stays open until destroy.
 *   attach   a peer opens /proc/<pid>/fd/<fd> of the owner and maps it.
 *            The kernel allows that open only with PTRACE_MODE_READ over
 *            the owner (same user; Yama's ptrace_scope restricts ATTACH,
 *            not READ), so another user cannot map a piece, and there is
 *            never a name in /dev/shm or anywhere else: whatever way a rank
 *            or the launcher dies, the memory goes away with the last
 *            mapping and nothing is left behind.
 * A failed attach (hidepid, a kernel without memfd, another pid namespace)
 * is not an error: that peer is then reached through the network.
 * Cross-memory attach (below) reaches the rest of a member's memory.
 *
 * May include: this folder, firehose/util/, include/firehose.h and system
 * headers.  Thread-safe: every call works on its own arguments only.
 */
#ifndef FH_NODE_H
#define FH_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One piece of ours. */
typedef struct fh_node_piece {
    void *base;          /* our mapping, aligned */
    size_t size;         /* bytes mapped (the requested size, rounded up) */
    int fd;              /* the descriptor peers attach through; -1 none */
    int huge;            /* backed by hugepages */
} fh_node_piece_t;

typedef struct fh_node_ops {
    const char *name;
    /* Maps size bytes (> 0) at an address aligned to align (a power of two
     * >= the page size).  FH_OK, or FH_ERR_NO_MEMORY / FH_ERR_NOT_SUPPORTED
     * with fh_set_error; nothing left mapped or open on failure. */
    int  (*create)(size_t size, size_t align, fh_node_piece_t *out);
    /* Unmaps and closes a created piece (peers' mappings stay valid). */
    void (*destroy)(fh_node_piece_t *p);
    /* Maps size bytes of the piece that process pid created with fd.
     * FH_OK and *out, or FH_ERR_* with the reason in fh_last_error(). */
    int  (*attach)(int64_t pid, int fd, size_t size, void **out);
    void (*detach)(void *addr, size_t size);
} fh_node_ops_t;

extern const fh_node_ops_t fh_node_memfd;

/* Cross-memory attach (node_cma.c): one kernel copy between our memory
 * and another process's, for memory the group does not share (outside
 * segments, FH_SEGMENT=everything).  The kernel allows it for the same
 * user only, and under Yama's ptrace_scope 1 only from a descendant of
 * the process the target declared (fh_node_cma_allow); scope 2 and 3
 * refuse it.  Every call is synchronous: the bytes moved when it returns.
 * Errors (fh_set_error): FH_ERR_NOT_SUPPORTED (refused), FH_ERR_PEER_DEAD
 * (no such process), FH_ERR_OUT_OF_SEGMENT (an address not mapped: the
 * bytes before the first unmapped page may have moved), FH_ERR_TRANSPORT.
 */
/* Yama's ptrace_scope (0..3), or -1 when the kernel has no Yama. */
int fh_node_cma_yama(void);
/* prctl(PR_SET_PTRACER, ancestor): the descendants of process `ancestor`
 * may attach to us.  FH_OK or FH_ERR_NOT_SUPPORTED / FH_ERR_INVALID. */
int fh_node_cma_allow(int64_t ancestor);
/* Copies n bytes: put writes local's to remote in process pid, get reads
 * them into local. */
int fh_node_cma_copy(int64_t pid, bool is_put, void *local, uint64_t remote, size_t n);
/* count blocks of blk bytes, local and remote each advancing by its
 * stride, a batch of blocks per system call. */
int fh_node_cma_strided(int64_t pid, bool is_put, char *local, ptrdiff_t lstride,
                        uint64_t remote, ptrdiff_t rstride, size_t blk, size_t count);

#endif /* FH_NODE_H */
