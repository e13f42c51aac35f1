/*
 * ofi_conduit.c -- libfabric conduit: open / close / connect / limits.
 *
 * Two endpoint modes (FH_OFI_ENDPOINT):
 *   msg  the conduit connects FI_EP_MSG endpoints itself and authenticates
 *        every connection (ofi_cm.c, ofi_auth.h): the default wherever the
 *        provider offers message endpoints (tcp, verbs);
 *   rdm  one FI_EP_RDM endpoint per path and an AV (FI_AV_TABLE), the
 *        address of (rank, path) at addrs[rank * npaths + path]: for
 *        providers with reliable datagrams only (shm, efa, cxi), whose
 *        sender identity is the provider's.  Providers that build that
 *        identity from an address the peer announces (tcp;ofi_rxm, net,
 *        udp, sockets) are refused in rdm mode unless FH_OFI_TRUST_FABRIC=1
 *        (docs/security.md).
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
 *
 * Provider (FH_OFI_PROVIDER): one name, or a list separated by commas tried
 * in order, the first that offers what we need winning.  The default,
 * "net,tcp", is the order bench/providers.sh measured (docs/performance.md,
 * "net is the default provider"): net's message endpoints carry the same
 * authenticated connections over TCP sockets with 0.76-0.85 of tcp's
 * small-message and barrier times, and at par in bandwidth (libfabric 1.17's tcp provider
 * writes a byte to its completion queue's wait object for every
 * completion, and reads it back; net has no such signal without a
 * progress thread).  Where a list resolves, the ranks compare what they
 * chose (ofi_agree_provider): a job whose hosts differ ends in fh_init
 * naming the rank, never with connections that cannot understand each
 * other.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>

#include "ofi_config.h"
#include "ofi_internal.h"
#include "firehose/boot/bootstrap.h"
#include "firehose/util/log.h"
#include "conduits/util/cu.h"

#define OFI_API_VERSION FI_VERSION(1, 17)
#define OFI_MAX_MSG_CAP ((size_t)1 << 30)   /* 1 GiB */

int ofi_random(void *buf, size_t len)
{
    char *b = buf;
    while (len) {
        ssize_t n = getrandom(b, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return fh_set_error(FH_ERR_TRANSPORT, "ofi: getrandom: %s",
                                strerror(errno));
        }
        b += n;
        len -= (size_t)n;
    }
    return FH_OK;
}

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

/* The FH_OFI_* settings (ofi_config.c): the runtime's, already loaded, or
 * (cfg->settings NULL: the self-tests) loaded into *own from the
 * environment through the same table.  NULL after fh_set_error. */
static const ofi_settings_t *ofi_settings(const fh_conduit_config_t *cfg,
                                          ofi_settings_t *own)
{
    if (cfg->settings != NULL)
        return cfg->settings;
    char err[256];
    if (fh_conduit_settings_load(&fh_ofi_settings, own, err, sizeof err)) {
        fh_set_error(FH_ERR_CONFIG, "ofi: %s", err);
        return NULL;
    }
    return own;
}

#define OFI_DEFAULT_PROVIDERS "net,tcp"
#define OFI_PROV_NAME_MAX     64

/* FH_OFI_PROVIDER as set: one provider or a list (see the header). */
static const char *ofi_provider(const ofi_settings_t *s)
{
    return (s->provider && s->provider[0]) ? s->provider : OFI_DEFAULT_PROVIDERS;
}

static int ofi_provider_is_list(const ofi_settings_t *s)
{
    return strchr(ofi_provider(s), ',') != NULL;
}

/* The k-th name of the list into buf; 0 when there is none (or it does not
 * fit: a name that long is no provider's). */
static int ofi_provider_nth(const ofi_settings_t *s, int k, char *buf, size_t len)
{
    const char *p = ofi_provider(s);
    for (; k > 0 && p != NULL; k--) {
        p = strchr(p, ',');
        if (p != NULL)
            p++;
    }
    if (p == NULL)
        return 0;
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= len)
        return 0;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 1;
}

