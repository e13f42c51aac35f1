/*
 * testutil.h -- tiny helpers shared by the firehose integration tests.
 *
 *   CHECK(cond, what, fmt, ...)  on failure prints
 *                                "FAIL <what>: expected X, saw Y" and ends the
 *                                job (fh_abort when the runtime is up, exit(1)
 *                                otherwise).
 *   CHECK_RC(call, expected)     runs a firehose call that must return
 *                                `expected` (an fh_err_t); prints the names
 *                                and fh_last_error() on a mismatch.
 *   tu_seed_init()               one 64-bit seed for the whole job (env
 *                                FH_TEST_SEED or time), shared with
 *                                fh_allgather so every rank can regenerate
 *                                what the others did.
 *   tu_rng_*                     splitmix64 generator.
 *   tu_pat / tu_fill / tu_verify deterministic byte patterns keyed by
 *                                (a, b, c) = e.g. (src rank, iteration, op);
 *                                byte k of a pattern depends on key and k.
 *   tu_wait_for(v, want)         polls (fh_poll) until *v == want; v is set
 *                                by an AM handler (release store).
 *   tu_reserve(len, align)       an mmap'd area of len bytes at an address
 *                                aligned to align (a power of two).
 *   tu_job_sum(v)                the sum of v over all ranks (fh_allgather).
 *   tu_round_trip(rank, remote)  an honest put + get of 3000 bytes at
 *                                remote (inside rank's segment) must give
 *                                the bytes back: the job is still in
 *                                service after an attack.
 *
 * Everything is static inline so each test is one translation unit.
 */
#ifndef FH_TESTUTIL_H
#define FH_TESTUTIL_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "firehose.h"

static int tu_myrank = -1;   /* set by tu_init_rank(); -1 = runtime not up */
static const char *tu_name = "test";

static inline void tu_init_rank(const char *name)
{
    tu_name = name;
    tu_myrank = fh_rank();
    setvbuf(stdout, NULL, _IOLBF, 0);
}

__attribute__((noreturn, format(printf, 1, 2)))
static inline void tu_fail(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (tu_myrank >= 0)
        printf("[%d] FAIL %s\n", tu_myrank, buf);
    else
        printf("FAIL %s\n", buf);
    fflush(stdout);
    fflush(stderr);
    if (tu_myrank >= 0 && fh_rank() >= 0)
        fh_abort(1, "integration test failed (see FAIL line above)");
    exit(1);
}

/* Prints only on rank 0 (or before init). */
#define TU_SAY(...) do { if (tu_myrank <= 0) { printf(__VA_ARGS__); \
                         fflush(stdout); } } while (0)
/* Prints on every rank, prefixed. */
#define TU_LOG(...) do { printf("[%d] ", tu_myrank); printf(__VA_ARGS__); \
                         fflush(stdout); } while (0)

#define CHECK(cond, what, ...) do { if (!(cond)) {                           \
        char tu_m_[512]; snprintf(tu_m_, sizeof tu_m_, __VA_ARGS__);         \
        tu_fail("%s: %s (%s:%d)", (what), tu_m_, __FILE__, __LINE__); } } while (0)

static inline const char *tu_errname(int rc)
{
    static __thread char b[32];
    if (rc > 0) { snprintf(b, sizeof b, "%d", rc); return b; }
    return fh_err_name(rc);
}

/* The call must return exactly `expected`. */
#define CHECK_RC(call, expected) do {                                          \
        int tu_rc_ = (call); int tu_ex_ = (expected);                         \
        if (tu_rc_ != tu_ex_)                                                 \
            tu_fail("%s: expected %s, saw %s (%d) [last_error: %s] (%s:%d)",  \
                    #call, tu_errname(tu_ex_), tu_errname(tu_rc_), tu_rc_,    \
                    fh_last_error() ? fh_last_error() : "(null)",             \
                    __FILE__, __LINE__);                                      \
    } while (0)

#define CHECK_OK(call) CHECK_RC(call, FH_OK)

