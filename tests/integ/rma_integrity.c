/*
 * rma_integrity.c -- data integrity of put/get in every flavour.
 *
 * Each rank owns one segment: a target area (TA, 24 MiB; 64 MiB + 8 KiB with
 * --big) that peers write to / read from, followed by a scratch area used as
 * segment-resident local buffers.  All ranks share one seed, so the plan of
 * every transfer (size, offset, mode, pattern key) is a pure function of
 * (seed, source, target, iteration) and the target can verify what its
 * sources wrote after a barrier.
 *
 *   put ring / put all-to-all (self included): 1..6 transfers per target per
 *     iteration, 1 B .. 8 MiB (powers of two, odd sizes, tiny), random
 *     offsets and source alignments, modes blocking / NB+fh_wait /
 *     NB+fh_test loop / NB+fh_wait_all / NBI+fh_wait_nbi, source in malloc'd
 *     or segment memory; 64 guard bytes on each side must stay untouched;
 *     source buffers must be unchanged after completion.
 *   get ring / get all-to-all: every target area is filled with a pattern
 *     indexed by absolute offset; random ranges are read and verified
 *     locally, guards around the local destination must stay untouched.
 *   strided: fh_put_strided (dst stride +/-, src stride +/-/0) verified by a
 *     contiguous get; fh_get_strided (remote stride +/-/0) verified locally.
 *   --big: one 64 MiB put and get to the next rank (odd offset).
 *
 * Usage: rma_integrity [--iters N] [--big]
 */
#include "testutil.h"

#include <stdbool.h>

#define MiB ((size_t)1 << 20)
#define G 64                   /* guard bytes around every transfer */
#define GUARD 0xA5
#define MAXSZ (8 * MiB)
#define MAXOPS 6

enum { M_BLOCK, M_NB_WAIT, M_NB_TEST, M_NB_WAITALL, M_NBI, M__N };
static const char *mode_name[M__N] = {"blocking", "nb+wait", "nb+test",
                                      "nb+wait_all", "nbi"};

typedef struct {
    size_t off, n;     /* offset in the target area, bytes */
    int mode;
    int seg_local;     /* local buffer in own segment scratch (else malloc) */
    size_t mis;        /* misalignment of the local buffer */
    uint64_t key;
} op_t;

static int me, N;
static fh_seg_t seg;
static uint8_t *mybase;      /* my segment */
static uint8_t **bases;      /* every rank's segment base */
static size_t TA;            /* target area bytes */
static size_t SC;            /* scratch bytes after the TA */
static size_t scratch_used;

static size_t gen_size(tu_rng_t *r, size_t cap)
{
    size_t n;
    int lg = 0;
    while (((size_t)2 << lg) <= cap) lg++;       /* 2^lg <= cap */
    switch (tu_rng_below(r, 10)) {
    case 0: case 1: case 2: case 3:              /* power of two */
        n = (size_t)1 << tu_rng_below(r, (uint64_t)lg + 1);
        break;
    case 4: case 5: case 6: case 7: {            /* random odd size */
        size_t hi = (size_t)1 << tu_rng_below(r, (uint64_t)lg + 1);
        n = (hi / 2 + tu_rng_below(r, hi / 2 + 1)) | 1;
        break;
    }
    default:                                     /* tiny */
        n = 1 + tu_rng_below(r, 64);
    }
    if (n > cap) n = cap | 1;
    if (n > cap) n = cap;
    return n ? n : 1;
}

/* The plan of source s towards target t in iteration `it` of phase `kind`,
 * inside [0, region_len) of the region.  Returns the number of ops. */
static int make_plan(int kind, int s, int t, long it, size_t region_len,
                     size_t maxsz, op_t *ops)
{
    tu_rng_t r = tu_rng_make(tu_seed, (uint64_t)s, (uint64_t)t,
                             (uint64_t)it * 16 + (uint64_t)kind);
    int k = 1 + (int)tu_rng_below(&r, MAXOPS);
    size_t sub = region_len / (size_t)k;
    for (int j = 0; j < k; j++) {
        size_t cap = sub - 2 * G;
        if (cap > maxsz) cap = maxsz;
        op_t *o = &ops[j];
        o->n = gen_size(&r, cap);
        o->off = (size_t)j * sub + G + tu_rng_below(&r, sub - 2 * G - o->n + 1);
        o->mode = (int)tu_rng_below(&r, M__N);
        o->seg_local = (int)tu_rng_below(&r, 2);
        o->mis = tu_rng_below(&r, 64);
        o->key = tu_key((uint64_t)s, (uint64_t)it * 1024 + (uint64_t)t,
                        (uint64_t)kind * 16 + (uint64_t)j);
    }
    return k;
}

