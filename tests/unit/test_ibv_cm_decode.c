/*
 * test_ibv_cm_decode.c -- the checks of the verbs conduit's connection
 * messages (conduits/ibv/ibv_cm_decode.h), which need no device: a request
 * or reply from the UD QP the allgathered table names is accepted, over
 * RoCE v2 (IPv4 and IPv6 GRH) and InfiniBand (LID, no GRH); one of a wrong
 * length, magic, type, rank, path or destination path is malformed; one
 * from another QP, address or LID than the one it names (a spoofed rank or
 * path) is not from its sender; one against the topology (a request to a
 * thread path, a reply from one, a QP number outside 2..2^24-1, the
 * service path to itself) is refused.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "conduits/ibv/ibv_cm_decode.h"
#include "check_main.h"

#define NR 3u
#define NP 3u

static struct ibv_wire_hdr hdr[NR];
static uint32_t ud[NR * NP];
static struct ibv_cm_table tab;
static uint8_t buf[IBV_CM_LEN];
static struct ibv_cm_src src;

/* Rank r's IPv4-mapped GID ::ffff:10.0.0.(r+1), LID 0x100 + r, UD QP
 * numbers 1000 + 10 r + q; the receiver is rank 0, path `path`. */
static void setup(uint32_t path, int is_eth)
{
    memset(hdr, 0, sizeof hdr);
    for (uint32_t r = 0; r < NR; r++) {
        hdr[r].lid = (uint16_t)(0x100 + r);
        hdr[r].gid[10] = hdr[r].gid[11] = 0xff;
        hdr[r].gid[12] = 10;
        hdr[r].gid[15] = (uint8_t)(r + 1);
        for (uint32_t q = 0; q < NP; q++)
            ud[r * NP + q] = 1000 + 10 * r + q;
    }
    tab = (struct ibv_cm_table){.nranks = NR, .npaths = NP, .me = 0,
                                .path = path, .is_eth = is_eth, .hdr = hdr,
                                .ud = ud};
}

/* A message from (r, q) to the receiving path, with an IPv4 GRH from r's
 * address (RoCE v2) and the completion its HCA would give. */
static void msg(uint32_t type, uint32_t r, uint32_t q, uint32_t qpn)
{
    memset(buf, 0, sizeof buf);
    buf[20] = 0x45;                          /* IPv4, header length 5 */
    memcpy(buf + 32, hdr[r].gid + 12, 4);    /* source address */
    struct ibv_cm_msg m = {IBV_CM_MAGIC, type, r, q, tab.path, qpn, 0, 0};
    memcpy(buf + IBV_CM_GRH, &m, sizeof m);
    src = (struct ibv_cm_src){.len = IBV_CM_LEN, .src_qp = ud[r * NP + q],
                              .slid = 0, .grh = 1};
}

/* Overwrites one 32-bit field of the message in buf. */
static void field(size_t off, uint32_t v)
{
    memcpy(buf + IBV_CM_GRH + off, &v, sizeof v);
}

static enum ibv_cm_verdict check(void)
{
    struct ibv_cm_msg m;
    return ibv_cm_check(&tab, &src, buf, &m);
}

START_TEST(accepts_request_and_reply)
{
    setup(0, 1);
    msg(IBV_CM_REQ, 1, 2, 0x1234);
    struct ibv_cm_msg m;
    ck_assert_int_eq(ibv_cm_check(&tab, &src, buf, &m), IBV_CM_OK);
    ck_assert_uint_eq(m.src_rank, 1);
    ck_assert_uint_eq(m.src_path, 2);
    ck_assert_uint_eq(m.qpn, 0x1234);
    msg(IBV_CM_REQ, 0, 1, 77);               /* own thread path: fine */
    ck_assert_int_eq(check(), IBV_CM_OK);
    setup(2, 1);                             /* a reply to thread path 2 */
    msg(IBV_CM_REP, 2, 0, (1u << 24) - 1);
    ck_assert_int_eq(check(), IBV_CM_OK);
}
END_TEST

START_TEST(accepts_ipv6_grh_and_lid)
{
    setup(0, 1);
    msg(IBV_CM_REQ, 1, 0, 99);
    memset(buf, 0, IBV_CM_GRH);
    buf[0] = 0x60;                           /* IPv6: sgid at 8..24 */
    memcpy(buf + 8, hdr[1].gid, 16);
    ck_assert_int_eq(check(), IBV_CM_OK);
    buf[23] ^= 1;
    ck_assert_int_eq(check(), IBV_CM_NOT_SENDER);

    setup(0, 0);                             /* InfiniBand, no GRH */
    msg(IBV_CM_REQ, 2, 1, 99);
    src.grh = 0;
    src.slid = 0x102;
    ck_assert_int_eq(check(), IBV_CM_OK);
    src.slid = 0x101;                        /* rank 1's LID */
    ck_assert_int_eq(check(), IBV_CM_NOT_SENDER);
    setup(0, 1);                             /* RoCE has no LIDs */
    msg(IBV_CM_REQ, 2, 1, 99);
    src.grh = 0;
    src.slid = 0x102;
    ck_assert_int_eq(check(), IBV_CM_NOT_SENDER);
}
END_TEST

