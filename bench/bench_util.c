/*
 * bench_util.c -- clock, percentiles, the CSV writer, the run header and
 * the per-size table that latency and raw share (fhb_size_table).
 *
 * The header is the one place fhbench reads runtime internals
 * (firehose/internal.h: the conduit's name and the effective FH_*
 * configuration), so that a CSV says exactly what produced it.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "fhbench.h"
#include "firehose/internal.h"
#include "conduits/ofi/ofi_config.h"
#include "firehose/reg/firehose_internal.h"

#ifndef FHB_SRCDIR
#define FHB_SRCDIR "."
#endif

long fhb_iters(const fhb_opts_t *o, long full, long q)
{
    if (o->iters > 0)
        return o->iters;
    return o->quick ? q : full;
}

size_t fhb_top_size(const fhb_opts_t *o)
{
    return o->max_size && o->max_size < FHB_MAX_SIZE ? o->max_size : FHB_MAX_SIZE;
}

long fhb_iters_for(long base, size_t n, int quick)
{
    long it = base;
    if (n > 65536)
        it = (long)((double)base * 65536.0 / (double)n);
    long min = quick ? 5 : 20;
    return it < min ? min : it;
}

double fhb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double fhb_quantile(double *v, size_t n, double p)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i >= n ? n - 1 : i];
}

void fhb_size_table(const fhb_opts_t *o, FILE *csv, void *ctx, fhb_lat_fn lat,
                    fhb_flood_fn flood)
{
    long base = fhb_iters(o, 2000, 100);
    size_t top = fhb_top_size(o);
    printf("%9s %8s %10s %10s %10s %10s %12s %12s\n", "size", "iters", "put_med", "put_p99",
           "get_med", "get_p99", "putflood_MB/s", "getflood_MB/s");
    for (size_t n = 1; n <= top; n *= 2) {
        long it = fhb_iters_for(base, n, o->quick);
        double pm, pp, gm, gp;
        lat(ctx, 1, n, it, &pm, &pp);
        lat(ctx, 0, n, it, &gm, &gp);
        fhb_csv_row(csv, "put,%zu,%ld,%.3f,%.3f,,", n, it, pm, pp);
        fhb_csv_row(csv, "get,%zu,%ld,%.3f,%.3f,,", n, it, gm, gp);
        long fit = 2 * it;
        double ps = flood(ctx, 1, n, fit), gs = flood(ctx, 0, n, fit);
        double pbw = (double)n * (double)fit / ps / 1e6, gbw = (double)n * (double)fit / gs / 1e6;
        fhb_csv_row(csv, "put_nb_flood,%zu,%ld,,,%.3f,%.1f", n, fit, pbw, (double)fit / ps);
        fhb_csv_row(csv, "get_nb_flood,%zu,%ld,,,%.3f,%.1f", n, fit, gbw, (double)fit / gs);
        printf("%9zu %8ld %10.2f %10.2f %10.2f %10.2f %12.1f %12.1f\n", n, it, pm, pp, gm, gp,
               pbw, gbw);
        fflush(stdout);
    }
}

/* The i-th '|'-separated word of choices, into buf. */
static const char *choice(const char *choices, int i, char *buf, size_t len)
{
    const char *s = choices;
    for (; i > 0 && s; i--) {
        s = strchr(s, '|');
        if (s)
            s++;
    }
    if (!s)
        return "?";
    size_t n = strcspn(s, "|");
    if (n >= len)
        n = len - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

static const fh_cfg_entry_t *cfg_entry(const char *name)
{
    for (size_t i = 0; i < fh_config_table_len; i++)
        if (strcmp(fh_config_table[i].name, name) == 0)
            return &fh_config_table[i];
    return NULL;
}

const char *fhb_strategy(void)
{
    static char buf[64];
    const fh_cfg_entry_t *e = cfg_entry("FH_REG_STRATEGY");
    if (!fh_rt || !e || !e->choices)
        return "?";
    return choice(e->choices, fh_rt->cfg.reg_strategy, buf, sizeof buf);
}

const char *fhb_paths(void)
{
    static char buf[32];
    const fh_cfg_entry_t *e = cfg_entry("FH_PATHS");
    if (!fh_rt || !e || !e->choices)
        return "?";
    return choice(e->choices, fh_rt->cfg.paths, buf, sizeof buf);
}

size_t fhb_firehose_m(void)
{
    return fh_rt ? fh_reg_m(&fh_rt->core) : 0;
}

size_t fhb_bucket(void)
{
    return fh_rt ? fh_rt->cfg.bucket_size : 0;
}

static void git_rev(char *buf, size_t len)
{
    const char *env = getenv("FHBENCH_GIT_REV");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    snprintf(buf, len, "unknown");
    FILE *p = popen("git -C '" FHB_SRCDIR "' describe --always --dirty 2>/dev/null", "r");
    if (!p)
        return;
    if (fgets(buf, (int)len, p) == NULL)
        snprintf(buf, len, "unknown");
    buf[strcspn(buf, "\n")] = '\0';
    pclose(p);
}

/* fhbench.h */
bool fhb_ofi_provider_taken(char *buf, size_t len)
{
    return len >= 64 && sscanf(fh_rt->limits.description, "ofi %63s", buf) == 1;
}

/* What a CSV calls the provider: the one the ofi conduit took (else
 * FH_OFI_PROVIDER) on the ofi conduit, "ibv-<device>" on the ibv conduit
 * (the device from the conduit's description, "ibv rxe0 port 1 (RoCE)"),
 * else "-". */
static const char *provider(const char *conduit, char *buf, size_t len)
{
    if (strcmp(conduit, "ofi") == 0) {
        if (fhb_ofi_provider_taken(buf, len))
            return buf;
        const ofi_settings_t *os = fh_conduit_settings_of(fh_rt, &fh_ofi_settings);
        return os->provider ? os->provider : "?";
    }
    if (strcmp(conduit, "ibv") == 0) {
        char dev[64];
        if (sscanf(fh_rt->limits.description, "ibv %63s", dev) == 1)
            snprintf(buf, len, "ibv-%s", dev);
        else
            snprintf(buf, len, "ibv");
        return buf;
    }
    return "-";
}

static void header(FILE *f, const fhb_opts_t *o)
{
    char rev[64], pbuf[80];   /* pbuf: >= 64, provider() */
    git_rev(rev, sizeof rev);
    const char *conduit = fh_rt && fh_rt->cops ? fh_rt->cops->name : "?";
    fprintf(f, "# fhbench=%s\n", o->test);
    fprintf(f, "# conduit=%s\n", conduit);
    fprintf(f, "# provider=%s\n", fh_rt ? provider(conduit, pbuf, sizeof pbuf) : "?");
    fprintf(f, "# strategy=%s\n", fhb_strategy());
    fprintf(f, "# M=%zu\n", fhb_firehose_m());
    fprintf(f, "# bucket=%zu\n", fhb_bucket());
    fprintf(f, "# threads=%ld\n", o->threads);
    fprintf(f, "# paths=%s\n", fhb_paths());
    fprintf(f, "# ranks=%d\n", fh_nranks());
    fprintf(f, "# cores=%ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    fprintf(f, "# git=%s\n", rev);
    fprintf(f, "# quick=%d\n", o->quick);
    time_t now = time(NULL);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(f, "# date=%s\n", ts);
}

void fhb_print_header(const fhb_opts_t *o)
{
    if (fh_rank() != 0)
        return;
    header(stdout, o);
    fflush(stdout);
}

FILE *fhb_csv_open(const fhb_opts_t *o, const char *columns)
{
    if (!o->csv || fh_rank() != 0)
        return NULL;
    FILE *f = fopen(o->csv, "w");
    if (!f) {
        perror(o->csv);
        fh_abort(1, "fhbench: cannot write the CSV file");
    }
    header(f, o);
    fprintf(f, "%s\n", columns);
    return f;
}

void fhb_csv_row(FILE *f, const char *fmt, ...)
{
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fflush(f);
}

void fhb_csv_close(FILE *f)
{
    if (f)
        fclose(f);
}

void fhb_reg_counts(uint64_t *hits, uint64_t *misses)
{
    fh_peer_stats_t s = FH_PEER_STATS_INIT;
    *hits = *misses = 0;
    if (fh_stats_peer(fh_rank(), &s) == FH_OK) {
        *hits = s.reg_hits;
        *misses = s.reg_misses;
    }
}

/* ---------------------------------------------------------- parking */

#define FHB_AM_UNPARK FH_AM_USER_FIRST

static _Atomic int unparked;

static void h_unpark(fh_token_t tok, void *buf, size_t nbytes, const uint64_t *args,
                     unsigned nargs)
{
    (void)tok; (void)buf; (void)nbytes; (void)args; (void)nargs;
    atomic_store(&unparked, 1);
}

void fhb_park_register(void)
{
    fh_am_register(FHB_AM_UNPARK, h_unpark, "fhbench-unpark");
}

void fhb_park(fhb_park_t how)
{
    while (!atomic_load(&unparked)) {
        fh_poll();
        if (how == FHB_PARK_YIELD)
            sched_yield();
        else if (how == FHB_PARK_SLEEP)
            usleep(500);
    }
    atomic_store(&unparked, 0);
}

void fhb_target_wait(const fhb_opts_t *o)
{
    if (o->target_wait_barrier) {
        FHB_TRY(fh_barrier());
        return;
    }
    if (fh_rank() == 0)
        fhb_unpark();
    else
        fhb_park(FHB_PARK_SPIN);
    FHB_TRY(fh_barrier());
}

void fhb_unpark(void)
{
    for (int r = 0; r < fh_nranks(); r++)
        if (r != fh_rank())
            FHB_TRY(fh_am_request_short(r, FHB_AM_UNPARK, NULL, 0));
}

/* ---- turns (fhbench.h) ---- */
#define TURNS_MAX 8
static sem_t *turn_sem[TURNS_MAX];
static int turn_me = -1, turn_n;

static void turns_abort(int code, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fh_abort(code, msg);
}

void fhb_turns_open(const fhb_opts_t *o)
{
    if (o->turns == NULL || fh_rank() != 0)
        return;
    char name[64];
    int me = -1, n = 0, len = 0;
    if (sscanf(o->turns, "%40[A-Za-z0-9_.-]:%d:%d%n", name, &me, &n, &len) != 3 ||
        o->turns[len] != '\0' || n < 1 || n > TURNS_MAX || me < 0 || me >= n)
        turns_abort(2, "fhbench: --turns wants NAME:I:N with 0 <= I < N <= %d, saw '%s'",
                    TURNS_MAX, o->turns);
    for (int i = 0; i < n; i++) {
        char sn[80];
        snprintf(sn, sizeof sn, "/%s.%d", name, i);
        /* The same initial values whoever creates them first. */
        turn_sem[i] = sem_open(sn, O_CREAT, 0600, i == 0 ? 1u : 0u);
        if (turn_sem[i] == SEM_FAILED)
            turns_abort(1, "fhbench: sem_open %s: %s", sn, strerror(errno));
    }
    turn_me = me;
    turn_n = n;
}

void fhb_turn_begin(void)
{
    if (turn_me < 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 300;
    int rc;
    while ((rc = sem_timedwait(turn_sem[turn_me], &ts)) != 0 && errno == EINTR)
        ;
    if (rc != 0)
        turns_abort(1, "fhbench: job %d of %d waited 300 s for its turn (%s): another job "
                    "died or runs other options", turn_me, turn_n, strerror(errno));
}

void fhb_turn_end(void)
{
    if (turn_me >= 0)
        sem_post(turn_sem[(turn_me + 1) % turn_n]);
}

void fhb_turns_close(void)
{
    for (int i = 0; i < turn_n; i++)
        sem_close(turn_sem[i]);
    turn_me = -1;
    turn_n = 0;
}
