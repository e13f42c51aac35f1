/*
 * firehose.h -- the public API of the firehose PGAS communication runtime.
 *
 * firehose gives N processes ("ranks") one-sided remote memory access
 * (put/get), active messages, remote 64- and 32-bit atomics and a barrier
 * over RDMA-class networks.  A UPC, Co-Array Fortran or OpenSHMEM runtime is built on this
 * header alone; nothing below it (conduit, bootstrap, registration cache) is
 * visible here.
 *
 * Conventions (they hold for every function unless its comment says otherwise)
 *   - Functions return FH_OK (0) or a negative fh_err_t.  fh_strerror() turns a
 *     code into a sentence, fh_err_name() into its symbolic name.  When a call
 *     fails because of its arguments, nothing was sent and nothing changed.
 *   - Every call's comment ends with the same block:
 *       Blocking:     whether it may wait (poll the network, wait for
 *                     other ranks or threads), see "Blocking" below;
 *       Thread-safe:  whether other threads may call firehose meanwhile;
 *       Handler-safe: whether it may be called inside an AM handler (if
 *                     not, it returns FH_ERR_IN_HANDLER there);
 *       Errors:       the codes it returns.  "The entry errors" are the
 *                     ones every call that works on the calling thread's
 *                     state checks first: FH_ERR_NOT_INIT (before fh_init,
 *                     after fh_finalize), FH_ERR_STATE (the thread is
 *                     exiting, see below), FH_ERR_IN_HANDLER.
 *     Whenever a call returns an error, fh_last_error() says why.
 *   - Thread safety: after fh_init every function may be called by any thread
 *     concurrently (like MPI_THREAD_MULTIPLE).  Each thread gets its own
 *     independent communication path on first use (its own endpoint and
 *     completion queue); FH_PATHS=shared makes all threads share one, and
 *     FH_PATHS=lazy makes each path only when its thread first calls in.
 *     Threads that share a path (also: more threads than FH_MAX_THREADS)
 *     share its transmit queue; a small put or get waits behind at most a
 *     bounded amount of its neighbours' large transfers (8 MiB under the
 *     default strategy: docs/reliability.md, "Threads"), not their total.
 *     A thread keeps its state until it exits; firehose then completes its
 *     NBI operations and frees that state from a pthread-key destructor (the
 *     "thread-exit hook").  A firehose call the thread makes after the hook
 *     ran -- from another pthread-key destructor, whose order relative to the
 *     hook is unspecified -- returns FH_ERR_STATE, fh_last_error() saying the
 *     thread is exiting; calls that need no thread state (fh_rank, fh_nranks,
 *     fh_stats_peer, fh_last_error, ...) still work.  Never a crash.  A
 *     thread whose first firehose call comes from a key destructor (before
 *     the hook ever ran in it) is served normally.  The hook completes the
 *     thread's NB and NBI operations and frees its NB handles (not waited
 *     for, they are simply released); replies to its AM requests that
 *     arrive later are still run, by whichever thread polls next.
 *   - Collectives (fh_segment_create, fh_segment_destroy, fh_barrier,
 *     fh_barrier_or, fh_allgather, fh_finalize) may also be called by
 *     several threads of a rank at once.  A rank runs them one at a time, in the order they
 *     enter, and the k-th collective call of every rank pairs with the k-th
 *     of every other.  Paired calls must agree: the same function, and for
 *     fh_allgather the same len, for fh_segment_destroy the same segment.
 *     When they do not (e.g. threads calling different collectives at once
 *     entered them in different orders on different ranks) every rank's
 *     call returns FH_ERR_STATE, having done nothing, and the next calls
 *     pair up again: never a deadlock.  (fh_finalize waits, pairing with the
 *     other ranks' next calls, until every rank is in fh_finalize.)  Calls
 *     of the same collective from several threads at once agree and
 *     succeed, but which thread's call pairs with which call on another rank
 *     is unspecified: e.g. of two concurrent fh_segment_create, rank 0's
 *     first thread may get the segment rank 1's second thread got.
 *     Concurrent collectives that differ must be ordered by the client.
 *   - Blocking: "blocking" calls poll the network until their condition holds,
 *     so AM handlers run inside them.  "Non-blocking" calls (the _nb and
 *     _nbi forms, fh_test, fh_poll, fh_poll_idle) never wait for a remote rank: whatever
 *     the target must do first -- accept our first contact (libfabric tcp
 *     and shm), make a registration (the firehose cache's moves, the
 *     rendezvous strategies), return flow-control credits (bounce chunks,
 *     NB atomics beyond FH_AM_CREDITS) -- and whatever the network cannot
 *     take yet is queued and carried on by later calls of the issuing
 *     thread (or of any thread sharing its path): fh_poll, fh_test,
 *     fh_wait, fh_quiet and every other call.  A thread that issues and
 *     then computes without calling in delays only its own operations.  Out
 *     of memory for that queue is an error (FH_ERR_NO_MEMORY), never a
 *     wait.  Three exceptions: with FH_PATHS=lazy, the first call of every
 *     thread but the first makes that thread's path and waits until every
 *     rank has polled once (docs/design.md, "Paths"); with
 *     FH_REG_STRATEGY=firehose the first call
 *     after this process unmapped memory that peers held firehoses on waits
 *     until they acknowledged the revocation (docs/firehose-cache.md,
 *     "Memory that is freed or reused"); and on a conduit that needs
 *     registered local buffers (ibv) under FH_REG_STRATEGY=pin-everything,
 *     an NB/NBI put or get whose local buffer lies outside our segments
 *     completes before it returns -- a wait for our own NIC, not for the
 *     target's CPU.
 *   - Progress: no wait depends on another thread of the rank calling in.
 *     A thread waiting in any blocking call (fh_wait, fh_wait_nbi,
 *     fh_quiet, fh_barrier and the other collectives, the revocation wait
 *     at entry, fh_finalize) also completes whatever other threads of its
 *     rank -- idle ones, or ones that exited -- left in flight that it may
 *     be waiting for: their completions, the cache resources they hold,
 *     replies addressed to them.  So a thread may stop calling firehose
 *     with operations outstanding (its own NB/NBI operations still complete
 *     only as far as it, or fh_quiet/fh_wait_nbi in it, asks).
 *   - AM handlers: a handler runs inside fh_poll or any blocking call of the
 *     thread that polls.  Inside a handler only the functions marked
 *     "handler-safe" may be called; the others return FH_ERR_IN_HANDLER.
 *   - Remote addresses are the target rank's virtual addresses.  An RMA or
 *     atomic target must lie entirely inside one segment of the target rank
 *     (see fh_segment_create); anything else is FH_ERR_OUT_OF_SEGMENT.
 *   - A peer that dies makes every survivor exit with a message naming it;
 *     calls never hang on a dead peer.
 */
#ifndef FIREHOSE_H
#define FIREHOSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FH_VERSION_MAJOR 0
#define FH_VERSION_MINOR 1

/* ---------------------------------------------------------------- errors */

