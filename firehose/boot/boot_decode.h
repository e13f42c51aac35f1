/*
 * boot_decode.h -- the decoders of everything that arrives on a bootstrap
 * socket (bootstrap.h's protocol): pure functions, bytes in, a parsed
 * message or an error out, no I/O.  Both ends call them -- the rank's
 * handshake and watchdog (boot_fhrun.c) and the launcher's handshake and
 * request reader (tools/launcher/) -- and tests/fuzz/boot_wire_fuzz.c
 * drives the same functions with hostile bytes.  Header-only, like
 * boot_wire.h, because fhrun links no bootstrap code.
 *
 * The stream after the handshake is decoded by fh_boot_rx_t, one per
 * connection and direction: the socket code asks where the next bytes go
 * (fh_boot_rx_space), reads at most that many, and reports them
 * (fh_boot_rx_got), which says whether a message is complete, more bytes
 * are needed, or the stream is bad.  Every length on the wire is checked
 * before anything is allocated for it:
 *   rank -> launcher  ALLGATHER len <= max_payload (the launcher's
 *                     MAX_RESULT / nranks); ABORT / INITFAIL msglen <=
 *                     FH_BOOT_MAX_MSG; FINALIZE; any other op is bad;
 *   launcher -> rank  ALLGATHER: no length on the wire, the rank says
 *                     what it expects (fh_boot_rx_expect), or that it
 *                     expects nothing; DEAD msglen <= FH_BOOT_MAX_MSG;
 *                     any other type is bad.
 * After FH_BOOT_RX_BAD the stream is out of step: the caller closes it.
 */
#ifndef FH_BOOT_DECODE_H
#define FH_BOOT_DECODE_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot_wire.h"

/* ---- the handshake ------------------------------------------------------- */

/* The launcher's reading of a hello (FH_BOOT_HELLO_BYTES): 0 with nonce_r
 * copied out, or FH_BOOT_REFUSED_KEY (not this protocol's magic). */
static inline uint32_t fh_boot_hello_decode(const unsigned char *h,
                                            unsigned char *nonce_r)
{
    if (fh_get_u32(h) != FH_BOOT_MAGIC)
        return FH_BOOT_REFUSED_KEY;
    memcpy(nonce_r, h + 4, FH_BOOT_NONCE_BYTES);
    return 0;
}

/* The rank's reading of the launcher's first word: 0 (a challenge follows),
 * one of FH_BOOT_REFUSED_* (a refusal), or UINT32_MAX (not a launcher). */
static inline uint32_t fh_boot_challenge_word(const unsigned char *w)
{
    uint32_t v = fh_get_u32(w);
    if (v == FH_BOOT_MAGIC)
        return 0;
    if (v == FH_BOOT_REFUSED_KEY || v == FH_BOOT_REFUSED_RANK ||
        v == FH_BOOT_REFUSED_DUP)
        return v;
    return UINT32_MAX;
}

/* The launcher's check of a proof (FH_BOOT_PROOF_BYTES: rank, pid, MAC)
 * against the job key and both nonces, for a job of nranks.  Returns 0
 * with *rank, *pid and our own proof (mine, FH_BOOT_MAC_BYTES) set, or the
 * refusal: FH_BOOT_REFUSED_KEY (wrong MAC, or libcrypto failed) or
 * FH_BOOT_REFUSED_RANK (rank >= nranks; *rank set).  rank and pid are
 * looked at only once the MAC checked out.  (Whether the rank is already
 * connected is the launcher's business.) */
static inline uint32_t fh_boot_proof_check(const unsigned char *pr,
                                           const unsigned char *key,
                                           const unsigned char *nonce_r,
                                           const unsigned char *nonce_l,
                                           uint32_t nranks, uint32_t *rank,
                                           uint32_t *pid, unsigned char *mine)
{
    uint32_t rn = fh_get_u32(pr), id = fh_get_u32(pr + 4);
    unsigned char want[FH_BOOT_MAC_BYTES];
    if (fh_boot_mac(key, FH_BOOT_LABEL_RANK, nonce_r, nonce_l, rn, id,
                    want) < 0 ||
        !fh_boot_mac_equal(pr + 8, want))
        return FH_BOOT_REFUSED_KEY;
    *rank = rn;
    *pid = id;
    if (rn >= nranks)
        return FH_BOOT_REFUSED_RANK;
    if (fh_boot_mac(key, FH_BOOT_LABEL_LAUNCHER, nonce_r, nonce_l, rn, id,
                    mine) < 0)
        return FH_BOOT_REFUSED_KEY;
    return 0;
}

/* The rank's check of the launcher's accept (FH_BOOT_ACCEPT_BYTES: status
 * 0, then the launcher's MAC) against the MAC it expects: 1 if proven, 0
 * if not.  (A non-zero status is read, and reported, before the MAC.) */
