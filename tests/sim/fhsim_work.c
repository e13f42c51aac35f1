/*
 * fhsim_work.c -- the workloads of tests/sim/fhsim.c: each step --rate new
 * operation chunks are started by random ranks (each rank keeps at most
 * --window in flight), towards the peer and address the pattern chooses;
 * sometimes a rank pins a local buffer (--local-rate), and with --free-rate
 * a rank frees and reuses 1..4 buckets of its segment (new pages at the same
 * addresses): the sim calls fhc_invalidate, as the runtime does when its
 * memory monitor reports it.  --bad-rate operations go past the target's
 * segment and must fail.  The events due are handled here too: a message
 * arrives, an RDMA completes (checked, then released), a local pin ends.
 *
 * Patterns: random (any peer, anywhere), stencil (4 neighbours on a 2-D
 * grid, halo slots), hotspot (half the ops go to rank 0's first 8 frames);
 * the hot-peer patterns are fhsim.h's.  The oracle (fhsim_oracle.h) gets
 * every operation the cache gets, those outside the segment excepted.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fhsim_sim.h"

/* ------------------------------------------------------------ the ops */

static void live_remove(sim_op_t *o)
{
    if (o->prev)
        o->prev->next = o->next;
    else
        live_head = o->next;
    if (o->next)
        o->next->prev = o->prev;
    else
        live_tail = o->prev;
    live_n--;
}

static void op_finish(sim_op_t *o)
{
    uint64_t lat = now - o->t_start;
    if (lat > st.max_latency)
        st.max_latency = lat;
    nodes[o->node].inflight--;
    live_remove(o);
    st.completed++;
    last_progress = now;
    free(o);
}

/* The RDMA check: every piece in a live registration of the target with
 * that key, held by us according to the target's cache; pieces tile the op. */

static void op_ready(fhc_op_t *op, int status)
{
    sim_op_t *o = op->user;
    if (o->expect_error) {
        if (status != FHC_ERR_OUT_OF_SEGMENT)
            fail("op %" PRIu64 " outside the segment of rank %u completed with %d",
                 o->id, op->peer, status);
        st.expected_errors++;
        op_finish(o);
        return;
    }
    if (status == FHC_ERR_NO_MEMORY && opt.pin_fail) {
        st.expected_errors++;
        op_finish(o);
        return;
    }
    if (status == FHC_DONE_IN_MOVE) {
        if (!op->put_data || op->len > opt.put_in_move)
            fail("op %" PRIu64 ": completed in a move but is not a small put", o->id);
        st.in_move++;
        op_finish(o);
        return;
    }
    if (status != FHC_HIT)
        fail("op %" PRIu64 " rank %u -> %u [%#lx, +%zu) failed: %d", o->id, o->node,
             op->peer, (unsigned long)op->raddr, op->len, status);
    check_rdma(o, "start");
    ev_push((event_t){ .t = now + 1 + rnd_below(opt.rdma_delay),
                       .kind = EV_RDMA_DONE, .data = o });
}

static uint32_t other_than(uint32_t self)
{
    uint32_t p = (uint32_t)rnd_below(opt.nodes - 1);
    return p >= self ? p + 1 : p;
}

static size_t random_len(void)
{
    uint64_t r = rnd_below(100);
    size_t R = opt.region_max;
    if (r < 60)
        return 1 + rnd_below(256);
    if (r < 85)
        return 1 + rnd_below(opt.put_in_move ? 2 * opt.put_in_move : 4096);
    return 1 + rnd_below(R);
}

