/*
 * fhrankcost.c -- what one rank of a job costs: resident memory, file
 * descriptors, threads, /dev/shm files and the time fh_init takes, measured
 * in every rank of an otherwise empty job and printed by rank 0 as one line
 * (the job shape first, then per-rank means and maxima).  Public API only.
 *
 *   fhrun -n 4 bench/fhrankcost [T]        # one line; T threads per rank
 *   bench/rankcost.sh                      # the table of docs/design.md
 *
 * T (default 1): the main thread and T-1 more each make one runtime call
 * (fh_poll), so each gets its path (with lazy paths the first thread uses
 * the service path, the others a thread path made then); the extra
 * threads stay alive until the measurement is over.
 *
 * Memory is read from /proc/self/status after fh_init, the threads' first
 * calls and a barrier (nothing transferred): VmRSS, split into RssAnon,
 * RssFile and RssShmem.  Threads are the process's tasks (the runtime
 * starts none for tcp; libfabric and the memory monitor may); file
 * descriptors are the entries of /proc/self/fd, minus those open before
 * fh_init.  /dev/shm counts the files named fh_<pid>_* (the shm provider's
 * endpoints; node segments are memfds, counted in RssShmem).
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <firehose.h>

enum { F_RSS, F_ANON, F_FILE, F_SHMEM, F_FDS, F_THREADS, F_SHMF, F_SHMB, F_INIT, NF };

static long status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    if (f != NULL)
        fclose(f);
    return v;
}

static long count_dir(const char *path)
{
    DIR *d = opendir(path);
    long n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    return n - 1;    /* opendir's own descriptor, or nothing */
}

static void dev_shm(double *files, double *bytes)
{
    char pre[32];
    snprintf(pre, sizeof pre, "fh_%d_", (int)getpid());
    DIR *d = opendir("/dev/shm");
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        char p[300];
        struct stat st;
        if (strncmp(e->d_name, pre, strlen(pre)) != 0)
            continue;
        snprintf(p, sizeof p, "/dev/shm/%s", e->d_name);
        *files += 1;
        if (stat(p, &st) == 0)
            *bytes += (double)st.st_blocks * 512;
    }
    if (d != NULL)
        closedir(d);
}

static atomic_int called, leave;

static void *extra_thread(void *arg)
{
    (void)arg;
    fh_poll();                       /* binds: this thread's path */
    atomic_fetch_add(&called, 1);
    while (!atomic_load(&leave))
        usleep(1000);
    return NULL;
}

int main(int argc, char **argv)
{
    long fds0 = count_dir("/proc/self/fd");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (fh_init(&argc, &argv) != FH_OK) {
        fprintf(stderr, "fhrankcost: fh_init: %s\n", fh_last_error());
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int T = argc > 1 ? atoi(argv[1]) : 1;
    T = T < 1 ? 1 : T > 64 ? 64 : T;
    pthread_t th[64];
    fh_poll();
    for (int i = 1; i < T; i++)
        if (pthread_create(&th[i], NULL, extra_thread, NULL) != 0)
            return 1;
    while (atomic_load(&called) < T - 1)
        fh_poll();
    if (fh_barrier() != FH_OK)
        return 1;
    double v[NF] = {0};
    v[F_RSS] = (double)status_kb("VmRSS");
    v[F_ANON] = (double)status_kb("RssAnon");
    v[F_FILE] = (double)status_kb("RssFile");
    v[F_SHMEM] = (double)status_kb("RssShmem");
    v[F_THREADS] = (double)status_kb("Threads");
    v[F_FDS] = (double)(count_dir("/proc/self/fd") - fds0);
    dev_shm(&v[F_SHMF], &v[F_SHMB]);
    v[F_INIT] = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;

    int n = fh_nranks();
    double *all = malloc(sizeof v * (size_t)n);
    if (all == NULL || fh_allgather(v, all, sizeof v) != FH_OK)
        return 1;
    if (fh_rank() == 0) {
        double mean[NF] = {0}, max[NF] = {0};
        for (int r = 0; r < n; r++)
            for (int i = 0; i < NF; i++) {
                double x = all[r * NF + i];
                mean[i] += x / n;
                max[i] = x > max[i] ? x : max[i];
            }
        printf("ranks %d threads_calling %d rss_mib %.1f anon_mib %.1f file_mib %.1f shmem_mib %.1f "
               "rss_max_mib %.1f fds %.0f threads %.0f devshm_files %.0f devshm_kib %.0f "
               "init_s %.3f init_max_s %.3f\n", n, T, mean[F_RSS] / 1024, mean[F_ANON] / 1024,
               mean[F_FILE] / 1024, mean[F_SHMEM] / 1024, max[F_RSS] / 1024, mean[F_FDS],
               mean[F_THREADS], mean[F_SHMF], mean[F_SHMB] / 1024, mean[F_INIT], max[F_INIT]);
    }
    free(all);
    atomic_store(&leave, 1);
    for (int i = 1; i < T; i++)
        pthread_join(th[i], NULL);
    return fh_finalize() == FH_OK ? 0 : 1;
}
