/*
 * bench_rma.c -- `latency` and `peak`: rank 0 -> rank 1 RMA on one segment.
 *
 * latency: for each size 1 B .. 4 MiB (powers of two), blocking fh_put and
 *   fh_get timed one by one (median and p99), then a non-blocking flood:
 *   windows of FLOOD_WINDOW fh_put_nb/fh_get_nb handles completed with
 *   fh_wait_all (messages/s and MB/s), like GASNet's testsmall/testlarge.
 *   The loop over sizes is fhb_size_table (bench_util.c), which `raw` runs
 *   over the transports themselves.
 *   Then am_rtt: an 8-byte medium AM request whose handler answers with a
 *   short reply, timed request to reply (median and p99).
 * peak: put and get bandwidth vs size, every operation to the same remote
 *   location: fh_put_nbi / fh_get_nbi bursts completed by fh_wait_nbi; then
 *   the first-touch cost of 64 KiB .. 4 MiB puts (first_touch below) and
 *   of 128 KiB .. 1 MiB puts and gets whose first half is resident
 *   (half_resident below).
 *
 * The local buffer is the second half of rank 0's own segment, so no
 * temporary registration is timed (bench_raw.c also uses a registered
 * buffer: the ratio compares like with like).  Rank 1 only polls
 * (fhb_target_wait).
 *
 * CSV columns (shared with bench_raw.c):
 *   op,size,iters,median_us,p99_us,mb_s,msgs_s
 * ops: put, get, am_rtt (latency rows: median_us/p99_us), put_nb_flood,
 * get_nb_flood, put_nbi_peak, get_nbi_peak (rate rows: mb_s/msgs_s),
 * put_first_touch, put_resident, put_half_resident, get_half_resident
 * (median_us/p99_us = median/highest of the samples, mb_s at the median);
 * unused fields empty.
 */
#include <stdlib.h>
#include <string.h>

#include "fhbench.h"

#define FLOOD_WINDOW 64

const char *const fhb_rma_columns = "op,size,iters,median_us,p99_us,mb_s,msgs_s";

typedef struct rma_ctx {
    void *remote;     /* rank 1's segment base */
    char *local;      /* registered local buffer (our segment) */
    fh_seg_t seg;
} rma_ctx_t;

static void ctx_open(rma_ctx_t *c)
{
    void *mine;
    FHB_TRY(fh_segment_create(2 * FHB_MAX_SIZE, &c->seg, &mine));
    FHB_TRY(fh_segment_query(c->seg, 1, &c->remote, NULL));
    c->local = (char *)mine + FHB_MAX_SIZE;
    memset(c->local, 0x5a, FHB_MAX_SIZE);
}

static void ctx_close(const fhb_opts_t *o, rma_ctx_t *c)
{
    fhb_target_wait(o);
    FHB_TRY(fh_segment_destroy(c->seg));
}

/* Times `it` blocking operations; fills med/p99 in microseconds (fhb_lat_fn). */
static void time_blocking(void *ctx, int is_put, size_t n, long it, double *med, double *p99)
{
    const rma_ctx_t *c = ctx;
    double *t = malloc(sizeof(double) * (size_t)it);
    if (!t)
        fh_abort(1, "fhbench: out of memory");
    long warm = it / 10 + 2;
    for (long i = 0; i < warm; i++)
        FHB_TRY(is_put ? fh_put(1, c->remote, c->local, n) : fh_get(c->local, 1, c->remote, n));
    for (long i = 0; i < it; i++) {
        double t0 = fhb_now_ns();
        FHB_TRY(is_put ? fh_put(1, c->remote, c->local, n) : fh_get(c->local, 1, c->remote, n));
        t[i] = (fhb_now_ns() - t0) / 1e3;
    }
    *med = fhb_quantile(t, (size_t)it, 0.5);
    *p99 = fhb_quantile(t, (size_t)it, 0.99);
    free(t);
}

/* it operations in windows of FLOOD_WINDOW handles; returns seconds (fhb_flood_fn). */
static double time_flood(void *ctx, int is_put, size_t n, long it)
{
    const rma_ctx_t *c = ctx;
    fh_handle_t h[FLOOD_WINDOW];
    double t0 = fhb_now_ns();
    for (long done = 0; done < it;) {
        long w = it - done < FLOOD_WINDOW ? it - done : FLOOD_WINDOW;
        for (long i = 0; i < w; i++)
            FHB_TRY(is_put ? fh_put_nb(1, c->remote, c->local, n, &h[i])
                           : fh_get_nb(c->local, 1, c->remote, n, &h[i]));
        FHB_TRY(fh_wait_all(h, (size_t)w));
        done += w;
    }
    return (fhb_now_ns() - t0) / 1e9;
}

/* AM round trip: the request's handler replies; the reply's sets a flag. */
#define AM_RTT_REQ (FH_AM_USER_FIRST + 8)
#define AM_RTT_REP (FH_AM_USER_FIRST + 9)
static volatile int am_replies;

static void h_rtt_req(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf; (void)n; (void)a; (void)na;
    FHB_TRY(fh_am_reply_short(tok, AM_RTT_REP, NULL, 0));
}

