/*
 * caf_coll_msg.c -- how the collectives' chunks travel between images over
 * active messages (the message path; caf_coll.h).
 *
 * Transport of one chunk from a sender to a receiver:
 *   - at most COLL_EAGER bytes (and fh_am_max_medium()): eager -- a medium
 *     AM (CAF_H_COLL) whose handler copies the payload into a queue entry;
 *     no slot, no handshake, so a small collective costs one message per
 *     edge;
 *   - larger: rendezvous -- the receiver grants a slot of its symmetric
 *     scratch with a "clear to send" short AM (CAF_H_COLL_2) carrying the
 *     slot's offset; the sender then writes the chunk straight into the
 *     slot with a non-blocking put and, once the put is complete (visible
 *     at the receiver), says so with a short AM (CAF_H_COLL, "written":
 *     offset and length).  The receiver combines from the slot (no copy)
 *     and grants the slot again only after it has consumed it.
 *     caf_coll_send returns once the put is started: the sender's next
 *     chunk, to the same image or another, flows while this one does, and
 *     every wait of this file (wait_msg, caf_coll_flush) completes the
 *     puts in flight and sends their "written" messages (pump).  Over tcp
 *     a blocking long AM was three hand-offs (data, its ack, the header)
 *     during which the image served nothing of its own (1 MiB co_sum on 2
 *     images: 320-340 us; with puts, 272 us with 512 KiB chunks, 358
 *     with 256 KiB: each chunk costs a grant, an ack and a notice, ~40 us
 *     over tcp; 243-258 us once two images exchange whole arrays,
 *     caf_coll_tree.c).
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
 * over the eager size, a written chunk whose offset is not exactly the
 * start of one of our slots or whose length is not longer than eager and
 * at most a slot, a grant of an offset that is no slot -- and keys the
 * rest on the sender the runtime verified.
 * The wait that takes it (wait_msg) checks it against what is due: the
 * chunk's exact length, and the very slot granted for it; a sender's grant
 * must name the receiver's slot for our level.  A message that fails is
 * dropped and logged (caf_drop) and the wait goes on, so a bad message
 * never reaches combine() or a put, and the real one is still used.
 *
 * Scratch: COLL_LEVELS(n) = ceil(log2 nranks) levels plus one (the
 * parent of a broadcast, folds), two chunk slots each (double buffering:
 * chunk c uses slot c % 2), i.e. 2 * (ceil(log2 nranks) + 1) * coll_chunk
 * bytes of the symmetric heap (4 MiB on 8 images), allocated at start-up
 * (caf_coll_init), in the initial team.  It is never freed.
 *
 * Stopped and failed images: a wait for a message from an image that has
 * stopped or failed without sending it (after a grace of 0.2 s for
 * messages still on their way) gives STAT_STOPPED_IMAGE /
 * STAT_FAILED_IMAGE; the algorithm then sends ABORT (caf_coll_poison) to
 * the images that wait for it, which give up too.
 */
#include "caf_coll.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* uthash's allocation failure: like every other one here. */
#define uthash_fatal(msg) fh_abort(1, "caf: collective: out of memory")
#include <uthash.h>

#define COLL_CHUNK ((size_t)512 << 10)
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

/* DATA: an eager chunk or a written one's notice (caf_wire.h).  What the chunk
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
    if (d.written) {
        m->data = (void *)d.data;   /* our slot */
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------- puts in flight */

/* A chunk being written into a receiver's slot: its "written" message
 * follows once the put is complete.  At most PENDING_MAX at a time (the
 * algorithms have at most two per receiver in flight, one per slot
 * parity; a full table waits for its oldest). */
typedef struct pending {
    fh_handle_t h;
    int dst;
    uint64_t args[6];      /* the "written" message: team, seq, chunk, 1,
                              offset, bytes */
} pending_t;

#define PENDING_MAX 16
static pending_t pend[PENDING_MAX];
static unsigned npend;

static void check_rc(const coll_t *c, int rc, int rank, const char *what)
{
    if (rc != FH_OK)
        caf_fatal(c->stmt, "%s image %d: %s", what, rank + 1, fh_strerror(rc));
}

/* Completes the puts that are done and sends their "written" messages, in
 * the order they were started.  A put to an image that has failed
 * meanwhile is forgotten (its collective ends with STAT_FAILED_IMAGE in
 * wait_msg); any other failure ends the job, as a failed send does. */
