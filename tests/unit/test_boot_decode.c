/*
 * test_boot_decode.c -- the bootstrap stream decoder (firehose/boot/
 * boot_decode.h): every message of both directions decoded whole and fed
 * a byte at a time, and each check that ends a stream (unknown type,
 * lengths over their limits, a result nobody asked for).  The fuzz target
 * tests/fuzz/boot_wire_fuzz.c tries the same functions with random bytes;
 * what it found is pinned here.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "firehose/boot/boot_decode.h"
#include "check_main.h"

/* Feeds len bytes to rx, at most step at a time.  Returns the last result;
 * *used: bytes taken (stops at a message or an error). */
static int feed(fh_boot_rx_t *rx, const unsigned char *b, size_t len,
                size_t step, long long expect, size_t *used)
{
    size_t at = 0;
    int what = FH_BOOT_RX_MORE;
    while (at < len) {
        unsigned char *dst;
        size_t want = fh_boot_rx_space(rx, &dst);
        ck_assert_uint_gt(want, 0);
        size_t n = len - at < want ? len - at : want;
        n = n < step ? n : step;
        memcpy(dst, b + at, n);
        at += n;
        what = fh_boot_rx_got(rx, n);
        if (what == FH_BOOT_RX_LEN)
            what = fh_boot_rx_expect(rx, expect);
        if (what != FH_BOOT_RX_MORE)
            break;
    }
    *used = at;
    return what;
}

static size_t req(unsigned char *b, uint32_t op, uint32_t a, const char *text)
{
    size_t n = 0, tl = text ? strlen(text) : 0;
    fh_put_u32(b, op);
    n = 4;
    if (op == FH_BOOT_OP_ALLGATHER) {
        fh_put_u32(b + 4, (uint32_t)tl);
        n = 8;
    } else if (op == FH_BOOT_OP_ABORT || op == FH_BOOT_OP_INITFAIL) {
        fh_put_u32(b + 4, a);
        fh_put_u32(b + 8, (uint32_t)tl);
        n = 12;
    }
    memcpy(b + n, text ? text : "", tl);
    return n + tl;
}

START_TEST(every_request)
{
    static const uint32_t ops[] = {FH_BOOT_OP_ALLGATHER, FH_BOOT_OP_ABORT,
                                   FH_BOOT_OP_FINALIZE, FH_BOOT_OP_INITFAIL};
    for (size_t step = 1; step <= 64; step += 63)
        for (size_t i = 0; i < 4; i++) {
            unsigned char b[64];
            const char *t = ops[i] == FH_BOOT_OP_FINALIZE ? NULL : "hello";
            size_t n = req(b, ops[i], 7, t), used;
            fh_boot_rx_t rx;
            fh_boot_rx_init(&rx, 0, 16);
            ck_assert_int_eq(feed(&rx, b, n, step, -1, &used), FH_BOOT_RX_MSG);
            ck_assert_uint_eq(used, n);
            ck_assert_uint_eq(rx.type, ops[i]);
            if (t) {
                ck_assert_uint_eq(rx.len, 5);
                ck_assert_str_eq((char *)rx.payload, "hello");
            }
            if (ops[i] == FH_BOOT_OP_ABORT || ops[i] == FH_BOOT_OP_INITFAIL)
                ck_assert_uint_eq(rx.a, 7);
            fh_boot_rx_free(&rx);
        }
}
END_TEST

