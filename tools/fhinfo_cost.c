/*
 * fhinfo_cost.c -- `fhinfo --cost RANKS [THREADS]`: what one rank of a job
 * costs on the ofi conduit over tcp (message endpoints, the default on a
 * machine without an RDMA device), for RANKS ranks of which every one has
 * THREADS threads that call into firehose (default 1: a coarray image);
 * with FH_PATHS=independent (the default) the thread paths exist whatever
 * THREADS is, with FH_PATHS=lazy only those threads' paths.
 *
 * Exact from the conduit's sizing (conduits/ofi/ofi_cm.c, ofi_path.c):
 * paths, endpoints (connections) and the receive buffers they post.
 * Estimated from measurements (bench/rankcost.sh, docs/design.md "What a
 * rank costs"): resident memory and file descriptors, as a base plus a
 * cost per endpoint.  FH_MAX_THREADS, FH_PATHS, FH_AM_CREDITS and
 * FH_AM_MAX_MEDIUM are read from the environment, as fh_init would.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "firehose/am_wire.h"
#include "firehose/util/config.h"
#include "conduits/ofi/ofi_rx.h"
#include "conduits/ibv/ibv_cost.h"
#include "conduits/util/cu.h"

/* Fitted to bench/rankcost.sh on Debian 12, libfabric 1.17 tcp, 2 to 16
 * ranks, 1 to 16 threads (docs/design.md; within 10 % of every row): an
 * empty rank, what each endpoint adds (its socket and state; posted
 * receive buffers are touched only as messages arrive) and what each
 * thread path adds (its completion queue, send slots, and the thread). */
#define BASE_RSS_MIB   10.3
#define EP_RSS_MIB     0.045
#define PATH_RSS_MIB   0.65
#define BASE_FDS       12
#define EP_FDS         1
#define PATH_FDS       4

static void print_ibv(int nranks, int per_host, long npaths, long tpaths, int peers,
                      const fh_config_t *cfg, size_t packet);

