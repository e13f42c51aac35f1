/*
 * reg.c -- the table of registration strategies (reg.h).
 */
#include <assert.h>
#include <stddef.h>

#include "firehose/util/config.h"
#include "reg.h"

fh_core_t *fh_reg_core;

void fh_reg_bind(fh_core_t *core)
{
    assert(core == NULL || core->svc != NULL);
    fh_reg_core = core;
}

static const fh_reg_ops_t *const tables[] = {
    [FH_REG_PIN_EVERYTHING]   = &fh_reg_pin_everything,
    [FH_REG_FIREHOSE]         = &fh_reg_firehose,
    [FH_REG_RENDEZVOUS]       = &fh_reg_rendezvous,
    [FH_REG_RENDEZVOUS_CACHE] = &fh_reg_rendezvous_cache,
    [FH_REG_BOUNCE]           = &fh_reg_bounce,
};
#define NTABLES (sizeof tables / sizeof tables[0])

const fh_reg_ops_t *fh_reg_pick(int strategy)
{
    /* config.c accepts only the values above. */
    assert(strategy >= 0 && (size_t)strategy < NTABLES && tables[strategy] != NULL);
    return tables[strategy];
}

void fh_reg_register_all_handlers(void)
{
    for (size_t i = 0; i < NTABLES; i++)
        if (tables[i] != NULL && tables[i]->handlers != NULL)
            tables[i]->handlers();
}