static inline int fh_boot_accept_check(const unsigned char *acc,
                                       const unsigned char *want)
{
    return fh_get_u32(acc) == 0 && fh_boot_mac_equal(acc + 4, want);
}

/* ---- the stream after the handshake --------------------------------------- */

enum {
    FH_BOOT_RX_BAD = -1,   /* rx->err says why; close the connection */
    FH_BOOT_RX_MORE = 0,   /* read more (fh_boot_rx_space) */
    FH_BOOT_RX_MSG = 1,    /* a message is complete: rx->type, a, b, len */
    FH_BOOT_RX_LEN = 2,    /* (rank side) an allgather result begins: call
                              fh_boot_rx_expect */
};

/* Decoding states (internal). */
enum { FH_BOOT_RXS_TYPE, FH_BOOT_RXS_HDR, FH_BOOT_RXS_LEN, FH_BOOT_RXS_DATA,
       FH_BOOT_RXS_DONE, FH_BOOT_RXS_BAD };

typedef struct fh_boot_rx {
    int from_launcher;   /* 1: a rank reads the launcher; 0: the reverse */
    size_t max_payload;  /* (launcher side) largest allgather contribution */
    int state;
    unsigned char hdr[12];
    size_t need, have;   /* of the unit being read: hdr or payload */
    /* The message: valid after FH_BOOT_RX_MSG until the next space call. */
    uint32_t type;       /* FH_BOOT_OP_* or FH_BOOT_MSG_*; after BAD, the
                            type being read (0 if it was the type word) */
    uint32_t a, b;       /* ABORT/INITFAIL: a = code; DEAD: a = rank,
                            b = status */
    size_t len;          /* payload bytes */
    unsigned char *payload; /* len bytes + a NUL, owned by rx (see take);
                               NULL only if len == 0 and nothing was read */
    char err[128];
} fh_boot_rx_t;

/* Starts a decoder.  from_launcher: see above; max_payload: the launcher's
 * limit on one rank's allgather contribution (ignored on the rank side). */
static inline void fh_boot_rx_init(fh_boot_rx_t *rx, int from_launcher,
                                   size_t max_payload)
{
    memset(rx, 0, sizeof *rx);
    rx->from_launcher = from_launcher;
    rx->max_payload = max_payload;
    rx->state = FH_BOOT_RXS_TYPE;
    rx->need = 4;
}

/* Frees what rx holds (a payload not taken). */
static inline void fh_boot_rx_free(fh_boot_rx_t *rx)
{
    free(rx->payload);
    rx->payload = NULL;
}

/* The payload of the message just completed, now the caller's (free it);
 * NUL-terminated after len bytes. */
static inline unsigned char *fh_boot_rx_take(fh_boot_rx_t *rx)
{
    unsigned char *p = rx->payload;
    rx->payload = NULL;
    return p;
}

static inline int fh_boot_rx_bad(fh_boot_rx_t *rx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int fh_boot_rx_bad(fh_boot_rx_t *rx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rx->err, sizeof rx->err, fmt, ap);
    va_end(ap);
    rx->state = FH_BOOT_RXS_BAD;
    rx->need = rx->have = 0;     /* fh_boot_rx_space: nothing more */
    fh_boot_rx_free(rx);
    return FH_BOOT_RX_BAD;
}

/* Sets up the payload of the current message: len bytes (allocated with a
 * NUL after them).  Returns MSG if there is none, MORE, or BAD when out of
 * memory. */
static inline int fh_boot_rx_payload(fh_boot_rx_t *rx, size_t len)
{
    rx->len = len;
    rx->payload = malloc(len + 1);
    if (rx->payload == NULL)
        return fh_boot_rx_bad(rx, "out of memory for a %zu-byte message",
                              len);
    rx->payload[len] = '\0';
    rx->have = 0;
    rx->need = len;
    rx->state = len ? FH_BOOT_RXS_DATA : FH_BOOT_RXS_DONE;
    return len ? FH_BOOT_RX_MORE : FH_BOOT_RX_MSG;
}

/* Where the next bytes go: returns how many are wanted (0 only in the
 * states LEN and BAD), *dst where to put them.  Starts the next message
 * once the last one was returned (its payload, unless taken, is freed). */
static inline size_t fh_boot_rx_space(fh_boot_rx_t *rx, unsigned char **dst)
{
    if (rx->state == FH_BOOT_RXS_DONE) {
        fh_boot_rx_free(rx);
        rx->state = FH_BOOT_RXS_TYPE;
        rx->type = rx->a = rx->b = 0;
        rx->len = 0;
        rx->have = 0;
        rx->need = 4;
    }
    if (rx->state == FH_BOOT_RXS_DATA)
        *dst = rx->payload + rx->have;
    else
        *dst = rx->hdr + rx->have;
    return rx->need - rx->have;
}