typedef enum fh_err {
    FH_OK                  = 0,
    FH_ERR_INVALID         = -1,  /* bad argument: NULL with a length, bad flag */
    FH_ERR_RANK            = -2,  /* rank outside [0, fh_nranks()) */
    FH_ERR_OVERFLOW        = -3,  /* size or address arithmetic overflows */
    FH_ERR_OUT_OF_SEGMENT  = -4,  /* remote range not inside one peer segment */
    FH_ERR_HANDLER         = -5,  /* AM handler index unknown or unregistered */
    FH_ERR_TOO_BIG         = -6,  /* payload or argument count over the limit */
    FH_ERR_NOT_INIT        = -7,  /* called before fh_init or after fh_finalize */
    FH_ERR_IN_HANDLER      = -8,  /* not allowed inside an AM handler */
    FH_ERR_HANDLE          = -9,  /* stale, foreign or corrupt fh_handle_t */
    FH_ERR_NO_MEMORY       = -10, /* allocation or registration failed */
    FH_ERR_LIMIT           = -11, /* a configured limit was reached */
    FH_ERR_ALIGN           = -12, /* atomic target not aligned to its size (8/4) */
    FH_ERR_TRANSPORT       = -13, /* the network reported an error */
    FH_ERR_PEER_DEAD       = -14, /* a peer exited or became unreachable */
    FH_ERR_BOOTSTRAP       = -15, /* launcher / PMIx exchange failed */
    FH_ERR_CONFIG          = -16, /* an FH_* variable has an invalid value */
    FH_ERR_AGAIN           = -17, /* fh_test: not complete yet (not an error) */
    FH_ERR_NOT_SUPPORTED   = -18, /* the feature is absent in this build/conduit */
    FH_ERR_STATE           = -19  /* call out of order (e.g. fh_init twice, or
                                     from a thread that is exiting) */
} fh_err_t;

/* A sentence describing err ("remote range is outside the target's segments").
 * Never NULL; unknown codes give "unknown error".  The string is static.  May
 * be called at any time, also before fh_init and after fh_finalize.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: yes.  Errors: none. */
const char *fh_strerror(int err);
/* The symbolic name ("FH_ERR_RANK"); a static string, never NULL.  Any time.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: yes.  Errors: none. */
const char *fh_err_name(int err);
/* Why the calling thread's most recent firehose call failed, e.g.
 * "fh_put: rank 7 is out of range [0, 4)", naming that call; "" if it
 * succeeded (every call that can fail empties the text on entry, so it
 * never describes an earlier call; fh_strerror, fh_err_name and this
 * function leave it alone).  Any time.  Handlers that run inside a call
 * record (and clear) with their own calls: read it when the call returns.
 * Lifetime: the string is this thread's own buffer (512 bytes, longer texts
 * are cut): valid until the thread exits, rewritten by the next call.
 * Copy it to keep it.
 * Blocking: no.  Thread-safe: yes (per thread).  Handler-safe: yes.
 * Errors: none. */
const char *fh_last_error(void);

/* --------------------------------------------------------- environment */

/* Declares FH_* environment variables that the caller -- a library or
 * program built on firehose -- reads itself, so that fh_init does not
 * report them.  fh_init warns on stderr (rank 0, one line per name, naming
 * the closest firehose variable when one is near) about every FH_*
 * variable that is in no firehose table (`fhinfo`), not set by a launcher,
 * not listed in FH_ENV_KNOWN and not declared here: a misspelt
 * FH_REG_STRATEGEY=bounce would otherwise run the default unnoticed; the
 * job goes on.  `fhinfo --check-env` applies the same rule (it sees
 * FH_ENV_KNOWN, not this process's declarations).  Each of names[0..n) is
 * a full name ("FH_MYLIB_HEAP") or a prefix ending in '*' ("FH_MYLIB_*");
 * the strings are copied, a name already declared is not counted twice.
 * Call it before fh_init: later declarations are kept but the check has
 * run.  All or none of a call's names are kept.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: yes.
 * Errors: FH_ERR_NOT_INIT (after fh_finalize); FH_ERR_INVALID (names NULL
 * with n > 0; a name NULL, not starting with "FH_", over 63 bytes, or with
 * '*' or '=' other than a final '*'); FH_ERR_LIMIT (over 64 names declared
 * in all). */
int fh_env_register(const char *const *names, size_t n);

/* ---------------------------------------------------------- life cycle */

/* Start the runtime.  Collective: every rank of the job calls it once.
 * Finds the launcher (fhrun, or a PMIx server such as mpirun/srun, or none =
 * a single rank), checks that the settings marked "must be equal on all
 * ranks" (`fhinfo`) are, opens the conduit, exchanges endpoint addresses
 * and returns after all ranks have done so.  argc/argv may be NULL; they
 * are not modified.  Every failure returns (fh_init never ends the
 * process), the reason in fh_last_error() and on stderr.  Under fhrun a
 * rank whose fh_init fails tells the others: their fh_init returns
 * FH_ERR_BOOTSTRAP naming that rank and its reason, and fhrun reports
 * "rank N failed in fh_init: why".  (Under a PMIx launcher the others wait
 * until the failed process exits, when the launcher ends the job.)  What
 * fh_init built is undone; after a failure before the network was opened
 * (configuration, bootstrap, no usable conduit) fh_init may be called
 * again, e.g. with another FH_OFI_PROVIDER; after a later one it returns
 * FH_ERR_STATE saying so.  The job still ends, every survivor exiting
 * with status 70, when a rank dies or the launcher goes away
 * (docs/reliability.md).  Unknown FH_* variables are reported once per
 * name on stderr (fh_env_register).
 * Blocking: yes, at most FH_BOOT_TIMEOUT per bootstrap step.  Thread-safe:
 * yes (one call wins; a second call, also a concurrent one from another
 * thread, gets FH_ERR_STATE).  Handler-safe: no.
 * Errors: FH_ERR_IN_HANDLER; FH_ERR_STATE (already initialized, or
 * finalized: fh_init may be called once); FH_ERR_CONFIG (an FH_* variable
 * has an invalid value, or a setting that must be equal on all ranks is
 * not: then on every rank, naming the variable and two ranks);
 * FH_ERR_BOOTSTRAP (the launcher cannot be reached or refuses us, or
 * another rank's fh_init failed); FH_ERR_NOT_SUPPORTED (no usable
 * conduit, e.g. FH_CONDUIT=ibv without an RDMA device); FH_ERR_TRANSPORT
 * (the network refused); FH_ERR_NO_MEMORY. */
int fh_init(int *argc, char ***argv);

/* Stop the runtime.  Collective; includes a barrier, so every rank's
 * outstanding operations to us have completed.  Outstanding NB/NBI
 * operations of the caller are completed first (as by fh_quiet: their
 * failures are not reported).  Segments are released.  After it, every
 * call but fh_init returns FH_ERR_NOT_INIT (fh_init may not be called again;
 * it returns FH_ERR_STATE).  Prints statistics when FH_STATS=1.
 * Other threads: a collective another thread entered first is paired and
 * completes before (see "Collectives"); apart from that no other thread may
 * be inside a firehose call while fh_finalize runs (it frees what they
 * use); calls they make after it returned get FH_ERR_NOT_INIT.  A thread
 * may exit meanwhile: a thread-exit hook already running is waited for;
 * one that starts after fh_finalize began does not complete the thread's
 * operations (docs/reliability.md, "Threads").
 * Blocking: yes.  Thread-safe: see above.  Handler-safe: no.
 * Errors: the entry errors; FH_ERR_PEER_DEAD when the connection with a
 * rank the barrier waits on was lost for good (its service paths' link,
 * docs/reliability.md): the barrier cannot complete, the runtime is
 * finalized all the same (everything released, later calls get
 * FH_ERR_NOT_INIT), and fh_last_error() names the rank -- what it sent
 * us may not all have landed; otherwise FH_OK. */
int fh_finalize(void);

/* Names ranks in the runtime's messages as the client's users know them:
 * rank r becomes "<label> <r + first>" where a message names a rank its
 * user may not know by number -- a peer that died or aborted the job, the
 * "firehose[...]" prefix of every line the runtime prints -- e.g.
 * fh_set_rank_names("image", 1) makes rank 1 "image 2" for a coarray
 * program.  Without it the names come from FH_RANK_NAMES ("image 1"; fhrun
 * reads it too, for its own messages), else "rank 0", "rank 1", ...  Other
 * messages (fh_last_error texts, statistics) keep rank numbers.
 * label: 1 to 15 letters, digits, '_' or '-', starting with a letter;
 * first: 0 to 1000000.
 * Blocking: no.  Thread-safe: no (call it once, before fh_init and before
 * other threads use firehose).  Handler-safe: no.
 * Errors: FH_ERR_STATE (after fh_init); FH_ERR_INVALID (a label or first
 * outside the above: the names are unchanged). */
