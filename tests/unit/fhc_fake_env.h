/*
 * fhc_fake_env.h -- the hand-driven environment of the cache core's unit
 * tests (test_fhc.c, test_fhc_revoke.c, test_fhc_budget.c): up to
 * FAKE_MAXRANKS caches whose pin/unpin/send/put-in-move callbacks record
 * what they were asked, and one message queue that a test delivers from
 * by hand, so it decides exactly when (and in which order) a message
 * arrives.
 *
 * The includer defines B (bucket), RMAX (region max), SEG and SEGLEN (the
 * segment every rank exposes) first.  Everything here is static: one copy
 * per test program.
 */
#ifndef FHC_FAKE_ENV_H
#define FHC_FAKE_ENV_H

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "firehose/cache/fhc.h"
#include "firehose/cache/fhc_wire.h"

#if !defined(B) || !defined(RMAX) || !defined(SEG) || !defined(SEGLEN)
#error "define B, RMAX, SEG and SEGLEN before including fhc_fake_env.h"
#endif

#define FAKE_MAXRANKS 4
#define FAKE_QLEN     256

typedef struct msg {
    uint32_t src, dst;
    int is_reply;
    size_t len;
    uint8_t data[4096];
} msg_t;

typedef struct rank {
    uint32_t id;
    fhc_t *c;
    unsigned pins, unpins;
    uintptr_t unpinned[64];         /* base of each deregistration, in order */
    uintptr_t mr_base[1024];        /* by mr id */
    unsigned puts;
    uintptr_t put_dst;
    size_t put_len;
    unsigned logs;
} rank_t;

static msg_t queue[FAKE_QLEN];
static unsigned nq;
static rank_t ranks[FAKE_MAXRANKS];
static uint64_t next_mr;

/* Non-zero: an unmapped page [fake_hole, + FHC_REACH_GRAIN) in every
 * rank's memory.  A remote region over it registers one run, the one that
 * holds `want` (else the first), as firehose_env.c remote_run does. */
static uintptr_t fake_hole;

static inline int t_pin(void *arg, uintptr_t addr, size_t len, int remote, uintptr_t want,
                   void **mr,
                 uint64_t key[2], uint64_t *reach)
{
    *reach = 0;
    rank_t *r = arg;
    if (remote && fake_hole && fake_hole >= addr && fake_hole < addr + len) {
        uintptr_t lo = addr, hi = addr + len;
        if (want >= fake_hole + FHC_REACH_GRAIN)
            lo = fake_hole + FHC_REACH_GRAIN;
        else
            hi = fake_hole;
        if (lo >= hi)
            return FHC_ERR_INVALID;
        *reach = fhc_reach_part(lo - addr, hi - addr);
    }
    r->pins++;
    next_mr++;
    ck_assert_uint_lt(next_mr, 1024);
    r->mr_base[next_mr] = addr;
    *mr = (void *)(uintptr_t)next_mr;
    key[0] = next_mr;
    key[1] = r->id;
    return 0;
}

static inline void t_unpin(void *arg, void *mr)
{
    rank_t *r = arg;
    if (r->unpins < 64)
        r->unpinned[r->unpins] = r->mr_base[(uintptr_t)mr];
    r->unpins++;
}

static inline int t_allowed(void *arg, uintptr_t addr, size_t len)
{
    (void)arg;
    if (fake_hole && addr >= fake_hole && addr + len <= fake_hole + FHC_REACH_GRAIN)
        return 0;                   /* nothing of it mapped */
    return addr >= SEG && len <= SEGLEN && addr - SEG <= SEGLEN - len;
}

static inline void t_send(void *arg, uint32_t peer, int is_reply, const void *m, size_t len)
{
    rank_t *r = arg;
    ck_assert_uint_lt(nq, FAKE_QLEN);
    ck_assert_uint_le(len, sizeof queue[0].data);
    msg_t *q = &queue[nq++];
    q->src = r->id;
    q->dst = peer;
    q->is_reply = is_reply;
    q->len = len;
    memcpy(q->data, m, len);
}

static inline void t_put(void *arg, uintptr_t dst, const void *data, size_t len)
{
    rank_t *r = arg;
    (void)data;
    r->puts++;
    r->put_dst = dst;
    r->put_len = len;
}

static inline void t_log(void *arg, const char *line)
{
    rank_t *r = arg;
    (void)line;
    r->logs++;
}

/* Creates n caches (ranks 0..n-1) from the template p (nranks and rank
 * filled in), each talking through the queue. */
