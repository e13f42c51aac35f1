/*
 * ofi_internal.h -- private definitions of the libfabric ("ofi") conduit.
 *
 * Layout
 *   ofi_conduit.c  open / close / connect / limits (fabric, domain, AV)
 *   ofi_path.c     one path = a CQ with its endpoints (RDM: one endpoint
 *                  and multi-recv buffers; MSG: the path's connections),
 *                  AM send pool
 *   ofi_poll.c     a path's poll: completions, received AMs, errors, the
 *                  RMA timeout's scan
 *   ofi_cm.c       MSG mode: the design, connection objects, listener
 *   ofi_cm_handshake.c  MSG mode: the listener's handshake, CM events
 *   ofi_cm_connect.c    MSG mode: dialling, start-up, lazy thread paths
 *   ofi_cm_redial.c     MSG mode: a lost pair connected again
 *   ofi_rma_probe.c     MSG mode: probing a stalled RMA's target
 *   ofi_auth.c     MSG mode: pair secrets and the handshake's messages
 *   ofi_rx.c       the checks and reordering of received AMs (pure logic,
 *                  fuzzed)
 *   ofi_rma.c      put / get / mr_reg / mr_dereg
 *   ofi_shm.c      the shm provider's files in /dev/shm: names, locks,
 *                  reclaiming what ended ranks left
 *   ofi_dl.c       libfabric itself, loaded on first use (ofi_dl.h)
 *
 * Nothing here is global: every object hangs off struct fh_conduit or
 * struct fh_cpath.  Paths never share a lock of ours; the runtime serializes
 * the calls on one path.
 */
#ifndef FH_OFI_INTERNAL_H
#define FH_OFI_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ofi_dl.h"   /* before libfabric's headers: renames its functions */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "conduits/conduit.h"
#include "firehose/util/log.h"
#include "ofi_auth.h"
#include "ofi_rx.h"

/* What an fi_context points at.  Every context we hand to libfabric starts
 * with a struct fi_context2 (scratch space for providers that ask for
 * FI_CONTEXT / FI_CONTEXT2), so op_context of a completion is always one of
 * these. */
enum ofi_op_kind {
    OFI_OP_PUT = 1,
    OFI_OP_GET,
    OFI_OP_SEND,   /* AM send slot */
    OFI_OP_RECV,   /* multi-recv buffer */
    OFI_OP_LOST    /* an RMA given up on (FH_OFI_RMA_TIMEOUT): its record is
                      never reused, a late completion of it is ignored */
};

struct ofi_op {
    struct fi_context2 fctx;   /* must be first */
    int kind;                  /* enum ofi_op_kind */
    int rank;                  /* peer (for error messages) */
    int rpath;                 /* peer path */
    void *op_ctx;              /* runtime's context (RMA) */
    char *buf;                 /* SEND: slot buffer, RECV: receive buffer */
    size_t buf_len;            /* RECV: buffer size */
    int busy;                  /* RECV: upcalls running on this buffer */
    int repost;                /* RECV: released by the provider, repost */
    int single;                /* RECV: the drain receive (one message,
                                  fi_recv; ofi_path.c, "Drain") */
    struct ofi_conn *conn;     /* MSG mode: RECV: the connection it is posted
                                  on (its sender); SEND: the handshake proof
                                  of this connection; PUT/GET: the one it
                                  was posted on */
    uint64_t raddr;            /* PUT/GET: the remote address (messages) */
    size_t len;                /* PUT/GET: bytes */
    unsigned age;              /* PUT/GET: expiry scans it was seen live in */
    unsigned pstate;           /* PUT/GET past the timeout: probe state
                                  (ofi_rma_probe.c), 0 before */
    uint32_t pneed;            /* ... the first probe answer that counts */
    uint64_t ans1;             /* ... the answer the grace started from */
    unsigned long done1;       /* ... and its connection's rma_done then */
    double t1;                 /* ... and when it was seen */
    int live;                  /* PUT/GET: posted, not completed */
    struct ofi_op *next;       /* freelist link */
};

/* One registration.  With FI_MR_ENDPOINT a registration is bound to a single
 * endpoint, so we keep one fid_mr per path (mr[i] bound to path i); remote
 * access goes to the service path, so the remote key is mr[0]'s.  Otherwise
 * nmr == 1 and mr[0] serves every path. */
