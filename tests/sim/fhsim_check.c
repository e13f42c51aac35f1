/*
 * fhsim_check.c -- the checks of tests/sim/fhsim, made independently of
 * the cache's own bookkeeping (those at registration time are fhsim_net.c's
 * env_pin; the rest are here):
 *   - pin(): no two live registrations of a rank overlap; a registration for
 *     remote access lies inside the rank's segment; the rank's pinned bytes
 *     stay <= M + MAXVICTIM (with --victim adaptive: M + --maxvictim-max,
 *     default 4 x MAXVICTIM; the cache's own check holds it to M plus the
 *     effective MAXVICTIM, fhc_ghost.h);
 *   - RDMA, when it starts and when it completes: every piece lies in a live
 *     registration of the target with that key, which the target's cache
 *     says the initiator holds; the pieces tile the operation exactly;
 *     if the memory was freed since the registration (stale), the target
 *     must instead still be waiting for this initiator's REVOKE-ACK of it
 *     (so a stale key is never used once the target could have published
 *     the memory anew, and never deregistered under an RDMA in flight);
 *   - an operation outside the target's segment fails with
 *     FHC_ERR_OUT_OF_SEGMENT, every other operation succeeds;
 *   - progress: no step without a completion for --stall steps while ops are
 *     in flight (deadlock), no op older than --max-age steps (starvation);
 *   - after every step, fhc_check_peer(rank, peer) for each (rank, peer) the
 *     step touched (incremental: O(that pair's firehoses) plus the rank's
 *     global counters); fhc_check_invariants on one random rank every
 *     --check-sample steps (default 100); on every rank every --check-every
 *     steps (default max(10000, 100 * nodes)) and at the end.  A full check
 *     of 1024 ranks after every step would take hours; the touched-pair check
 *     covers every state change, the sampled and periodic full checks catch
 *     corruption of state nobody touched;
 *   - at quiescence: initiator and target agree on every pair's holdings,
 *     nothing is in use, and destroying the caches unpins everything.
 * Exit 0 when all hold, 1 with a message and a dump otherwise (fail).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fhsim_sim.h"

void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fhsim: FAIL at step %" PRIu64 ": ", now);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    dump_state();
    exit(1);
}

/* ------------------------------------------------------------ RDMA */

/* The RDMA check: every piece in a live registration of the target with
 * that key, held by us according to the target's cache; pieces tile the op. */
void check_rdma(const sim_op_t *o, const char *when)
{
    const fhc_op_t *op = &o->op;
    uintptr_t a = op->raddr;
    st.rdma_checks++;
    if (op->npieces == 0 || op->npieces > FHC_MAX_PIECES)
        fail("op %" PRIu64 " (%s): %u pieces", o->id, when, op->npieces);
    for (unsigned i = 0; i < op->npieces; i++) {
        const fhc_piece_t *p = &op->piece[i];
        if (p->addr != a || p->len == 0)
            fail("op %" PRIu64 " (%s): pieces do not tile [%#lx, +%zu)", o->id, when,
                 (unsigned long)op->raddr, op->len);
        size_t idx = (size_t)p->key[0] - 1;
        if (p->key[0] == 0 || idx >= nmrs)
            fail("op %" PRIu64 " (%s): piece key names no registration", o->id, when);
        const mr_t *m = &mrs[idx];
        if (!m->alive || m->node != op->peer || !m->remote || p->addr < m->addr ||
            p->addr + p->len > m->addr + m->len)
            fail("op %" PRIu64 " rank %u -> %u (%s): RDMA on [%#lx, +%zu) but its "
                 "registration is %s", o->id, o->node, op->peer, when,
                 (unsigned long)p->addr, p->len,
                 !m->alive ? "deregistered" : m->node != op->peer ? "another rank's"
                                                                   : "elsewhere");
        int stale = 0;
        for (uintptr_t b = p->addr / opt.bucket; b <= (p->addr + p->len - 1) / opt.bucket; b++)
            stale |= (uint64_t)(uintptr_t)fhc_map_get(&freed_at, op->peer, b) > m->pin_seq;
        if (stale) {
            st.stale_rdma++;
            if (!fhc_target_revoking(nodes[op->peer].c, o->node, p->addr, p->len, p->key))
                fail("op %" PRIu64 " rank %u -> %u (%s): RDMA on [%#lx, +%zu) through a "
                     "registration of freed memory, and the target no longer waits for "
                     "the initiator's revoke ack", o->id, o->node, op->peer, when,
                     (unsigned long)p->addr, p->len);
        } else if (!fhc_target_holds(nodes[op->peer].c, o->node, p->addr, p->len, p->key) &&
                   /* another bucket of its region was freed: being revoked */
                   !fhc_target_revoking(nodes[op->peer].c, o->node, p->addr, p->len,
                                        p->key))
            fail("op %" PRIu64 " rank %u -> %u (%s): target does not record a hold "
                 "by the initiator on [%#lx, +%zu)", o->id, o->node, op->peer, when,
                 (unsigned long)p->addr, p->len);
        a += p->len;
    }
    if (a != op->raddr + op->len)
        fail("op %" PRIu64 " (%s): pieces cover %zu of %zu bytes", o->id, when,
             (size_t)(a - op->raddr), op->len);
}

