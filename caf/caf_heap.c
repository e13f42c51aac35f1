/*
 * caf_heap.c -- coarray memory: the segment, its two allocators, and
 * register/deregister.
 *
 * The segment of each image is [0, FH_CAF_HEAP) symmetric + FH_CAF_LOCAL_HEAP
 * image-local bytes.  Both parts use the same first-fit allocator (sorted
 * free list, neighbours merged on free).  The symmetric part sees only
 * collective requests, in the same order on every image (static coarrays
 * at start-up, ALLOCATE/DEALLOCATE of coarrays, the library's own scratch),
 * so it returns the same offsets everywhere: no exchange is needed.
 *
 * Memory handed out is zero: pages never used are zero from mmap, and
 * reused ones are cleared below the allocator's high-water mark.
 *
 * FH_CAF_HEAP must hold what the library keeps for itself at start-up (the
 * ledger below, the collectives' scratch: it grows with the image count),
 * so the symmetric allocator has no bound until caf_heap_started, which
 * checks the value against what start-up took and names the range.
 *
 * The ledger: a program whose images execute different ALLOCATE or
 * DEALLOCATE statements of coarrays (one image skips a DEALLOCATE, or
 * allocates another size) would get different offsets on different images
 * and silently corrupt every coarray after.  So each image writes a record
 * of every such statement (its number, ALLOCATE or DEALLOCATE, the
 * coarray's offset, size and allocation number) into its ledger before
 * the statement's barrier, and brings to every barrier of the initial team
 * the number of such statements it executed and a hash of its last record
 * (caf_heap_stamp; caf_sync.c carries both in the barrier's word, so that
 * every image learns at the same barrier that they differ -- also an
 * image that skipped the statement and waits in SYNC ALL).  Then every
 * image reads the others' records (caf_heap_disagreement: all of them up
 * to CAF_LEDGER_ALL images, its two neighbours above), reports which
 * images differ and how, and the job ends.  The records go in two slots
 * by the parity of their number: an image can be at most one statement
 * ahead (the next one's barrier waits for us), so the slot we read is not
 * being rewritten; after a disagreement no image writes any more.
 */
#include "caf_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAP_ALIGN 64
/* FH_CAF_HEAP + FH_CAF_LOCAL_HEAP at most: x86-64's user address space
 * (config.c refuses larger values of either). */
#define CAF_HEAP_MAX ((size_t)1 << 47)
#define CAF_LEDGER_ALL 64

typedef struct heap_rec {
    uint64_t seq;      /* statement number (1, 2, ...); 0: none yet */
    uint64_t kind;     /* REC_ALLOCATE or REC_DEALLOCATE */
    uint64_t off, size;
    uint64_t serial;   /* the coarray's allocation number */
} heap_rec_t;
enum { REC_ALLOCATE = 1, REC_DEALLOCATE = 2 };

typedef struct blk {
    size_t off, len;
} blk_t;

typedef struct arena {
    size_t start, size;  /* [start, start+size) of the segment */
    blk_t *free;         /* sorted by offset, disjoint, not adjacent */
    size_t nfree, cap;
    size_t high;         /* end of the highest byte ever handed out */
} arena_t;

static arena_t sym, loc;
static uint64_t nserial;      /* symmetric allocations made */
static bool starting;         /* until caf_heap_started */
static size_t heap_value;     /* FH_CAF_HEAP as given (sym_size: rounded up) */
static size_t ledger_off;     /* two heap_rec_t, by parity of seq */
static uint64_t ledger_seq;   /* statements recorded */

static int arena_init(arena_t *a, size_t start, size_t size)
{
    a->start = start;
    a->size = size;
    a->cap = 16;
    a->free = malloc(a->cap * sizeof *a->free);
    if (a->free == NULL)
        return -1;
    a->nfree = size ? 1 : 0;
    a->free[0] = (blk_t){start, size};
    a->high = start;
    return 0;
}

static size_t round_up(size_t n)
{
    if (n == 0)
        n = 1;
    if (n > SIZE_MAX - HEAP_ALIGN)
        return 0;
    return (n + HEAP_ALIGN - 1) & ~(size_t)(HEAP_ALIGN - 1);
}

