/*
 * handle.c -- the per-path handle table.  See handle.h.
 */
#include "handle.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

void fh_ht_init(fh_htable_t *t, unsigned path_index)
{
    memset(t, 0, sizeof *t);
    t->path_index = path_index;
}

void fh_ht_fini(fh_htable_t *t)
{
    for (uint32_t i = 0; i < t->nchunks; i++)
        free(t->chunks[i]);
    memset(t->chunks, 0, sizeof t->chunks);
    t->nchunks = 0;
    t->free_head = 0;
}

static fh_hslot_t *slot_at(const fh_htable_t *t, uint32_t idx)
{
    return &t->chunks[idx / FH_HT_CHUNK][idx % FH_HT_CHUNK];
}

static int grow(fh_htable_t *t)
{
    if (t->nchunks == FH_HT_MAX_CHUNKS)
        return -1;
    fh_hslot_t *c = calloc(FH_HT_CHUNK, sizeof *c);
    if (c == NULL)
        return -1;
    uint32_t base = t->nchunks * FH_HT_CHUNK;
    t->chunks[t->nchunks++] = c;
    /* Push in reverse so the lowest index is handed out first. */
    for (uint32_t i = FH_HT_CHUNK; i-- > 0;) {
        c[i].gen = 1;
        c[i].index = base + i;
        c[i].next_free = t->free_head;
        t->free_head = base + i + 1;
    }
    return 0;
}

fh_hslot_t *fh_ht_alloc(fh_htable_t *t, uint32_t owner, fh_handle_t *out)
{
    if (t->free_head == 0 && grow(t) != 0)
        return NULL;
    uint32_t idx = t->free_head - 1;
    fh_hslot_t *s = slot_at(t, idx);
    assert(!s->live && s->gen != 0);
    t->free_head = s->next_free;
    s->next_free = 0;
    s->live = 1;
    s->owner = owner;
    s->ctr = (fh_ctr_t)FH_CTR_INIT;
    s->result = 0;
    s->result_ready = 0;
    s->fetched = NULL;
    s->rma_rank = -1;
    s->width = 0;
    s->awaits_reply = 0;
    t->live++;
    *out = ((fh_handle_t)s->gen << 32) | ((fh_handle_t)idx << 8) | t->path_index;
    return s;
}

fh_hslot_t *fh_ht_lookup_any(fh_htable_t *t, fh_handle_t h)
{
    if (fh_handle_path(h) != t->path_index)
        return NULL;
    uint32_t idx = (uint32_t)(h >> 8) & 0xffffffu;
    uint32_t gen = (uint32_t)(h >> 32);
    if (gen == 0 || idx >= t->nchunks * FH_HT_CHUNK)
        return NULL;
    fh_hslot_t *s = slot_at(t, idx);
    if (!s->live || s->gen != gen)
        return NULL;
    return s;
}

fh_hslot_t *fh_ht_lookup(fh_htable_t *t, fh_handle_t h, uint32_t owner)
{
    fh_hslot_t *s = fh_ht_lookup_any(t, h);
    return (s != NULL && s->owner == owner) ? s : NULL;
}

void fh_ht_free(fh_htable_t *t, fh_hslot_t *s)
{
    assert(s->live);
    assert(t->live > 0);
    uint32_t idx = s->index;
    s->live = 0;
    if (++s->gen == 0)
        s->gen = 1;
    s->next_free = t->free_head;
    t->free_head = idx + 1;
    t->live--;
}

uint32_t fh_ht_free_owned(fh_htable_t *t, uint32_t owner)
{
    uint32_t n = 0;
    for (uint32_t idx = 0; idx < t->nchunks * FH_HT_CHUNK && t->live > 0; idx++) {
        fh_hslot_t *s = slot_at(t, idx);
        if (!s->live || s->owner != owner)
            continue;
        assert(s->ctr.pending == 0);
        fh_ht_free(t, s);
        n++;
    }
    return n;
}

uint32_t fh_ht_fail_peer(fh_htable_t *t, int peer, int status)
{
    uint32_t n = 0;
    for (uint32_t idx = 0; idx < t->nchunks * FH_HT_CHUNK; idx++) {
        fh_hslot_t *s = slot_at(t, idx);
        if (!s->live || !s->awaits_reply || s->peer != peer || s->ctr.pending != 1)
            continue;
        s->awaits_reply = 0;
        fh_ctr_complete(&s->ctr, status);
        n++;
    }
    return n;
}
