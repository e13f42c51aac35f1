/*
 * ofi_rx_fuzz.c -- libFuzzer target for the ofi conduit's receive path:
 * the checks and reordering of conduits/ofi/ofi_rx.c, then the runtime's
 * AM decoder (firehose/am_wire.c) and sender check on what it delivers --
 * everything a message from the network goes through before a handler.
 *
 * The input is a sequence of messages, each
 *     from   1 byte: source index (values >= nsrc stand for "not a job
 *            endpoint", as FI_ADDR_NOTAVAIL does)
 *     fix    1 byte: bit 0 writes the right token into the header, bit 1
 *            writes the expected sequence number plus (fix >> 2) % 8 - 2
 *            (so in-order, early, held and duplicate messages all occur)
 *     len    2 bytes, then len bytes of message (our header + runtime's)
 * each copied into a buffer of exactly len bytes so that ASan sees any
 * read outside the message.  Checked for every delivery: the source is a
 * job endpoint, the length at most one packet, the bytes inside the
 * message, messages of one source in sequence order with none skipped or
 * repeated; and that receive buffers kept by held messages are released
 * exactly once, held messages never exceed the capacity.
 *
 *   make fuzz   (builds both fuzz targets with clang, runs each)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "firehose/am_wire.h"
#include "conduits/ofi/ofi_rx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NRANKS 3
#define NPATHS 2
#define NSRC   (NRANKS * NPATHS)
#define WINDOW 8
#define MAXPKT 256
#define TOKEN  0x5eed5eed0badf00dull
#define MAXMSG 512

struct rec {
    char *buf;
    size_t len;
    int kept;          /* held messages keeping this buffer */
};

struct fz {
    struct rec *recs;
    size_t nrecs;
    uint32_t next_seq[NSRC];   /* what the next delivery of each must carry */
};

static struct rec *rec_of(struct fz *f, void *rb)
{
    struct rec *r = rb;
    if (r < f->recs || r >= f->recs + f->nrecs)
        abort();
    return r;
}

static void deliver(void *arg, void *rb, uint32_t src, const char *buf, size_t len)
{
    struct fz *f = arg;
    struct rec *r = rec_of(f, rb);
    if (src >= NSRC || len > MAXPKT)
        abort();
    if (buf < r->buf + OFI_AMH || buf + len != r->buf + r->len)
        abort();                       /* the runtime's bytes, all of them */
    struct ofi_amh h;
    memcpy(&h, buf - OFI_AMH, OFI_AMH);
    if (h.token != TOKEN || h.seq != f->next_seq[src])
        abort();                       /* forged, or out of order */
    f->next_seq[src]++;
    /* What the runtime does next (am.c): decode, then the sender check. */
    const fh_am_bounds_t b = {.nranks = NRANKS, .npaths = NPATHS,
                              .max_medium = MAXPKT - FH_AM_HDR_BYTES - 8 * FH_AM_MAX_ARGS,
                              .max_long = 1u << 20};
    fh_am_msg_t m;
    char why[160];
    if (fh_am_decode(buf, len, &b, &m, why, sizeof why) == FH_OK) {
        if (m.payload && ((const char *)m.payload < buf ||
                          (const char *)m.payload + m.payload_len > buf + len))
            abort();
        volatile int same = m.src_rank == src / NPATHS && m.src_path == src % NPATHS;
        (void)same;
    }
}

static void drop(void *arg, int64_t src, const char *why)
{
    (void)arg;
    if (src < -1 || src >= NSRC || why == NULL || why[0] == '\0')
        abort();
}

static void keep(void *arg, void *rb, int delta)
{
    struct rec *r = rec_of(arg, rb);
    r->kept += delta;
    if (r->kept < 0 || (delta != 1 && delta != -1))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f;
    memset(&f, 0, sizeof f);
    f.recs = calloc(size / 4 + 1, sizeof *f.recs);
    if (!f.recs)
        return 0;
    struct ofi_rx rx;
    if (ofi_rx_init(&rx, TOKEN, NSRC, WINDOW, MAXPKT) != 0)
        abort();
    uint32_t sent[NSRC] = {0};         /* the sequence number a sender is at */
    const struct ofi_rx_sink sink = {deliver, drop, keep, &f};
    size_t off = 0;
    while (off + 4 <= size) {
        uint8_t from = data[off], fix = data[off + 1];
        size_t len = (size_t)data[off + 2] | (size_t)data[off + 3] << 8;
        off += 4;
        if (len > MAXMSG)
            len %= MAXMSG + 1;
        if (len > size - off)
            len = size - off;
        struct rec *r = &f.recs[f.nrecs++];
        r->buf = malloc(len ? len : 1);
        r->len = len;
        memcpy(r->buf, data + off, len);
        off += len;
        uint32_t src = from % (NSRC + 2);
        if (len >= OFI_AMH && src < NSRC) {
            struct ofi_amh h;
            memcpy(&h, r->buf, OFI_AMH);
            if (fix & 1)
                h.token = TOKEN;
            if (fix & 2) {
                h.seq = sent[src] + (uint32_t)((fix >> 2) % 8) - 2;
                if (h.seq == sent[src])
                    sent[src]++;
            }
            memcpy(r->buf, &h, OFI_AMH);
        }
        size_t before = rx.nheld;
        /* As ofi_poll.c: a control message first (never delivered), else
         * an AM. */
        struct ofi_ctl_msg m;
        unsigned kind = ofi_rx_ctl(&rx, r->buf, len, &m);
        if (kind != 0 && (kind < OFI_AMH_REDIAL || kind > OFI_AMH_ANSWER || len != OFI_AMH + sizeof m))
            abort();
        if (kind == 0)
            ofi_rx_message(&rx, src < NSRC ? src : UINT64_MAX, r->buf, len, r, &sink);
        if (rx.nheld > rx.cap || rx.nheld > before + 1)
            abort();
        if ((fix & 0x80) && src < NSRC) {
            /* The source's connection made again: nothing of it stays held,
             * its sequence starts at 0. */
            ofi_rx_reset(&rx, src, &sink);
            sent[src] = 0;
            f.next_seq[src] = 0;
            for (size_t j = 0; j < rx.nheld; j++)
                if (rx.held[j].src == src)
                    abort();
        }
    }
    /* Every kept buffer is kept by exactly its held messages. */
    for (size_t i = 0; i < f.nrecs; i++) {
        int held = 0;
        for (size_t j = 0; j < rx.nheld; j++)
            held += rx.held[j].rb == &f.recs[i];
        if (held != f.recs[i].kept)
            abort();
        free(f.recs[i].buf);
    }
    free(f.recs);
    ofi_rx_fini(&rx);
    return 0;
}
