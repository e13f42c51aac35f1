/*
 * fhbench.h -- what the parts of bench/fhbench share: options, timing,
 * statistics helpers, the CSV writer, and one entry point per test.
 *
 * Layout of the benchmark (one file per test, each readable alone):
 *   fhbench.c        driver: options, fh_init, the run header, dispatch
 *   bench_util.c     clock, percentiles, CSV, per-peer counter deltas
 *   bench_rma.c      latency (blocking put/get, NB flood) and peak
 *   bench_sweep.c    the paper's working-set sweep (one strategy per run)
 *   bench_apps.c     Cannon matrix multiply and bitonic sort, verified
 *   bench_msgrate.c  2-byte puts from T threads per rank
 *   bench_cache.c    registration-cache hit path vs UCX's rcache
 *   bench_map.c      our hash maps (util/map.h, cache/fhc_map.h) vs uthash
 *   bench_raw.c      the same loops written directly on libfabric
 *   bench_raw_ibv.c  ... and on rdma-core verbs (ibv conduit builds only)
 *   bench_pair.c     raw's body shared by both: size table, paired rounds
 *   bench_node.c     node path copies vs memcpy, AM short round trip
 *   bench_barrier.c  fh_barrier over all ranks
 *   bench_unbalanced.c  one hot pair among idle ranks vs working set
 *
 * Every test is collective (all ranks call it); rank 0 measures, prints a
 * table to stdout and, with --csv, writes the CSV: "# key=value" header
 * lines (see fhb_csv_open), one line of column names, then one row per
 * measurement.  Nothing here asserts on timings.
 */
#ifndef FHBENCH_H
#define FHBENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "firehose.h"

typedef struct fhb_opts {
    const char *test;
    const char *csv;      /* --csv FILE, or NULL */
    long iters;           /* --iters N (0: the test's default) */
    int quick;            /* --quick: small sizes and counts */
    long threads;         /* --threads T (msgrate, cache; 0: 2 x cores) */
    size_t max_ws;        /* --max-ws BYTES (sweep; 0: 4 x M) */
    const char *provider; /* --provider (raw; default FH_OFI_PROVIDER) */
    size_t max_size;      /* --max-size BYTES (latency, peak, raw; 0: 4 MiB) */
    int target_wait_barrier; /* --target-wait barrier (default spin) */
    const char *turns;    /* --turns NAME:I:N (peak), or NULL */
} fhb_opts_t;

/* Turns (--turns NAME:I:N; bench/strategies.sh): N fhbench jobs run at
 * once on one host, as job I of them, and their rank 0s take turns burst
 * by burst through N named POSIX semaphores (/NAME.0 .. /NAME.N-1; /NAME.0
 * starts at 1): job I waits on its own, measures, then posts job I+1's
 * (mod N).  While one job measures, the others sleep (rank 0 in
 * sem_timedwait, rank 1 in fh_barrier: run them with --target-wait
 * barrier), so bursts of different jobs -- different strategies -- lie
 * milliseconds apart and meet the same state of a shared, noisy machine,
 * where separate runs meet different ones.  Every job must make the same
 * calls in the same order (same test and options).  peak with turns times
 * 5 bursts per size and direction, one per turn, and reports their median.  fhb_turn_begin aborts
 * after 300 s without its turn (a job died).  Without --turns both do
 * nothing. */
void fhb_turns_open(const fhb_opts_t *o);
void fhb_turn_begin(void);
void fhb_turn_end(void);
void fhb_turns_close(void);

/* The iteration count: --iters if given, else quick ? q : full. */
long fhb_iters(const fhb_opts_t *o, long full, long q);
/* The provider the ofi conduit took (FH_OFI_PROVIDER may be a list), from
 * its description, into buf (>= 64 bytes); false when it says none. */
bool fhb_ofi_provider_taken(char *buf, size_t len);

/* Clock in nanoseconds (CLOCK_MONOTONIC). */
double fhb_now_ns(void);
/* Sorts v[0..n) and returns its p-quantile (p in [0, 1]). */
double fhb_quantile(double *v, size_t n, double p);

/* The effective firehose M (FH_FIREHOSE_M, else 3/4 of what can be
 * pinned, as firehose/reg/firehose.c derives it) and bucket size. */
size_t fhb_firehose_m(void);
size_t fhb_bucket(void);
/* "firehose", "pin-everything", ... : this run's FH_REG_STRATEGY. */
const char *fhb_strategy(void);
/* "independent" or "shared": this run's FH_PATHS. */
const char *fhb_paths(void);

/* CSV.  fhb_csv_open writes the run header (conduit, provider, strategy,
 * M, bucket, threads, git revision, test, quick) and the column line.
 * Only rank 0 writes; the others get NULL and fhb_csv_row ignores NULL. */
