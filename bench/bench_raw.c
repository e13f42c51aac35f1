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
 * Paired rows: the raw put and the firehose runtime alternate in rounds
 * (bench_pair.c says how); rank 1 polls the side in use.
 *
 * Counter variant: rows cntr_put and cntr_put_nb_flood (8 B, 64 B, ...
 * every 8x) post without FI_COMPLETION and wait on a write counter
 * (fi_cntr_read) instead of reading the CQ.  Their posts carry their own
 * context (cntr_ctx): libfabric 1.17's net provider writes a CQ entry for
 * each of them all the same (its RDM endpoint ignores
 * FI_SELECTIVE_COMPLETION), and those entries, read later as completions of
 * the paired rows' puts, made 8 B raw puts "complete" without their round
 * trip (4-7 us instead of 10: the target had not even read the request).
 * reap() skips them and the run says how many there were.
 *
 * Verbs: when the runtime runs the ibv conduit (FH_CONDUIT=ibv), `raw` is
 * the same loops on rdma-core verbs instead (bench_raw_ibv.c).
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
#include "firehose/internal.h"
#include "conduits/ofi/ofi_config.h"

#define MAX_SIZE FHB_MAX_SIZE
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
    struct fi_context2 cntr_ctx;    /* the context of every counter-variant post */
    struct fi_context2 one[2];      /* single operations' contexts, in turn */
    unsigned one_seq;
    long unasked;                   /* CQ entries of counter-variant posts */
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

static void cq_failed(raw_t *r)
{
    struct fi_cq_err_entry err = {0};
    fi_cq_readerr(r->cq, &err, 0);
    fprintf(stderr, "fhbench raw: completion error: %s\n", fi_strerror(err.err));
    fh_abort(1, "fhbench raw: completion error");
}

/* Completions of ours in e[0, n): an entry of a counter-variant post
 * (which asked for none) is counted apart, not as ours. */
static long ours(raw_t *r, const struct fi_cq_entry *e, ssize_t n)
{
    long mine = 0;
    for (ssize_t i = 0; i < n; i++) {
        if (e[i].op_context == &r->cntr_ctx)
            r->unasked++;
        else
            mine++;
    }
    return mine;
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
        ssize_t n = fi_cq_read(r->cq, e, want < 16 ? (size_t)want : 16);
        if (n > 0)
            want -= ours(r, e, n);
        else if (n != -FI_EAGAIN)
            cq_failed(r);
    }
}

/* The context for the next single operation (two in turn, so that a
 * completion of the previous one cannot pass for this one's). */
static struct fi_context2 *next_one(raw_t *r)
{
    return &r->one[r->one_seq++ & 1];
}

/* Reaps the completion of the one operation in flight, ctx's.  Any other
 * completion (not a counter post's) would be taken for it and time a
 * round trip that did not happen: the run ends instead. */