int fh_set_rank_names(const char *label, int first);

/* This process's rank.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: yes.
 * Errors: FH_ERR_NOT_INIT (returned instead of a rank). */
int fh_rank(void);
/* Number of ranks in the job.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: yes.
 * Errors: FH_ERR_NOT_INIT (returned instead of the number). */
int fh_nranks(void);

/* End the whole job now with exit code `code` (0 becomes 1) after printing
 * msg (may be NULL); every rank exits.  Never returns.  Any time: before
 * fh_init (or after fh_finalize) it ends this process only.
 * Blocking: no (it does not wait for other ranks).  Thread-safe: yes.
 * Handler-safe: yes.  Errors: none (never returns). */
#if defined(__GNUC__)
#define FH_NORETURN __attribute__((noreturn))
#else
#define FH_NORETURN
#endif
void fh_abort(int code, const char *msg) FH_NORETURN;

/* --------------------------------------------------------------- segments */

/* A segment: memory of each rank that every rank can address remotely.
 * Segments are created collectively; every rank may pass a different size
 * (0 is allowed: that rank contributes nothing).  The memory is reserved
 * virtual memory (mmap, zero-filled); it does not have to be pinned as a
 * whole (the registration strategy decides).  Any address in [base, base+size)
 * of rank r's piece is a valid RMA/atomic target for every rank. */
typedef uint32_t fh_seg_t;

/* Collective.  Allocates `size` bytes here and learns every rank's base and
 * size.  *seg identifies the segment on every rank (the same value
 * everywhere).  *local_base may be NULL if the caller does not want it.
 * When one rank cannot create its piece, every rank's call fails with that
 * rank's error (naming it) and no segment exists.
 * Blocking: yes.  Thread-safe: yes (see "Collectives").  Handler-safe: no.
 * Errors: the entry errors; FH_ERR_INVALID (NULL seg); FH_ERR_OVERFLOW
 * (size over SIZE_MAX/4); FH_ERR_LIMIT (FH_MAX_SEGMENTS segments exist);
 * FH_ERR_NO_MEMORY (mmap or registration failed); FH_ERR_STATE (the ranks'
 * collectives do not pair up, see "Collectives" above); FH_ERR_BOOTSTRAP
 * (the exchange failed). */
int fh_segment_create(size_t size, fh_seg_t *seg, void **local_base);

/* Base address and size of `rank`'s piece of `seg` (base NULL if size 0).
 * Either out pointer may be NULL.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: yes.
 * Errors: FH_ERR_NOT_INIT; FH_ERR_RANK; FH_ERR_INVALID (seg is not a live
 * segment). */
int fh_segment_query(fh_seg_t seg, int rank, void **base, size_t *size);

/* Direct access.  A pointer through which the calling process may load
 * from and store to `addr` of rank's segment memory, or NULL.  Non-NULL
 * when addr lies inside a live segment piece of rank and rank is the
 * caller's own or a rank of its node group: the ranks of one host (one
 * group per host, cut into groups of FH_SHM_MAX_GROUP ranks when set)
 * while FH_SHM is not off, whose pieces are then shared memory.  The
 * pointer stays valid, for the rest of that piece from addr on, until the
 * segment is destroyed.  Stores through it are ordinary stores: to be seen
 * by rank, order them before a synchronization (fh_barrier, an AM, an
 * atomic) as for any shared memory; fh_put/fh_get to such a rank are
 * exactly such copies.  (shmem_ptr / gasnet_AddrLocal.)
 * Blocking: no.  Thread-safe: yes.  Handler-safe: yes.
 * Errors (NULL, and fh_last_error() says which): FH_ERR_NOT_INIT;
 * FH_ERR_RANK; FH_ERR_OUT_OF_SEGMENT (addr is not in a segment of rank);
 * FH_ERR_NOT_SUPPORTED (rank is not in the caller's node group, or its
 * piece could not be shared). */
void *fh_addr_local(int rank, const void *addr);

/* Collective, blocking, not handler-safe.  Every rank must have completed its
 * operations targeting the segment before calling (the call contains a
 * barrier before the memory is unmapped).  Every remote key to this rank's
 * piece is revoked before its memory is unmapped, and the memory is given
 * back to the system before the call returns, under every registration
 * strategy (FH_REG_STRATEGY=firehose first revokes its peers' firehoses on
 * the piece and waits until every holder acknowledged): a peer that still
 * uses an old key gets an error, never the memory mapped there later
 * (where the transport checks keys at all; see docs/firehose-cache.md,
 * "Key lifetime").
 * Blocking: yes.  Thread-safe: yes (see "Collectives").  Handler-safe: no.
 * Errors: the entry errors; FH_ERR_INVALID if seg is not a live segment
 * (also when another thread of this rank destroyed it first); FH_ERR_STATE,
 * the segment left alive, if the ranks' paired calls name different
 * segments or are not all fh_segment_destroy ("Collectives" above). */
int fh_segment_destroy(fh_seg_t seg);

/* -------------------------------------------------------- active messages */

/* Handler indices [FH_AM_USER_FIRST, FH_AM_USER_LAST] belong to the client;
 * lower indices are the runtime's own.  A handler must be registered with the
 * same index and meaning on every rank before any rank sends to it. */
#define FH_AM_USER_FIRST 128
#define FH_AM_USER_LAST  255
#define FH_AM_MAX_ARGS   8

/* A token stands for the message a handler is serving.  Lifetime: valid only
 * while that handler runs (it lives on the polling thread's stack): do not
 * keep it, pass it to another thread or use it after the handler returned
 * (nothing detects that). */
typedef struct fh_token *fh_token_t;

/* One signature for all three kinds:
 *   short:  buf == NULL, nbytes == 0;
 *   medium: buf points into a runtime buffer valid only until the handler
 *           returns (copy what you keep);
 *   long:   buf is the destination address in this rank's segment, where the
 *           payload has already been written.
 * args[0..nargs) are the sender's arguments.  A handler runs to completion on
 * one thread, must not block (no waiting on other ranks, no fh_wait, no
 * fh_barrier), and may call only handler-safe functions; a request handler
 * may send at most one reply through its token, before it returns. */
typedef void (*fh_am_handler_t)(fh_token_t token, void *buf, size_t nbytes,
                                const uint64_t *args, unsigned nargs);

/* Register fn at index.  Not collective (but see the symmetry rule above);
 * re-registering an index replaces the handler.  May be called before
 * fh_init; after fh_finalize it returns FH_ERR_NOT_INIT. `name` (may be
 * NULL) appears in error messages; it must stay valid while registered.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: no.
 * Errors: FH_ERR_NOT_INIT (after fh_finalize); FH_ERR_HANDLER (index
 * outside the client range); FH_ERR_INVALID (NULL fn); FH_ERR_IN_HANDLER. */
int fh_am_register(unsigned index, fh_am_handler_t fn, const char *name);

/* Rank that sent the message the handler is serving.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: yes (that is where tokens
 * exist).  Errors: FH_ERR_NOT_INIT (not running: no token can exist);
 * FH_ERR_INVALID (NULL token or rank). */
int fh_token_source(fh_token_t token, int *rank);

/* Limits, fixed by fh_init.  A size_t carries no error: before fh_init and
 * after fh_finalize they return 0.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: yes.  Errors: none. */
