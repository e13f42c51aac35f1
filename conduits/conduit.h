/*
 * conduit.h -- the one contract between the firehose runtime and a network.
 *
 * A conduit (conduits/<name>/) implements struct fh_conduit_ops.  The runtime
 * (firehose/) calls only these functions and never includes a libfabric or
 * verbs header; a conduit never includes runtime headers other than this one,
 * firehose/boot/bootstrap.h (for the address exchange), firehose/util/log.h
 * and firehose/util/config.h (for its own FH_* table, <name>_config.c), plus
 * what all conduits share: conduits/util/cu.h.
 *
 * Model
 *   - A conduit instance (struct fh_conduit) is one open NIC/domain.
 *   - A path (struct fh_cpath) is an independent endpoint: its own transmit
 *     and receive resources and its own completion queue.  Path 0 of every
 *     rank is the *service path*: all AM requests and all RMA traffic from
 *     peers target it.  Paths 1..npaths-1 are thread paths: they initiate
 *     RMA and AM requests to peers' service paths and receive only AM replies
 *     (sent by a peer's service path).  A conduit must therefore support the
 *     traffic (r, p) -> (r', 0) and (r', 0) -> (r, p) for all r, r', p.
 *   - Destinations are named (rank, path index).
 *
 * Threading and re-entry (what the runtime guarantees; every op below says
 * which of these classes it is in, as "Called:")
 *   - Life cycle (probe, open, connect, path_create, close, path_destroy):
 *     one thread, inside fh_init (firehose/init.c: probe, open, the
 *     path_creates, connect, in that order) or fh_finalize / a failing
 *     fh_init (path_destroys, then close); nothing else of the conduit runs
 *     meanwhile.  They may block (connect waits for every rank).
 *   - Path ops (put, get, am_send, poll): serialized per path: the runtime
 *     holds the path's lock (firehose/path.c) around every call on it, so
 *     one call at a time per path, though not always from the same thread
 *     (FH_PATHS=shared, orphaned paths, and the service path, which any
 *     thread may poll).  Calls on different paths run concurrently and must
 *     not share locks on the fast path (post and poll).  Only after connect.
 *   - Registration (mr_reg, mr_dereg): thread-safe.  Called after connect,
 *     from any thread, concurrently with each other and with the path ops of
 *     any path: with no runtime lock held (a temporary registration of a
 *     local buffer, firehose/rma.c), under the registration cache's lock
 *     (firehose/reg/firehose.c env_pin/env_unpin), under the segment
 *     lock (firehose/segment.c, the pin-everything seg_expose hook), and
 *     from inside upcalls (below).  So a conduit must not hold, while it
 *     makes an upcall, a lock that mr_reg or mr_dereg takes (ofi's key_lock
 *     is taken only inside mr_reg).
 *   - Upcalls run inside poll, on the polling thread, with that path's lock
 *     held.  From an upcall of path p the runtime may call: am_send on p
 *     (an AM handler's reply, credits); mr_reg and mr_dereg (on_am: the
 *     rendezvous target's request handler and the firehose cache's move
 *     handler register; on_complete: releasing a firehose transfer's local
 *     registration may deregister, firehose/reg/firehose_xfer.c
 *     pieces_done); and any path op on *another* path (a thread path's
 *     upcall may poll the service path, firehose/path.c
 *     fh_progress_locked).  Never poll, put or get on
 *     p itself (a poll from inside p's upcalls returns at once: path.c's
 *     `polling` flag; work an upcall makes ready is posted after poll
 *     returns), and never a life-cycle op.
 *
 * Completion semantics the runtime relies on
 *   - put: the completion (on_complete) is reported only when the data is
 *     visible in the target's memory (delivery complete).  The source may be
 *     reused when the post returns if len <= limits.max_inject, otherwise
 *     after the completion.
 *   - get: the completion is reported when the data is in the local buffer.
 *   - am_send: the conduit copies header and payload before returning; the
 *     message is delivered at most once, intact, and messages from one path to
 *     one destination path are delivered in order.  The receiver gets the
 *     bytes through on_am during poll; the buffer is valid only during that
 *     upcall.  The runtime guarantees (by credits) that no more than
 *     path_attr.rx_msgs messages are outstanding towards one path, so a
 *     conduit that pre-posts that much receive space never drops or blocks.
 *
 * What the conduit guarantees about received bytes (docs/security.md)
 *   - on_am names the sender (rank, path) as the *transport* knows it (the
 *     libfabric source address of the message, the verbs queue pair it
 *     arrived on), never as the bytes claim it.  A message whose source is
 *     not an endpoint of this job is not delivered.
 *   - len <= am_max_packet on every on_am: a longer, shorter-than-our-own-
 *     header, out-of-sequence or otherwise malformed message is not
 *     delivered either.  Such a message is reported through on_drop (the
 *     runtime counts and logs it) and never ends the process: whatever a
 *     peer or a stranger sends, the receiver keeps running.
 *   - A message or RMA to or from a peer that died or became unreachable ends
 *     with status FH_ERR_PEER_DEAD (or FH_ERR_TRANSPORT) and a log line
 *     naming the peer; it never hangs.
 *
 * Return values: FH_OK, FH_ERR_AGAIN (transmit resources exhausted: poll the
 * same path and retry), or another negative fh_err_t.
 */
