/*
 * revoke_order_test.c -- a thread that frees memory and then publishes
 * must not get its publication to a peer before the REVOKE of that memory
 * (issue 20, item 1; docs/firehose-cache.md, "Publication order").
 *
 * Built against the runtime compiled with the test hooks (libfhrt_hooks.la,
 * -DFH_TEST_HOOKS): on the target a helper thread that only calls fh_poll
 * sleeps 5 ms at FH_TP_MM_PUBLISH -- inside the memory monitor sync, between
 * the two stores that publish "events processed" and "REVOKEs pending" --
 * so the main thread enters the runtime in the middle of that publication
 * nearly every cycle.  With the stores in the wrong order (or relaxed) it
 * reads "processed, nothing pending" and sends at once.
 *
 * Meant for FH_REG_STRATEGY=firehose FH_SEGMENT=everything FH_BUCKET_SIZE=4k
 * and 2 ranks (revoke_order_test.sh): rank 0 holds firehoses, rank 1 frees.
 * Each cycle c:
 *   holder  puts one bucket into the target's bucket A (a firehose on A's
 *           region is now cached) and sends READY c;
 *   target  maps fresh pages over A (mmap MAP_FIXED: the monitor sees an
 *           unmap), lets the helper process the event (it polls all the
 *           time), and publishes: PUBLISH c by AM;
 *   holder  in the PUBLISH handler reads its reg_revoked counter for the
 *           target: it must have grown since the previous PUBLISH -- the
 *           REVOKE of A's region came first.
 * PASS iff no PUBLISH arrived before its REVOKE (early=0) and every cycle
 * saw one.
 *
 * With --reply the publication is an AM reply (issue 29 class 9: replies
 * skipped the revocation wait): the holder keeps asking (ASK c, a request)
 * and the target's handler -- run by its helper's fh_poll, whose entry
 * check may have come before the remap -- replies PUBLISH c once the main
 * thread has remapped A for cycle c, NOTYET before; the target's main
 * thread makes no firehose call between the remap and that reply.
 *
 * Usage: revoke_order_test [--cycles N] [--delay-us U] [--reply]
 */
#include <pthread.h>
#include <stdatomic.h>

#include "testutil.h"
#include "firehose/internal.h"     /* fh_test_hook, FH_TP_MM_PUBLISH */

#ifndef FH_TEST_HOOKS
#error "revoke_order_test needs the runtime built with -DFH_TEST_HOOKS"
#endif

#define H_STEP (FH_AM_USER_FIRST + 0)
#define H_ASK (FH_AM_USER_FIRST + 1)
enum { ADDR, READY, PUBLISH, NOTYET, NSTEPS };
#define BUCKET ((size_t)4096)          /* = FH_BUCKET_SIZE */
#define FRAME  (16 * BUCKET)

static volatile uint64_t step_cycle[NSTEPS] = {UINT64_MAX, UINT64_MAX, UINT64_MAX,
                                               UINT64_MAX};
/* --reply: the target's cycle remapped (main thread) and answered (handler). */
static _Atomic uint64_t remapped = UINT64_MAX, answered = UINT64_MAX;
static volatile uint64_t area_addr;
/* Holder: reg_revoked at the previous PUBLISH, and PUBLISHes that came
 * before any new REVOKE (handler only: one thread at a time). */
static uint64_t last_revoked;
static uint64_t early;

static _Thread_local int tl_helper;
static long hook_delay_us = 5000;

static void hook(enum fh_test_point where)
{
    if (where == FH_TP_MM_PUBLISH && tl_helper)
        tu_sleep_us(hook_delay_us);
}

static void h_step(fh_token_t t, void *b, size_t n, const uint64_t *a, unsigned na)
{
    (void)b; (void)n;
    CHECK(na == 3 && a[0] < NSTEPS, "step message", "3 args, step < %d; saw %u args",
          NSTEPS, na);
    if (a[0] == ADDR)
        area_addr = a[2];
    if (a[0] == PUBLISH) {
        int src = -1;
        fh_token_source(t, &src);
        fh_peer_stats_t s = FH_PEER_STATS_INIT;
        CHECK_OK(fh_stats_peer(src, &s));
        if (s.reg_revoked == last_revoked)
            early++;
        last_revoked = s.reg_revoked;
    }
    __atomic_store_n(&step_cycle[a[0]], a[1], __ATOMIC_RELEASE);
}

/* Target, --reply: PUBLISH c once cycle c's remap is done, else NOTYET. */
static void h_ask(fh_token_t t, void *b, size_t n, const uint64_t *a, unsigned na)
{
    (void)b; (void)n;
    CHECK(na == 2, "ask message", "2 args, saw %u", na);
    bool ready = atomic_load(&remapped) == a[0];
    uint64_t r[3] = {ready ? PUBLISH : NOTYET, ready ? a[0] : a[1], 0};
    CHECK_OK(fh_am_reply_short(t, H_STEP, r, 3));
    if (ready)
        atomic_store(&answered, a[0]);
}

