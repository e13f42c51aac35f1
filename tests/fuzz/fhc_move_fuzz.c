/*
 * fhc_move_fuzz.c -- libFuzzer target for the firehose move protocol as an
 * initiator sees it from a hostile target (firehose/cache/: fhc_on_message
 * with replies, requests and REVOKEs it never asked for, and grants lying
 * anywhere), next to an honest exchange.
 *
 * Two caches, ranks 0 and 1, wired through a message queue as in
 * tests/unit/test_fhc.c.  Each input is a script: rank 0 acquires chunks
 * of rank 1's segment and releases them, honest messages are delivered or
 * dropped, rank 1 revokes ranges, and -- the point -- rank 0 receives
 * forged messages claiming to come from rank 1: raw bytes, or a reply
 * answering a real pending move (its token) with fuzzed regions (base
 * anywhere around the frame asked for, any length, granted or not).  After
 * every step both caches' invariants must hold (fhc_check_invariants), and
 * every op that becomes a HIT must be covered by its pieces, each inside
 * its own region, each region whole buckets inside one frame: what the
 * runtime would RDMA through.  (Whether a region lies inside the target's
 * segment is the target's business: the initiator checks its own ranges
 * against the segment table before it asks.)  A violation aborts.
 * The first byte picks the budget policy; with adaptive budgets (three
 * ranks, so the floor F = M/2 leaves room to grow) forged replies carry
 * any budget, version and "lowered" flag, and forged RECLAIMs any id and
 * budget: budgets outside [F, M] or off the bucket grid must be refused,
 * and the invariants (A1-A3 among them) must hold whatever arrives.
 *
 *   clang -fsanitize=fuzzer,address,undefined -Iinclude -I. \
 *         tests/fuzz/fhc_move_fuzz.c firehose/cache/fhc_*.c -o fhc_move_fuzz
 *   ./fhc_move_fuzz -max_total_time=30
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "firehose/cache/fhc.h"
#include "firehose/cache/fhc_wire.h"
#include "tests/fuzz/fuzz_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define B      4096u
#define RMAX   (16u * B)
#define SEG    ((uintptr_t)1 << 40)
#define SEGLEN ((size_t)1 << 20)
#define NQ     64
#define NOPS   8

typedef struct msg {
    uint32_t src, dst;
    int is_reply;
    size_t len;
    uint8_t data[4096];
} msg_t;

static msg_t queue[NQ];
static unsigned nq;
static fhc_t *cache[2];
static int adaptive;
static uint64_t next_key;

typedef struct top {
    fhc_op_t op;
    int live;       /* acquired, not yet released */
    int hit;        /* pieces valid: must be released */
} top_t;

static top_t ops[NOPS];

static void fail(const char *what)
{
    fprintf(stderr, "fhc_move_fuzz: %s\n", what);
    abort();
}

static int e_pin(void *arg, uintptr_t addr, size_t len, int remote, uintptr_t want, void **mr,
                 uint64_t key[2], uint64_t *reach)
{
    (void)arg, (void)addr, (void)len, (void)remote, (void)want;
    *reach = 0;       /* every byte reachable: the env models healthy memory */
    *mr = (void *)(uintptr_t)++next_key;
    key[0] = next_key;
    key[1] = 0;
    return 0;
}

static void e_unpin(void *arg, void *mr) { (void)arg, (void)mr; }

static int e_allowed(void *arg, uintptr_t addr, size_t len)
{
    (void)arg;
    return addr >= SEG && len <= SEGLEN && addr - SEG <= SEGLEN - len;
}

static void e_send(void *arg, uint32_t peer, int is_reply, const void *m, size_t len)
{
    uint32_t src = (uint32_t)(uintptr_t)arg;
    if (nq == NQ || len > sizeof queue[0].data)
        return;                      /* lost on the way: the protocol copes */
    queue[nq] = (msg_t){.src = src, .dst = peer, .is_reply = is_reply, .len = len};
    memcpy(queue[nq].data, m, len);
    nq++;
}

static void e_put(void *arg, uintptr_t dst, const void *d, size_t len)
{
    (void)arg, (void)dst, (void)d, (void)len;
}

static void e_log(void *arg, const char *line) { (void)arg, (void)line; }

