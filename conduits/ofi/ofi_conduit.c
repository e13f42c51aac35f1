/*
 * ofi_conduit.c -- libfabric conduit: open / close / connect / limits.
 *
 * One fabric + domain + AV (FI_AV_TABLE) per conduit; every path is its own
 * RDM endpoint with its own CQ (ofi_path.c).  The address of (rank, path) is
 * addrs[rank * npaths + path].
 *
 * Threading level (domain_attr->threading)
 *   We ask for FI_THREAD_COMPLETION first: the application serializes access
 *   to each completion queue and the endpoints bound to it, which is exactly
 *   what the runtime guarantees (one lock per path, and a path is one EP + one
 *   CQ bound only to that EP).  Domain-level objects (AV, MR registration)
 *   are not tied to one CQ and stay thread-safe in the provider.  If the
 *   provider does not offer FI_THREAD_COMPLETION, or if it needs
 *   FI_MR_ENDPOINT (then mr_reg binds registrations to the endpoints of all
 *   paths, i.e. touches endpoints owned by other threads), we fall back to
 *   FI_THREAD_SAFE.  Observed with libfabric 1.17: shm grants
 *   FI_THREAD_COMPLETION; tcp;ofi_rxm accepts the request but always returns
 *   (and runs with) FI_THREAD_SAFE, which we keep rather than forcing a level
 *   the provider did not grant.  The tcp domain's progress engine takes a
 *   mutex in any case, so tcp paths contend there inside libfabric.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ofi_internal.h"
#include "bootstrap.h"
#include "log.h"

#define OFI_API_VERSION FI_VERSION(1, 17)
#define OFI_MAX_MSG_CAP ((size_t)1 << 30)   /* 1 GiB */

int ofi_err_to_fh(int e)
{
    if (e < 0)
        e = -e;
    switch (e) {
    case FI_EAGAIN:
        return FH_ERR_AGAIN;
    case FI_ENOMEM:
        return FH_ERR_NO_MEMORY;
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ENETDOWN:
    case FI_ETIMEDOUT:
    case EPIPE:
    case FI_ESHUTDOWN:
        return FH_ERR_PEER_DEAD;
    default:
        return FH_ERR_TRANSPORT;
    }
}

#define OFI_QUEUE_DEPTH 256

static struct fi_info *ofi_hints(const fh_conduit_config_t *cfg,
                                 enum fi_threading threading)
{
    struct fi_info *h = fi_allocinfo();
    if (!h)
        return NULL;
    const char *prov = (cfg->provider && cfg->provider[0]) ? cfg->provider
                                                           : "tcp";
    h->caps = FI_MSG | FI_RMA | FI_MULTI_RECV;
    /* We always put a struct fi_context2 at the start of our contexts. */
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
                              FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                              FI_MR_ENDPOINT;
    h->domain_attr->threading = threading;
    h->domain_attr->av_type = FI_AV_TABLE;
    /* AM: messages from one path to one destination path arrive in order. */
    h->tx_attr->msg_order = FI_ORDER_SAS;
    h->rx_attr->msg_order = FI_ORDER_SAS;
    /* Queue depths: providers size their internal buffer pools from these
     * (tcp;ofi_rxm pre-allocates about 70 MB per endpoint at its defaults).
     * Our own credits bound what is in flight, so modest depths suffice. */
    h->tx_attr->size = OFI_QUEUE_DEPTH;
    h->rx_attr->size = OFI_QUEUE_DEPTH;
    h->fabric_attr->prov_name = strdup(prov);
    if (cfg->domain && cfg->domain[0])
        h->domain_attr->name = strdup(cfg->domain);
    return h;
}

