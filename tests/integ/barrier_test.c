/*
 * barrier_test.c -- fh_barrier: nobody leaves before everybody entered.
 *
 * Round k: every rank sleeps a random time (sometimes long, often zero),
 * FETCH_ADDs 1 to a counter on rank 0, enters fh_barrier, then FETCHes the
 * counter: it must be exactly (k+1)*N -- everybody's increment of round k
 * happened before anybody left barrier k, and nobody's increment of round
 * k+1 can have happened yet, because a second barrier closes every round
 * (after the FETCH).  The FETCH_ADD itself must have seen a value in
 * [k*N, (k+1)*N).  Also: a blocking put to the next rank before the barrier
 * is visible there after it (the put was complete on return), and fh_quiet
 * + barrier makes NBI puts visible.  Then fh_barrier_or: every rank gets the
 * OR of every rank's word, also when some ranks take it in two calls
 * (fh_barrier_or_notify / fh_barrier_or_try) and do remote work between.
 *
 * Usage: barrier_test [--rounds N]
 */
#include "testutil.h"

/* fh_barrier_or_notify / fh_barrier_or_try, 48 rounds: in each, some ranks
 * (chosen at random) take the split form and between the two calls do
 * remote work (an atomic on rank 0) and sleep, while the others call the
 * blocking fh_barrier_or -- they pair.  Nobody leaves before everybody
 * entered (the counter on rank 0, as above: base is its value before), and
 * everyone gets the OR.  Then the misuse errors: a try without notify, a
 * collective between notify and try, a NULL out (the barrier stays open).
 * Every other round the split form waits with fh_barrier_or_try_idle. */
