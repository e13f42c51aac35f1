/*
 * ofi_auth.c -- per-pair secrets and the connection handshake (ofi_auth.h).
 *
 * Who connects to whom (ofi_cm.c) is part of what a request must satisfy:
 * a thread path (r, p >= 1) connects to the service path of every rank,
 * itself included; service paths connect to the service paths of ranks
 * not below their own.  So our listener accepts (r, p >= 1) from anyone
 * and (r, 0) only from r <= us.
 */
#include "ofi_auth.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include "firehose.h"
#include "firehose/util/log.h"

static const char pair_info[] = "firehose ofi pair";
static const char label_acc[] = "fh-ofi-acc";
static const char label_con[] = "fh-ofi-con";

int ofi_auth_init(struct ofi_auth *a, int rank, int nranks, int npaths)
{
    memset(a, 0, sizeof *a);
    a->rank = rank;
    a->nranks = nranks;
    a->npaths = npaths;
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "X25519");
    size_t publen = sizeof a->pub;
    if (k == NULL || EVP_PKEY_get_raw_public_key(k, a->pub, &publen) != 1 ||
        publen != sizeof a->pub) {
        EVP_PKEY_free(k);
        return fh_set_error(FH_ERR_TRANSPORT, "ofi: cannot draw an X25519 key pair");
    }
    a->pkey = k;
    return FH_OK;
}

void ofi_auth_fini(struct ofi_auth *a)
{
    EVP_PKEY_free(a->pkey);
    a->pkey = NULL;
    if (a->pair != NULL) {
        OPENSSL_cleanse(a->pair, (size_t)a->nranks * OFI_KEY_BYTES);
        free(a->pair);
        a->pair = NULL;
    }
}

/* The X25519 secret with one peer, then HKDF into the pair secret. */
static int derive_one(struct ofi_auth *a, int peer, const uint8_t *pub,
                      uint8_t out[OFI_KEY_BYTES])
{
    uint8_t shared[32];
    size_t slen = sizeof shared;
    int ok = 0;
    EVP_PKEY *pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, pub,
                                               OFI_PUB_BYTES);
    EVP_PKEY_CTX *dc = pk ? EVP_PKEY_CTX_new(a->pkey, NULL) : NULL;
    /* OpenSSL refuses a low-order peer key (an all-zero shared secret). */
    if (dc && EVP_PKEY_derive_init(dc) == 1 && EVP_PKEY_derive_set_peer(dc, pk) == 1 &&
        EVP_PKEY_derive(dc, shared, &slen) == 1 && slen == sizeof shared) {
        uint8_t info[sizeof pair_info - 1 + 8];
        uint32_t lo = htole32((uint32_t)(peer < a->rank ? peer : a->rank));
        uint32_t hi = htole32((uint32_t)(peer < a->rank ? a->rank : peer));
        memcpy(info, pair_info, sizeof pair_info - 1);
        memcpy(info + sizeof pair_info - 1, &lo, 4);
        memcpy(info + sizeof pair_info + 3, &hi, 4);
        EVP_PKEY_CTX *kc = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
        size_t olen = OFI_KEY_BYTES;
        ok = kc && EVP_PKEY_derive_init(kc) == 1 &&
             EVP_PKEY_CTX_set_hkdf_md(kc, EVP_sha256()) == 1 &&
             EVP_PKEY_CTX_set1_hkdf_salt(kc, a->job, OFI_JOB_BYTES) == 1 &&
             EVP_PKEY_CTX_set1_hkdf_key(kc, shared, (int)slen) == 1 &&
             EVP_PKEY_CTX_add1_hkdf_info(kc, info, (int)sizeof info) == 1 &&
             EVP_PKEY_derive(kc, out, &olen) == 1 && olen == OFI_KEY_BYTES;
        EVP_PKEY_CTX_free(kc);
    }
    OPENSSL_cleanse(shared, sizeof shared);
    EVP_PKEY_CTX_free(dc);
    EVP_PKEY_free(pk);
    return ok ? FH_OK
              : fh_set_error(FH_ERR_TRANSPORT, "ofi: no pair secret with %s "
                             "(its public key is unusable)", FH_RANK_NAME(peer));
}

