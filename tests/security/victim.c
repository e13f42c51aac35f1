/*
 * victim.c -- the firehose job that tests/security/outsider.sh attacks.
 *
 * What it tests: that a process on the same host which is NOT part of the
 * job (tests/security/outsider.c, usually running as another user) can
 * neither read nor write a rank's segment through the network, nor make a
 * rank run an active-message handler, nor kill a rank with malformed
 * messages.  This program is the target and the judge of what the outsider
 * did to it; it uses the public API (include/firehose.h) only.
 *
 * Run as `fhrun -n 2 victim DIR` (or with SEC_DIR=DIR).  Every rank
 *   1. registers SEC_HANDLER (sec_common.h) whose every call is recorded:
 *      the job itself never sends to it, so any call is a forgery;
 *   2. creates a SEC_SEG_BYTES segment filled with a pattern from a random
 *      seed (sec_pat), checks an honest fh_get of its peer's segment;
 *   3. writes DIR/victim.<rank> ("pid=", "seg=", "len=", "seed=" lines) for
 *      the driver, which hands them to the outsider;
 *   4. polls (fh_poll, 1 ms sleeps) until DIR/done exists (the driver
 *      creates it when the outsider has finished) or SEC_WAIT seconds
 *      (default 120) pass;
 *   5. checks and prints: the segment still holds the pattern (every byte),
 *      no handler ran, an honest fh_get of the peer still returns the
 *      peer's pattern, and every rank reached the final barrier (alive).
 * With SEC_TRAFFIC=1 (tests/security/takeover.sh) the ranks also talk
 * during the attack window, so that an impostor of a rank has something
 * to intercept: every 10 ms each rank sends its peer a ping (SEC_PING,
 * arguments: magic, sequence number), which the peer's handler answers
 * with a pong, and every 50 ms it puts 64 bytes of the peer's own pattern
 * into the peer's segment (so the segment check still holds) and gets 64
 * bytes back, which must be the pattern.  At the end every ping must have
 * arrived exactly once, in order, from the verified peer, every pong too,
 * and every put and get must have succeeded: an AM or RMA that went to an
 * impostor instead shows as a missing ping or pong or a failed operation.
 * Rank 0 prints "PASS sec_victim" only when every check holds on every
 * rank; the exit status is 0 only then.  A check that fails prints
 * "[rank] FAIL <what>: expected ..., saw ...".
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "firehose.h"
#include "sec_common.h"

static int me = -1;
static atomic_int forged_calls;

/* SEC_TRAFFIC: pings received from the peer (in order), pongs received,
 * and anything that did not fit (wrong source, magic or sequence). */
static atomic_uint pings_in, pongs_in, traffic_bad;
static int traffic_peer = -1;

#define SAY(...) do { printf("[%d] ", me); printf(__VA_ARGS__); \
                      fflush(stdout); } while (0)

static void forged_handler(fh_token_t tok, void *buf, size_t nbytes,
                           const uint64_t *args, unsigned nargs)
{
    int src = -1;
    fh_token_source(tok, &src);
    int n = atomic_fetch_add(&forged_calls, 1) + 1;
    if (n <= 20)
        SAY("FORGED AM RAN: handler %u call #%d claims source rank %d, "
            "%u args (arg0=0x%" PRIx64 " arg1=0x%" PRIx64 "), %zu bytes at "
            "%p\n", SEC_HANDLER, n, src, nargs, nargs > 0 ? args[0] : 0,
            nargs > 1 ? args[1] : 0, nbytes, buf);
}

static void ping_handler(fh_token_t tok, void *buf, size_t nbytes,
                         const uint64_t *args, unsigned nargs)
{
    (void)buf; (void)nbytes;
    int src = -1;
    fh_token_source(tok, &src);
    unsigned want = atomic_load(&pings_in);
    if (src != traffic_peer || nargs != 2 || args[0] != SEC_PING_MAGIC ||
        args[1] != want) {
        if (atomic_fetch_add(&traffic_bad, 1) < 10)
            SAY("FAIL ping: expected #%u from rank %d with magic, saw one "
                "from rank %d, %u args, seq %" PRIu64 "\n", want,
                traffic_peer, src, nargs, nargs > 1 ? args[1] : 0);
        return;
    }
    atomic_fetch_add(&pings_in, 1);
    uint64_t a[2] = {SEC_PING_MAGIC, args[1]};
    int rc = fh_am_reply_short(tok, SEC_PONG, a, 2);
    if (rc != FH_OK && atomic_fetch_add(&traffic_bad, 1) < 10)
        SAY("FAIL pong: expected FH_OK, saw %s\n", fh_err_name(rc));
}