static int ofi_getinfo(const fh_conduit_config_t *cfg, struct fi_info **out)
{
    static const enum fi_threading levels[] = {FI_THREAD_COMPLETION,
                                               FI_THREAD_SAFE};
    int ret = -FI_ENODATA;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        struct fi_info *h = ofi_hints(cfg, levels[i]);
        if (!h)
            return -FI_ENOMEM;
        struct fi_info *info = NULL;
        ret = fi_getinfo(OFI_API_VERSION, NULL, NULL, 0, h, &info);
        fi_freeinfo(h);
        if (ret)
            continue;
        if (levels[i] != FI_THREAD_SAFE &&
            (info->domain_attr->mr_mode & FI_MR_ENDPOINT)) {
            fi_freeinfo(info);     /* mr_reg would touch foreign EPs */
            continue;
        }
        /* Keep only the first (preferred) match. */
        struct fi_info *rest = info->next;
        info->next = NULL;
        if (rest)
            fi_freeinfo(rest);
        *out = info;
        return 0;
    }
    return ret;
}

static const char *ofi_threading_name(enum fi_threading t)
{
    switch (t) {
    case FI_THREAD_SAFE: return "FI_THREAD_SAFE";
    case FI_THREAD_FID: return "FI_THREAD_FID";
    case FI_THREAD_DOMAIN: return "FI_THREAD_DOMAIN";
    case FI_THREAD_COMPLETION: return "FI_THREAD_COMPLETION";
    case FI_THREAD_ENDPOINT: return "FI_THREAD_ENDPOINT";
    default: return "unspecified";
    }
}

static void ofi_close(struct fh_conduit *c);

static int ofi_open(const fh_conduit_config_t *cfg,
                    const fh_conduit_upcalls_t *up,
                    struct fh_conduit **out, fh_conduit_limits_t *limits)
{
    int ret;
    if (!cfg || !up || !out || !limits || cfg->npaths < 1 ||
        cfg->nranks < 1 || cfg->rank < 0 || cfg->rank >= cfg->nranks ||
        cfg->am_max_packet == 0 || !up->on_am || !up->on_complete)
        return fh_set_error(FH_ERR_INVALID, "ofi: invalid open arguments");

    struct fh_conduit *c = calloc(1, sizeof *c);
    if (!c)
        return FH_ERR_NO_MEMORY;
    c->cfg = *cfg;
    c->cfg.provider = NULL;   /* not owned; only used during open */
    c->cfg.domain = NULL;
    c->up = *up;
    c->paths = calloc((size_t)cfg->npaths, sizeof *c->paths);
    if (!c->paths) {
        free(c);
        return FH_ERR_NO_MEMORY;
    }

    ret = ofi_getinfo(cfg, &c->info);
    if (ret) {
        fh_log_error("ofi: no provider \"%s\"%s%s offers RDM endpoints with "
                     "FI_MSG|FI_RMA|FI_MULTI_RECV and send-after-send "
                     "ordering: %s",
                     (cfg->provider && cfg->provider[0]) ? cfg->provider
                                                         : "tcp",
                     (cfg->domain && cfg->domain[0]) ? " domain " : "",
                     (cfg->domain && cfg->domain[0]) ? cfg->domain : "",
                     fi_strerror(-ret));
        ofi_close(c);
        return FH_ERR_NOT_SUPPORTED;
    }
    struct fi_info *info = c->info;

    ret = fi_fabric(info->fabric_attr, &c->fabric, NULL);
    if (ret) {
        fh_log_error("ofi: fi_fabric: %s", fi_strerror(-ret));
        goto fail;
    }
    ret = fi_domain(c->fabric, info, &c->domain, NULL);
    if (ret) {
        fh_log_error("ofi: fi_domain: %s", fi_strerror(-ret));
        goto fail;
    }
    struct fi_av_attr av_attr = {
        .type = FI_AV_TABLE,
        .count = (size_t)cfg->nranks * (size_t)cfg->npaths,
    };
    ret = fi_av_open(c->domain, &av_attr, &c->av, NULL);
    if (ret) {
        fh_log_error("ofi: fi_av_open: %s", fi_strerror(-ret));
        goto fail;
    }