int ofi_auth_derive(struct ofi_auth *a, const uint8_t *pubs)
{
    if (a->pkey == NULL)
        return fh_set_error(FH_ERR_STATE, "ofi: pair secrets derived twice");
    if (memcmp(pubs + (size_t)a->rank * OFI_PUB_BYTES, a->pub, OFI_PUB_BYTES) != 0)
        return fh_set_error(FH_ERR_BOOTSTRAP, "ofi: the bootstrap returned another "
                            "public key for this rank");
    uint8_t digest[32];
    unsigned dlen = 0;
    if (EVP_Digest(pubs, (size_t)a->nranks * OFI_PUB_BYTES, digest, &dlen,
                   EVP_sha256(), NULL) != 1)
        return fh_set_error(FH_ERR_TRANSPORT, "ofi: SHA-256 failed");
    memcpy(a->job, digest, OFI_JOB_BYTES);
    a->pair = calloc((size_t)a->nranks, OFI_KEY_BYTES);
    if (a->pair == NULL)
        return FH_ERR_NO_MEMORY;
    for (int r = 0; r < a->nranks; r++) {
        int rc = derive_one(a, r, pubs + (size_t)r * OFI_PUB_BYTES, a->pair[r]);
        if (rc != FH_OK)
            return rc;
    }
    EVP_PKEY_free(a->pkey);
    a->pkey = NULL;
    return FH_OK;
}

/* HMAC-SHA256(k_peer, label || x || y). */
static void mac3(const struct ofi_auth *a, int peer, const char *label,
                 const void *x, size_t xl, const void *y, size_t yl,
                 uint8_t out[OFI_MAC_BYTES])
{
    uint8_t msg[16 + sizeof(struct ofi_cm_req) + sizeof(struct ofi_cm_acc)];
    size_t ll = strlen(label);
    size_t n = 0;
    memcpy(msg + n, label, ll);
    n += ll;
    memcpy(msg + n, x, xl);
    n += xl;
    memcpy(msg + n, y, yl);
    n += yl;
    unsigned olen = 0;
    if (HMAC(EVP_sha256(), a->pair[peer], OFI_KEY_BYTES, msg, n, out, &olen) == NULL ||
        olen != OFI_MAC_BYTES)
        fh_fatal("ofi: HMAC-SHA256 failed");
}

static void head(uint32_t *magic, uint16_t *version, uint16_t *kind, int k)
{
    *magic = htole32(OFI_CM_MAGIC);
    *version = htole16(OFI_CM_VERSION);
    *kind = htole16((uint16_t)k);
}

static int head_ok(uint32_t magic, uint16_t version, uint16_t kind, int k)
{
    return le32toh(magic) == OFI_CM_MAGIC && le16toh(version) == OFI_CM_VERSION &&
           le16toh(kind) == k;
}

int ofi_cm_req_make(const struct ofi_auth *a, int src_path, int dst_rank,
                    int dst_path, struct ofi_cm_req *req)
{
    memset(req, 0, sizeof *req);
    head(&req->magic, &req->version, &req->kind, OFI_CM_REQ);
    req->src_rank = htole32((uint32_t)a->rank);
    req->src_path = htole32((uint32_t)src_path);
    req->dst_rank = htole32((uint32_t)dst_rank);
    req->dst_path = htole32((uint32_t)dst_path);
    memcpy(req->job, a->job, OFI_JOB_BYTES);
    if (RAND_bytes(req->nonce, OFI_NONCE_BYTES) != 1)
        return fh_set_error(FH_ERR_TRANSPORT, "ofi: RAND_bytes failed");
    return FH_OK;
}