static struct fi_info *ofi_hints(const ofi_settings_t *s, const char *prov,
                                 enum fi_threading threading, int msg)
{
    struct fi_info *h = fi_allocinfo();
    if (!h)
        return NULL;
    /* We always put a struct fi_context2 at the start of our contexts. */
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->domain_attr->threading = threading;
    if (msg) {
        /* The sender is the connection (ofi_cm.c).  No FI_MR_ENDPOINT: a
         * registration would have to be bound to every connection. */
        h->caps = FI_MSG | FI_RMA;
        h->ep_attr->type = FI_EP_MSG;
        h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
                                  FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    } else {
        /* FI_SOURCE: every receive completion names the sender's AV entry,
         * the only sender identity we believe (ofi_poll.c). */
        h->caps = FI_MSG | FI_RMA | FI_MULTI_RECV | FI_SOURCE;
        h->ep_attr->type = FI_EP_RDM;
        h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
                                  FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                  FI_MR_ENDPOINT;
        h->domain_attr->av_type = FI_AV_TABLE;
    }
    /* AM: messages from one path to one destination path arrive in order. */
    h->tx_attr->msg_order = FI_ORDER_SAS;
    h->rx_attr->msg_order = FI_ORDER_SAS;
    /* Queue depths: providers size their internal buffer pools from these
     * (tcp;ofi_rxm pre-allocates about 70 MB per endpoint at its defaults).
     * Our own credits bound what is in flight, so modest depths suffice. */
    h->tx_attr->size = OFI_QUEUE_DEPTH;
    h->rx_attr->size = OFI_QUEUE_DEPTH;
    h->fabric_attr->prov_name = strdup(prov);
    if (s->domain && s->domain[0])
        h->domain_attr->name = strdup(s->domain);
    return h;
}

