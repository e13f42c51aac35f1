/*
 * caf_xfer.c -- caf_get, caf_send, caf_sendget: coindexed array sections.
 *
 * A transfer is two layouts of the same element count: the remote one
 * (the coarray's memory on the target image: its segment base + the
 * token's offset + the ABI's byte offset + the section's element offsets,
 * or a vector subscript's) and the local one (a descriptor of this image's
 * memory).  When the types differ the data goes through a packed temporary
 * of the remote type (caf_convert.c).  caf_rma moves the data:
 *   - both sides contiguous: one fh_put / fh_get, zero-copy (the firehose
 *     registration cache pins what is touched);
 *   - otherwise: fh_put_strided / fh_get_strided, one call per plane of
 *     whole contiguous rows (blocks of a row, strided by the second
 *     dimension) or per row of the first dimension (blocks of one
 *     element at the row's strides); the runtime packs small blocks into
 *     few network messages;
 *   - a vector subscript: the elements in order, cut into runs of constant
 *     steps on both sides; a run of CAF_VEC_RUN_MIN or more is one strided
 *     or contiguous call, shorter ones NBI operations completed together.
 * Every remote block is checked to lie inside the coarray before anything
 * is sent: an index out of bounds is an error, never a write into another
 * coarray.
 */
#include "caf_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ iterators */

static ptrdiff_t dim_off(const caf_dimspec_t *d, size_t i)
{
    return d->offs ? d->offs[i] : (ptrdiff_t)i * d->step;
}

void caf_iter_init(caf_iter_t *it, const caf_layout_t *l)
{
    it->l = l;
    it->addr = l->base;
    for (int d = 0; d < l->rank; d++) {
        it->idx[d] = 0;
        it->addr += dim_off(&l->dim[d], 0);
    }
}

void caf_iter_next(caf_iter_t *it)
{
    const caf_layout_t *l = it->l;
    for (int d = 0; d < l->rank; d++) {
        const caf_dimspec_t *ds = &l->dim[d];
        size_t i = it->idx[d];
        if (i + 1 < ds->n) {
            it->addr += dim_off(ds, i + 1) - dim_off(ds, i);
            it->idx[d] = i + 1;
            return;
        }
        it->addr -= dim_off(ds, i) - dim_off(ds, 0);
        it->idx[d] = 0;
    }
}

size_t caf_iter_run(const caf_iter_t *it)
{
    const caf_layout_t *l = it->l;
    if (l->rank == 0)
        return 1;
    const caf_dimspec_t *d0 = &l->dim[0];
    if (d0->offs != NULL || d0->step != (ptrdiff_t)l->esz)
        return 1;
    return d0->n - it->idx[0];
}

void caf_iter_skip(caf_iter_t *it, size_t k)
{
    if (k == 0)
        return;
    if (it->l->rank > 0 && k > 1) {
        const caf_dimspec_t *d0 = &it->l->dim[0];
        it->addr += (ptrdiff_t)(k - 1) * d0->step;
        it->idx[0] += k - 1;
    }
    caf_iter_next(it);
}

void caf_layout_span(const caf_layout_t *l, ptrdiff_t *lo, ptrdiff_t *hi)
{
    ptrdiff_t a = 0, b = 0;
    for (int d = 0; d < l->rank; d++) {
        const caf_dimspec_t *ds = &l->dim[d];
        ptrdiff_t mn = 0, mx = 0;
        if (ds->offs) {
            mn = mx = ds->offs[0];
            for (size_t i = 1; i < ds->n; i++) {
                if (ds->offs[i] < mn)
                    mn = ds->offs[i];
                if (ds->offs[i] > mx)
                    mx = ds->offs[i];
            }
        } else if (ds->n > 0) {
            ptrdiff_t last = (ptrdiff_t)(ds->n - 1) * ds->step;
            mn = last < 0 ? last : 0;
            mx = last > 0 ? last : 0;
        }
        a += mn;
        b += mx;
    }
    *lo = a;
    *hi = b + (ptrdiff_t)l->esz;
}

/* ----------------------------------------------------------------- RMA */

