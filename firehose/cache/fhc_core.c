/*
 * fhc_core.c -- creating the cache, deriving F and the frame size, the
 * message dispatch, statistics and test queries.  The two roles live in
 * fhc_target*.c and fhc_initiator*.c (maps: fhc_target.h,
 * fhc_initiator.h), the invariants in fhc_check.c.
 */
#include "fhc_internal.h"
#include "fhc_wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int config_error(char *why, size_t whylen, const char *what)
{
    if (why && whylen)
        snprintf(why, whylen, "%s", what);
    return FHC_ERR_CONFIG;
}

int fhc_create(const fhc_params_t *p, const fhc_env_t *env, fhc_t **out,
               char *why, size_t whylen)
{
    *out = NULL;
    if (!p || !env || !env->pin || !env->unpin || !env->allowed || !env->send)
        return config_error(why, whylen, "missing parameters or callbacks");
    if (p->nranks < 1 || p->rank >= p->nranks)
        return config_error(why, whylen, "rank outside [0, nranks)");
    if (p->bucket < 8 || (p->bucket & (p->bucket - 1)))
        return config_error(why, whylen, "bucket size must be a power of two >= 8");
    if (p->region_max < p->bucket)
        return config_error(why, whylen, "region max smaller than a bucket");
    if (p->put_in_move > FHC_WIRE_MAX_DATA)
        return config_error(why, whylen, "put_in_move larger than 64 KiB");
    if (p->maxvictim_max && p->maxvictim_max < p->maxvictim)
        return config_error(why, whylen, "maxvictim_max smaller than maxvictim");

    size_t F = 0;
    if (p->nranks > 1) {
        F = p->M / (p->nranks - 1);
        F -= F % p->bucket;
        if (F < p->bucket)
            return config_error(why, whylen,
                "M too small: F = M/(N-1) must be at least one bucket");
    }
    /* R: the largest power-of-two multiple of B within region_max, F and
     * FHC_MAX_PIECES buckets.  R <= F is what makes every chunk fit. */
    size_t R = p->bucket;
    while (R <= SIZE_MAX / 2 && R * 2 <= p->region_max &&
           R * 2 <= FHC_MAX_PIECES * p->bucket && (p->nranks == 1 || R * 2 <= F))
        R *= 2;

    fhc_t *c = calloc(1, sizeof *c);
    if (!c)
        return FHC_ERR_NO_MEMORY;
    c->peer = calloc(p->nranks, sizeof *c->peer);
    if (!c->peer) {
        free(c);
        return FHC_ERR_NO_MEMORY;
    }
    c->p = *p;
    if (!c->p.maxvictim_max || !c->p.victim_adaptive)
        c->p.maxvictim_max = c->p.maxvictim;
    c->env = *env;
    c->F = F;
    c->R = R;
    c->floor = F;
    while (((size_t)1 << c->bshift) < p->bucket)
        c->bshift++;
    fhc_map_init(&c->tbucket);
    fhc_map_init(&c->holds);
    fhc_map_init(&c->ibucket);
    fhc_map_init(&c->pbucket);
    fhc_map_init(&c->moves);
    if (fhc_ghost_init(c) < 0) {
        fhc_destroy(c);
        return FHC_ERR_NO_MEMORY;
    }
    *out = c;
    return 0;
}

void fhc_destroy(fhc_t *c)
{
    if (!c)
        return;
    while (c->def.head) {
        fhc_deferred_t *d = fhc_entry(c->def.head, fhc_deferred_t, link);
        fhc_list_unlink(&c->def, &d->link);
        free(d);
    }
    fhc_initiator_destroy(c);
    fhc_target_destroy(c);
    for (uint32_t i = 0; i < c->p.nranks; i++)
        free(c->peer[i]);
    free(c->peer);
    fhc_map_fini(&c->tbucket);
    fhc_map_fini(&c->holds);
    fhc_map_fini(&c->ibucket);
    fhc_map_fini(&c->pbucket);
    fhc_map_fini(&c->moves);
    fhc_ghost_fini(c);
    free(c);
}

size_t fhc_F(const fhc_t *c) { return c->F; }
size_t fhc_region_max(const fhc_t *c) { return c->R; }

size_t fhc_chunk_len(const fhc_t *c, uintptr_t addr, size_t len)
{
    size_t room = c->R - addr % c->R;
    return len < room ? len : room;
}

fhc_peer_t *fhc_peer_get(fhc_t *c, uint32_t peer)
{
    assert(peer < c->p.nranks);
    if (!c->peer[peer]) {
        fhc_peer_t *P = calloc(1, sizeof(fhc_peer_t));
        if (P)
            P->budget = P->t_budget = P->t_announced = c->F;
        c->peer[peer] = P;
    }
    return c->peer[peer];
}

