/*
 * ibv_internal.h -- private definitions of the rdma-core verbs ("ibv")
 * conduit.
 *
 * Layout
 *   ibv_conduit.c  open / close / connect / limits: device, port and GID
 *                  selection, the FH_IBV_* settings, QP state transitions
 *   ibv_path.c     one path = (thread domain + parent domain) + CQ + SRQ +
 *                  RC QPs; AM send/receive; completion handling
 *   ibv_cm.c       connections on first use (UD request/reply, checks)
 *   ibv_cost.c     resources per process for a job shape (no verbs)
 *   ibv_cq.c       the path's CQ and its polling API (FH_IBV_POLL)
 *   ibv_rma.c      mr_reg / mr_dereg / put / get
 *   ibv_post.c     the doorbell batch (FH_POST_MORE) shared by put, get and
 *                  am_send, over either posting API (FH_IBV_POST)
 *   ibv_error.c    error completions, the async event queue, failing the
 *                  operations of a broken connection, path or device
 *   ibv_addr.c     address vector and read/atomic depths (no device needed)
 *
 * Connections.  Every path has one slot per peer endpoint it may talk to:
 *   path 0 (service):  one per (rank, path) of the job, conns[r*np + q];
 *   path p > 0:        one per rank, towards that rank's path 0, conns[r].
 * A slot gets its RC QP on first use (ibv_cm.c: the request/reply exchange
 * over each path's UD QP); path 0's QP towards (me, 0) is connected to
 * itself (loopback).  All QPs of a path share the path's CQ (send and
 * receive) and its SRQ, which grows with the connections (ibv_path.c).
 *
 * Nothing here is global: every object hangs off struct fh_conduit or
 * struct fh_cpath.  After connect the conduit is read-only; a path's mutable
 * state is touched only by calls on that path, which the runtime serializes.
 */
#ifndef FH_IBV_INTERNAL_H
#define FH_IBV_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "conduits/conduit.h"
#include "ibv_cm_decode.h"
#include "ibv_config.h"

/* What a wr_id points at.  Every work request we post carries one of these
 * (unsignaled sends carry their connection's unsig_op). */
enum ibv_op_kind {
    IBV_OP_PUT = 1,
    IBV_OP_GET,
    IBV_OP_SEND,    /* signaled AM send: slot (buf != NULL) or inline */
    IBV_OP_RECV,    /* SRQ receive buffer */
    IBV_OP_UNSIG,   /* unsignaled AM send (only seen in error flushes) */
    IBV_OP_CMRECV,  /* UD receive buffer of the connection exchange */
    IBV_OP_CMSEND   /* UD send of the connection exchange */
};

/* Connection state of a slot (ibv_cm.c). */
enum ibv_conn_state {
    IBV_CONN_NONE = 0,        /* no QP yet */
    IBV_CONN_WAIT,            /* our request sent, QP in INIT */
    IBV_CONN_UP,              /* QP in RTS */
    IBV_CONN_FAILED           /* k->status says why */
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
    uint8_t live;             /* posted, its upcall not made yet */
    uint8_t zombie;           /* failed by us (ibv_error.c) while posted:
                                 its completion only frees it */
    uint32_t lkey;            /* RECV, CMRECV: the buffer's registration */
};

/* One RC QP: this path <-> (rank, rpath). */
struct ibv_conn {
    struct fh_cpath *owner;   /* the path it belongs to */
    struct ibv_qp *qp;
    struct ibv_qp_ex *qpx;    /* FH_IBV_POST ex only */
    int rank, rpath;
    int state;                /* enum ibv_conn_state (owner path only) */
    uint32_t rqpn;            /* the peer's QP, once known */
    double next_try, backoff, deadline;   /* WAIT: request resends */
    uint32_t sq_used;         /* WRs posted and not yet reclaimed */
    uint32_t unsig;           /* WRs posted since the last signaled one */
    int status;               /* FH_OK, or the error that broke the QP */
    atomic_int async_err;     /* set by whoever drains the async events
                                 (ibv_error.c), applied by the owner path */
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
    uint32_t src_qp;          /* UD receives: the sender's QP (by the HCA) */
    uint16_t slid;            /* UD receives: the sender's LID */
    uint8_t grh;              /* UD receives: a GRH precedes the data */
};
#define IBV_CQ_BATCH 32
#define IBV_INLINE_MAX 256    /* largest max_inline_data we ask for */
#define IBV_BATCH_MAX 32      /* work requests per doorbell */