/* First fit; (size_t)-1 when nothing is large enough. */
static size_t arena_alloc(arena_t *a, size_t n)
{
    n = round_up(n);
    if (n == 0)
        return (size_t)-1;
    for (size_t i = 0; i < a->nfree; i++) {
        blk_t *b = &a->free[i];
        if (b->len < n)
            continue;
        size_t off = b->off;
        b->off += n;
        b->len -= n;
        if (b->len == 0) {
            memmove(b, b + 1, (a->nfree - i - 1) * sizeof *b);
            a->nfree--;
        }
        /* Reused memory is cleared; memory past `high` is still zero. */
        if (off < a->high) {
            size_t dirty = (a->high < off + n ? a->high : off + n) - off;
            memset(caf.bases[caf.rank] + off, 0, dirty);
        }
        if (off + n > a->high)
            a->high = off + n;
        return off;
    }
    return (size_t)-1;
}

static void arena_free(arena_t *a, size_t off, size_t n)
{
    n = round_up(n);
    /* Position: first free block after off. */
    size_t i = 0;
    while (i < a->nfree && a->free[i].off < off)
        i++;
    bool merge_prev = i > 0 && a->free[i - 1].off + a->free[i - 1].len == off;
    bool merge_next = i < a->nfree && off + n == a->free[i].off;
    if (merge_prev && merge_next) {
        a->free[i - 1].len += n + a->free[i].len;
        memmove(&a->free[i], &a->free[i + 1], (a->nfree - i - 1) * sizeof *a->free);
        a->nfree--;
    } else if (merge_prev) {
        a->free[i - 1].len += n;
    } else if (merge_next) {
        a->free[i].off = off;
        a->free[i].len += n;
    } else {
        if (a->nfree == a->cap) {
            blk_t *nb = realloc(a->free, 2 * a->cap * sizeof *nb);
            if (nb == NULL)
                caf_fatal("DEALLOCATE", "out of memory");
            a->free = nb;
            a->cap *= 2;
        }
        memmove(&a->free[i + 1], &a->free[i], (a->nfree - i) * sizeof *a->free);
        a->free[i] = (blk_t){off, n};
        a->nfree++;
    }
}

/* A size as a user writes it (FH_* sizes): "256m", "4k", or bytes. */
static const char *size_str(size_t n, char *buf, size_t len)
{
    static const char suffix[] = "kmg";
    int i = -1;
    while (i < 2 && n != 0 && n % 1024 == 0) {
        n /= 1024;
        i++;
    }
    if (i < 0)
        snprintf(buf, len, "%zu", n);
    else
        snprintf(buf, len, "%zu%c", n, suffix[i]);
    return buf;
}

int caf_heap_init(void)
{
    size_t symsz = 0, locsz = 0;
    if (fh_config_size("FH_CAF_HEAP", &symsz) != FH_OK ||
        fh_config_size("FH_CAF_LOCAL_HEAP", &locsz) != FH_OK)
        return -1;
    char a[32], b[32], c[32];
    if (symsz > CAF_HEAP_MAX - locsz)
        caf_fatal("start-up", "FH_CAF_HEAP=%s plus FH_CAF_LOCAL_HEAP=%s is more "
                  "than %s, the address space: lower them", size_str(symsz, a, sizeof a),
                  size_str(locsz, b, sizeof b), size_str(CAF_HEAP_MAX, c, sizeof c));
    heap_value = symsz;
    caf.sym_size = (symsz + 4095) & ~(size_t)4095;
    caf.local_size = locsz;
    void *base;
    int rc = fh_segment_create(caf.sym_size + locsz, &caf.seg, &base);
    if (rc != FH_OK)
        caf_fatal("start-up", "FH_CAF_HEAP=%s and FH_CAF_LOCAL_HEAP=%s: cannot "
                  "create the coarray heap of %zu bytes per image (%s); lower them",
                  size_str(symsz, a, sizeof a), size_str(locsz, b, sizeof b),
                  caf.sym_size + locsz, fh_last_error());
    symsz = caf.sym_size;
    caf.bases = calloc((size_t)caf.nranks, sizeof *caf.bases);
    if (caf.bases == NULL)
        return -1;
    for (int r = 0; r < caf.nranks; r++) {
        void *b;
        size_t sz;
        rc = fh_segment_query(caf.seg, r, &b, &sz);
        if (rc != FH_OK)
            return -1;
        if (sz != symsz + locsz) {
            caf_fatal("start-up", "image %d has a coarray heap of %zu bytes, "
                      "this image %zu: set FH_CAF_HEAP and FH_CAF_LOCAL_HEAP "
                      "the same for every image", r + 1, sz, symsz + locsz);
        }
        caf.bases[r] = b;
    }
    /* Offsets are relative to the segment base.  The symmetric part has no
     * bound during start-up (nothing touches its memory before
     * caf_heap_started checks it). */
    if (arena_init(&sym, 0, CAF_HEAP_MAX) != 0 || arena_init(&loc, symsz, locsz) != 0)
        return -1;
    starting = true;
    ledger_off = caf_sym_alloc(2 * sizeof(heap_rec_t));
    return 0;
}

