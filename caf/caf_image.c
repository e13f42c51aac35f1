/*
 * caf_image.c -- start and end of a coarray program, image status, errors.
 *
 * Termination (Fortran 2018 5.3.7): an image that executes STOP or reaches
 * the end of the program initiates normal termination: it tells every other
 * image (CAF_H_STATUS), then keeps serving -- barriers in which it takes
 * part passively (caf_sync_serve: the initial team's and its child
 * teams'), RMA and atomics on its memory, which stays valid -- until every
 * image has stopped or failed; then all call
 * fh_finalize together and exit 0.  ERROR STOP ends every image at once
 * through fh_abort with the stop code.  FAIL IMAGE makes this image a
 * "failed image": it stops taking part in anything, and other images see
 * CAF_STAT_FAILED_IMAGE (the process stays until the job ends, since a
 * process that disappears is how firehose detects a dead rank).
 */
#include "caf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>

caf_state_t caf;

static char caf_errbuf[512];

/* libgfortran's FLUSH; NULL flushes every unit.  Before an error
 * termination (fh_abort ends the process with _exit), what the program
 * printed must leave libgfortran's buffers, or a "FAIL ..." line printed
 * just before ERROR STOP is lost. */
extern void _gfortran_flush_i4(int32_t *unit);

static void flush_all(void)
{
    _gfortran_flush_i4(NULL);
    fflush(stdout);
}

void caf_set_errmsg(char *errmsg, size_t len, const char *msg)
{
    if (errmsg == NULL || len == 0)
        return;
    size_t n = strlen(msg);
    if (n > len)
        n = len;
    memcpy(errmsg, msg, n);
    memset(errmsg + n, ' ', len - n);
}

/* This image's index in the current team; during start-up (no team yet)
 * in the initial team, 0 before fh_init. */
static int my_image(void)
{
    return caf.bases ? caf_team_this_image() : caf.nranks ? caf.rank + 1 : 0;
}

void caf_error(int *stat, char *errmsg, size_t errmsg_len, int code,
               const char *stmt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(caf_errbuf, sizeof caf_errbuf, fmt, ap);
    va_end(ap);
    if (stat != NULL) {
        *stat = code != 0 ? code : 1;
        caf_set_errmsg(errmsg, errmsg_len, caf_errbuf);
        return;
    }
    char msg[700];
    snprintf(msg, sizeof msg, "caf: image %d: %s: %s", my_image(), stmt,
             caf_errbuf);
    flush_all();
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    fh_abort(1, msg);
}

void caf_fatal(const char *stmt, const char *fmt, ...)
{
    /* Not caf_errbuf: caf_error formats into it, and formatting a buffer
     * into itself loses the message. */
    char msg[sizeof caf_errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    caf_error(NULL, NULL, 0, 1, stmt, "%s", msg);
    abort(); /* not reached: caf_error without stat does not return */
}

void caf_error_all(const char *stmt, const char *fmt, ...)
{
    char msg[sizeof caf_errbuf], line[sizeof caf_errbuf + 100];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "caf: image %d: %s: %s", my_image(), stmt, msg);
    flush_all();
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    /* The others found it too and print it: no abort ends them first. */
    uint64_t all;
    (void)fh_barrier_or(CAF_BAR_FLAG_RUNNING, &all);
    fh_abort(1, line);
    abort(); /* not reached */
}

/* Ends the image when a connection with another was lost since the last
 * look (caf_internal.h, caf_poll). */
static void check_lost(void)
{
    uint64_t all;
    if (fh_am_lost(-1, &all) != FH_OK || all == caf.lost_seen)
        return;
    for (int r = 0; r < caf.nranks; r++) {
        uint64_t m;
        if (r != caf.rank && fh_am_lost(r, &m) == FH_OK && m > caf.lost_seen)
            caf_fatal("progress", "the connection with image %d was lost: what this "
                      "image waits for from it may never come", r + 1);
    }
    caf.lost_seen = all;
}

void caf_poll(void)
{
    int rc = fh_poll();
    if (rc != FH_OK)
        caf_fatal("progress", "fh_poll: %s", fh_strerror(rc));
    check_lost();
}