struct fh_mr {
    void *addr;
    size_t len;
    int nmr;
    struct fid_mr **mr;
    void **desc;
};

/* MSG mode: one connection (ofi_cm.c).  state is written by path 0's poll
 * (events) and read by the path that owns the connection. */
enum ofi_conn_state {
    OFI_CONN_SETUP = 0,        /* connecting, or accepted and owing its proof */
    OFI_CONN_UP,               /* authenticated: its messages are delivered */
    OFI_CONN_DOWN,             /* shut down by the peer, or failed (path 0's
                                  events): sends fail; its path closes it */
    OFI_CONN_DEAD              /* closed by us: refused, failed or unproven */
};

struct ofi_conn {
    struct fh_cpath *p;        /* the path whose CQ it completes on */
    struct fid_ep *ep;
    uint32_t src;              /* peer rank * npaths + path (proven when UP) */
    _Atomic int state;         /* enum ofi_conn_state */
    int initiator;             /* we connected (else we accepted) */
    int pending;               /* accepted, proof not yet checked */
    int proven;                /* has been UP: src is proven, whatever the
                                  state now (set before UP is stored, or
                                  by its path after its own move to UP) */
    int proof_sent;            /* initiator: our proof's send completed */
    unsigned tries;            /* initiator: requests refused so far */
    double retry_at;           /* initiator refused during start-up: when to
                                  ask again (ep == NULL until then) */
    double deadline;           /* pending: proof due (ofi_now) */
    struct ofi_cm_req req;     /* the handshake, for its MACs */
    struct ofi_cm_acc acc;
    struct ofi_op *rbufs;      /* receive records, nrbufs */
    size_t nrbufs;
    char *rmem;                /* their buffers */
    struct fh_mr *rmr;
    struct ofi_op *retired;    /* the proof's receive record */
    struct ofi_conn *next;     /* fh_conduit.conns */
    /* Reconnection after start-up (ofi_cm_redial.c).  An initiator's lost
     * connection stays in its path's conn[] (sends wait, FH_ERR_AGAIN)
     * while its path dials a successor; path 0's event poll checks the
     * acceptor's answer and sets `ready`; the path itself then sends the
     * proof and puts the successor in conn[] (no path touches another's
     * sends, receives or slots). */
    int redial;                /* made again after start-up: its events go
                                  to ofi_cm_redial.c's rules */
    _Atomic int ready;         /* redial: accepted, the acceptor checked */
    _Atomic int announced;     /* redial: path 0 sent its OFI_AMH_REDIAL */
    struct ofi_conn *succ;     /* lost: the successor being made (path's) */
    double lost_at;            /* lost: when (ofi_now), 0 while up */
    unsigned long rma_done;    /* RMAs completed on it (its path's count:
                                  progress, for ofi_rma_probe.c) */
    int gave_up;               /* lost: not made again in OFI_CM_REDIAL_WAIT */
};

struct fh_cpath {
    struct fh_conduit *c;
    int index;
    unsigned rx_msgs;
    void *upcall_arg;

    struct fid_ep *ep;         /* RDM mode; NULL in MSG mode */
    /* The shm provider: the endpoint's name (its file in /dev/shm) and our
     * shared lock on that file, -1 without (ofi_shm.c). */
    char shm_name[64];
    int shm_fd;
    struct fid_cq *cq;
    int cq_fd;                 /* the CQ's wait fd, -1 when it has none */
    struct fid_wait *ws;       /* the CQ's wait set when the conduit resets
                                  waits itself (c->reset_waits): path 0's is
                                  c->ws, the others their own */
    /* MSG mode: the connection to send on to each (rank, path), NULL where
     * this path does not talk; rx_per_conn buffers of rstride bytes each. */
    struct ofi_conn **conn;
    unsigned rx_per_conn;
    size_t rstride;
    /* MSG, a thread path made after connect: its connections are being
     * made (ofi_cm_path_connect), until connect_by. */
    int connecting;
    double connect_by;
    /* MSG: connections of this path are being made again (ofi_cm_redial.c):
     * lost counts the lost initiators' connections not yet replaced or
     * given up; cm_work is set by path 0's event poll when one of them
     * needs this path (lost, or its successor accepted). */
    unsigned lost;
    _Atomic int cm_work;
    double next_redial;

