/*
 * fhregcost.c -- what one memory registration costs, by size, on the conduit
 * the runtime picked: the measurement behind the default FH_BUCKET_SIZE
 * (docs/firehose-cache.md, "Choosing the bucket size").
 *
 * For each size 4 KiB .. 4 MiB (powers of two) it registers and deregisters
 * a touched, page-aligned buffer --reps times through the conduit's own
 * mr_reg/mr_dereg (exactly what the firehose cache calls on a miss and an
 * eviction) and prints the median and the 90th percentile of
 * registration + deregistration, and the median per 4 KiB page.
 *
 * One rank is enough (no peer is involved):
 *     FH_CONDUIT=ibv bench/fhregcost [--reps N] [--csv FILE]
 * Under fhrun every rank measures; only rank 0 prints.
 *
 * This tool is in-tree and uses the runtime's internal interface
 * (firehose/internal.h) to reach the conduit; it is not installed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "firehose/internal.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    int reps = 50;
    const char *csv = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc)
            csv = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--reps N] [--csv FILE]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 100000) {
        fprintf(stderr, "fhregcost: --reps %d: expected 1..100000\n", reps);
        return 2;
    }
    int rc = fh_init(&argc, &argv);
    if (rc != FH_OK) {
        fprintf(stderr, "fhregcost: fh_init: %s\n", fh_last_error());
        return 1;
    }
    fh_rt_t *rt = fh_rt;
    const size_t maxsz = (size_t)4 << 20;
    char *buf = mmap(NULL, maxsz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    double *t = malloc((size_t)reps * sizeof *t);
    if (buf == MAP_FAILED || t == NULL) {
        fprintf(stderr, "fhregcost: out of memory\n");
        return 1;
    }
    memset(buf, 1, maxsz);
    FILE *out = NULL;
    if (csv != NULL && fh_rank() == 0) {
        out = fopen(csv, "w");
        if (out == NULL) {
            perror(csv);
            return 1;
        }
        fprintf(out, "conduit,bytes,median_us,p90_us,us_per_page\n");
    }
    if (fh_rank() == 0)
        printf("# fhregcost: conduit %s, %d reps per size, reg+dereg of a touched buffer\n"
               "%10s %12s %12s %14s\n", rt->limits.description, reps, "bytes",
               "median_us", "p90_us", "us_per_4k_page");
    for (size_t sz = 4096; sz <= maxsz; sz *= 2) {
        for (int r = 0; r < reps; r++) {
            struct fh_mr *mr = NULL;
            fh_rkey_t rk;
            double t0 = now_us();
            rc = rt->cops->mr_reg(rt->conduit, buf, sz,
                                  FH_MR_LOCAL | FH_MR_REMOTE_READ | FH_MR_REMOTE_WRITE, &mr,
                                  &rk);
            if (rc != FH_OK) {
                fprintf(stderr, "fhregcost: registering %zu bytes: %s\n", sz,
                        fh_last_error());
                return 1;
            }
            rt->cops->mr_dereg(rt->conduit, mr);
            t[r] = now_us() - t0;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        double med = t[reps / 2], p90 = t[(reps * 9) / 10 < reps ? (reps * 9) / 10 : reps - 1];
        if (fh_rank() == 0) {
            printf("%10zu %12.2f %12.2f %14.3f\n", sz, med, p90, med / (double)(sz / 4096));
            if (out)
                fprintf(out, "\"%s\",%zu,%.3f,%.3f,%.4f\n", rt->limits.description, sz, med,
                        p90, med / (double)(sz / 4096));
        }
    }
    if (out)
        fclose(out);
    free(t);
    munmap(buf, maxsz);
    fh_finalize();
    return 0;
}
