/*
 * fhneighbour.c -- how long one thread's small blocking put and get take
 * while another thread of the rank streams large NBI puts on the same path
 * (issue 29, class 9: a small put waited behind a streaming neighbour).
 * Public API only.
 *
 *   FH_MAX_THREADS=1 fhrun -n 2 bench/fhneighbour [--samples N] [--total MiB]
 *                         [--piece KiB] [--rounds R] [--gap-us U]
 *
 * FH_MAX_THREADS=1 (or FH_PATHS=shared) puts both threads of rank 0 on one
 * path.  Rank 0, in this order:
 *   alone      thread B (the main thread) times N blocking 8 B fh_put and
 *              then N 8 B fh_get to rank 1, U us apart;
 *   bulk       thread A puts --total MiB to rank 1 in --piece KiB fh_put_nbi
 *              pieces and fh_wait_nbi, R times: MB/s of each round, median;
 *   streaming  thread A streams the same rounds without end while B takes
 *              the samples of "alone" again; then A stops.
 * Rank 1 polls (fh_poll) meanwhile: it is the target of everything.
 * Rank 0 prints one line per figure: name, median and highest (us), or
 * the bulk MB/s (median over rounds; "bulk_during" is A's rate while B
 * sampled).  Only rank 0 measures; ranks beyond 1 only take part in the
 * barriers.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <firehose.h>

static size_t total = (size_t)64 << 20, piece = (size_t)1 << 20;
static int samples = 200, rounds = 5;
static long gap_us = 500;
static char *remote_bulk, *remote_small, *src;
static atomic_int stop, streaming, round_done;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "fhneighbour: %s: %s (%s)\n", what, fh_strerror(rc), fh_last_error());
    exit(1);
}

/* One round of thread A: total bytes in pieces, then its NBI wait.
 * Returns MB/s. */
static double bulk_round(void)
{
    double t0 = now_us();
    for (size_t off = 0; off < total; off += piece) {
        int rc = fh_put_nbi(1, remote_bulk + off, src + off, piece);
        if (rc != FH_OK)
            die("fh_put_nbi", rc);
    }
    int rc = fh_wait_nbi();
    if (rc != FH_OK)
        die("fh_wait_nbi", rc);
    return (double)total / (now_us() - t0);
}

typedef struct {
    double rate[1024];
    int n;
} bulk_out_t;

/* Thread A: `rounds` rounds, or rounds until `stop` while streaming. */
static void *bulk_thread(void *arg)
{
    bulk_out_t *o = arg;
    o->n = 0;
    while (atomic_load(&streaming) ? !atomic_load(&stop) : o->n < rounds) {
        double r = bulk_round();
        if (o->n < 1024)
            o->rate[o->n++] = r;
        atomic_store(&round_done, 1);
    }
    return NULL;
}

/* Thread B's samples: N blocking 8 B puts, then N gets. */
static void small_samples(const char *phase)
{
    double *v = malloc(sizeof *v * (size_t)samples);
    uint64_t word = 42;
    for (int op = 0; op < 2; op++) {
        for (int i = 0; i < samples; i++) {
            usleep((useconds_t)gap_us);
            double t0 = now_us();
            int rc = op == 0 ? fh_put(1, remote_small, &word, sizeof word)
                             : fh_get(&word, 1, remote_small, sizeof word);
            v[i] = now_us() - t0;
            if (rc != FH_OK)
                die(op == 0 ? "fh_put" : "fh_get", rc);
        }
        double med = median(v, samples);
        printf("%s_%s_8B_us %.1f %.1f\n", op == 0 ? "put" : "get", phase, med,
               v[samples - 1]);
    }
    free(v);
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--samples"))
            samples = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--total"))
            total = (size_t)atol(argv[i + 1]) << 20;
        else if (!strcmp(argv[i], "--piece"))
            piece = (size_t)atol(argv[i + 1]) << 10;
        else if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--gap-us"))
            gap_us = atol(argv[i + 1]);
    }
    if (samples < 1 || rounds < 1 || rounds > 1024 || piece == 0 || total < piece ||
        total % piece != 0) {
        fprintf(stderr, "fhneighbour: bad arguments\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc = fh_init(&argc, &argv);
    if (rc != FH_OK)
        die("fh_init", rc);
    if (fh_nranks() < 2) {
        fprintf(stderr, "fhneighbour: needs 2 ranks\n");
        return 2;
    }
    fh_seg_t seg;
    char *base;
    if ((rc = fh_segment_create(2 * total, &seg, (void **)&base)) != FH_OK)
        die("fh_segment_create", rc);
    if ((rc = fh_segment_query(seg, 1, (void **)&remote_bulk, NULL)) != FH_OK)
        die("fh_segment_query", rc);
    remote_small = remote_bulk + total;
    if (fh_rank() == 0) {
        src = base;       /* our own piece: registered under every strategy */
        memset(src, 7, total);
        const char *names[] = {"FH_SHM", "FH_PATHS", "FH_MAX_THREADS", "FH_REG_STRATEGY"};
        printf("# fhneighbour:");
        for (size_t i = 0; i < sizeof names / sizeof *names; i++)
            printf(" %s=%s", names[i], getenv(names[i]) ? getenv(names[i]) : "(default)");
        printf(" total %zu MiB pieces %zu KiB\n", total >> 20, piece >> 10);
        small_samples("alone");
        bulk_out_t alone, during;
        pthread_t a;
        pthread_create(&a, NULL, bulk_thread, &alone);
        pthread_join(a, NULL);
        printf("bulk_alone_MBps %.0f\n", median(alone.rate, alone.n));
        atomic_store(&streaming, 1);
        pthread_create(&a, NULL, bulk_thread, &during);
        atomic_store(&round_done, 0);
        while (!atomic_load(&round_done))   /* A streams: its first round is over */
            usleep(1000);
        small_samples("streaming");
        atomic_store(&stop, 1);
        pthread_join(a, NULL);
        printf("bulk_during_MBps %.0f\n", median(during.rate, during.n));
        fflush(stdout);
    }
    /* Rank 1 polls (fh_poll: its service path, the target of everything)
     * until rank 0's last put lands; the others wait in the barrier. */
    volatile uint64_t *done_word = (volatile uint64_t *)(base + total + 8);
    if (fh_rank() == 0) {
        uint64_t one = 1;
        if ((rc = fh_put(1, remote_small + 8, &one, sizeof one)) != FH_OK)
            die("fh_put", rc);
    } else if (fh_rank() == 1) {
        while (*done_word == 0)
            fh_poll();
    }
    if ((rc = fh_barrier()) != FH_OK)
        die("fh_barrier", rc);
    fh_segment_destroy(seg);
    fh_finalize();
    return 0;
}
