/*
 * fault_target_test.c -- issue 29, class 3: no peer dies of another's
 * mistake, and no call waits forever.  Two ranks; rank 0 makes the
 * mistakes, rank 1 owns the memory:
 *   prot_none  a get from / a put into a page of rank 1's segment that
 *              rank 1 made PROT_NONE;
 *   read_only  a put into a page of rank 1's segment that is PROT_READ
 *              (a get from it must work);
 *   unmapped   a get from / a put into pages of rank 1's segment that
 *              rank 1 unmapped (munmap), and PROT_NONE pages protected
 *              with pkey_mprotect: every strategy, pin-everything too (the
 *              runtime sees the calls: firehose/seg_protect.c); after rank
 *              1 made its pages readable and writable again, a put into
 *              them works;
 *   own        (argv[1] "own", or no argument) a put from the caller's own
 *              unmapped or PROT_NONE memory, a get into its unmapped,
 *              PROT_NONE or read-only memory: refused before anything is
 *              sent, under every strategy (blocking, NB, NBI), also
 *              through the node route (FH_SHM=auto: a copy through the
 *              peer's mapped piece) and to our own rank (blocking), and
 *              strided (8 B blocks: packed AMs over the network); a
 *              file mapping and a SysV shared memory attachment the
 *              check remembered, then taken away by munmap, mremap,
 *              mmap(MAP_FIXED), mprotect or shmdt: refused again;
 *   stall      (argv[1] "stall", FH_REG_STRATEGY=pin-everything only) a get
 *              from PROT_NONE -- protected by the raw system call, behind
 *              the runtime's back, as when a transfer is already under
 *              way while the owner protects -- that the tcp provider never
 *              answers ends by
 *              FH_OFI_RMA_TIMEOUT (see stall_case); the pair is connected
 *              again: a round trip, a barrier and fh_finalize complete;
 *   compute    (argv[1] "compute", pin-everything, FH_OFI_RMA_TIMEOUT=1)
 *              a get from a rank that computes 4 s without calling the
 *              runtime succeeds: the timeout probes, and waits on a target
 *              that does not answer (under FH_PATHS=shared or lazy the get
 *              leaves from the service path, which is not probed: it waits);
 * (Not here, docs/reliability.md "Open": a put into a peer's memory that
 * is protected while the put is under way.  An fh_get_nb from a segment
 * its owner destroys meanwhile: destroyed_seg_test.c.)
 * argv[1] "remote": the peer's memory only.
 * Each mistake must return an error (here, or from fh_wait) whose
 * fh_last_error() names the rank and the address, and both ranks must
 * still serve an honest round trip afterwards.  Sizes: 8 B (inject /
 * put-in-move), 3000 B, 64 KiB + 17 and 1 MiB, at several offsets.
 * FH_TEST_LONG=1 adds more sizes and offsets.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../integ/testutil.h"

#define SEG (4u << 20)

static size_t pg;
static int raw_protect;   /* "stall": mprotect behind the runtime's back */

static int protect(void *addr, size_t len, int prot)
{
    if (raw_protect)
        return (int)syscall(SYS_mprotect, addr, len, prot);
    return mprotect(addr, len, prot);
}

/* fh_last_error() names rank and an address of [addr, addr+n). */
static void names(const char *what, int rank, const void *addr, size_t n)
{
    const char *e = fh_last_error();
    char r[16];
    snprintf(r, sizeof r, "rank %d", rank);
    CHECK(e != NULL && strstr(e, r) != NULL, what, "the error names %s: '%s'", r,
          e ? e : "(null)");
    int found = 0;
    for (const char *p = strstr(e, "0x"); p != NULL && !found; p = strstr(p + 2, "0x")) {
        uintptr_t v = (uintptr_t)strtoull(p, NULL, 16);
        found = v >= (uintptr_t)addr && v < (uintptr_t)addr + n;
    }
    CHECK(found, what, "the error names an address of [%p, +%zu): '%s'", addr, n, e);
}

/* An error from a non-blocking call (rc) or from its wait. */
static int finish_nb(int rc, const fh_handle_t *h)
{
    if (rc != FH_OK)
        return rc;
    return fh_wait(*h);
}