#ifndef FH_CONDUIT_H
#define FH_CONDUIT_H

#include <stddef.h>
#include <stdint.h>
#include "firehose.h"

struct fh_boot;
struct fh_cfg_entry; /* firehose/util/config.h: one FH_* variable */
struct fh_conduit;   /* conduit-private */
struct fh_cpath;     /* conduit-private */
struct fh_mr;        /* conduit-private: one memory registration */

/* What the runtime tells the conduit when opening it. */
typedef struct fh_conduit_config {
    int rank, nranks;
    int npaths;              /* paths per rank, the same on every rank */
    size_t am_max_packet;    /* largest am_send (header + payload) */
    int all_local;           /* every rank shares this host's network
                                namespace: endpoints may listen on loopback */
    int verbose;             /* FH_VERBOSE */
    /* The conduit's own FH_* settings: the struct its settings table fills
     * (ops->settings, e.g. ofi_settings_t of conduits/ofi/ofi_config.h),
     * loaded and range-checked by fh_conduit_settings_load.  Read by probe
     * and open only; the conduit copies what it keeps (strings included,
     * or it keeps pointers into the environment, which outlives it). */
    const void *settings;
} fh_conduit_config_t;

/* A conduit's own configuration: its table of FH_* variables, in the
 * format of the core table (firehose/util/config.h: name, type, default, doc)
 * and parsed by the same parser into the conduit's own struct.  Defined in
 * conduits/<name>/<name>_config.c, which needs no network header, so that
 * every conduit's table is known to fh_init (which checks them all, built
 * or not: a bad FH_IBV_PORT fails on ofi too) and to tools/fhinfo. */
typedef struct fh_conduit_settings {
    const char *conduit;               /* "ofi" */
    const struct fh_cfg_entry *table;  /* its variables */
    size_t len;                        /* entries in table */
    size_t size;                       /* bytes of the struct table fills */
    /* Ranges and combinations the parser alone cannot express: FH_OK, or
     * FH_ERR_CONFIG with "FH_X=value: reason" in err.  NULL = none. */
    int (*check)(const void *settings, char *err, size_t errlen);
} fh_conduit_settings_t;

extern const fh_conduit_settings_t fh_ofi_settings;
extern const fh_conduit_settings_t fh_ibv_settings;

/* Every conduit's settings, built into this library or not. */
#define FH_NCONDUITS 2
extern const fh_conduit_settings_t *const fh_conduit_settings_all[FH_NCONDUITS];

