/*
 * boot_wire.h -- helpers shared by fhrun (tools/launcher/) and boot_fhrun.c
 * for the wire protocol defined in bootstrap.h (header-only: fhrun links no
 * bootstrap code).
 *
 * Conventions layered on bootstrap.h (both sides are in this tree):
 *   - the launcher's non-zero status word on refusal is one of
 *     FH_BOOT_REFUSED_*;
 *   - a connection the launcher closes before it sent its challenge or its
 *     status word is not a refusal: it closes handshakes that take too long
 *     and makes room when strangers fill its slots
 *     (tools/launcher/handshake.c), and the rank retries on a new
 *     connection, with backoff, until FH_BOOT_TIMEOUT.  Status 0 followed
 *     by a close instead of the launcher's proof is final;
 *   - FH_BOOT_MSG_ALLGATHER carries no length word: the rank knows it
 *     (len * nranks of the request it is waiting on);
 *   - FH_BOOT_MSG_DEAD: "status" is the rank's exit status, or 128 + signal,
 *     or FH_BOOT_DEAD_INIT_FAILED (the rank's fh_init failed, it lives on);
 *     msg is "<pid> <reason>" (reason e.g. "killed by signal 9 (Killed)").
 *     A dead rank of FH_BOOT_RANK_LAUNCHER means the launcher itself aborted
 *     the job (msg is then just the reason).
 *
 * The handshake's MACs (see bootstrap.h for the messages) are HMAC-SHA256
 * from OpenSSL's libcrypto, keyed with the 32-byte job key, over
 *     label || nonce_R || nonce_L || rank || pid      (rank, pid: u32 LE)
 * where label is "fhrun-rank" or "fhrun-launcher" with its terminating NUL.
 * Both sides' fresh nonces are in both MACs, so an old proof never verifies
 * again; the label differs by direction, so a proof cannot be reflected back
 * to the side that made it.
 */
#ifndef FH_BOOT_WIRE_H
#define FH_BOOT_WIRE_H

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "bootstrap.h"
#include "firehose/util/clock.h"
#include "firehose/util/config.h"

#define FH_BOOT_HELLO_BYTES     (4 + FH_BOOT_NONCE_BYTES)
#define FH_BOOT_CHALLENGE_BYTES (4 + FH_BOOT_NONCE_BYTES)
#define FH_BOOT_PROOF_BYTES     (4 + 4 + FH_BOOT_MAC_BYTES)
#define FH_BOOT_ACCEPT_BYTES    (4 + FH_BOOT_MAC_BYTES)
#define FH_BOOT_LABEL_RANK      "fhrun-rank"
#define FH_BOOT_LABEL_LAUNCHER  "fhrun-launcher"
#define FH_BOOT_REFUSED_KEY     1u   /* bad magic or job key */
#define FH_BOOT_REFUSED_RANK    2u   /* rank out of range */
#define FH_BOOT_REFUSED_DUP     3u   /* rank already connected / finished */
#define FH_BOOT_RANK_LAUNCHER   0xffffffffu
#define FH_BOOT_MAX_MSG         65536u  /* abort / dead message text */

/* FH_BOOT_TIMEOUT from the environment, the one parser of it outside the
 * config table: the bootstrap (boot.c) and fhrun read it before, or
 * without, fh_init's configuration.  Returns 0 with *seconds set (to
 * FH_BOOT_TIMEOUT_DEFAULT when unset or empty), or -1 with *seconds
 * untouched and the reason in err when the value is not a whole number of
 * seconds in 1..INT_MAX/1000 (so milliseconds fit an int). */
static inline int fh_boot_timeout_env(int *seconds, char *err, size_t errlen)
{
    const char *s = getenv("FH_BOOT_TIMEOUT");
    if (!s || !*s) {
        *seconds = FH_BOOT_TIMEOUT_DEFAULT;
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > INT_MAX / 1000) {
        snprintf(err, errlen, "FH_BOOT_TIMEOUT=%s: expected a number of "
                 "seconds, at least 1", s);
        return -1;
    }
    *seconds = (int)v;
    return 0;
}

