/*
 * test_am_wire.c -- the AM wire format (firehose/am_wire.c): round trips of
 * every kind, and rejection of every malformed header the decoder must not
 * trust.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "firehose/am_wire.h"
#include "check_main.h"

#define NR 4
#define NP 3
#define MAX_MEDIUM 64
#define MAX_LONG 4096
static const fh_am_bounds_t BOUNDS = {.nranks = NR, .npaths = NP, .max_medium = MAX_MEDIUM,
                                      .max_long = MAX_LONG};

static size_t build(fh_am_msg_t *m, unsigned char *buf, const void *payload)
{
    size_t hl = fh_am_encode(m, buf, 512);
    ck_assert_uint_gt(hl, 0);
    if (fh_am_kind_has_inline(m->kind) && m->payload_len)
        memcpy(buf + hl, payload, m->payload_len);
    return hl + (fh_am_kind_has_inline(m->kind) ? m->payload_len : 0);
}

START_TEST(round_trip_every_kind)
{
    const char payload[] = "firehose payload";
    for (unsigned k = FH_AM_REQ_SHORT; k <= FH_AM_KIND_MAX; k++) {
        fh_am_msg_t m = {.kind = (uint8_t)k, .handler = 200, .src_path = 2,
                         .credits = 7, .src_rank = 3};
        if (k != FH_AM_CREDIT) {
            m.nargs = FH_AM_MAX_ARGS;
            for (unsigned i = 0; i < m.nargs; i++)
                m.args[i] = 0x0123456789abcdefull * (i + 1);
        }
        if (fh_am_kind_has_inline(k) || k == FH_AM_REQ_LONG_RDMA || k == FH_AM_REP_LONG_RDMA)
            m.payload_len = sizeof payload;
        if (fh_am_kind_is_long(k))
            m.long_dst = 0x7f0000001000ull;
        unsigned char buf[512];
        size_t len = build(&m, buf, payload);
        fh_am_msg_t d;
        char why[128];
        ck_assert_msg(fh_am_decode(buf, len, &BOUNDS, &d, why, sizeof why) == FH_OK,
                      "kind %u rejected: %s", k, why);
        ck_assert_uint_eq(d.kind, k);
        ck_assert_uint_eq(d.handler, m.handler);
        ck_assert_uint_eq(d.nargs, m.nargs);
        ck_assert_uint_eq(d.src_rank, 3);
        ck_assert_uint_eq(d.src_path, 2);
        ck_assert_uint_eq(d.credits, 7);
        ck_assert_uint_eq(d.payload_len, m.payload_len);
        ck_assert(d.long_dst == m.long_dst);
        for (unsigned i = 0; i < m.nargs; i++)
            ck_assert(d.args[i] == m.args[i]);
        if (fh_am_kind_has_inline(k))
            ck_assert_mem_eq(d.payload, payload, sizeof payload);
        else
            ck_assert_ptr_null(d.payload);
    }
}
END_TEST

/* Decodes buf[0..len) and requires rejection with `needle` in the reason. */
static void expect_reject(const unsigned char *buf, size_t len, const char *needle)
{
    fh_am_msg_t d;
    char why[128] = "";
    int rc = fh_am_decode(buf, len, &BOUNDS, &d, why, sizeof why);
    ck_assert_msg(rc == FH_ERR_INVALID, "expected rejection (%s), got %d", needle, rc);
    ck_assert_msg(strstr(why, needle) != NULL, "reason '%s' lacks '%s'", why, needle);
}

