/*
 * node_am.c -- active messages between the ranks of a node group, through
 * shared-memory rings instead of the conduit.
 *
 * Every rank of a group of two or more owns an inbox: one firehose/node/
 * piece (a memfd the group's members attach at fh_init, as segment.c
 * attaches segment pieces) holding one ring (firehose/node/node_ring.h) per
 * (our path, their rank, their path) that the conduit contract allows:
 * into our service path from every path of every member, into each thread
 * path from every member's service path (its replies).  A ring has as many
 * slots as the runtime's credits let one source have in flight towards
 * that path (the conduit's rx_per_src: 2 x FH_AM_CREDITS + 4 into the
 * service path, FH_AM_CREDITS + 4 into a thread path), each of one AM
 * packet; the sender of every ring is fixed by its place, so a message's
 * source is where it was found, never what it says.
 *
 * fh_path_am_send is the one way am.c sends a packet: through the ring when
 * the destination is a member whose inbox we attached, else through the
 * conduit; the choice is per peer and fixed at init.  A full ring is
 * FH_ERR_AGAIN, as a conduit out of transmit resources.  Our poller
 * (registered with path.c's progress) runs in every poll of a path: it
 * delivers what the rings into
 * that path hold, in order per ring, through the same fh_am_on_packet the
 * conduit's upcall uses, and pops each message after its handler returned.
 * A peer that dies leaves its rings silent; peer.c's check ends the job
 * naming it, so nobody waits on a dead member's ring for long.
 *
 * Sleeping.  When every rank is in the group, all that can end a wait
 * comes through our rings (or our own conduit operations, which keep a
 * waiter awake).  A wait that stayed idle FH_WAIT_SPIN + FH_NODE_SLEEP_AFTER
 * rounds (it spun, then yielded FH_NODE_SLEEP_AFTER times) then sleeps on the inbox's futex word (node_sleep, registered as path.c's
 * idle sleep) for at most FH_NODE_SLEEP_NS, so that 8 ranks on 2 cores leave
 * the cores to whoever has work.  No wakeup is lost: the waiter counts
 * itself in `sleepers`, reads `seq`, looks at its rings and sleeps only
 * if `seq` is still that value; a sender pushes (the slot's stamp), then,
 * if anyone counted itself, increments `seq` and wakes (all sequentially
 * consistent), so either the waiter sees the message or the sender sees
 * the sleeper, and then the futex sees `seq` change or the waiter saw
 * the message after all.  A sender that finds nobody asleep writes no
 * shared line but the slot.  The timeout bounds what any other wait
 * (and peer.c's once-a-second check) can lose.
 *
 * The barrier.  Each inbox ends with a barrier area; the one in the inbox
 * of a group's first member is where the group's barrier meets
 * (node_coll.c).  Whoever releases a barrier waiter stores the barrier's
 * word (sequentially consistent), then wakes it the same way
 * (fh_node_wake), and a waiter looks at its barrier's word after counting
 * itself and reading `seq`, before it sleeps (fh_node_coll_due).
 */
#include <limits.h>
#include <stdalign.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "firehose/node/node.h"
#include "firehose/node/node_ring.h"

#define FH_NODE_SLEEP_AFTER 1024        /* idle wait rounds before sleeping */
#define FH_NODE_SLEEP_NS    1000000L    /* longest sleep (1 ms) */
#define FH_NODE_POLL_BATCH  64          /* packets one poll of a path delivers */

/* The inbox starts with its futex word and sleeper count. */
typedef struct inbox_head {
    alignas(64) _Atomic uint32_t seq;
    _Atomic uint32_t sleepers;
    char pad[64 - 2 * sizeof(uint32_t)];
} inbox_head_t;
_Static_assert(sizeof(inbox_head_t) == 64, "inbox head is one line");

/* Where a ring lives in an inbox: after the head, rings into path 0 (every
 * member g, every path q), then into each thread path (every member g,
 * path 0). */
static size_t ring_off(const fh_rt_t *rt, int p, int g, int q)
{
    const size_t G = (size_t)rt->node_size, np = (size_t)rt->npaths;
    const size_t r0 = fh_ring_bytes(rt->node_slots[0], rt->node_slot_size);
    const size_t r1 = fh_ring_bytes(rt->node_slots[1], rt->node_slot_size);
    if (p == 0)
        return sizeof(inbox_head_t) + ((size_t)g * np + (size_t)q) * r0;
    return sizeof(inbox_head_t) + G * np * r0 + (((size_t)p - 1) * G + (size_t)g) * r1;
}