    /* RMA op contexts: fixed freelist, no malloc on the fast path. */
    struct ofi_op *ops;
    struct ofi_op *op_free;
    size_t nops;
    size_t rma_live;           /* MSG: RMAs posted and not completed */
    unsigned scan_tick;        /* polls since the last expiry check */
    uint64_t npolls;           /* path 0: polls so far (probe answers) */
    double next_scan;          /* ofi_now() of the next expiry scan */

    /* AM send slots: nslots buffers of am_max_packet bytes, registered. */
    struct ofi_op *slots;
    struct ofi_op *slot_free;
    size_t nslots;
    char *slot_mem;
    struct fh_mr *slot_mr;

    /* Receive: nrbufs multi-recv buffers. */
    struct ofi_op *rbufs;
    size_t nrbufs;
    size_t rbuf_size;
    char *rbuf_mem;
    struct fh_mr *rbuf_mr;
    int repost_pending;        /* a repost failed with -FI_EAGAIN */
    /* RDM: a one-packet receive posted while a multi-recv buffer cannot
     * be (ofi_path.c, "Drain"); drain.buf follows the rbufs in rbuf_mem. */
    struct ofi_op drain;
    unsigned long ndrained;    /* messages taken by it (tests, logs) */
    unsigned long ctxless_errors;  /* error completions without context */

    /* Aligned copies for messages a provider packed at an odd offset, one
     * per upcall nesting depth (on_am may send, and a send that finds no
     * slot makes the runtime poll this path again from inside on_am). */
#define OFI_BOUNCE_DEPTH 4
    char *bounce[OFI_BOUNCE_DEPTH];
    int depth;

    /* AM ordering: next sequence number to send to each (rank, path),
     * indexed rank * npaths + path; what we believe of received messages
     * (ofi_rx.h). */
    uint32_t *tx_seq;
    struct ofi_rx rx;

    /* Flat copy of the conduit's address table and tokens (read-only after
     * connect). */
    const fi_addr_t *addrs;
    const uint64_t *tokens;
};

struct fh_conduit {
    fh_conduit_config_t cfg;
    fh_conduit_upcalls_t up;
    fh_conduit_limits_t limits;

    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;

    int msg;               /* MSG mode (ofi_cm.c), else RDM */
    int prov_listed;       /* FH_OFI_PROVIDER was a list: ranks compare
                              what it gave (ofi_agree_provider) */
    int reset_waits;       /* the provider's fi_trywait resets nothing: the
                              EQ and CQs wait on wait sets that
                              ofi_wait_fds resets with fi_wait (ofi_path.c) */
    struct fid_wait *ws;   /* reset_waits: the EQ's and path 0's wait set */
    double rma_timeout;    /* FH_OFI_RMA_TIMEOUT (MSG mode), s; 0: never */
    struct fid_eq *eq;     /* MSG: connection events */
    int eq_fd;             /* its wait fd, -1 when it has none */
    struct fid_pep *pep;   /* MSG: our listener */
    size_t lname_len;      /* MSG: bytes of a listener name */
    char *peer_names;      /* MSG: [rank] listener names, during connect */
    unsigned char *accepted;   /* MSG: [rank * npaths + path] proven */
    unsigned naccepted, npending;  /* path 0's */
    atomic_uint ndead;     /* closed connections (any path closes its own) */
    int nthread_eager;         /* MSG: thread paths connected by connect()
                                  (the same on every rank), 1..nthread_eager */
    unsigned long cm_refused;  /* connection requests refused */
    double next_eq;        /* MSG: next event-queue read (ofi_now) */
    _Atomic(struct ofi_conn *) conns;  /* MSG: every connection, any state
                                          (pushed lock-free, ofi_cm.c) */
    /* MSG, after start-up (ofi_cm_redial.c): [rank * npaths + path] the
     * successor our thread path `path` wants announced to rank (set by
     * that path, taken by path 0's poll); and the requests peers announced
     * to us, [rank * npaths + path] (path 0's), usable once until when. */
    _Atomic(struct ofi_conn *) *ann;
    /* MSG, after start-up, [rank]: the service paths' connection with the
     * rank was lost (never made again, ofi_cm_lost): no announcement can
     * travel, so no thread path's lost connection with it is made again
     * either -- its sends fail at once instead of waiting for a redial. */
    _Atomic uint8_t *svc_gone;
    /* MSG, after start-up (ofi_rma_probe.c), [rank]: a probe wanted (set
     * by any path, sent by path 0's poll), the last probe sent, the last
     * answer (sequence << 32 | the peer's polls); and (path 0's) the
     * answer owed to a rank's probe, 0 none. */
    _Atomic int *probe_want;
    _Atomic uint32_t *probe_sent;
    _Atomic uint64_t *probe_ans;
    uint32_t *ans_owed;
    uint8_t (*expect_nonce)[OFI_REDIAL_NONCE];
    double *expect_until;
    struct ofi_auth auth;  /* MSG: our pair secrets */