static int ofi_is_loopback(const struct fi_info *i)
{
    if (!i->src_addr)
        return 0;
    if (i->addr_format == FI_SOCKADDR_IN &&
        i->src_addrlen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *a = i->src_addr;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (i->addr_format == FI_SOCKADDR_IN6 &&
        i->src_addrlen >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *a = i->src_addr;
        return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
    }
    return 0;
}

/* The interface the user chose in libfabric's own variable: FI_TCP_IFACE
 * for tcp; for net FI_NET_IFACE, else FI_TCP_IFACE (both run over TCP
 * sockets, and a user who steered the old default steers the new one). */
static const char *ofi_iface_env(const char *prov)
{
    const char *v = NULL;
    if (strcmp(prov, "net") == 0)
        v = getenv("FI_NET_IFACE");
    if ((v == NULL || !v[0]) && (strcmp(prov, "net") == 0 || strncmp(prov, "tcp", 3) == 0))
        v = getenv("FI_TCP_IFACE");
    return v != NULL && v[0] ? v : NULL;
}

/* Which of the provider's answers we take:
 *   FH_OFI_DOMAIN set   the first whose domain has that name (providers do
 *                       not all filter on hints->domain_attr->name:
 *                       tcp;ofi_rxm 1.17 ignores it), else none;
 *   an interface chosen (ofi_iface_env) the first whose domain has its
 *                       name, else the provider's first (tcp filters by
 *                       FI_TCP_IFACE itself);
 *   all ranks local     the first listening on a loopback address, when the
 *                       provider offers one: nothing of the job is
 *                       reachable from another host (docs/security.md);
 *   otherwise           the provider's first. */
static struct fi_info *ofi_choose(const ofi_settings_t *s, const char *prov,
                                  int all_local, struct fi_info *list)
{
    if (s->domain && s->domain[0]) {
        for (struct fi_info *i = list; i; i = i->next)
            if (i->domain_attr->name && strcmp(i->domain_attr->name, s->domain) == 0)
                return i;
        return NULL;
    }
    const char *iface = ofi_iface_env(prov);
    if (iface != NULL) {
        for (struct fi_info *i = list; i; i = i->next)
            if (i->domain_attr->name && strcmp(i->domain_attr->name, iface) == 0)
                return i;
        return list;
    }
    if (all_local)
        for (struct fi_info *i = list; i; i = i->next)
            if (ofi_is_loopback(i))
                return i;
    return list;
}

/* The domains a provider offers, for the error message of a wrong
 * FH_OFI_DOMAIN. */
static void ofi_domain_names(const struct fi_info *list, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (const struct fi_info *i = list; i && off + 1 < len; i = i->next) {
        const char *n = i->domain_attr->name ? i->domain_attr->name : "?";
        if (strstr(buf, n))
            continue;      /* one line per name is enough (rough, for a message) */
        int w = snprintf(buf + off, len - off, "%s%s", off ? ", " : "", n);
        if (w < 0)
            break;
        off += (size_t)w;
    }
}

/* Providers whose RDM endpoints name a sender by an address the sender
 * announces (rxm and rxd over sockets, and the sockets-based ones): a
 * stranger who can reach the job's ports can pass for a rank. */
static int ofi_rdm_identity_claimed(const char *prov)
{
    return strstr(prov, "ofi_rxm") || strstr(prov, "ofi_rxd") ||
           strcmp(prov, "net") == 0 || strcmp(prov, "sockets") == 0 ||
           strcmp(prov, "tcp") == 0 || strcmp(prov, "udp") == 0;
}

/* Why the last ofi_getinfo_mode of this thread found no domain named
 * FH_OFI_DOMAIN ("" otherwise), for ofi_no_provider: the provider exists,
 * so "no such provider" would mislead. */
static _Thread_local char ofi_domain_why[400];

static int ofi_getinfo_mode(const ofi_settings_t *s, const char *prov,
                            int all_local, int msg, struct fi_info **out)
{
    static const enum fi_threading levels[] = {FI_THREAD_COMPLETION,
                                               FI_THREAD_SAFE};
    ofi_domain_why[0] = '\0';
    int ret = -FI_ENODATA;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        struct fi_info *h = ofi_hints(s, prov, levels[i], msg);
        if (!h)
            return -FI_ENOMEM;
        /* The domain is chosen below, among all the provider offers. */
        free(h->domain_attr->name);
        h->domain_attr->name = NULL;
        struct fi_info *list = NULL;
        ret = fi_getinfo(OFI_API_VERSION, NULL, NULL, 0, h, &list);
        fi_freeinfo(h);
        if (ret)
            continue;
        struct fi_info *pick = ofi_choose(s, prov, all_local, list);
        if (!pick) {
            char names[256];
            ofi_domain_names(list, names, sizeof names);
            snprintf(ofi_domain_why, sizeof ofi_domain_why,
                     "FH_OFI_DOMAIN=%s: provider %s has no such domain (it offers: %s)",
                     s->domain, list->fabric_attr->prov_name, names);
            fi_freeinfo(list);
            return -FI_EADDRNOTAVAIL;     /* no other mode helps */
        }
        if (levels[i] != FI_THREAD_SAFE &&
            (pick->domain_attr->mr_mode & FI_MR_ENDPOINT)) {
            fi_freeinfo(list);     /* mr_reg would touch foreign EPs */
            continue;
        }
        *out = fi_dupinfo(pick);
        fi_freeinfo(list);
        return *out ? 0 : -FI_ENOMEM;
    }
    return ret;
}

/* The endpoint mode FH_OFI_ENDPOINT asks for (auto: msg when the provider
 * has message endpoints), and rdm's identity rule.  -FI_EACCES: rdm on a
 * provider whose identity is claimed, without FH_OFI_TRUST_FABRIC. */
static int ofi_getinfo_prov(const ofi_settings_t *s, const char *prov,
                            int all_local, struct fi_info **out)
{
    int ret = -FI_ENODATA;
    if (s->endpoint != OFI_EPC_RDM) {
        ret = ofi_getinfo_mode(s, prov, all_local, 1, out);
        if (ret != -FI_ENODATA || s->endpoint == OFI_EPC_MSG)
            return ret;
    }
    ret = ofi_getinfo_mode(s, prov, all_local, 0, out);
    if (ret == 0 && !s->trust_fabric &&
        ofi_rdm_identity_claimed((*out)->fabric_attr->prov_name)) {
        fi_freeinfo(*out);
        *out = NULL;
        return -FI_EACCES;
    }
    return ret;
}