static void pump(const coll_t *c)
{
    unsigned keep = 0;
    for (unsigned i = 0; i < npend; i++) {
        pending_t *p = &pend[i];
        int rc = fh_test(p->h);
        if (rc == FH_ERR_AGAIN) {
            pend[keep++] = *p;
            continue;
        }
        if (rc != FH_OK && caf.status[p->dst] == CAF_IMG_FAILED)
            continue;
        check_rc(c, rc, p->dst, "sending to");
        check_rc(c, fh_am_request_short(p->dst, CAF_H_COLL, p->args, 6), p->dst,
                 "sending to");
    }
    npend = keep;
}

/* Puts in flight to dst (any image when dst < 0) for chunk (any chunk
 * when dst < 0). */
static unsigned pending_to(int dst, uint64_t chunk)
{
    unsigned k = 0;
    for (unsigned i = 0; i < npend; i++)
        k += dst < 0 || (pend[i].dst == dst && pend[i].args[2] == chunk);
    return k;
}

/* Serves and completes puts until fewer than `limit` of pending_to(dst,
 * chunk) are left. */
static void drain(const coll_t *c, int dst, uint64_t chunk, unsigned limit)
{
    for (unsigned spin = 0;;) {
        pump(c);
        if (pending_to(dst, chunk) < limit)
            return;
        caf_idle(&spin);
    }
}

/* caf_coll.h */
void caf_coll_sent(const coll_t *c, int dst, uint64_t chunk)
{
    drain(c, dst, chunk, 1);
}

/* caf_coll.h */
void caf_coll_flush(const coll_t *c)
{
    drain(c, -1, 0, 1);
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
                                   .written = !m->owned};
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
    double ended_at = 0;
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
             * way (a notice is not ordered with the status message):
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
        pump(c);
        caf_idle(&spin);
    }
}

void caf_coll_poison(const coll_t *c, const int *to, int m)
{
    uint64_t a[4] = {c->team, c->seq, CAF_COLL_CHUNK_ABORT,
                     (uint64_t)(uint32_t)c->err |
                         ((uint64_t)(uint32_t)c->err_image << 32)};
    for (int i = 0; i < m; i++)
        if (caf.status[to[i]] == CAF_IMG_RUNNING)
            fh_am_request_short(to[i], CAF_H_COLL_2, a, 4);
}

/* caf_coll.h */
void caf_coll_grant(const coll_t *c, int src, int level, uint64_t chunk,
                    size_t len)
{
    if (len <= coll_eager)
        return;
    uint64_t a[4] = {c->team, c->seq, chunk, slot_off(level, chunk)};
    check_rc(c, fh_am_request_short(src, CAF_H_COLL_2, a, 4), src, "granting");
}

/* caf_coll.h */
bool caf_coll_send(coll_t *c, int dst, int level, uint64_t chunk,
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
    size_t off = (size_t)m->off;
    msg_free(m);
    drain(c, -1, 0, PENDING_MAX);
    pending_t *p = &pend[npend];
    *p = (pending_t){.dst = dst, .args = {c->team, c->seq, chunk, 1, off, len}};
    check_rc(c, fh_put_nb(dst, caf.bases[dst] + off, data, len, &p->h), dst,
             "sending to");
    npend++;
    pump(c);
    return true;
}

/* caf_coll.h */
void caf_coll_poison_all(const coll_t *c)
{
    uint64_t a[4] = {c->team, c->seq, CAF_COLL_CHUNK_ABORT,
                     (uint64_t)(uint32_t)c->err |
                         ((uint64_t)(uint32_t)c->err_image << 32)};
    for (int i = 0; i < c->n; i++)
        if (i != c->me && caf.status[c->ranks[i]] == CAF_IMG_RUNNING)
            fh_am_request_short(c->ranks[i], CAF_H_COLL_2, a, 4);
}

size_t caf_coll_chunk_size(void)
{
    return coll_chunk;
}

size_t caf_coll_eager_size(void)
{
    return coll_eager;
}

int caf_coll_levels(void)
{
    return coll_levels;
}

coll_msg_t *caf_coll_recv(coll_t *c, int src, uint64_t chunk, size_t len,
                          int level)
{
    return wait_msg(c, MSG_DATA, src, chunk, len, slot_off(level, chunk));
}

const void *caf_coll_msg_data(const coll_msg_t *m)
{
    return m->data;
}

void caf_coll_msg_free(coll_msg_t *m)
{
    msg_free(m);
}