/* The call of form 0 blocking, 1 NB (+ fh_wait), 2 NBI (+ fh_wait_nbi). */
static int xfer(int form, int is_put, void *local, void *remote, size_t n)
{
    fh_handle_t h;
    int rc;
    switch (form) {
    case 0:
        return is_put ? fh_put(1, remote, local, n) : fh_get(local, 1, remote, n);
    case 1:
        rc = is_put ? fh_put_nb(1, remote, local, n, &h) : fh_get_nb(local, 1, remote, n, &h);
        return finish_nb(rc, &h);
    default:
        rc = is_put ? fh_put_nbi(1, remote, local, n) : fh_get_nbi(local, 1, remote, n);
        return rc != FH_OK ? rc : fh_wait_nbi();   /* a wait's success clears the text */
    }
}

/* "stall" (FH_REG_STRATEGY=pin-everything over tcp, FH_OFI_RMA_TIMEOUT
 * small): the key covers the whole segment, so the get reaches rank 1's
 * provider, whose send from the PROT_NONE page fails after the header
 * left; the get can only end by FH_OFI_RMA_TIMEOUT, which fails it and
 * closes the connection; the conduit connects the pair again (docs/
 * reliability.md), and the NB form, on the new connection, ends the same
 * way.  Then a put into a healthy page on the same path waits for the pair
 * to be connected again and succeeds, and so does an honest round trip;
 * both ranks meet in a barrier and fh_finalize.  Rank 1 polls meanwhile (it must live and not fault) until
 * rank 0 leaves a flag file. */
static void stall_case(char *none)
{
    char b[64];
    for (int form = 0; form < 2; form++) {
        int rc = xfer(form, 0, b, none, 8);
        if (rc == FH_OK) {
            TU_LOG("get from PROT_NONE %p +8 (form %d) succeeded\n", (void *)none, form);
            CHECK(0, "stalled get refused", "form %d", form);
        }
        names("stalled get from PROT_NONE", 1, none, 8);
    }
    /* A healthy page (past the PROT_NONE ones): the put waits while the
     * pair is connected again, then succeeds. */
    CHECK_OK(fh_put(1, none + 4096 * 32, b, 8));
}

/* An address range of 4 pages that is unmapped now.  Taken afresh for
 * each case: a range unmapped once may be mapped again by the next mmap
 * of anyone in the process (the runtime's, malloc's), and a put from it
 * then rightly succeeds. */
static char *fresh_hole(void)
{
    char *u = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(u != MAP_FAILED, "mmap", "%s", strerror(errno));
    CHECK(munmap(u, 4 * pg) == 0, "munmap", "%s", strerror(errno));
    unsigned char v;
    CHECK(mincore(u, pg, &v) != 0 && errno == ENOMEM, "fresh hole", "%p unmapped", (void *)u);
    return u;
}

/* A mapping the caller's buffer check remembered after a put from it and
 * a get into it, then taken away by one library call: the next transfer
 * from or into it is refused naming the address, under every form.  File
 * mappings (no memory monitor can watch one: the check trusts the calls
 * libfirehose follows) by munmap, mremap moving it, mmap(MAP_FIXED) of a
 * PROT_NONE mapping over it and mprotect; SysV shared memory (which the
 * monitor refuses too: remembered the same way) by shmdt. */
