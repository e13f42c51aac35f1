/*
 * bench_cache.c -- `cache`: the registration-cache hit path, in ns/op.
 *
 * One "op" is what an RMA does with the cache when the remote memory is
 * already covered: look the range up, take a reference, drop it.  Measured
 * for 1 .. --threads threads, each thread on its own bucket, every
 * implementation in the same run:
 *
 *   fhc-locked   today's path (firehose/reg/firehose.c fh_reg_xfer): the per-rank
 *                mutex around fhc_chunk_len + fhc_acquire of a firehose we
 *                hold, then the mutex around fhc_release.  The fhc_t is a
 *                real cache (cache/fhc.h, exported by libfirehose) wired to
 *                a second, in-process fhc_t acting as the target, so the
 *                firehoses are obtained through real move messages first.
 *   ucx-rcache   UCX's registration cache (libucs, when configure found
 *                ucx-ucs): ucs_rcache_get + ucs_rcache_region_put of a
 *                region already in the cache, registration callbacks that
 *                do nothing (as ours do here).
 *
 *   fh-hit       the runtime's own hit layer, fh_reg_hit_acquire /
 *                fh_reg_hit_release (firehose/reg/firehose_internal.h), on a firehose
 *                the runtime holds on rank 1's segment.  Compiled when
 *                FHB_HAVE_REG_HIT is defined (add -DFHB_HAVE_REG_HIT to
 *                bench_fhbench_CPPFLAGS once the layer is merged): its
 *                whole hit path is fhhit_run(), one small function.
 *
 * Only rank 0 measures; the other ranks park (sleeping poll) so that they
 * do not take a core from the measuring threads.
 *
 * Each repetition runs every implementation once, in turn (paired), 5
 * repetitions with --quick, else 11.  Interference from other processes
 * only ever adds time, so the headline numbers are the best repetition.
 *
 * CSV columns:
 *   impl,threads,ops_per_thread,ns_per_op,agg_mops,ns_median,agg_mops_median
 *   ns_per_op  best repetition of (thread's elapsed / its ops), averaged
 *              over the threads; ns_median the median repetition
 *   agg_mops   total ops of all threads / (last end - first start), best
 *              repetition; agg_mops_median the median one
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "firehose/cache/fhc.h"
#include "fhbench.h"

#ifdef FH_HAVE_UCS
#include <sys/mman.h>
#include <ucs/memory/rcache.h>
#endif

#define MAX_REPS 11
#define AREA ((size_t)64 << 20)     /* address range the caches cover */
#define STRIDE ((size_t)1 << 20)    /* one region per thread, 1 MiB apart */

typedef struct hit_impl {
    const char *name;
    /* Sets up for nthreads; returns NULL (and prints why) if unavailable. */
    void *(*open)(int nthreads);
    /* n lookup+reference+release ops by thread `thread`. */
    void (*run)(void *ctx, int thread, long n);
    void (*close)(void *ctx);
} hit_impl_t;

/* ---------------------------------------------------------- fhc-locked */

typedef struct msgq {
    struct qmsg { struct qmsg *next; uint32_t from; int is_reply; size_t len;
                  unsigned char b[]; } *head, **tail;
} msgq_t;

typedef struct fhc_side {
    fhc_t *c;
    msgq_t *out;                 /* messages this side sent */
    int rank;
} fhc_side_t;

typedef struct fhc_ctx {
    fhc_side_t ini, tgt;         /* rank 0 (us), rank 1 (the target) */
    msgq_t q;
    pthread_mutex_t lock;        /* firehose.c's g->lock */
    char *area;
    fhc_op_t *op;                /* [nthreads]: one held firehose each */
} fhc_ctx_t;

static int env_pin(void *arg, uintptr_t addr, size_t len, int remote, uintptr_t want,
                   void **mr,
                   uint64_t key[2], uint64_t *reach)
{
    *reach = 0;
    (void)want;
    (void)arg; (void)len; (void)remote;
    *mr = (void *)addr;
    key[0] = addr;
    key[1] = addr;
    return 0;
}
static void env_unpin(void *arg, void *mr) { (void)arg; (void)mr; }
static int env_allowed(void *arg, uintptr_t a, size_t l) { (void)arg; (void)a; (void)l; return 1; }
static void env_put_in_move(void *arg, uintptr_t d, const void *s, size_t l)
{
    (void)arg; (void)d; (void)s; (void)l;
}
static void env_send(void *arg, uint32_t peer, int is_reply, const void *msg, size_t len)
{
    fhc_side_t *s = arg;
    (void)peer;
    struct qmsg *m = malloc(sizeof *m + len);
    if (!m)
        fh_abort(1, "fhbench: out of memory");
    m->next = NULL;
    m->from = (uint32_t)s->rank;
    m->is_reply = is_reply;
    m->len = len;
    memcpy(m->b, msg, len);
    *s->out->tail = m;
    s->out->tail = &m->next;
}

