/*
 * fhsim.c -- the firehose registration cache (firehose/cache) on N simulated
 * ranks over a simulated network, checked at every step.
 *
 *   fhsim --nodes N --steps S --seed X [--pattern random|stencil|hotspot|
 *         neighbors|master-worker|skewed|phase] [--k K] [--zipf S]
 *         [--period P] [--ws bytes] [--M bytes] [--bucket b] [--region-max b] [--maxvictim b]
 *         [--put-in-move b] [--seg b] [--rate n] [--window n] [--delay n]
 *         [--rdma-delay n] [--check-every K] [--check-sample K] [--stall K]
 *         [--max-age K]
 *         [--bad-rate permille] [--local-rate permille] [--pin-fail permille]
 *         [--free-rate permille]
 *         [--reorder-replies] [--inject-bug NAME] [--budget static|adaptive]
 *         [--victim static|adaptive] [--maxvictim-max b] [--quiet]
 *   fhsim --oracle-selftest
 *
 * Patterns: random (any peer, anywhere), stencil (4 neighbours on a 2-D
 * grid, halo slots), hotspot (half the ops go to rank 0's first 8 frames);
 * and, with a fixed set of hot peers per rank and a working set of --ws
 * bytes per pair (default 8 frames, at most the segment): neighbors (--k,
 * default 6), master-worker (one partner each), skewed (Zipf peers, --zipf,
 * default 1.0), phase (k hot peers, changing every --period steps, default
 * 10000); see fhsim.h.
 *
 * Measured beside the cache: an oracle (fhsim_oracle.h) gets every operation
 * that the cache gets (not those outside the segment): per target, one LRU
 * over (initiator, bucket) with room for M/B entries.  The summary line
 * prints its oracle_hit_rate beside the cache's hit_rate, and moves_per_op
 * (the cache's move requests per completed operation).
 * Time advances in steps.  In each step every event due is handled (a move
 * request or reply arrives; an RDMA completes; a local pin ends), then
 * --rate new operation chunks are started by random ranks (each rank keeps at
 * most --window in flight), and sometimes a rank pins a local buffer.
 *
 * With --free-rate, a rank sometimes frees and reuses 1..4 buckets of its
 * segment (new pages at the same addresses): the sim calls fhc_invalidate,
 * as the runtime does when its memory monitor reports it.
 *
 * The network delays each message by 1..--delay steps.  Requests of one
 * (initiator, target) pair stay in order (the runtime sends moves on one
 * path per pair); different pairs overtake each other freely, and with
 * --reorder-replies replies overtake each other too.
 *
 * What is checked: fhsim_check.c (the checks at registration time:
 * fhsim_net.c env_pin).  Exit 0 when all hold, 1 with a message and a dump
 * otherwise.  --inject-bug makes the run wrong on purpose: fhsim_bugs.c
 * lists the bugs and the detector each must trip (fhsim-check.sh expects
 * exit 1).  --budget static|adaptive (default static): the caches' budget
 * policy.  The files of the simulator: fhsim_sim.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fhsim_sim.h"

/* ---------------------------------------------------------- parameters */

fhsim_opt_t opt = {
    .nodes = 16, .steps = 100000, .seed = 1, .pattern = "random",
    .bucket = 4096, .put_in_move = 3072, .seg = 1u << 20,
    .rate = 1, .window = 4, .delay = 20, .rdma_delay = 10,
    .check_sample = 100, .stall = 20000, .max_age = 200000,
    .bad_rate = 5, .local_rate = 20,
    .k = 6, .period = 10000, .zipf = 1.0,
};
fhsim_pattern_t pat;
int pat_on;
fhsim_oracle_t *oracle;

/* --------------------------------------------------------------- main */

static size_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s)
        goto bad;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    }
    if (*end)
        goto bad;
    return (size_t)v;
bad:
    fprintf(stderr, "fhsim: bad number '%s'\n", s);
    exit(2);
}

static double parse_double(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) {
        fprintf(stderr, "fhsim: bad number '%s'\n", s);
        exit(2);
    }
    return v;
}