    c->mr_mode = info->domain_attr->mr_mode;
    /* FI_MR_BASIC (legacy) means VIRT_ADDR | PROV_KEY | ALLOCATED. */
    if (c->mr_mode & FI_MR_BASIC)
        c->mr_mode |= FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
    c->virt_addr = !!(c->mr_mode & FI_MR_VIRT_ADDR);
    c->prov_key = !!(c->mr_mode & FI_MR_PROV_KEY);
    c->mr_local = !!(c->mr_mode & FI_MR_LOCAL);
    c->mr_endpoint = !!(c->mr_mode & FI_MR_ENDPOINT);
    c->mr_key_size = info->domain_attr->mr_key_size;
    atomic_init(&c->next_key, 1);

    c->inject_size = info->tx_attr->inject_size;
    c->tx_size = info->tx_attr->size;
    c->rx_size = info->rx_attr->size;

    size_t max_msg = info->ep_attr->max_msg_size;
    if (max_msg == 0 || max_msg > OFI_MAX_MSG_CAP)
        max_msg = OFI_MAX_MSG_CAP;
    /* Our ordering header travels in front of every AM. */
    c->am_max_packet = cfg->am_max_packet < max_msg - OFI_AMH
                           ? cfg->am_max_packet : max_msg - OFI_AMH;

    memset(&c->limits, 0, sizeof c->limits);
    c->limits.max_msg = max_msg;
    c->limits.max_inject = c->inject_size;
    c->limits.am_max_packet = c->am_max_packet;
    c->limits.needs_local_mr = c->mr_local;
    c->limits.max_mr_count = info->domain_attr->mr_cnt;
    c->limits.max_mr_bytes = 0;
    snprintf(c->limits.description, sizeof c->limits.description,
             "ofi %s domain %s", info->fabric_attr->prov_name,
             info->domain_attr->name ? info->domain_attr->name : "?");
    *limits = c->limits;

    if (cfg->verbose >= 1) {
        char *mrs = fi_tostr(&info->domain_attr->mr_mode, FI_TYPE_MR_MODE);
        fh_log_verbose(1, "ofi: provider %s, fabric %s, domain %s",
                       info->fabric_attr->prov_name,
                       info->fabric_attr->name ? info->fabric_attr->name : "?",
                       info->domain_attr->name ? info->domain_attr->name : "?");
        fh_log_verbose(1, "ofi: mr_mode [%s], key size %zu, threading %s, "
                       "data progress %s",
                       mrs ? mrs : "?", c->mr_key_size,
                       ofi_threading_name(info->domain_attr->threading),
                       info->domain_attr->data_progress == FI_PROGRESS_AUTO
                           ? "auto" : "manual");
        fh_log_verbose(1, "ofi: inject %zu, max_msg %zu, am_max_packet %zu, "
                       "tx depth %zu, rx depth %zu, mr_cnt %zu",
                       c->inject_size, max_msg, c->am_max_packet, c->tx_size,
                       c->rx_size, (size_t)info->domain_attr->mr_cnt);
    }
    *out = c;
    return FH_OK;

fail:
    ofi_close(c);
    return FH_ERR_TRANSPORT;
}

static void ofi_close(struct fh_conduit *c)
{
    if (!c)
        return;
    if (c->paths) {
        for (int i = 0; i < c->cfg.npaths; i++)
            if (c->paths[i])
                ofi_path_destroy(c->paths[i]);
    }
    if (c->av)
        fi_close(&c->av->fid);
    if (c->domain)
        fi_close(&c->domain->fid);
    if (c->fabric)
        fi_close(&c->fabric->fid);
    if (c->info)
        fi_freeinfo(c->info);
    free(c->addrs);
    free(c->paths);
    free(c);
}

/* Collective.  Two allgathers: the longest endpoint name (names may differ
 * in length in principle), then every rank's npaths names padded to it. */
