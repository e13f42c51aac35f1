/*
 * caf_ref.c -- get_by_ref, send_by_ref, sendget_by_ref and is_present:
 * coindexed references through components (`x[j]%a(2:5)`, `y(3)[j]%c`,
 * allocatable components, vector subscripts, an allocatable left-hand side).
 *
 * gfortran describes the object as a chain of references from the coarray
 * the token names (caf_abi.h).  The chain is walked on the target image's
 * memory into one remote layout (caf_layout_t):
 *   - a component adds its offset; an allocatable (or pointer) component
 *     (caf_token_offset != 0) holds a descriptor (an array follows) or a
 *     pointer (a scalar): it is read from the target image and the walk
 *     goes on at the address it holds -- memory of the target's segment
 *     (its image-local heap), which is checked before anything uses it;
 *   - an array with a descriptor (an allocatable component's, fetched; or
 *     the allocatable coarray's own, which has the same bounds everywhere)
 *     takes Fortran subscripts, checked against the bounds;
 *   - an array without descriptor (a fixed-size component or coarray of
 *     derived type) takes 0-based linear element offsets per dimension
 *     (gfortran folds the lower bounds and extents in).
 * Fortran allows at most one part of nonzero rank and no allocatable
 * component to the right of it, so a remote pointer is only ever followed
 * from a single element.  Every remote byte is checked to lie inside the
 * object it belongs to (the coarray, or the allocation a descriptor
 * describes) and inside the target's segment.
 *
 * The data then moves as in caf_xfer.c: caf_rma (one fh_get/fh_put when
 * contiguous, strided calls otherwise), through a packed temporary when the
 * type or kind differs.  The target being this image is a local copy.
 */
#include "caf_internal.h"

#include <stdlib.h>
#include <string.h>

/* The walk of one reference chain on one image. */
typedef struct walk {
    int rank;               /* firehose rank of the target image */
    const char *stmt;
    int *stat;
    bool probe;             /* is_present: an unallocated component is an
                               answer (absent), not an error */
    bool absent;
    caf_layout_t l;         /* the remote data so far */
    char *lo, *hi;          /* the object the layout lies in */
    const gfc_descriptor_t *desc; /* for the next CAF_REF_ARRAY */
    caf_desc_storage_t dstore;    /* a fetched descriptor */
    ptrdiff_t *vecs[CAF_MAX_DIMENSIONS]; /* vector subscripts' offsets */
    int nvecs;
} walk_t;

static void walk_free(walk_t *w)
{
    for (int i = 0; i < w->nvecs; i++)
        free(w->vecs[i]);
    w->nvecs = 0;
}

static int image_of(int rank)
{
    return rank + 1;
}

/* Reads n bytes at the target's address a (checked by the caller). */
static bool fetch(walk_t *w, void *dst, const char *a, size_t n)
{
    if (w->rank == caf.rank) {
        memcpy(dst, a, n);
        return true;
    }
    int rc = fh_get(dst, w->rank, (void *)a, n);
    if (rc == FH_OK)
        return true;
    caf_error(w->stat, NULL, 0, rc == FH_ERR_PEER_DEAD ? CAF_STAT_FAILED_IMAGE : 1,
              w->stmt, "reading a component of image %d: %s (%s)",
              image_of(w->rank), fh_strerror(rc), fh_last_error());
    return false;
}

/* True when [p, p+n) lies in the target image's segment. */
static bool in_target_segment(const walk_t *w, const char *p, size_t n)
{
    uintptr_t b = (uintptr_t)caf.bases[w->rank];
    uintptr_t q = (uintptr_t)p;
    size_t all = caf.sym_size + caf.local_size;
    return q >= b && n <= all && q - b <= all - n;
}

static bool inside(const walk_t *w, const char *p, size_t n)
{
    return p >= w->lo && p <= w->hi && (size_t)(w->hi - p) >= n;
}

