/*
 * query.c -- fh_query: what the runtime runs with, for its clients.
 *
 * Everything reported is fixed at fh_init and every string is static, so
 * the call takes no lock and is thread- and handler-safe.
 */
#include <assert.h>
#include <string.h>

#include "internal.h"

static const char *const segment_name[] = {
    [FH_SEGMENT_SEGMENTS] = "segments",
    [FH_SEGMENT_EVERYTHING] = "everything",
};

#define HEADER_BYTES (2 * sizeof(uint32_t))

int fh_query(fh_info_t *info)
{
    fh_clear_error();
    fh_rt_t *rt = fh_rt;
    if (rt == NULL || fh_rank() < 0)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_query: firehose is not initialized");
    if (info == NULL)
        return fh_set_error(FH_ERR_INVALID, "fh_query: NULL info");
    if (info->size < HEADER_BYTES)
        return fh_set_error(FH_ERR_INVALID, "fh_query: info->size %u is smaller than "
                            "the header (set it up with FH_INFO_INIT)", info->size);
    const fh_config_t *c = &rt->cfg;
    assert(c->segment_mode >= 0 && c->segment_mode <= FH_SEGMENT_EVERYTHING);
    size_t n = info->size < sizeof(fh_info_t) ? info->size : sizeof(fh_info_t);
    fh_info_t all = {
        .size = (uint32_t)n,
        .version = FH_INFO_VERSION,
        .conduit = rt->cops->name,
        .reg_strategy = rt->reg_ops->name,   /* the FH_REG_STRATEGY spelling */
        .segment_mode = segment_name[c->segment_mode],
        .paths = c->paths == FH_PATHS_SHARED ? "shared"
                 : c->paths == FH_PATHS_LAZY ? "lazy" : "independent",
        .bootstrap = rt->boot->ops->name,
        .rank = rt->rank,
        .nranks = rt->nranks,
        .npaths = rt->npaths,
        .any_address = c->segment_mode == FH_SEGMENT_EVERYTHING &&
                       (rt->reg_ops->caps & FH_REG_CAP_ANY_ADDRESS) != 0,
        .needs_local_mr = rt->limits.needs_local_mr != 0,
    };
    memcpy(info, &all, n);
    return FH_OK;
}
