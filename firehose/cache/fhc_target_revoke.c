/*
 * fhc_target_revoke.c -- memory that was freed or reused: fhc_invalidate
 * takes every region meeting the range out of the bucket map, turns its
 * holds into REVOKE records (one REVOKE to each holder) and deregisters it
 * once the last ack and the last local pin are gone.
 */
#include "fhc_target.h"
#include "fhc_wire.h"

#include <stdlib.h>

/* -------------------------------------------------------- invalidation */

/* Turns the peer's hold on dead region r into a REVOKE record and sends the
 * REVOKE.  Uses the hold's own memory: nothing to allocate, nothing to fail. */
static void hold_revoke(fhc_t *c, fhc_peer_t *P, fhc_hold_t *h)
{
    fhc_region_t *r = h->reg;
    assert(r->dead && r->remote_ref > 0);
    fhc_map_del(&c->holds, h->peer, r->base);
    fhc_list_unlink(&P->t_list, &h->link);
    fhc_t_held_change(c, P, r->len, 0);
    P->t_nheld--;
    r->remote_ref--;
    h->rv_id = ++P->rv_next;
    h->rv_base = r->base;
    h->rv_end = r->base + r->len;
    fhc_list_push_head(&P->rv_list, &h->link);
    r->revoking++;
    c->revokes_pending++;
    c->revokes_sent++;
    fhc_revoke_t m = { .kind = FHC_WIRE_REVOKE, .id = h->rv_id, .lo = h->rv_base,
                       .hi = h->rv_end };
    uint8_t buf[FHC_REVOKE_LEN];
    size_t n = fhc_revoke_encode(&m, buf, sizeof buf);
    assert(n == sizeof buf);
    c->env.send(c->env.arg, h->peer, 0, buf, n);
}

static void region_kill(fhc_t *c, fhc_region_t *r)
{
    assert(!r->dead);
    fhc_cat_leave(c, r);
    for (uintptr_t a = r->base; a < r->base + r->len; a += c->p.bucket)
        fhc_map_del(&c->tbucket, 0, fhc_bno(c, a));
    r->dead = 1;
    c->dead_bytes += r->len;
    c->invalidations++;
    for (uint32_t p = 0; p < c->p.nranks && r->remote_ref; p++) {
        fhc_hold_t *h = c->peer[p] ? fhc_map_get(&c->holds, p, r->base) : NULL;
        if (h && h->reg == r)
            hold_revoke(c, c->peer[p], h);
    }
    assert(r->remote_ref == 0);
    fhc_region_settle(c, r);
}

unsigned fhc_invalidate(fhc_t *c, uintptr_t addr, size_t len)
{
    if (!len)
        return 0;
    uintptr_t end = len > UINTPTR_MAX - addr ? UINTPTR_MAX : addr + len;
    uintptr_t lo = fhc_bucket_down(c, addr);
    unsigned n = 0;
    if ((end - lo) / c->p.bucket > (uintptr_t)c->nregions * 4) {
        /* A large range: walk the regions rather than the buckets. */
        for (fhc_link_t *l = c->all.head, *next; l; l = next) {
            next = l->next;
            fhc_region_t *r = fhc_entry(l, fhc_region_t, all_link);
            if (!r->dead && r->base < end && addr < r->base + r->len) {
                region_kill(c, r);
                n++;
            }
        }
        return n;
    }
    for (uintptr_t a = lo; a < end; a += c->p.bucket) {
        fhc_region_t *r = fhc_region_at(c, a);
        if (r) {
            region_kill(c, r);
            n++;
        }
    }
    return n;
}

/* The peer is dead (fhc_peer_dead): it will ack none of our REVOKEs, and
 * can no longer write through the firehoses they revoke, so each counts as
 * acked -- the region is deregistered once its other acks and local pins
 * are gone, and fhc_revokes_pending (which the runtime waits on before it
 * publishes memory) no longer counts them.  A late ack finds no record and
 * is dropped. */
/* P's REVOKE record h is answered (acked, or P is dead): gone from P's
 * list, one fewer pending on its region and in total. */
static void revoke_answered(fhc_t *c, fhc_peer_t *P, fhc_hold_t *h)
{
    fhc_list_unlink(&P->rv_list, &h->link);
    fhc_region_t *r = h->reg;
    free(h);
    assert(r->revoking > 0 && c->revokes_pending > 0);
    r->revoking--;
    c->revokes_pending--;
    fhc_region_settle(c, r);
}

void fhc_target_forget_revokes(fhc_t *c, fhc_peer_t *P)
{
    while (P->rv_list.head)
        revoke_answered(c, P, fhc_entry(P->rv_list.head, fhc_hold_t, link));
}

void fhc_target_on_revoke_ack(fhc_t *c, uint32_t peer, const void *msg, size_t len)
{
    fhc_revoke_t a;
    char why[96];
    fhc_peer_t *P = c->peer[peer];
    if (fhc_revoke_decode(msg, len, &a, why, sizeof why) < 0 ||
        a.kind != FHC_WIRE_REVOKE_ACK) {
        fhc_logf(c, "fhc: malformed revoke ack from %s dropped", FHC_PEER_NAME(c, peer));
        return;
    }
    fhc_link_t *l = P ? P->rv_list.head : NULL;
    while (l && fhc_entry(l, fhc_hold_t, link)->rv_id != a.id)
        l = l->next;
    if (!l) {
        fhc_logf(c, "fhc: revoke ack from %s for unknown revoke %llu dropped",
                 FHC_PEER_NAME(c, peer), (unsigned long long)a.id);
        return;
    }
    revoke_answered(c, P, fhc_entry(l, fhc_hold_t, link));
}