size_t fh_am_max_medium(void);     /* payload of a medium request or reply */
size_t fh_am_max_long(void);       /* payload of a long request: FH_AM_MAX_LONG */
size_t fh_am_max_long_reply(void); /* payload of a long reply (replies never
                                      block, so they are sent inline) */

/* Requests.  They may block only for flow control (waiting for the target to
 * free receive buffers, polling meanwhile), never for the handler to run;
 * a long payload over fh_am_max_medium() is first written by RMA, which
 * the call waits for.  On return the source buffer may be reused.  Messages
 * from one thread to one rank are delivered in order for short and medium;
 * a long message's handler runs after its payload is visible at the target.
 * Blocking: for flow control only (above).  Thread-safe: yes.  Handler-safe:
 * no.
 * Errors: the entry errors; FH_ERR_RANK; FH_ERR_HANDLER (outside the client
 * range, or not registered here: the sender checks its own table);
 * FH_ERR_TOO_BIG (nargs over FH_AM_MAX_ARGS, a medium payload over
 * fh_am_max_medium(), a long one over FH_AM_MAX_LONG); FH_ERR_INVALID (NULL
 * args, src or long dst with a length);
 * FH_ERR_OVERFLOW; long: FH_ERR_OUT_OF_SEGMENT (dst not inside one segment
 * of rank), and the errors of fh_put for its payload; FH_ERR_TRANSPORT
 * (the network refused the message). */
int fh_am_request_short(int rank, unsigned handler,
                        const uint64_t *args, unsigned nargs);
int fh_am_request_medium(int rank, unsigned handler, const void *src,
                         size_t nbytes, const uint64_t *args, unsigned nargs);
/* dst is an address in rank's segment. */
int fh_am_request_long(int rank, unsigned handler, const void *src,
                       size_t nbytes, void *dst, const uint64_t *args,
                       unsigned nargs);

/* Replies: callable only from a request handler, with its token, before it
 * returns, at most once per token.  A reply that the network cannot take
 * yet is queued and sent by later progress; so is one that must not leave
 * yet because, under FH_REG_STRATEGY=firehose, this process freed memory
 * peers held firehoses on and not every holder acknowledged the
 * revocation (the wait other calls take at entry; docs/reliability.md,
 * "Threads").  fh_am_reply_long's payload is
 * at most fh_am_max_long_reply() bytes, to dst in the requester's segment.
 * Blocking: no.  Thread-safe: the handler's thread only (the token's).
 * Handler-safe: yes, by definition.
 * Errors: FH_ERR_NOT_INIT; FH_ERR_IN_HANDLER (outside a request handler, or
 * from a reply handler); FH_ERR_STATE (a second reply); FH_ERR_HANDLER;
 * FH_ERR_TOO_BIG; FH_ERR_INVALID (NULL with a length); long:
 * FH_ERR_OUT_OF_SEGMENT, FH_ERR_OVERFLOW (dst). */
int fh_am_reply_short(fh_token_t token, unsigned handler,
                      const uint64_t *args, unsigned nargs);
int fh_am_reply_medium(fh_token_t token, unsigned handler, const void *src,
                       size_t nbytes, const uint64_t *args, unsigned nargs);
int fh_am_reply_long(fh_token_t token, unsigned handler, const void *src,
                     size_t nbytes, void *dst, const uint64_t *args,
                     unsigned nargs);

/* Lost messages (docs/reliability.md, "A request whose connection is
 * lost fails").  Over a conduit that connects pairs of ranks (ofi message
 * endpoints: tcp, verbs), a connection that breaks takes the messages in
 * flight on it along, and nothing is sent again: a request may or may not
 * have run at its target, its reply may never come.  *mark receives a
 * number that grows each time a connection carrying active messages
 * between this rank and `rank` was lost -- this rank's requests to it and
 * their replies, its requests to this rank and their replies -- and 0 while
 * none was; rank -1: the same over every rank.  Marks of all ranks come
 * from one sequence: a rank's mark is larger than a mark read before (its
 * own or -1's) iff one of its connections was lost since.
 * How a client waits for an AM without waiting for ever: read the mark of
 * the rank it waits for before it sends its request (or starts waiting for
 * the rank's message), and after each fh_poll of its wait loop compare:
 * a larger mark means what it waits for may never come; stop waiting and
 * report the rank as lost (FH_ERR_PEER_DEAD).  A lost connection of a
 * thread path is made again (later messages travel), the service paths'
 * one is not (later sends to the rank fail with FH_ERR_PEER_DEAD).  Where
 * no connection can be lost the mark stays 0: rdm endpoints (the shm
 * provider), the ibv conduit, the node route; a peer that dies there is
 * reported by the launcher, which ends the job.
 * Blocking: no (never polls).  Thread-safe: yes.  Handler-safe: yes.
 * Errors: FH_ERR_NOT_INIT; FH_ERR_INVALID (rank out of [-1, fh_nranks()),
 * NULL mark). */
int fh_am_lost(int rank, uint64_t *mark);

/* ------------------------------------------------------------------- RMA */

/* Sizes: 1 byte up to FH_MAX_XFER (64 GiB; larger is FH_ERR_TOO_BIG; size 0
 * is a no-op that succeeds).  Any alignment.  The local side may be anywhere in this
 * process's memory.  The remote range [dst, dst+n) must lie in one segment of
 * `rank` -- or, with FH_SEGMENT=everything (FH_REG_STRATEGY=firehose), in
 * memory `rank` has mapped readable (and writable, for a put), at any
 * alignment and wherever the mapping starts or ends, file mappings
 * included; else FH_ERR_OUT_OF_SEGMENT, refused by the target.  Over the
 * network, memory the target does not register (a file mapping, which its
 * memory monitor cannot watch; the other run of a bucket whose region
 * another transfer holds) is carried by copies through AMs, checked whole
 * at the target before a byte moves (slower: one message per
 * fh_am_max_medium() bytes; counted in reg_copies); pages past the end of
 * a file truncated under its mapping give FH_ERR_OUT_OF_SEGMENT, never a
 * fault.  Transfers to or from one's own rank are allowed.  Such memory of a rank
 * of the caller's node group is reached by cross-memory attach when
 * FH_SHM_CMA allows it (fhinfo --node).
 * Pages the target protected (PROT_NONE, or read-only under a put) give
 * FH_ERR_OUT_OF_SEGMENT naming the rank and address, never a fault at the
 * target, under every FH_REG_STRATEGY (docs/reliability.md, "A peer's
 * protected memory"; not yet: FH_SEGMENT=everything memory outside
 * segments protected after a peer was granted it, and a transfer a peer
 * looked up before the owner's change: "Open" there).
 * The owner's own mprotect, pkey_mprotect or munmap of segment memory
 * (libfirehose's, before libc's) tells every peer first and waits for
 * each at most FH_SEG_PROT_WAIT seconds (10; not for one whose link was
 * lost), naming a peer it stopped waiting for.
 *
 * A failed put or get changes nothing -- per piece: a transfer is checked
 * piece by piece before any byte of the piece moves, each piece the part
 * of [dst, dst+n) inside one FH_REGION_MAX-aligned frame (1 MiB by
 * default).  On FH_ERR_OUT_OF_SEGMENT no byte of the refused piece was
 * written (at the target for a put, in the local buffer for a get); the
 * pieces before it may have been.  Exception: on the node route, the
 * bytes of a put before the first read-only page are written.
 *
 * Freed memory (FH_REG_STRATEGY=firehose, memory monitor on): a rank may
 * free or unmap any memory, registered or not, and reuse the addresses;
 * every runtime call it makes afterwards first makes sure no peer can still
 * reach the old pages (docs/firehose-cache.md, "Memory that is freed or
 * reused").  Freeing memory while an operation on it is incomplete is an
 * error, as always.
 *
 * Completion semantics: an operation is complete when the data is visible in
 * the destination memory (for a put: at the target, to its loads and to later
 * RMA from any rank; for a get: in the local buffer).  Until completion the
 * source of a put must not be modified and the destination of a get must not
 * be read.  No ordering holds between two incomplete operations.
 *
 * Errors, common to the put and get calls below (when the call returns one
 * of the argument errors, nothing was sent): the entry errors;
 * FH_ERR_RANK; FH_ERR_INVALID (NULL local or remote address with a
 * length; NB: NULL h; strided: a zero destination stride); FH_ERR_TOO_BIG
 * (over FH_MAX_XFER); FH_ERR_OVERFLOW (an address range wraps);
 * FH_ERR_OUT_OF_SEGMENT; FH_ERR_NO_MEMORY (a local registration or the
 * queue of waiting transfers could not be made); FH_ERR_INVALID also when
 * the caller's own buffer is not mapped readable (put) or writable (get),
 * fh_last_error() naming its first bad address, the rank and the remote
 * address, on every route (network, node group, own rank; checked once
 * per mapping and thread, again after libfirehose's mprotect or munmap
 * took access away: docs/reliability.md).  A failure after the
 * transfer started -- FH_ERR_TRANSPORT from the network, or the target
 * refusing a registration the strategy asked for -- is the blocking call's
 * return value, and the NB/NBI operation's status (fh_wait/fh_test,
 * fh_wait_nbi).  Over libfabric message endpoints (tcp), a transfer that
 * FH_OFI_RMA_TIMEOUT (10 s) after it was posted is still incomplete although
 * its target calls the runtime -- its provider met a fault in the target's
 * memory -- fails with FH_ERR_TRANSPORT naming rank and address; a target
 * that computes without calling the runtime is waited for.  The connection
 * of the calling thread's path to that rank is closed and made again
 * (later transfers wait for it; docs/reliability.md). */
