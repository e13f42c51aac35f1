/*
 * ibv_internal.h -- private definitions of the rdma-core verbs ("ibv")
 * conduit.
 *
 * Layout
 *   ibv_conduit.c  open / close / connect / limits: device, port and GID
 *                  selection, the FH_IBV_* settings, QP state transitions
 *   ibv_path.c     one path = (thread domain + parent domain) + CQ + SRQ +
 *                  RC QPs; AM send/receive; completion polling
 *   ibv_rma.c      mr_reg / mr_dereg / put / get; the doorbell batch
 *                  (FH_POST_MORE) shared with am_send
 *
 * Connections.  Every path owns one RC QP per peer endpoint it talks to:
 *   path 0 (service):  one QP per (rank, path) of the job, conns[r*np + q];
 *   path p > 0:        one QP per rank, towards that rank's path 0, conns[r].
 * Path 0's QP towards (me, 0) is connected to itself (loopback).  All QPs of
 * a path share the path's CQ (send and receive) and its SRQ.
 *
 * Nothing here is global: every object hangs off struct fh_conduit or
 * struct fh_cpath.  After connect the conduit is read-only; a path's mutable
 * state is touched only by calls on that path, which the runtime serializes.
 */
#ifndef FH_IBV_INTERNAL_H
#define FH_IBV_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "conduits/conduit.h"

/* What a wr_id points at.  Every work request we post carries one of these
 * (unsignaled sends carry their connection's unsig_op). */
enum ibv_op_kind {
    IBV_OP_PUT = 1,
    IBV_OP_GET,
    IBV_OP_SEND,    /* signaled AM send: slot (buf != NULL) or inline */
    IBV_OP_RECV,    /* SRQ receive buffer */
    IBV_OP_UNSIG    /* unsignaled AM send (only seen in error flushes) */
};

struct ibv_conn;

struct ibv_op {
    int kind;                 /* enum ibv_op_kind */
    uint32_t reclaim;         /* send-queue entries this completion frees */
    struct ibv_conn *conn;    /* where it was posted (NULL for RECV) */
    void *op_ctx;             /* PUT/GET: the runtime's context */
    size_t len;               /* PUT/GET: bytes (for error messages) */
    char *buf;                /* SEND: slot buffer or NULL; RECV: buffer */
    struct ibv_op *next;      /* freelist / failed list link */
    struct ibv_op *bnext;     /* open doorbell batch link */
};

/* One RC QP: this path <-> (rank, rpath). */
struct ibv_conn {
    struct ibv_qp *qp;
    struct ibv_qp_ex *qpx;
    int rank, rpath;
    uint32_t sq_used;         /* WRs posted and not yet reclaimed */
    uint32_t unsig;           /* WRs posted since the last signaled one */
    int status;               /* FH_OK, or the error that broke the QP */
    unsigned long nerr;       /* error completions seen (log throttle) */
    struct ibv_op unsig_op;   /* wr_id of the unsignaled WRs */
};

/* One registration (plain PD: usable by every path's QPs). */
struct fh_mr {
    struct ibv_mr *mr;
    char *addr;
    size_t len;
};

/* One completion, copied out of the CQ so that upcalls run outside a
 * ibv_poll_cq batch and in order even when an upcall polls the same path
 * again. */
struct ibv_ev {
    uint64_t wr_id;
    uint32_t len, qp_num, vendor_err;
    int status;               /* enum ibv_wc_status */
};
#define IBV_CQ_BATCH 32
#define IBV_INLINE_MAX 256    /* largest max_inline_data we ask for */

/* The FH_IBV_* settings (ibv_config.c; read by ibv_read_env()). */
enum ibv_td_mode { IBV_TD_OFF = 0, IBV_TD_SHARED, IBV_TD_INDEPENDENT };
struct ibv_env {
    const char *device;       /* FH_IBV_DEVICE: NULL = first with an active port */
    int port;                 /* FH_IBV_PORT: 0 = first active port */
    int gid_index;            /* FH_IBV_GID_INDEX: -1 = automatic */
    int td;                   /* FH_IBV_TD: enum ibv_td_mode */
};

struct fh_cpath {
    struct fh_conduit *c;
    int index;
    unsigned rx_msgs;
    void *upcall_arg;

    /* Independence: thread domain(s) + parent domain, or the plain PD. */
    struct ibv_td *td[2];
    struct ibv_pd *ppd;       /* parent domain, NULL when not used */
    struct ibv_pd *qp_pd;     /* ppd or the conduit's PD */