/* Elements left along the first dimension from it on, and their step in
 * bytes: a regular first dimension gives the rest of the row, a vector
 * subscript or a scalar one element. */
static size_t row_left(const caf_iter_t *it, ptrdiff_t *step)
{
    const caf_layout_t *l = it->l;
    *step = (ptrdiff_t)l->esz;
    if (l->rank == 0 || l->dim[0].offs != NULL)
        return 1;
    *step = l->dim[0].step;
    return l->dim[0].n - it->idx[0];
}

/* Both layouts' first two dimensions make whole rows of one block each,
 * regularly spaced: the plane is one strided call of n1 blocks. */
static bool plane_blocks(const caf_iter_t *ri, const caf_iter_t *li, size_t *blk,
                         size_t *n1, ptrdiff_t *rs, ptrdiff_t *ls)
{
    const caf_layout_t *r = ri->l, *l = li->l;
    if (r->rank < 2 || l->rank < 2 || ri->idx[0] || li->idx[0] || ri->idx[1] || li->idx[1])
        return false;
    const caf_dimspec_t *r0 = &r->dim[0], *l0 = &l->dim[0], *r1 = &r->dim[1], *l1 = &l->dim[1];
    if (r0->offs || l0->offs || r1->offs || l1->offs || r0->n != l0->n || r1->n != l1->n ||
        r0->step != (ptrdiff_t)r->esz || l0->step != (ptrdiff_t)l->esz || r1->n < 2)
        return false;
    *blk = r0->n * r->esz;
    *n1 = r1->n;
    *rs = r1->step;
    *ls = l1->step;
    return *rs != 0;
}

/* A run of elements at constant steps on both sides (a vector
 * subscript's elements, walked in order). */
typedef struct vrun {
    char *r, *l;             /* first element */
    ptrdiff_t rs, ls;        /* steps (bytes), valid when k >= 2 */
    size_t k;
} vrun_t;

/* Runs shorter than this go element by element as NBI operations, all in
 * flight together; longer ones are one strided (or contiguous) call. */
#define CAF_VEC_RUN_MIN 4

static int vrun_flush(int rank, bool is_put, const vrun_t *v, size_t esz)
{
    if (v->k == 0)
        return FH_OK;
    if (v->k < CAF_VEC_RUN_MIN) {
        int rc = FH_OK;
        for (size_t i = 0; i < v->k && rc == FH_OK; i++) {
            char *r = v->r + (ptrdiff_t)i * v->rs, *l = v->l + (ptrdiff_t)i * v->ls;
            rc = is_put ? fh_put_nbi(rank, r, l, esz) : fh_get_nbi(l, rank, r, esz);
        }
        return rc;
    }
    if (v->rs == (ptrdiff_t)esz && v->ls == (ptrdiff_t)esz)
        return is_put ? fh_put(rank, v->r, v->l, v->k * esz)
                      : fh_get(v->l, rank, v->r, v->k * esz);
    return is_put ? fh_put_strided(rank, v->r, v->rs, v->l, v->ls, esz, v->k)
                  : fh_get_strided(v->l, v->ls, rank, v->r, v->rs, esz, v->k);
}

/* A remote layout with a vector subscript: the elements in order, cut into
 * runs of constant steps on both sides (`a(vec)` with an arithmetic vec is
 * one run, `a(:, vec)` one contiguous run per column); short runs travel
 * as NBI operations completed together, so even a random vector costs a
 * pipeline of small operations, not a round trip per element. */
