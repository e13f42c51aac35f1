/*
 * bench_barrier.c -- `barrier`: how long fh_barrier takes over all ranks.
 *
 * Every rank runs the same loop: a warm-up of it/10 + 2 barriers, then `it`
 * barriers (--iters, default 5000, 500 with --quick), each timed on its
 * own; rank 0 reports the median and p99 of its times in microseconds.  In
 * a loop of back-to-back barriers every rank's time per barrier is the
 * barrier's period, so rank 0's view is the barrier's latency (the same
 * definition as bench/peers/mpi_barrier.c for MPI_Barrier, which
 * run-peers.sh sets against it).  Any number of ranks: run-peers.sh runs
 * it on 2, 4 and 8 ranks of one node with FH_SHM=auto (the node group's
 * barrier rides on the AM rings).  With more ranks than cores the waiting
 * ranks must give up their core (fh_barrier yields, the node path sleeps
 * on its inbox's futex): the numbers then measure that too.
 *
 * CSV columns: op,ranks,iters,median_us,p99_us; one row, op "barrier".
 */
#include <stdlib.h>

#include "fhbench.h"

int fhb_barrier(const fhb_opts_t *o)
{
    const long it = fhb_iters(o, 5000, 500);
    double *t = malloc(sizeof(double) * (size_t)it);
    if (!t)
        fh_abort(1, "fhbench: out of memory");
    FILE *csv = fhb_csv_open(o, "op,ranks,iters,median_us,p99_us");
    for (long i = -it / 10 - 2; i < it; i++) {
        double t0 = fhb_now_ns();
        FHB_TRY(fh_barrier());
        if (i >= 0)
            t[i] = (fhb_now_ns() - t0) / 1e3;
    }
    if (fh_rank() == 0) {
        double m = fhb_quantile(t, (size_t)it, 0.5), p = fhb_quantile(t, (size_t)it, 0.99);
        fhb_csv_row(csv, "barrier,%d,%ld,%.3f,%.3f", fh_nranks(), it, m, p);
        printf("fh_barrier over %d ranks: median %.3f us, p99 %.3f us (%ld barriers)\n",
               fh_nranks(), m, p, it);
    }
    fhb_csv_close(csv);
    free(t);
    return 0;
}