static void op_ready(fhc_op_t *op, int status)
{
    *(int *)op->user = status;
}

/* Delivers queued messages until none is left. */
static void pump(fhc_ctx_t *x)
{
    while (x->q.head) {
        struct qmsg *m = x->q.head;
        x->q.head = m->next;
        if (!x->q.head)
            x->q.tail = &x->q.head;
        fhc_t *to = m->from == 0 ? x->tgt.c : x->ini.c;
        fhc_on_message(to, m->from == 0 ? 0 : 1, m->is_reply, m->b, m->len);
        free(m);
    }
}

static void *fhc_open(int nthreads)
{
    fhc_ctx_t *x = calloc(1, sizeof *x);
    x->op = calloc((size_t)nthreads, sizeof *x->op);
    int *status = calloc((size_t)nthreads, sizeof *status);
    if (!x || !x->op || !status)
        fh_abort(1, "fhbench: out of memory");
    x->q.tail = &x->q.head;
    x->area = (char *)(((uintptr_t)1 << 40));      /* never touched */
    pthread_mutex_init(&x->lock, NULL);
    fhc_side_t *sides[2] = {&x->ini, &x->tgt};
    for (int r = 0; r < 2; r++) {
        sides[r]->rank = r;
        sides[r]->out = &x->q;
        fhc_params_t p = {.nranks = 2, .rank = (uint32_t)r, .bucket = 65536,
                          .region_max = (size_t)1 << 20, .M = AREA, .maxvictim = AREA,
                          .put_in_move = 0};
        fhc_env_t env = {.arg = sides[r], .pin = env_pin, .unpin = env_unpin,
                         .allowed = env_allowed, .send = env_send,
                         .put_in_move = env_put_in_move};
        char why[200];
        if (fhc_create(&p, &env, &sides[r]->c, why, sizeof why) != 0) {
            printf("cache: fhc-locked unavailable: %s\n", why);
            return NULL;
        }
    }
    /* Each thread's firehose: acquired through a real move, then released
     * (it stays held, unused: the state a hit finds). */
    for (int i = 0; i < nthreads; i++) {
        fhc_op_t *op = &x->op[i];
        op->peer = 1;
        op->raddr = (uintptr_t)x->area + (size_t)i * STRIDE;
        op->len = 8;
        op->ready = op_ready;
        op->user = &status[i];
        status[i] = -100;
        int a = fhc_acquire(x->ini.c, op);
        if (a == FHC_PENDING) {
            pump(x);
            a = status[i];
        }
        if (a != FHC_HIT) {
            printf("cache: fhc-locked: could not acquire a firehose (%d)\n", a);
            return NULL;
        }
        fhc_release(x->ini.c, op);
        pump(x);
    }
    free(status);
    return x;
}

static void fhc_run(void *ctx, int thread, long n)
{
    fhc_ctx_t *x = ctx;
    fhc_op_t op = x->op[thread];
    for (long i = 0; i < n; i++) {
        pthread_mutex_lock(&x->lock);
        op.len = fhc_chunk_len(x->ini.c, op.raddr, 8);
        int a = fhc_acquire(x->ini.c, &op);
        pthread_mutex_unlock(&x->lock);
        if (__builtin_expect(a != FHC_HIT, 0))
            fh_abort(1, "fhbench: cache: a held firehose missed");
        pthread_mutex_lock(&x->lock);
        fhc_release(x->ini.c, &op);
        pthread_mutex_unlock(&x->lock);
    }
}

static void fhc_close(void *ctx)
{
    fhc_ctx_t *x = ctx;
    fhc_destroy(x->ini.c);
    fhc_destroy(x->tgt.c);
    while (x->q.head) {   /* undelivered (none expected) */
        struct qmsg *m = x->q.head;
        x->q.head = m->next;
        free(m);
    }
    free(x->op);
    free(x);
}

/* ---------------------------------------------------------- ucx-rcache */

#ifdef FH_HAVE_UCS
typedef struct ucx_ctx {
    ucs_rcache_t *rc;
    char *area;
    size_t len;
    ucs_rcache_region_t **held;   /* [nthreads]: one extra ref each, so the
                                     regions stay cached */
    int n;
} ucx_ctx_t;

static ucs_status_t ucx_reg(void *c, ucs_rcache_t *rc, void *arg, ucs_rcache_region_t *r,
                            uint16_t flags)
{
    (void)c; (void)rc; (void)arg; (void)r; (void)flags;
    return UCS_OK;
}
static void ucx_dereg(void *c, ucs_rcache_t *rc, ucs_rcache_region_t *r)
{
    (void)c; (void)rc; (void)r;
}
static void ucx_dump(void *c, ucs_rcache_t *rc, ucs_rcache_region_t *r, char *buf, size_t max)
{
    (void)c; (void)rc; (void)r;
    snprintf(buf, max, "fhbench");
}
static const ucs_rcache_ops_t ucx_ops = {ucx_reg, ucx_dereg, ucx_dump};

