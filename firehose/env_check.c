/*
 * env_check.c -- fh_env_register, and fh_init's warning about FH_* variables
 * nobody reads (the names and patterns: util/env.h).
 */
#include <stdio.h>

#include "internal.h"
#include "firehose/util/env.h"

int fh_env_register(const char *const *names, size_t n)
{
    fh_clear_error();
    if (atomic_load_explicit(&fh_rt_state, memory_order_acquire) == FH_RT_DOWN)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_env_register: firehose was finalized");
    if (names == NULL && n > 0)
        return fh_set_error(FH_ERR_INVALID, "fh_env_register: NULL names with n = %zu", n);
    char err[160];
    if (n > FH_ENV_MAX_PATTERNS)
        return fh_set_error(FH_ERR_LIMIT, "fh_env_register: %zu names, at most %d in all",
                            n, FH_ENV_MAX_PATTERNS);
    for (size_t i = 0; i < n; i++)
        if (fh_env_pattern_check(names[i], err, sizeof err) != 0)
            return fh_set_error(FH_ERR_INVALID, "fh_env_register: names[%zu]: %s", i, err);
    if (fh_env_register_patterns(names, n, err, sizeof err) != 0)
        return fh_set_error(FH_ERR_LIMIT, "fh_env_register: %s", err);
    return FH_OK;
}

static void warn_unknown(const char *name, size_t namelen, const char *hint, void *arg)
{
    (void)arg;
    if (hint != NULL)
        fh_log_error("%.*s is not a firehose variable (did you mean %s?): ignored; "
                     "`fhinfo` lists them, FH_ENV_KNOWN or fh_env_register declares "
                     "a library's own", (int)namelen, name, hint);
    else
        fh_log_error("%.*s is not a firehose variable: ignored; `fhinfo` lists them, "
                     "FH_ENV_KNOWN or fh_env_register declares a library's own",
                     (int)namelen, name);
}

int fh_env_check(const fh_config_t *cfg)
{
    fh_cfg_table_ref_t tabs[1 + FH_NCONDUITS];
    tabs[0] = (fh_cfg_table_ref_t){fh_config_table, fh_config_table_len};
    for (int i = 0; i < FH_NCONDUITS; i++)
        tabs[1 + i] = (fh_cfg_table_ref_t){fh_conduit_settings_all[i]->table,
                                           fh_conduit_settings_all[i]->len};
    return fh_env_each_unknown(tabs, 1 + FH_NCONDUITS, cfg->env_known, warn_unknown, NULL);
}