/* The first provider of FH_OFI_PROVIDER's list that offers what we need.
 * When none does, the reason kept is the first one's that is not "no such
 * provider" (a wrong FH_OFI_DOMAIN, an rdm refusal), else -FI_ENODATA. */
static int ofi_getinfo(const ofi_settings_t *s, int all_local,
                       struct fi_info **out)
{
    char prov[OFI_PROV_NAME_MAX], why[sizeof ofi_domain_why] = "";
    int first = -FI_ENODATA;
    for (int k = 0; ofi_provider_nth(s, k, prov, sizeof prov); k++) {
        int ret = ofi_getinfo_prov(s, prov, all_local, out);
        if (ret == 0)
            return 0;
        if (first == -FI_ENODATA && ret != -FI_ENODATA) {
            first = ret;
            snprintf(why, sizeof why, "%s", ofi_domain_why);
        }
    }
    snprintf(ofi_domain_why, sizeof ofi_domain_why, "%s", why);
    return first;
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

/* Why FH_OFI_PROVIDER (and FH_OFI_DOMAIN) gave nothing usable: logged, and
 * in why when given (probe), else in fh_last_error (open). */
static void ofi_no_provider(const ofi_settings_t *s, int ret, char *why,
                            size_t whylen)
{
    char msg[600];
    if (ret == -FI_EADDRNOTAVAIL && ofi_domain_why[0])
        snprintf(msg, sizeof msg, "%s", ofi_domain_why);
    else if (ret == -FI_EACCES)
        snprintf(msg, sizeof msg, "FH_OFI_PROVIDER=%s FH_OFI_ENDPOINT=rdm: this "
                 "provider names a sender by the address the sender announces, so "
                 "anyone who can reach the job's ports could pass for a rank; use "
                 "FH_OFI_ENDPOINT=msg (authenticated connections), or set "
                 "FH_OFI_TRUST_FABRIC=1 on a network no stranger can reach",
                 ofi_provider(s));
    else
        snprintf(msg, sizeof msg, "FH_OFI_PROVIDER=%s%s%s: %s "
                 "offers neither message endpoints with FI_MSG|FI_RMA nor RDM "
                 "endpoints with FI_MSG|FI_RMA|FI_MULTI_RECV and send-after-send "
                 "ordering%s: %s", ofi_provider(s),
                 (s->domain && s->domain[0]) ? " FH_OFI_DOMAIN=" : "",
                 (s->domain && s->domain[0]) ? s->domain : "",
                 ofi_provider_is_list(s) ? "none of these providers exists or"
                                         : "no such provider, or it",
                 s->endpoint == OFI_EPC_MSG ? " (FH_OFI_ENDPOINT=msg)"
                 : s->endpoint == OFI_EPC_RDM ? " (FH_OFI_ENDPOINT=rdm)" : "",
                 fi_strerror(-ret));
    if (why != NULL) {
        snprintf(why, whylen, "%s", msg);
        return;
    }
    fh_log_error("ofi: %s", msg);
    fh_set_error(FH_ERR_NOT_SUPPORTED, "ofi: %s", msg);
}

/* Usable when FH_OFI_PROVIDER (in FH_OFI_DOMAIN) offers what we need
 * (fhinfo --conduits asks; FH_CONDUIT=auto does not: ofi is its fallback).
 * Asks fi_getinfo only: nothing is opened. */
static int ofi_probe(const fh_conduit_config_t *cfg, char *why, size_t whylen)
{
    ofi_settings_t own;
    const ofi_settings_t *s = ofi_settings(cfg, &own);
    if (s == NULL) {
        snprintf(why, whylen, "%s", fh_last_error());
        return 0;
    }
    if (!fh_ofi_dl_load(why, whylen))
        return 0;
    struct fi_info *info = NULL;
    int ret = ofi_getinfo(s, cfg->all_local, &info);
    if (ret) {
        ofi_no_provider(s, ret, why, whylen);
        return 0;
    }
    snprintf(why, whylen, "provider %s, domain %s, %s endpoints",
             info->fabric_attr->prov_name,
             info->domain_attr->name ? info->domain_attr->name : "?",
             info->ep_attr->type == FI_EP_MSG ? "authenticated message" : "RDM");
    fi_freeinfo(info);
    return 1;
}

static int ofi_open(const fh_conduit_config_t *cfg,
                    const fh_conduit_upcalls_t *up,
                    struct fh_conduit **out, fh_conduit_limits_t *limits)
{
    int ret = cu_check_open("ofi", cfg, up, out, limits);
    if (ret)
        return ret;