#define FH_MAX_XFER ((size_t)1 << 36)
/* The largest payload of one long AM request, 4 GiB - 1 (the wire's length
 * field is 32 bits): a larger one is refused with FH_ERR_TOO_BIG, never cut. */
#define FH_AM_MAX_LONG ((size_t)0xffffffffu)

/* Complete on return.
 * Blocking: yes.  Thread-safe: yes.  Handler-safe: no.
 * Errors: the common ones above. */
int fh_put(int rank, void *dst, const void *src, size_t nbytes);
int fh_get(void *dst, int rank, const void *src, size_t nbytes);

/* Non-blocking with a handle: returns without waiting for the target (see
 * "Blocking" at the top for what that means and its one exception here).
 * An fh_handle_t belongs to the thread that
 * created it; only that thread may pass it to fh_wait/fh_test.  A handle
 * reported complete is consumed: using it again, or from another thread, is
 * FH_ERR_HANDLE (detected by a generation counter, never a crash).  When
 * the operation completes at initiation, *h is FH_HANDLE_DONE (always safe to
 * wait on).  A failure found after part of the transfer started (the
 * network refusing a piece, a registration the cache cannot make) is the
 * operation's status, returned by fh_wait/fh_test; the call itself then
 * returns FH_OK.  On an error return other than the entry errors (and a
 * NULL h) *h is FH_HANDLE_DONE.
 * Blocking: no (see "Blocking" at the top).  Thread-safe: yes.
 * Handler-safe: no.
 * Errors: the common ones above; FH_ERR_LIMIT (this thread's path has no
 * free handle: wait for some first). */
typedef uint64_t fh_handle_t;
#define FH_HANDLE_DONE ((fh_handle_t)0)

int fh_put_nb(int rank, void *dst, const void *src, size_t nbytes,
              fh_handle_t *h);
int fh_get_nb(void *dst, int rank, const void *src, size_t nbytes,
              fh_handle_t *h);
/* Waits until h is complete and consumes it; FH_HANDLE_DONE returns FH_OK
 * at once.
 * Blocking: yes.  Thread-safe: yes (each thread its own handles).
 * Handler-safe: no.
 * Errors: the entry errors; FH_ERR_HANDLE (stale, consumed, another
 * thread's); else the operation's status (FH_OK or its first error). */
int fh_wait(fh_handle_t h);
/* Polls once: FH_OK if complete (handle consumed), FH_ERR_AGAIN if not,
 * the operation's error if it failed (consumed).
 * Blocking: no.  Thread-safe: yes.  Handler-safe: no.
 * Errors: as fh_wait, plus FH_ERR_AGAIN (not complete; not an error). */
int fh_test(fh_handle_t h);
/* fh_wait on every handle in hs[0..n), each consumed and set to
 * FH_HANDLE_DONE.  Returns the first failure, or FH_OK (also for n == 0
 * while running).
 * Blocking: yes.  Thread-safe: yes.  Handler-safe: no.
 * Errors: FH_ERR_NOT_INIT (before fh_init, after fh_finalize, also for
 * n == 0); FH_ERR_INVALID (NULL hs with n > 0); the first error fh_wait
 * returned. */
int fh_wait_all(fh_handle_t *hs, size_t n);

/* Implicit-handle (NBI): counted per thread; fh_wait_nbi completes all NBI
 * puts and gets this thread issued.  Non-blocking like fh_put_nb.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: no.
 * Errors: the common ones above (a failure after the start goes to
 * fh_wait_nbi). */
int fh_put_nbi(int rank, void *dst, const void *src, size_t nbytes);
int fh_get_nbi(void *dst, int rank, const void *src, size_t nbytes);
/* Waits for this thread's NBI puts and gets.  Returns the first error of
 * those that failed since the previous fh_wait_nbi, once (the next call
 * starts clean), else FH_OK.
 * Blocking: yes.  Thread-safe: yes (per thread).  Handler-safe: no.
 * Errors: the entry errors; the first failed NBI operation's error. */
int fh_wait_nbi(void);

/* Strided transfers (as needed by Co-Array Fortran sections and OpenSHMEM
 * iput/iget): `count` blocks of `blksize` bytes; block i goes from
 * src + i*src_stride to dst + i*dst_stride.  Strides are in bytes and may be
 * negative or zero (zero only on the source side of a put / the remote side
 * of a get).  count or blksize 0 is a no-op that succeeds.
 * Over the network, blocks up to FH_STRIDED_AM_MAX bytes travel packed in
 * active messages (as few as the medium AM size allows), larger ones as
 * one RMA operation each, all in flight together.
 * Blocking: yes.  Thread-safe: yes.  Handler-safe: no.
 * Errors: the common ones above, for the whole hull of the blocks (then
 * nothing was sent).  A failure after the transfer started (the target
 * refusing a message because its segment went away, the network) is the
 * return value; a put may then have written some of the blocks. */
int fh_put_strided(int rank, void *dst, ptrdiff_t dst_stride,
                   const void *src, ptrdiff_t src_stride,
                   size_t blksize, size_t count);
int fh_get_strided(void *dst, ptrdiff_t dst_stride, int rank,
                   const void *src, ptrdiff_t src_stride,
                   size_t blksize, size_t count);

/* Blocking memory fence: every put/get (blocking, NB and NBI) and every NB
 * atomic (fh_atomic_nb, fh_atomic32_nb) this thread issued before it is
 * complete afterwards: the atomics have taken effect at their targets and
 * their fetched values are written (OpenSHMEM's shmem_quiet).  Only this
 * thread's operations: it does not wait for other threads', even on a
 * shared path (FH_PATHS=shared, or more threads than FH_MAX_THREADS); it
 * waits by the FH_WAIT_SPIN policy (yielding the core).  It does not
 * consume handles: each NB handle must still be passed to fh_wait/fh_test/
 * fh_wait_all (they then report it complete at once).  It reports no
 * operation's failure: those stay with the handles (fh_wait, fh_test) and
 * with fh_wait_nbi.
 * Blocking: yes.  Thread-safe: yes (per thread).  Handler-safe: no.
 * Errors: the entry errors; otherwise FH_OK. */
