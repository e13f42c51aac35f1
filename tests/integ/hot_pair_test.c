/*
 * hot_pair_test.c -- one hot pair among idle ranks, byte-exact (issue 32).
 *
 * Rank 0 does --ops random puts (blocking and non-blocking) and gets of
 * 8 B .. 64 KiB on rank 1's segment of --kib KiB (default 1024: far more than
 * F = M/(N-1) with hot_pair_test.sh's FH_FIREHOSE_M=1m, about M), keeping a
 * shadow copy; every get is checked against it, then the whole segment is
 * read back.  Ranks 2.. do nothing meanwhile (they only poll, in
 * fh_barrier).  Then:
 *   - rank 1 checks its own memory against rank 0's shadow (a hash of both,
 *     exchanged with fh_allgather), so the data landed where it was put;
 *   - every other rank's segment is still all zero (no stray write);
 *   - each idle rank r puts a 4 KiB pattern into its own slot of rank 1's
 *     second segment and gets it back, and rank 1 checks every slot: an
 *     idle peer still gets room on the hot target after the hot pair took
 *     what it could (under FH_FIREHOSE_BUDGET=adaptive, its floor).
 *
 * Usage: hot_pair_test [--ops N] [--kib K]
 */
#include "testutil.h"

#define SLOT 4096u

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv)
{
    long ops = tu_opt(argc, argv, "--ops", 3000);
    size_t kib = (size_t)tu_opt(argc, argv, "--kib", 1024);
    CHECK_RC(fh_init(&argc, &argv), FH_OK);
    tu_init_rank("hot_pair_test");
    int me = fh_rank(), N = fh_nranks();
    CHECK(N >= 2, "ranks", "at least 2, saw %d", N);
    uint64_t seed = tu_seed_init();
    size_t W = kib << 10;
    fh_seg_t seg, small;
    uint8_t *mine, *mysmall;
    CHECK_RC(fh_segment_create(W, &seg, (void **)&mine), FH_OK);
    CHECK_RC(fh_segment_create((size_t)N * SLOT, &small, (void **)&mysmall), FH_OK);
    memset(mine, 0, W);
    memset(mysmall, 0, (size_t)N * SLOT);
    void *tbase, *tsmall;
    CHECK_RC(fh_segment_query(seg, 1, &tbase, NULL), FH_OK);
    CHECK_RC(fh_segment_query(small, 1, &tsmall, NULL), FH_OK);
    CHECK_RC(fh_barrier(), FH_OK);

    uint64_t hash = 0;
    if (me == 0) {
        uint8_t *shadow = calloc(1, W), *buf = malloc(65536), *chk = malloc(65536);
        CHECK(shadow && buf && chk, "malloc", "memory, saw NULL");
        tu_rng_t rng = tu_rng_make(seed, 0, 1, 32);
        for (long i = 0; i < ops; i++) {
            size_t n = (size_t)8 << tu_rng_below(&rng, 14);   /* 8 B .. 64 KiB */
            n += tu_rng_below(&rng, n);
            if (n > 65536)
                n = 65536;
            if (n > W)
                n = W;
            size_t off = (size_t)tu_rng_below(&rng, W - n + 1);
            char *remote = (char *)tbase + off;
            if (tu_rng_below(&rng, 2) == 0) {
                for (size_t k = 0; k < n; k++)
                    buf[k] = (uint8_t)tu_rng_next(&rng);
                if (tu_rng_below(&rng, 4) == 0) {
                    CHECK_RC(fh_put_nbi(1, remote, buf, n), FH_OK);
                    CHECK_RC(fh_wait_nbi(), FH_OK);
                } else {
                    CHECK_RC(fh_put(1, remote, buf, n), FH_OK);
                }
                memcpy(shadow + off, buf, n);
            } else {
                memset(chk, 0x5a, n);
                CHECK_RC(fh_get(chk, 1, remote, n), FH_OK);
                CHECK(memcmp(chk, shadow + off, n) == 0, "get",
                      "rank 1 offset %zu (%zu bytes) equal to what was put, saw a "
                      "difference", off, n);
            }
        }
        for (size_t off = 0; off < W; off += 65536) {
            size_t n = W - off < 65536 ? W - off : 65536;
            CHECK_RC(fh_get(chk, 1, (char *)tbase + off, n), FH_OK);
            CHECK(memcmp(chk, shadow + off, n) == 0, "final read-back",
                  "rank 1 bytes at %zu equal the shadow, saw a difference", off);
        }
        hash = fnv(shadow, W);
        free(shadow);
        free(buf);
        free(chk);
    }
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 1)
        hash = fnv(mine, W);
    uint64_t *all = calloc((size_t)N, sizeof *all);
    CHECK(all != NULL, "calloc", "memory, saw NULL");
    CHECK_RC(fh_allgather(&hash, all, sizeof hash), FH_OK);
    CHECK(all[0] == all[1], "target memory", "rank 1's segment hash %016" PRIx64
          " (= rank 0's shadow), saw %016" PRIx64, all[0], all[1]);
    if (me != 1) {
        for (size_t k = 0; k < W; k++)
            CHECK(mine[k] == 0, "untouched segment", "rank %d byte %zu = 0, saw 0x%02x",
                  me, k, mine[k]);
    }

    /* The idle ranks, each into its slot of rank 1's second segment. */
    if (me >= 2) {
        uint8_t buf[SLOT];
        uint64_t key = tu_key(seed, (uint64_t)me, 7);
        tu_fill(buf, SLOT, key, 0);
        char *slot = (char *)tsmall + (size_t)me * SLOT;
        CHECK_RC(fh_put(1, slot, buf, SLOT), FH_OK);
        memset(buf, 0, SLOT);
        CHECK_RC(fh_get(buf, 1, slot, SLOT), FH_OK);
        TU_VERIFY(buf, SLOT, key, 0, "rank %d reads its slot on rank 1 back", me);
    }
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 1)
        for (int r = 2; r < N; r++)
            TU_VERIFY(mysmall + (size_t)r * SLOT, SLOT, tu_key(seed, (uint64_t)r, 7), 0,
                      "rank 1's slot of rank %d", r);
    if (me == 0)
        printf("[0] hot pair: %ld ops over %zu KiB of rank 1, %d idle ranks verified\n", ops,
               kib, N > 2 ? N - 2 : 0);
    free(all);
    CHECK_RC(fh_barrier(), FH_OK);
    CHECK_RC(fh_segment_destroy(small), FH_OK);
    CHECK_RC(fh_segment_destroy(seg), FH_OK);
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 0)
        printf("PASS hot_pair_test\n");
    CHECK_RC(fh_finalize(), FH_OK);
    return 0;
}
