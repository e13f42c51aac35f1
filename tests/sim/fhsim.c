/*
 * fhsim.c -- the firehose registration cache (firehose/cache) on N simulated
 * ranks over a simulated network, checked at every step.
 *
 *   fhsim --nodes N --steps S --seed X [--pattern random|stencil|hotspot|
 *         neighbors|master-worker|skewed|phase] [--k K] [--zipf S]
 *         [--period P] [--ws bytes] [--M bytes] [--bucket b] [--region-max b] [--maxvictim b]
 *         [--put-in-move b] [--seg b] [--rate n] [--window n] [--delay n]
 *         [--rdma-delay n] [--check-every K] [--check-sample K] [--stall K]
 *         [--max-age K]
 *         [--bad-rate permille] [--local-rate permille] [--pin-fail permille]
 *         [--free-rate permille]
 *         [--reorder-replies] [--inject-bug NAME] [--budget static|adaptive]
 *         [--victim static|adaptive] [--maxvictim-max b] [--quiet]
 *   fhsim --oracle-selftest
 *
 * Patterns: random (any peer, anywhere), stencil (4 neighbours on a 2-D
 * grid, halo slots), hotspot (half the ops go to rank 0's first 8 frames);
 * and, with a fixed set of hot peers per rank and a working set of --ws
 * bytes per pair (default 8 frames, at most the segment): neighbors (--k,
 * default 6), master-worker (one partner each), skewed (Zipf peers, --zipf,
 * default 1.0), phase (k hot peers, changing every --period steps, default
 * 10000); see fhsim.h.
 *
 * Measured beside the cache: an oracle (fhsim_oracle.h) gets every operation
 * that the cache gets (not those outside the segment): per target, one LRU
 * over (initiator, bucket) with room for M/B entries.  The summary line
 * prints its oracle_hit_rate beside the cache's hit_rate, and moves_per_op
 * (the cache's move requests per completed operation).
 * Time advances in steps.  In each step every event due is handled (a move
 * request or reply arrives; an RDMA completes; a local pin ends), then
 * --rate new operation chunks are started by random ranks (each rank keeps at
 * most --window in flight), and sometimes a rank pins a local buffer.
 *
 * With --free-rate, a rank sometimes frees and reuses 1..4 buckets of its
 * segment (new pages at the same addresses): the sim calls fhc_invalidate,
 * as the runtime does when its memory monitor reports it.
 *
 * The network delays each message by 1..--delay steps.  Requests of one
 * (initiator, target) pair stay in order (the runtime sends moves on one
 * path per pair); different pairs overtake each other freely, and with
 * --reorder-replies replies overtake each other too.
 *
 * What is checked, independently of the cache's own bookkeeping:
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
 * Exit 0 when all hold, 1 with a message and a dump otherwise.
 *
 * --inject-bug makes the run wrong on purpose (fhsim-check.sh expects exit 1):
 *   no-f-check      the caches ignore F          -> I2 check
 *   evict-held      targets re-register regions peers hold -> RDMA check
 *   forget-release  victims are dropped but not released   -> FHC_ERR_LIMIT
 *   stale-install   replies install "already held" regions -> RDMA check or
 *                   a refused release
 *   skip-release    fhsim forgets 1 in 50 fhc_release      -> deadlock check
 *   early-ack       REVOKE acked while RDMA is in flight   -> RDMA check
 *                   (needs --free-rate)
 *   ignore-revoke   REVOKE acked, firehose kept            -> a refused release
 *                   (the target dropped it on the ack) or RDMA check
 *   victim-past-max the adaptive MAXVICTIM grows past --maxvictim-max
 *                   (needs --victim adaptive) -> the cache's bound check
 *                   or the pinned-bytes check
 *   reorder-requests  moves of one pair overtake each other.  Not caught, by
 *                   design: the "granted" flag keeps keys exact; only F
 *                   checks can fail spuriously (FHC_ERR_LIMIT), rarely.
 * and, with --budget adaptive (docs/firehose-cache.md, "Budgets"):
 *   grant-past-M    budgets raised without checking the pool -> A1 check
 *   reclaim-busy    a RECLAIM's answer releases firehoses in use -> RDMA
 *                   check, or the later real release refused
 *   no-floor        reclaims go below the floor     -> A2 check
 *
 * --budget static|adaptive (default static): the caches' budget policy.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "firehose/cache/fhc.h"
#include "firehose/cache/fhc_map.h"
#include "fhsim.h"
#include "fhsim_oracle.h"

#define SEG_BASE  ((uintptr_t)1 << 40)     /* every rank's segment */
#define HEAP_BASE ((uintptr_t)1 << 42)     /* local buffers outside it */