static void h_rtt_rep(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok; (void)buf; (void)n; (void)a; (void)na;
    am_replies++;
}

static void time_am_rtt(const fhb_opts_t *o, FILE *csv)
{
    const long it = fhb_iters(o, 2000, 300);
    double *t = malloc(sizeof(double) * (size_t)it);
    if (!t)
        fh_abort(1, "fhbench: out of memory");
    uint64_t payload = 0x0123456789abcdefull;
    for (long i = -it / 10 - 2; i < it; i++) {
        int want = am_replies + 1;
        double t0 = fhb_now_ns();
        FHB_TRY(fh_am_request_medium(1, AM_RTT_REQ, &payload, sizeof payload, NULL, 0));
        while (am_replies < want)
            FHB_TRY(fh_poll());
        if (i >= 0)
            t[i] = (fhb_now_ns() - t0) / 1e3;
    }
    fhb_csv_row(csv, "am_rtt,8,%ld,%.3f,%.3f,,", it, fhb_quantile(t, (size_t)it, 0.5),
                fhb_quantile(t, (size_t)it, 0.99));
    free(t);
}

int fhb_latency(const fhb_opts_t *o)
{
    rma_ctx_t c;
    FHB_TRY(fh_am_register(AM_RTT_REQ, h_rtt_req, "fhbench-rtt-req"));
    FHB_TRY(fh_am_register(AM_RTT_REP, h_rtt_rep, "fhbench-rtt-rep"));
    ctx_open(&c);
    FILE *csv = fhb_csv_open(o, fhb_rma_columns);
    if (fh_rank() == 0) {
        fhb_size_table(o, csv, &c, time_blocking, time_flood);
        time_am_rtt(o, csv);
    }
    fhb_csv_close(csv);
    ctx_close(o, &c);
    return 0;
}

/* it n-byte NBI puts (is_put) or gets to the same remote location in
 * windows of FLOOD_WINDOW, after a warm-up; returns MB/s. */
static double peak_burst(const rma_ctx_t *c, int is_put, size_t n, long it)
{
    for (long i = 0; i < it / 10 + 1; i++)     /* warm-up */
        FHB_TRY(is_put ? fh_put_nbi(1, c->remote, c->local, n)
                       : fh_get_nbi(c->local, 1, c->remote, n));
    FHB_TRY(fh_wait_nbi());
    double t0 = fhb_now_ns();
    for (long i = 0; i < it; i++) {
        FHB_TRY(is_put ? fh_put_nbi(1, c->remote, c->local, n)
                       : fh_get_nbi(c->local, 1, c->remote, n));
        if ((i + 1) % FLOOD_WINDOW == 0)
            FHB_TRY(fh_wait_nbi());
    }
    FHB_TRY(fh_wait_nbi());
    double s = (fhb_now_ns() - t0) / 1e9;
    return (double)n * (double)it / s / 1e6;
}

/* First touch: a blocking n-byte put to memory of rank 1 that no put has
 * touched yet (`cold`: FT_SAMPLES strides of 2 x FHB_MAX_SIZE in a fresh
 * segment; size n at offset n of its stride, so the sizes never share a
 * bucket and each is aligned to itself), timed, then the same put again
 * (now resident), timed.  Rows put_first_touch and put_resident: median
 * and highest in us (median_us, p99_us columns) and the median's MB/s. */
#define FT_MIN ((size_t)64 << 10)
#define FT_SAMPLES 5
static void first_touch(const fhb_opts_t *o, FILE *csv, const rma_ctx_t *c, char *cold)
{
    size_t top = fhb_top_size(o);
    int samples = o->quick ? 3 : FT_SAMPLES;
    printf("%9s %8s %16s %14s\n", "size", "samples", "first touch us", "resident us");
    for (size_t n = FT_MIN; n <= top; n *= 2) {
        double first[FT_SAMPLES], again[FT_SAMPLES];
        fhb_turn_begin();
        for (int k = 0; k < samples; k++) {
            char *dst = cold + (size_t)k * 2 * FHB_MAX_SIZE + n;
            double t0 = fhb_now_ns();
            FHB_TRY(fh_put(1, dst, c->local, n));
            double t1 = fhb_now_ns();
            FHB_TRY(fh_put(1, dst, c->local, n));
            first[k] = (t1 - t0) / 1e3;
            again[k] = (fhb_now_ns() - t1) / 1e3;
        }
        fhb_turn_end();
        double fm = fhb_quantile(first, (size_t)samples, 0.5);
        double fx = fhb_quantile(first, (size_t)samples, 1.0);
        double am = fhb_quantile(again, (size_t)samples, 0.5);
        double ax = fhb_quantile(again, (size_t)samples, 1.0);
        fhb_csv_row(csv, "put_first_touch,%zu,%d,%.3f,%.3f,%.3f,", n, samples, fm, fx,
                    (double)n / fm);
        fhb_csv_row(csv, "put_resident,%zu,%d,%.3f,%.3f,%.3f,", n, samples, am, ax,
                    (double)n / am);
        printf("%9zu %8d %16.1f %14.1f\n", n, samples, fm, am);
    }
}

