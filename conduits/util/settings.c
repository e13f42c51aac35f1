/*
 * settings.c -- every conduit's FH_* settings, and how one is loaded.
 * See fh_conduit_settings_t in conduit.h.
 */
#include "conduits/conduit.h"
#include "firehose/util/config.h"

const fh_conduit_settings_t *const fh_conduit_settings_all[FH_NCONDUITS] = {
    &fh_ofi_settings,
    &fh_ibv_settings,
};

int fh_conduit_settings_load(const fh_conduit_settings_t *s, void *out,
                             char *err, size_t errlen)
{
    int rc = fh_config_load_table(s->table, s->len, out, s->size, err, errlen);
    if (rc == FH_OK && s->check != NULL)
        rc = s->check(out, err, errlen);
    return rc;
}
