/*
 * bench_raw.c -- `raw`: the latency and bandwidth loops of bench_rma.c
 * written directly on libfabric, as the transport's own limit.
 *
 * The firehose runtime is used only to start the job and to exchange the
 * endpoint name and memory key (fh_allgather); the measured loops touch
 * nothing but libfabric.  The endpoint asks for what conduits/ofi asks for
 * (RDM, FI_RMA, the same mr_mode bits and queue depth) on the provider of
 * FH_OFI_PROVIDER (or --provider), and posts puts the way ofi_rma.c does:
 * fi_writemsg with FI_COMPLETION | FI_DELIVERY_COMPLETE (plus FI_INJECT
 * when small enough), completion read from a CQ.  Gets are fi_readmsg.
 * Rank 1 polls its CQ (the provider's progress) until rank 0 writes a
 * stop word into its buffer.
 *
 * Paired rows.  Timings on a shared machine drift by several times within
 * a minute, so the ratios the targets are about are also measured PAIRED:
 * in each of R rounds, raw libfabric and the firehose runtime (fh_put /
 * fh_put_nb on rank 1's segment, whatever FH_REG_STRATEGY says) run the
 * same small batch back to back; the medians over all rounds of each side
 * are reported as ops pair_raw_* and pair_fh_*; *_best rows hold the best
 * round of each side (lowest round-median latency, highest round
 * bandwidth), and pair_ratio_* rows the median over rounds of the
 * per-round ratio firehose / raw (in the median_us column for latency, the
 * mb_s column for bandwidth): interference that hits a whole round cancels
 * out of its ratio.  Rank 1 meanwhile polls the side in use (phase word).
 *
 * Counter variant: rows cntr_put and cntr_put_nb_flood (8 B, 64 B, ...
 * every 8x) post without FI_COMPLETION and wait on a write counter
 * (fi_cntr_read) instead of reading the CQ.
 *
 * Not here yet: a verbs (ibv) version.
 *
 * CSV: the columns of bench_rma.c (fhb_rma_columns), same op names, so
 * raw-<prov>.csv and latency-<prov>.csv rows pair up by (op, size); plus
 * pair_raw_put / pair_fh_put (8 B, median_us, p99_us) and
 * pair_raw_put_nb_flood / pair_fh_put_nb_flood (64 KiB and up, mb_s).
 */
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "fhbench.h"
#include "internal.h"

#define MAX_SIZE ((size_t)4 << 20)
#define WINDOW 64
#define NAME_MAX_LEN 64

typedef struct raw {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_cntr *cntr;          /* completed writes (NULL: not supported) */
    uint64_t cntr_seen;             /* writes we have waited for so far */
    int use_cntr;                   /* post without FI_COMPLETION, wait on cntr */
    struct fid_ep *ep;
    struct fid_mr *mr;
    void *desc;
    char *buf;                      /* [0, MAX) target area, [MAX, 2MAX) local */
    fi_addr_t peer;
    uint64_t rkey, rbase;           /* the peer's buffer */
    int virt_addr;
    size_t inject;
    long early;                     /* completions reaped while posting */
} raw_t;

typedef struct raw_card {           /* what ranks exchange */
    char name[NAME_MAX_LEN];
    size_t namelen;
    uint64_t key, base;
} raw_card_t;

#define FI_TRY(call) do { int r_ = (int)(call); if (r_) {                      \
        fprintf(stderr, "fhbench raw: %s: %s\n", #call, fi_strerror(-r_));    \
        fh_abort(1, "fhbench raw: libfabric call failed"); } } while (0)

