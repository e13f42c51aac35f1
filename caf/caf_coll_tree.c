/*
 * caf_coll_tree.c -- the collectives' algorithms on the message path
 * (caf_coll.h), over the chunks of caf_coll_msg.c.
 *
 *   reduce_up / bcast_down: one binomial tree.  Images are renumbered
 *     relative to the tree's root (v = image - root mod n); the parent of
 *     v is v with its lowest set bit cleared and its children are v + 2^k
 *     for every 2^k below that bit.  A reduction goes up the tree rooted
 *     at image 1 (then to RESULT_IMAGE, when that is another image);
 *     CO_BROADCAST goes down from SOURCE_IMAGE.  A node combines acc =
 *     op(acc, child) over its children in increasing k; acc then covers
 *     images v..v+2^k-1 and the child the next ones, so the result is the
 *     reduction in image order.  The array is cut into chunks
 *     (caf_coll_chunk_size, whole elements); chunk c moves up (or down)
 *     while chunk c+1 is being combined below.
 *   allreduce_rd: every image wants a result that fits one eager message:
 *     recursive doubling, log2(n) exchanges.
 *   allreduce_rsag: every image wants a larger result: reduce-scatter by
 *     recursive halving, then allgather by recursive doubling (about 2 len
 *     bytes sent and received per image, whatever n, both directions of
 *     each exchange at once); on two images (also after folding three)
 *     one exchange of the whole array, the same bytes in one step.
 * Both all-reduces fold the images beyond the largest power of two into
 * their left neighbour first and combine the lower block first, so every
 * element is reduced in image order (exactly image order: the same bits on
 * every image and every run, and an associative but non-commutative
 * CO_REDUCE operation gets the order "A1 op A2 op ... op An").
 */
#include "caf_coll.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

enum { X_COPY, X_ACC, X_ACC_REV }; /* what xchg does with a received chunk */

typedef struct kid {
    int rank, level;
} kid_t;

static int vrank_rank(const coll_t *c, int v)
{
    return c->ranks[(v + c->root) % c->n];
}

/* ------------------------------------------------------- tree phases */

#define PHASE_UP ((uint64_t)CAF_COLL_UP << CAF_COLL_PHASE_SHIFT)
/* A reduction's result from image 1 to RESULT_IMAGE (reduce_up): the
 * UNFOLD phase, which a reduction to one image does not otherwise use. */
#define PHASE_RESULT ((uint64_t)CAF_COLL_UNFOLD << CAF_COLL_PHASE_SHIFT)
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

/* After an error: tells the tree neighbours that are still running to give
 * up this collective too (they pass it on). */
static void poison_tree(const coll_t *c, int parent, const kid_t *kids, int nk)
{
    int to[65], m = 0;
    if (parent >= 0)
        to[m++] = parent;
    for (int i = 0; i < nk; i++)
        to[m++] = kids[i].rank;
    caf_coll_poison(c, to, m);
}

/* caf_coll.h */
void caf_coll_tree_poison(const coll_t *c)
{
    kid_t kids[64];
    int nk, level;
    int parent = tree(c, kids, &nk, &level);
    poison_tree(c, parent, kids, nk);
}

static size_t chunk_len(size_t nelem, size_t per, uint64_t ch)
{
    size_t first = (size_t)ch * per;
    return (nelem - first < per ? nelem - first : per);
}