static bool oob(walk_t *w, const char *what)
{
    caf_error(w->stat, NULL, 0, 1, w->stmt, "%s out of bounds on image %d",
              what, image_of(w->rank));
    return false;
}

static bool not_allocated(walk_t *w, ptrdiff_t off)
{
    if (w->probe) {
        w->absent = true;
        return false;
    }
    caf_error(w->stat, NULL, 0, 1, w->stmt, "component (at byte %td of its "
              "object) of image %d is not allocated", off, image_of(w->rank));
    return false;
}

/* An allocatable/pointer component at offset of the current (single)
 * element: fetch what it holds and continue there. */
static bool follow(walk_t *w, const caf_reference_t *r)
{
    ptrdiff_t off = r->u.c.offset;
    if (caf_layout_count(&w->l) != 1) {
        caf_error(w->stat, NULL, 0, 1, w->stmt, "allocatable component to "
                  "the right of a part of nonzero rank");
        return false;
    }
    caf_iter_t it;
    caf_iter_init(&it, &w->l);
    char *at = caf_iter_addr(&it) + off;
    bool array = r->next != NULL && r->next->type == CAF_REF_ARRAY;
    if (!array) {
        void *p;
        if (!inside(w, at, sizeof p))
            return oob(w, "component");
        if (!fetch(w, &p, at, sizeof p))
            return false;
        if (p == NULL)
            return not_allocated(w, off);
        size_t n = r->item_size ? r->item_size : 1;
        if (!in_target_segment(w, p, n)) {
            caf_error(w->stat, NULL, 0, 1, w->stmt, "component of image %d "
                      "points outside its coarray memory (%p)",
                      image_of(w->rank), p);
            return false;
        }
        caf_layout_flat(&w->l, p, r->item_size, 1);
        w->l.rank = 0;
        w->lo = p;
        w->hi = (char *)p + n;
        w->desc = NULL;
        return true;
    }
    /* A descriptor: its fixed part, then its dimensions. */
    gfc_descriptor_t *d = &w->dstore.d;
    if (!inside(w, at, sizeof *d))
        return oob(w, "component");
    if (!fetch(w, d, at, sizeof *d))
        return false;
    int rk = d->dtype.rank;
    if (rk < 0 || rk > CAF_MAX_DIMENSIONS) {
        caf_error(w->stat, NULL, 0, 1, w->stmt, "component of image %d has "
                  "no valid descriptor (rank %d)", image_of(w->rank), rk);
        return false;
    }
    size_t dn = (size_t)rk * sizeof(caf_dim_t);
    if (!inside(w, at + sizeof *d, dn))
        return oob(w, "component");
    if (dn && !fetch(w, d->dim, at + sizeof *d, dn))
        return false;
    if (d->base_addr == NULL)
        return not_allocated(w, off);
    /* The allocation the descriptor describes. */
    size_t esz = d->span > 0 ? (size_t)d->span : d->dtype.elem_len;
    caf_layout_t al;
    caf_layout_desc(&al, d, d->base_addr);
    al.esz = esz;
    for (int i = 0; i < rk; i++)
        al.dim[i].step = d->dim[i].stride * (ptrdiff_t)esz;
    ptrdiff_t lo = 0, hi = 0;
    if (caf_layout_count(&al) > 0)
        caf_layout_span(&al, &lo, &hi);
    char *b = d->base_addr;
    if (!in_target_segment(w, b + lo, (size_t)(hi - lo))) {
        caf_error(w->stat, NULL, 0, 1, w->stmt, "component of image %d "
                  "points outside its coarray memory (%p)",
                  image_of(w->rank), d->base_addr);
        return false;
    }
    w->lo = b + lo;
    w->hi = b + hi;
    w->l.base = b;
    w->l.rank = 0;
    w->l.esz = esz;
    w->desc = d;
    return true;
}

