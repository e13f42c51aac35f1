/*
 * firehose_local.c -- FH_REG_STRATEGY=firehose: registrations of LOCAL buffers
 * (put sources, get destinations) on conduits that need them (verbs lkeys),
 * through the cache's local pins (fhc_pin_local, charged against
 * MAXVICTIM) instead of a registration per operation.
 *
 * A chunk's local range (<= R bytes, so <= 2 local frames) is pinned once,
 * when the chunk is about to be posted (firehose_xfer.c: after its remote
 * firehoses were acquired); each remote piece is then posted in sub-pieces,
 * one per local region it meets, each with that region's registration
 * (fh_reg_local_mr); the pins are released when the chunk's last RDMA piece
 * completed, before its remote firehoses.
 *
 * Fallback (never waits, so it cannot deadlock): when the cache cannot pin
 * -- MAXVICTIM full of local pins (FHC_ERR_AGAIN), memory that cannot be
 * watched by the memory monitor (firehose_revoke.c), a registration failure on the
 * bucket-rounded range -- the chunk's local range gets a temporary
 * registration of exactly its bytes, released at the chunk's completion.
 *
 * Order: the caller acquired the REMOTE firehoses first and releases them
 * after fh_reg_local_release ("pin remote before local": local pins never
 * wait on a peer, so the two kinds of resources cannot form a cycle).
 */
#include <assert.h>
#include <string.h>

#include "firehose/cache/fhc.h"
#include "firehose_internal.h"

/* Whether [l, l+n) needs a local registration for this transfer. */
static int needs_pin(const fh_core_t *rt, bool is_put, size_t n)
{
    return rt->limits.needs_local_mr && !(is_put && n <= rt->limits.max_inject);
}

int fh_reg_local_pin(fh_core_t *rt, bool is_put, char *l, size_t n, fh_reg_lpin_t *lp)
{
    /* No memset: lp is large (2 x FHC_MAX_PIECES registrations) and this
     * runs for every chunk; fhc_pin_local fills what it returns. */
    lp->base = (uintptr_t)l;
    lp->len = n;
    lp->npins = 0;
    lp->temp = NULL;
    if (!needs_pin(rt, is_put, n))
        return FH_OK;
    struct fhc *c = fh_reg_lock(rt);
    int rc = c ? 0 : FHC_ERR_INVALID;
    if (c)
        fh_mm_sync_locked(rt, c);   /* never a pin of memory known to be freed */
    for (size_t off = 0; rc == 0 && off < n;) {
        size_t k = fhc_chunk_len(c, (uintptr_t)l + off, n - off);
        assert(lp->npins < FH_REG_LPIN_MAX);
        rc = fhc_pin_local(c, (uintptr_t)l + off, k, &lp->pin[lp->npins]);
        if (rc == 0)
            lp->npins++;
        off += k;
    }
    if (rc != 0)
        while (lp->npins)
            fhc_unpin_local(c, &lp->pin[--lp->npins]);
    fh_reg_unlock(rt);
    if (rc == 0)
        return FH_OK;
    fh_rkey_t unused;
    int mrc = rt->cops->mr_reg(rt->conduit, l, n, FH_MR_LOCAL, &lp->temp, &unused);
    if (mrc != FH_OK) {
        lp->temp = NULL;
        return fh_set_error(mrc, "cannot register the local buffer %p (+%zu): %s",
                            (void *)l, n, fh_strerror(mrc));
    }
    return FH_OK;
}

struct fh_mr *fh_reg_local_mr(const fh_reg_lpin_t *lp, uintptr_t a, size_t *max)
{
    assert(a >= lp->base && a < lp->base + lp->len);
    if (lp->npins == 0) {    /* not needed, or the temporary registration */
        *max = lp->base + lp->len - a;
        return lp->temp;
    }
    for (unsigned p = 0; p < lp->npins; p++)
        for (unsigned i = 0; i < lp->pin[p].nmr; i++) {
            uintptr_t lo = lp->pin[p].mr_base[i], hi = lo + lp->pin[p].mr_len[i];
            if (a >= lo && a < hi) {
                *max = hi - a;
                return lp->pin[p].mr[i];
            }
        }
    /* The pins cover [base, base+len): unreachable. */
    fh_fatal("firehose cache: local address %p outside its pins", (void *)a);
}

void fh_reg_local_release(fh_core_t *rt, fh_reg_lpin_t *lp)
{
    if (lp->npins) {
        struct fhc *c = fh_reg_lock(rt);
        while (lp->npins)
            fhc_unpin_local(c, &lp->pin[--lp->npins]);
        fh_reg_unlock(rt);
    }
    if (lp->temp != NULL)
        rt->cops->mr_dereg(rt->conduit, lp->temp);
    lp->temp = NULL;
}