static int rma_vector(int rank, bool is_put, const caf_layout_t *remote,
                      const caf_layout_t *local, size_t count)
{
    size_t esz = remote->esz;
    caf_iter_t ri, li;
    caf_iter_init(&ri, remote);
    caf_iter_init(&li, local);
    vrun_t v = {.k = 0};
    int rc = FH_OK;
    for (size_t i = 0; i < count && rc == FH_OK; i++) {
        char *r = caf_iter_addr(&ri), *l = caf_iter_addr(&li);
        if (v.k == 1 && (r != v.r || !is_put)) {
            v.rs = r - v.r;
            v.ls = l - v.l;
            v.k = 2;
        } else if (v.k >= 2 && r == v.r + (ptrdiff_t)v.k * v.rs &&
                   l == v.l + (ptrdiff_t)v.k * v.ls) {
            v.k++;
        } else {
            rc = vrun_flush(rank, is_put, &v, esz);
            v = (vrun_t){.r = r, .l = l, .rs = (ptrdiff_t)esz,
                         .ls = (ptrdiff_t)esz, .k = 1};
        }
        caf_iter_next(&ri);
        caf_iter_next(&li);
    }
    if (rc == FH_OK)
        rc = vrun_flush(rank, is_put, &v, esz);
    int wrc = fh_wait_nbi();
    return rc != FH_OK ? rc : wrc;
}

static bool has_vector(const caf_layout_t *l)
{
    for (int d = 0; d < l->rank; d++)
        if (l->dim[d].offs != NULL)
            return true;
    return false;
}

int caf_rma(int rank, bool is_put, const caf_layout_t *remote,
            const caf_layout_t *local)
{
    size_t count = caf_layout_count(remote);
    size_t esz = remote->esz;
    if (count == 0 || esz == 0)
        return FH_OK;
    if (caf_layout_contiguous(remote) && caf_layout_contiguous(local)) {
        size_t n = count * esz;
        return is_put ? fh_put(rank, remote->base, local->base, n)
                      : fh_get(local->base, rank, remote->base, n);
    }
    if (has_vector(remote) || has_vector(local))
        return rma_vector(rank, is_put, remote, local, count);
    /* Non-contiguous: one strided call per plane of whole contiguous rows,
     * else per row of the first dimension (the runtime packs small blocks
     * into few messages). */
    int rc = FH_OK;
    caf_iter_t ri, li;
    caf_iter_init(&ri, remote);
    caf_iter_init(&li, local);
    size_t left = count;
    while (left > 0 && rc == FH_OK) {
        char *r = caf_iter_addr(&ri), *l = caf_iter_addr(&li);
        size_t blk, k;
        ptrdiff_t rs, ls;
        if (plane_blocks(&ri, &li, &blk, &k, &rs, &ls)) {
            rc = is_put ? fh_put_strided(rank, r, rs, l, ls, blk, k)
                        : fh_get_strided(l, ls, rank, r, rs, blk, k);
            size_t row = remote->dim[0].n;
            for (size_t i = 0; i < k; i++) {
                caf_iter_skip(&ri, row);
                caf_iter_skip(&li, row);
            }
            left -= k * row;
            continue;
        }
        size_t kl = row_left(&ri, &rs), k2 = row_left(&li, &ls);
        k = kl < k2 ? kl : k2;
        if (k > left)
            k = left;
        if (rs == (ptrdiff_t)esz && ls == (ptrdiff_t)esz)   /* one block */
            rc = is_put ? fh_put(rank, r, l, k * esz) : fh_get(l, rank, r, k * esz);
        else
            rc = is_put ? fh_put_strided(rank, r, rs, l, ls, esz, k)
                        : fh_get_strided(l, ls, rank, r, rs, esz, k);
        caf_iter_skip(&ri, k);
        caf_iter_skip(&li, k);
        left -= k;
    }
    return rc;
}

/* ------------------------------------------------------- the entry points */

/* The remote side of a transfer: t's memory on `rank` at offset, shaped by
 * desc and the vector subscripts.  offs (freed by the caller) holds the
 * vector subscripts' offsets. */
