/*
 * nb_nowait_test.c -- non-blocking calls never wait for a remote rank
 * (firehose.h, "Blocking").
 *
 * Rank 1 stops calling firehose: it waits, outside the runtime, for a file
 * that rank 0 creates only after all of its non-blocking calls to rank 1
 * returned.  If one of those calls waited for rank 1 to poll, rank 0 never
 * creates the file and rank 1 fails after --limit seconds (default 60: a
 * deadlock detector, not a speed limit) with "rank 0's non-blocking calls
 * did not return while rank 1 was not polling".  Then both poll again,
 * rank 0 completes everything and the data is checked on both sides.
 *
 * Each round (a fresh thread on rank 0, so its first operations to rank 1
 * are the first from that thread's path: "first contact", and then the
 * main thread again) issues to rank 1, for every size in SIZES:
 * fh_put_nb, fh_get_nb, fh_put_nbi and fh_get_nbi.  The sizes span one
 * word, the conduit's inject range, several AM chunks (bounce) and several
 * registration regions (rendezvous); and NATOM fh_atomic_nb FETCH_ADDs
 * on one counter of rank 1 -- more than FH_AM_CREDITS (default 16) allows
 * in flight, so the later ones find no credit until rank 1 answers.  Their
 * fetched values must be a permutation of the counter's values in the
 * round.  Ranks other than 0 and 1 only take part in the collectives.
 *
 * Usage: nb_nowait_test [--limit SECONDS] [--rounds N]
 */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>

#define KiB ((size_t)1024)
#define MiB (KiB * KiB)

static const size_t SIZES[] = {8, 1000, 40 * KiB, 3 * MiB + 123};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
#define SLOT (4 * MiB)             /* one slot per (size, op) */
enum { OP_PUT_NB, OP_GET_NB, OP_PUT_NBI, OP_GET_NBI, NOPS };
#define NATOM 50                   /* > 3 x the default FH_AM_CREDITS */
#define CTR_OFF (NSIZES * NOPS * SLOT)   /* rank 1's counter */

static int me;
static long limit_s;
static uint8_t **bases;            /* every rank's segment base */
static uint8_t *lbuf;              /* rank 0: local sources/destinations */
static char flagdir[64];           /* rank 0's directory, known to all */

static size_t slot_off(unsigned s, unsigned op) { return ((size_t)s * NOPS + op) * SLOT; }

static void flag_path(char *out, size_t len, int round)
{
    snprintf(out, len, "%s/released.%d", flagdir, round);
}

/* Rank 1, not polling: waits for rank 0's file (bounded). */
static void wait_released(int round)
{
    char path[128];
    flag_path(path, sizeof path, round);
    double t0 = tu_now();
    while (access(path, F_OK) != 0) {
        CHECK(tu_now() - t0 < (double)limit_s, "nb_nowait",
              "rank 0's non-blocking calls of round %d to return while rank 1 was not "
              "polling, saw no release after %ld s (a call waited for rank 1)",
              round, limit_s);
        tu_sleep_us(2000);
    }
}

static void release(int round)
{
    char path[128];
    flag_path(path, sizeof path, round);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0, "create the release file", "a file, saw errno %d", errno);
    close(fd);
}

static uint64_t key(int round, unsigned s, unsigned op) { return tu_key((uint64_t)round, s, op); }

/* Rank 0: issues every operation of the round to rank 1, then releases it
 * and completes them. */
static void *issue_round(void *arg)
{
    int round = (int)(intptr_t)arg;
    fh_handle_t h[NSIZES][2], ah[NATOM];
    uint64_t fetched[NATOM];
    uint64_t *ctr = (uint64_t *)(bases[1] + CTR_OFF);
    for (unsigned s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s];
        uint8_t *rem = bases[1];
        CHECK_OK(fh_put_nb(1, rem + slot_off(s, OP_PUT_NB), lbuf + slot_off(s, OP_PUT_NB), n,
                           &h[s][0]));
        CHECK_OK(fh_get_nb(lbuf + slot_off(s, OP_GET_NB), 1, rem + slot_off(s, OP_GET_NB), n,
                           &h[s][1]));
        CHECK_OK(fh_put_nbi(1, rem + slot_off(s, OP_PUT_NBI), lbuf + slot_off(s, OP_PUT_NBI),
                            n));
        CHECK_OK(fh_get_nbi(lbuf + slot_off(s, OP_GET_NBI), 1, rem + slot_off(s, OP_GET_NBI),
                            n));
    }
    for (unsigned i = 0; i < NATOM; i++)
        CHECK_OK(fh_atomic_nb(1, ctr, FH_AOP_FETCH_ADD, 1, 0, &fetched[i], &ah[i]));
    release(round);
    for (unsigned s = 0; s < NSIZES; s++)
        CHECK_OK(fh_wait_all(h[s], 2));
    CHECK_OK(fh_wait_nbi());
    CHECK_OK(fh_wait_all(ah, NATOM));
    /* Each value of [round * NATOM, +NATOM) fetched exactly once. */
    uint8_t seen[NATOM] = {0};
    for (unsigned i = 0; i < NATOM; i++) {
        uint64_t v = fetched[i] - (uint64_t)round * NATOM;
        CHECK(v < NATOM && !seen[v], "fh_atomic_nb fetched values",
              "a permutation of [%d, +%d), saw %llu at %u", round * NATOM, NATOM,
              (unsigned long long)fetched[i], i);
        seen[v] = 1;
    }
    return NULL;
}