static void reap_one(raw_t *r, struct fi_context2 *ctx)
{
    if (r->use_cntr) {
        reap(r, 1);
        return;
    }
    if (r->early != 0)
        fh_abort(1, "fhbench raw: a completion came before its operation was posted");
    for (;;) {
        struct fi_cq_entry e;
        ssize_t n = fi_cq_read(r->cq, &e, 1);
        if (n == 1 && ours(r, &e, 1) == 1) {
            if (e.op_context != ctx)
                fh_abort(1, "fhbench raw: a completion of another operation while one "
                            "was in flight");
            return;
        }
        if (n < 0 && n != -FI_EAGAIN)
            cq_failed(r);
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
                           .context = r->use_cntr ? &r->cntr_ctx : ctx};
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
            r->early += ours(r, &e, 1);
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

/* fhb_lat_fn */
static void lat(void *ctx, int is_put, size_t n, long it, double *med, double *p99)
{
    raw_t *r = ctx;
    double *t = malloc(sizeof(double) * (size_t)it);
    if (!t)
        fh_abort(1, "fhbench: out of memory");
    for (long i = 0; i < it / 10 + 2; i++) {
        struct fi_context2 *c = next_one(r);
        post(r, is_put, 0, n, c);
        reap_one(r, c);
    }
    for (long i = 0; i < it; i++) {
        struct fi_context2 *c = next_one(r);
        double t0 = fhb_now_ns();
        post(r, is_put, 0, n, c);
        reap_one(r, c);
        t[i] = (fhb_now_ns() - t0) / 1e3;
    }
    *med = fhb_quantile(t, (size_t)it, 0.5);
    *p99 = fhb_quantile(t, (size_t)it, 0.99);
    free(t);
}

/* fhb_flood_fn */
static double flood(void *ctx, int is_put, size_t n, long it)
{
    raw_t *r = ctx;
    static struct fi_context2 fc[WINDOW];
    double t0 = fhb_now_ns();
    for (long done = 0; done < it;) {
        long w = it - done < WINDOW ? it - done : WINDOW;
        for (long i = 0; i < w; i++)
            post(r, is_put, 0, n, &fc[i]);
        reap(r, w);
        done += w;
    }
    return (fhb_now_ns() - t0) / 1e9;
}

/* -------------------------------------- the rest of fhb_raw_ops_t */

static double lat_one(void *ctx, size_t n)
{
    struct fi_context2 *c = next_one(ctx);
    double t0 = fhb_now_ns();
    post(ctx, 1, 0, n, c);
    reap_one(ctx, c);
    return (fhb_now_ns() - t0) / 1e3;
}

/* v into the peer's buffer at off, from the same offset of our local area. */
static void put_word(void *ctx, size_t off, uint64_t v)
{
    raw_t *r = ctx;
    struct fi_context2 *c = next_one(r);
    memcpy(r->buf + MAX_SIZE + off, &v, sizeof v);
    post_at(r, off, MAX_SIZE + off, sizeof v, c);
    reap_one(r, c);
}

static void progress(void *ctx)
{
    raw_t *r = ctx;
    struct fi_cq_entry e;
    if (fi_cq_read(r->cq, &e, 1) == 1)   /* rank 1 posts nothing: none is its own */
        (void)ours(r, &e, 1);
}

/* The counter variant of the put loops (rank 0, after the size table). */
static void cntr_rows(void *ctx, const fhb_opts_t *o, FILE *csv)
{
    raw_t *r = ctx;
    if (!r->cntr) {
        printf("raw: fi_cntr variant skipped: the provider has no write counter\n");
        return;
    }
    long base = fhb_iters(o, 2000, 100);
    r->use_cntr = 1;
    r->cntr_seen = fi_cntr_read(r->cntr);
    for (size_t n = 8; n <= fhb_top_size(o); n *= 8) {
        long it = fhb_iters_for(base, n, o->quick);
        double pm, pp;
        lat(r, 1, n, it, &pm, &pp);
        long fit = 2 * it;
        double ps = flood(r, 1, n, fit);
        fhb_csv_row(csv, "cntr_put,%zu,%ld,%.3f,%.3f,,", n, it, pm, pp);
        fhb_csv_row(csv, "cntr_put_nb_flood,%zu,%ld,,,%.3f,%.1f", n, fit,
                    (double)n * (double)fit / ps / 1e6, (double)fit / ps);
        printf("fi_cntr: %9zu B put %8.2f us (p99 %.2f), flood %.1f MB/s\n", n, pm, pp,
               (double)n * (double)fit / ps / 1e6);
    }
    r->use_cntr = 0;
    /* Nothing of ours is outstanding: whatever the CQ holds now is the
     * counter posts' (see the file's header); the paired rows' reaps skip
     * any that come later. */
    struct fi_cq_entry e[16];
    for (ssize_t n; (n = fi_cq_read(r->cq, e, 16)) > 0;)
        if (ours(r, e, n) != 0)
            fh_abort(1, "fhbench raw: a completion of ours after the counter rows");
    if (r->unasked != 0)
        printf("raw: %s wrote %ld CQ entries for the counter rows' writes, which asked "
               "for none (ignored)\n", r->info->fabric_attr->prov_name, r->unasked);
}

int fhb_raw(const fhb_opts_t *o)
{
#ifdef FH_HAVE_IBV
    if (fh_rt->cops && strcmp(fh_rt->cops->name, "ibv") == 0)
        return fhb_raw_ibv(o);
#endif
    /* --provider, else the provider the conduit took (FH_OFI_PROVIDER may
     * be a list), on RDM endpoints: tcp is tcp;ofi_rxm here. */
    const char *prov = o->provider;
    char took[64];
    if (!prov && fhb_ofi_provider_taken(took, sizeof took))
        prov = took;
    const ofi_settings_t *os = fh_conduit_settings_of(fh_rt, &fh_ofi_settings);
    if (!prov)
        prov = os->provider && *os->provider ? os->provider : "tcp";
    raw_t r;
    memset(&r, 0, sizeof r);
    raw_open(&r, prov);
    char title[160];
    snprintf(title, sizeof title, "raw libfabric: provider %s (%s), inject %zu",
             r.info->fabric_attr->prov_name, r.info->domain_attr->name, r.inject);
    fhb_raw_ops_t ops = {.ctx = &r, .buf = r.buf, .title = title, .lat = lat,
                         .flood = flood, .lat_one = lat_one, .put_word = put_word,
                         .progress = progress, .extra = cntr_rows};
    fhb_raw_body(o, &ops);
    raw_close(&r);
    return 0;
}