const char *ofi_cm_req_check(const struct ofi_auth *a, const void *buf,
                             size_t len, struct ofi_cm_req *req)
{
    if (buf == NULL || len != sizeof *req)
        return "connection request of the wrong size";
    memcpy(req, buf, sizeof *req);
    if (!head_ok(req->magic, req->version, req->kind, OFI_CM_REQ))
        return "connection request without this conduit's magic/version";
    if (CRYPTO_memcmp(req->job, a->job, OFI_JOB_BYTES) != 0)
        return "connection request for another job";
    uint32_t sr = le32toh(req->src_rank), sp = le32toh(req->src_path);
    if (le32toh(req->dst_rank) != (uint32_t)a->rank || le32toh(req->dst_path) != 0)
        return "connection request addressed to another endpoint";
    if (sr >= (uint32_t)a->nranks || sp >= (uint32_t)a->npaths)
        return "connection request from a (rank, path) outside the job";
    if (sp == 0 && sr > (uint32_t)a->rank)
        return "connection request from a service path that should be accepting";
    return NULL;
}

int ofi_cm_acc_make(const struct ofi_auth *a, const struct ofi_cm_req *req,
                    struct ofi_cm_acc *acc)
{
    memset(acc, 0, sizeof *acc);
    head(&acc->magic, &acc->version, &acc->kind, OFI_CM_ACC);
    if (RAND_bytes(acc->nonce, OFI_NONCE_BYTES) != 1)
        return fh_set_error(FH_ERR_TRANSPORT, "ofi: RAND_bytes failed");
    mac3(a, (int)le32toh(req->src_rank), label_acc, req, sizeof *req, acc->nonce,
         OFI_NONCE_BYTES, acc->mac);
    return FH_OK;
}

const char *ofi_cm_acc_check(const struct ofi_auth *a,
                             const struct ofi_cm_req *req, const void *buf,
                             size_t len, struct ofi_cm_acc *acc)
{
    if (buf == NULL || len != sizeof *acc)
        return "acceptance of the wrong size";
    memcpy(acc, buf, sizeof *acc);
    if (!head_ok(acc->magic, acc->version, acc->kind, OFI_CM_ACC))
        return "acceptance without this conduit's magic/version";
    uint8_t want[OFI_MAC_BYTES];
    mac3(a, (int)le32toh(req->dst_rank), label_acc, req, sizeof *req, acc->nonce,
         OFI_NONCE_BYTES, want);
    return CRYPTO_memcmp(want, acc->mac, OFI_MAC_BYTES) == 0
               ? NULL : "acceptance not signed with the pair's secret";
}

void ofi_cm_proof_make(const struct ofi_auth *a, const struct ofi_cm_req *req,
                       const struct ofi_cm_acc *acc, struct ofi_cm_proof *pr)
{
    memset(pr, 0, sizeof *pr);
    head(&pr->magic, &pr->version, &pr->kind, OFI_CM_PROOF);
    mac3(a, (int)le32toh(req->dst_rank), label_con, req, sizeof *req, acc,
         sizeof *acc, pr->mac);
}

const char *ofi_cm_proof_check(const struct ofi_auth *a,
                               const struct ofi_cm_req *req,
                               const struct ofi_cm_acc *acc, const void *buf,
                               size_t len)
{
    struct ofi_cm_proof pr;
    if (buf == NULL || len != sizeof pr)
        return "first message is not a connection proof (wrong size)";
    memcpy(&pr, buf, sizeof pr);
    if (!head_ok(pr.magic, pr.version, pr.kind, OFI_CM_PROOF))
        return "first message is not a connection proof";
    uint8_t want[OFI_MAC_BYTES];
    mac3(a, (int)le32toh(req->src_rank), label_con, req, sizeof *req, acc,
         sizeof *acc, want);
    return CRYPTO_memcmp(want, pr.mac, OFI_MAC_BYTES) == 0
               ? NULL : "connection proof not signed with the pair's secret";
}
