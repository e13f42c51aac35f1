/*
 * ofi_rx.c -- checks and reordering of received AMs (see ofi_rx.h).
 */
#include "ofi_rx.h"

#include <stdlib.h>
#include <string.h>

#include "firehose.h"

int ofi_rx_init(struct ofi_rx *rx, uint64_t token, uint32_t nsrc,
                uint32_t window, size_t max_packet)
{
    memset(rx, 0, sizeof *rx);
    rx->token = token;
    rx->nsrc = nsrc;
    rx->window = window ? window : 1;
    rx->max_packet = max_packet;
    rx->cap = (size_t)rx->window + 64;
    rx->expect = calloc(nsrc ? nsrc : 1, sizeof *rx->expect);
    rx->held = calloc(rx->cap, sizeof *rx->held);
    if (!rx->expect || !rx->held) {
        ofi_rx_fini(rx);
        return FH_ERR_NO_MEMORY;
    }
    return FH_OK;
}

void ofi_rx_fini(struct ofi_rx *rx)
{
    free(rx->expect);
    free(rx->held);
    rx->expect = NULL;
    rx->held = NULL;
    rx->nheld = rx->cap = 0;
}

unsigned ofi_rx_ctl(const struct ofi_rx *rx, const char *buf, size_t len,
                    struct ofi_ctl_msg *out)
{
    struct ofi_amh h;
    if (len != OFI_AMH + sizeof *out)
        return 0;
    memcpy(&h, buf, OFI_AMH);
    if (h.rsvd < OFI_AMH_REDIAL || h.rsvd > OFI_AMH_ANSWER || (h.token ^ rx->token) != 0)
        return 0;
    memcpy(out, buf + OFI_AMH, sizeof *out);
    return h.rsvd;
}

void ofi_rx_reset(struct ofi_rx *rx, uint32_t src, const struct ofi_rx_sink *sink)
{
    if (src >= rx->nsrc)
        return;
    for (size_t i = 0; i < rx->nheld;) {
        if (rx->held[i].src != src) {
            i++;
            continue;
        }
        void *rb = rx->held[i].rb;
        rx->held[i] = rx->held[--rx->nheld];
        sink->keep(sink->arg, rb, -1);
    }
    rx->expect[src] = 0;
}

/* A second copy of a held message would never be delivered and would keep
 * its receive buffer for good. */
static int is_held(const struct ofi_rx *rx, uint32_t src, uint32_t seq)
{
    for (size_t i = 0; i < rx->nheld; i++)
        if (rx->held[i].src == src && rx->held[i].seq == seq)
            return 1;
    return 0;
}

/* Delivers the held messages of src that are now in turn. */
static void drain_held(struct ofi_rx *rx, uint32_t src,
                       const struct ofi_rx_sink *k)
{
    for (;;) {
        size_t i;
        for (i = 0; i < rx->nheld; i++)
            if (rx->held[i].src == src && rx->held[i].seq == rx->expect[src])
                break;
        if (i == rx->nheld)
            return;
        struct ofi_rx_held h = rx->held[i];
        rx->held[i] = rx->held[--rx->nheld];
        k->deliver(k->arg, h.rb, src, h.buf, h.len);
        rx->expect[src]++;
        k->keep(k->arg, h.rb, -1);
    }
}

void ofi_rx_message(struct ofi_rx *rx, uint64_t from, const char *buf,
                    size_t len, void *rb, const struct ofi_rx_sink *k)
{
    if (from >= rx->nsrc) {          /* FI_ADDR_NOTAVAIL included */
        k->drop(k->arg, -1, "the sender is not an endpoint of this job");
        return;
    }
    const uint32_t src = (uint32_t)from;
    if (len < OFI_AMH) {
        k->drop(k->arg, src, "runt message");
        return;
    }
    if (len - OFI_AMH > rx->max_packet) {
        k->drop(k->arg, src, "message longer than an AM packet");
        return;
    }
    struct ofi_amh h;
    memcpy(&h, buf, OFI_AMH);
    if ((h.token ^ rx->token) != 0 || h.rsvd != 0) {
        k->drop(k->arg, src, "message without this job's token");
        return;
    }
    const int32_t ahead = (int32_t)(h.seq - rx->expect[src]);
    if (ahead == 0) {
        k->deliver(k->arg, rb, src, buf + OFI_AMH, len - OFI_AMH);
        rx->expect[src]++;
        if (rx->nheld)
            drain_held(rx, src, k);
    } else if (ahead > 0 && (uint32_t)ahead <= rx->window &&
               rx->nheld < rx->cap && !is_held(rx, src, h.seq)) {
        rx->held[rx->nheld++] = (struct ofi_rx_held){
            src, h.seq, buf + OFI_AMH, len - OFI_AMH, rb};
        k->keep(k->arg, rb, +1);
    } else {
        k->drop(k->arg, src, ahead <= 0 || is_held(rx, src, h.seq)
                                 ? "duplicate message (sequence number seen)"
                                 : "sequence number beyond the credit window");
    }
}
