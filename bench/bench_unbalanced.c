/*
 * bench_unbalanced.c -- `unbalanced`: one hot pair among idle ranks (issue
 * 32, the adaptive budgets' real-run figure).
 *
 * Rank 0 puts only to rank 1; every other rank is alive (it polls, asleep
 * between polls) but never communicates.  Under the static split rank 0
 * may hold only F = M / (N-1) bytes of firehoses on rank 1 although the
 * other N-2 shares of rank 1's M sit unused; a policy whose budgets follow
 * demand (FH_FIREHOSE_BUDGET=adaptive) can let it hold up to about M.
 * The working set W grows from F/4 in steps of sqrt(2) up to 2 x M (the
 * last step; --max-ws sets another top); at each W:
 *   - warm-up: one 8-byte put to every bucket of W;
 *   - latency: --iters (2000; 300 with --quick) blocking 8-byte puts at
 *     random 8-byte aligned offsets of W, each timed: median and p99 in us;
 *   - the hit rate of those puts from rank 0's fh_stats_peer towards rank 1
 *     (reg_hits / (reg_hits + reg_misses)).
 * Rank 1 polls with sched_yield between polls (it serves the moves),
 * ranks 2.. sleep 0.5 ms between polls, so that 8 ranks on a 2-core
 * machine leave the cores to the pair.
 *
 * CSV columns:
 *   budget,victim,ranks,working_set,F,M,iters,lat_median_us,lat_p99_us,hit_rate
 * (budget and victim: FH_FIREHOSE_BUDGET and FH_FIREHOSE_VICTIM as set, or
 * "static").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fhbench.h"

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

static void counts_to_1(uint64_t *h, uint64_t *m)
{
    fh_peer_stats_t s = FH_PEER_STATS_INIT;
    FHB_TRY(fh_stats_peer(1, &s));
    *h = s.reg_hits;
    *m = s.reg_misses;
}

int fhb_unbalanced(const fhb_opts_t *o)
{
    int n = fh_nranks();
    if (n < 2) {
        if (fh_rank() == 0)
            fprintf(stderr, "fhbench unbalanced: needs at least 2 ranks\n");
        return 1;
    }
    size_t M = fhb_firehose_m();
    size_t bucket = fhb_bucket() ? fhb_bucket() : 65536;
    size_t F = M / (size_t)(n - 1);
    F -= F % bucket;
    if (F < bucket)
        F = bucket;
    size_t top = o->max_ws ? o->max_ws : 2 * M;
    if (top < bucket)
        top = bucket;
    fh_seg_t seg;
    void *mine, *remote;
    FHB_TRY(fh_segment_create(top, &seg, &mine));
    FHB_TRY(fh_segment_query(seg, 1, &remote, NULL));
    FILE *csv = fhb_csv_open(o, "budget,victim,ranks,working_set,F,M,iters,lat_median_us,"
                                "lat_p99_us,hit_rate");
    const char *budget = env_or("FH_FIREHOSE_BUDGET", "static");
    const char *victim = env_or("FH_FIREHOSE_VICTIM", "static");
    FHB_TRY(fh_barrier());
    if (fh_rank() == 0) {
        char src[8];
        memset(src, 0x5a, sizeof src);
        long it = fhb_iters(o, 2000, 300);
        double *t = malloc(sizeof(double) * (size_t)it);
        if (!t)
            fh_abort(1, "fhbench: out of memory");
        uint64_t seed = 0x9e3779b97f4a7c15ull;
        printf("unbalanced: %d ranks, rank 0 -> rank 1 only; M = %zu, F = %zu, bucket %zu, "
               "budget %s, victim %s\n", n, M, F, bucket, budget, victim);
        printf("%12s %8s %10s %10s %8s\n", "working_set", "W/F", "lat_med", "lat_p99", "hit%");
        for (double w = (double)F / 4;; w *= M_SQRT2) {
            if (w > (double)top)
                w = (double)top;          /* the last step is the top itself */
            size_t W = (size_t)w & ~(bucket - 1);
            if (W < bucket)
                W = bucket;
            for (size_t off = 0; off < W; off += bucket)
                FHB_TRY(fh_put(1, (char *)remote + off, src, 8));
            uint64_t h0, m0, h1, m1;
            counts_to_1(&h0, &m0);
            for (long i = 0; i < it; i++) {
                size_t off = (size_t)(rng_next(&seed) % (W / 8)) * 8;
                double t0 = fhb_now_ns();
                FHB_TRY(fh_put(1, (char *)remote + off, src, 8));
                t[i] = (fhb_now_ns() - t0) / 1e3;
            }
            counts_to_1(&h1, &m1);
            h1 -= h0;
            m1 -= m0;
            double hr = h1 + m1 ? (double)h1 / (double)(h1 + m1) : 0.0;
            double med = fhb_quantile(t, (size_t)it, 0.5);
            double p99 = fhb_quantile(t, (size_t)it, 0.99);
            fhb_csv_row(csv, "%s,%s,%d,%zu,%zu,%zu,%ld,%.3f,%.3f,%.4f", budget, victim, n, W,
                        F, M, it, med, p99, hr);
            printf("%12zu %8.2f %10.2f %10.2f %8.1f\n", W, (double)W / (double)F, med, p99,
                   100.0 * hr);
            fflush(stdout);
            if (w >= (double)top)
                break;
        }
        free(t);
        fhb_unpark();
    } else {
        fhb_park(fh_rank() == 1 ? FHB_PARK_YIELD : FHB_PARK_SLEEP);
    }
    fhb_csv_close(csv);
    FHB_TRY(fh_barrier());
    FHB_TRY(fh_segment_destroy(seg));
    return 0;
}