void caf_heap_started(void)
{
    assert(starting && sym.nfree == 1 && sym.free[0].off == sym.high);
    starting = false;
    if (sym.high > caf.sym_size) {
        char a[32], b[32], c[32], d[32];
        size_t mib = (size_t)1 << 20;
        caf_fatal("start-up", "FH_CAF_HEAP=%s is too small: on %d image%s the "
                  "library keeps %zu bytes of it for itself; expected a size from "
                  "%s to %s minus FH_CAF_LOCAL_HEAP=%s", size_str(heap_value, a, sizeof a),
                  caf.nranks, caf.nranks == 1 ? "" : "s", sym.high,
                  size_str((sym.high / mib + 1) * mib, b, sizeof b),
                  size_str(CAF_HEAP_MAX, c, sizeof c),
                  size_str(caf.local_size, d, sizeof d));
    }
    sym.size = caf.sym_size;
    sym.free[0].len = caf.sym_size - sym.high;
    if (sym.free[0].len == 0)
        sym.nfree = 0;
}

/* ------------------------------------------------------------ ledger */

static void rec_str(const heap_rec_t *r, char *buf, size_t len)
{
    if (r->seq == 0) {
        snprintf(buf, len, "none yet");
        return;
    }
    snprintf(buf, len, "%s of coarray #%llu, %llu bytes at heap offset %llu",
             r->kind == REC_ALLOCATE ? "ALLOCATE" : r->kind == REC_DEALLOCATE
                                                        ? "DEALLOCATE" : "?",
             (unsigned long long)r->serial, (unsigned long long)r->size,
             (unsigned long long)r->off);
}

/* Before the statement's barrier: this image's record of it. */
static void ledger_write(uint64_t kind, const caf_tok_t *t)
{
    heap_rec_t *slot = (heap_rec_t *)(caf.bases[caf.rank] + ledger_off);
    ledger_seq++;
    slot[ledger_seq & 1] = (heap_rec_t){.seq = ledger_seq, .kind = kind,
                                        .off = t->off, .size = t->size,
                                        .serial = t->serial};
}

void caf_heap_stamp(uint64_t *seq, uint64_t *hash)
{
    *seq = ledger_seq;
    *hash = 0;
    if (ledger_seq == 0)
        return;
    const heap_rec_t *r = (const heap_rec_t *)(caf.bases[caf.rank] + ledger_off) +
                          (ledger_seq & 1);
    const uint64_t f[4] = {r->kind, r->off, r->size, r->serial};
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 4; i++)
        h = (h ^ f[i]) * 0x100000001b3ull;
    *hash = h ^ (h >> 29);
}

void caf_heap_disagreement(char *buf, size_t len)
{
    int n = caf.nranks;
    int peers[2] = {(caf.rank + 1) % n, (caf.rank + n - 1) % n};
    int np = n <= CAF_LEDGER_ALL ? n : (n == 2 ? 1 : 2);
    const heap_rec_t *mine =
        (const heap_rec_t *)(caf.bases[caf.rank] + ledger_off) + (ledger_seq & 1);
    char m[120], o[120];
    rec_str(mine, m, sizeof m);
    int w = snprintf(buf, len, "this image executed %llu (last: %s)",
                     (unsigned long long)ledger_seq, m);
    heap_rec_t got[2];
    /* An image that has not executed our last statement holds its last
     * one in the other slot, and one ahead its next one in ours: read
     * both slots. */
    for (int i = 0, shown = 0; i < np && shown < 2 && w >= 0 && (size_t)w < len; i++) {
        int r = n <= CAF_LEDGER_ALL ? i : peers[i];
        if (r == caf.rank)
            continue;
        if (fh_get(got, r, caf.bases[r] + ledger_off, sizeof got) != FH_OK) {
            w += snprintf(buf + w, len - (size_t)w, "; image %d's ledger: %s", r + 1,
                          fh_last_error());
            continue;
        }
        const heap_rec_t *last = got[0].seq > got[1].seq ? &got[0] : &got[1];
        if (memcmp(last, mine, sizeof *mine) == 0)
            continue;
        rec_str(last, o, sizeof o);
        w += snprintf(buf + w, len - (size_t)w, "; image %d executed %llu (last: %s)", r + 1,
                      (unsigned long long)last->seq, o);
        shown++;
    }
}

