/*
 * everything_map_test.c -- issue 29, class 1: with FH_SEGMENT=everything a
 * peer may put to and get from any mapped byte of a rank, whatever its
 * alignment, length and mapping, and watching memory never changes what
 * the application's own system calls do.  Two ranks; rank 1 owns the
 * memory, rank 0 moves bytes:
 *   heap     malloc'd buffers, odd offsets;
 *   stack    a buffer on rank 1's main stack;
 *   edge     an mmap of 5 pages, whose end is inside a firehose bucket,
 *            transfers that end on its last byte and start on its first;
 *   file     a MAP_SHARED mapping of a file: the memory monitor cannot
 *            watch it, so over the network the target does not register
 *            it and the transfer travels by copies (firehose_copy.c,
 *            counted in reg_copies); the node route reaches it by
 *            cross-memory attach.  Rank 1 then reads the file through
 *            its descriptor: the bytes are in the file.  Then rank 1
 *            truncates the file under the mapping (its pages past the end
 *            raise SIGBUS on access): a transfer there fails with
 *            FH_ERR_OUT_OF_SEGMENT naming the address, nothing written,
 *            both ranks live, and the part before the end still works;
 *   huge     a 4 MiB mapping with MADV_HUGEPAGE;
 *   guard    the part of a two-bucket mapping after a PROT_NONE page in
 *            its first bucket (readable memory, a hole, then the area:
 *            the span's first bucket holds two runs, the second is the
 *            one asked for -- refused at random before, by address
 *            layout, when only the first run was looked at);
 *   twin1, twin2  two mappings in one bucket with an unmapped page
 *            between them (an mmap of two buckets, a page unmapped at 16
 *            KiB into the first): one region registers one run, so the
 *            other was refused (FH_ERR_OUT_OF_SEGMENT) while the region
 *            stayed cached; the target now registers the other run when
 *            nobody holds the region (re-aim), and after the sizes below
 *            rank 0 alternates between the two, 12 round trips.  With a
 *            third rank, it holds the region over twin1's run first, so
 *            twin2 cannot be re-aimed: those transfers go by copies
 *            (counted in reg_copies);
 *   mremap   after peers reached an mmap (so the runtime watches it), its
 *            owner grows it with mremap(MREMAP_MAYMOVE), then shrinks and
 *            splits it with munmap: each call must succeed and peers
 *            reach the new bytes; rank 0 does the same to a source buffer.
 * Then rank 0's threads reach the file area at once (copies in parallel).
 * Run on 2 ranks, or 3 (the third only holds twin1's region).
 * Sizes 1, 8, 3000 (put-in-move), 4097, 64 KiB + 17 at offsets 0, 1, 7,
 * 4095; FH_TEST_LONG=1 adds 1 MiB + 4096 and more offsets.  Every put is
 * checked at the target, every get against the target's bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../integ/testutil.h"

enum { A_HEAP, A_STACK, A_EDGE, A_FILE, A_HUGE, A_GUARD, A_TWIN1, A_TWIN2, A_REMAP, NAREA };
static const char *area_name[NAREA] = {"heap",  "stack", "edge",  "file",  "huge",
                                       "guard", "twin1", "twin2", "mremap"};
enum { BUCKET = 64 * 1024 };   /* FH_BUCKET_SIZE's default */

typedef struct { uint64_t addr[NAREA], len[NAREA]; } areas_t;

static size_t pg;
static int longrun;

static void *must_mmap(size_t len, int flags, int fd)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, 0);
    CHECK(p != MAP_FAILED, "mmap", "%zu bytes: %s", len, strerror(errno));
    return p;
}

/* Rank 0: puts pattern (area, i) to [off, off+n) of area a, then gets it
 * back; rank 1 checks the bytes after the round (check_round). */
