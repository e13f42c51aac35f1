/*
 * mem.c -- the memory of a path: page-aligned buffers and the size of the
 * send-slot pool.  See cu.h.
 */
#include "cu.h"

#include <assert.h>
#include <stdlib.h>

void *cu_alloc_pages(size_t len)
{
    void *m = NULL;
    if (posix_memalign(&m, CU_PAGE, len ? len : 1))
        return NULL;
    return m;
}

size_t cu_send_slots(size_t slot_size)
{
    assert(slot_size > 0);
    size_t n = CU_SLOT_BYTES / slot_size;
    if (n < CU_SLOTS_MIN)
        n = CU_SLOTS_MIN;
    if (n > CU_SLOTS_MAX)
        n = CU_SLOTS_MAX;
    return n;
}
