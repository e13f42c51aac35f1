/*
 * destroyed_seg_test.c -- issue 29, class 3: transfers from and into a
 * segment that its owner destroys meanwhile end, and both ranks live on.
 *
 * Destroying a segment while a peer still transfers to or from it breaks
 * fh_segment_destroy's contract ("every rank must have completed its
 * operations targeting the segment"), but a careless program does it, and
 * docs/reliability.md promises that it costs an error, never a hang or a
 * crash: under pin-everything the piece's key is deregistered before its
 * memory is unmapped, so a transfer that reaches the target afterwards
 * fails at the provider (which may close the connection: the pair is
 * connected again) or ends by FH_OFI_RMA_TIMEOUT; under firehose the
 * destroy revokes the holders' firehoses first; the rendezvous and bounce
 * strategies' targets check the range.
 *
 * Both ranks: a worker thread keeps reading (fh_get_nb + fh_wait) the
 * first half of the peer's piece, which holds a known pattern, and
 * writing (fh_put_nb + fh_wait) its second half, 8 B, 64 KiB and 1 MiB in
 * turn, while the main threads destroy the segment.  Checked:
 *   - every call returns FH_OK or one of FH_ERR_OUT_OF_SEGMENT,
 *     FH_ERR_TRANSPORT, FH_ERR_PEER_DEAD, with fh_last_error() naming the
 *     peer's rank when it fails;
 *   - a get that returned FH_OK brought the pattern (never memory mapped
 *     there later, never stale garbage);
 *   - once fh_segment_destroy returned on the caller's rank, each further
 *     transfer to the old piece is refused at once (FH_ERR_OUT_OF_SEGMENT);
 *   - afterwards a new segment works between the ranks from the main
 *     thread and from a new thread (the pair was connected again if a
 *     connection was lost), and the job finishes (barrier, fh_finalize).
 * The longest single transfer is printed (no timed assertion: a hang is
 * what fhrun's --timeout catches).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "../integ/testutil.h"

#define PIECE (4u << 20)           /* first half: read; second half: written */
#define HALF (PIECE / 2)
#define MIN_BEFORE 60              /* transfers each worker makes before the destroy */
#define AFTER 12                   /* and after it returned on its rank */

static const size_t sizes[] = {8, 65536, 1 << 20};

typedef struct worker {
    int peer;
    char *remote;                  /* the peer's piece of the doomed segment */
    char *buf;                     /* our own memory, registered by use */
    uint64_t key;                  /* the pattern's key */
    atomic_long done;              /* transfers so far */
    atomic_int destroyed;          /* set by main once destroy returned here */
    long n_ok, n_refused, n_lost;  /* by outcome */
    long after;                    /* transfers started after `destroyed` */
    double longest;                /* seconds */
} worker_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One transfer, waited for; returns its status after checking it. */
static int one(worker_t *w, long i)
{
    size_t n = sizes[i % 3];
    int is_get = (i / 3) % 2 == 0;
    size_t off = (size_t)(i * 4096) % (HALF - n);
    int after = atomic_load(&w->destroyed);
    fh_handle_t h;
    double t0 = now_s();
    int rc = is_get ? fh_get_nb(w->buf, w->peer, w->remote + off, n, &h)
                    : fh_put_nb(w->peer, w->remote + HALF + off, w->buf, n, &h);
    if (rc == FH_OK)
        rc = fh_wait(h);
    double dt = now_s() - t0;
    if (dt > w->longest)
        w->longest = dt;
    const char *op = is_get ? "get from" : "put to";
    if (rc != FH_OK && rc != FH_ERR_OUT_OF_SEGMENT && rc != FH_ERR_TRANSPORT &&
        rc != FH_ERR_PEER_DEAD)
        tu_fail("%s rank %d, %zu B at +%zu: %s (%s)", op, w->peer, n, off, tu_errname(rc),
                fh_last_error());
    if (rc != FH_OK) {
        char want[32];
        snprintf(want, sizeof want, "rank %d", w->peer);
        if (strstr(fh_last_error(), want) == NULL)
            tu_fail("%s rank %d failed (%s) without naming the rank: \"%s\"", op, w->peer,
                    tu_errname(rc), fh_last_error());
    }
    if (after && rc != FH_ERR_OUT_OF_SEGMENT)
        tu_fail("%s rank %d's destroyed piece after fh_segment_destroy returned: %s, "
                "expected FH_ERR_OUT_OF_SEGMENT (%s)", op, w->peer, tu_errname(rc),
                fh_last_error());
    if (rc == FH_OK && is_get && tu_check(w->buf, n, w->key, off) != (size_t)-1)
        tu_fail("a get of %zu B at +%zu from rank %d returned FH_OK with bytes that are "
                "not the piece's", n, off, w->peer);
    w->after += after;
    if (rc == FH_OK)
        w->n_ok++;
    else if (rc == FH_ERR_OUT_OF_SEGMENT)
        w->n_refused++;
    else
        w->n_lost++;
    return rc;
}

