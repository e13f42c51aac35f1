/*
 * fhc_list.h -- the registration cache's intrusive doubly linked lists.
 *
 * An object that can be on a list embeds one fhc_link_t for each list it
 * can be on; an fhc_list_t points at the links of its first and last
 * objects, and fhc_entry() turns a link back into the object around it.
 * Every operation is O(1) and allocates nothing.  A zeroed list is empty and
 * a zeroed link is on no list, so calloc'd objects need no initialisation.
 *
 * Invariants, asserted by every operation:
 *   head == NULL  <=>  tail == NULL;  head->prev == NULL;  tail->next == NULL
 *   a link is on at most one list at a time: it is pushed only when it is
 *   on none (prev == next == NULL and not a list's only member), unlinked
 *   only from the list it is on, and unlinking clears it.
 */
#ifndef FHC_LIST_H
#define FHC_LIST_H

#include <assert.h>
#include <stddef.h>

typedef struct fhc_link {
    struct fhc_link *prev, *next;
} fhc_link_t;

typedef struct fhc_list {
    fhc_link_t *head, *tail;
} fhc_list_t;

/* The object of type `type` whose member `member` is link l; NULL for NULL
 * (so `fhc_entry(list.head, ...)` is the first object or NULL). */
#define fhc_entry(l, type, member) \
    ((type *)fhc_entry_at((l), offsetof(type, member)))

static inline void *fhc_entry_at(fhc_link_t *l, size_t off)
{
    return l ? (void *)((char *)l - off) : NULL;
}

static inline void fhc_list_assert_ends(const fhc_list_t *list)
{
    assert((list->head == NULL) == (list->tail == NULL));
    assert(!list->head || !list->head->prev);
    assert(!list->tail || !list->tail->next);
    (void)list;
}

/* l is on no list (as far as can be told without knowing every list). */
static inline void fhc_link_assert_free(const fhc_list_t *list, const fhc_link_t *l)
{
    assert(!l->prev && !l->next && list->head != l);
    (void)list;
    (void)l;
}

/* Links l, on no list, between neighbours prev and next of this list
 * (NULL prev: at the head; NULL next: at the tail). */
static inline void fhc_list_insert(fhc_list_t *list, fhc_link_t *prev,
                                   fhc_link_t *next, fhc_link_t *l)
{
    fhc_list_assert_ends(list);
    fhc_link_assert_free(list, l);
    assert(prev ? prev->next == next : list->head == next);
    assert(next ? next->prev == prev : list->tail == prev);
    l->prev = prev;
    l->next = next;
    if (prev)
        prev->next = l;
    else
        list->head = l;
    if (next)
        next->prev = l;
    else
        list->tail = l;
}

static inline void fhc_list_push_head(fhc_list_t *list, fhc_link_t *l)
{
    fhc_list_insert(list, NULL, list->head, l);
}

static inline void fhc_list_push_tail(fhc_list_t *list, fhc_link_t *l)
{
    fhc_list_insert(list, list->tail, NULL, l);
}

/* Removes l, which must be on this list. */
static inline void fhc_list_unlink(fhc_list_t *list, fhc_link_t *l)
{
    fhc_list_assert_ends(list);
    assert(l->prev ? l->prev->next == l : list->head == l);
    assert(l->next ? l->next->prev == l : list->tail == l);
    if (l->prev)
        l->prev->next = l->next;
    else
        list->head = l->next;
    if (l->next)
        l->next->prev = l->prev;
    else
        list->tail = l->prev;
    l->prev = l->next = NULL;
}

#endif /* FHC_LIST_H */
