/*
 * ofi_rx.h -- what the ofi conduit believes of a received active message.
 *
 * Pure logic, no libfabric call: the wire header the conduit puts in front
 * of the runtime's bytes, the checks every received message passes before
 * the runtime sees it, and the per-source reordering.  ofi_path.c feeds it
 * the receive completions; tests/fuzz/ofi_rx_fuzz.c feeds it arbitrary
 * sequences of messages from arbitrary sources.
 *
 * Identity.  Who sent a message is not in the bytes: the provider reports
 * the source address of every receive (FI_SOURCE, fi_cq_readfrom), which
 * with FI_AV_TABLE is the index rank * npaths + path of the job endpoint it
 * came from, or FI_ADDR_NOTAVAIL for an address outside the job.  Only
 * indexes < nsrc are delivered.
 *
 * Token.  struct ofi_amh carries the receiving rank's random 64-bit token,
 * handed to the job's ranks only (through the bootstrap's address
 * exchange).  tcp;ofi_rxm resolves a connecting peer to an AV entry by the
 * listening port the peer announces, which a stranger on the host can
 * forge; without the token its messages would pass as a job member's.
 *
 * Order.  FI_ORDER_SAS orders the *transmission* of sends, but providers
 * report comp_order FI_ORDER_NONE: tcp;ofi_rxm completes a large
 * (rendezvous) message after a later eager one.  So every message carries a
 * sequence number per (sender path, receiving path), and one that arrives
 * early is held (its receive buffer kept) until the gap is filled.  The
 * runtime's credits allow at most `window` unprocessed messages towards a
 * path, so a sequence number further ahead, or behind (a duplicate), is a
 * broken or hostile sender: dropped.
 *
 * Every rejected message goes to sink->drop with a short reason; nothing
 * here ends the process.
 */
#ifndef FH_OFI_RX_H
#define FH_OFI_RX_H

#include <stddef.h>
#include <stdint.h>

/* The conduit's header, in front of the runtime's bytes of every AM. */
struct ofi_amh {
    uint64_t token;            /* the receiving rank's token */
    uint32_t seq;              /* per (sender path, destination path) */
    uint32_t rsvd;             /* 0 */
};
#define OFI_AMH ((size_t)sizeof(struct ofi_amh))

/* A conduit control message (msg mode, between service paths): struct
 * ofi_amh with rsvd one of the kinds below (seq unused), then struct
 * ofi_ctl_msg.  Sent on an authenticated connection, never delivered to
 * the runtime.
 *   OFI_AMH_REDIAL  a = path: "my thread path a lost its connection to your
 *                   service path and dials it again with a request carrying
 *                   nonce" -- what lets the listener accept that request
 *                   (ofi_cm_redial.c);
 *   OFI_AMH_PROBE   a = sequence number: "answer when you poll"
 *                   (ofi_rma_probe.c);
 *   OFI_AMH_ANSWER  a = the probe's sequence number, b = how many times the
 *                   answering service path had polled (mod 2^32). */
#define OFI_AMH_REDIAL 1u
#define OFI_AMH_PROBE  2u
#define OFI_AMH_ANSWER 3u
#define OFI_REDIAL_NONCE 16
struct ofi_ctl_msg {
    uint32_t a, b;
    uint8_t nonce[OFI_REDIAL_NONCE];   /* REDIAL only; else 0 */
};

/* A message received ahead of its turn. */
struct ofi_rx_held {
    uint32_t src, seq;
    const char *buf;           /* runtime bytes (after struct ofi_amh) */
    size_t len;
    void *rb;                  /* its receive buffer, kept while held */
};

/* Per-path receive state. */
struct ofi_rx {
    uint64_t token;            /* ours: what senders must present */
    uint32_t nsrc;             /* job endpoints: nranks * npaths */
    uint32_t window;           /* messages that may be outstanding (rx_msgs) */
    size_t max_packet;         /* largest runtime message (am_max_packet) */
    uint32_t *expect;          /* [nsrc] next sequence number from each */
    struct ofi_rx_held *held;  /* [cap] early arrivals */
    size_t nheld, cap;
};

/* Where the verdicts go (ofi_path.c: upcalls and receive-buffer counts). */
struct ofi_rx_sink {
    /* In order: src < nsrc, len <= max_packet. */
    void (*deliver)(void *arg, void *rb, uint32_t src, const char *buf,
                    size_t len);
    /* src = -1: not a job endpoint. */
    void (*drop)(void *arg, int64_t src, const char *why);
    /* rb is kept by a held message (+1) or released by one (-1). */
    void (*keep)(void *arg, void *rb, int delta);
    void *arg;
};

/* FH_OK or FH_ERR_NO_MEMORY. */
int  ofi_rx_init(struct ofi_rx *rx, uint64_t token, uint32_t nsrc,
                 uint32_t window, size_t max_packet);
void ofi_rx_fini(struct ofi_rx *rx);
/* The kind (OFI_AMH_*) when buf (len bytes, our header included) is a
 * well-formed control message carrying our token (*out: its body, not
 * range-checked here); else 0: an AM for ofi_rx_message. */
unsigned ofi_rx_ctl(const struct ofi_rx *rx, const char *buf, size_t len,
                    struct ofi_ctl_msg *out);
/* src's connection was made again: the messages held from it are released
 * undelivered (sink->keep -1) and its sequence starts again at 0. */
void ofi_rx_reset(struct ofi_rx *rx, uint32_t src, const struct ofi_rx_sink *sink);

/* One received message of len bytes (our header included) at buf, in
 * receive buffer rb, from source address `from` as the provider reported
 * it.  Delivers it (and any held messages it unblocks), holds it, or drops
 * it. */
void ofi_rx_message(struct ofi_rx *rx, uint64_t from, const char *buf,
                    size_t len, void *rb, const struct ofi_rx_sink *sink);

#endif /* FH_OFI_RX_H */
