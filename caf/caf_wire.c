/*
 * caf_wire.c -- the checks of every AM libcaf_firehose receives
 * (caf_wire.h says what each message carries and when it is acceptable).
 *
 * Pure functions of their arguments: no firehose calls, no globals, so the
 * fuzz target (tests/fuzz/caf_am_fuzz.c) links this file alone.  The order
 * of the checks is the order a reader needs them: who sent it, what kind
 * of AM it is (short, medium or long), the argument count, then each
 * argument against the receiver's bounds.  Image numbers in the reasons
 * are 1-based ranks (images of the initial team).
 */
#include "caf_wire.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include "caf_abi.h"

static bool refuse(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool refuse(char *why, size_t len, const char *fmt, ...)
{
    if (why != NULL && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
        if (why[0] == '\0' && len > 1) {
            why[0] = '?';
            why[1] = '\0';
        }
    }
    return false;
}

/* The sender is a member other than us. */
static bool sender_ok(const caf_job_t *job, const caf_am_in_t *m, char *why,
                      size_t len)
{
    if (m->src < 0 || m->src >= job->nranks)
        return refuse(why, len, "sender image %d outside the job's %d",
                      m->src + 1, job->nranks);
    if (m->src == job->self)
        return refuse(why, len, "a message from this image itself");
    return true;
}

/* A short AM: no payload. */
static bool short_ok(const caf_am_in_t *m, const char *what, char *why,
                     size_t len)
{
    if (m->buf != NULL || m->nbytes != 0)
        return refuse(why, len, "%s with a %zu-byte payload", what, m->nbytes);
    return true;
}

static bool nargs_ok(const caf_am_in_t *m, unsigned want, const char *what,
                     char *why, size_t len)
{
    if (m->nargs != want || (want > 0 && m->args == NULL))
        return refuse(why, len, "%s with %u arguments, expected %u", what,
                      m->nargs, want);
    return true;
}

/* ------------------------------------------------------------ status */

bool caf_wire_status(const caf_job_t *job, const caf_am_in_t *m,
                     caf_status_msg_t *out, char *why, size_t len)
{
    if (!sender_ok(job, m, why, len) || !short_ok(m, "status", why, len) ||
        !nargs_ok(m, 6, "status", why, len))
        return false;
    if (m->args[0] != CAF_IMG_STOPPED && m->args[0] != CAF_IMG_FAILED)
        return refuse(why, len, "status %" PRIu64 " (neither stopped (1) nor "
                      "failed (2))", m->args[0]);
    *out = (caf_status_msg_t){.status = (unsigned)m->args[0],
                              .seq0 = m->args[1], .team = m->args[2],
                              .seq = m->args[3], .bar0 = m->args[4],
                              .bar = m->args[5]};
    return true;
}

/* ---------------------------------------------------------- SYNC ALL */

bool caf_wire_bar(const caf_job_t *job, const caf_am_in_t *m,
                  caf_bar_msg_t *out, char *why, size_t len)
{
    if (!sender_ok(job, m, why, len) ||
        !short_ok(m, "SYNC ALL arrival", why, len) ||
        !nargs_ok(m, 4, "SYNC ALL arrival", why, len))
        return false;
    const uint64_t *a = m->args;
    if (a[1] >= CAF_BAR_ROUNDS)
        return refuse(why, len, "SYNC ALL arrival for round %" PRIu64
                      " (at most %d rounds)", a[1], CAF_BAR_ROUNDS);
    if (a[2] == 0)
        return refuse(why, len, "SYNC ALL arrival for epoch 0");
    if (a[3] & ~(uint64_t)(CAF_BAR_FLAG_STOPPED | CAF_BAR_FLAG_FAILED |
                           CAF_BAR_FLAG_ACTIVE))
        return refuse(why, len, "SYNC ALL arrival with flags %" PRIu64,
                      a[3]);
    *out = (caf_bar_msg_t){.group = a[0], .round = (unsigned)a[1],
                           .epoch = a[2], .flags = (unsigned)a[3],
                           .src = m->src};
    return true;
}

bool caf_wire_bar_turn(const caf_group_t *g, uint64_t arrived,
                       const caf_bar_msg_t *a, char *why, size_t len)
{
    if (g->n < 1 || g->me < 0 || g->me >= g->n || a->round >= CAF_BAR_ROUNDS)
        return refuse(why, len, "SYNC ALL arrival for a group this image is "
                      "not in");
    uint64_t dist = (uint64_t)1 << a->round;
    if (dist >= (uint64_t)g->n)
        return refuse(why, len, "SYNC ALL arrival for round %u of group "
                      "%#" PRIx64 ", which has %d images and no such round",
                      a->round, a->group, g->n);
    int from = g->ranks[(g->me + g->n - (int)dist) % g->n];
    if (a->src != from)
        return refuse(why, len, "SYNC ALL arrival for round %u of group "
                      "%#" PRIx64 ": it is image %d's turn", a->round,
                      a->group, from + 1);
    if (a->epoch != arrived + 1)
        return refuse(why, len, "SYNC ALL arrival for round %u of group "
                      "%#" PRIx64 " of barrier %" PRIu64 ", expected barrier "
                      "%" PRIu64, a->round, a->group, a->epoch, arrived + 1);
    return true;
}

/* ------------------------------------------------------- SYNC IMAGES */

bool caf_wire_sync_images(const caf_job_t *job, const caf_am_in_t *m,
                          uint64_t received, uint64_t sent, char *why,
                          size_t len)
{
    if (!sender_ok(job, m, why, len) ||
        !short_ok(m, "SYNC IMAGES notification", why, len) ||
        !nargs_ok(m, 0, "SYNC IMAGES notification", why, len))
        return false;
    if (received > sent)
        return refuse(why, len, "SYNC IMAGES ahead by more than one (%" PRIu64
                      " notifications received, %" PRIu64 " sent)", received,
                      sent);
    return true;
}

/* ------------------------------------------------------- collectives */

/* The chunk argument names a phase and an index that exist. */
static bool chunk_ok(uint64_t chunk, char *why, size_t len)
{
    uint64_t phase = chunk >> CAF_COLL_PHASE_SHIFT;
    uint64_t idx = chunk & (((uint64_t)1 << CAF_COLL_PHASE_SHIFT) - 1);
    if (phase >= CAF_COLL_PHASES)
        return refuse(why, len, "collective chunk of unknown phase %" PRIu64,
                      phase);
    if ((phase == CAF_COLL_RD && idx >= 64) ||
        ((phase == CAF_COLL_RS || phase == CAF_COLL_AG) &&
         idx >> CAF_COLL_ROUND_SHIFT >= 64))
        return refuse(why, len, "collective chunk %" PRIu64 " of phase %"
                      PRIu64 " does not exist", idx, phase);
    return true;
}

/* Offset off (from the segment's start) is the start of one of the slots,
 * of the parity of chunk. */
static bool slot_ok(const caf_coll_geom_t *g, uint64_t off, uint64_t chunk)
{
    if (g->chunk == 0 || off < g->scratch_off)
        return false;
    uint64_t rel = off - g->scratch_off;
    return rel % g->chunk == 0 && rel / g->chunk < g->nslots &&
           (rel / g->chunk & 1) == (chunk & 1);
}

bool caf_wire_coll_data(const caf_job_t *job, const caf_coll_geom_t *g,
                        const caf_am_in_t *m, caf_coll_data_t *out,
                        char *why, size_t len)
{
    if (!sender_ok(job, m, why, len))
        return false;
    if (m->nargs < 4 || m->args == NULL)
        return refuse(why, len, "collective data with %u arguments, expected "
                      "4 or 6", m->nargs);
    const uint64_t *a = m->args;
    if (!chunk_ok(a[2], why, len))
        return false;
    if (a[3] == 0) {
        if (!nargs_ok(m, 4, "eager collective data", why, len))
            return false;
        if (m->nbytes == 0 || m->nbytes > g->eager || m->buf == NULL)
            return refuse(why, len, "eager collective chunk of %zu bytes "
                          "(1 .. %zu)", m->nbytes, g->eager);
        *out = (caf_coll_data_t){.team = a[0], .seq = a[1], .chunk = a[2],
                                 .data = m->buf, .len = m->nbytes};
        return true;
    }
    if (a[3] != 1)
        return refuse(why, len, "collective data of kind %" PRIu64
                      " (0 eager, 1 written)", a[3]);
    if (!short_ok(m, "written collective chunk", why, len) ||
        !nargs_ok(m, 6, "written collective chunk", why, len))
        return false;
    if (!slot_ok(g, a[4], a[2]))
        return refuse(why, len, "written collective chunk at offset %" PRIu64
                      ": not a slot of the collective scratch", a[4]);
    if (a[5] <= g->eager || a[5] > g->chunk)
        return refuse(why, len, "written collective chunk of %" PRIu64
                      " bytes (%zu .. %zu)", a[5], g->eager + 1, g->chunk);
    *out = (caf_coll_data_t){.team = a[0], .seq = a[1], .chunk = a[2],
                             .data = g->base + a[4], .len = (size_t)a[5],
                             .written = true};
    return true;
}

bool caf_wire_coll_due(const caf_coll_geom_t *g, const caf_coll_data_t *d,
                       size_t len_due, size_t slot_off, char *why, size_t len)
{
    if (d->len != len_due)
        return refuse(why, len, "collective chunk of %zu bytes where %zu were "
                      "due", d->len, len_due);
    if (len_due <= g->eager) {
        if (d->written)
            return refuse(why, len, "written collective chunk of %zu bytes "
                          "where an eager one was due", d->len);
        return true;
    }
    if (!d->written)
        return refuse(why, len, "eager collective chunk of %zu bytes where a "
                      "written one was due", d->len);
    if ((const char *)d->data != g->base + slot_off)
        return refuse(why, len, "written collective chunk at offset %td, not "
                      "in the slot granted for it (offset %zu)",
                      (const char *)d->data - g->base, slot_off);
    return true;
}

bool caf_wire_coll_cts(const caf_job_t *job, const caf_coll_geom_t *g,
                       const caf_am_in_t *m, caf_coll_cts_t *out, char *why,
                       size_t len)
{
    if (!sender_ok(job, m, why, len) ||
        !short_ok(m, "collective grant", why, len) ||
        !nargs_ok(m, 4, "collective grant", why, len))
        return false;
    const uint64_t *a = m->args;
    if (a[2] == CAF_COLL_CHUNK_ABORT) {
        int err = (int)(uint32_t)(a[3] & 0xffffffffu);
        uint64_t image = a[3] >> 32;
        if (err != 0 && err != CAF_STAT_STOPPED_IMAGE &&
            err != CAF_STAT_FAILED_IMAGE)
            return refuse(why, len, "collective abort with STAT %d", err);
        if (image > (uint64_t)job->nranks)
            return refuse(why, len, "collective abort naming image %" PRIu64,
                          image);
        *out = (caf_coll_cts_t){.team = a[0], .seq = a[1], .abort = true,
                                .err = err, .err_image = (int)image};
        return true;
    }
    if (!chunk_ok(a[2], why, len))
        return false;
    uint64_t phase = a[2] >> CAF_COLL_PHASE_SHIFT;
    if (phase == CAF_COLL_RD)
        return refuse(why, len, "collective grant for eager phase %" PRIu64,
                      phase);
    if (!slot_ok(g, a[3], a[2]))
        return refuse(why, len, "collective grants offset %" PRIu64 ", not a "
                      "slot of the collective scratch", a[3]);
    *out = (caf_coll_cts_t){.team = a[0], .seq = a[1], .chunk = a[2],
                            .off = (size_t)a[3]};
    return true;
}

bool caf_wire_grant_due(const caf_coll_cts_t *c, size_t slot_off, char *why,
                        size_t len)
{
    if (c->off != slot_off)
        return refuse(why, len, "collective grants offset %zu where its slot "
                      "for us is at %zu", c->off, slot_off);
    return true;
}

/* --------------------------------------------------------- FORM TEAM */

bool caf_wire_form(const caf_job_t *job, const caf_am_in_t *m,
                   size_t pending, caf_form_msg_t *out, char *why, size_t len)
{
    if (!sender_ok(job, m, why, len) ||
        !short_ok(m, "FORM TEAM record", why, len) ||
        !nargs_ok(m, 3, "FORM TEAM record", why, len))
        return false;
    int64_t number = (int64_t)m->args[1], index = (int64_t)m->args[2];
    if (number < 1 || number > INT_MAX)
        return refuse(why, len, "FORM TEAM record for team number %" PRId64,
                      number);
    if (index < 0 || index > INT_MAX)
        return refuse(why, len, "FORM TEAM record with NEW_INDEX= %" PRId64,
                      index);
    if (pending >= CAF_FORM_PENDING_MAX)
        return refuse(why, len, "FORM TEAM record beyond %d pending from "
                      "image %d", CAF_FORM_PENDING_MAX, m->src + 1);
    *out = (caf_form_msg_t){.parent = m->args[0], .src = m->src,
                            .number = (int)number, .index = (int)index};
    return true;
}
