/*
 * place.c -- where a rank runs: FH_BIND.
 *
 * Two ranks that wait for each other by polling shared memory cost a
 * context switch per hand-off when the scheduler puts both on one CPU: on
 * this kind of 2-core machine with other work running, an unbound 2-rank
 * fh_barrier took 0.4 us in some runs and 5.5 us in others (both ranks on
 * one core), 0.35-0.42 us in every run once each rank had a core of its
 * own.  Open MPI binds for the same reason.
 *
 * FH_BIND=auto (the default): when the job's ranks on this host all
 * started with the same CPU affinity mask (nobody placed them: fhrun, or
 * a launcher that does not bind) and the mask holds at least one CPU per
 * rank, the mask's CPUs are ordered by package, core and hardware thread
 * and cut into as many contiguous slices as there are ranks here; the
 * rank with host index i (rank order) keeps slice i, so slices hold whole
 * cores where they can, and a rank's own threads share its slice.  Every
 * thread of the process is moved (those the runtime and the application
 * started before fh_init included); threads created later inherit it.
 * Ranks that started with different masks (mpirun --bind-to, srun
 * --cpu-bind, taskset per rank), or more ranks than CPUs (the wait policy,
 * fh_wait_init, handles that), are left where they are.  FH_BIND=off:
 * never.  FH_VERBOSE=1 says what was chosen.
 */
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

typedef struct cpu_key {
    int cpu;
    long package, core;
} cpu_key_t;

static long topo(int cpu, const char *what)
{
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, what);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f != NULL) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static int by_core(const void *a, const void *b)
{
    const cpu_key_t *x = a, *y = b;
    if (x->package != y->package)
        return x->package < y->package ? -1 : 1;
    if (x->core != y->core)
        return x->core < y->core ? -1 : 1;
    return (x->cpu > y->cpu) - (x->cpu < y->cpu);
}

/* Moves every thread of this process to set; the number moved, or -1 if
 * the calling thread could not be. */
static int move_threads(const cpu_set_t *set)
{
    if (sched_setaffinity(0, sizeof *set, set) != 0)
        return -1;
    int moved = 1;
    pid_t self = (pid_t)syscall(SYS_gettid);
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return moved;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid > 0 && tid != self && sched_setaffinity(tid, sizeof *set, set) == 0)
            moved++;
    }
    closedir(d);
    return moved;
}

void fh_place_init(fh_rt_t *rt)
{
    if (rt->cfg.bind == FH_BIND_OFF || rt->host_ranks < 2)
        return;
    bool same = false;
    int index = fh_peer_host_index(rt, &same);
    cpu_set_t mask;
    if (!same || sched_getaffinity(0, sizeof mask, &mask) != 0) {
        fh_log_verbose(1, "FH_BIND=auto: this host's ranks were placed by the launcher; "
                       "left there");
        return;
    }
    int ncpu = CPU_COUNT(&mask);
    if (ncpu < rt->host_ranks) {
        fh_log_verbose(1, "FH_BIND=auto: %d ranks here on %d CPUs: not bound",
                       rt->host_ranks, ncpu);
        return;
    }
    cpu_key_t *keys = malloc(sizeof *keys * (size_t)ncpu);
    if (keys == NULL)
        return;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < ncpu; c++)
        if (CPU_ISSET(c, &mask))
            keys[n++] = (cpu_key_t){c, topo(c, "physical_package_id"), topo(c, "core_id")};
    assert(n == ncpu);
    qsort(keys, (size_t)n, sizeof *keys, by_core);
    /* Slice index of host_ranks: [index * n / H, (index + 1) * n / H). */
    long lo = (long)index * n / rt->host_ranks, hi = (long)(index + 1) * n / rt->host_ranks;
    assert(lo < hi && hi <= n);
    cpu_set_t slice;
    CPU_ZERO(&slice);
    char list[256];
    size_t off = 0;
    for (long i = lo; i < hi; i++) {
        CPU_SET(keys[i].cpu, &slice);
        if (off < sizeof list - 16)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", i > lo ? "," : "",
                                    keys[i].cpu);
    }
    free(keys);
    int moved = move_threads(&slice);
    if (moved < 0)
        fh_log_verbose(1, "FH_BIND=auto: cannot bind to CPUs %s; not bound", list);
    else
        fh_log_verbose(1, "FH_BIND=auto: bound to CPU%s %s (%d ranks here share %d CPUs; "
                       "%d thread%s moved)", hi - lo > 1 ? "s" : "", list, rt->host_ranks,
                       ncpu, moved, moved == 1 ? "" : "s");
}