void caf_idle(unsigned *spins)
{
    int rc = fh_poll_idle(spins);
    if (rc != FH_OK)
        caf_fatal("progress", "fh_poll_idle: %s", fh_strerror(rc));
    check_lost();
}

int caf_target(int image, int *stat, char *errmsg, size_t errmsg_len,
               const char *stmt, bool stopped_is_error)
{
    int rank = caf_image_rank(image);
    if (rank < 0) {
        caf_error(stat, errmsg, errmsg_len, 1, stmt,
                  "image index %d is out of range [1, %d]", image,
                  caf_team_num_images());
        return -1;
    }
    unsigned char st = caf.status[rank];
    if (st == CAF_IMG_FAILED) {
        caf_error(stat, errmsg, errmsg_len, CAF_STAT_FAILED_IMAGE, stmt,
                  "image %d has failed", image);
        return -1;
    }
    if (st == CAF_IMG_STOPPED && stopped_is_error) {
        caf_error(stat, errmsg, errmsg_len, CAF_STAT_STOPPED_IMAGE, stmt,
                  "image %d has stopped", image);
        return -1;
    }
    return rank;
}

/* ------------------------------------------------------ image status */

void caf_drop(const char *what, int src, const char *why)
{
    uint64_t n = ++caf.ndropped;
    if (n > CAF_DROP_LOG_FIRST && n % CAF_DROP_LOG_EVERY != 0)
        return; /* a flood must not turn into a flood of log lines */
    char from[32];
    if (src >= 0)
        snprintf(from, sizeof from, "image %d", src + 1);
    else
        snprintf(from, sizeof from, "an unknown image");
    char more[48] = "";
    if (n == CAF_DROP_LOG_FIRST)
        snprintf(more, sizeof more, "; logging every %dth from now on",
                 CAF_DROP_LOG_EVERY);
    fprintf(stderr, "caf: image %d: dropped a %s from %s: %s (%llu dropped%s)\n",
            caf.rank + 1, what, from, why, (unsigned long long)n, more);
    fflush(stderr);
}

/* args[0]: CAF_IMG_STOPPED or CAF_IMG_FAILED of the sending image. */
static void status_handler(fh_token_t tok, void *buf, size_t n,
                           const uint64_t *args, unsigned nargs)
{
    caf_am_in_t m = {.src = -1, .buf = buf, .nbytes = n, .args = args,
                     .nargs = nargs};
    fh_token_source(tok, &m.src);
    const caf_job_t job = caf_job();
    caf_status_msg_t sm;
    char why[160];
    if (!caf_wire_status(&job, &m, &sm, why, sizeof why)) {
        caf_drop("status message", m.src, why);
        return;
    }
    if (caf.status[m.src] != CAF_IMG_RUNNING)
        return; /* told once; a repeat changes nothing */
    if (caf.ended == NULL &&
        (caf.ended = calloc((size_t)caf.nranks, sizeof *caf.ended)) == NULL)
        caf_fatal("image status", "out of memory");
    caf.ended[m.src] = sm;
    const unsigned st = sm.status;
    /* The record first: who sees the status finds it (one thread). */
    caf.status[m.src] = (unsigned char)st;
    if (st == CAF_IMG_STOPPED)
        caf.nstopped++;
    else
        caf.nfailed++;
}

/* Marks this image and tells every other one. */
static void announce(unsigned char st)
{
    if (caf.status[caf.rank] != CAF_IMG_RUNNING)
        return;
    caf.status[caf.rank] = st;
    if (st == CAF_IMG_STOPPED)
        caf.nstopped++;
    else
        caf.nfailed++;
    const uint64_t team = caf_team_id();
    uint64_t args[6] = {st, caf_coll_count(0), team, caf_coll_count(team),
                        caf_sync_entered(0), caf_sync_entered(team)};
    for (int r = 0; r < caf.nranks; r++) {
        if (r == caf.rank)
            continue;
        int rc = fh_am_request_short(r, CAF_H_STATUS, args, 6);
        if (rc != FH_OK)
            caf_fatal("STOP", "telling image %d: %s", r + 1, fh_strerror(rc));
    }
}