/* Chooses (target, address, length) by pattern. */
static void choose(uint32_t src, uint32_t *dst, uintptr_t *addr, size_t *len)
{
    size_t R = opt.region_max;
    *len = random_len();
    if (pat_on) {
        *dst = fhsim_pattern_peer(&pat, src, now, rnd());
        size_t win = fhsim_pattern_window(&pat, src);
        size_t off = rnd_below(pat.ws);
        *addr = SEG_BASE + win + off;
        if (*len > pat.ws - off)
            *len = pat.ws - off;    /* stay in the pair's working set */
    } else if (!strcmp(opt.pattern, "stencil")) {
        uint32_t w = 1;
        while (w * w < opt.nodes)
            w++;
        uint32_t dir = (uint32_t)rnd_below(4);
        uint32_t step = dir < 2 ? 1 : w;
        *dst = dir % 2 ? (src + step) % opt.nodes
                       : (src + opt.nodes - step % opt.nodes) % opt.nodes;
        if (*dst == src)
            *dst = other_than(src);
        /* each neighbour writes its own halo: 2 frames per direction */
        size_t slot = opt.seg / 4;
        size_t win = 2 * R < slot ? 2 * R : slot;
        size_t off = dir * slot + rnd_below(win);
        *addr = SEG_BASE + off;
    } else if (!strcmp(opt.pattern, "hotspot") && rnd_below(2)) {
        *dst = src == 0 ? other_than(src) : 0;
        size_t hot = 8 * R < opt.seg ? 8 * R : opt.seg;
        *addr = SEG_BASE + rnd_below(hot);
    } else {
        *dst = other_than(src);
        *addr = SEG_BASE + rnd_below(opt.seg);
    }
    if (*addr + *len > SEG_BASE + opt.seg)
        *len = SEG_BASE + opt.seg - *addr;
}

void start_op(void)
{
    uint32_t src = (uint32_t)rnd_below(opt.nodes);
    node_t *n = &nodes[src];
    if (n->inflight >= opt.window)
        return;
    sim_op_t *o = calloc(1, sizeof *o);
    if (!o)
        fail("out of memory");
    static char putbuf[65536];
    uint32_t dst;
    uintptr_t addr;
    size_t len;
    choose(src, &dst, &addr, &len);
    if (opt.bad_rate && permille(opt.bad_rate)) {
        addr = SEG_BASE + opt.seg + rnd_below(opt.seg);   /* past the segment */
        o->expect_error = 1;
    }
    len = fhc_chunk_len(n->c, addr, len);
    if (!o->expect_error && len &&
        fhsim_oracle_access(oracle, dst, src, (addr - SEG_BASE) / opt.bucket,
                            (addr - SEG_BASE + len - 1) / opt.bucket) < 0)
        fail("oracle: out of memory");
    o->node = src;
    o->id = next_op_id++;
    o->t_start = now;
    o->op.peer = dst;
    o->op.raddr = addr;
    o->op.len = len;
    o->op.put_data = rnd_below(3) == 0 ? putbuf : NULL;
    o->op.ready = op_ready;
    o->op.user = o;
    o->prev = live_tail;
    if (live_tail)
        live_tail->next = o;
    else
        live_head = o;
    live_tail = o;
    live_n++;
    n->inflight++;
    st.started++;
    touch(src, dst);
    int rc = fhc_acquire(n->c, &o->op);
    if (rc == FHC_HIT) {
        st.hits++;
        op_ready(&o->op, FHC_HIT);
    } else if (rc == FHC_PENDING) {
        st.pending++;
    } else {
        fail("fhc_acquire(rank %u -> %u, %#lx, %zu) = %d", src, dst,
             (unsigned long)addr, len, rc);
    }
}

static void rdma_done(sim_op_t *o)
{
    check_rdma(o, "completion");
    touch(o->node, o->op.peer);
    if (opt.skip_release && rnd_below(50) == 0)
        st.skipped_releases++;      /* deliberate bug: never released */
    else
        fhc_release(nodes[o->node].c, &o->op);
    op_finish(o);
}