/* FH_IBV_POLL: how completions are polled (ibv_cq.c). */
enum ibv_poll_mode { IBV_POLL_AUTO = 0, IBV_POLL_EX, IBV_POLL_CLASSIC };

/* FH_IBV_POST: how work requests are posted (ibv_post.c). */
enum ibv_post_mode { IBV_POST_AUTO = 0, IBV_POST_EX, IBV_POST_CLASSIC };

/* One work request, whichever posting API carries it. */
struct ibv_wrdesc {
    enum ibv_wr_opcode opcode;     /* IBV_WR_SEND, _RDMA_WRITE, _RDMA_READ */
    struct ibv_op *op;             /* signaled: its op; NULL: unsignaled */
    int inl;                       /* data copied into the WQE (inl_data) */
    const void *inl_data;
    uint32_t lkey, len, rkey;
    uint64_t addr, raddr;
};

/* FH_IBV_FORK (ibv_rma.c ibv_fork_setup). */
enum ibv_fork_mode { IBV_FORKMODE_AUTO = 0, IBV_FORKMODE_ON, IBV_FORKMODE_OFF };

/* The FH_IBV_* settings (ibv_config.c; read by ibv_read_env()). */
enum ibv_td_mode { IBV_TD_OFF = 0, IBV_TD_SHARED, IBV_TD_INDEPENDENT };
struct ibv_env {
    const char *device;       /* FH_IBV_DEVICE (this rank's entry of a list):
                                 NULL = first with an active port */
    char device_buf[IBV_DEVNAME_MAX];   /* that entry, when a list */
    int port;                 /* FH_IBV_PORT: 0 = first active port */
    int gid_index;            /* FH_IBV_GID_INDEX: -1 = automatic */
    int td;                   /* FH_IBV_TD: enum ibv_td_mode */
    int post;                 /* FH_IBV_POST: enum ibv_post_mode */
    int poll;                 /* FH_IBV_POLL: enum ibv_poll_mode */
    uint8_t sl, tclass;       /* FH_IBV_SL, FH_IBV_TCLASS */
    uint16_t pkey_index;      /* FH_IBV_PKEY_INDEX */
    double connect_timeout;   /* FH_IBV_CONNECT_TIMEOUT, s */
    int fork;                 /* FH_IBV_FORK: enum ibv_fork_mode */
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

    /* Completions (ibv_cq.c): an extended CQ (single-threaded, in the
     * parent domain if any) or a plain one; polled in batches with
     * ibv_start_poll/next/end (poll_ex) or ibv_poll_cq. */
    struct ibv_cq_ex *cqx;
    struct ibv_cq *cq;        /* the ibv_cq of cqx, or a plain CQ */
    int cqe;                  /* the entries we asked for (the device
                                 may have rounded up) */
    int cqe_full;             /* what every possible peer needs */
    int cq_grows;             /* ibv_resize_cq works: cqe follows nqps and
                                 nrecv (ibv_cq_fit); else cqe = cqe_full */
    size_t nqps;              /* RC QPs made on the path (failed ones too) */
    int poll_ex;
    /* Sleeping (ibv_wait_fds): the CQ's completion channel (NULL: the
     * device gave none; the path cannot sleep) and whether the CQ is
     * armed (1: ibv_req_notify_cq done, its event not read yet; -1: the
     * device refused to arm it, the path never sleeps). */
    struct ibv_comp_channel *chan;
    int armed;

