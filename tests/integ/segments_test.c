/*
 * segments_test.c -- the segment promises of include/firehose.h.
 *
 *   sizes: segment A has a different size on every rank and size 0 on
 *     rank 1; fh_segment_query gives every rank the size each rank passed
 *     and base NULL exactly for the empty piece (local_base too).  Every
 *     byte of each non-empty piece is reachable (a put of the whole piece,
 *     verified by its owner; the last byte alone; a 64-bit atomic on the
 *     last whole word); one byte past the end, a range straddling the end
 *     and any address at the empty rank are FH_ERR_OUT_OF_SEGMENT.
 *   second: segment B, created while A lives, takes RMA and atomics; A
 *     still does afterwards.
 *   adjacent: several more segments are created until, on every rank, two
 *     of them touch (one ends where the other begins); a put or get that
 *     spans the seam is FH_ERR_OUT_OF_SEGMENT although every byte is in some
 *     segment, and puts up to the seam from either side work.  If mmap
 *     never places two touching (FH_REG_STRATEGY=firehose aligns pieces to
 *     buckets, which leaves gaps), the test says so and checks the ends;
 *     with --require-seam (the driver gives it for pin-everything, whose
 *     pieces are plain page-rounded mmaps) that is a failure.
 *   destroyed: after fh_segment_destroy(B), put, get, NB, NBI, strided and
 *     atomic calls into B's old range are FH_ERR_OUT_OF_SEGMENT,
 *     fh_segment_query(B) is FH_ERR_INVALID, and A still works.
 *
 * Usage: segments_test [--require-seam]
 */
#include "testutil.h"

static int me, N;

static size_t size_a(int r)
{
    return r == 1 ? 0 : 4096 * (size_t)(r + 1) + 100 * (size_t)r + 3;
}

/* Every rank's piece of seg: bases[r], sizes[r]. */
static void query_all(fh_seg_t seg, char **bases, size_t *sizes)
{
    for (int r = 0; r < N; r++) {
        void *b = (void *)1;
        CHECK_OK(fh_segment_query(seg, r, &b, &sizes[r]));
        bases[r] = b;
    }
}

/* Round of puts: rank r fills the whole piece of rank (r+1)%N; each owner
 * verifies its piece after a barrier. */
static void fill_ring(char **bases, const size_t *sizes, char *local, uint64_t tag)
{
    int t = (me + 1) % N;
    if (sizes[t] > 0) {
        char *src = malloc(sizes[t]);
        CHECK(src != NULL, "malloc", "memory");
        tu_fill(src, sizes[t], tu_key((uint64_t)me, tag, 1), 0);
        CHECK_OK(fh_put(t, bases[t], src, sizes[t]));
        free(src);
    }
    CHECK_OK(fh_barrier());
    int from = (me + N - 1) % N;
    if (sizes[me] > 0)
        TU_VERIFY(local, sizes[me], tu_key((uint64_t)from, tag, 1), 0,
                  "piece of %zu bytes filled by rank %d (tag %" PRIu64 ")", sizes[me], from,
                  tag);
    CHECK_OK(fh_barrier());
}

static void check_ends(int t, char *base, size_t size)
{
    uint8_t b = 0x5c, back = 0;
    uint64_t old = 0, word[2] = {0};
    if (size == 0) {
        CHECK_RC(fh_put(t, base + 64, &b, 1), FH_ERR_OUT_OF_SEGMENT);
        return;
    }
    CHECK_OK(fh_put(t, base + size - 1, &b, 1));
    CHECK_OK(fh_get(&back, t, base + size - 1, 1));
    CHECK(back == b, "last byte", "0x%02x back, saw 0x%02x", b, back);
    CHECK_RC(fh_put(t, base + size, &b, 1), FH_ERR_OUT_OF_SEGMENT);
    CHECK_RC(fh_get(&back, t, base + size, 1), FH_ERR_OUT_OF_SEGMENT);
    CHECK_RC(fh_put(t, base + size - 8, word, 16), FH_ERR_OUT_OF_SEGMENT);
    CHECK_RC(fh_get(word, t, base + size - 8, 16), FH_ERR_OUT_OF_SEGMENT);
    CHECK_RC(fh_put(t, base - 1, &b, 1), FH_ERR_OUT_OF_SEGMENT);
    uint64_t *last = (uint64_t *)(((uintptr_t)base + size - 8) & ~(uintptr_t)7);
    CHECK_OK(fh_atomic(t, last, FH_AOP_SWAP, 0x1234, 0, &old));
    CHECK_OK(fh_atomic(t, last, FH_AOP_FETCH, 0, 0, &old));
    CHECK(old == 0x1234, "atomic on the last word", "0x1234, saw 0x%" PRIx64, old);
    CHECK_RC(fh_atomic(t, last + 1, FH_AOP_FETCH, 0, 0, &old), FH_ERR_OUT_OF_SEGMENT);
}

