/*
 * bad_input.c -- argument validation of every public function.
 *
 * Each call with a bad argument must return the documented code (never crash,
 * never send): invalid ranks (-1, N, INT_MAX), NULL with a length, size and
 * address overflow, remote ranges outside the peer's segment (before base,
 * straddling the end, just past the end, heap memory), AM handler indices
 * outside the client range or never registered, payloads over the limits,
 * nargs > FH_AM_MAX_ARGS, replies outside a handler, garbage handles,
 * FH_MAX_SEGMENTS, calls before fh_init and after fh_finalize, fh_init twice;
 * fh_strerror / fh_err_name for every code; fh_last_error names the failing
 * function.  The atomics (fh_atomic, fh_atomic32 and their _nb forms) with a
 * bad rank, NULL target, misaligned target (8- and 4-byte rules), bad op,
 * out of segment, NULL handle pointer: the NB forms leave *h FH_HANDLE_DONE.
 * Afterwards the per-peer counters (puts, gets, AMs, atomics) and the peer's
 * memory must be unchanged.
 */
#include "testutil.h"

#include <limits.h>

#define H_OK 130          /* registered */
#define H_NEVER 200       /* registered nowhere */
#define SEGSZ 65536

static int me = -1, N;
static long nchecks;
static fh_token_t saved_token;
static volatile int got_req;

static int nfail;

/* Mismatches are reported and counted, not fatal: one run lists them all. */
#define SOFT(ok, ...) do { nchecks++; if (!(ok)) { nfail++;                  \
        if (me >= 0) printf("[%d] ", me);                                  \
        printf("FAIL ");                                                   \
        printf(__VA_ARGS__); printf(" (%s:%d)\n", __FILE__, __LINE__);      \
        fflush(stdout); } } while (0)
#define RC(call, exp) do { int rc_ = (call); int ex_ = (exp);                \
        SOFT(rc_ == ex_, "%s: expected %s, saw %s (%d) [last_error: %s]",  \
             #call, tu_errname(ex_), tu_errname(rc_), rc_, fh_last_error()); \
    } while (0)
#define RC2(call, e1, e2) do { int rc_ = (call);                            \
        SOFT(rc_ == (e1) || rc_ == (e2), "%s: expected %s or %s, saw %s (%d)"\
             " [last_error: %s]", #call, tu_errname(e1), tu_errname(e2),    \
             tu_errname(rc_), rc_, fh_last_error()); } while (0)

static void h_ok(fh_token_t tok, void *buf, size_t n, const uint64_t *a,
                 unsigned na)
{
    (void)buf; (void)n; (void)a; (void)na;
    saved_token = tok;
    got_req++;
}

static void last_error_names(const char *fn)
{
    const char *le = fh_last_error();
    SOFT(le != NULL && *le != '\0', "fh_last_error after a failing %s: "
         "expected a message, saw %s", fn, le ? "\"\"" : "NULL");
    if (le)
        SOFT(strstr(le, fn) != NULL, "fh_last_error after a failing %s: "
             "expected it to name %s, saw \"%s\"", fn, fn, le);
}

static void check_strings(void)
{
    static const char *names[] = {
        "FH_OK", "FH_ERR_INVALID", "FH_ERR_RANK", "FH_ERR_OVERFLOW",
        "FH_ERR_OUT_OF_SEGMENT", "FH_ERR_HANDLER", "FH_ERR_TOO_BIG",
        "FH_ERR_NOT_INIT", "FH_ERR_IN_HANDLER", "FH_ERR_HANDLE",
        "FH_ERR_NO_MEMORY", "FH_ERR_LIMIT", "FH_ERR_ALIGN",
        "FH_ERR_TRANSPORT", "FH_ERR_PEER_DEAD", "FH_ERR_BOOTSTRAP",
        "FH_ERR_CONFIG", "FH_ERR_AGAIN", "FH_ERR_NOT_SUPPORTED",
        "FH_ERR_STATE"};
    int n = (int)(sizeof names / sizeof names[0]);
    for (int i = 0; i < n; i++) {
        const char *s = fh_strerror(-i), *nm = fh_err_name(-i);
        CHECK(s != NULL && *s, "fh_strerror", "code %d: expected a sentence, "
              "saw %s", -i, s ? "\"\"" : "NULL");
        CHECK(nm != NULL && strcmp(nm, names[i]) == 0, "fh_err_name",
              "code %d: expected %s, saw %s", -i, names[i], nm ? nm : "NULL");
        for (int j = 0; j < i; j++) {
            CHECK(strcmp(fh_err_name(-j), nm) != 0, "fh_err_name", "codes %d "
                  "and %d share the name %s", -j, -i, nm);
            CHECK(strcmp(fh_strerror(-j), s) != 0, "fh_strerror", "codes %d "
                  "and %d share the sentence \"%s\"", -j, -i, s);
        }
        nchecks += 2;
    }
    int unk[] = {1, -20, -1000, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof unk / sizeof unk[0]; i++) {
        CHECK(fh_strerror(unk[i]) != NULL, "fh_strerror", "unknown code %d "
              "gave NULL", unk[i]);
        CHECK(fh_err_name(unk[i]) != NULL, "fh_err_name", "unknown code %d "
              "gave NULL", unk[i]);
        nchecks += 2;
    }
    CHECK(strcmp(fh_strerror(-1000), "unknown error") == 0, "fh_strerror",
          "unknown code: expected \"unknown error\", saw \"%s\"",
          fh_strerror(-1000));
}

