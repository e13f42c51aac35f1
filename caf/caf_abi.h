/*
 * caf_abi.h -- the interface gfortran 12 compiles coarray programs against
 * (`-fcoarray=lib`): the types and the `_gfortran_caf_*` entry points of
 * GCC 12's libgfortran/caf/libcaf.h, written down here for libcaf_firehose.
 *
 * Nothing in this file is a choice of ours: the layouts and signatures must
 * match what the compiler emits (a difference is silent memory corruption).
 * Where gfortran 12 emits a call, a comment says which statement produces it
 * and what the arguments mean; the implementations are in caf_*.c.
 *
 * Conventions of the ABI:
 *   - image indices are 1-based and relative to the current team; 0 means
 *     "this image" where a comment says so;
 *   - `stat` may be NULL (no STAT= given: an error must stop the program),
 *     `errmsg` may be NULL (no ERRMSG=); errmsg is a Fortran character of
 *     length errmsg_len, blank padded, not NUL-terminated;
 *   - a token is an opaque pointer the library owns (caf_token_t);
 *   - `offset` arguments are byte offsets from the start of the coarray the
 *     token names (a component, or an element of a coarray of derived type);
 *   - array descriptors: strides are in elements of dtype.elem_len bytes.
 */
#ifndef CAF_ABI_H
#define CAF_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------ gfortran's descriptor */

#define CAF_MAX_DIMENSIONS 15

/* dtype.type (libgfortran's BT_*). */
enum {
    CAF_BT_UNKNOWN = 0, CAF_BT_INTEGER, CAF_BT_LOGICAL, CAF_BT_REAL,
    CAF_BT_COMPLEX, CAF_BT_DERIVED, CAF_BT_CHARACTER, CAF_BT_CLASS,
    CAF_BT_PROCEDURE, CAF_BT_HOLLERITH, CAF_BT_VOID, CAF_BT_ASSUMED
};

typedef struct caf_dim {
    ptrdiff_t stride;   /* in elements */
    ptrdiff_t lbound;
    ptrdiff_t ubound;
} caf_dim_t;

typedef struct caf_dtype {
    size_t elem_len;    /* bytes of one element (character: len * kind) */
    int version;
    signed char rank;   /* 0 = scalar */
    signed char type;   /* CAF_BT_* */
    signed short attribute;
} caf_dtype_t;

typedef struct gfc_descriptor {
    void *base_addr;
    size_t offset;
    caf_dtype_t dtype;
    ptrdiff_t span;
    caf_dim_t dim[];    /* dtype.rank entries */
} gfc_descriptor_t;

/* A descriptor with room for every rank, for descriptors we build. */
typedef struct caf_desc_storage {
    gfc_descriptor_t d;
    caf_dim_t dims[CAF_MAX_DIMENSIONS];
} caf_desc_storage_t;

/* ------------------------------------------------------- library types */

typedef void *caf_token_t;
typedef void *caf_team_t;

/* Fortran 2008 STAT= values (ISO_FORTRAN_ENV). */
enum {
    CAF_STAT_UNLOCKED = 0,           /* sic: libgfortran's value in GCC 12 */
    CAF_STAT_LOCKED = 1,
    CAF_STAT_LOCKED_OTHER_IMAGE = 2,
    CAF_STAT_STOPPED_IMAGE = 6000,
    CAF_STAT_FAILED_IMAGE = 6001
};
/* gfortran's STAT_UNLOCKED_FAILED_IMAGE has no ABI constant in GCC 12; the
 * value follows the others in ISO_FORTRAN_ENV. */
#define CAF_STAT_UNLOCKED_FAILED_IMAGE 6002

typedef enum caf_register_t {
    CAF_REGTYPE_COARRAY_STATIC,      /* static coarray (at start-up) */
    CAF_REGTYPE_COARRAY_ALLOC,       /* ALLOCATE of an allocatable coarray */
    CAF_REGTYPE_LOCK_STATIC,         /* size = number of lock variables */
    CAF_REGTYPE_LOCK_ALLOC,
    CAF_REGTYPE_CRITICAL,            /* one per CRITICAL construct */
    CAF_REGTYPE_EVENT_STATIC,        /* size = number of event variables */
    CAF_REGTYPE_EVENT_ALLOC,
    CAF_REGTYPE_COARRAY_ALLOC_REGISTER_ONLY, /* token of an allocatable
                                                component, no memory yet */
    CAF_REGTYPE_COARRAY_ALLOC_ALLOCATE_ONLY  /* memory for such a token
                                                (not collective) */
} caf_register_t;

typedef enum caf_deregister_t {
    CAF_DEREGTYPE_COARRAY_DEREGISTER,      /* free memory and token */
    CAF_DEREGTYPE_COARRAY_DEALLOCATE_ONLY  /* free memory, keep the token */
} caf_deregister_t;

/* Vector subscripts of get/send/sendget (gfortran 12 passes NULL: it
 * compiles vector subscripts to the *_by_ref calls). */