int fh_quiet(void);

/* --------------------------------------------------------------- atomics */

/* Remote atomics on 64-bit integers at an 8-byte aligned address, or on
 * 32-bit integers at a 4-byte aligned address (Fortran's atomic_int_kind and
 * atomic_logical_kind), in a segment of `rank` (the whole 8 or 4 bytes
 * inside one segment, else FH_ERR_OUT_OF_SEGMENT).  All atomics on one
 * location are mutually atomic, whichever rank (or thread) issues them,
 * including the owner.  How: every atomic is executed by a CPU's atomic
 * instruction on the location's memory -- by the owner for a request
 * that came over the network, by the issuer itself for its own memory and
 * for the memory of a rank of its node group (shared segments, see
 * fh_addr_local) -- never by a NIC, so no two mechanisms ever meet on one
 * location.  Such an atomic on a node peer completes at once (NB: *h is
 * FH_HANDLE_DONE).  A 32-bit atomic reads and writes exactly its 4 bytes:
 * the other half of the 8-byte word it lies in is never touched, so two
 * 32-bit locations side by side are independent.  Mixing 32- and 64-bit
 * atomics on overlapping bytes is undefined (a location has one size).
 * Atomics are not atomic with respect to plain puts or local stores to the
 * same location.
 * Signed integers use the same operations (two's complement; 32-bit FETCH_ADD
 * wraps modulo 2^32).
 *
 * Errors, common to all four calls (nothing is sent or changed; for the NB
 * forms *h is FH_HANDLE_DONE): FH_ERR_RANK; FH_ERR_INVALID for an op outside
 * the enum, a NULL target or (NB) a NULL h; FH_ERR_ALIGN for a target not
 * aligned to the operand size; FH_ERR_OUT_OF_SEGMENT; FH_ERR_LIMIT when the
 * thread has too many operations outstanding; FH_ERR_NO_MEMORY (NB: no
 * memory to queue a request that waits for a credit); the entry errors
 * (see the top).  The target validates every request again (width, op,
 * alignment, segment) and refuses a bad one with an error reply, counted in
 * its atomics_refused for the sender (see fh_peer_stats_t): the
 * operation's status is then the target's code (FH_ERR_INVALID,
 * FH_ERR_ALIGN, FH_ERR_OUT_OF_SEGMENT); FH_ERR_TRANSPORT when the request
 * cannot be sent or the reply is malformed. */
typedef enum fh_atomic_op {
    FH_AOP_FETCH = 0,    /* *fetched = *target                           */
    FH_AOP_SET,          /* *target = operand                            */
    FH_AOP_FETCH_ADD,    /* *fetched = *target; *target += operand       */
    FH_AOP_SWAP,         /* *fetched = *target; *target = operand        */
    FH_AOP_CSWAP,        /* *fetched = *target; if == compare: = operand */
    FH_AOP_FETCH_AND,    /* *fetched = *target; *target &= operand       */
    FH_AOP_FETCH_OR,     /* *fetched = *target; *target |= operand       */
    FH_AOP_FETCH_XOR,    /* *fetched = *target; *target ^= operand       */
    FH_AOP__COUNT
} fh_atomic_op_t;

/* The operation has taken effect at the target on return, and *fetched
 * holds the old value.  fetched may be NULL for ops whose old value is not
 * wanted.
 * Blocking: yes.  Thread-safe: yes.  Handler-safe: no.
 * Errors: the common ones above, including the target's refusal. */
int fh_atomic(int rank, uint64_t *target, fh_atomic_op_t op,
              uint64_t operand, uint64_t compare, uint64_t *fetched);
/* The same on a 32-bit integer at a 4-byte aligned target.
 * Blocking: yes.  Thread-safe: yes.  Handler-safe: no.  Errors: as fh_atomic. */
int fh_atomic32(int rank, uint32_t *target, fh_atomic_op_t op,
                uint32_t operand, uint32_t compare, uint32_t *fetched);

/* Non-blocking atomics with a handle (Co-Array Fortran event posts,
 * OpenSHMEM's non-blocking AMOs): the request is sent and the call returns
 * without waiting for the target (when FH_AM_CREDITS requests of this
 * thread's path to that rank are unanswered, the request is queued and sent
 * by a later call, see "Blocking" at the top).  Handles follow the rules of
 * fh_put_nb: owned by the calling thread, consumed when fh_wait/fh_test/
 * fh_wait_all reports them complete, FH_HANDLE_DONE when the operation
 * completed at initiation (a target on one's own rank).  The operation is
 * complete -- taken effect at the target and, when fetched is not NULL, the
 * old value written to *fetched -- once fh_wait/fh_wait_all returns FH_OK,
 * fh_test returns FH_OK, or fh_quiet returns.  Until then *fetched must not
 * be read and must stay valid (like a get's destination); it is written at
 * most once, and not at all if the operation fails (the failure -- e.g. the
 * target refusing the request -- is the status fh_wait/fh_test return).
 * No order holds between incomplete atomics, even to one location (each is
 * still atomic).
 * Blocking: no (see "Blocking" at the top).  Thread-safe: yes.
 * Handler-safe: no.  Errors: the common ones above. */
int fh_atomic_nb(int rank, uint64_t *target, fh_atomic_op_t op,
                 uint64_t operand, uint64_t compare, uint64_t *fetched,
                 fh_handle_t *h);
int fh_atomic32_nb(int rank, uint32_t *target, fh_atomic_op_t op,
                   uint32_t operand, uint32_t compare, uint32_t *fetched,
                   fh_handle_t *h);

/* ----------------------------------------------------- sync and progress */

/* Collective barrier over all ranks: no rank returns before every rank has
 * entered.  Does not complete the caller's NB/NBI operations (use fh_quiet
 * first for that).  Calls from several threads of one rank form successive
 * barriers of that rank.
 * Blocking: yes.  Thread-safe: yes.  Handler-safe: no.
 * Errors: the entry errors; FH_ERR_STATE when the paired calls of other
 * ranks are other collectives (see "Collectives"); FH_ERR_TRANSPORT if a
 * barrier message cannot be sent. */
int fh_barrier(void);

/* fh_barrier that also combines one word: *out receives the bitwise OR of
 * the `in` of every rank (the same value on every rank).  For flags every
 * rank must learn at the barrier -- Co-Array Fortran's SYNC ALL carries
 * "some image has stopped / failed / is still running" in it.  It pairs
 * only with fh_barrier_or (a rank's fh_barrier or other collective against
 * it gives FH_ERR_STATE everywhere).  *out is written only on FH_OK.
 * Blocking: yes.  Thread-safe: yes.  Handler-safe: no.
 * Errors: those of fh_barrier; FH_ERR_INVALID (out is NULL). */
int fh_barrier_or(uint64_t in, uint64_t *out);

