/*
 * ofi_selftest.c -- standalone test of the ofi conduit (conduits/ofi/).
 *
 * Usage: ofi_selftest [provider] [1|2|all|dead]   (default: tcp all)
 *   1    one rank, 3 paths, the rank talks to itself
 *   2    two ranks (fork + socketpair bootstrap), real inter-process traffic
 *        with manual progress: a target makes progress only while it polls
 *   dead rank 1 exits after connect; rank 0's RMA to it must fail with
 *        FH_ERR_PEER_DEAD / FH_ERR_TRANSPORT, not hang
 *
 * Phases
 *   tiny    (1 rank) AMs of 0..15 bytes path 1 -> path 0, in order, intact.
 *   am      paths 1 and 2 (one thread each) send requests of 16..P bytes to
 *           the peer's service path with a credit window; the service path
 *           (main thread) checks order/content and replies from inside
 *           on_am; the senders check the replies.
 *   flood   (1 rank) 20 rounds of rx_msgs max-size AMs path 1 -> path 0
 *           without polling path 0 until the window is used up.
 *   rma     puts path 1 -> (peer, 0) of 1 B .. 8 MiB at random offsets,
 *           FI_INJECT-sized puts from a stack buffer scribbled right after
 *           the post, FH_POST_MORE batches, gets back; every put is checked
 *           at the target right after the initiator's completion (1 rank: in
 *           the upcall; 2 ranks: the target stops polling when told through
 *           an out-of-band socket and compares its memory against a shadow).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conduits/conduit.h"
#include "firehose/util/log.h"
#include "conduits/ofi/ofi_config.h"
#include "selftest_common.h"

/* log.c needs this; the runtime's errors.c is not linked here. */
const char *fh_err_name(int err)
{
    static const char *n[] = {"FH_OK", "FH_ERR_INVALID", "FH_ERR_RANK",
        "FH_ERR_OVERFLOW", "FH_ERR_OUT_OF_SEGMENT", "FH_ERR_HANDLER",
        "FH_ERR_TOO_BIG", "FH_ERR_NOT_INIT", "FH_ERR_IN_HANDLER",
        "FH_ERR_HANDLE", "FH_ERR_NO_MEMORY", "FH_ERR_LIMIT", "FH_ERR_ALIGN",
        "FH_ERR_TRANSPORT", "FH_ERR_PEER_DEAD", "FH_ERR_BOOTSTRAP",
        "FH_ERR_CONFIG", "FH_ERR_AGAIN", "FH_ERR_NOT_SUPPORTED",
        "FH_ERR_STATE"};
    return (err <= 0 && err >= -19) ? n[-err] : "FH_ERR_?";
}

/* ------------------------------------------------------------ conduit */

const fh_conduit_ops_t *const st_cd = &fh_conduit_ofi;
uint32_t st_nreq = 3000;            /* requests per sender path (am phase) */
const size_t st_flood_small = 0;    /* flood: max-size AMs only */

void st_open(struct test *t)
{
    fh_conduit_config_t cfg = {
        .rank = t->rank, .nranks = t->nranks, .npaths = NPATHS,
        .am_max_packet = 65536,
        .verbose = getenv("FH_VERBOSE") ? atoi(getenv("FH_VERBOSE")) : 0,
    };
    const ofi_settings_t os = {.provider = t->provider, .domain = "",
                               .endpoint = st_ofi_endpoint(), .trust_fabric = 1};
    cfg.settings = &os;
    fh_log_set_rank(t->rank);
    fh_log_set_verbose(cfg.verbose);
    int rc = CD.open(&cfg, &st_upcalls, &t->c, &t->lim);
    CHECK(rc == FH_OK, "open(%s): %d", t->provider, rc);
    if (t->rank == 0)
        printf("conduit: %s, max_msg %zu, max_inject %zu, am_max_packet %zu, "
               "needs_local_mr %d\n", t->lim.description, t->lim.max_msg,
               t->lim.max_inject, t->lim.am_max_packet,
               t->lim.needs_local_mr);
}

/* ------------------------------------------------------------ drivers */

static int run_one(const char *prov)
{
    struct test *t = st_run_one(prov, NULL);
    printf("PASS 1-rank (%s): upcall-verified puts %ld\n", prov,
           t->verified_in_upcall);
    st_finish(t);
    return 0;
}

static int run_two(const char *prov)
{
    st_run_two(prov, NULL, NULL);
    printf("PASS 2-rank (%s)\n", prov);
    return 0;
}

int main(int argc, char **argv)
{
    const char *prov = argc > 1 ? argv[1] : "tcp";
    const char *mode = argc > 2 ? argv[2] : "all";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "1") || !strcmp(mode, "all"))
        run_one(prov);
    if (!strcmp(mode, "2") || !strcmp(mode, "all"))
        run_two(prov);
    if (!strcmp(mode, "dead"))
        st_run_dead(prov, NULL, NULL);
    printf("ALL PASS (%s, mode %s)\n", prov, mode);
    return 0;
}
