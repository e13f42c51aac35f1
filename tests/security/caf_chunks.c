/*
 * caf_chunks.c -- a hostile coarray image cannot make another image read or
 * write out of bounds, or corrupt its state, through libcaf_firehose's AM
 * handlers (docs/security.md, "Nothing a peer sends can crash or overflow a
 * receiver").
 *
 * Three images of one job, each running this program on libcaf_firehose
 * (it calls the _gfortran_caf_* entry points gfortran would call):
 * image 1 (rank 0) is hostile, image 2 (rank 1) the victim, image 3
 * (rank 2) an honest bystander.  The hostile image is a real member: it
 * takes part in the program, and besides that sends hand-made AMs to the
 * library's handler indices (caf_internal.h) through the public firehose
 * API, as any member could.  One scenario per run (argv[1]):
 *
 *   short    before a CO_SUM of 1024 int32 (4 KiB: a rendezvous chunk) to
 *            image 2, image 1 sends image 2 an 8-byte eager chunk with the
 *            key of the result it sends image 2 (the tree is rooted at
 *            image 1, which then sends RESULT_IMAGE the result), then sends
 *            the real one: image 2 must drop the short chunk and take the
 *            real one.
 *   written  the same with "written" notices (the chunk was put into a
 *            slot of image 2's scratch): one naming the last 8 bytes of
 *            image 2's segment, one with 5 arguments; image 2 must not
 *            read there and must take the real chunk.
 *   grant    before a CO_SUM to image 1 (image 2 sends to it), image 1
 *            grants image 2 a "slot" 1 TiB past its segment: image 2 must
 *            drop the grant, not die writing there, and use the real one.
 *   syncall  image 1 sends image 2 a SYNC ALL arrival of round 1 for the
 *            initial team (whose barriers are the runtime's fh_barrier_or,
 *            so no image sends one; before, only image 3 could: the
 *            dissemination on 3 images); image 3 enters SYNC ALL 2 s
 *            late: image 2 must drop the arrival and wait for image 3, in
 *            this barrier and in the next.
 *   misc     malformed status messages, SYNC ALL arrivals, SYNC IMAGES
 *            notifications (more than one ahead) and FORM TEAM records:
 *            each dropped; then SYNC ALL and FORM TEAM work as usual.
 *   coll     malformed collective data (argument count, a medium claiming
 *            to be a written notice, an unknown phase) and grants (a payload, an offset
 *            that is no slot, an ABORT with an unknown STAT): each
 *            dropped; then a CO_SUM every image wants is right.
 * (Fewer than 10 forgeries per scenario: the victim logs its first 10
 * drops in full.)
 *
 * Prints "PASS caf_chunks <scenario>" on image 2 and exits 0; a failed
 * check prints "FAIL caf_chunks <scenario>: expected ..., saw ..." and ends
 * the job with status 1.  caf_chunks.sh checks the victim's drop lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "caf_internal.h" /* the library's handler indices and ABI types */

#define N 1024 /* int32 per CO_SUM: 4 KiB, over the 2 KiB eager limit */

static const char *scenario;
static int me; /* this image (1-based) */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("FAIL caf_chunks %s: image %d: %s\n", scenario, me, msg);
    fflush(stdout);
    fh_abort(1, "caf_chunks failed");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sync_all(void)
{
    int stat = -1;
    _gfortran_caf_sync_all(&stat, NULL, 0);
    if (stat != 0)
        fail("SYNC ALL: expected stat 0, saw %d", stat);
}

/* CO_SUM of a[0..N) to result_image (0: every image). */
static void co_sum(int32_t *a, int result_image)
{
    caf_desc_storage_t d;
    memset(&d, 0, sizeof d);
    d.d.base_addr = a;
    d.d.offset = (size_t)-1;
    d.d.dtype.elem_len = sizeof *a;
    d.d.dtype.rank = 1;
    d.d.dtype.type = CAF_BT_INTEGER;
    d.d.span = sizeof *a;
    d.d.dim[0].stride = 1;
    d.d.dim[0].lbound = 1;
    d.d.dim[0].ubound = N;
    int stat = -1;
    _gfortran_caf_co_sum(&d.d, result_image, &stat, NULL, 0);
    if (stat != 0)
        fail("CO_SUM: expected stat 0, saw %d", stat);
}

static void fill(int32_t *a)
{
    for (int j = 0; j < N; j++)
        a[j] = me * 1000 + j;
}

