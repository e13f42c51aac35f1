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
 *   map,pattern,keys,lookups,ours_ns,uthash_ns,ratio,ratio_min,ratio_max
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
    ut_rec_t *rec, *rhead;
    fhc_map_t fm;
    char obj[ENTRIES];          /* the "regions": only their addresses */
    ut_obj_key_t *okey, *ohead;
} mctx_t;

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
    x->rec = calloc(NKEYS, sizeof *x->rec);
    x->okey = calloc(NKEYS, sizeof *x->okey);
    fhc_map_init(&x->fm);
    if (!x->rec || !x->okey || reg_map_init(&x->rm, SLOTS) != 0 ||
        fhc_map_reserve(&x->fm, NKEYS) != 0)
        fh_abort(1, "fhbench: out of memory");
    for (uint32_t i = 0; i < NKEYS; i++) {
        mkey_t k = key_of(i);
        x->key[i] = k;
        uint32_t val = i / RUN + 1;
        if (reg_map_put(&x->rm, k.peer, k.bno, val) != 0)
            fh_abort(1, "fhbench: map: reg_map_put refused a key");
        x->rec[i].key = k;
        x->rec[i].val = val;
        HASH_ADD(hh, x->rhead, key, sizeof(mkey_t), &x->rec[i]);
        void *o = &x->obj[i / RUN];
        fhc_map_put(&x->fm, k.peer, k.bno, o);
        x->okey[i].k[0] = k.peer;
        x->okey[i].k[1] = k.bno;
        x->okey[i].obj = o;
        HASH_ADD(hh, x->ohead, k, sizeof x->okey[i].k, &x->okey[i]);
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
    HASH_CLEAR(hh, x->rhead);
    HASH_CLEAR(hh, x->ohead);
    free(x->rec);
    free(x->okey);
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

static uint64_t ut_reg(const mctx_t *x, int p, long passes)
{
    uint64_t sum = 0, first = 0;
    for (long r = 0; r < passes; r++) {
        for (uint32_t j = 0; j < SEQ; j++) {
            ut_rec_t *f;
            HASH_FIND(hh, x->rhead, &x->seq[p][j], sizeof(mkey_t), f);
            sum += f ? f->val : 0;
        }
        if (r == 0)
            first = sum;
    }
    return first;
}

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

static uint64_t ut_fhc(const mctx_t *x, int p, long passes)
{
    uint64_t sum = 0, first = 0;
    for (long r = 0; r < passes; r++) {
        for (uint32_t j = 0; j < SEQ; j++) {
            uint64_t k[2] = {x->seq[p][j].peer, x->seq[p][j].bno};
            ut_obj_key_t *f;
            HASH_FIND(hh, x->ohead, k, sizeof k, f);
            sum += obj_val(x, f ? f->obj : NULL);
        }
        if (r == 0)
            first = sum;
    }
    return first;
}

static const struct {
    const char *map;
    side_fn ours, ut;
} maps[] = {
    {"reg_map", ours_reg, ut_reg},
    {"fhc_map", ours_fhc, ut_fhc},
};
static const char *const pattern[2] = {"hit", "miss"};

/* Times one side; returns ns/lookup, or -1 if a lookup returned a wrong
 * value. */
static double timed(side_fn f, const mctx_t *x, int p, long passes)
{
    f(x, p, 1);                                 /* warm-up */
    double t0 = fhb_now_ns();
    uint64_t got = f(x, p, passes);
    double t1 = fhb_now_ns();
    if (got != x->want[p]) {
        fprintf(stderr, "fhbench: map: %s lookups summed to %llu, expected %llu\n",
                pattern[p], (unsigned long long)got, (unsigned long long)x->want[p]);
        return -1;
    }
    return (t1 - t0) / ((double)passes * SEQ);
}

int fhb_map(const fhb_opts_t *o)
{
    FILE *csv = fhb_csv_open(o, "map,pattern,keys,lookups,ours_ns,uthash_ns,ratio,"
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
    printf("map: uthash %s (HASH_FUNCTION default), %u keys, %ld lookups per side\n",
           STR(UTHASH_VERSION), NKEYS, passes * (long)SEQ);
    printf("%8s %8s %10s %10s %8s %8s %8s\n", "map", "pattern", "ours_ns", "uthash_ns",
           "ratio", "min", "max");
    for (size_t m = 0; m < sizeof maps / sizeof maps[0]; m++)
        for (int p = 0; p < 2; p++) {
            double us[MAX_REPS], ut[MAX_REPS], q[MAX_REPS];
            int wrong = 0;
            for (int r = 0; r < reps; r++) {
                us[r] = timed(maps[m].ours, x, p, passes);
                ut[r] = timed(maps[m].ut, x, p, passes);
                wrong |= us[r] < 0 || ut[r] < 0;
                q[r] = ut[r] > 0 ? us[r] / ut[r] : 0;
            }
            if (wrong) {
                printf("%8s %8s   FAILED: wrong lookup results (see stderr)\n", maps[m].map,
                       pattern[p]);
                bad = 1;
                continue;
            }
            double a = fhb_quantile(us, (size_t)reps, 0.5);
            double b = fhb_quantile(ut, (size_t)reps, 0.5);
            double qm = fhb_quantile(q, (size_t)reps, 0.5);
            double q0 = fhb_quantile(q, (size_t)reps, 0.0);
            double q1 = fhb_quantile(q, (size_t)reps, 1.0);
            fhb_csv_row(csv, "%s,%s,%u,%ld,%.2f,%.2f,%.3f,%.3f,%.3f", maps[m].map, pattern[p],
                        NKEYS, passes * (long)SEQ, a, b, qm, q0, q1);
            printf("%8s %8s %10.2f %10.2f %8.3f %8.3f %8.3f\n", maps[m].map, pattern[p], a, b,
                   qm, q0, q1);
            fflush(stdout);
        }
    teardown(x);
    free(x);
    fhb_csv_close(csv);
    fhb_unpark();
    return bad;
}
