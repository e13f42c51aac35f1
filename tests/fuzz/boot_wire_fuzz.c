/*
 * boot_wire_fuzz.c -- libFuzzer target for the bootstrap wire protocol
 * (bootstrap.h): the decoders of firehose/boot/boot_decode.h, which the
 * rank (boot_fhrun.c) and the launcher (tools/launcher/) call on every byte
 * their bootstrap sockets receive.
 *
 * The first byte picks what is fuzzed:
 *   0  the launcher reading a rank's requests (ALLGATHER, ABORT, FINALIZE,
 *      INITFAIL, anything else), for a job of 1..4096 ranks;
 *   1  a rank reading the launcher's messages (ALLGATHER results of the
 *      length the rank expects, or one it did not ask for; DEAD);
 *   2  the handshake: a hello and a proof as the launcher reads them (the
 *      proof signed with the job key or forged, any rank), a challenge
 *      word and an accept as the rank reads them.
 * A stream is fed in pieces of 1..64 bytes (sizes from the input's tail),
 * as reads return them.  Checked after every step: a message is one the
 * direction allows, its length within that type's limit (checked as soon
 * as a payload is allocated, before its bytes arrive), its payload readable
 * and NUL-terminated; after an error the decoder wants nothing more; the
 * handshake decoders agree with a direct computation.  A violation aborts.
 *
 * The launcher's limit on a contribution is MAX_RESULT / nranks; here
 * FUZZ_MAX_RESULT (16 MiB) stands for MAX_RESULT (1 GiB), so that an
 * accepted length is never more than libFuzzer lets one malloc take.
 *
 * BOOT_FUZZ_STATS=1 prints, at exit, how often each outcome was seen (to
 * check that every message type and every check is reached).
 *
 *   clang -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -I. \
 *         tests/fuzz/boot_wire_fuzz.c -lcrypto -o boot_wire_fuzz
 *   ./boot_wire_fuzz -max_total_time=30
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "firehose/boot/boot_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_RESULT ((size_t)1 << 24)
#define FUZZ_MAX_RANKS  4096u

#define CHECK(c)                                                           \
    do {                                                                   \
        if (!(c)) {                                                        \
            fprintf(stderr, "boot_wire_fuzz: %s:%d: %s\n", __FILE__,       \
                    __LINE__, #c);                                         \
            abort();                                                       \
        }                                                                  \
    } while (0)

/* ---- outcome counters (BOOT_FUZZ_STATS) ----------------------------------- */

enum {
    ST_LAUNCHER_AG, ST_LAUNCHER_ABORT, ST_LAUNCHER_FIN, ST_LAUNCHER_FAIL,
    ST_LAUNCHER_BAD_OP, ST_LAUNCHER_BAD_AGLEN, ST_LAUNCHER_BAD_MSGLEN,
    ST_RANK_AG, ST_RANK_AG0, ST_RANK_DEAD, ST_RANK_DEAD_PID,
    ST_RANK_BAD_TYPE, ST_RANK_BAD_UNASKED, ST_RANK_BAD_MSGLEN,
    ST_HELLO_OK, ST_HELLO_BAD, ST_CH_OK, ST_CH_REFUSED, ST_CH_OTHER,
    ST_PROOF_OK, ST_PROOF_KEY, ST_PROOF_RANK, ST_ACC_OK, ST_ACC_BAD, ST_N
};
static const char *const st_name[ST_N] = {
    "launcher: allgather", "launcher: abort", "launcher: finalize",
    "launcher: initfail", "launcher: bad op", "launcher: allgather too long",
    "launcher: abort/initfail text too long", "rank: allgather result",
    "rank: barrier result", "rank: dead", "rank: dead with pid",
    "rank: bad type", "rank: result not asked for", "rank: dead text too long",
    "hello ok", "hello bad magic", "challenge", "challenge: refusal",
    "challenge: not a launcher", "proof ok", "proof: bad MAC",
    "proof: rank out of range", "accept ok", "accept refused/forged",
};
static unsigned long stats[ST_N];