typedef struct caf_vector_t {
    size_t nvec;
    union {
        struct { void *vector; int kind; } v;
        struct { ptrdiff_t lower_bound, upper_bound, stride; } triplet;
    } u;
} caf_vector_t;

/* References of the *_by_ref calls: a chain from the coarray the token
 * names to the data (components, arrays). */
typedef enum caf_ref_type_t {
    CAF_REF_COMPONENT,     /* u.c: component at offset; caf_token_offset
                              != 0 when it is allocatable/pointer */
    CAF_REF_ARRAY,         /* u.a: array with a descriptor */
    CAF_REF_STATIC_ARRAY   /* u.a: array without descriptor */
} caf_ref_type_t;

typedef enum caf_array_ref_t {
    CAF_ARR_REF_NONE = 0,  /* ends the dimensions */
    CAF_ARR_REF_VECTOR,    /* u.a.dim[i].v */
    CAF_ARR_REF_FULL,      /* (:) */
    CAF_ARR_REF_RANGE,     /* start:end:stride */
    CAF_ARR_REF_SINGLE,    /* start */
    CAF_ARR_REF_OPEN_END,  /* start: */
    CAF_ARR_REF_OPEN_START /* :end */
} caf_array_ref_t;

typedef struct caf_reference_t {
    struct caf_reference_t *next;
    int type;              /* caf_ref_type_t */
    size_t item_size;      /* bytes of one item referenced */
    union {
        struct {
            ptrdiff_t offset;
            ptrdiff_t caf_token_offset;
        } c;
        struct {
            unsigned char mode[CAF_MAX_DIMENSIONS]; /* caf_array_ref_t */
            int static_array_type;                  /* CAF_BT_* */
            union {
                struct { ptrdiff_t start, end, stride; } s;
                struct { void *vector; size_t nvec; int kind; } v;
            } dim[CAF_MAX_DIMENSIONS];
        } a;
    } u;
} caf_reference_t;

/* co_reduce's opr_flags. */
#define CAF_GFC_BYREF     (1 << 0)
#define CAF_GFC_HIDDENLEN (1 << 1)
#define CAF_GFC_ARG_VALUE (1 << 2)
#define CAF_GFC_ARG_DESC  (1 << 3)

/* -------------------------------------------------- the entry points */
/* Program start and end: init is called first thing in main, finalize at
 * the end of the main program (an implicit STOP). */
void _gfortran_caf_init(int *argc, char ***argv);
void _gfortran_caf_finalize(void);

/* this_image(): distance is 0 (the team argument is not passed).
 * num_images(): distance 0, failed -1 (all), 0 (not failed), 1 (failed). */
int _gfortran_caf_this_image(int distance);
int _gfortran_caf_num_images(int distance, int failed);

void _gfortran_caf_register(size_t size, caf_register_t type,
                            caf_token_t *token, gfc_descriptor_t *desc,
                            int *stat, char *errmsg, size_t errmsg_len);
void _gfortran_caf_deregister(caf_token_t *token, caf_deregister_t type,
                              int *stat, char *errmsg, size_t errmsg_len);

/* gfortran 12 passes these three statements' ERRMSG= as `char **` (the
 * address of a pointer to the variable), whatever the prototype says. */
void _gfortran_caf_sync_all(int *stat, char *errmsg, size_t errmsg_len);
void _gfortran_caf_sync_memory(int *stat, char *errmsg, size_t errmsg_len);
/* count -1 and images NULL: SYNC IMAGES (*). */
void _gfortran_caf_sync_images(int count, int images[], int *stat,
                               char *errmsg, size_t errmsg_len);

void _gfortran_caf_stop_numeric(int code, bool quiet)
    __attribute__((noreturn));
void _gfortran_caf_stop_str(const char *str, size_t len, bool quiet)
    __attribute__((noreturn));
void _gfortran_caf_error_stop_str(const char *str, size_t len, bool quiet)
    __attribute__((noreturn));
void _gfortran_caf_error_stop(int code, bool quiet) __attribute__((noreturn));
void _gfortran_caf_fail_image(void) __attribute__((noreturn));

void _gfortran_caf_co_broadcast(gfc_descriptor_t *a, int source_image,
                                int *stat, char *errmsg, size_t errmsg_len);
void _gfortran_caf_co_sum(gfc_descriptor_t *a, int result_image, int *stat,
                          char *errmsg, size_t errmsg_len);
void _gfortran_caf_co_min(gfc_descriptor_t *a, int result_image, int *stat,
                          char *errmsg, int a_len, size_t errmsg_len);
void _gfortran_caf_co_max(gfc_descriptor_t *a, int result_image, int *stat,
                          char *errmsg, int a_len, size_t errmsg_len);
void _gfortran_caf_co_reduce(gfc_descriptor_t *a, void *(*opr)(void *, void *),
                             int opr_flags, int result_image, int *stat,
                             char *errmsg, int a_len, size_t errmsg_len);