void caf_heap_fini(void)
{
    /* The segment goes with fh_finalize. */
}

size_t caf_sym_alloc(size_t size)
{
    return arena_alloc(&sym, size);
}

void caf_sym_free(size_t off, size_t size)
{
    arena_free(&sym, off, size);
}

void *caf_local_alloc(size_t size)
{
    size_t off = arena_alloc(&loc, size);
    return off == (size_t)-1 ? NULL : caf.bases[caf.rank] + off;
}

void caf_local_free(void *p, size_t size)
{
    arena_free(&loc, (size_t)((char *)p - caf.bases[caf.rank]), size);
}

bool caf_in_segment(const void *p, size_t n)
{
    uintptr_t b = (uintptr_t)caf.bases[caf.rank];
    uintptr_t q = (uintptr_t)p;
    return q >= b && n <= caf.sym_size + caf.local_size &&
           q - b <= caf.sym_size + caf.local_size - n;
}

caf_tok_t *caf_tok(caf_token_t token, const char *stmt)
{
    caf_tok_t *t = token;
    if (t == NULL || t->magic != CAF_TOK_MAGIC)
        caf_fatal(stmt, "invalid coarray token %p (not registered, or "
                  "already deallocated)", token);
    return t;
}

/* ------------------------------------------------------- register */

static bool collective_type(caf_register_t type)
{
    return type != CAF_REGTYPE_COARRAY_ALLOC_REGISTER_ONLY &&
           type != CAF_REGTYPE_COARRAY_ALLOC_ALLOCATE_ONLY;
}

static const char *reg_stmt(caf_register_t type)
{
    return type == CAF_REGTYPE_COARRAY_STATIC ? "coarray start-up" : "ALLOCATE";
}

void _gfortran_caf_register(size_t size, caf_register_t type,
                            caf_token_t *token, gfc_descriptor_t *desc,
                            int *stat, char *errmsg, size_t errmsg_len)
{
    const char *stmt = reg_stmt(type);
    caf_start(NULL, NULL);
    if (type > CAF_REGTYPE_COARRAY_ALLOC_ALLOCATE_ONLY)
        caf_fatal(stmt, "unknown registration type %d", (int)type);
    size_t bytes = size;
    switch (type) {
    case CAF_REGTYPE_LOCK_STATIC: case CAF_REGTYPE_LOCK_ALLOC:
    case CAF_REGTYPE_CRITICAL:
    case CAF_REGTYPE_EVENT_STATIC: case CAF_REGTYPE_EVENT_ALLOC:
        /* size counts the variables; each is one 64-bit word here. */
        if (size > SIZE_MAX / 8) {
            caf_error(stat, errmsg, errmsg_len, 1, stmt, "%zu lock or event "
                      "variables overflow the address space", size);
            return;
        }
        bytes = (size ? size : 1) * 8;
        break;
    default:
        break;
    }

    caf_tok_t *t = NULL;
    if (type == CAF_REGTYPE_COARRAY_ALLOC_ALLOCATE_ONLY && *token != NULL) {
        t = caf_tok(*token, stmt);
        if (t->size != 0) {
            caf_error(stat, errmsg, errmsg_len, 1, stmt,
                      "the component is already allocated");
            return;
        }
    } else {
        t = calloc(1, sizeof *t);
        if (t == NULL) {
            caf_error(stat, errmsg, errmsg_len, 1, stmt, "out of memory");
            return;
        }
        t->magic = CAF_TOK_MAGIC;
        t->type = type;
    }

    if (type == CAF_REGTYPE_COARRAY_ALLOC_REGISTER_ONLY) {
        /* A token for a component that is allocated later. */
        *token = t;
        caf_ok(stat);
        return;
    }

    if (collective_type(type) && type != CAF_REGTYPE_COARRAY_STATIC &&
        type != CAF_REGTYPE_LOCK_STATIC && type != CAF_REGTYPE_EVENT_STATIC &&
        type != CAF_REGTYPE_CRITICAL && caf_in_child_team()) {
        /* Registration would be collective over the team only, and the
         * symmetric allocators of sibling teams would diverge. */
        if (*token != t)
            free(t);
        caf_error(stat, errmsg, errmsg_len, 1, stmt,
                  "ALLOCATE of a coarray inside CHANGE TEAM is not supported");
        return;
    }
    if (collective_type(type)) {
        size_t off = caf_sym_alloc(bytes);
        if (off == (size_t)-1) {
            free(t);
            caf_error(stat, errmsg, errmsg_len, 1, stmt,
                      "coarray of %zu bytes does not fit in the coarray heap "
                      "(FH_CAF_HEAP=%zu bytes; raise it)", bytes, caf.sym_size);
            return;
        }
        t->off = off;
        t->symmetric = true;
        t->serial = ++nserial;
    } else {
        char *p = caf_local_alloc(bytes);
        if (p == NULL) {
            caf_error(stat, errmsg, errmsg_len, 1, stmt,
                      "allocatable component of %zu bytes does not fit in "
                      "FH_CAF_LOCAL_HEAP=%zu bytes; raise it", bytes,
                      caf.local_size);
            if (*token != t)
                free(t);
            return;
        }
        t->off = (size_t)(p - caf.bases[caf.rank]);
        t->symmetric = false;
    }
    t->size = bytes;
    t->local = caf.bases[caf.rank] + t->off;
    *token = t;
    if (desc != NULL)
        desc->base_addr = t->local;
    /* The descriptor of an allocatable array coarray lives as long as the
     * coarray (gfortran's static or saved variable); a reference chain of
     * the *_by_ref calls starts from it (caf_ref.c). */
    if (type == CAF_REGTYPE_COARRAY_ALLOC && desc != NULL && desc->dtype.rank > 0)
        t->desc = desc;
    /* ALLOCATE of a coarray synchronizes all images (F2018 9.7.1.2). */
    if (type == CAF_REGTYPE_COARRAY_ALLOC || type == CAF_REGTYPE_LOCK_ALLOC ||
        type == CAF_REGTYPE_EVENT_ALLOC) {
        ledger_write(REC_ALLOCATE, t);
        int st = caf_barrier_heap(CAF_BAR_ALLOCATE);
        if (st != 0) {
            caf_error(stat, errmsg, errmsg_len, st, stmt, "%s",
                      st == CAF_STAT_FAILED_IMAGE ? "an image has failed"
                                                  : "an image has stopped");
            return;
        }
    }
    caf_ok(stat);
}