/* The call must return one of two codes (where the header allows both). */
#define CHECK_RC2(call, e1, e2) do {                                           \
        int tu_rc_ = (call);                                                  \
        if (tu_rc_ != (e1) && tu_rc_ != (e2))                                 \
            tu_fail("%s: expected %s or %s, saw %s (%d) [last_error: %s] (%s:%d)", \
                    #call, tu_errname(e1), tu_errname(e2), tu_errname(tu_rc_),\
                    tu_rc_, fh_last_error() ? fh_last_error() : "(null)",     \
                    __FILE__, __LINE__);                                      \
    } while (0)

/* ------------------------------------------------------------- random */

typedef struct { uint64_t s; } tu_rng_t;

static inline uint64_t tu_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t tu_rng_next(tu_rng_t *r)
{
    r->s += 0x9e3779b97f4a7c15ULL;
    return tu_mix64(r->s);
}

/* Uniform in [0, n) (n > 0). */
static inline uint64_t tu_rng_below(tu_rng_t *r, uint64_t n)
{
    return n ? tu_rng_next(r) % n : 0;
}

static inline tu_rng_t tu_rng_make(uint64_t seed, uint64_t a, uint64_t b,
                                   uint64_t c)
{
    tu_rng_t r;
    r.s = tu_mix64(seed ^ tu_mix64(a * 0x100000001b3ULL ^ tu_mix64(b + 7)
                                   ^ tu_mix64(c * 31 + 3)));
    return r;
}

static uint64_t tu_seed;

/* Collective (after fh_init): rank 0's seed becomes everybody's. */
static inline uint64_t tu_seed_init(void)
{
    uint64_t mine;
    const char *e = getenv("FH_TEST_SEED");
    if (e && *e)
        mine = strtoull(e, NULL, 0);
    else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        mine = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)getpid() << 32);
    }
    int n = fh_nranks();
    uint64_t *all = calloc((size_t)n, sizeof *all);
    if (!all)
        tu_fail("calloc");
    int rc = fh_allgather(&mine, all, sizeof mine);
    if (rc != FH_OK)
        tu_fail("fh_allgather(seed): expected FH_OK, saw %s", fh_err_name(rc));
    tu_seed = all[0];
    free(all);
    TU_SAY("%s: seed FH_TEST_SEED=%" PRIu64 "\n", tu_name, tu_seed);
    return tu_seed;
}

/* ------------------------------------------------------------ patterns */

/* Key of a pattern: (a, b, c), e.g. (source rank, iteration, op). */
static inline uint64_t tu_key(uint64_t a, uint64_t b, uint64_t c)
{
    return tu_mix64(tu_seed ^ tu_mix64((a << 40) ^ (b << 16) ^ c ^
                                       0x5bd1e995ULL));
}

/* Byte k of the pattern `key`.  Neighbouring bytes differ, so a shifted or
 * misplaced copy is caught.  Words of 8 bytes are hashed at once. */
static inline uint8_t tu_pat(uint64_t key, uint64_t k)
{
    uint64_t w = tu_mix64(key + (k >> 3));
    return (uint8_t)(w >> ((k & 7) * 8));
}

/* Fills buf[0..n) with bytes base..base+n of pattern key. */
static inline void tu_fill(void *buf, size_t n, uint64_t key, uint64_t base)
{
    uint8_t *p = buf;
    size_t i = 0;
    uint64_t k = base;
    while (i < n && (k & 7)) { p[i++] = tu_pat(key, k); k++; }
    while (n - i >= 8) {
        uint64_t w = tu_mix64(key + (k >> 3));
        memcpy(p + i, &w, 8);   /* little-endian: byte j = w >> 8j */
        i += 8; k += 8;
    }
    while (i < n) { p[i++] = tu_pat(key, k); k++; }
}

/* Returns the index of the first byte that differs from the pattern, or
 * (size_t)-1 when all match. */