static bool remote_layout(caf_layout_t *l, caf_tok_t *t, int rank,
                          size_t offset, const gfc_descriptor_t *desc,
                          const caf_vector_t *vec, ptrdiff_t **offs,
                          const char *stmt, int *stat)
{
    *offs = NULL;
    if (!t->symmetric)
        caf_fatal(stmt, "coindexed access through a non-coarray token");
    /* gfortran 12 bug: for a scalar complex coarray (`c[j] = v`) it points
     * the descriptor at a stack copy of the value and computes `offset`
     * from that copy.  A scalar transfer to a coarray exactly its size can
     * only mean offset 0. */
    if (desc->dtype.rank == 0 && t->size == desc->dtype.elem_len &&
        offset >= t->size)
        offset = 0;
    caf_layout_desc(l, desc, caf_remote(t, rank, offset));
    if (vec != NULL) {
        size_t total = 0;
        for (int d = 0; d < l->rank; d++)
            total += vec[d].nvec;
        ptrdiff_t *o = total ? malloc(total * sizeof *o) : NULL;
        if (total && o == NULL)
            caf_fatal(stmt, "out of memory");
        *offs = o;
        for (int d = 0; d < l->rank; d++) {
            const caf_vector_t *v = &vec[d];
            ptrdiff_t lb = desc->dim[d].lbound;
            ptrdiff_t st = desc->dim[d].stride *
                           (desc->span > 0 ? desc->span : (ptrdiff_t)l->esz);
            if (v->nvec == 0) {
                ptrdiff_t s = v->u.triplet.stride ? v->u.triplet.stride : 1;
                ptrdiff_t n = (v->u.triplet.upper_bound - v->u.triplet.lower_bound) / s + 1;
                l->dim[d].n = n > 0 ? (size_t)n : 0;
                l->dim[d].step = s * st;
                l->base += (v->u.triplet.lower_bound - lb) * st;
                continue;
            }
            for (size_t i = 0; i < v->nvec; i++) {
                int64_t x;
                switch (v->u.v.kind) {
                case 1: x = ((const int8_t *)v->u.v.vector)[i]; break;
                case 2: x = ((const int16_t *)v->u.v.vector)[i]; break;
                case 4: x = ((const int32_t *)v->u.v.vector)[i]; break;
                case 8: x = ((const int64_t *)v->u.v.vector)[i]; break;
                default:
                    caf_fatal(stmt, "vector subscript of integer kind %d", v->u.v.kind);
                }
                o[i] = ((ptrdiff_t)x - lb) * st;
            }
            l->dim[d].n = v->nvec;
            l->dim[d].offs = o;
            l->dim[d].step = 0;
            o += v->nvec;
        }
    }
    /* Every element inside the coarray. */
    if (caf_layout_count(l) > 0) {
        ptrdiff_t lo, hi;
        caf_layout_span(l, &lo, &hi);
        char *b = caf_remote(t, rank, 0);
        if (l->base + lo < b || l->base + hi > b + t->size) {
            caf_error(stat, NULL, 0, 1, stmt, "subscript out of bounds: bytes "
                      "[%td, %td) of a coarray of %zu bytes on image %d",
                      l->base + lo - b, l->base + hi - b, t->size, rank + 1);
            return false;
        }
    }
    return true;
}

static caf_type_t desc_type(const gfc_descriptor_t *d, int kind)
{
    caf_type_t t = {d->dtype.type, kind, d->dtype.elem_len};
    if (t.bt == CAF_BT_CHARACTER && kind != 1 && kind != 4)
        t.kind = 1;
    return t;
}

static bool report(int rc, int *stat, const char *stmt, int rank)
{
    if (rc == FH_OK)
        return true;
    caf_error(stat, NULL, 0, rc == FH_ERR_PEER_DEAD ? CAF_STAT_FAILED_IMAGE : 1,
              stmt, "transfer with image %d: %s (%s)", rank + 1,
              fh_strerror(rc), fh_last_error());
    return false;
}

