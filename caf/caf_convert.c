/*
 * caf_convert.c -- conversion between intrinsic types and kinds, as
 * Fortran's intrinsic assignment does it (`x(:)[2] = y` with y of another
 * kind or type: gfortran leaves the conversion to the library), and local
 * copies between strided layouts.
 *
 * Values go through the widest type of their class: __int128 for integers,
 * __float128 for reals (exact for every kind gfortran has: 4, 8, 10, 16).
 * A real too large for the integer kind it is assigned to gives the most
 * negative or most positive value of that kind (Fortran leaves it
 * processor dependent; C would leave it undefined).
 */
#include "caf_internal.h"

#include <string.h>

typedef __int128 caf_int_t;
typedef __float128 caf_real_t;

bool caf_same_type(caf_type_t a, caf_type_t b)
{
    if (a.size != b.size)
        return false;
    if (a.bt == b.bt)
        return a.bt != CAF_BT_CHARACTER || a.kind == b.kind || a.size == 0;
    return false;
}

static bool read_int(const void *p, int kind, caf_int_t *v)
{
    switch (kind) {
    case 1: { int8_t x; memcpy(&x, p, 1); *v = x; return true; }
    case 2: { int16_t x; memcpy(&x, p, 2); *v = x; return true; }
    case 4: { int32_t x; memcpy(&x, p, 4); *v = x; return true; }
    case 8: { int64_t x; memcpy(&x, p, 8); *v = x; return true; }
    case 16: memcpy(v, p, 16); return true;
    default: return false;
    }
}

static bool write_int(void *p, int kind, caf_int_t v)
{
    switch (kind) {
    case 1: { int8_t x = (int8_t)v; memcpy(p, &x, 1); return true; }
    case 2: { int16_t x = (int16_t)v; memcpy(p, &x, 2); return true; }
    case 4: { int32_t x = (int32_t)v; memcpy(p, &x, 4); return true; }
    case 8: { int64_t x = (int64_t)v; memcpy(p, &x, 8); return true; }
    case 16: memcpy(p, &v, 16); return true;
    default: return false;
    }
}

static bool read_real(const void *p, int kind, caf_real_t *v)
{
    switch (kind) {
    case 4: { float x; memcpy(&x, p, 4); *v = x; return true; }
    case 8: { double x; memcpy(&x, p, 8); *v = x; return true; }
    case 10: { long double x; memcpy(&x, p, sizeof x); *v = x; return true; }
    case 16: memcpy(v, p, 16); return true;
    default: return false;
    }
}

static bool write_real(void *p, int kind, caf_real_t v)
{
    switch (kind) {
    case 4: { float x = (float)v; memcpy(p, &x, 4); return true; }
    case 8: { double x = (double)v; memcpy(p, &x, 8); return true; }
    case 10: { long double x = (long double)v; memcpy(p, &x, sizeof x); return true; }
    case 16: memcpy(p, &v, 16); return true;
    default: return false;
    }
}

/* Bytes of one real part of a complex of this kind. */
static size_t real_bytes(int kind)
{
    return kind == 10 ? sizeof(long double) : (size_t)kind;
}

/* Truncation toward zero into the integer range (saturating). */
static caf_int_t real_to_int(caf_real_t r)
{
    const caf_real_t lim = 170141183460469231731687303715884105728.0Q; /* 2^127 */
    if (r != r)
        return 0;
    if (r >= lim)
        return (caf_int_t)(((unsigned __int128)1 << 127) - 1);
    if (r < -lim)
        return (caf_int_t)((unsigned __int128)1 << 127);
    return (caf_int_t)r;
}

/* The numeric value of src as (re, im) and whether it is an integer. */
static bool read_num(const void *src, caf_type_t st, caf_real_t *re,
                     caf_real_t *im, caf_int_t *iv, bool *is_int)
{
    *im = 0;
    *is_int = false;
    switch (st.bt) {
    case CAF_BT_INTEGER:
        if (!read_int(src, st.kind, iv))
            return false;
        *re = (caf_real_t)*iv;
        *is_int = true;
        return true;
    case CAF_BT_REAL:
        return read_real(src, st.kind, re);
    case CAF_BT_COMPLEX:
        return read_real(src, st.kind, re) &&
               read_real((const char *)src + real_bytes(st.kind), st.kind, im);
    default:
        return false;
    }
}