FILE *fhb_csv_open(const fhb_opts_t *o, const char *columns);
void fhb_csv_row(FILE *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void fhb_csv_close(FILE *f);
/* Prints the same header as "# key=value" lines to stdout (rank 0). */
void fhb_print_header(const fhb_opts_t *o);

/* Columns of the latency, peak and raw CSVs (bench_rma.c). */
extern const char *const fhb_rma_columns;

/* Sizes of latency, peak and raw: powers of two up to FHB_MAX_SIZE, or
 * --max-size when smaller (fhb_top_size). */
#define FHB_MAX_SIZE ((size_t)4 << 20)
size_t fhb_top_size(const fhb_opts_t *o);
/* Iterations for size n: `base` up to 64 KiB, then fewer (the same bytes),
 * at least 5 (quick) or 20. */
long fhb_iters_for(long base, size_t n, int quick);

/* The per-size table of latency and raw, over one implementation.
 *   lat:   `it` blocking n-byte puts (is_put) or gets timed one by one;
 *          fills the median and p99 in microseconds;
 *   flood: `it` non-blocking ones in windows of 64; returns seconds.
 * For n = 1 B .. fhb_top_size(o) (powers of two) fhb_size_table runs lat
 * and flood for put and get with fhb_iters_for(fhb_iters(o, 2000, 100))
 * iterations (flood: twice that), writes rows put, get, put_nb_flood,
 * get_nb_flood to csv (fhb_rma_columns; csv may be NULL) and one table
 * line per size to stdout, after a column line.  Rank 0 only. */
typedef void (*fhb_lat_fn)(void *ctx, int is_put, size_t n, long it, double *med,
                           double *p99);
typedef double (*fhb_flood_fn)(void *ctx, int is_put, size_t n, long it);
void fhb_size_table(const fhb_opts_t *o, FILE *csv, void *ctx, fhb_lat_fn lat,
                    fhb_flood_fn flood);

/* `raw` once a transport is open (bench_pair.c).  The transport's buffer
 * `buf` is what the peer writes into: a stop word at offset 0 and a phase
 * word at offset 8 (both uint64_t, initially 0).  Operations, all rank 0
 * -> rank 1, from a registered local area:
 *   lat, flood   as for fhb_size_table;
 *   lat_one      one blocking n-byte put at the peer's offset 0, in us;
 *   put_word     one blocking 8-byte put of v to the peer's offset off;
 *   progress     rank 1 between checks of its words (may be NULL: a
 *                transport whose target needs no CPU);
 *   extra        rank 0, after the size table: rows of its own (or NULL).
 * fhb_raw_body (collective) creates the firehose segment of the paired
 * rounds and the CSV; rank 0 prints `title`, runs fhb_size_table, extra
 * and the paired rounds (see bench_raw.c), then writes the stop word;
 * rank 1 polls its words (progress, fh_poll) until the stop word is set;
 * other ranks only wait.  Ends with a barrier. */
typedef struct fhb_raw_ops {
    void *ctx;
    char *buf;
    const char *title;
    fhb_lat_fn lat;
    fhb_flood_fn flood;
    double (*lat_one)(void *ctx, size_t n);
    void (*put_word)(void *ctx, size_t off, uint64_t v);
    void (*progress)(void *ctx);
    void (*extra)(void *ctx, const fhb_opts_t *o, FILE *csv);
} fhb_raw_ops_t;
void fhb_raw_body(const fhb_opts_t *o, const fhb_raw_ops_t *ops);

/* Sum of the registration counters over every peer of this rank. */
void fhb_reg_counts(uint64_t *hits, uint64_t *misses);

/* Ranks other than 0 wait in fhb_park until rank 0 calls fhb_unpark,
 * calling fh_poll in a loop and between polls:
 *   SLEEP  sleeping 0.5 ms (a rank-local measurement, e.g. cache, keeps
 *          the cores);
 *   YIELD  sched_yield() (a target that must progress but shares the cores
 *          with the measuring threads: msgrate);
 *   SPIN   nothing (a passive target like raw's, ucx_perftest's or an MPI
 *          rank in MPI_Barrier: latency, peak, sweep, apps).
 * fhb_park_register must run before fh_init (it registers an AM). */
typedef enum { FHB_PARK_SLEEP, FHB_PARK_YIELD, FHB_PARK_SPIN } fhb_park_t;
void fhb_park_register(void);
void fhb_park(fhb_park_t how);
void fhb_unpark(void);
/* The end of a rank-0-measures phase: rank 1 waited for it polling (SPIN),
 * or, with --target-wait barrier, inside fh_barrier (which yields the core
 * after a few idle polls).  Collective; ends with a barrier. */
void fhb_target_wait(const fhb_opts_t *o);

/* Aborts the job with a message naming the failed call. */
#define FHB_TRY(call) do { int rc_ = (call); if (rc_ != FH_OK) {              \
        fprintf(stderr, "fhbench: %s:%d: %s failed: %s (%s)\n", __FILE__,     \
                __LINE__, #call, fh_err_name(rc_), fh_last_error());         \
        fh_abort(1, "fhbench failed"); } } while (0)

/* Tests.  Each returns 0 on success, non-zero on a failed verification. */
int fhb_latency(const fhb_opts_t *o);
int fhb_peak(const fhb_opts_t *o);
int fhb_sweep(const fhb_opts_t *o);
int fhb_apps(const fhb_opts_t *o);
int fhb_msgrate(const fhb_opts_t *o);
int fhb_cache(const fhb_opts_t *o);
int fhb_map(const fhb_opts_t *o);
int fhb_raw(const fhb_opts_t *o);
int fhb_node(const fhb_opts_t *o);
int fhb_barrier(const fhb_opts_t *o);
/* bench_strided.c: fh_put_strided/fh_get_strided of many small blocks. */
int fhb_strided(const fhb_opts_t *o);
/* bench_unbalanced.c: one hot pair (0 -> 1), the other ranks idle. */
int fhb_unbalanced(const fhb_opts_t *o);
/* raw on verbs (bench_raw_ibv.c, when FH_HAVE_IBV): fhb_raw calls it when
 * the runtime runs the ibv conduit. */
int fhb_raw_ibv(const fhb_opts_t *o);

#endif /* FHBENCH_H */
