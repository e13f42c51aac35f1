/*
 * seg_churn_test.c -- issue 29, class 5 (nothing is left behind): segment
 * tables and hole lists replaced while the job runs are freed once no
 * thread can read them (firehose/segment.c, "Reclaiming"), not kept until
 * fh_finalize.  Two ranks:
 *   churn   rank 1 makes one page of its segment read-only and writable
 *           again PROT_ROUNDS times (each change tells rank 0, which polls
 *           in fh_barrier, and publishes a new table on both ranks), then
 *           both ranks create and destroy a small segment SEG_ROUNDS times
 *           (two tables each).  Meanwhile a worker thread on each rank
 *           keeps getting from (and, on rank 0, putting into) another page
 *           of the peer's segment, checking the bytes, so that tables and
 *           hole lists are read while they are replaced and freed (ASan and
 *           TSan watch the frees).
 * Checked: every transfer and call works; the heap in use
 * (mallinfo2().uordblks, not under ASan) grows by less than GROWTH_MAX
 * bytes per change, where keeping every table and hole list until
 * fh_finalize grew rank 0 by about 300 bytes per change; seen failing with
 * segment.c's reclaim() returning at once.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../integ/testutil.h"

#define SEG (1u << 20)
#define PROT_ROUNDS 1500
#define SEG_ROUNDS 100
#define GROWTH_MAX 64      /* bytes per change, on average */

#if defined(__SANITIZE_ADDRESS__)
#define HEAP_MEASURED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEAP_MEASURED 0
#endif
#endif
#ifndef HEAP_MEASURED
#define HEAP_MEASURED 1
#endif

static char *peer_base;               /* the peer's piece */
static atomic_int stop;
static int me;

/* Transfers into page 8 of the peer's piece until stop; returns failures. */
static void *worker(void *arg)
{
    (void)arg;
    char buf[256], want[256];
    int bad = 0;
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        char *dst = peer_base + 8 * 4096 + (i % 16) * 256;
        if (me == 0) {
            memset(want, (int)(i & 0xff), sizeof want);
            if (fh_put(1, dst, want, sizeof want) != FH_OK ||
                fh_get(buf, 1, dst, sizeof buf) != FH_OK || memcmp(buf, want, sizeof buf)) {
                TU_LOG("FAIL worker put/get %u: %s\n", i, fh_last_error());
                bad++;
            }
        } else if (fh_get(buf, 0, peer_base + 4096, sizeof buf) != FH_OK) {
            TU_LOG("FAIL worker get %u: %s\n", i, fh_last_error());
            bad++;
        }
        if (bad > 5)
            break;
    }
    return (void *)(intptr_t)bad;
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("seg_churn_test");
    me = fh_rank();
    CHECK(fh_nranks() == 2, "ranks", "expected 2, saw %d", fh_nranks());
    fh_seg_t seg;
    void *mine;
    CHECK_OK(fh_segment_create(SEG, &seg, &mine));
    size_t len;
    CHECK_OK(fh_segment_query(seg, 1 - me, (void **)&peer_base, &len));
    memset(mine, 0, SEG);
    CHECK_OK(fh_barrier());
    pthread_t th;
    CHECK(pthread_create(&th, NULL, worker, NULL) == 0, "pthread_create", "worker");

    struct mallinfo2 m0 = mallinfo2();
    if (me == 1) {
        char *page = (char *)mine + 16 * 4096;
        for (int i = 0; i < PROT_ROUNDS; i++) {
            CHECK(mprotect(page, 4096, PROT_READ) == 0, "mprotect", "read-only");
            CHECK(mprotect(page, 4096, PROT_READ | PROT_WRITE) == 0, "mprotect", "writable");
        }
    }
    CHECK_OK(fh_barrier());     /* rank 0 polls here through rank 1's rounds */
    for (int i = 0; i < SEG_ROUNDS; i++) {
        fh_seg_t s2;
        void *b2;
        CHECK_OK(fh_segment_create(64 * 1024, &s2, &b2));
        CHECK_OK(fh_segment_destroy(s2));
    }
    CHECK_OK(fh_barrier());
    struct mallinfo2 m1 = mallinfo2();
    atomic_store(&stop, 1);
    void *wbad;
    pthread_join(th, &wbad);
    CHECK((intptr_t)wbad == 0, "worker transfers", "all worked, %d failed", (int)(intptr_t)wbad);

    long changes = 2L * PROT_ROUNDS + 2L * SEG_ROUNDS;
    long grew = (long)m1.uordblks - (long)m0.uordblks;
    TU_LOG("heap in use grew by %ld bytes over %ld table changes (%.1f per change)%s\n", grew,
           changes, (double)grew / (double)changes, HEAP_MEASURED ? "" : " (not measured)");
    if (HEAP_MEASURED)
        CHECK(grew < GROWTH_MAX * changes, "old tables and hole lists freed",
              "heap growth below %d bytes per change, saw %ld over %ld", GROWTH_MAX, grew,
              changes);
    CHECK_OK(fh_segment_destroy(seg));
    TU_SAY("PASS seg_churn_test\n");
    return fh_finalize() == FH_OK ? 0 : 1;
}