bool caf_put_layout(int rank, const caf_layout_t *rl, caf_type_t rt,
                       const caf_layout_t *ll, caf_type_t lt, bool may_tmp,
                       int *stat, const char *stmt)
{
    size_t n = caf_layout_count(rl);
    size_t ln = caf_layout_count(ll);
    if (n == 0)
        return true;
    if (ln != n && ln != 1) {
        caf_error(stat, NULL, 0, 1, stmt, "shapes differ: %zu elements "
                  "assigned to %zu", ln, n);
        return false;
    }
    if (rank == caf.rank && !may_tmp && caf_same_type(rt, lt) && ln == n) {
        caf_copy_layout(rl, rt, ll, lt, n);
        return true;
    }
    if (caf_same_type(rt, lt) && ln == n && rank != caf.rank)
        return report(caf_rma(rank, true, rl, ll), stat, stmt, rank);
    if (n > SIZE_MAX / (rt.size ? rt.size : 1) - 1)
        caf_fatal(stmt, "transfer size overflows");
    char *tmp = malloc(n * rt.size + 1);
    if (tmp == NULL)
        caf_fatal(stmt, "out of memory for a %zu-byte temporary", n * rt.size);
    caf_layout_t fl;
    caf_layout_flat(&fl, tmp, rt.size, n);
    bool ok = caf_copy_layout(&fl, rt, ll, lt, n);
    if (!ok) {
        free(tmp);
        caf_error(stat, NULL, 0, 1, stmt, "cannot convert type %d kind %d to "
                  "type %d kind %d", lt.bt, lt.kind, rt.bt, rt.kind);
        return false;
    }
    if (rank == caf.rank)
        caf_copy_layout(rl, rt, &fl, rt, n);
    else
        ok = report(caf_rma(rank, true, rl, &fl), stat, stmt, rank);
    free(tmp);
    return ok;
}

bool caf_get_layout(int rank, const caf_layout_t *rl, caf_type_t rt,
                       const caf_layout_t *ll, caf_type_t lt, int *stat,
                       const char *stmt)
{
    size_t n = caf_layout_count(rl);
    if (caf_layout_count(ll) != n) {
        caf_error(stat, NULL, 0, 1, stmt, "shapes differ: %zu elements "
                  "assigned to %zu", n, caf_layout_count(ll));
        return false;
    }
    if (n == 0)
        return true;
    if (caf_same_type(rt, lt) && rank != caf.rank)
        return report(caf_rma(rank, false, rl, ll), stat, stmt, rank);
    if (n > SIZE_MAX / (rt.size ? rt.size : 1) - 1)
        caf_fatal(stmt, "transfer size overflows");
    char *tmp = malloc(n * rt.size + 1);
    if (tmp == NULL)
        caf_fatal(stmt, "out of memory for a %zu-byte temporary", n * rt.size);
    caf_layout_t fl;
    caf_layout_flat(&fl, tmp, rt.size, n);
    bool ok = true;
    if (rank == caf.rank)
        caf_copy_layout(&fl, rt, rl, rt, n);
    else
        ok = report(caf_rma(rank, false, rl, &fl), stat, stmt, rank);
    if (ok && !caf_copy_layout(ll, lt, &fl, rt, n)) {
        caf_error(stat, NULL, 0, 1, stmt, "cannot convert type %d kind %d to "
                  "type %d kind %d", rt.bt, rt.kind, lt.bt, lt.kind);
        ok = false;
    }
    free(tmp);
    return ok;
}

/* A scalar of the same type on both sides, to or from another image (`x[j]
 * = v`, `x(i)[j] = v`, `v = x(i)[j]`): one put or get of the element, no
 * layouts -- an element-by-element loop's every statement.  The remote
 * element's bounds are checked as remote_layout checks them.  false: not
 * such a transfer (the caller takes the general path); true: done, *stat
 * set. */
static bool scalar_xfer(bool is_put, caf_tok_t *t, int rank, size_t offset,
                        const gfc_descriptor_t *rd, int rkind, const caf_vector_t *vec,
                        const gfc_descriptor_t *ld, int lkind, int *stat,
                        const char *stmt)
{
    if (vec != NULL || rd->dtype.rank != 0 || ld->dtype.rank != 0 || rank == caf.rank ||
        !t->symmetric || !caf_same_type(desc_type(rd, rkind), desc_type(ld, lkind)))
        return false;
    size_t n = rd->dtype.elem_len;
    if (t->size == n && offset >= t->size)   /* gfortran 12: see remote_layout */
        offset = 0;
    if (offset > t->size || n > t->size - offset) {
        caf_error(stat, NULL, 0, 1, stmt, "subscript out of bounds: bytes [%zu, %zu) of a "
                  "coarray of %zu bytes on image %d", offset, offset + n, t->size, rank + 1);
        return true;
    }
    char *r = caf_remote(t, rank, offset);
    int rc = n == 0 ? FH_OK
             : is_put ? fh_put(rank, r, ld->base_addr, n) : fh_get(ld->base_addr, rank, r, n);
    if (report(rc, stat, stmt, rank))
        caf_ok(stat);
    return true;
}

