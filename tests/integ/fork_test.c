/*
 * fork_test.c -- a process that forks after its memory was registered
 * keeps its RDMA traffic intact, and the child runs (the ibv conduit's
 * FH_IBV_FORK, conduits/ibv/ibv_rma.c).
 *
 * Every rank registers its segment by a first put and get, then forks a
 * child that works on its own memory and waits on a pipe.  While the child
 * lives (its pages shared copy-on-write with the parent's), the parent
 * writes a new pattern into its segment; then the ranks get each other's
 * new pattern and put into each other's segment, and each checks that what
 * the peer put is what its CPU reads.  On a kernel without copy-on-fork for
 * pinned pages and without ibv_fork_init, the parent's write would have
 * moved its segment to new pages the HCA does not see: the get would read
 * the old pattern and the put would be lost.  Then the child is released
 * and must exit 0, and system() (a fork too) must run.
 *
 * Usage: fork_test (2 or more ranks)
 */
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define WORDS 512      /* 4 KiB per region: A (read by the peer), B (put into) */

static uint64_t pattern(int rank, int round, int i)
{
    return ((uint64_t)(rank + 1) << 40) | ((uint64_t)round << 32) | (uint64_t)i;
}

/* The child: touches memory of its own, then waits for the parent to
 * close the pipe; exits 0 if all went well. */
static void child(int rfd)
{
    uint64_t *mine = malloc(WORDS * sizeof *mine);
    if (mine == NULL)
        _exit(3);
    for (int i = 0; i < WORDS; i++)
        mine[i] = (uint64_t)i * 3;
    char c;
    while (read(rfd, &c, 1) > 0)
        ;
    uint64_t sum = 0;
    for (int i = 0; i < WORDS; i++)
        sum += mine[i];
    _exit(sum == 3ull * WORDS * (WORDS - 1) / 2 ? 0 : 4);
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("fork_test");
    int me = fh_rank(), N = fh_nranks();
    CHECK(N >= 2, "usage", "2 or more ranks");
    int peer = (me + 1) % N, from = (me + N - 1) % N;
    fh_seg_t seg;
    uint64_t *base;
    CHECK_OK(fh_segment_create(4 * WORDS * sizeof(uint64_t), &seg, (void **)&base));
    uint64_t *a = base, *b = base + WORDS, *got = base + 2 * WORDS;
    for (int i = 0; i < WORDS; i++)
        a[i] = pattern(me, 0, i);
    CHECK_OK(fh_barrier());
    char *pbase = NULL;
    CHECK_OK(fh_segment_query(seg, peer, (void **)&pbase, NULL));
    /* Round 0: registrations made on both sides. */
    CHECK_OK(fh_get(got, peer, pbase, WORDS * sizeof(uint64_t)));
    CHECK(got[7] == pattern(peer, 0, 7), "the get before the fork", "%llx, saw %llx",
          (unsigned long long)pattern(peer, 0, 7), (unsigned long long)got[7]);
    CHECK_OK(fh_put(peer, pbase + WORDS * sizeof(uint64_t), a, WORDS * sizeof(uint64_t)));
    CHECK_OK(fh_barrier());

    int pfd[2];
    CHECK(pipe(pfd) == 0, "pipe", "0, saw -1");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork", "a child, saw -1");
    if (pid == 0) {
        close(pfd[1]);
        child(pfd[0]);
    }
    close(pfd[0]);

    /* Round 1, the child alive: the parent writes its segment first. */
    for (int i = 0; i < WORDS; i++) {
        a[i] = pattern(me, 1, i);
        b[i] = 0;
    }
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_get(got, peer, pbase, WORDS * sizeof(uint64_t)));
    int bad = 0;
    for (int i = 0; i < WORDS; i++)
        bad += got[i] != pattern(peer, 1, i);
    CHECK(bad == 0, "a get after the fork of what the peer wrote after it",
          "0 stale words, saw %d (word 0: %llx)", bad, (unsigned long long)got[0]);
    CHECK_OK(fh_put(peer, pbase + WORDS * sizeof(uint64_t), a, WORDS * sizeof(uint64_t)));
    CHECK_OK(fh_barrier());
    bad = 0;
    for (int i = 0; i < WORDS; i++)
        bad += b[i] != pattern(from, 1, i);
    CHECK(bad == 0, "a put after the fork, as this rank's CPU reads it",
          "0 wrong words, saw %d (word 0: %llx)", bad, (unsigned long long)b[0]);

    close(pfd[1]);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid", "the child");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child forked after registration",
          "exit 0, saw status %#x", status);
    CHECK(system("exit 7") == 7 * 256, "system() after registration", "status 7");
    CHECK_OK(fh_barrier());
    TU_SAY("PASS fork_test: %d ranks\n", N);
    CHECK_OK(fh_segment_destroy(seg));
    CHECK_OK(fh_finalize());
    return 0;
}
