/*
 * caf_am_fuzz.c -- libFuzzer target for the checks of libcaf_firehose's AM
 * handlers (caf/caf_wire.c).
 *
 * Each input is one received message: the first bytes choose the handler,
 * the job (ranks, our rank), the verified sender (also out of range), the
 * kind of payload (none, a medium's buffer, a long one's place anywhere in
 * a fake segment, as the runtime would give it), its length, the
 * arguments, and the receiver's state (the collective scratch's geometry,
 * a barrier group, counters, what a waiting collective expects).  For
 * every message a check accepts, the target then uses it the way the
 * library does -- copies an eager chunk, reads a due chunk's len_due bytes
 * as combine() does, writes a chunk into a granted slot -- on buffers of
 * exactly the size the library has, so AddressSanitizer sees any read or
 * write the checks let through out of bounds; and it asserts the
 * properties the handlers rely on (sender in the job and not us, the
 * turn of a barrier round, ranges of team numbers...).  Every rejection
 * must give a reason.
 *
 *   clang -fsanitize=fuzzer,address,undefined -Iinclude -I. \
 *         tests/fuzz/caf_am_fuzz.c caf/caf_wire.c -o caf_am_fuzz
 *   ./caf_am_fuzz -max_total_time=60
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "caf/caf_wire.h"
#include "tests/fuzz/fuzz_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t sink;

/* Reads n bytes at p (ASan checks they are ours). */
static void touch(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        sink ^= b[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    in_t in = {data, size, 0};
    const unsigned which = u8(&in) % 7;
    const caf_job_t job = {.nranks = 1 + u8(&in), .self = 0};
    const int self = u8(&in) % job.nranks;
    const caf_job_t me = {.nranks = job.nranks, .self = self};
    int src = (int)(int8_t)u8(&in);
    if (u8(&in) & 1)
        src = src < 0 ? -src - 1 : src; /* mostly inside the job */
    src %= 300;

    /* The receiver's scratch: nslots slots of chunk bytes after
     * scratch_off bytes, in a segment with some bytes after it. */
    const size_t chunk = 64 * (size_t)(1 + u8(&in) % 64);
    const unsigned nslots = 2 * (1 + u8(&in) % 8);
    const size_t scratch_off = 64 * (size_t)u8(&in);
    const size_t eager = (size_t)u8(&in) * 16;
    const size_t tail = u8(&in);
    const size_t seg_size = scratch_off + nslots * chunk + tail;
    char *seg = malloc(seg_size);
    if (seg == NULL)
        return 0;
    memset(seg, 0, seg_size);
    const caf_coll_geom_t g = {.base = seg, .scratch_off = scratch_off,
                               .chunk = chunk, .eager = eager,
                               .nslots = nslots};

    /* The payload as the runtime hands it over. */
    const uint8_t kind = u8(&in) % 3;
    size_t nbytes = (size_t)u8(&in) << 8 | u8(&in);
    uint64_t args[10];
    unsigned nargs = u8(&in) % 10;
    for (unsigned i = 0; i < nargs; i++)
        args[i] = arg(&in);
    void *medium = NULL;
    const void *buf = NULL;
    if (kind == 1) {
        /* medium: the runtime's buffer of exactly nbytes */
        medium = malloc(nbytes ? nbytes : 1);
        if (medium == NULL) {
            free(seg);
            return 0;
        }
        memset(medium, 0x5a, nbytes);
        buf = medium;
    } else if (kind == 2) {
        /* long: [buf, buf + nbytes) inside our segment (the runtime
         * refuses anything else) */
        size_t off = ((size_t)u8(&in) << 8 | u8(&in)) % seg_size;
        if (nbytes > seg_size - off)
            nbytes = seg_size - off;
        buf = seg + off;
    } else {
        nbytes = u8(&in) & 1 ? nbytes : 0;
    }
    const caf_am_in_t m = {.src = src, .buf = buf, .nbytes = nbytes,
                           .args = args, .nargs = nargs};
    char why[200];
    why[0] = '\0';
    bool ok = false;
    bool sender_checked = true;

    switch (which) {
    case 0: {
        caf_status_msg_t st = {.status = 99};
        ok = caf_wire_status(&me, &m, &st, why, sizeof why);
        if (ok)
            CHECK((st.status == CAF_IMG_STOPPED || st.status == CAF_IMG_FAILED) &&
                  buf == NULL && nbytes == 0 && nargs == 6 &&
                  st.seq0 == args[1] && st.team == args[2] && st.seq == args[3] &&
                  st.bar0 == args[4] && st.bar == args[5]);
        break;
    }
    case 1: {
        caf_bar_msg_t a;
        ok = caf_wire_bar(&me, &m, &a, why, sizeof why);
        if (!ok)
            break;
        CHECK(a.round < CAF_BAR_ROUNDS && a.epoch >= 1 && (a.flags & ~11u) == 0 &&
              a.src == src && nargs == 4);
        /* ... and whether it is its turn in some group of ours */
        int ranks[16];
        int n = 1 + u8(&in) % 16;
        for (int i = 0; i < n; i++)
            ranks[i] = u8(&in) % job.nranks;
        int gme = u8(&in) % (n + 1); /* sometimes not a member */
        const caf_group_t grp = {ranks, n, gme};
        uint64_t arrived = u8(&in) & 1 ? a.epoch - 1 : arg(&in);
        char why2[200] = "";
        if (caf_wire_bar_turn(&grp, arrived, &a, why2, sizeof why2)) {
            uint64_t dist = (uint64_t)1 << a.round;
            CHECK(gme < n && dist < (uint64_t)n);
            CHECK(a.src == ranks[(gme + n - (int)dist) % n]);
            CHECK(a.epoch == arrived + 1);
        } else {
            CHECK(why2[0] != '\0');
        }
        break;
    }
    case 2: {
        uint64_t received = arg(&in), sent = arg(&in);
        ok = caf_wire_sync_images(&me, &m, received, sent, why, sizeof why);
        if (ok)
            CHECK(received <= sent && nargs == 0 && nbytes == 0);
        break;
    }
    case 3: {
        caf_coll_data_t d;
        ok = caf_wire_coll_data(&me, &g, &m, &d, why, sizeof why);
        if (!ok)
            break;
        CHECK((d.chunk >> CAF_COLL_PHASE_SHIFT) < CAF_COLL_PHASES);
        void *copy = NULL;
        if (d.written) {
            /* a short AM naming a whole slot of the scratch */
            CHECK(nargs == 6 && buf == NULL && nbytes == 0 && args[3] == 1 &&
                  d.data == seg + args[4] && d.len == args[5]);
            size_t off = (size_t)((const char *)d.data - seg);
            CHECK(off >= scratch_off &&
                  (off - scratch_off) % chunk == 0 &&
                  (off - scratch_off) / chunk < nslots &&
                  d.len > eager && d.len <= chunk);
            touch(d.data, d.len);
        } else {
            CHECK(nargs == 4 && args[3] == 0 && d.len == nbytes && d.data == buf &&
                  d.len >= 1 && d.len <= eager);
            copy = malloc(d.len); /* what the handler keeps */
            if (copy == NULL)
                break;
            memcpy(copy, d.data, d.len);
            d.data = copy;
        }
        /* The collective that waits for it: len_due bytes, in its slot
         * when long; combine() then reads len_due bytes. */
        size_t len_due = u8(&in) & 1 ? d.len : ((size_t)u8(&in) << 8 | u8(&in));
        size_t slot = scratch_off + (u8(&in) % nslots) * chunk;
        if (u8(&in) & 1 && d.written)
            slot = (size_t)((const char *)d.data - seg);
        char why2[200] = "";
        if (caf_wire_coll_due(&g, &d, len_due, slot, why2, sizeof why2)) {
            touch(d.data, len_due); /* first, as combine() would */
            CHECK(d.len == len_due);
            if (d.written)
                CHECK((const char *)d.data == seg + slot);
        } else {
            CHECK(why2[0] != '\0');
        }
        free(copy);
        break;
    }
    case 4: {
        caf_coll_cts_t c;
        ok = caf_wire_coll_cts(&me, &g, &m, &c, why, sizeof why);
        if (!ok)
            break;
        CHECK(nargs == 4 && buf == NULL && nbytes == 0);
        if (c.abort) {
            CHECK(c.err_image >= 0 && c.err_image <= job.nranks);
            break;
        }
        /* The granter's scratch has our geometry: a whole chunk written
         * at the granted offset stays inside it. */
        CHECK(c.off >= scratch_off && (c.off - scratch_off) % chunk == 0 &&
              (c.off - scratch_off) / chunk < nslots);
        memset(seg + c.off, 0xc3, chunk);
        size_t slot = u8(&in) & 1 ? c.off : scratch_off + (u8(&in) % nslots) * chunk;
        char why2[200] = "";
        if (caf_wire_grant_due(&c, slot, why2, sizeof why2))
            CHECK(c.off == slot);
        else
            CHECK(why2[0] != '\0');
        break;
    }
    case 5: {
        caf_form_msg_t f;
        size_t pending = u8(&in) % 32;
        ok = caf_wire_form(&me, &m, pending, &f, why, sizeof why);
        if (ok)
            CHECK(f.number >= 1 && f.index >= 0 && f.src == src &&
                  pending < CAF_FORM_PENDING_MAX && nargs == 3 &&
                  (int64_t)args[1] == f.number && (int64_t)args[2] == f.index);
        break;
    }
    default: {
        /* The eager and long limits as a sender sees them: a due check
         * with an eager size over the chunk must still be sound. */
        caf_coll_data_t d = {.data = buf, .len = nbytes,
                             .written = kind == 2};
        size_t slot = scratch_off + (u8(&in) % nslots) * chunk;
        char why2[200] = "";
        if (caf_wire_coll_due(&g, &d, nbytes, slot, why2, sizeof why2)) {
            if (d.written)
                CHECK((const char *)d.data == seg + slot);
            else
                CHECK(nbytes <= eager);
        } else {
            CHECK(why2[0] != '\0');
        }
        sender_checked = false;
        break;
    }
    }
    if (sender_checked) {
        if (ok)
            CHECK(src >= 0 && src < job.nranks && src != self);
        else
            CHECK(why[0] != '\0');
    }
    free(medium);
    free(seg);
    return 0;
}
