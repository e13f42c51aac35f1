/*
 * fhsim_oracle.c -- per-target LRU over (initiator, bucket) pairs
 * (fhsim_oracle.h).
 *
 * Entries live in one array shared by all targets, allocated as they are
 * first needed (a target at capacity reuses its least recently used entry
 * instead), so memory grows with what the run touches, not with N * M/B.
 * Each target keeps a doubly linked list, most recent first; a map from
 * (target, initiator << 40 | bucket) to entry index + 1 finds an entry.
 */
#include "fhsim_oracle.h"

#include <stdio.h>
#include <stdlib.h>

#include "firehose/cache/fhc_map.h"

#define NIL UINT32_MAX

typedef struct entry {
    uint64_t key;               /* initiator << 40 | bucket */
    uint32_t prev, next;        /* towards more / less recent; NIL at ends */
} entry_t;

typedef struct lru {
    uint32_t head, tail;        /* most / least recent */
    uint64_t n;
} lru_t;

struct fhsim_oracle {
    uint32_t ntargets;
    uint64_t cap;
    lru_t *lru;
    entry_t *e;
    uint32_t ne, cape;
    fhc_map_t where;
    uint64_t ops, hits;
};

fhsim_oracle_t *fhsim_oracle_create(uint32_t ntargets, uint64_t cap)
{
    fhsim_oracle_t *o = calloc(1, sizeof *o);
    if (!o || !cap)
        goto bad;
    o->ntargets = ntargets;
    o->cap = cap;
    o->lru = malloc(ntargets * sizeof *o->lru);
    if (!o->lru)
        goto bad;
    for (uint32_t t = 0; t < ntargets; t++)
        o->lru[t] = (lru_t){ .head = NIL, .tail = NIL };
    fhc_map_init(&o->where);
    return o;
bad:
    free(o);
    return NULL;
}

void fhsim_oracle_destroy(fhsim_oracle_t *o)
{
    if (!o)
        return;
    fhc_map_fini(&o->where);
    free(o->lru);
    free(o->e);
    free(o);
}

static void unlink_entry(fhsim_oracle_t *o, lru_t *l, uint32_t i)
{
    entry_t *x = &o->e[i];
    if (x->prev != NIL)
        o->e[x->prev].next = x->next;
    else
        l->head = x->next;
    if (x->next != NIL)
        o->e[x->next].prev = x->prev;
    else
        l->tail = x->prev;
}

static void push_front(fhsim_oracle_t *o, lru_t *l, uint32_t i)
{
    o->e[i].prev = NIL;
    o->e[i].next = l->head;
    if (l->head != NIL)
        o->e[l->head].prev = i;
    l->head = i;
    if (l->tail == NIL)
        l->tail = i;
}

/* Makes (target, key) most recent; 1 if it was resident, 0 if inserted. */
static int touch(fhsim_oracle_t *o, uint32_t target, uint64_t key)
{
    lru_t *l = &o->lru[target];
    uint32_t i = (uint32_t)(uintptr_t)fhc_map_get(&o->where, target, key);
    if (i) {
        unlink_entry(o, l, i - 1);
        push_front(o, l, i - 1);
        return 1;
    }
    if (fhc_map_reserve(&o->where, 1) < 0)
        return -1;
    if (l->n == o->cap) {               /* reuse the least recent entry */
        i = l->tail;
        unlink_entry(o, l, i);
        fhc_map_del(&o->where, target, o->e[i].key);
    } else {
        if (o->ne == o->cape) {
            uint32_t c = o->cape ? 2 * o->cape : 1024;
            entry_t *e = realloc(o->e, (size_t)c * sizeof *e);
            if (!e || c >= NIL)
                return -1;
            o->e = e;
            o->cape = c;
        }
        i = o->ne++;
        l->n++;
    }
    o->e[i].key = key;
    push_front(o, l, i);
    fhc_map_put(&o->where, target, key, (void *)(uintptr_t)(i + 1));
    return 0;
}