int fhinfo_print_cost(int nranks, int threads, int per_host, int peers)
{
    fh_config_t cfg;
    char err[256];
    if (fh_config_load(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "fhinfo: %s\n", err);
        return 1;
    }
    long max_threads = cfg.max_threads;
    if (max_threads == 0)      /* as fh_init (fh_auto_threads) */
        max_threads = fh_auto_threads(sysconf(_SC_NPROCESSORS_ONLN), per_host);
    /* FH_PATHS=lazy: the first thread uses the service path, each later one
     * (up to FH_MAX_THREADS) a thread path made when it first calls in;
     * independent: FH_MAX_THREADS thread paths from fh_init, whatever the
     * threads; shared: the service path only. */
    const int lazy = cfg.paths == FH_PATHS_LAZY;
    long tpaths = cfg.paths == FH_PATHS_SHARED ? 0 : lazy ? threads - 1 : max_threads;
    if (tpaths > max_threads)
        tpaths = max_threads;
    const double n = nranks;
    /* Service path: one connection per rank (and the loop to ourselves:
     * two endpoints), plus one accepted from every thread path of every
     * rank; each thread path: one connection per rank. */
    const double ep_svc = n + 1 + n * (double)tpaths;
    const double ep_thr = n * (double)tpaths;
    const double ep = ep_svc + ep_thr;
    const size_t packet = FH_AM_HDR_BYTES + 8 * FH_AM_MAX_ARGS + cfg.am_max_medium;
    const size_t stride = (packet + OFI_AMH + 63) & ~(size_t)63;
    const double c = (double)cfg.am_credits;
    const double rx_svc = ep_svc * (2 * c + 4) * (double)stride;
    const double rx_thr = ep_thr * (c + 4) * (double)stride;
    const double mib = 1024.0 * 1024.0;

    printf("Job shape: %d ranks, %d per host, %d thread%s per rank calling firehose "
           "(FH_MAX_THREADS=%ld, FH_PATHS=%s)\n", nranks, per_host, threads,
           threads == 1 ? "" : "s", max_threads, cfg.paths == FH_PATHS_SHARED ? "shared" : lazy ? "lazy" : "independent");
    printf("Conduit: ofi over tcp, message endpoints (the default without an RDMA device)\n");
    printf("Per rank:\n");
    printf("  paths             1 service path + %ld thread path%s (%s)\n", tpaths,
           tpaths == 1 ? "" : "s", lazy ? "made when a thread first calls in" : "made in fh_init");
    printf("  endpoints         %.0f (service path %.0f, thread paths %.0f): one tcp "
           "connection each\n", ep, ep_svc, ep_thr);
    printf("  receive buffers   %.1f MiB posted: %.0f x %zu B per service-path endpoint, "
           "%.0f x %zu B per thread-path endpoint (FH_AM_CREDITS=%ld, "
           "FH_AM_MAX_MEDIUM=%zu)\n", (rx_svc + rx_thr) / mib, 2 * c + 4, stride, c + 4,
           stride, cfg.am_credits, cfg.am_max_medium);
    const double rss = BASE_RSS_MIB + EP_RSS_MIB * ep + PATH_RSS_MIB * (double)tpaths;
    const double fds = BASE_FDS + EP_FDS * ep + PATH_FDS * (double)tpaths;
    printf("  resident memory   ~%.1f MiB (measured: %.1f MiB + %.3f per endpoint + %.2f per "
           "thread path; plus the segments' touched pages)\n", rss, BASE_RSS_MIB,
           EP_RSS_MIB, PATH_RSS_MIB);
    printf("  file descriptors  ~%.0f (measured: %d + %d per endpoint + %d per thread "
           "path)\n", fds, BASE_FDS, EP_FDS, PATH_FDS);
    printf("  threads started   %s (FH_MEMMON's userfaultfd monitor%s), plus fhrun's "
           "watchdog under fhrun; none for progress\n",
           cfg.memmon == FH_MEMMON_OFF ? "0" : "1",
           cfg.memmon == FH_MEMMON_OFF ? " is off" : "");
    printf("  /dev/shm          nothing over tcp (node segments are memfds, FH_SHM; the "
           "shm provider names one file per path)\n");
    printf("Whole job on one host: ~%.0f MiB, ~%.0f descriptors\n", n * rss, n * fds);
    const long npaths = cfg.paths == FH_PATHS_SHARED ? 1 : 1 + max_threads;
    long used = threads < npaths - 1 ? threads : npaths - 1;
    print_ibv(nranks, per_host, npaths, used, peers, &cfg, packet);
    return 0;
}

/* The verbs conduit (conduits/ibv/ibv_cost.h): every path made at fh_init
 * (FH_PATHS=lazy makes no difference there), connections on first use. */
static void print_ibv(int nranks, int per_host, long npaths, long tpaths, int peers,
                      const fh_config_t *cfg, size_t packet)
{
    const size_t stride = (packet + 63) & ~(size_t)63;
    ibv_cost_shape_t sh = {.nranks = nranks, .npaths = npaths, .used_paths = tpaths,
                           .peers = peers, .credits = cfg->am_credits,
                           .stride = stride, .nslots = cu_send_slots(stride)};
    ibv_cost_t c;
    ibv_cost(&sh, &c);
    const double mib = 1024.0 * 1024.0;
    printf("Conduit ibv (verbs; docs/running-on-clusters.md \"Resources per process\"), "
           "each talking path reaching %d rank%s:\n", peers, peers == 1 ? "" : "s");
    printf("  queue pairs       %.0f RC (made on first use; every pair: %.0f) + %.0f UD "
           "(one per path)\n", c.rc_qps, c.rc_qps_max, c.ud_qps);
    printf("  CQ entries        %.0f (all paths, grown with the connections; sized for "
           "every peer: %.0f)\n", c.cq_entries, c.cq_entries_max);
    printf("  pinned receive    %.1f MiB (every pair connected: %.1f MiB) + %.1f MiB of send "
           "slots and connection buffers\n", c.rx_bytes / mib, c.rx_bytes_max / mib,
           c.other_bytes / mib);
    printf("  per host          %.0f RC QPs for its %d ranks\n", c.rc_qps * per_host,
           per_host);
}
