/*
 * put_visible.c -- "complete" means visible at the target, with nothing more
 * from the initiator (include/firehose.h, "Completion semantics").
 *
 * One initiator at a time puts into the next rank's segment and completes
 * the put by one of the calls that promise completion; then it tells the
 * target so through a channel that is not firehose (a MAP_SHARED file all
 * ranks of this host map: "out of band"), and waits for the target's answer
 * there without calling firehose at all.  The target polls firehose (its
 * own progress) until the out-of-band word says the put completed, and then
 * -- with no fh_poll in between -- reads its memory: it must hold every
 * byte.  An implementation that returns before the data landed (or that
 * needs a later message from the initiator to finish it) fails here.
 *
 * Completion modes (each for every size, every rank as the initiator):
 *   put       fh_put
 *   nb-wait   fh_put_nb + fh_wait
 *   nb-test   fh_put_nb + fh_test until FH_OK
 *   nbi       fh_put_nbi + fh_wait_nbi
 *   nb-quiet  two fh_put_nb completed by fh_quiet alone; afterwards fh_test
 *             must report each handle complete at once (header: fh_quiet
 *             "does not consume handles ... they then report it complete at
 *             once"), and the handles must then be consumed (FH_ERR_HANDLE)
 *   nbi-quiet fh_put_nbi + fh_quiet
 *   strided   fh_put_strided (4 blocks)
 *   amo-quiet fh_atomic_nb SET completed by fh_quiet (the target's word holds
 *             the operand); then fh_wait on the handle is FH_OK at once
 *   amo       fh_atomic FETCH_ADD (blocking)
 * Sizes: 8, 3000, 70000, 1 MiB + 13 and 5 MiB (more than one FH_XFER_CHUNK).
 *
 * All ranks must run on one host (they share the out-of-band file).
 * Usage: put_visible
 */
#include "oob.h"

enum { M_PUT, M_NB_WAIT, M_NB_TEST, M_NBI, M_NB_QUIET, M_NBI_QUIET, M_STRIDED,
       M_AMO_QUIET, M_AMO, M__COUNT };
static const char *const mode_name[M__COUNT] = {
    "put", "nb-wait", "nb-test", "nbi", "nb-quiet", "nbi-quiet", "strided",
    "amo-quiet", "amo"};