static void *ucx_open(int nthreads)
{
    ucx_ctx_t *x = calloc(1, sizeof *x);
    if (!x)
        fh_abort(1, "fhbench: out of memory");
    x->n = nthreads;
    x->len = (size_t)nthreads * STRIDE;
    x->area = mmap(NULL, x->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    x->held = calloc((size_t)nthreads, sizeof *x->held);
    if (x->area == MAP_FAILED || !x->held)
        fh_abort(1, "fhbench: out of memory");
    long page = sysconf(_SC_PAGESIZE);
    ucs_rcache_params_t p = {
        .region_struct_size = sizeof(ucs_rcache_region_t),
        .alignment = (size_t)page,
        .max_alignment = (size_t)page,
        .ucm_events = 0,
        .ucm_event_priority = 1000,
        .ops = &ucx_ops,
        .context = x,
        .flags = UCS_RCACHE_FLAG_NO_PFN_CHECK,
        .max_regions = (unsigned long)-1,
        .max_size = (size_t)-1,
        .max_unreleased = (size_t)-1,
    };
    if (ucs_rcache_create(&p, "fhbench", NULL, &x->rc) != UCS_OK) {
        printf("cache: ucx-rcache unavailable: ucs_rcache_create failed\n");
        return NULL;
    }
    for (int i = 0; i < nthreads; i++)
        if (ucs_rcache_get(x->rc, x->area + (size_t)i * STRIDE, 65536,
                           PROT_READ | PROT_WRITE, NULL, &x->held[i]) != UCS_OK) {
            printf("cache: ucx-rcache: ucs_rcache_get failed\n");
            return NULL;
        }
    return x;
}

static void ucx_run(void *ctx, int thread, long n)
{
    ucx_ctx_t *x = ctx;
    void *addr = x->area + (size_t)thread * STRIDE;
    for (long i = 0; i < n; i++) {
        ucs_rcache_region_t *r;
        if (__builtin_expect(ucs_rcache_get(x->rc, addr, 8, PROT_READ | PROT_WRITE, NULL, &r)
                             != UCS_OK, 0))
            fh_abort(1, "fhbench: cache: ucs_rcache_get failed");
        ucs_rcache_region_put(x->rc, r);
    }
}

static void ucx_close(void *ctx)
{
    ucx_ctx_t *x = ctx;
    for (int i = 0; i < x->n; i++)
        ucs_rcache_region_put(x->rc, x->held[i]);
    ucs_rcache_destroy(x->rc);
    munmap(x->area, x->len);
    free(x->held);
    free(x);
}
#endif

/* ---------------------------------------------------------- fh-hit */

#ifdef FHB_HAVE_REG_HIT
#include "firehose/internal.h"
#include "firehose/reg/firehose_internal.h"

/* Rank 1's segment, created collectively by fhb_cache before rank 1 parks. */
static void *fhhit_remote;

static void *fhhit_open(int nthreads)
{
    (void)nthreads;
    if (fhhit_remote == NULL)
        return NULL;
    /* One put per thread's bucket makes the runtime hold the firehoses. */
    char b[8] = {0};
    for (int i = 0; i < nthreads; i++)
        FHB_TRY(fh_put(1, (char *)fhhit_remote + (size_t)i * 65536, b, sizeof b));
    return fhhit_remote;
}

static void fhhit_run(void *ctx, int thread, long n)
{
    fh_thread_t *t = &fh_tls()->base;
    uintptr_t raddr = (uintptr_t)ctx + (size_t)thread * 65536;
    for (long i = 0; i < n; i++) {
        fh_reg_hit_t h;
        if (__builtin_expect(fh_reg_hit_acquire(t, 1, raddr, 8, &h) != FH_OK, 0)) {
            /* The hit layer caches per thread: this thread's first use (the
             * warm-up round) fills its cache, then every acquire must hit. */
            FHB_TRY(fh_reg_hit_warm(t, 1, raddr, 8));
            if (fh_reg_hit_acquire(t, 1, raddr, 8, &h) != FH_OK)
                fh_abort(1, "fhbench: cache: fh_reg_hit_acquire missed a held firehose");
        }
        fh_reg_hit_release(t, &h);
    }
}

static void fhhit_close(void *ctx)
{
    (void)ctx;
}
#endif

static const hit_impl_t impls[] = {
#ifdef FHB_HAVE_REG_HIT
    {"fh-hit", fhhit_open, fhhit_run, fhhit_close},
#endif
    {"fhc-locked", fhc_open, fhc_run, fhc_close},
#ifdef FH_HAVE_UCS
    {"ucx-rcache", ucx_open, ucx_run, ucx_close},
#endif
};

/* ---------------------------------------------------------- driver */

typedef struct cthread {
    pthread_t tid;
    const hit_impl_t *impl;
    void *ctx;
    int index;
    long n;
    pthread_barrier_t *start;
    double t0, t1;
} cthread_t;

static void *cthread_main(void *arg)
{
    cthread_t *t = arg;
    t->impl->run(t->ctx, t->index, t->n / 10 + 1);     /* warm-up */
    pthread_barrier_wait(t->start);
    t->t0 = fhb_now_ns();
    t->impl->run(t->ctx, t->index, t->n);
    t->t1 = fhb_now_ns();
    return NULL;
}

/* One run of nt threads; returns mean ns/op and aggregate Mops/s. */
static void run_once(const hit_impl_t *im, void *ctx, int nt, long n, double *ns, double *mops)
{
    cthread_t th[64];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)nt);
    for (int i = 0; i < nt; i++) {
        th[i] = (cthread_t){.impl = im, .ctx = ctx, .index = i, .n = n, .start = &start};
        if (pthread_create(&th[i].tid, NULL, cthread_main, &th[i]) != 0)
            fh_abort(1, "fhbench: pthread_create failed");
    }
    double first = 0, last = 0, sum = 0;
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i].tid, NULL);
        sum += (th[i].t1 - th[i].t0) / (double)n;
        if (i == 0 || th[i].t0 < first)
            first = th[i].t0;
        if (i == 0 || th[i].t1 > last)
            last = th[i].t1;
    }
    pthread_barrier_destroy(&start);
    *ns = sum / nt;
    *mops = (double)n * nt / ((last - first) / 1e3);
}