void fhc_logf(const fhc_t *c, const char *fmt, ...)
{
    if (!c->env.log)
        return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->env.log(c->env.arg, line);
}

const char *fhc_peer_name(const fhc_t *c, uint32_t peer, char *buf, size_t len)
{
    if (c->env.name)
        c->env.name(c->env.arg, peer, buf, len);
    else
        snprintf(buf, len, "rank %u", peer);
    return buf;
}

void fhc_on_message(fhc_t *c, uint32_t peer, int is_reply, const void *msg,
                    size_t len)
{
    if (peer >= c->p.nranks || peer == c->p.rank) {
        fhc_logf(c, "fhc: message from invalid rank %u dropped", peer);
        return;
    }
    if (is_reply || fhc_wire_kind(msg, len) == FHC_WIRE_REP)
        fhc_initiator_on_reply(c, peer, msg, len);
    else if (fhc_wire_kind(msg, len) == FHC_WIRE_REVOKE)
        fhc_initiator_on_revoke(c, peer, msg, len);
    else if (fhc_wire_kind(msg, len) == FHC_WIRE_REVOKE_ACK)
        fhc_target_on_revoke_ack(c, peer, msg, len);
    else if (fhc_wire_kind(msg, len) == FHC_WIRE_RECLAIM)
        fhc_initiator_on_reclaim(c, peer, msg, len);
    else
        fhc_target_on_request(c, peer, msg, len);
}

void fhc_peer_stats(const fhc_t *c, uint32_t peer, fhc_peer_stats_t *s)
{
    memset(s, 0, sizeof *s);
    if (peer >= c->p.nranks || !c->peer[peer])
        return;
    const fhc_peer_t *P = c->peer[peer];
    *s = P->st;
    s->held_bytes = P->held;
    s->reserved_bytes = P->reserved;
    s->held_regions = P->nheld;
    s->unused_bytes = P->unused_bytes;
    s->pending_moves = P->npending;
    for (const fhc_op_t *op = P->q_head; op; op = op->priv.next)
        s->budget_queue++;
    s->target_held_bytes = P->t_held;
    s->target_held_regions = P->t_nheld;
    for (fhc_link_t *l = P->u_list.head; l; l = l->next)
        s->unused_regions++;
    s->budget = fhc_i_budget(c, P);
    s->t_budget = P->t_budget;
}

void fhc_stats(const fhc_t *c, fhc_stats_t *s)
{
    memset(s, 0, sizeof *s);
    s->registrations = c->registrations;
    s->evictions = c->evictions;
    s->moves_served = c->moves_served;
    s->refused = c->refused;
    s->reaims = c->reaims;
    s->pinned_bytes = c->pinned_bytes;
    s->remote_bytes = c->remote_bytes;
    s->local_bytes = c->local_bytes;
    s->victim_bytes = c->victim_bytes;
    s->victim_len = c->victim_len;
    s->nregions = c->nregions;
    s->invalidations = c->invalidations;
    s->dead_freed = c->dead_freed;
    s->revokes_sent = c->revokes_sent;
    s->dead_bytes = c->dead_bytes;
    s->maxvictim_now = c->mv_now;
    s->victim_repins = c->victim_repins;
    s->maxvictim_grows = c->mv_grows;
    s->maxvictim_shrinks = c->mv_shrinks;
}

uint32_t fhc_revokes_pending(const fhc_t *c)
{
    return c->revokes_pending;
}

int fhc_target_revoking(const fhc_t *c, uint32_t peer, uintptr_t addr,
                        size_t len, const uint64_t key[2])
{
    if (!len || addr > UINTPTR_MAX - len || peer >= c->p.nranks || !c->peer[peer])
        return 0;
    for (fhc_link_t *l = c->peer[peer]->rv_list.head; l; l = l->next) {
        const fhc_hold_t *h = fhc_entry(l, const fhc_hold_t, link);
        if (h->rv_base <= addr && addr + len <= h->rv_end &&
            h->reg->key[0] == key[0] && h->reg->key[1] == key[1])
            return 1;
    }
    return 0;
}

int fhc_target_holds(const fhc_t *c, uint32_t peer, uintptr_t addr,
                     size_t len, const uint64_t key[2])
{
    if (!len || addr > UINTPTR_MAX - len || peer >= c->p.nranks)
        return 0;
    const fhc_region_t *r = fhc_map_get(&c->tbucket, 0, fhc_bno(c, addr));
    if (!r || addr + len > r->base + r->len)
        return 0;
    if (r->key[0] != key[0] || r->key[1] != key[1])
        return 0;
    return fhc_map_get(&c->holds, peer, r->base) != NULL;
}
