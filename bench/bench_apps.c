/*
 * bench_apps.c -- `apps`: the firehose paper's Table 1 application kernels,
 * written on the public API, with their results verified.
 *
 * cannon   C = A x B, n x n doubles, as a q x q grid of b x b blocks; block
 *          (i,j) lives on rank (i*q+j) % P.  Cannon's algorithm with the
 *          initial skew done at generation: q steps of multiply-accumulate,
 *          then A blocks shift left and B blocks up, one fh_put_nbi per
 *          block row into the receiving block's "next" buffer.  Verified
 *          element by element against the sum computed from the generators.
 * bitonic  K blocks of `bs` 64-bit keys (block k on rank k % P), each sorted
 *          locally, then the bitonic network on blocks with merge-split as
 *          the comparator (Knuth 5.3.4 ex. 38): the owner of the lower block
 *          of a pair fh_get()s the other block, merges, keeps its half and
 *          fh_put()s the other half back in CHUNK-byte pieces; a barrier
 *          after each step.  Verified: every block sorted, block boundaries
 *          ordered, sum and xor of all keys unchanged.
 *
 * Reported per kernel (summed over ranks): runtime (rank 0, barrier to
 * barrier), puts and gets issued (fh_stats_peer), firehose hits and misses,
 * hit rate.  bench/run-all.sh runs this once per FH_REG_STRATEGY.
 *
 * CSV columns:
 *   strategy,app,n,ranks,runtime_s,puts,gets,hits,misses,hit_rate,verified
 */
#include <stdlib.h>
#include <string.h>

#include "fhbench.h"

#define CHUNK 512

typedef struct counts { uint64_t puts, gets, hits, misses; } counts_t;

static counts_t snap(void)
{
    fh_peer_stats_t s = FH_PEER_STATS_INIT;
    counts_t c = {0, 0, 0, 0};
    FHB_TRY(fh_stats_peer(fh_rank(), &s));
    c.puts = s.puts;
    c.gets = s.gets;
    fhb_reg_counts(&c.hits, &c.misses);
    return c;
}

/* Sum over ranks of (now - before). */
static counts_t delta_all(counts_t before)
{
    counts_t now = snap(), d = {now.puts - before.puts, now.gets - before.gets,
                                now.hits - before.hits, now.misses - before.misses};
    int P = fh_nranks();
    counts_t *all = calloc((size_t)P, sizeof *all);
    if (!all)
        fh_abort(1, "fhbench: out of memory");
    FHB_TRY(fh_allgather(&d, all, sizeof d));
    counts_t sum = {0, 0, 0, 0};
    for (int r = 0; r < P; r++) {
        sum.puts += all[r].puts;
        sum.gets += all[r].gets;
        sum.hits += all[r].hits;
        sum.misses += all[r].misses;
    }
    free(all);
    return sum;
}

static int all_ok(int ok)
{
    int P = fh_nranks();
    int *v = calloc((size_t)P, sizeof *v);
    if (!v)
        fh_abort(1, "fhbench: out of memory");
    FHB_TRY(fh_allgather(&ok, v, sizeof ok));
    int r = 1;
    for (int i = 0; i < P; i++)
        r = r && v[i];
    free(v);
    return r;
}

static void report(FILE *csv, const char *app, size_t n, double secs, counts_t c, int ok)
{
    char hr[32] = "";
    if (c.hits + c.misses)
        snprintf(hr, sizeof hr, "%.4f", (double)c.hits / (double)(c.hits + c.misses));
    fhb_csv_row(csv, "%s,%s,%zu,%d,%.6f,%llu,%llu,%llu,%llu,%s,%d", fhb_strategy(), app, n,
                fh_nranks(), secs, (unsigned long long)c.puts, (unsigned long long)c.gets,
                (unsigned long long)c.hits, (unsigned long long)c.misses, hr, ok);
    if (fh_rank() == 0) {
        printf("%-8s n=%-6zu %9.4f s  puts %8llu  gets %8llu  hits %8llu  misses %6llu  "
               "hit%% %-7s %s\n", app, n, secs, (unsigned long long)c.puts,
               (unsigned long long)c.gets, (unsigned long long)c.hits,
               (unsigned long long)c.misses, hr[0] ? hr : "-", ok ? "verified" : "WRONG");
        fflush(stdout);
    }
}

/* ------------------------------------------------------------ Cannon */

static double gen_a(size_t r, size_t c) { return (double)((r * 7 + c * 3) % 11) - 5.0; }
static double gen_b(size_t r, size_t c) { return (double)((r * 5 + c * 2) % 13) - 6.0; }

