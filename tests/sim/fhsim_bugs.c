/*
 * fhsim_bugs.c -- the bugs tests/sim/fhsim.c makes on purpose, by name.
 *
 *   no-f-check      the caches ignore F          -> I2 check
 *   evict-held      targets re-register regions peers hold -> RDMA check
 *   forget-release  victims are dropped but not released   -> FHC_ERR_LIMIT
 *   stale-install   replies install "already held" regions -> RDMA check or
 *                   a refused release
 *   skip-release    fhsim forgets 1 in 50 fhc_release      -> deadlock check
 *   early-ack       REVOKE acked while RDMA is in flight   -> RDMA check
 *                   (needs --free-rate)
 *   ignore-revoke   REVOKE acked, firehose kept            -> a refused release
 *                   (the target dropped it on the ack) or RDMA check
 *   victim-past-max the adaptive MAXVICTIM grows past --maxvictim-max
 *                   (needs --victim adaptive) -> the cache's bound check
 *                   or the pinned-bytes check
 *   reorder-requests  moves of one pair overtake each other.  Not caught, by
 *                   design: the "granted" flag keeps keys exact; only F
 *                   checks can fail spuriously (FHC_ERR_LIMIT), rarely.
 * and, with --budget adaptive (docs/firehose-cache.md, "Budgets"):
 *   grant-past-M    budgets raised without checking the pool -> A1 check
 *   reclaim-busy    a RECLAIM's answer releases firehoses in use -> RDMA
 *                   check, or the later real release refused
 *   no-floor        reclaims go below the floor     -> A2 check
 *
 * fhsim-check.sh runs each one and expects the FAIL line of its own
 * detector.  Most are bits the caches act on (FHC_BUG_*, fhc_params_t
 * debug_bugs); skip-release and reorder-requests are the simulator's own
 * (fhsim_work.c rdma_done, fhsim_net.c env_send).
 */
#include <string.h>

#include "fhsim_sim.h"

int fhsim_bug_parse(const char *v)
{
    if (!strcmp(v, "no-f-check")) opt.bugs |= FHC_BUG_NO_F_CHECK;
    else if (!strcmp(v, "evict-held")) opt.bugs |= FHC_BUG_EVICT_HELD;
    else if (!strcmp(v, "forget-release")) opt.bugs |= FHC_BUG_FORGET_RELEASE;
    else if (!strcmp(v, "stale-install")) opt.bugs |= FHC_BUG_STALE_INSTALL;
    else if (!strcmp(v, "early-ack")) opt.bugs |= FHC_BUG_EARLY_ACK;
    else if (!strcmp(v, "ignore-revoke")) opt.bugs |= FHC_BUG_IGNORE_REVOKE;
    else if (!strcmp(v, "skip-release")) opt.skip_release = 1;
    else if (!strcmp(v, "reorder-requests")) opt.reorder_requests = 1;
    else if (!strcmp(v, "victim-past-max")) opt.bugs |= FHC_BUG_VICTIM_PAST_MAX;
    else if (!strcmp(v, "grant-past-M")) opt.bugs |= FHC_BUG_GRANT_PAST_M;
    else if (!strcmp(v, "reclaim-busy")) opt.bugs |= FHC_BUG_RECLAIM_BUSY;
    else if (!strcmp(v, "no-floor")) opt.bugs |= FHC_BUG_NO_FLOOR;
    else return -1;
    return 0;
}