void _gfortran_caf_deregister(caf_token_t *token, caf_deregister_t type,
                              int *stat, char *errmsg, size_t errmsg_len)
{
    const char *stmt = "DEALLOCATE";
    if (token == NULL || *token == NULL) {
        caf_error(stat, errmsg, errmsg_len, 1, stmt,
                  "the coarray is not allocated");
        return;
    }
    caf_tok_t *t = caf_tok(*token, stmt);
    if (t->size == 0 && type == CAF_DEREGTYPE_COARRAY_DEALLOCATE_ONLY) {
        caf_error(stat, errmsg, errmsg_len, 1, stmt,
                  "the component is not allocated");
        return;
    }
    int st = 0;
    if (t->symmetric && t->size != 0 && caf_in_child_team()) {
        /* Allocated outside (ALLOCATE inside is refused): F2018 forbids
         * deallocating it in another team; the heaps would diverge. */
        caf_error(stat, errmsg, errmsg_len, 1, stmt,
                  "DEALLOCATE inside CHANGE TEAM of a coarray allocated "
                  "outside it is not supported");
        return;
    }
    if (t->symmetric) {
        /* DEALLOCATE of a coarray synchronizes all images first, so no
         * image still reaches the memory. */
        int rc = fh_quiet();
        if (rc != FH_OK)
            caf_fatal(stmt, "completing transfers: %s", fh_strerror(rc));
        ledger_write(REC_DEALLOCATE, t);
        st = caf_barrier_heap(CAF_BAR_DEALLOCATE);
    }
    if (t->size != 0) {
        if (t->symmetric)
            caf_sym_free(t->off, t->size);
        else
            caf_local_free(t->local, t->size);
        t->size = 0;
        t->local = NULL;
    }
    if (type == CAF_DEREGTYPE_COARRAY_DEREGISTER) {
        t->magic = 0;
        free(t);
        *token = NULL;
    }
    if (st != 0) {
        caf_error(stat, errmsg, errmsg_len, st, stmt, "%s",
                  st == CAF_STAT_FAILED_IMAGE ? "an image has failed"
                                              : "an image has stopped");
        return;
    }
    caf_ok(stat);
}
