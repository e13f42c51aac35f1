/*
 * test_point.h -- points where a test build (-DFH_TEST_HOOKS, only in
 * check_LTLIBRARIES libfhrt_hooks.la) calls fh_test_hook to widen a race
 * window on purpose.  Normal builds compile them out.  The hook variable is
 * defined by the runtime (init.c) in that build only.
 */
#ifndef FH_TEST_POINT_H
#define FH_TEST_POINT_H

#include <stddef.h>

enum fh_test_point {
    FH_TP_MM_PUBLISH,         /* firehose_revoke.c: sync stored revoking, not yet seen */
    FH_TP_MM_WAIT_COUNT,      /* firehose_revoke.c: the wait loop took its count */
    FH_TP_FINALIZE_DRAINED,   /* init.c: fh_finalize's barrier and drain are over,
                                 nothing is released yet */
    FH_TP_HIT_REVOKED,        /* firehose_hit.c: a hit was taken on a firehose
                                 whose REVOKE found it busy -- must never happen */
    FH_TP_BULK_POSTED         /* firehose_xfer.c: a bulk chunk took its share of
                                 the path's budget; fh_test_bulk_bytes holds the
                                 path's bulk bytes in flight now */
};
#ifdef FH_TEST_HOOKS
extern void (*fh_test_hook)(enum fh_test_point where);
extern size_t fh_test_bulk_bytes;     /* see FH_TP_BULK_POSTED (path lock) */
#define FH_TEST_POINT(where) do {                       \
        void (*fh_th_)(enum fh_test_point) = fh_test_hook; \
        if (fh_th_ != NULL)                             \
            fh_th_(where);                              \
    } while (0)
#else
#define FH_TEST_POINT(where) ((void)0)
#endif

#endif /* FH_TEST_POINT_H */
