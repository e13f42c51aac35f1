/*
 * stats.c -- per-peer counters.  Each path keeps its own array (written only
 * under that path's lock); readers sum over paths with relaxed loads, so
 * counting never writes a cache line shared between threads.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* The counters: every field after the size/version header, all uint64_t. */
#define FIRST offsetof(fh_peer_stats_t, puts)
#define NFIELDS ((sizeof(fh_peer_stats_t) - FIRST) / sizeof(uint64_t))
_Static_assert(FIRST + NFIELDS * sizeof(uint64_t) == sizeof(fh_peer_stats_t),
               "fh_peer_stats_t: a header, then uint64_t counters only");

static void add_peer(const fh_rt_t *rt, int rank, uint64_t *acc)
{
    for (int i = 0; i < fh_paths_made(rt); i++) {
        const uint64_t *f =
            (const uint64_t *)((const char *)&rt->paths[i].stats[rank] + FIRST);
        for (size_t k = 0; k < NFIELDS; k++)
            acc[k] += __atomic_load_n(&f[k], __ATOMIC_RELAXED);
    }
}

int fh_stats_peer(int rank, fh_peer_stats_t *out)
{
    fh_clear_error();
    fh_rt_t *rt = fh_rt;
    if (rt == NULL || fh_rank() < 0)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_stats_peer: firehose is not initialized");
    if (out == NULL)
        return fh_set_error(FH_ERR_INVALID, "fh_stats_peer: NULL out");
    if (out->size < FIRST)
        return fh_set_error(FH_ERR_INVALID, "fh_stats_peer: out->size %u is smaller than "
                            "the header (set it up with FH_PEER_STATS_INIT)", out->size);
    int rc = fh_check_rank("fh_stats_peer", rank);
    if (rc != FH_OK)
        return rc;
    fh_peer_stats_t all;
    memset(&all, 0, sizeof all);
    uint64_t *acc = (uint64_t *)((char *)&all + FIRST);
    if (rank == rt->rank) {
        for (int r = 0; r < rt->nranks; r++)
            add_peer(rt, r, acc);
    } else {
        add_peer(rt, rank, acc);
    }
    if (rt->reg_ops->stats != NULL)
        rt->reg_ops->stats(&rt->core, rank, &all);   /* the registration strategy's counters */
    size_t n = out->size < sizeof all ? out->size : sizeof all;
    all.size = (uint32_t)n;
    all.version = FH_PEER_STATS_VERSION;
    memcpy(out, &all, n);
    return FH_OK;
}

static void print_row(FILE *f, int me, const char *who, const fh_peer_stats_t *s)
{
    fprintf(f,
            "firehose[%d]: stats %-6s puts=%llu (%llu B) gets=%llu (%llu B) am_sent=%llu "
            "am_recv=%llu atomics=%llu reg_hits=%llu reg_misses=%llu moves=%llu "
            "coalesced=%llu put_in_move=%llu evictions=%llu victims=%llu "
            "registrations=%llu unregistrations=%llu refused=%llu pinned_remote=%llu "
            "pinned_local=%llu invalidations=%llu revokes=%llu revoked=%llu "
            "revoked_busy=%llu dropped=%llu atomics_refused=%llu maxvictim_now=%llu "
            "victim_repins=%llu budget=%llu grants=%llu reclaims=%llu deferred=%llu "
            "credit_msgs=%llu links_lost=%llu reaims=%llu copies=%llu\n",
            me, who, (unsigned long long)s->puts, (unsigned long long)s->put_bytes,
            (unsigned long long)s->gets, (unsigned long long)s->get_bytes,
            (unsigned long long)s->am_sent, (unsigned long long)s->am_received,
            (unsigned long long)s->atomics, (unsigned long long)s->reg_hits,
            (unsigned long long)s->reg_misses, (unsigned long long)s->reg_moves,
            (unsigned long long)s->reg_pending_coalesced,
            (unsigned long long)s->reg_put_in_move, (unsigned long long)s->reg_evictions,
            (unsigned long long)s->reg_victims, (unsigned long long)s->reg_registrations,
            (unsigned long long)s->reg_unregistrations, (unsigned long long)s->reg_refused,
            (unsigned long long)s->bytes_pinned_remote,
            (unsigned long long)s->bytes_pinned_local,
            (unsigned long long)s->reg_invalidations, (unsigned long long)s->reg_revokes_sent,
            (unsigned long long)s->reg_revoked, (unsigned long long)s->reg_revoked_busy,
            (unsigned long long)s->am_dropped, (unsigned long long)s->atomics_refused,
            (unsigned long long)s->reg_maxvictim_now,
            (unsigned long long)s->reg_victim_repins,
            (unsigned long long)s->reg_budget, (unsigned long long)s->reg_grants,
            (unsigned long long)s->reg_reclaims, (unsigned long long)s->reg_deferred,
            (unsigned long long)s->am_credit_msgs, (unsigned long long)s->links_lost,
            (unsigned long long)s->reg_reaims, (unsigned long long)s->reg_copies);
}

int fh_stats_print(void *file)
{
    fh_clear_error();
    fh_rt_t *rt = fh_rt;
    if (rt == NULL)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_stats_print: firehose is not initialized");
    /* Not handler-safe (stdio may block on the file): like every such call. */
    fh_tls_t *self = fh_tls_peek();
    if (self != NULL && self->in_handler)
        return fh_set_error(FH_ERR_IN_HANDLER, "fh_stats_print: inside an AM handler");
    FILE *f = file ? file : stderr;
    fh_peer_stats_t s = FH_PEER_STATS_INIT;
    char who[32];
    for (int r = 0; r < rt->nranks; r++) {
        if (r == rt->rank)
            continue;
        fh_stats_peer(r, &s);
        snprintf(who, sizeof who, "->%d", r);
        print_row(f, rt->rank, who, &s);
    }
    fh_stats_peer(rt->rank, &s);
    print_row(f, rt->rank, "total", &s);
    fflush(f);
    return FH_OK;
}