/* The header after the type word is complete. */
static inline int fh_boot_rx_header(fh_boot_rx_t *rx)
{
    if (rx->type == FH_BOOT_OP_ALLGATHER) {
        uint32_t len = fh_get_u32(rx->hdr);
        if (len > rx->max_payload)
            return fh_boot_rx_bad(rx, "an allgather of %u bytes per rank "
                                  "(over the limit of %zu)", len,
                                  rx->max_payload);
        return fh_boot_rx_payload(rx, len);
    }
    uint32_t ml;
    if (rx->type == FH_BOOT_MSG_DEAD) {
        rx->a = fh_get_u32(rx->hdr);
        rx->b = fh_get_u32(rx->hdr + 4);
        ml = fh_get_u32(rx->hdr + 8);
    } else {                     /* ABORT, INITFAIL */
        rx->a = fh_get_u32(rx->hdr);
        ml = fh_get_u32(rx->hdr + 4);
    }
    if (ml > FH_BOOT_MAX_MSG)
        return fh_boot_rx_bad(rx, "a message of %u bytes (over the limit "
                              "of %u)", ml, FH_BOOT_MAX_MSG);
    return fh_boot_rx_payload(rx, ml);
}

/* The type word is complete: how much header follows. */
static inline int fh_boot_rx_typeword(fh_boot_rx_t *rx)
{
    uint32_t t = fh_get_u32(rx->hdr);
    size_t more;
    if (rx->from_launcher && t == FH_BOOT_MSG_ALLGATHER) {
        rx->type = t;
        rx->state = FH_BOOT_RXS_LEN;
        rx->need = rx->have = 0;
        return FH_BOOT_RX_LEN;
    } else if (rx->from_launcher && t == FH_BOOT_MSG_DEAD) {
        more = 12;
    } else if (!rx->from_launcher && t == FH_BOOT_OP_ALLGATHER) {
        more = 4;
    } else if (!rx->from_launcher &&
               (t == FH_BOOT_OP_ABORT || t == FH_BOOT_OP_INITFAIL)) {
        more = 8;
    } else if (!rx->from_launcher && t == FH_BOOT_OP_FINALIZE) {
        rx->type = t;
        rx->state = FH_BOOT_RXS_DONE;
        return FH_BOOT_RX_MSG;
    } else {
        return fh_boot_rx_bad(rx, "an unknown %s %u",
                              rx->from_launcher ? "message" : "request", t);
    }
    rx->type = t;
    rx->state = FH_BOOT_RXS_HDR;
    rx->have = 0;
    rx->need = more;
    return FH_BOOT_RX_MORE;
}

/* n bytes were written where fh_boot_rx_space said (n <= what it
 * returned).  Returns FH_BOOT_RX_MSG, _MORE, _LEN or _BAD (see the enum). */
static inline int fh_boot_rx_got(fh_boot_rx_t *rx, size_t n)
{
    if (rx->state == FH_BOOT_RXS_BAD || rx->state == FH_BOOT_RXS_DONE ||
        rx->state == FH_BOOT_RXS_LEN || n > rx->need - rx->have)
        return fh_boot_rx_bad(rx, "decoder misuse (%zu bytes reported, "
                              "state %d)", n, rx->state);
    rx->have += n;
    if (rx->have < rx->need)
        return FH_BOOT_RX_MORE;
    switch (rx->state) {
    case FH_BOOT_RXS_TYPE:
        return fh_boot_rx_typeword(rx);
    case FH_BOOT_RXS_HDR:
        return fh_boot_rx_header(rx);
    default:                     /* FH_BOOT_RXS_DATA */
        rx->state = FH_BOOT_RXS_DONE;
        return FH_BOOT_RX_MSG;
    }
}

/* (Rank side) after FH_BOOT_RX_LEN: the rank expects an allgather result
 * of expect bytes, or none at all (expect < 0: a protocol error).
 * Returns MSG (expect 0), MORE or BAD. */
static inline int fh_boot_rx_expect(fh_boot_rx_t *rx, long long expect)
{
    if (rx->state != FH_BOOT_RXS_LEN)
        return fh_boot_rx_bad(rx, "decoder misuse (expect in state %d)",
                              rx->state);
    if (expect < 0)
        return fh_boot_rx_bad(rx, "an allgather result nobody asked for");
    return fh_boot_rx_payload(rx, (size_t)expect);
}

/* The text of a DEAD message, "<pid> <reason>": *pid and *why (pointing
 * into msg) when it has that form, else *pid = -1 and *why = msg. */
static inline void fh_boot_dead_text(const char *msg, long *pid,
                                     const char **why)
{
    char *rest;
    long v = strtol(msg, &rest, 10);
    if (rest != msg && *rest == ' ') {
        *pid = v;
        *why = rest + 1;
    } else {
        *pid = -1;
        *why = msg;
    }
}

#endif /* FH_BOOT_DECODE_H */
