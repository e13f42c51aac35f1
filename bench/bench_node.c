/*
 * bench_node.c -- `node`: the node path (FH_SHM=auto, issue 27) against
 * the copy it is made of, small puts by source memory, and an AM short
 * round trip.
 *
 * Between two ranks of one node group a put or a get is a memcpy through
 * the peer's shared segment (firehose/node/).  The question this test
 * answers: how close does fh_put/fh_get of 64 KiB .. 4 MiB come to a plain
 * single-thread memcpy of the same size, measured in the same process at
 * the same time?  The target is >= 90 %.
 *
 * Copies.  For n = 64 KiB, 256 KiB, 1 MiB, 4 MiB (up to --max-size), in
 * each of R rounds (21 with --quick, else 60) rank 0 runs three batches
 * back to back, each `ops` operations of n bytes (ops = 4 MiB / n, 2..64:
 * a batch takes about a millisecond, so that the three of a round see the
 * same load on a shared machine):
 *   memcpy   memcpy(buffer, local buffer, n): the put's source, into
 *            page-aligned private memory, as a program copying into
 *            memory of its own would;
 *   put      blocking fh_put(1, rank 1's segment, local buffer, n);
 *   get      blocking fh_get(local buffer, 1, rank 1's segment, n).
 * Each batch gives MB/s (n * ops / time, MB = 1e6 bytes).  The order of
 * the three rotates with the round, so none always runs first on a cold
 * cache.  Rows copy_memcpy, copy_put, copy_get: the median over rounds
 * (mb_s, and median_us = the time of one operation at that rate);
 * copy_ratio_put, copy_ratio_get: the median over rounds of the per-round
 * ratio put / memcpy and get / memcpy (mb_s column): interference that
 * hits a whole round cancels out of its ratio.
 *
 * Small puts (small_put_<src>, size 8): blocking 8-byte fh_put to rank 1
 * from four kinds of source memory -- stack (an automatic array), seg (our
 * own segment), data (an initialized static array: the executable's data
 * pages, a file mapping no memory monitor can watch), heap (malloc) --
 * and self (to our own rank, from the stack).  R rounds of batches of
 * SMALL_OPS puts, the order rotating; median_us = the median over rounds
 * of one put's time.  small_ratio_<src>: the median of the per-round
 * ratio of that source's time to the stack's (mb_s column): a source
 * whose caller's buffer check asks the kernel shows as a ratio far above 1.
 *
 * AM short round trip (am_short_rtt, size 8): rank 0 sends a short
 * request with one 8-byte argument; its handler on rank 1 answers with a
 * short reply carrying the argument back; timed request to reply, median
 * and p99 in microseconds.  The round trip, not half of it (ucx_perftest's
 * ucp_am_lat reports half a ping-pong; run-peers.sh doubles it).
 *
 * Rank 1 is a passive target polling fh_poll (fhb_target_wait) throughout.
 * Whether rank 1's segment is mapped here (fh_addr_local) is printed
 * ("node path: ...") and written as the header line "# node_path=yes|no";
 * without it (FH_SHM=off, another host) the same loops run through the
 * conduit and the ratios say how far that is from a copy.
 *
 * CSV columns: fhb_rma_columns (op,size,iters,median_us,p99_us,mb_s,msgs_s);
 * iters = operations over all rounds (ratio rows: rounds).
 */
#include <stdlib.h>
#include <string.h>

#include "fhbench.h"

#define NODE_MIN_SIZE ((size_t)64 << 10)
#define NODE_BATCH_BYTES ((size_t)4 << 20)
#define NODE_MAX_ROUNDS 64

typedef struct node_ctx {
    char *remote;     /* rank 1's segment base (mapped here on the node path) */
    char *local;      /* in our segment: the source of every copy */
    char *dst;        /* the memcpy's destination: page-aligned, private */
    fh_seg_t seg;
} node_ctx_t;

enum { K_MEMCPY, K_PUT, K_GET, K_COUNT };
static const char *const kind_name[K_COUNT] = {"memcpy", "put", "get"};

/* One batch of `ops` n-byte operations of kind k; returns MB/s. */
static double batch_mbs(const node_ctx_t *c, int k, size_t n, long ops)
{
    double t0 = fhb_now_ns();
    for (long i = 0; i < ops; i++) {
        if (k == K_MEMCPY)
            memcpy(c->dst, c->local, n);
        else if (k == K_PUT)
            FHB_TRY(fh_put(1, c->remote, c->local, n));
        else
            FHB_TRY(fh_get(c->local, 1, c->remote, n));
    }
    /* memcpy's destination is the runtime's memory (it escapes): the
     * compiler cannot drop the copies as dead stores */
    return (double)n * (double)ops / ((fhb_now_ns() - t0) / 1e3);
}