/* A local buffer of n bytes (+ guards), segment scratch or malloc. */
typedef struct { uint8_t *mem; uint8_t *p; bool heap; } lbuf_t;

static lbuf_t lbuf_get(const op_t *o)
{
    lbuf_t b;
    size_t need = o->n + 2 * G + o->mis;
    if (o->seg_local && scratch_used + need + 64 <= SC) {
        b.mem = mybase + TA + scratch_used;
        scratch_used += (need + 63) & ~(size_t)63;
        b.heap = false;
    } else {
        b.mem = malloc(need);
        CHECK(b.mem != NULL, "malloc", "%zu bytes", need);
        b.heap = true;
    }
    b.p = b.mem + G + o->mis;
    return b;
}

static void lbuf_put(lbuf_t *b)
{
    if (b->heap) free(b->mem);
}

/* ------------------------------------------------------------ issuing */

typedef struct {
    op_t op;
    int target;
    lbuf_t buf;
    fh_handle_t h;
} inflight_t;

static void issue(inflight_t *f, bool is_put)
{
    int t = f->target;
    uint8_t *remote = bases[t] + f->op.off;
    int rc;
    f->h = FH_HANDLE_DONE;
    switch (f->op.mode) {
    case M_BLOCK:
        rc = is_put ? fh_put(t, remote, f->buf.p, f->op.n)
                    : fh_get(f->buf.p, t, remote, f->op.n);
        break;
    case M_NB_WAIT: case M_NB_TEST: case M_NB_WAITALL:
        rc = is_put ? fh_put_nb(t, remote, f->buf.p, f->op.n, &f->h)
                    : fh_get_nb(f->buf.p, t, remote, f->op.n, &f->h);
        break;
    default:
        rc = is_put ? fh_put_nbi(t, remote, f->buf.p, f->op.n)
                    : fh_get_nbi(f->buf.p, t, remote, f->op.n);
    }
    if (rc != FH_OK)
        tu_fail("%s %s to rank %d, %zu bytes at TA+%zu: expected FH_OK, saw %s "
                "[%s]", is_put ? "put" : "get", mode_name[f->op.mode], t,
                f->op.n, f->op.off, fh_err_name(rc), fh_last_error());
}

static void complete_all(inflight_t *fs, int nf)
{
    fh_handle_t hs[64 * MAXOPS];
    size_t nh = 0;
    bool nbi = false;
    for (int i = 0; i < nf; i++) {
        inflight_t *f = &fs[i];
        if (f->op.mode == M_NB_WAIT) {
            int rc = fh_wait(f->h);
            CHECK(rc == FH_OK, "fh_wait", "op %d to rank %d (%zu B): expected "
                  "FH_OK, saw %s [%s]", i, f->target, f->op.n,
                  fh_err_name(rc), fh_last_error());
        } else if (f->op.mode == M_NB_TEST) {
            double t0 = tu_now();
            int rc;
            while ((rc = fh_test(f->h)) == FH_ERR_AGAIN)
                CHECK(tu_now() - t0 < 60, "fh_test", "op to rank %d (%zu B) "
                      "still FH_ERR_AGAIN after 60 s", f->target, f->op.n);
            CHECK(rc == FH_OK, "fh_test", "op to rank %d (%zu B): expected "
                  "FH_OK, saw %s [%s]", f->target, f->op.n, fh_err_name(rc),
                  fh_last_error());
        } else if (f->op.mode == M_NB_WAITALL) {
            hs[nh++] = f->h;
        } else if (f->op.mode == M_NBI) {
            nbi = true;
        }
    }
    if (nh)
        CHECK_OK(fh_wait_all(hs, nh));
    if (nbi || (fs[0].op.mode & 1))     /* also call it when nothing is due */
        CHECK_OK(fh_wait_nbi());
}

/* ---------------------------------------------------------- put phases */

