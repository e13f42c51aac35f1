/*
 * forge_takeover.h -- the attack half of forge_test's takeover phase: a
 * member of the job (rank 2) tries to become another member (rank 1)
 * towards a third (rank 0) on the tcp transport (issue 26).  forge_test.c
 * runs the phase and judges it on rank 0; forge_takeover.c is what rank 2
 * does, with libfabric only (no firehose call), so that it reads like what
 * a hostile member could write.
 */
#ifndef FH_FORGE_TAKEOVER_H
#define FH_FORGE_TAKEOVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ft_target {
    pid_t pid0, pid1;          /* the victim (rank 0) and who we claim to be */
    int npaths;
    /* [rxm generation] today's conduit header, struct ofi_amh: the token
     * rank 0 expects from every sender (rank 2 holds it legitimately) */
    uint64_t token0;
    /* Messages to forge as rank 1 (firehose/am_wire.h encoded, claiming
     * src_rank 1, at most 100 bytes), sent in turn with sequence numbers
     * 0..2*nseq-1. */
    const void *am[2];
    size_t am_len[2];
    unsigned nseq;
    double seconds;            /* time budget of each part */
};

struct ft_report {
    unsigned rxm_eps;          /* endpoints announcing a rank-1 port */
    unsigned rxm_sent, rxm_unsent;
    unsigned msg_tried, msg_refused, msg_connected, msg_closed;
};

/* Rank 2: both attack generations; prints what it did ("[2] takeover: ...")
 * and fills r.  Returns 0, or -1 when the LD_PRELOAD shim (sec_shim.c) is
 * not loaded (the rxm part cannot announce another port without it). */
int ft_attack(const struct ft_target *t, struct ft_report *r);

#endif /* FH_FORGE_TAKEOVER_H */