int fhb_cache(const fhb_opts_t *o)
{
    int T = (int)(o->threads > 64 ? 64 : o->threads);
    FILE *csv = fhb_csv_open(o, "impl,threads,ops_per_thread,ns_per_op,agg_mops,ns_median,"
                                "agg_mops_median");
#ifdef FHB_HAVE_REG_HIT
    fh_seg_t seg;
    FHB_TRY(fh_segment_create((size_t)T * 65536, &seg, NULL));
    FHB_TRY(fh_segment_query(seg, 1, &fhhit_remote, NULL));
    if (strcmp(fhb_strategy(), "firehose") != 0)   /* the hit layer is firehose's */
        fhhit_remote = NULL;
#endif
    if (fh_rank() != 0) {
        fhb_park(FHB_PARK_SLEEP);
        return 0;
    }
    long n = fhb_iters(o, 2000000, 200000);
    int reps = o->quick ? 5 : 11;
    enum { NIMPL = sizeof impls / sizeof impls[0] };
    void *ctx[NIMPL];
    for (int k = 0; k < NIMPL; k++)
        ctx[k] = impls[k].open(T);
    printf("%12s %8s %10s %10s %10s %10s\n", "impl", "threads", "best_ns", "median_ns",
           "best_Mops", "med_Mops");
    for (int nt = 1; nt <= T; nt++) {
        double ns[NIMPL][MAX_REPS], mops[NIMPL][MAX_REPS];
        /* Implementations alternate within each repetition (paired). */
        for (int r = 0; r < reps; r++)
            for (int k = 0; k < NIMPL; k++)
                if (ctx[k])
                    run_once(&impls[k], ctx[k], nt, n, &ns[k][r], &mops[k][r]);
        for (int k = 0; k < NIMPL; k++) {
            if (!ctx[k])
                continue;
            double nsm = fhb_quantile(ns[k], (size_t)reps, 0.5);
            double nsb = fhb_quantile(ns[k], (size_t)reps, 0.0);
            double mm = fhb_quantile(mops[k], (size_t)reps, 0.5);
            double mb = fhb_quantile(mops[k], (size_t)reps, 1.0);
            fhb_csv_row(csv, "%s,%d,%ld,%.2f,%.3f,%.2f,%.3f", impls[k].name, nt, n, nsb, mb,
                        nsm, mm);
            printf("%12s %8d %10.2f %10.2f %10.2f %10.2f\n", impls[k].name, nt, nsb, nsm, mb, mm);
            fflush(stdout);
        }
    }
    for (int k = 0; k < NIMPL; k++)
        if (ctx[k])
            impls[k].close(ctx[k]);
#ifndef FH_HAVE_UCS
    printf("cache: ucx-rcache skipped: configure did not find libucs (Debian libucx-dev)\n");
#endif
    fhb_csv_close(csv);
    fhb_unpark();
    return 0;
}