/* The rings, then the barrier area of node_coll.c (used in the inbox of
 * a group's first member only). */
static size_t inbox_bytes(const fh_rt_t *rt)
{
    return ring_off(rt, rt->npaths, 0, 0) + fh_node_coll_bytes(rt);
}

char *fh_node_bar_area(const fh_rt_t *rt, int rank)
{
    char *box = rt->node_inbox[rank];
    return box != NULL ? box + ring_off(rt, rt->npaths, 0, 0) : NULL;
}

/* A ring into one of our paths, as its poller sees it. */
struct fh_node_rx {
    fh_ring_cursor_t cur;
    int rank, q;              /* its producer: that member's path q */
};

struct inbox_wire {
    int64_t pid, fd;
    uint64_t size;
};

static int node_poll(fh_path_t *p, int found);
static bool node_sleep(fh_tls_t *t, unsigned idle);
static fh_ring_t *ring_at(const fh_rt_t *rt, char *box, int p, int g, int q);

/* The cursors of the rings into each of our paths: from every member we
 * talk to through rings, each of its paths into our service path, its
 * service path into a thread path. */
static int rx_init(fh_rt_t *rt)
{
    char *box = rt->node_inbox[rt->rank];
    rt->node_rx = calloc((size_t)rt->npaths, sizeof *rt->node_rx);
    rt->node_nrx = calloc((size_t)rt->npaths, sizeof *rt->node_nrx);
    if (rt->node_rx == NULL || rt->node_nrx == NULL)
        return FH_ERR_NO_MEMORY;
    for (int p = 0; p < rt->npaths; p++) {
        const uint32_t slots = rt->node_slots[p == 0 ? 0 : 1];
        const int nq = p == 0 ? rt->npaths : 1;
        rt->node_rx[p] = calloc((size_t)rt->node_size * (size_t)nq, sizeof **rt->node_rx);
        if (rt->node_rx[p] == NULL)
            return FH_ERR_NO_MEMORY;
        int n = 0;
        for (int i = 0; i < rt->node_size; i++) {
            const int r = rt->node_members[i];
            if (r == rt->rank || rt->node_inbox[r] == NULL)
                continue;
            for (int q = 0; q < nq; q++, n++) {
                struct fh_node_rx *x = &rt->node_rx[p][n];
                fh_ring_cursor_init(&x->cur, ring_at(rt, box, p, rt->node_gidx[r], q), slots);
                x->rank = r;
                x->q = q;
            }
        }
        rt->node_nrx[p] = n;
    }
    return FH_OK;
}

