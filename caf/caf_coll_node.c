/*
 * caf_coll_node.c -- the collectives through shared memory.
 *
 * When every image of the job is in this image's node group (FH_SHM=auto
 * on one host: fh_addr_local gives a pointer into every other image's
 * segment), a collective of the initial team needs no message at all.
 * Each image owns, in the symmetric heap, a control block (flags it alone
 * writes) and two slots of NODE_SLOT bytes; every image reads the others'
 * through fh_addr_local.  The array is cut into chunks of one slot; chunk
 * number t (a ticket: every image counts the chunks of the initial team's
 * collectives alike, so tickets agree) uses slot t % 2:
 *
 *   guard   wait until every member has finished ticket t - 2 (fin >= t-2):
 *           nobody still reads the slot we are about to write;
 *   arrive  the contributors (all images for a reduction, the source for a
 *           broadcast) copy their chunk into their slot (a large
 *           reduction: every part but their own, which no other image
 *           reads); every image then publishes arr = t (release) -- and,
 *           with chunk 0, its byte count, so that sizes that differ are an
 *           error, not a misread;
 *   small   (a chunk of at most NODE_SMALL bytes, or fewer elements than
 *           images) each image that wants the result waits for every
 *           arrival and reduces the n slots itself, in image order;
 *   large   reduce-scatter then gather: image k reduces elements
 *           [k*m/n, (k+1)*m/n) of the n slots (its own contribution from
 *           its buffer), in image order, into that part of its own slot
 *           (no other image reads that part before red >= t) and its
 *           buffer, and publishes red = t; the images that want the
 *           result copy the other n-1 parts after every red >= t;
 *   bcast   the receivers copy the source's slot after its arr >= t;
 *   finish  fin = t.
 * So a small all-reduce costs one wait for the slowest arrival; a large one
 * two per chunk; the result is computed in image order by one image for each
 * element (small: by each image in the same order), the same bits on every
 * image and every run, as on the message path.  Slot reuse is safe because
 * an image starts ticket t + 2 only after every member finished t (the
 * guard; in an all-reduce it never waits, the arrivals of t + 1 imply it).
 *
 * The node path serves the initial team only: in a child team the
 * collectives use the message path (caf_coll.c), whose scratch is separate,
 * so a child team's collectives never touch these slots and the tickets of
 * the initial team stay the same on every image.
 *
 * Stopped and failed images: a wait for a flag of a member that has stopped
 * or failed (caf.status) without setting it gives STAT_STOPPED_IMAGE /
 * STAT_FAILED_IMAGE (no grace is needed: its stores precede its status
 * message); a member that gives up this way publishes ab (the last ticket
 * of the collective) with its reason before fin, so that the members
 * waiting for it give up with the same reason instead of waiting forever.
 * A member that stopped is skipped by the guard (it reads nothing more).
 *
 * Trust: the other images' flags and slots are memory of the same job's
 * processes, like any coarray; what is read from them is bounded: byte
 * counts are compared with ours, never used as a length; error codes are
 * checked before use.
 */
#include "caf_coll.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NODE_SLOT ((size_t)1 << 20)
#define NODE_SMALL ((size_t)4096)
#define NODE_PIECE ((size_t)16384) /* bytes folded then copied while cached */
#define NODE_SPIN 2048   /* loads of a flag between two polls */
#define COLL_SPIN_NS 2e6 /* polling before yielding, when images <= cores */
#define NODE_CTL 4096  /* bytes before the slots: the control block's page */

/* An image's control block: written only by its owner. */
typedef struct node_ctl {
    _Atomic uint64_t arr;  /* last ticket whose chunk is in our slot */
    _Atomic uint64_t red;  /* last ticket whose part we reduced */
    _Atomic uint64_t fin;  /* last ticket we finished */
    _Atomic uint64_t ab;   /* last ticket of a collective we gave up */
    _Atomic uint64_t why;  /* ... and why: STAT code | image << 32 */
    _Atomic uint64_t len[2]; /* [t % 2]: bytes of the collective whose
                                chunk 0 is ticket t (UINT64_MAX: none) */
} node_ctl_t;

static bool node_on;        /* agreed by every image at start-up */
static node_ctl_t **ctl;    /* [rank] control blocks, through fh_addr_local */
static char **slots;        /* [rank] first slot, through fh_addr_local */
static uint64_t tick;       /* tickets used so far (initial team) */