/* Reduction of buf (nelem elements) up the tree rooted at c->root. */
static bool reduce_tree(coll_t *c, char *buf, size_t nelem, size_t per,
                        uint64_t nch)
{
    kid_t kids[64];
    int nk, level;
    int parent = tree(c, kids, &nk, &level);
    for (int i = 0; i < nk; i++)
        for (uint64_t ch = 0; ch < 2 && ch < nch; ch++)
            caf_coll_grant(c, kids[i].rank, kids[i].level, PHASE_UP | ch,
                  chunk_len(nelem, per, ch) * c->esz);
    for (uint64_t ch = 0; ch < nch; ch++) {
        size_t cnt = chunk_len(nelem, per, ch);
        char *p = buf + (size_t)ch * per * c->esz;
        for (int i = 0; i < nk; i++) {
            coll_msg_t *m = caf_coll_recv(c, kids[i].rank, PHASE_UP | ch, cnt * c->esz, kids[i].level);
            if (m == NULL)
                goto fail;
            caf_coll_combine(c, p, caf_coll_msg_data(m), cnt);
            caf_coll_msg_free(m);
            if (ch + 2 < nch)
                caf_coll_grant(c, kids[i].rank, kids[i].level, PHASE_UP | (ch + 2),
                      chunk_len(nelem, per, ch + 2) * c->esz);
        }
        /* In flight while the next chunk is combined (a part of buf that
         * this one does not touch). */
        if (parent >= 0 &&
            !caf_coll_send(c, parent, level, PHASE_UP | ch, p, cnt * c->esz))
            goto fail;
    }
    caf_coll_flush(c);
    return true;
fail:
    caf_coll_flush(c);
    poison_tree(c, parent, kids, nk);
    return false;
}

/* Broadcast of buf from c->root. */
bool caf_coll_bcast_down(coll_t *c, char *buf, size_t nelem, size_t per,
                       uint64_t nch)
{
    kid_t kids[64];
    int nk, level;
    int parent = tree(c, kids, &nk, &level);
    if (parent >= 0)
        for (uint64_t ch = 0; ch < 2 && ch < nch; ch++)
            caf_coll_grant(c, parent, caf_coll_levels(), PHASE_DOWN | ch,
                  chunk_len(nelem, per, ch) * c->esz);
    for (uint64_t ch = 0; ch < nch; ch++) {
        size_t len = chunk_len(nelem, per, ch) * c->esz;
        char *p = buf + (size_t)ch * per * c->esz;
        if (parent >= 0) {
            coll_msg_t *m = caf_coll_recv(c, parent, PHASE_DOWN | ch, len, caf_coll_levels());
            if (m == NULL)
                goto fail;
            memcpy(p, caf_coll_msg_data(m), len);
            caf_coll_msg_free(m);
            if (ch + 2 < nch)
                caf_coll_grant(c, parent, caf_coll_levels(), PHASE_DOWN | (ch + 2),
                      chunk_len(nelem, per, ch + 2) * c->esz);
        }
        /* The largest subtree first: it has the longest way to go. */
        for (int i = nk - 1; i >= 0; i--)
            if (!caf_coll_send(c, kids[i].rank, caf_coll_levels(), PHASE_DOWN | ch, p,
                            len))
                goto fail;
    }
    caf_coll_flush(c);
    return true;
fail:
    caf_coll_flush(c);
    poison_tree(c, parent, kids, nk);
    return false;
}

static bool xchg(coll_t *c, int to, const char *sp, size_t scnt, int from,
                 char *rp, size_t rcnt, int level, uint64_t base, size_t per,
                 int mode);

/* Reduction of buf (nelem elements) to c->root, in image order: up the
 * tree rooted at image 1 of the team (a tree rooted at c->root would
 * reduce in the order of images relative to it, "A_r op ... op A_n op A_1
 * op ... op A_r-1", wrong for an operation that does not commute), then,
 * when c->root is another image, image 1 sends it the result. */
bool caf_coll_reduce_up(coll_t *c, char *buf, size_t nelem, size_t per,
                        uint64_t nch)
{
    int root = c->root;
    c->root = 0;
    bool ok = reduce_tree(c, buf, nelem, per, nch);
    c->root = root;
    if (!ok || root == 0 || (c->me != 0 && c->me != root))
        return ok;
    if (c->me == 0)
        ok = xchg(c, c->ranks[root], buf, nelem, -1, NULL, 0,
                  caf_coll_levels(), PHASE_RESULT, per, X_COPY);
    else
        ok = xchg(c, -1, NULL, 0, c->ranks[0], buf, nelem, caf_coll_levels(),
                  PHASE_RESULT, per, X_COPY);
    if (!ok)
        caf_coll_poison_all(c);
    return ok;
}

/* ----------------------------------------------- small all-reduce */

