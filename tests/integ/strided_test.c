/*
 * strided_test.c -- fh_put_strided / fh_get_strided at scale and at the
 * edges of the net route's two ways (strided.c): blocks packed into AMs
 * up to FH_STRIDED_AM_MAX, one RMA per block above it.
 *
 * Every rank works on its own window in the next rank's segment:
 *   scale:  1M blocks of 8 B at stride 16 (a(1:2N:2) of 8-byte elements)
 *           put and get, each verified byte for byte, gaps untouched;
 *   shapes: for block sizes around the threshold (8, 2047, 2048, 2049,
 *           4096 B) and destination/source strides positive, negative
 *           and zero (put: source 0 broadcasts; get: remote 0 repeats),
 *           put then contiguous get of the window against a local model,
 *           and get against the model;
 *   bad input: stride * count overflowing (FH_ERR_OVERFLOW), a hull that
 *           leaves the segment by one byte (FH_ERR_OUT_OF_SEGMENT), a zero
 *           destination stride (FH_ERR_INVALID): nothing written at the
 *           target, nothing written in a get's buffer.
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define GUARD 0xC3
static int me, N, peer;
static uint8_t *win;          /* my window in peer's segment */
static uint8_t *segstart;     /* peer's segment */
static size_t W;              /* window bytes */

/* The window at peer must equal exp. */
static void expect_window(const uint8_t *exp, const char *what)
{
    uint8_t *got = malloc(W);
    CHECK(got != NULL, "malloc", "%zu", W);
    CHECK_OK(fh_get(got, peer, win, W));
    for (size_t i = 0; i < W; i++)
        if (got[i] != exp[i])
            tu_fail("%s: byte %zu of the window at rank %d: expected 0x%02x, saw 0x%02x",
                    what, i, peer, exp[i], got[i]);
    free(got);
}

static void scale_phase(void)
{
    const size_t count = (size_t)1 << 20, blk = 8;
    const ptrdiff_t st = 16;
    uint8_t *src = malloc(W), *exp = malloc(W), *back = malloc(W);
    CHECK(src && exp && back, "malloc", "scale buffers");
    uint64_t key = tu_key((uint64_t)me, 1, 1);
    tu_fill(src, W, key, 0);
    memset(exp, GUARD, W);
    CHECK_OK(fh_put(peer, win, exp, W));
    for (size_t i = 0; i < count; i++)
        memcpy(exp + i * st, src + i * st, blk);
    int rc = fh_put_strided(peer, win, st, src, st, blk, count);
    CHECK(rc == FH_OK, "fh_put_strided", "1M x 8 B to rank %d: expected FH_OK, saw %s [%s]",
          peer, fh_err_name(rc), fh_last_error());
    expect_window(exp, "fh_put_strided 1M x 8 B at stride 16");
    memset(back, 0x5A, W);
    rc = fh_get_strided(back + 8, st, peer, win, st, blk, count);
    CHECK(rc == FH_OK, "fh_get_strided", "1M x 8 B from rank %d: expected FH_OK, saw %s [%s]",
          peer, fh_err_name(rc), fh_last_error());
    for (size_t i = 0; i < W; i++) {
        uint8_t want = (i % 16) >= 8 ? exp[i - 8] : 0x5A;
        if (back[i] != want)
            tu_fail("fh_get_strided 1M x 8 B at stride 16 (local offset 8): byte %zu: "
                    "expected 0x%02x, saw 0x%02x", i, want, back[i]);
    }
    TU_SAY("scale: 1M x 8 B strided put and get verified\n");
    free(src), free(exp), free(back);
}

static void shape(size_t blk, size_t count, int dsign, int ssign, int it)
{
    ptrdiff_t dstr = (ptrdiff_t)(blk + 24) * dsign;
    ptrdiff_t sstr = (ptrdiff_t)(blk + 8) * ssign;
    size_t dspan = (count - 1) * (blk + 24) + blk;
    size_t sspan = ssign ? (count - 1) * (blk + 8) + blk : blk;
    CHECK(dspan <= W && sspan <= W, "test", "shape too big");
    uint8_t *src = malloc(sspan), *exp = malloc(W), *back = malloc(dspan);
    CHECK(src && exp && back, "malloc", "shape buffers");
    uint64_t key = tu_key((uint64_t)me, (uint64_t)blk, (uint64_t)it);
    tu_fill(src, sspan, key, 0);
    memset(exp, GUARD, W);
    CHECK_OK(fh_put(peer, win, exp, W));
    const uint8_t *s0 = sstr < 0 ? src + sspan - blk : src;
    size_t d0 = dstr < 0 ? dspan - blk : 0;
    for (size_t i = 0; i < count; i++)
        memcpy(exp + d0 + (ptrdiff_t)i * dstr, s0 + (ptrdiff_t)i * sstr, blk);
    int rc = fh_put_strided(peer, win + d0, dstr, s0, sstr, blk, count);
    char what[160];
    snprintf(what, sizeof what, "fh_put_strided blk %zu count %zu dst_stride %td "
             "src_stride %td", blk, count, dstr, sstr);
    CHECK(rc == FH_OK, what, "expected FH_OK, saw %s [%s]", fh_err_name(rc), fh_last_error());
    expect_window(exp, what);
    /* get it back into a layout mirrored the same way; remote stride 0
     * repeats the first destination block. */
    for (int rzero = 0; rzero < 2; rzero++) {
        ptrdiff_t rstr = rzero ? 0 : dstr;
        memset(back, 0x5A, dspan);
        rc = fh_get_strided(back + d0, dstr, peer, win + d0, rstr, blk, count);
        snprintf(what, sizeof what, "fh_get_strided blk %zu count %zu local_stride %td "
                 "remote_stride %td", blk, count, dstr, rstr);
        CHECK(rc == FH_OK, what, "expected FH_OK, saw %s [%s]", fh_err_name(rc),
              fh_last_error());
        for (size_t i = 0; i < count; i++) {
            const uint8_t *g = back + d0 + (ptrdiff_t)i * dstr;
            const uint8_t *e = exp + d0 + (ptrdiff_t)(rzero ? 0 : i) * dstr;
            if (memcmp(g, e, blk) != 0)
                tu_fail("%s: block %zu differs from the target's", what, i);
        }
    }
    free(src), free(exp), free(back);
}