void caf_coll_node_init(void)
{
    const char *stmt = "start-up";
    int n = caf.nranks;
    if (n < 2)
        return;
    unsigned char can = 1, *all = malloc((size_t)n);
    if (all == NULL)
        caf_fatal(stmt, "out of memory");
    for (int r = 0; r < n && can; r++)
        if (r != caf.rank && fh_addr_local(r, caf.bases[r]) == NULL)
            can = 0;
    int rc = fh_allgather(&can, all, 1);
    if (rc != FH_OK)
        caf_fatal(stmt, "fh_allgather: %s", fh_strerror(rc));
    for (int r = 0; r < n; r++)
        can &= all[r];
    free(all);
    if (!can)
        return;
    size_t off = caf_sym_alloc(NODE_CTL + 2 * NODE_SLOT);
    if (off == (size_t)-1)
        caf_fatal(stmt, "no room for %zu bytes of collective scratch in the "
                  "coarray heap (FH_CAF_HEAP)", NODE_CTL + 2 * NODE_SLOT);
    if (off + NODE_CTL + 2 * NODE_SLOT > caf.sym_size)
        return; /* FH_CAF_HEAP too small: caf_heap_started says so */
    ctl = calloc((size_t)n, sizeof *ctl);
    slots = calloc((size_t)n, sizeof *slots);
    if (ctl == NULL || slots == NULL)
        caf_fatal(stmt, "out of memory");
    for (int r = 0; r < n; r++) {
        char *p = fh_addr_local(r, caf.bases[r] + off);
        if (p == NULL) /* its base was reachable: so is all of its piece */
            caf_fatal(stmt, "image %d's collective scratch is not shared "
                      "memory: %s", r + 1, fh_last_error());
        ctl[r] = (node_ctl_t *)(void *)p;
        slots[r] = p + NODE_CTL;
    }
    node_on = true;
}

bool caf_coll_node_usable(const coll_t *c)
{
    (void)c;
    return node_on && !caf_in_child_team();
}

/* ------------------------------------------------------------- waiting */

enum { F_ARR, F_RED, F_FIN };

static _Atomic uint64_t *flag_of(int rank, int which)
{
    node_ctl_t *k = ctl[rank];
    return which == F_ARR ? &k->arr : which == F_RED ? &k->red : &k->fin;
}

static double node_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* While every image has a core, a peer that is late is usually computing
 * or was preempted briefly: a wait keeps the core for COLL_SPIN_NS before
 * it gives it away between polls (sched_yield on a loaded machine loses it
 * for milliseconds: measured, 1 MiB co_sum on 2 images over the node path,
 * 0.07 ms of work waited 2-8 ms).  Not on the message path: over tcp the
 * same spinning made a 1 MiB co_sum on 2 images 4x slower (44-56 ms
 * against 9-12 ms with caf_idle, interleaved rounds on the loaded
 * machine): there the peer needs the core to progress. */
static void node_idle(unsigned *spins, double *since)
{
    if (caf.idle_spins > 1) {
        double now = node_now();
        if (*since == 0)
            *since = now;
        if (now - *since < COLL_SPIN_NS) {
            caf_poll();
            return;
        }
    }
    caf_idle(spins);
}

/* Records why c is abandoned (the first reason wins). */
static void set_err(coll_t *c, int code, int image)
{
    if (c->err == 0) {
        c->err = code;
        c->err_image = image;
    }
}

/* Waits until member j's flag `which` reaches t.  False (c->err set) when
 * it never will: j has stopped or failed without it, or gave up this
 * collective.  For the guard (which == F_FIN), a member that stopped or
 * failed reads nothing more: true. */
static bool wait_flag(coll_t *c, int j, int which, uint64_t t)
{
    int rank = c->ranks[j];
    _Atomic uint64_t *f = flag_of(rank, which);
    unsigned spins = 0;
    double since = 0;
    for (;;) {
        for (int i = 0; i < NODE_SPIN; i++) {
            if (atomic_load_explicit(f, memory_order_acquire) >= t)
                return true;
            if (caf.idle_spins <= 1)
                break; /* more images than cores: give the core away */
        }
        if (atomic_load_explicit(&ctl[rank]->ab, memory_order_acquire) >= t) {
            uint64_t w = atomic_load_explicit(&ctl[rank]->why,
                                              memory_order_relaxed);
            int code = (int)(uint32_t)w, img = (int)(w >> 32);
            if (code != CAF_STAT_STOPPED_IMAGE && code != CAF_STAT_FAILED_IMAGE)
                code = 1;
            if (img < 0 || img > c->n)
                img = 0;
            set_err(c, code, img);
            return false;
        }
        unsigned char st = caf.status[rank];
        if (st != CAF_IMG_RUNNING) {
            /* Its stores came before its status message. */
            if (atomic_load_explicit(f, memory_order_acquire) >= t)
                return true;
            if (which == F_FIN)
                return true;
            set_err(c, st == CAF_IMG_FAILED ? CAF_STAT_FAILED_IMAGE
                                            : CAF_STAT_STOPPED_IMAGE,
                    j + 1);
            return false;
        }
        node_idle(&spins, &since);
    }
}