static void copies(const node_ctx_t *c, const fhb_opts_t *o, FILE *csv)
{
    int rounds = o->quick ? 21 : 60;
    if (o->iters > 0 && o->iters < rounds)
        rounds = o->iters < 3 ? 3 : (int)o->iters;
    double mbs[K_COUNT][NODE_MAX_ROUNDS];
    printf("%9s %6s %12s %12s %12s %10s %10s\n", "size", "ops", "memcpy_MB/s", "put_MB/s",
           "get_MB/s", "put/memcpy", "get/memcpy");
    for (size_t n = NODE_MIN_SIZE; n <= fhb_top_size(o); n *= 4) {
        long ops = (long)(NODE_BATCH_BYTES / n);
        ops = ops < 2 ? 2 : ops > 64 ? 64 : ops;
        for (int rd = -1; rd < rounds; rd++) {   /* round -1: warm-up */
            for (int j = 0; j < K_COUNT; j++) {
                int k = (j + (rd < 0 ? 0 : rd)) % K_COUNT;
                double x = batch_mbs(c, k, n, ops);
                if (rd >= 0)
                    mbs[k][rd] = x;
            }
        }
        double ratio[2][NODE_MAX_ROUNDS], med[K_COUNT], rmed[2];
        for (int rd = 0; rd < rounds; rd++)
            for (int k = K_PUT; k <= K_GET; k++)
                ratio[k - K_PUT][rd] = mbs[K_MEMCPY][rd] > 0 ? mbs[k][rd] / mbs[K_MEMCPY][rd] : 0;
        for (int k = 0; k < K_COUNT; k++) {
            med[k] = fhb_quantile(mbs[k], (size_t)rounds, 0.5);
            fhb_csv_row(csv, "copy_%s,%zu,%ld,%.3f,,%.1f,%.1f", kind_name[k], n, ops * rounds,
                        (double)n / med[k], med[k], med[k] * 1e6 / (double)n);
        }
        for (int k = 0; k < 2; k++) {
            rmed[k] = fhb_quantile(ratio[k], (size_t)rounds, 0.5);
            fhb_csv_row(csv, "copy_ratio_%s,%zu,%d,,,%.4f,", kind_name[K_PUT + k], n, rounds,
                        rmed[k]);
        }
        printf("%9zu %6ld %12.1f %12.1f %12.1f %10.2f %10.2f\n", n, ops, med[K_MEMCPY],
               med[K_PUT], med[K_GET], rmed[0], rmed[1]);
        fflush(stdout);
    }
}

enum { S_STACK, S_SEG, S_DATA, S_HEAP, S_SELF, S_COUNT };
static const char *const small_name[S_COUNT] = {"stack", "seg", "data", "heap", "self"};
static uint64_t small_data[8] = {1, 2, 3, 4, 5, 6, 7, 8};   /* .data: a file mapping */
#define SMALL_OPS 20000

/* One batch of SMALL_OPS 8-byte puts from src (to rank 1, or to our own
 * segment for S_SELF); returns ns per put. */
static double small_batch_ns(const node_ctx_t *c, int k, const void *src)
{
    int to = k == S_SELF ? 0 : 1;
    char *dst = k == S_SELF ? c->local + FHB_MAX_SIZE / 2 : c->remote;
    double t0 = fhb_now_ns();
    for (long i = 0; i < SMALL_OPS; i++)
        FHB_TRY(fh_put(to, dst, src, 8));
    return (fhb_now_ns() - t0) / SMALL_OPS;
}

static void smalls(const node_ctx_t *c, const fhb_opts_t *o, FILE *csv)
{
    int rounds = o->quick ? 21 : 60;
    uint64_t stack_src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t *heap_src = malloc(sizeof stack_src);
    if (heap_src == NULL)
        fh_abort(1, "fhbench: out of memory");
    memcpy(heap_src, stack_src, sizeof stack_src);
    const void *src[S_COUNT] = {stack_src, c->local, small_data, heap_src, stack_src};
    double ns[S_COUNT][NODE_MAX_ROUNDS], ratio[NODE_MAX_ROUNDS];
    for (int rd = -1; rd < rounds; rd++)   /* round -1: warm-up */
        for (int j = 0; j < S_COUNT; j++) {
            int k = (j + (rd < 0 ? 0 : rd)) % S_COUNT;
            double x = small_batch_ns(c, k, src[k]);
            if (rd >= 0)
                ns[k][rd] = x;
        }
    printf("8 B blocking put, median ns over %d rounds (ratio: per-round, to the stack's):\n",
           rounds);
    for (int k = 0; k < S_COUNT; k++) {
        double med = fhb_quantile(ns[k], (size_t)rounds, 0.5);
        for (int rd = 0; rd < rounds; rd++)
            ratio[rd] = ns[S_STACK][rd] > 0 ? ns[k][rd] / ns[S_STACK][rd] : 0;
        double rmed = fhb_quantile(ratio, (size_t)rounds, 0.5);
        fhb_csv_row(csv, "small_put_%s,8,%ld,%.4f,,,", small_name[k],
                    (long)rounds * SMALL_OPS, med / 1e3);
        fhb_csv_row(csv, "small_ratio_%s,8,%d,,,%.4f,", small_name[k], rounds, rmed);
        printf("  from %-5s %s %9.1f ns  %6.2f\n", small_name[k],
               k == S_SELF ? "to self " : "to rank 1", med, rmed);
    }
    fflush(stdout);
    free(heap_src);
}