/* Every function that needs the runtime, expected to give `exp`. */
static void not_init_calls(int exp, const char *when)
{
    uint64_t v = 0, buf[4] = {0};
    fh_handle_t h = FH_HANDLE_DONE;
    fh_seg_t s = 0;
    void *b = NULL;
    size_t sz = 0;
    fh_peer_stats_t st = FH_PEER_STATS_INIT;
    TU_SAY("bad_input: calls %s -> %s\n", when, fh_err_name(exp));
    RC(fh_rank(), exp);
    last_error_names("fh_rank");
    RC(fh_nranks(), exp);
    RC(fh_segment_create(4096, &s, &b), exp);
    last_error_names("fh_segment_create");
    RC(fh_segment_query(0, 0, &b, &sz), exp);
    SOFT(fh_addr_local(0, buf) == NULL, "fh_addr_local %s: expected NULL", when);
    last_error_names("fh_addr_local");
    RC(fh_segment_destroy(0), exp);
    RC(fh_put(0, buf, &v, 8), exp);
    last_error_names("fh_put");
    RC(fh_get(&v, 0, buf, 8), exp);
    RC(fh_put_nb(0, buf, &v, 8, &h), exp);
    RC(fh_get_nb(&v, 0, buf, 8, &h), exp);
    RC(fh_wait(FH_HANDLE_DONE), exp);
    RC(fh_test(FH_HANDLE_DONE), exp);
    RC(fh_wait_all(&h, 1), exp);
    RC(fh_put_nbi(0, buf, &v, 8), exp);
    RC(fh_get_nbi(&v, 0, buf, 8), exp);
    RC(fh_wait_nbi(), exp);
    RC(fh_put_strided(0, buf, 8, &v, 0, 8, 2), exp);
    RC(fh_get_strided(buf, 8, 0, &v, 0, 8, 2), exp);
    RC(fh_quiet(), exp);
    RC(fh_atomic(0, buf, FH_AOP_FETCH, 0, 0, &v), exp);
    uint32_t v32 = 0;
    RC(fh_atomic32(0, (uint32_t *)buf, FH_AOP_FETCH, 0, 0, &v32), exp);
    RC(fh_atomic_nb(0, buf, FH_AOP_FETCH, 0, 0, &v, &h), exp);
    RC(fh_atomic32_nb(0, (uint32_t *)buf, FH_AOP_FETCH, 0, 0, &v32, &h), exp);
    RC(fh_barrier(), exp);
    last_error_names("fh_barrier");
    RC(fh_poll(), exp);
    RC(fh_allgather(&v, buf, 8), exp);
    RC(fh_am_request_short(0, H_OK, &v, 1), exp);
    RC(fh_am_request_medium(0, H_OK, buf, 8, &v, 1), exp);
    RC(fh_am_request_long(0, H_OK, buf, 8, buf, &v, 1), exp);
    RC(fh_am_reply_short(NULL, H_OK, &v, 1), exp);
    RC(fh_stats_peer(0, &st), exp);
    RC(fh_stats_print(stderr), exp);
    RC(fh_finalize(), exp);
    last_error_names("fh_finalize");
    /* usable without the runtime */
    CHECK(fh_strerror(FH_ERR_RANK) != NULL, "fh_strerror", "NULL %s", when);
    CHECK(fh_last_error() != NULL, "fh_last_error", "NULL %s", when);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    check_strings();
    TU_SAY("bad_input: fh_strerror/fh_err_name: 20 codes distinct, unknown "
           "codes non-NULL\n");

    /* ---------------------------------------------- before fh_init */
    RC(fh_am_register(H_OK, h_ok, "h_ok"), FH_OK);    /* allowed before */
    RC(fh_am_register(FH_AM_USER_FIRST - 1, h_ok, "x"), FH_ERR_HANDLER);
    not_init_calls(FH_ERR_NOT_INIT, "before fh_init");

    /* Small segment limit so FH_ERR_LIMIT is reachable (same on all ranks;
     * read by fh_init). */
    setenv("FH_MAX_SEGMENTS", "8", 1);
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("bad_input");
    me = fh_rank();
    N = fh_nranks();
    int peer = (me + 1) % N;
    RC(fh_init(&argc, &argv), FH_ERR_STATE);
    last_error_names("fh_init");

    fh_seg_t seg;
    void *lb;
    CHECK_OK(fh_segment_create(SEGSZ, &seg, &lb));
    uint8_t *pb;                    /* peer's base */
    size_t psz;
    CHECK_OK(fh_segment_query(seg, peer, (void **)&pb, &psz));
    CHECK(psz == SEGSZ, "fh_segment_query", "size: expected %d, saw %zu",
          SEGSZ, psz);
    memset(lb, 0x3C, SEGSZ);
    uint32_t *mine32 = lb;
    CHECK_OK(fh_barrier());
    fh_peer_stats_t st0 = FH_PEER_STATS_INIT, st1 = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(peer, &st0));

    uint8_t src[64] = {1, 2, 3}, *heap = malloc(4096);
    uint64_t v = 0, args[FH_AM_MAX_ARGS + 4] = {0};
    uint32_t v32 = 0;
    fh_handle_t h = FH_HANDLE_DONE;
    int badr[] = {-1, N, INT_MAX, INT_MIN};

    /* ---------------------------------------------------- ranks */
    for (size_t i = 0; i < sizeof badr / sizeof badr[0]; i++) {
        int r = badr[i];
        RC(fh_put(r, pb, src, 8), FH_ERR_RANK);
        if (i == 0) last_error_names("fh_put");
        RC(fh_get(src, r, pb, 8), FH_ERR_RANK);
        if (i == 0) last_error_names("fh_get");
        RC(fh_put_nb(r, pb, src, 8, &h), FH_ERR_RANK);
        RC(fh_get_nb(src, r, pb, 8, &h), FH_ERR_RANK);
        RC(fh_put_nbi(r, pb, src, 8), FH_ERR_RANK);
        RC(fh_get_nbi(src, r, pb, 8), FH_ERR_RANK);
        RC(fh_put_strided(r, pb, 8, src, 8, 4, 2), FH_ERR_RANK);
        RC(fh_get_strided(src, 8, r, pb, 8, 4, 2), FH_ERR_RANK);
        RC(fh_atomic(r, (uint64_t *)pb, FH_AOP_FETCH, 0, 0, &v), FH_ERR_RANK);
        if (i == 0) last_error_names("fh_atomic");
        RC(fh_atomic32(r, (uint32_t *)pb, FH_AOP_FETCH, 0, 0, &v32), FH_ERR_RANK);
        if (i == 0) last_error_names("fh_atomic32");
        h = 12345;
        RC(fh_atomic_nb(r, (uint64_t *)pb, FH_AOP_FETCH, 0, 0, &v, &h), FH_ERR_RANK);
        SOFT(h == FH_HANDLE_DONE, "fh_atomic_nb(bad rank): *h not FH_HANDLE_DONE");
        if (i == 0) last_error_names("fh_atomic_nb");
        h = 12345;
        RC(fh_atomic32_nb(r, (uint32_t *)pb, FH_AOP_FETCH, 0, 0, &v32, &h), FH_ERR_RANK);
        SOFT(h == FH_HANDLE_DONE, "fh_atomic32_nb(bad rank): *h not FH_HANDLE_DONE");
        if (i == 0) last_error_names("fh_atomic32_nb");
        RC(fh_am_request_short(r, H_OK, args, 1), FH_ERR_RANK);
        if (i == 0) last_error_names("fh_am_request_short");
        RC(fh_am_request_medium(r, H_OK, src, 8, args, 1), FH_ERR_RANK);
        RC(fh_am_request_long(r, H_OK, src, 8, pb, args, 1), FH_ERR_RANK);
        RC(fh_segment_query(seg, r, &lb, &psz), FH_ERR_RANK);
        SOFT(fh_addr_local(r, pb) == NULL, "fh_addr_local(bad rank %d): expected NULL", r);
        if (i == 0) last_error_names("fh_addr_local");
        RC(fh_stats_peer(r, &st1), FH_ERR_RANK);
    }
    TU_SAY("bad_input: invalid ranks (-1, N, INT_MAX, INT_MIN) -> "
           "FH_ERR_RANK for all 17 rank-taking calls\n");

    /* ---------------------------------------------------- NULL */
    RC(fh_put(peer, pb, NULL, 8), FH_ERR_INVALID);
    last_error_names("fh_put");
    RC(fh_get(NULL, peer, pb, 8), FH_ERR_INVALID);
    RC(fh_put_nb(peer, pb, NULL, 8, &h), FH_ERR_INVALID);
    RC(fh_put_nb(peer, pb, src, 8, NULL), FH_ERR_INVALID);
    RC(fh_get_nb(NULL, peer, pb, 8, &h), FH_ERR_INVALID);
    RC(fh_get_nb(src, peer, pb, 8, NULL), FH_ERR_INVALID);
    RC(fh_put_nbi(peer, pb, NULL, 8), FH_ERR_INVALID);
    RC(fh_get_nbi(NULL, peer, pb, 8), FH_ERR_INVALID);
    RC(fh_put_strided(peer, pb, 8, NULL, 8, 4, 2), FH_ERR_INVALID);
    RC(fh_get_strided(NULL, 8, peer, pb, 8, 4, 2), FH_ERR_INVALID);
    /* a zero stride on the destination side (the remote side of a put, the
     * local side of a get) would write every block to one place: refused */
    RC(fh_put_strided(peer, pb, 0, src, 8, 4, 2), FH_ERR_INVALID);
    last_error_names("fh_put_strided");
    RC(fh_get_strided(heap, 0, peer, pb, 8, 4, 2), FH_ERR_INVALID);
    last_error_names("fh_get_strided");
    RC(fh_put_strided(me, lb, 0, src, 8, 4, 3), FH_ERR_INVALID);   /* self too */
    /* a NULL remote address with a length: documented as FH_ERR_INVALID
     * ("NULL with a length"); it is also outside every segment */
    RC2(fh_put(peer, NULL, src, 8), FH_ERR_INVALID, FH_ERR_OUT_OF_SEGMENT);
    RC2(fh_get(src, peer, NULL, 8), FH_ERR_INVALID, FH_ERR_OUT_OF_SEGMENT);
    RC(fh_am_request_short(peer, H_OK, NULL, 2), FH_ERR_INVALID);
    RC(fh_am_request_medium(peer, H_OK, NULL, 8, args, 1), FH_ERR_INVALID);
    RC(fh_am_request_medium(peer, H_OK, src, 8, NULL, 1), FH_ERR_INVALID);
    RC(fh_am_request_long(peer, H_OK, NULL, 8, pb, args, 1), FH_ERR_INVALID);
    RC(fh_wait_all(NULL, 2), FH_ERR_INVALID);
    RC(fh_segment_create(4096, NULL, &lb), FH_ERR_INVALID);
    RC(fh_token_source(saved_token, NULL), FH_ERR_INVALID);
    RC(fh_stats_peer(peer, NULL), FH_ERR_INVALID);
    RC(fh_allgather(NULL, heap, 8), FH_ERR_INVALID);    /* all ranks: same */
    RC(fh_allgather(src, NULL, 8), FH_ERR_INVALID);
    /* size 0 is a no-op that succeeds */
    RC(fh_put(peer, pb, src, 0), FH_OK);
    RC(fh_get(src, peer, pb, 0), FH_OK);
    RC(fh_put_nbi(peer, pb, src, 0), FH_OK);
    CHECK_OK(fh_wait_nbi());
    TU_SAY("bad_input: NULL with a length -> FH_ERR_INVALID; size 0 -> FH_OK\n");

    /* ---------------------------------------------------- overflow */
    uint8_t *hi = (uint8_t *)(UINTPTR_MAX - 3);
    RC(fh_put(peer, hi, src, 16), FH_ERR_OVERFLOW);
    last_error_names("fh_put");
    RC(fh_get(src, peer, hi, 16), FH_ERR_OVERFLOW);
    RC(fh_get(hi, peer, pb, 16), FH_ERR_OVERFLOW);   /* local overflow */
    RC(fh_put(peer, pb, hi, 16), FH_ERR_OVERFLOW);
    /* nbytes = SIZE_MAX both overflows and exceeds FH_MAX_XFER */
    RC2(fh_put(peer, pb, src, SIZE_MAX), FH_ERR_OVERFLOW, FH_ERR_TOO_BIG);
    RC2(fh_get(src, peer, pb, SIZE_MAX), FH_ERR_OVERFLOW, FH_ERR_TOO_BIG);
    RC2(fh_put_nb(peer, pb, src, SIZE_MAX, &h), FH_ERR_OVERFLOW,
        FH_ERR_TOO_BIG);
    RC2(fh_get_nbi(src, peer, pb, SIZE_MAX), FH_ERR_OVERFLOW, FH_ERR_TOO_BIG);
    RC2(fh_put_strided(peer, pb, 8, src, 8, SIZE_MAX / 2, 4), FH_ERR_OVERFLOW,
        FH_ERR_TOO_BIG);
    /* blksize * count wraps to a small number: must not pass as small */
    RC2(fh_put_strided(peer, pb, 8, src, 8, (size_t)1 << 62, 4),
        FH_ERR_OVERFLOW, FH_ERR_TOO_BIG);
    RC2(fh_get_strided(src, 8, peer, pb, 8, ((size_t)1 << 63) + 8, 2),
        FH_ERR_OVERFLOW, FH_ERR_TOO_BIG);
    RC2(fh_put_strided(peer, pb, 8, src, 0, 8, ((size_t)1 << 61) + 1),
        FH_ERR_OVERFLOW, FH_ERR_TOO_BIG);
    RC(fh_put_strided(peer, pb, PTRDIFF_MAX, src, 8, 4, 4), FH_ERR_OVERFLOW);
    RC(fh_get_strided(src, 8, peer, pb, PTRDIFF_MIN, 4, 4), FH_ERR_OVERFLOW);
    RC2(fh_am_request_long(peer, H_OK, src, SIZE_MAX, pb, args, 1),
        FH_ERR_OVERFLOW, FH_ERR_TOO_BIG);
    RC(fh_am_request_long(peer, H_OK, src, 16, hi, args, 1), FH_ERR_OVERFLOW);
    /* a long AM over FH_AM_MAX_LONG (the wire's 32-bit length): refused,
     * never sent with its length cut to the low 32 bits */
    CHECK(fh_am_max_long() == FH_AM_MAX_LONG && FH_AM_MAX_LONG == 0xffffffffu,
          "fh_am_max_long", "4 GiB - 1, saw %zu", fh_am_max_long());
    RC(fh_am_request_long(peer, H_OK, src, FH_AM_MAX_LONG + 1, pb, args, 1), FH_ERR_TOO_BIG);
    RC(fh_am_request_long(peer, H_OK, src, ((size_t)1 << 32) + 8, pb, args, 1),
       FH_ERR_TOO_BIG);
    /* above FH_MAX_XFER without arithmetic overflow */
    RC2(fh_put(peer, pb, src, FH_MAX_XFER + 1), FH_ERR_TOO_BIG,
        FH_ERR_OUT_OF_SEGMENT);
    TU_SAY("bad_input: address/size overflow -> FH_ERR_OVERFLOW\n");

    /* ---------------------------------------------------- segment bounds */
    RC(fh_put(peer, pb - 1, src, 1), FH_ERR_OUT_OF_SEGMENT);
    last_error_names("fh_put");
    RC(fh_put(peer, pb - 4, src, 8), FH_ERR_OUT_OF_SEGMENT);  /* straddles base */
    RC(fh_put(peer, pb + SEGSZ - 4, src, 8), FH_ERR_OUT_OF_SEGMENT);
    RC(fh_put(peer, pb + SEGSZ, src, 1), FH_ERR_OUT_OF_SEGMENT);
    RC(fh_put(peer, pb, src, SEGSZ + 1), FH_ERR_OUT_OF_SEGMENT);
    RC(fh_put(peer, heap, src, 8), FH_ERR_OUT_OF_SEGMENT);
    RC(fh_get(src, peer, pb - 1, 1), FH_ERR_OUT_OF_SEGMENT);
    RC(fh_get(src, peer, pb + SEGSZ - 4, 8), FH_ERR_OUT_OF_SEGMENT);
    RC(fh_get(heap, peer, pb + SEGSZ, 8), FH_ERR_OUT_OF_SEGMENT);
    RC(fh_put_nb(peer, pb + SEGSZ - 1, src, 2, &h), FH_ERR_OUT_OF_SEGMENT);
    RC(fh_get_nb(src, peer, pb + SEGSZ - 1, 2, &h), FH_ERR_OUT_OF_SEGMENT);
    RC(fh_put_nbi(peer, pb + SEGSZ - 1, src, 2), FH_ERR_OUT_OF_SEGMENT);
    RC(fh_get_nbi(src, peer, pb - 8, 8), FH_ERR_OUT_OF_SEGMENT);
    /* strided: last block past the end / negative stride below base */
    RC(fh_put_strided(peer, pb + SEGSZ - 64, 32, src, 0, 16, 3),
       FH_ERR_OUT_OF_SEGMENT);
    RC(fh_put_strided(peer, pb + 16, -32, src, 0, 8, 2), FH_ERR_OUT_OF_SEGMENT);
    RC(fh_get_strided(heap, 16, peer, pb + SEGSZ - 64, 32, 16, 3),
       FH_ERR_OUT_OF_SEGMENT);
    RC(fh_atomic(peer, (uint64_t *)(pb + SEGSZ), FH_AOP_SET, 1, 0, NULL),
       FH_ERR_OUT_OF_SEGMENT);
    RC(fh_atomic(peer, (uint64_t *)pb - 1, FH_AOP_SET, 1, 0, NULL),
       FH_ERR_OUT_OF_SEGMENT);
    RC(fh_atomic32(peer, (uint32_t *)(pb + SEGSZ), FH_AOP_SET, 1, 0, NULL),
       FH_ERR_OUT_OF_SEGMENT);
    RC(fh_atomic32(peer, (uint32_t *)pb - 1, FH_AOP_SET, 1, 0, NULL),
       FH_ERR_OUT_OF_SEGMENT);
    RC(fh_atomic32(peer, (uint32_t *)heap, FH_AOP_SET, 1, 0, NULL),
       FH_ERR_OUT_OF_SEGMENT);
    RC(fh_atomic_nb(peer, (uint64_t *)(pb + SEGSZ), FH_AOP_SET, 1, 0, NULL, &h),
       FH_ERR_OUT_OF_SEGMENT);
    RC(fh_atomic32_nb(peer, (uint32_t *)(pb + SEGSZ), FH_AOP_SET, 1, 0, NULL, &h),
       FH_ERR_OUT_OF_SEGMENT);
    RC(fh_atomic32_nb(peer, (uint32_t *)pb - 1, FH_AOP_SET, 1, 0, NULL, &h),
       FH_ERR_OUT_OF_SEGMENT);
    /* the last 4 bytes are a 32-bit target, never a 64-bit one */
    RC(fh_atomic(peer, (uint64_t *)(pb + SEGSZ - 4), FH_AOP_FETCH, 0, 0, &v),
       FH_ERR_ALIGN);
    RC(fh_atomic32(peer, (uint32_t *)(pb + SEGSZ - 2), FH_AOP_FETCH, 0, 0, &v32),
       FH_ERR_ALIGN);
    RC(fh_am_request_long(peer, H_OK, src, 8, pb + SEGSZ - 4, args, 1),
       FH_ERR_OUT_OF_SEGMENT);
    RC(fh_am_request_long(peer, H_OK, src, 8, heap, args, 1),
       FH_ERR_OUT_OF_SEGMENT);
    /* valid edges */
    RC(fh_put(peer, pb + SEGSZ - 1, src, 1), FH_OK);
    RC(fh_get(src, peer, pb, SEGSZ < 64 ? SEGSZ : 64), FH_OK);
    TU_SAY("bad_input: ranges before base, straddling either end, past the "
           "end, in heap -> FH_ERR_OUT_OF_SEGMENT\n");

    /* ---------------------------------------------------- atomics */
    RC(fh_atomic(peer, (uint64_t *)(pb + 4), FH_AOP_FETCH_ADD, 1, 0, &v),
       FH_ERR_ALIGN);
    RC(fh_atomic(peer, (uint64_t *)pb, FH_AOP__COUNT, 1, 0, &v),
       FH_ERR_INVALID);
    RC(fh_atomic(peer, (uint64_t *)pb, (fh_atomic_op_t)-3, 1, 0, &v),
       FH_ERR_INVALID);
    /* 32-bit: 4-byte alignment (offset 4 is fine, 1..3 are not) */
    for (int m = 1; m < 4; m++) {
        RC(fh_atomic32(peer, (uint32_t *)(pb + m), FH_AOP_FETCH_ADD, 1, 0, &v32),
           FH_ERR_ALIGN);
        if (m == 1) last_error_names("fh_atomic32");
        h = 12345;
        RC(fh_atomic32_nb(peer, (uint32_t *)(pb + m), FH_AOP_FETCH_ADD, 1, 0, &v32, &h),
           FH_ERR_ALIGN);
        SOFT(h == FH_HANDLE_DONE, "fh_atomic32_nb(misaligned): *h not FH_HANDLE_DONE");
    }
    for (int m = 1; m < 8; m++) {
        h = 12345;
        RC(fh_atomic_nb(peer, (uint64_t *)(pb + m), FH_AOP_FETCH_ADD, 1, 0, &v, &h),
           FH_ERR_ALIGN);
        SOFT(h == FH_HANDLE_DONE, "fh_atomic_nb(misaligned): *h not FH_HANDLE_DONE");
    }
    last_error_names("fh_atomic_nb");
    fh_atomic_op_t badop[] = {FH_AOP__COUNT, (fh_atomic_op_t)-3, (fh_atomic_op_t)1000};
    for (size_t i = 0; i < sizeof badop / sizeof badop[0]; i++) {
        RC(fh_atomic32(peer, (uint32_t *)pb, badop[i], 1, 0, &v32), FH_ERR_INVALID);
        RC(fh_atomic_nb(peer, (uint64_t *)pb, badop[i], 1, 0, &v, &h), FH_ERR_INVALID);
        RC(fh_atomic32_nb(peer, (uint32_t *)pb, badop[i], 1, 0, &v32, &h),
           FH_ERR_INVALID);
    }
    /* NULL target (also outside every segment: INVALID is documented) */
    RC(fh_atomic(peer, NULL, FH_AOP_FETCH, 0, 0, &v), FH_ERR_INVALID);
    RC(fh_atomic32(peer, NULL, FH_AOP_FETCH, 0, 0, &v32), FH_ERR_INVALID);
    last_error_names("fh_atomic32");
    RC(fh_atomic_nb(peer, NULL, FH_AOP_FETCH, 0, 0, &v, &h), FH_ERR_INVALID);
    RC(fh_atomic32_nb(peer, NULL, FH_AOP_FETCH, 0, 0, &v32, &h), FH_ERR_INVALID);
    /* NULL handle pointer, to a peer and to ourselves */
    RC(fh_atomic_nb(peer, (uint64_t *)pb, FH_AOP_FETCH, 0, 0, &v, NULL), FH_ERR_INVALID);
    last_error_names("fh_atomic_nb");
    RC(fh_atomic32_nb(peer, (uint32_t *)pb, FH_AOP_FETCH, 0, 0, &v32, NULL),
       FH_ERR_INVALID);
    last_error_names("fh_atomic32_nb");
    RC(fh_atomic_nb(me, (uint64_t *)mine32, FH_AOP_SET, 7, 0, NULL, NULL),
       FH_ERR_INVALID);
    RC(fh_atomic32_nb(me, mine32, FH_AOP_SET, 7, 0, NULL, NULL), FH_ERR_INVALID);
    SOFT(mine32[0] == 0x3C3C3C3Cu && mine32[1] == 0x3C3C3C3Cu, "fh_atomic*_nb(NULL h) "
         "on self changed memory: 0x%x 0x%x", mine32[0], mine32[1]);
    TU_SAY("bad_input: atomics (64/32-bit, blocking/NB): misaligned -> "
           "FH_ERR_ALIGN, bad op / NULL target / NULL handle -> FH_ERR_INVALID\n");

    /* ---------------------------------------------------- AM */
    size_t mm = fh_am_max_medium(), ml = fh_am_max_long();
    uint8_t *big = calloc(1, mm + 2);
    unsigned badh[] = {0, 1, FH_AM_USER_FIRST - 1, FH_AM_USER_LAST + 1, 1000,
                       UINT_MAX};
    for (size_t i = 0; i < sizeof badh / sizeof badh[0]; i++) {
        RC(fh_am_register(badh[i], h_ok, "bad"), FH_ERR_HANDLER);
        RC(fh_am_request_short(peer, badh[i], args, 1), FH_ERR_HANDLER);
        if (i == 0) last_error_names("fh_am_request_short");
        RC(fh_am_request_medium(peer, badh[i], src, 8, args, 1),
           FH_ERR_HANDLER);
        RC(fh_am_request_long(peer, badh[i], src, 8, pb, args, 1),
           FH_ERR_HANDLER);
    }
    RC(fh_am_request_short(peer, H_NEVER, args, 1), FH_ERR_HANDLER);
    RC(fh_am_request_medium(peer, H_NEVER, src, 8, args, 1), FH_ERR_HANDLER);
    RC(fh_am_request_long(peer, H_NEVER, src, 8, pb, args, 1), FH_ERR_HANDLER);
    RC(fh_am_request_short(peer, H_OK, args, FH_AM_MAX_ARGS + 1),
       FH_ERR_TOO_BIG);
    RC(fh_am_request_short(peer, H_OK, args, UINT_MAX), FH_ERR_TOO_BIG);
    RC(fh_am_request_medium(peer, H_OK, big, mm + 1, args, 1), FH_ERR_TOO_BIG);
    last_error_names("fh_am_request_medium");
    RC(fh_am_request_medium(peer, H_OK, src, 8, args, FH_AM_MAX_ARGS + 1),
       FH_ERR_TOO_BIG);
    /* the runtime must check the size before touching src */
    RC(fh_am_request_long(peer, H_OK, src, ml + 1, pb, args, 1),
       FH_ERR_TOO_BIG);
    RC(fh_am_request_long(peer, H_OK, src, 8, pb, args, FH_AM_MAX_ARGS + 1),
       FH_ERR_TOO_BIG);
    /* replies outside a handler */
    RC(fh_am_reply_short(NULL, H_OK, args, 1), FH_ERR_IN_HANDLER);
    last_error_names("fh_am_reply_short");
    RC(fh_am_reply_medium(NULL, H_OK, src, 8, args, 1), FH_ERR_IN_HANDLER);
    RC(fh_am_reply_long(NULL, H_OK, src, 8, pb, args, 1), FH_ERR_IN_HANDLER);
    /* a token kept after its handler returned */
    got_req = 0;
    CHECK_OK(fh_am_request_short(me, H_OK, args, 0));
    double t0 = tu_now();
    while (!got_req) {
        CHECK_OK(fh_poll());
        CHECK(tu_now() - t0 < 30, "self request", "handler not run in 30 s");
    }
    RC(fh_am_reply_short(saved_token, H_OK, args, 1), FH_ERR_IN_HANDLER);
    RC(fh_am_reply_medium(saved_token, H_OK, src, 8, args, 1),
       FH_ERR_IN_HANDLER);
    TU_SAY("bad_input: AM handler index / unregistered -> FH_ERR_HANDLER, "
           "limits -> FH_ERR_TOO_BIG, reply outside a handler -> "
           "FH_ERR_IN_HANDLER\n");

    /* ---------------------------------------------------- handles */
    fh_handle_t garbage[] = {0xdeadbeefdeadbeefULL, 1, ~(fh_handle_t)0};
    for (size_t i = 0; i < 3; i++) {
        RC(fh_wait(garbage[i]), FH_ERR_HANDLE);
        RC(fh_test(garbage[i]), FH_ERR_HANDLE);
    }
    last_error_names("fh_test");
    RC(fh_wait_all(garbage, 3), FH_ERR_HANDLE);
    CHECK_OK(fh_get_nb(src, peer, pb, 8, &h));
    fh_handle_t h2 = h;
    CHECK_OK(fh_wait(h));
    if (h2 != FH_HANDLE_DONE)
        RC(fh_wait(h2), FH_ERR_HANDLE);
    RC(fh_wait_all(garbage, 0), FH_OK);

    /* No traffic so far but the valid calls (before any collective, whose
     * internal messages would count). */
    CHECK_OK(fh_stats_peer(peer, &st1));
    /* allowed changes: the one valid 1-byte put, 0-byte ops, the valid gets */
    CHECK(peer == me || (st1.am_sent == st0.am_sent &&
                         st1.atomics == st0.atomics),
          "no traffic from failed calls", "am_sent %" PRIu64 "->%" PRIu64
          ", atomics %" PRIu64 "->%" PRIu64, st0.am_sent, st1.am_sent,
          st0.atomics, st1.atomics);
    CHECK(st1.puts - st0.puts <= 3 && st1.put_bytes - st0.put_bytes <= 1,
          "no traffic from failed calls", "puts %" PRIu64 "->%" PRIu64
          ", put_bytes %" PRIu64 "->%" PRIu64 " (expected at most the one "
          "valid 1-byte put)", st0.puts, st1.puts, st0.put_bytes,
          st1.put_bytes);

    /* ---------------------------------------------------- segments */
    RC(fh_segment_query(seg + 1000, 0, &lb, &psz), FH_ERR_INVALID);
    RC(fh_segment_query(UINT32_MAX, 0, &lb, &psz), FH_ERR_INVALID);
    RC(fh_segment_destroy(seg + 1000), FH_ERR_INVALID);
    /* collective; every rank fails the same way */
    fh_seg_t s2;
    RC2(fh_segment_create((size_t)1 << 62, &s2, &lb), FH_ERR_NO_MEMORY,
        FH_ERR_OVERFLOW);
    last_error_names("fh_segment_create");
    int made = 1, rc = FH_OK;
    fh_seg_t extra[16];
    for (int i = 0; i < 16; i++) {
        rc = fh_segment_create(4096, &extra[i], NULL);
        if (rc != FH_OK) break;
        made++;
    }
    CHECK(rc == FH_ERR_LIMIT && made <= 8, "FH_MAX_SEGMENTS=8", "expected "
          "FH_ERR_LIMIT after at most 8 segments, saw %s after %d",
          fh_err_name(rc), made);
    nchecks++;
    for (int i = 0; i < made - 1; i++)
        CHECK_OK(fh_segment_destroy(extra[i]));
    /* after a destroy, creation works again */
    CHECK_OK(fh_segment_create(4096, &s2, NULL));
    CHECK_OK(fh_segment_destroy(s2));
    TU_SAY("bad_input: segments: unknown id -> FH_ERR_INVALID, huge -> "
           "FH_ERR_NO_MEMORY, %d-th -> FH_ERR_LIMIT\n", made + 1);

    /* ---------------------------------------------------- nothing happened */
    CHECK_OK(fh_barrier());
    uint8_t *mine = NULL;
    CHECK_OK(fh_segment_query(seg, me, (void **)&mine, NULL));
    for (size_t i = 0; i < SEGSZ - 1; i++)
        CHECK(mine[i] == 0x3C, "memory unchanged by failed calls", "byte %zu "
              "of my segment: expected 0x3c, saw 0x%02x", i, mine[i]);
    CHECK(mine[SEGSZ - 1] == 1, "valid edge put", "last byte: expected 1, "
          "saw %u", mine[SEGSZ - 1]);
    CHECK_OK(fh_barrier());
    TU_SAY("bad_input: failed calls sent nothing and changed no memory\n");

    CHECK_OK(fh_segment_destroy(seg));
    long total = nchecks;
    TU_SAY("bad_input: %ld checks before finalize passed\n", total);
    CHECK_OK(fh_finalize());
    tu_myrank = -1;                   /* the runtime is gone */

    /* ---------------------------------------------------- after finalize */
    not_init_calls(FH_ERR_NOT_INIT, "after fh_finalize");
    RC(fh_init(&argc, &argv), FH_ERR_STATE);
    if (nfail) {
        printf("[%d] FAIL bad_input: %d of %ld checks failed (FAIL lines "
               "above)\n", me, nfail, nchecks);
        return 1;
    }
    if (me == 0)
        printf("PASS bad_input (%ld checks)\n", nchecks);
    free(heap);
    free(big);
    return 0;
}
