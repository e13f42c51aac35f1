/*
 * caf_atomic.c -- atomic subroutines, LOCK/UNLOCK, CRITICAL, events.
 *
 * Every operation on an atomic, lock or event variable goes through
 * fh_atomic, the owner's operations on its own variables included: firehose
 * atomics are mutually atomic with each other only, never with plain loads
 * and stores, so one plain access would break the others.
 *
 * Atomic variables of 4 bytes (gfortran 12 accepts only ATOMIC_INT_KIND =
 * ATOMIC_LOGICAL_KIND = 4) map to one fh_atomic32, of 8 bytes to one
 * fh_atomic.  Kinds 1 and 2 (no compiler emits them today) live inside the
 * enclosing aligned 64-bit word (coarrays start 64-byte aligned, so that
 * word is in the segment): AND/OR/XOR become one fh_atomic with the operand
 * shifted (and AND's mask filled with ones), everything else is a CSWAP
 * loop on the word.  A variable is always accessed with the same width.
 *
 * Locks, CRITICAL and events use one 64-bit word per variable (caf_heap.c):
 *   lock/critical: 0 unlocked, else the holder's rank + 1 (CSWAP);
 *   event: the count (FETCH_ADD).
 * Ordering: UNLOCK and EVENT POST first complete this image's transfers
 * (fh_quiet), so what the critical section or the poster wrote is visible
 * to the next holder or the waiter; LOCK and EVENT WAIT return only after
 * the atomic that succeeded completed, so later accesses come after it.
 */
#include "caf_internal.h"

#include <string.h>

/* gfortran's op codes of _gfortran_caf_atomic_op (checked with
 * -fdump-tree-original: atomic_add 1, and 2, or 3, xor 4). */
enum { OP_ADD = 1, OP_AND = 2, OP_OR = 3, OP_XOR = 4 };

/* Resolves image_index (0 = this image) for stmt; -1 after caf_error. */
static int target(int image, int *stat, char *errmsg, size_t errmsg_len,
                  const char *stmt)
{
    if (image == 0)
        return caf.rank;
    return caf_target(image, stat, errmsg, errmsg_len, stmt, false);
}

/* fh_atomic with firehose errors turned into STAT (failed image) or fatal.
 * Returns true on success. */
static bool amo(int rank, uint64_t *addr, fh_atomic_op_t op, uint64_t operand,
                uint64_t compare, uint64_t *fetched, int *stat, char *errmsg,
                size_t errmsg_len, const char *stmt)
{
    int rc = fh_atomic(rank, addr, op, operand, compare, fetched);
    if (rc == FH_OK)
        return true;
    if (caf.status[rank] == CAF_IMG_FAILED) {
        caf_error(stat, errmsg, errmsg_len, CAF_STAT_FAILED_IMAGE, stmt,
                  "image %d has failed", rank + 1);
        return false;
    }
    caf_fatal(stmt, "atomic operation on image %d: %s", rank + 1,
              fh_strerror(rc));
}

/* fh_atomic32 on a 4-byte variable, errors as in amo. */
static bool amo32(int rank, uint64_t *word, unsigned shift, fh_atomic_op_t op,
                  uint64_t operand, uint64_t compare, uint64_t *fetched,
                  int *stat, const char *stmt)
{
    uint32_t *addr = (uint32_t *)(void *)((char *)word + shift / 8);
    uint32_t f = 0;
    int rc = fh_atomic32(rank, addr, op, (uint32_t)operand, (uint32_t)compare,
                         &f);
    if (rc == FH_OK) {
        if (fetched)
            *fetched = f;
        return true;
    }
    if (caf.status[rank] == CAF_IMG_FAILED) {
        caf_error(stat, NULL, 0, CAF_STAT_FAILED_IMAGE, stmt,
                  "image %d has failed", rank + 1);
        return false;
    }
    caf_fatal(stmt, "atomic operation on image %d: %s", rank + 1,
              fh_strerror(rc));
}

/* ------------------------------------------------------------ atomics */

/* Where a variable of `kind` bytes at byte `offset` of token's coarray is
 * on rank: the 64-bit word, the bit shift of the value in it and the mask
 * of the value (before shifting). */
