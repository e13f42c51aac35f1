/*
 * fhsim_net.c -- the simulated network and ranks of tests/sim/fhsim.c: one
 * stream of random draws, the event queue (a binary heap ordered by due step,
 * then by push order), the pairs each step touched, and the environment each
 * rank's cache calls (fhc_env_t): registrations recorded and checked as they
 * are made and dropped, messages delayed by 1..--delay steps.
 *
 * The network keeps the requests of one (initiator, target) pair in order
 * (the runtime sends moves on one path per pair); different pairs overtake
 * each other freely, and with --reorder-replies replies overtake each other
 * too (--inject-bug reorder-requests lets requests do so as well).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fhsim_sim.h"

node_t *nodes;
uint64_t now, seq_no, rng_state;
event_t *heap;
size_t heap_n, heap_cap;
uint64_t *flow_last;
uint64_t *rflow_last;
mr_t *mrs;
size_t nmrs, cap_mrs;
fhc_map_t pinned_buckets;
fhc_map_t freed_at;
uint64_t free_seq;
sim_op_t *live_head, *live_tail;
uint64_t live_n, last_progress, next_op_id;
uint32_t *touched;
size_t ntouched, cap_touched;
fhsim_counts_t st;

uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }
int permille(unsigned p) { return rnd_below(1000) < p; }

/* ---------------------------------------------------------- event heap */

int ev_less(const event_t *a, const event_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

void ev_push(event_t e)
{
    if (heap_n == heap_cap) {
        heap_cap = heap_cap ? 2 * heap_cap : 1024;
        heap = realloc(heap, heap_cap * sizeof *heap);
        if (!heap)
            fail("out of memory");
    }
    e.seq = seq_no++;
    size_t i = heap_n++;
    while (i && ev_less(&e, &heap[(i - 1) / 2])) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = e;
}

event_t ev_pop(void)
{
    event_t top = heap[0], last = heap[--heap_n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const event_t *best = &last;
        if (l < heap_n && ev_less(&heap[l], best))
            m = l, best = &heap[l];
        if (l + 1 < heap_n && ev_less(&heap[l + 1], best))
            m = l + 1;
        if (m == i)
            break;
        heap[i] = heap[m];
        i = m;
    }
    if (heap_n)
        heap[i] = last;
    return top;
}

void touch(uint32_t node, uint32_t peer)
{
    if (ntouched == cap_touched) {
        cap_touched = cap_touched ? 2 * cap_touched : 64;
        touched = realloc(touched, cap_touched * 2 * sizeof *touched);
        if (!touched)
            fail("out of memory");
    }
    touched[2 * ntouched] = node;
    touched[2 * ntouched + 1] = peer;
    ntouched++;
}

/* ----------------------------------------------------- the environment */

int seg_contains(uintptr_t a, size_t len)
{
    return a >= SEG_BASE && len <= opt.seg && a - SEG_BASE <= opt.seg - len;
}

int env_allowed(void *arg, uintptr_t addr, size_t len)
{
    (void)arg;
    return seg_contains(addr, len);
}

int env_pin(void *arg, uintptr_t addr, size_t len, int remote, uintptr_t want,
                   void **mrp,
                   uint64_t key[2], uint64_t *reach)
{
    *reach = 0;
    (void)want;
    node_t *n = arg;
    if (opt.pin_fail && permille(opt.pin_fail))
        return FHC_ERR_NO_MEMORY;
    if (remote && !seg_contains(addr, len))
        fail("rank %u registered [%#lx, +%zu) for remote access outside its segment",
             n->id, (unsigned long)addr, len);
    if (fhc_map_reserve(&pinned_buckets, len / opt.bucket) < 0)
        fail("out of memory");
    for (uintptr_t a = addr; a < addr + len; a += opt.bucket)
        if (fhc_map_get(&pinned_buckets, n->id, a / opt.bucket))
            fail("rank %u: registration [%#lx, +%zu) overlaps a live one at %#lx",
                 n->id, (unsigned long)addr, len, (unsigned long)a);
    if (nmrs == cap_mrs) {
        cap_mrs = cap_mrs ? 2 * cap_mrs : 4096;
        mrs = realloc(mrs, cap_mrs * sizeof *mrs);
        if (!mrs)
            fail("out of memory");
    }
    size_t idx = nmrs++;
    mrs[idx] = (mr_t){ .node = n->id, .addr = addr, .len = len, .alive = 1,
                       .remote = remote, .pin_seq = free_seq };
    for (uintptr_t a = addr; a < addr + len; a += opt.bucket)
        fhc_map_put(&pinned_buckets, n->id, a / opt.bucket, (void *)(idx + 1));
    n->pinned += len;
    fhc_stats_t cs;
    fhc_stats(n->c, &cs);       /* read-only: fine from inside a callback */
    size_t mv = opt.victim_adaptive ? opt.maxvictim_max : opt.maxvictim;
    if (n->pinned > opt.M + mv + cs.dead_bytes)
        fail("I1: rank %u pins %zu bytes > M + MAXVICTIM = %zu (+ %zu invalidated)",
             n->id, n->pinned, opt.M + mv, cs.dead_bytes);
    *mrp = (void *)(idx + 1);
    key[0] = idx + 1;
    key[1] = 0xF1E0000000000000ull | n->id;
    return 0;
}

void env_unpin(void *arg, void *mrp)
{
    node_t *n = arg;
    size_t idx = (size_t)(uintptr_t)mrp - 1;
    if (!mrp || idx >= nmrs || !mrs[idx].alive || mrs[idx].node != n->id)
        fail("rank %u unpins an unknown or dead registration", n->id);
    mr_t *m = &mrs[idx];
    for (uintptr_t a = m->addr; a < m->addr + m->len; a += opt.bucket)
        if (fhc_map_get(&pinned_buckets, n->id, a / opt.bucket) == (void *)(idx + 1))
            fhc_map_del(&pinned_buckets, n->id, a / opt.bucket);
    m->alive = 0;
    n->pinned -= m->len;
}

void env_send(void *arg, uint32_t peer, int is_reply, const void *msg,
                     size_t len)
{
    node_t *n = arg;
    void *copy = malloc(len ? len : 1);
    if (!copy)
        fail("out of memory");
    memcpy(copy, msg, len);
    uint64_t t = now + 1 + rnd_below(opt.delay);
    uint64_t *last = is_reply ? rflow_last : flow_last;
    int fifo = is_reply ? !opt.reorder_replies : !opt.reorder_requests;
    size_t f = (size_t)n->id * opt.nodes + peer;
    if (fifo) {
        if (t < last[f])
            t = last[f];
        last[f] = t;
    }
    st.msgs++;
    ev_push((event_t){ .t = t, .kind = EV_MSG, .src = n->id, .dst = peer,
                       .is_reply = is_reply, .data = copy, .len = len });
}

void env_put_in_move(void *arg, uintptr_t dst, const void *data, size_t len)
{
    node_t *n = arg;
    (void)data;
    if (!seg_contains(dst, len))
        fail("rank %u: put-in-move data written outside its segment", n->id);
}

void env_log(void *arg, const char *line)
{
    node_t *n = arg;
    static unsigned shown;
    if (!opt.quiet && shown < 3) {
        shown++;
        fprintf(stderr, "fhsim: rank %u logs: %s%s\n", n->id, line,
                shown == 3 ? " (further log lines not shown)" : "");
    }
}
