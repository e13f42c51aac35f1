/*
 * barrier_resend_test.c -- issue 29: a barrier notification lost with a
 * thread path's connection is sent again once the connection is made
 * again, so both ranks' barriers complete (docs/reliability.md, "A
 * request whose connection is lost fails").
 *
 * 2 ranks over tcp, message endpoints, FH_PATHS=lazy, FH_SHM=off.  Rank 0
 * starts a worker thread whose first atomic to rank 1 makes the worker's
 * thread path connect to rank 1's service path; rank 1 notes the TCP
 * sockets that appeared meanwhile (its end of that connection) and stops
 * calling the runtime.  The worker enters fh_barrier: its notification
 * (round 0) leaves on its own connection and waits, unread, in rank 1's
 * socket.  Rank 1 then reads those bytes itself -- the notification is
 * gone, as if the connection had dropped it -- shuts the sockets down and
 * enters fh_barrier.  Asserted: bytes were taken (else the test proved
 * nothing), both barriers return FH_OK, and the job then finishes with
 * fh_barrier and fh_finalize (exit 0).  Before session 16 rank 1 waited
 * for ever: fhrun --timeout ended the run.
 *
 * Mode "outside": the worker's barrier completes (rank 1's notification
 * came), so the worker is out of any barrier when the notification must
 * be sent again: it then waits with fh_poll for a word that rank 1 puts
 * only after its own barrier returned (a client's wait).  Asserted: the
 * word comes within 30 s.  Before session 17 only a barrier's wait sent
 * again: rank 1 waited in its barrier, the worker for the word, for ever.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "../integ/oob.h"
#include "tcp_fds.h"

static uint64_t *counter1;           /* rank 1's counter (in its segment) */
static volatile uint64_t *word0;     /* rank 0's word (its segment), put by rank 1 */
static uint64_t *word0_at1;          /* ... its address, for rank 1 */
static int outside;                  /* mode "outside" */
#define WORD 0x5eedULL
static volatile uint64_t *oob;       /* [0] ready, [1] worker connected, [2] rank 1
                                        quiet, [3] notification out */

static void *worker(void *arg)
{
    (void)arg;
    uint64_t old = 0;
    CHECK_OK(fh_atomic(1, counter1, FH_AOP_FETCH, 0, 0, &old));   /* connects */
    tu_oob_store(&oob[1], 1);
    tu_oob_wait(&oob[2], 1, 30);
    int rc = fh_barrier();
    TU_LOG("the worker's barrier, whose notification was lost, returned %s\n",
           tu_errname(rc));
    CHECK(rc == FH_OK, "worker's barrier", "FH_OK, saw %s: %s", tu_errname(rc),
          fh_last_error() ? fh_last_error() : "");
    if (outside) {
        for (double t0 = tu_now(); *word0 != WORD;) {
            CHECK(tu_now() - t0 < 30, "waiting outside a barrier", "rank 1's word after "
                  "its barrier within 30 s (our lost notification sent again)");
            CHECK_OK(fh_poll());
        }
        TU_LOG("rank 1's word came while the worker waited outside any barrier\n");
    }
    return NULL;
}

static ino_t sock_ino(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

/* Rank 1: the sockets made while rank 0's worker connected; quiet; then
 * their unread bytes taken and the sockets shut down; then the barrier. */
static void rank1(void)
{
    int before[MAXFD], nb = tcp_fds(before), fresh[MAXFD], nf = 0;
    ino_t ino[MAXFD];
    for (int i = 0; i < nb; i++)
        ino[i] = sock_ino(before[i]);
    tu_oob_store(&oob[0], 1);
    double t0 = tu_now();
    while (tu_oob_load(&oob[1]) != 1) {       /* serving the worker's atomic */
        CHECK(tu_now() - t0 < 60, "round", "rank 0's worker to connect");
        fh_poll();
    }
    int now[MAXFD], nn = tcp_fds(now);
    for (int i = 0; i < nn; i++) {
        int seen = 0;
        for (int j = 0; j < nb; j++)
            seen |= sock_ino(now[i]) == ino[j];
        if (!seen)
            fresh[nf++] = now[i];
    }
    CHECK(nf > 0, "the worker's connection", "a new TCP socket at rank 1 (%d before): "
          "run with FH_OFI_PROVIDER=tcp FH_PATHS=lazy", nb);
    tu_oob_store(&oob[2], 1);                 /* quiet from here */
    tu_oob_wait(&oob[3], 1, 30);
    size_t taken = 0;
    for (int i = 0; i < nf; i++) {
        char junk[4096];
        for (ssize_t n; (n = recv(fresh[i], junk, sizeof junk, MSG_DONTWAIT)) > 0;)
            taken += (size_t)n;
        shutdown(fresh[i], SHUT_RDWR);
    }
    TU_LOG("took %zu unread bytes from %d socket(s) of the worker's connection\n",
           taken, nf);
    CHECK(taken > 0, "the lost notification", "unread bytes on the worker's connection "
          "(its barrier notification)");
    int rc = fh_barrier();
    TU_LOG("rank 1's barrier, missing the lost notification, returned %s\n",
           tu_errname(rc));
    CHECK(rc == FH_OK, "rank 1's barrier", "FH_OK, saw %s: %s", tu_errname(rc),
          fh_last_error() ? fh_last_error() : "");
    if (outside) {
        const uint64_t w = WORD;
        CHECK_OK(fh_put(0, word0_at1, &w, sizeof w));
    }
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("barrier_resend_test");
    outside = argc > 1 && strcmp(argv[1], "outside") == 0;
    CHECK(fh_nranks() == 2, "ranks", "expected 2, saw %d", fh_nranks());
    fh_seg_t seg;
    void *mine, *s0, *s1;
    CHECK_OK(fh_segment_create(4096, &seg, &mine));
    CHECK_OK(fh_segment_query(seg, 0, &s0, NULL));
    CHECK_OK(fh_segment_query(seg, 1, &s1, NULL));
    counter1 = s1;
    word0 = (volatile uint64_t *)mine + 8;
    word0_at1 = (uint64_t *)s0 + 8;
    oob = tu_oob_open();
    if (fh_rank() == 0) {
        tu_oob_wait(&oob[0], 1, 30);
        pthread_t w;
        CHECK(pthread_create(&w, NULL, worker, NULL) == 0, "pthread_create", "worker");
        tu_oob_wait(&oob[2], 1, 30);
        tu_sleep_us(300 * 1000);              /* the worker's notification is out */
        tu_oob_store(&oob[3], 1);
        pthread_join(w, NULL);
    } else {
        rank1();
    }
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    CHECK_OK(fh_finalize());
    printf("barrier_resend_test: PASS\n");
    return 0;
}
