/*
 * fhbench.c -- the benchmark driver: one program, one test per run.
 *
 *   tools/fhrun -n 2 bench/fhbench TEST [--csv FILE] [--iters N] [--quick]
 *                                      [--threads T] [--max-ws BYTES]
 *                                      [--max-size BYTES] [--provider P]
 *                                      [--target-wait spin|barrier]
 *                                      [--turns NAME:I:N]
 *
 * While rank 0 measures, rank 1 is a passive target polling fh_poll in a
 * loop (as raw's target, ucx_perftest and an MPI rank do);
 * --target-wait barrier makes it wait inside fh_barrier instead, which
 * yields its core after a few idle polls (see fhb_target_wait).  --turns
 * (peak only) interleaves the bursts of N jobs run at once (fhbench.h).
 *
 * TEST is latency, peak, sweep, apps, msgrate, cache, map, raw, node,
 * barrier, strided or unbalanced (fhbench.h says which file holds each).  The registration
 * strategy, the paths mode, the node path (FH_SHM) and the firehose sizes
 * come from the FH_* environment like any firehose program;
 * bench/run-all.sh runs every test once per strategy it applies to and
 * turns the CSVs into plots.  A strategy this build does not know
 * makes fh_init fail with FH_ERR_CONFIG: fhbench then prints
 * "SKIP: ..." and exits 77, so scripts can mark the series skipped.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fhbench.h"

static const struct {
    const char *name;
    int (*fn)(const fhb_opts_t *);
    const char *what;
} tests[] = {
    {"latency", fhb_latency, "blocking put/get 1 B..4 MiB median+p99; NB flood"},
    {"peak", fhb_peak, "put bandwidth vs size, same location"},
    {"sweep", fhb_sweep, "8 B put latency, 64 KiB put bandwidth vs working set"},
    {"apps", fhb_apps, "Cannon matrix multiply and bitonic sort, verified"},
    {"msgrate", fhb_msgrate, "2-byte puts from 1..T threads per rank"},
    {"cache", fhb_cache, "registration-cache hit path ns/op vs UCX rcache"},
    {"map", fhb_map, "our hash maps' lookups ns/op vs uthash"},
    {"raw", fhb_raw, "latency/bandwidth directly on libfabric (verbs on ibv)"},
    {"node", fhb_node, "64 KiB..4 MiB put/get vs memcpy (node path); AM short RTT"},
    {"barrier", fhb_barrier, "fh_barrier over all ranks, median+p99"},
    {"strided", fhb_strided, "put/get_strided of 1M 8 B blocks at stride 2; block sweep"},
    {"unbalanced", fhb_unbalanced, "rank 0 -> rank 1 only, others idle: 8 B put vs working set F/4..2M"},
};
#define NTESTS (sizeof tests / sizeof tests[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: fhrun -n 2 fhbench TEST [--csv FILE] [--iters N] [--quick]\n"
               "                        [--threads T] [--max-ws BYTES] [--max-size BYTES]\n"
               "                        [--provider P] [--target-wait spin|barrier]\n"
               "                        [--turns NAME:I:N]\n"
               "tests:\n");
    for (size_t i = 0; i < NTESTS; i++)
        fprintf(f, "  %-8s %s\n", tests[i].name, tests[i].what);
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1024.0 * 1024.0; break;
    case 'g': case 'G': v *= 1024.0 * 1024.0 * 1024.0; break;
    default: break;
    }
    return v > 0 ? (size_t)v : 0;
}

static int parse(int argc, char **argv, fhb_opts_t *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            o->quick = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        } else if (a[0] == '-' && a[1] == '-' && v) {
            if (strcmp(a, "--csv") == 0)
                o->csv = v;
            else if (strcmp(a, "--iters") == 0)
                o->iters = atol(v);
            else if (strcmp(a, "--threads") == 0)
                o->threads = atol(v);
            else if (strcmp(a, "--max-ws") == 0)
                o->max_ws = parse_size(v);
            else if (strcmp(a, "--max-size") == 0)
                o->max_size = parse_size(v);
            else if (strcmp(a, "--provider") == 0)
                o->provider = v;
            else if (strcmp(a, "--target-wait") == 0 && strcmp(v, "barrier") == 0)
                o->target_wait_barrier = 1;
            else if (strcmp(a, "--target-wait") == 0 && strcmp(v, "spin") == 0)
                o->target_wait_barrier = 0;
            else if (strcmp(a, "--turns") == 0)
                o->turns = v;
            else
                return -1;
            i++;
        } else if (a[0] != '-' && !o->test) {
            o->test = a;
        } else {
            return -1;
        }
    }
    if (o->threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads = 2 * (cores > 0 ? cores : 1);
    }
    return o->test ? 0 : -1;
}

int main(int argc, char **argv)
{
    fhb_opts_t o;
    if (parse(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    size_t t = 0;
    while (t < NTESTS && strcmp(tests[t].name, o.test) != 0)
        t++;
    if (t == NTESTS) {
        fprintf(stderr, "fhbench: unknown test '%s'\n", o.test);
        usage(stderr);
        return 2;
    }
    fhb_park_register();
    int rc = fh_init(&argc, &argv);
    if (rc == FH_ERR_CONFIG) {
        /* e.g. FH_REG_STRATEGY names a strategy this build lacks. */
        printf("SKIP: fhbench %s: %s\n", o.test, fh_last_error());
        return 77;
    }
    FHB_TRY(rc);
    if (fh_nranks() < 2) {
        fprintf(stderr, "fhbench: needs at least 2 ranks (fhrun -n 2 %s %s)\n", argv[0],
                o.test);
        fh_finalize();
        return 2;
    }
    fhb_print_header(&o);
    rc = tests[t].fn(&o);
    FHB_TRY(fh_barrier());
    FHB_TRY(fh_finalize());
    return rc;
}