/* Storage for any conduit's settings struct (each <name>_config.c asserts
 * that its struct fits), so callers need no allocation. */
#define FH_CONDUIT_SETTINGS_MAX 256
typedef union fh_conduit_settings_buf {
    max_align_t align;
    unsigned char bytes[FH_CONDUIT_SETTINGS_MAX];
} fh_conduit_settings_buf_t;

/* Fills out (s->size bytes, suitably aligned) from s's defaults and the
 * environment and runs s->check: FH_OK or FH_ERR_CONFIG with
 * "FH_X=value: reason" in err.  Thread-safe (reads the environment). */
int fh_conduit_settings_load(const fh_conduit_settings_t *s, void *out,
                             char *err, size_t errlen);

/* What the conduit reports once open. */
typedef struct fh_conduit_limits {
    size_t max_msg;          /* largest single put/get */
    size_t max_inject;       /* puts up to this size copy the source at post */
    size_t am_max_packet;    /* largest am_send accepted (<= requested) */
    int    needs_local_mr;   /* local buffers of put/get must be registered */
    size_t max_mr_count;     /* registrations supported (0 = unknown) */
    size_t max_mr_bytes;     /* bytes registrable (0 = unknown/unlimited) */
    int    reg_pins;         /* mr_reg pins pages (they count against
                                RLIMIT_MEMLOCK): the runtime sizes its
                                pinning budgets from that limit only then;
                                0 = registration pins nothing (a software
                                transport copying by virtual address) */
    int    lazy_paths;       /* thread paths may be created after connect,
                                when a thread first needs one (path_create,
                                then path_connect until FH_OK); 0 = every
                                path is created before connect */
    char   description[128]; /* e.g. "ofi tcp;ofi_rxm on lo" for logs */
} fh_conduit_limits_t;

/* Per-path creation attributes. */
typedef struct fh_path_attr {
    int index;               /* 0 = service path */
    unsigned rx_msgs;        /* messages that may be in flight towards it */
    unsigned rx_per_src;     /* of which from one source (rank, path) at most
                                (a conduit with a receive queue per
                                connection sizes each from this) */
    void *upcall_arg;        /* passed back in every upcall of this path */
} fh_path_attr_t;

/* Upcalls made from inside poll(), on the polling thread, with the path's
 * lock held; what they may call is in "Threading and re-entry" above. */
typedef struct fh_conduit_upcalls {
    /* An AM packet from (src_rank, src_path), both verified by the transport
     * and in range, arrived on the path.  buf is valid during the call;
     * len <= am_max_packet. */
    void (*on_am)(void *upcall_arg, int src_rank, int src_path,
                  const void *buf, size_t len);
    /* A received message was dropped: src_rank is the verified sender, or -1
     * when the message came from outside the job (or its source could not be
     * told); why is a short static reason for the log. */
    void (*on_drop)(void *upcall_arg, int src_rank, const char *why);
    /* A put/get posted with op_ctx finished; status FH_OK or an error. */
    void (*on_complete)(void *upcall_arg, void *op_ctx, int status);
    /* The link between this path and (rank, rpath) was lost and made again
     * (ofi msg mode, docs/reliability.md): the messages in flight on the old
     * link are lost (their RMAs failed through on_complete), the new one
     * starts empty, so the credits of the pair start again at a full window
     * and nothing is owed.  Called from the path's poll or send, before the
     * first message of the new link.  May be NULL for conduits that never
     * reconnect. */
    void (*on_reset)(void *upcall_arg, int rank, int rpath);
    /* The link between this path and (rank, rpath) was lost (ofi msg mode):
     * what was in flight on it is gone, so a request this path sent over it
     * may never be answered; the runtime fails the requests waiting for a
     * reply from rank (docs/reliability.md).  Called once per lost link,
     * from the path's poll, path lock held, before its RMAs fail through
     * on_complete and before any on_reset of the pair.  May be NULL. */
    void (*on_lost)(void *upcall_arg, int rank, int rpath);
} fh_conduit_upcalls_t;