START_TEST(malformed)
{
    setup(0, 1);
    msg(IBV_CM_REQ, 1, 1, 99);
    src.len = IBV_CM_LEN - 1;
    ck_assert_int_eq(check(), IBV_CM_BAD_SIZE);
    src.len = IBV_CM_LEN + 1;
    ck_assert_int_eq(check(), IBV_CM_BAD_SIZE);
    src.len = 0;
    ck_assert_int_eq(check(), IBV_CM_BAD_SIZE);
    const struct { size_t off; uint32_t v; } bad[] = {
        {offsetof(struct ibv_cm_msg, magic), IBV_CM_MAGIC ^ 1},
        {offsetof(struct ibv_cm_msg, type), 0},
        {offsetof(struct ibv_cm_msg, type), 3},
        {offsetof(struct ibv_cm_msg, src_rank), NR},
        {offsetof(struct ibv_cm_msg, src_rank), UINT32_MAX},
        {offsetof(struct ibv_cm_msg, src_path), NP},
        {offsetof(struct ibv_cm_msg, dst_path), 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msg(IBV_CM_REQ, 1, 1, 99);
        field(bad[i].off, bad[i].v);
        ck_assert_msg(check() == IBV_CM_MALFORMED, "case %zu", i);
    }
}
END_TEST

START_TEST(spoofed_sender)
{
    setup(0, 1);
    msg(IBV_CM_REQ, 1, 1, 99);
    src.src_qp = ud[1 * NP + 2];             /* rank 1's other path */
    ck_assert_int_eq(check(), IBV_CM_NOT_SENDER);
    msg(IBV_CM_REQ, 1, 1, 99);               /* rank 2's QP naming rank 1 */
    src.src_qp = ud[2 * NP + 1];
    memcpy(buf + 32, hdr[2].gid + 12, 4);
    ck_assert_int_eq(check(), IBV_CM_NOT_SENDER);
    msg(IBV_CM_REQ, 1, 1, 99);               /* right QP number, wrong host */
    memcpy(buf + 32, hdr[2].gid + 12, 4);
    ck_assert_int_eq(check(), IBV_CM_NOT_SENDER);
    msg(IBV_CM_REQ, 1, 1, 99);               /* neither IPv4 nor IPv6 */
    buf[20] = 0;
    ck_assert_int_eq(check(), IBV_CM_NOT_SENDER);
    msg(IBV_CM_REQ, 1, 1, 99);               /* peer's GID not IPv4-mapped */
    hdr[1].gid[10] = 0;
    ck_assert_int_eq(check(), IBV_CM_NOT_SENDER);
}
END_TEST

START_TEST(against_topology)
{
    setup(1, 1);                             /* a request to thread path 1 */
    msg(IBV_CM_REQ, 1, 0, 99);
    ck_assert_int_eq(check(), IBV_CM_TOPOLOGY);
    msg(IBV_CM_REP, 1, 2, 99);               /* a reply from thread path 2 */
    ck_assert_int_eq(check(), IBV_CM_TOPOLOGY);
    setup(0, 1);
    const uint32_t qpns[] = {0, 1, 1u << 24, UINT32_MAX};
    for (size_t i = 0; i < sizeof qpns / sizeof qpns[0]; i++) {
        msg(IBV_CM_REQ, 2, 1, qpns[i]);
        ck_assert_msg(check() == IBV_CM_TOPOLOGY, "qpn %u", qpns[i]);
    }
    msg(IBV_CM_REQ, 0, 0, 99);               /* service path to itself */
    ck_assert_int_eq(check(), IBV_CM_TOPOLOGY);
    msg(IBV_CM_REP, 0, 0, 99);
    ck_assert_int_eq(check(), IBV_CM_TOPOLOGY);
}
END_TEST

START_TEST(verdicts_named)
{
    for (int v = IBV_CM_BAD_SIZE; v < IBV_CM_NVERDICTS; v++)
        ck_assert(strstr(ibv_cm_verdict_str((enum ibv_cm_verdict)v),
                         "connection message") != NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ibv_cm_decode");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, accepts_request_and_reply);
    tcase_add_test(tc, accepts_ipv6_grh_and_lid);
    tcase_add_test(tc, malformed);
    tcase_add_test(tc, spoofed_sender);
    tcase_add_test(tc, against_topology);
    tcase_add_test(tc, verdicts_named);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}