static inline void fh_put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static inline uint32_t fh_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* Hex <-> bytes.  fh_unhex returns 0 on success, -1 on a malformed string. */
static inline void fh_hex(const unsigned char *in, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[in[i] >> 4];
        out[2 * i + 1] = d[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static inline int fh_hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static inline int fh_unhex(const char *s, unsigned char *out, size_t n)
{
    if (strlen(s) != 2 * n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int hi = fh_hexval(s[2 * i]), lo = fh_hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

/* A fresh handshake nonce from the kernel's CSPRNG (as the job key is).
 * Returns 0, or -1 with errno set. */
static inline int fh_boot_nonce(unsigned char out[FH_BOOT_NONCE_BYTES])
{
    size_t have = 0;
    while (have < FH_BOOT_NONCE_BYTES) {
        ssize_t r = getrandom(out + have, FH_BOOT_NONCE_BYTES - have, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        have += (size_t)r;
    }
    return 0;
}

/* One handshake MAC (the construction is in the comment at the top).
 * Returns 0, or -1 if libcrypto failed: the caller must then end the
 * handshake (out is zeroed, which an attacker could also send). */
static inline int fh_boot_mac(const unsigned char key[FH_KEY_BYTES],
                              const char *label,
                              const unsigned char nonce_r[FH_BOOT_NONCE_BYTES],
                              const unsigned char nonce_l[FH_BOOT_NONCE_BYTES],
                              uint32_t rank, uint32_t pid,
                              unsigned char out[FH_BOOT_MAC_BYTES])
{
    unsigned char msg[32 + 2 * FH_BOOT_NONCE_BYTES + 8];
    size_t ll = strlen(label) + 1, n = 0;
    if (ll > 32) {
        memset(out, 0, FH_BOOT_MAC_BYTES);
        return -1;
    }
    memcpy(msg, label, ll);
    n += ll;
    memcpy(msg + n, nonce_r, FH_BOOT_NONCE_BYTES);
    n += FH_BOOT_NONCE_BYTES;
    memcpy(msg + n, nonce_l, FH_BOOT_NONCE_BYTES);
    n += FH_BOOT_NONCE_BYTES;
    fh_put_u32(msg + n, rank);
    fh_put_u32(msg + n + 4, pid);
    n += 8;
    unsigned int outlen = 0;
    if (!HMAC(EVP_sha256(), key, FH_KEY_BYTES, msg, n, out, &outlen) ||
        outlen != FH_BOOT_MAC_BYTES) {
        memset(out, 0, FH_BOOT_MAC_BYTES);
        return -1;
    }
    return 0;
}

/* Constant-time comparison of two MACs: the time taken does not tell a
 * forger how many leading bytes of a guess were right. */
static inline int fh_boot_mac_equal(const unsigned char *a,
                                    const unsigned char *b)
{
    return CRYPTO_memcmp(a, b, FH_BOOT_MAC_BYTES) == 0;
}

/* Splits "unix:/path" or "tcp:host:port" / "tcp:[v6addr]:port".  Returns 'u'
 * (path copied to host), 't' (host and port copied) or 0 if malformed. */
static inline int fh_parse_addr(const char *addr, char *host, size_t hostlen,
                                char *port, size_t portlen)
{
    if (strncmp(addr, "unix:", 5) == 0) {
        const char *p = addr + 5;
        if (!*p || strlen(p) >= hostlen)
            return 0;
        strcpy(host, p);
        return 'u';
    }
    if (strncmp(addr, "tcp:", 4) != 0)
        return 0;
    const char *h = addr + 4, *he, *pp;
    if (*h == '[') {
        h++;
        he = strchr(h, ']');
        if (!he || he[1] != ':')
            return 0;
        pp = he + 2;
    } else {
        he = strrchr(h, ':');
        if (!he)
            return 0;
        pp = he + 1;
    }
    size_t hl = (size_t)(he - h);
    if (hl == 0 || hl >= hostlen || !*pp || strlen(pp) >= portlen)
        return 0;
    for (const char *q = pp; *q; q++)
        if (*q < '0' || *q > '9')
            return 0;
    memcpy(host, h, hl);
    host[hl] = '\0';
    strcpy(port, pp);
    return 't';
}

/* Blocking I/O on a socket, retrying on EINTR and short transfers.  If
 * deadline > 0 (fh_now() units) waits at most until then (errno ETIMEDOUT).
 * fh_read_full returns 0, or -1 with errno set (0 at EOF). */
static inline int fh_wait_fd(int fd, short ev, double deadline)
{
    if (deadline <= 0)
        return 0;
    for (;;) {
        double left = deadline - fh_now();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd p = {.fd = fd, .events = ev};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

static inline int fh_write_full(int fd, const void *buf, size_t len,
                                double deadline)
{
    const unsigned char *p = buf;
    while (len > 0) {
        if (fh_wait_fd(fd, POLLOUT, deadline) < 0)
            return -1;
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static inline int fh_read_full(int fd, void *buf, size_t len, double deadline)
{
    unsigned char *p = buf;
    while (len > 0) {
        if (fh_wait_fd(fd, POLLIN, deadline) < 0)
            return -1;
        ssize_t r = read(fd, p, len);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -1;
        }
        if (r == 0) {
            errno = 0;
            return -1;
        }
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

#endif /* FH_BOOT_WIRE_H */
