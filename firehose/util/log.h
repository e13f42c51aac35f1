/*
 * log.h -- diagnostics shared by the runtime, the bootstrap and conduits.
 *
 * Every message is prefixed "firehose[<rank>]: " (rank once known, else
 * "firehose[?]") and written to stderr in one write(2), so lines of
 * different ranks and threads do not interleave mid-line.
 *
 *   fh_log_error    always printed.
 *   fh_log_verbose  printed when FH_VERBOSE >= level.
 *   fh_fatal        printed, then the process exits with status 1 (the
 *                   launcher tears the job down).  For broken invariants of
 *                   the environment (not for user argument errors).
 *   fh_set_error    records the text returned by fh_last_error() for this
 *                   thread and returns err, so validation reads
 *                   `return fh_set_error(FH_ERR_RANK, "fh_put: rank %d ...", r);`
 *   fh_clear_error  empties that record (at the entry of public calls).
 */
#ifndef FH_LOG_H
#define FH_LOG_H

#include <stdarg.h>

#define FH_PRINTF(a, b) __attribute__((format(printf, a, b)))

void fh_log_set_rank(int rank);
void fh_log_set_verbose(int level);

void fh_log_error(const char *fmt, ...) FH_PRINTF(1, 2);
void fh_log_verbose(int level, const char *fmt, ...) FH_PRINTF(2, 3);
void fh_fatal(const char *fmt, ...) FH_PRINTF(1, 2) __attribute__((noreturn));
int  fh_set_error(int err, const char *fmt, ...) FH_PRINTF(2, 3);
/* Empties this thread's record: every public call that can fail calls it on
 * entry, so fh_last_error() only ever describes the call just made. */
void fh_clear_error(void);

#endif /* FH_LOG_H */