    uint64_t mr_mode;      /* info->domain_attr->mr_mode as granted */
    int virt_addr;         /* FI_MR_VIRT_ADDR */
    int prov_key;          /* FI_MR_PROV_KEY */
    int mr_local;          /* FI_MR_LOCAL */
    int mr_endpoint;       /* FI_MR_ENDPOINT */
    size_t mr_key_size;
    /* Requested keys when !FI_MR_PROV_KEY: random, drawn from a pool that
     * getrandom refills (registration runs on any thread). */
    pthread_mutex_t key_lock;
    uint64_t key_pool[32];
    unsigned key_left;

    size_t am_max_packet;
    size_t inject_size;
    size_t tx_size, rx_size;

    struct fh_cpath **paths;      /* [npaths], set by path_create */
    fi_addr_t *addrs;             /* [rank * npaths + path], after connect;
                                     FI_AV_TABLE: addrs[k] == k, so a source
                                     fi_addr is the sender's index */
    uint64_t token;               /* ours: what senders must present */
    uint64_t *tokens;             /* [rank]: what we present to each rank */
    int connected;
};

/* ofi_rma.c */
int  ofi_mr_reg(struct fh_conduit *c, void *addr, size_t len,
                unsigned access, struct fh_mr **mr, fh_rkey_t *rkey);
int  ofi_mr_dereg(struct fh_conduit *c, struct fh_mr *mr);
/* Registers memory for one path only (internal buffers). */
int  ofi_mr_reg_path(struct fh_cpath *p, void *addr, size_t len,
                     uint64_t fi_access, struct fh_mr **out);
int  ofi_put(struct fh_cpath *p, int rank, int rpath, const void *src,
             size_t len, struct fh_mr *lmr, uint64_t raddr,
             const fh_rkey_t *rkey, void *op_ctx, unsigned flags);
int  ofi_get(struct fh_cpath *p, int rank, int rpath, void *dst, size_t len,
             struct fh_mr *lmr, uint64_t raddr, const fh_rkey_t *rkey,
             void *op_ctx, unsigned flags);

/* ofi_path.c */
int  ofi_path_create(struct fh_conduit *c, const fh_path_attr_t *attr,
                     struct fh_cpath **out);
void ofi_path_destroy(struct fh_cpath *p);
int  ofi_am_send(struct fh_cpath *p, int rank, int rpath, const void *hdr,
                 size_t hdr_len, const void *payload, size_t len);
/* ofi_poll.c */
int  ofi_poll(struct fh_cpath *p, int max);
int  ofi_wait_fds(struct fh_cpath *p, int *fds, int max);

/* ofi_shm.c: the shm provider's files in /dev/shm.  ofi_shm_is: the
 * provider is shm.  ofi_shm_reclaim: removes the files ended ranks left
 * (before the first endpoint).  ofi_shm_name: names p's endpoint (before
 * fi_enable; a libfabric error code).  ofi_shm_hold: locks its file
 * (after fi_enable); ofi_shm_release: unlocks (after fi_close). */
int  ofi_shm_is(const struct fh_conduit *c);
void ofi_shm_reclaim(void);
int  ofi_shm_name(struct fh_cpath *p);
void ofi_shm_hold(struct fh_cpath *p);
void ofi_shm_release(struct fh_cpath *p);

int  ofi_post_rbuf(struct fh_cpath *p, struct ofi_op *rb);

/* MSG mode: ofi_cm.c (objects, listener), ofi_cm_handshake.c (handshake,
 * events), ofi_cm_connect.c (dialling, start-up) */
