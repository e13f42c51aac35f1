/*
 * ofi_flood_test.c -- run by ofi_flood.sh: the job's traffic while
 * strangers hold hundreds of connections to every rank's ofi listener.
 *
 * Each rank starts (fh_init: the service paths connect), writes its pid to
 * $FLOOD_DIR/rank<r>.pid so the script can find its listening ports, and
 * polls until $FLOOD_DIR/ready says the flood is in place.  Then, with
 * FH_PATHS=lazy, a second thread's first call makes its path: it connects
 * to every rank's listener through the flood.  That thread and the main
 * thread each put a pattern into the next rank's segment (their own slot),
 * get it back, and send AM requests that the next rank answers, ITERS
 * times; then a barrier, and every rank checks what the previous rank
 * wrote into its segment.  Prints "ofi_flood_test: rank R: ok".
 * FLOOD_THREADS=1: the main thread only (no path is made under the flood);
 * FLOOD_HOLD_MS: poll that long under the flood before the traffic (the
 * runtime's once-a-second checks of its peers run meanwhile).
 */
#include "tests/integ/testutil.h"

#include <pthread.h>
#include <stdatomic.h>

#define SLOT  ((size_t)64 << 10)
#define ITERS 50
#define H_REQ 150
#define H_REP 151

static int me, N;
static void **bases;
static _Atomic uint64_t replies[2];

static void on_req(fh_token_t tok, void *buf, size_t nbytes,
                   const uint64_t *args, unsigned nargs)
{
    (void)buf;
    (void)nbytes;
    CHECK(nargs == 1 && args[0] < 2, "request", "1 arg < 2, saw %u", nargs);
    CHECK_OK(fh_am_reply_short(tok, H_REP, args, 1));
}

static void on_rep(fh_token_t tok, void *buf, size_t nbytes,
                   const uint64_t *args, unsigned nargs)
{
    (void)tok;
    (void)buf;
    (void)nbytes;
    CHECK(nargs == 1 && args[0] < 2, "reply", "1 arg < 2, saw %u", nargs);
    atomic_fetch_add(&replies[args[0]], 1);
}

/* Puts, gets and AM round trips to the next rank from slot `slot`. */
static void traffic(int slot)
{
    int peer = (me + 1) % N;
    uint8_t *src = malloc(SLOT), *back = malloc(SLOT);
    CHECK(src && back, "malloc", "%zu bytes", SLOT);
    uint8_t *dst = (uint8_t *)bases[peer] + (size_t)slot * SLOT;
    for (int i = 0; i < ITERS; i++) {
        size_t n = (size_t)1 << (i % 17);          /* 1 B .. 64 KiB */
        uint64_t key = tu_key((uint64_t)me, (uint64_t)slot, (uint64_t)i);
        tu_fill(src, n, key, 0);
        CHECK_OK(fh_put(peer, dst, src, n));
        CHECK_OK(fh_get(back, peer, dst, n));
        CHECK(memcmp(src, back, n) == 0, "get", "the %zu bytes just put", n);
        uint64_t a = (uint64_t)slot;
        CHECK_OK(fh_am_request_short(peer, H_REQ, &a, 1));
        while (atomic_load(&replies[slot]) < (uint64_t)i + 1)
            CHECK_OK(fh_poll());
    }
    /* The last pattern stays for the peer to check: the whole slot. */
    tu_fill(src, SLOT, tu_key((uint64_t)me, (uint64_t)slot, 999), 0);
    CHECK_OK(fh_put(peer, dst, src, SLOT));
    free(src);
    free(back);
}

static void *thread_main(void *arg)
{
    (void)arg;
    traffic(1);
    return NULL;
}

/* Polls until $FLOOD_DIR/ready exists (at most 30 s). */
static void wait_ready(const char *dir)
{
    char path[256];
    CHECK(snprintf(path, sizeof path, "%s/ready", dir) < (int)sizeof path,
          "FLOOD_DIR", "shorter than %zu bytes", sizeof path - 8);
    double end = tu_now() + 30;
    while (access(path, F_OK) != 0) {
        CHECK(tu_now() < end, "flood", "%s within 30 s", path);
        CHECK_OK(fh_poll());
        tu_sleep_us(10000);
    }
}

int main(int argc, char **argv)
{
    const char *dir = getenv("FLOOD_DIR");
    if (dir == NULL) {
        fprintf(stderr, "ofi_flood_test: set FLOOD_DIR (run by ofi_flood.sh)\n");
        return 2;
    }
    CHECK_OK(fh_am_register(H_REQ, on_req, "flood req"));
    CHECK_OK(fh_am_register(H_REP, on_rep, "flood rep"));
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("ofi_flood_test");
    me = fh_rank();
    N = fh_nranks();
    fh_seg_t seg;
    void *base;
    CHECK_OK(fh_segment_create(2 * SLOT, &seg, &base));
    bases = calloc((size_t)N, sizeof *bases);
    CHECK(bases != NULL, "calloc", "%d bases", N);
    for (int r = 0; r < N; r++)
        CHECK_OK(fh_segment_query(seg, r, &bases[r], NULL));

    char path[256];
    CHECK(snprintf(path, sizeof path, "%s/rank%d.pid", dir, me) < (int)sizeof path,
          "FLOOD_DIR", "shorter than %zu bytes", sizeof path - 16);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "pid file", "%s writable", path);
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    wait_ready(dir);
    const char *e = getenv("FLOOD_HOLD_MS");
    double hold_end = tu_now() + (e != NULL ? atof(e) / 1e3 : 0);
    while (tu_now() < hold_end) {
        CHECK_OK(fh_poll());
        tu_sleep_us(10000);
    }
    e = getenv("FLOOD_THREADS");
    int two = e == NULL || atoi(e) != 1;

    pthread_t t;
    if (two)
        CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0, "thread", "created");
    traffic(0);
    if (two)
        CHECK(pthread_join(t, NULL) == 0, "thread", "joined");
    CHECK_OK(fh_barrier());
    int prev = (me + N - 1) % N;
    for (int s = 0; s < 1 + two; s++)
        TU_VERIFY((uint8_t *)base + (size_t)s * SLOT, SLOT,
                  tu_key((uint64_t)prev, (uint64_t)s, 999), 0,
                  "rank %d's last put into slot %d", prev, s);
    CHECK_OK(fh_barrier());
    printf("ofi_flood_test: rank %d: ok\n", me);
    CHECK_OK(fh_segment_destroy(seg));
    CHECK_OK(fh_finalize());
    return 0;
}
