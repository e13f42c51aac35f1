/*
 * test_ibv_addr.c -- the verbs conduit's connection addressing
 * (conduits/ibv/ibv_addr.c), which needs no device: the RTR address vector
 * always carries the peer's DLID (InfiniBand routes by it, with or without
 * a GRH), a GRH exactly when a GID index is used, with the traffic class
 * and service level asked for; read/atomic depths are the minimum of what
 * each side offers, clamped to 1..16; a GRH is needed towards another
 * subnet only; a thread-domain allocation that failed for want of
 * resources is not taken for "no thread domains on this device".
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "conduits/ibv/ibv_cost.h"
#include "conduits/ibv/ibv_internal.h"
#include "check_main.h"

static const uint8_t GID_A[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
static const uint8_t GID_B[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9};
static const uint8_t GID_C[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8};

START_TEST(infiniband_lid_only)
{
    struct ibv_peer_addr a = {.lid = 0x1234, .sgid_index = -1, .port = 1, .sl = 3};
    memcpy(a.gid, GID_B, 16);
    struct ibv_ah_attr ah;
    memset(&ah, 0xee, sizeof ah);
    ibv_fill_av(&ah, &a);
    ck_assert_uint_eq(ah.dlid, 0x1234);
    ck_assert_uint_eq(ah.is_global, 0);
    ck_assert_uint_eq(ah.sl, 3);
    ck_assert_uint_eq(ah.port_num, 1);
    ck_assert_uint_eq(ah.grh.traffic_class, 0);
}
END_TEST

START_TEST(infiniband_with_grh_keeps_dlid)
{
    struct ibv_peer_addr a = {.lid = 0x77, .sgid_index = 2, .port = 2, .sl = 5,
                              .tclass = 106};
    memcpy(a.gid, GID_B, 16);
    struct ibv_ah_attr ah;
    ibv_fill_av(&ah, &a);
    ck_assert_uint_eq(ah.dlid, 0x77);        /* the subnet still routes by LID */
    ck_assert_uint_eq(ah.is_global, 1);
    ck_assert_uint_eq(ah.grh.sgid_index, 2);
    ck_assert_uint_eq(ah.grh.traffic_class, 106);
    ck_assert_uint_eq(ah.grh.hop_limit, 64);
    ck_assert_uint_eq(ah.sl, 5);
    ck_assert_mem_eq(ah.grh.dgid.raw, GID_B, 16);
}
END_TEST

START_TEST(roce_grh)
{
    struct ibv_peer_addr a = {.lid = 0, .sgid_index = 1, .port = 1, .tclass = 96};
    memcpy(a.gid, GID_A, 16);
    struct ibv_ah_attr ah;
    ibv_fill_av(&ah, &a);
    ck_assert_uint_eq(ah.is_global, 1);
    ck_assert_uint_eq(ah.grh.sgid_index, 1);
    ck_assert_uint_eq(ah.grh.traffic_class, 96);
    ck_assert_mem_eq(ah.grh.dgid.raw, GID_A, 16);
}
END_TEST

START_TEST(rd_depths_agreed)
{
    uint8_t resp, init;
    /* we accept 16, may issue 8; the peer accepts 4, may issue 2 */
    ibv_rd_depths(16, 8, 4, 2, &resp, &init);
    ck_assert_uint_eq(resp, 2);    /* it never has more than 2 outstanding */
    ck_assert_uint_eq(init, 4);    /* it accepts no more than 4 */
    ibv_rd_depths(4, 4, 255, 255, &resp, &init);
    ck_assert_uint_eq(resp, 4);
    ck_assert_uint_eq(init, 4);
    ibv_rd_depths(128, 128, 200, 200, &resp, &init);
    ck_assert_uint_eq(resp, 16);
    ck_assert_uint_eq(init, 16);
    ibv_rd_depths(16, 16, 0, 0, &resp, &init);   /* a peer's zero: still 1 */
    ck_assert_uint_eq(resp, 1);
    ck_assert_uint_eq(init, 1);
}
END_TEST

START_TEST(grh_between_subnets_only)
{
    ck_assert_int_eq(ibv_needs_grh(GID_A, GID_B), 0);   /* same prefix */
    ck_assert_int_ne(ibv_needs_grh(GID_A, GID_C), 0);   /* other subnet */
}
END_TEST

START_TEST(td_errors_told_apart)
{
    ck_assert_int_ne(ibv_td_error_permanent(EOPNOTSUPP), 0);  /* rxe, siw */
    ck_assert_int_ne(ibv_td_error_permanent(ENOSYS), 0);
    ck_assert_int_eq(ibv_td_error_permanent(ENOMEM), 0);      /* try later */
    ck_assert_int_eq(ibv_td_error_permanent(ENOSPC), 0);
    ck_assert_int_eq(ibv_td_error_permanent(EAGAIN), 0);
}
END_TEST

/* The resource formula (ibv_cost.h, docs/running-on-clusters.md): 16
 * ranks, 2 paths, one thread path talking to 4 peers, 16 credits. */
START_TEST(cost_formula)
{
    ibv_cost_shape_t sh = {.nranks = 16, .npaths = 2, .used_paths = 1,
                           .peers = 4, .credits = 16, .stride = 4160,
                           .nslots = 64};
    ibv_cost_t c;
    ibv_cost(&sh, &c);
    ck_assert(c.rc_qps == 8);            /* 4 made + 4 accepted */
    ck_assert(c.rc_qps_max == 48);       /* 16 x (2 x 2 - 1) */
    ck_assert(c.rc_qps_eager == 48);
    ck_assert(c.ud_qps == 2);
    /* service path: 36 per accepted peer x 4 + 80; thread path 20 x 4 + 80 */
    ck_assert(c.rx_bytes == (224.0 + 160.0) * 4160);
    /* the old sizing: rx_msgs + 80 per path: (808 + 80) + (296 + 80) */
    ck_assert(c.rx_bytes_max == 1264.0 * 4160);
    ck_assert(c.cq_entries_max == 3400 + 1808);
    /* grown: service path 464 + 224 buffers + 4 QPs x 64; thread path
     * 408 + 160 + 4 x 64 */
    ck_assert(c.cq_entries == 944 + 824);
    /* Connections never exceed every pair; receive memory never exceeds
     * the old sizing, whatever the talk. */
    for (long k = 0; k <= 16; k++) {
        sh.peers = k;
        ibv_cost(&sh, &c);
        ck_assert(c.rc_qps <= c.rc_qps_max);
        ck_assert(c.rx_bytes <= c.rx_bytes_max);
        ck_assert(c.cq_entries <= c.cq_entries_max);
    }
    /* One path (FH_PATHS=shared): service paths talk to each other. */
    sh.npaths = 1;
    sh.used_paths = 0;
    sh.peers = 5;
    ibv_cost(&sh, &c);
    ck_assert(c.rc_qps == 5);
    ck_assert(c.rc_qps_max == 16);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ibv_addr");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, infiniband_lid_only);
    tcase_add_test(tc, infiniband_with_grh_keeps_dlid);
    tcase_add_test(tc, roce_grh);
    tcase_add_test(tc, rd_depths_agreed);
    tcase_add_test(tc, grh_between_subnets_only);
    tcase_add_test(tc, td_errors_told_apart);
    tcase_add_test(tc, cost_formula);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}
