/*
 * caf_coll.c -- CO_SUM, CO_MIN, CO_MAX, CO_REDUCE, CO_BROADCAST.
 *
 * Every collective runs over the images of the current team on one
 * binomial tree.  Images are renumbered relative to the root (v = image -
 * root mod n); the parent of v is v with its lowest set bit cleared and its
 * children are v + 2^k for every 2^k below that bit.  A reduction goes up
 * the tree to the root (RESULT_IMAGE, or image 1 when every image wants
 * the result), then, when every image wants it, the result goes down the
 * same tree rooted at image 1: 2 log2(n) steps of latency.  CO_BROADCAST
 * is the downward half from SOURCE_IMAGE.  A reduction whose result every
 * image wants and that fits one eager message (<= COLL_EAGER bytes) uses
 * recursive doubling instead (allreduce_rd): log2(n) exchanges.
 *
 * Order: a node combines acc = op(acc, child) over its children in
 * increasing k; acc then covers images v..v+2^k-1 and the child the next
 * ones, so the result is the reduction in image order relative to the root
 * (exactly image order when the root is image 1): the same bits on every
 * run, and an associative but non-commutative CO_REDUCE operation gets the
 * order the standard's "A1 op A2 op ... op An" suggests.
 *
 * Pipelining: the array (packed into a contiguous buffer when the actual
 * argument is not contiguous; reduced in place when it is) is cut into
 * chunks of coll_chunk bytes (COLL_CHUNK = 256 KiB, less when firehose's
 * long AM is smaller) rounded down to whole elements; chunk c moves up (or
 * down) while chunk c+1 is being combined below.
 *
 * Transport of one chunk from a sender to a receiver:
 *   - at most COLL_EAGER bytes (and fh_am_max_medium()): eager -- a medium
 *     AM (CAF_H_COLL) whose handler copies the payload into a queue entry;
 *     no slot, no handshake, so a small collective costs one message per
 *     tree edge;
 *   - larger: rendezvous -- the receiver grants a slot of its symmetric
 *     scratch with a "clear to send" short AM (CAF_H_COLL_2) carrying the
 *     slot's offset; the sender then writes the chunk straight into the slot
 *     with a long AM (CAF_H_COLL) whose handler runs once the payload is
 *     visible.  The receiver combines from the slot (no copy) and grants
 *     the slot again only after it has consumed it.
 * Every message carries (team id, per-team collective sequence number,
 * phase, chunk) and is matched on those and its source rank, so messages of
 * a later collective (an image that is not a result image may run ahead by
 * any number of collectives) wait in the queue and never mix with the
 * current one; a slot is granted only by its owner and only while the
 * owner is in the collective that consumes it, so it cannot be overwritten
 * before it is read.
 *
 * Trust: every message is checked twice (caf_wire.h).  Its handler
 * refuses what no collective could use -- bad arguments, an eager chunk
 * over the eager size, a long chunk that is not exactly at the start of
 * one of our slots or is not longer than eager, a grant of an offset that
 * is no slot -- and keys the rest on the sender the runtime verified.
 * The wait that takes it (wait_msg) checks it against what is due: the
 * chunk's exact length, and the very slot granted for it; a sender's grant
 * must name the receiver's slot for our level.  A message that fails is
 * dropped and logged (caf_drop) and the wait goes on, so a bad message
 * never reaches combine() or a long AM, and the real one is still used.
 *
 * Scratch: COLL_LEVELS(n) = ceil(log2 nranks) child levels plus one for the
 * parent of the broadcast, two chunk slots each (double buffering:
 * chunk c uses slot c % 2), i.e. 2 * (ceil(log2 nranks) + 1) * coll_chunk
 * bytes of the symmetric heap (2 MiB on 8 images), allocated collectively by
 * the first collective of the program, which therefore must be executed by
 * every image of the initial team (a collective in a team before any in the
 * initial team is refused).  It is never freed.
 *
 * Stopped and failed images: an image that waits for a message from an
 * image that has stopped or failed without sending it (after a grace of
 * 0.2 s for messages still on their way) gives STAT_STOPPED_IMAGE /
 * STAT_FAILED_IMAGE and sends ABORT to its tree neighbours, which give up
 * too and pass it on; so every image of the collective returns, with the
 * error, except those that had finished their part.  An image that stopped
 * after contributing is no error: only a missing contribution is.
 *
 * Types: integer 1/2/4/8/16 (sums wrap around), real 4/8/16, complex
 * 4/8/16, character (CO_MIN/CO_MAX compare the a_len characters, kind 1 or
 * 4), anything for CO_BROADCAST (bytes) and CO_REDUCE (the user's
 * function).  REAL(10) and REAL(16) both arrive as type REAL with elem_len
 * 16 (gfortran 12 passes no kind): they cannot be told apart, and 16-byte
 * reals are taken as REAL(16); CO_BROADCAST of REAL(10) is fine.
 */
#include "caf_coll.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

/* uthash's allocation failure: like every other one here. */
#define uthash_fatal(msg) fh_abort(1, "caf: collective: out of memory")
#include <uthash.h>

#define COLL_CHUNK ((size_t)256 << 10)
#define COLL_EAGER ((size_t)2048)


/* ------------------------------------------------------ message queue */

enum { MSG_DATA = 1, MSG_CTS = 2, MSG_ABORT = 3 };

/* Messages wait in a hash table keyed on what a receiver matches them by;
 * messages with the same key (an ABORT may come twice) form a FIFO list
 * under the first, which alone is in the table. */
typedef struct coll_key {
    uint64_t team, seq, chunk;
    int32_t src, kind;
} coll_key_t;              /* no padding: hashed as bytes */