int  ofi_cm_open(struct fh_conduit *c);
void ofi_cm_close(struct fh_conduit *c);
int  ofi_cm_connect(struct fh_conduit *c, struct fh_boot *boot);
int  ofi_cm_path_connect(struct fh_cpath *p);    /* conduit.h path_connect */
void ofi_cm_path_destroy(struct fh_cpath *p);
int  ofi_cm_events(struct fh_conduit *c);
void ofi_cm_poll_events(struct fh_conduit *c);   /* rate-limited */
void ofi_cm_expire(struct fh_conduit *c);        /* overdue proofs */
void ofi_cm_on_proof(struct fh_cpath *p, struct ofi_op *rb, size_t len);
double ofi_now(void);

/* Shared by the ofi_cm*.c files and ofi_cm_redial.c */
struct ofi_conn *ofi_cm_conn_new(struct fh_cpath *p, struct fi_info *info,
                                 uint32_t src, int initiator);
int  ofi_cm_conn_open_ep(struct ofi_conn *k, struct fi_info *info);
int  ofi_cm_conn_alloc_bufs(struct ofi_conn *k, size_t n);  /* allocated only */
int  ofi_cm_conn_bufs(struct ofi_conn *k, size_t n);     /* allocated, posted */
/* Ends a connection that is not (or no longer) wanted: endpoint closed,
 * buffers freed, operation records kept; why != NULL: counted as a drop. */
void ofi_cm_conn_kill(struct ofi_conn *k, const char *why);
int  ofi_cm_dial(struct ofi_conn *k);
int  ofi_cm_send_proof(struct ofi_conn *k);
void ofi_cm_backoff(struct ofi_conn *k);

/* ofi_path.c: sends control message m on p's connection to dst (rank *
 * npaths + path); FH_ERR_AGAIN without a slot. */
int  ofi_ctl_send(struct fh_cpath *p, uint32_t dst, unsigned kind,
                  const struct ofi_ctl_msg *m);
int  ofi_cm_connect_req(struct ofi_conn *k);   /* fi_connect with k->req */

/* ofi_rma_probe.c (MSG mode, after start-up): is the target of an RMA past
 * FH_OFI_RMA_TIMEOUT serving it?  ofi_probe_alloc: at the end of connect.
 * ofi_probe_fail: 1 when op is to fail now (else it waits on); called by
 * op's path's expiry scan.  ofi_probe_on_ctl: path 0 received a probe or an
 * answer from src.  ofi_probe_poll: path 0 sends what is due. */
int  ofi_probe_alloc(struct fh_conduit *c);
void ofi_probe_free(struct fh_conduit *c);
int  ofi_probe_fail(struct fh_cpath *p, struct ofi_op *op, double now);
void ofi_probe_on_ctl(struct fh_cpath *p, uint32_t src, unsigned kind,
                      const struct ofi_ctl_msg *m);
void ofi_probe_poll(struct fh_cpath *p);

/* ofi_cm_redial.c (MSG mode, after start-up) */
#define OFI_CM_REDIAL_WAIT 30.0   /* s a lost pair is dialled again; sends wait
                                     (FH_ERR_AGAIN) meanwhile, then fail */
/* Path p's connection k (an initiator's, or an acceptor's on path 0) was
 * lost: its live RMAs fail with FH_ERR_PEER_DEAD naming the peer, and an
 * initiator's is dialled again by p's poll.  Called by p itself. */
void ofi_cm_lost(struct fh_cpath *p, struct ofi_conn *k);
/* p's poll: the work of its lost connections (rate-limited). */
void ofi_cm_redial_poll(struct fh_cpath *p);
/* Path 0's event poll: the acceptor accepted successor k (acceptor checked
 * by the caller); or it failed. */
void ofi_cm_redial_accepted(struct ofi_conn *k);
/* Path 0: an accepted connection proved itself as k->src, which had one:
 * the old one ends and k replaces it. */
void ofi_cm_replace_accepted(struct ofi_conn *k);
/* Path 0: the peer at connection src announced a request (m). */
void ofi_cm_on_redial(struct fh_cpath *p, uint32_t src, const struct ofi_ctl_msg *m);
/* Path 0's listener: a request for src after start-up was announced with
 * this nonce (the announcement is used up); else 0. */
