/*
 * pin_everything.c -- FH_REG_STRATEGY=pin-everything: every segment piece
 * is registered whole when it is created and its key published with it;
 * a transfer is posted straight to the conduit with that key.  The
 * baseline the firehose paper compares against: no handshake ever, at the
 * price of pinning every segment in full.
 */
#include "reg.h"

static int pe_seg_expose(fh_core_t *rt, void *base, size_t len, struct fh_mr **mr,
                         fh_rkey_t *rkey)
{
    int rc = rt->cops->mr_reg(rt->conduit, base, len,
                              FH_MR_LOCAL | FH_MR_REMOTE_READ | FH_MR_REMOTE_WRITE, mr, rkey);
    if (rc != FH_OK) {
        *mr = NULL;
        *rkey = (fh_rkey_t){0, 0};
    }
    return rc;
}

static int pe_xfer(fh_thread_t *t, bool is_put, int rank, char *local, struct fh_mr *lmr,
                   uint64_t remote, size_t n, const fh_rkey_t *rkey, fh_ctr_t *ctr,
                   bool own_lmr)
{
    (void)own_lmr;   /* no FH_REG_CAP_NB_OWNS_LMR: always false */
    return svc_post(t, is_put, rank, local, lmr, remote, n, rkey, ctr, true);
}

/* The piece's own registration (seg_expose's *mr) is deregistered by the
 * core with the piece (segment.c); nothing else to release. */
const fh_reg_ops_t fh_reg_pin_everything = {
    .name = "pin-everything",
    .caps = FH_REG_CAP_LOCAL_MR,
    .seg_expose = pe_seg_expose,
    .xfer = pe_xfer,
};
