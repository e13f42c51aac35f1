/*
 * ofi_config.c -- the ofi conduit's FH_* variables (fh_conduit_settings_t,
 * conduit.h).  Compiled without libfabric, so that fh_init checks them in
 * every build and tools/fhinfo documents them.
 */
#include <stddef.h>

#include "conduits/conduit.h"
#include "firehose/util/config.h"
#include "ofi_config.h"

_Static_assert(sizeof(ofi_settings_t) <= FH_CONDUIT_SETTINGS_MAX,
               "conduit.h: FH_CONDUIT_SETTINGS_MAX too small");

#define F(field) offsetof(ofi_settings_t, field)

static const fh_cfg_entry_t ofi_config_table[] = {
    {"FH_OFI_PROVIDER", FH_CFG_STRING, "net,tcp", NULL, F(provider), 1,
     "libfabric provider for the ofi conduit (net, tcp, shm, verbs, cxi, efa, ...), or a "
     "list separated by commas: the first that this libfabric offers is used, and every "
     "rank must have taken the same. Default net,tcp: net's message endpoints are the "
     "fastest TCP path measured (docs/performance.md, 'net is the default provider'), "
     "tcp where a libfabric has no net.", 0},
    {"FH_OFI_DOMAIN", FH_CFG_STRING, "", NULL, F(domain), 0,
     "libfabric domain (for tcp: the interface, e.g. eth0 or ib0) the endpoints listen on; "
     "an unknown name fails fh_init with the list of domains offered. Empty = loopback when "
     "every rank shares this host's network namespace and no interface is chosen "
     "(FI_TCP_IFACE, or FI_NET_IFACE for net), else the provider's first (docs/security.md).", 0},
    {"FH_OFI_ENDPOINT", FH_CFG_ENUM, "auto", "auto|msg|rdm", F(endpoint), 1,
     "msg: the conduit connects message endpoints itself and authenticates every "
     "connection with a secret only its two ranks hold; rdm: reliable-datagram "
     "endpoints, whose sender identity is the provider's. auto = msg when the "
     "provider offers message endpoints (tcp, verbs), else rdm (shm, efa, cxi).", 0},
    {"FH_OFI_TRUST_FABRIC", FH_CFG_BOOL, "0", NULL, F(trust_fabric), 1,
     "1 allows rdm endpoints on providers that name a sender by the address it "
     "claims (tcp, net, udp, sockets: anyone who can reach the job's ports could "
     "pass for a rank); only for a fabric no stranger can reach (docs/security.md).", 0},
    {"FH_OFI_RMA_TIMEOUT", FH_CFG_INT, "10", NULL, F(rma_timeout), 0,
     "s after which a put or get over a message endpoint (tcp) still incomplete makes its "
     "thread path probe the target on another connection: it fails (FH_ERR_TRANSPORT, rank "
     "and address named; the connection is closed and made again) only when the target "
     "then answered, polled for this long again and its connection moved nothing, since a "
     "provider that met a fault in the target's memory stops serving it without a word; a "
     "target that computes without calling the runtime is waited for. A service-path RMA "
     "(every thread under FH_PATHS=shared, the first one under FH_PATHS=lazy) has no second "
     "connection to probe on: it waits. 0 = wait for ever.",
     0},
};

const fh_conduit_settings_t fh_ofi_settings = {
    .conduit = "ofi",
    .table = ofi_config_table,
    .len = sizeof ofi_config_table / sizeof ofi_config_table[0],
    .size = sizeof(ofi_settings_t),
    .check = NULL,
};