/* kind 0: ring (target me+1, whole TA), kind 1: all-to-all (slot per src). */
static void put_phase(int kind, long iters)
{
    const char *kname = kind == 0 ? "put ring" : "put all-to-all";
    size_t region_len = kind == 0 ? TA : TA / (size_t)N;
    region_len &= ~(size_t)63;
    size_t maxsz = MAXSZ;
    inflight_t *fs = calloc((size_t)N * MAXOPS, sizeof *fs);
    op_t ops[MAXOPS];
    unsigned long long nops = 0, nbytes = 0;

    for (long it = 0; it < iters; it++) {
        /* 1. As a target: write guards around every range my sources will
         *    write this iteration. */
        for (int s = 0; s < N; s++) {
            if (kind == 0 && (s + 1) % N != me) continue;
            size_t rbase = kind == 0 ? 0 : (size_t)s * region_len;
            int k = make_plan(kind, s, me, it, region_len, maxsz, ops);
            for (int j = 0; j < k; j++)
                memset(mybase + rbase + ops[j].off - G, GUARD,
                       ops[j].n + 2 * G);
        }
        CHECK_OK(fh_barrier());

        /* 2. As a source: issue everything, then complete. */
        int nf = 0;
        scratch_used = 0;
        for (int d = 0; d < N; d++) {
            int t = kind == 0 ? (me + 1) % N : (me + d) % N;
            if (kind == 0 && d > 0) break;
            size_t rbase = kind == 0 ? 0 : (size_t)me * region_len;
            int k = make_plan(kind, me, t, it, region_len, maxsz, ops);
            for (int j = 0; j < k; j++) {
                inflight_t *f = &fs[nf++];
                f->op = ops[j];
                f->op.off += rbase;
                f->target = t;
                f->buf = lbuf_get(&ops[j]);
                tu_fill(f->buf.p, ops[j].n, ops[j].key, 0);
                issue(f, true);
                nops++;
                nbytes += ops[j].n;
            }
        }
        complete_all(fs, nf);
        for (int i = 0; i < nf; i++) {
            TU_VERIFY(fs[i].buf.p, fs[i].op.n, fs[i].op.key, 0,
                      "%s it %ld: source buffer of %s put to rank %d changed "
                      "by the runtime", kname, it, mode_name[fs[i].op.mode],
                      fs[i].target);
            lbuf_put(&fs[i].buf);
        }
        CHECK_OK(fh_barrier());

        /* 3. As a target: verify data and guards. */
        for (int s = 0; s < N; s++) {
            if (kind == 0 && (s + 1) % N != me) continue;
            size_t rbase = kind == 0 ? 0 : (size_t)s * region_len;
            int k = make_plan(kind, s, me, it, region_len, maxsz, ops);
            for (int j = 0; j < k; j++) {
                uint8_t *p = mybase + rbase + ops[j].off;
                TU_VERIFY(p, ops[j].n, ops[j].key, 0,
                          "%s it %ld: data put by rank %d (%s, %zu B at TA+%zu,"
                          " src %s+%zu)", kname, it, s, mode_name[ops[j].mode],
                          ops[j].n, rbase + ops[j].off,
                          ops[j].seg_local ? "segment" : "malloc", ops[j].mis);
                size_t b1 = tu_check_const(p - G, G, GUARD);
                size_t b2 = tu_check_const(p + ops[j].n, G, GUARD);
                CHECK(b1 == (size_t)-1 && b2 == (size_t)-1, kname,
                      "it %ld: put by rank %d (%s, %zu B at TA+%zu) wrote "
                      "outside its range: expected guard 0x%02x, saw "
                      "0x%02x at %s", it, s, mode_name[ops[j].mode], ops[j].n,
                      rbase + ops[j].off, GUARD,
                      b1 != (size_t)-1 ? p[b1 - G] : p[ops[j].n + b2],
                      b1 != (size_t)-1 ? "start-64+x" : "end+x");
            }
        }
    }
    CHECK_OK(fh_barrier());
    TU_LOG("%s: %llu puts, %llu bytes, verified at targets\n", kname, nops,
           nbytes);
    free(fs);
}

/* ---------------------------------------------------------- get phases */

static uint64_t ta_key(int owner, int epoch)
{
    return tu_key((uint64_t)owner, (uint64_t)epoch, 0xFFFF);
}