static void raw_open(raw_t *r, const char *prov)
{
    struct fi_info *h = fi_allocinfo();
    h->caps = FI_RMA;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                              FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->domain_attr->av_type = FI_AV_TABLE;
    h->tx_attr->size = 256;
    h->rx_attr->size = 256;
    h->fabric_attr->prov_name = strdup(prov);
    FI_TRY(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &r->info));
    fi_freeinfo(h);
    struct fi_info *i = r->info;
    FI_TRY(fi_fabric(i->fabric_attr, &r->fabric, NULL));
    FI_TRY(fi_domain(r->fabric, i, &r->domain, NULL));
    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT, .size = 512};
    FI_TRY(fi_cq_open(r->domain, &cqa, &r->cq, NULL));
    struct fi_av_attr ava = {.type = FI_AV_TABLE};
    FI_TRY(fi_av_open(r->domain, &ava, &r->av, NULL));
    FI_TRY(fi_endpoint(r->domain, i, &r->ep, NULL));
    /* The CQ gets entries only for posts with FI_COMPLETION, so the same
     * endpoint can also run the counter variant (posts without it). */
    FI_TRY(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION));
    struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
    if (fi_cntr_open(r->domain, &ca, &r->cntr, NULL) != 0 ||
        fi_ep_bind(r->ep, &r->cntr->fid, FI_WRITE) != 0) {
        if (r->cntr)
            fi_close(&r->cntr->fid);
        r->cntr = NULL;
    }
    FI_TRY(fi_ep_bind(r->ep, &r->av->fid, 0));
    FI_TRY(fi_enable(r->ep));
    uint64_t mm = i->domain_attr->mr_mode;
    if (mm & FI_MR_BASIC)
        mm |= FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
    r->virt_addr = !!(mm & FI_MR_VIRT_ADDR);
    r->inject = i->tx_attr->inject_size;
    if (posix_memalign((void **)&r->buf, 4096, 2 * MAX_SIZE) != 0)
        fh_abort(1, "fhbench: out of memory");
    memset(r->buf, 0, 2 * MAX_SIZE);
    FI_TRY(fi_mr_reg(r->domain, r->buf, 2 * MAX_SIZE,
                     FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &r->mr,
                     NULL));
    if (mm & FI_MR_ENDPOINT) {
        FI_TRY(fi_mr_bind(r->mr, &r->ep->fid, 0));
        FI_TRY(fi_mr_enable(r->mr));
    }
    r->desc = fi_mr_desc(r->mr);

    raw_card_t me = {.key = fi_mr_key(r->mr), .base = (uint64_t)(uintptr_t)r->buf};
    me.namelen = sizeof me.name;
    FI_TRY(fi_getname(&r->ep->fid, me.name, &me.namelen));
    raw_card_t *all = calloc((size_t)fh_nranks(), sizeof *all);
    if (!all)
        fh_abort(1, "fhbench: out of memory");
    FHB_TRY(fh_allgather(&me, all, sizeof me));
    int peer = fh_rank() == 0 ? 1 : 0;
    if (fi_av_insert(r->av, all[peer].name, 1, &r->peer, 0, NULL) != 1)
        fh_abort(1, "fhbench raw: fi_av_insert failed");
    r->rkey = all[peer].key;
    r->rbase = all[peer].base;
    free(all);
}

static void raw_close(raw_t *r)
{
    fi_close(&r->mr->fid);
    fi_close(&r->ep->fid);
    if (r->cntr)
        fi_close(&r->cntr->fid);
    fi_close(&r->av->fid);
    fi_close(&r->cq->fid);
    fi_close(&r->domain->fid);
    fi_close(&r->fabric->fid);
    fi_freeinfo(r->info);
    free(r->buf);
}

/* Reaps completions until `want` arrived. */
static void reap(raw_t *r, long want)
{
    if (r->use_cntr) {
        r->cntr_seen += (uint64_t)want;
        while (fi_cntr_read(r->cntr) < r->cntr_seen)
            if (fi_cntr_readerr(r->cntr) != 0)
                fh_abort(1, "fhbench raw: counter reports an error");
        return;
    }
    struct fi_cq_entry e[16];
    long early = r->early < want ? r->early : want;
    r->early -= early;
    want -= early;
    while (want > 0) {
        ssize_t n = fi_cq_read(r->cq, e, 16);
        if (n > 0) {
            want -= n;
        } else if (n != -FI_EAGAIN) {
            struct fi_cq_err_entry err = {0};
            fi_cq_readerr(r->cq, &err, 0);
            fprintf(stderr, "fhbench raw: completion error: %s\n", fi_strerror(err.err));
            fh_abort(1, "fhbench raw: completion error");
        }
    }
}

static void post_ex(raw_t *r, int is_put, size_t off, size_t loff, size_t n,
                    struct fi_context2 *ctx)
{
    struct iovec iov = {.iov_base = r->buf + loff, .iov_len = n};
    uint64_t raddr = r->rbase + off;
    struct fi_rma_iov riov = {.addr = r->virt_addr ? raddr : off, .len = n, .key = r->rkey};
    struct fi_msg_rma m = {.msg_iov = &iov, .desc = &r->desc, .iov_count = 1,
                           .addr = r->peer, .rma_iov = &riov, .rma_iov_count = 1,
                           .context = ctx};
    for (;;) {
        ssize_t ret;
        if (is_put) {
            uint64_t f = (r->use_cntr ? 0 : FI_COMPLETION) | FI_DELIVERY_COMPLETE;
            if (n <= r->inject)
                f |= FI_INJECT;
            ret = fi_writemsg(r->ep, &m, f);
        } else {
            ret = fi_readmsg(r->ep, &m, FI_COMPLETION);
        }
        if (ret == 0)
            return;
        if (ret != -FI_EAGAIN) {
            fprintf(stderr, "fhbench raw: post: %s\n", fi_strerror((int)-ret));
            fh_abort(1, "fhbench raw: post failed");
        }
        struct fi_cq_entry e;
        if (fi_cq_read(r->cq, &e, 1) == 1)   /* progress; a completion of ours */
            r->early++;
    }
}