static void usage(void)
{
    fprintf(stderr, "usage: fhsim --nodes N --steps S --seed X [--pattern "
            "random|stencil|hotspot|neighbors|master-worker|skewed|phase] [--k K] "
            "[--zipf S] [--period P] [--ws b] [--M b] [--bucket b] [--region-max b] "
            "[--maxvictim b] [--put-in-move b] [--seg b] [--rate n] [--window n] "
            "[--delay n] [--rdma-delay n] [--check-every K] [--check-sample K] "
            "[--stall K] [--max-age K] [--bad-rate pm] [--local-rate pm] [--pin-fail pm] "
            "[--free-rate pm] [--reorder-replies] [--inject-bug no-f-check|evict-held|"
            "forget-release|stale-install|skip-release|reorder-requests|early-ack|"
            "ignore-revoke|victim-past-max|grant-past-M|reclaim-busy|no-floor] "
            "[--budget static|adaptive] [--victim static|adaptive] [--maxvictim-max b] "
            "[--quiet]\n       fhsim --oracle-selftest\n");
    exit(2);
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && ++i)
        if (ARG("--nodes")) opt.nodes = (uint32_t)parse_size(v);
        else if (ARG("--steps")) opt.steps = parse_size(v);
        else if (ARG("--seed")) opt.seed = parse_size(v);
        else if (ARG("--pattern")) opt.pattern = v;
        else if (ARG("--k")) opt.k = (uint32_t)parse_size(v);
        else if (ARG("--period")) opt.period = parse_size(v);
        else if (ARG("--zipf")) opt.zipf = parse_double(v);
        else if (ARG("--ws")) opt.ws = parse_size(v);
        else if (ARG("--M")) opt.M = parse_size(v);
        else if (ARG("--bucket")) opt.bucket = parse_size(v);
        else if (ARG("--region-max")) opt.region_max = parse_size(v);
        else if (ARG("--maxvictim")) opt.maxvictim = parse_size(v);
        else if (ARG("--put-in-move")) opt.put_in_move = parse_size(v);
        else if (ARG("--seg")) opt.seg = parse_size(v);
        else if (ARG("--rate")) opt.rate = (unsigned)parse_size(v);
        else if (ARG("--window")) opt.window = (unsigned)parse_size(v);
        else if (ARG("--delay")) opt.delay = (unsigned)parse_size(v);
        else if (ARG("--rdma-delay")) opt.rdma_delay = (unsigned)parse_size(v);
        else if (ARG("--check-every")) opt.check_every = parse_size(v);
        else if (ARG("--check-sample")) opt.check_sample = parse_size(v);
        else if (ARG("--stall")) opt.stall = parse_size(v);
        else if (ARG("--max-age")) opt.max_age = parse_size(v);
        else if (ARG("--bad-rate")) opt.bad_rate = (unsigned)parse_size(v);
        else if (ARG("--local-rate")) opt.local_rate = (unsigned)parse_size(v);
        else if (ARG("--pin-fail")) opt.pin_fail = (unsigned)parse_size(v);
        else if (ARG("--free-rate")) opt.free_rate = (unsigned)parse_size(v);
        else if (ARG("--inject-bug")) {
            if (fhsim_bug_parse(v) < 0)
                usage();
        }
        else if (ARG("--budget")) {
            if (!strcmp(v, "static")) opt.budget = FHC_BUDGET_STATIC;
            else if (!strcmp(v, "adaptive")) opt.budget = FHC_BUDGET_ADAPTIVE;
            else usage();
        }
        else if (ARG("--victim")) {
            if (!strcmp(v, "adaptive")) opt.victim_adaptive = 1;
            else if (strcmp(v, "static")) usage();
        }
        else if (ARG("--maxvictim-max")) opt.maxvictim_max = parse_size(v);
        else if (!strcmp(a, "--reorder-replies")) opt.reorder_replies = 1;
        else if (!strcmp(a, "--quiet")) opt.quiet = 1;
        else if (!strcmp(a, "--oracle-selftest")) {
            int rc = fhsim_oracle_selftest();
            printf("fhsim: oracle selftest %s\n", rc ? "FAIL" : "PASS");
            exit(rc ? 1 : 0);
        }
        else usage();