static void split_phase(int me, int N, tu_rng_t *r, uint64_t *counter0, uint64_t base)
{
    uint64_t out = 0, old = 0, v = 0;
    CHECK(fh_barrier_or_try(&out) == FH_ERR_STATE, "fh_barrier_or_try",
          "expected FH_ERR_STATE without fh_barrier_or_notify");
    for (long k = 0; k < 48; k++) {
        CHECK_OK(fh_atomic(0, counter0, FH_AOP_FETCH_ADD, 1, 0, &old));
        uint64_t in = (uint64_t)1 << ((uint64_t)(me + k) % 60), want = 0;
        for (int q = 0; q < N; q++)
            want |= (uint64_t)1 << ((uint64_t)(q + k) % 60);
        out = 0;
        if (tu_rng_below(r, 2) == 0) {
            CHECK_OK(fh_barrier_or_notify(in));
            if (k == 0) {
                CHECK(fh_barrier() == FH_ERR_STATE, "fh_barrier",
                      "expected FH_ERR_STATE between notify and try");
                CHECK(fh_barrier_or_notify(in) == FH_ERR_STATE, "fh_barrier_or_notify",
                      "expected FH_ERR_STATE for a second notify");
                CHECK(fh_barrier_or_try(NULL) == FH_ERR_INVALID, "fh_barrier_or_try",
                      "expected FH_ERR_INVALID for a NULL out");
                CHECK(fh_barrier_or_try_idle(&out, NULL) == FH_ERR_INVALID,
                      "fh_barrier_or_try_idle", "expected FH_ERR_INVALID for a NULL idle");
            }
            uint64_t x = 0;
            CHECK_OK(fh_atomic(0, counter0, FH_AOP_FETCH, 0, 0, &x));
            if (tu_rng_below(r, 4) == 0)
                tu_sleep_us((long)tu_rng_below(r, 2000));
            int rc;
            if (k % 2 == 0) {
                while ((rc = fh_barrier_or_try(&out)) == FH_ERR_AGAIN)
                    if (tu_rng_below(r, 64) == 0)
                        tu_sleep_us(50);
            } else {
                unsigned idle = 0;   /* the caller's own wait loop */
                while ((rc = fh_barrier_or_try_idle(&out, &idle)) == FH_ERR_AGAIN)
                    ;
            }
            CHECK_OK(rc);
        } else {
            if (tu_rng_below(r, 4) == 0)
                tu_sleep_us((long)tu_rng_below(r, 2000));
            CHECK_OK(fh_barrier_or(in, &out));
        }
        CHECK(out == want, "split barrier", "round %ld: expected OR %#" PRIx64 ", got %#"
              PRIx64, k, want, out);
        CHECK_OK(fh_atomic(0, counter0, FH_AOP_FETCH, 0, 0, &v));
        uint64_t exact = base + (uint64_t)(k + 1) * (uint64_t)N;
        CHECK(v == exact, "split barrier", "round %ld: expected counter %" PRIu64
              " after the barrier, saw %" PRIu64 " (a rank left early)", k, exact, v);
        CHECK_OK(fh_barrier());   /* nobody adds for round k + 1 before all read */
    }
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("barrier_test");
    int me = fh_rank(), N = fh_nranks();
    tu_seed_init();
    long rounds = tu_opt(argc, argv, "--rounds", tu_scale(N <= 4 ? 600 : 250));

    fh_seg_t seg;
    void *lb;
    CHECK_OK(fh_segment_create(4096, &seg, &lb));
    uint64_t *mine = lb;
    uint64_t *counter0, *slot_next;
    void *b;
    CHECK_OK(fh_segment_query(seg, 0, &b, NULL));
    counter0 = b;
    int next = (me + 1) % N, prev = (me + N - 1) % N;
    CHECK_OK(fh_segment_query(seg, next, &b, NULL));
    slot_next = (uint64_t *)b + 8;     /* word 8 of next rank: my marker */
    CHECK_OK(fh_barrier());
    TU_SAY("barrier_test: %d ranks, %ld rounds with random entry delays\n", N,
           rounds);

    tu_rng_t r = tu_rng_make(tu_seed, (uint64_t)me, 1, 2);
    double t0 = tu_now(), slept = 0;
    for (long k = 0; k < rounds; k++) {
        uint64_t d = tu_rng_below(&r, 100);
        long us = d < 60 ? 0 : d < 90 ? (long)tu_rng_below(&r, 200)
                : d < 99 ? (long)tu_rng_below(&r, 3000) : 20000;
        if (us) { tu_sleep_us(us); slept += us * 1e-6; }

        uint64_t marker = (uint64_t)k * 1000 + (uint64_t)me;
        if (k % 2 == 0) {
            CHECK_OK(fh_put(next, slot_next, &marker, sizeof marker));
        } else {
            static uint64_t m2;
            m2 = marker;
            CHECK_OK(fh_put_nbi(next, slot_next, &m2, sizeof m2));
            CHECK_OK(fh_quiet());
        }
        uint64_t old = ~0ull;
        CHECK_OK(fh_atomic(0, counter0, FH_AOP_FETCH_ADD, 1, 0, &old));
        CHECK_OK(fh_barrier());

        uint64_t v = 0;
        CHECK_OK(fh_atomic(0, counter0, FH_AOP_FETCH, 0, 0, &v));
        uint64_t exact = (uint64_t)(k + 1) * (uint64_t)N;
        CHECK(old >= exact - (uint64_t)N && old < exact, "fetch-add",
              "round %ld: expected the FETCH_ADD to see a value in [%" PRIu64
              ", %" PRIu64 "), saw %" PRIu64, k, exact - (uint64_t)N, exact,
              old);
        if (v < exact)
            tu_fail("barrier %ld: a rank left early: expected counter %" PRIu64
                    " after the barrier, saw %" PRIu64, k, exact, v);
        CHECK(v == exact, "barrier", "round %ld: expected counter %" PRIu64
              ", saw %" PRIu64 " (a rank passed the round's second barrier "
              "early)", k, exact, v);
        uint64_t want = (uint64_t)k * 1000 + (uint64_t)prev;
        volatile uint64_t *mk = &mine[8];
        CHECK(*mk == want, "put before barrier", "round %ld: expected marker %"
              PRIu64 " from rank %d visible after the barrier, saw %" PRIu64,
              k, want, prev, *mk);
        /* Second barrier: nobody overwrites the marker before I read it. */
        CHECK_OK(fh_barrier());
    }
    double dt = tu_now() - t0;

    /* fh_barrier_or: every rank leaves with the OR of every rank's word
     * (a bit per rank, shifted each round, and one rank's marker bit), on
     * every stage of the barrier (node_local.sh runs this in one group,
     * mixed and FH_SHM=off). */
    for (long k = 0; k < 64; k++) {
        if (tu_rng_below(&r, 8) == 0)
            tu_sleep_us((long)tu_rng_below(&r, 300));
        uint64_t in = (uint64_t)1 << ((uint64_t)(me + k) % 60), want = 0, out = 0;
        if (me == (int)(k % N))
            in |= (uint64_t)1 << 62;
        for (int q = 0; q < N; q++)
            want |= (uint64_t)1 << ((uint64_t)(q + k) % 60);
        want |= (uint64_t)1 << 62;
        CHECK_OK(fh_barrier_or(in, &out));
        CHECK(out == want, "fh_barrier_or", "round %ld: expected OR %#" PRIx64
              ", got %#" PRIx64, k, want, out);
    }
    CHECK(fh_barrier_or(1, NULL) == FH_ERR_INVALID, "fh_barrier_or",
          "expected FH_ERR_INVALID for a NULL out");
    split_phase(me, N, &r, counter0, (uint64_t)rounds * (uint64_t)N);
    if (me == 0) {
        CHECK(*(volatile uint64_t *)mine == (uint64_t)(rounds + 48) * (uint64_t)N,
              "counter", "expected %" PRIu64 ", saw %" PRIu64,
              (uint64_t)(rounds + 48) * (uint64_t)N, *(volatile uint64_t *)mine);
    }
    TU_LOG("%ld rounds x 2 barriers in %.2f s (%.1f us/barrier excl. %.2f s "
           "sleep)\n", rounds, dt, (dt - slept) / (double)(2 * rounds) * 1e6,
           slept);
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("PASS barrier_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