static bool vec_index(walk_t *w, const caf_reference_t *r, int i, size_t k,
                      ptrdiff_t *x)
{
    const void *v = r->u.a.dim[i].v.vector;
    switch (r->u.a.dim[i].v.kind) {
    case 1: *x = ((const int8_t *)v)[k]; return true;
    case 2: *x = ((const int16_t *)v)[k]; return true;
    case 4: *x = ((const int32_t *)v)[k]; return true;
    case 8: *x = (ptrdiff_t)((const int64_t *)v)[k]; return true;
    default:
        caf_error(w->stat, NULL, 0, 1, w->stmt, "vector subscript of "
                  "integer kind %d", r->u.a.dim[i].v.kind);
        return false;
    }
}

static bool add_dim(walk_t *w, size_t n, ptrdiff_t step, ptrdiff_t *offs)
{
    if (w->l.rank >= CAF_MAX_DIMENSIONS) {
        free(offs);
        caf_error(w->stat, NULL, 0, 1, w->stmt, "reference of rank > %d",
                  CAF_MAX_DIMENSIONS);
        return false;
    }
    if (offs)
        w->vecs[w->nvecs++] = offs;
    w->l.dim[w->l.rank++] = (caf_dimspec_t){n, step, offs};
    return true;
}

/* An array with a descriptor: Fortran subscripts within its bounds. */
static bool array_ref(walk_t *w, const caf_reference_t *r)
{
    const gfc_descriptor_t *d = w->desc;
    if (d == NULL)
        caf_fatal(w->stmt, "array reference without a descriptor");
    if (caf_layout_count(&w->l) != 1) {
        caf_error(w->stat, NULL, 0, 1, w->stmt, "array reference to the "
                  "right of a part of nonzero rank");
        return false;
    }
    size_t esz = r->item_size ? r->item_size : d->dtype.elem_len;
    ptrdiff_t span = d->span > 0 ? d->span : (ptrdiff_t)d->dtype.elem_len;
    int rk = d->dtype.rank;
    w->l.esz = esz;
    int i;
    for (i = 0; i < CAF_MAX_DIMENSIONS && r->u.a.mode[i] != CAF_ARR_REF_NONE; i++) {
        if (i >= rk) {
            caf_error(w->stat, NULL, 0, 1, w->stmt, "%d subscripts for an "
                      "array of rank %d on image %d", i + 1, rk,
                      image_of(w->rank));
            return false;
        }
        ptrdiff_t lb = d->dim[i].lbound, ub = d->dim[i].ubound;
        ptrdiff_t sb = d->dim[i].stride * span;
        ptrdiff_t s = lb, e = ub, st = 1;
        /* An omitted bound is the array's lower (start) or upper (end)
         * bound whatever the stride's sign (`(::-1)` is empty, F2018
         * 9.5.3.3.2); FULL is `(:)`, `(::2)` or `(::-1)`: it has a stride. */
        switch (r->u.a.mode[i]) {
        case CAF_ARR_REF_FULL:
            st = r->u.a.dim[i].s.stride ? r->u.a.dim[i].s.stride : 1;
            break;
        case CAF_ARR_REF_RANGE:
            s = r->u.a.dim[i].s.start;
            e = r->u.a.dim[i].s.end;
            st = r->u.a.dim[i].s.stride;
            break;
        case CAF_ARR_REF_OPEN_END:
            s = r->u.a.dim[i].s.start;
            st = r->u.a.dim[i].s.stride ? r->u.a.dim[i].s.stride : 1;
            break;
        case CAF_ARR_REF_OPEN_START:
            e = r->u.a.dim[i].s.end;
            st = r->u.a.dim[i].s.stride ? r->u.a.dim[i].s.stride : 1;
            break;
        case CAF_ARR_REF_SINGLE:
            s = r->u.a.dim[i].s.start;
            if (s < lb || s > ub)
                return oob(w, "subscript");
            w->l.base += (s - lb) * sb;
            continue;
        case CAF_ARR_REF_VECTOR: {
            size_t n = r->u.a.dim[i].v.nvec;
            ptrdiff_t *o = malloc((n ? n : 1) * sizeof *o);
            if (o == NULL)
                caf_fatal(w->stmt, "out of memory");
            for (size_t k = 0; k < n; k++) {
                ptrdiff_t x;
                if (!vec_index(w, r, i, k, &x)) {
                    free(o);
                    return false;
                }
                if (x < lb || x > ub) {
                    free(o);
                    return oob(w, "vector subscript");
                }
                o[k] = (x - lb) * sb;
            }
            if (!add_dim(w, n, 0, o))
                return false;
            continue;
        }
        default:
            caf_fatal(w->stmt, "unknown array reference mode %d", r->u.a.mode[i]);
        }
        if (st == 0) {
            caf_error(w->stat, NULL, 0, 1, w->stmt, "zero stride");
            return false;
        }
        ptrdiff_t n = (e - s) / st + 1;
        if (n < 0 || (st > 0 ? e < s : e > s))
            n = 0;
        if (n > 0) {
            ptrdiff_t last = s + (n - 1) * st;
            if (s < lb || s > ub || last < lb || last > ub)
                return oob(w, "subscript");
            w->l.base += (s - lb) * sb;
        }
        if (!add_dim(w, (size_t)n, st * sb, NULL))
            return false;
    }
    if (i != rk) {
        caf_error(w->stat, NULL, 0, 1, w->stmt, "%d subscripts for an array "
                  "of rank %d", i, rk);
        return false;
    }
    w->desc = NULL;
    return true;
}