static void get_phase(int kind, long iters, int epoch)
{
    const char *kname = kind == 0 ? "get ring" : "get all-to-all";
    /* Every rank's TA holds pattern ta_key(owner, epoch) by absolute offset. */
    tu_fill(mybase, TA, ta_key(me, epoch), 0);
    CHECK_OK(fh_barrier());

    inflight_t *fs = calloc((size_t)N * MAXOPS, sizeof *fs);
    op_t ops[MAXOPS];
    unsigned long long nops = 0, nbytes = 0;
    for (long it = 0; it < iters; it++) {
        int nf = 0;
        scratch_used = 0;
        for (int d = 0; d < N; d++) {
            int t = (me + 1 + d) % N;
            if (kind == 0 && d > 0) break;
            int k = make_plan(kind + 2, me, t, it, TA, MAXSZ, ops);
            for (int j = 0; j < k; j++) {
                inflight_t *f = &fs[nf++];
                f->op = ops[j];
                f->target = t;
                f->buf = lbuf_get(&ops[j]);
                memset(f->buf.p - G, GUARD, ops[j].n + 2 * G);
                issue(f, false);
                nops++;
                nbytes += ops[j].n;
            }
        }
        complete_all(fs, nf);
        for (int i = 0; i < nf; i++) {
            inflight_t *f = &fs[i];
            TU_VERIFY(f->buf.p, f->op.n, ta_key(f->target, epoch), f->op.off,
                      "%s it %ld: %s get from rank %d, %zu B at TA+%zu into "
                      "%s+%zu", kname, it, mode_name[f->op.mode], f->target,
                      f->op.n, f->op.off, f->op.seg_local ? "segment" : "malloc",
                      f->op.mis);
            size_t b1 = tu_check_const(f->buf.p - G, G, GUARD);
            size_t b2 = tu_check_const(f->buf.p + f->op.n, G, GUARD);
            CHECK(b1 == (size_t)-1 && b2 == (size_t)-1, kname,
                  "it %ld: %s get from rank %d (%zu B) wrote outside the local "
                  "buffer (guard %s)", it, mode_name[f->op.mode], f->target,
                  f->op.n, b1 != (size_t)-1 ? "before" : "after");
            lbuf_put(&f->buf);
        }
    }
    CHECK_OK(fh_barrier());
    TU_LOG("%s: %llu gets, %llu bytes, verified\n", kname, nops, nbytes);
    free(fs);
}

/* ------------------------------------------------------------ strided */