/* The termination loop: answers barriers, AMs and firehose's requests
 * until every image has stopped or failed.  It gives the core away more
 * and more (yield, then 50 us naps): an image that ends early must not
 * slow down the ones still computing when images outnumber cores. */
static void serve_until_all_ended(void)
{
    unsigned spins = 0;
    bool moved, last = false;
    /* Every image takes part in the last barrier; a barrier that completed
     * means the running images are synchronizing: serve the next at full
     * speed for a while. */
    while (!last || caf.nstopped + caf.nfailed < caf.nranks) {
        last = caf_sync_serve(&moved);
        if (moved)
            spins = 0;
        if (++spins > 10000)
            usleep(50);
        else if (spins > caf.idle_spins)
            sched_yield();
    }
}

/* Normal termination: serve until every image has stopped or failed,
 * then exit with this image's stop code (as a serial gfortran program:
 * `stop 3` exits 3; the launcher reports the first non-zero one). */
static void terminate_normally(int code) __attribute__((noreturn));
static void terminate_normally(int code)
{
    caf.stopping = true;
    fh_quiet();
    announce(CAF_IMG_STOPPED);
    serve_until_all_ended();
    caf_heap_fini();
    int rc = fh_finalize();
    if (rc != FH_OK) {
        fprintf(stderr, "caf: image %d: fh_finalize: %s\n", caf.rank + 1,
                fh_strerror(rc));
        exit(1);
    }
    exit(code);
}

/* ---------------------------------------------------- the entry points */

/* Static coarrays are registered by constructors the compiler emits
 * (`_caf_init.N`), which run before main and so before caf_init: the first
 * of register or init starts the library. */
void caf_start(int *argc, char ***argv)
{
    if (caf.bases != NULL)
        return;
    /* The runtime's messages (a dead or aborting peer, its line prefix)
     * name images, numbered from 1 as the program does. */
    int rc = fh_set_rank_names("image", 1);
    if (rc != FH_OK)
        caf_fatal("start-up", "fh_set_rank_names: %s", fh_last_error());
    /* gfortran calls the library from one thread: an image needs no thread
     * path of its own.  With FH_PATHS=lazy its thread takes the service
     * path and no other path is made (firehose/thread.c), which saves each
     * image the connections of FH_MAX_THREADS paths to every image
     * (docs/caf.md, "What an image costs").  The user's FH_PATHS wins. */
    if (getenv("FH_PATHS") == NULL && setenv("FH_PATHS", "lazy", 0) != 0)
        caf_fatal("start-up", "setenv(FH_PATHS): out of memory");
    /* Images on one host need no network conduit: the node path carries
     * everything, and a conduit costs start-up (libfabric's load: an empty
     * 2-image program took 0.36 s and 11.3 MiB per image, 0.05-0.06 s and
     * 8.3 MiB without; docs/caf.md, "What an image costs").
     * FH_CONDUIT=local makes the runtime open none there, and choose as
     * auto on several hosts.  The user's FH_CONDUIT wins. */
    if (getenv("FH_CONDUIT") == NULL && setenv("FH_CONDUIT", "local", 0) != 0)
        caf_fatal("start-up", "setenv(FH_CONDUIT): out of memory");
    rc = fh_init(argc, argv);
    if (rc != FH_OK) {
        fprintf(stderr, "caf: fh_init: %s (%s)\n", fh_strerror(rc),
                fh_last_error());
        exit(1);
    }
    caf.rank = fh_rank();
    caf.nranks = fh_nranks();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    caf.idle_spins = cores > 0 && caf.nranks > cores ? 1 : CAF_IDLE_SPINS;
    caf.status = calloc((size_t)caf.nranks, 1);
    if (caf.status == NULL)
        caf_fatal("start-up", "out of memory");
    rc = fh_am_register(CAF_H_STATUS, status_handler, "caf image status");
    if (rc != FH_OK)
        caf_fatal("start-up", "fh_am_register: %s", fh_strerror(rc));
    caf_sync_init();
    caf_team_init();
    if (caf_heap_init() != 0)
        caf_fatal("start-up", "%s", fh_last_error());
    caf_sync_heap_init();
    caf_coll_init();
    caf_heap_started();
    /* Every image's handlers exist before anyone sends. */
    rc = fh_barrier();
    if (rc != FH_OK)
        caf_fatal("start-up", "fh_barrier: %s", fh_strerror(rc));
}

