/*
 * ibv_config.h -- the ibv conduit's own FH_* variables (ibv_config.c), as
 * fh_conduit_settings_load fills them.  Needs no verbs header.
 */
#ifndef FH_IBV_CONFIG_H
#define FH_IBV_CONFIG_H

#include <stddef.h>

typedef struct ibv_settings {
    const char *device;       /* FH_IBV_DEVICE, "" = first with an active port;
                                 "a,b,...": per rank (ibv_device_for_rank) */
    long port;                /* FH_IBV_PORT, 0 = first active (0..255) */
    long gid_index;           /* FH_IBV_GID_INDEX, -1 = automatic (-1..65535) */
    int td;                   /* FH_IBV_TD: enum ibv_td_mode (ibv_internal.h) */
    int post;                 /* FH_IBV_POST: enum ibv_post_mode (ibv_internal.h) */
    int poll;                 /* FH_IBV_POLL: enum ibv_poll_mode (ibv_internal.h) */
    long sl;                  /* FH_IBV_SL (0..15) */
    long tclass;              /* FH_IBV_TCLASS (0..255) */
    long pkey_index;          /* FH_IBV_PKEY_INDEX (0..65535) */
    long connect_timeout;     /* FH_IBV_CONNECT_TIMEOUT, s (1..3600) */
    int fork;                 /* FH_IBV_FORK: enum ibv_fork_mode (ibv_internal.h) */
} ibv_settings_t;

#define IBV_DEVNAME_MAX 64    /* longest device name + 1 (IBV_SYSFS_NAME_MAX) */

/* FH_IBV_DEVICE as a comma-separated list "d0,d1,...,dn-1": rank r takes
 * d(r mod n) (one name: every rank takes it).  Copies that entry, NUL-
 * terminated, into out (outlen bytes) and returns its length; returns -1
 * when the entry is empty or does not fit (list != NULL, rank >= 0). */
int ibv_device_for_rank(const char *list, int rank, char *out, size_t outlen);

#endif /* FH_IBV_CONFIG_H */
