/*
 * fhsim_report.c -- the summary of a tests/sim/fhsim.c run that passed:
 * the caches' counters summed over every rank and peer (fhc_stats,
 * fhc_peer_stats), the oracle's hit rate beside the cache's, moves per
 * completed operation, the simulator's own counters, and a line each for
 * the adaptive victim FIFO, adaptive budgets and freed memory when they ran.
 *
 * Both rates count an operation as a hit only if it needed no move; the
 * cache's hit_rate counts put-in-move completions as misses
 * (tests/sim/README.md).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fhsim_sim.h"

void fhsim_totals(fhsim_totals_t *t)
{
    fhc_stats_t cs;
    fhc_peer_stats_t ps;
    memset(t, 0, sizeof *t);
    for (uint32_t i = 0; i < opt.nodes; i++) {
        fhc_stats(nodes[i].c, &cs);
        t->repins += cs.victim_repins;
        t->grows += cs.maxvictim_grows;
        t->shrinks += cs.maxvictim_shrinks;
        t->mv_top = cs.maxvictim_now > t->mv_top ? cs.maxvictim_now : t->mv_top;
        t->evictions += cs.evictions;
        t->regs += cs.registrations;
        t->refused += cs.refused;
        for (uint32_t j = 0; j < opt.nodes; j++) {
            fhc_peer_stats(nodes[i].c, j, &ps);
            t->hits += ps.hits;
            t->merges += ps.merges;
            t->splits += ps.splits;
            t->misses += ps.misses;
            t->moves += ps.moves;
            t->coal += ps.coalesced;
            t->pim += ps.put_in_move;
            t->waits += ps.budget_waits;
            t->errs += ps.errors;
            t->grants += ps.grants;
            t->reclaims += ps.reclaims;
            t->deferred += ps.deferred;
        }
    }
    fhsim_oracle_counts(oracle, &t->o_ops, &t->o_hits);
}

void fhsim_report(const fhsim_totals_t *t, double secs)
{
    printf("fhsim: PASS ops=%" PRIu64 " hits=%" PRIu64 " misses=%" PRIu64
           " hit_rate=%.1f%% moves=%" PRIu64 " coalesced=%" PRIu64
           " put_in_move=%" PRIu64 " budget_waits=%" PRIu64 " evictions=%" PRIu64
           " registrations=%" PRIu64 " refused=%" PRIu64 " errors=%" PRIu64
           " oracle_hit_rate=%.1f%% moves_per_op=%.3f\n",
           st.completed, t->hits, t->misses, t->hits + t->misses ? 100.0 * (double)t->hits / (double)(t->hits + t->misses) : 0.0,
           t->moves, t->coal, t->pim, t->waits, t->evictions, t->regs, t->refused, t->errs,
           t->o_ops ? 100.0 * (double)t->o_hits / (double)t->o_ops : 0.0,
           st.completed ? (double)t->moves / (double)st.completed : 0.0);
    printf("fhsim: merges=%" PRIu64 " splits=%" PRIu64 " local_pins=%" PRIu64
           " local_again=%" PRIu64 " rdma_checks=%" PRIu64
           " peer_checks=%" PRIu64 " sample_checks=%" PRIu64 " full_checks=%" PRIu64
           " msgs=%" PRIu64
           " max_latency=%" PRIu64 " steps=%" PRIu64 " time=%.1fs\n",
           t->merges, t->splits, st.local_pins, st.local_again, st.rdma_checks, st.peer_checks,
           st.sample_checks, st.full_checks, st.msgs, st.max_latency, now, secs);
    if (opt.victim_adaptive)
        printf("fhsim: victim=adaptive maxvictim=%zu maxvictim_max=%zu "
               "maxvictim_now_top=%zu victim_repins=%" PRIu64 " grows=%" PRIu64
               " shrinks=%" PRIu64 "\n", opt.maxvictim, opt.maxvictim_max, t->mv_top,
               t->repins, t->grows, t->shrinks);
    if (opt.budget == FHC_BUDGET_ADAPTIVE)
        printf("fhsim: budget=adaptive grants=%" PRIu64 " reclaims=%" PRIu64
               " deferred=%" PRIu64 "\n", t->grants, t->reclaims, t->deferred);
    if (opt.free_rate)
        printf("fhsim: frees=%" PRIu64 " rdma_through_revoked=%" PRIu64 "\n", st.frees,
               st.stale_rdma);
}