/* -------------------------------------------------------------- checks */

void check_touched(void)
{
    char why[256];
    for (size_t i = 0; i < ntouched; i++) {
        uint32_t n = touched[2 * i], p = touched[2 * i + 1];
        st.peer_checks++;
        if (fhc_check_peer(nodes[n].c, p, why, sizeof why))
            fail("rank %u, peer %u: %s", n, p, why);
    }
    ntouched = 0;
}

void check_one(uint32_t n)
{
    char why[256];
    st.sample_checks++;
    if (fhc_check_invariants(nodes[n].c, why, sizeof why))
        fail("rank %u: %s", n, why);
}

void check_all(void)
{
    char why[256];
    st.full_checks++;
    for (uint32_t n = 0; n < opt.nodes; n++)
        if (fhc_check_invariants(nodes[n].c, why, sizeof why))
            fail("rank %u: %s", n, why);
}

void check_progress(void)
{
    if (live_n && now - last_progress > opt.stall)
        fail("deadlock: %" PRIu64 " ops in flight, none completed for %" PRIu64
             " steps", live_n, now - last_progress);
    if (live_head && now - live_head->t_start > opt.max_age)
        fail("starvation: op %" PRIu64 " (rank %u -> %u) is %" PRIu64 " steps old",
             live_head->id, live_head->node, live_head->op.peer,
             now - live_head->t_start);
}

/* At quiescence both ends of every pair agree, and nothing is in use. */
void check_quiescent(void)
{
    fhc_peer_stats_t a, b;
    for (uint32_t i = 0; i < opt.nodes; i++)
        for (uint32_t j = 0; j < opt.nodes; j++) {
            if (i == j)
                continue;
            fhc_peer_stats(nodes[i].c, j, &a);
            fhc_peer_stats(nodes[j].c, i, &b);
            if (a.held_bytes != b.target_held_bytes ||
                a.held_regions != b.target_held_regions)
                fail("quiescent: rank %u thinks it holds %zu bytes/%u regions on "
                     "rank %u, which records %zu/%u", i, a.held_bytes, a.held_regions,
                     j, b.target_held_bytes, b.target_held_regions);
            if (a.unused_bytes != a.held_bytes || a.reserved_bytes ||
                a.pending_moves || a.budget_queue)
                fail("quiescent: rank %u -> %u still has firehoses in use or moves "
                     "pending (held %zu unused %zu reserved %zu)", i, j, a.held_bytes,
                     a.unused_bytes, a.reserved_bytes);
        }
}

void dump_state(void)
{
    fprintf(stderr, "fhsim: dump: %" PRIu64 " ops in flight, %zu events queued\n",
            live_n, heap_n);
    unsigned k = 0;
    for (sim_op_t *o = live_head; o && k < 8; o = o->next, k++) {
        fhc_peer_stats_t a, b;
        fhc_peer_stats(nodes[o->node].c, o->op.peer, &a);
        fhc_peer_stats(nodes[o->op.peer].c, o->node, &b);
        fprintf(stderr, "  op %" PRIu64 " rank %u -> %u [%#lx, +%zu) age %" PRIu64
                ": initiator held %zu unused %zu reserved %zu pending %u queue %u; "
                "target records %zu\n", o->id, o->node, o->op.peer,
                (unsigned long)o->op.raddr, o->op.len, now - o->t_start,
                a.held_bytes, a.unused_bytes, a.reserved_bytes, a.pending_moves,
                a.budget_queue, b.target_held_bytes);
    }
}