int fhsim_oracle_access(fhsim_oracle_t *o, uint32_t target, uint32_t initiator,
                        uint64_t first, uint64_t last)
{
    if (target >= o->ntargets || last < first || last - first >= o->cap ||
        last >= (uint64_t)1 << 40)
        return -1;
    int hit = 1;
    for (uint64_t b = first; b <= last; b++) {
        int r = touch(o, target, (uint64_t)initiator << 40 | b);
        if (r < 0)
            return -1;
        hit &= r;
    }
    o->ops++;
    o->hits += (uint64_t)hit;
    return hit;
}

void fhsim_oracle_counts(const fhsim_oracle_t *o, uint64_t *ops, uint64_t *hits)
{
    *ops = o->ops;
    *hits = o->hits;
}

/* ----------------------------------------------------------- self-test */

typedef struct step {
    uint32_t target, initiator;
    uint64_t first, last;
    int hit;                    /* expected */
} step_t;

int fhsim_oracle_selftest(void)
{
    /* Capacity 3 per target.  Worked by hand (LRU order, most recent
     * first, after each step; "a5" = initiator a's bucket 5): */
    static const step_t s[] = {
        { 0, 1, 5, 6, 0 },      /* miss       [1:6 1:5]                       */
        { 0, 1, 5, 5, 1 },      /* hit        [1:5 1:6]                       */
        { 0, 2, 5, 5, 0 },      /* miss: another initiator's bucket 5 is its
                                   own entry  [2:5 1:5 1:6]                   */
        { 1, 1, 6, 6, 0 },      /* target 1 is separate  t1: [1:6]            */
        { 0, 1, 6, 6, 1 },      /* hit (target 0 untouched by t1) [1:6 2:5 1:5] */
        { 0, 3, 0, 0, 0 },      /* miss, evicts LRU 1:5  [3:0 1:6 2:5]         */
        { 0, 1, 5, 5, 0 },      /* miss: 1:5 was evicted, evicts 2:5
                                   [1:5 3:0 1:6]                              */
        { 0, 2, 5, 5, 0 },      /* miss: evicts 1:6  [2:5 1:5 3:0]             */
        { 0, 1, 5, 6, 0 },      /* 1:5 hits but 1:6 misses -> a miss; evicts
                                   3:0  [1:6 1:5 2:5]                         */
        { 0, 2, 5, 5, 1 },      /* hit  [2:5 1:6 1:5]                          */
        { 0, 1, 5, 6, 1 },      /* hit  [1:6 1:5 2:5]                          */
        { 1, 1, 6, 6, 1 },      /* hit on target 1                             */
    };
    fhsim_oracle_t *o = fhsim_oracle_create(2, 3);
    if (!o) {
        fprintf(stderr, "fhsim oracle selftest: out of memory\n");
        return -1;
    }
    uint64_t nhits = 0;
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        int got = fhsim_oracle_access(o, s[i].target, s[i].initiator, s[i].first,
                                      s[i].last);
        nhits += (uint64_t)(s[i].hit != 0);
        if (got != s[i].hit) {
            fprintf(stderr, "fhsim oracle selftest: step %zu (target %u, initiator %u,"
                    " buckets %llu..%llu): got %d, expected %d\n", i, s[i].target,
                    s[i].initiator, (unsigned long long)s[i].first,
                    (unsigned long long)s[i].last, got, s[i].hit);
            fhsim_oracle_destroy(o);
            return -1;
        }
    }
    uint64_t ops, hits;
    fhsim_oracle_counts(o, &ops, &hits);
    fhsim_oracle_destroy(o);
    if (ops != sizeof s / sizeof s[0] || hits != nhits) {
        fprintf(stderr, "fhsim oracle selftest: counted %llu ops %llu hits\n",
                (unsigned long long)ops, (unsigned long long)hits);
        return -1;
    }
    return 0;
}