/* A put/get of n bytes from our local area to the peer's offset off. */
static void post(raw_t *r, int is_put, size_t off, size_t n, struct fi_context2 *ctx)
{
    post_ex(r, is_put, off, MAX_SIZE, n, ctx);
}

static void post_at(raw_t *r, size_t off, size_t loff, size_t n, struct fi_context2 *ctx)
{
    post_ex(r, 1, off, loff, n, ctx);
}

static long iters_for(long base, size_t n, int quick)
{
    long it = base;
    if (n > 65536)
        it = (long)((double)base * 65536.0 / (double)n);
    long min = quick ? 5 : 20;
    return it < min ? min : it;
}

static void lat(raw_t *r, int is_put, size_t n, long it, double *med, double *p99)
{
    struct fi_context2 ctx;
    double *t = malloc(sizeof(double) * (size_t)it);
    if (!t)
        fh_abort(1, "fhbench: out of memory");
    for (long i = 0; i < it / 10 + 2; i++) {
        post(r, is_put, 0, n, &ctx);
        reap(r, 1);
    }
    for (long i = 0; i < it; i++) {
        double t0 = fhb_now_ns();
        post(r, is_put, 0, n, &ctx);
        reap(r, 1);
        t[i] = (fhb_now_ns() - t0) / 1e3;
    }
    *med = fhb_quantile(t, (size_t)it, 0.5);
    *p99 = fhb_quantile(t, (size_t)it, 0.99);
    free(t);
}

static double flood(raw_t *r, int is_put, size_t n, long it)
{
    static struct fi_context2 ctx[WINDOW];
    double t0 = fhb_now_ns();
    for (long done = 0; done < it;) {
        long w = it - done < WINDOW ? it - done : WINDOW;
        for (long i = 0; i < w; i++)
            post(r, is_put, 0, n, &ctx[i]);
        reap(r, w);
        done += w;
    }
    return (fhb_now_ns() - t0) / 1e9;
}

/* ------------------------------------------------------------ paired */

/* Rank 1 polls mostly the side that rank 0 is using: rank 0 announces the
 * phase with a raw put of this word (offset 8 of rank 1's raw buffer).  The
 * other side is still polled every PHASE_SKIP loops (a phase change needs
 * the raw side to progress). */
enum { PHASE_RAW = 0, PHASE_FH = 1 };
#define PHASE_OFF 8
#define PHASE_SKIP 64

static void set_phase(raw_t *r, uint64_t ph)
{
    struct fi_context2 ctx;
    memcpy(r->buf + MAX_SIZE + PHASE_OFF, &ph, sizeof ph);
    post_at(r, PHASE_OFF, MAX_SIZE + PHASE_OFF, sizeof ph, &ctx);
    reap(r, 1);
}

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

