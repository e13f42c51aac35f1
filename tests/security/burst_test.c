/*
 * burst_test.c -- a member that ignores flow control cannot kill a correct
 * rank (issue 29, class 8; docs/security.md): what it sends beyond the
 * receive space is dropped and reported, and the receiver keeps serving
 * its other peers.
 *
 * Three ranks: 0 bursts, 1 is the target, 2 is an honest peer.  Rank 1
 * stops polling (it sleeps) while rank 0 sends --msgs short and medium
 * requests (default 20,000; every other one medium, of --bytes) straight to the
 * target's service path through its real endpoint, as a broken or hostile
 * member could: every one with credits = 0 and no regard for the target's
 * credits.  Meanwhile rank 2 sends 50 requests the honest way (they block
 * for credits until rank 1 polls again).  Then rank 1 polls: its handler
 * may see any number of rank 0's requests (those the receive space held),
 * but every one of rank 2's, in order, and the job goes on: a barrier, a
 * put/get round trip and an AM from every rank.  Rank 1 prints its
 * handled and dropped counts (am_dropped for rank 0).
 *
 * Usage: burst_test [--msgs N] [--bytes B]
 */
#include "tests/integ/testutil.h"

#include <sched.h>
#include <stdbool.h>
#include <unistd.h>

#include "firehose/am_wire.h"
#include "firehose/internal.h"

#define H_REQ  FH_AM_USER_FIRST
#define H_PING (FH_AM_USER_FIRST + 1)
#define HONEST 50

static _Atomic long from_burst, from_honest, pings;
static _Atomic long honest_next, honest_bad;

static void req_handler(fh_token_t tok, void *buf, size_t n, const uint64_t *a,
                        unsigned na)
{
    (void)buf; (void)n;
    int src = -1;
    fh_token_source(tok, &src);
    if (src == 0) {
        atomic_fetch_add(&from_burst, 1);
    } else if (src == 2) {
        if (na != 1 || (long)a[0] != atomic_load(&honest_next))
            atomic_fetch_add(&honest_bad, 1);
        atomic_fetch_add(&honest_next, 1);
        atomic_fetch_add(&from_honest, 1);
    }
}

static void ping_handler(fh_token_t tok, void *buf, size_t n, const uint64_t *a,
                         unsigned na)
{
    (void)tok; (void)buf; (void)n; (void)a; (void)na;
    atomic_fetch_add(&pings, 1);
}

/* One request to rank 1's service path with a hand-made header and no
 * credit taken (the conduit's own send; waits only for transmit space). */
static bool send_raw(fh_path_t *p, const fh_am_msg_t *m, const void *payload, size_t len)
{
    unsigned char hdr[FH_AM_HDR_BYTES + 8 * FH_AM_MAX_ARGS];
    size_t hl = fh_am_encode(m, hdr, sizeof hdr);
    CHECK(hl > 0, "encode", "a header");
    for (double t0 = tu_now();;) {
        pthread_mutex_lock(&p->lock);
        int rc = fh_rt->cops->am_send(p->cp, 1, 0, hdr, hl, payload, len);
        if (rc == FH_ERR_AGAIN)
            fh_path_poll_locked(p);
        pthread_mutex_unlock(&p->lock);
        if (rc == FH_OK)
            return true;
        /* The target may refuse or close what it cannot take: a sender
         * that cannot send any more for a while has done its worst. */
        if (rc != FH_ERR_AGAIN || tu_now() - t0 > 3.0)
            return false;
        sched_yield();
    }
}