static inline void fake_setup(uint32_t n, const fhc_params_t *tmpl)
{
    ck_assert_uint_le(n, FAKE_MAXRANKS);
    nq = 0;
    next_mr = 0;
    memset(ranks, 0, sizeof ranks);
    for (uint32_t i = 0; i < n; i++) {
        ranks[i].id = i;
        fhc_params_t p = *tmpl;
        p.nranks = n;
        p.rank = i;
        fhc_env_t env = { .arg = &ranks[i], .pin = t_pin, .unpin = t_unpin,
                          .allowed = t_allowed, .send = t_send,
                          .put_in_move = t_put, .log = t_log };
        char why[128];
        ck_assert_int_eq(fhc_create(&p, &env, &ranks[i].c, why, sizeof why), 0);
    }
}

/* n static-budget caches with pool M and MAXVICTIM maxvictim. */
static inline void setup_n(uint32_t n, size_t M, size_t maxvictim)
{
    fhc_params_t p = { .bucket = B, .region_max = RMAX, .M = M, .maxvictim = maxvictim,
                       .put_in_move = 3072 };
    fake_setup(n, &p);
}

static inline void teardown_n(uint32_t n)
{
    char why[256];
    for (uint32_t i = 0; i < n; i++) {
        int rc = fhc_check_invariants(ranks[i].c, why, sizeof why);
        ck_assert_msg(rc == 0, "rank %u: %s", i, why);
        fhc_destroy(ranks[i].c);
    }
}

/* Delivers queue[i] and removes it. */
static inline void deliver(unsigned i)
{
    ck_assert_uint_lt(i, nq);
    msg_t m = queue[i];
    memmove(&queue[i], &queue[i + 1], (nq - i - 1) * sizeof queue[0]);
    nq--;
    fhc_on_message(ranks[m.dst].c, m.src, m.is_reply, m.data, m.len);
}

static inline void deliver_all(void)
{
    while (nq)
        deliver(0);
}

typedef struct top {
    fhc_op_t op;
    int calls, status;
} top_t;

static inline void t_ready(fhc_op_t *op, int status)
{
    top_t *t = op->user;
    t->calls++;
    t->status = status;
}

static inline int acquire_ex(uint32_t from, top_t *t, uint32_t peer, uintptr_t addr,
                      size_t len, const void *put, int may_split)
{
    memset(t, 0, sizeof *t);
    t->op.peer = peer;
    t->op.raddr = addr;
    t->op.len = len;
    t->op.put_data = put;
    t->op.ready = t_ready;
    t->op.user = t;
    t->op.may_split = may_split;
    return fhc_acquire(ranks[from].c, &t->op);
}

static inline int acquire(uint32_t from, top_t *t, uint32_t peer, uintptr_t addr,
                   size_t len, const void *put)
{
    return acquire_ex(from, t, peer, addr, len, put, 0);
}

static inline fhc_stats_t stats(uint32_t r)
{
    fhc_stats_t s;
    fhc_stats(ranks[r].c, &s);
    return s;
}

static inline fhc_peer_stats_t pstats(uint32_t r, uint32_t peer)
{
    fhc_peer_stats_t s;
    fhc_peer_stats(ranks[r].c, peer, &s);
    return s;
}

/* Sends a hand-made request from rank `from` to rank `to`, delivers it and
 * returns the decoded reply. */
static inline fhc_rep_t raw_request(uint32_t from, uint32_t to, const void *bytes, size_t len)
{
    nq = 0;
    fhc_on_message(ranks[to].c, from, 0, bytes, len);
    ck_assert_uint_eq(nq, 1);
    ck_assert(queue[0].is_reply);
    fhc_rep_t rep;
    ck_assert_int_eq(fhc_rep_decode(queue[0].data, queue[0].len, &rep, NULL, 0), 0);
    nq = 0;
    return rep;
}

static inline fhc_rep_t request(uint32_t from, uint32_t to, uintptr_t lo, uintptr_t hi,
                         const uint64_t *rel, unsigned nrel)
{
    fhc_req_t q = { .token = 77, .lo = lo, .hi = hi, .nrel = nrel };
    for (unsigned i = 0; i < nrel; i++)
        q.rel[i] = rel[i];
    uint8_t buf[512];
    size_t n = fhc_req_encode(&q, buf, sizeof buf);
    ck_assert_uint_gt(n, 0);
    return raw_request(from, to, buf, n);
}

#endif /* FHC_FAKE_ENV_H */