static inline size_t tu_check(const void *buf, size_t n, uint64_t key,
                              uint64_t base)
{
    const uint8_t *p = buf;
    size_t i = 0;
    uint64_t k = base;
    while (i < n && (k & 7)) { if (p[i] != tu_pat(key, k)) return i; i++; k++; }
    while (n - i >= 8) {
        uint64_t w = tu_mix64(key + (k >> 3)), v;
        memcpy(&v, p + i, 8);
        if (v != w) {
            for (size_t j = 0; j < 8; j++)
                if (p[i + j] != tu_pat(key, k + j)) return i + j;
        }
        i += 8; k += 8;
    }
    while (i < n) { if (p[i] != tu_pat(key, k)) return i; i++; k++; }
    return (size_t)-1;
}

/* Verifies and fails with a precise message. */
#define TU_VERIFY(buf, n, key, base, ...) do {                                \
        size_t tu_n_ = (n);                                                  \
        size_t tu_bad_ = tu_check((buf), tu_n_, (key), (base));              \
        if (tu_bad_ != (size_t)-1) {                                         \
            char tu_w_[400]; snprintf(tu_w_, sizeof tu_w_, __VA_ARGS__);     \
            tu_fail("%s: expected byte %zu of %zu = 0x%02x, saw 0x%02x "     \
                    "(%s:%d)", tu_w_, tu_bad_, tu_n_,                        \
                    tu_pat((key), (base) + tu_bad_),                          \
                    ((const uint8_t *)(buf))[tu_bad_], __FILE__, __LINE__);  \
        }                                                                    \
    } while (0)

/* Every byte of buf must equal c. */
static inline size_t tu_check_const(const void *buf, size_t n, uint8_t c)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < n; i++)
        if (p[i] != c) return i;
    return (size_t)-1;
}

static inline double tu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline void tu_sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* Integer option "--name=V" or "--name V" from argv, or def. */
static inline long tu_opt(int argc, char **argv, const char *name, long def)
{
    size_t l = strlen(name);
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], name, l) == 0) {
            if (argv[i][l] == '=') return strtol(argv[i] + l + 1, NULL, 0);
            if (argv[i][l] == '\0' && i + 1 < argc)
                return strtol(argv[i + 1], NULL, 0);
        }
    }
    return def;
}

static inline int tu_flag(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return 1;
    return 0;
}

/* Iteration scale: env FH_TEST_SCALE (default 1) multiplies loop counts. */
static inline long tu_scale(long n)
{
    const char *e = getenv("FH_TEST_SCALE");
    double s = e && *e ? strtod(e, NULL) : 1.0;
    long v = (long)(n * s);
    return v < 1 ? 1 : v;
}

static inline void tu_wait_for(volatile uint64_t *v, uint64_t want)
{
    while (__atomic_load_n(v, __ATOMIC_ACQUIRE) != want)
        CHECK_OK(fh_poll());
}

static inline char *tu_reserve(size_t len, size_t align)
{
    char *raw = mmap(NULL, len + align, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(raw != MAP_FAILED, "mmap", "an area of %zu bytes, saw MAP_FAILED", len + align);
    char *al = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    if (al > raw)
        munmap(raw, (size_t)(al - raw));
    munmap(al + len, (size_t)(raw + align - al));
    return al;
}

static inline uint64_t tu_job_sum(uint64_t v)
{
    int n = fh_nranks();
    uint64_t *all = calloc((size_t)n, sizeof *all), total = 0;
    CHECK(all != NULL, "calloc", "memory, saw NULL");
    CHECK_OK(fh_allgather(&v, all, sizeof v));
    for (int r = 0; r < n; r++)
        total += all[r];
    free(all);
    return total;
}

static inline void tu_round_trip(int rank, uint8_t *remote)
{
    uint8_t out[3000], in[3000];
    tu_fill(out, sizeof out, 7, 0);
    CHECK_RC(fh_put(rank, remote, out, sizeof out), FH_OK);
    CHECK_RC(fh_get(in, rank, remote, sizeof in), FH_OK);
    CHECK(memcmp(in, out, sizeof in) == 0, "round trip after the attack",
          "the data put, saw different bytes");
}

#endif /* FH_TESTUTIL_H */
