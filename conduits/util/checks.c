/*
 * checks.c -- the argument checks every conduit op makes.  See cu.h.
 */
#include "cu.h"

#include <stdio.h>

#include "firehose.h"
#include "firehose/util/log.h"

int cu_check_open(const char *name, const fh_conduit_config_t *cfg,
                  const fh_conduit_upcalls_t *up, const void *out,
                  const fh_conduit_limits_t *limits)
{
    if (!cfg || !up || !out || !limits || cfg->npaths < 1 ||
        cfg->nranks < 1 || cfg->rank < 0 || cfg->rank >= cfg->nranks ||
        cfg->am_max_packet == 0 || !up->on_am || !up->on_drop ||
        !up->on_complete)
        return fh_set_error(FH_ERR_INVALID, "%s: invalid open arguments", name);
    return FH_OK;
}

int cu_check_path_create(const char *name, const fh_conduit_config_t *cfg,
                         struct fh_cpath *const *paths, int connected,
                         const fh_path_attr_t *attr, const void *out)
{
    if (!cfg || !paths || !attr || !out || attr->index < 0 ||
        attr->index >= cfg->npaths)
        return fh_set_error(FH_ERR_INVALID, "%s: path index %d out of [0, %d)",
                            name, attr ? attr->index : -1, cfg ? cfg->npaths : 0);
    if (paths[attr->index] != NULL)
        return fh_set_error(FH_ERR_STATE, "%s: path %d exists", name, attr->index);
    if (connected)
        return fh_set_error(FH_ERR_STATE, "%s: path created after connect", name);
    return FH_OK;
}

int cu_check_mr_reg(const char *name, const void *c, const void *out,
                    const void *addr, size_t len, unsigned access)
{
    if (!c || !out || (!addr && len) ||
        (access & ~(unsigned)(FH_MR_LOCAL | FH_MR_REMOTE_READ |
                              FH_MR_REMOTE_WRITE)))
        return fh_set_error(FH_ERR_INVALID, "%s: mr_reg: bad arguments", name);
    return FH_OK;
}

int cu_check_dest(const char *name, const char *what,
                  const fh_conduit_config_t *cfg, int connected,
                  int rank, int rpath)
{
    if (rank < 0 || rank >= cfg->nranks || rpath < 0 || rpath >= cfg->npaths)
        return fh_set_error(FH_ERR_RANK, "%s: %s to (%d, %d)", name, what, rank,
                            rpath);
    if (!connected)
        return fh_set_error(FH_ERR_STATE, "%s: %s before connect", name, what);
    return FH_OK;
}

int cu_check_rkey(const char *name, const char *what, const fh_rkey_t *rkey)
{
    if (!rkey)
        return fh_set_error(FH_ERR_INVALID, "%s: %s without rkey", name, what);
    return FH_OK;
}

int cu_check_am_size(const char *name, size_t hdr_len, size_t len,
                     size_t am_max_packet)
{
    const size_t total = hdr_len + len;
    if (total > am_max_packet || total < hdr_len)
        return fh_set_error(FH_ERR_TOO_BIG,
                            "%s: am_send of %zu bytes over am_max_packet %zu",
                            name, total, am_max_packet);
    return FH_OK;
}

int cu_boot_failed(const char *name, const char *what)
{
    char why[460];
    snprintf(why, sizeof why, "%s", fh_last_error());
    return fh_set_error(FH_ERR_BOOTSTRAP, "%s: %s allgather failed%s%s", name, what,
                        why[0] ? ": " : "", why);
}