    struct fh_conduit *c = calloc(1, sizeof *c);
    if (!c)
        return FH_ERR_NO_MEMORY;
    pthread_mutex_init(&c->key_lock, NULL);
    c->eq_fd = -1;
    c->cfg = *cfg;
    c->cfg.settings = NULL;   /* not owned; only used during open */
    c->up = *up;
    c->paths = calloc((size_t)cfg->npaths, sizeof *c->paths);
    if (!c->paths) {
        free(c);
        return FH_ERR_NO_MEMORY;
    }

    ofi_settings_t own;
    const ofi_settings_t *s = ofi_settings(cfg, &own);
    if (s == NULL) {
        ofi_close(c);
        return FH_ERR_CONFIG;
    }
    char lwhy[256];
    if (!fh_ofi_dl_load(lwhy, sizeof lwhy)) {
        fh_log_error("ofi: %s", lwhy);
        fh_set_error(FH_ERR_NOT_SUPPORTED, "ofi: %s", lwhy);
        ofi_close(c);
        return FH_ERR_NOT_SUPPORTED;
    }
    ret = ofi_getinfo(s, cfg->all_local, &c->info);
    if (ret) {
        ofi_no_provider(s, ret, NULL, 0);
        ofi_close(c);
        return FH_ERR_NOT_SUPPORTED;
    }
    struct fi_info *info = c->info;
    c->prov_listed = ofi_provider_is_list(s);

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
    c->msg = info->ep_attr->type == FI_EP_MSG;
    c->rma_timeout = c->msg ? (double)s->rma_timeout : 0.0;
    /* libfabric 1.17's net: its fi_trywait returns 0 without resetting
     * the signal a completion or an event leaves on the CQ's or EQ's wait
     * descriptor, which then stays ready for ever (a long-idle wait would
     * poll(2) in a loop: tests/integ/idle_sleep.sh).  On a wait set we can
     * reset it ourselves (ofi_wait_fds). */
    if (strcmp(info->fabric_attr->prov_name, "net") == 0) {
        struct fi_wait_attr wa = {.wait_obj = FI_WAIT_FD};
        c->reset_waits = fi_wait_open(c->fabric, &wa, &c->ws) == 0;
    }
    if (c->msg) {
        ret = ofi_cm_open(c);
        if (ret) {
            ofi_close(c);
            return ret;
        }
        goto opened;
    }
    struct fi_av_attr av_attr = {
        .type = FI_AV_TABLE,
        .count = (size_t)cfg->nranks * (size_t)cfg->npaths,
    };
    ret = fi_av_open(c->domain, &av_attr, &c->av, NULL);
    if (ret) {
        /* libfabric's shm provider holds at most 256 peers (SMR_MAX_PEERS)
         * and refuses a larger table with -FI_ENOSYS: say so, and how to
         * need fewer addresses. */
        int shm = strcmp(info->fabric_attr->prov_name, "shm") == 0;
        fh_set_error(FH_ERR_TRANSPORT, "ofi: fi_av_open for %zu addresses (%d ranks x %d "
                     "paths): %s%s", av_attr.count, cfg->nranks, cfg->npaths,
                     fi_strerror(-ret), shm ? "; the shm provider takes at most 256: set "
                     "FH_PATHS=shared or a smaller FH_MAX_THREADS (paths = FH_MAX_THREADS + "
                     "1), or FH_OFI_PROVIDER=tcp" : "");
        goto fail;
    }
opened:

    c->mr_mode = info->domain_attr->mr_mode;
    /* FI_MR_BASIC (legacy) means VIRT_ADDR | PROV_KEY | ALLOCATED. */
    if (c->mr_mode & FI_MR_BASIC)
        c->mr_mode |= FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
    c->virt_addr = !!(c->mr_mode & FI_MR_VIRT_ADDR);
    c->prov_key = !!(c->mr_mode & FI_MR_PROV_KEY);
    c->mr_local = !!(c->mr_mode & FI_MR_LOCAL);
    c->mr_endpoint = !!(c->mr_mode & FI_MR_ENDPOINT);
    c->mr_key_size = info->domain_attr->mr_key_size;
    /* rdm: the token every AM to us carries (ofi_rx.h); msg: the connection
     * is the proof, and the token is 0. */
    if (!c->msg && ofi_random(&c->token, sizeof c->token) != FH_OK) {
        ofi_close(c);
        return FH_ERR_TRANSPORT;
    }

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
    /* Providers whose NIC DMAs into registered memory ask for registered
     * local buffers (FI_MR_LOCAL) or for memory backed by pages at
     * registration (FI_MR_ALLOCATED) -- verbs, efa, psm3 -- and pin.  The
     * software ones (tcp, shm, udp) ask for neither: they copy through the
     * virtual address and pin nothing. */
    c->limits.reg_pins = !!(c->mr_mode & (FI_MR_LOCAL | FI_MR_ALLOCATED));
    /* MSG: a thread path connects to every service path when it is first
     * needed (ofi_cm.c); RDM: every path's address is in the one exchange
     * of connect. */
    c->limits.lazy_paths = c->msg;
    snprintf(c->limits.description, sizeof c->limits.description,
             "ofi %s domain %s (%s)", info->fabric_attr->prov_name,
             info->domain_attr->name ? info->domain_attr->name : "?",
             c->msg ? "msg" : "rdm");
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
    ofi_cm_close(c);     /* after the paths: their connections use the EQ */
    if (c->av)
        fi_close(&c->av->fid);
    if (c->domain)
        fi_close(&c->domain->fid);
    if (c->ws)
        fi_close(&c->ws->fid);      /* after the EQ and CQs on it */
    if (c->fabric)
        fi_close(&c->fabric->fid);
    if (c->info)
        fi_freeinfo(c->info);
    pthread_mutex_destroy(&c->key_lock);
    free(c->tokens);
    free(c->addrs);
    free(c->paths);
    free(c);
}

/* Collective.  Two allgathers: the longest endpoint name (names may differ
 * in length in principle), then every rank's npaths names padded to it,
 * followed by its token (struct ofi_amh).  The bootstrap is private to the
 * job (fhrun's authenticated socket, the PMIx server), so only job members
 * learn the tokens. */
/* Where FH_OFI_PROVIDER is a list, every rank must have taken the same
 * one of it: one allgather of the names, and an error naming the first
 * rank that differs (hosts with different libfabrics). */
static int ofi_agree_provider(struct fh_conduit *c, struct fh_boot *boot)
{
    const int nr = c->cfg.nranks;
    char mine[OFI_PROV_NAME_MAX] = {0};
    snprintf(mine, sizeof mine, "%s", c->info->fabric_attr->prov_name);
    char *all = calloc((size_t)nr, sizeof mine);
    if (all == NULL)
        return FH_ERR_NO_MEMORY;
    int ret = boot->ops->allgather(boot, mine, all, sizeof mine);
    if (ret) {
        free(all);
        fh_log_error("ofi: provider allgather failed (%d)", ret);
        return FH_ERR_BOOTSTRAP;
    }
    ret = FH_OK;
    for (int r = 0; r < nr && ret == FH_OK; r++) {
        char *theirs = all + (size_t)r * sizeof mine;
        theirs[sizeof mine - 1] = '\0';
        if (strcmp(theirs, mine) != 0)
            ret = fh_set_error(FH_ERR_CONFIG,
                               "ofi: FH_OFI_PROVIDER's list gave provider %s on %s "
                               "and %s here: their libfabrics differ; set "
                               "FH_OFI_PROVIDER to one provider every host has",
                               theirs, FH_RANK_NAME(r), mine);
    }
    free(all);
    return ret;
}

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
    /* MSG: paths 0..k exist (the rest come later, ofi_cm_path_connect);
     * RDM: all of them. */
    for (int i = 0, gap = 0; i < np; i++) {
        if (c->paths[i] && gap)
            return fh_set_error(FH_ERR_STATE, "ofi: connect with path %d but not path %d",
                                i, i - 1);
        gap |= !c->paths[i];
        if (!c->paths[i] && (i == 0 || !c->msg))
            return fh_set_error(FH_ERR_STATE,
                                "ofi: connect before path %d was created", i);
    }
    if (c->prov_listed && (ret = ofi_agree_provider(c, boot)) != FH_OK)
        return ret;
    if (c->msg) {
        c->tokens = calloc((size_t)nr, sizeof *c->tokens);   /* all 0 */
        if (!c->tokens)
            return FH_ERR_NO_MEMORY;
        for (int i = 0; i < np && c->paths[i]; i++)
            c->paths[i]->tokens = c->tokens;
        return ofi_cm_connect(c, boot);
    }

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