static void one_round(int round, bool fresh_thread)
{
    /* Sources (rank 0's puts) and targets of the gets (rank 1's memory). */
    for (unsigned s = 0; s < NSIZES; s++) {
        if (me == 0) {
            tu_fill(lbuf + slot_off(s, OP_PUT_NB), SIZES[s], key(round, s, OP_PUT_NB), 0);
            tu_fill(lbuf + slot_off(s, OP_PUT_NBI), SIZES[s], key(round, s, OP_PUT_NBI), 0);
            memset(lbuf + slot_off(s, OP_GET_NB), 0, SIZES[s]);
            memset(lbuf + slot_off(s, OP_GET_NBI), 0, SIZES[s]);
        } else if (me == 1) {
            tu_fill(bases[1] + slot_off(s, OP_GET_NB), SIZES[s], key(round, s, OP_GET_NB), 0);
            tu_fill(bases[1] + slot_off(s, OP_GET_NBI), SIZES[s], key(round, s, OP_GET_NBI), 0);
        }
    }
    CHECK_OK(fh_barrier());
    if (me == 1) {
        wait_released(round);
    } else if (me == 0) {
        if (fresh_thread) {
            pthread_t th;
            CHECK(pthread_create(&th, NULL, issue_round, (void *)(intptr_t)round) == 0,
                  "pthread_create", "a thread, saw an error");
            pthread_join(th, NULL);
        } else {
            issue_round((void *)(intptr_t)round);
        }
    }
    CHECK_OK(fh_barrier());
    if (me == 1) {
        uint64_t c = __atomic_load_n((uint64_t *)(bases[1] + CTR_OFF), __ATOMIC_SEQ_CST);
        CHECK(c == (uint64_t)(round + 1) * NATOM, "rank 1's counter after the round",
              "%d, saw %llu", (round + 1) * NATOM, (unsigned long long)c);
    }
    for (unsigned s = 0; s < NSIZES; s++) {
        if (me == 0) {
            TU_VERIFY(lbuf + slot_off(s, OP_GET_NB), SIZES[s], key(round, s, OP_GET_NB), 0,
                      "round %d fh_get_nb of %zu bytes", round, SIZES[s]);
            TU_VERIFY(lbuf + slot_off(s, OP_GET_NBI), SIZES[s], key(round, s, OP_GET_NBI), 0,
                      "round %d fh_get_nbi of %zu bytes", round, SIZES[s]);
        } else if (me == 1) {
            TU_VERIFY(bases[1] + slot_off(s, OP_PUT_NB), SIZES[s], key(round, s, OP_PUT_NB),
                      0, "round %d fh_put_nb of %zu bytes", round, SIZES[s]);
            TU_VERIFY(bases[1] + slot_off(s, OP_PUT_NBI), SIZES[s],
                      key(round, s, OP_PUT_NBI), 0, "round %d fh_put_nbi of %zu bytes",
                      round, SIZES[s]);
        }
    }
    TU_SAY("round %d (%s): every non-blocking call returned while rank 1 was not polling; "
           "data correct\n", round, fresh_thread ? "new thread" : "main thread");
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("nb_nowait_test");
    me = fh_rank();
    int n = fh_nranks();
    limit_s = tu_opt(argc, argv, "--limit", 60);
    int rounds = (int)tu_opt(argc, argv, "--rounds", 2);
    if (n < 2) {
        TU_SAY("SKIP nb_nowait_test: needs 2 ranks\n");
        TU_SAY("PASS nb_nowait_test\n");
        return fh_finalize() == FH_OK ? 0 : 1;
    }
    tu_seed_init();
    size_t segsz = CTR_OFF + 4096;
    fh_seg_t seg;
    CHECK_OK(fh_segment_create(segsz, &seg, NULL));
    bases = calloc((size_t)n, sizeof *bases);
    CHECK(bases != NULL, "calloc", "memory, saw NULL");
    for (int r = 0; r < n; r++)
        CHECK_OK(fh_segment_query(seg, r, (void **)&bases[r], NULL));
    if (me == 0) {
        lbuf = malloc(CTR_OFF);
        CHECK(lbuf != NULL, "malloc", "memory, saw NULL");
        snprintf(flagdir, sizeof flagdir, "%s/fhnbXXXXXX",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        CHECK(mkdtemp(flagdir) != NULL, "mkdtemp", "a directory, saw errno %d", errno);
    }
    char *all = calloc((size_t)n, sizeof flagdir);
    CHECK(all != NULL, "calloc", "memory, saw NULL");
    CHECK_OK(fh_allgather(flagdir, all, sizeof flagdir));
    memcpy(flagdir, all, sizeof flagdir);
    free(all);

    for (int r = 0; r < 2 * rounds; r++)
        one_round(r, r % 2 == 0);

    CHECK_OK(fh_barrier());
    if (me == 0) {
        for (int r = 0; r < 2 * rounds; r++) {
            char path[128];
            flag_path(path, sizeof path, r);
            unlink(path);
        }
        rmdir(flagdir);
        free(lbuf);
    }
    CHECK_OK(fh_segment_destroy(seg));
    free(bases);
    TU_SAY("PASS nb_nowait_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