/* ---------------------------------------------------------- parameters */

static struct {
    uint32_t nodes;
    uint64_t steps, seed;
    const char *pattern;
    size_t M, bucket, region_max, maxvictim, put_in_move, seg;
    unsigned rate, window, delay, rdma_delay;
    uint64_t check_every, check_sample, stall, max_age;
    unsigned bad_rate, local_rate, pin_fail, free_rate;
    int reorder_replies, quiet;
    unsigned bugs;              /* FHC_BUG_* passed to the caches */
    int skip_release, reorder_requests;
    uint32_t k;                 /* neighbors, phase: hot peers */
    uint64_t period;            /* phase: steps per hot set */
    double zipf;                /* skewed: exponent */
    size_t ws;                  /* working set per pair (0: 8 frames) */
    /* the adaptive victim FIFO (fhc_ghost.h) */
    int victim_adaptive;
    size_t maxvictim_max;       /* 0: 4 x maxvictim */
    int budget;                 /* --budget: FHC_BUDGET_STATIC | ADAPTIVE */
} opt = {
    .nodes = 16, .steps = 100000, .seed = 1, .pattern = "random",
    .bucket = 4096, .put_in_move = 3072, .seg = 1u << 20,
    .rate = 1, .window = 4, .delay = 20, .rdma_delay = 10,
    .check_sample = 100, .stall = 20000, .max_age = 200000,
    .bad_rate = 5, .local_rate = 20,
    .k = 6, .period = 10000, .zipf = 1.0,
};
static fhsim_pattern_t pat;     /* the hot-peer patterns (fhsim.h) */
static int pat_on;              /* --pattern is one of them */
static fhsim_oracle_t *oracle;

/* ---------------------------------------------------------------- state */

typedef struct sim_op {
    fhc_op_t op;
    uint32_t node;
    uint64_t id, t_start;
    int expect_error;           /* outside the target's segment */
    struct sim_op *prev, *next; /* live ops, oldest first */
} sim_op_t;

typedef struct sim_local {
    uint32_t node;
    fhc_local_t l;
} sim_local_t;

typedef struct mr {
    uint32_t node;
    uintptr_t addr;
    size_t len;
    int alive, remote;
    uint64_t pin_seq;           /* free_seq when it was registered */
} mr_t;

typedef struct node {
    uint32_t id;
    fhc_t *c;
    unsigned inflight;
    size_t pinned;
} node_t;

enum { EV_MSG, EV_RDMA_DONE, EV_UNPIN_LOCAL };
typedef struct event {
    uint64_t t, seq;
    int kind;
    uint32_t src, dst;
    int is_reply;
    void *data;                 /* message bytes, sim_op_t or sim_local_t */
    size_t len;
} event_t;

static node_t *nodes;
static uint64_t now, seq_no, rng_state;
static event_t *heap;
static size_t heap_n, heap_cap;
static uint64_t *flow_last;     /* [src * N + dst]: last delivery of a request */
static uint64_t *rflow_last;    /* the same for replies */
static mr_t *mrs;
static size_t nmrs, cap_mrs;
static fhc_map_t pinned_buckets;        /* (node, bucket no) -> mr index + 1 of the
                                           registration of the CURRENT pages */
static fhc_map_t freed_at;              /* (node, bucket no) -> free_seq of its last free */
static uint64_t free_seq;
static sim_op_t *live_head, *live_tail;
static uint64_t live_n, last_progress, next_op_id;
static uint32_t *touched;       /* pairs (node, peer) touched this step */
static size_t ntouched, cap_touched;
static struct {
    uint64_t started, completed, hits, pending, in_move, expected_errors;
    uint64_t local_pins, local_again, rdma_checks, peer_checks, full_checks, sample_checks;
    uint64_t max_latency, msgs, skipped_releases, frees, stale_rdma;
} st;

static void dump_state(void);

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
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

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }
static int permille(unsigned p) { return rnd_below(1000) < p; }

/* ---------------------------------------------------------- event heap */

