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
 *
 * Rank names: every message that names a rank -- a peer or this one, in
 * the runtime, the conduits, the bootstrap and fhrun, and the prefix --
 * names rank r through FH_RANK_NAME as "<label> <r + first>": "rank 0" by
 * default, "image 1" for rank 0 of a coarray program -- set by
 * fh_set_rank_names (include/firehose.h) or FH_RANK_NAMES, which fhrun
 * reads too.  With the default names the prefix stays "firehose[<rank>]";
 * with others it is "firehose[<name>]".  tests/docs/rank_names.sh fails on
 * a message that prints "rank %d" itself.
 */
#ifndef FH_LOG_H
#define FH_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#define FH_PRINTF(a, b) __attribute__((format(printf, a, b)))

void fh_log_set_rank(int rank);
void fh_log_set_verbose(int level);

/* Sets the names: label is 1..FH_RANK_LABEL_MAX-1 letters, digits, '_' or
 * '-' starting with a letter; first is in 0..FH_RANK_FIRST_MAX.  Call before
 * the threads that log start (or the first message may use the old names).
 * Returns 0, or -1 and a reason in err when the names are not valid. */
#define FH_RANK_LABEL_MAX 16
#define FH_RANK_FIRST_MAX 1000000
int fh_log_set_names(const char *label, int first, char *err, size_t errlen);
/* The same from the text of FH_RANK_NAMES, "<label> <first>" or "<label>"
 * (first 0); NULL or "" keeps the default. */
int fh_log_set_names_spec(const char *spec, char *err, size_t errlen);
/* "<label> <rank + first>" into buf (at least FH_RANK_NAME_MAX bytes);
 * returns buf.  FH_RANK_NAME(r) gives it in a temporary for one statement,
 * e.g. fh_log_error("%s died", FH_RANK_NAME(r)). */
#define FH_RANK_NAME_MAX 40
const char *fh_rank_name(int rank, char *buf, size_t len);
/* True when the names are not the default ones. */
int fh_log_names_custom(void);
#define FH_RANK_NAME(r) fh_rank_name((r), (char[FH_RANK_NAME_MAX]){0}, FH_RANK_NAME_MAX)

void fh_log_error(const char *fmt, ...) FH_PRINTF(1, 2);
void fh_log_verbose(int level, const char *fmt, ...) FH_PRINTF(2, 3);
void fh_fatal(const char *fmt, ...) FH_PRINTF(1, 2) __attribute__((noreturn));
int  fh_set_error(int err, const char *fmt, ...) FH_PRINTF(2, 3);
/* fh_strerror(err) for a transfer's failure, except that with `everything`
 * (FH_SEGMENT=everything) FH_ERR_OUT_OF_SEGMENT says what the target
 * refused: fh_strerror's text is the segments mode's (error.c). */
const char *fh_xfer_strerror(int err, bool everything);
/* Empties this thread's record: every public call that can fail calls it on
 * entry, so fh_last_error() only ever describes the call just made. */
void fh_clear_error(void);
/* What this thread's fh_last_error() says, kept across code that may set or
 * clear it but must leave the caller's untouched: AM handlers, which run
 * inside whatever call polls (a handler's fh_token_source clears, a failing
 * call sets).  fh_error_stash copies only when there is text (errors are
 * rare); fh_error_unstash puts it back, or empties the record. */
typedef struct fh_error_stash {
    bool held;
    char text[512];
} fh_error_stash_t;
bool fh_error_stash(fh_error_stash_t *st);
void fh_error_unstash(const fh_error_stash_t *st);

#endif /* FH_LOG_H */
