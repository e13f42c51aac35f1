/*
 * firehose_env.c -- FH_REG_STRATEGY=firehose: the cache's environment
 * (cache/fhc.h fhc_env_t; split from firehose.c): what peers may reach of
 * our memory (the runs of mappings the monitor can watch, and the
 * segment spans), pinning and unpinning regions through the conduit,
 * sending move messages (queued in the outbox, never sent from here:
 * firehose.c "Messages"), the data check of a put carried in a move, and
 * the cache's log lines with the runtime's peer names.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "firehose/cache/fhc_wire.h"
#include "firehose/util/vma.h"
#include "firehose_internal.h"
#include "reg.h"

/* What peers may reach of [lo, hi): the run of adjacent readable mappings
 * in it that the memory monitor can watch and that holds `want` (if want
 * is in [lo, hi) and reachable; else the first such run) (a mapping may start or
 * end, or the application may protect pages, inside a bucket;
 * FH_SEGMENT=everything mixes anonymous and file mappings in one bucket),
 * and whether all of it is writable.  1 with [*rlo, *rhi), or 0 when no
 * byte qualifies. */
static int reach_run(fh_core_t *rt, uintptr_t lo, uintptr_t hi, uintptr_t want,
                     uintptr_t *rlo_out, uintptr_t *rhi_out, int *writable)
{
    uintptr_t rlo = 0, rhi = 0;
    *writable = 1;
    fh_vma_t w;
    if (want > lo && want < hi && fh_vma_at(want, &w) == 0)
        lo = w.start > lo ? w.start : lo;   /* the run that holds it, if any */
    for (uintptr_t a = lo; a < hi;) {
        fh_vma_t v;
        if (fh_vma_next(a, &v) != 0 || v.start >= hi || (rhi && v.start != rhi))
            break;
        uintptr_t s = v.start > lo ? v.start : lo, e = v.end < hi ? v.end : hi;
        int ok = (v.prot & FH_VMA_READ) && fh_mm_may_cache(rt, s, e - s, 1);
        if (ok) {
            if (!rhi)
                rlo = s;
            rhi = e;
            *writable &= (v.prot & FH_VMA_WRITE) != 0;
        } else if (rhi) {
            break;
        }
        a = v.end;
    }
    *rlo_out = rlo;
    *rhi_out = rhi;
    return rhi != 0;
}

/* A region [*addr, +*len) offered to peers registers only its reach_run,
 * with *reach saying so (FHC_REACH_*): the initiator checks every transfer
 * against it before moving a byte (docs/reliability.md).  0, or
 * FHC_ERR_INVALID when nothing of it may be reached. */
static int remote_run(fh_core_t *rt, uintptr_t *addr, size_t *len, uintptr_t want,
                      unsigned *acc, uint64_t *reach)
{
    uintptr_t lo = *addr, hi = *addr + *len, rlo, rhi;
    int writable;
    if (!reach_run(rt, lo, hi, want, &rlo, &rhi, &writable) && want)
        reach_run(rt, lo, hi, 0, &rlo, &rhi, &writable);
    if (!rhi)
        return FHC_ERR_INVALID;
    *reach = 0;
    if (rlo != lo || rhi != hi) {
        if ((rlo - lo) % FHC_REACH_GRAIN || (rhi - lo) % FHC_REACH_GRAIN ||
            (rhi - lo) / FHC_REACH_GRAIN > FHC_REACH_MAXG)
            return FHC_ERR_INVALID;
        *reach = fhc_reach_part(rlo - lo, rhi - lo);
    }
    fh_log_verbose(2, "firehose: region [%p, +%zu) registers [%p, %p)%s", (void *)lo,
                   (size_t)(hi - lo), (void *)rlo, (void *)rhi, writable ? "" : " read-only");
    *addr = rlo;
    *len = rhi - rlo;
    if (!writable) {
        *acc &= ~(unsigned)FH_MR_REMOTE_WRITE;
        *reach |= FHC_REACH_RO;
    }
    return 0;
}

static int env_pin(void *arg, uintptr_t addr, size_t len, int remote, uintptr_t want,
                   void **mr, uint64_t key[2], uint64_t *reach)
{
    (void)arg;
    fh_core_t *rt = fh_reg_core;
    unsigned acc = FH_MR_LOCAL | (remote ? FH_MR_REMOTE_READ | FH_MR_REMOTE_WRITE : 0);
    *reach = 0;
    if (remote && remote_run(rt, &addr, &len, want, &acc, reach) != 0)
        return FHC_ERR_INVALID;    /* not retried: nothing a peer may reach */
    if (!remote && !fh_mm_may_cache(rt, addr, len, remote))
        return FHC_ERR_INVALID;    /* not retried: the memory cannot be watched */
    fh_rkey_t rk = {0, 0};
    struct fh_mr *m = NULL;
    int rc = rt->cops->mr_reg(rt->conduit, (void *)addr, len, acc, &m, &rk);
    if (rc == FH_ERR_INVALID)
        /* Part of the bucket-rounded range is not mapped or accessible (a
         * guard page next to a stack or heap mapping): evicting victims
         * cannot help, so not retried; a local pin falls back to a
         * temporary registration of the exact bytes (firehose_local.c). */
        return FHC_ERR_INVALID;
    if (rc != FH_OK)
        return FHC_ERR_NO_MEMORY;
    *mr = m;
    key[0] = rk.key;
    key[1] = rk.base;
    return 0;
}