/* Waits for flag `which` >= t of every member but us. */
static bool wait_all(coll_t *c, int which, uint64_t t)
{
    for (int j = 0; j < c->n; j++)
        if (j != c->me && !wait_flag(c, j, which, t))
            return false;
    return true;
}

/* Gives up the collective whose last ticket is last: the members waiting
 * for us give up too (ab), the guard of later ones passes (fin). */
static void give_up(const coll_t *c, uint64_t last)
{
    node_ctl_t *k = ctl[caf.rank];
    atomic_store_explicit(&k->why,
                          (uint64_t)(uint32_t)c->err |
                              (uint64_t)(uint32_t)c->err_image << 32,
                          memory_order_relaxed);
    atomic_store_explicit(&k->ab, last, memory_order_release);
    atomic_store_explicit(&k->fin, last, memory_order_release);
}

/* ------------------------------------------------------------ one chunk */

static size_t part_lo(size_t m, int k, int n)
{
    return (size_t)((unsigned __int128)m * (unsigned)k / (unsigned)n);
}

/* Whether chunk t of cnt elements is reduced by every image that wants it
 * from all the slots (small), or reduce-scattered and gathered. */
static bool small_chunk(const coll_t *c, size_t cnt)
{
    return cnt * c->esz <= NODE_SMALL || cnt < (size_t)c->n;
}

/* acc = s_0 op s_1 op ... op s_{n-1} over elements [lo, lo + cnt) of the
 * members' slots at par, in image order, in one pass per member after the
 * first; our own contribution s_me is read from own when it is not NULL
 * (own[i] is element lo + i), else from our slot.  acc overlaps no source
 * (it may be our own slot's part only when own is given). */
static void fold_slots(const coll_t *c, char *acc, size_t par, size_t lo,
                       size_t cnt, const char *own)
{
    size_t off = par + lo * c->esz;
    const char *src[2];
    for (int j = 0; j < 2; j++)
        src[j] = own && j == c->me ? own : slots[c->ranks[j]] + off;
    caf_coll_combine3(c, acc, src[0], src[1], cnt);
    for (int j = 2; j < c->n; j++)
        caf_coll_combine(c, acc, own && j == c->me ? own
                                                   : slots[c->ranks[j]] + off,
                         cnt);
}

/* Reduction of chunk t: cnt elements, ours at p (NULL: no buffer). */
static bool reduce_chunk(coll_t *c, char *p, size_t cnt, uint64_t t,
                         int root, bool all)
{
    size_t esz = c->esz;
    int n = c->n;
    assert(n >= 2);
    size_t par = (size_t)(t & 1) * NODE_SLOT;
    bool want = all || c->me == root;
    /* Small: each image that wants the result folds every slot straight
     * into its own buffer -- one wait, one pass over n slots. */
    if (small_chunk(c, cnt)) {
        if (!want)
            return true;
        if (!wait_all(c, F_ARR, t))
            return false;
        fold_slots(c, p, par, 0, cnt, NULL);
        return true;
    }
    /* Large: our part was not copied into our slot (no other image reads
     * it as an input): we fold it from p, piece by piece into our slot's
     * part (which the others gather) and, while the piece is in the
     * cache, into p.  So each image copies (n-1)/n of its array on
     * arrival, folds 1/n, and gathers (n-1)/n: on two images 1 MiB went
     * from 3 to 2.5 array passes per image. */
    if (!wait_all(c, F_ARR, t))
        return false;
    size_t lo = part_lo(cnt, c->me, n), hi = part_lo(cnt, c->me + 1, n);
    char *mine = slots[caf.rank] + par;
    size_t piece = NODE_PIECE / esz ? NODE_PIECE / esz : 1;
    for (size_t i = lo; i < hi; i += piece) {
        size_t k = hi - i < piece ? hi - i : piece;
        fold_slots(c, mine + i * esz, par, i, k, p + i * esz);
        if (want)
            memcpy(p + i * esz, mine + i * esz, k * esz);
    }
    atomic_store_explicit(&ctl[caf.rank]->red, t, memory_order_release);
    if (!want)
        return true;
    for (int j = 0; j < n; j++) {
        size_t jl = part_lo(cnt, j, n), jh = part_lo(cnt, j + 1, n);
        if (j == c->me)
            continue;
        if (!wait_flag(c, j, F_RED, t))
            return false;
        memcpy(p + jl * esz, slots[c->ranks[j]] + par + jl * esz,
               (jh - jl) * esz);
    }
    return true;
}

