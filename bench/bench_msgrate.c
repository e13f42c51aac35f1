/*
 * bench_msgrate.c -- `msgrate`: 2-byte puts from T threads per rank.
 *
 * For T = 1 .. --threads (default 2 x cores) and for batching off (blocking
 * fh_put) and on (fh_put_nbi, fh_wait_nbi every BATCH puts), rank 0 starts
 * T threads; each thread puts 2 bytes to its own slot of rank 1's segment,
 * MSGS times.  Rank 1 is a passive target: it polls (fh_poll, yielding the
 * core between polls, since tcp needs the target's progress) until rank 0
 * is done.  Each thread binds its path and warms up before a pthread
 * barrier, then times itself for 0.3 s (--quick) or 2 s, stopping at a
 * batch boundary (or after --iters puts); the rate is the messages all threads sent over
 * (last end - first start).  On a 2-core machine rank 1's polling shares
 * the cores with rank 0's threads, and both libfabric providers here need
 * it: tcp;ofi_rxm progresses RMA at the target, and shm's target copies
 * the data (its progress serves the command queue).  So one sender thread
 * and the target already fill 2 cores; the scaling this test is about
 * needs a NIC that completes RMA without the target's CPU (verbs).
 *
 * Independent vs shared paths is FH_PATHS (fixed at fh_init), so
 * bench/run-all.sh runs this test once per FH_PATHS value.  The header's
 * paths= line says which one this CSV is.
 *
 * CSV columns: paths,threads,batching,msgs,seconds,msgs_s
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fhbench.h"

#define BATCH 64
#define SLOT 64

typedef struct mr_thread {
    pthread_t tid;
    int index, batching;
    long msgs;             /* at most this many ... */
    double budget_ns;      /* ... or until this much time has passed */
    long done;             /* what was sent */
    char *remote;          /* this thread's slot on the peer */
    const char *src;
    pthread_barrier_t *start;
    double t0, t1;
} mr_thread_t;

static void *mr_main(void *arg)
{
    mr_thread_t *t = arg;
    int peer = 1;
    for (int i = 0; i < 8; i++)           /* binds the path, warms it */
        FHB_TRY(fh_put(peer, t->remote, t->src, 2));
    pthread_barrier_wait(t->start);
    t->t0 = fhb_now_ns();
    double end = t->t0 + t->budget_ns;
    long i = 0;
    while (i < t->msgs) {
        for (long k = 0; k < BATCH && i < t->msgs; k++, i++)
            FHB_TRY(t->batching ? fh_put_nbi(peer, t->remote, t->src, 2)
                                : fh_put(peer, t->remote, t->src, 2));
        if (t->batching)
            FHB_TRY(fh_wait_nbi());
        if (fhb_now_ns() > end)
            break;
    }
    t->done = i;
    t->t1 = fhb_now_ns();
    return NULL;
}

int fhb_msgrate(const fhb_opts_t *o)
{
    int T = (int)o->threads;
    fh_seg_t seg;
    void *mine, *remote;
    FHB_TRY(fh_segment_create((size_t)(T + 1) * SLOT, &seg, &mine));
    FHB_TRY(fh_segment_query(seg, 1, &remote, NULL));
    char *src = (char *)mine + (size_t)T * SLOT;   /* registered source */
    memset(src, 0x2a, SLOT);
    FILE *csv = fhb_csv_open(o, "paths,threads,batching,msgs,seconds,msgs_s");
    const char *paths = fhb_paths();
    if (fh_rank() == 0)
        printf("%8s %9s %10s %12s\n", "threads", "batching", "msgs", "msgs/s");
    mr_thread_t *th = calloc((size_t)T, sizeof *th);
    if (!th)
        fh_abort(1, "fhbench: out of memory");
    for (int batching = 0; batching <= 1; batching++) {
        for (int nt = 1; nt <= T; nt++) {
            /* The time budget ends the run; the count only caps it (--iters). */
            long msgs = fhb_iters(o, 1L << 40, 1L << 40);
            FHB_TRY(fh_barrier());
            if (fh_rank() != 0) {
                fhb_park(FHB_PARK_YIELD);
                FHB_TRY(fh_barrier());
                continue;
            }
            pthread_barrier_t start;
            pthread_barrier_init(&start, NULL, (unsigned)nt);
            for (int i = 0; i < nt; i++) {
                th[i] = (mr_thread_t){.index = i, .batching = batching, .msgs = msgs,
                                      .budget_ns = o->quick ? 0.3e9 : 2e9,
                                      .remote = (char *)remote + (size_t)i * SLOT,
                                      .src = src, .start = &start};
                if (pthread_create(&th[i].tid, NULL, mr_main, &th[i]) != 0)
                    fh_abort(1, "fhbench: pthread_create failed");
            }
            double first = 0, last = 0;
            long sent = 0;
            for (int i = 0; i < nt; i++) {
                pthread_join(th[i].tid, NULL);
                sent += th[i].done;
                if (i == 0 || th[i].t0 < first)
                    first = th[i].t0;
                if (i == 0 || th[i].t1 > last)
                    last = th[i].t1;
            }
            pthread_barrier_destroy(&start);
            fhb_unpark();
            FHB_TRY(fh_barrier());
            double s = (last - first) / 1e9;
            double rate = (double)sent / s;
            fhb_csv_row(csv, "%s,%d,%s,%ld,%.6f,%.1f", paths, nt, batching ? "nbi" : "blocking",
                        sent, s, rate);
            printf("%8d %9s %10ld %12.0f\n", nt, batching ? "nbi" : "blocking", sent, rate);
            fflush(stdout);
        }
    }
    free(th);
    fhb_csv_close(csv);
    FHB_TRY(fh_barrier());
    FHB_TRY(fh_segment_destroy(seg));
    return 0;
}