/* Sum over the 3 images of image*1000 + j. */
static void check_sum(const int32_t *a)
{
    for (int j = 0; j < N; j++)
        if (a[j] != 6000 + 3 * j)
            fail("CO_SUM element %d: expected %d, saw %d", j, 6000 + 3 * j, a[j]);
}

static void am(int rc, const char *what)
{
    if (rc != FH_OK)
        fail("%s: %s (%s)", what, fh_strerror(rc), fh_last_error());
}

/* The library's segment on `rank` (the first live segment: libcaf_firehose
 * creates one). */
static void victim_segment(int rank, char **base, size_t *size)
{
    for (fh_seg_t s = 0; s < 1024; s++) {
        void *b;
        if (fh_segment_query(s, rank, &b, size) == FH_OK && *size > 0) {
            *base = b;
            return;
        }
    }
    fail("no segment of rank %d", rank);
}

/* A collective message's arguments: team 0, sequence seq, chunk, last. */
static void coll_args(uint64_t *a, uint64_t seq, uint64_t chunk, uint64_t last)
{
    a[0] = 0;
    a[1] = seq;
    a[2] = chunk;
    a[3] = last;
}

/* The first CO_SUM of the program is collective number 1 of team 0; to
 * image 2 it goes up the tree rooted at image 1, which sends the result to
 * image 2 as chunk 0 of the UNFOLD phase. */
#define RESULT_CHUNK0 ((uint64_t)CAF_COLL_UNFOLD << CAF_COLL_PHASE_SHIFT)
static void run_short(void)
{
    int32_t a[N];
    fill(a);
    if (me == 1) {
        uint64_t args[4];
        coll_args(args, 1, RESULT_CHUNK0, 0);
        int32_t bogus[2] = {0x41414141, 0x42424242};
        am(fh_am_request_medium(1, CAF_H_COLL, bogus, sizeof bogus, args, 4),
           "short chunk");
    }
    sync_all(); /* ordered after the bogus chunk on the same path */
    co_sum(a, 2);
    if (me == 2)
        check_sum(a);
}

static void run_written(void)
{
    int32_t a[N];
    fill(a);
    if (me == 1) {
        char *base;
        size_t size;
        victim_segment(1, &base, &size);
        uint64_t args[6];
        coll_args(args, 1, RESULT_CHUNK0, 1);
        args[4] = size - 8;   /* offset in the segment: its last 8 bytes */
        args[5] = 8;
        am(fh_am_request_short(1, CAF_H_COLL, args, 6),
           "written chunk at the end of the segment");
        am(fh_am_request_short(1, CAF_H_COLL, args, 5), "written chunk, 5 args");
    }
    sync_all();
    co_sum(a, 2);
    if (me == 2)
        check_sum(a);
}

static void run_grant(void)
{
    int32_t a[N];
    fill(a);
    if (me == 1) {
        uint64_t args[4];
        coll_args(args, 1, 0, (uint64_t)1 << 40);
        am(fh_am_request_short(1, CAF_H_COLL_2, args, 4), "grant");
    }
    sync_all();
    co_sum(a, 1);
    if (me == 1)
        check_sum(a);
}

static void run_syncall(void)
{
    sync_all(); /* epoch 1 */
    for (int round = 2; round <= 3; round++) {
        if (me == 1) {
            /* group 0, round 1, epoch `round`, no flags */
            uint64_t args[4] = {0, 1, (uint64_t)round, 0};
            am(fh_am_request_short(1, CAF_H_SYNC_ALL, args, 4),
               "SYNC ALL arrival");
        }
        if (me == 3)
            sleep(2);
        double t0 = now_s();
        sync_all();
        double dt = now_s() - t0;
        if (me == 2 && dt < 1.5)
            fail("SYNC ALL %d: expected to wait ~2 s for image 3, returned "
                 "after %.3f s", round, dt);
    }
}

/* FORM TEAM and CHANGE TEAM into team (image % 2) + 1, a SYNC ALL there
 * and back. */
static void form_team(void)
{
    caf_team_t t = NULL;
    _gfortran_caf_form_team(me % 2 + 1, &t, 0);
    _gfortran_caf_change_team(&t, 0);
    int n = _gfortran_caf_num_images(0, -1);
    int want = me % 2 ? 2 : 1; /* images 1 and 3 / image 2 */
    if (n != want)
        fail("team %d: expected %d images, saw %d", me % 2 + 1, want, n);
    sync_all();
    _gfortran_caf_end_team(&t);
}