static void step(int peer, int st, uint64_t c, uint64_t addr)
{
    uint64_t a[3] = {(uint64_t)st, c, addr};
    CHECK_OK(fh_am_request_short(peer, H_STEP, a, 3));
}

static atomic_int helper_quit;

static void *helper_main(void *arg)
{
    (void)arg;
    tl_helper = 1;
    while (!atomic_load(&helper_quit))
        CHECK_OK(fh_poll());
    return NULL;
}

int main(int argc, char **argv)
{
    long cycles = tu_opt(argc, argv, "--cycles", 200);
    bool by_reply = false;
    for (int i = 1; i < argc; i++)
        by_reply |= strcmp(argv[i], "--reply") == 0;
    hook_delay_us = tu_opt(argc, argv, "--delay-us", 5000);
    fh_test_hook = hook;                       /* before any runtime thread */
    CHECK_OK(fh_am_register(H_STEP, h_step, "revoke-order-step"));
    CHECK_OK(fh_am_register(H_ASK, h_ask, "revoke-order-ask"));
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("revoke_order_test");
    int me = fh_rank();
    CHECK(fh_nranks() == 2, "rank count", "2 ranks, saw %d", fh_nranks());
    int peer = 1 - me;

    char *area = NULL, *src = NULL;
    pthread_t ht;
    if (me == 1) {
        area = tu_reserve(FRAME, FRAME);
        memset(area, 0xee, FRAME);
        CHECK(pthread_create(&ht, NULL, helper_main, NULL) == 0, "pthread_create", "0");
    } else {
        src = malloc(BUCKET);
        CHECK(src != NULL, "malloc", "a bucket, saw NULL");
        memset(src, 0x5a, BUCKET);
    }
    CHECK_OK(fh_barrier());
    if (me == 1)
        step(peer, ADDR, 0, (uint64_t)(uintptr_t)area);
    else
        tu_wait_for(&step_cycle[ADDR], 0);

    uint64_t asks = 0;
    for (long c = 0; c < cycles && by_reply; c++) {
        if (me == 0) {
            CHECK_OK(fh_put(peer, (char *)(uintptr_t)area_addr, src, BUCKET));
            step(peer, READY, (uint64_t)c, 0);
            while (step_cycle[PUBLISH] != (uint64_t)c) {
                uint64_t a[2] = {(uint64_t)c, asks};
                CHECK_OK(fh_am_request_short(peer, H_ASK, a, 2));
                while (__atomic_load_n(&step_cycle[NOTYET], __ATOMIC_ACQUIRE) != asks &&
                       __atomic_load_n(&step_cycle[PUBLISH], __ATOMIC_ACQUIRE) != (uint64_t)c)
                    CHECK_OK(fh_poll());
                asks++;
            }
        } else {
            tu_wait_for(&step_cycle[READY], (uint64_t)c);
            char *q = mmap(area, BUCKET, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            CHECK(q == area, "mmap MAP_FIXED", "%p, saw %p", (void *)area, (void *)q);
            atomic_store(&remapped, (uint64_t)c);
            while (atomic_load(&answered) != (uint64_t)c)
                tu_sleep_us(50);     /* no firehose call: the helper answers */
        }
    }
    for (long c = 0; c < cycles && !by_reply; c++) {
        if (me == 0) {
            CHECK_OK(fh_put(peer, (char *)(uintptr_t)area_addr, src, BUCKET));
            step(peer, READY, (uint64_t)c, 0);
            tu_wait_for(&step_cycle[PUBLISH], (uint64_t)c);
        } else {
            tu_wait_for(&step_cycle[READY], (uint64_t)c);
            char *q = mmap(area, BUCKET, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            CHECK(q == area, "mmap MAP_FIXED", "%p, saw %p", (void *)area, (void *)q);
            tu_sleep_us(200);      /* the helper takes the event first */
            step(peer, PUBLISH, (uint64_t)c, 0);
        }
    }
    if (me == 1) {
        atomic_store(&helper_quit, 1);
        CHECK(pthread_join(ht, NULL) == 0, "pthread_join", "0");
    }
    CHECK_OK(fh_barrier());
    if (me == 0) {
        TU_LOG("revoke_order: cycles=%ld early=%llu revoked=%llu\n", cycles,
               (unsigned long long)early, (unsigned long long)last_revoked);
        CHECK(early == 0, "publication order", "every PUBLISH after its REVOKE; %llu of "
              "%ld PUBLISHes reached us before the REVOKE of the memory freed before them",
              (unsigned long long)early, cycles);
        CHECK(last_revoked >= (uint64_t)cycles, "revocations", "one REVOKE per cycle at "
              "least (%ld), saw %llu", cycles, (unsigned long long)last_revoked);
    }
    free(src);
    CHECK_OK(fh_finalize());
    TU_SAY("PASS revoke_order_test\n");
    return 0;
}
