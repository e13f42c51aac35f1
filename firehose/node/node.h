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
 *
 * May include: this folder, firehose/util/, include/firehose.h and system
 * headers.  Thread-safe: every call works on its own arguments only.
 */
#ifndef FH_NODE_H
#define FH_NODE_H

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

#endif /* FH_NODE_H */