/* Malformed messages for the status, SYNC ALL, SYNC IMAGES and FORM TEAM
 * handlers (7: under the 10 drops logged in full). */
static void run_misc(void)
{
    if (me == 1) {
        uint64_t args[8] = {0};
        const int v = 1; /* the victim's rank */
        /* status: unknown value (six arguments, as due); two arguments */
        args[0] = 5;
        am(fh_am_request_short(v, CAF_H_STATUS, args, 6), "status 5");
        args[0] = 1;
        am(fh_am_request_short(v, CAF_H_STATUS, args, 2), "status, 2 args");
        /* SYNC IMAGES: one notification ahead is allowed, two are not */
        am(fh_am_request_short(v, CAF_H_SYNC_IMAGES, NULL, 0), "sync images 1");
        am(fh_am_request_short(v, CAF_H_SYNC_IMAGES, NULL, 0), "sync images 2");
        /* SYNC ALL: round 40, flags 16 (8 is "active images") */
        uint64_t b[4] = {0, 40, 1, 0};
        am(fh_am_request_short(v, CAF_H_SYNC_ALL, b, 4), "sync all round 40");
        uint64_t f[4] = {0, 0, 1, 16};
        am(fh_am_request_short(v, CAF_H_SYNC_ALL, f, 4), "sync all flags 16");
        /* FORM TEAM: team number 0, NEW_INDEX= -3 */
        uint64_t t[3] = {0, 0, 0};
        am(fh_am_request_short(v, CAF_H_TEAM, t, 3), "form team number 0");
        t[1] = 1;
        t[2] = (uint64_t)-3;
        am(fh_am_request_short(v, CAF_H_TEAM, t, 3), "form team index -3");
    }
    sync_all();
    sync_all();
    form_team();
    sync_all();
}

/* Malformed collective data and grants (6), then a CO_SUM every image
 * wants and a SYNC ALL. */
static void run_coll(void)
{
    int32_t a[N];
    fill(a);
    if (me == 1) {
        uint64_t args[4];
        const int v = 1;
        /* data: 3 arguments; a "written" notice that is a medium; unknown
         * phase */
        int32_t bogus[4] = {1, 2, 3, 4};
        coll_args(args, 1, 0, 0);
        am(fh_am_request_medium(v, CAF_H_COLL, bogus, sizeof bogus, args, 3),
           "data, 3 args");
        coll_args(args, 1, 0, 1);
        am(fh_am_request_medium(v, CAF_H_COLL, bogus, sizeof bogus, args, 4),
           "medium data claiming to be written");
        coll_args(args, 1, (uint64_t)9 << 48, 0);
        am(fh_am_request_medium(v, CAF_H_COLL, bogus, sizeof bogus, args, 4),
           "data, phase 9");
        /* grants: with a payload; an offset that is no slot; an abort with
         * an unknown STAT */
        coll_args(args, 1, 0, 64);
        am(fh_am_request_medium(v, CAF_H_COLL_2, bogus, sizeof bogus, args, 4),
           "grant with a payload");
        am(fh_am_request_short(v, CAF_H_COLL_2, args, 4), "grant at offset 64");
        coll_args(args, 1, UINT64_MAX, 12345);
        am(fh_am_request_short(v, CAF_H_COLL_2, args, 4), "abort, stat 12345");
    }
    sync_all();
    co_sum(a, 0);
    check_sum(a);
}

int main(int argc, char **argv)
{
    _gfortran_caf_init(&argc, &argv);
    me = _gfortran_caf_this_image(0);
    scenario = argc > 1 ? argv[1] : "";
    if (_gfortran_caf_num_images(0, -1) != 3)
        fail("expected 3 images, saw %d", _gfortran_caf_num_images(0, -1));
    if (strcmp(scenario, "short") == 0)
        run_short();
    else if (strcmp(scenario, "written") == 0)
        run_written();
    else if (strcmp(scenario, "grant") == 0)
        run_grant();
    else if (strcmp(scenario, "syncall") == 0)
        run_syncall();
    else if (strcmp(scenario, "misc") == 0)
        run_misc();
    else if (strcmp(scenario, "coll") == 0)
        run_coll();
    else
        fail("unknown scenario '%s' (short written grant syncall misc coll)",
             scenario);
    sync_all();
    if (me == 2) {
        printf("PASS caf_chunks %s\n", scenario);
        fflush(stdout);
    }
    _gfortran_caf_finalize();
    return 0;
}
