/*
 * lost_reply_test.c -- issue 29 class 3 (tests/robust/README.md): an AM
 * request whose connection is lost before its reply came fails, naming the
 * peer, instead of waiting for ever; the pair is connected again and works.
 *
 * 2 ranks over tcp, message endpoints (the conduit's reconnection).  Rank
 * 0 starts a worker thread: its first atomic to rank 1 makes the worker's
 * thread path connect, and the TCP sockets that appear meanwhile are that
 * connection (the test compares /proc/self/fd before and after).  Then
 * rank 1 stops calling the runtime (it waits on the out-of-band page), the
 * worker sends a blocking atomic (fetch-add 1) that rank 1 cannot answer,
 * and a third thread of rank 0, which never calls the runtime, shuts those
 * sockets down.  Asserted: the atomic returns FH_ERR_PEER_DEAD and
 * fh_last_error() names rank 1 (on main it waited for ever: fhrun's
 * --timeout ends the run); an NB atomic sent the same way fails the same
 * way at fh_wait; then, once rank 1 polls again, an atomic on the new
 * connection succeeds, seeing the counter at 1..4 (each lost one may or may
 * not have been applied: docs/reliability.md), and both ranks finish with
 * fh_barrier and fh_finalize.
 *
 * The same rounds with other requests that wait for a reply (argv[1]):
 *   bounce  (FH_REG_STRATEGY=bounce) a 128 KiB put, 32 chunks past the 16
 *           credits, blocking then NB: FH_ERR_PEER_DEAD naming rank 1;
 *   client  a client request whose handler replies, waited for the way
 *           firehose.h says (fh_am_lost read before the send, compared
 *           after each fh_poll): the wait sees rank 1's mark grow and
 *           ends (on main the flag waited for ever);
 *   barrier rank 1 waits in fh_barrier while every connection of rank 0 is
 *           shut down: FH_ERR_PEER_DEAD naming rank 0; rank 0's own
 *           fh_barrier afterwards returns (its result is printed).
 * Then, except for barrier, the pair works again as above.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../integ/oob.h"
#include "tcp_fds.h"

#define RDV_BYTES (256u << 10)
#define BOUNCE_BYTES (128u << 10)
#define H_ASK 200
#define H_ANSWER 201

enum { MODE_ATOMIC, MODE_BOUNCE, MODE_CLIENT };
static int mode;
static char *putbuf;                 /* bounce's source */
static _Atomic uint64_t answered;    /* the last client reply's sequence number */

static uint64_t *counter1;           /* rank 1's counter (in its segment) */
static volatile uint64_t *oob;       /* [0] round asked, [1] round quiet, [2] done,
                                        [3] rdv, move, barrier: rank 0's result said */

static int fresh[MAXFD], nfresh;
static ino_t old_ino[MAXFD];         /* the sockets before a connection was made */
static int nold;

static ino_t sock_ino(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

/* Remembers the sockets there are now (by inode: the fd of a closed one
 * may be reused by its successor). */
static void remember_old(void)
{
    int fds[MAXFD];
    nold = tcp_fds(fds);
    for (int i = 0; i < nold; i++)
        old_ino[i] = sock_ino(fds[i]);
}

/* The sockets made since remember_old: the next round's victims. */
static void collect_fresh(void)
{
    int fds[MAXFD], n = tcp_fds(fds);
    nfresh = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        ino_t ino = sock_ino(fds[i]);
        for (int j = 0; j < nold; j++)
            seen |= ino == old_ino[j];
        if (!seen)
            fresh[nfresh++] = fds[i];
    }
}

static void *killer(void *arg)
{
    (void)arg;
    tu_sleep_us(300 * 1000);             /* the request reached rank 1 */
    for (int i = 0; i < nfresh; i++)
        shutdown(fresh[i], SHUT_RDWR);
    return NULL;
}

/* The client's handlers: rank 1 answers, rank 0 records the answer. */
static void h_ask(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf;
    (void)n;
    CHECK(na == 1, "client request", "1 argument, saw %u", na);
    CHECK_OK(fh_am_reply_short(tok, H_ANSWER, a, 1));
}

static void h_answer(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok;
    (void)buf;
    (void)n;
    CHECK(na == 1, "client reply", "1 argument, saw %u", na);
    atomic_store(&answered, a[0]);
}

