/*
 * bench_pair.c -- the body of `raw` that does not depend on the transport:
 * the per-size table over the raw transport, the paired rounds (raw vs the
 * firehose runtime back to back), and rank 1's wait.  bench_raw.c
 * (libfabric) and bench_raw_ibv.c (verbs) open their transport and call
 * fhb_raw_body with their operations (fhb_raw_ops_t, fhbench.h).
 *
 * Paired rows.  Timings on a shared machine drift by several times within
 * a minute, so the ratios the targets are about are also measured PAIRED:
 * in each of R rounds, the raw transport and the firehose runtime (fh_put /
 * fh_put_nb on rank 1's segment, whatever FH_REG_STRATEGY says) run the
 * same small batch back to back; the medians over all rounds of each side
 * are reported as ops pair_raw_* and pair_fh_*; *_best rows hold the best
 * round of each side (lowest round-median latency, highest round
 * bandwidth), and pair_ratio_* rows the median over rounds of the
 * per-round ratio firehose / raw (in the median_us column for latency, the
 * mb_s column for bandwidth): interference that hits a whole round cancels
 * out of its ratio.
 *
 * Rank 1 polls mostly the side that rank 0 is using: rank 0 announces the
 * phase with a raw put of the phase word (offset 8 of rank 1's raw buffer).
 * The other side is still polled every PHASE_SKIP loops (a phase change
 * needs the raw side to progress).
 */
#include <stdlib.h>
#include <string.h>

#include "fhbench.h"

#define WINDOW 64
enum { PHASE_RAW = 0, PHASE_FH = 1 };
#define STOP_OFF 0
#define PHASE_OFF 8
#define PHASE_SKIP 64

typedef struct fh_side {
    void *remote;            /* rank 1's firehose segment */
    char *local;             /* ours, registered */
} fh_side_t;

static double fh_lat_one(const fh_side_t *f, size_t n)
{
    double t0 = fhb_now_ns();
    FHB_TRY(fh_put(1, f->remote, f->local, n));
    return (fhb_now_ns() - t0) / 1e3;
}

static double fh_flood_mbs(const fh_side_t *f, size_t n, long ops)
{
    fh_handle_t h[WINDOW];
    double t0 = fhb_now_ns();
    for (long i = 0; i < ops; i++)
        FHB_TRY(fh_put_nb(1, f->remote, f->local, n, &h[i]));
    FHB_TRY(fh_wait_all(h, (size_t)ops));
    return (double)n * (double)ops / ((fhb_now_ns() - t0) / 1e3);
}

static double raw_flood_mbs(const fhb_raw_ops_t *r, size_t n, long ops)
{
    return (double)n * (double)ops / r->flood(r->ctx, 1, n, ops) / 1e6;
}

static void set_phase(const fhb_raw_ops_t *r, uint64_t ph)
{
    r->put_word(r->ctx, PHASE_OFF, ph);
}

/* Median of the per-round ratios y[i] / x[i] (x, y untouched). */
static double ratio_median(const double *x, const double *y, int n)
{
    double q[64];
    for (int i = 0; i < n; i++)
        q[i] = x[i] > 0 ? y[i] / x[i] : 0.0;
    return fhb_quantile(q, (size_t)n, 0.5);
}