static int round_trip(const areas_t *ar, int a, size_t off, size_t n, int i, char *buf)
{
    char *dst = (char *)(uintptr_t)ar->addr[a] + off;
    tu_fill(buf, n, tu_key((uint64_t)a, (uint64_t)i, 1), 0);
    int rc = fh_put(1, dst, buf, n);
    if (rc != FH_OK) {
        TU_LOG("FAIL put %s [%p +%zu] (offset %zu of %llu): %s\n", area_name[a], (void *)dst,
               n, off, (unsigned long long)ar->len[a], fh_last_error());
        return 1;
    }
    memset(buf, 0, n);
    rc = fh_get(buf, 1, dst, n);
    if (rc != FH_OK) {
        TU_LOG("FAIL get %s [%p +%zu]: %s\n", area_name[a], (void *)dst, n, fh_last_error());
        return 1;
    }
    if (tu_check(buf, n, tu_key((uint64_t)a, (uint64_t)i, 1), 0) != (size_t)-1) {
        TU_LOG("FAIL get %s [%p +%zu]: wrong bytes\n", area_name[a], (void *)dst, n);
        return 1;
    }
    return 0;
}

/* Rank 0's threads at once, each in its own 64 KiB of the file area:
 * every transfer goes by copies, concurrently (the copy list, its sender
 * and the reply handler under ThreadSanitizer: tsan_memory.sh). */
enum { NTHREADS = 4 };
typedef struct { char *dst; int k, bad; } tjob_t;

static void *copy_thread(void *arg)
{
    tjob_t *j = arg;
    static const size_t sz[] = {1, 100, 4097, 20000};
    char *b = malloc(20000);
    for (int i = 0; b != NULL && i < 16; i++) {
        size_t n = sz[i % 4], off = (size_t)j->k * 65536 + (size_t)i * 37 % 1000;
        uint64_t key = tu_key(100 + (uint64_t)j->k, (uint64_t)i, 1);
        tu_fill(b, n, key, 0);
        int rc = fh_put(1, j->dst + off, b, n);
        memset(b, 0, n);
        int rg = rc == FH_OK ? fh_get(b, 1, j->dst + off, n) : rc;
        if (rc != FH_OK || rg != FH_OK || tu_check(b, n, key, 0) != (size_t)-1) {
            TU_LOG("FAIL thread %d: file [+%zu, %zu B]: put %s, get %s\n", j->k, off, n,
                   fh_err_name(rc), fh_err_name(rg));
            j->bad++;
        }
    }
    free(b);
    return NULL;
}

static int file_threads(const areas_t *ar)
{
    pthread_t th[NTHREADS];
    tjob_t jobs[NTHREADS];
    int bad = 0;
    for (int k = 0; k < NTHREADS; k++) {
        jobs[k] = (tjob_t){(char *)(uintptr_t)ar->addr[A_FILE], k, 0};
        CHECK(pthread_create(&th[k], NULL, copy_thread, &jobs[k]) == 0, "pthread_create",
              "thread %d", k);
    }
    for (int k = 0; k < NTHREADS; k++) {
        pthread_join(th[k], NULL);
        bad += jobs[k].bad;
    }
    return bad;
}

/* The file area after the round trips: rank 0 puts a pattern over all of
 * it, rank 1 reads the file itself; then rank 1 truncates the file to
 * FILE_KEEP bytes and rank 0 reaches past the end (refused, nothing
 * written, both live) and before it (works). */
enum { FILE_LEN = 256 * 1024, FILE_KEEP = 64 * 1024 + 4096 };