/* A client's request to rank 1 and its wait for the reply, as firehose.h
 * says: the job-wide mark read before the send; after each poll, a larger
 * one means some connection was lost, and the ranks whose own mark is
 * larger than it are those it was lost with.  FH_OK with the reply;
 * FH_ERR_PEER_DEAD when rank 1 is among them (the message in lost_why). */
static char lost_why[128];

static int client_ask(uint64_t seq)
{
    uint64_t before, now;
    CHECK_OK(fh_am_lost(-1, &before));
    CHECK_OK(fh_am_request_short(1, H_ASK, &seq, 1));
    while (atomic_load(&answered) != seq) {
        CHECK_OK(fh_poll());
        CHECK_OK(fh_am_lost(-1, &now));
        if (now == before)
            continue;
        for (int r = 0; r < fh_nranks(); r++) {
            uint64_t m;
            CHECK_OK(fh_am_lost(r, &m));
            if (m > before)
                snprintf(lost_why, sizeof lost_why, "fh_am_lost: the connection with "
                         "rank %d was lost", r);
        }
        uint64_t m1;
        CHECK_OK(fh_am_lost(1, &m1));
        if (m1 > before)
            return FH_ERR_PEER_DEAD;
        before = now;
    }
    return FH_OK;
}

/* One round (form 0 blocking, 1 NB): rank 1 is quiet, the worker's request
 * to it (an atomic, a bounce put, a client request) loses its connection
 * and must fail naming rank 1. */
static void lost_round(int form)
{
    static const char *const what[] = {"atomic", "bounce put", "client request"};
    tu_oob_store(&oob[0], (uint64_t)form + 1);
    tu_oob_wait(&oob[1], (uint64_t)form + 1, 30);
    remember_old();                      /* the victims' successors are new */
    pthread_t k;
    CHECK(pthread_create(&k, NULL, killer, NULL) == 0, "pthread_create", "killer");
    uint64_t old = 0;
    int rc;
    fh_handle_t h;
    char *dst = (char *)counter1 + 64;
    if (mode == MODE_CLIENT) {
        rc = client_ask(100 + (uint64_t)form);
    } else if (form == 0) {
        rc = mode == MODE_ATOMIC ? fh_atomic(1, counter1, FH_AOP_FETCH_ADD, 1, 0, &old)
                                 : fh_put(1, dst, putbuf, BOUNCE_BYTES);
    } else {
        CHECK_OK(mode == MODE_ATOMIC
                     ? fh_atomic_nb(1, counter1, FH_AOP_FETCH_ADD, 1, 0, &old, &h)
                     : fh_put_nb(1, dst, putbuf, BOUNCE_BYTES, &h));
        rc = fh_wait(h);
    }
    pthread_join(k, NULL);
    const char *e = mode == MODE_CLIENT ? lost_why : fh_last_error();
    TU_LOG("form %d: the %s whose connection was lost returned %s: %s\n", form,
           what[mode], tu_errname(rc), e ? e : "(null)");
    CHECK(rc == FH_ERR_PEER_DEAD, "request with its reply lost", "form %d: "
          "FH_ERR_PEER_DEAD, saw %s", form, tu_errname(rc));
    CHECK(e != NULL && strstr(e, "rank 1") != NULL, "error names the peer",
          "'rank 1' in '%s'", e ? e : "(null)");
}

/* "rdv" (FH_REG_STRATEGY=rendezvous): a put whose key request travels on
 * the service paths' connection; every connection of rank 0 is shut down
 * while rank 1 is quiet.  Asserted: the put returns FH_ERR_PEER_DEAD
 * naming rank 1 (on main it waited for ever).  "move" (the default
 * strategy, firehose): the same with a put into a segment never touched,
 * whose firehose move (on the service paths' connection) waits for its
 * reply.  The service paths' connection is not made again (docs/
 * reliability.md), so the ranks then exit without fh_finalize. */
static const char *far_case;         /* "rdv" or "move" */
static char *far_dst;                /* where its put goes at rank 1 */

