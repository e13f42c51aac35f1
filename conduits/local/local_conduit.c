/*
 * local_conduit.c -- the conduit of a job whose ranks are all on this host
 * and reach each other through the node path (FH_SHM=auto): it carries
 * nothing.  FH_CONDUIT=local (which libcaf_firehose asks for unless told
 * otherwise) chooses it when every rank of the job is on this host in one
 * node group; elsewhere fh_init makes auto's choice (firehose/init.c).
 *
 * Why it exists: a network conduit costs every rank its start-up -- the
 * ofi conduit loads libfabric 1.17, whose constructor sleeps ~0.1-0.2 s and
 * whose verbs provider reads /proc/kallsyms twice (docs/design.md, "What a
 * rank costs") -- and its endpoints, buffers and connections, for traffic
 * that on one host never uses them: puts, gets and atomics between members
 * are loads and stores (route.c), AMs go through the members' rings
 * (node_am.c), barriers through the node group (node_coll.c).  fh_init
 * checks after the node path is up that every other rank is a member whose
 * inbox is attached (else it fails: nothing else could reach that rank).
 *
 * What is left for a conduit to do: paths exist (the runtime's per-thread
 * state hangs off them) and poll to nothing; registrations are records
 * without a key (no peer reads them: a strategy registers only for the
 * network route); put, get and am_send are refused with FH_ERR_INVALID
 * naming the rank -- the one way to get there is memory outside every
 * segment under FH_SEGMENT=everything when the kernel refuses cross-memory
 * attach (route.c), which needs a network conduit (FH_CONDUIT=auto).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conduits/conduit.h"
#include "conduits/util/cu.h"
#include "firehose/util/log.h"

struct fh_conduit {
    fh_conduit_config_t cfg;
};

/* Paths and registrations are records only: nothing travels on a path,
 * and a registration needs no key (the node path maps the memory). */
struct fh_cpath {
    int index;
};

struct fh_mr {
    void *addr;
};

static int local_probe(const fh_conduit_config_t *cfg, char *why, size_t whylen)
{
    if (cfg == NULL || !cfg->all_local) {
        snprintf(why, whylen, "ranks on other hosts need a network conduit");
        return 0;
    }
    snprintf(why, whylen, "every rank on this host: the node path carries everything");
    return 1;
}

static int local_open(const fh_conduit_config_t *cfg, const fh_conduit_upcalls_t *up,
                      struct fh_conduit **out, fh_conduit_limits_t *limits)
{
    int rc = cu_check_open("local", cfg, up, out, limits);
    if (rc != FH_OK)
        return rc;
    if (!cfg->all_local)
        return fh_set_error(FH_ERR_NOT_SUPPORTED, "local: ranks on other hosts need a "
                            "network conduit (FH_CONDUIT=auto)");
    struct fh_conduit *c = calloc(1, sizeof *c);
    if (c == NULL)
        return FH_ERR_NO_MEMORY;
    c->cfg = *cfg;
    c->cfg.settings = NULL;
    memset(limits, 0, sizeof *limits);
    limits->max_msg = (size_t)1 << 40;
    limits->am_max_packet = cfg->am_max_packet;   /* the node rings' slot size */
    limits->lazy_paths = 1;
    snprintf(limits->description, sizeof limits->description,
             "local (no network: the node path)");
    *out = c;
    return FH_OK;
}

static void local_close(struct fh_conduit *c)
{
    free(c);
}

static int local_path_create(struct fh_conduit *c, const fh_path_attr_t *attr,
                             struct fh_cpath **out)
{
    if (c == NULL || attr == NULL || out == NULL || attr->index < 0 ||
        attr->index >= c->cfg.npaths)
        return fh_set_error(FH_ERR_INVALID, "local: invalid path arguments");
    struct fh_cpath *p = calloc(1, sizeof *p);
    if (p == NULL)
        return FH_ERR_NO_MEMORY;
    p->index = attr->index;
    *out = p;
    return FH_OK;
}

static void local_path_destroy(struct fh_cpath *p)
{
    free(p);
}

static int local_connect(struct fh_conduit *c, struct fh_boot *boot)
{
    (void)boot;
    return c == NULL ? FH_ERR_INVALID : FH_OK;
}

static int local_path_connect(struct fh_cpath *p)
{
    return p == NULL ? FH_ERR_INVALID : FH_OK;
}

static int local_mr_reg(struct fh_conduit *c, void *addr, size_t len, unsigned access,
                        struct fh_mr **mr, fh_rkey_t *rkey)
{
    int rc = cu_check_mr_reg("local", c, mr, addr, len, access);
    if (rc != FH_OK)
        return rc;
    struct fh_mr *m = calloc(1, sizeof *m);
    if (m == NULL)
        return fh_set_error(FH_ERR_NO_MEMORY, "local: out of memory");
    m->addr = addr;
    *mr = m;
    if (rkey != NULL)
        *rkey = (fh_rkey_t){.key = 0, .base = (uint64_t)(uintptr_t)addr};
    return FH_OK;
}

static int local_mr_dereg(struct fh_conduit *c, struct fh_mr *mr)
{
    (void)c;
    if (mr == NULL)
        return FH_ERR_INVALID;
    free(mr);
    return FH_OK;
}

static int unreachable(const char *what, int rank)
{
    return fh_set_error(FH_ERR_INVALID, "local: %s to %s: only the node path "
                        "reaches it, and it does not serve this (memory outside the "
                        "segments without cross-memory attach?): set FH_CONDUIT=auto",
                        what, FH_RANK_NAME(rank));
}

static int local_put(struct fh_cpath *p, int rank, int rpath, const void *src, size_t len,
                     struct fh_mr *lmr, uint64_t raddr, const fh_rkey_t *rkey,
                     void *op_ctx, unsigned flags)
{
    (void)p, (void)rpath, (void)src, (void)len, (void)lmr, (void)raddr, (void)rkey;
    (void)op_ctx, (void)flags;
    return unreachable("put", rank);
}

static int local_get(struct fh_cpath *p, int rank, int rpath, void *dst, size_t len,
                     struct fh_mr *lmr, uint64_t raddr, const fh_rkey_t *rkey,
                     void *op_ctx, unsigned flags)
{
    (void)p, (void)rpath, (void)dst, (void)len, (void)lmr, (void)raddr, (void)rkey;
    (void)op_ctx, (void)flags;
    return unreachable("get", rank);
}

static int local_am_send(struct fh_cpath *p, int rank, int rpath, const void *hdr,
                         size_t hdr_len, const void *payload, size_t len)
{
    (void)p, (void)rpath, (void)hdr, (void)hdr_len, (void)payload, (void)len;
    return unreachable("active message", rank);
}

static int local_poll(struct fh_cpath *p, int max)
{
    (void)p, (void)max;
    return 0;
}

const fh_conduit_ops_t fh_conduit_local = {
    .name = "local",
    .settings = NULL,
    .probe = local_probe,
    .open = local_open,
    .close = local_close,
    .path_create = local_path_create,
    .path_destroy = local_path_destroy,
    .connect = local_connect,
    .path_connect = local_path_connect,
    .mr_reg = local_mr_reg,
    .mr_dereg = local_mr_dereg,
    .put = local_put,
    .get = local_get,
    .am_send = local_am_send,
    .poll = local_poll,
    .wait_fds = NULL,
};
