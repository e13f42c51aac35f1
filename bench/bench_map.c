/*
 * bench_map.c -- `map`: our two hash maps against uthash, ns per lookup.
 *
 * Issue 12 keeps our own maps only where they beat uthash; this test is
 * the evidence their headers quote.  Both sides hold the same keys and
 * look up the same key sequence, in the same process and run:
 *
 *   reg_map   util/map.h reg_map_get, the firehose hit layer's map
 *             (peer, bucket number) -> entry index + 1, sized as
 *             firehose_hit.c sizes it (8192 slots) and filled with 4096
 *             keys: 256 entries of 16 consecutive buckets, 4 peers.
 *     vs      uthash HASH_FIND on a struct key {bno, peer} (zeroed
 *             padding), one record per key holding the same value.
 *   fhc_map   cache/fhc_map.h fhc_map_get, the pure cache's map, over the
 *             same keys; each value is one of 256 region objects, stored
 *             under each of its 16 buckets.
 *     vs      uthash: an object sits in one table under one key per
 *             UT_hash_handle, so it cannot be stored under 16 keys of the
 *             same table; the comparable table has one handle record per
 *             key {k1, k2, object pointer} (here all from one array, in
 *             the cache one allocation per key).  Only the lookup is
 *             compared, not the cost of those records.
 *
 * Each uthash side twice (column uthash_hash): "jen", uthash's default
 * hash (HASH_FUNCTION: Jenkins over the key bytes), as a plain HASH_FIND
 * gets it; "mul", the same table given reg_map's multiplicative hash of
 * the key through HASH_ADD_BYHASHVALUE / HASH_FIND_BYHASHVALUE, which
 * separates the cost of the hash from the cost of uthash's chained table.
 *
 * Patterns: hit (keys present, in a fixed pseudo-random order) and miss
 * (absent keys: the same peers, buckets past every entry).  Each lookup's
 * result is checked (summed and compared with the expected sum, so the
 * compiler cannot drop a lookup); a wrong result fails the test.
 *
 * Each repetition times every map once, in turn (paired); 5 repetitions
 * with --quick, else 11.  The table shows the median ns/lookup of each
 * side and the median, lowest and highest of the per-repetition ratios
 * ours / uthash (< 1: ours is faster).  Only rank 0 measures; the other
 * ranks park (sleeping poll).
 *
 * CSV columns:
 *   map,uthash_hash,pattern,keys,lookups,ours_ns,uthash_ns,ratio,ratio_min,ratio_max
 */
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "firehose/cache/fhc_map.h"
#include "firehose/util/map.h"
#include "fhbench.h"

#define MAX_REPS 11
#define PEERS 4u
#define ENTRIES 256u            /* firehose_hit.c TC_ENTRIES */
#define RUN 16u                 /* buckets per entry */
#define NKEYS (ENTRIES * RUN)   /* 4096 */
#define SLOTS 8192u             /* firehose_hit.c TC_SLOTS */
#define SEQ 4096u               /* lookups per pass over the key sequence */
#define STR_(x) #x
#define STR(x) STR_(x)                /* UTHASH_VERSION is a bare 2.3.0 */

typedef struct mkey {
    uint64_t bno;
    uint32_t peer;
    uint32_t pad;               /* 0: HASH_FIND compares the bytes */
} mkey_t;

typedef struct ut_rec {         /* uthash vs reg_map */
    mkey_t key;
    uint32_t val;
    UT_hash_handle hh;
} ut_rec_t;

typedef struct ut_obj_key {     /* uthash vs fhc_map: one handle per key */
    uint64_t k[2];
    void *obj;
    UT_hash_handle hh;
} ut_obj_key_t;

typedef struct mctx {
    mkey_t key[NKEYS];          /* key i belongs to entry i / RUN */
    mkey_t seq[2][SEQ];         /* [0] hits, [1] misses */
    uint64_t want[2];           /* expected value sum of one pass */
    reg_map_t rm;
    fhc_map_t fm;
    char obj[ENTRIES];          /* the "regions": only their addresses */
    /* uthash tables, [0] default hash, [1] multiplicative (MUL) */
    ut_rec_t *rec[2], *rhead[2];
    ut_obj_key_t *okey[2], *ohead[2];
} mctx_t;

enum { JEN = 0, MUL = 1 };

/* reg_map's hash (util/map.h reg_map_home, before the shift) of a key
 * given as (k1 = peer, k2 = bucket number). */
static unsigned mul_hash(uint64_t peer, uint64_t bno)
{
    return (unsigned)(((bno ^ (peer << 32 | peer)) * 0x9E3779B97F4A7C15ull) >> 32);
}

/* Key i: peer i % PEERS; each entry a run of RUN buckets, entries spread
 * over the address space as a thread's firehoses are. */
