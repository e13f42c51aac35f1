/*
 * env.h -- which FH_* names may be in the environment, and which are
 * misspellings.
 *
 * A variable nobody reads is silently ignored, so FH_REG_STRATEGEY=bounce
 * would run the default.  An FH_* name is "known" when it is in one of the
 * configuration tables (config.h, the conduits' own), set by a launcher
 * (FH_BOOT_ADDR, FH_JOB_KEY, FH_RANK, FH_NRANKS), read by a program shipped
 * with firehose outside the tables (FH_CAF_FC: the caf compiler wrapper),
 * listed in FH_ENV_KNOWN, or declared by a client library through
 * fh_env_register (include/firehose.h).  fh_init warns about every other
 * name (firehose/env_check.c); `fhinfo --check-env` rejects it.
 *
 * Patterns (FH_ENV_KNOWN's words, fh_env_register's names): a full name, or
 * a prefix followed by '*' ("FH_MYLIB_*").
 * Thread-safe: the registry has a lock; the rest reads only its arguments
 * and the environment.
 */
#ifndef FH_ENV_H
#define FH_ENV_H

#include <stddef.h>

#include "config.h"

/* Room for registered patterns (fh_env_register), and their longest. */
#define FH_ENV_MAX_PATTERNS 64
#define FH_ENV_MAX_PATTERN  63

typedef struct fh_cfg_table_ref {
    const fh_cfg_entry_t *table;
    size_t len;
} fh_cfg_table_ref_t;

/* Checks one pattern (see above): 0, or -1 with the reason in err. */
int fh_env_pattern_check(const char *pat, char *err, size_t errlen);

/* Adds copies of pats[0..n) to the registry; all or none: 0, or -1 with
 * the reason in err (a bad pattern, or more than FH_ENV_MAX_PATTERNS in
 * all).  A pattern already registered is not added twice. */
int fh_env_register_patterns(const char *const *pats, size_t n, char *err,
                             size_t errlen);

/* Whether name[0..namelen) is known (above); tabs[0..ntabs) are the
 * tables, known_list FH_ENV_KNOWN's value (may be NULL). */
int fh_env_is_known(const char *name, size_t namelen,
                    const fh_cfg_table_ref_t *tabs, size_t ntabs,
                    const char *known_list);

/* The table name closest to name (edit distance under 4), or NULL. */
const char *fh_env_closest(const char *name, size_t namelen,
                           const fh_cfg_table_ref_t *tabs, size_t ntabs);

/* Calls report(name, namelen, hint, arg) for each unknown FH_* variable of
 * the environment (each name once: the environment has each once), hint
 * the closest table name or NULL.  Returns how many. */
int fh_env_each_unknown(const fh_cfg_table_ref_t *tabs, size_t ntabs,
                        const char *known_list,
                        void (*report)(const char *name, size_t namelen,
                                       const char *hint, void *arg),
                        void *arg);

#endif /* FH_ENV_H */