static void *rdv_worker(void *arg)
{
    char *buf = arg;
    CHECK_OK(fh_put(1, counter1, buf, 8));     /* makes the worker's path */
    nfresh = tcp_fds(fresh);
    tu_oob_store(&oob[0], 1);
    tu_oob_wait(&oob[1], 1, 30);
    pthread_t k;
    CHECK(pthread_create(&k, NULL, killer, NULL) == 0, "pthread_create", "killer");
    int rc = fh_put(1, far_dst, buf, RDV_BYTES);
    pthread_join(k, NULL);
    const char *e = fh_last_error();
    TU_LOG("%s: the put whose %s lost its connection returned %s: %s\n", far_case,
           *far_case == 'r' ? "key request" : "move", tu_errname(rc), e ? e : "(null)");
    CHECK(rc == FH_ERR_PEER_DEAD, "put with its reply lost", "FH_ERR_PEER_DEAD, saw %s",
          tu_errname(rc));
    CHECK(e != NULL && strstr(e, "rank 1") != NULL, "error names the peer",
          "'rank 1' in '%s'", e ? e : "(null)");
    tu_oob_store(&oob[2], 1);
    return NULL;
}

static void *worker(void *arg)
{
    (void)arg;
    remember_old();
    uint64_t old = 0;
    CHECK_OK(fh_atomic(1, counter1, FH_AOP_FETCH, 0, 0, &old));   /* connects */
    collect_fresh();
    CHECK(nfresh > 0, "the worker's connection", "a new TCP socket after its first "
          "atomic (%d before): run with FH_OFI_ENDPOINT=msg over tcp", nold);
    TU_LOG("the worker's connection: %d socket(s), fd %d first\n", nfresh, fresh[0]);
    for (int form = 0; form < 2; form++) {
        lost_round(form);
        /* The lost connection is made again once rank 1 polls: the new
         * sockets are its successor's, the next round's victims. */
        tu_oob_store(&oob[2], (uint64_t)form + 1);
        CHECK_OK(fh_atomic(1, counter1, FH_AOP_FETCH_ADD, 1, 0, &old));
        TU_LOG("form %d: an atomic on the new connection saw %llu\n", form,
               (unsigned long long)old);
        const uint64_t hi = mode == MODE_ATOMIC ? 2u * (uint64_t)form + 1 : (uint64_t)form;
        CHECK(old >= (uint64_t)form && old <= hi, "counter", "old value in [%d, %llu], "
              "saw %llu", form, (unsigned long long)hi, (unsigned long long)old);
        if (mode == MODE_BOUNCE)
            CHECK_OK(fh_put(1, (char *)counter1 + 64, putbuf, BOUNCE_BYTES));
        if (mode == MODE_CLIENT)
            CHECK_OK(client_ask(200 + (uint64_t)form));
        collect_fresh();
    }
    return NULL;
}

/* "barrier": rank 1 waits in fh_barrier while a thread of rank 0, which
 * does not call the runtime meanwhile, shuts down all of rank 0's
 * connections.  Asserted: rank 1's barrier returns FH_ERR_PEER_DEAD naming
 * rank 0 (on main it waited for ever); rank 0's barrier afterwards
 * returns.  The service paths' connection is not made again: the ranks
 * exit without fh_finalize (lost_reply.sh checks the lines). */
