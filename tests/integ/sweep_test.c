/*
 * sweep_test.c -- sweeps a working set much larger than the firehose budget.
 *
 * Meant for FH_REG_STRATEGY=firehose with a small FH_FIREHOSE_M (see
 * sweep_test.sh): each rank owns a segment of --mib MiB (default 4) and does
 * random puts and gets of 8 B .. 64 KiB, random offsets, on the next rank's
 * segment (ring: it is the only writer there), keeping a local shadow copy.
 * Every get is checked against the shadow; a final sweep reads the whole
 * remote segment back.  The cache must miss, move and evict all along.
 *
 * Usage: sweep_test [--ops N] [--mib M]
 */
#include "testutil.h"

int main(int argc, char **argv)
{
    long ops = tu_opt(argc, argv, "--ops", 4000);
    size_t mib = (size_t)tu_opt(argc, argv, "--mib", 4);
    CHECK_RC(fh_init(&argc, &argv), FH_OK);
    tu_init_rank("sweep_test");
    int me = fh_rank(), N = fh_nranks();
    uint64_t seed = tu_seed_init();
    size_t W = mib << 20;
    fh_seg_t seg;
    void *mybase;
    CHECK_RC(fh_segment_create(W, &seg, &mybase), FH_OK);
    int tgt = (me + 1) % N;
    void *tbase;
    size_t tsize;
    CHECK_RC(fh_segment_query(seg, tgt, &tbase, &tsize), FH_OK);
    CHECK(tsize == W, "segment size", "%zu, saw %zu", W, tsize);
    uint8_t *shadow = calloc(1, W);
    uint8_t *buf = malloc(65536), *chk = malloc(65536);
    CHECK(shadow && buf && chk, "malloc", "memory, saw NULL");
    tu_rng_t rng = tu_rng_make(seed, (uint64_t)me, 1, 2);
    long puts = 0, gets = 0;
    for (long i = 0; i < ops; i++) {
        size_t n = (size_t)8 << tu_rng_below(&rng, 14);   /* 8 B .. 64 KiB */
        n += tu_rng_below(&rng, n);                        /* odd sizes too */
        if (n > 65536)
            n = 65536;
        size_t off = (size_t)tu_rng_below(&rng, W - n + 1);
        char *remote = (char *)tbase + off;
        if (tu_rng_below(&rng, 2) == 0) {
            for (size_t k = 0; k < n; k++)
                buf[k] = (uint8_t)tu_rng_next(&rng);
            if (tu_rng_below(&rng, 4) == 0) {
                CHECK_RC(fh_put_nbi(tgt, remote, buf, n), FH_OK);
                CHECK_RC(fh_wait_nbi(), FH_OK);
            } else {
                CHECK_RC(fh_put(tgt, remote, buf, n), FH_OK);
            }
            memcpy(shadow + off, buf, n);
            puts++;
        } else {
            memset(chk, 0x5a, n);
            CHECK_RC(fh_get(chk, tgt, remote, n), FH_OK);
            if (memcmp(chk, shadow + off, n) != 0) {
                size_t k = 0;
                while (chk[k] == shadow[off + k])
                    k++;
                CHECK(0, "get", "rank %d offset %zu byte %zu of %zu: 0x%02x, saw 0x%02x",
                      tgt, off, k, n, shadow[off + k], chk[k]);
            }
            gets++;
        }
    }
    /* Final sweep: the whole remote segment. */
    for (size_t off = 0; off < W; off += 65536) {
        CHECK_RC(fh_get(chk, tgt, (char *)tbase + off, 65536), FH_OK);
        CHECK(memcmp(chk, shadow + off, 65536) == 0, "final sweep",
              "remote bytes at %zu equal the shadow, saw a difference", off);
    }
    CHECK_RC(fh_barrier(), FH_OK);
    printf("[%d] sweep: %ld puts, %ld gets over %zu MiB of rank %d verified\n", me, puts,
           gets, mib, tgt);
    CHECK_RC(fh_segment_destroy(seg), FH_OK);
    free(shadow);
    free(buf);
    free(chk);
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 0)
        printf("PASS sweep_test\n");
    CHECK_RC(fh_finalize(), FH_OK);
    return 0;
}
