/*
 * seg_holes.c -- the parts of a segment piece its owner protected or
 * unmapped after creating it (docs/reliability.md, "A peer's protected
 * memory"): a sorted list of disjoint page ranges, each with what is still
 * allowed there (PROT_READ, or nothing).  The owner and every peer keep the
 * same list for the owner's piece (seg_protect.c sends each change), and a
 * transfer that meets a hole is refused before anything is sent.
 *
 * A list is immutable once published: the segment table's snapshots point
 * at it (fh_seg_range_t.holes) and are read without a lock, so a change
 * builds a new list and the old one is kept, like old snapshots, until
 * fh_finalize (segment.c).  An empty list is NULL: the fast path tests one
 * pointer.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define RW (PROT_READ | PROT_WRITE)

/* What a transfer needs: a put writes, a get (and an atomic's read) reads. */
static int needs(bool write)
{
    return write ? PROT_WRITE : PROT_READ;
}

const struct fh_seg_holes *fh_seg_holes_set(const struct fh_seg_holes *old, uintptr_t lo,
                                            uintptr_t hi, int prot, bool *changed)
{
    uint32_t n = old != NULL ? old->n : 0;
    /* At most one hole is split in two, and one is added. */
    struct fh_seg_holes *h = malloc(sizeof *h + (n + 2) * sizeof h->h[0]);
    if (h == NULL)
        return NULL;
    h->retired_next = NULL;
    uint32_t k = 0;
    bool added = false;
    prot = prot < 0 ? 0 : prot & RW;      /* munmap: nothing is allowed */
    for (uint32_t i = 0; i <= n; i++) {
        if (!added && prot != RW && (i == n || old->h[i].lo >= lo)) {
            h->h[k++] = (struct fh_seg_hole){lo, hi, prot};
            added = true;
        }
        if (i == n)
            break;
        struct fh_seg_hole o = old->h[i];
        if (o.hi <= lo || o.lo >= hi) {                /* untouched */
            h->h[k++] = o;
            continue;
        }
        if (o.lo < lo)                                  /* the part before */
            h->h[k++] = (struct fh_seg_hole){o.lo, lo, o.prot};
        if (o.hi > hi) {                                /* the part after */
            if (!added && prot != RW) {
                h->h[k++] = (struct fh_seg_hole){lo, hi, prot};
                added = true;
            }
            h->h[k++] = (struct fh_seg_hole){hi, o.hi, o.prot};
        }
    }
    h->n = k;
    *changed = k != n || (k > 0 && memcmp(h->h, old->h, k * sizeof h->h[0]) != 0);
    for (uint32_t i = 1; i < k; i++)
        assert(h->h[i - 1].hi <= h->h[i].lo);
    if (k == 0) {
        free(h);
        return NULL;
    }
    return h;
}

uintptr_t fh_seg_holes_meet(const struct fh_seg_holes *h, uintptr_t addr, size_t n,
                            bool write)
{
    for (uint32_t i = 0; h != NULL && i < h->n; i++) {
        if (h->h[i].lo >= addr + n)
            break;
        if (h->h[i].hi > addr && !(h->h[i].prot & needs(write)))
            return h->h[i].lo > addr ? h->h[i].lo : addr;
    }
    return 0;
}

int fh_seg_holes_check(const char *fn, int rank, bool write, const void *remote, size_t n,
                       const fh_seg_range_t *r)
{
    uintptr_t bad = fh_seg_holes_meet(r->holes, (uintptr_t)remote, n, write);
    if (bad == 0)
        return FH_OK;
    return fh_set_error(FH_ERR_OUT_OF_SEGMENT,
                        "%s: [%p, +%zu) of %s: %s made %p %s after creating the "
                        "segment (mprotect or munmap); nothing was sent", fn, remote, n,
                        FH_RANK_NAME(rank), FH_RANK_NAME(rank), (void *)bad,
                        write ? "not writable" : "not readable");
}