static int own_lost_mappings(void *seg1)
{
    int nfail = 0;
    const size_t len = 4 * pg;
    char path[] = "/tmp/fault_target_file.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp", "%s", strerror(errno));
    CHECK(unlink(path) == 0 && ftruncate(fd, (off_t)len) == 0, "ftruncate", "%s",
          strerror(errno));
    static const char *const how[] = {"munmap", "mremap", "mmap MAP_FIXED", "mprotect",
                                      "shmdt"};
    char *remote = (char *)seg1 + 8 * pg;
    for (size_t k = 0; k < sizeof how / sizeof *how; k++) {
        int shmid = -1;
        char *f;
        if (k == 4) {
            shmid = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
            CHECK(shmid >= 0, "shmget", "%s", strerror(errno));
            f = shmat(shmid, NULL, 0);
            CHECK(f != (char *)-1, "shmat", "%s", strerror(errno));
            shmctl(shmid, IPC_RMID, NULL);
        } else {
            f = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
            CHECK(f != MAP_FAILED, "mmap of a file", "%s", strerror(errno));
        }
        for (size_t n = 8; n <= 3000; n += 2992) {   /* remembered by both */
            CHECK_OK(fh_put(1, remote, f + 64, n));
            CHECK_OK(fh_get(f + 64, 1, remote, n));
        }
        char *moved = NULL;
        switch (k) {
        case 0: CHECK(munmap(f, len) == 0, how[k], "%s", strerror(errno)); break;
        case 1:
            moved = mremap(f, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, fresh_hole());
            CHECK(moved != MAP_FAILED, how[k], "%s", strerror(errno));
            break;
        case 2:
            CHECK(mmap(f, len, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == f,
                  how[k], "%s", strerror(errno));
            break;
        case 3: CHECK(mprotect(f, len, PROT_NONE) == 0, how[k], "%s", strerror(errno)); break;
        case 4: CHECK(shmdt(f) == 0, how[k], "%s", strerror(errno)); break;
        }
        for (int is_put = 0; is_put < 2; is_put++)
            for (int form = 0; form < 3; form++) {
                int rc = xfer(form, is_put, f + 64, remote, 8);
                if (rc == FH_OK) {
                    TU_LOG("%s %s mapping after %s succeeded (form %d)\n",
                           is_put ? "put from a" : "get into a", k == 4 ? "shm" : "file",
                           how[k], form);
                    nfail++;
                } else
                    names(how[k], 1, f + 64, 8);
            }
        if (k == 1)
            munmap(moved, len);
        else if (k == 2 || k == 3)
            munmap(f, len);
    }
    close(fd);
    return nfail;
}

static void stall_flag(char *path, size_t len)
{
    snprintf(path, len, "/tmp/fault_target_stall.%ld", (long)getppid());
}