static void paired(const fhb_raw_ops_t *r, const fh_side_t *f, FILE *csv, int quick,
                   size_t top)
{
    int rounds = quick ? 12 : 40, k = quick ? 15 : 50;
    size_t nlat = (size_t)rounds * (size_t)k;
    double *a = malloc(sizeof(double) * nlat), *b = malloc(sizeof(double) * nlat);
    double ra[64], rb[64];
    if (!a || !b)
        fh_abort(1, "fhbench: out of memory");
    for (int i = 0; i < 20; i++) {               /* warm both (firehose: the miss) */
        set_phase(r, PHASE_RAW);
        r->lat_one(r->ctx, 8);
        set_phase(r, PHASE_FH);
        fh_lat_one(f, 8);
    }
    for (int rd = 0; rd < rounds; rd++) {
        double *x = a + (size_t)rd * (size_t)k, *y = b + (size_t)rd * (size_t)k;
        set_phase(r, PHASE_RAW);
        for (int i = 0; i < k; i++)
            x[i] = r->lat_one(r->ctx, 8);
        set_phase(r, PHASE_FH);
        for (int i = 0; i < k; i++)
            y[i] = fh_lat_one(f, 8);
        ra[rd] = fhb_quantile(x, (size_t)k, 0.5);   /* this round's medians */
        rb[rd] = fhb_quantile(y, (size_t)k, 0.5);
    }
    double rr = ratio_median(ra, rb, rounds);
    double abest = fhb_quantile(ra, (size_t)rounds, 0.0), bbest = fhb_quantile(rb, (size_t)rounds, 0.0);
    double am = fhb_quantile(a, nlat, 0.5), ap = fhb_quantile(a, nlat, 0.99);
    double bm = fhb_quantile(b, nlat, 0.5), bp = fhb_quantile(b, nlat, 0.99);
    fhb_csv_row(csv, "pair_raw_put,8,%zu,%.3f,%.3f,,", nlat, am, ap);
    fhb_csv_row(csv, "pair_fh_put,8,%zu,%.3f,%.3f,,", nlat, bm, bp);
    fhb_csv_row(csv, "pair_raw_put_best,8,%d,%.3f,,,", rounds, abest);
    fhb_csv_row(csv, "pair_fh_put_best,8,%d,%.3f,,,", rounds, bbest);
    fhb_csv_row(csv, "pair_ratio_put,8,%d,%.4f,,,", rounds, rr);
    printf("paired 8 B put: raw %.2f us, firehose %.2f us (medians of %zu); best rounds %.2f / "
           "%.2f us; median per-round ratio %.2f\n", am, bm, nlat, abest, bbest, rr);
    for (size_t n = 65536; n <= top; n *= 4) {
        long ops = (long)(((size_t)8 << 20) / n);
        ops = ops < 8 ? 8 : ops > WINDOW ? WINDOW : ops;
        for (int rd = -1; rd < rounds; rd++) {   /* round -1: warm-up */
            set_phase(r, PHASE_RAW);
            double x = raw_flood_mbs(r, n, ops);
            set_phase(r, PHASE_FH);
            double y = fh_flood_mbs(f, n, ops);
            if (rd >= 0) {
                ra[rd] = x;
                rb[rd] = y;
            }
        }
        rr = ratio_median(ra, rb, rounds);
        double x = fhb_quantile(ra, (size_t)rounds, 0.5), y = fhb_quantile(rb, (size_t)rounds, 0.5);
        double xb = fhb_quantile(ra, (size_t)rounds, 1.0), yb = fhb_quantile(rb, (size_t)rounds, 1.0);
        fhb_csv_row(csv, "pair_raw_put_nb_flood,%zu,%ld,,,%.3f,%.1f", n, ops * rounds, x,
                    x * 1e6 / (double)n);
        fhb_csv_row(csv, "pair_fh_put_nb_flood,%zu,%ld,,,%.3f,%.1f", n, ops * rounds, y,
                    y * 1e6 / (double)n);
        fhb_csv_row(csv, "pair_raw_put_nb_flood_best,%zu,%d,,,%.3f,", n, rounds, xb);
        fhb_csv_row(csv, "pair_fh_put_nb_flood_best,%zu,%d,,,%.3f,", n, rounds, yb);
        fhb_csv_row(csv, "pair_ratio_put_nb_flood,%zu,%d,,,%.4f,", n, rounds, rr);
        printf("paired put flood %zu B: raw %.1f MB/s, firehose %.1f MB/s (medians); best "
               "rounds %.1f / %.1f; median per-round ratio %.2f\n", n, x, y, xb, yb, rr);
    }
    set_phase(r, PHASE_RAW);
    fflush(stdout);
    free(a);
    free(b);
}

/* Rank 1: until rank 0 sets the stop word, drive the side in use. */
static void target(const fhb_raw_ops_t *r)
{
    volatile uint64_t *stop = (volatile uint64_t *)(void *)(r->buf + STOP_OFF);
    volatile uint64_t *phase = (volatile uint64_t *)(void *)(r->buf + PHASE_OFF);
    for (unsigned long i = 0; *stop == 0; i++) {
        int fh = *phase == PHASE_FH;
        if (r->progress && (!fh || i % PHASE_SKIP == 0))
            r->progress(r->ctx);                   /* drives the transport */
        if (fh || i % PHASE_SKIP == 0)
            fh_poll();                             /* the runtime (paired rows) */
    }
}

void fhb_raw_body(const fhb_opts_t *o, const fhb_raw_ops_t *r)
{
    fh_seg_t seg;
    void *mine;
    fh_side_t fs;
    FHB_TRY(fh_segment_create(2 * FHB_MAX_SIZE, &seg, &mine));
    FHB_TRY(fh_segment_query(seg, 1, &fs.remote, NULL));
    fs.local = (char *)mine + FHB_MAX_SIZE;
    FILE *csv = fhb_csv_open(o, fhb_rma_columns);
    FHB_TRY(fh_barrier());
    if (fh_rank() == 0) {
        printf("%s\n", r->title);
        fhb_size_table(o, csv, r->ctx, r->lat, r->flood);
        if (r->extra)
            r->extra(r->ctx, o, csv);
        paired(r, &fs, csv, o->quick, fhb_top_size(o));
        r->put_word(r->ctx, STOP_OFF, 1);
    } else if (fh_rank() == 1) {
        target(r);
    }
    fhb_csv_close(csv);
    FHB_TRY(fh_barrier());
    FHB_TRY(fh_segment_destroy(seg));
}