/* An array without descriptor: linear 0-based element offsets. */
static bool static_array_ref(walk_t *w, const caf_reference_t *r)
{
    size_t esz = r->item_size;
    w->l.esz = esz;
    for (int i = 0; i < CAF_MAX_DIMENSIONS && r->u.a.mode[i] != CAF_ARR_REF_NONE; i++) {
        ptrdiff_t s = r->u.a.dim[i].s.start;
        if (r->u.a.mode[i] == CAF_ARR_REF_SINGLE) {
            w->l.base += s * (ptrdiff_t)esz;
            continue;
        }
        if (r->u.a.mode[i] == CAF_ARR_REF_VECTOR)
            caf_fatal(w->stmt, "vector subscript of an array without descriptor");
        ptrdiff_t e = r->u.a.dim[i].s.end, st = r->u.a.dim[i].s.stride;
        if (st == 0)
            st = 1;
        ptrdiff_t n = (e - s) / st + 1;
        if (n < 0 || (st > 0 ? e < s : e > s))
            n = 0;
        if (n > 0)
            w->l.base += s * (ptrdiff_t)esz;
        if (!add_dim(w, (size_t)n, st * (ptrdiff_t)esz, NULL))
            return false;
    }
    return true;
}

/* Walks refs on the image image_index into w->l.  False after an error
 * (reported) or, when probing, an unallocated component (w->absent). */
static bool walk(walk_t *w, caf_token_t token, int image_index,
                 const caf_reference_t *refs)
{
    caf_tok_t *t = caf_tok(token, w->stmt);
    w->rank = caf_target(image_index, w->stat, NULL, 0, w->stmt, false);
    if (w->rank < 0)
        return false;
    if (!t->symmetric)
        caf_fatal(w->stmt, "coindexed reference through a token that is "
                  "not a coarray's");
    w->l.base = caf_remote(t, w->rank, 0);
    w->l.esz = t->size;
    w->l.rank = 0;
    w->lo = w->l.base;
    w->hi = w->l.base + t->size;
    w->desc = t->desc;
    w->nvecs = 0;
    w->absent = false;
    for (const caf_reference_t *r = refs; r != NULL; r = r->next) {
        bool ok;
        switch (r->type) {
        case CAF_REF_COMPONENT:
            if (r->u.c.caf_token_offset != 0) {
                ok = follow(w, r);
            } else {
                w->l.base += r->u.c.offset;
                w->l.esz = r->item_size;
                w->desc = NULL;
                ok = true;
            }
            break;
        case CAF_REF_ARRAY:
            ok = array_ref(w, r);
            break;
        case CAF_REF_STATIC_ARRAY:
            ok = static_array_ref(w, r);
            break;
        default:
            caf_fatal(w->stmt, "unknown reference type %d", r->type);
        }
        if (!ok) {
            walk_free(w);
            return false;
        }
    }
    /* Every element inside its object. */
    if (caf_layout_count(&w->l) > 0) {
        ptrdiff_t lo, hi;
        caf_layout_span(&w->l, &lo, &hi);
        if (!inside(w, w->l.base + lo, (size_t)(hi - lo))) {
            walk_free(w);
            return oob(w, "reference");
        }
    }
    return true;
}