/* fh_barrier_or in two phases (split-phase, as UPC's upc_notify/upc_wait
 * or GASNet's barrier notify/try): fh_barrier_or_notify announces this
 * rank's arrival with `in` and returns without waiting; fh_barrier_or_try
 * takes the barrier on (it polls once) and returns FH_ERR_AGAIN until
 * every rank has arrived, then FH_OK with *out = the OR of every rank's
 * `in` (the same value on every rank).  Between the two the caller does
 * what it likes -- compute, serve its own protocols with AM requests,
 * fh_poll -- except another collective: until its fh_barrier_or_try has
 * returned something other than FH_ERR_AGAIN, the thread's collective
 * calls (fh_barrier, fh_barrier_or, fh_allgather, fh_segment_create,
 * fh_segment_destroy, fh_finalize, another notify) return FH_ERR_STATE
 * and do nothing, and other threads' collectives wait for it.  The pair is
 * one collective call: it pairs with the other ranks' fh_barrier_or (or
 * pairs of their own), like fh_barrier_or.  Calls of the same thread: the
 * thread that notified completes the barrier (fh_barrier_or_try from
 * another thread is FH_ERR_STATE); it must complete it before it exits.
 * A rank that stops calling fh_barrier_or_try holds up the barrier only as
 * fh_barrier_or would: its arrival counts at once, but the barrier's
 * messages it forwards (fh_barrier_or's dissemination) go out only when it
 * polls.
 * Blocking: no (neither call waits for a remote rank; notify waits, as
 * every collective does, while another thread of the rank runs one).
 * Thread-safe: yes.  Handler-safe: no.
 * Errors, fh_barrier_or_notify: the entry errors; FH_ERR_STATE (this
 * thread's barrier is not complete); the barrier's own errors come from
 * fh_barrier_or_try.  fh_barrier_or_try: the entry errors; FH_ERR_AGAIN (not yet,
 * not an error); FH_ERR_STATE (no barrier notified by this thread, or the
 * other ranks' paired calls are other collectives -- the barrier is then
 * complete and *out untouched); FH_ERR_INVALID (out is NULL; the barrier
 * stays open); FH_ERR_TRANSPORT. */
int fh_barrier_or_notify(uint64_t in);
int fh_barrier_or_try(uint64_t *out);

/* fh_barrier_or_try inside the caller's own wait loop (a library that
 * waits for the barrier but must also watch a condition of its own, e.g.
 * a Co-Array Fortran image learning that another stopped): while the
 * barrier is not complete, each call also takes one round of the wait
 * policy fh_barrier_or itself uses -- *idle counts the rounds that found
 * nothing, as in fh_poll_idle (start with 0; the call resets it when the
 * barrier moves on), and after FH_WAIT_SPIN of them a round may yield or,
 * where a message or the barrier wakes it (the node group's futex, the
 * network's fds), sleep briefly.  Results and errors as fh_barrier_or_try.
 * Blocking: no (a round may sleep until something arrives, as
 * fh_barrier_or's wait does).  Thread-safe: yes.  Handler-safe: no.
 * Errors: those of fh_barrier_or_try; FH_ERR_INVALID also when idle is
 * NULL (the barrier stays open). */
int fh_barrier_or_try_idle(uint64_t *out, unsigned *idle);

/* Runs the progress engine once: reaps completions and runs pending AM
 * handlers.  Failures of operations it completes go to their status, not
 * to its return value.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: no.
 * Errors: the entry errors; otherwise FH_OK. */
int fh_poll(void);

/* One round of the caller's own wait loop (a library waiting for a flag
 * in its memory, e.g. a Co-Array Fortran event or lock): fh_poll, then the
 * runtime's wait policy.  *idle counts the rounds in a row that handled
 * nothing (start each wait with 0): a round that handled something (an AM,
 * a completion) resets it and returns at once, so a rank that has peers
 * to serve keeps its core; after FH_WAIT_SPIN idle rounds each further one
 * yields the core (sched_yield).  FH_WAIT_SPIN unset: 0 when the job's
 * ranks on this host outnumber its cores (a waiter waits for a rank that
 * has none), else 262144 (about 0.03-0.3 s of polling).  Never sleeps: what
 * the caller waits for may come by a store no message announces.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: no.
 * Errors: the entry errors; FH_ERR_INVALID (idle is NULL). */
int fh_poll_idle(unsigned *idle);

/* Collective: each rank contributes `len` bytes from in; out receives
 * nranks*len bytes in rank order.  Useful to clients for exchanging
 * metadata (e.g. symmetric allocation), not for bulk data: it runs over
 * the bootstrap, and nranks*len may be at most 1 GiB, so each rank
 * contributes at most 1 GiB / nranks.  Every rank must pass the same len.
 * Blocking: yes.  Thread-safe: yes (see "Collectives").  Handler-safe: no.
 * Errors: the entry errors; FH_ERR_INVALID (NULL in or out with len > 0);
 * FH_ERR_TOO_BIG (nranks*len over 1 GiB); FH_ERR_STATE (out untouched)
 * when the paired calls differ in len or are other collectives (see
 * "Collectives"); FH_ERR_BOOTSTRAP (the exchange failed). */
int fh_allgather(const void *in, void *out, size_t len);

/* ----------------------------------------------------------- tunables */

/* The effective value (environment or default) of the FH_* size variable
 * `name` of the runtime's table (`fhinfo` lists it; the libraries built on
 * firehose keep their tunables there too, e.g. FH_CAF_HEAP), as parsed and
 * checked by fh_init.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: yes.
 * Errors: FH_ERR_NOT_INIT; FH_ERR_INVALID (NULL argument, an unknown name
 * or one that is not a size). */
int fh_config_size(const char *name, size_t *value);

/* ------------------------------------------------------------ statistics */

/* Per-peer counters, cumulative since fh_init, over all threads, except
 * the gauges (bytes_pinned_*, reg_victims), which are current values.  In
 * the row of a peer, "we" are this rank; the row of our own rank is the sum
 * over peers plus what belongs to no peer.  The reg_* fields describe the
 * registration strategy (FH_REG_STRATEGY; all zero for pin-everything):
 *   reg_hits, reg_misses   firehose: operations (chunks) towards the peer
 *                          that found their registration at once / had to
 *                          ask for it.  rendezvous, rendezvous-cache
 *                          (counted by the target, which always gets asked):
 *                          the peer's requests we served with a
 *                          registration we already had (rendezvous-cache:
 *                          the frame was registered) / that needed a new
 *                          one (rendezvous: every request)
 *   reg_moves              strategy messages we sent to the peer (firehose
 *                          moves, rendezvous (de)registration requests,
 *                          bounce data AMs); not counted in am_sent
 *   reg_evictions          firehose: victim regions deregistered whose last
 *                          holder was the peer; our own row adds regions
 *                          that only local pins ever used
 *   reg_pending_coalesced  firehose: operations that waited on a move
 *                          another operation had sent
 *   reg_put_in_move        firehose: puts whose data rode in the move
 *   bytes_pinned_remote    bytes registered here for the peer now
 *   bytes_pinned_local     bytes registered here for our own operations now
 *                          (firehose local pins; own row only)
 *   reg_victims            firehose: per peer, our unused firehoses on it
 *                          (its victims when we need room); own row: our
 *                          victim FIFO length (regions)
 *   reg_registrations,     memory registrations made here for the peer's
 *   reg_unregistrations    requests, and released (firehose: regions
 *                          created by its moves / evictions; own row also
 *                          counts invalidated regions deregistered;
 *                          rendezvous: one of each per chunk (one
 *                          not released by the peer is released when
 *                          its segment is destroyed);
 *                          rendezvous-cache: one per frame, released when
 *                          the segment is destroyed)
 *   reg_refused            the peer's requests we refused (outside our
 *                          segments, malformed, over its budget)
 *   reg_invalidations      firehose: our regions dropped because the
 *                          memory monitor saw their memory freed (own row)
 *   reg_revokes_sent       firehose: REVOKEs we sent to holders of such
 *                          regions (own row)
 *   reg_revoked            firehose: our firehoses on the peer that it
 *                          revoked (own row: the sum)
 *   reg_revoked_busy       firehose: of those, cached references with RDMA
 *                          in flight when the REVOKE arrived (the ack left
 *                          after that RDMA completed)
 *   am_dropped             packets from the peer we dropped: malformed,
 *                          oversized, runt, a header claiming another
 *                          sender, an unregistered handler, a long payload
 *                          outside our segments (docs/security.md); the
 *                          own row (total) also counts packets that came
 *                          from outside the job
 *   atomics_refused        the peer's atomic requests we refused with an
 *                          error reply: unknown op or width, a 32-bit
 *                          operand over 32 bits, misaligned, outside our
 *                          segments (a correct initiator never sends them)
 *   reg_maxvictim_now      firehose, own row: the effective MAXVICTIM (a
 *                          gauge; moves with FH_FIREHOSE_VICTIM=adaptive)
 *   reg_victim_repins      firehose, own row: registrations that met a
 *                          bucket of a recently deregistered victim
 *   reg_budget             firehose: bytes of firehoses we may hold on the
 *                          peer now (FH_FIREHOSE_BUDGET: static = F; own
 *                          row: the sum)
 *   reg_grants             firehose, adaptive: raises of the peer's budget
 *                          on us we granted
 *   reg_reclaims           firehose, adaptive: RECLAIMs (budget lowered) we
 *                          sent the peer, plus those of the peer we obeyed
 *   reg_deferred           firehose, adaptive: the peer's moves we deferred
 *                          until other peers gave bytes back
 *   am_credit_msgs         AM flow-control messages of their own we sent the
 *                          peer: credits for its requests that found no
 *                          request or reply of ours to ride on (half a
 *                          window at once, or what is owed after a run of
 *                          empty polls); a 2-rank barrier loop sends almost
 *                          none
 *   links_lost             connections with the peer lost after start-up,
 *                          one per path and link (ofi message endpoints:
 *                          a thread path's is made again, the service
 *                          paths' is not; docs/reliability.md)
 *   reg_reaims             firehose, FH_SEGMENT=everything: moves that asked
 *                          the peer to register another run of a bucket's
 *                          memory (the op's bytes lay outside its region);
 *                          the own row adds the regions we freed to do so
 *                          for peers (docs/firehose-cache.md "Re-aim")
 *   reg_copies             firehose, FH_SEGMENT=everything: copy messages
 *                          sent to the peer for chunks it would not
 *                          register (a file mapping; the other run of a
 *                          region another transfer holds), plus those we
 *                          served for it (docs/reliability.md); refused
 *                          ones count in reg_refused too
 * (reg_maxvictim_now .. am_credit_msgs: version 2; links_lost, reg_reaims:
 * version 3; reg_copies: version 4) */