typedef struct coll_msg {
    coll_key_t key;
    struct coll_msg *next;   /* later messages with the same key */
    struct coll_msg *last;   /* in the table's entry: the last of them */
    UT_hash_handle hh;
    uint64_t off;     /* CTS: offset of the granted slot; ABORT: STAT code
                         | image << 32 */
    void *data;       /* DATA: payload (owned when eager) */
    size_t len;       /* DATA: its bytes */
    bool owned;       /* DATA: eager (a copy), else long (in our slot) */
} coll_msg_t;

static coll_msg_t *q_table;

static void q_add(coll_msg_t *m)
{
    coll_msg_t *first;
    m->next = NULL;
    HASH_FIND(hh, q_table, &m->key, sizeof m->key, first);
    if (first != NULL) {
        first->last->next = m;
        first->last = m;
        return;
    }
    m->last = m;
    HASH_ADD(hh, q_table, key, sizeof m->key, m);
}

static coll_msg_t *q_take(int kind, int src, uint64_t team, uint64_t seq,
                          uint64_t chunk)
{
    coll_key_t key;
    memset(&key, 0, sizeof key);
    key.team = team;
    key.seq = seq;
    key.chunk = chunk;
    key.src = src;
    key.kind = kind;
    coll_msg_t *m;
    HASH_FIND(hh, q_table, &key, sizeof key, m);
    if (m == NULL)
        return NULL;
    HASH_DEL(q_table, m);
    coll_msg_t *n = m->next;
    if (n != NULL) {
        n->last = m->last;
        HASH_ADD(hh, q_table, key, sizeof n->key, n);
    }
    return m;
}

static void msg_free(coll_msg_t *m)
{
    if (m->owned)
        free(m->data);
    free(m);
}

static size_t scratch_off = (size_t)-1;
static size_t coll_chunk;    /* bytes per slot */
static size_t coll_eager;    /* largest eager chunk */
static int coll_levels;      /* child levels; slot level coll_levels: bcast */

/* Our scratch, as the checks of caf_wire.h see it (before caf_coll_init:
 * no slots and no eager size, so every message is refused -- none is
 * sent before every image's init is over). */
static caf_coll_geom_t coll_geom(void)
{
    if (scratch_off == (size_t)-1)
        return (caf_coll_geom_t){0};
    return (caf_coll_geom_t){.base = caf.bases[caf.rank],
                             .scratch_off = scratch_off,
                             .chunk = coll_chunk, .eager = coll_eager,
                             .nslots = 2 * ((unsigned)coll_levels + 1)};
}

static coll_msg_t *msg_new(void)
{
    coll_msg_t *m = calloc(1, sizeof *m);
    if (m == NULL)
        fh_abort(1, "caf: collective: out of memory");
    return m;
}

/* DATA: args team, seq, chunk, long (1: buf is the slot).  What the chunk
 * must be (its length, its slot) is known only to the collective that
 * waits for it: checked again there (wait_msg). */
static void data_handler(fh_token_t tok, void *buf, size_t n,
                         const uint64_t *a, unsigned na)
{
    caf_am_in_t in = {.src = -1, .buf = buf, .nbytes = n, .args = a,
                      .nargs = na};
    fh_token_source(tok, &in.src);
    const caf_job_t job = caf_job();
    const caf_coll_geom_t g = coll_geom();
    caf_coll_data_t d;
    char why[200];
    if (!caf_wire_coll_data(&job, &g, &in, &d, why, sizeof why)) {
        caf_drop("collective chunk", in.src, why);
        return;
    }
    coll_msg_t *m = msg_new();
    m->key.kind = MSG_DATA;
    m->key.src = in.src;
    m->key.team = d.team;
    m->key.seq = d.seq;
    m->key.chunk = d.chunk;
    m->len = d.len;
    if (d.is_long) {
        m->data = buf;
    } else {
        /* The runtime's buffer lives until we return: keep a copy. */
        m->data = malloc(d.len);
        if (m->data == NULL)
            fh_abort(1, "caf: collective: out of memory");
        memcpy(m->data, d.data, d.len);
        m->owned = true;
    }
    q_add(m);
}

/* CTS: args team, seq, chunk, slot offset (or an ABORT, caf_wire.h). */
static void cts_handler(fh_token_t tok, void *buf, size_t n,
                        const uint64_t *a, unsigned na)
{
    caf_am_in_t in = {.src = -1, .buf = buf, .nbytes = n, .args = a,
                      .nargs = na};
    fh_token_source(tok, &in.src);
    const caf_job_t job = caf_job();
    const caf_coll_geom_t g = coll_geom();
    caf_coll_cts_t cts;
    char why[200];
    if (!caf_wire_coll_cts(&job, &g, &in, &cts, why, sizeof why)) {
        caf_drop("collective grant", in.src, why);
        return;
    }
    coll_msg_t *m = msg_new();
    m->key.kind = cts.abort ? MSG_ABORT : MSG_CTS;
    m->key.src = in.src;
    m->key.team = cts.team;
    m->key.seq = cts.seq;
    m->key.chunk = cts.chunk;
    m->off = cts.abort ? (uint64_t)(uint32_t)cts.err |
                             (uint64_t)(uint32_t)cts.err_image << 32
                       : cts.off;
    q_add(m);
}

/* Handlers exist on every image before fh_init's exchange is over (a
 * handler may be registered before fh_init). */
__attribute__((constructor)) static void coll_register(void)
{
    if (fh_am_register(CAF_H_COLL, data_handler, "caf collective data") != FH_OK ||
        fh_am_register(CAF_H_COLL_2, cts_handler, "caf collective cts") != FH_OK)
        abort();
}

/* ------------------------------------------------------------ scratch */

static size_t slot_off(int level, uint64_t chunk)
{
    return scratch_off + ((size_t)level * 2 + (size_t)(chunk & 1)) * coll_chunk;
}