/* AM short round trip: the request's handler echoes its argument. */
#define AM_SRTT_REQ (FH_AM_USER_FIRST + 10)
#define AM_SRTT_REP (FH_AM_USER_FIRST + 11)
static volatile uint64_t srtt_echo;
static volatile int srtt_replies;

static void h_srtt_req(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf; (void)n;
    FHB_TRY(fh_am_reply_short(tok, AM_SRTT_REP, a, na));
}

static void h_srtt_rep(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok; (void)buf; (void)n;
    if (na == 1)
        srtt_echo = a[0];
    srtt_replies++;
}

static int am_short_rtt(const fhb_opts_t *o, FILE *csv)
{
    const long it = fhb_iters(o, 5000, 500);
    double *t = malloc(sizeof(double) * (size_t)it);
    if (!t)
        fh_abort(1, "fhbench: out of memory");
    int bad = 0;
    for (long i = -it / 10 - 2; i < it; i++) {
        uint64_t arg = 0x5eed0000u + (uint64_t)(i & 0xffff);
        int want = srtt_replies + 1;
        double t0 = fhb_now_ns();
        FHB_TRY(fh_am_request_short(1, AM_SRTT_REQ, &arg, 1));
        while (srtt_replies < want)
            FHB_TRY(fh_poll());
        if (i >= 0)
            t[i] = (fhb_now_ns() - t0) / 1e3;
        if (srtt_echo != arg)
            bad = 1;
    }
    double m = fhb_quantile(t, (size_t)it, 0.5), p = fhb_quantile(t, (size_t)it, 0.99);
    fhb_csv_row(csv, "am_short_rtt,8,%ld,%.3f,%.3f,,", it, m, p);
    printf("AM short round trip (8-byte argument each way): median %.3f us, p99 %.3f us\n", m, p);
    if (bad)
        fprintf(stderr, "fhbench node: a short reply did not echo its request's argument\n");
    free(t);
    return bad;
}

int fhb_node(const fhb_opts_t *o)
{
    node_ctx_t c;
    void *mine;
    FHB_TRY(fh_am_register(AM_SRTT_REQ, h_srtt_req, "fhbench-srtt-req"));
    FHB_TRY(fh_am_register(AM_SRTT_REP, h_srtt_rep, "fhbench-srtt-rep"));
    FHB_TRY(fh_segment_create(FHB_MAX_SIZE, &c.seg, &mine));
    FHB_TRY(fh_segment_query(c.seg, 1, (void **)&c.remote, NULL));
    c.local = mine;
    c.dst = aligned_alloc(4096, FHB_MAX_SIZE);
    if (!c.dst)
        fh_abort(1, "fhbench: out of memory");
    memset(c.local, 0x5a, FHB_MAX_SIZE);   /* every page touched before timing */
    memset(c.dst, 0xa5, FHB_MAX_SIZE);
    FHB_TRY(fh_barrier());
    int mapped = fh_rank() == 0 && fh_addr_local(1, c.remote) != NULL;
    FILE *csv = fhb_csv_open(o, fhb_rma_columns);
    int rc = 0;
    if (fh_rank() == 0) {
        printf("node path: rank 1's segment is %s\n",
               mapped ? "mapped here (fh_addr_local): puts and gets are copies"
                      : "NOT mapped here: puts and gets go through the conduit");
        if (csv) {
            /* a comment line before the rows: csv.sh and the checks skip it */
            fprintf(csv, "# node_path=%s\n", mapped ? "yes" : "no");
        }
        copies(&c, o, csv);
        smalls(&c, o, csv);
        rc = am_short_rtt(o, csv);
    }
    fhb_csv_close(csv);
    fhb_target_wait(o);
    FHB_TRY(fh_segment_destroy(c.seg));
    free(c.dst);
    return rc;
}