/* -------------------------------------------------------- data moves */

static caf_type_t mk_type(int bt, int kind, size_t size)
{
    caf_type_t t = {bt, kind, size};
    if (bt == CAF_BT_CHARACTER && kind != 1 && kind != 4)
        t.kind = 1;
    return t;
}

/* The data moves are caf_xfer.c's: a local target may overlap the
 * source, so puts to this image go through a temporary. */
static bool get_data(int rank, const caf_layout_t *rl, caf_type_t rt,
                     const caf_layout_t *ll, caf_type_t lt, int *stat,
                     const char *stmt)
{
    return caf_get_layout(rank, rl, rt, ll, lt, stat, stmt);
}

static bool put_data(int rank, const caf_layout_t *rl, caf_type_t rt,
                     const caf_layout_t *ll, caf_type_t lt, int *stat,
                     const char *stmt)
{
    return caf_put_layout(rank, rl, rt, ll, lt, true, stat, stmt);
}

/* The result's shape: the dimensions of the remote layout. */
static bool shape_matches(const gfc_descriptor_t *d, const caf_layout_t *l)
{
    if (d->base_addr == NULL || d->dtype.rank != l->rank)
        return false;
    for (int i = 0; i < l->rank; i++) {
        ptrdiff_t ext = d->dim[i].ubound - d->dim[i].lbound + 1;
        if ((size_t)(ext > 0 ? ext : 0) != l->dim[i].n)
            return false;
    }
    return true;
}

/* (Re)allocates an allocatable destination to the remote shape, bounds
 * 1..n, as gfortran's intrinsic assignment would. */
static void realloc_dst(gfc_descriptor_t *d, const caf_layout_t *l,
                        const char *stmt)
{
    if (shape_matches(d, l))
        return;
    size_t esz = d->dtype.elem_len;
    size_t n = caf_layout_count(l);
    free(d->base_addr);
    d->base_addr = malloc(n * esz + 1);
    if (d->base_addr == NULL)
        caf_fatal(stmt, "out of memory for a %zu-byte result", n * esz);
    d->dtype.rank = (signed char)l->rank;
    d->span = (ptrdiff_t)esz;
    ptrdiff_t stride = 1, off = 0;
    for (int i = 0; i < l->rank; i++) {
        d->dim[i].lbound = 1;
        d->dim[i].ubound = (ptrdiff_t)l->dim[i].n;
        d->dim[i].stride = stride;
        off -= stride;
        stride *= (ptrdiff_t)l->dim[i].n;
    }
    d->offset = (size_t)off;
}

/* --------------------------------------------------- the entry points */

