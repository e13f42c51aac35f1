/*
 * segment_private.h -- segment.c's objects, shared only with seg_holes.c
 * (a piece's holes live in the piece and are published with the table).
 * Nothing else includes it.
 */
#ifndef FH_SEGMENT_PRIVATE_H
#define FH_SEGMENT_PRIVATE_H

#include "internal.h"
#include "firehose/node/node.h"

typedef struct fh_segment {
    int live;
    int dying;               /* unpublished, not yet released: slot not free */
    int pending;             /* being created: only our own piece published */
    void *base;              /* our piece (NULL if size 0) */
    size_t size, mapped;
    struct fh_mr *mr;
    int shared;              /* our piece is node memory (np) */
    fh_node_piece_t np;
    struct fh_seg_piece {
        uint64_t base, size;
        fh_rkey_t rkey;
        char *local;         /* our mapping of it (node group), or NULL */
        size_t local_len;    /* bytes attached (0: ours, or none) */
        const struct fh_seg_holes *holes;   /* seg_holes.c; NULL: none */
    } *pieces;               /* [nranks] */
} fh_segment_t;

struct fh_segmap {
    struct fh_segmap *retired_next;
    uint64_t retired_at;          /* rt->seg_epoch when it was replaced */
    uint32_t *count;              /* [nranks] */
    fh_seg_range_t **ranges;      /* [nranks][count] sorted by base */
};

/* Whether rank r's piece of sg belongs in the lookup table: every piece of
 * a live segment; of one being created (pending), our own piece only, so
 * that we serve peers who finished the creation exchange before us. */
static inline bool fh_seg_published(const fh_rt_t *rt, const fh_segment_t *sg, int r)
{
    return (sg->live || (sg->pending && r == rt->rank)) && sg->pieces != NULL &&
           sg->pieces[r].size != 0;
}

/* Builds the lookup table from the segments and publishes it; the old one
 * is freed once no thread can still read it (segment.c "Reclaiming").
 * seg_lock held. */
int  fh_seg_publish(fh_rt_t *rt);
/* A piece's replaced hole list: freed like old tables, after the next
 * publish.  seg_lock held. */
void fh_seg_holes_retire(const struct fh_seg_holes *h);
/* A lock-free read of the table by a thread that may have no state (the
 * mprotect hook): between enter and leave nothing it reads is freed. */
void fh_seg_hook_enter(void);
void fh_seg_hook_leave(void);

#endif /* FH_SEGMENT_PRIVATE_H */