void _gfortran_caf_init(int *argc, char ***argv)
{
    caf_start(argc, argv);
}

void _gfortran_caf_finalize(void)
{
    terminate_normally(0);
}

int _gfortran_caf_this_image(int distance)
{
    (void)distance;
    return caf_team_this_image();
}

int _gfortran_caf_num_images(int distance, int failed)
{
    (void)distance;
    int n = caf_team_num_images();
    if (failed < 0)
        return n;
    int nf = 0;
    int cnt;
    const int *ranks = caf_team_ranks(&cnt);
    for (int i = 0; i < cnt; i++)
        nf += caf.status[ranks[i]] == CAF_IMG_FAILED;
    return failed ? nf : n - nf;
}

static void print_stop(const char *what, const char *str, size_t len,
                       bool quiet)
{
    flush_all();
    /* As libgfortran: a STOP without a code prints nothing. */
    if (quiet || (str == NULL && strcmp(what, "STOP") == 0))
        return;
    if (str != NULL)
        fprintf(stderr, "%s %.*s\n", what, (int)len, str);
    else
        fprintf(stderr, "%s\n", what);
    fflush(stderr);
}

void _gfortran_caf_stop_numeric(int code, bool quiet)
{
    flush_all();
    if (!quiet) {
        fprintf(stderr, "STOP %d\n", code);
    }
    terminate_normally(code);
}

void _gfortran_caf_stop_str(const char *str, size_t len, bool quiet)
{
    print_stop("STOP", str, len, quiet);
    terminate_normally(0);
}

void _gfortran_caf_error_stop_str(const char *str, size_t len, bool quiet)
{
    print_stop("ERROR STOP", str, len, quiet);
    char msg[300];
    snprintf(msg, sizeof msg, "image %d executed ERROR STOP%s%.*s",
             caf_team_this_image(), str != NULL && len > 0 ? " " : "",
             str != NULL ? (int)(len > 200 ? 200 : len) : 0, str ? str : "");
    fh_abort(1, msg);
}

void _gfortran_caf_error_stop(int code, bool quiet)
{
    flush_all();
    if (!quiet) {
        fprintf(stderr, "ERROR STOP %d\n", code);
        fflush(stderr);
    }
    char msg[100];
    snprintf(msg, sizeof msg, "image %d executed ERROR STOP %d",
             caf_team_this_image(), code);
    fh_abort(code != 0 ? code : 1, msg);
}

void _gfortran_caf_fail_image(void)
{
    flush_all();
    fh_quiet();
    announce(CAF_IMG_FAILED);
    /* A failed image does nothing more but keep its process (and so the
     * job) alive until the others end; its memory stays reachable. */
    caf.stopping = true;
    serve_until_all_ended();
    caf_heap_fini();
    fh_finalize();
    exit(0);
}

int _gfortran_caf_image_status(int image, caf_team_t *team)
{
    (void)team;
    int rank = caf_image_rank(image);
    if (rank < 0)
        caf_fatal("IMAGE_STATUS", "image index %d is out of range [1, %d]",
                  image, caf_team_num_images());
    caf_poll();
    switch (caf.status[rank]) {
    case CAF_IMG_STOPPED: return CAF_STAT_STOPPED_IMAGE;
    case CAF_IMG_FAILED: return CAF_STAT_FAILED_IMAGE;
    default: return 0;
    }
}

/* Fills array (an unallocated rank-1 integer array of kind *kind) with the
 * indices of the images of the current team whose status is `want`. */