static void sizes_phase(fh_seg_t a, char *la, char **ba, size_t *sa)
{
    for (int r = 0; r < N; r++) {
        CHECK(sa[r] == size_a(r), "fh_segment_query size", "rank %d: %zu, saw %zu", r,
              size_a(r), sa[r]);
        CHECK((ba[r] == NULL) == (sa[r] == 0), "fh_segment_query base",
              "rank %d: NULL exactly when the size is 0, saw %p for size %zu", r,
              (void *)ba[r], sa[r]);
    }
    CHECK(la == ba[me], "local_base", "the base fh_segment_query gives (%p), saw %p",
          (void *)ba[me], (void *)la);
    fill_ring(ba, sa, la, 1);
    /* Ends, in turns (the pieces' last bytes are shared targets). */
    for (int i = 0; i < N; i++) {
        if (me == i)
            for (int t = 0; t < N; t++)
                check_ends(t, ba[t], sa[t]);
        CHECK_OK(fh_barrier());
    }
    /* The empty rank: even an address inside someone else's piece. */
    if (N > 1 && ba[0] != NULL) {
        uint8_t b = 1;
        CHECK_RC(fh_put(1, ba[0], &b, 1), FH_ERR_OUT_OF_SEGMENT);
        uint64_t v;
        CHECK_RC(fh_atomic(1, (uint64_t *)ba[0], FH_AOP_FETCH, 0, 0, &v),
                 FH_ERR_OUT_OF_SEGMENT);
    }
    (void)a;
    TU_SAY("sizes: ok (pieces of %zu..%zu bytes, rank 1 empty)\n", size_a(0),
           size_a(N - 1));
}

#define BSIZE ((size_t)64 << 10)
#define MAXADJ 16