    /* Completions: an extended CQ (parent domain, single-threaded) or a
     * plain one; polled with ibv_poll_cq in batches either way. */
    struct ibv_cq_ex *cqx;
    struct ibv_cq *cq;        /* the ibv_cq of cqx, or a plain CQ */
    int cqe;

    /* Receive: one SRQ, nrecv buffers of c->rbuf_stride bytes. */
    struct ibv_srq *srq;
    struct ibv_op *recvs;
    size_t nrecv;
    char *rbuf_mem;
    struct ibv_mr *rbuf_mr;

    /* RMA contexts and signaled inline sends: fixed freelist. */
    struct ibv_op *ops;
    struct ibv_op *op_free;
    size_t nops;

    /* AM send slots (messages over max_inline). */
    struct ibv_op *slots;
    struct ibv_op *slot_free;
    size_t nslots;
    char *slot_mem;
    struct ibv_mr *slot_mr;

    /* Connections (see the header comment). */
    struct ibv_conn *conns;
    size_t nconns;
    /* qp_num -> conns index + 1 (0 = empty), open addressing: a receive
     * completion names its sender by the QP it arrived on (qp_num), the
     * only sender identity we believe (docs/security.md). */
    uint32_t *qpn_tab;
    uint32_t qpn_mask;
    uint32_t sq_depth, sig_every;

    /* Open doorbell batch: ibv_wr_start done on open->qpx. */
    struct ibv_conn *open;
    struct ibv_op *batch;     /* signaled ops in the open batch (bnext) */
    unsigned batch_n;         /* WRs in the open batch */
    /* Ops whose batch was rejected: completed with an error at next poll. */
    struct ibv_op *failed;

    /* Completions fetched but not yet handled, shared by nested polls so
     * that messages of one QP are delivered in order even when on_am polls
     * this path again (ev[ev_head..ev_n)). */
    struct ibv_ev ev[IBV_CQ_BATCH];
    int ev_head, ev_n;
    /* Receive buffers to give back to the SRQ (posted as one chain). */
    struct ibv_recv_wr rwr[IBV_CQ_BATCH];
    struct ibv_sge rsge[IBV_CQ_BATCH];
    int nrepost;
};

struct fh_conduit {
    fh_conduit_config_t cfg;
    fh_conduit_upcalls_t up;
    fh_conduit_limits_t limits;
    struct ibv_env env;

    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_device_attr dattr;
    struct ibv_port_attr pattr;
    char devname[64];
    uint8_t port;
    int is_eth;
    int gid_index;            /* -1: no GRH (InfiniBand with LIDs) */
    union ibv_gid gid;

    uint32_t max_inline;
    size_t am_max_packet;
    size_t rbuf_stride;       /* am_max_packet rounded up to 64 */
    int td_unsupported;       /* provider said EOPNOTSUPP once already */

    struct fh_cpath **paths;  /* [npaths], set by path_create */
    int connected;
};

/* ibv_conduit.c */
int  ibv_err_status(enum ibv_wc_status st);    /* -> FH_ERR_PEER_DEAD/TRANSPORT */

/* ibv_path.c */
int  ibv_path_create(struct fh_conduit *c, const fh_path_attr_t *attr,
                     struct fh_cpath **out);
void ibv_path_destroy(struct fh_cpath *p);
int  ibv_am_send(struct fh_cpath *p, int rank, int rpath, const void *hdr,
                 size_t hdr_len, const void *payload, size_t len);
int  ibv_poll(struct fh_cpath *p, int max);

/* ibv_rma.c */
int  ibv_mr_reg(struct fh_conduit *c, void *addr, size_t len,
                unsigned access, struct fh_mr **mr, fh_rkey_t *rkey);
int  ibv_mr_dereg(struct fh_conduit *c, struct fh_mr *mr);
int  ibv_put(struct fh_cpath *p, int rank, int rpath, const void *src,
             size_t len, struct fh_mr *lmr, uint64_t raddr,
             const fh_rkey_t *rkey, void *op_ctx, unsigned flags);
int  ibv_get(struct fh_cpath *p, int rank, int rpath, void *dst, size_t len,
             struct fh_mr *lmr, uint64_t raddr, const fh_rkey_t *rkey,
             void *op_ctx, unsigned flags);
/* The doorbell batch. */
int  ibv_conn_for(struct fh_cpath *p, int rank, int rpath, const char *what,
                  struct ibv_conn **out);
void ibv_batch_open(struct fh_cpath *p, struct ibv_conn *k);
int  ibv_batch_close(struct fh_cpath *p);   /* rings the doorbell */
void ibv_batch_add(struct fh_cpath *p, struct ibv_conn *k, struct ibv_op *op,
                   int signaled);

#endif /* FH_IBV_INTERNAL_H */