static mkey_t key_of(uint32_t i)
{
    uint32_t e = i / RUN;
    return (mkey_t){.bno = (uint64_t)(e / PEERS) * 4 * RUN + 7 + i % RUN, .peer = e % PEERS};
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void setup(mctx_t *x)
{
    memset(x, 0, sizeof *x);
    fhc_map_init(&x->fm);
    if (reg_map_init(&x->rm, SLOTS) != 0 || fhc_map_reserve(&x->fm, NKEYS) != 0)
        fh_abort(1, "fhbench: out of memory");
    for (int h = JEN; h <= MUL; h++) {
        x->rec[h] = calloc(NKEYS, sizeof *x->rec[h]);
        x->okey[h] = calloc(NKEYS, sizeof *x->okey[h]);
        if (!x->rec[h] || !x->okey[h])
            fh_abort(1, "fhbench: out of memory");
    }
    for (uint32_t i = 0; i < NKEYS; i++) {
        mkey_t k = key_of(i);
        x->key[i] = k;
        uint32_t val = i / RUN + 1;
        void *o = &x->obj[i / RUN];
        if (reg_map_put(&x->rm, k.peer, k.bno, val) != 0)
            fh_abort(1, "fhbench: map: reg_map_put refused a key");
        fhc_map_put(&x->fm, k.peer, k.bno, o);
        for (int h = JEN; h <= MUL; h++) {
            ut_rec_t *r = &x->rec[h][i];
            ut_obj_key_t *ok = &x->okey[h][i];
            *r = (ut_rec_t){.key = k, .val = val};
            *ok = (ut_obj_key_t){.k = {k.peer, k.bno}, .obj = o};
            if (h == JEN) {
                HASH_ADD(hh, x->rhead[h], key, sizeof(mkey_t), r);
                HASH_ADD(hh, x->ohead[h], k, sizeof ok->k, ok);
            } else {
                unsigned hv = mul_hash(k.peer, k.bno);
                HASH_ADD_BYHASHVALUE(hh, x->rhead[h], key, sizeof(mkey_t), hv, r);
                HASH_ADD_BYHASHVALUE(hh, x->ohead[h], k, sizeof ok->k, hv, ok);
            }
        }
    }
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (uint32_t j = 0; j < SEQ; j++) {
        uint32_t i = (uint32_t)(rng(&s) % NKEYS);
        x->seq[0][j] = x->key[i];
        x->want[0] += i / RUN + 1;
        mkey_t m = x->key[i];
        m.bno += (uint64_t)ENTRIES * 4 * RUN;      /* past every entry */
        x->seq[1][j] = m;
    }
}

static void teardown(mctx_t *x)
{
    for (int h = JEN; h <= MUL; h++) {
        HASH_CLEAR(hh, x->rhead[h]);
        HASH_CLEAR(hh, x->ohead[h]);
        free(x->rec[h]);
        free(x->okey[h]);
    }
    reg_map_fini(&x->rm);
    fhc_map_fini(&x->fm);
}

/* One timed side: `passes` passes over seq[p]; returns the value sum of
 * the first pass (fhc sides: entry index + 1 of the object found). */
typedef uint64_t (*side_fn)(const mctx_t *x, int p, long passes);

static uint64_t ours_reg(const mctx_t *x, int p, long passes)
{
    uint64_t sum = 0, first = 0;
    for (long r = 0; r < passes; r++) {
        for (uint32_t j = 0; j < SEQ; j++)
            sum += reg_map_get(&x->rm, x->seq[p][j].peer, x->seq[p][j].bno);
        if (r == 0)
            first = sum;
    }
    return first;
}

/* h is a constant in each caller: the compiler specializes the loop. */
static inline uint64_t ut_reg(const mctx_t *x, int p, long passes, int h)
{
    uint64_t sum = 0, first = 0;
    for (long r = 0; r < passes; r++) {
        for (uint32_t j = 0; j < SEQ; j++) {
            const mkey_t *k = &x->seq[p][j];
            ut_rec_t *f;
            if (h == JEN)
                HASH_FIND(hh, x->rhead[h], k, sizeof(mkey_t), f);
            else
                HASH_FIND_BYHASHVALUE(hh, x->rhead[h], k, sizeof(mkey_t),
                                      mul_hash(k->peer, k->bno), f);
            sum += f ? f->val : 0;
        }
        if (r == 0)
            first = sum;
    }
    return first;
}
static uint64_t ut_reg_jen(const mctx_t *x, int p, long n) { return ut_reg(x, p, n, JEN); }
static uint64_t ut_reg_mul(const mctx_t *x, int p, long n) { return ut_reg(x, p, n, MUL); }

static uint64_t obj_val(const mctx_t *x, const void *o)
{
    return o ? (uint64_t)((const char *)o - x->obj) + 1 : 0;
}

static uint64_t ours_fhc(const mctx_t *x, int p, long passes)
{
    uint64_t sum = 0, first = 0;
    for (long r = 0; r < passes; r++) {
        for (uint32_t j = 0; j < SEQ; j++)
            sum += obj_val(x, fhc_map_get(&x->fm, x->seq[p][j].peer, x->seq[p][j].bno));
        if (r == 0)
            first = sum;
    }
    return first;
}

static inline uint64_t ut_fhc(const mctx_t *x, int p, long passes, int h)
{
    uint64_t sum = 0, first = 0;
    for (long r = 0; r < passes; r++) {
        for (uint32_t j = 0; j < SEQ; j++) {
            uint64_t k[2] = {x->seq[p][j].peer, x->seq[p][j].bno};
            ut_obj_key_t *f;
            if (h == JEN)
                HASH_FIND(hh, x->ohead[h], k, sizeof k, f);
            else
                HASH_FIND_BYHASHVALUE(hh, x->ohead[h], k, sizeof k, mul_hash(k[0], k[1]), f);
            sum += obj_val(x, f ? f->obj : NULL);
        }
        if (r == 0)
            first = sum;
    }
    return first;
}
static uint64_t ut_fhc_jen(const mctx_t *x, int p, long n) { return ut_fhc(x, p, n, JEN); }
static uint64_t ut_fhc_mul(const mctx_t *x, int p, long n) { return ut_fhc(x, p, n, MUL); }

static const struct {
    const char *map;
    side_fn ours, ut[2];
} maps[] = {
    {"reg_map", ours_reg, {ut_reg_jen, ut_reg_mul}},
    {"fhc_map", ours_fhc, {ut_fhc_jen, ut_fhc_mul}},
};
static const char *const pattern[2] = {"hit", "miss"};
static const char *const hash_name[2] = {"jen", "mul"};

/* Times one side (named `side` in the error message); returns ns/lookup,
 * or -1 if a lookup returned a wrong value. */
static double timed(side_fn f, const char *side, const mctx_t *x, int p, long passes)
{
    f(x, p, 1);                                 /* warm-up */
    double t0 = fhb_now_ns();
    uint64_t got = f(x, p, passes);
    double t1 = fhb_now_ns();
    if (got != x->want[p]) {
        fprintf(stderr, "fhbench: map: %s: %s lookups summed to %llu, expected %llu\n",
                side, pattern[p], (unsigned long long)got, (unsigned long long)x->want[p]);
        return -1;
    }
    return (t1 - t0) / ((double)passes * SEQ);
}

int fhb_map(const fhb_opts_t *o)
{
    FILE *csv = fhb_csv_open(o, "map,uthash_hash,pattern,keys,lookups,ours_ns,uthash_ns,ratio,"
                                "ratio_min,ratio_max");
    if (fh_rank() != 0) {
        fhb_park(FHB_PARK_SLEEP);
        return 0;
    }
    mctx_t *x = malloc(sizeof *x);
    if (!x)
        fh_abort(1, "fhbench: out of memory");
    setup(x);
    long n = fhb_iters(o, 20000000, 2000000);
    long passes = n / SEQ > 0 ? n / SEQ : 1;
    int reps = o->quick ? 5 : 11;
    int bad = 0;
    printf("map: uthash %s, %u keys, %ld lookups per side\n", STR(UTHASH_VERSION), NKEYS,
           passes * (long)SEQ);
    printf("%8s %5s %8s %10s %10s %8s %8s %8s\n", "map", "hash", "pattern", "ours_ns",
           "uthash_ns", "ratio", "min", "max");
    for (size_t m = 0; m < sizeof maps / sizeof maps[0]; m++)
        for (int p = 0; p < 2; p++) {
            /* Paired: each repetition times ours, then both uthash tables. */
            double us[MAX_REPS], ut[2][MAX_REPS], q[2][MAX_REPS];
            int wrong = 0;
            for (int r = 0; r < reps; r++) {
                us[r] = timed(maps[m].ours, maps[m].map, x, p, passes);
                for (int h = JEN; h <= MUL; h++) {
                    const char *side = h == JEN ? "uthash jen" : "uthash mul";
                    ut[h][r] = timed(maps[m].ut[h], side, x, p, passes);
                    wrong |= us[r] < 0 || ut[h][r] < 0;
                    q[h][r] = ut[h][r] > 0 ? us[r] / ut[h][r] : 0;
                }
            }
            if (wrong) {
                printf("%8s %5s %8s   FAILED: wrong lookup results (see stderr)\n",
                       maps[m].map, "", pattern[p]);
                bad = 1;
                continue;
            }
            double a = fhb_quantile(us, (size_t)reps, 0.5);
            for (int h = JEN; h <= MUL; h++) {
                double b = fhb_quantile(ut[h], (size_t)reps, 0.5);
                double qm = fhb_quantile(q[h], (size_t)reps, 0.5);
                double q0 = fhb_quantile(q[h], (size_t)reps, 0.0);
                double q1 = fhb_quantile(q[h], (size_t)reps, 1.0);
                fhb_csv_row(csv, "%s,%s,%s,%u,%ld,%.2f,%.2f,%.3f,%.3f,%.3f", maps[m].map,
                            hash_name[h], pattern[p], NKEYS, passes * (long)SEQ, a, b, qm, q0,
                            q1);
                printf("%8s %5s %8s %10.2f %10.2f %8.3f %8.3f %8.3f\n", maps[m].map,
                       hash_name[h], pattern[p], a, b, qm, q0, q1);
            }
            fflush(stdout);
        }
    teardown(x);
    free(x);
    fhb_csv_close(csv);
    fhb_unpark();
    return bad;
}
