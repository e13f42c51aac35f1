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
} ofi_settings_t;

#endif /* FH_OFI_CONFIG_H */
