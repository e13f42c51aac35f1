/*
 * test_ofi_auth.c -- the ofi conduit's connection handshake
 * (conduits/ofi/ofi_auth.c) between simulated ranks: an honest handshake
 * completes both ways; a member cannot pass for another member (it lacks
 * their pair secret); a recorded request, acceptance or proof replays into
 * nothing; a request for another job, endpoint or direction is refused.
 */
#include <check.h>
#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "conduits/ofi/ofi_auth.h"
#include "firehose.h"
#include "check_main.h"

#define NR 3
#define NP 2

static struct ofi_auth A[NR];

static void setup_job(struct ofi_auth *a, int n)
{
    uint8_t pubs[NR * OFI_PUB_BYTES];
    for (int r = 0; r < n; r++) {
        ck_assert_int_eq(ofi_auth_init(&a[r], r, n, NP), FH_OK);
        memcpy(pubs + r * OFI_PUB_BYTES, a[r].pub, OFI_PUB_BYTES);
    }
    for (int r = 0; r < n; r++)
        ck_assert_int_eq(ofi_auth_derive(&a[r], pubs), FH_OK);
}

static void setup(void) { setup_job(A, NR); }
static void teardown(void)
{
    for (int r = 0; r < NR; r++)
        ofi_auth_fini(&A[r]);
}

/* c connects from path cp to a's service path; returns NULL when all
 * three messages check out. */
static const char *handshake(int c, int cp, int a, struct ofi_cm_req *req,
                             struct ofi_cm_acc *acc, struct ofi_cm_proof *pr)
{
    ck_assert_int_eq(ofi_cm_req_make(&A[c], cp, a, 0, req), FH_OK);
    struct ofi_cm_req got;
    const char *why = ofi_cm_req_check(&A[a], req, sizeof *req, &got);
    if (why)
        return why;
    ck_assert_int_eq(ofi_cm_acc_make(&A[a], &got, acc), FH_OK);
    struct ofi_cm_acc acc_seen;
    if ((why = ofi_cm_acc_check(&A[c], req, acc, sizeof *acc, &acc_seen)) != NULL)
        return why;
    ofi_cm_proof_make(&A[c], req, &acc_seen, pr);
    return ofi_cm_proof_check(&A[a], &got, acc, pr, sizeof *pr);
}

START_TEST(pair_secrets_are_symmetric_and_private)
{
    for (int a = 0; a < NR; a++)
        for (int b = 0; b < NR; b++) {
            ck_assert_mem_eq(A[a].pair[b], A[b].pair[a], OFI_KEY_BYTES);
            if (a != b)   /* rank a's secret with b is not its secret with anyone else */
                for (int x = 0; x < NR; x++)
                    if (x != b)
                        ck_assert(memcmp(A[a].pair[b], A[a].pair[x], OFI_KEY_BYTES) != 0);
        }
    ck_assert_mem_eq(A[0].job, A[2].job, OFI_JOB_BYTES);
}
END_TEST

START_TEST(honest_handshakes_complete)
{
    struct ofi_cm_req req;
    struct ofi_cm_acc acc;
    struct ofi_cm_proof pr;
    ck_assert_ptr_null(handshake(1, 1, 0, &req, &acc, &pr));   /* thread path to anyone */
    ck_assert_ptr_null(handshake(0, 0, 2, &req, &acc, &pr));   /* service up the ranks */
    ck_assert_ptr_null(handshake(1, 0, 1, &req, &acc, &pr));   /* the self loop */
}
END_TEST

START_TEST(request_checks)
{
    struct ofi_cm_req req, got;
    ck_assert_int_eq(ofi_cm_req_make(&A[2], 0, 0, 0, &req), FH_OK);
    /* A service path connects to ranks above it only. */
    ck_assert_ptr_nonnull(ofi_cm_req_check(&A[0], &req, sizeof req, &got));
    ck_assert_int_eq(ofi_cm_req_make(&A[1], 1, 0, 0, &req), FH_OK);
    ck_assert_ptr_null(ofi_cm_req_check(&A[0], &req, sizeof req, &got));
    ck_assert_ptr_nonnull(ofi_cm_req_check(&A[0], &req, sizeof req - 1, &got));
    ck_assert_ptr_nonnull(ofi_cm_req_check(&A[0], NULL, sizeof req, &got));
    ck_assert_ptr_nonnull(ofi_cm_req_check(&A[2], &req, sizeof req, &got)); /* not for 2 */
    struct ofi_cm_req bad = req;
    bad.job[3] ^= 1;
    ck_assert_ptr_nonnull(ofi_cm_req_check(&A[0], &bad, sizeof bad, &got));
    bad = req;
    bad.src_rank = htole32(NR);
    ck_assert_ptr_nonnull(ofi_cm_req_check(&A[0], &bad, sizeof bad, &got));
    bad = req;
    bad.src_path = htole32(NP);
    ck_assert_ptr_nonnull(ofi_cm_req_check(&A[0], &bad, sizeof bad, &got));
    bad = req;
    bad.dst_path = htole32(1);
    ck_assert_ptr_nonnull(ofi_cm_req_check(&A[0], &bad, sizeof bad, &got));
    bad = req;
    bad.magic ^= 1;
    ck_assert_ptr_nonnull(ofi_cm_req_check(&A[0], &bad, sizeof bad, &got));
    bad = req;
    bad.version = htole16(2);
    ck_assert_ptr_nonnull(ofi_cm_req_check(&A[0], &bad, sizeof bad, &got));
}
END_TEST