/* Half resident: an n-byte put (get) to memory of rank 1 whose first half
 * a put of n/2 bytes made resident just before and whose second half no
 * put touched (`half`: FT_SAMPLES strides of HR_STRIDE for puts, as many
 * for gets; size n at offset n of its stride), timed: under firehose the
 * resident half may move while the cold half's move is in flight.  Rows
 * put_half_resident and get_half_resident, as first_touch's. */
#define HR_MAX ((size_t)1 << 20)
#define HR_STRIDE (2 * HR_MAX)
static void half_resident(const fhb_opts_t *o, FILE *csv, const rma_ctx_t *c, char *half)
{
    size_t top = fhb_top_size(o) < HR_MAX ? fhb_top_size(o) : HR_MAX;
    int samples = o->quick ? 3 : FT_SAMPLES;
    printf("%9s %8s %16s %14s\n", "size", "samples", "half put us", "half get us");
    for (size_t n = 2 * FT_MIN; n <= top; n *= 2) {
        double put[FT_SAMPLES], get[FT_SAMPLES];
        fhb_turn_begin();
        for (int k = 0; k < 2 * samples; k++) {
            char *dst = half + (size_t)k * HR_STRIDE + n;
            FHB_TRY(fh_put(1, dst, c->local, n / 2));
            double t0 = fhb_now_ns();
            FHB_TRY(k < samples ? fh_put(1, dst, c->local, n) : fh_get(c->local, 1, dst, n));
            double t = (fhb_now_ns() - t0) / 1e3;
            if (k < samples)
                put[k] = t;
            else
                get[k - samples] = t;
        }
        fhb_turn_end();
        for (int g = 0; g < 2; g++) {
            double *v = g ? get : put;
            double m = fhb_quantile(v, (size_t)samples, 0.5);
            fhb_csv_row(csv, "%s_half_resident,%zu,%d,%.3f,%.3f,%.3f,", g ? "get" : "put", n,
                        samples, m, fhb_quantile(v, (size_t)samples, 1.0), (double)n / m);
        }
        printf("%9zu %8d %16.1f %14.1f\n", n, samples, fhb_quantile(put, (size_t)samples, 0.5),
               fhb_quantile(get, (size_t)samples, 0.5));
    }
}

#define PEAK_REPS 5
int fhb_peak(const fhb_opts_t *o)
{
    rma_ctx_t c;
    ctx_open(&c);
    fh_seg_t cseg;
    void *cmine, *cold;
    FHB_TRY(fh_segment_create((size_t)FT_SAMPLES * 2 * FHB_MAX_SIZE, &cseg, &cmine));
    FHB_TRY(fh_segment_query(cseg, 1, &cold, NULL));
    fh_seg_t hseg;
    void *hmine, *half;
    FHB_TRY(fh_segment_create((size_t)FT_SAMPLES * 2 * HR_STRIDE, &hseg, &hmine));
    FHB_TRY(fh_segment_query(hseg, 1, &half, NULL));
    FILE *csv = fhb_csv_open(o, fhb_rma_columns);
    if (fh_rank() == 0) {
        long base = fhb_iters(o, 4000, 200);
        size_t top = fhb_top_size(o);
        printf("%9s %8s %12s %12s\n", "size", "ops", "put MB/s", "get MB/s");
        /* Sizes ascending on one remote location: its frame is resident
         * but grew size by size (64 KiB, 128 KiB, ...), as an
         * application's buffer does. */
        fhb_turns_open(o);
        for (size_t n = 8; n <= top; n *= 2) {
            long it = fhb_iters_for(base, n, o->quick);
            /* With turns: PEAK_REPS bursts each, one per turn, and their
             * median (a burst lasts milliseconds: one scheduling hiccup
             * must not decide a size). */
            double pv[PEAK_REPS], gv[PEAK_REPS];
            int reps = o->turns != NULL ? PEAK_REPS : 1;
            for (int r = 0; r < 2 * reps; r++) {
                fhb_turn_begin();
                if (r < reps)
                    pv[r] = peak_burst(&c, 1, n, it);
                else
                    gv[r - reps] = peak_burst(&c, 0, n, it);
                fhb_turn_end();
            }
            double pb = fhb_quantile(pv, (size_t)reps, 0.5);
            double gb = fhb_quantile(gv, (size_t)reps, 0.5);
            fhb_csv_row(csv, "put_nbi_peak,%zu,%ld,,,%.3f,%.1f", n, it, pb, pb * 1e6 / (double)n);
            fhb_csv_row(csv, "get_nbi_peak,%zu,%ld,,,%.3f,%.1f", n, it, gb, gb * 1e6 / (double)n);
            printf("%9zu %8ld %12.1f %12.1f\n", n, it, pb, gb);
            fflush(stdout);
        }
        first_touch(o, csv, &c, cold);
        half_resident(o, csv, &c, half);
        fhb_turns_close();
    }
    fhb_csv_close(csv);
    fhb_target_wait(o);
    FHB_TRY(fh_segment_destroy(hseg));
    FHB_TRY(fh_segment_destroy(cseg));
    ctx_close(o, &c);
    return 0;
}