static int ev_less(const event_t *a, const event_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void ev_push(event_t e)
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

static event_t ev_pop(void)
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

static void touch(uint32_t node, uint32_t peer)
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

static int seg_contains(uintptr_t a, size_t len)
{
    return a >= SEG_BASE && len <= opt.seg && a - SEG_BASE <= opt.seg - len;
}

static int env_allowed(void *arg, uintptr_t addr, size_t len)
{
    (void)arg;
    return seg_contains(addr, len);
}

static int env_pin(void *arg, uintptr_t addr, size_t len, int remote, uintptr_t want,
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

static void env_unpin(void *arg, void *mrp)
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

static void env_send(void *arg, uint32_t peer, int is_reply, const void *msg,
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

static void env_put_in_move(void *arg, uintptr_t dst, const void *data, size_t len)
{
    node_t *n = arg;
    (void)data;
    if (!seg_contains(dst, len))
        fail("rank %u: put-in-move data written outside its segment", n->id);
}

static void env_log(void *arg, const char *line)
{
    node_t *n = arg;
    static unsigned shown;
    if (!opt.quiet && shown < 3) {
        shown++;
        fprintf(stderr, "fhsim: rank %u logs: %s%s\n", n->id, line,
                shown == 3 ? " (further log lines not shown)" : "");
    }
}

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
static void check_rdma(const sim_op_t *o, const char *when)
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

static void start_op(void)
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

static void start_local_pin(void)
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
static void free_memory(void)
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

static void handle(event_t e)
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

/* -------------------------------------------------------------- checks */

static void check_touched(void)
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

static void check_one(uint32_t n)
{
    char why[256];
    st.sample_checks++;
    if (fhc_check_invariants(nodes[n].c, why, sizeof why))
        fail("rank %u: %s", n, why);
}

static void check_all(void)
{
    char why[256];
    st.full_checks++;
    for (uint32_t n = 0; n < opt.nodes; n++)
        if (fhc_check_invariants(nodes[n].c, why, sizeof why))
            fail("rank %u: %s", n, why);
}

static void check_progress(void)
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
static void check_quiescent(void)
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

static void dump_state(void)
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

/* --------------------------------------------------------------- main */

static size_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s)
        goto bad;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    }
    if (*end)
        goto bad;
    return (size_t)v;
bad:
    fprintf(stderr, "fhsim: bad number '%s'\n", s);
    exit(2);
}

static double parse_double(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) {
        fprintf(stderr, "fhsim: bad number '%s'\n", s);
        exit(2);
    }
    return v;
}

