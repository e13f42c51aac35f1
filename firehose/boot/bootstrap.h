/*
 * bootstrap.h -- how ranks find each other before the network is up.
 *
 * Three implementations, chosen by fh_boot_open() from the environment:
 *   fhrun      FH_BOOT_ADDR + FH_JOB_KEY + FH_RANK + FH_NRANKS are set by
 *              tools/fhrun: a connection to the launcher's private socket
 *              ("unix:/path" or "tcp:host:port"); rank and launcher prove
 *              to each other that they know the per-job key, which is never
 *              sent.  A watchdog thread blocks on that socket: when the
 *              launcher reports a dead rank (or disappears), this process
 *              prints a message naming the dead rank and exits non-zero.
 *   pmix       PMIX_NAMESPACE + PMIX_RANK are set (mpirun, srun, prun):
 *              PMIx_Init, PMIx_Put/Commit/Fence/Get.  Built only when
 *              configure found OpenPMIx.
 *   singleton  none of the above: one rank, no exchange.
 *
 * All calls are collective over all ranks and blocking; they are used only at
 * init/finalize and for rare metadata exchange, never on a fast path.  They
 * are not thread-safe: the runtime serializes them.
 */
#ifndef FH_BOOTSTRAP_H
#define FH_BOOTSTRAP_H

#include <stddef.h>

struct fh_boot;

typedef struct fh_boot_ops {
    const char *name;  /* "fhrun", "pmix", "singleton" */
    /* out receives nranks * len bytes, rank i's contribution at i * len. */
    int  (*allgather)(struct fh_boot *b, const void *in, void *out, size_t len);
    int  (*barrier)(struct fh_boot *b);
    /* Ends the whole job (all ranks) with a message.  Never returns. */
    void (*abort)(struct fh_boot *b, int code, const char *msg)
        __attribute__((noreturn));
    /* Orderly end (after a final barrier by the runtime). Frees b. */
    void (*finalize)(struct fh_boot *b);
    /* This rank's fh_init failed (why: the reason, may be NULL): tell the
     * launcher and the other ranks, then free b.  Returns; never ends the
     * process.  Under fhrun, the other ranks' pending and later allgathers
     * return FH_ERR_BOOTSTRAP, fh_last_error() naming this rank and why, so
     * their fh_init fails too instead of waiting; under PMIx the launcher
     * ends the job once this process exits (peers wait in a fence until
     * then); a singleton has nobody to tell. */
    void (*fail)(struct fh_boot *b, const char *why);
} fh_boot_ops_t;

typedef struct fh_boot {
    const fh_boot_ops_t *ops;
    int rank, nranks;
    /* Ranks on this host (for the conduit: shared-memory decisions). */
    int local_rank, local_nranks;
    void *priv;
} fh_boot_t;

/* Picks and initializes the bootstrap described above.  Returns FH_OK or
 * FH_ERR_BOOTSTRAP with a logged explanation (e.g. "FH_JOB_KEY rejected by
 * the launcher", "cannot connect to unix:/tmp/fhrun.X/sock: ..."). */
int fh_boot_open(fh_boot_t **out);

/* Wire protocol between tools/fhrun and boot_fhrun.c (shared definitions).
 * All integers little-endian uint32 unless noted.
 *
 * Handshake: mutual challenge-response; the job key never crosses the wire
 * (the same on the unix socket and over TCP, --listen).  MAC = HMAC-SHA256
 * keyed with the job key, one label per direction (boot_wire.h).
 *   1. rank -> launcher, hello:   "FHB2" magic, nonce_R (FH_BOOT_NONCE_BYTES
 *                                 fresh random bytes).
 *   2. launcher -> rank, challenge: "FHB2" magic, nonce_L (fresh random);
 *                                 or, on a bad magic, a non-zero status word
 *                                 and the launcher closes.
 *   3. rank -> launcher, proof:   rank, pid,
 *                                 MAC("fhrun-rank", nonce_R, nonce_L, rank, pid).
 *   4. launcher -> rank:          a status word: non-zero = refused (wrong
 *                                 MAC, i.e. wrong key; out-of-range or
 *                                 duplicate rank) and the launcher closes;
 *                                 0 = accepted, followed by
 *                                 MAC("fhrun-launcher", nonce_R, nonce_L,
 *                                 rank, pid), which the rank checks before it
 *                                 trusts anything from this launcher.
 * The launcher looks at rank and pid only once the rank's MAC is verified.
 * After the handshake the stream is neither encrypted nor authenticated
 * message by message (it carries endpoint addresses, nothing secret):
 *   rank -> launcher:         op word + payload:
 *        FH_BOOT_OP_ALLGATHER  len, then len bytes
 *        FH_BOOT_OP_ABORT      code, msglen, msg
 *        FH_BOOT_OP_FINALIZE   (no payload; launcher may close the socket)
 *        FH_BOOT_OP_INITFAIL   code (0), msglen, msg: this rank's fh_init
 *                              failed; the launcher closes the socket and
 *                              tells the others (MSG_DEAD, status
 *                              FH_BOOT_DEAD_INIT_FAILED)
 *   launcher -> rank:         FH_BOOT_MSG_ALLGATHER len*nranks bytes follow
 *                             FH_BOOT_MSG_DEAD      dead rank, status, msglen, msg
 * A barrier is an allgather of zero bytes.  A rank that presents a wrong key
 * or an out-of-range or duplicate rank is refused and logged by the
 * launcher; the job goes on.  A rank whose launcher fails to prove it knows
 * the key refuses to run. */
#define FH_BOOT_MAGIC          0x32424846u  /* "FHB2" (2: no key on the wire) */
#define FH_KEY_BYTES           32
#define FH_BOOT_NONCE_BYTES    32
#define FH_BOOT_MAC_BYTES      32           /* HMAC-SHA256 */
#define FH_BOOT_OP_ALLGATHER   1u
#define FH_BOOT_OP_ABORT       2u
#define FH_BOOT_OP_FINALIZE    3u
#define FH_BOOT_OP_INITFAIL    4u
#define FH_BOOT_MSG_ALLGATHER  0x101u
#define FH_BOOT_MSG_DEAD       0x102u
/* MSG_DEAD status: the rank did not die, its fh_init failed (it may still
 * run); the receiving rank's collectives fail instead of ending it. */
#define FH_BOOT_DEAD_INIT_FAILED 0xfffffff1u

/* Exit status of a rank that ends because a peer died. */
#define FH_EXIT_PEER_DEAD      70

#endif /* FH_BOOTSTRAP_H */