void _gfortran_caf_get_by_ref(caf_token_t token, int image_index,
                              gfc_descriptor_t *dst, caf_reference_t *refs,
                              int dst_kind, int src_kind, bool may_require_tmp,
                              bool dst_reallocatable, int *stat, int src_type)
{
    (void)may_require_tmp;
    walk_t w = {.stmt = "coindexed read", .stat = stat};
    if (!walk(&w, token, image_index, refs))
        return;
    if (dst_reallocatable && dst->dtype.rank > 0)
        realloc_dst(dst, &w.l, w.stmt);
    caf_layout_t ll;
    caf_layout_desc(&ll, dst, NULL);
    size_t n = caf_layout_count(&w.l);
    if (caf_layout_count(&ll) != n) {
        caf_error(stat, NULL, 0, 1, w.stmt, "shapes differ: %zu elements "
                  "assigned to %zu", n, caf_layout_count(&ll));
        walk_free(&w);
        return;
    }
    if (get_data(w.rank, &w.l, mk_type(src_type, src_kind, w.l.esz), &ll,
                 mk_type(dst->dtype.type, dst_kind, dst->dtype.elem_len),
                 stat, w.stmt))
        caf_ok(stat);
    walk_free(&w);
}

void _gfortran_caf_send_by_ref(caf_token_t token, int image_index,
                               gfc_descriptor_t *src, caf_reference_t *refs,
                               int dst_kind, int src_kind, bool may_require_tmp,
                               bool dst_reallocatable, int *stat, int dst_type)
{
    /* dst_reallocatable: a coindexed allocatable is never (re)allocated by
     * an assignment (F2018 10.2.1.2): it must be allocated with the shape. */
    (void)may_require_tmp;
    (void)dst_reallocatable;
    walk_t w = {.stmt = "coindexed assignment", .stat = stat};
    if (!walk(&w, token, image_index, refs))
        return;
    caf_layout_t ll;
    caf_layout_desc(&ll, src, NULL);
    if (put_data(w.rank, &w.l, mk_type(dst_type, dst_kind, w.l.esz), &ll,
                 mk_type(src->dtype.type, src_kind, src->dtype.elem_len),
                 stat, w.stmt))
        caf_ok(stat);
    walk_free(&w);
}

void _gfortran_caf_sendget_by_ref(caf_token_t dst_token, int dst_image_index,
                                  caf_reference_t *dst_refs,
                                  caf_token_t src_token, int src_image_index,
                                  caf_reference_t *src_refs, int dst_kind,
                                  int src_kind, bool may_require_tmp,
                                  int *dst_stat, int *src_stat, int dst_type,
                                  int src_type)
{
    (void)may_require_tmp;
    const char *stmt = "coindexed assignment between images";
    walk_t sw = {.stmt = stmt, .stat = src_stat};
    walk_t dw = {.stmt = stmt, .stat = dst_stat};
    if (!walk(&sw, src_token, src_image_index, src_refs))
        return;
    if (!walk(&dw, dst_token, dst_image_index, dst_refs)) {
        walk_free(&sw);
        return;
    }
    caf_type_t st = mk_type(src_type, src_kind, sw.l.esz);
    size_t n = caf_layout_count(&sw.l);
    if (n > SIZE_MAX / (st.size ? st.size : 1) - 1)
        caf_fatal(stmt, "transfer size overflows");
    char *tmp = malloc(n * st.size + 1);
    if (tmp == NULL)
        caf_fatal(stmt, "out of memory for a %zu-byte temporary", n * st.size);
    caf_layout_t fl;
    caf_layout_flat(&fl, tmp, st.size, n);
    if (get_data(sw.rank, &sw.l, st, &fl, st, src_stat, stmt)) {
        caf_ok(src_stat);
        if (put_data(dw.rank, &dw.l, mk_type(dst_type, dst_kind, dw.l.esz),
                     &fl, st, dst_stat, stmt))
            caf_ok(dst_stat);
    }
    free(tmp);
    walk_free(&sw);
    walk_free(&dw);
}

int _gfortran_caf_is_present(caf_token_t token, int image_index,
                             caf_reference_t *refs)
{
    walk_t w = {.stmt = "ALLOCATED of a coindexed component", .probe = true};
    if (!walk(&w, token, image_index, refs))
        return 0; /* w.absent: an error without stat has ended the program */
    walk_free(&w);
    return 1;
}
