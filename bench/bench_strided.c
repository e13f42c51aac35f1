/*
 * bench_strided.c -- `strided`: fh_put_strided / fh_get_strided of many
 * small blocks, the shape of a Co-Array Fortran section a(1:N:2).
 *
 * Rank 0 moves `count` blocks of `blk` bytes between its private buffer
 * and rank 1's segment, every second block on both sides (stride 2*blk:
 * a(1:2N:2)[2] = b(1:2N:2) with 8-byte elements for blk = 8).  Rows:
 *   strided_put / strided_get   blk = 8, count = 1M (--quick: 64k): the
 *                               issue's number, time per call and per
 *                               element (ns/elem in the msgs_s column's
 *                               place: elements per second);
 *   sweep_put_<blk> / sweep_get_<blk>  blk = 8 B .. 8 KiB at 4 MiB of data
 *                               per call (--quick: 1 MiB): where gathering
 *                               into AMs stops paying (the net route's
 *                               FH_STRIDED_AM_MAX).
 * Each: the median of `reps` blocking calls (3 with --quick, else 5),
 * after one unmeasured call.  The first call's data is checked (every
 * element of the destination that should have changed did, and the gap
 * between blocks did not).
 *
 * Rank 1 is a passive target polling fh_poll (fhb_target_wait).
 * CSV columns: fhb_rma_columns (op,size,iters,median_us,p99_us,mb_s,msgs_s).
 */
#include <stdlib.h>
#include <string.h>

#include "fhbench.h"

typedef struct strided_ctx {
    char *remote;     /* rank 1's segment */
    char *local;      /* rank 0's private buffer */
    size_t bytes;     /* size of both */
} strided_ctx_t;

/* Median of reps timed calls (us); checks the first. */
static double run(strided_ctx_t *c, int is_put, size_t blk, size_t count, int reps)
{
    double t[16];
    ptrdiff_t st = (ptrdiff_t)(2 * blk);
    for (int i = -1; i < reps; i++) {
        if (i == -1 && !is_put)
            memset(c->local, 0, c->bytes);
        double t0 = fhb_now_ns();
        if (is_put)
            FHB_TRY(fh_put_strided(1, c->remote, st, c->local, st, blk, count));
        else
            FHB_TRY(fh_get_strided(c->local, st, 1, c->remote, st, blk, count));
        if (i >= 0)
            t[i] = (fhb_now_ns() - t0) / 1e3;
        if (i == -1 && !is_put) {
            /* rank 1's segment holds (byte index & 0xff) | 1, see fhb_strided */
            for (size_t b = 0; b < count; b++)
                for (size_t k = 0; k < blk; k++) {
                    size_t at = b * 2 * blk + k;
                    if ((unsigned char)c->local[at] != ((at & 0xff) | 1) ||
                        c->local[at + blk] != 0) {
                        fprintf(stderr, "fhbench strided: get of blk %zu: wrong byte at "
                                "%zu\n", blk, at);
                        fh_abort(1, "fhbench strided: failed");
                    }
                }
        }
    }
    return fhb_quantile(t, (size_t)reps, 0.5);
}

static void row(FILE *csv, const char *op, size_t blk, size_t count, int reps, double us)
{
    double bytes = (double)blk * (double)count;
    printf("%-16s blk %6zu B x %8zu: %10.1f us per call, %8.1f ns per block, %8.1f MB/s\n",
           op, blk, count, us, us * 1e3 / (double)count, bytes / us);
    fhb_csv_row(csv, "%s,%zu,%d,%.3f,%.3f,%.3f,%.0f", op, blk, reps, us, us, bytes / us,
                (double)count / (us * 1e-6));
}

int fhb_strided(const fhb_opts_t *o)
{
    strided_ctx_t c;
    size_t big = o->quick ? ((size_t)64 << 10) : ((size_t)1 << 20);
    size_t sweep = o->quick ? ((size_t)1 << 20) : ((size_t)4 << 20);
    c.bytes = 2 * 8 * big > 2 * sweep ? 2 * 8 * big : 2 * sweep;
    int reps = o->quick ? 3 : 5;
    fh_seg_t seg;
    void *mine;
    FHB_TRY(fh_segment_create(c.bytes, &seg, &mine));
    FHB_TRY(fh_segment_query(seg, 1, (void **)&c.remote, NULL));
    for (size_t i = 0; i < c.bytes; i++)
        ((unsigned char *)mine)[i] = (unsigned char)((i & 0xff) | 1);
    c.local = malloc(c.bytes);
    if (c.local == NULL)
        fh_abort(1, "fhbench strided: failed");
    memset(c.local, 0x5a, c.bytes);
    FHB_TRY(fh_barrier());
    FILE *csv = fhb_csv_open(o, fhb_rma_columns);
    if (fh_rank() == 0) {
        row(csv, "strided_get", 8, big, reps, run(&c, 0, 8, big, reps));
        row(csv, "strided_put", 8, big, reps, run(&c, 1, 8, big, reps));
        for (size_t blk = 8; blk <= 8192; blk *= 4) {
            char op[32];
            size_t n = sweep / blk;
            snprintf(op, sizeof op, "sweep_get_%zu", blk);
            row(csv, op, blk, n, reps, run(&c, 0, blk, n, reps));
            snprintf(op, sizeof op, "sweep_put_%zu", blk);
            row(csv, op, blk, n, reps, run(&c, 1, blk, n, reps));
        }
    }
    fhb_csv_close(csv);
    fhb_target_wait(o);
    FHB_TRY(fh_segment_destroy(seg));
    free(c.local);
    return 0;
}