/* A put/get across the seam between two touching pieces of rank t. */
static int seam_phase(void)
{
    fh_seg_t s[MAXADJ];
    char **b = calloc((size_t)N * MAXADJ, sizeof *b);
    CHECK(b != NULL, "calloc", "memory");
    int made = 0, found = 0;
    char *lo = NULL, *hi = NULL;   /* on rank (me+1)%N: lo's piece ends at hi */
    int t = (me + 1) % N;
    while (made < MAXADJ) {
        CHECK_OK(fh_segment_create(BSIZE, &s[made], NULL));
        for (int r = 0; r < N; r++)
            CHECK_OK(fh_segment_query(s[made], r, (void **)&b[made * N + r], NULL));
        made++;
        if (!found)
            for (int i = 0; i < made && !found; i++)
                for (int j = 0; j < made && !found; j++)
                    if (b[i * N + t] + BSIZE == b[j * N + t]) {
                        lo = b[i * N + t];
                        hi = b[j * N + t];
                        found = 1;
                    }
        if (tu_job_sum((uint64_t)found) == (uint64_t)N)
            break;
    }
    uint64_t w[4] = {1, 2, 3, 4}, r[4];
    if (found) {
        CHECK_RC(fh_put(t, hi - 8, w, 16), FH_ERR_OUT_OF_SEGMENT);
        CHECK_RC(fh_get(r, t, hi - 8, 16), FH_ERR_OUT_OF_SEGMENT);
        static char whole[BSIZE + 1];
        CHECK_RC(fh_put(t, lo, whole, BSIZE + 1), FH_ERR_OUT_OF_SEGMENT);
        CHECK_RC(fh_put_strided(t, hi - 8, 8, w, 8, 8, 2), FH_ERR_OUT_OF_SEGMENT);
        CHECK_OK(fh_put(t, hi - 16, w, 16));
        CHECK_OK(fh_put(t, hi, w + 2, 16));
        CHECK_OK(fh_get(r, t, hi - 16, 16));
        CHECK_OK(fh_get(r + 2, t, hi, 16));
        CHECK(memcmp(r, w, sizeof w) == 0, "puts up to the seam", "1 2 3 4 back, saw "
              "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64, r[0], r[1], r[2], r[3]);
    } else {
        TU_LOG("NOTE adjacent: no two of %d segments touch on rank %d; checked the "
               "ends only\n", made, t);
    }
    CHECK_OK(fh_barrier());
    for (int i = 0; i < made; i++)
        CHECK_OK(fh_segment_destroy(s[i]));
    free(b);
    return found;
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("segments_test");
    me = fh_rank();
    N = fh_nranks();
    tu_seed_init();
    char **ba = calloc((size_t)N, sizeof *ba), **bb = calloc((size_t)N, sizeof *bb);
    size_t *sa = calloc((size_t)N, sizeof *sa), *sb = calloc((size_t)N, sizeof *sb);
    CHECK(ba && bb && sa && sb, "calloc", "memory");

    fh_seg_t a, b;
    void *la = (void *)1, *lb;
    CHECK_OK(fh_segment_create(size_a(me), &a, &la));
    query_all(a, ba, sa);
    sizes_phase(a, la, ba, sa);

    /* second: B while A lives */
    CHECK_OK(fh_segment_create(BSIZE, &b, &lb));
    CHECK(b != a, "second segment id", "differs from the first (%u), saw %u", a, b);
    query_all(b, bb, sb);
    fill_ring(bb, sb, lb, 2);
    fill_ring(ba, sa, la, 3);
    int t = (me + 1) % N;
    uint64_t one = 1, v = 0;
    CHECK_OK(fh_atomic(t, (uint64_t *)bb[t] + 1, FH_AOP_SET, 0, 0, NULL));
    CHECK_OK(fh_barrier());
    for (int r = 0; r < N; r++)
        CHECK_OK(fh_atomic(r, (uint64_t *)(bb[r] + 8), FH_AOP_FETCH_ADD, one, 0, NULL));
    CHECK_OK(fh_barrier());
    CHECK(((uint64_t *)lb)[1] == (uint64_t)N, "atomics into the second segment",
          "%d increments, saw %" PRIu64, N, ((uint64_t *)lb)[1]);
    TU_SAY("second: ok\n");

    int adj = seam_phase();
    uint64_t adj_all = tu_job_sum((uint64_t)adj);
    TU_SAY("adjacent: %" PRIu64 " of %d ranks checked a seam between touching pieces\n",
           adj_all, N);
    if (tu_flag(argc, argv, "--require-seam"))
        CHECK(adj_all == (uint64_t)N, "adjacent (--require-seam)", "a seam checked on all "
              "%d ranks, saw %" PRIu64, N, adj_all);

    /* destroyed */
    CHECK_OK(fh_segment_destroy(b));
    CHECK_RC(fh_segment_query(b, me, NULL, NULL), FH_ERR_INVALID);
    char buf[256];
    fh_handle_t h = 7;
    memset(buf, 0x3d, sizeof buf);
    for (int r = 0; r < N; r++) {
        char *old = bb[r] + 128;
        CHECK_RC(fh_put(r, old, buf, sizeof buf), FH_ERR_OUT_OF_SEGMENT);
        CHECK_RC(fh_get(buf, r, old, sizeof buf), FH_ERR_OUT_OF_SEGMENT);
        CHECK_RC(fh_put_nb(r, old, buf, sizeof buf, &h), FH_ERR_OUT_OF_SEGMENT);
        CHECK(h == FH_HANDLE_DONE, "handle of a refused put", "FH_HANDLE_DONE, saw %"
              PRIu64, (uint64_t)h);
        CHECK_RC(fh_get_nbi(buf, r, old, sizeof buf), FH_ERR_OUT_OF_SEGMENT);
        CHECK_RC(fh_put_strided(r, old, 16, buf, 8, 8, 4), FH_ERR_OUT_OF_SEGMENT);
        CHECK_RC(fh_atomic(r, (uint64_t *)bb[r], FH_AOP_FETCH, 0, 0, &v),
                 FH_ERR_OUT_OF_SEGMENT);
        CHECK_RC(fh_atomic_nb(r, (uint64_t *)bb[r], FH_AOP_SET, 1, 0, NULL, &h),
                 FH_ERR_OUT_OF_SEGMENT);
    }
    CHECK_OK(fh_wait_nbi());
    fill_ring(ba, sa, la, 4);
    TU_SAY("destroyed: ok\n");

    CHECK_OK(fh_segment_destroy(a));
    free(ba); free(bb); free(sa); free(sb);
    CHECK_OK(fh_finalize());
    TU_SAY("PASS segments_test\n");
    return 0;
}