static void barrier_case(void)
{
    if (fh_rank() == 0) {
        nfresh = tcp_fds(fresh);
        CHECK(nfresh > 0, "rank 0's connections", "a TCP socket (FH_OFI_PROVIDER=tcp)");
        tu_oob_store(&oob[0], 1);
        pthread_t k;
        CHECK(pthread_create(&k, NULL, killer, NULL) == 0, "pthread_create", "killer");
        pthread_join(k, NULL);
        tu_oob_wait(&oob[2], 1, 30);          /* rank 1's barrier returned */
        int rc = fh_barrier();
        TU_LOG("barrier: rank 0's barrier after the loss returned %s\n", tu_errname(rc));
        fflush(stdout);
        tu_oob_store(&oob[3], 1);             /* rank 1 may exit now */
    } else {
        double t0 = tu_now();
        while (tu_oob_load(&oob[0]) != 1) {
            CHECK(tu_now() - t0 < 60, "round", "rank 0 to be ready");
            fh_poll();
        }
        int rc = fh_barrier();
        const char *e = fh_last_error();
        TU_LOG("barrier: the barrier whose connection was lost returned %s: %s\n",
               tu_errname(rc), e ? e : "(null)");
        CHECK(rc == FH_ERR_PEER_DEAD, "barrier with its peer's message lost",
              "FH_ERR_PEER_DEAD, saw %s", tu_errname(rc));
        CHECK(e != NULL && strstr(e, "rank 0") != NULL, "error names the peer",
              "'rank 0' in '%s'", e ? e : "(null)");
        tu_oob_store(&oob[2], 1);
        printf("lost_reply_test barrier: PASS\n");
        fflush(stdout);
        tu_oob_wait(&oob[3], 1, 30);          /* not before rank 0 said its result */
    }
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv)
{
    const char *arg = argc > 1 ? argv[1] : "";
    mode = strcmp(arg, "bounce") == 0 ? MODE_BOUNCE
           : strcmp(arg, "client") == 0 ? MODE_CLIENT : MODE_ATOMIC;
    CHECK_OK(fh_am_register(H_ASK, h_ask, "lost_reply ask"));
    CHECK_OK(fh_am_register(H_ANSWER, h_answer, "lost_reply answer"));
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("lost_reply_test");
    CHECK(fh_nranks() == 2, "ranks", "expected 2, saw %d", fh_nranks());
    fh_seg_t seg;
    uint64_t *mine;
    CHECK_OK(fh_segment_create(RDV_BYTES, &seg, (void **)&mine));
    void *s1;
    CHECK_OK(fh_segment_query(seg, 1, &s1, NULL));
    counter1 = s1;
    oob = tu_oob_open();
    putbuf = calloc(1, BOUNCE_BYTES);
    CHECK(putbuf != NULL, "calloc", "%u bytes", BOUNCE_BYTES);
    if (strcmp(arg, "barrier") == 0)
        barrier_case();
    if (strcmp(arg, "rdv") == 0 || strcmp(arg, "move") == 0) {
        far_case = arg;
        far_dst = (char *)counter1;
        if (*arg == 'm') {                   /* a segment no put touched yet */
            fh_seg_t seg2;
            void *m2, *s2;
            CHECK_OK(fh_segment_create(RDV_BYTES, &seg2, &m2));
            CHECK_OK(fh_segment_query(seg2, 1, &s2, NULL));
            far_dst = s2;
        }
        if (fh_rank() == 0) {
            char *buf = calloc(1, RDV_BYTES);
            pthread_t w;
            CHECK(buf != NULL && pthread_create(&w, NULL, rdv_worker, buf) == 0,
                  "pthread_create", "worker");
            pthread_join(w, NULL);
            free(buf);
        } else {
            double t0 = tu_now();
            while (tu_oob_load(&oob[0]) != 1) {      /* serving, then quiet */
                CHECK(tu_now() - t0 < 60, "round", "rank 0 to ask");
                fh_poll();
            }
            tu_oob_store(&oob[1], 1);
            tu_oob_wait(&oob[2], 1, 60);
        }
        /* The service paths' connection is not made again (docs/
         * reliability.md, "Open"): no barrier or fh_finalize can complete,
         * so the ranks end here (fhrun reports an exit before fh_finalize;
         * lost_reply.sh checks the lines above). */
        if (fh_rank() == 0) {
            printf("lost_reply_test %s: PASS\n", arg);
            fflush(stdout);
            tu_oob_store(&oob[3], 1);
        } else {
            tu_oob_wait(&oob[3], 1, 30);      /* fhrun ends the job at our exit */
        }
        fflush(stdout);
        _exit(0);
    }
    if (fh_rank() == 0) {
        pthread_t w;
        CHECK(pthread_create(&w, NULL, worker, NULL) == 0, "pthread_create", "worker");
        pthread_join(w, NULL);
    } else {
        for (uint64_t form = 1; form <= 2; form++) {
            /* Serving (the new connection, rank 0's atomics) until rank 0
             * asks for the round; then quiet (no runtime call) while rank
             * 0 loses its request. */
            double t0 = tu_now();
            while (tu_oob_load(&oob[0]) != form) {
                CHECK(tu_now() - t0 < 60, "round", "rank 0 to ask for round %d",
                      (int)form);
                fh_poll();
            }
            tu_oob_store(&oob[1], form);
            tu_oob_wait(&oob[2], form, 60);
        }
    }
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    CHECK_OK(fh_finalize());
    free(putbuf);
    printf("lost_reply_test%s%s: PASS\n", *arg ? " " : "", arg);
    return 0;
}