/* Called once by caf_start, in the initial team, before any coarray is
 * registered: the same offset on every image, whichever team later runs
 * the first collective. */
void caf_coll_init(void)
{
    const char *stmt = "start-up";
    coll_chunk = COLL_CHUNK;
    size_t ml = fh_am_max_long();
    if (ml < coll_chunk)
        coll_chunk = ml & ~(size_t)63;
    coll_eager = COLL_EAGER;
    if (fh_am_max_medium() < coll_eager)
        coll_eager = fh_am_max_medium();
    coll_levels = 0;
    while ((1 << coll_levels) < caf.nranks)
        coll_levels++;
    size_t sz = 2 * ((size_t)coll_levels + 1) * coll_chunk;
    scratch_off = caf_sym_alloc(sz);
    if (scratch_off == (size_t)-1)
        caf_fatal(stmt, "no room for %zu bytes of collective scratch in the "
                  "coarray heap (FH_CAF_HEAP)", sz);
    caf_coll_node_init();
}

/* Sequence numbers per team. */
typedef struct { uint64_t id, seq; } tseq_t;
static tseq_t *tseqs;
static size_t ntseqs;

static uint64_t next_seq(uint64_t team)
{
    for (size_t i = 0; i < ntseqs; i++)
        if (tseqs[i].id == team)
            return ++tseqs[i].seq;
    tseq_t *t = realloc(tseqs, (ntseqs + 1) * sizeof *t);
    if (t == NULL)
        caf_fatal("collective", "out of memory");
    tseqs = t;
    tseqs[ntseqs] = (tseq_t){team, 1};
    return tseqs[ntseqs++].seq;
}

/* ------------------------------------------------- one collective call */

typedef struct kid {
    int rank, level;
} kid_t;

static int vrank_rank(const coll_t *c, int v)
{
    return c->ranks[(v + c->root) % c->n];
}

