/*
 * env.c -- implementation of env.h: the registry of client names, and the
 * scan of the environment for FH_* names nobody knows.
 */
#include "env.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* Set by a launcher, not tunables (bootstrap.h, fh_boot_open). */
static const char *const launcher_vars[] = {
    "FH_BOOT_ADDR", "FH_JOB_KEY", "FH_RANK", "FH_NRANKS",
};
/* Read outside the tables by programs shipped with firehose. */
static const char *const shipped_vars[] = {
    "FH_CAF_FC",   /* caf/caf (the compiler wrapper): caf.1, docs/caf.md */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static char registered[FH_ENV_MAX_PATTERNS][FH_ENV_MAX_PATTERN + 1];
static size_t nregistered;

int fh_env_pattern_check(const char *pat, char *err, size_t errlen)
{
    if (pat == NULL || pat[0] == '\0') {
        snprintf(err, errlen, "a NULL or empty name");
        return -1;
    }
    size_t len = strlen(pat);
    const char *star = strchr(pat, '*');
    if (strncmp(pat, "FH_", 3) != 0 || len > FH_ENV_MAX_PATTERN ||
        (star != NULL && star != pat + len - 1) || strchr(pat, '=') != NULL) {
        snprintf(err, errlen, "\"%.80s\" is not an FH_* name or prefix* of at most %d "
                 "bytes", pat, FH_ENV_MAX_PATTERN);
        return -1;
    }
    return 0;
}

static int registered_has(const char *pat)
{
    for (size_t i = 0; i < nregistered; i++)
        if (strcmp(registered[i], pat) == 0)
            return 1;
    return 0;
}

int fh_env_register_patterns(const char *const *pats, size_t n, char *err,
                             size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        if (fh_env_pattern_check(pats[i], err, errlen) != 0)
            return -1;
    pthread_mutex_lock(&reg_lock);
    size_t fresh = 0;
    for (size_t i = 0; i < n; i++)
        fresh += !registered_has(pats[i]);
    if (nregistered + fresh > FH_ENV_MAX_PATTERNS) {
        pthread_mutex_unlock(&reg_lock);
        snprintf(err, errlen, "more than %d names registered in all",
                 FH_ENV_MAX_PATTERNS);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (!registered_has(pats[i]))
            snprintf(registered[nregistered++], FH_ENV_MAX_PATTERN + 1, "%s", pats[i]);
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

/* name[0..namelen) against one pattern of plen bytes. */
static int matches(const char *name, size_t namelen, const char *pat, size_t plen)
{
    if (plen > 0 && pat[plen - 1] == '*')
        return namelen >= plen - 1 && strncmp(name, pat, plen - 1) == 0;
    return namelen == plen && strncmp(name, pat, plen) == 0;
}

static int in_list(const char *name, size_t namelen, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (matches(name, namelen, list[i], strlen(list[i])))
            return 1;
    return 0;
}

/* FH_ENV_KNOWN: words separated by spaces, commas or colons. */
static int in_known_list(const char *name, size_t namelen, const char *list)
{
    while (list != NULL && *list) {
        size_t skip = strspn(list, " ,:\t");
        list += skip;
        size_t w = strcspn(list, " ,:\t");
        if (w > 0 && matches(name, namelen, list, w))
            return 1;
        list += w;
    }
    return 0;
}

int fh_env_is_known(const char *name, size_t namelen,
                    const fh_cfg_table_ref_t *tabs, size_t ntabs,
                    const char *known_list)
{
    for (size_t t = 0; t < ntabs; t++)
        for (size_t i = 0; i < tabs[t].len; i++) {
            const char *n = tabs[t].table[i].name;
            if (strlen(n) == namelen && strncmp(n, name, namelen) == 0)
                return 1;
        }
    if (in_list(name, namelen, launcher_vars, sizeof launcher_vars / sizeof *launcher_vars) ||
        in_list(name, namelen, shipped_vars, sizeof shipped_vars / sizeof *shipped_vars) ||
        in_known_list(name, namelen, known_list))
        return 1;
    pthread_mutex_lock(&reg_lock);
    int found = 0;
    for (size_t i = 0; i < nregistered && !found; i++)
        found = matches(name, namelen, registered[i], strlen(registered[i]));
    pthread_mutex_unlock(&reg_lock);
    return found;
}

/* Edit distance, for "did you mean" on a misspelt variable. */
static size_t distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b);
    if (la > 64 || lb > 64)
        return (size_t)-1;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *fh_env_closest(const char *name, size_t namelen,
                           const fh_cfg_table_ref_t *tabs, size_t ntabs)
{
    const char *best = NULL;
    /* Suggest only close matches: 3 edits are too many for a short name
     * (FH_FOO is not FH_SHM). */
    size_t best_d = namelen >= 12 ? 4 : 3;
    for (size_t t = 0; t < ntabs; t++)
        for (size_t i = 0; i < tabs[t].len; i++) {
            size_t d = distance(name, namelen, tabs[t].table[i].name);
            if (d < best_d) {
                best_d = d;
                best = tabs[t].table[i].name;
            }
        }
    return best;
}

int fh_env_each_unknown(const fh_cfg_table_ref_t *tabs, size_t ntabs,
                        const char *known_list,
                        void (*report)(const char *name, size_t namelen,
                                       const char *hint, void *arg),
                        void *arg)
{
    int n = 0;
    for (char **ep = environ; ep != NULL && *ep != NULL; ep++) {
        const char *var = *ep;
        if (strncmp(var, "FH_", 3) != 0)
            continue;
        const char *eq = strchr(var, '=');
        size_t namelen = eq ? (size_t)(eq - var) : strlen(var);
        if (fh_env_is_known(var, namelen, tabs, ntabs, known_list))
            continue;
        report(var, namelen, fh_env_closest(var, namelen, tabs, ntabs), arg);
        n++;
    }
    return n;
}