/* ------------------------------------------------------------- driver */

bool caf_coll_node_run(coll_t *c, char *buf, size_t nelem, int root, bool all)
{
    assert(node_on && c->n == caf.nranks);
    size_t esz = c->esz, len = nelem * esz;
    size_t per = NODE_SLOT / esz;
    bool bcast = c->op == OP_BCAST;
    bool src = bcast && c->me == root;
    bool want = all || c->me == root;
    node_ctl_t *me = ctl[caf.rank];
    uint64_t t0 = tick + 1;
    /* The chunk count: ours, or for a broadcast receiver the source's
     * (published with its first chunk), so that every image's tickets
     * agree even when this image's A is wrong. */
    uint64_t nch = nelem ? (nelem + per - 1) / per : 1;
    bool skip = false;     /* a receiver whose A cannot take the data */
    bool ok = true;
    for (uint64_t ch = 0; ok && ch < nch; ch++) {
        uint64_t t = t0 + ch;
        size_t first = (size_t)ch * per;
        size_t cnt = skip ? 0 : (nelem - first < per ? nelem - first : per);
        char *p = skip ? NULL : buf + first * esz;
        size_t par = (size_t)(t & 1) * NODE_SLOT;
        if (t >= 3 && !wait_all(c, F_FIN, t - 2)) {
            ok = false;
            break;
        }
        if (src || (!bcast && small_chunk(c, cnt))) {
            memcpy(slots[caf.rank] + par, p, cnt * esz);
        } else if (!bcast) {
            /* Reduce-scattered: the others read every part but ours. */
            size_t lo = part_lo(cnt, c->me, c->n);
            size_t hi = part_lo(cnt, c->me + 1, c->n);
            memcpy(slots[caf.rank] + par, p, lo * esz);
            memcpy(slots[caf.rank] + par + hi * esz, p + hi * esz,
                   (cnt - hi) * esz);
        }
        if (ch == 0)
            atomic_store_explicit(&me->len[t & 1], buf ? len : UINT64_MAX,
                                  memory_order_relaxed);
        atomic_store_explicit(&me->arr, t, memory_order_release);
        if (bcast && !src) {
            if (!wait_flag(c, root, F_ARR, t)) {
                ok = false;
                break;
            }
            int rs = c->ranks[root];
            uint64_t sl = atomic_load_explicit(&ctl[rs]->len[t & 1],
                                               memory_order_relaxed);
            if (ch == 0 && (buf == NULL || sl != len)) {
                /* Take part to the end of the source's chunks, copy
                 * nothing, report it. */
                if (buf == NULL)
                    snprintf(c->why, sizeof c->why, "the argument A has no "
                             "memory on this image (an allocatable component "
                             "that is not allocated? gfortran 12 cannot "
                             "allocate it here: allocate it with the source's "
                             "shape first)");
                else
                    snprintf(c->why, sizeof c->why, "A has %zu bytes on this "
                             "image and %llu on SOURCE_IMAGE %d", len,
                             (unsigned long long)sl, root + 1);
                set_err(c, 1, root + 1);
                skip = true;
                if (sl != UINT64_MAX && sl % esz == 0)
                    nch = (sl / esz + per - 1) / per;
                if (nch == 0 || nch > SIZE_MAX / NODE_SLOT)
                    nch = 1;
            }
            if (!skip)
                memcpy(p, slots[rs] + par, cnt * esz);
        } else if (!bcast) {
            if (ch == 0 && want) {
                /* Sizes must agree: every image's first chunk says. */
                if (!wait_all(c, F_ARR, t))
                    ok = false;
                for (int j = 0; ok && j < c->n; j++) {
                    uint64_t jl = atomic_load_explicit(
                        &ctl[c->ranks[j]]->len[t & 1], memory_order_relaxed);
                    if (jl != len) {
                        snprintf(c->why, sizeof c->why, "A has %zu bytes on "
                                 "this image and %llu on image %d", len,
                                 (unsigned long long)jl, j + 1);
                        set_err(c, 1, j + 1);
                        ok = false;
                    }
                }
            }
            ok = ok && reduce_chunk(c, p, cnt, t, root, all);
        }
        if (ok)
            atomic_store_explicit(&me->fin, t, memory_order_release);
    }
    tick = t0 + nch - 1;
    if (!ok)
        give_up(c, tick);
    return ok && c->err == 0;
}