START_TEST(rejects_malformed)
{
    unsigned char buf[512];
    fh_am_msg_t m = {.kind = FH_AM_REQ_MEDIUM, .handler = 130, .nargs = 2,
                     .src_rank = 1, .payload_len = 10};
    size_t len = build(&m, buf, "0123456789");

    expect_reject(NULL, 0, "shorter");
    expect_reject(buf, FH_AM_HDR_BYTES - 1, "shorter");
    expect_reject(buf, len - 1, "implies");
    expect_reject(buf, len + 1, "implies");

    unsigned char b[512];
    memcpy(b, buf, len);
    b[0] = 0;
    expect_reject(b, len, "magic");
    memcpy(b, buf, len);
    b[1] = 0;
    expect_reject(b, len, "kind");
    b[1] = FH_AM_KIND_MAX + 1;
    expect_reject(b, len, "kind");
    memcpy(b, buf, len);
    b[3] = FH_AM_MAX_ARGS + 1;
    expect_reject(b, len, "arguments");
    memcpy(b, buf, len);
    b[8] = NR; /* src_rank = job size */
    expect_reject(b, len, "source rank");
    memcpy(b, buf, len);
    b[4] = NP;
    expect_reject(b, len, "source path");
    memcpy(b, buf, len);
    b[12] = 0xff; b[13] = 0xff; b[14] = 0xff; b[15] = 0xff; /* payload_len huge */
    expect_reject(b, len, "over the");

    /* A medium payload one byte over the API maximum, in a packet whose
     * length matches it: handlers must never see more than the maximum. */
    static const char big[MAX_LONG + 1];
    fh_am_msg_t mm = {.kind = FH_AM_REQ_MEDIUM, .handler = 130, .payload_len = MAX_MEDIUM + 1};
    unsigned char mb[FH_AM_HDR_BYTES + MAX_LONG + 1];
    size_t hl = fh_am_encode(&mm, mb, sizeof mb);
    memcpy(mb + hl, big, MAX_MEDIUM + 1);
    expect_reject(mb, hl + MAX_MEDIUM + 1, "over the 64 allowed");
    mm.payload_len = MAX_MEDIUM;                 /* exactly the maximum: fine */
    fh_am_msg_t ok;
    char why[128];
    hl = fh_am_encode(&mm, mb, sizeof mb);
    ck_assert_int_eq(fh_am_decode(mb, hl + MAX_MEDIUM, &BOUNDS, &ok, why, sizeof why),
                     FH_OK);
    /* Replies are bounded by the medium maximum too, long requests by the
     * long one. */
    fh_am_msg_t rl = {.kind = FH_AM_REP_LONG, .handler = 130, .payload_len = MAX_MEDIUM + 1,
                      .long_dst = 4096};
    hl = fh_am_encode(&rl, mb, sizeof mb);
    expect_reject(mb, hl + MAX_MEDIUM + 1, "over the 64 allowed");
    fh_am_msg_t ql = {.kind = FH_AM_REQ_LONG_RDMA, .handler = 130, .payload_len = MAX_LONG + 1,
                      .long_dst = 4096};
    hl = fh_am_encode(&ql, mb, sizeof mb);
    expect_reject(mb, hl, "over the 4096 allowed");
    ql.payload_len = MAX_LONG;
    hl = fh_am_encode(&ql, mb, sizeof mb);
    ck_assert_int_eq(fh_am_decode(mb, hl, &BOUNDS, &ok, why, sizeof why), FH_OK);

    fh_am_msg_t s = {.kind = FH_AM_REQ_SHORT, .handler = 130, .src_rank = 0};
    len = build(&s, buf, NULL);
    memcpy(b, buf, len);
    b[12] = 4;
    expect_reject(b, len, "short message");

    fh_am_msg_t l = {.kind = FH_AM_REQ_LONG_RDMA, .handler = 130, .payload_len = 16,
                     .long_dst = UINT64_MAX - 4};
    len = build(&l, buf, NULL);
    expect_reject(buf, len, "overflows");
    l.long_dst = 0;
    len = build(&l, buf, NULL);
    expect_reject(buf, len, "NULL destination");

    fh_am_msg_t c = {.kind = FH_AM_CREDIT, .credits = 1, .nargs = 1};
    len = build(&c, buf, NULL);
    expect_reject(buf, len, "credit packet");

    fh_am_msg_t md = {.kind = FH_AM_REQ_MEDIUM, .handler = 130, .long_dst = 64};
    len = build(&md, buf, NULL);
    expect_reject(buf, len, "non-long");
}
END_TEST

START_TEST(encode_refuses_bad_input)
{
    unsigned char buf[512];
    fh_am_msg_t m = {.kind = FH_AM_REQ_SHORT, .nargs = FH_AM_MAX_ARGS + 1};
    ck_assert_uint_eq(fh_am_encode(&m, buf, sizeof buf), 0);
    m.nargs = 1;
    m.kind = 0;
    ck_assert_uint_eq(fh_am_encode(&m, buf, sizeof buf), 0);
    m.kind = FH_AM_REQ_SHORT;
    ck_assert_uint_eq(fh_am_encode(&m, buf, FH_AM_HDR_BYTES), 0); /* no room for arg */
    ck_assert_uint_eq(fh_am_encode(&m, buf, FH_AM_HDR_BYTES + 8), FH_AM_HDR_BYTES + 8);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("am_wire");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, round_trip_every_kind);
    tcase_add_test(tc, rejects_malformed);
    tcase_add_test(tc, encode_refuses_bad_input);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}