static void print_stats(void)
{
    for (int i = 0; i < ST_N; i++)
        fprintf(stderr, "boot_wire_fuzz: %-40s %lu\n", st_name[i], stats[i]);
}

/* ---- input --------------------------------------------------------------- */

typedef struct in {
    const uint8_t *p;
    size_t n, at, tail;  /* bytes from the front; piece sizes from the back */
} in_t;

static uint8_t u8(in_t *in)
{
    return in->at < in->tail ? in->p[in->at++] : 0;
}

static uint32_t u32(in_t *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)u8(in) << (8 * i);
    return v;
}

static size_t piece(in_t *in)
{
    if (in->tail > in->at)
        return 1 + in->p[--in->tail] % 64;
    return 64;
}

/* ---- the stream ------------------------------------------------------------ */

static const uint8_t job_key[FH_KEY_BYTES] = "boot_wire_fuzz job key, 32 B...";

/* The limit on the payload rx has allocated (for the message being read). */
static size_t payload_limit(const fh_boot_rx_t *rx, long long expect)
{
    switch (rx->type) {
    case FH_BOOT_OP_ALLGATHER:
        return rx->max_payload;
    case FH_BOOT_MSG_ALLGATHER:
        return expect < 0 ? 0 : (size_t)expect;
    case FH_BOOT_OP_FINALIZE:
        return 0;
    default:
        return FH_BOOT_MAX_MSG;
    }
}

static void check_msg(const fh_boot_rx_t *rx, long long expect)
{
    int launcher = !rx->from_launcher;
    if (launcher)
        CHECK(rx->type == FH_BOOT_OP_ALLGATHER || rx->type == FH_BOOT_OP_ABORT ||
              rx->type == FH_BOOT_OP_FINALIZE || rx->type == FH_BOOT_OP_INITFAIL);
    else
        CHECK(rx->type == FH_BOOT_MSG_ALLGATHER || rx->type == FH_BOOT_MSG_DEAD);
    CHECK(rx->len <= payload_limit(rx, expect));
    if (rx->type == FH_BOOT_MSG_ALLGATHER)
        CHECK(rx->len == (size_t)expect);
    if (rx->type == FH_BOOT_OP_FINALIZE) {
        CHECK(rx->len == 0 && rx->payload == NULL);
        stats[ST_LAUNCHER_FIN]++;
        return;
    }
    CHECK(rx->payload != NULL);
    unsigned sum = 0;
    for (size_t i = 0; i < rx->len; i++)
        sum += rx->payload[i];
    CHECK(rx->payload[rx->len] == '\0');
    (void)sum;
    if (rx->type == FH_BOOT_MSG_DEAD) {
        long pid;
        const char *why, *msg = (const char *)rx->payload;
        fh_boot_dead_text(msg, &pid, &why);
        CHECK(why >= msg && why <= msg + strlen(msg));
        stats[pid >= 0 ? ST_RANK_DEAD_PID : ST_RANK_DEAD]++;
    } else if (rx->type == FH_BOOT_MSG_ALLGATHER) {
        stats[rx->len ? ST_RANK_AG : ST_RANK_AG0]++;
    } else {
        stats[rx->type == FH_BOOT_OP_ALLGATHER ? ST_LAUNCHER_AG
              : rx->type == FH_BOOT_OP_ABORT   ? ST_LAUNCHER_ABORT
                                               : ST_LAUNCHER_FAIL]++;
    }
}

static void count_bad(const fh_boot_rx_t *rx)
{
    CHECK(rx->err[0] != '\0');
    CHECK(rx->payload == NULL);
    if (!rx->from_launcher)
        stats[rx->type == 0 ? ST_LAUNCHER_BAD_OP
              : rx->type == FH_BOOT_OP_ALLGATHER ? ST_LAUNCHER_BAD_AGLEN
                                                 : ST_LAUNCHER_BAD_MSGLEN]++;
    else
        stats[rx->type == 0 ? ST_RANK_BAD_TYPE
              : rx->type == FH_BOOT_MSG_ALLGATHER ? ST_RANK_BAD_UNASKED
                                                  : ST_RANK_BAD_MSGLEN]++;
}