    /* Receive: one SRQ with room for nrecv_max buffers of c->rbuf_stride
     * bytes, of which nrecv are allocated and posted, in chunks grown as
     * connections come (ibv_rx_grow). */
    struct ibv_srq *srq;
    struct ibv_rx_chunk *rx_chunks;
    size_t nrecv, nrecv_max;
    unsigned rx_per_src;
    size_t nconnected;        /* slots UP (or WAIT): they may send to us */

    /* Connection exchange (ibv_cm.c): a UD QP on the path's CQ, cm_nrx
     * receive buffers and IBV_CM_SQ send buffers in cm_mem. */
    struct ibv_qp *udqp;
    struct ibv_op *cm_rx;
    struct ibv_op cm_sop;
    unsigned cm_nrx, cm_sq_used, cm_next;
    char *cm_mem;
    struct ibv_mr *cm_mr;

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

    /* Open doorbell batch towards one connection: ibv_wr_start done on
     * open->qpx (ex), or WRs collected in swr (classic). */
    struct ibv_conn *open;
    struct ibv_op *bop[IBV_BATCH_MAX];   /* WR i's signaled op, or NULL */
    unsigned batch_n;         /* WRs in the open batch */
    struct ibv_send_wr swr[IBV_BATCH_MAX];   /* classic only */
    struct ibv_sge ssge[IBV_BATCH_MAX];
    char *inl_buf;            /* classic: IBV_BATCH_MAX x IBV_INLINE_MAX
                                 copies of inline data until the post */
    /* Ops whose batch was rejected: completed with an error at next poll. */
    struct ibv_op *failed;

    /* Trouble (ibv_error.c): conn_err_pending counts async QP errors
     * flagged on conns of this path and not yet applied; path_err is a CQ
     * error (set by the drainer); err is what this path's calls now return
     * (FH_OK while healthy); npoll paces the async-event drain. */
    atomic_uint conn_err_pending;
    atomic_int path_err;
    int err;
    unsigned npoll;

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
    int post_mode;            /* IBV_POST_EX or IBV_POST_CLASSIC */
    int cq_ex_broken;         /* a new extended CQ was not empty (ibv_cq.c) */
    int cq_fixed;             /* ibv_resize_cq failed once (said once) */
    struct {                  /* the destroyed paths' CQs (close's line) */
        long cqe, full;
        size_t qps;
        int paths;
    } cq_sum;
    uint8_t max_rd_atom;      /* responder resources we offer (<= 16) */
    uint8_t max_init_rd_atom; /* reads/atomics we may have outstanding */

    /* Async events (ibv_error.c): drained by whichever path's poll takes
     * async_busy; dev_err is set on a device fatal error. */
    atomic_flag async_busy;
    atomic_int dev_err;

    struct fh_cpath **paths;  /* [npaths], set by path_create */
    int connected;

    /* From connect's allgather (ibv_cm.c): every rank's record and the
     * UD QP numbers of its paths (peer_ud[r * npaths + q]); address
     * handles made on first use under cm_lock. */
    struct ibv_wire_hdr *peer_hdr;
    uint32_t *peer_ud;
    struct ibv_ah **ah;
    pthread_mutex_t cm_lock;
    atomic_uint *peer_qps;    /* RC QPs connected per peer rank (stats) */
    atomic_flag av_said;      /* the first connection's address was logged */
    uint32_t qkey;            /* ours: a random one, sent to the job */
    double cm_timeout;        /* s a connection request may wait */
};

/* ibv_conduit.c */
int  ibv_err_status(enum ibv_wc_status st);    /* -> FH_ERR_PEER_DEAD/TRANSPORT */

/* The connection record of the allgather: ibv_cm_decode.h. */

/* One chunk of SRQ receive buffers (ibv_path.c ibv_rx_grow). */
struct ibv_rx_chunk {
    struct ibv_rx_chunk *next;
    struct ibv_mr *mr;
    char *mem;
    struct ibv_op *ops;
    size_t n;
};