    const size_t R = (size_t)np * L + sizeof(uint64_t);   /* one rank's part */
    char *mine = calloc(1, R);
    char *all = calloc((size_t)nr, R);
    c->addrs = calloc((size_t)nr * (size_t)np, sizeof *c->addrs);
    c->tokens = calloc((size_t)nr, sizeof *c->tokens);
    if (!mine || !all || !c->addrs || !c->tokens) {
        free(mine);
        free(all);
        free(c->addrs);
        free(c->tokens);
        c->addrs = NULL;
        c->tokens = NULL;
        return FH_ERR_NO_MEMORY;
    }
    memcpy(mine + (size_t)np * L, &c->token, sizeof c->token);
    for (int i = 0; i < np; i++) {
        size_t len = L;
        ret = fi_getname(&c->paths[i]->ep->fid, mine + (size_t)i * L, &len);
        if (ret) {
            fh_log_error("ofi: fi_getname(path %d): %s", i, fi_strerror(-ret));
            ret = FH_ERR_TRANSPORT;
            goto out;
        }
    }
    ret = boot->ops->allgather(boot, mine, all, R);
    if (ret) {
        fh_log_error("ofi: address allgather failed (%d)", ret);
        ret = FH_ERR_BOOTSTRAP;
        goto out;
    }
    /* One insert per address: padded entries are not necessarily packed
     * the way a multi-address fi_av_insert expects. */
    for (size_t k = 0; k < (size_t)nr * (size_t)np; k++) {
        const char *name = all + (k / (size_t)np) * R + (k % (size_t)np) * L;
        int n = fi_av_insert(c->av, name, 1, &c->addrs[k], 0, NULL);
        if (n != 1) {
            fh_log_error("ofi: fi_av_insert(%s path %zu): %s",
                         FH_RANK_NAME((int)(k / (size_t)np)), k % (size_t)np,
                         n < 0 ? fi_strerror(-n) : "address rejected");
            ret = FH_ERR_TRANSPORT;
            goto out;
        }
        /* FI_AV_TABLE hands out 0, 1, 2, ... in insertion order; receive
         * completions name their source by this index (ofi_poll.c). */
        if (c->addrs[k] != (fi_addr_t)k) {
            fh_log_error("ofi: provider %s numbered AV entry %zu as %llu "
                         "(FI_AV_TABLE promises %zu)",
                         c->info->fabric_attr->prov_name, k,
                         (unsigned long long)c->addrs[k], k);
            ret = FH_ERR_TRANSPORT;
            goto out;
        }
    }
    for (int r = 0; r < nr; r++)
        memcpy(&c->tokens[r], all + (size_t)r * R + (size_t)np * L,
               sizeof c->tokens[r]);
    for (int i = 0; i < np; i++) {
        c->paths[i]->addrs = c->addrs;
        c->paths[i]->tokens = c->tokens;
    }
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
    .settings = &fh_ofi_settings,
    .probe = ofi_probe,
    .open = ofi_open,
    .close = ofi_close,
    .path_create = ofi_path_create_op,
    .path_destroy = ofi_path_destroy,
    .connect = ofi_connect,
    .path_connect = ofi_cm_path_connect,
    .mr_reg = ofi_mr_reg,
    .mr_dereg = ofi_mr_dereg,
    .put = ofi_put,
    .get = ofi_get,
    .am_send = ofi_am_send,
    .poll = ofi_poll,
    .wait_fds = ofi_wait_fds,
};
