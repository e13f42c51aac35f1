/*
 * caf_coll_ops.c -- the operators of the collectives: CO_SUM (integers wrap
 * around), CO_MIN / CO_MAX (integers, reals, characters of kind 1 and 4),
 * and CO_REDUCE's OPERATION, called as gfortran 12 compiles it.  Pure
 * local computation on contiguous elements (caf_coll.h).
 */
#include "caf_coll.h"

#include <string.h>

typedef __int128 i128_t;
typedef unsigned __int128 u128_t;
typedef __float128 f128_t;
typedef _Complex float __attribute__((mode(TC))) c128_t;

/* The loops below run element by element, reading both operands of
 * element i before writing its result: dst may be x or y (exactly), which
 * is what lets the callers reduce in place without a copy. */
#define SUM_LOOP(T)                                         \
    do {                                                    \
        T *d = dst;                                         \
        const T *a = x, *b = y;                             \
        for (size_t i = 0; i < n; i++)                      \
            d[i] = (T)(a[i] + b[i]);                        \
    } while (0)

/* The same sum 32 bytes at a time in 16-byte vectors (GCC's vector
 * extension: SSE2 on x86-64), then element by element: each lane is the
 * scalar addition, so the bits are those of SUM_LOOP.  The compiler does
 * not vectorize SUM_LOOP at -O2 (it would need a run-time overlap check);
 * a 1 MiB co_sum of reals on two images spent a third of its time in it. */
#define SUM_VEC(T, name)                                                    \
    static void name(void *dst, const void *x, const void *y, size_t n)    \
    {                                                                       \
        typedef T vec_t __attribute__((vector_size(16)));                   \
        const size_t w = 16 / sizeof(T);                                    \
        char *d = dst;                                                      \
        const char *a = x, *b = y;                                          \
        size_t i = 0;                                                       \
        for (; i + 2 * w <= n; i += 2 * w) {                                \
            vec_t u0, u1, v0, v1;                                           \
            memcpy(&u0, a + i * sizeof(T), 16);                             \
            memcpy(&u1, a + i * sizeof(T) + 16, 16);                        \
            memcpy(&v0, b + i * sizeof(T), 16);                             \
            memcpy(&v1, b + i * sizeof(T) + 16, 16);                        \
            u0 += v0;                                                       \
            u1 += v1;                                                       \
            memcpy(d + i * sizeof(T), &u0, 16);                             \
            memcpy(d + i * sizeof(T) + 16, &u1, 16);                        \
        }                                                                   \
        for (; i < n; i++) {                                                \
            T u, v;                                                         \
            memcpy(&u, a + i * sizeof(T), sizeof u);                        \
            memcpy(&v, b + i * sizeof(T), sizeof v);                        \
            u = (T)(u + v);                                                 \
            memcpy(d + i * sizeof(T), &u, sizeof u);                        \
        }                                                                   \
    }

SUM_VEC(uint8_t, sum_u8)
SUM_VEC(uint16_t, sum_u16)
SUM_VEC(uint32_t, sum_u32)
SUM_VEC(uint64_t, sum_u64)
SUM_VEC(float, sum_f32)
SUM_VEC(double, sum_f64)

/* min/max of integers and reals; a NaN loses against a number. */
#define MINMAX_LOOP(T)                                              \
    do {                                                            \
        T *d = dst;                                                 \
        const T *a = x, *b = y;                                     \
        for (size_t i = 0; i < n; i++) {                            \
            T u = a[i], v = b[i];                                   \
            bool take = is_min ? v < u : v > u;                     \
            d[i] = take || (u != u && v == v) ? v : u;              \
        }                                                           \
    } while (0)