int fh_node_am_init(fh_rt_t *rt)
{
    const unsigned c = (unsigned)rt->cfg.am_credits;
    rt->node_slots[0] = 2 * c + 4;
    rt->node_slots[1] = c + 4;
    rt->node_slot_size = fh_ring_slot_size(rt->am_max_packet);
    rt->node_gidx = malloc(sizeof *rt->node_gidx * (size_t)rt->nranks);
    rt->node_members = malloc(sizeof *rt->node_members * (size_t)rt->node_size);
    rt->node_inbox = calloc((size_t)rt->nranks, sizeof *rt->node_inbox);
    rt->node_box.fd = -1;
    if (rt->node_gidx == NULL || rt->node_members == NULL || rt->node_inbox == NULL)
        return FH_ERR_NO_MEMORY;
    for (int r = 0, g = 0; r < rt->nranks; r++) {
        rt->node_gidx[r] = rt->node_peer[r] ? g : -1;
        if (rt->node_peer[r])
            rt->node_members[g++] = r;
    }
    struct inbox_wire mine = {.fd = -1}, *all = calloc((size_t)rt->nranks, sizeof *all);
    if (all == NULL)
        return FH_ERR_NO_MEMORY;
    if (rt->node_size >= 2) {
        if (fh_node_memfd.create(inbox_bytes(rt), (size_t)sysconf(_SC_PAGESIZE),
                                 &rt->node_box) == FH_OK) {
            mine = (struct inbox_wire){getpid(), rt->node_box.fd, rt->node_box.size};
            rt->node_inbox[rt->rank] = rt->node_box.base;
        } else {
            fh_log_verbose(1, "node group: no inbox (%s): AMs go through the conduit",
                           fh_last_error());
        }
    }
    if (rt->boot->ops->allgather(rt->boot, &mine, all, sizeof mine) != FH_OK) {
        free(all);
        return fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: the node inbox exchange failed");
    }
    /* A member talks to us through rings only if both inboxes exist: each
     * side decides from the same exchange, so both choose the same. */
    for (int r = 0; r < rt->nranks; r++) {
        if (r == rt->rank || !rt->node_peer[r] || all[r].fd < 0 ||
            rt->node_inbox[rt->rank] == NULL || all[r].size < inbox_bytes(rt))
            continue;
        void *m = NULL;
        if (fh_node_memfd.attach(all[r].pid, (int)all[r].fd, (size_t)all[r].size, &m) == FH_OK)
            rt->node_inbox[r] = m;
        else
            fh_log_verbose(1, "node group: %s's inbox: %s", FH_RANK_NAME(r), fh_last_error());
    }
    free(all);
    /* Attaching can fail on one side only (then that side would write where
     * the other never reads): agree, one byte per pair. */
    const size_t N = (size_t)(unsigned)rt->nranks;
    uint8_t *ok = calloc(N * N, 1);
    uint8_t *row = calloc(N, 1);
    if (ok == NULL || row == NULL) {
        free(ok);
        free(row);
        return FH_ERR_NO_MEMORY;
    }
    for (int r = 0; r < rt->nranks; r++)
        row[r] = rt->node_inbox[r] != NULL;
    int rc = rt->boot->ops->allgather(rt->boot, row, ok, N);
    for (int r = 0; rc == FH_OK && r < rt->nranks; r++)
        if (r != rt->rank && rt->node_inbox[r] != NULL &&
            !ok[(size_t)r * N + (size_t)rt->rank]) {
            fh_node_memfd.detach(rt->node_inbox[r], inbox_bytes(rt));
            rt->node_inbox[r] = NULL;
        }
    free(ok);
    free(row);
    if (rc != FH_OK)
        return fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: the node inbox exchange failed");
    /* Every other rank reachable through rings: then nothing but our own
     * conduit operations can end a wait (path.c's idle conduit, sleeping). */
    rt->node_all_rings = rt->node_inbox[rt->rank] != NULL;
    int rings = 0;
    for (int r = 0; r < rt->nranks; r++) {
        if (r != rt->rank && rt->node_inbox[r] == NULL)
            rt->node_all_rings = false;
        else if (r != rt->rank)
            rings++;
    }
    fh_log_verbose(2, "node group: AMs to %d rank(s) through shared rings%s", rings,
                   rt->node_all_rings ? " (all of them)" : "");
    if (rings != 0) {
        static const fh_poller_t poller = {"node rings", FH_POLL_RECEIVE, node_poll,
                                             NULL};
        if ((rc = rx_init(rt)) != FH_OK)
            return rc;
        fh_progress_add_poller(rt, &poller);
        rt->idle_sleep = node_sleep;
    }
    return fh_node_coll_init(rt);     /* the barrier, over these inboxes */
}

void fh_node_am_fini(fh_rt_t *rt)
{
    fh_node_coll_fini(rt);
    for (int r = 0; rt->node_inbox != NULL && r < rt->nranks; r++)
        if (r != rt->rank && rt->node_inbox[r] != NULL)
            fh_node_memfd.detach(rt->node_inbox[r], inbox_bytes(rt));
    if (rt->node_box.base != NULL)     /* rt is zeroed until init reaches us */
        fh_node_memfd.destroy(&rt->node_box);
    for (int p = 0; rt->node_rx != NULL && p < rt->npaths; p++)
        free(rt->node_rx[p]);
    free(rt->node_rx);
    free(rt->node_nrx);
    rt->node_rx = NULL;
    rt->node_nrx = NULL;
    free(rt->node_inbox);
    free(rt->node_gidx);
    free(rt->node_members);
    rt->node_inbox = NULL;
    rt->node_gidx = NULL;
    rt->node_members = NULL;
}

/* After what a sleeper of this inbox waits for was stored, sequentially
 * consistent (a ring slot's stamp, node_ring.h; a barrier word,
 * node_coll.c): wakes whoever counted itself asleep (see "Sleeping"). */
