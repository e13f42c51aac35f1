/*
 * mpi_barrier.c -- MPI_Barrier peer for bench/peers/run-peers.sh.
 *
 * The same loop as `fhbench barrier` (bench/bench_barrier.c): every rank
 * runs a warm-up of iters/10 + 2 barriers, then `iters` MPI_Barrier calls
 * on MPI_COMM_WORLD, each timed on its own; rank 0 writes the median and
 * p99 of its times in microseconds, in fhbench barrier's CSV columns
 * (op,ranks,iters,median_us,p99_us), to stdout.
 *
 * Build: mpicc -O2 -o mpi_barrier mpi_barrier.c
 * Run:   mpirun -np 4 ./mpi_barrier [iters]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v and returns its p-quantile (the rule of fhb_quantile). */
static double q(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int iters = argc > 1 ? atoi(argv[1]) : 5000;
    if (iters < 1) {
        if (me == 0)
            fprintf(stderr, "usage: mpirun -np N mpi_barrier [iters]\n");
        MPI_Finalize();
        return 2;
    }
    double *t = malloc(sizeof(double) * (size_t)iters);
    if (!t)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = -iters / 10 - 2; i < iters; i++) {
        double t0 = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
        if (i >= 0)
            t[i] = (MPI_Wtime() - t0) * 1e6;
    }
    if (me == 0) {
        printf("op,ranks,iters,median_us,p99_us\n");
        printf("barrier,%d,%d,%.3f,%.3f\n", np, iters, q(t, iters, 0.5), q(t, iters, 0.99));
        fflush(stdout);
    }
    free(t);
    MPI_Finalize();
    return 0;
}
