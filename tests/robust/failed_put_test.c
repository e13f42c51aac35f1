/*
 * failed_put_test.c -- issue 29, class 2: a failed call changes nothing
 * (FH_SEGMENT=everything).  Rank 1 maps an area of 3 MiB + 20 KiB, aligned
 * to 4 MiB, whose end is inside a firehose bucket, followed by a page it
 * made PROT_NONE and then by a hole; rank 0 puts ranges that start in the
 * area and end past it (by 1 byte, a page, into the hole).  Each put must
 * fail with FH_ERR_OUT_OF_SEGMENT and fh_last_error() naming rank 1; at
 * the target, no byte of the refused frame piece may change
 * (docs/reliability.md: a transfer is checked piece by piece, each piece
 * the part of it inside one FH_REGION_MAX frame; pieces before the failing
 * one may have been written).  Gets of the same ranges must fail too and
 * leave the destination bytes of the refused piece unchanged.
 * Sizes 1, 8, 3000 (put-in-move), 4097, 64 KiB + 17, 1 MiB + 4096 (two
 * frames); FH_TEST_LONG=1 adds more sizes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../integ/testutil.h"

#define AREA ((3u << 20) + 20 * 1024)
#define FRAME (1u << 20)   /* FH_REGION_MAX default; the script keeps it */

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("failed_put_test");
    tu_seed_init();
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    int me = fh_rank();
    CHECK(fh_nranks() == 2, "ranks", "expected 2, saw %d", fh_nranks());
    fh_info_t info = FH_INFO_INIT;
    CHECK_OK(fh_query(&info));
    if (!info.any_address) {
        TU_SAY("SKIP failed_put_test: FH_SEGMENT=everything is not in use\n");
        return fh_finalize() == FH_OK ? 0 : 1;
    }
    uint64_t base = 0, bases[2];
    if (me == 1) {
        /* 8 MiB reserved, the area at its 4 MiB-aligned part: page AREA
         * is PROT_NONE, the rest unmapped. */
        char *r = mmap(NULL, 8u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        CHECK(r != MAP_FAILED, "mmap", "%s", strerror(errno));
        char *a = (char *)(((uintptr_t)r + (4u << 20) - 1) & ~(uintptr_t)((4u << 20) - 1));
        if (a > r)
            munmap(r, (size_t)(a - r));
        CHECK(mprotect(a + AREA, pg, PROT_NONE) == 0, "mprotect", "%s", strerror(errno));
        munmap(a + AREA + pg, (size_t)(r + (8u << 20) - (a + AREA + pg)));
        memset(a, 0, AREA);
        base = (uintptr_t)a;
    }
    CHECK_OK(fh_allgather(&base, bases, sizeof base));
    char *area = (char *)(uintptr_t)bases[1];
    int longrun = getenv("FH_TEST_LONG") != NULL;
    static const size_t sizes_s[] = {1, 8, 3000, 4097, 65536 + 17, (1u << 20) + 4096};
    static const size_t sizes_l[] = {1, 2, 8, 64, 129, 3000, 3072, 4096, 4097, 65536,
                                     65536 + 17, 300000, (1u << 20) + 4096, 2u << 20};
    const size_t *sizes = longrun ? sizes_l : sizes_s;
    size_t nsizes = longrun ? sizeof sizes_l / sizeof *sizes_l : sizeof sizes_s / sizeof *sizes_s;
    /* How far past the area's end each range reaches. */
    static const size_t past[] = {1, 4096, 4096 + 100};
    char *buf = malloc((2u << 20) + 8192), *dst = malloc((2u << 20) + 8192);
    CHECK(buf && dst, "malloc", "buffers");
    int nbad = 0, ntried = 0;
    for (size_t si = 0; si < nsizes; si++)
        for (size_t pi = 0; pi < sizeof past / sizeof *past; pi++) {
            size_t n = sizes[si] + past[pi];
            char *at = area + AREA + past[pi] - n;     /* ends past[pi] bytes after */
            if (me == 0) {
                ntried++;
                tu_fill(buf, n, tu_key(si, pi, 1), 0);
                int rc = fh_put(1, at, buf, n);
                const char *e = fh_last_error();
                if (rc != FH_ERR_OUT_OF_SEGMENT || e == NULL || !strstr(e, "rank 1")) {
                    TU_LOG("FAIL put [%p +%zu] (%zu past the end): %s, '%s'; expected "
                           "FH_ERR_OUT_OF_SEGMENT naming rank 1\n", (void *)at, n, past[pi],
                           fh_err_name(rc), e ? e : "");
                    nbad++;
                }
                memset(dst, 0x77, n);
                rc = fh_get(dst, 1, at, n);
                /* The refused piece: the last frame the range meets. */
                uintptr_t lastf = ((uintptr_t)at + n - 1) & ~(uintptr_t)(FRAME - 1);
                size_t keep = lastf > (uintptr_t)at ? lastf - (uintptr_t)at : 0;
                if (rc != FH_ERR_OUT_OF_SEGMENT ||
                    tu_check_const(dst + keep, n - keep, 0x77) != (size_t)-1) {
                    TU_LOG("FAIL get [%p +%zu]: %s; expected FH_ERR_OUT_OF_SEGMENT and the "
                           "refused piece's %zu destination bytes unchanged\n", (void *)at, n,
                           fh_err_name(rc), n - keep);
                    nbad++;
                }
            }
            CHECK_OK(fh_barrier());
            if (me == 1) {
                /* Nothing of the refused piece written; earlier frames of
                 * the range may have been (documented), then we clear them. */
                uintptr_t lastf = ((uintptr_t)at + n - 1) & ~(uintptr_t)(FRAME - 1);
                char *from = (uintptr_t)at > lastf ? at : (char *)lastf;
                size_t len = (size_t)(area + AREA - from);
                size_t k = tu_check_const(from, len, 0);
                if (k != (size_t)-1) {
                    TU_LOG("FAIL the refused put [%p +%zu] wrote byte %p (%zu of the %zu "
                           "bytes of its last piece)\n", (void *)at, n, (void *)(from + k), k,
                           len);
                    nbad++;
                }
                memset(area, 0, AREA);
            }
            CHECK_OK(fh_barrier());
        }
    int all[2];
    CHECK_OK(fh_allgather(&nbad, all, sizeof nbad));
    if (me == 0)
        TU_LOG("%d of %d refused transfers misbehaved (rank 1 saw %d)\n", all[0], ntried,
               all[1]);
    CHECK(all[0] + all[1] == 0, "failed calls change nothing", "0 failures, saw %d + %d",
          all[0], all[1]);
    free(buf);
    free(dst);
    TU_SAY("PASS failed_put_test\n");
    return fh_finalize() == FH_OK ? 0 : 1;
}