int main(int argc, char **argv)
{
    CHECK_RC(fh_init(&argc, &argv), FH_OK);
    tu_init_rank("burst_test");
    int me = fh_rank(), N = fh_nranks();
    CHECK(N == 3, "job size", "3 ranks, saw %d", N);
    long msgs = tu_opt(argc, argv, "--msgs", 20000);
    size_t bytes = (size_t)tu_opt(argc, argv, "--bytes", 256);
    if (bytes > fh_am_max_medium())
        bytes = fh_am_max_medium();
    CHECK_RC(fh_am_register(H_REQ, req_handler, "req"), FH_OK);
    CHECK_RC(fh_am_register(H_PING, ping_handler, "ping"), FH_OK);
    fh_seg_t seg;
    uint64_t *mine;
    CHECK_RC(fh_segment_create(4096, &seg, (void **)&mine), FH_OK);
    mine[0] = 0x1000u + (uint64_t)me;
    CHECK_RC(fh_barrier(), FH_OK);

    if (me == 1) {
        sleep(2);                           /* no polling: the burst piles up */
    } else if (me == 0) {
        char *pay = calloc(1, bytes);
        CHECK(pay != NULL, "calloc", "memory");
        fh_path_t *p = fh_tls()->path;
        for (long i = 0; i < msgs; i++) {
            fh_am_msg_t m = {.kind = (i & 1) ? FH_AM_REQ_MEDIUM : FH_AM_REQ_SHORT,
                             .handler = H_REQ, .nargs = 1, .src_rank = 0,
                             .src_path = (uint16_t)p->index, .credits = 0,
                             .payload_len = (i & 1) ? (uint32_t)bytes : 0};
            m.args[0] = (uint64_t)i;
            if (!send_raw(p, &m, (i & 1) ? pay : NULL, (i & 1) ? bytes : 0)) {
                TU_LOG("burst: the target took no more after %ld requests\n", i);
                break;
            }
            if (i + 1 == msgs)
                TU_LOG("burst: %ld requests sent without credits\n", msgs);
        }
        free(pay);
    } else {
        for (long i = 0; i < HONEST; i++) {
            uint64_t a = (uint64_t)i;
            CHECK_RC(fh_am_request_short(1, H_REQ, &a, 1), FH_OK);
        }
    }

    /* The job goes on: every rank's honest traffic gets through. */
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 1) {
        for (int spins = 0; atomic_load(&from_honest) < HONEST && spins < 200000; spins++)
            CHECK_RC(fh_poll(), FH_OK);
        CHECK(atomic_load(&from_honest) == HONEST && atomic_load(&honest_bad) == 0,
              "honest peer", "%d requests from rank 2 in order, saw %ld (%ld out of order)",
              HONEST, atomic_load(&from_honest), atomic_load(&honest_bad));
    }
    uint64_t got = 0, *there;
    int peer = (me + 1) % N;
    CHECK_RC(fh_segment_query(seg, peer, (void **)&there, NULL), FH_OK);
    CHECK_RC(fh_put(peer, &there[8], &mine[0], 8), FH_OK);
    CHECK_RC(fh_get(&got, peer, there, 8), FH_OK);
    CHECK(got == 0x1000u + (uint64_t)peer, "get", "rank %d's word, saw %#llx", peer,
          (unsigned long long)got);
    CHECK_RC(fh_am_request_short(peer, H_PING, NULL, 0), FH_OK);
    CHECK_RC(fh_barrier(), FH_OK);
    for (int spins = 0; atomic_load(&pings) < 1 && spins < 200000; spins++)
        CHECK_RC(fh_poll(), FH_OK);
    CHECK(atomic_load(&pings) == 1, "ping", "one ping from rank %d, saw %ld", (me + N - 1) % N,
          atomic_load(&pings));
    CHECK_RC(fh_barrier(), FH_OK);
    if (me == 1) {
        fh_peer_stats_t st = FH_PEER_STATS_INIT;
        CHECK_RC(fh_stats_peer(0, &st), FH_OK);
        TU_LOG("TARGET handled %ld of the burst, dropped %llu\n", atomic_load(&from_burst),
               (unsigned long long)st.am_dropped);
    }
    TU_SAY("PASS burst_test\n");
    CHECK_RC(fh_segment_destroy(seg), FH_OK);
    CHECK_RC(fh_finalize(), FH_OK);
    return 0;
}