static void env_unpin(void *arg, void *mr)
{
    (void)arg;
    fh_reg_core->cops->mr_dereg(fh_reg_core->conduit, mr);
}

/* Called with g->lock held (from inside fhc). */
static int env_allowed(void *arg, uintptr_t addr, size_t len)
{
    struct fh_reg *g = arg;
    if (addr + len < addr)
        return 0;
    if (fh_reg_core->cfg.segment_mode == FH_SEGMENT_EVERYTHING) {
        /* Any mapped memory: a span of buckets is served when one run of
         * readable memory reaches from its first bucket into its last
         * (the transfer's bytes lie in that run, or the conduit refuses
         * the access: env_pin registers the run only).  A mapping may
         * start or end inside a bucket (a stack, a small mmap), so the
         * first bucket may hold several runs (a mapping, a guard page, the
         * mapping asked for): any of them may be the one. */
        uintptr_t rlo, rhi, from = addr;
        int writable;
        size_t b = len < g->bucket ? len : g->bucket;
        while (reach_run(fh_reg_core, from, addr + len, 0, &rlo, &rhi, &writable) &&
               rlo < addr + b) {
            if (rhi > addr + len - b)
                return 1;
            from = rhi;
        }
        return 0;
    }
    for (size_t i = 0; i < g->nspans; i++)
        if (addr >= g->spans[i].base && addr + len <= g->spans[i].end)
            return 1;
    return 0;
}

static void env_send(void *arg, uint32_t peer, int is_reply, const void *msg, size_t len)
{
    struct fh_reg *g = arg;
    /* A reply to the move being handled goes back as the AM reply; a reply
     * the cache sends later (a deferred move served when another peer's
     * releases came: FH_FIREHOSE_BUDGET=adaptive) travels like a request
     * (fhc_on_message tells replies by their kind byte). */
    if (is_reply && (!g->capturing || g->cap_len != 0 || peer != g->cap_peer) &&
        len <= sizeof g->cap)
        is_reply = 0;
    if (is_reply) {
        if (!g->capturing || g->cap_len != 0 || len > sizeof g->cap) {
            fh_log_error("firehose cache: unexpected move reply to %s (%zu bytes) "
                         "dropped", FH_RANK_NAME((int)peer), len);
            return;
        }
        memcpy(g->cap, msg, len);
        g->cap_len = len;
        return;
    }
    reg_msg_t *m = malloc(sizeof *m + len);
    if (m == NULL)
        fh_fatal("firehose cache: out of memory queueing a move");
    m->next = NULL;
    m->peer = peer;
    m->len = len;
    memcpy(m->bytes, msg, len);
    /* Atomic: fh_reg_flush peeks at g->out without the lock. */
    __atomic_store_n(g->out_tail, m, __ATOMIC_RELAXED);
    g->out_tail = &m->next;
}

/* Put-in-move data is written by our CPU: every byte must be mapped and
 * writable, else the move is refused and nothing is written. */
static int env_data_ok(void *arg, uintptr_t addr, size_t len)
{
    return env_allowed(arg, addr, len) &&
           fh_vma_check(addr, len, FH_VMA_READ | FH_VMA_WRITE, NULL);
}

static void env_put_in_move(void *arg, uintptr_t dst, const void *data, size_t len)
{
    (void)arg;
    memcpy((void *)dst, data, len);
}

static void env_log(void *arg, const char *line)
{
    (void)arg;
    /* Under FH_SEGMENT=everything a refused move is followed by copies
     * (firehose_copy.c), whose refusal, if any, is the one that counts. */
    if (fh_reg_core->cfg.segment_mode == FH_SEGMENT_EVERYTHING &&
        strncmp(line, "fhc: refused move", 17) == 0)
        fh_log_verbose(1, "firehose cache: %s", line);
    else
        fh_log_error("firehose cache: %s", line);
}

static void env_name(void *arg, uint32_t peer, char *buf, size_t len)
{
    (void)arg;
    fh_rank_name((int)peer, buf, len);
}

fhc_env_t fh_reg_env(struct fh_reg *g)
{
    return (fhc_env_t){.arg = g, .pin = env_pin, .unpin = env_unpin,
                       .allowed = env_allowed, .send = env_send,
                       .data_ok = env_data_ok, .put_in_move = env_put_in_move,
                       .log = env_log, .name = env_name};
}