static void list_images(gfc_descriptor_t *array, int *kind, unsigned char want,
                        const char *stmt)
{
    int k = kind ? *kind : 4;
    if (k != 1 && k != 2 && k != 4 && k != 8)
        caf_fatal(stmt, "unsupported integer kind %d", k);
    caf_poll();
    int n;
    const int *ranks = caf_team_ranks(&n);
    size_t cnt = 0;
    for (int i = 0; i < n; i++)
        cnt += caf.status[ranks[i]] == want;
    char *mem = malloc(cnt ? cnt * (size_t)k : 1);
    if (mem == NULL)
        caf_fatal(stmt, "out of memory");
    size_t j = 0;
    for (int i = 0; i < n; i++) {
        if (caf.status[ranks[i]] != want)
            continue;
        int64_t v = i + 1;
        switch (k) {
        case 1: ((int8_t *)mem)[j] = (int8_t)v; break;
        case 2: ((int16_t *)mem)[j] = (int16_t)v; break;
        case 4: ((int32_t *)mem)[j] = (int32_t)v; break;
        default: ((int64_t *)mem)[j] = v; break;
        }
        j++;
    }
    /* gfortran reads the result as a zero-based temporary: it sets the
     * variable's bounds to lbound .. lbound + ubound. */
    array->base_addr = mem;
    array->offset = 0;
    array->dtype.elem_len = (size_t)k;
    array->dtype.rank = 1;
    array->dtype.type = CAF_BT_INTEGER;
    array->span = k;
    array->dim[0].lbound = 0;
    array->dim[0].ubound = (ptrdiff_t)cnt - 1;
    array->dim[0].stride = 1;
}

void _gfortran_caf_failed_images(gfc_descriptor_t *array, caf_team_t *team,
                                 int *kind)
{
    (void)team;
    list_images(array, kind, CAF_IMG_FAILED, "FAILED_IMAGES");
}

void _gfortran_caf_stopped_images(gfc_descriptor_t *array, caf_team_t *team,
                                  int *kind)
{
    (void)team;
    list_images(array, kind, CAF_IMG_STOPPED, "STOPPED_IMAGES");
}

/* RANDOM_INIT (F2018 16.9.155).  libgfortran's own routine seeds one
 * process: a fixed seed (repeatable) or one from the operating system.  The
 * images then make it what the standard asks:
 *   repeatable, image_distinct:  the fixed seed mixed with the image index;
 *   repeatable, not distinct:    the fixed seed as is (the same everywhere);
 *   not repeatable, distinct:    the system's seed (differs per image);
 *   not repeatable, not distinct: image 1's system seed, broadcast. */
extern void _gfortran_random_init(int repeatable, int image_distinct,
                                  int image_num);
extern void _gfortran_random_seed_i4(int32_t *size, gfc_descriptor_t *put,
                                     gfc_descriptor_t *get);

static void seed_desc(caf_desc_storage_t *s, int32_t *seed, int32_t n)
{
    memset(s, 0, sizeof *s);
    s->d.base_addr = seed;
    s->d.offset = (size_t)-1;
    s->d.dtype.elem_len = 4;
    s->d.dtype.rank = 1;
    s->d.dtype.type = CAF_BT_INTEGER;
    s->d.span = 4;
    s->d.dim[0].stride = 1;
    s->d.dim[0].lbound = 1;
    s->d.dim[0].ubound = n;
}

void _gfortran_caf_random_init(bool repeatable, bool image_distinct)
{
    /* Its third argument must be 0: libgfortran 12 stops past 2. */
    _gfortran_random_init(repeatable, image_distinct, 0);
    if (repeatable != image_distinct)
        return;
    int32_t n = 0;
    _gfortran_random_seed_i4(&n, NULL, NULL);
    if (n <= 0)
        return;
    int32_t *seed = calloc((size_t)n, sizeof *seed);
    if (seed == NULL)
        caf_fatal("RANDOM_INIT", "out of memory");
    caf_desc_storage_t d;
    seed_desc(&d, seed, n);
    _gfortran_random_seed_i4(NULL, NULL, &d.d);
    if (repeatable) {
        uint64_t x = (uint64_t)caf_team_this_image() * 0x9e3779b97f4a7c15ull;
        for (int32_t i = 0; i < n; i++) {
            x ^= x >> 29;
            x *= 0xbf58476d1ce4e5b9ull;
            seed[i] ^= (int32_t)(uint32_t)(x >> 32) | 1;
        }
    } else {
        int st = 0;
        _gfortran_caf_co_broadcast(&d.d, 1, &st, NULL, 0);
        if (st != 0)
            caf_fatal("RANDOM_INIT", "broadcasting the seed failed (stat %d)", st);
    }
    _gfortran_random_seed_i4(NULL, &d.d, NULL);
    free(seed);
}