static double raw_lat_one(raw_t *r, size_t n)
{
    struct fi_context2 ctx;
    double t0 = fhb_now_ns();
    post(r, 1, 0, n, &ctx);
    reap(r, 1);
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

static double raw_flood_mbs(raw_t *r, size_t n, long ops)
{
    return (double)n * (double)ops / flood(r, 1, n, ops) / 1e6;
}

/* Median of the per-round ratios y[i] / x[i] (x, y untouched). */
static double ratio_median(const double *x, const double *y, int n)
{
    double q[64];
    for (int i = 0; i < n; i++)
        q[i] = x[i] > 0 ? y[i] / x[i] : 0.0;
    return fhb_quantile(q, (size_t)n, 0.5);
}

static void paired(raw_t *r, const fh_side_t *f, FILE *csv, int quick, size_t top)
{
    int rounds = quick ? 12 : 40, k = quick ? 15 : 50;
    size_t nlat = (size_t)rounds * (size_t)k;
    double *a = malloc(sizeof(double) * nlat), *b = malloc(sizeof(double) * nlat);
    double ra[64], rb[64];
    if (!a || !b)
        fh_abort(1, "fhbench: out of memory");
    for (int i = 0; i < 20; i++) {               /* warm both (firehose: the miss) */
        set_phase(r, PHASE_RAW);
        raw_lat_one(r, 8);
        set_phase(r, PHASE_FH);
        fh_lat_one(f, 8);
    }
    for (int rd = 0; rd < rounds; rd++) {
        double *x = a + (size_t)rd * (size_t)k, *y = b + (size_t)rd * (size_t)k;
        set_phase(r, PHASE_RAW);
        for (int i = 0; i < k; i++)
            x[i] = raw_lat_one(r, 8);
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

int fhb_raw(const fhb_opts_t *o)
{
    const char *prov = o->provider;
    if (!prov)
        prov = fh_rt->cfg.ofi_provider && *fh_rt->cfg.ofi_provider ? fh_rt->cfg.ofi_provider
                                                                   : "tcp";
    raw_t r;
    memset(&r, 0, sizeof r);
    raw_open(&r, prov);
    fh_seg_t seg;
    void *mine;
    fh_side_t fs;
    FHB_TRY(fh_segment_create(2 * MAX_SIZE, &seg, &mine));
    FHB_TRY(fh_segment_query(seg, 1, &fs.remote, NULL));
    fs.local = (char *)mine + MAX_SIZE;
    FILE *csv = fhb_csv_open(o, fhb_rma_columns);
    FHB_TRY(fh_barrier());
    volatile uint64_t *stop = (volatile uint64_t *)(void *)r.buf;
    if (fh_rank() == 0) {
        printf("raw libfabric: provider %s (%s), inject %zu\n", r.info->fabric_attr->prov_name,
               r.info->domain_attr->name, r.inject);
        printf("%9s %8s %10s %10s %10s %10s %12s %12s\n", "size", "iters", "put_med",
               "put_p99", "get_med", "get_p99", "putflood_MB/s", "getflood_MB/s");
        long base = fhb_iters(o, 2000, 100);
        size_t top = o->max_size && o->max_size < MAX_SIZE ? o->max_size : MAX_SIZE;
        for (size_t n = 1; n <= top; n *= 2) {
            long it = iters_for(base, n, o->quick);
            double pm, pp, gm, gp;
            lat(&r, 1, n, it, &pm, &pp);
            lat(&r, 0, n, it, &gm, &gp);
            fhb_csv_row(csv, "put,%zu,%ld,%.3f,%.3f,,", n, it, pm, pp);
            fhb_csv_row(csv, "get,%zu,%ld,%.3f,%.3f,,", n, it, gm, gp);
            long fit = 2 * it;
            double ps = flood(&r, 1, n, fit), gs = flood(&r, 0, n, fit);
            double pbw = (double)n * (double)fit / ps / 1e6, gbw = (double)n * (double)fit / gs / 1e6;
            fhb_csv_row(csv, "put_nb_flood,%zu,%ld,,,%.3f,%.1f", n, fit, pbw, (double)fit / ps);
            fhb_csv_row(csv, "get_nb_flood,%zu,%ld,,,%.3f,%.1f", n, fit, gbw, (double)fit / gs);
            printf("%9zu %8ld %10.2f %10.2f %10.2f %10.2f %12.1f %12.1f\n", n, it, pm, pp, gm,
                   gp, pbw, gbw);
            fflush(stdout);
        }
        if (r.cntr) {     /* the counter variant of the put loops */
            r.use_cntr = 1;
            r.cntr_seen = fi_cntr_read(r.cntr);
            for (size_t n = 8; n <= top; n *= 8) {
                long it = iters_for(base, n, o->quick);
                double pm, pp;
                lat(&r, 1, n, it, &pm, &pp);
                long fit = 2 * it;
                double ps = flood(&r, 1, n, fit);
                fhb_csv_row(csv, "cntr_put,%zu,%ld,%.3f,%.3f,,", n, it, pm, pp);
                fhb_csv_row(csv, "cntr_put_nb_flood,%zu,%ld,,,%.3f,%.1f", n, fit,
                            (double)n * (double)fit / ps / 1e6, (double)fit / ps);
                printf("fi_cntr: %9zu B put %8.2f us (p99 %.2f), flood %.1f MB/s\n", n, pm, pp,
                       (double)n * (double)fit / ps / 1e6);
            }
            r.use_cntr = 0;
        } else {
            printf("raw: fi_cntr variant skipped: the provider has no write counter\n");
        }
        paired(&r, &fs, csv, o->quick, top);
        /* stop word: first 8 bytes of the peer's buffer */
        uint64_t one = 1;
        memcpy(r.buf + MAX_SIZE, &one, sizeof one);
        struct fi_context2 ctx;
        post(&r, 1, 0, sizeof one, &ctx);
        reap(&r, 1);
    } else {
        struct fi_cq_entry e;
        volatile uint64_t *phase = (volatile uint64_t *)(void *)(r.buf + PHASE_OFF);
        for (unsigned long i = 0; *stop == 0; i++) {
            int fh = *phase == PHASE_FH;
            if (!fh || i % PHASE_SKIP == 0)
                (void)fi_cq_read(r.cq, &e, 1);     /* drives the provider */
            if (fh || i % PHASE_SKIP == 0)
                fh_poll();                         /* the runtime (paired rows) */
        }
    }
    fhb_csv_close(csv);
    FHB_TRY(fh_barrier());
    FHB_TRY(fh_segment_destroy(seg));
    raw_close(&r);
    return 0;
}