static void usage(void)
{
    fprintf(stderr, "usage: fhsim --nodes N --steps S --seed X [--pattern "
            "random|stencil|hotspot|neighbors|master-worker|skewed|phase] [--k K] "
            "[--zipf S] [--period P] [--ws b] [--M b] [--bucket b] [--region-max b] "
            "[--maxvictim b] [--put-in-move b] [--seg b] [--rate n] [--window n] "
            "[--delay n] [--rdma-delay n] [--check-every K] [--check-sample K] "
            "[--stall K] [--max-age K] [--bad-rate pm] [--local-rate pm] [--pin-fail pm] "
            "[--free-rate pm] [--reorder-replies] [--inject-bug no-f-check|evict-held|"
            "forget-release|stale-install|skip-release|reorder-requests|early-ack|"
            "ignore-revoke|victim-past-max|grant-past-M|reclaim-busy|no-floor] "
            "[--budget static|adaptive] [--victim static|adaptive] [--maxvictim-max b] "
            "[--quiet]\n       fhsim --oracle-selftest\n");
    exit(2);
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && ++i)
        if (ARG("--nodes")) opt.nodes = (uint32_t)parse_size(v);
        else if (ARG("--steps")) opt.steps = parse_size(v);
        else if (ARG("--seed")) opt.seed = parse_size(v);
        else if (ARG("--pattern")) opt.pattern = v;
        else if (ARG("--k")) opt.k = (uint32_t)parse_size(v);
        else if (ARG("--period")) opt.period = parse_size(v);
        else if (ARG("--zipf")) opt.zipf = parse_double(v);
        else if (ARG("--ws")) opt.ws = parse_size(v);
        else if (ARG("--M")) opt.M = parse_size(v);
        else if (ARG("--bucket")) opt.bucket = parse_size(v);
        else if (ARG("--region-max")) opt.region_max = parse_size(v);
        else if (ARG("--maxvictim")) opt.maxvictim = parse_size(v);
        else if (ARG("--put-in-move")) opt.put_in_move = parse_size(v);
        else if (ARG("--seg")) opt.seg = parse_size(v);
        else if (ARG("--rate")) opt.rate = (unsigned)parse_size(v);
        else if (ARG("--window")) opt.window = (unsigned)parse_size(v);
        else if (ARG("--delay")) opt.delay = (unsigned)parse_size(v);
        else if (ARG("--rdma-delay")) opt.rdma_delay = (unsigned)parse_size(v);
        else if (ARG("--check-every")) opt.check_every = parse_size(v);
        else if (ARG("--check-sample")) opt.check_sample = parse_size(v);
        else if (ARG("--stall")) opt.stall = parse_size(v);
        else if (ARG("--max-age")) opt.max_age = parse_size(v);
        else if (ARG("--bad-rate")) opt.bad_rate = (unsigned)parse_size(v);
        else if (ARG("--local-rate")) opt.local_rate = (unsigned)parse_size(v);
        else if (ARG("--pin-fail")) opt.pin_fail = (unsigned)parse_size(v);
        else if (ARG("--free-rate")) opt.free_rate = (unsigned)parse_size(v);
        else if (ARG("--inject-bug")) {
            if (!strcmp(v, "no-f-check")) opt.bugs |= FHC_BUG_NO_F_CHECK;
            else if (!strcmp(v, "evict-held")) opt.bugs |= FHC_BUG_EVICT_HELD;
            else if (!strcmp(v, "forget-release")) opt.bugs |= FHC_BUG_FORGET_RELEASE;
            else if (!strcmp(v, "stale-install")) opt.bugs |= FHC_BUG_STALE_INSTALL;
            else if (!strcmp(v, "early-ack")) opt.bugs |= FHC_BUG_EARLY_ACK;
            else if (!strcmp(v, "ignore-revoke")) opt.bugs |= FHC_BUG_IGNORE_REVOKE;
            else if (!strcmp(v, "skip-release")) opt.skip_release = 1;
            else if (!strcmp(v, "reorder-requests")) opt.reorder_requests = 1;
            else if (!strcmp(v, "victim-past-max")) opt.bugs |= FHC_BUG_VICTIM_PAST_MAX;
            else if (!strcmp(v, "grant-past-M")) opt.bugs |= FHC_BUG_GRANT_PAST_M;
            else if (!strcmp(v, "reclaim-busy")) opt.bugs |= FHC_BUG_RECLAIM_BUSY;
            else if (!strcmp(v, "no-floor")) opt.bugs |= FHC_BUG_NO_FLOOR;
            else usage();
        }
        else if (ARG("--budget")) {
            if (!strcmp(v, "static")) opt.budget = FHC_BUDGET_STATIC;
            else if (!strcmp(v, "adaptive")) opt.budget = FHC_BUDGET_ADAPTIVE;
            else usage();
        }
        else if (ARG("--victim")) {
            if (!strcmp(v, "adaptive")) opt.victim_adaptive = 1;
            else if (strcmp(v, "static")) usage();
        }
        else if (ARG("--maxvictim-max")) opt.maxvictim_max = parse_size(v);
        else if (!strcmp(a, "--reorder-replies")) opt.reorder_replies = 1;
        else if (!strcmp(a, "--quiet")) opt.quiet = 1;
        else if (!strcmp(a, "--oracle-selftest")) {
            int rc = fhsim_oracle_selftest();
            printf("fhsim: oracle selftest %s\n", rc ? "FAIL" : "PASS");
            exit(rc ? 1 : 0);
        }
        else usage();
