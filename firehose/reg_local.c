/*
 * reg_local.c -- FH_REG_STRATEGY=firehose: registrations of LOCAL buffers
 * (put sources, get destinations) on conduits that need them (verbs lkeys),
 * through the cache's local pins (fhc_pin_local, charged against
 * MAXVICTIM) instead of a registration per operation.
 *
 * A chunk's local range (<= R bytes, so <= 2 local frames) is pinned once;
 * each remote piece is then posted in sub-pieces, one per local region it
 * meets, each with that region's registration.
 *
 * Fallback (never waits, so it cannot deadlock): when the cache cannot pin
 * -- MAXVICTIM full of local pins (FHC_ERR_AGAIN), memory that cannot be
 * watched by the memory monitor (revoke.c), a registration failure on the
 * bucket-rounded range -- the chunk's local range gets a temporary
 * registration of exactly its bytes, released after completion.
 *
 * Order: the caller acquired the REMOTE firehoses first and releases them
 * after fh_reg_local_release ("pin remote before local": local pins never
 * wait on a peer, so the two kinds of resources cannot form a cycle).
 */
#include <assert.h>
#include <string.h>

#include "cache/fhc.h"
#include "internal.h"

/* Whether [l, l+n) needs a local registration for this transfer. */
static int needs_pin(const fh_rt_t *rt, bool is_put, size_t n)
{
    return rt->limits.needs_local_mr && !(is_put && n <= rt->limits.max_inject);
}

int fh_reg_local_pin(fh_rt_t *rt, bool is_put, char *l, size_t n, fh_reg_lpin_t *lp)
{
    memset(lp, 0, sizeof *lp);
    lp->base = (uintptr_t)l;
    lp->len = n;
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

int fh_reg_local_post(fh_tls_t *t, bool is_put, int rank, const fh_reg_lpin_t *lp,
                      char *l, uint64_t remote, size_t n, const fh_rkey_t *rk,
                      fh_ctr_t *ctr)
{
    assert((uintptr_t)l >= lp->base && (uintptr_t)l + n <= lp->base + lp->len);
    if (lp->npins == 0)      /* not needed, or the temporary registration */
        return fh_rma_post_ex(t, is_put, rank, l, lp->temp, remote, n, rk, ctr, false);
    int rc = FH_OK;
    uintptr_t a = (uintptr_t)l, end = a + n;
    for (unsigned p = 0; p < lp->npins && rc == FH_OK; p++)
        for (unsigned i = 0; i < lp->pin[p].nmr && rc == FH_OK; i++) {
            uintptr_t lo = lp->pin[p].mr_base[i], hi = lo + lp->pin[p].mr_len[i];
            if (hi <= a || lo >= end)
                continue;
            assert(lo <= a);       /* pins cover the range in address order */
            uintptr_t e = hi < end ? hi : end;
            rc = fh_rma_post_ex(t, is_put, rank, (char *)a, lp->pin[p].mr[i],
                                remote + (a - (uintptr_t)l), e - a, rk, ctr, false);
            a = e;
        }
    assert(rc != FH_OK || a == end);
    return rc;
}

void fh_reg_local_release(fh_rt_t *rt, fh_reg_lpin_t *lp)
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

size_t fh_reg_local_bytes(fh_rt_t *rt)
{
    struct fhc *c = fh_reg_lock(rt);
    fhc_stats_t s;
    memset(&s, 0, sizeof s);
    if (c)
        fhc_stats(c, &s);
    fh_reg_unlock(rt);
    return s.local_bytes;
}
