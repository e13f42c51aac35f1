/*
 * ofi_config.h -- the ofi conduit's own FH_* variables (ofi_config.c), as
 * fh_conduit_settings_load fills them.  Needs no libfabric header.
 */
#ifndef FH_OFI_CONFIG_H
#define FH_OFI_CONFIG_H

typedef struct ofi_settings {
    const char *provider;     /* FH_OFI_PROVIDER ("tcp", "shm", ...) */
    const char *domain;       /* FH_OFI_DOMAIN, "" = first usable (a loopback
                                 one when all ranks are local) */
    int endpoint;             /* FH_OFI_ENDPOINT: enum ofi_endpoint_choice */
    int trust_fabric;         /* FH_OFI_TRUST_FABRIC */
    long rma_timeout;         /* FH_OFI_RMA_TIMEOUT, s; 0: never */
} ofi_settings_t;

enum ofi_endpoint_choice { OFI_EPC_AUTO = 0, OFI_EPC_MSG, OFI_EPC_RDM };

#endif /* FH_OFI_CONFIG_H */