/* x(...)[image] = ... : dest describes the remote section (its base_addr is
 * this image's copy; the remote address is the token's memory + offset +
 * the section's element offsets). */
void _gfortran_caf_get(caf_token_t token, size_t offset, int image_index,
                       gfc_descriptor_t *src, caf_vector_t *src_vector,
                       gfc_descriptor_t *dest, int src_kind, int dst_kind,
                       bool may_require_tmp, int *stat);
void _gfortran_caf_send(caf_token_t token, size_t offset, int image_index,
                        gfc_descriptor_t *dest, caf_vector_t *dst_vector,
                        gfc_descriptor_t *src, int dst_kind, int src_kind,
                        bool may_require_tmp, int *stat);
void _gfortran_caf_sendget(caf_token_t dst_token, size_t dst_offset,
                           int dst_image_index, gfc_descriptor_t *dest,
                           caf_vector_t *dst_vector, caf_token_t src_token,
                           size_t src_offset, int src_image_index,
                           gfc_descriptor_t *src, caf_vector_t *src_vector,
                           int dst_kind, int src_kind, bool may_require_tmp);

void _gfortran_caf_get_by_ref(caf_token_t token, int image_index,
                              gfc_descriptor_t *dst, caf_reference_t *refs,
                              int dst_kind, int src_kind, bool may_require_tmp,
                              bool dst_reallocatable, int *stat, int src_type);
void _gfortran_caf_send_by_ref(caf_token_t token, int image_index,
                               gfc_descriptor_t *src, caf_reference_t *refs,
                               int dst_kind, int src_kind, bool may_require_tmp,
                               bool dst_reallocatable, int *stat, int dst_type);
void _gfortran_caf_sendget_by_ref(caf_token_t dst_token, int dst_image_index,
                                  caf_reference_t *dst_refs,
                                  caf_token_t src_token, int src_image_index,
                                  caf_reference_t *src_refs, int dst_kind,
                                  int src_kind, bool may_require_tmp,
                                  int *dst_stat, int *src_stat, int dst_type,
                                  int src_type);
int _gfortran_caf_is_present(caf_token_t token, int image_index,
                             caf_reference_t *refs);

/* Atomics: value/old/compare point to a local value of `kind` bytes of
 * `type` (CAF_BT_INTEGER or CAF_BT_LOGICAL); image_index 0 = this image. */
void _gfortran_caf_atomic_define(caf_token_t token, size_t offset,
                                 int image_index, void *value, int *stat,
                                 int type, int kind);
void _gfortran_caf_atomic_ref(caf_token_t token, size_t offset,
                              int image_index, void *value, int *stat,
                              int type, int kind);
void _gfortran_caf_atomic_cas(caf_token_t token, size_t offset,
                              int image_index, void *old, void *compare,
                              void *new_val, int *stat, int type, int kind);
/* op: GFC_CAF_ATOMIC_ADD 1, AND 2, OR 3, XOR 4 (gfortran 12's
 * -fdump-tree-original); old NULL = no fetch. */
void _gfortran_caf_atomic_op(int op, caf_token_t token, size_t offset,
                             int image_index, void *value, void *old,
                             int *stat, int type, int kind);

/* index: element of the lock/event array (0-based, in elements). */
void _gfortran_caf_lock(caf_token_t token, size_t index, int image_index,
                        int *acquired_lock, int *stat, char *errmsg,
                        size_t errmsg_len);
void _gfortran_caf_unlock(caf_token_t token, size_t index, int image_index,
                          int *stat, char *errmsg, size_t errmsg_len);
void _gfortran_caf_event_post(caf_token_t token, size_t index,
                              int image_index, int *stat, char *errmsg,
                              size_t errmsg_len);
/* EVENT WAIT waits on this image's event; until_count >= 1. */
void _gfortran_caf_event_wait(caf_token_t token, size_t index,
                              int until_count, int *stat, char *errmsg,
                              size_t errmsg_len);
void _gfortran_caf_event_query(caf_token_t token, size_t index,
                               int image_index, int *count, int *stat);

/* Teams (gfortran 12 passes no STAT= to these). */
void _gfortran_caf_form_team(int team_number, caf_team_t *team, int index);
void _gfortran_caf_change_team(caf_team_t *team, int coselector);
void _gfortran_caf_end_team(caf_team_t *team);
void _gfortran_caf_sync_team(caf_team_t *team, int unused);
int _gfortran_caf_team_number(caf_team_t *team);

int _gfortran_caf_image_status(int image, caf_team_t *team);
void _gfortran_caf_failed_images(gfc_descriptor_t *array, caf_team_t *team,
                                 int *kind);
void _gfortran_caf_stopped_images(gfc_descriptor_t *array, caf_team_t *team,
                                  int *kind);

void _gfortran_caf_random_init(bool repeatable, bool image_distinct);

#endif /* CAF_ABI_H */