static void strided_phase(long iters)
{
    size_t slot = (TA / (size_t)N) & ~(size_t)63;
    size_t W = slot < MiB ? slot : MiB;
    uint8_t *exp = malloc(W), *got = malloc(W), *fill = malloc(W);
    uint8_t *src = malloc(W + 8192), *ldst = malloc(W + 8192);
    CHECK(exp && got && fill && src && ldst, "malloc", "strided buffers");
    memset(fill, GUARD, W);
    unsigned long long nput = 0, nget = 0;

    for (long it = 0; it < iters; it++) {
        for (int d = 0; d < 2; d++) {
            int t = d == 0 ? (me + 1) % N : me;     /* next rank and self */
            uint8_t *win = bases[t] + (size_t)me * slot; /* my slot at t */
            tu_rng_t r = tu_rng_make(tu_seed, (uint64_t)me, (uint64_t)t,
                                     (uint64_t)it + 99999);
            CHECK_OK(fh_put(t, win, fill, W));

            size_t blk = 1 + tu_rng_below(&r, tu_rng_below(&r, 2) ? 16 : 4096);
            ptrdiff_t dstr = (ptrdiff_t)(blk + tu_rng_below(&r, 300));
            size_t maxcount = (W - blk) / (size_t)dstr + 1;
            if (maxcount > 200) maxcount = 200;
            size_t count = 1 + tu_rng_below(&r, maxcount);
            if (tu_rng_below(&r, 2)) dstr = -dstr;
            ptrdiff_t sstr;
            switch (tu_rng_below(&r, 3)) {
            case 0: sstr = 0; break;
            case 1: sstr = (ptrdiff_t)(blk + tu_rng_below(&r, 16)); break;
            default: sstr = -(ptrdiff_t)(blk + tu_rng_below(&r, 16));
            }
            size_t sspan = (count - 1) * (size_t)(sstr < 0 ? -sstr : sstr) + blk;
            size_t dspan = (count - 1) * (size_t)(dstr < 0 ? -dstr : dstr) + blk;
            if (sspan > W + 4096) { sstr = 0; sspan = blk; }
            uint64_t key = tu_key((uint64_t)me, (uint64_t)it, 777 + (uint64_t)d);
            tu_fill(src, sspan, key, 0);
            const uint8_t *s0 = sstr < 0 ? src + sspan - blk : src;
            size_t d0 = dstr < 0 ? dspan - blk : 0;

            memset(exp, GUARD, W);
            for (size_t i = 0; i < count; i++)
                memcpy(exp + d0 + (ptrdiff_t)i * dstr, s0 + (ptrdiff_t)i * sstr,
                       blk);
            int rc = fh_put_strided(t, win + d0, dstr, s0, sstr, blk, count);
            CHECK(rc == FH_OK, "fh_put_strided", "to rank %d blk %zu count %zu "
                  "dst_stride %td src_stride %td: expected FH_OK, saw %s [%s]",
                  t, blk, count, dstr, sstr, fh_err_name(rc), fh_last_error());
            CHECK_OK(fh_get(got, t, win, W));
            for (size_t i = 0; i < W; i++)
                if (got[i] != exp[i])
                    tu_fail("fh_put_strided to rank %d (blk %zu count %zu "
                            "dst_stride %td src_stride %td): byte %zu of the "
                            "window: expected 0x%02x, saw 0x%02x", t, blk,
                            count, dstr, sstr, i, exp[i], got[i]);
            nput++;

            /* get_strided from the window (content = exp): remote stride may
             * be 0 or negative, local stride nonzero. */
            size_t gblk = 1 + tu_rng_below(&r, 2048);
            ptrdiff_t lstr = (ptrdiff_t)(gblk + tu_rng_below(&r, 64));
            size_t gcount = 1 + tu_rng_below(&r, (W + 4096 - gblk) /
                                              (size_t)lstr < 100 ?
                                              (W + 4096 - gblk) / (size_t)lstr
                                              : 100);
            if (tu_rng_below(&r, 2)) lstr = -lstr;
            ptrdiff_t rstr;
            switch (tu_rng_below(&r, 3)) {
            case 0: rstr = 0; break;
            case 1: rstr = (ptrdiff_t)tu_rng_below(&r, 1000); break;
            default: rstr = -(ptrdiff_t)tu_rng_below(&r, 1000);
            }
            size_t rspan = (gcount - 1) * (size_t)(rstr < 0 ? -rstr : rstr) + gblk;
            if (rspan > W) { rstr = 0; rspan = gblk; }
            size_t lspan = (gcount - 1) * (size_t)(lstr < 0 ? -lstr : lstr) + gblk;
            size_t r0 = rstr < 0 ? rspan - gblk : 0;
            size_t l0 = lstr < 0 ? lspan - gblk : 0;
            memset(ldst, 0x5A, lspan);
            rc = fh_get_strided(ldst + l0, lstr, t, win + r0, rstr, gblk, gcount);
            CHECK(rc == FH_OK, "fh_get_strided", "from rank %d blk %zu count "
                  "%zu dst_stride %td src_stride %td: expected FH_OK, saw %s "
                  "[%s]", t, gblk, gcount, lstr, rstr, fh_err_name(rc),
                  fh_last_error());
            uint8_t *lexp = malloc(lspan);
            memset(lexp, 0x5A, lspan);
            for (size_t i = 0; i < gcount; i++)
                memcpy(lexp + l0 + (ptrdiff_t)i * lstr,
                       exp + r0 + (ptrdiff_t)i * rstr, gblk);
            for (size_t i = 0; i < lspan; i++)
                if (ldst[i] != lexp[i])
                    tu_fail("fh_get_strided from rank %d (blk %zu count %zu "
                            "dst_stride %td src_stride %td): local byte %zu: "
                            "expected 0x%02x, saw 0x%02x", t, gblk, gcount,
                            lstr, rstr, i, lexp[i], ldst[i]);
            free(lexp);
            nget++;
        }
    }
    CHECK_OK(fh_barrier());
    TU_LOG("strided: %llu put_strided + %llu get_strided verified (next rank "
           "and self)\n", nput, nget);
    free(exp); free(got); free(fill); free(src); free(ldst);
}

/* ----------------------------------------------------------- big + self */