static const size_t sizes[] = {8, 3000, 70000, ((size_t)1 << 20) + 13, (size_t)5 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define SLOT ((size_t)6 << 20)          /* data area; the atomic word follows */
#define OOB_WAIT_S 120.0                /* generous bound: never a hang */

static int me, N;
static char *lbase;                     /* my segment */
static char **bases;                    /* every rank's segment */
/* Out-of-band words: announce[r] = round r completed as initiator;
 * ack[r] = round r verified by rank r as target. */
static volatile uint64_t *oob;   /* oob.h */
#define ANNOUNCE(r) (&oob[2 * (r)])
#define ACK(r) (&oob[2 * (r) + 1])

/* Initiator: completes one put of size n into rank t by mode m. */
static void initiate(int t, int m, size_t n, char *src, uint64_t round)
{
    char *dst = bases[t];
    uint64_t *word = (uint64_t *)(bases[t] + SLOT);
    fh_handle_t h[2];
    int rc;
    switch (m) {
    case M_PUT:
        CHECK_OK(fh_put(t, dst, src, n));
        break;
    case M_NB_WAIT:
        CHECK_OK(fh_put_nb(t, dst, src, n, &h[0]));
        CHECK_OK(fh_wait(h[0]));
        break;
    case M_NB_TEST:
        CHECK_OK(fh_put_nb(t, dst, src, n, &h[0]));
        for (double t0 = tu_now(); (rc = fh_test(h[0])) == FH_ERR_AGAIN;)
            CHECK(tu_now() - t0 < OOB_WAIT_S, "fh_test", "completion within %.0f s",
                  OOB_WAIT_S);
        CHECK_RC(rc, FH_OK);
        break;
    case M_NBI:
        CHECK_OK(fh_put_nbi(t, dst, src, n));
        CHECK_OK(fh_wait_nbi());
        break;
    case M_NB_QUIET: {
        size_t half = n / 2;
        CHECK_OK(fh_put_nb(t, dst, src, half, &h[0]));
        CHECK_OK(fh_put_nb(t, dst + half, src + half, n - half, &h[1]));
        CHECK_OK(fh_quiet());
        for (int i = 0; i < 2; i++) {
            CHECK(fh_test(h[i]) == FH_OK, "fh_test after fh_quiet",
                  "handle %d (put of %zu bytes) complete at once, saw %s", i, n,
                  fh_err_name(fh_test(h[i])));
            if (h[i] != FH_HANDLE_DONE)
                CHECK_RC(fh_test(h[i]), FH_ERR_HANDLE);   /* consumed */
        }
        break;
    }
    case M_NBI_QUIET:
        CHECK_OK(fh_put_nbi(t, dst, src, n));
        CHECK_OK(fh_quiet());
        break;
    case M_STRIDED: {
        size_t blk = n / 4;
        CHECK_OK(fh_put_strided(t, dst, (ptrdiff_t)blk, src, (ptrdiff_t)blk, blk, 4));
        break;
    }
    case M_AMO_QUIET:
        CHECK_OK(fh_atomic_nb(t, word, FH_AOP_SET, round, 0, NULL, &h[0]));
        CHECK_OK(fh_quiet());
        CHECK_OK(fh_wait(h[0]));
        break;
    case M_AMO: {
        uint64_t old = 0;
        CHECK_OK(fh_atomic(t, word, FH_AOP_FETCH_ADD, 1, 0, &old));
        break;
    }
    }
}

/* Bytes the target must hold after a put of size n by mode m. */
static size_t put_len(int m, size_t n)
{
    return m == M_STRIDED ? n / 4 * 4 : n;
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("put_visible");
    me = fh_rank();
    N = fh_nranks();
    CHECK(N >= 2, "rank count", "at least 2 ranks, saw %d", N);
    tu_seed_init();
    fh_seg_t seg;
    void *lb;
    CHECK_OK(fh_segment_create(SLOT + 64, &seg, &lb));
    lbase = lb;
    bases = calloc((size_t)N, sizeof *bases);
    CHECK(bases != NULL, "calloc", "memory");
    for (int r = 0; r < N; r++)
        CHECK_OK(fh_segment_query(seg, r, (void **)&bases[r], NULL));
    oob = tu_oob_open();
    char *src = malloc(SLOT);
    CHECK(src != NULL, "malloc", "memory");
    uint64_t round = 0, amo_expect = 0, checked = 0;
    TU_SAY("put_visible: %d ranks, %d modes x %zu sizes per initiator; the target "
           "checks its memory when an out-of-band word says the call returned\n",
           N, (int)M__COUNT, NSIZES);
    for (int m = 0; m < M__COUNT; m++) {
        for (size_t si = 0; si < NSIZES; si++) {
            if ((m == M_AMO || m == M_AMO_QUIET) && si > 0)
                continue;   /* an atomic has one size */
            for (int i = 0; i < N; i++) {
                round++;
                int t = (i + 1) % N;
                size_t n = sizes[si], len = put_len(m, n);
                uint64_t key = tu_key((uint64_t)i, round, (uint64_t)m);
                if (me == i) {
                    tu_fill(src, len, key, 0);
                    initiate(t, m, n, src, round);
                    tu_oob_store(ANNOUNCE(i), round);
                    /* No firehose call until the target has looked. */
                    double t0 = tu_now();
                    while (tu_oob_load(ACK(t)) != round) {
                        CHECK(tu_now() - t0 < OOB_WAIT_S, "out-of-band ack",
                              "rank %d to answer round %" PRIu64 " within %.0f s", t,
                              round, OOB_WAIT_S);
                        sched_yield();
                    }
                } else if (me == t) {
                    double t0 = tu_now();
                    while (tu_oob_load(ANNOUNCE(i)) != round) {
                        CHECK(tu_now() - t0 < OOB_WAIT_S, "out-of-band announce",
                              "rank %d to finish round %" PRIu64 " within %.0f s", i,
                              round, OOB_WAIT_S);
                        CHECK_OK(fh_poll());
                    }
                    /* The call returned at the initiator: no poll from here. */
                    if (m == M_AMO || m == M_AMO_QUIET) {
                        uint64_t want = m == M_AMO ? ++amo_expect : round;
                        if (m == M_AMO_QUIET)
                            amo_expect = round;
                        uint64_t v = __atomic_load_n((uint64_t *)(lbase + SLOT),
                                                     __ATOMIC_ACQUIRE);
                        CHECK(v == want, mode_name[m], "round %" PRIu64 ": the word "
                              "from rank %d = %" PRIu64 " when the call returned there, "
                              "saw %" PRIu64, round, i, want, v);
                    } else {
                        TU_VERIFY(lbase, len, key, 0, "%s of %zu bytes from rank %d, "
                                  "read when the call had returned there (round %"
                                  PRIu64 ")", mode_name[m], n, i, round);
                    }
                    checked++;
                    tu_oob_store(ACK(me), round);
                }
                CHECK_OK(fh_barrier());
            }
        }
    }
    uint64_t total = tu_job_sum(checked);
    CHECK(total == round, "rounds checked", "%" PRIu64 ", saw %" PRIu64, round, total);
    TU_SAY("put_visible: %" PRIu64 " completions observed at their targets\n", total);
    free(src);
    free(bases);
    CHECK_OK(fh_finalize());
    TU_SAY("PASS put_visible\n");
    return 0;
}