static int ofi_connect(struct fh_conduit *c, struct fh_boot *boot)
{
    const int np = c->cfg.npaths, nr = c->cfg.nranks;
    int ret;

    if (c->connected)
        return fh_set_error(FH_ERR_STATE, "ofi: connect called twice");
    if (!boot || boot->nranks != nr)
        return fh_set_error(FH_ERR_INVALID,
                            "ofi: bootstrap has %d ranks, conduit %d",
                            boot ? boot->nranks : -1, nr);
    for (int i = 0; i < np; i++)
        if (!c->paths[i])
            return fh_set_error(FH_ERR_STATE,
                                "ofi: connect before path %d was created", i);

    size_t maxlen = 0;
    for (int i = 0; i < np; i++) {
        char tmp[8];
        size_t len = sizeof tmp;
        ret = fi_getname(&c->paths[i]->ep->fid, tmp, &len);
        if (ret && ret != -FI_ETOOSMALL) {
            fh_log_error("ofi: fi_getname(path %d): %s", i, fi_strerror(-ret));
            return FH_ERR_TRANSPORT;
        }
        if (len > maxlen)
            maxlen = len;
    }

    uint64_t *lens = calloc((size_t)nr, sizeof *lens);
    if (!lens)
        return FH_ERR_NO_MEMORY;
    uint64_t mylen = maxlen;
    ret = boot->ops->allgather(boot, &mylen, lens, sizeof mylen);
    if (ret) {
        free(lens);
        fh_log_error("ofi: address-length allgather failed (%d)", ret);
        return FH_ERR_BOOTSTRAP;
    }
    size_t L = 0;
    for (int r = 0; r < nr; r++)
        if (lens[r] > L)
            L = (size_t)lens[r];
    free(lens);

    char *mine = calloc((size_t)np, L);
    char *all = calloc((size_t)nr * (size_t)np, L);
    c->addrs = calloc((size_t)nr * (size_t)np, sizeof *c->addrs);
    if (!mine || !all || !c->addrs) {
        free(mine);
        free(all);
        free(c->addrs);
        c->addrs = NULL;
        return FH_ERR_NO_MEMORY;
    }
    for (int i = 0; i < np; i++) {
        size_t len = L;
        ret = fi_getname(&c->paths[i]->ep->fid, mine + (size_t)i * L, &len);
        if (ret) {
            fh_log_error("ofi: fi_getname(path %d): %s", i, fi_strerror(-ret));
            ret = FH_ERR_TRANSPORT;
            goto out;
        }
    }
    ret = boot->ops->allgather(boot, mine, all, (size_t)np * L);
    if (ret) {
        fh_log_error("ofi: address allgather failed (%d)", ret);
        ret = FH_ERR_BOOTSTRAP;
        goto out;
    }
    /* One insert per address: padded entries are not necessarily packed
     * the way a multi-address fi_av_insert expects. */
    for (size_t k = 0; k < (size_t)nr * (size_t)np; k++) {
        int n = fi_av_insert(c->av, all + k * L, 1, &c->addrs[k], 0, NULL);
        if (n != 1) {
            fh_log_error("ofi: fi_av_insert(rank %zu path %zu): %s",
                         k / (size_t)np, k % (size_t)np,
                         n < 0 ? fi_strerror(-n) : "address rejected");
            ret = FH_ERR_TRANSPORT;
            goto out;
        }
    }
    for (int i = 0; i < np; i++)
        c->paths[i]->addrs = c->addrs;
    c->connected = 1;
    fh_log_verbose(2, "ofi: connected %d ranks x %d paths (address %zu bytes)",
                   nr, np, L);
    ret = FH_OK;
out:
    free(mine);
    free(all);
    return ret;
}

static int ofi_path_create_op(struct fh_conduit *c, const fh_path_attr_t *attr,
                              struct fh_cpath **out)
{
    return ofi_path_create(c, attr, out);
}

const fh_conduit_ops_t fh_conduit_ofi = {
    .name = "ofi",
    .open = ofi_open,
    .close = ofi_close,
    .path_create = ofi_path_create_op,
    .path_destroy = ofi_path_destroy,
    .connect = ofi_connect,
    .mr_reg = ofi_mr_reg,
    .mr_dereg = ofi_mr_dereg,
    .put = ofi_put,
    .get = ofi_get,
    .am_send = ofi_am_send,
    .poll = ofi_poll,
};