/* ibv_cm.c: connections on first use. */
#define IBV_CM_SQ 16              /* UD sends in flight per path */
int  ibv_cm_path_init(struct fh_cpath *p);     /* UD QP + buffers */
void ibv_cm_path_fini(struct fh_cpath *p);
/* Slot k of path p is not UP: starts or advances its connection.  FH_OK
 * once UP, FH_ERR_AGAIN while waiting for the peer (poll p, call again),
 * else the error that failed it (logged, naming the peer). */
int  ibv_cm_advance(struct fh_cpath *p, struct ibv_conn *k);
/* A completion of the exchange (op->kind CMRECV or CMSEND) on path p. */
void ibv_cm_event(struct fh_cpath *p, const struct ibv_ev *v,
                  struct ibv_op *op);
/* Counts of the job's slots that are UP, for the exit line. */
void ibv_cm_report(struct fh_conduit *c);

/* ibv_addr.c: what connecting needs, computed without a device. */
struct ibv_peer_addr {
    uint16_t lid;             /* the peer's LID (0 on RoCE) */
    uint8_t gid[16];          /* the peer's GID */
    int sgid_index;           /* our GID index for a GRH, -1: no GRH */
    uint8_t port, sl, tclass;
};
/* Fills the address vector of an RC QP's RTR transition: DLID always (the
 * subnet routes by it on InfiniBand, RoCE ignores it), a GRH (dgid, sgid
 * index, traffic class, hop limit 64) iff sgid_index >= 0. */
void ibv_fill_av(struct ibv_ah_attr *ah, const struct ibv_peer_addr *a);
/* Read/atomic depths agreed with a peer: we may have at most
 * min(our initiator depth, its responder resources) reads outstanding
 * (*init_depth, max_rd_atomic) and accept min(our responder resources, its
 * initiator depth) (*resp_depth, max_dest_rd_atomic); both clamped to
 * 1..16 (a peer's values are untrusted bytes). */
void ibv_rd_depths(unsigned my_resp, unsigned my_init, unsigned peer_resp,
                   unsigned peer_init, uint8_t *resp_depth,
                   uint8_t *init_depth);
/* On InfiniBand without FH_IBV_GID_INDEX: a GRH is needed iff the peer's
 * GID is in another subnet (its 64-bit subnet prefix differs from ours). */
int  ibv_needs_grh(const uint8_t my_gid[16], const uint8_t peer_gid[16]);
/* Does this errno of ibv_alloc_td / ibv_alloc_parent_domain mean the
 * device has no thread domains (1: stop trying), or only that it is out of
 * resources right now (0: this path goes without, the next one tries)? */
int  ibv_td_error_permanent(int err);

/* ibv_cq.c */
/* Creates the path's channel and CQ of p->cqe entries; if ibv_resize_cq
 * fails on it (unsupported), makes it p->cqe_full instead.  Sets cq, cqx,
 * poll_ex, chan, cq_grows. */
int  ibv_path_cq(struct fh_cpath *p);
/* CQ entries the path needs with nrecv receive buffers posted and nqps RC
 * QPs (each may flush a signal interval of work requests on error). */
size_t ibv_cq_need(const struct fh_cpath *p, size_t nrecv, size_t nqps);
/* Grows the CQ (ibv_resize_cq) before more receives are posted or another
 * QP is made, so that it holds ibv_cq_need(p, nrecv, nqps).  FH_OK, or the
 * error (logged) that leaves the caller unable to add them. */
int  ibv_cq_fit(struct fh_cpath *p, size_t nrecv, size_t nqps);
int  ibv_fetch(struct fh_cpath *p, int want);   /* completions -> p->ev */
/* conduit.h wait_fds: the path's completion-channel fd, the CQ armed; -1
 * when completions are already waiting (fetched into p->ev). */
int  ibv_wait_fds(struct fh_cpath *p, int *fds, int max);
void ibv_path_cq_destroy(struct fh_cpath *p);   /* CQ, then its channel */