typedef struct where {
    uint64_t *word;
    unsigned shift;
    uint64_t mask;
} where_t;

static bool locate(where_t *w, caf_tok_t *t, int rank, size_t offset,
                   int kind, int *stat, const char *stmt)
{
    if (kind != 1 && kind != 2 && kind != 4 && kind != 8) {
        caf_error(stat, NULL, 0, 1, stmt, "unsupported kind %d", kind);
        return false;
    }
    if (offset % (size_t)kind != 0 || offset + (size_t)kind > t->size) {
        caf_error(stat, NULL, 0, 1, stmt, "atomic variable at byte %zu of a "
                  "coarray of %zu bytes is misaligned or outside it", offset,
                  t->size);
        return false;
    }
    uintptr_t a = (uintptr_t)caf_remote(t, rank, offset);
    w->word = (uint64_t *)(a & ~(uintptr_t)7);
    /* Little-endian only: byte k of the word is bits 8k..8k+7. */
    w->shift = (unsigned)(a & 7) * 8;
    w->mask = kind == 8 ? ~(uint64_t)0 : (((uint64_t)1 << (8 * kind)) - 1);
    return true;
}

static uint64_t load_val(const void *p, int kind)
{
    switch (kind) {
    case 1: { uint8_t v; memcpy(&v, p, 1); return v; }
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

static void store_val(void *p, uint64_t v, int kind)
{
    switch (kind) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

/* Sub-word update by CSWAP loop: new value = f(old value); returns the old
 * value in *old.  cas: only when old == cmp (else nothing is written). */
enum { UPD_SET, UPD_ADD, UPD_CAS };

static bool update(int rank, const where_t *w, int how, uint64_t v,
                   uint64_t cmp, uint64_t *old, int *stat, const char *stmt)
{
    uint64_t cur;
    if (!amo(rank, w->word, FH_AOP_FETCH, 0, 0, &cur, stat, NULL, 0, stmt))
        return false;
    for (;;) {
        uint64_t o = (cur >> w->shift) & w->mask, n;
        switch (how) {
        case UPD_SET: n = v; break;
        case UPD_ADD: n = o + v; break;
        default:
            if (o != cmp) {
                *old = o; /* the FETCH or failed CSWAP read it atomically */
                return true;
            }
            n = v;
            break;
        }
        uint64_t nw = (cur & ~(w->mask << w->shift)) |
                      ((n & w->mask) << w->shift);
        uint64_t seen;
        if (!amo(rank, w->word, FH_AOP_CSWAP, nw, cur, &seen, stat, NULL, 0,
                 stmt))
            return false;
        if (seen == cur) {
            *old = o;
            return true;
        }
        cur = seen;
    }
}

void _gfortran_caf_atomic_define(caf_token_t token, size_t offset,
                                 int image_index, void *value, int *stat,
                                 int type, int kind)
{
    const char *stmt = "ATOMIC_DEFINE";
    (void)type;
    caf_tok_t *t = caf_tok(token, stmt);
    int rank = target(image_index, stat, NULL, 0, stmt);
    where_t w;
    if (rank < 0 || !locate(&w, t, rank, offset, kind, stat, stmt))
        return;
    uint64_t v = load_val(value, kind), old;
    bool ok = kind == 8
        ? amo(rank, w.word, FH_AOP_SET, v, 0, NULL, stat, NULL, 0, stmt)
        : kind == 4
        ? amo32(rank, w.word, w.shift, FH_AOP_SET, v, 0, NULL, stat, stmt)
        : update(rank, &w, UPD_SET, v, 0, &old, stat, stmt);
    if (ok)
        caf_ok(stat);
}

void _gfortran_caf_atomic_ref(caf_token_t token, size_t offset,
                              int image_index, void *value, int *stat,
                              int type, int kind)
{
    const char *stmt = "ATOMIC_REF";
    (void)type;
    caf_tok_t *t = caf_tok(token, stmt);
    int rank = target(image_index, stat, NULL, 0, stmt);
    where_t w;
    if (rank < 0 || !locate(&w, t, rank, offset, kind, stat, stmt))
        return;
    uint64_t cur;
    if (kind == 4) {
        if (!amo32(rank, w.word, w.shift, FH_AOP_FETCH, 0, 0, &cur, stat, stmt))
            return;
        store_val(value, cur, kind);
        caf_ok(stat);
        return;
    }
    if (!amo(rank, w.word, FH_AOP_FETCH, 0, 0, &cur, stat, NULL, 0, stmt))
        return;
    store_val(value, (cur >> w.shift) & w.mask, kind);
    caf_ok(stat);
}

void _gfortran_caf_atomic_cas(caf_token_t token, size_t offset,
                              int image_index, void *old, void *compare,
                              void *new_val, int *stat, int type, int kind)
{
    const char *stmt = "ATOMIC_CAS";
    (void)type;
    caf_tok_t *t = caf_tok(token, stmt);
    int rank = target(image_index, stat, NULL, 0, stmt);
    where_t w;
    if (rank < 0 || !locate(&w, t, rank, offset, kind, stat, stmt))
        return;
    uint64_t cmp = load_val(compare, kind), nv = load_val(new_val, kind), o;
    bool ok = kind == 8
        ? amo(rank, w.word, FH_AOP_CSWAP, nv, cmp, &o, stat, NULL, 0, stmt)
        : kind == 4
        ? amo32(rank, w.word, w.shift, FH_AOP_CSWAP, nv, cmp, &o, stat, stmt)
        : update(rank, &w, UPD_CAS, nv, cmp, &o, stat, stmt);
    if (!ok)
        return;
    store_val(old, o, kind);
    caf_ok(stat);
}

void _gfortran_caf_atomic_op(int op, caf_token_t token, size_t offset,
                             int image_index, void *value, void *old,
                             int *stat, int type, int kind)
{
    const char *stmt = op == OP_ADD ? "ATOMIC_ADD" : op == OP_AND ? "ATOMIC_AND"
                     : op == OP_OR ? "ATOMIC_OR" : op == OP_XOR ? "ATOMIC_XOR"
                     : "atomic operation";
    (void)type;
    caf_tok_t *t = caf_tok(token, stmt);
    if (op < OP_ADD || op > OP_XOR) {
        caf_error(stat, NULL, 0, 1, stmt, "unknown atomic operation %d", op);
        return;
    }
    int rank = target(image_index, stat, NULL, 0, stmt);
    where_t w;
    if (rank < 0 || !locate(&w, t, rank, offset, kind, stat, stmt))
        return;
    uint64_t v = load_val(value, kind) & w.mask, o = 0;
    bool ok;
    if (kind == 4) {
        fh_atomic_op_t fop = op == OP_ADD ? FH_AOP_FETCH_ADD
                           : op == OP_AND ? FH_AOP_FETCH_AND
                           : op == OP_OR ? FH_AOP_FETCH_OR : FH_AOP_FETCH_XOR;
        ok = amo32(rank, w.word, w.shift, fop, v, 0, &o, stat, stmt);
    } else if (op == OP_ADD && kind != 8 && w.shift + 8 * (unsigned)kind != 64) {
        /* A carry would spill into the neighbours: loop. */
        ok = update(rank, &w, UPD_ADD, v, 0, &o, stat, stmt);
    } else {
        fh_atomic_op_t fop;
        uint64_t operand = v << w.shift;
        switch (op) {
        case OP_ADD: fop = FH_AOP_FETCH_ADD; break;
        case OP_AND:
            fop = FH_AOP_FETCH_AND;
            operand |= ~(w.mask << w.shift); /* keep the neighbours */
            break;
        case OP_OR: fop = FH_AOP_FETCH_OR; break;
        default: fop = FH_AOP_FETCH_XOR; break;
        }
        uint64_t cur = 0;
        ok = amo(rank, w.word, fop, operand, 0, &cur, stat, NULL, 0, stmt);
        o = (cur >> w.shift) & w.mask;
    }
    if (!ok)
        return;
    if (old != NULL)
        store_val(old, o, kind);
    caf_ok(stat);
}

/* ------------------------------------------------------- lock, critical */

static const char *lock_stmt(const caf_tok_t *t, bool lock)
{
    if (t->type == CAF_REGTYPE_CRITICAL)
        return lock ? "CRITICAL" : "END CRITICAL";
    return lock ? "LOCK" : "UNLOCK";
}

/* Word of lock/event variable `index` of token t on rank. */
static uint64_t *var_word(const caf_tok_t *t, int rank, size_t index,
                          const char *stmt)
{
    if (index >= t->size / 8)
        caf_fatal(stmt, "variable index %zu out of range (%zu variables)",
                  index, t->size / 8);
    return (uint64_t *)caf_remote(t, rank, 8 * index);
}

void _gfortran_caf_lock(caf_token_t token, size_t index, int image_index,
                        int *acquired_lock, int *stat, char *errmsg,
                        size_t errmsg_len)
{
    caf_tok_t *t = caf_tok(token, "LOCK");
    const char *stmt = lock_stmt(t, true);
    int rank = target(image_index, stat, errmsg, errmsg_len, stmt);
    if (rank < 0)
        return;
    uint64_t *w = var_word(t, rank, index, stmt);
    uint64_t me = (uint64_t)caf.rank + 1, cur = 0;
    unsigned backoff = 1, spins = 0;
    for (;;) {
        if (!amo(rank, w, FH_AOP_CSWAP, me, cur, &cur, stat, errmsg,
                 errmsg_len, stmt))
            return;
        uint64_t seen = cur;
        if (seen == 0)
            break; /* cur was 0: acquired */
        if (seen == me) {
            caf_error(stat, errmsg, errmsg_len, CAF_STAT_LOCKED, stmt,
                      "the lock variable is already locked by this image");
            return;
        }
        if (seen > (uint64_t)caf.nranks)
            caf_fatal(stmt, "corrupt lock variable (value %llu)",
                      (unsigned long long)seen);
        if (caf.status[seen - 1] == CAF_IMG_FAILED) {
            /* The holder failed: take the lock over (CSWAP from its value,
             * so only one image does) and report it. */
            uint64_t got;
            if (!amo(rank, w, FH_AOP_CSWAP, me, seen, &got, stat, errmsg,
                     errmsg_len, stmt))
                return;
            if (got == seen) {
                if (acquired_lock)
                    *acquired_lock = 1;
                caf_error(stat, errmsg, errmsg_len,
                          CAF_STAT_UNLOCKED_FAILED_IMAGE, stmt,
                          "the lock variable was locked by image %llu, which "
                          "has failed; this image holds it now",
                          (unsigned long long)seen);
                return;
            }
            cur = 0;
            continue;
        }
        if (acquired_lock) {
            *acquired_lock = 0;
            caf_ok(stat);
            return;
        }
        /* Held by another image: poll (serving others) and retry, backing
         * off so waiters do not flood the owner with atomics. */
        for (unsigned i = 0; i < backoff; i++)
            caf_idle(&spins);
        if (backoff < 256)
            backoff <<= 1;
        if (rank != caf.rank && caf.status[rank] == CAF_IMG_FAILED) {
            caf_error(stat, errmsg, errmsg_len, CAF_STAT_FAILED_IMAGE, stmt,
                      "image %d has failed", image_index);
            return;
        }
        cur = 0;
    }
    if (acquired_lock)
        *acquired_lock = 1;
    caf_ok(stat);
}

void _gfortran_caf_unlock(caf_token_t token, size_t index, int image_index,
                          int *stat, char *errmsg, size_t errmsg_len)
{
    caf_tok_t *t = caf_tok(token, "UNLOCK");
    const char *stmt = lock_stmt(t, false);
    int rank = target(image_index, stat, errmsg, errmsg_len, stmt);
    if (rank < 0)
        return;
    uint64_t *w = var_word(t, rank, index, stmt);
    /* What the critical section wrote is complete before the lock frees. */
    int rc = fh_quiet();
    if (rc != FH_OK)
        caf_fatal(stmt, "completing transfers: %s", fh_strerror(rc));
    uint64_t me = (uint64_t)caf.rank + 1, seen;
    if (!amo(rank, w, FH_AOP_CSWAP, 0, me, &seen, stat, errmsg, errmsg_len,
             stmt))
        return;
    if (seen == me) {
        caf_ok(stat);
        return;
    }
    if (seen == 0) {
        /* gfortran 12's STAT_UNLOCKED is 0 (libgfortran's value), which
         * caf_error does not store: set it here. */
        if (stat != NULL) {
            *stat = CAF_STAT_UNLOCKED;
            caf_set_errmsg(errmsg, errmsg_len,
                           "the lock variable is not locked");
            return;
        }
        caf_error(stat, errmsg, errmsg_len, 1, stmt,
                  "the lock variable is not locked");
    } else
        caf_error(stat, errmsg, errmsg_len, CAF_STAT_LOCKED_OTHER_IMAGE, stmt,
                  "the lock variable is locked by image %llu, not this image",
                  (unsigned long long)seen);
}

/* ------------------------------------------------------------- events */

void _gfortran_caf_event_post(caf_token_t token, size_t index,
                              int image_index, int *stat, char *errmsg,
                              size_t errmsg_len)
{
    const char *stmt = "EVENT POST";
    caf_tok_t *t = caf_tok(token, stmt);
    int rank = target(image_index, stat, errmsg, errmsg_len, stmt);
    if (rank < 0)
        return;
    uint64_t *w = var_word(t, rank, index, stmt);
    /* The poster's earlier transfers are visible before the post. */
    int rc = fh_quiet();
    if (rc != FH_OK)
        caf_fatal(stmt, "completing transfers: %s", fh_strerror(rc));
    if (!amo(rank, w, FH_AOP_FETCH_ADD, 1, 0, NULL, stat, errmsg, errmsg_len,
             stmt))
        return;
    if (rank != caf.rank && caf.status[rank] == CAF_IMG_STOPPED) {
        caf_error(stat, errmsg, errmsg_len, CAF_STAT_STOPPED_IMAGE, stmt,
                  "image %d has stopped", image_index);
        return;
    }
    caf_ok(stat);
}

void _gfortran_caf_event_wait(caf_token_t token, size_t index,
                              int until_count, int *stat, char *errmsg,
                              size_t errmsg_len)
{
    const char *stmt = "EVENT WAIT";
    caf_tok_t *t = caf_tok(token, stmt);
    uint64_t *w = var_word(t, caf.rank, index, stmt);
    uint64_t need = until_count < 1 ? 1 : (uint64_t)until_count, cur;
    unsigned spins = 0;
    /* The word is this image's own: a check is a load of our memory (an
     * atomic load, atomic with the owner-CPU atomics every post is), with
     * no traffic to back off from and no round of progress of its own, so
     * it is checked after every round of progress (caf_idle yields and
     * sleeps by its own policy). */
    for (;;) {
        cur = __atomic_load_n(w, __ATOMIC_ACQUIRE);
        if ((int64_t)cur >= (int64_t)need)
            break;
        caf_idle(&spins);
    }
    /* Only this image decrements its events and posts only add, so the
     * count stays >= 0. */
    if (!amo(caf.rank, w, FH_AOP_FETCH_ADD, (uint64_t)0 - need, 0, NULL, stat,
             errmsg, errmsg_len, stmt))
        return;
    /* The fetch-add above is itself a full barrier (the owner's CPU atomic,
     * run here or by the AM handler of this image): later loads see what
     * the poster wrote before posting. */
    caf_ok(stat);
}

void _gfortran_caf_event_query(caf_token_t token, size_t index,
                               int image_index, int *count, int *stat)
{
    const char *stmt = "EVENT_QUERY";
    caf_tok_t *t = caf_tok(token, stmt);
    int rank = target(image_index, stat, NULL, 0, stmt);
    if (rank < 0)
        return;
    uint64_t *w = var_word(t, rank, index, stmt), cur;
    if (!amo(rank, w, FH_AOP_FETCH, 0, 0, &cur, stat, NULL, 0, stmt))
        return;
    int64_t c = (int64_t)cur;
    *count = c > INT32_MAX ? INT32_MAX : (int)c;
    caf_ok(stat);
}