static int cannon(FILE *csv, size_t q, size_t b)
{
    int P = fh_nranks(), me = fh_rank();
    size_t nblk = q * q, bb = b * b, n = q * b;
    size_t slots = (nblk + (size_t)P - 1) / (size_t)P;
    /* per slot: A[2], B[2], C, each bb doubles */
    size_t slot_bytes = 5 * bb * sizeof(double);
    fh_seg_t seg;
    void *mine;
    FHB_TRY(fh_segment_create(slots * slot_bytes, &seg, &mine));
    char **base = calloc((size_t)P, sizeof *base);
    if (!base)
        fh_abort(1, "fhbench: out of memory");
    for (int r = 0; r < P; r++)
        FHB_TRY(fh_segment_query(seg, r, (void **)&base[r], NULL));
#define BLK(rank, slot, which) ((double *)(base[rank] + (slot) * slot_bytes) + (which) * bb)
    /* which: 0,1 = A[cur/next], 2,3 = B[cur/next], 4 = C */
    for (size_t k = me; k < nblk; k += (size_t)P) {
        size_t i = k / q, j = k % q, s = k / (size_t)P, kk = (i + j) % q;
        double *A = BLK(me, s, 0), *B = BLK(me, s, 2), *C = BLK(me, s, 4);
        for (size_t r = 0; r < b; r++)
            for (size_t c = 0; c < b; c++) {
                A[r * b + c] = gen_a(i * b + r, kk * b + c);
                B[r * b + c] = gen_b(kk * b + r, j * b + c);
                C[r * b + c] = 0.0;
            }
    }
    FHB_TRY(fh_barrier());
    counts_t c0 = snap();
    double t0 = fhb_now_ns();
    int cur = 0;
    for (size_t step = 0; step < q; step++) {
        for (size_t k = me; k < nblk; k += (size_t)P) {
            size_t s = k / (size_t)P;
            double *A = BLK(me, s, cur), *B = BLK(me, s, 2 + cur), *C = BLK(me, s, 4);
            for (size_t r = 0; r < b; r++)
                for (size_t x = 0; x < b; x++) {
                    double a = A[r * b + x];
                    for (size_t c = 0; c < b; c++)
                        C[r * b + c] += a * B[x * b + c];
                }
        }
        if (step + 1 == q)
            break;
        for (size_t k = me; k < nblk; k += (size_t)P) {
            size_t i = k / q, j = k % q, s = k / (size_t)P;
            size_t left = i * q + (j + q - 1) % q, up = ((i + q - 1) % q) * q + j;
            int lr = (int)(left % (size_t)P), ur = (int)(up % (size_t)P);
            double *A = BLK(me, s, cur), *B = BLK(me, s, 2 + cur);
            double *An = BLK(lr, left / (size_t)P, 1 - cur);
            double *Bn = BLK(ur, up / (size_t)P, 3 - cur);
            for (size_t r = 0; r < b; r++) {
                FHB_TRY(fh_put_nbi(lr, An + r * b, A + r * b, b * sizeof(double)));
                FHB_TRY(fh_put_nbi(ur, Bn + r * b, B + r * b, b * sizeof(double)));
            }
        }
        FHB_TRY(fh_wait_nbi());
        FHB_TRY(fh_barrier());
        cur = 1 - cur;
    }
    FHB_TRY(fh_barrier());
    double secs = (fhb_now_ns() - t0) / 1e9;
    counts_t d = delta_all(c0);
    int ok = 1;
    for (size_t k = me; k < nblk && ok; k += (size_t)P) {
        size_t i = k / q, j = k % q;
        double *C = BLK(me, k / (size_t)P, 4);
        for (size_t r = 0; r < b && ok; r++)
            for (size_t c = 0; c < b && ok; c++) {
                double want = 0.0;
                for (size_t x = 0; x < n; x++)
                    want += gen_a(i * b + r, x) * gen_b(x, j * b + c);
                if (C[r * b + c] != want) {
                    fprintf(stderr, "fhbench cannon: C[%zu][%zu] = %g, want %g\n", i * b + r,
                            j * b + c, C[r * b + c], want);
                    ok = 0;
                }
            }
    }
#undef BLK
    ok = all_ok(ok);
    report(csv, "cannon", n, secs, d, ok);
    free(base);
    FHB_TRY(fh_barrier());
    FHB_TRY(fh_segment_destroy(seg));
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------ bitonic */

static uint64_t key_of(uint64_t i)
{
    uint64_t z = i * 0x9e3779b97f4a7c15ull + 12345;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* lo, hi sorted (bs each) -> lo gets the bs smallest, hi the bs largest
 * (swapped when !ascending).  tmp holds 2 bs. */
static void merge_split(uint64_t *lo, uint64_t *hi, uint64_t *tmp, size_t bs, int ascending)
{
    size_t a = 0, b = 0;
    for (size_t k = 0; k < 2 * bs; k++)
        tmp[k] = (b >= bs || (a < bs && lo[a] <= hi[b])) ? lo[a++] : hi[b++];
    memcpy(ascending ? lo : hi, tmp, bs * sizeof *tmp);
    memcpy(ascending ? hi : lo, tmp + bs, bs * sizeof *tmp);
}

static void put_chunks(int rank, uint64_t *dst, const uint64_t *src, size_t bytes)
{
    for (size_t off = 0; off < bytes; off += CHUNK) {
        size_t n = bytes - off < CHUNK ? bytes - off : CHUNK;
        FHB_TRY(fh_put(rank, (char *)dst + off, (const char *)src + off, n));
    }
}

static int bitonic(FILE *csv, size_t K, size_t bs)
{
    int P = fh_nranks(), me = fh_rank();
    size_t slots = (K + (size_t)P - 1) / (size_t)P, bbytes = bs * sizeof(uint64_t);
    fh_seg_t seg;
    void *mine;
    FHB_TRY(fh_segment_create((slots + 1) * bbytes, &seg, &mine));
    char **base = calloc((size_t)P, sizeof *base);
    uint64_t *tmp = malloc(2 * bbytes);
    if (!base || !tmp)
        fh_abort(1, "fhbench: out of memory");
    for (int r = 0; r < P; r++)
        FHB_TRY(fh_segment_query(seg, r, (void **)&base[r], NULL));
#define KBLK(rank, k) ((uint64_t *)(base[rank] + ((k) / (size_t)P) * bbytes))
    uint64_t *scratch = (uint64_t *)((char *)mine + slots * bbytes);
    uint64_t sum = 0, xr = 0;
    for (size_t k = me; k < K; k += (size_t)P) {
        uint64_t *B = KBLK(me, k);
        for (size_t e = 0; e < bs; e++) {
            B[e] = key_of(k * bs + e);
            sum += B[e];
            xr ^= B[e];
        }
        qsort(B, bs, sizeof *B, cmp_u64);
    }
    FHB_TRY(fh_barrier());
    counts_t c0 = snap();
    double t0 = fhb_now_ns();
    for (size_t k = 2; k <= K; k *= 2)
        for (size_t j = k / 2; j > 0; j /= 2) {
            for (size_t i = me; i < K; i += (size_t)P) {
                size_t l = i ^ j;
                if (l <= i)
                    continue;
                int lr = (int)(l % (size_t)P);
                uint64_t *mineb = KBLK(me, i), *remote = KBLK(lr, l);
                FHB_TRY(fh_get(scratch, lr, remote, bbytes));
                merge_split(mineb, scratch, tmp, bs, (i & k) == 0);
                put_chunks(lr, remote, scratch, bbytes);
            }
            FHB_TRY(fh_barrier());
        }
    double secs = (fhb_now_ns() - t0) / 1e9;
    counts_t d = delta_all(c0);
    /* verify */
    int ok = 1;
    uint64_t sum2 = 0, xr2 = 0;
    for (size_t k = me; k < K; k += (size_t)P) {
        uint64_t *B = KBLK(me, k);
        for (size_t e = 0; e < bs; e++) {
            sum2 += B[e];
            xr2 ^= B[e];
            if (e && B[e - 1] > B[e])
                ok = 0;
        }
        if (k + 1 < K) {
            uint64_t first;
            FHB_TRY(fh_get(&first, (int)((k + 1) % (size_t)P), KBLK((k + 1) % (size_t)P, k + 1),
                           sizeof first));
            if (B[bs - 1] > first)
                ok = 0;
        }
    }
    uint64_t mine2[4] = {sum, xr, sum2, xr2};
    uint64_t *all = calloc((size_t)P * 4, sizeof *all);
    if (!all)
        fh_abort(1, "fhbench: out of memory");
    FHB_TRY(fh_allgather(mine2, all, sizeof mine2));
    uint64_t s1 = 0, x1 = 0, s2 = 0, x2 = 0;
    for (int r = 0; r < P; r++) {
        s1 += all[4 * r];
        x1 ^= all[4 * r + 1];
        s2 += all[4 * r + 2];
        x2 ^= all[4 * r + 3];
    }
    if (s1 != s2 || x1 != x2)
        ok = 0;
    free(all);
#undef KBLK
    ok = all_ok(ok);
    if (!ok && me == 0)
        fprintf(stderr, "fhbench bitonic: result not sorted or keys changed\n");
    report(csv, "bitonic", K * bs, secs, d, ok);
    free(base);
    free(tmp);
    FHB_TRY(fh_barrier());
    FHB_TRY(fh_segment_destroy(seg));
    return ok ? 0 : 1;
}

int fhb_apps(const fhb_opts_t *o)
{
    FILE *csv = fhb_csv_open(o, "strategy,app,n,ranks,runtime_s,puts,gets,hits,misses,"
                                "hit_rate,verified");
    if (fh_rank() == 0)
        printf("strategy %s, %d ranks\n", fhb_strategy(), fh_nranks());
    int bad = 0;
    bad |= o->quick ? cannon(csv, 4, 64) : cannon(csv, 4, 128);
    bad |= o->quick ? bitonic(csv, 32, 4096) : bitonic(csv, 64, 16384);
    fhb_csv_close(csv);
    return bad;
}