/* ibv_device.c */
int  ibv_pick_device(struct fh_conduit *c);
int  ibv_pick_gid(struct fh_conduit *c);
int  ibv_check_pkey(struct fh_conduit *c);
int  ibv_probe_qp(struct fh_conduit *c);    /* sets post_mode, max_inline */

/* ibv_error.c */
#define IBV_ASYNC_EVERY 64    /* polls of a path between async-event drains */
void ibv_finish(struct fh_cpath *p, struct ibv_op *op, int status);
void ibv_handle_error(struct fh_cpath *p, const struct ibv_ev *v);
int  ibv_deliver_failed(struct fh_cpath *p);
/* Drains the async event queue (non-blocking; one drainer at a time) and
 * applies what concerns path p: returns the number of operations it failed
 * (upcalls made), and leaves p->err set if the path or device is broken. */
int  ibv_check_trouble(struct fh_cpath *p, int drain);
int  ibv_async_init(struct fh_conduit *c);      /* async fd non-blocking */

/* ibv_path.c */
int  ibv_path_create(struct fh_conduit *c, const fh_path_attr_t *attr,
                     struct fh_cpath **out);
void ibv_path_destroy(struct fh_cpath *p);
int  ibv_am_send(struct fh_cpath *p, int rank, int rpath, const void *hdr,
                 size_t hdr_len, const void *payload, size_t len);
int  ibv_poll(struct fh_cpath *p, int max);
struct ibv_conn *ibv_conn_by_qpn(struct fh_cpath *p, uint32_t qpn);
void ibv_repost(struct fh_cpath *p, struct ibv_op *r);
/* Makes path p's SRQ hold buffers for its connections (rx_per_src each,
 * plus slack, at most nrecv_max); called when a slot gets its QP. */
int  ibv_rx_grow(struct fh_cpath *p);
void ibv_qpn_insert(struct fh_cpath *p, struct ibv_conn *k);
int  ibv_conn_create(struct fh_cpath *p, struct ibv_conn *k);

/* ibv_rma.c */
/* FH_IBV_FORK: before the first registration of the process, makes fork()
 * safe for registered memory as rdma-core recommends (ibv_fork_init where
 * the kernel does not copy pinned pages for a child) and says what was
 * done (FH_VERBOSE=1).  FH_OK, or FH_ERR_TRANSPORT when FH_IBV_FORK=on and
 * ibv_fork_init failed (error set). */
int  ibv_fork_setup(const struct ibv_env *e);
int  ibv_mr_reg(struct fh_conduit *c, void *addr, size_t len,
                unsigned access, struct fh_mr **mr, fh_rkey_t *rkey);
int  ibv_mr_dereg(struct fh_conduit *c, struct fh_mr *mr);
int  ibv_put(struct fh_cpath *p, int rank, int rpath, const void *src,
             size_t len, struct fh_mr *lmr, uint64_t raddr,
             const fh_rkey_t *rkey, void *op_ctx, unsigned flags);
int  ibv_get(struct fh_cpath *p, int rank, int rpath, void *dst, size_t len,
             struct fh_mr *lmr, uint64_t raddr, const fh_rkey_t *rkey,
             void *op_ctx, unsigned flags);
int  ibv_conn_for(struct fh_cpath *p, int rank, int rpath, const char *what,
                  struct ibv_conn **out);

/* ibv_post.c: the doorbell batch.  ibv_post_wr adds one work request to
 * the open batch towards k (closing another connection's batch first);
 * the caller has checked that k's send queue and the batch have room. */
void ibv_post_wr(struct fh_cpath *p, struct ibv_conn *k,
                 const struct ibv_wrdesc *d);
int  ibv_batch_close(struct fh_cpath *p);   /* rings the doorbell */
void ibv_batch_abort(struct fh_cpath *p);   /* path destroy: drops it */

#endif /* FH_IBV_INTERNAL_H */
