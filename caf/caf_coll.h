/*
 * caf_coll.h -- what the files of the collectives share.
 *
 *   caf_coll.c       the entry points, the driver (run) and the message
 *                    protocol: binomial tree, recursive doubling, chunks
 *                    in eager AMs or granted scratch slots (any team, any
 *                    transport)
 *   caf_coll_node.c  the same collectives through shared memory, when every
 *                    image of the job is in this image's node group and the
 *                    current team is the initial team
 *   caf_coll_ops.c   the operators: sum, min, max, and calling CO_REDUCE's
 *                    OPERATION as gfortran 12 compiles it
 */
#ifndef CAF_COLL_H
#define CAF_COLL_H

#include "caf_internal.h"

enum { OP_SUM, OP_MIN, OP_MAX, OP_REDUCE, OP_BCAST };

/* One collective call, as every part of it sees it. */
typedef struct coll {
    const char *stmt;
    int op;
    int bt, kind;          /* element type; kind of the (real) parts */
    size_t esz;            /* bytes per element */
    size_t a_len;          /* characters per element (character) */
    void *(*opr)(void *, void *);
    int opr_flags;
    void *tmp;             /* CO_REDUCE: one element */
    /* team */
    const int *ranks;
    int n, me, root;
    uint64_t team, seq;
    int *stat;
    char *errmsg;
    size_t errmsg_len;
    int err, err_image;    /* why the collective was abandoned (STAT code,
                              1-based image of the current team) */
    char why[200];         /* with err == 1: the message, if not empty */
} coll_t;

/* acc[i] = acc[i] op in[i] for n elements (c->tmp holds one element for
 * CO_REDUCE).  acc and in may not overlap. */
void caf_coll_combine(const coll_t *c, void *acc, const void *in, size_t n);
/* Whether CO_REDUCE can call c->opr for c's type (checked before any
 * communication, so every image refuses alike). */
bool caf_coll_opr_supported(const coll_t *c);

/* Node path (caf_coll_node.c).  caf_coll_node_init is collective (called
 * by caf_coll_init on every image): the images agree whether every one of
 * them can load and store every other's segment, and if so take the node
 * scratch from the symmetric heap.  caf_coll_node_usable: true when c (its
 * team filled in) runs on the node path -- the same answer on every member.
 * caf_coll_node_run runs c over buf (nelem elements, contiguous; NULL for a
 * CO_BROADCAST receiver whose A has no memory: it takes part and reports
 * it) to root (0-based; every image wants the result when all is true);
 * false with c->err / c->err_image set when it was abandoned (a member
 * stopped or failed, or the images' sizes differ). */
void caf_coll_node_init(void);
/* One turn of a collective's wait loop (*spins and *since start at 0):
 * polls; yields between polls as caf_idle does, but while every image has
 * a core only after polling for 2 ms. */
void caf_coll_idle(unsigned *spins, double *since);
bool caf_coll_node_usable(const coll_t *c);
bool caf_coll_node_run(coll_t *c, char *buf, size_t nelem, int root,
                       bool all);

#endif /* CAF_COLL_H */