void start_local_pin(void)
{
    uint32_t id = (uint32_t)rnd_below(opt.nodes);
    sim_local_t *s = calloc(1, sizeof *s);
    if (!s)
        fail("out of memory");
    uintptr_t addr = rnd_below(2) ? SEG_BASE + rnd_below(opt.seg)
                                  : HEAP_BASE + rnd_below(opt.seg);
    size_t len = fhc_chunk_len(nodes[id].c, addr, random_len());
    if (addr >= SEG_BASE && addr < SEG_BASE + opt.seg && addr + len > SEG_BASE + opt.seg)
        len = SEG_BASE + opt.seg - addr;
    s->node = id;
    touch(id, id);
    int rc = fhc_pin_local(nodes[id].c, addr, len, &s->l);
    if (rc == FHC_ERR_AGAIN || (rc == FHC_ERR_NO_MEMORY && opt.pin_fail)) {
        st.local_again++;
        free(s);
        return;
    }
    if (rc < 0)
        fail("fhc_pin_local(rank %u, %#lx, %zu) = %d", id, (unsigned long)addr, len, rc);
    for (unsigned i = 0; i < s->l.nmr; i++) {
        size_t idx = (size_t)(uintptr_t)s->l.mr[i] - 1;
        if (idx >= nmrs || !mrs[idx].alive || mrs[idx].node != id)
            fail("local pin of rank %u returned a dead registration", id);
    }
    st.local_pins++;
    ev_push((event_t){ .t = now + 1 + rnd_below(opt.rdma_delay),
                       .kind = EV_UNPIN_LOCAL, .data = s });
}

/* A rank frees 1..4 buckets of its segment and gets new pages at the same
 * addresses; its memory monitor would report it: fhc_invalidate. */
void free_memory(void)
{
    uint32_t id = (uint32_t)rnd_below(opt.nodes);
    size_t nb = 1 + rnd_below(4);
    uintptr_t a = SEG_BASE + rnd_below(opt.seg / opt.bucket) * opt.bucket;
    if (a + nb * opt.bucket > SEG_BASE + opt.seg)
        nb = (SEG_BASE + opt.seg - a) / opt.bucket;
    free_seq++;
    if (fhc_map_reserve(&freed_at, nb) < 0)
        fail("out of memory");
    for (size_t i = 0; i < nb; i++) {
        uint64_t b = a / opt.bucket + i;
        fhc_map_put(&freed_at, id, b, (void *)(uintptr_t)free_seq);
        /* Registrations of the old pages are no longer "current": a new
         * one may overlap them. */
        size_t idx1 = (size_t)(uintptr_t)fhc_map_get(&pinned_buckets, id, b);
        if (idx1) {
            const mr_t *m = &mrs[idx1 - 1];
            for (uintptr_t x = m->addr; x < m->addr + m->len; x += opt.bucket)
                if (fhc_map_get(&pinned_buckets, id, x / opt.bucket) == (void *)idx1)
                    fhc_map_del(&pinned_buckets, id, x / opt.bucket);
        }
    }
    st.frees++;
    fhc_invalidate(nodes[id].c, a, nb * opt.bucket);
    for (uint32_t p = 0; p < opt.nodes; p++)
        touch(id, p);
}

void handle(event_t e)
{
    switch (e.kind) {
    case EV_MSG:
        touch(e.dst, e.src);
        fhc_on_message(nodes[e.dst].c, e.src, e.is_reply, e.data, e.len);
        free(e.data);
        break;
    case EV_RDMA_DONE:
        rdma_done(e.data);
        break;
    case EV_UNPIN_LOCAL: {
        sim_local_t *s = e.data;
        for (unsigned i = 0; i < s->l.nmr; i++) {
            size_t idx = (size_t)(uintptr_t)s->l.mr[i] - 1;
            if (!mrs[idx].alive)
                fail("rank %u: a local registration died while pinned", s->node);
        }
        touch(s->node, s->node);
        fhc_unpin_local(nodes[s->node].c, &s->l);
        free(s);
        break;
    }
    }
}