/* A HIT op's pieces cover [raddr, +len) in order, each inside its region,
 * each region inside one frame of the segment. */
static void check_hit(const fhc_op_t *op)
{
    uintptr_t at = op->raddr;
    if (op->npieces == 0 || op->npieces > FHC_MAX_PIECES)
        fail("a HIT with no pieces");
    for (unsigned i = 0; i < op->npieces; i++) {
        const fhc_piece_t *p = &op->piece[i];
        if (p->addr != at || p->len == 0)
            fail("pieces do not cover the op in order");
        if (p->addr < p->rbase || p->addr + p->len > p->rbase + p->rlen)
            fail("a piece outside its region");
        if (p->rbase / RMAX != (p->rbase + p->rlen - 1) / RMAX || p->rbase % B ||
            p->rlen % B)
            fail("a region not whole buckets inside one frame");
        at += p->len;
    }
    if (at != op->raddr + op->len)
        fail("pieces do not cover the op");
}

static void on_ready(fhc_op_t *op, int status)
{
    top_t *t = op->user;
    if (status == FHC_HIT) {
        check_hit(op);
        t->hit = 1;
    } else {
        t->live = 0;       /* done in the move, or failed: holds nothing */
    }
}

static void deliver(unsigned i)
{
    msg_t m = queue[i];
    memmove(&queue[i], &queue[i + 1], (nq - i - 1) * sizeof queue[0]);
    nq--;
    fhc_on_message(cache[m.dst], m.src, m.is_reply, m.data, m.len);
}

static void check_all(void)
{
    char why[256];
    for (int r = 0; r < 2; r++)
        if (fhc_check_invariants(cache[r], why, sizeof why) != 0) {
            fprintf(stderr, "rank %d: %s\n", r, why);
            fail("invariants broken");
        }
}

/* The token of the first queued request from 0 to 1, removed from the
 * queue (its reply will be forged), or 0 if none. */
static uint64_t take_pending_request(void)
{
    for (unsigned i = 0; i < nq; i++) {
        fhc_req_t q;
        if (queue[i].src == 0 && !queue[i].is_reply &&
            fhc_req_decode(queue[i].data, queue[i].len, &q, NULL, 0) == 0 && q.token &&
            (q.lo || q.hi)) {
            memmove(&queue[i], &queue[i + 1], (nq - i - 1) * sizeof queue[0]);
            nq--;
            return q.token;
        }
    }
    return 0;
}

static void forge_reply(in_t *in)
{
    uint64_t token = take_pending_request();
    fhc_rep_t r = {.token = token ? token : u64(in), .status = (int8_t)u8(in) % 4 == 0 ? -1 : 0};
    r.nreg = u8(in) % (FHC_MAX_PIECES + 1);
    uintptr_t around = SEG + (uintptr_t)(u8(in) % 16) * RMAX;
    for (unsigned i = 0; i < r.nreg; i++) {
        int8_t off = (int8_t)u8(in);
        r.reg[i].base = around + (uintptr_t)((intptr_t)off * (intptr_t)B) + (u8(in) % 8 == 0);
        r.reg[i].len = (size_t)(u8(in) % 40) * B + (u8(in) % 16 == 0);
        r.reg[i].key[0] = 1000 + i;
        r.reg[i].granted = u8(in) & 1;
    }
    if (adaptive && (u8(in) & 1)) {     /* a budget, sane or not */
        static const uint64_t pick[] = {2 * RMAX, 3 * RMAX, 4 * RMAX, RMAX, 5 * RMAX,
                                        2 * RMAX + 8, 0};
        r.budget = u8(in) & 1 ? pick[u8(in) % 7] : u64(in) & ~(uint64_t)7;
        r.bver = u8(in) & 1 ? u8(in) : u64(in);
        r.lowered = u8(in) & 1;
    }
    uint8_t buf[1024];
    size_t n = fhc_rep_encode(&r, buf, sizeof buf);
    if (n > 0)
        fhc_on_message(cache[0], 1, 1, buf, n);
}

