/*
 * mpi_rma_lat.c -- MPI-3 RMA latency peer for bench/peers/run-peers.sh.
 *
 * Passive target, the way a PGAS layer on MPI (OpenCoarrays, OSHMPI) does
 * it: one window from MPI_Win_allocate, MPI_Win_lock_all once, then rank 0
 * times MPI_Put + MPI_Win_flush (remote completion: the same contract as a
 * blocking fh_put) and MPI_Get + MPI_Win_flush, per size, one by one.
 * Writes the columns of fhbench's latency CSV (op,size,iters,median_us,
 * p99_us,mb_s,msgs_s) to stdout, so the scripts pair rows by (op, size).
 *
 * Build: mpicc -O2 -o mpi_rma_lat mpi_rma_lat.c
 * Run:   mpirun -np 2 ./mpi_rma_lat [iters] [max_size]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

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
    int iters = argc > 1 ? atoi(argv[1]) : 1000;
    long maxsz = argc > 2 ? atol(argv[2]) : 65536;
    if (np < 2 || iters < 1 || maxsz < 1) {
        if (me == 0)
            fprintf(stderr, "usage: mpirun -np 2 mpi_rma_lat [iters] [max_size]\n");
        MPI_Finalize();
        return 2;
    }
    char *base;
    MPI_Win win;
    MPI_Win_allocate((MPI_Aint)maxsz, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    char *buf = malloc((size_t)maxsz);
    double *t = malloc(sizeof(double) * (size_t)iters);
    memset(buf, 0x5a, (size_t)maxsz);
    MPI_Win_lock_all(0, win);
    if (me == 0) {
        printf("op,size,iters,median_us,p99_us,mb_s,msgs_s\n");
        for (long n = 1; n <= maxsz; n *= 2) {
            for (int op = 0; op < 2; op++) {
                for (int i = -iters / 10 - 2; i < iters; i++) {
                    double t0 = MPI_Wtime();
                    if (op == 0)
                        MPI_Put(buf, (int)n, MPI_BYTE, 1, 0, (int)n, MPI_BYTE, win);
                    else
                        MPI_Get(buf, (int)n, MPI_BYTE, 1, 0, (int)n, MPI_BYTE, win);
                    MPI_Win_flush(1, win);
                    if (i >= 0)
                        t[i] = (MPI_Wtime() - t0) * 1e6;
                }
                printf("%s,%ld,%d,%.3f,%.3f,,\n", op == 0 ? "put" : "get", n, iters,
                       q(t, iters, 0.5), q(t, iters, 0.99));
                fflush(stdout);
            }
        }
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    free(buf);
    free(t);
    MPI_Finalize();
    return 0;
}
