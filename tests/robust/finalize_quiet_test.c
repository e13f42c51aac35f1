/*
 * finalize_quiet_test.c -- issue 29 class 10: fh_finalize completes the
 * caller's outstanding NBI operations before its barrier (include/
 * firehose.h: "Outstanding NB/NBI operations of the caller are completed
 * first ... includes a barrier, so every rank's outstanding operations to
 * us have completed").  A test that fails when fh_finalize skips its quiet.
 *
 * Built against the runtime compiled with the test hooks (libfhrt_hooks.la):
 * every rank puts NPUT NBI puts of CHUNK bytes (its pattern) into its slot
 * of the next rank's segment and calls fh_finalize at once, with no
 * fh_quiet and no barrier of its own.  At FH_TP_FINALIZE_DRAINED -- inside
 * fh_finalize, after its barrier and drain, before anything is released --
 * the hook checks that the previous rank's bytes are all in our segment.
 * Each rank prints "ok" or "FAIL" after fh_finalize and exits 0 or 1.
 * Usage: finalize_quiet_test
 */
#include "tests/integ/testutil.h"
#include "firehose/internal.h"     /* fh_test_hook, FH_TP_FINALIZE_DRAINED */

#ifndef FH_TEST_HOOKS
#error "finalize_quiet_test needs the runtime built with -DFH_TEST_HOOKS"
#endif

#define CHUNK ((size_t)1 << 20)
#define NPUT 16
#define SLOT (CHUNK * NPUT)

static int me, N, prev;
static uint8_t *base;
static int hook_ran;
static size_t bad_at = (size_t)-1;

static uint64_t key_of(int r) { return tu_key((uint64_t)r, 10, 29); }

static void hook(enum fh_test_point where)
{
    if (where != FH_TP_FINALIZE_DRAINED)
        return;
    hook_ran = 1;
    bad_at = tu_check(base + (size_t)prev * SLOT, SLOT, key_of(prev), 0);
}

int main(int argc, char **argv)
{
    fh_test_hook = hook;
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("finalize_quiet_test");
    me = fh_rank();
    N = fh_nranks();
    prev = (me + N - 1) % N;
    int next = (me + 1) % N;
    fh_seg_t seg;
    CHECK_OK(fh_segment_create(SLOT * (size_t)N, &seg, (void **)&base));
    uint8_t *rb;
    CHECK_OK(fh_segment_query(seg, next, (void **)&rb, NULL));
    uint8_t *src = malloc(SLOT);
    CHECK(src != NULL, "malloc", "memory, saw NULL");
    tu_fill(src, SLOT, key_of(me), 0);
    CHECK_OK(fh_barrier());
    for (int i = 0; i < NPUT; i++)
        CHECK_OK(fh_put_nbi(next, rb + (size_t)me * SLOT + (size_t)i * CHUNK,
                            src + (size_t)i * CHUNK, CHUNK));
    CHECK_OK(fh_finalize());        /* no fh_quiet, no barrier: finalize's job */
    tu_myrank = -1;                 /* down: failures exit, no fh_abort */
    free(src);
    if (!hook_ran) {
        printf("[%d] FAIL the FH_TP_FINALIZE_DRAINED hook never ran\n", me);
        return 1;
    }
    if (bad_at != (size_t)-1) {
        printf("[%d] FAIL rank %d's NBI puts were not all in our segment when "
               "fh_finalize's barrier was over: byte %zu of %zu differs\n", me, prev,
               bad_at, SLOT);
        return 1;
    }
    printf("[%d] ok: rank %d's %d NBI puts (%zu bytes) had landed\n", me, prev, NPUT, SLOT);
    if (me == 0)
        printf("PASS finalize_quiet_test\n");
    return 0;
}