static void *work(void *arg)
{
    worker_t *w = arg;
    for (long i = 0; w->after < AFTER; i++) {
        one(w, i);
        atomic_store(&w->done, i + 1);
    }
    return NULL;
}

/* A round trip through a new segment, from the calling thread. */
static void *fresh(void *arg)
{
    int peer = *(int *)arg;
    fh_seg_t s;
    void *mine, *theirs;
    CHECK_RC(fh_segment_create(1 << 20, &s, &mine), FH_OK);
    CHECK_RC(fh_segment_query(s, peer, &theirs, NULL), FH_OK);
    tu_round_trip(peer, (uint8_t *)theirs);
    CHECK_RC(fh_barrier(), FH_OK);
    CHECK_RC(fh_segment_destroy(s), FH_OK);
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK_RC(fh_init(&argc, &argv), FH_OK);
    tu_init_rank("destroyed_seg_test");
    CHECK(fh_nranks() == 2, "ranks", "2, saw %d", fh_nranks());
    int me = fh_rank(), peer = 1 - me;
    fh_seg_t seg;
    void *mine;
    worker_t w = {.peer = peer};
    CHECK_RC(fh_segment_create(PIECE, &seg, &mine), FH_OK);
    CHECK_RC(fh_segment_query(seg, peer, (void **)&w.remote, NULL), FH_OK);
    tu_fill(mine, HALF, tu_key((uint64_t)me, 29, 3), 0);
    w.key = tu_key((uint64_t)peer, 29, 3);
    w.buf = malloc(1 << 20);
    CHECK(w.buf != NULL, "malloc", "a buffer, saw NULL");
    memset(w.buf, 0x5a, 1 << 20);
    CHECK_RC(fh_barrier(), FH_OK);          /* both patterns in place */

    pthread_t t;
    CHECK(pthread_create(&t, NULL, work, &w) == 0, "pthread_create", "0");
    while (atomic_load(&w.done) < MIN_BEFORE)
        CHECK_RC(fh_poll(), FH_OK);
    CHECK_RC(fh_segment_destroy(seg), FH_OK);
    atomic_store(&w.destroyed, 1);
    CHECK(pthread_join(t, NULL) == 0, "pthread_join", "0");
    TU_LOG("worker: %ld transfers: %ld ok, %ld refused, %ld failed on a lost connection; "
           "longest %.3f s\n", atomic_load(&w.done), w.n_ok, w.n_refused, w.n_lost,
           w.longest);

    /* The pair still works: from the main thread and from a new one. */
    fresh(&peer);
    CHECK(pthread_create(&t, NULL, fresh, &peer) == 0, "pthread_create", "0");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join", "0");
    CHECK_RC(fh_barrier(), FH_OK);
    TU_SAY("PASS destroyed_seg_test\n");
    free(w.buf);
    CHECK_RC(fh_finalize(), FH_OK);
    return 0;
}
