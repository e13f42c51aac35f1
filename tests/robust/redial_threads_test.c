/*
 * redial_threads_test.c -- issue 29 class 3 (tests/robust/README.md): the
 * connections of several thread paths are lost at once while their threads
 * keep calling in; each pair is connected again and every thread's traffic
 * goes on (docs/reliability.md, "A request whose connection is lost
 * fails").  Under ThreadSanitizer (lost_reply.sh runs in the tsan stage)
 * it checks that the threads' reconnections share nothing unguarded: two
 * thread paths close their lost connections at the same moment, while the
 * service path's poll reads the connection events.
 *
 * 2 ranks over tcp, message endpoints, FH_PATHS=lazy with FH_MAX_THREADS=3
 * (the script sets them): the main thread has the service path, and each
 * of the NW workers per rank makes its own path at its first call, so the
 * TCP sockets that appear after start-up (compared by inode, as in
 * lost_reply_test.c) are exactly the workers' connections, ours and the
 * peer's.  Every worker puts 8-byte sequence numbers into its own word of
 * the peer's segment as fast as it can, and every 8th time reads the word
 * back (a get: the last successful put's value, or a later lost one's); a
 * call returns FH_OK, or FH_ERR_PEER_DEAD when its connection was lost
 * under it.  Rank 0's main
 * thread shuts every one of those sockets down at once (shutdown(2)), then
 * waits until each of its workers has completed MIN_AFTER more puts (its
 * path connected again), and tells rank 1 (an AM), whose main thread then waits
 * for as many more from each of its own workers (the peer's connections,
 * made again from its side).  Then the workers stop, and each rank checks
 * that its segment holds every peer worker's last successful value (a
 * lost put may or may not have landed; the later successful one
 * overwrites it) and that fh_stats_peer counted the lost links
 * (links_lost >= NW: each worker's link to the peer's service path).  Both ranks finish with fh_barrier and fh_finalize.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "tcp_fds.h"

#define NW 2                    /* workers per rank */
#define MIN_AFTER 50            /* puts each worker completes after the loss */
#define WAIT_S 60.0             /* at most, for them */

enum { W_DATA = 8 };            /* the workers' words start here in the segment */
enum { SIG_PHASE = 1, SIG_STOP = 2 };
#define H_SIGNAL 210            /* a short AM: the peer's main thread's signal */

static uint64_t *seg;           /* ours: NW words per rank from W_DATA */
static _Atomic uint64_t signals;    /* SIG_* bits received (h_signal) */
static void *peer_seg;
static int me, peer;

struct worker {
    pthread_t th;
    int w;
    _Atomic uint64_t ok;        /* puts that returned FH_OK */
    _Atomic uint64_t lost;      /* puts and gets that returned FH_ERR_PEER_DEAD */
    _Atomic uint64_t last_ok;   /* the value of the last FH_OK put */
    _Atomic int ready;
};
static struct worker wk[NW];
static _Atomic int stop;

static void *worker(void *arg)
{
    struct worker *k = arg;
    uint64_t *dst = (uint64_t *)peer_seg + W_DATA + (size_t)me * NW + (size_t)k->w;
    for (uint64_t v = 1; !atomic_load(&stop); v++) {
        uint64_t src = v, back = 0;
        int rc = fh_put(peer, dst, &src, sizeof src);
        if (rc == FH_OK) {
            atomic_store(&k->last_ok, v);
            atomic_fetch_add(&k->ok, 1);
            atomic_store(&k->ready, 1);     /* its path is made */
        } else if (rc == FH_ERR_PEER_DEAD) {
            atomic_fetch_add(&k->lost, 1);
        } else {
            tu_fail("worker %d: fh_put returned %s: %s", k->w, fh_err_name(rc),
                    fh_last_error());
        }
        if (v % 8 != 0)
            continue;
        /* Every 8th round a get of the word: the last successful put's
         * value, or a later one's that was lost (it may have landed). */
        rc = fh_get(&back, peer, dst, sizeof back);
        if (rc == FH_ERR_PEER_DEAD) {
            atomic_fetch_add(&k->lost, 1);
            continue;
        }
        CHECK(rc == FH_OK, "fh_get", "worker %d: %s: %s", k->w, fh_err_name(rc),
              fh_last_error());
        const uint64_t last = atomic_load(&k->last_ok);
        CHECK(back >= last && back <= v, "data", "worker %d read %llu back, its last "
              "successful put wrote %llu, its last put %llu", k->w, (unsigned long long)back,
              (unsigned long long)last, (unsigned long long)v);
    }
    return NULL;
}

/* Polls until each worker completed `more` puts beyond base[], or fails. */
static void wait_more(const uint64_t *base, uint64_t more, const char *what)
{
    double t0 = tu_now();
    for (;;) {
        int done = 1;
        for (int w = 0; w < NW; w++)
            done &= atomic_load(&wk[w].ok) >= base[w] + more;
        if (done)
            return;
        CHECK(tu_now() - t0 < WAIT_S, what, "workers' puts after the loss: %llu and %llu "
              "of %llu more in %.0f s (lost %llu, %llu)",
              (unsigned long long)(atomic_load(&wk[0].ok) - base[0]),
              (unsigned long long)(atomic_load(&wk[1].ok) - base[1]), (unsigned long long)more,
              WAIT_S, (unsigned long long)atomic_load(&wk[0].lost),
              (unsigned long long)atomic_load(&wk[1].lost));
        CHECK_OK(fh_poll());
    }
}