static void pong_handler(fh_token_t tok, void *buf, size_t nbytes,
                         const uint64_t *args, unsigned nargs)
{
    (void)buf; (void)nbytes;
    int src = -1;
    fh_token_source(tok, &src);
    if (src != traffic_peer || nargs != 2 || args[0] != SEC_PING_MAGIC) {
        if (atomic_fetch_add(&traffic_bad, 1) < 10)
            SAY("FAIL pong: expected one from rank %d with magic, saw one "
                "from rank %d (%u args)\n", traffic_peer, src, nargs);
        return;
    }
    atomic_fetch_add(&pongs_in, 1);
}

/* One round of SEC_TRAFFIC towards the peer: a ping, and every 5th round
 * a put of the peer's pattern and a get that must return it.  Returns 0
 * on the first failure (printed). */
static int traffic_round(unsigned round, unsigned *pings_out, int peer,
                         uint8_t *peer_base, uint64_t peer_seed)
{
    uint64_t a[2] = {SEC_PING_MAGIC, *pings_out};
    int rc = fh_am_request_short(peer, SEC_PING, a, 2);
    if (rc != FH_OK) {
        SAY("FAIL ping #%u to rank %d: expected FH_OK, saw %s (%s)\n",
            *pings_out, peer, fh_err_name(rc), fh_last_error());
        return 0;
    }
    (*pings_out)++;
    if (round % 5)
        return 1;
    uint8_t out[64], in[64];
    size_t off = ((size_t)round * 64) % (SEC_SEG_BYTES - 64);
    for (size_t k = 0; k < sizeof out; k++)
        out[k] = sec_pat(peer_seed, off + k);
    if ((rc = fh_put(peer, peer_base + off, out, sizeof out)) != FH_OK ||
        (rc = fh_get(in, peer, peer_base + off, sizeof in)) != FH_OK) {
        SAY("FAIL traffic put/get at offset %zu of rank %d: expected FH_OK, "
            "saw %s (%s)\n", off, peer, fh_err_name(rc), fh_last_error());
        return 0;
    }
    if (memcmp(in, out, sizeof in) != 0) {
        SAY("FAIL traffic get at offset %zu of rank %d: expected its "
            "pattern, saw other bytes\n", off, peer);
        return 0;
    }
    return 1;
}

static void die(const char *what, int rc)
{
    SAY("FAIL %s: expected FH_OK, saw %s (%s)\n", what, fh_err_name(rc),
        fh_last_error());
    fh_abort(1, "sec_victim: setup failed");
}

/* Number of bytes of buf[0..len) (segment offsets off..) that differ from
 * the pattern of seed; *first gets the first differing offset. */
static size_t pattern_diff(const uint8_t *buf, size_t off, size_t len,
                           uint64_t seed, size_t *first)
{
    size_t bad = 0;
    for (size_t k = 0; k < len; k++)
        if (buf[k] != sec_pat(seed, off + k)) {
            if (bad++ == 0 && first)
                *first = off + k;
        }
    return bad;
}

static void printable(char *out, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '.';
    out[n] = '\0';
}

/* Honest RMA: get 4 KiB of the peer's segment and compare with its pattern.
 * After the attack a difference is only noted: the peer itself reports
 * whether its segment was changed; here we check that RMA still works. */