static void op_sum(const coll_t *c, void *dst, const void *x, const void *y, size_t n)
{
    if (c->bt == CAF_BT_COMPLEX)
        n *= 2;
    if (c->bt == CAF_BT_INTEGER) {
        switch (c->kind) {
        case 1: sum_u8(dst, x, y, n); break;
        case 2: sum_u16(dst, x, y, n); break;
        case 4: sum_u32(dst, x, y, n); break;
        case 8: sum_u64(dst, x, y, n); break;
        default: SUM_LOOP(u128_t); break;
        }
    } else {
        switch (c->kind) {
        case 4: sum_f32(dst, x, y, n); break;
        case 8: sum_f64(dst, x, y, n); break;
        default: SUM_LOOP(f128_t); break;
        }
    }
}

static int char_cmp(const coll_t *c, const void *x, const void *y)
{
    if (c->kind == 1)
        return memcmp(x, y, c->a_len);
    const uint32_t *a = x, *b = y;
    for (size_t i = 0; i < c->a_len; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return 0;
}

static void op_minmax(const coll_t *c, void *dst, const void *x, const void *y, size_t n)
{
    bool is_min = c->op == OP_MIN;
    if (c->bt == CAF_BT_CHARACTER) {
        for (size_t i = 0; i < n; i++) {
            char *d = (char *)dst + i * c->esz;
            const char *a = (const char *)x + i * c->esz;
            const char *b = (const char *)y + i * c->esz;
            int r = char_cmp(c, b, a);
            const char *w = (is_min ? r < 0 : r > 0) ? b : a;
            if (w != d)
                memmove(d, w, c->esz);   /* d may be a or b */
        }
    } else if (c->bt == CAF_BT_INTEGER) {
        switch (c->kind) {
        case 1: MINMAX_LOOP(int8_t); break;
        case 2: MINMAX_LOOP(int16_t); break;
        case 4: MINMAX_LOOP(int32_t); break;
        case 8: MINMAX_LOOP(int64_t); break;
        default: MINMAX_LOOP(i128_t); break;
        }
    } else {
        switch (c->kind) {
        case 4: MINMAX_LOOP(float); break;
        case 8: MINMAX_LOOP(double); break;
        default: MINMAX_LOOP(f128_t); break;
        }
    }
}

/* --- CO_REDUCE: calling the user's function as gfortran 12 compiles it.
 *
 * gfortran passes opr_flags: BYREF when the function returns its result
 * through a hidden first argument (character functions: result buffer and
 * result length first), ARG_VALUE when the dummies have the VALUE
 * attribute, HIDDENLEN / ARG_DESC (never seen from gfortran 12 for
 * conforming operations).  A character function takes
 *   (char *res, size_t res_len, const char *x, const char *y,
 *    size_t x_len, size_t y_len)
 * (lengths in characters), whatever HIDDENLEN says.  Otherwise the function
 * takes x and y by reference (by value with ARG_VALUE) and returns the
 * element by value: integer/logical/real/complex as the C type of that
 * kind; a derived type as the C ABI returns a struct of its size -- on
 * x86-64 in memory through a hidden pointer when larger than 16 bytes, in
 * rax:rdx when its 8-byte halves hold integers.  (A derived type of at
 * most 16 bytes made of reals only comes back in SSE registers; the
 * library cannot know the components, so such a CO_REDUCE is wrong --
 * gfortran 12 passes no type information.) */

typedef void (*vfn_t)(void);
typedef struct { uint64_t a, b; } two64_t;

#define CALL_REF(T)                                                     \
    do {                                                                \
        T r = ((T(*)(const void *, const void *))(vfn_t)f)(x, y);       \
        memcpy(res, &r, sizeof r);                                      \
    } while (0)
#define CALL_VAL(T)                                                     \
    do {                                                                \
        T xv, yv;                                                       \
        memcpy(&xv, x, sizeof xv);                                      \
        memcpy(&yv, y, sizeof yv);                                      \
        T r = ((T(*)(T, T))(vfn_t)f)(xv, yv);                           \
        memcpy(res, &r, sizeof r);                                      \
    } while (0)
#define CALL_ANY(T) do { if (byval) CALL_VAL(T); else CALL_REF(T); } while (0)

/* res = opr(x, y); false for a convention we cannot make. */
static bool call_opr(const coll_t *c, void *res, const void *x, const void *y)
{
    vfn_t f = (vfn_t)c->opr;
    bool byval = (c->opr_flags & CAF_GFC_ARG_VALUE) != 0;
    if (c->opr_flags & CAF_GFC_ARG_DESC)
        return false;
    if (c->bt == CAF_BT_CHARACTER) {
        ((void (*)(void *, size_t, const void *, const void *, size_t,
                   size_t))f)(res, c->a_len, x, y, c->a_len, c->a_len);
        return true;
    }
    if (c->opr_flags & CAF_GFC_BYREF) {
        ((void (*)(void *, const void *, const void *))f)(res, x, y);
        return true;
    }
    switch (c->bt) {
    case CAF_BT_INTEGER:
    case CAF_BT_LOGICAL:
        switch (c->esz) {
        case 1: CALL_ANY(int8_t); return true;
        case 2: CALL_ANY(int16_t); return true;
        case 4: CALL_ANY(int32_t); return true;
        case 8: CALL_ANY(int64_t); return true;
        case 16: CALL_ANY(i128_t); return true;
        }
        return false;
    case CAF_BT_REAL:
        switch (c->esz) {
        case 4: CALL_ANY(float); return true;
        case 8: CALL_ANY(double); return true;
        case 16: CALL_ANY(f128_t); return true;
        }
        return false;
    case CAF_BT_COMPLEX:
        switch (c->esz) {
        case 8: CALL_ANY(_Complex float); return true;
        case 16: CALL_ANY(_Complex double); return true;
        case 32: CALL_ANY(c128_t); return true;
        }
        return false;
    case CAF_BT_DERIVED:
        if (byval)
            return false;
#if defined(__x86_64__)
        if (c->esz > 16) {
            ((void (*)(void *, const void *, const void *))f)(res, x, y);
        } else if (c->esz > 8) {
            two64_t r = ((two64_t(*)(const void *, const void *))f)(x, y);
            memcpy(res, &r, c->esz);
        } else {
            uint64_t r = ((uint64_t(*)(const void *, const void *))f)(x, y);
            memcpy(res, &r, c->esz);
        }
        return true;
#else
        return false;
#endif
    default:
        return false;
    }
}

/* caf_coll.h; call_opr's conventions. */
bool caf_coll_opr_supported(const coll_t *c)
{
    if (c->opr == NULL || (c->opr_flags & CAF_GFC_ARG_DESC))
        return false;
    if (c->bt == CAF_BT_CHARACTER || (c->opr_flags & CAF_GFC_BYREF))
        return true;
    switch (c->bt) {
    case CAF_BT_INTEGER:
    case CAF_BT_LOGICAL:
        return c->esz == 1 || c->esz == 2 || c->esz == 4 || c->esz == 8 ||
               c->esz == 16;
    case CAF_BT_REAL:
        return c->esz == 4 || c->esz == 8 || c->esz == 16;
    case CAF_BT_COMPLEX:
        return c->esz == 8 || c->esz == 16 || c->esz == 32;
    case CAF_BT_DERIVED:
#if defined(__x86_64__)
        return !(c->opr_flags & CAF_GFC_ARG_VALUE);
#else
        return false;
#endif
    default:
        return false;
    }
}

static void op_reduce(const coll_t *c, void *dst, const void *x, const void *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        call_opr(c, c->tmp, (const char *)x + i * c->esz, (const char *)y + i * c->esz);
        memcpy((char *)dst + i * c->esz, c->tmp, c->esz);
    }
}

void caf_coll_combine3(const coll_t *c, void *dst, const void *x, const void *y, size_t n)
{
    switch (c->op) {
    case OP_SUM: op_sum(c, dst, x, y, n); break;
    case OP_MIN:
    case OP_MAX: op_minmax(c, dst, x, y, n); break;
    default: op_reduce(c, dst, x, y, n); break;
    }
}

void caf_coll_combine(const coll_t *c, void *acc, const void *in, size_t n)
{
    caf_coll_combine3(c, acc, acc, in, n);
}