#define PHASE_RD ((uint64_t)CAF_COLL_RD << CAF_COLL_PHASE_SHIFT) /* | round */
#define PHASE_FOLD ((uint64_t)CAF_COLL_FOLD << CAF_COLL_PHASE_SHIFT)
#define PHASE_UNFOLD ((uint64_t)CAF_COLL_UNFOLD << CAF_COLL_PHASE_SHIFT)

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
bool caf_coll_allreduce_rd(coll_t *c, char *buf, size_t nelem)
{
    size_t len = nelem * c->esz;
    assert(len <= caf_coll_eager_size()); /* eager only: no slots, no grants */
    int n = c->n, me = c->me;
    int p2 = 1;
    while (p2 * 2 <= n)
        p2 *= 2;
    int r = n - p2;
    coll_msg_t *m;
    if (me < 2 * r && (me & 1)) {
        /* Folded: hand our part to me-1, receive the result. */
        int to = c->ranks[me - 1];
        if (!caf_coll_send(c, to, 0, PHASE_FOLD, buf, len) ||
            (m = caf_coll_recv(c, to, PHASE_UNFOLD, len, 0)) == NULL)
            goto fail;
        memcpy(buf, caf_coll_msg_data(m), len);
        caf_coll_msg_free(m);
        return true;
    }
    int v = me < 2 * r ? me / 2 : me - r;
    if (me < 2 * r) {
        if ((m = caf_coll_recv(c, c->ranks[me + 1], PHASE_FOLD, len, 0)) ==
            NULL)
            goto fail;
        caf_coll_combine(c, buf, caf_coll_msg_data(m), nelem);
        caf_coll_msg_free(m);
    }
    for (int k = 0; (1 << k) < p2; k++) {
        int pv = v ^ (1 << k);
        int partner = c->ranks[rd_image(pv, r)];
        if (!caf_coll_send(c, partner, 0, PHASE_RD | (uint64_t)k, buf, len) ||
            (m = caf_coll_recv(c, partner, PHASE_RD | (uint64_t)k, len, 0)) == NULL)
            goto fail;
        if (pv > v)
            caf_coll_combine(c, buf, caf_coll_msg_data(m), nelem);
        else
            caf_coll_combine3(c, buf, caf_coll_msg_data(m), buf, nelem);
        caf_coll_msg_free(m);
    }
    if (me < 2 * r &&
        !caf_coll_send(c, c->ranks[me + 1], 0, PHASE_UNFOLD, buf, len))
        goto fail;
    return true;
fail:
    caf_coll_poison_all(c);
    return false;
}

/* ----------------------------------------------- large all-reduce */

#define PHASE_RS ((uint64_t)CAF_COLL_RS << CAF_COLL_PHASE_SHIFT)
#define PHASE_AG ((uint64_t)CAF_COLL_AG << CAF_COLL_PHASE_SHIFT)

/* Sends scnt elements from sp to rank `to` and receives rcnt elements from
 * rank `from` into rp, in chunks of per elements with ids base | chunk,
 * through slots of `level` (the receiver's grants for eager chunks are
 * skipped); each received chunk is copied (X_COPY) or combined, rp = rp op
 * in (X_ACC) or rp = in op rp (X_ACC_REV: the sender's block is the lower
 * one).  sp may be rp (the same array both ways, scnt == rcnt: a chunk is
 * combined once our copy of it is written).  to or from may be -1.  false
 * after a stopped/failed member.
 * Returns once every chunk sent is written (caf_coll_flush). */