static int honest_get(int peer, void *peer_base, uint64_t peer_seed,
                      int after)
{
    const char *when = after ? "after the attack" : "before the attack";
    static uint8_t buf[4096];
    memset(buf, 0, sizeof buf);
    int rc = fh_get(buf, peer, peer_base, sizeof buf);
    if (rc != FH_OK) {
        SAY("FAIL honest fh_get from rank %d %s: expected FH_OK, saw %s "
            "(%s)\n", peer, when, fh_err_name(rc), fh_last_error());
        return 0;
    }
    size_t first = 0;
    size_t bad = pattern_diff(buf, 0, sizeof buf, peer_seed, &first);
    if (bad) {
        SAY("%s honest fh_get from rank %d %s: expected its pattern, saw "
            "%zu differing bytes (first at offset %zu)\n",
            after ? "NOTE" : "FAIL", peer, when, bad, first);
        return after;
    }
    SAY("honest fh_get from rank %d %s: FH_OK, its pattern\n", peer, when);
    return 1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *dir = argc > 1 ? argv[1] : getenv("SEC_DIR");
    if (!dir || !*dir) {
        fprintf(stderr, "usage: fhrun -n 2 victim DIR (or SEC_DIR=DIR)\n");
        return 2;
    }
    double wait_s = 120;
    const char *w = getenv("SEC_WAIT");
    if (w && *w)
        wait_s = atof(w);

    const char *tr = getenv("SEC_TRAFFIC");
    const int traffic = tr && *tr && strcmp(tr, "0") != 0;
    int rc = fh_am_register(SEC_HANDLER, forged_handler, "sec_victim_target");
    if (rc == FH_OK)
        rc = fh_am_register(SEC_PING, ping_handler, "sec_victim_ping");
    if (rc == FH_OK)
        rc = fh_am_register(SEC_PONG, pong_handler, "sec_victim_pong");
    if (rc != FH_OK) {
        fprintf(stderr, "fh_am_register: %s\n", fh_err_name(rc));
        return 1;
    }
    if ((rc = fh_init(&argc, &argv)) != FH_OK) {
        fprintf(stderr, "fh_init: %s (%s)\n", fh_err_name(rc), fh_last_error());
        return 1;
    }
    me = fh_rank();
    const int n = fh_nranks();
    if (n < 2) {
        SAY("FAIL job size: expected at least 2 ranks, saw %d\n", n);
        fh_abort(1, "sec_victim needs 2 ranks");
    }
    const int peer = (me + 1) % n;
    /* Pings go to the next rank and come from the previous one; with 2
     * ranks that is the same rank. */
    traffic_peer = (me + n - 1) % n;

    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        seed = (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
    uint64_t *seeds = calloc((size_t)n, sizeof *seeds);
    if (!seeds)
        fh_abort(1, "out of memory");
    if ((rc = fh_allgather(&seed, seeds, sizeof seed)) != FH_OK)
        die("fh_allgather(seeds)", rc);

    fh_seg_t seg;
    uint8_t *base = NULL;
    if ((rc = fh_segment_create(SEC_SEG_BYTES, &seg, (void **)&base)) != FH_OK)
        die("fh_segment_create", rc);
    for (size_t k = 0; k < SEC_SEG_BYTES; k++)
        base[k] = sec_pat(seed, k);
    void *peer_base = NULL;
    if ((rc = fh_segment_query(seg, peer, &peer_base, NULL)) != FH_OK)
        die("fh_segment_query", rc);
    if ((rc = fh_barrier()) != FH_OK)
        die("fh_barrier (after filling)", rc);
    int ok = honest_get(peer, peer_base, seeds[peer], 0);
    if ((rc = fh_barrier()) != FH_OK)
        die("fh_barrier (after warm-up)", rc);

    /* Tell the driver where we are. */
    char path[4096], tmp[4096];
    snprintf(path, sizeof path, "%s/victim.%d", dir, me);
    snprintf(tmp, sizeof tmp, "%s/.victim.%d.tmp", dir, me);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "rank=%d\npid=%d\nseg=0x%" PRIxPTR "\nlen=%zu\n"
                      "seed=0x%016" PRIx64 "\n", me, (int)getpid(),
                      (uintptr_t)base, SEC_SEG_BYTES, seed) < 0 ||
        fclose(f) != 0 || rename(tmp, path) != 0) {
        SAY("FAIL writing %s\n", path);
        fh_abort(1, "sec_victim: cannot write the info file");
    }
    SAY("ready: pid %d, segment %p (%zu bytes), waiting for %s/done "
        "(at most %.0f s)\n", (int)getpid(), (void *)base, SEC_SEG_BYTES, dir,
        wait_s);

    /* The attack window: keep the progress engine running (a provider with
     * manual progress serves remote reads/writes only while we poll). */
    char done_path[4096];
    snprintf(done_path, sizeof done_path, "%s/done", dir);
    const double t0 = sec_now_s();
    int timed_out = 0, traffic_ok = 1;
    unsigned pings_out = 0, round = 0;
    double next_round = t0;
    for (unsigned it = 0;; it++) {
        fh_poll();
        if (traffic && traffic_ok && sec_now_s() >= next_round) {
            traffic_ok = traffic_round(round++, &pings_out, peer, peer_base,
                                       seeds[peer]);
            next_round += 0.010;
        }
        if ((it & 7) == 0 && access(done_path, F_OK) == 0)
            break;
        if (sec_now_s() - t0 > wait_s) {
            timed_out = 1;
            break;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (timed_out) {
        SAY("FAIL attack window: expected %s within %.0f s, saw none (the "
            "outsider or the driver hung)\n", done_path, wait_s);
        ok = 0;
    }

    /* Judge.  Reaching this barrier means every rank is alive. */
    if ((rc = fh_barrier()) != FH_OK)
        die("fh_barrier (after the attack)", rc);
    SAY("alive after the attack window (%.1f s)\n", sec_now_s() - t0);

    size_t first = 0;
    size_t bad = pattern_diff(base, 0, SEC_SEG_BYTES, seed, &first);
    if (bad) {
        char seen[33];
        size_t m = SEC_SEG_BYTES - first < 32 ? SEC_SEG_BYTES - first : 32;
        printable(seen, base + first, m);
        SAY("FAIL segment integrity: expected all %zu bytes unchanged, saw "
            "%zu changed, first at offset %zu: \"%s\"\n", SEC_SEG_BYTES, bad,
            first, seen);
        ok = 0;
    } else {
        SAY("segment unchanged (%zu bytes)\n", SEC_SEG_BYTES);
    }
    int calls = atomic_load(&forged_calls);
    if (calls) {
        SAY("FAIL forged active messages: expected handler %u never to run, "
            "saw %d calls\n", SEC_HANDLER, calls);
        ok = 0;
    } else {
        SAY("handler %u never ran\n", SEC_HANDLER);
    }
    ok &= honest_get(peer, peer_base, seeds[peer], 1);
    if (traffic) {
        /* Every ping sent must arrive exactly once and be answered. */
        unsigned *outs = calloc((size_t)n, sizeof *outs);
        if (!outs)
            fh_abort(1, "out of memory");
        if ((rc = fh_allgather(&pings_out, outs, sizeof pings_out)) != FH_OK)
            die("fh_allgather(ping counts)", rc);
        unsigned want_in = outs[traffic_peer];
        for (double t1 = sec_now_s(); sec_now_s() - t1 < 5.0 &&
             (atomic_load(&pings_in) < want_in ||
              atomic_load(&pongs_in) < pings_out);)
            fh_poll();
        unsigned in = atomic_load(&pings_in), pongs = atomic_load(&pongs_in);
        unsigned bad = atomic_load(&traffic_bad);
        if (!traffic_ok || in != want_in || pongs != pings_out || bad) {
            SAY("FAIL traffic: expected %u pings from rank %d, %u pongs, "
                "nothing unexpected, every put/get FH_OK; saw %u pings, %u "
                "pongs, %u unexpected, put/get %s\n", want_in, traffic_peer,
                pings_out, in, pongs, bad, traffic_ok ? "ok" : "FAILED");
            ok = 0;
        } else {
            SAY("traffic intact: %u pings in, %u out, %u pongs, %u "
                "put/get rounds\n", in, pings_out, pongs, (round + 4) / 5);
        }
        free(outs);
    }

    if ((rc = fh_barrier()) != FH_OK)
        die("fh_barrier (after the checks)", rc);
    int *oks = calloc((size_t)n, sizeof *oks);
    if (!oks)
        fh_abort(1, "out of memory");
    if ((rc = fh_allgather(&ok, oks, sizeof ok)) != FH_OK)
        die("fh_allgather(verdicts)", rc);
    int all = 1;
    for (int r = 0; r < n; r++)
        all &= oks[r];
    if (me == 0) {
        if (all)
            printf("PASS sec_victim: %d ranks alive, segments unchanged, no "
                   "forged handler call\n", n);
        else
            printf("FAIL sec_victim: at least one rank saw the attack "
                   "succeed (see its FAIL lines)\n");
        fflush(stdout);
    }
    free(oks);
    free(seeds);
    fh_segment_destroy(seg);
    fh_finalize();
    return all ? 0 : 1;
}
