/*
 * caf_coll.c -- CO_SUM, CO_MIN, CO_MAX, CO_REDUCE, CO_BROADCAST: the entry
 * points and the driver (caf_coll.h names the other files).
 *
 * run() checks the arguments (every image refuses alike, before any
 * communication), packs a non-contiguous A into a contiguous buffer, and
 * picks the path and the algorithm:
 *   - the node path (caf_coll_node.c) when every image of the job shares
 *     this machine's memory and the current team is the initial team:
 *     shared slots and flags, no message;
 *   - otherwise the message path (caf_coll_tree.c over caf_coll_msg.c): a
 *     reduction every image wants by recursive doubling when it fits one
 *     eager message, else by reduce-scatter + allgather; a reduction to
 *     RESULT_IMAGE up a binomial tree; CO_BROADCAST down one.
 * Every path reduces each element in image order, so every image gets the
 * same bits, on every run.
 *
 * Stopped and failed images: a member that has stopped or failed without
 * contributing makes the collective return STAT_STOPPED_IMAGE /
 * STAT_FAILED_IMAGE on every image that needed it (an image that stopped
 * after contributing is no error); the images that wait for one that gave
 * up are told, and give up too.  An image the algorithm did not wait for
 * (a broadcast's leaf) is reported by every image that knows it ended
 * before it entered the call: its status message says how many calls it
 * had entered (check_ended).
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

/* Sequence numbers per team. */
typedef struct { uint64_t id, seq; } tseq_t;
static tseq_t *tseqs;
static size_t ntseqs;

static tseq_t *find_seq(uint64_t team)
{
    for (size_t i = 0; i < ntseqs; i++)
        if (tseqs[i].id == team)
            return &tseqs[i];
    return NULL;
}

static uint64_t next_seq(uint64_t team)
{
    tseq_t *found = find_seq(team);
    if (found != NULL)
        return ++found->seq;
    tseq_t *t = realloc(tseqs, (ntseqs + 1) * sizeof *t);
    if (t == NULL)
        caf_fatal("collective", "out of memory");
    tseqs = t;
    tseqs[ntseqs] = (tseq_t){team, 1};
    return tseqs[ntseqs++].seq;
}

uint64_t caf_coll_count(uint64_t team)
{
    const tseq_t *t = find_seq(team);
    return t != NULL ? t->seq : 0;
}

bool caf_coll_took_part(int rank, uint64_t team, uint64_t seq)
{
    if (caf.ended == NULL)
        return true;   /* no status message came: it did not end */
    const caf_status_msg_t *e = &caf.ended[rank];
    /* In the initial team its count is exact wherever it ended.  In
     * another, only if it ended there: an image that ended in a child of
     * our team has entered none of our team's calls since it went in, and
     * one that ended in an ancestor left our team before we did (END TEAM
     * waits for it), so it cannot have entered a call we are still in. */
    if (team == 0)
        return e->seq0 >= seq;
    return e->team == team && e->seq >= seq;
}

static void report_ended(const coll_t *c, int st, int who)
{
    caf_error(c->stat, c->errmsg, c->errmsg_len, st, c->stmt,
              "image %d has %s", who,
              st == CAF_STAT_FAILED_IMAGE ? "failed" : "stopped");
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

/* After c completed here: a member known to have stopped or failed before
 * it entered c took no part in it.  The algorithm may not have needed it
 * (a broadcast's leaves send nothing; a reduction to another image does
 * not wait for everyone), but the caller learns it, as from a collective
 * that waited for it.  A member whose status message has not come yet is
 * not known to have ended; one that ended after entering c is no error. */
static void check_ended(coll_t *c)
{
    if (caf.nstopped + caf.nfailed == 0)
        return;
    for (int j = 0; j < c->n; j++) {
        int r = c->ranks[j];
        unsigned char st = caf.status[r];
        if (r == caf.rank || st == CAF_IMG_RUNNING ||
            caf_coll_took_part(r, c->team, c->seq))
            continue;
        c->err = st == CAF_IMG_FAILED ? CAF_STAT_FAILED_IMAGE
                                      : CAF_STAT_STOPPED_IMAGE;
        c->err_image = j + 1;
        report(c);
        return;
    }
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
            c->team = caf_team_id();
            c->seq = next_seq(c->team);
            c->root = image - 1;
            c->err_image = c->me + 1;
            caf_coll_tree_poison(c);
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
    if (c->esz > caf_coll_chunk_size()) {
        caf_error(c->stat, c->errmsg, c->errmsg_len, 1, c->stmt,
                  "elements of %zu bytes are larger than the collectives' "
                  "%zu-byte chunk", c->esz, caf_coll_chunk_size());
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
        else
            check_ended(c);
        return;
    }
    caf_layout_t ul, pl;
    caf_layout_desc(&ul, ad, NULL);
    size_t nelem = caf_layout_count(&ul);
    if (nelem == 0 || c->esz == 0) {
        check_ended(c);
        return;
    }
    size_t per = caf_coll_chunk_size() / c->esz;
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
               nelem * c->esz <= caf_coll_eager_size()) {
        ok = caf_coll_allreduce_rd(c, buf, nelem);
    } else if (c->op != OP_BCAST && image == 0) {
        ok = caf_coll_allreduce_rsag(c, buf, nelem, per);
    } else {
        if (c->op != OP_BCAST)
            ok = caf_coll_reduce_up(c, buf, nelem, per, nch);
        if (ok && (c->op == OP_BCAST || image == 0)) {
            c->root = c->op == OP_BCAST ? image - 1 : 0;
            ok = caf_coll_bcast_down(c, buf, nelem, per, nch);
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
    if (ok)
        check_ended(c);
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