static void big_phase(void)
{
    size_t n = 64 * MiB;
    size_t off = 4095;               /* odd remote offset */
    int t = (me + 1) % N, s = (me + N - 1) % N;
    uint8_t *buf = malloc(n + 1);
    CHECK(buf != NULL, "malloc", "64 MiB");
    uint8_t *p = buf + 1;            /* odd local address */
    tu_fill(p, n, tu_key((uint64_t)me, 5555, 1), 0);
    memset(mybase, GUARD, TA);
    CHECK_OK(fh_barrier());
    double t0 = tu_now();
    CHECK_OK(fh_put(t, bases[t] + off, p, n));
    double t1 = tu_now();
    CHECK_OK(fh_barrier());
    TU_VERIFY(mybase + off, n, tu_key((uint64_t)s, 5555, 1), 0,
              "big: 64 MiB put from rank %d at TA+%zu", s, off);
    CHECK(tu_check_const(mybase, off, GUARD) == (size_t)-1 &&
          tu_check_const(mybase + off + n, TA - off - n, GUARD) == (size_t)-1,
          "big put", "bytes outside the 64 MiB range changed");
    CHECK_OK(fh_barrier());
    memset(p, 0, n);
    double t2 = tu_now();
    CHECK_OK(fh_get(p, t, bases[t] + off, n));
    double t3 = tu_now();
    TU_VERIFY(p, n, tu_key((uint64_t)me, 5555, 1), 0,
              "big: 64 MiB get back from rank %d", t);
    TU_LOG("big: 64 MiB put %.1f ms, get %.1f ms, verified\n",
           (t1 - t0) * 1e3, (t3 - t2) * 1e3);
    free(buf);
    CHECK_OK(fh_barrier());
}

static void self_phase(void)
{
    /* Segment-to-segment and heap-to-segment copies to my own rank. */
    size_t sizes[] = {1, 7, 64, 4097, 65536 + 3, 3 * MiB + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        uint64_t key = tu_key((uint64_t)me, 6666, i);
        uint8_t *src = mybase + TA + 5;          /* scratch */
        tu_fill(src, n, key, 0);
        CHECK_OK(fh_put(me, mybase + 3, src, n));
        TU_VERIFY(mybase + 3, n, key, 0, "self put %zu B segment->segment", n);
        uint8_t *h = malloc(n);
        CHECK_OK(fh_get(h, me, mybase + 3, n));
        TU_VERIFY(h, n, key, 0, "self get %zu B", n);
        fh_handle_t hd;
        memset(h, 0, n);
        CHECK_OK(fh_get_nb(h, me, mybase + 3, n, &hd));
        CHECK_OK(fh_wait(hd));
        TU_VERIFY(h, n, key, 0, "self get_nb %zu B", n);
        free(h);
    }
    TU_LOG("self: blocking and NB put/get to own rank verified\n");
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("rma_integrity");
    me = fh_rank();
    N = fh_nranks();
    long iters = tu_opt(argc, argv, "--iters", tu_scale(N <= 4 ? 12 : 6));
    bool big = tu_flag(argc, argv, "--big");
    tu_seed_init();

    TA = big ? 64 * MiB + 8192 : 24 * MiB;
    SC = 8 * MiB + 64 * 1024;
    void *lb = NULL;
    CHECK_OK(fh_segment_create(TA + SC, &seg, &lb));
    mybase = lb;
    CHECK(mybase != NULL, "fh_segment_create", "local base NULL for %zu B",
          TA + SC);
    bases = calloc((size_t)N, sizeof *bases);
    for (int r = 0; r < N; r++) {
        void *b; size_t sz;
        CHECK_OK(fh_segment_query(seg, r, &b, &sz));
        CHECK(sz == TA + SC, "fh_segment_query", "rank %d size: expected %zu, "
              "saw %zu", r, TA + SC, sz);
        bases[r] = b;
    }
    CHECK(bases[me] == mybase, "fh_segment_query", "own base: expected %p, "
          "saw %p", (void *)mybase, (void *)bases[me]);
    TU_SAY("rma_integrity: %d ranks, target area %zu B, %ld iterations/phase\n",
           N, TA, iters);

    self_phase();
    CHECK_OK(fh_barrier());
    put_phase(0, iters);
    put_phase(1, iters);
    get_phase(0, iters, 1);
    get_phase(1, iters, 2);
    strided_phase(iters * 4);
    if (big)
        big_phase();

    CHECK_OK(fh_quiet());
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("PASS rma_integrity\n");
    CHECK_OK(fh_finalize());
    return 0;
}