static void report_ended(const coll_t *c, int st, int who)
{
    caf_error(c->stat, c->errmsg, c->errmsg_len, st, c->stmt,
              "image %d has %s", who,
              st == CAF_STAT_FAILED_IMAGE ? "failed" : "stopped");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether m, the next message of its key, is the one due: DATA of len
 * bytes (in the slot at offset slot when long), a CTS for the slot at
 * offset slot.  A message that is not is dropped. */
static bool msg_due(const coll_msg_t *m, size_t len, size_t slot)
{
    char why[200];
    bool ok;
    if (m->key.kind == MSG_DATA) {
        const caf_coll_geom_t g = coll_geom();
        const caf_coll_data_t d = {.data = m->data, .len = m->len,
                                   .is_long = !m->owned};
        ok = caf_wire_coll_due(&g, &d, len, slot, why, sizeof why);
    } else {
        const caf_coll_cts_t cts = {.off = (size_t)m->off};
        ok = caf_wire_grant_due(&cts, slot, why, sizeof why);
    }
    if (!ok)
        caf_drop(m->key.kind == MSG_DATA ? "collective chunk"
                                         : "collective grant",
                 m->key.src, why);
    return ok;
}

/* Waits for a message of kind (MSG_DATA or MSG_CTS) from src, as due:
 * msg_due(len, slot); messages of its key that are not are dropped and the
 * wait goes on.  NULL when it will not come: src has stopped or failed
 * without sending it, or src abandoned this collective (an ABORT message);
 * c->err/c->err_image say why. */
static coll_msg_t *wait_msg(coll_t *c, int kind, int src, uint64_t chunk,
                            size_t len, size_t slot)
{
    double ended_at = 0, since = 0;
    for (unsigned spin = 0;;) {
        coll_msg_t *m = q_take(kind, src, c->team, c->seq, chunk);
        if (m && msg_due(m, len, slot))
            return m;
        if (m) {
            msg_free(m);
            continue;
        }
        m = q_take(MSG_ABORT, src, c->team, c->seq, 0);
        if (m) {
            c->err = (int)(m->off & 0xffffffffu);
            c->err_image = (int)(m->off >> 32);
            msg_free(m);
            return NULL;
        }
        unsigned char st = caf.status[src];
        if (st != CAF_IMG_RUNNING) {
            /* Its messages sent before it stopped may still be on their
             * way (a long AM is not ordered with the status message):
             * give them a moment. */
            if (ended_at == 0) {
                ended_at = now_s();
            } else if (now_s() - ended_at > 0.2) {
                c->err = st == CAF_IMG_FAILED ? CAF_STAT_FAILED_IMAGE
                                              : CAF_STAT_STOPPED_IMAGE;
                for (int i = 0; i < c->n; i++)
                    if (c->ranks[i] == src)
                        c->err_image = i + 1;
                return NULL;
            }
        }
        caf_coll_idle(&spin, &since);
    }
}

/* After an error: tells the tree neighbours that are still running to give
 * up this collective too (they pass it on). */
static void poison(const coll_t *c, int parent, const kid_t *kids, int nk)
{
    uint64_t a[4] = {c->team, c->seq, CAF_COLL_CHUNK_ABORT,
                     (uint64_t)(uint32_t)c->err |
                         ((uint64_t)(uint32_t)c->err_image << 32)};
    int to[65], m = 0;
    if (parent >= 0)
        to[m++] = parent;
    for (int i = 0; i < nk; i++)
        to[m++] = kids[i].rank;
    for (int i = 0; i < m; i++)
        if (caf.status[to[i]] == CAF_IMG_RUNNING)
            fh_am_request_short(to[i], CAF_H_COLL_2, a, 4);
}

static void check_rc(const coll_t *c, int rc, int rank, const char *what)
{
    if (rc != FH_OK)
        caf_fatal(c->stmt, "%s image %d: %s", what, rank + 1, fh_strerror(rc));
}

/* Lets src send chunk `chunk` (len bytes) into our slot of `level`. */
static void grant(const coll_t *c, int src, int level, uint64_t chunk, size_t len)
{
    if (len <= coll_eager)
        return;
    uint64_t a[4] = {c->team, c->seq, chunk, slot_off(level, chunk)};
    check_rc(c, fh_am_request_short(src, CAF_H_COLL_2, a, 4), src, "granting");
}

/* Sends one chunk into dst's slot of `level` (when it is not eager);
 * false after reporting a stopped/failed member. */
static bool send_chunk(coll_t *c, int dst, int level, uint64_t chunk,
                       const void *data, size_t len)
{
    uint64_t a[4] = {c->team, c->seq, chunk, 0};
    if (len <= coll_eager) {
        check_rc(c, fh_am_request_medium(dst, CAF_H_COLL, data, len, a, 4),
                 dst, "sending to");
        return true;
    }
    coll_msg_t *m = wait_msg(c, MSG_CTS, dst, chunk, 0, slot_off(level, chunk));
    if (m == NULL)
        return false;
    assert(m->off == slot_off(level, chunk)); /* msg_due */
    a[3] = 1;
    int rc = fh_am_request_long(dst, CAF_H_COLL, data, len,
                                caf.bases[dst] + m->off, a, 4);
    msg_free(m);
    check_rc(c, rc, dst, "sending to");
    return true;
}

/* ------------------------------------------------------- tree phases */

#define PHASE_UP ((uint64_t)CAF_COLL_UP << CAF_COLL_PHASE_SHIFT)
#define PHASE_DOWN ((uint64_t)CAF_COLL_DOWN << CAF_COLL_PHASE_SHIFT)

/* Parent rank (-1 for the root) and children (increasing level) of us;
 * *level: ours among the parent's children (its slot level for us). */
static int tree(const coll_t *c, kid_t *kids, int *nkids, int *level)
{
    int v = (c->me - c->root + c->n) % c->n;
    int parent = -1;
    *nkids = 0;
    *level = 0;
    for (int k = 0; (1 << k) < c->n; k++) {
        int mask = 1 << k;
        if (v & mask) {
            parent = vrank_rank(c, v - mask);
            *level = k;
            break;
        }
        if (v + mask < c->n)
            kids[(*nkids)++] = (kid_t){vrank_rank(c, v + mask), k};
    }
    return parent;
}

static size_t chunk_len(size_t nelem, size_t per, uint64_t ch)
{
    size_t first = (size_t)ch * per;
    return (nelem - first < per ? nelem - first : per);
}

/* Reduction of buf (nelem elements) to c->root. */
static bool reduce_up(coll_t *c, char *buf, size_t nelem, size_t per,
                      uint64_t nch)
{
    kid_t kids[64];
    int nk, level;
    int parent = tree(c, kids, &nk, &level);
    for (int i = 0; i < nk; i++)
        for (uint64_t ch = 0; ch < 2 && ch < nch; ch++)
            grant(c, kids[i].rank, kids[i].level, PHASE_UP | ch,
                  chunk_len(nelem, per, ch) * c->esz);
    for (uint64_t ch = 0; ch < nch; ch++) {
        size_t cnt = chunk_len(nelem, per, ch);
        char *p = buf + (size_t)ch * per * c->esz;
        for (int i = 0; i < nk; i++) {
            coll_msg_t *m = wait_msg(c, MSG_DATA, kids[i].rank, PHASE_UP | ch,
                                     cnt * c->esz,
                                     slot_off(kids[i].level, PHASE_UP | ch));
            if (m == NULL) {
                poison(c, parent, kids, nk);
                return false;
            }
            caf_coll_combine(c, p, m->data, cnt);
            msg_free(m);
            if (ch + 2 < nch)
                grant(c, kids[i].rank, kids[i].level, PHASE_UP | (ch + 2),
                      chunk_len(nelem, per, ch + 2) * c->esz);
        }
        if (parent >= 0 &&
            !send_chunk(c, parent, level, PHASE_UP | ch, p, cnt * c->esz)) {
            poison(c, parent, kids, nk);
            return false;
        }
    }
    return true;
}

/* Broadcast of buf from c->root. */
static bool bcast_down(coll_t *c, char *buf, size_t nelem, size_t per,
                       uint64_t nch)
{
    kid_t kids[64];
    int nk, level;
    int parent = tree(c, kids, &nk, &level);
    if (parent >= 0)
        for (uint64_t ch = 0; ch < 2 && ch < nch; ch++)
            grant(c, parent, coll_levels, PHASE_DOWN | ch,
                  chunk_len(nelem, per, ch) * c->esz);
    for (uint64_t ch = 0; ch < nch; ch++) {
        size_t len = chunk_len(nelem, per, ch) * c->esz;
        char *p = buf + (size_t)ch * per * c->esz;
        if (parent >= 0) {
            coll_msg_t *m = wait_msg(c, MSG_DATA, parent, PHASE_DOWN | ch, len,
                                     slot_off(coll_levels, PHASE_DOWN | ch));
            if (m == NULL) {
                poison(c, parent, kids, nk);
                return false;
            }
            memcpy(p, m->data, len);
            msg_free(m);
            if (ch + 2 < nch)
                grant(c, parent, coll_levels, PHASE_DOWN | (ch + 2),
                      chunk_len(nelem, per, ch + 2) * c->esz);
        }
        /* The largest subtree first: it has the longest way to go. */
        for (int i = nk - 1; i >= 0; i--)
            if (!send_chunk(c, kids[i].rank, coll_levels, PHASE_DOWN | ch, p,
                            len)) {
                poison(c, parent, kids, nk);
                return false;
            }
    }
    return true;
}

/* ----------------------------------------------- small all-reduce */

#define PHASE_RD ((uint64_t)CAF_COLL_RD << CAF_COLL_PHASE_SHIFT) /* | round */
#define PHASE_FOLD ((uint64_t)CAF_COLL_FOLD << CAF_COLL_PHASE_SHIFT)
#define PHASE_UNFOLD ((uint64_t)CAF_COLL_UNFOLD << CAF_COLL_PHASE_SHIFT)

/* Tells every other member to give up this collective. */
static void poison_all(const coll_t *c)
{
    uint64_t a[4] = {c->team, c->seq, CAF_COLL_CHUNK_ABORT,
                     (uint64_t)(uint32_t)c->err |
                         ((uint64_t)(uint32_t)c->err_image << 32)};
    for (int i = 0; i < c->n; i++)
        if (i != c->me && caf.status[c->ranks[i]] == CAF_IMG_RUNNING)
            fh_am_request_short(c->ranks[i], CAF_H_COLL_2, a, 4);
}

/* Team index of virtual rank v of the doubling (see allreduce_rd). */
static int rd_image(int v, int r)
{
    return v < r ? 2 * v : v + r;
}

/* Every image wants the result of a reduction that fits one eager
 * message: recursive doubling, log2(n) exchanges instead of the tree's
 * 2 log2(n) steps.  With p2 the largest power of two <= n and r = n - p2,
 * images 2i+1 < 2r first fold into 2i and get the result back at the end;
 * the other p2 images (virtual ranks v, in image order) exchange with
 * v ^ 2^k in round k and combine the lower block first, so every image
 * computes the same reduction, in image order: the same bits everywhere. */
static bool allreduce_rd(coll_t *c, char *buf, size_t nelem)
{
    size_t len = nelem * c->esz;
    assert(len <= coll_eager); /* eager only: no slots, no grants */
    int n = c->n, me = c->me;
    int p2 = 1;
    while (p2 * 2 <= n)
        p2 *= 2;
    int r = n - p2;
    coll_msg_t *m;
    if (me < 2 * r && (me & 1)) {
        /* Folded: hand our part to me-1, receive the result. */
        int to = c->ranks[me - 1];
        if (!send_chunk(c, to, 0, PHASE_FOLD, buf, len) ||
            (m = wait_msg(c, MSG_DATA, to, PHASE_UNFOLD, len, 0)) == NULL)
            goto fail;
        memcpy(buf, m->data, len);
        msg_free(m);
        return true;
    }
    int v = me < 2 * r ? me / 2 : me - r;
    if (me < 2 * r) {
        if ((m = wait_msg(c, MSG_DATA, c->ranks[me + 1], PHASE_FOLD, len, 0)) ==
            NULL)
            goto fail;
        caf_coll_combine(c, buf, m->data, nelem);
        msg_free(m);
    }
    char *tmp = malloc(len);
    if (tmp == NULL)
        caf_fatal(c->stmt, "out of memory");
    for (int k = 0; (1 << k) < p2; k++) {
        int pv = v ^ (1 << k);
        int partner = c->ranks[rd_image(pv, r)];
        if (!send_chunk(c, partner, 0, PHASE_RD | (uint64_t)k, buf, len) ||
            (m = wait_msg(c, MSG_DATA, partner, PHASE_RD | (uint64_t)k, len,
                          0)) == NULL) {
            free(tmp);
            goto fail;
        }
        if (pv > v) {
            caf_coll_combine(c, buf, m->data, nelem);
        } else {
            memcpy(tmp, m->data, len);
            caf_coll_combine(c, tmp, buf, nelem);
            memcpy(buf, tmp, len);
        }
        msg_free(m);
    }
    free(tmp);
    if (me < 2 * r &&
        !send_chunk(c, c->ranks[me + 1], 0, PHASE_UNFOLD, buf, len))
        goto fail;
    return true;
fail:
    poison_all(c);
    return false;
}

/* ----------------------------------------------- large all-reduce */

#define PHASE_RS ((uint64_t)CAF_COLL_RS << CAF_COLL_PHASE_SHIFT)
#define PHASE_AG ((uint64_t)CAF_COLL_AG << CAF_COLL_PHASE_SHIFT)

enum { X_COPY, X_ACC, X_ACC_REV };

/* Sends scnt elements from sp to rank `to` and receives rcnt elements from
 * rank `from` into rp, in chunks of per elements with ids base | chunk,
 * through slots of `level` (the receiver's grants for eager chunks are
 * skipped); each received chunk is copied (X_COPY) or combined, rp = rp op
 * in (X_ACC) or rp = in op rp (X_ACC_REV: the sender's block is the lower
 * one).  to or from may be -1.  false after a stopped/failed member. */
static bool xchg(coll_t *c, int to, const char *sp, size_t scnt, int from,
                 char *rp, size_t rcnt, int level, uint64_t base, size_t per,
                 int mode, char *tmp)
{
    size_t esz = c->esz;
    uint64_t sn = to < 0 ? 0 : (scnt + per - 1) / per;
    uint64_t rn = from < 0 ? 0 : (rcnt + per - 1) / per;
    for (uint64_t ch = 0; ch < 2 && ch < rn; ch++)
        grant(c, from, level, base | ch, chunk_len(rcnt, per, ch) * esz);
    for (uint64_t ch = 0; ch < sn || ch < rn; ch++) {
        if (ch < sn &&
            !send_chunk(c, to, level, base | ch, sp + (size_t)ch * per * esz,
                        chunk_len(scnt, per, ch) * esz))
            return false;
        if (ch >= rn)
            continue;
        size_t cnt = chunk_len(rcnt, per, ch);
        char *p = rp + (size_t)ch * per * esz;
        coll_msg_t *m = wait_msg(c, MSG_DATA, from, base | ch, cnt * esz,
                                 slot_off(level, base | ch));
        if (m == NULL)
            return false;
        if (mode == X_COPY) {
            memcpy(p, m->data, cnt * esz);
        } else if (mode == X_ACC) {
            caf_coll_combine(c, p, m->data, cnt);
        } else {
            memcpy(tmp, m->data, cnt * esz);
            caf_coll_combine(c, tmp, p, cnt);
            memcpy(p, tmp, cnt * esz);
        }
        msg_free(m);
        if (ch + 2 < rn)
            grant(c, from, level, base | (ch + 2),
                  chunk_len(rcnt, per, ch + 2) * esz);
    }
    return true;
}

/* Every image wants the result of a large reduction: reduce-scatter by
 * recursive halving, then allgather by recursive doubling, among the p2
 * images of allreduce_rd (the others fold into their left neighbour first
 * and get the result back at the end).  Each image sends and receives
 * about 2 * len bytes whatever n (the tree: len per level, twice), and the
 * two directions of every exchange overlap.  Block order as in
 * allreduce_rd: the lower block is the left operand, so each element is
 * reduced in image order, once, by one image: the same bits everywhere. */
static bool allreduce_rsag(coll_t *c, char *buf, size_t nelem, size_t per)
{
    int n = c->n, me = c->me;
    int p2 = 1, rounds = 0;
    while (p2 * 2 <= n) {
        p2 *= 2;
        rounds++;
    }
    int r = n - p2;
    size_t esz = c->esz;
    char *tmp = malloc(per * esz);
    if (tmp == NULL)
        caf_fatal(c->stmt, "out of memory");
    bool ok = true;
    if (me < 2 * r && (me & 1)) {
        int to = c->ranks[me - 1];
        ok = xchg(c, to, buf, nelem, -1, NULL, 0, coll_levels, PHASE_FOLD,
                  per, X_COPY, tmp) &&
             xchg(c, -1, NULL, 0, to, buf, nelem, coll_levels, PHASE_UNFOLD,
                  per, X_COPY, tmp);
        goto out;
    }
    if (me < 2 * r &&
        !(ok = xchg(c, -1, NULL, 0, c->ranks[me + 1], buf, nelem, coll_levels,
                    PHASE_FOLD, per, X_ACC, tmp)))
        goto out;
    int v = me < 2 * r ? me / 2 : me - r;
    size_t lo[64], hi[64];
    size_t l = 0, h = nelem;
    for (int k = 0; ok && k < rounds; k++) {
        int pv = v ^ (1 << k);
        int partner = c->ranks[rd_image(pv, r)];
        size_t mid = l + (h - l) / 2;
        bool upper = (v >> k) & 1; /* we keep the upper half */
        size_t kl = upper ? mid : l, kh = upper ? h : mid;
        size_t sl = upper ? l : mid, sh = upper ? mid : h;
        lo[k] = l;
        hi[k] = h;
        ok = xchg(c, partner, buf + sl * esz, sh - sl, partner, buf + kl * esz,
                  kh - kl, k, PHASE_RS | (uint64_t)k << CAF_COLL_ROUND_SHIFT,
                  per, pv < v ? X_ACC_REV : X_ACC, tmp);
        l = kl;
        h = kh;
    }
    for (int k = rounds - 1; ok && k >= 0; k--) {
        int pv = v ^ (1 << k);
        int partner = c->ranks[rd_image(pv, r)];
        /* We hold [l, h) of [lo[k], hi[k]); the partner the rest. */
        bool upper = (v >> k) & 1;
        size_t ol = upper ? lo[k] : h, oh = upper ? l : hi[k];
        ok = xchg(c, partner, buf + l * esz, h - l, partner, buf + ol * esz,
                  oh - ol, k, PHASE_AG | (uint64_t)k << CAF_COLL_ROUND_SHIFT,
                  per, X_COPY, tmp);
        l = lo[k];
        h = hi[k];
    }
    if (ok && me < 2 * r)
        ok = xchg(c, c->ranks[me + 1], buf, nelem, -1, NULL, 0, coll_levels,
                  PHASE_UNFOLD, per, X_COPY, tmp);
out:
    free(tmp);
    if (!ok)
        poison_all(c);
    return ok;
}

/* ------------------------------------------------------------- driver */

static bool type_ok(coll_t *c)
{
    switch (c->op) {
    case OP_BCAST:
    case OP_REDUCE:
        return true;
    case OP_SUM:
        if (c->bt != CAF_BT_INTEGER && c->bt != CAF_BT_REAL &&
            c->bt != CAF_BT_COMPLEX)
            return false;
        break;
    default:
        if (c->bt == CAF_BT_CHARACTER)
            return c->kind == 1 || c->kind == 4;
        if (c->bt != CAF_BT_INTEGER && c->bt != CAF_BT_REAL)
            return false;
    }
    size_t part = c->bt == CAF_BT_COMPLEX ? c->esz / 2 : c->esz;
    if (c->bt == CAF_BT_INTEGER)
        return part == 1 || part == 2 || part == 4 || part == 8 || part == 16;
    return part == 4 || part == 8 || part == 16;
}

/* gfortran 12 lowers CO_BROADCAST of a derived type with allocatable
 * components into one call per component, each allocatable one with a
 * temporary descriptor whose data, dtype and bounds it sets but not its
 * span or offset (stack garbage): a contiguous array.  Any other
 * descriptor keeps base = first element, so offset = -sum(lbound *
 * stride); where that does not hold and the span is not a plausible
 * element step, the span is the element size. */
static void fix_span(gfc_descriptor_t *d)
{
    ptrdiff_t off = 0;
    for (int i = 0; i < d->dtype.rank; i++)
        off -= d->dim[i].lbound * d->dim[i].stride;
    ptrdiff_t el = (ptrdiff_t)d->dtype.elem_len;
    if (d->dtype.rank > 0 &&
        ((ptrdiff_t)d->offset != off || d->span < el || d->span > ((ptrdiff_t)1 << 30)))
        d->span = el;
}

/* Reports why c was abandoned. */
static void report(const coll_t *c)
{
    if (c->err == 1)
        caf_error(c->stat, c->errmsg, c->errmsg_len, 1, c->stmt, "%s",
                  c->why[0] ? c->why : "another image gave it up");
    else if (c->err == 0 && c->err_image > 0)
        caf_error(c->stat, c->errmsg, c->errmsg_len, 1, c->stmt,
                  "image %d gave it up", c->err_image);
    else
        report_ended(c, c->err ? c->err : CAF_STAT_STOPPED_IMAGE,
                     c->err_image);
}

static void run(coll_t *c, gfc_descriptor_t *a, int image)
{
    caf_ok(c->stat);
    int n;
    c->ranks = caf_team_ranks(&n);
    c->n = n;
    c->me = caf_team_this_image() - 1;
    if (image < (c->op == OP_BCAST ? 1 : 0) || image > n) {
        caf_error(c->stat, c->errmsg, c->errmsg_len, 1, c->stmt,
                  "%s %d is out of range [%d, %d]",
                  c->op == OP_BCAST ? "SOURCE_IMAGE" : "RESULT_IMAGE", image,
                  c->op == OP_BCAST ? 1 : 0, n);
        return;
    }
    if (a == NULL) {
        caf_error(c->stat, c->errmsg, c->errmsg_len, 1, c->stmt,
                  "the argument A has no memory");
        return;
    }
    /* With -fcoarray=lib a derived type with an allocatable scalar
     * component has a hidden token component (type VOID) beside it, which
     * gfortran 12 broadcasts too: an address of this image, meaningless on
     * another, and NULL unless the object is a coarray.  Nothing to do
     * (every image sees the same type). */
    if (c->op == OP_BCAST && a->dtype.type == CAF_BT_VOID)
        return;
    /* A CO_BROADCAST receiver without memory (an allocatable component not
     * allocated here) still takes part on the node path, which learns the
     * size from the source; the message path refuses it at once. */
    bool nomem = a->base_addr == NULL && a->dtype.elem_len != 0;
    bool receiver = c->op == OP_BCAST && c->me != image - 1;
    if (nomem && !(receiver && caf_coll_node_usable(c))) {
        if (receiver && n > 1) {
            /* The others go on: take our sequence number and tell our tree
             * neighbours to give up (those below us would wait for us). */
            kid_t kids[64];
            int nk, level;
            c->team = caf_team_id();
            c->seq = next_seq(c->team);
            c->root = image - 1;
            c->err_image = c->me + 1;
            int parent = tree(c, kids, &nk, &level);
            poison(c, parent, kids, nk);
        }
        caf_error(c->stat, c->errmsg, c->errmsg_len, 1, c->stmt,
                  "the argument A has no memory%s",
                  c->op == OP_BCAST ? " (an allocatable component that is "
                  "not allocated? gfortran 12 cannot allocate it here: "
                  "allocate it with the source's shape first)" : "");
        return;
    }
    c->esz = a->dtype.elem_len;
    c->bt = a->dtype.type;
    if (c->bt == CAF_BT_CHARACTER)
        c->kind = c->a_len ? (int)(c->esz / c->a_len) : 1;
    else
        c->kind = (int)(c->bt == CAF_BT_COMPLEX ? c->esz / 2 : c->esz);
    if (!type_ok(c)) {
        caf_error(c->stat, c->errmsg, c->errmsg_len, 1, c->stmt,
                  "unsupported type (type code %d, %zu bytes)", c->bt, c->esz);
        return;
    }
    if (c->op == OP_REDUCE && !caf_coll_opr_supported(c)) {
        caf_error(c->stat, c->errmsg, c->errmsg_len, 1, c->stmt,
                  "cannot call OPERATION (flags %d, type code %d, %zu bytes)",
                  c->opr_flags, c->bt, c->esz);
        return;
    }
    if (n == 1 && caf.nranks == 1)
        return;
    c->team = caf_team_id();
    c->seq = next_seq(c->team);
    if (n == 1)
        return;

    int root = c->op == OP_BCAST ? image - 1 : (image ? image - 1 : 0);
    bool mine = c->op == OP_BCAST || image == 0 || c->me == image - 1;
    gfc_descriptor_t *ad = a;
    caf_desc_storage_t fixed;
    if (c->op == OP_BCAST && a->dtype.rank > 0 &&
        a->dtype.rank <= CAF_MAX_DIMENSIONS) {
        memcpy(&fixed, a, sizeof(gfc_descriptor_t) +
                              (size_t)a->dtype.rank * sizeof a->dim[0]);
        ad = &fixed.d;
        fix_span(ad);
    }
    if (nomem) {
        c->root = root;
        if (!caf_coll_node_run(c, NULL, 0, root, true))
            report(c);
        return;
    }
    caf_layout_t ul, pl;
    caf_layout_desc(&ul, ad, NULL);
    size_t nelem = caf_layout_count(&ul);
    if (nelem == 0 || c->esz == 0)
        return;
    if (c->esz > coll_chunk) {
        caf_error(c->stat, c->errmsg, c->errmsg_len, 1, c->stmt,
                  "elements of %zu bytes are larger than the collectives' "
                  "%zu-byte chunk", c->esz, coll_chunk);
        return;
    }
    size_t per = coll_chunk / c->esz;
    uint64_t nch = (nelem + per - 1) / per;

    bool contig = caf_layout_contiguous(&ul);
    char *buf = ul.base;
    caf_type_t ty = {c->bt, c->kind, c->esz};
    if (!contig) {
        buf = malloc(nelem * c->esz);
        if (buf == NULL)
            caf_fatal(c->stmt, "out of memory");
        caf_layout_flat(&pl, buf, c->esz, nelem);
        if (c->op != OP_BCAST || c->me == root)
            caf_copy_layout(&pl, ty, &ul, ty, nelem);
    }
    if (c->op == OP_REDUCE) {
        c->tmp = malloc(c->esz);
        if (c->tmp == NULL)
            caf_fatal(c->stmt, "out of memory");
    }
    bool ok = true;
    c->root = root;
    if (caf_coll_node_usable(c)) {
        ok = caf_coll_node_run(c, buf, nelem, root,
                               c->op == OP_BCAST || image == 0);
    } else if (c->op != OP_BCAST && image == 0 &&
               nelem * c->esz <= coll_eager) {
        ok = allreduce_rd(c, buf, nelem);
    } else if (c->op != OP_BCAST && image == 0) {
        ok = allreduce_rsag(c, buf, nelem, per);
    } else {
        if (c->op != OP_BCAST)
            ok = reduce_up(c, buf, nelem, per, nch);
        if (ok && (c->op == OP_BCAST || image == 0)) {
            c->root = c->op == OP_BCAST ? image - 1 : 0;
            ok = bcast_down(c, buf, nelem, per, nch);
        }
    }
    if (!ok)
        report(c);
    if (!contig) {
        if (ok && mine)
            caf_copy_layout(&ul, ty, &pl, ty, nelem);
        free(buf);
    }
    free(c->tmp);
}

/* ------------------------------------------------------- entry points */

/* gfortran 12 passes ERRMSG= of the co_* calls BY VALUE (the dump shows
 * `em`, not `&em`): the character is an aggregate argument -- in one
 * integer register when its length is at most 8, two when at most 16, on
 * the stack when longer -- and the later arguments move accordingly.  So
 * with this compiler a non-NULL `errmsg` is never the address of the
 * caller's variable (its bytes, or a later argument), ERRMSG= cannot be
 * set (the library only ever sees a copy), and a_len / errmsg_len are
 * unreliable.  We then drop ERRMSG= (STAT= is before it and works) and
 * take a_len from wherever it can be: it is one of the three registers
 * and must match the descriptor, elem_len = a_len * kind (kind 1 first).
 * Without ERRMSG= the arguments are right. */
static void fix_args(gfc_descriptor_t *a, char **errmsg, size_t *errmsg_len,
                     int *a_len)
{
    if (*errmsg == NULL)
        return;
    if (a_len && a && a->dtype.type == CAF_BT_CHARACTER) {
        uint64_t cand[3] = {(uint32_t)(uintptr_t)*errmsg, (uint32_t)*a_len,
                            (uint32_t)*errmsg_len};
        size_t el = a->dtype.elem_len;
        int found = -1;
        for (int i = 0; i < 3 && found < 0; i++)
            if (cand[i] == el)
                found = (int)cand[i];
        for (int i = 0; i < 3 && found < 0; i++)
            if (cand[i] * 4 == el)
                found = (int)cand[i];
        *a_len = found >= 0 ? found : (int)el;
    }
    *errmsg = NULL;
    *errmsg_len = 0;
}

void _gfortran_caf_co_broadcast(gfc_descriptor_t *a, int source_image,
                                int *stat, char *errmsg, size_t errmsg_len)
{
    fix_args(a, &errmsg, &errmsg_len, NULL);
    coll_t c = {.stmt = "CO_BROADCAST", .op = OP_BCAST, .stat = stat,
                .errmsg = errmsg, .errmsg_len = errmsg_len};
    if (a && a->dtype.type == CAF_BT_CHARACTER)
        c.a_len = a->dtype.elem_len;
    run(&c, a, source_image);
}

void _gfortran_caf_co_sum(gfc_descriptor_t *a, int result_image, int *stat,
                          char *errmsg, size_t errmsg_len)
{
    fix_args(a, &errmsg, &errmsg_len, NULL);
    coll_t c = {.stmt = "CO_SUM", .op = OP_SUM, .stat = stat,
                .errmsg = errmsg, .errmsg_len = errmsg_len};
    run(&c, a, result_image);
}

void _gfortran_caf_co_min(gfc_descriptor_t *a, int result_image, int *stat,
                          char *errmsg, int a_len, size_t errmsg_len)
{
    fix_args(a, &errmsg, &errmsg_len, &a_len);
    coll_t c = {.stmt = "CO_MIN", .op = OP_MIN, .stat = stat,
                .errmsg = errmsg, .errmsg_len = errmsg_len,
                .a_len = a_len > 0 ? (size_t)a_len : 0};
    run(&c, a, result_image);
}

void _gfortran_caf_co_max(gfc_descriptor_t *a, int result_image, int *stat,
                          char *errmsg, int a_len, size_t errmsg_len)
{
    fix_args(a, &errmsg, &errmsg_len, &a_len);
    coll_t c = {.stmt = "CO_MAX", .op = OP_MAX, .stat = stat,
                .errmsg = errmsg, .errmsg_len = errmsg_len,
                .a_len = a_len > 0 ? (size_t)a_len : 0};
    run(&c, a, result_image);
}

void _gfortran_caf_co_reduce(gfc_descriptor_t *a, void *(*opr)(void *, void *),
                             int opr_flags, int result_image, int *stat,
                             char *errmsg, int a_len, size_t errmsg_len)
{
    fix_args(a, &errmsg, &errmsg_len, &a_len);
    coll_t c = {.stmt = "CO_REDUCE", .op = OP_REDUCE, .stat = stat,
                .errmsg = errmsg, .errmsg_len = errmsg_len,
                .a_len = a_len > 0 ? (size_t)a_len : 0, .opr = opr,
                .opr_flags = opr_flags};
    run(&c, a, result_image);
}
