/*
 * bench_sweep.c -- `sweep`: the firehose paper's working-set experiment.
 *
 * Rank 0 puts to random locations of rank 1's segment, drawn uniformly over
 * a working set W that grows from 1 MiB to --max-ws (default 4 x M, M the
 * firehose budget) in steps of sqrt(2).  At each W:
 *   - warm-up: one 8-byte put to every bucket of W (so that below M every
 *     later access can hit);
 *   - latency: blocking 8-byte puts at random 8-byte aligned offsets, each
 *     timed (median, p99);
 *   - bandwidth: 64 KiB puts at random 64 KiB aligned offsets, issued with
 *     fh_put_nbi in windows of BW_WINDOW, MB/s over the whole phase;
 * and the firehose hit rate of each phase from rank 0's fh_stats_peer
 * (reg_hits, reg_misses; empty for strategies that do not count them on the
 * initiator: the rendezvous forms count them at the target).
 *
 * One process runs one FH_REG_STRATEGY (it is fixed at fh_init and equal on
 * all ranks); bench/run-all.sh runs one series per strategy.
 *
 * CSV columns:
 *   strategy,working_set,M,lat_iters,lat_median_us,lat_p99_us,lat_hit_rate,
 *   bw_iters,bw_mb_s,bw_hit_rate
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fhbench.h"

#define BW_SIZE ((size_t)64 << 10)
#define BW_WINDOW 16

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* hit rate of the counter deltas as text ("" when nothing was counted). */
static const char *rate(uint64_t h0, uint64_t m0, char *buf, size_t len)
{
    uint64_t h, m;
    fhb_reg_counts(&h, &m);
    h -= h0;
    m -= m0;
    if (h + m == 0)
        buf[0] = '\0';
    else
        snprintf(buf, len, "%.4f", (double)h / (double)(h + m));
    return buf;
}

int fhb_sweep(const fhb_opts_t *o)
{
    size_t M = fhb_firehose_m();
    size_t max_ws = o->max_ws ? o->max_ws : 4 * M;
    if (max_ws < ((size_t)1 << 20))
        max_ws = (size_t)1 << 20;
    size_t bucket = fhb_bucket() ? fhb_bucket() : 65536;
    fh_seg_t seg;
    void *mine, *remote;
    FHB_TRY(fh_segment_create(max_ws, &seg, &mine));
    FHB_TRY(fh_segment_query(seg, 1, &remote, NULL));
    FILE *csv = fhb_csv_open(o, "strategy,working_set,M,lat_iters,lat_median_us,lat_p99_us,"
                                "lat_hit_rate,bw_iters,bw_mb_s,bw_hit_rate");
    if (fh_rank() == 0) {
        char *src = mine;                 /* registered: our own segment */
        memset(src, 0x11, BW_SIZE < max_ws ? BW_SIZE : max_ws);
        long lit = fhb_iters(o, 3000, 600);
        long bit = o->quick ? 100 : 400;
        double *t = malloc(sizeof(double) * (size_t)lit);
        if (!t)
            fh_abort(1, "fhbench: out of memory");
        uint64_t seed = 0x9e3779b97f4a7c15ull;
        printf("strategy %s, M = %zu bytes, bucket %zu\n", fhb_strategy(), M, bucket);
        printf("%12s %10s %10s %8s %10s %8s\n", "working_set", "lat_med", "lat_p99", "hit%",
               "bw_MB/s", "hit%");
        for (double w = 1 << 20; w <= (double)max_ws * 1.0001; w *= M_SQRT2) {
            size_t W = (size_t)w & ~(bucket - 1);
            if (W < bucket)
                W = bucket;
            for (size_t off = 0; off < W; off += bucket)
                FHB_TRY(fh_put(1, (char *)remote + off, src, 8));
            uint64_t h0, m0;
            fhb_reg_counts(&h0, &m0);
            for (long i = 0; i < lit; i++) {
                size_t off = (size_t)(rng_next(&seed) % (W / 8)) * 8;
                double t0 = fhb_now_ns();
                FHB_TRY(fh_put(1, (char *)remote + off, src, 8));
                t[i] = (fhb_now_ns() - t0) / 1e3;
            }
            char lr[32], br[32];
            rate(h0, m0, lr, sizeof lr);
            double med = fhb_quantile(t, (size_t)lit, 0.5);
            double p99 = fhb_quantile(t, (size_t)lit, 0.99);
            fhb_reg_counts(&h0, &m0);
            size_t nbw = W / BW_SIZE ? W / BW_SIZE : 1;
            size_t bsz = W < BW_SIZE ? W : BW_SIZE;
            double t0 = fhb_now_ns();
            for (long i = 0; i < bit; i++) {
                size_t off = (size_t)(rng_next(&seed) % nbw) * BW_SIZE;
                FHB_TRY(fh_put_nbi(1, (char *)remote + off, src, bsz));
                if ((i + 1) % BW_WINDOW == 0)
                    FHB_TRY(fh_wait_nbi());
            }
            FHB_TRY(fh_wait_nbi());
            double bw = (double)bsz * (double)bit / ((fhb_now_ns() - t0) / 1e3);
            rate(h0, m0, br, sizeof br);
            fhb_csv_row(csv, "%s,%zu,%zu,%ld,%.3f,%.3f,%s,%ld,%.3f,%s", fhb_strategy(), W, M,
                        lit, med, p99, lr, bit, bw, br);
            printf("%12zu %10.2f %10.2f %8s %10.1f %8s\n", W, med, p99, lr[0] ? lr : "-", bw,
                   br[0] ? br : "-");
            fflush(stdout);
        }
        free(t);
    }
    fhb_csv_close(csv);
    fhb_target_wait(o);
    FHB_TRY(fh_segment_destroy(seg));
    return 0;
}