static void file_checks(int me, int fd, const areas_t *ar, const areas_t *mine, char *buf)
{
    char *dst = (char *)(uintptr_t)ar->addr[A_FILE];
    if (me == 0) {
        tu_fill(buf, FILE_LEN, 4242, 0);
        CHECK_OK(fh_put(1, dst, buf, FILE_LEN));
        const char *shm = getenv("FH_SHM");
        fh_peer_stats_t st = FH_PEER_STATS_INIT;
        CHECK_OK(fh_stats_peer(1, &st));
        if (shm != NULL && strcmp(shm, "off") == 0)
            CHECK(st.reg_copies >= FILE_LEN / (64 * 1024), "file mapping over the network",
                  "carried by copies (reg_copies >= 4), saw %llu",
                  (unsigned long long)st.reg_copies);
    }
    CHECK_OK(fh_barrier());
    if (me == 1) {
        char *f = malloc(FILE_LEN);
        CHECK(f != NULL && pread(fd, f, FILE_LEN, 0) == FILE_LEN, "pread", "%s",
              strerror(errno));
        CHECK(tu_check(f, FILE_LEN, 4242, 0) == (size_t)-1, "a put into a file mapping",
              "the bytes are in the file");
        free(f);
        CHECK(ftruncate(fd, FILE_KEEP) == 0, "ftruncate", "%s", strerror(errno));
    }
    CHECK_OK(fh_barrier());
    if (me == 0) {
        static const size_t at[][2] = {{FILE_KEEP, 8},
                                       {FILE_KEEP - 100, 200},
                                       {FILE_KEEP + 5000, 3000},
                                       {0, FILE_LEN}};
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
            char *d = dst + at[k][0];
            size_t n = at[k][1];
            memset(buf, 0x5a, n);
            int rc = fh_put(1, d, buf, n);
            char addr[32];
            snprintf(addr, sizeof addr, "%p", (void *)d);
            CHECK(rc == FH_ERR_OUT_OF_SEGMENT && strstr(fh_last_error(), "rank 1") != NULL &&
                  strstr(fh_last_error(), addr) != NULL,
                  "a put past a truncated file's end", "FH_ERR_OUT_OF_SEGMENT naming rank 1 "
                  "and %s, saw %s: %s", addr, fh_err_name(rc), fh_last_error());
            rc = fh_get(buf, 1, d, n);
            CHECK(rc == FH_ERR_OUT_OF_SEGMENT && strstr(fh_last_error(), addr) != NULL,
                  "a get past a truncated file's end", "FH_ERR_OUT_OF_SEGMENT naming %s, "
                  "saw %s: %s", addr, fh_err_name(rc), fh_last_error());
        }
    }
    CHECK_OK(fh_barrier());
    if (me == 1) {
        /* The refused transfers wrote nothing before the end (the one at
         * KEEP - 100 would have written 100 bytes there, the whole-area
         * one all of them). */
        char *f = malloc(FILE_KEEP);
        CHECK(f != NULL && pread(fd, f, FILE_KEEP, 0) == FILE_KEEP, "pread", "%s",
              strerror(errno));
        CHECK(tu_check(f, FILE_KEEP, 4242, 0) == (size_t)-1,
              "refused puts past a truncated file's end", "nothing written before it");
        free(f);
        (void)mine;
    }
    CHECK_OK(fh_barrier());
    if (me == 0) {
        /* Before the end: still reached. */
        tu_fill(buf, FILE_KEEP - 1, 4343, 0);
        CHECK_OK(fh_put(1, dst + 1, buf, FILE_KEEP - 1));
        memset(buf, 0, FILE_KEEP);
        CHECK_OK(fh_get(buf, 1, dst + 1, FILE_KEEP - 1));
        CHECK(tu_check(buf, FILE_KEEP - 1, 4343, 0) == (size_t)-1, "the file before its end",
              "the bytes put come back");
    }
}