#undef ARG
    }
    pat_on = fhsim_pattern_kind(opt.pattern) >= 0;
    if (opt.nodes < 2 || (!pat_on && strcmp(opt.pattern, "random") &&
                          strcmp(opt.pattern, "stencil") &&
                          strcmp(opt.pattern, "hotspot")) || !opt.delay || !opt.rdma_delay ||
        !opt.window || !opt.bucket || opt.seg < opt.bucket)
        usage();
    if (!opt.region_max)
        opt.region_max = 16 * opt.bucket;
    if (!opt.check_every)
        opt.check_every = opt.nodes * 100 > 10000 ? opt.nodes * 100 : 10000;
    if (!opt.M)
        opt.M = (size_t)(opt.nodes - 1) * 4 * opt.region_max;
    if (!opt.maxvictim)
        opt.maxvictim = opt.M / 4 > 8 * opt.region_max ? 8 * opt.region_max : opt.M / 4;
    if (!opt.maxvictim_max)
        opt.maxvictim_max = 4 * opt.maxvictim;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    rng_state = opt.seed * 0x2545F4914F6CDD1Dull + 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    nodes = calloc(opt.nodes, sizeof *nodes);
    flow_last = calloc((size_t)opt.nodes * opt.nodes, sizeof *flow_last);
    rflow_last = calloc((size_t)opt.nodes * opt.nodes, sizeof *rflow_last);
    if (!nodes || !flow_last || !rflow_last)
        fail("out of memory");
    fhc_map_init(&pinned_buckets);
    fhc_map_init(&freed_at);
    for (uint32_t i = 0; i < opt.nodes; i++) {
        nodes[i].id = i;
        fhc_params_t p = { .nranks = opt.nodes, .rank = i, .bucket = opt.bucket,
                           .region_max = opt.region_max, .M = opt.M,
                           .maxvictim = opt.maxvictim,
                           .put_in_move = opt.put_in_move, .debug_bugs = opt.bugs,
                           .maxvictim_max = opt.maxvictim_max,
                           .victim_adaptive = opt.victim_adaptive,
                           .budget = opt.budget };
        fhc_env_t env = { .arg = &nodes[i], .pin = env_pin, .unpin = env_unpin,
                          .allowed = env_allowed, .send = env_send,
                          .put_in_move = env_put_in_move, .log = env_log };
        char why[128];
        int rc = fhc_create(&p, &env, &nodes[i].c, why, sizeof why);
        if (rc < 0) {
            fprintf(stderr, "fhsim: fhc_create: %s\n", why);
            return 2;
        }
    }
    opt.region_max = fhc_region_max(nodes[0].c);
    if (pat_on) {
        char why[128];
        pat = (fhsim_pattern_t){
            .kind = fhsim_pattern_kind(opt.pattern), .nodes = opt.nodes, .k = opt.k,
            .period = opt.period, .zipf = opt.zipf, .seg = opt.seg, .bucket = opt.bucket,
            .ws = opt.ws ? opt.ws : 8 * opt.region_max < opt.seg ? 8 * opt.region_max
                                                                  : opt.seg };
        if (fhsim_pattern_init(&pat, why, sizeof why) < 0) {
            fprintf(stderr, "fhsim: --pattern %s: %s\n", opt.pattern, why);
            return 2;
        }
    }
    oracle = fhsim_oracle_create(opt.nodes, opt.M / opt.bucket ? opt.M / opt.bucket : 1);
    if (!oracle)
        fail("out of memory");
    if (!opt.quiet)
        printf("fhsim: nodes=%u steps=%" PRIu64 " seed=%" PRIu64 " pattern=%s B=%zu "
               "R=%zu F=%zu M=%zu MAXVICTIM=%zu put_in_move=%zu seg=%zu\n",
               opt.nodes, opt.steps, opt.seed, opt.pattern, opt.bucket,
               opt.region_max, fhc_F(nodes[0].c), opt.M, opt.maxvictim,
               opt.put_in_move, opt.seg);
    if (!opt.quiet && pat_on)
        printf("fhsim: pattern %s: k=%u zipf=%.2f period=%" PRIu64 " ws=%zu "
               "(F=%zu, M/k=%zu)\n", opt.pattern, pat.k, pat.zipf, pat.period, pat.ws,
               fhc_F(nodes[0].c), opt.M / (pat.k ? pat.k : 1));

    /* Run, then drain: no new work until everything in flight finished. */
    uint64_t end = opt.steps;
    for (now = 0; now < end || live_n || heap_n; now++) {
        while (heap_n && heap[0].t <= now)
            handle(ev_pop());
        if (now < end) {
            for (unsigned r = 0; r < opt.rate; r++)
                start_op();
            if (opt.local_rate && permille(opt.local_rate))
                start_local_pin();
            if (opt.free_rate && permille(opt.free_rate))
                free_memory();
        }
        check_touched();
        if (now % opt.check_every == 0)
            check_all();
        else if (opt.check_sample && now % opt.check_sample == 0)
            check_one((uint32_t)rnd_below(opt.nodes));
        check_progress();
    }
    check_all();
    check_quiescent();
    for (uint32_t i = 0; i < opt.nodes; i++)
        if (fhc_revokes_pending(nodes[i].c))
            fail("quiescent: rank %u still waits for %u revoke acks", i,
                 fhc_revokes_pending(nodes[i].c));

    fhc_stats_t cs;
    fhc_peer_stats_t ps;
    uint64_t hits = 0, misses = 0, moves = 0, coal = 0, pim = 0, waits = 0, errs = 0;
    uint64_t evictions = 0, regs = 0, refused = 0, grants = 0, reclaims = 0, deferred = 0;
    uint64_t repins = 0, grows = 0, shrinks = 0, merges = 0, splits = 0;
    size_t mv_top = 0;
    for (uint32_t i = 0; i < opt.nodes; i++) {
        fhc_stats(nodes[i].c, &cs);
        repins += cs.victim_repins;
        grows += cs.maxvictim_grows;
        shrinks += cs.maxvictim_shrinks;
        mv_top = cs.maxvictim_now > mv_top ? cs.maxvictim_now : mv_top;
        evictions += cs.evictions;
        regs += cs.registrations;
        refused += cs.refused;
        for (uint32_t j = 0; j < opt.nodes; j++) {
            fhc_peer_stats(nodes[i].c, j, &ps);
            hits += ps.hits;
            merges += ps.merges;
            splits += ps.splits;
            misses += ps.misses;
            moves += ps.moves;
            coal += ps.coalesced;
            pim += ps.put_in_move;
            waits += ps.budget_waits;
            errs += ps.errors;
            grants += ps.grants;
            reclaims += ps.reclaims;
            deferred += ps.deferred;
        }
    }
    uint64_t o_ops, o_hits;
    fhsim_oracle_counts(oracle, &o_ops, &o_hits);
    fhsim_oracle_destroy(oracle);
    fhsim_pattern_fini(&pat);
    for (uint32_t i = 0; i < opt.nodes; i++)
        fhc_destroy(nodes[i].c);
    for (uint32_t i = 0; i < opt.nodes; i++)
        if (nodes[i].pinned)
            fail("rank %u still pins %zu bytes after fhc_destroy", i, nodes[i].pinned);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("fhsim: PASS ops=%" PRIu64 " hits=%" PRIu64 " misses=%" PRIu64
           " hit_rate=%.1f%% moves=%" PRIu64 " coalesced=%" PRIu64
           " put_in_move=%" PRIu64 " budget_waits=%" PRIu64 " evictions=%" PRIu64
           " registrations=%" PRIu64 " refused=%" PRIu64 " errors=%" PRIu64
           " oracle_hit_rate=%.1f%% moves_per_op=%.3f\n",
           st.completed, hits, misses, hits + misses ? 100.0 * (double)hits / (double)(hits + misses) : 0.0,
           moves, coal, pim, waits, evictions, regs, refused, errs,
           o_ops ? 100.0 * (double)o_hits / (double)o_ops : 0.0,
           st.completed ? (double)moves / (double)st.completed : 0.0);
    printf("fhsim: merges=%" PRIu64 " splits=%" PRIu64 " local_pins=%" PRIu64
           " local_again=%" PRIu64 " rdma_checks=%" PRIu64
           " peer_checks=%" PRIu64 " sample_checks=%" PRIu64 " full_checks=%" PRIu64
           " msgs=%" PRIu64
           " max_latency=%" PRIu64 " steps=%" PRIu64 " time=%.1fs\n",
           merges, splits, st.local_pins, st.local_again, st.rdma_checks, st.peer_checks,
           st.sample_checks, st.full_checks, st.msgs, st.max_latency, now, secs);
    if (opt.victim_adaptive)
        printf("fhsim: victim=adaptive maxvictim=%zu maxvictim_max=%zu "
               "maxvictim_now_top=%zu victim_repins=%" PRIu64 " grows=%" PRIu64
               " shrinks=%" PRIu64 "\n", opt.maxvictim, opt.maxvictim_max, mv_top,
               repins, grows, shrinks);
    if (opt.budget == FHC_BUDGET_ADAPTIVE)
        printf("fhsim: budget=adaptive grants=%" PRIu64 " reclaims=%" PRIu64
               " deferred=%" PRIu64 "\n", grants, reclaims, deferred);
    if (opt.free_rate)
        printf("fhsim: frees=%" PRIu64 " rdma_through_revoked=%" PRIu64 "\n", st.frees,
               st.stale_rdma);
    free(nodes);
    free(flow_last);
    free(rflow_last);
    free(heap);
    free(mrs);
    free(touched);
    fhc_map_fini(&pinned_buckets);
    return 0;
}
