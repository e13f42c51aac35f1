/*
 * util/map.c -- insertion and deletion of the hit layer's private map.
 * See util/map.h.
 */
#include "map.h"

#include <assert.h>
#include <stdlib.h>

int reg_map_init(reg_map_t *m, uint32_t slots)
{
    assert(slots >= 4 && (slots & (slots - 1)) == 0);
    m->slot = calloc(slots, sizeof *m->slot);
    if (m->slot == NULL)
        return -1;
    m->mask = slots - 1;
    m->n = 0;
    unsigned bits = 0;
    while ((1u << bits) < slots)
        bits++;
    m->shift = 64 - bits;
    return 0;
}

void reg_map_fini(reg_map_t *m)
{
    free(m->slot);
    m->slot = NULL;
    m->n = 0;
}

int reg_map_put(reg_map_t *m, uint32_t peer, uint64_t bno, uint32_t val)
{
    assert(val != 0);
    if ((uint64_t)(m->n + 1) * 4 > (uint64_t)(m->mask + 1) * 3)
        return -1;
    uint32_t i = reg_map_home(m, peer, bno);
    while (m->slot[i].val != 0) {
        assert(!(m->slot[i].bno == bno && m->slot[i].peer == peer));
        i = (i + 1) & m->mask;
    }
    m->slot[i] = (reg_map_slot_t){.bno = bno, .peer = peer, .val = val};
    m->n++;
    return 0;
}

uint32_t reg_map_del(reg_map_t *m, uint32_t peer, uint64_t bno)
{
    uint32_t i = reg_map_home(m, peer, bno);
    for (;; i = (i + 1) & m->mask) {
        if (m->slot[i].val == 0)
            return 0;
        if (m->slot[i].bno == bno && m->slot[i].peer == peer)
            break;
    }
    uint32_t val = m->slot[i].val;
    /* Backward shift: move each later slot of the run into the hole if its
     * home does not lie cyclically in (hole, slot]. */
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & m->mask; m->slot[j].val != 0; j = (j + 1) & m->mask) {
        uint32_t home = reg_map_home(m, m->slot[j].peer, m->slot[j].bno);
        int stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            m->slot[hole] = m->slot[j];
            hole = j;
        }
    }
    m->slot[hole] = (reg_map_slot_t){0, 0, 0};
    m->n--;
    return val;
}