START_TEST(every_message)
{
    unsigned char b[64];
    fh_boot_rx_t rx;
    size_t used;
    /* An allgather result of the length the rank expects, then a barrier. */
    fh_put_u32(b, FH_BOOT_MSG_ALLGATHER);
    memcpy(b + 4, "abc", 3);
    fh_put_u32(b + 7, FH_BOOT_MSG_ALLGATHER);
    fh_boot_rx_init(&rx, 1, 0);
    ck_assert_int_eq(feed(&rx, b, 11, 1, 3, &used), FH_BOOT_RX_MSG);
    ck_assert_uint_eq(used, 7);
    ck_assert_str_eq((char *)rx.payload, "abc");
    unsigned char *mine = fh_boot_rx_take(&rx);
    ck_assert_int_eq(feed(&rx, b + 7, 4, 4, 0, &used), FH_BOOT_RX_MSG);
    ck_assert_uint_eq(rx.len, 0);
    free(mine);
    /* DEAD, with and without a pid. */
    fh_put_u32(b, FH_BOOT_MSG_DEAD);
    fh_put_u32(b + 4, 2);
    fh_put_u32(b + 8, 137);
    fh_put_u32(b + 12, 8);
    memcpy(b + 16, "42 boom!", 8);
    ck_assert_int_eq(feed(&rx, b, 24, 5, -1, &used), FH_BOOT_RX_MSG);
    ck_assert_uint_eq(rx.a, 2);
    ck_assert_uint_eq(rx.b, 137);
    long pid;
    const char *why;
    fh_boot_dead_text((char *)rx.payload, &pid, &why);
    ck_assert_int_eq(pid, 42);
    ck_assert_str_eq(why, "boom!");
    fh_boot_dead_text("no pid", &pid, &why);
    ck_assert_int_eq(pid, -1);
    ck_assert_str_eq(why, "no pid");
    fh_boot_rx_free(&rx);
}
END_TEST

/* A bad stream: the error, the type being read, and nothing more wanted. */
static void bad(int from_launcher, const unsigned char *b, size_t n,
                long long expect, uint32_t type, const char *err)
{
    for (size_t step = 1; step <= 64; step += 63) {
        fh_boot_rx_t rx;
        size_t used;
        unsigned char *dst;
        fh_boot_rx_init(&rx, from_launcher, 1000);
        ck_assert_int_eq(feed(&rx, b, n, step, expect, &used), FH_BOOT_RX_BAD);
        ck_assert_uint_eq(rx.type, type);
        ck_assert_msg(strstr(rx.err, err) != NULL, "error \"%s\"", rx.err);
        ck_assert_uint_eq(fh_boot_rx_space(&rx, &dst), 0);
        ck_assert_int_eq(fh_boot_rx_got(&rx, 1), FH_BOOT_RX_BAD);
        fh_boot_rx_free(&rx);
    }
}

START_TEST(bad_streams)
{
    unsigned char b[32];
    fh_put_u32(b, 99);
    bad(0, b, 4, -1, 0, "unknown request 99");
    bad(1, b, 4, -1, 0, "unknown message 99");
    fh_put_u32(b, FH_BOOT_MSG_DEAD);            /* a message, not a request */
    bad(0, b, 4, -1, 0, "unknown request");
    fh_put_u32(b, FH_BOOT_OP_ALLGATHER);
    fh_put_u32(b + 4, 1001);
    bad(0, b, 8, -1, FH_BOOT_OP_ALLGATHER, "1001 bytes per rank");
    fh_put_u32(b, FH_BOOT_OP_INITFAIL);
    fh_put_u32(b + 4, 0);
    fh_put_u32(b + 8, FH_BOOT_MAX_MSG + 1);
    bad(0, b, 12, -1, FH_BOOT_OP_INITFAIL, "over the limit");
    fh_put_u32(b, FH_BOOT_MSG_DEAD);
    fh_put_u32(b + 12, UINT32_MAX);
    bad(1, b, 16, -1, FH_BOOT_MSG_DEAD, "over the limit");
    fh_put_u32(b, FH_BOOT_MSG_ALLGATHER);
    bad(1, b, 4, -1, FH_BOOT_MSG_ALLGATHER, "nobody asked for");
}
END_TEST

/* Found by boot_wire_fuzz: an unknown request after a first complete
 * message read in pieces left fh_boot_rx_space wanting SIZE_MAX bytes
 * (need reset, have not).  Input \011Aiiiiii. */