/* Feeds the rest of the input to a decoder, as reads would. */
static void fuzz_stream(in_t *in, int from_launcher)
{
    fh_boot_rx_t rx;
    size_t max_payload = 0;
    long long expect = -1;
    if (!from_launcher) {
        uint32_t nranks = 1 + (u8(in) | (uint32_t)u8(in) << 8) % FUZZ_MAX_RANKS;
        max_payload = FUZZ_MAX_RESULT / nranks;
    } else {
        uint8_t e = u8(in);
        uint32_t v = u32(in);
        /* Mostly a request pending, of the sizes a rank asks for. */
        expect = e % 4 == 0 ? -1 : e % 4 == 1 ? 0 : (long long)(v % 4096);
    }
    fh_boot_rx_init(&rx, from_launcher, max_payload);
    for (int steps = 0; steps < 4096; steps++) {
        unsigned char *dst;
        size_t want = fh_boot_rx_space(&rx, &dst);
        CHECK(want > 0);
        size_t n = piece(in);
        if (n > want)
            n = want;
        if (n > in->tail - in->at)
            n = in->tail - in->at;
        if (n == 0)
            break;                   /* EOF: the socket code closes */
        memcpy(dst, in->p + in->at, n);
        in->at += n;
        int what = fh_boot_rx_got(&rx, n);
        if (what == FH_BOOT_RX_LEN) {
            CHECK(from_launcher && rx.type == FH_BOOT_MSG_ALLGATHER);
            what = fh_boot_rx_expect(&rx, expect);
        }
        if (rx.payload != NULL)
            CHECK(rx.len <= payload_limit(&rx, expect));
        if (what == FH_BOOT_RX_BAD) {
            count_bad(&rx);
            CHECK(fh_boot_rx_space(&rx, &dst) == 0);
            break;
        }
        CHECK(what == FH_BOOT_RX_MORE || what == FH_BOOT_RX_MSG);
        if (what == FH_BOOT_RX_MSG)
            check_msg(&rx, expect);
    }
    fh_boot_rx_free(&rx);
}

/* ---- the handshake ---------------------------------------------------------- */

static void fill(in_t *in, unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = u8(in);
}

