/*
 * ofi_auth.h -- who may connect to whom: the per-pair secrets of the ofi
 * conduit and the three messages that authenticate a connection between
 * message endpoints (FH_OFI_ENDPOINT=msg, ofi_cm.c).
 *
 * Pure logic over OpenSSL's libcrypto, no libfabric call, so that
 * tests/fuzz/ofi_cm_fuzz.c can feed the checks arbitrary bytes.
 *
 * Secrets.  Every rank draws an X25519 key pair at open; the public halves
 * travel in the conduit's bootstrap allgather (public: whoever reads them
 * learns nothing).  Ranks a and b then share
 *     k_ab = HKDF-SHA256(ikm  = X25519(sk_a, pk_b),
 *                        salt = job id,
 *                        info = "firehose ofi pair" || min(a,b) || max(a,b))
 * which only a and b can compute: no third rank, no launcher, no PMIx
 * server learns it.  The job id is the first 16 bytes of SHA-256 over every
 * rank's public key, so two jobs never share a secret.  The private key is
 * wiped once the pair secrets exist.
 *
 * Handshake (C connects to A; both know k = k_CA):
 *   1. C -> A, in fi_connect's data:  req = {magic, version, kind 1,
 *      src (C's rank, path), dst (A's rank, path), job id, nonce_C}
 *   2. A -> C, in fi_accept's data:   acc = {magic, version, kind 2,
 *      nonce_A, HMAC(k, "fh-ofi-acc" || req || nonce_A)}
 *   3. C -> A, C's first message:     proof = {magic, version, kind 3,
 *      HMAC(k, "fh-ofi-con" || req || acc)}
 * C believes A after 2 (its own fresh nonce is under A's MAC); A believes C
 * after 3 (A's fresh nonce is under C's MAC).  One label per direction, so
 * a MAC cannot be reflected; fresh nonces on both sides, so a recorded
 * handshake replays into nothing.  Until 3 checks out A delivers nothing
 * from the connection; it closes it when the proof is wrong, late or
 * absent.  Integers are little endian on the wire.
 */
#ifndef FH_OFI_AUTH_H
#define FH_OFI_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define OFI_CM_MAGIC   0x6d636866u   /* "fhcm" little endian */
#define OFI_CM_VERSION 1
enum ofi_cm_kind { OFI_CM_REQ = 1, OFI_CM_ACC = 2, OFI_CM_PROOF = 3 };

#define OFI_PUB_BYTES   32           /* X25519 public key */
#define OFI_JOB_BYTES   16
#define OFI_NONCE_BYTES 16
#define OFI_MAC_BYTES   32           /* HMAC-SHA256 */
#define OFI_KEY_BYTES   32           /* a pair secret */

struct ofi_cm_req {
    uint32_t magic;
    uint16_t version, kind;
    uint32_t src_rank, src_path;     /* who the connector says it is */
    uint32_t dst_rank, dst_path;     /* whom it wants */
    uint8_t  job[OFI_JOB_BYTES];
    uint8_t  nonce[OFI_NONCE_BYTES];
};
struct ofi_cm_acc {
    uint32_t magic;
    uint16_t version, kind;
    uint8_t  nonce[OFI_NONCE_BYTES];
    uint8_t  mac[OFI_MAC_BYTES];
};
struct ofi_cm_proof {
    uint32_t magic;
    uint16_t version, kind;
    uint8_t  mac[OFI_MAC_BYTES];
};
_Static_assert(sizeof(struct ofi_cm_req) == 56, "ofi_cm_req wire size");
_Static_assert(sizeof(struct ofi_cm_acc) == 56, "ofi_cm_acc wire size");
_Static_assert(sizeof(struct ofi_cm_proof) == 40, "ofi_cm_proof wire size");

/* One rank's secrets.  Not thread-safe; used by the conduit's life-cycle
 * ops and by path 0's poll only. */
struct ofi_auth {
    int rank, nranks, npaths;
    void *pkey;                      /* EVP_PKEY *: ours, until derive */
    uint8_t pub[OFI_PUB_BYTES];      /* our public key */
    uint8_t job[OFI_JOB_BYTES];
    uint8_t (*pair)[OFI_KEY_BYTES];  /* [nranks] after derive */
};

/* Draws our key pair.  FH_OK, FH_ERR_NO_MEMORY or FH_ERR_TRANSPORT (with
 * fh_set_error). */
int  ofi_auth_init(struct ofi_auth *a, int rank, int nranks, int npaths);
/* Computes the job id and every pair secret from the allgathered public
 * keys (pubs: nranks * OFI_PUB_BYTES), then wipes the private key.  A
 * public key that yields no secret (a low-order point) fails: FH_ERR_*
 * naming the rank. */
int  ofi_auth_derive(struct ofi_auth *a, const uint8_t *pubs);
/* Wipes and frees everything.  Safe on a zeroed or half-built struct. */
void ofi_auth_fini(struct ofi_auth *a);

/* The connector's request (fresh nonce): FH_OK or FH_ERR_TRANSPORT. */
int  ofi_cm_req_make(const struct ofi_auth *a, int src_path, int dst_rank,
                     int dst_path, struct ofi_cm_req *req);
/* Checks a request that arrived at our listener (len bytes of connection
 * data): right size, magic, version, kind and job, addressed to our service
 * path, from a (rank, path) of the job that may connect to it.  Fills *req
 * (host byte order) on success; else returns why it was refused. */
const char *ofi_cm_req_check(const struct ofi_auth *a, const void *buf,
                             size_t len, struct ofi_cm_req *req);
/* The acceptor's answer to a checked request: FH_OK or FH_ERR_TRANSPORT. */
int  ofi_cm_acc_make(const struct ofi_auth *a, const struct ofi_cm_req *req,
                     struct ofi_cm_acc *acc);
/* The connector checks the acceptance of its own req: NULL or why not. */
const char *ofi_cm_acc_check(const struct ofi_auth *a,
                             const struct ofi_cm_req *req, const void *buf,
                             size_t len, struct ofi_cm_acc *acc);
/* The connector's proof, and the acceptor's check of it (NULL or why not). */
void ofi_cm_proof_make(const struct ofi_auth *a, const struct ofi_cm_req *req,
                       const struct ofi_cm_acc *acc, struct ofi_cm_proof *pr);
const char *ofi_cm_proof_check(const struct ofi_auth *a,
                               const struct ofi_cm_req *req,
                               const struct ofi_cm_acc *acc, const void *buf,
                               size_t len);

#endif /* FH_OFI_AUTH_H */