START_TEST(fuzz_regression_space_after_error)
{
    unsigned char b[8];
    fh_put_u32(b, 0x69696969u);
    fh_boot_rx_t rx;
    unsigned char *dst;
    fh_boot_rx_init(&rx, 0, 1000);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(fh_boot_rx_space(&rx, &dst), 4 - (size_t)i);
        *dst = b[i];
        ck_assert_int_eq(fh_boot_rx_got(&rx, 1), FH_BOOT_RX_MORE);
    }
    fh_boot_rx_space(&rx, &dst);
    *dst = b[3];
    ck_assert_int_eq(fh_boot_rx_got(&rx, 1), FH_BOOT_RX_BAD);
    ck_assert_uint_eq(fh_boot_rx_space(&rx, &dst), 0);
    fh_boot_rx_free(&rx);
}
END_TEST

START_TEST(handshake)
{
    unsigned char key[FH_KEY_BYTES] = {1}, nr[FH_BOOT_NONCE_BYTES] = {2},
                  nl[FH_BOOT_NONCE_BYTES] = {3}, out[FH_BOOT_NONCE_BYTES];
    unsigned char h[FH_BOOT_HELLO_BYTES] = {0};
    ck_assert_uint_eq(fh_boot_hello_decode(h, out), FH_BOOT_REFUSED_KEY);
    fh_put_u32(h, FH_BOOT_MAGIC);
    memcpy(h + 4, nr, sizeof nr);
    ck_assert_uint_eq(fh_boot_hello_decode(h, out), 0);
    ck_assert(memcmp(out, nr, sizeof nr) == 0);
    unsigned char w[4];
    fh_put_u32(w, FH_BOOT_MAGIC);
    ck_assert_uint_eq(fh_boot_challenge_word(w), 0);
    fh_put_u32(w, FH_BOOT_REFUSED_DUP);
    ck_assert_uint_eq(fh_boot_challenge_word(w), FH_BOOT_REFUSED_DUP);
    fh_put_u32(w, 4);
    ck_assert_uint_eq(fh_boot_challenge_word(w), UINT32_MAX);

    unsigned char pr[FH_BOOT_PROOF_BYTES], mine[FH_BOOT_MAC_BYTES];
    uint32_t rn = 99, pid = 99;
    fh_put_u32(pr, 3);
    fh_put_u32(pr + 4, 1234);
    ck_assert_int_eq(fh_boot_mac(key, FH_BOOT_LABEL_RANK, nr, nl, 3, 1234, pr + 8), 0);
    ck_assert_uint_eq(fh_boot_proof_check(pr, key, nr, nl, 4, &rn, &pid, mine), 0);
    ck_assert_uint_eq(rn, 3);
    ck_assert_uint_eq(pid, 1234);
    ck_assert_uint_eq(fh_boot_proof_check(pr, key, nr, nl, 3, &rn, &pid, mine),
                      FH_BOOT_REFUSED_RANK);
    pr[20] ^= 1;
    rn = pid = 99;
    ck_assert_uint_eq(fh_boot_proof_check(pr, key, nr, nl, 4, &rn, &pid, mine),
                      FH_BOOT_REFUSED_KEY);
    ck_assert_uint_eq(rn, 99);                  /* not acted on */

    unsigned char acc[FH_BOOT_ACCEPT_BYTES], want[FH_BOOT_MAC_BYTES];
    ck_assert_int_eq(fh_boot_mac(key, FH_BOOT_LABEL_LAUNCHER, nr, nl, 3, 1234, want), 0);
    fh_put_u32(acc, 0);
    memcpy(acc + 4, want, sizeof want);
    ck_assert_int_eq(fh_boot_accept_check(acc, want), 1);
    acc[10] ^= 1;
    ck_assert_int_eq(fh_boot_accept_check(acc, want), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("boot_decode");
    TCase *tc = tcase_create("decode");
    tcase_add_test(tc, every_request);
    tcase_add_test(tc, every_message);
    tcase_add_test(tc, bad_streams);
    tcase_add_test(tc, fuzz_regression_space_after_error);
    tcase_add_test(tc, handshake);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}