static void fuzz_handshake(in_t *in)
{
    unsigned char hello[FH_BOOT_HELLO_BYTES], nonce_r[FH_BOOT_NONCE_BYTES];
    unsigned char nonce_l[FH_BOOT_NONCE_BYTES];
    fill(in, hello, sizeof hello);
    if (u8(in) & 1)
        fh_put_u32(hello, FH_BOOT_MAGIC);
    memset(nonce_r, 0xa5, sizeof nonce_r);
    uint32_t h = fh_boot_hello_decode(hello, nonce_r);
    CHECK(h == (fh_get_u32(hello) == FH_BOOT_MAGIC ? 0 : FH_BOOT_REFUSED_KEY));
    if (h == 0)
        CHECK(memcmp(nonce_r, hello + 4, FH_BOOT_NONCE_BYTES) == 0);
    stats[h ? ST_HELLO_BAD : ST_HELLO_OK]++;

    /* The challenge word, as the rank reads it. */
    unsigned char w[4];
    fill(in, w, 4);
    uint8_t pick = u8(in);
    if (pick % 3 == 0)
        fh_put_u32(w, pick % 2 ? FH_BOOT_MAGIC : 1 + pick / 3 % 4);
    uint32_t c = fh_boot_challenge_word(w), v = fh_get_u32(w);
    CHECK(c == (v == FH_BOOT_MAGIC ? 0 : v >= 1 && v <= 3 ? v : UINT32_MAX));
    stats[c == 0 ? ST_CH_OK : c == UINT32_MAX ? ST_CH_OTHER : ST_CH_REFUSED]++;

    /* The proof, as the launcher reads it: signed (maybe with one bit
     * flipped) or raw. */
    fill(in, nonce_l, sizeof nonce_l);
    uint32_t nranks = 1 + (u8(in) | (uint32_t)u8(in) << 8) % FUZZ_MAX_RANKS;
    unsigned char pr[FH_BOOT_PROOF_BYTES];
    fill(in, pr, sizeof pr);
    uint8_t how = u8(in);
    uint32_t rn = fh_get_u32(pr), pid = fh_get_u32(pr + 4);
    if (how % 4 != 0) {
        rn = how % 4 == 1 ? rn % (nranks + 2) : rn;
        fh_put_u32(pr, rn);
        CHECK(fh_boot_mac(job_key, FH_BOOT_LABEL_RANK, nonce_r, nonce_l, rn,
                          pid, pr + 8) == 0);
        if (how % 8 == 3) {
            uint8_t bit = u8(in);
            pr[bit % sizeof pr] ^= (uint8_t)(1u << (bit % 8));
        }
    }
    unsigned char want[FH_BOOT_MAC_BYTES], mine[FH_BOOT_MAC_BYTES];
    uint32_t r_rn = UINT32_MAX, r_pid = UINT32_MAX;
    uint32_t st = fh_boot_proof_check(pr, job_key, nonce_r, nonce_l, nranks,
                                      &r_rn, &r_pid, mine);
    rn = fh_get_u32(pr);
    pid = fh_get_u32(pr + 4);
    CHECK(fh_boot_mac(job_key, FH_BOOT_LABEL_RANK, nonce_r, nonce_l, rn, pid,
                      want) == 0);
    int mac_ok = memcmp(want, pr + 8, FH_BOOT_MAC_BYTES) == 0;
    if (!mac_ok) {
        CHECK(st == FH_BOOT_REFUSED_KEY);
        CHECK(r_rn == UINT32_MAX && r_pid == UINT32_MAX);  /* not acted on */
        stats[ST_PROOF_KEY]++;
    } else if (rn >= nranks) {
        CHECK(st == FH_BOOT_REFUSED_RANK && r_rn == rn);
        stats[ST_PROOF_RANK]++;
    } else {
        CHECK(st == 0 && r_rn == rn && r_pid == pid);
        CHECK(fh_boot_mac(job_key, FH_BOOT_LABEL_LAUNCHER, nonce_r, nonce_l,
                          rn, pid, want) == 0);
        CHECK(memcmp(want, mine, FH_BOOT_MAC_BYTES) == 0);
        stats[ST_PROOF_OK]++;
    }

    /* The accept, as the rank reads it: ours (maybe altered) or raw. */
    unsigned char acc[FH_BOOT_ACCEPT_BYTES];
    fill(in, acc, sizeof acc);
    how = u8(in);
    CHECK(fh_boot_mac(job_key, FH_BOOT_LABEL_LAUNCHER, nonce_r, nonce_l, rn,
                      pid, want) == 0);
    if (how % 2) {
        fh_put_u32(acc, how % 4 == 1 ? 0 : fh_get_u32(acc));
        memcpy(acc + 4, want, FH_BOOT_MAC_BYTES);
        if (how % 8 == 5)
            acc[4 + u8(in) % FH_BOOT_MAC_BYTES] ^= 1;
    }
    int ok = fh_boot_accept_check(acc, want);
    CHECK(ok == (fh_get_u32(acc) == 0 &&
                 memcmp(acc + 4, want, FH_BOOT_MAC_BYTES) == 0));
    stats[ok ? ST_ACC_OK : ST_ACC_BAD]++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    if (!once) {
        once = 1;
        const char *s = getenv("BOOT_FUZZ_STATS");
        if (s != NULL && *s && *s != '0')
            atexit(print_stats);
    }
    if (size < 1)
        return 0;
    in_t in = {.p = data + 1, .n = size - 1, .at = 0, .tail = size - 1};
    switch (data[0] % 3) {
    case 0:
        fuzz_stream(&in, 0);
        break;
    case 1:
        fuzz_stream(&in, 1);
        break;
    default:
        fuzz_handshake(&in);
        break;
    }
    return 0;
}