typedef struct fh_peer_stats {
    uint32_t size;     /* in: bytes the caller's struct has (the
                          FH_PEER_STATS_INIT it was built with); out: bytes
                          filled, min(size, the library's sizeof) */
    uint32_t version;  /* out: the library's FH_PEER_STATS_VERSION (new
                          versions only append counters) */
    uint64_t puts, gets, put_bytes, get_bytes;
    uint64_t am_sent, am_received, atomics;  /* AMs exclude the registration
                                                 strategy's (see reg_moves) */
    uint64_t reg_hits, reg_misses, reg_moves, reg_evictions;
    uint64_t reg_pending_coalesced, reg_put_in_move;
    uint64_t bytes_pinned_remote;
    uint64_t bytes_pinned_local;
    uint64_t reg_victims;
    uint64_t reg_registrations, reg_unregistrations;
    uint64_t reg_refused;
    uint64_t reg_invalidations, reg_revokes_sent, reg_revoked;
    uint64_t reg_revoked_busy;
    uint64_t am_dropped;
    uint64_t atomics_refused;
    /* version 2 */
    uint64_t reg_maxvictim_now;  /* firehose, own row: the effective MAXVICTIM
                                    (FH_FIREHOSE_VICTIM=adaptive moves it) */
    uint64_t reg_victim_repins;  /* firehose, own row: registrations of
                                    buckets among the last deregistered
                                    victims (they would have hit with a
                                    larger victim FIFO) */
    uint64_t reg_budget, reg_grants, reg_reclaims, reg_deferred;
    uint64_t am_credit_msgs;
    /* version 3 */
    uint64_t links_lost;
    uint64_t reg_reaims;
    /* version 4 */
    uint64_t reg_copies;
} fh_peer_stats_t;

#define FH_PEER_STATS_VERSION 4
/* Every fh_peer_stats_t passed to fh_stats_peer starts like this:
 *   fh_peer_stats_t s = FH_PEER_STATS_INIT; */
#define FH_PEER_STATS_INIT \
    { .size = (uint32_t)sizeof(fh_peer_stats_t), .version = FH_PEER_STATS_VERSION }

/* Counters for `rank` (this rank gives the local totals) into the first
 * out->size bytes of *out (the library's counters a caller built against
 * an older header does not know are left out; a newer caller's extra
 * counters are left alone); out->size and out->version then describe what
 * was filled.  Values are read without stopping other threads, so they may
 * be slightly out of date.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: yes.
 * Errors: FH_ERR_NOT_INIT; FH_ERR_INVALID for a NULL out or an out->size
 * smaller than the size/version header (8 bytes: a struct not set up with
 * FH_PEER_STATS_INIT); FH_ERR_RANK. */
int fh_stats_peer(int rank, fh_peer_stats_t *out);

/* Human-readable statistics to the given stdio FILE* (void * to keep
 * <stdio.h> out of this header; NULL = stderr).  Also done at fh_finalize
 * with FH_STATS=1.  Write errors of the FILE* are not reported.
 * Blocking: yes (stdio may wait for the file; it never waits for other
 * ranks).  Thread-safe: yes.  Handler-safe: no.
 * Errors: FH_ERR_NOT_INIT; FH_ERR_IN_HANDLER. */
int fh_stats_print(void *file);

/* ----------------------------------------------------------------- query */

/* What this runtime is running with, for clients that adapt to it (e.g.
 * whether any mapped address is an RMA target).  Set up with FH_INFO_INIT;
 * fh_query fills min(size, the library's sizeof) bytes, like
 * fh_stats_peer.  Every string is static (valid for the life of the
 * process, also after fh_finalize). */
typedef struct fh_info {
    uint32_t size;            /* in: sizeof the caller's struct; out: filled */
    uint32_t version;         /* out: the library's FH_INFO_VERSION */
    const char *conduit;      /* "ofi" or "ibv" (FH_CONDUIT after auto) */
    const char *reg_strategy; /* FH_REG_STRATEGY: "firehose", "pin-everything",
                                 "rendezvous", "rendezvous-cache", "bounce" */
    const char *segment_mode; /* FH_SEGMENT: "segments" or "everything" */
    const char *paths;        /* FH_PATHS: "independent", "shared" or "lazy" */
    const char *bootstrap;    /* "fhrun", "pmix" or "singleton" */
    int rank, nranks;
    int npaths;               /* communication paths per rank, the service
                                 path included (1 with FH_PATHS=shared) */
    int any_address;          /* 1: an RMA target may be any mapped address
                                 of the target rank (FH_SEGMENT=everything),
                                 0: only addresses inside segments */
    int needs_local_mr;       /* 1: the conduit needs registered local
                                 buffers (ibv): local buffers outside the
                                 segments cost a registration */
} fh_info_t;

#define FH_INFO_VERSION 1
#define FH_INFO_INIT { .size = (uint32_t)sizeof(fh_info_t), .version = FH_INFO_VERSION }

/* Fills *info as described above.
 * Blocking: no.  Thread-safe: yes.  Handler-safe: yes.
 * Errors: FH_ERR_NOT_INIT (before fh_init, after fh_finalize);
 * FH_ERR_INVALID for a NULL info or an info->size smaller than the
 * size/version header (8 bytes). */
int fh_query(fh_info_t *info);

#ifdef __cplusplus
}
#endif
#endif /* FIREHOSE_H */