/* Rank 2 claims to be rank 1 towards rank 0: the request passes (anyone
 * may claim), but rank 2 cannot sign the proof, whatever key it uses. */
START_TEST(member_cannot_pass_for_another)
{
    struct ofi_cm_req req, got;
    ck_assert_int_eq(ofi_cm_req_make(&A[2], 1, 0, 0, &req), FH_OK);
    req.src_rank = htole32(1);
    ck_assert_ptr_null(ofi_cm_req_check(&A[0], &req, sizeof req, &got));
    struct ofi_cm_acc acc;
    ck_assert_int_eq(ofi_cm_acc_make(&A[0], &got, &acc), FH_OK);
    /* The acceptance is signed with k_01: rank 2 cannot check it ... */
    struct ofi_cm_req as2 = req;
    as2.src_rank = htole32(2);
    struct ofi_cm_acc seen;
    ck_assert_ptr_nonnull(ofi_cm_acc_check(&A[2], &as2, &acc, sizeof acc, &seen));
    /* ... and every proof it can make fails: with its own secrets ... */
    struct ofi_cm_proof pr;
    for (int k = 0; k < NR; k++) {
        struct ofi_auth forger = A[2];
        memcpy(forger.pair[0], A[2].pair[k], OFI_KEY_BYTES);
        ofi_cm_proof_make(&forger, &req, &acc, &pr);
        memcpy(forger.pair[0], A[2].pair[0], OFI_KEY_BYTES);
        ck_assert_ptr_nonnull(ofi_cm_proof_check(&A[0], &got, &acc, &pr, sizeof pr));
    }
    /* ... and with rank 1's honest proof of another handshake (a replay). */
    struct ofi_cm_req req1;
    struct ofi_cm_acc acc1;
    struct ofi_cm_proof pr1;
    ck_assert_ptr_null(handshake(1, 1, 0, &req1, &acc1, &pr1));
    ck_assert_ptr_nonnull(ofi_cm_proof_check(&A[0], &got, &acc, &pr1, sizeof pr1));
}
END_TEST

/* A recorded request replayed to the listener gets a fresh acceptance; the
 * recorded proof does not match it. */
START_TEST(replay_gives_nothing)
{
    struct ofi_cm_req req, got;
    struct ofi_cm_acc acc, acc2;
    struct ofi_cm_proof pr;
    ck_assert_ptr_null(handshake(1, 1, 0, &req, &acc, &pr));
    ck_assert_ptr_null(ofi_cm_req_check(&A[0], &req, sizeof req, &got));
    ck_assert_int_eq(ofi_cm_acc_make(&A[0], &got, &acc2), FH_OK);
    ck_assert(memcmp(acc.nonce, acc2.nonce, OFI_NONCE_BYTES) != 0);
    ck_assert_ptr_nonnull(ofi_cm_proof_check(&A[0], &got, &acc2, &pr, sizeof pr));
    /* A recorded acceptance does not answer a fresh request either. */
    struct ofi_cm_req fresh;
    ck_assert_int_eq(ofi_cm_req_make(&A[1], 1, 0, 0, &fresh), FH_OK);
    struct ofi_cm_acc seen;
    ck_assert_ptr_nonnull(ofi_cm_acc_check(&A[1], &fresh, &acc, sizeof acc, &seen));
    /* A proof reflected as an acceptance, or cut short, fails. */
    ck_assert_ptr_nonnull(ofi_cm_proof_check(&A[0], &got, &acc2, &pr, sizeof pr - 1));
    ck_assert_ptr_nonnull(ofi_cm_acc_check(&A[1], &req, &pr, sizeof pr, &seen));
}
END_TEST

/* Another job (other keys) gets nowhere with this one's listener. */
START_TEST(other_job_refused)
{
    struct ofi_auth B[NR];
    setup_job(B, NR);
    struct ofi_cm_req req, got;
    ck_assert_int_eq(ofi_cm_req_make(&B[1], 1, 0, 0, &req), FH_OK);
    ck_assert_ptr_nonnull(ofi_cm_req_check(&A[0], &req, sizeof req, &got));
    for (int r = 0; r < NR; r++)
        ofi_auth_fini(&B[r]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ofi_auth");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, pair_secrets_are_symmetric_and_private);
    tcase_add_test(tc, honest_handshakes_complete);
    tcase_add_test(tc, request_checks);
    tcase_add_test(tc, member_cannot_pass_for_another);
    tcase_add_test(tc, replay_gives_nothing);
    tcase_add_test(tc, other_job_refused);
    suite_add_tcase(s, tc);
    return fh_check_run(s);
}