static void wake(char *box)
{
    inbox_head_t *h = (inbox_head_t *)(void *)box;
    if (atomic_load(&h->sleepers) != 0) {
        atomic_fetch_add(&h->seq, 1);
        syscall(SYS_futex, &h->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
}

static fh_ring_t *ring_at(const fh_rt_t *rt, char *box, int p, int g, int q)
{
    return (fh_ring_t *)(void *)(box + ring_off(rt, p, g, q));
}

int fh_path_am_send(fh_path_t *p, int rank, int rpath, const void *hdr, size_t hl,
                    const void *payload, size_t len)
{
    fh_rt_t *rt = p->rt;
    char *box = rt->node_inbox != NULL ? rt->node_inbox[rank] : NULL;
    if (box == NULL || rank == rt->rank)
        return rt->cops->am_send(p->cp, rank, rpath, hdr, hl, payload, len);
    if (hl + len > rt->am_max_packet)
        return fh_set_error(FH_ERR_TOO_BIG, "AM of %zu bytes to %s", hl + len, FH_RANK_NAME(rank));
    /* The conduit contract: to a service path, or a service path's reply. */
    if (rpath < 0 || rpath >= rt->npaths || (rpath != 0 && p->index != 0))
        return fh_set_error(FH_ERR_INVALID, "AM from path %d to %s path %d", p->index,
                            FH_RANK_NAME(rank), rpath);
    const int slots = (int)rt->node_slots[rpath == 0 ? 0 : 1];
    fh_ring_t *ring = ring_at(rt, box, rpath, rt->node_gidx[rt->rank], p->index);
    int rc = fh_ring_push(ring, (uint32_t)slots, rt->node_slot_size, hdr, hl, payload, len);
    if (rc == FH_OK)
        wake(box);
    return rc;
}

void fh_node_wake(fh_rt_t *rt, int rank)
{
    if (rt->node_inbox[rank] != NULL)
        wake(rt->node_inbox[rank]);
}

/* Anything waiting in any ring into any of our paths? */
static bool rings_empty(const fh_rt_t *rt, char *box)
{
    for (int p = 0; p < rt->npaths; p++) {
        const uint32_t slots = rt->node_slots[p == 0 ? 0 : 1];
        const int nq = p == 0 ? rt->npaths : 1;
        for (int i = 0; i < rt->node_size; i++) {
            const int r = rt->node_members[i];
            if (r == rt->rank || rt->node_inbox[r] == NULL)
                continue;
            for (int q = 0; q < nq; q++) {
                size_t len;
                if (fh_ring_peek(ring_at(rt, box, p, rt->node_gidx[r], q), slots,
                                 rt->node_slot_size, &len) != NULL)
                    return false;
            }
        }
    }
    return true;
}

static bool node_sleep(fh_tls_t *t, unsigned idle)
{
    fh_rt_t *rt = fh_rt;
    char *box = rt->node_inbox != NULL ? rt->node_inbox[rt->rank] : NULL;
    if (box == NULL || !rt->node_all_rings || rt->cfg.wait_spin < 0 ||
        idle < FH_NODE_SLEEP_AFTER + (unsigned long)rt->cfg.wait_spin ||
        t->path->inflight != 0)
        return false;
    inbox_head_t *h = (inbox_head_t *)(void *)box;
    atomic_fetch_add(&h->sleepers, 1);
    uint32_t s = atomic_load(&h->seq);
    if (rings_empty(rt, box) && !fh_node_coll_due(rt)) {
        struct timespec ts = {0, FH_NODE_SLEEP_NS};
        syscall(SYS_futex, &h->seq, FUTEX_WAIT, s, &ts, NULL, 0);
    }
    atomic_fetch_sub(&h->sleepers, 1);
    return true;
}

/* Delivers up to FH_NODE_POLL_BATCH packets waiting in the rings into
 * path p (lock held), in order per ring; returns how many. */
static int node_poll(fh_path_t *p, int found)
{
    (void)found;
    const int max = FH_NODE_POLL_BATCH;
    fh_rt_t *rt = p->rt;
    if (rt->node_rx == NULL)
        return 0;
    struct fh_node_rx *rx = rt->node_rx[p->index];
    const int nrx = rt->node_nrx[p->index];
    const uint32_t slots = rt->node_slots[p->index == 0 ? 0 : 1];
    const uint32_t ssz = rt->node_slot_size;
    int n = 0;
    for (int i = 0; i < nrx && n < max; i++) {
        size_t len;
        const char *m;
        while (n < max && (m = fh_ring_cpeek(&rx[i].cur, ssz, &len))) {
            if (len == SIZE_MAX)
                fh_am_drop(p, rx[i].rank, "node ring slot longer than a packet");
            else
                fh_am_on_packet(p, rx[i].rank, rx[i].q, m, len);
            fh_ring_cpop(&rx[i].cur, slots);
            n++;
        }
    }
    return n;
}