/* Remote access key: what a peer needs to address registered memory.  The
 * key is unguessable: the provider's own where it chooses keys, otherwise
 * random (as many random bits as the provider's key size allows); the
 * runtime hands it to job members only. */
typedef struct fh_rkey {
    uint64_t key;
    uint64_t base;           /* registered base address (virtual) */
} fh_rkey_t;

enum fh_mr_access {
    FH_MR_LOCAL        = 1u << 0,  /* used as a local put source / get dest */
    FH_MR_REMOTE_READ  = 1u << 1,
    FH_MR_REMOTE_WRITE = 1u << 2
};

enum fh_post_flags {
    FH_POST_MORE = 1u << 0         /* more posts follow: batch the doorbell */
};

typedef struct fh_conduit_ops {
    const char *name;
    const fh_conduit_settings_t *settings;   /* its FH_* variables */

    /* Is this conduit usable here (FH_CONDUIT=auto asks ibv's; fhinfo
     * --conduits asks every one)?  Returns 1 or 0 and, for 0, the reason in
     * why (for 1, why may say what it found).  NULL means always usable.
     * Must not leave anything open.
     * Called: life cycle (fh_init before open; tools/fhinfo), may block. */
    int  (*probe)(const fh_conduit_config_t *cfg, char *why, size_t whylen);

    /* Opens the NIC/domain; limits filled on FH_OK.  Errors: FH_ERR_INVALID
     * (arguments), FH_ERR_CONFIG (cfg->settings NULL and the environment's
     * invalid), else FH_ERR_NOT_SUPPORTED, FH_ERR_TRANSPORT or
     * FH_ERR_NO_MEMORY; where a setting is at fault fh_set_error names it
     * (e.g. "FH_OFI_PROVIDER=x: no such provider ...").
     * Called: life cycle, once, may block. */
    int  (*open)(const fh_conduit_config_t *cfg,
                 const fh_conduit_upcalls_t *up,
                 struct fh_conduit **out, fh_conduit_limits_t *limits);
    /* Releases everything; every path destroyed and every registration
     * deregistered before.  Called: life cycle, last. */
    void (*close)(struct fh_conduit *c);

    /* One path per index 0..npaths-1, each once.  Before connect, the
     * same indices on every rank (0..k, at least the service path); with
     * limits.lazy_paths a thread path (index >= 1) may also be created
     * after connect, and is then connected by path_connect.
     * Called: life cycle before connect; after it, as path_connect.
     * path_destroy: at fh_finalize (after the runtime drained the path), a
     * failing fh_init, or a path_connect that failed, before close. */
    int  (*path_create)(struct fh_conduit *c, const fh_path_attr_t *attr,
                        struct fh_cpath **out);
    void (*path_destroy)(struct fh_cpath *p);

    /* Collective: called once on every rank after all npaths paths exist;
     * exchanges addresses through the bootstrap (boot->allgather) and makes
     * every (rank, path) reachable as described above.
     * Called: life cycle, blocks until every rank has called it. */
    int  (*connect)(struct fh_conduit *c, struct fh_boot *boot);

    /* limits.lazy_paths only (else NULL): makes thread path p, created
     * after connect, reach the service path of every rank, as connect does
     * for the paths created before it.  Never blocks: the first call
     * starts, later calls advance; FH_ERR_AGAIN until every connection is
     * up (the runtime polls path 0 and p between calls: the peers'
     * answers arrive there), then FH_OK; or FH_ERR_PEER_DEAD naming the
     * rank that did not answer in time (60 s), FH_ERR_TRANSPORT.  A peer
     * answers only while it polls its service path (as for any request).
     * Called: with the runtime holding the locks of path 0 and of p (in
     * that order); p has no other user until FH_OK. */
    int  (*path_connect)(struct fh_cpath *p);

    /* Registers [addr, addr+len).  Errors (with fh_set_error): FH_ERR_INVALID
     * when the range is not entirely mapped and accessible (EFAULT: the
     * caller decides whether that deserves a log line -- the cache expects
     * it for bucket-rounded ranges next to a guard page), FH_ERR_NO_MEMORY
     * when the pinning or NIC limits are reached (logged), FH_ERR_LIMIT /
     * FH_ERR_TRANSPORT otherwise.  mr_dereg: FH_OK, FH_ERR_INVALID (NULL)
     * or FH_ERR_TRANSPORT (logged); mr is freed either way.
     * Called: registration (thread-safe; also from inside upcalls, see
     * "Threading and re-entry"), after connect. */
    int  (*mr_reg)(struct fh_conduit *c, void *addr, size_t len,
                   unsigned access, struct fh_mr **mr, fh_rkey_t *rkey);
    int  (*mr_dereg)(struct fh_conduit *c, struct fh_mr *mr);

    /* RMA.  lmr is the registration covering the local buffer, or NULL (only
     * allowed when !needs_local_mr or len <= max_inject for put).  raddr is
     * the target's virtual address inside the range described by rkey.
     * Errors: FH_ERR_AGAIN (poll p and retry), FH_ERR_RANK (destination out
     * of range), FH_ERR_STATE (before connect), FH_ERR_INVALID (no rkey, a
     * local registration missing, a destination this path cannot reach),
     * FH_ERR_TOO_BIG (len > max_msg), FH_ERR_PEER_DEAD / FH_ERR_TRANSPORT.
     * Called: path op, never from an upcall of p. */
    int  (*put)(struct fh_cpath *p, int rank, int rpath,
                const void *src, size_t len, struct fh_mr *lmr,
                uint64_t raddr, const fh_rkey_t *rkey,
                void *op_ctx, unsigned flags);
    int  (*get)(struct fh_cpath *p, int rank, int rpath,
                void *dst, size_t len, struct fh_mr *lmr,
                uint64_t raddr, const fh_rkey_t *rkey,
                void *op_ctx, unsigned flags);

    /* Sends hdr followed by payload as one message (hdr_len + len <=
     * am_max_packet, else FH_ERR_TOO_BIG).  Both buffers may be reused at
     * return.  Other errors as put's.
     * Called: path op; also from inside an upcall of p (a handler's reply). */
    int  (*am_send)(struct fh_cpath *p, int rank, int rpath,
                    const void *hdr, size_t hdr_len,
                    const void *payload, size_t len);

    /* Reaps up to max events (completions and arrivals), making upcalls.
     * Returns the number reaped (>= 0) or a negative error.
     * Called: path op, never from an upcall of p (the runtime's guard). */
    int  (*poll)(struct fh_cpath *p, int max);

    /* Optional (NULL: the conduit cannot sleep).  For a caller about to
     * sleep in poll(2) without p's lock: the file descriptors that become
     * readable when an event may be waiting on p (a completion, an
     * arrival, a connection event; for a target, the traffic its RMA
     * needs served).  Fills at most max into fds and returns how many (0:
     * nothing to sleep on), or -1 when events are already waiting (poll p
     * instead).  An event that comes after the call makes an fd readable.
     * Called: path op, p's lock held, never from an upcall of p. */
    int  (*wait_fds)(struct fh_cpath *p, int *fds, int max);
} fh_conduit_ops_t;

/* The conduits built into this library (fh_conduit_ibv only when configure
 * found rdma-core: FH_HAVE_IBV). */
extern const fh_conduit_ops_t fh_conduit_ofi;
extern const fh_conduit_ops_t fh_conduit_ibv;
/* No network at all: a job on one host whose node path carries everything
 * (conduits/local/). */
extern const fh_conduit_ops_t fh_conduit_local;

#endif /* FH_CONDUIT_H */