void _gfortran_caf_get(caf_token_t token, size_t offset, int image_index,
                       gfc_descriptor_t *src, caf_vector_t *src_vector,
                       gfc_descriptor_t *dest, int src_kind, int dst_kind,
                       bool may_require_tmp, int *stat)
{
    const char *stmt = "coindexed read";
    (void)may_require_tmp;
    caf_tok_t *t = caf_tok(token, stmt);
    int rank = caf_target(image_index, stat, NULL, 0, stmt, false);
    if (rank < 0 || scalar_xfer(false, t, rank, offset, src, src_kind, src_vector, dest,
                                dst_kind, stat, stmt))
        return;
    caf_layout_t rl, ll;
    ptrdiff_t *offs;
    if (!remote_layout(&rl, t, rank, offset, src, src_vector, &offs, stmt, stat))
        return;
    caf_layout_desc(&ll, dest, NULL);
    if (caf_get_layout(rank, &rl, desc_type(src, src_kind), &ll,
                   desc_type(dest, dst_kind), stat, stmt))
        caf_ok(stat);
    free(offs);
}

void _gfortran_caf_send(caf_token_t token, size_t offset, int image_index,
                        gfc_descriptor_t *dest, caf_vector_t *dst_vector,
                        gfc_descriptor_t *src, int dst_kind, int src_kind,
                        bool may_require_tmp, int *stat)
{
    const char *stmt = "coindexed assignment";
    caf_tok_t *t = caf_tok(token, stmt);
    int rank = caf_target(image_index, stat, NULL, 0, stmt, false);
    if (rank < 0 || scalar_xfer(true, t, rank, offset, dest, dst_kind, dst_vector, src,
                                src_kind, stat, stmt))
        return;
    caf_layout_t rl, ll;
    ptrdiff_t *offs;
    if (!remote_layout(&rl, t, rank, offset, dest, dst_vector, &offs, stmt, stat))
        return;
    caf_layout_desc(&ll, src, NULL);
    if (caf_put_layout(rank, &rl, desc_type(dest, dst_kind), &ll,
                   desc_type(src, src_kind), may_require_tmp, stat, stmt))
        caf_ok(stat);
    free(offs);
}

void _gfortran_caf_sendget(caf_token_t dst_token, size_t dst_offset,
                           int dst_image_index, gfc_descriptor_t *dest,
                           caf_vector_t *dst_vector, caf_token_t src_token,
                           size_t src_offset, int src_image_index,
                           gfc_descriptor_t *src, caf_vector_t *src_vector,
                           int dst_kind, int src_kind, bool may_require_tmp)
{
    const char *stmt = "coindexed assignment between images";
    (void)may_require_tmp;
    caf_tok_t *dt = caf_tok(dst_token, stmt);
    caf_tok_t *st = caf_tok(src_token, stmt);
    int drank = caf_target(dst_image_index, NULL, NULL, 0, stmt, false);
    int srank = caf_target(src_image_index, NULL, NULL, 0, stmt, false);
    caf_layout_t dl, sl, fl;
    ptrdiff_t *doffs, *soffs;
    remote_layout(&dl, dt, drank, dst_offset, dest, dst_vector, &doffs, stmt, NULL);
    remote_layout(&sl, st, srank, src_offset, src, src_vector, &soffs, stmt, NULL);
    caf_type_t sty = desc_type(src, src_kind);
    size_t n = caf_layout_count(&sl);
    char *tmp = malloc(n * sty.size + 1);
    if (tmp == NULL)
        caf_fatal(stmt, "out of memory");
    caf_layout_flat(&fl, tmp, sty.size, n);
    caf_get_layout(srank, &sl, sty, &fl, sty, NULL, stmt);
    caf_put_layout(drank, &dl, desc_type(dest, dst_kind), &fl, sty, false, NULL, stmt);
    free(tmp);
    free(doffs);
    free(soffs);
}