int  ofi_cm_redial_expected(struct fh_conduit *c, uint32_t src, const uint8_t *nonce);
/* The path's first use of a successor: sequences and credits reset. */
void ofi_cm_reset_pair(struct fh_cpath *p, uint32_t dst);
/* ofi_poll.c: the messages held from src are released, its sequence 0. */
void ofi_path_rx_reset(struct fh_cpath *p, uint32_t src);

/* Where a message or RMA to (rank, rpath) goes: FH_OK with *ep and *addr,
 * or an error (MSG: no connection from this path, or its peer closed it). */
static inline int ofi_route(struct fh_cpath *p, int rank, int rpath,
                            struct fid_ep **ep, fi_addr_t *addr)
{
    const size_t dst = (size_t)rank * (size_t)p->c->cfg.npaths + (size_t)rpath;
    if (p->conn == NULL) {
        *ep = p->ep;
        *addr = p->addrs[dst];
        return FH_OK;
    }
    struct ofi_conn *k = p->conn[dst];
    if (k == NULL)
        return fh_set_error(FH_ERR_INVALID, "ofi: path %d has no connection to "
                            "%s path %d", p->index, FH_RANK_NAME(rank), rpath);
    const int st = atomic_load_explicit(&k->state, memory_order_relaxed);
    if (st != OFI_CONN_UP) {
        /* Lost after start-up: made again within OFI_CM_REDIAL_WAIT (the
         * initiator dials, the acceptor waits for it); meanwhile the
         * caller polls and retries.  (A connection still being made by
         * path_connect is not lost.) */
        if (p->c->connected && !k->gave_up && st != OFI_CONN_SETUP) {
            if (k->lost_at == 0)
                ofi_cm_lost(p, k);
            if (!k->gave_up && ofi_now() < k->lost_at + OFI_CM_REDIAL_WAIT &&
                !atomic_load_explicit(&p->c->svc_gone[rank], memory_order_relaxed))
                return FH_ERR_AGAIN;
            k->gave_up = 1;
        }
        return fh_set_error(FH_ERR_PEER_DEAD, "ofi: path %d: the connection to %s "
                            "path %d is closed", p->index, FH_RANK_NAME(rank), rpath);
    }
    *ep = k->ep;
    *addr = 0;
    return FH_OK;
}

/* An RMA just posted: what its expiry and error messages need (MSG mode:
 * its connection, counted live until it completes). */
static inline void ofi_rma_posted(struct fh_cpath *p, struct ofi_op *op, int rank,
                                  int rpath, uint64_t raddr, size_t len)
{
    op->raddr = raddr;
    op->len = len;
    op->age = 0;
    op->pstate = 0;
    op->live = p->conn != NULL;
    op->conn = p->conn != NULL
        ? p->conn[(size_t)rank * (size_t)p->c->cfg.npaths + (size_t)rpath] : NULL;
    p->rma_live += (size_t)op->live;
}
/* An RMA's completion (either kind) arrived: no longer live. */
static inline void ofi_rma_done(struct fh_cpath *p, struct ofi_op *op)
{
    if (op->live && op->conn != NULL)
        op->conn->rma_done++;
    p->rma_live -= (size_t)op->live;
    op->live = 0;
}
/* MSG mode, from the poll: fails the RMAs older than FH_OFI_RMA_TIMEOUT
 * and closes their connections (ofi_poll.c). */
void ofi_rma_expire(struct fh_cpath *p);
/* Closes connection k after start-up (its endpoint and buffers; the
 * records stay): later sends on it fail with FH_ERR_PEER_DEAD. */
void ofi_cm_conn_abort(struct ofi_conn *k);

/* Helpers shared by the files. */
int  ofi_err_to_fh(int fi_errno);   /* positive FI_E* -> fh_err_t */
/* Random bytes from the kernel (getrandom); FH_OK or FH_ERR_TRANSPORT. */
int  ofi_random(void *buf, size_t len);
static inline void *ofi_path_desc(struct fh_cpath *p, struct fh_mr *mr)
{
    if (!mr)
        return NULL;
    return mr->desc[mr->nmr == 1 ? 0 : p->index];
}

#endif /* FH_OFI_INTERNAL_H */