static bool xchg(coll_t *c, int to, const char *sp, size_t scnt, int from,
                 char *rp, size_t rcnt, int level, uint64_t base, size_t per,
                 int mode)
{
    size_t esz = c->esz;
    uint64_t sn = to < 0 ? 0 : (scnt + per - 1) / per;
    uint64_t rn = from < 0 ? 0 : (rcnt + per - 1) / per;
    bool ok = true;
    for (uint64_t ch = 0; ch < 2 && ch < rn; ch++)
        caf_coll_grant(c, from, level, base | ch, chunk_len(rcnt, per, ch) * esz);
    for (uint64_t ch = 0, sent = 0; ch < sn || ch < rn; ch++) {
        /* Chunks ch and ch + 1 go out before chunk ch is waited for, both
         * in flight at once: the receiver grants two slots up front, and
         * the grant for ch + 1 > 1 follows its use of ch - 1. */
        for (; sent < sn && sent <= ch + 1; sent++)
            if (!(ok = caf_coll_send(c, to, level, base | sent,
                                     sp + (size_t)sent * per * esz,
                                     chunk_len(scnt, per, sent) * esz)))
                goto out;
        if (ch >= rn)
            continue;
        size_t cnt = chunk_len(rcnt, per, ch);
        char *p = rp + (size_t)ch * per * esz;
        coll_msg_t *m = caf_coll_recv(c, from, base | ch, cnt * esz, level);
        if (!(ok = m != NULL))
            goto out;
        if (sp == rp && ch < sn)     /* exchanging one array: ours first out */
            caf_coll_sent(c, to, base | ch);
        if (mode == X_COPY) {
            memcpy(p, caf_coll_msg_data(m), cnt * esz);
        } else if (mode == X_ACC) {
            caf_coll_combine(c, p, caf_coll_msg_data(m), cnt);
        } else {
            caf_coll_combine3(c, p, caf_coll_msg_data(m), p, cnt);
        }
        caf_coll_msg_free(m);
        if (ch + 2 < rn)
            caf_coll_grant(c, from, level, base | (ch + 2),
                  chunk_len(rcnt, per, ch + 2) * esz);
    }
out:
    caf_coll_flush(c);
    return ok;
}

/* Every image wants the result of a large reduction: reduce-scatter by
 * recursive halving, then allgather by recursive doubling, among the p2
 * images of allreduce_rd (the others fold into their left neighbour first
 * and get the result back at the end).  Each image sends and receives
 * about 2 * len bytes whatever n (the tree: len per level, twice), and the
 * two directions of every exchange overlap.  Block order as in
 * allreduce_rd: the lower block is the left operand, so each element is
 * reduced in image order, once, by one image: the same bits everywhere. */
bool caf_coll_allreduce_rsag(coll_t *c, char *buf, size_t nelem, size_t per)
{
    int n = c->n, me = c->me;
    int p2 = 1, rounds = 0;
    while (p2 * 2 <= n) {
        p2 *= 2;
        rounds++;
    }
    int r = n - p2;
    size_t esz = c->esz;
    bool ok = true;
    if (me < 2 * r && (me & 1)) {
        int to = c->ranks[me - 1];
        ok = xchg(c, to, buf, nelem, -1, NULL, 0, caf_coll_levels(), PHASE_FOLD,
                  per, X_COPY) &&
             xchg(c, -1, NULL, 0, to, buf, nelem, caf_coll_levels(), PHASE_UNFOLD,
                  per, X_COPY);
        goto out;
    }
    if (me < 2 * r &&
        !(ok = xchg(c, -1, NULL, 0, c->ranks[me + 1], buf, nelem, caf_coll_levels(),
                    PHASE_FOLD, per, X_ACC)))
        goto out;
    int v = me < 2 * r ? me / 2 : me - r;
    if (rounds == 1) {
        /* Two images: the whole array each way in one exchange -- the same
         * bytes as halving and doubling, but one grant, ack and notice per
         * chunk instead of two, and the sum lands in buf without a copy
         * out of the slot (1 MiB over tcp: 272 -> 243-258 us, OpenCoarrays
         * 204-279 in the same runs). */
        int partner = c->ranks[rd_image(v ^ 1, r)];
        ok = xchg(c, partner, buf, nelem, partner, buf, nelem, 0, PHASE_RS, per,
                  v ? X_ACC_REV : X_ACC);
        goto unfold;
    }
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
                  per, pv < v ? X_ACC_REV : X_ACC);
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
                  per, X_COPY);
        l = lo[k];
        h = hi[k];
    }
unfold:
    if (ok && me < 2 * r)
        ok = xchg(c, c->ranks[me + 1], buf, nelem, -1, NULL, 0, caf_coll_levels(),
                  PHASE_UNFOLD, per, X_COPY);
out:
    if (!ok)
        caf_coll_poison_all(c);
    return ok;
}