static void snap(uint64_t *base)
{
    for (int w = 0; w < NW; w++)
        base[w] = atomic_load(&wk[w].ok);
}

/* The peer's main thread signals through the service paths' connection
 * (made at start-up, never shut down); an AM, not a put into a word we
 * poll, so that nothing is written behind the reader's back. */
static void h_signal(fh_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok;
    (void)buf;
    (void)n;
    CHECK(na == 1, "signal", "1 argument, saw %u", na);
    atomic_fetch_or(&signals, a[0]);
}

static void tell(uint64_t sig)
{
    CHECK_OK(fh_am_request_short(peer, H_SIGNAL, &sig, 1));
}

static void wait_signal(uint64_t sig)
{
    while (!(atomic_load(&signals) & sig))
        CHECK_OK(fh_poll());
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("redial_threads_test");
    CHECK(fh_nranks() == 2, "ranks", "needs 2, has %d", fh_nranks());
    CHECK_OK(fh_am_register(H_SIGNAL, h_signal, "redial_threads signal"));
    me = fh_rank();
    peer = 1 - me;
    fh_seg_t sh;
    void *base;
    CHECK_OK(fh_segment_create(4096, &sh, &base));
    seg = base;
    CHECK_OK(fh_segment_query(sh, peer, &peer_seg, NULL));
    CHECK_OK(fh_barrier());

    int old[MAXFD], nold = tcp_fds(old);
    ino_t old_ino[MAXFD];
    for (int i = 0; i < nold; i++) {
        struct stat st;
        old_ino[i] = fstat(old[i], &st) == 0 ? st.st_ino : 0;
    }
    for (int w = 0; w < NW; w++) {
        wk[w].w = w;
        CHECK(pthread_create(&wk[w].th, NULL, worker, &wk[w]) == 0, "pthread_create", "failed");
    }
    for (int w = 0; w < NW; w++)        /* its path made (the peer polls meanwhile) */
        while (!atomic_load(&wk[w].ready))
            CHECK_OK(fh_poll());
    CHECK_OK(fh_barrier());             /* both ranks' workers connected */

    uint64_t b[NW];
    if (me == 0) {
        int fds[MAXFD], n = tcp_fds(fds), nfresh = 0;
        for (int i = 0; i < n; i++) {
            struct stat st;
            int seen = 0;
            for (int j = 0; fstat(fds[i], &st) == 0 && j < nold; j++)
                seen |= st.st_ino == old_ino[j];
            if (!seen) {
                shutdown(fds[i], SHUT_RDWR);
                nfresh++;
            }
        }
        /* Each worker's path: to both ranks' service paths; the peer's
         * workers' to ours; a loop connection has both ends here. */
        CHECK(nfresh >= 2 * NW, "sockets", "%d fresh TCP sockets shut down, expected >= %d",
              nfresh, 2 * NW);
        printf("rank 0: shut down %d sockets of the workers' connections\n", nfresh);
        snap(b);
        wait_more(b, MIN_AFTER, "rank 0's workers go on");
        tell(SIG_PHASE);
        wait_signal(SIG_STOP);          /* rank 1's workers went on too */
    } else {
        wait_signal(SIG_PHASE);
        snap(b);
        wait_more(b, MIN_AFTER, "rank 1's workers go on");
        tell(SIG_STOP);
    }
    atomic_store(&stop, 1);
    for (int w = 0; w < NW; w++)
        CHECK(pthread_join(wk[w].th, NULL) == 0, "pthread_join", "failed");
    /* Each worker's path lost its link to the peer's service path (and
     * our service path those of the peer's workers): counted per peer. */
    fh_peer_stats_t st = FH_PEER_STATS_INIT;
    CHECK_OK(fh_stats_peer(peer, &st));
    CHECK(st.links_lost >= NW, "links_lost", "fh_stats_peer(%d).links_lost = %llu, expected "
          ">= %d", peer, (unsigned long long)st.links_lost, NW);
    printf("rank %d: %llu links with rank %d lost and counted\n", me,
           (unsigned long long)st.links_lost, peer);
    uint64_t mine[NW], theirs[2 * NW];
    for (int w = 0; w < NW; w++)
        mine[w] = atomic_load(&wk[w].last_ok);
    CHECK_OK(fh_allgather(mine, theirs, sizeof mine));
    CHECK_OK(fh_barrier());             /* every put has landed */
    for (int w = 0; w < NW; w++) {
        uint64_t got = seg[W_DATA + (size_t)peer * NW + (size_t)w];
        CHECK(got == theirs[(size_t)peer * NW + (size_t)w], "data",
              "rank %d worker %d's word: %llu, its last successful put wrote %llu", peer, w,
              (unsigned long long)got, (unsigned long long)theirs[(size_t)peer * NW + (size_t)w]);
        printf("rank %d worker %d: %llu puts, %llu lost with the connection\n", me, w,
               (unsigned long long)atomic_load(&wk[w].ok),
               (unsigned long long)atomic_load(&wk[w].lost));
    }
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_finalize());
    printf("redial_threads_test: PASS\n");
    return 0;
}