static void bad_input_phase(void)
{
    uint8_t *exp = malloc(W), *buf = malloc(W);
    CHECK(exp && buf, "malloc", "bad input buffers");
    memset(exp, GUARD, W);
    CHECK_OK(fh_put(peer, win, exp, W));
    memset(buf, 0x77, W);
    /* stride * count overflows */
    CHECK_RC(fh_put_strided(peer, win, PTRDIFF_MAX, buf, 8, 8, 4), FH_ERR_OVERFLOW);
    CHECK_RC(fh_get_strided(buf, 8, peer, win, PTRDIFF_MAX, 8, 4), FH_ERR_OVERFLOW);
    CHECK_RC(fh_put_strided(peer, win, -PTRDIFF_MAX, buf, 8, 8, 4), FH_ERR_OVERFLOW);
    /* the last block leaves the segment by one byte (the window is the
     * segment's last W bytes) */
    size_t count = W / 16 + 1;
    CHECK_RC(fh_put_strided(peer, win, 16, buf, 16, 8, count - 1), FH_OK);
    CHECK_OK(fh_put(peer, win, exp, W));            /* reset */
    CHECK_RC(fh_put_strided(peer, win + 9, 16, buf, 16, 8, count - 1),
             FH_ERR_OUT_OF_SEGMENT);
    /* ... or leaves it below its start */
    uint8_t before[16], first[16];
    CHECK_OK(fh_get(before, peer, segstart, 16));
    CHECK_RC(fh_put_strided(peer, segstart + 8, -16, buf, 16, 8, 2),
             FH_ERR_OUT_OF_SEGMENT);
    CHECK_RC(fh_put_strided(peer, win, 0, buf, 16, 8, 2), FH_ERR_INVALID);
    CHECK_OK(fh_get(first, peer, segstart, 16));
    CHECK(memcmp(before, first, 16) == 0, "refused fh_put_strided",
          "wrote into the segment's first 16 bytes");
    expect_window(exp, "refused strided puts (overflow, outside the segment, zero stride)");
    memset(buf, 0x77, W);
    CHECK_RC(fh_get_strided(buf, 16, peer, win + 9, 16, 8, count - 1),
             FH_ERR_OUT_OF_SEGMENT);
    for (size_t i = 0; i < W; i++)
        if (buf[i] != 0x77)
            tu_fail("refused fh_get_strided wrote byte %zu of its buffer (0x%02x)", i,
                    buf[i]);
    TU_SAY("bad input: overflow, out of segment and zero stride refused, nothing "
           "written\n");
    free(exp), free(buf);
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("strided_test");
    me = fh_rank();
    N = fh_nranks();
    peer = (me + 1) % N;
    tu_seed_init();
    W = (size_t)16 << 20;              /* 1M blocks at stride 16 */
    fh_seg_t seg;
    void *lb;
    CHECK_OK(fh_segment_create(W * (size_t)N, &seg, &lb));
    void *pb;
    size_t sz;
    CHECK_OK(fh_segment_query(seg, peer, &pb, &sz));
    /* my window: the (me)-th W bytes; rank N-1's is the segment's end */
    win = (uint8_t *)pb + (size_t)me * W;
    segstart = pb;
    CHECK_OK(fh_barrier());

    scale_phase();
    static const size_t blks[] = {8, 2047, 2048, 2049, 4096};
    int it = 0;
    for (size_t b = 0; b < sizeof blks / sizeof blks[0]; b++)
        for (int ds = -1; ds <= 1; ds += 2)
            for (int ss = -1; ss <= 1; ss++)
                shape(blks[b], blks[b] < 64 ? 5000 : 300, ds, ss, it++);
    TU_SAY("shapes: blocks 8..4096 B, strides +/-/0 verified\n");
    CHECK_OK(fh_barrier());
    if (me == N - 1)
        bad_input_phase();
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("PASS strided_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