/* A RECLAIM from rank 1, any id and budget (some in range). */
static void forge_reclaim(in_t *in)
{
    static const uint64_t pick[] = {2 * RMAX, 3 * RMAX, 4 * RMAX, RMAX, 2 * RMAX + B};
    fhc_reclaim_t r = {.id = u8(in) & 1 ? u8(in) : u64(in),
                       .budget = u8(in) & 1 ? pick[u8(in) % 5] : u64(in) & ~(uint64_t)7};
    uint8_t buf[FHC_RECLAIM_LEN];
    size_t n = fhc_reclaim_encode(&r, buf, sizeof buf);
    if (n)
        fhc_on_message(cache[0], 1, u8(in) % 4 == 0, buf, n);
}

static void forge_raw(in_t *in)
{
    uint8_t buf[256];
    size_t n = u8(in);
    for (size_t i = 0; i < n; i++)
        buf[i] = u8(in);
    fhc_on_message(cache[0], 1, u8(in) & 1, buf, n);
}

static void acquire_one(in_t *in)
{
    top_t *t = &ops[u8(in) % NOPS];
    if (t->live)
        return;
    uintptr_t addr = SEG + (uintptr_t)(u64(in) % (SEGLEN + 2 * RMAX)) - RMAX / 2;
    size_t len = 1 + u8(in) * 97u;
    memset(t, 0, sizeof *t);
    t->op.peer = 1;
    t->op.raddr = addr;
    t->op.len = fhc_chunk_len(cache[0], addr, len);
    t->op.ready = on_ready;
    t->op.user = t;
    t->op.may_split = (int)(len & 1);   /* half the ops may be cut (issue 30) */
    t->live = 1;
    int rc = fhc_acquire(cache[0], &t->op);
    if (rc == FHC_HIT)
        on_ready(&t->op, FHC_HIT);
    else if (rc < 0)
        t->live = 0;
}

static void release_one(in_t *in)
{
    top_t *t = &ops[u8(in) % NOPS];
    if (!t->live || !t->hit)
        return;
    t->live = t->hit = 0;
    fhc_release(cache[0], &t->op);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    in_t in = {data, size, 0};
    nq = 0;
    next_key = 0;
    memset(ops, 0, sizeof ops);
    adaptive = u8(&in) & 1;
    for (uint32_t r = 0; r < 2; r++) {
        /* Adaptive: a third rank that never speaks halves the floor. */
        fhc_params_t p = {.nranks = adaptive ? 3 : 2, .rank = r, .bucket = B,
                          .region_max = RMAX, .M = 4 * RMAX, .maxvictim = 2 * RMAX,
                          .put_in_move = 0,
                          .budget = adaptive ? FHC_BUDGET_ADAPTIVE : FHC_BUDGET_STATIC};
        fhc_env_t env = {.arg = (void *)(uintptr_t)r, .pin = e_pin, .unpin = e_unpin,
                         .allowed = e_allowed, .send = e_send, .put_in_move = e_put,
                         .log = e_log};
        char why[128];
        if (fhc_create(&p, &env, &cache[r], why, sizeof why) != 0)
            fail(why);
    }
    for (int steps = 0; steps < 200 && in.at < in.n; steps++) {
        switch (u8(&in) % 9) {
        case 0: case 1:
            acquire_one(&in);
            break;
        case 2:
            if (nq)
                deliver(u8(&in) % nq);
            break;
        case 3:
            if (nq) {
                unsigned i = u8(&in) % nq;
                queue[i] = queue[--nq];                /* dropped */
            }
            break;
        case 4:
            forge_reply(&in);
            break;
        case 5:
            forge_raw(&in);
            break;
        case 6:
            release_one(&in);
            break;
        case 8:
            forge_reclaim(&in);
            break;
        default:
            fhc_invalidate(cache[1], SEG + (uintptr_t)(u8(&in) % 16) * RMAX,
                           (size_t)(1 + u8(&in) % 32) * B);
            break;
        }
        check_all();
    }
    /* Honest end: what is queued arrives, every HIT op is released. */
    for (int k = 0; k < 1000 && nq; k++)
        deliver(0);
    for (int i = 0; i < NOPS; i++)
        if (ops[i].live && ops[i].hit)
            fhc_release(cache[0], &ops[i].op);
    check_all();
    fhc_destroy(cache[0]);
    fhc_destroy(cache[1]);
    return 0;
}
