/*
 * caf_coll.h -- what the files of the collectives share.
 *
 *   caf_coll.c       the entry points and the driver (run): arguments,
 *                    packing, which path and which algorithm
 *   caf_coll_node.c  the node path: through shared memory, when every image
 *                    of the job is in this image's node group and the
 *                    current team is the initial team
 *   caf_coll_tree.c  the message path's algorithms: binomial tree,
 *                    recursive doubling, reduce-scatter + allgather
 *   caf_coll_msg.c   the message path's transport: chunks in eager AMs or
 *                    granted scratch slots, matched, checked, waited for
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
/* dst[i] = x[i] op y[i] for n elements, in one pass: dst may be x or y
 * (exactly: same address), else it overlaps neither. */
void caf_coll_combine3(const coll_t *c, void *dst, const void *x, const void *y,
                       size_t n);
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
bool caf_coll_node_usable(const coll_t *c);
bool caf_coll_node_run(coll_t *c, char *buf, size_t nelem, int root,
                       bool all);

/* ------------------------------------------- message path: transport
 * (caf_coll_msg.c).  A chunk is identified by its id (phase <<
 * CAF_COLL_PHASE_SHIFT | index, caf_wire.h) within c's collective (team,
 * seq); one larger than the eager size travels into the receiver's slot
 * of `level` for the id's parity, which the receiver grants first. */
typedef struct coll_msg coll_msg_t;
/* Bytes per slot; largest eager chunk; slot levels below the top one
 * (ceil(log2 images)). */
size_t caf_coll_chunk_size(void);
size_t caf_coll_eager_size(void);
int caf_coll_levels(void);
/* Waits for chunk `chunk` of len bytes from rank src (into our slot of
 * `level` when not eager); NULL when it will not come (src stopped or
 * failed without sending it, or gave the collective up), c->err and
 * c->err_image saying why.  Messages that are not as due are dropped. */
coll_msg_t *caf_coll_recv(coll_t *c, int src, uint64_t chunk, size_t len,
                          int level);
/* A received chunk's bytes (len of them, as due); its release. */
const void *caf_coll_msg_data(const coll_msg_t *m);
void caf_coll_msg_free(coll_msg_t *m);
/* Lets rank src send chunk `chunk` (len bytes) into our slot of `level`
 * (nothing for an eager length). */
void caf_coll_grant(const coll_t *c, int src, int level, uint64_t chunk,
                    size_t len);
/* Sends a chunk to rank dst (into its slot of `level`, once granted, when
 * not eager); false after a stopped/failed member (c->err set).  A chunk
 * over the eager size may still be in flight on return: data must not
 * change until caf_coll_flush. */
bool caf_coll_send(coll_t *c, int dst, int level, uint64_t chunk,
                   const void *data, size_t len);
/* Waits until chunk `chunk` to dst, if caf_coll_send started it, is
 * written and announced (its data may then change). */
void caf_coll_sent(const coll_t *c, int dst, uint64_t chunk);
/* Waits until every chunk caf_coll_send started is written and announced
 * (also after a failure: the caller's buffers are its own again). */
void caf_coll_flush(const coll_t *c);
/* Tells the m ranks to[] (those still running), or every other member, to
 * give up c with c->err / c->err_image. */
void caf_coll_poison(const coll_t *c, const int *to, int m);
void caf_coll_poison_all(const coll_t *c);

/* ------------------------------------------ message path: algorithms
 * (caf_coll_tree.c), over c's team, on buf (nelem contiguous elements),
 * chunks of per elements (nch of them).  false with c->err set when a
 * member stopped or failed (the others were told). */
bool caf_coll_reduce_up(coll_t *c, char *buf, size_t nelem, size_t per,
                        uint64_t nch);          /* to c->root */
bool caf_coll_bcast_down(coll_t *c, char *buf, size_t nelem, size_t per,
                         uint64_t nch);         /* from c->root */
bool caf_coll_allreduce_rd(coll_t *c, char *buf, size_t nelem); /* eager */
bool caf_coll_allreduce_rsag(coll_t *c, char *buf, size_t nelem, size_t per);
/* Tells our neighbours in c's tree (rooted at c->root) to give c up. */
void caf_coll_tree_poison(const coll_t *c);

#endif /* CAF_COLL_H */