int main(int argc, char **argv)
{
    char stackbuf[96 * 1024];   /* rank 1: a peer's target on the stack */
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("everything_map_test");
    tu_seed_init();
    pg = (size_t)sysconf(_SC_PAGESIZE);
    longrun = getenv("FH_TEST_LONG") != NULL;
    int me = fh_rank();
    CHECK(fh_nranks() == 2 || fh_nranks() == 3, "ranks", "expected 2 or 3, saw %d",
          fh_nranks());
    fh_info_t info = FH_INFO_INIT;
    CHECK_OK(fh_query(&info));
    if (!info.any_address) {
        TU_SAY("SKIP everything_map_test: FH_SEGMENT=everything is not in use\n");
        return fh_finalize() == FH_OK ? 0 : 1;
    }
    areas_t mine = {{0}, {0}}, all[3];
    char path[] = "/tmp/fh_everything_XXXXXX";
    int fd = -1;
    if (me == 1) {
        mine.len[A_HEAP] = 200 * 1024 + 3;
        mine.addr[A_HEAP] = (uintptr_t)malloc(mine.len[A_HEAP]);
        mine.len[A_STACK] = sizeof stackbuf;
        mine.addr[A_STACK] = (uintptr_t)stackbuf;
        mine.len[A_EDGE] = 5 * pg;
        mine.addr[A_EDGE] = (uintptr_t)must_mmap(5 * pg, MAP_PRIVATE | MAP_ANONYMOUS, -1);
        fd = mkstemp(path);
        CHECK(fd >= 0 && ftruncate(fd, 256 * 1024) == 0, "file", "%s", strerror(errno));
        unlink(path);
        mine.len[A_FILE] = 256 * 1024;
        /* On a 1 MiB boundary: one FH_REGION_MAX frame holds it all, so a
         * refused transfer is refused whole (file_checks). */
        char *res = must_mmap(2u << 20, MAP_PRIVATE | MAP_ANONYMOUS, -1);
        char *fa = (char *)(((uintptr_t)res + (1u << 20) - 1) & ~(uintptr_t)((1u << 20) - 1));
        CHECK(mmap(fa, 256 * 1024, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == fa,
              "mmap", "the file at %p: %s", (void *)fa, strerror(errno));
        mine.addr[A_FILE] = (uintptr_t)fa;
        mine.len[A_HUGE] = 4u << 20;
        mine.addr[A_HUGE] = (uintptr_t)must_mmap(4u << 20, MAP_PRIVATE | MAP_ANONYMOUS, -1);
        madvise((void *)(uintptr_t)mine.addr[A_HUGE], 4u << 20, MADV_HUGEPAGE);
        char *g = must_mmap(4 * BUCKET, MAP_PRIVATE | MAP_ANONYMOUS, -1);
        char *b0 = (char *)(((uintptr_t)g + BUCKET - 1) & ~(uintptr_t)(BUCKET - 1));
        CHECK(mprotect(b0 + 4 * pg, pg, PROT_NONE) == 0, "mprotect", "%s", strerror(errno));
        mine.addr[A_GUARD] = (uintptr_t)(b0 + 5 * pg);
        mine.len[A_GUARD] = 2 * BUCKET - 5 * pg;
        char *t = must_mmap(3 * BUCKET, MAP_PRIVATE | MAP_ANONYMOUS, -1);
        char *t0 = (char *)(((uintptr_t)t + BUCKET - 1) & ~(uintptr_t)(BUCKET - 1));
        CHECK(munmap(t0 + 4 * pg, pg) == 0, "munmap", "%s", strerror(errno));
        mine.addr[A_TWIN1] = (uintptr_t)t0;
        mine.len[A_TWIN1] = 4 * pg;
        mine.addr[A_TWIN2] = (uintptr_t)(t0 + 5 * pg);
        mine.len[A_TWIN2] = BUCKET - 5 * pg;
        mine.len[A_REMAP] = 3 * pg;
        mine.addr[A_REMAP] = (uintptr_t)must_mmap(3 * pg, MAP_PRIVATE | MAP_ANONYMOUS, -1);
        for (int a = 0; a < NAREA; a++)
            memset((void *)(uintptr_t)mine.addr[a], 0, mine.len[a]);
    }
    CHECK_OK(fh_allgather(&mine, all, sizeof mine));
    const areas_t *ar = &all[1];
    if (me == 2) {
        /* A third rank holds the region over twin1's run: rank 0's
         * transfers into twin2 cannot re-aim it and go by copies. */
        char b8[8];
        CHECK_OK(fh_get(b8, 1, (void *)(uintptr_t)ar->addr[A_TWIN1], 8));
    }
    CHECK_OK(fh_barrier());
    char *buf = malloc((2u << 20) + 8192);
    CHECK(buf != NULL, "malloc", "buffer");
    static const size_t sizes_s[] = {1, 8, 3000, 4097, 65536 + 17};
    static const size_t sizes_l[] = {1, 2, 8, 100, 3000, 3072, 3073, 4096, 4097, 65536 + 17,
                                     (1u << 20) + 4096};
    static const size_t offs_s[] = {0, 1, 7, 4095};
    static const size_t offs_l[] = {0, 1, 7, 8, 63, 4095, 4096, 65535};
    const size_t *sizes = longrun ? sizes_l : sizes_s;
    size_t nsizes = longrun ? sizeof sizes_l / sizeof *sizes_l : sizeof sizes_s / sizeof *sizes_s;
    const size_t *offs = longrun ? offs_l : offs_s;
    size_t noffs = longrun ? sizeof offs_l / sizeof *offs_l : sizeof offs_s / sizeof *offs_s;
    int nbad = 0, ntried = 0;
    if (me == 0) {
        int i = 0;
        for (int a = 0; a < A_REMAP; a++)
            for (size_t si = 0; si < nsizes; si++)
                for (size_t oi = 0; oi < noffs; oi++) {
                    size_t n = sizes[si], L = ar->len[a];
                    if (n > L)
                        continue;
                    /* From the start + offset, and ending offset bytes
                     * before the area's end (its last byte with offset 0). */
                    size_t o1 = offs[oi], o2 = L - n - (offs[oi] < L - n ? offs[oi] : 0);
                    if (o1 + n <= L) {
                        nbad += round_trip(ar, a, o1, n, ++i, buf);
                        ntried++;
                    }
                    nbad += round_trip(ar, a, o2, n, ++i, buf);
                    ntried++;
                }
        /* The two runs of one bucket, in turn: each switch re-aims (with
         * 3 ranks, twin2 goes by copies). */
        fh_peer_stats_t st0 = FH_PEER_STATS_INIT;
        CHECK_OK(fh_stats_peer(1, &st0));
        static const size_t tw_n[] = {8, 4097, 3000, 2 * 4096 + 1};
        for (int k = 0; k < 12; k++) {
            int a = k % 2 ? A_TWIN2 : A_TWIN1;
            size_t n = tw_n[(k / 2) % 4];
            nbad += round_trip(ar, a, (size_t)k * 3 % 64, n, ++i, buf);
            ntried++;
        }
        nbad += file_threads(ar);
        TU_LOG("%d of %d round trips failed\n", nbad, ntried);
        /* Over the network (the node route does not use the cache) each
         * switch between the two runs was a re-aim, counted. */
        const char *shm = getenv("FH_SHM");
        fh_peer_stats_t st = FH_PEER_STATS_INIT;
        CHECK_OK(fh_stats_peer(1, &st));
        if (shm != NULL && strcmp(shm, "off") == 0 && fh_nranks() == 3 &&
            st.reg_copies == st0.reg_copies) {
            TU_LOG("FAIL twin2 while rank 2 holds twin1's region: no copies counted\n");
            nbad++;
        }
        if (shm != NULL && strcmp(shm, "off") == 0 && st.reg_reaims < 6) {
            TU_LOG("FAIL twin: %llu re-aims counted, expected >= 6\n",
                   (unsigned long long)st.reg_reaims);
            nbad++;
        }
    }
    int all0[3];
    CHECK_OK(fh_allgather(&nbad, all0, sizeof nbad));   /* rank 0's count to all */
    CHECK(all0[0] == 0, "round trips", "rank 0 saw %d failures (see FAIL lines)", all0[0]);
    file_checks(me, fd, ar, &mine, buf);

    /* mremap: rank 0 reached A_REMAP (so rank 1 watches it); rank 1 grows
     * it, moving it, then reports the new address. */
    uint64_t naddr = 0, nlen = 64 * pg;
    if (me == 0) {
        nbad = round_trip(ar, A_REMAP, 0, 3 * pg, 1, buf);
        CHECK(nbad == 0, "mremap area", "reachable before the move");
    }
    CHECK_OK(fh_barrier());
    if (me == 1) {
        void *old = (void *)(uintptr_t)mine.addr[A_REMAP];
        /* Keep the old place busy so the mapping must move. */
        void *p = mremap(old, 3 * pg, nlen, MREMAP_MAYMOVE);
        CHECK(p != MAP_FAILED, "mremap of a mapping a peer reached",
              "success, saw %s (the runtime's watch split the mapping?)", strerror(errno));
        CHECK(tu_check(p, 3 * pg, tu_key(A_REMAP, 1, 1), 0) == (size_t)-1, "mremap", "bytes moved along");
        naddr = (uintptr_t)p;
    }
    uint64_t addrs[3];
    CHECK_OK(fh_allgather(&naddr, addrs, sizeof naddr));
    areas_t moved = *ar;
    moved.addr[A_REMAP] = addrs[1];
    moved.len[A_REMAP] = nlen;
    if (me == 0) {
        nbad = round_trip(&moved, A_REMAP, 5, nlen - 5, 2, buf);
        nbad += round_trip(&moved, A_REMAP, nlen - 3000, 3000, 3, buf);
        CHECK(nbad == 0, "after mremap", "the moved mapping reachable");
        /* Our own source buffer: watched once used, then moved. */
        char *src = must_mmap(3 * pg, MAP_PRIVATE | MAP_ANONYMOUS, -1);
        tu_fill(src, 3 * pg, 77, 0);
        CHECK_OK(fh_put(1, (void *)(uintptr_t)addrs[1], src, 3 * pg));
        char *s2 = mremap(src, 3 * pg, 40 * pg, MREMAP_MAYMOVE);
        CHECK(s2 != MAP_FAILED, "mremap of our own source buffer", "success, saw %s",
              strerror(errno));
        CHECK_OK(fh_put(1, (void *)(uintptr_t)addrs[1], s2, 3 * pg));
        munmap(s2, 40 * pg);
    }
    CHECK_OK(fh_barrier());
    if (me == 1) {
        /* Shrink and split the moved mapping; each part stays usable. */
        char *p = (char *)(uintptr_t)naddr;
        CHECK(munmap(p + 32 * pg, 8 * pg) == 0, "munmap of a middle part", "%s",
              strerror(errno));
        char *q = mremap(p, 32 * pg, 16 * pg, 0);
        CHECK(q == p, "mremap shrink in place", "success, saw %s", strerror(errno));
    }
    CHECK_OK(fh_barrier());
    if (me == 0) {
        moved.len[A_REMAP] = 16 * pg;
        nbad = round_trip(&moved, A_REMAP, 1, 16 * pg - 2, 4, buf);
        moved.addr[A_REMAP] = addrs[1] + 40 * pg;
        moved.len[A_REMAP] = 24 * pg;
        nbad += round_trip(&moved, A_REMAP, 0, 24 * pg, 5, buf);
        CHECK(nbad == 0, "after munmap and shrink", "both parts reachable");
    }
    CHECK_OK(fh_barrier());
    free(buf);
    if (me == 1) {
        free((void *)(uintptr_t)mine.addr[A_HEAP]);
        close(fd);
    }
    TU_SAY("PASS everything_map_test\n");
    return fh_finalize() == FH_OK ? 0 : 1;
}
