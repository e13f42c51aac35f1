/*
 * fhdemo.c -- the 2-rank demo: blocking put/get latency and put bandwidth.
 *
 * Rank 0 measures, for each size, `iters` blocking fh_put and fh_get calls
 * to rank 1's segment (after a warmup) and prints the median and the 99th
 * percentile latency of each, plus the put bandwidth derived from the median.
 * Then it prints its per-peer counters for rank 1 (fh_stats_peer).  Every
 * other rank only waits in the final barrier.  Every number printed is
 * measured in this run.
 *
 * Usage: fhrun -n 2 bench/fhdemo [--iters N] [--warmup N]
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "firehose.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)   /* v sorted */
{
    int i = (int)(p * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static long opt(int argc, char **argv, const char *name, long def)
{
    size_t l = strlen(name);
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], name, l) != 0) continue;
        if (argv[i][l] == '=') return strtol(argv[i] + l + 1, NULL, 0);
        if (argv[i][l] == '\0' && i + 1 < argc) return strtol(argv[i + 1], NULL, 0);
    }
    return def;
}

#define TRY(call) do { int rc_ = (call); if (rc_ != FH_OK) {                  \
        fprintf(stderr, "fhdemo: %s failed: %s (%s)\n", #call,               \
                fh_err_name(rc_), fh_last_error());                          \
        if (fh_rank() >= 0) fh_abort(1, "fhdemo failed");                    \
        return 1; } } while (0)

int main(int argc, char **argv)
{
    static const size_t sizes[] = {8, 64, 1024, 8192, 65536, 1 << 20};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    const size_t maxsz = 1 << 20;

    TRY(fh_init(&argc, &argv));
    int me = fh_rank(), n = fh_nranks();
    int iters = (int)opt(argc, argv, "--iters", 1000);
    int warmup = (int)opt(argc, argv, "--warmup", 100);
    if (iters < 1) iters = 1;
    if (warmup < 0) warmup = 0;

    fh_seg_t seg;
    void *local;
    TRY(fh_segment_create(maxsz, &seg, &local));

    if (n < 2) {
        if (me == 0)
            fprintf(stderr, "fhdemo: needs 2 ranks (fhrun -n 2 %s)\n", argv[0]);
        fh_finalize();
        return 2;
    }

    if (me == 0) {
        void *remote;
        TRY(fh_segment_query(seg, 1, &remote, NULL));
        /* Local buffer from malloc: registration is the runtime's job. */
        unsigned char *buf = malloc(maxsz);
        double *put_us = malloc(sizeof(double) * (size_t)iters);
        double *get_us = malloc(sizeof(double) * (size_t)iters);
        if (!buf || !put_us || !get_us) {
            fh_abort(1, "fhdemo: out of memory");
        }
        memset(buf, 0x5a, maxsz);

        printf("fhdemo: %d ranks, rank 0 -> rank 1, blocking fh_put/fh_get, "
               "%d iterations after %d warmup\n", n, iters, warmup);
        printf("%10s %12s %12s %12s %12s %12s\n", "size(B)", "put med(us)",
               "put p99(us)", "get med(us)", "get p99(us)", "put MB/s");
        for (int s = 0; s < nsizes; s++) {
            size_t sz = sizes[s];
            int it = sz >= (1 << 20) && iters > 200 ? 200 : iters;
            for (int i = 0; i < warmup; i++) {
                TRY(fh_put(1, remote, buf, sz));
                TRY(fh_get(buf, 1, remote, sz));
            }
            for (int i = 0; i < it; i++) {
                double t0 = now_us();
                TRY(fh_put(1, remote, buf, sz));
                put_us[i] = now_us() - t0;
            }
            for (int i = 0; i < it; i++) {
                double t0 = now_us();
                TRY(fh_get(buf, 1, remote, sz));
                get_us[i] = now_us() - t0;
            }
            qsort(put_us, (size_t)it, sizeof *put_us, cmp_double);
            qsort(get_us, (size_t)it, sizeof *get_us, cmp_double);
            double pm = pct(put_us, it, 0.5), gm = pct(get_us, it, 0.5);
            printf("%10zu %12.2f %12.2f %12.2f %12.2f %12.1f\n", sz, pm,
                   pct(put_us, it, 0.99), gm, pct(get_us, it, 0.99),
                   pm > 0 ? (double)sz / pm : 0.0);   /* B/us == MB/s */
        }

        fh_peer_stats_t st = FH_PEER_STATS_INIT;
        TRY(fh_stats_peer(1, &st));
        printf("\nper-peer counters of rank 0 for rank 1 (fh_stats_peer):\n");
        printf("  puts %" PRIu64 "  gets %" PRIu64 "  put_bytes %" PRIu64
               "  get_bytes %" PRIu64 "\n", st.puts, st.gets, st.put_bytes,
               st.get_bytes);
        printf("  reg_hits %" PRIu64 "  reg_misses %" PRIu64 "  reg_moves %"
               PRIu64 "  reg_evictions %" PRIu64 "\n", st.reg_hits,
               st.reg_misses, st.reg_moves, st.reg_evictions);
        fflush(stdout);
        free(buf);
        free(put_us);
        free(get_us);
    }

    TRY(fh_barrier());
    TRY(fh_segment_destroy(seg));
    TRY(fh_finalize());
    return 0;
}