static bool convert_char(void *dst, caf_type_t dt, const void *src, caf_type_t st)
{
    size_t dk = (size_t)dt.kind, sk = (size_t)st.kind;
    if ((dk != 1 && dk != 4) || (sk != 1 && sk != 4))
        return false;
    size_t dlen = dt.size / dk, slen = st.size / sk;
    size_t n = dlen < slen ? dlen : slen;
    for (size_t i = 0; i < dlen; i++) {
        uint32_t c = ' ';
        if (i < n) {
            if (sk == 1)
                c = ((const unsigned char *)src)[i];
            else
                memcpy(&c, (const char *)src + 4 * i, 4);
        }
        if (dk == 1)
            ((unsigned char *)dst)[i] = (unsigned char)(c > 255 ? '?' : c);
        else
            memcpy((char *)dst + 4 * i, &c, 4);
    }
    return true;
}

bool caf_convert(void *dst, caf_type_t dt, const void *src, caf_type_t st)
{
    if (caf_same_type(dt, st)) {
        memcpy(dst, src, dt.size);
        return true;
    }
    if (dt.bt == CAF_BT_CHARACTER || st.bt == CAF_BT_CHARACTER)
        return dt.bt == st.bt && convert_char(dst, dt, src, st);
    if (dt.bt == CAF_BT_LOGICAL || st.bt == CAF_BT_LOGICAL) {
        caf_int_t v;
        if (dt.bt != st.bt || !read_int(src, st.kind, &v))
            return false;
        return write_int(dst, dt.kind, v != 0);
    }
    caf_real_t re, im;
    caf_int_t iv;
    bool is_int;
    if (!read_num(src, st, &re, &im, &iv, &is_int))
        return false;
    switch (dt.bt) {
    case CAF_BT_INTEGER:
        return write_int(dst, dt.kind, is_int ? iv : real_to_int(re));
    case CAF_BT_REAL:
        return write_real(dst, dt.kind, re);
    case CAF_BT_COMPLEX:
        return write_real(dst, dt.kind, re) &&
               write_real((char *)dst + real_bytes(dt.kind), dt.kind, im);
    default:
        return false;
    }
}

/* ------------------------------------------------------------ layouts */

size_t caf_layout_count(const caf_layout_t *l)
{
    size_t n = 1;
    for (int d = 0; d < l->rank; d++)
        n *= l->dim[d].n;
    return n;
}

void caf_layout_flat(caf_layout_t *l, char *base, size_t esz, size_t n)
{
    l->base = base;
    l->esz = esz;
    l->rank = 1;
    l->dim[0] = (caf_dimspec_t){n, (ptrdiff_t)esz, NULL};
}

void caf_layout_desc(caf_layout_t *l, const gfc_descriptor_t *d, char *base)
{
    l->base = base ? base : d->base_addr;
    l->esz = d->dtype.elem_len;
    l->rank = d->dtype.rank;
    /* Strides count units of `span` bytes: the element size, except for a
     * component of an array of derived type (`a(:)%i`: span is the size of
     * the derived type). */
    ptrdiff_t unit = d->span > 0 ? d->span : (ptrdiff_t)l->esz;
    for (int i = 0; i < l->rank; i++) {
        ptrdiff_t ext = d->dim[i].ubound - d->dim[i].lbound + 1;
        l->dim[i].n = ext > 0 ? (size_t)ext : 0;
        l->dim[i].step = d->dim[i].stride * unit;
        l->dim[i].offs = NULL;
    }
}

bool caf_layout_contiguous(const caf_layout_t *l)
{
    ptrdiff_t want = (ptrdiff_t)l->esz;
    for (int d = 0; d < l->rank; d++) {
        if (l->dim[d].n > 1 && (l->dim[d].offs != NULL || l->dim[d].step != want))
            return false;
        want *= (ptrdiff_t)l->dim[d].n;
    }
    return true;
}

/* Copies count elements; a source of one element is repeated. */
bool caf_copy_layout(const caf_layout_t *dst, caf_type_t dt,
                     const caf_layout_t *src, caf_type_t st, size_t count)
{
    caf_iter_t di, si;
    caf_iter_init(&di, dst);
    caf_iter_init(&si, src);
    bool bcast = caf_layout_count(src) == 1;
    bool same = caf_same_type(dt, st);
    char *s0 = caf_iter_addr(&si);
    for (size_t i = 0; i < count; i++) {
        char *dp = caf_iter_addr(&di);
        char *sp = bcast ? s0 : caf_iter_addr(&si);
        if (same)
            memmove(dp, sp, dt.size);
        else if (!caf_convert(dp, dt, sp, st))
            return false;
        caf_iter_next(&di);
        if (!bcast)
            caf_iter_next(&si);
    }
    return true;
}
