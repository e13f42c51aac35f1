/*
 * fhc_map.c -- linear probing with backward-shift deletion (see fhc_map.h).
 */
#include "fhc_map.h"

#include <assert.h>
#include <stdlib.h>

static size_t hash2(uint64_t k1, uint64_t k2)
{
    /* splitmix64 finalizer over a mix of both words */
    uint64_t x = k1 * 0x9E3779B97F4A7C15ull ^ (k2 + 0x632BE59BD9B4E019ull);
    x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27; x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return (size_t)x;
}

void fhc_map_init(fhc_map_t *m)
{
    m->slot = NULL;
    m->cap = 0;
    m->n = 0;
}

void fhc_map_fini(fhc_map_t *m)
{
    free(m->slot);
    fhc_map_init(m);
}

static void raw_insert(fhc_map_slot_t *slot, size_t cap, uint64_t k1,
                       uint64_t k2, void *val)
{
    size_t i = hash2(k1, k2) & (cap - 1);
    while (slot[i].val)
        i = (i + 1) & (cap - 1);
    slot[i] = (fhc_map_slot_t){ k1, k2, val };
}

int fhc_map_reserve(fhc_map_t *m, size_t extra)
{
    size_t need = m->n + extra;
    if (need < m->n)
        return -1;
    if (m->cap && need <= m->cap / 4 * 3)
        return 0;
    size_t cap = m->cap ? m->cap : 16;
    while (need > cap / 4 * 3) {
        if (cap > SIZE_MAX / 2 / sizeof(fhc_map_slot_t))
            return -1;
        cap *= 2;
    }
    fhc_map_slot_t *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i].val)
            raw_insert(s, cap, m->slot[i].k1, m->slot[i].k2, m->slot[i].val);
    free(m->slot);
    m->slot = s;
    m->cap = cap;
    return 0;
}

static size_t find(const fhc_map_t *m, uint64_t k1, uint64_t k2)
{
    if (!m->cap)
        return SIZE_MAX;
    size_t i = hash2(k1, k2) & (m->cap - 1);
    while (m->slot[i].val) {
        if (m->slot[i].k1 == k1 && m->slot[i].k2 == k2)
            return i;
        i = (i + 1) & (m->cap - 1);
    }
    return SIZE_MAX;
}

void *fhc_map_get(const fhc_map_t *m, uint64_t k1, uint64_t k2)
{
    size_t i = find(m, k1, k2);
    return i == SIZE_MAX ? NULL : m->slot[i].val;
}

void *fhc_map_put(fhc_map_t *m, uint64_t k1, uint64_t k2, void *val)
{
    assert(val);
    size_t i = find(m, k1, k2);
    if (i != SIZE_MAX) {
        void *old = m->slot[i].val;
        m->slot[i].val = val;
        return old;
    }
    assert(m->cap && m->n + 1 <= m->cap / 4 * 3);   /* reserved */
    raw_insert(m->slot, m->cap, k1, k2, val);
    m->n++;
    return NULL;
}

void *fhc_map_del(fhc_map_t *m, uint64_t k1, uint64_t k2)
{
    size_t i = find(m, k1, k2);
    if (i == SIZE_MAX)
        return NULL;
    void *old = m->slot[i].val;
    size_t mask = m->cap - 1;
    /* Backward shift: pull later members of the probe run into the hole
     * unless their home slot lies cyclically in (hole, j]. */
    size_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slot[j].val)
            break;
        size_t home = hash2(m->slot[j].k1, m->slot[j].k2) & mask;
        int stays = hole <= j ? (hole < home && home <= j)
                              : (hole < home || home <= j);
        if (!stays) {
            m->slot[hole] = m->slot[j];
            hole = j;
        }
    }
    m->slot[hole].val = NULL;
    m->n--;
    return old;
}
