/*
 * coll.c -- barrier (dissemination over AMs) and allgather.
 *
 * Barrier: in round k rank r notifies (r + 2^k) mod N and waits for the
 * notification from (r - 2^k) mod N, for ceil(log2 N) rounds.  A peer can be
 * at most one barrier ahead of us (it cannot finish barrier e+1 before we
 * entered it), so arrivals are counted per round and per epoch parity.
 * Only one thread of a rank is inside a barrier at a time (coll_lock).
 *
 * Allgather: a barrier (so every rank is inside the collective and none is
 * blocked on us for network progress), then the bootstrap's allgather.  It is
 * used for rare metadata (segment creation), not for data.
 */
#include <string.h>

#include "internal.h"

/* args: round, epoch */
static void barrier_notify(fh_token_t tok, void *buf, size_t n, const uint64_t *a,
                           unsigned na)
{
    (void)buf;
    (void)n;
    int src = -1;
    fh_token_source(tok, &src);
    fh_rt_t *rt = fh_rt;
    if (na != 2 || a[0] >= 64) {
        fh_am_drop(fh_token_path(tok), src, "a malformed barrier message");
        return;
    }
    /* In round k only (me - 2^k) mod N notifies us: anyone else's arrival
     * would let us leave the barrier early. */
    uint64_t dist = (uint64_t)1 << a[0];
    if (dist >= (uint64_t)rt->nranks ||
        (uint64_t)src != ((uint64_t)rt->rank + (uint64_t)rt->nranks - dist % (uint64_t)rt->nranks) %
                             (uint64_t)rt->nranks) {
        fh_am_drop(fh_token_path(tok), src, "a barrier arrival for round %llu, which is not "
                   "this rank's to send", (unsigned long long)a[0]);
        return;
    }
    atomic_fetch_add(&rt->barrier_arrived[a[0]][a[1] & 1], 1);
}

void fh_coll_init(void)
{
    fh_am_register_internal(FH_H_BARRIER, barrier_notify, "barrier");
}

int fh_barrier_internal(fh_tls_t *t)
{
    fh_rt_t *rt = fh_rt;
    if (rt->nranks == 1)
        return FH_OK;
    pthread_mutex_lock(&rt->coll_lock);
    uint64_t epoch = ++rt->barrier_epoch;
    int rc = FH_OK;
    for (unsigned k = 0, dist = 1; dist < (unsigned)rt->nranks; k++, dist <<= 1) {
        int to = (int)(((unsigned)rt->rank + dist) % (unsigned)rt->nranks);
        uint64_t args[2] = {k, epoch};
        rc = fh_am_send_request(t, to, FH_AM_REQ_SHORT, FH_H_BARRIER, NULL, 0, 0, args, 2);
        if (rc != FH_OK)
            break;
        _Atomic uint32_t *slot = &rt->barrier_arrived[k][epoch & 1];
        for (unsigned idle = 0; atomic_load(slot) == 0;)
            fh_wait_round(t, &idle);
        atomic_fetch_sub(slot, 1);
    }
    pthread_mutex_unlock(&rt->coll_lock);
    return rc;
}

int fh_barrier(void)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_barrier", &rc);
    if (t == NULL)
        return rc;
    return fh_barrier_internal(t);
}

int fh_allgather(const void *in, void *out, size_t len)
{
    int rc;
    fh_tls_t *t = fh_enter("fh_allgather", &rc);
    if (t == NULL)
        return rc;
    if (len > 0 && (in == NULL || out == NULL))
        return fh_set_error(FH_ERR_INVALID, "fh_allgather: NULL buffer with %zu bytes", len);
    if (len > ((size_t)1 << 30) / (size_t)fh_rt->nranks)
        return fh_set_error(FH_ERR_TOO_BIG, "fh_allgather: %zu bytes per rank is too much",
                            len);
    if ((rc = fh_barrier_internal(t)) != FH_OK)
        return rc;
    pthread_mutex_lock(&fh_rt->coll_lock);
    rc = fh_rt->boot->ops->allgather(fh_rt->boot, in, out, len);
    pthread_mutex_unlock(&fh_rt->coll_lock);
    return rc == FH_OK ? FH_OK : fh_set_error(FH_ERR_BOOTSTRAP, "fh_allgather failed");
}