static void honest(void *seg1, char *buf, int tag)
{
    /* A round trip through a healthy page of rank 1's segment. */
    char *dst = (char *)seg1 + 8 * pg;
    tu_fill(buf, 3000, tu_key(0, (uint64_t)tag, 9), 0);
    CHECK_OK(fh_put(1, dst, buf, 3000));
    memset(buf + 4096, 0, 3000);
    CHECK_OK(fh_get(buf + 4096, 1, dst, 3000));
    CHECK(memcmp(buf, buf + 4096, 3000) == 0, "honest round trip", "bytes back after %d",
          tag);
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("fault_target_test");
    tu_seed_init();
    pg = (size_t)sysconf(_SC_PAGESIZE);
    int me = fh_rank();
    CHECK(fh_nranks() == 2, "ranks", "expected 2, saw %d", fh_nranks());
    int longrun = getenv("FH_TEST_LONG") != NULL;
    /* argv[1]: "own" (the caller's own buffer only), "remote" (the peer's
     * memory only); neither: both. */
    const char *part = argc > 1 ? argv[1] : "";
    int do_stall = strcmp(part, "stall") == 0;
    int do_compute = strcmp(part, "compute") == 0;
    int do_remote = !do_stall && !do_compute && strcmp(part, "own") != 0;
    int do_own = !do_stall && !do_compute && strcmp(part, "remote") != 0;
    char *mine;
    fh_seg_t seg;
    CHECK_OK(fh_segment_create(SEG, &seg, (void **)&mine));
    void *seg1;
    CHECK_OK(fh_segment_query(seg, 1, &seg1, NULL));
    /* 64 KiB of rank 1's segment each: PROT_NONE at 64 KiB, PROT_READ at
     * 2 MiB, unmapped at 3 MiB, PROT_NONE by pkey_mprotect at 3.5 MiB. */
    size_t none_off = 64 * 1024, ro_off = 2 * 1024 * 1024;
    size_t unmap_off = 3 * 1024 * 1024, pkey_off = unmap_off + 512 * 1024;
    size_t bad_len = 64 * 1024;
    raw_protect = do_stall;
    if (me == 1) {
        memset(mine, 0x5a, SEG);
        CHECK(protect(mine + none_off, bad_len, PROT_NONE) == 0, "mprotect", "%s",
              strerror(errno));
        CHECK(protect(mine + ro_off, bad_len, PROT_READ) == 0, "mprotect", "%s",
              strerror(errno));
        if (!do_stall) {
            CHECK(munmap(mine + unmap_off, bad_len) == 0, "munmap", "%s", strerror(errno));
            CHECK(pkey_mprotect(mine + pkey_off, bad_len, PROT_NONE, -1) == 0,
                  "pkey_mprotect", "%s", strerror(errno));
        }
    }
    CHECK_OK(fh_barrier());
    char *buf = malloc((2u << 20) + 8192);
    CHECK(buf != NULL, "malloc", "buffer");
    static const size_t sizes_s[] = {8, 3000, 65536 + 17};
    static const size_t sizes_l[] = {1, 8, 100, 3000, 3100, 4096, 65536 + 17, 1u << 20};
    const size_t *sizes = longrun ? sizes_l : sizes_s;
    size_t nsizes = longrun ? sizeof sizes_l / sizeof *sizes_l : sizeof sizes_s / sizeof *sizes_s;
    int tag = 0, nfail = 0;
    if (me == 0 && do_remote) {
        for (size_t si = 0; si < nsizes; si++) {
            size_t n = sizes[si];
            if (n > bad_len)
                n = bad_len;   /* stays inside the bad pages */
            size_t offs[] = {0, 8, bad_len - n};
            for (int oi = 0; oi < 3; oi++) {
                char *none = (char *)seg1 + none_off + offs[oi];
                char *ro = (char *)seg1 + ro_off + offs[oi];
                for (int form = 0; form < 2; form++) {
                    int rc;
                    fh_handle_t h;
                    /* get from PROT_NONE */
                    rc = form ? finish_nb(fh_get_nb(buf, 1, none, n, &h), &h)
                              : fh_get(buf, 1, none, n);
                    if (rc == FH_OK) {
                        TU_LOG("get from PROT_NONE %p +%zu (%s) succeeded\n", (void *)none, n,
                               form ? "nb" : "blocking");
                        nfail++;
                    } else
                        names("get from PROT_NONE", 1, none, n);
                    honest(seg1, buf, ++tag);
                    /* put into PROT_NONE */
                    tu_fill(buf, n, tu_key(0, (uint64_t)tag, 1), 0);
                    rc = form ? finish_nb(fh_put_nb(1, none, buf, n, &h), &h)
                              : fh_put(1, none, buf, n);
                    if (rc == FH_OK) {
                        TU_LOG("put into PROT_NONE %p +%zu succeeded\n", (void *)none, n);
                        nfail++;
                    } else
                        names("put into PROT_NONE", 1, none, n);
                    honest(seg1, buf, ++tag);
                    /* put into PROT_READ */
                    rc = form ? finish_nb(fh_put_nb(1, ro, buf, n, &h), &h)
                              : fh_put(1, ro, buf, n);
                    if (rc == FH_OK) {
                        TU_LOG("put into PROT_READ %p +%zu succeeded\n", (void *)ro, n);
                        nfail++;
                    } else
                        names("put into PROT_READ", 1, ro, n);
                    honest(seg1, buf, ++tag);
                    /* get from PROT_READ works */
                    CHECK_OK(fh_get(buf, 1, ro, n));
                    CHECK(buf[0] == 0x5a && buf[n - 1] == 0x5a, "get from PROT_READ",
                          "the bytes 0x5a");
                    /* get from / put into unmapped and pkey_mprotect'ed pages */
                    char *um[2] = {(char *)seg1 + unmap_off + offs[oi],
                                   (char *)seg1 + pkey_off + offs[oi]};
                    for (int u = 0; u < 4; u++) {
                        rc = xfer(form, u & 1, buf, um[u >> 1], n);
                        if (rc == FH_OK) {
                            TU_LOG("%s %s %p +%zu succeeded\n", u & 1 ? "put into" : "get from",
                                   u >> 1 ? "pkey PROT_NONE" : "unmapped", (void *)um[u >> 1], n);
                            nfail++;
                        } else
                            names(u >> 1 ? "pkey PROT_NONE page" : "unmapped page", 1,
                                  um[u >> 1], n);
                        honest(seg1, buf, ++tag);
                    }
                }
            }
        }
    }
    if (do_stall) {
        char flag[64];
        stall_flag(flag, sizeof flag);
        if (me == 0) {
            stall_case((char *)seg1 + none_off);
            honest(seg1, buf, ++tag);
            FILE *f = fopen(flag, "w");
            CHECK(f != NULL, "flag file", "%s", strerror(errno));
            fclose(f);
        } else {
            /* Alive and serving (polling) until rank 0 is done: 30 s at most. */
            for (int i = 0; i < 30000 && access(flag, F_OK) != 0; i++) {
                fh_poll();
                usleep(1000);
            }
            CHECK(access(flag, F_OK) == 0, "rank 0 done", "no flag after 30 s");
            unlink(flag);
        }
        CHECK_OK(fh_barrier());
        free(buf);
        CHECK_OK(fh_segment_destroy(seg));
        CHECK_OK(fh_finalize());
        TU_SAY("PASS fault_target_test\n");
        return 0;
    }
    if (do_compute) {
        /* Rank 1 computes (no runtime call) 4 s, longer than the timeout;
         * rank 0's get from a healthy part of its segment must wait for it
         * and succeed. */
        CHECK_OK(fh_barrier());
        char *src = (char *)seg1 + (1u << 20);
        if (me == 1) {
            struct timespec ts = {4, 0};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
        } else {
            usleep(100000);
            memset(buf, 0, 65536);
            int rc = fh_get(buf, 1, src, 65536);
            if (rc != FH_OK)
                TU_LOG("get from a computing rank: %s\n", fh_last_error());
            CHECK(rc == FH_OK, "get from a computing rank", "FH_OK, saw %d", rc);
            CHECK(buf[0] == 0x5a && buf[65535] == 0x5a, "get from a computing rank",
                  "the bytes 0x5a");
        }
        CHECK_OK(fh_barrier());
        free(buf);
        CHECK_OK(fh_segment_destroy(seg));
        CHECK_OK(fh_finalize());
        TU_SAY("PASS fault_target_test\n");
        return 0;
    }
    if (me == 0 && do_own) {
        /* The caller's own buffer: a put from unmapped or PROT_NONE memory,
         * a get into unmapped, PROT_NONE or read-only memory. */
        char *own = mmap(NULL, 20 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
        CHECK(own != MAP_FAILED, "mmap", "%s", strerror(errno));
        char *own_unmapped = own, *own_none = own + 8 * pg, *own_ro = own + 16 * pg;
        CHECK(munmap(own_unmapped, 4 * pg) == 0, "munmap", "%s", strerror(errno));
        CHECK(mprotect(own_none, 4 * pg, PROT_NONE) == 0, "mprotect", "%s", strerror(errno));
        CHECK(mprotect(own_ro, 4 * pg, PROT_READ) == 0, "mprotect", "%s", strerror(errno));
        static const size_t own_sizes[] = {8, 3000, 4 * 4096};
        struct { const char *what; char *at; int is_put; } own_cases[] = {
            {"put from own unmapped memory", own_unmapped, 1},
            {"put from own PROT_NONE memory", own_none, 1},
            {"get into own unmapped memory", own_unmapped, 0},
            {"get into own PROT_NONE memory", own_none, 0},
            {"get into own read-only memory", own_ro, 0},
        };
        for (size_t ci = 0; ci < sizeof own_cases / sizeof *own_cases; ci++)
            for (size_t si = 0; si < 3; si++)
                for (int form = 0; form < 3; form++) {
                    size_t n = own_sizes[si] < 4 * pg ? own_sizes[si] : 4 * pg;
                    char *at = own_cases[ci].at == own_unmapped ? fresh_hole()
                                                                : own_cases[ci].at;
                    char *remote = (char *)seg1 + 8 * pg;
                    int rc = xfer(form, own_cases[ci].is_put, at, remote, n);
                    if (rc == FH_OK) {
                        TU_LOG("%s %p +%zu (form %d) succeeded\n", own_cases[ci].what,
                               (void *)at, n, form);
                        nfail++;
                    } else
                        names(own_cases[ci].what, 1, at, n);
                    honest(seg1, buf, ++tag);
                }
        /* The same to our own rank (the self route's memmove). */
        for (size_t ci = 0; ci < sizeof own_cases / sizeof *own_cases; ci++) {
            char *at = own_cases[ci].at == own_unmapped ? fresh_hole() : own_cases[ci].at;
            char *remote = mine + 8 * pg;
            int rc = own_cases[ci].is_put ? fh_put(0, remote, at, 3000)
                                          : fh_get(at, 0, remote, 3000);
            if (rc == FH_OK) {
                TU_LOG("%s %p to our own rank succeeded\n", own_cases[ci].what, (void *)at);
                nfail++;
            } else
                names(own_cases[ci].what, 0, at, 3000);
        }
        /* Strided, 16 blocks of 8 B at stride 64 (packed into AMs over the
         * network, copied block by block on the node and self routes), to
         * rank 1 and to our own rank. */
        for (int to = 1; to >= 0; to--)
            for (size_t ci = 0; ci < sizeof own_cases / sizeof *own_cases; ci++) {
                char *at = own_cases[ci].at == own_unmapped ? fresh_hole() : own_cases[ci].at;
                char *remote = to ? (char *)seg1 + 8 * pg : mine + 8 * pg;
                int rc = own_cases[ci].is_put ? fh_put_strided(to, remote, 64, at, 64, 8, 16)
                                              : fh_get_strided(at, 64, to, remote, 64, 8, 16);
                if (rc == FH_OK) {
                    TU_LOG("strided %s %p (rank %d) succeeded\n", own_cases[ci].what,
                           (void *)at, to);
                    nfail++;
                } else
                    names(own_cases[ci].what, to, at, 1024);
            }
        CHECK(mprotect(own_ro, 4 * pg, PROT_READ | PROT_WRITE) == 0, "mprotect", "x");
        for (size_t i = 0; i < 4 * pg; i++)
            CHECK(own_ro[i] == 0, "own read-only page unchanged", "byte %zu", i);
        /* A buffer a transfer used (the check remembers its mapping), then
         * made PROT_NONE: refused again, no fault (local_check.c). */
        for (size_t si = 0; si < 3; si++) {
            size_t n = own_sizes[si] < 4 * pg ? own_sizes[si] : 4 * pg;
            char *remote = (char *)seg1 + 8 * pg;
            CHECK_OK(fh_put(1, remote, own_ro, n));
            CHECK_OK(fh_get(own_ro, 1, remote, n));
            CHECK(mprotect(own_ro, 4 * pg, PROT_NONE) == 0, "mprotect", "%s", strerror(errno));
            for (int is_put = 0; is_put < 2; is_put++) {
                int rc = xfer(0, is_put, own_ro, remote, n);
                if (rc == FH_OK) {
                    TU_LOG("%s own memory made PROT_NONE after use %p +%zu succeeded\n",
                           is_put ? "put from" : "get into", (void *)own_ro, n);
                    nfail++;
                } else
                    names("own memory made PROT_NONE after use", 1, own_ro, n);
            }
            CHECK(mprotect(own_ro, 4 * pg, PROT_READ | PROT_WRITE) == 0, "mprotect", "x");
        }
        munmap(own + 4 * pg, 16 * pg);
        nfail += own_lost_mappings(seg1);
        TU_LOG("%d mistakes were not refused\n", nfail);
        CHECK(nfail == 0, "mistakes refused", "0 accepted, saw %d", nfail);
    }
    CHECK_OK(fh_barrier());
    if (me == 1) {
        CHECK(mprotect(mine + none_off, bad_len, PROT_READ | PROT_WRITE) == 0, "mprotect", "x");
        CHECK(mprotect(mine + ro_off, bad_len, PROT_READ | PROT_WRITE) == 0, "mprotect", "x");
        for (size_t i = 0; i < bad_len; i++)
            CHECK(mine[ro_off + i] == 0x5a, "read-only page unchanged", "byte %zu", i);
    }
    CHECK_OK(fh_barrier());
    if (me == 0 && do_remote) {
        /* Readable and writable again: reachable again. */
        tu_fill(buf, 3000, tu_key(0, 7, 7), 0);
        CHECK_OK(fh_put(1, (char *)seg1 + none_off + 8, buf, 3000));
        CHECK_OK(fh_put(1, (char *)seg1 + ro_off + 8, buf, 3000));
        CHECK_OK(fh_get(buf + 4096, 1, (char *)seg1 + ro_off + 8, 3000));
        CHECK(memcmp(buf, buf + 4096, 3000) == 0, "put into a page made writable again",
              "the bytes back");
    }
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    free(buf);
    TU_SAY("PASS fault_target_test\n");
    return fh_finalize() == FH_OK ? 0 : 1;
}