#undef ARG
    }
    pat_on = fhsim_pattern_kind(opt.pattern) >= 0;
    if (opt.nodes < 2 || (!pat_on && strcmp(opt.pattern, "random") &&
                          strcmp(opt.pattern, "stencil") &&
                          strcmp(opt.pattern, "hotspot")) || !opt.delay || !opt.rdma_delay ||
        !opt.window || !opt.bucket || opt.seg < opt.bucket)
        usage();
    if (!opt.region_max)
        opt.region_max = 16 * opt.bucket;
    if (!opt.check_every)
        opt.check_every = opt.nodes * 100 > 10000 ? opt.nodes * 100 : 10000;
    if (!opt.M)
        opt.M = (size_t)(opt.nodes - 1) * 4 * opt.region_max;
    if (!opt.maxvictim)
        opt.maxvictim = opt.M / 4 > 8 * opt.region_max ? 8 * opt.region_max : opt.M / 4;
    if (!opt.maxvictim_max)
        opt.maxvictim_max = 4 * opt.maxvictim;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    rng_state = opt.seed * 0x2545F4914F6CDD1Dull + 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    nodes = calloc(opt.nodes, sizeof *nodes);
    flow_last = calloc((size_t)opt.nodes * opt.nodes, sizeof *flow_last);
    rflow_last = calloc((size_t)opt.nodes * opt.nodes, sizeof *rflow_last);
    if (!nodes || !flow_last || !rflow_last)
        fail("out of memory");
    fhc_map_init(&pinned_buckets);
    fhc_map_init(&freed_at);
    for (uint32_t i = 0; i < opt.nodes; i++) {
        nodes[i].id = i;
        fhc_params_t p = { .nranks = opt.nodes, .rank = i, .bucket = opt.bucket,
                           .region_max = opt.region_max, .M = opt.M,
                           .maxvictim = opt.maxvictim,
                           .put_in_move = opt.put_in_move, .debug_bugs = opt.bugs,
                           .maxvictim_max = opt.maxvictim_max,
                           .victim_adaptive = opt.victim_adaptive,
                           .budget = opt.budget };
        fhc_env_t env = { .arg = &nodes[i], .pin = env_pin, .unpin = env_unpin,
                          .allowed = env_allowed, .send = env_send,
                          .put_in_move = env_put_in_move, .log = env_log };
        char why[128];
        int rc = fhc_create(&p, &env, &nodes[i].c, why, sizeof why);
        if (rc < 0) {
            fprintf(stderr, "fhsim: fhc_create: %s\n", why);
            return 2;
        }
    }
    opt.region_max = fhc_region_max(nodes[0].c);
    if (pat_on) {
        char why[128];
        pat = (fhsim_pattern_t){
            .kind = fhsim_pattern_kind(opt.pattern), .nodes = opt.nodes, .k = opt.k,
            .period = opt.period, .zipf = opt.zipf, .seg = opt.seg, .bucket = opt.bucket,
            .ws = opt.ws ? opt.ws : 8 * opt.region_max < opt.seg ? 8 * opt.region_max
                                                                  : opt.seg };
        if (fhsim_pattern_init(&pat, why, sizeof why) < 0) {
            fprintf(stderr, "fhsim: --pattern %s: %s\n", opt.pattern, why);
            return 2;
        }
    }
    oracle = fhsim_oracle_create(opt.nodes, opt.M / opt.bucket ? opt.M / opt.bucket : 1);
    if (!oracle)
        fail("out of memory");
    if (!opt.quiet)
        printf("fhsim: nodes=%u steps=%" PRIu64 " seed=%" PRIu64 " pattern=%s B=%zu "
               "R=%zu F=%zu M=%zu MAXVICTIM=%zu put_in_move=%zu seg=%zu\n",
               opt.nodes, opt.steps, opt.seed, opt.pattern, opt.bucket,
               opt.region_max, fhc_F(nodes[0].c), opt.M, opt.maxvictim,
               opt.put_in_move, opt.seg);
    if (!opt.quiet && pat_on)
        printf("fhsim: pattern %s: k=%u zipf=%.2f period=%" PRIu64 " ws=%zu "
               "(F=%zu, M/k=%zu)\n", opt.pattern, pat.k, pat.zipf, pat.period, pat.ws,
               fhc_F(nodes[0].c), opt.M / (pat.k ? pat.k : 1));

    /* Run, then drain: no new work until everything in flight finished. */
    uint64_t end = opt.steps;
    for (now = 0; now < end || live_n || heap_n; now++) {
        while (heap_n && heap[0].t <= now)
            handle(ev_pop());
        if (now < end) {
            for (unsigned r = 0; r < opt.rate; r++)
                start_op();
            if (opt.local_rate && permille(opt.local_rate))
                start_local_pin();
            if (opt.free_rate && permille(opt.free_rate))
                free_memory();
        }
        check_touched();
        if (now % opt.check_every == 0)
            check_all();
        else if (opt.check_sample && now % opt.check_sample == 0)
            check_one((uint32_t)rnd_below(opt.nodes));
        check_progress();
    }
    check_all();
    check_quiescent();
    for (uint32_t i = 0; i < opt.nodes; i++)
        if (fhc_revokes_pending(nodes[i].c))
            fail("quiescent: rank %u still waits for %u revoke acks", i,
                 fhc_revokes_pending(nodes[i].c));

    fhsim_totals_t tot;
    fhsim_totals(&tot);
    fhsim_oracle_destroy(oracle);
    fhsim_pattern_fini(&pat);
    for (uint32_t i = 0; i < opt.nodes; i++)
        fhc_destroy(nodes[i].c);
    for (uint32_t i = 0; i < opt.nodes; i++)
        if (nodes[i].pinned)
            fail("rank %u still pins %zu bytes after fhc_destroy", i, nodes[i].pinned);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    fhsim_report(&tot, secs);
    free(nodes);
    free(flow_last);
    free(rflow_last);
    free(heap);
    free(mrs);
    free(touched);
    fhc_map_fini(&pinned_buckets);
    return 0;
}
