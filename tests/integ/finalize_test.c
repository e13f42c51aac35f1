/*
 * finalize_test.c -- fh_finalize "includes a barrier, so every rank's
 * outstanding operations to us have completed.  Outstanding NB/NBI
 * operations of the caller are completed first" (include/firehose.h).
 *
 * Every rank fills its segment with a pattern, then (after a barrier)
 * issues to every rank, itself included, and never waits for:
 *   NB and NBI gets of pieces of the peer's segment into heap buffers,
 *   NB FETCH_ADDs on a counter in the peer's segment, fetched into heap,
 * and with --everything (FH_SEGMENT=everything: a put may target any mapped
 * memory of a rank, so the target's memory outlives fh_finalize):
 *   NB and NBI puts into an mmap'd area of the peer (not a segment).
 * Then it calls fh_finalize, abandoning every handle.  Afterwards (the
 * runtime is gone, so only local memory is read): every get buffer holds the
 * peer's pattern, every fetched value was written and the values fetched
 * from one counter are distinct, and (--everything) the area holds every
 * rank's puts.  A finalize that returned early leaves some of them missing.
 *
 * Usage: finalize_test [--everything] [--ops K] [--piece BYTES]
 */
#include "testutil.h"

#define UNSET 0xfeedfacecafebeefULL

static int me, N;
static long K;
static size_t PIECE;   /* bytes per operation (--piece, default 24k) */

int main(int argc, char **argv)
{
    int everything = tu_flag(argc, argv, "--everything");
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("finalize_test");
    me = fh_rank();
    N = fh_nranks();
    K = tu_opt(argc, argv, "--ops", 8);
    PIECE = (size_t)tu_opt(argc, argv, "--piece", 24 << 10);
    tu_seed_init();
    size_t segsz = 64 + (size_t)K * PIECE;
    fh_seg_t seg;
    void *lb;
    CHECK_OK(fh_segment_create(segsz, &seg, &lb));
    char **bases = calloc((size_t)N, sizeof *bases);
    CHECK(bases != NULL, "calloc", "memory");
    for (int r = 0; r < N; r++)
        CHECK_OK(fh_segment_query(seg, r, (void **)&bases[r], NULL));
    /* My segment: a counter, then K pieces of my pattern. */
    memset(lb, 0, 64);
    tu_fill((char *)lb + 64, (size_t)K * PIECE, tu_key((uint64_t)me, 1, 0), 0);

    /* --everything: an area outside any segment, N*K slots of PIECE bytes,
     * aligned to 1 MiB so that every firehose bucket holding a slot is
     * mapped whole (docs/firehose-cache.md, "FH_SEGMENT=everything"). */
    size_t area_len = (size_t)N * (size_t)K * PIECE;
    char *area = NULL, **areas = NULL;
    if (everything) {
        area = tu_reserve(area_len, (size_t)1 << 20);
        memset(area, 0, area_len);
        areas = calloc((size_t)N, sizeof *areas);
        CHECK(areas != NULL, "calloc", "memory");
        CHECK_OK(fh_allgather(&area, areas, sizeof area));
    }
    char *src = malloc((size_t)K * PIECE);
    char *got = malloc((size_t)N * (size_t)K * PIECE);
    uint64_t *fetched = malloc((size_t)N * (size_t)K * sizeof *fetched);
    fh_handle_t *hs = malloc((size_t)N * (size_t)K * 3 * sizeof *hs);
    CHECK(src && got && fetched && hs, "malloc", "memory");
    memset(got, 0, (size_t)N * (size_t)K * PIECE);
    for (size_t i = 0; i < (size_t)N * (size_t)K; i++)
        fetched[i] = UNSET;
    tu_fill(src, (size_t)K * PIECE, tu_key((uint64_t)me, 2, 0), 0);
    CHECK_OK(fh_barrier());

    size_t nh = 0;
    for (long k = 0; k < K; k++)
        for (int d = 0; d < N; d++) {
            int r = (me + d) % N;
            size_t slot = (size_t)r * (size_t)K + (size_t)k;
            char *remote = bases[r] + 64 + (size_t)k * PIECE;
            if (k % 2 == 0)
                CHECK_OK(fh_get_nb(got + slot * PIECE, r, remote, PIECE, &hs[nh++]));
            else
                CHECK_OK(fh_get_nbi(got + slot * PIECE, r, remote, PIECE));
            CHECK_OK(fh_atomic_nb(r, (uint64_t *)bases[r], FH_AOP_FETCH_ADD, 1, 0,
                                  &fetched[slot], &hs[nh++]));
            if (everything) {
                char *dst = areas[r] + ((size_t)me * (size_t)K + (size_t)k) * PIECE;
                if (k % 2 == 0)
                    CHECK_OK(fh_put_nb(r, dst, src + (size_t)k * PIECE, PIECE, &hs[nh++]));
                else
                    CHECK_OK(fh_put_nbi(r, dst, src + (size_t)k * PIECE, PIECE));
            }
        }
    TU_SAY("finalize_test: %ld rounds of NB/NBI gets, NB atomics%s to every rank, "
           "then fh_finalize with %zu handles never waited for\n", K,
           everything ? " and NB/NBI puts into memory outside the segments" : "", nh);
    CHECK_OK(fh_finalize());
    tu_myrank = -1;   /* the runtime is gone: failures exit(1) */

    for (int r = 0; r < N; r++)
        for (long k = 0; k < K; k++) {
            size_t slot = (size_t)r * (size_t)K + (size_t)k;
            TU_VERIFY(got + slot * PIECE, PIECE, tu_key((uint64_t)r, 1, 0),
                      (uint64_t)k * PIECE, "[%d] %s get of piece %ld from rank %d, read "
                      "after fh_finalize", me, k % 2 ? "NBI" : "NB", k, r);
            CHECK(fetched[slot] < (uint64_t)N * (uint64_t)K, "NB atomic after fh_finalize",
                  "[%d] a value below %ld fetched from rank %d (round %ld), saw 0x%" PRIx64
                  "%s", me, (long)N * K, r, k, fetched[slot],
                  fetched[slot] == UNSET ? " (never written)" : "");
            for (long j = 0; j < k; j++)
                CHECK(fetched[(size_t)r * (size_t)K + (size_t)j] != fetched[slot],
                      "NB atomic after fh_finalize", "[%d] distinct values fetched from "
                      "rank %d, saw %" PRIu64 " twice", me, r, fetched[slot]);
            if (everything)
                TU_VERIFY(area + slot * PIECE, PIECE, tu_key((uint64_t)r, 2, 0),
                          (uint64_t)k * PIECE, "[%d] %s put of piece %ld from rank %d, "
                          "read after fh_finalize", me, k % 2 ? "NBI" : "NB", k, r);
        }
    free(src);
    free(got);
    free(fetched);
    free(hs);
    free(bases);
    free(areas);
    printf("[%d] finalize_test: every operation complete after fh_finalize\n", me);
    if (me == 0)
        printf("PASS finalize_test\n");
    return 0;
}
