/*
 * ibv_config.c -- the ibv conduit's FH_* variables (fh_conduit_settings_t,
 * conduit.h).  Compiled without verbs headers, so that fh_init checks them
 * in every build (with or without rdma-core) and tools/fhinfo documents
 * them.
 */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "conduits/conduit.h"
#include "firehose/util/config.h"
#include "ibv_config.h"

_Static_assert(sizeof(ibv_settings_t) <= FH_CONDUIT_SETTINGS_MAX,
               "conduit.h: FH_CONDUIT_SETTINGS_MAX too small");

#define F(field) offsetof(ibv_settings_t, field)

static const fh_cfg_entry_t ibv_config_table[] = {
    {"FH_IBV_DEVICE", FH_CFG_STRING, "", NULL, F(device), 0,
     "Verbs device for the ibv conduit (see ibv_devices); empty = first with an active port; "
     "a comma-separated list = one per rank: rank r takes entry r mod (entries).", 0},
    {"FH_IBV_PORT", FH_CFG_INT, "0", NULL, F(port), 0,
     "Port of the verbs device; 0 = first active port.", 0},
    {"FH_IBV_GID_INDEX", FH_CFG_INT, "-1", NULL, F(gid_index), 0,
     "GID index; -1 = RoCE v2 IPv4-mapped GID on Ethernet ports, LID on InfiniBand.", -1},
    {"FH_IBV_TD", FH_CFG_ENUM, "independent", "off|shared|independent", F(td), 0,
     "Thread domains per path: none, one, or two (private doorbell page on mlx5).", 0},
    {"FH_IBV_POST", FH_CFG_ENUM, "auto", "auto|ex|classic", F(post), 0,
     "Posting API: ex = ibv_wr_* on ibv_qp_ex, classic = ibv_post_send chains; auto = ex "
     "where the device offers it, else classic.", 0},
    {"FH_IBV_POLL", FH_CFG_ENUM, "auto", "auto|ex|classic", F(poll), 0,
     "Completion polling: ex = ibv_start_poll/ibv_end_poll on a single-threaded extended "
     "CQ (lock-free on mlx5 under a thread domain), classic = ibv_poll_cq; auto = ex for "
     "paths with a thread domain, else classic.", 0},
    {"FH_IBV_SL", FH_CFG_INT, "0", NULL, F(sl), 1,
     "Service level of every queue pair (0..15; InfiniBand QoS, mapped to a VL).", 0},
    {"FH_IBV_TCLASS", FH_CFG_INT, "0", NULL, F(tclass), 1,
     "Traffic class of the GRH (0..255; on RoCE the DSCP is tclass >> 2: set the "
     "lossless class of your fabric, e.g. 106 for DSCP 26).", 0},
    {"FH_IBV_PKEY_INDEX", FH_CFG_INT, "0", NULL, F(pkey_index), 1,
     "Index into the port's partition-key table of every queue pair (must hold a "
     "valid pkey; see /sys/class/infiniband/DEV/ports/N/pkeys).", 0},
    {"FH_IBV_CONNECT_TIMEOUT", FH_CFG_INT, "60", NULL, F(connect_timeout), 0,
     "Seconds a connection request (made on first use of a pair of paths) waits for "
     "the peer's answer before the operation fails with FH_ERR_PEER_DEAD (1..3600). "
     "The peer answers when it next calls the runtime, so this bounds how long a peer "
     "may compute without calling it while another rank first contacts it; a peer that "
     "died is named sooner by the job's death notice.", 0},
    {"FH_IBV_FORK", FH_CFG_ENUM, "auto", "auto|on|off", F(fork), 0,
     "fork() safety of registered memory where the kernel does not copy pinned pages for a "
     "child (Linux before 5.13): auto/on call ibv_fork_init() before the first registration "
     "(registered pages are then not inherited by children), on fails fh_init if that is "
     "impossible, off does nothing; newer kernels need nothing whatever the value "
     "(RDMAV_FORK_SAFE=1 also turns it on).", 0},
};

int ibv_device_for_rank(const char *list, int rank, char *out, size_t outlen)
{
    assert(list && rank >= 0 && out && outlen > 0);
    size_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    const char *e = list;
    for (size_t k = (size_t)rank % n; k > 0; k--)
        e = strchr(e, ',') + 1;
    const size_t len = strcspn(e, ",");
    if (len == 0 || len >= outlen)
        return -1;
    memcpy(out, e, len);
    out[len] = '\0';
    return (int)len;
}

static int ibv_config_check(const void *settings, char *err, size_t errlen)
{
    const ibv_settings_t *s = settings;
    if (s->device && strchr(s->device, ',')) {
        char name[IBV_DEVNAME_MAX];
        for (const char *e = s->device; e; ) {    /* every entry */
            if (ibv_device_for_rank(e, 0, name, sizeof name) < 0) {
                snprintf(err, errlen, "FH_IBV_DEVICE=%s: an empty or too long "
                         "entry (expected name,name,...)", s->device);
                return FH_ERR_CONFIG;
            }
            if ((e = strchr(e, ',')) != NULL)
                e++;
        }
    }
    if (s->port < 0 || s->port > 255) {
        snprintf(err, errlen, "FH_IBV_PORT=%ld: expected 0..255", s->port);
        return FH_ERR_CONFIG;
    }
    if (s->gid_index < -1 || s->gid_index > 65535) {
        snprintf(err, errlen, "FH_IBV_GID_INDEX=%ld: expected -1..65535", s->gid_index);
        return FH_ERR_CONFIG;
    }
    if (s->sl < 0 || s->sl > 15) {
        snprintf(err, errlen, "FH_IBV_SL=%ld: expected 0..15", s->sl);
        return FH_ERR_CONFIG;
    }
    if (s->tclass < 0 || s->tclass > 255) {
        snprintf(err, errlen, "FH_IBV_TCLASS=%ld: expected 0..255", s->tclass);
        return FH_ERR_CONFIG;
    }
    if (s->pkey_index < 0 || s->pkey_index > 65535) {
        snprintf(err, errlen, "FH_IBV_PKEY_INDEX=%ld: expected 0..65535", s->pkey_index);
        return FH_ERR_CONFIG;
    }
    if (s->connect_timeout < 1 || s->connect_timeout > 3600) {
        snprintf(err, errlen, "FH_IBV_CONNECT_TIMEOUT=%ld: expected 1..3600",
                 s->connect_timeout);
        return FH_ERR_CONFIG;
    }
    return FH_OK;
}

const fh_conduit_settings_t fh_ibv_settings = {
    .conduit = "ibv",
    .table = ibv_config_table,
    .len = sizeof ibv_config_table / sizeof ibv_config_table[0],
    .size = sizeof(ibv_settings_t),
    .check = ibv_config_check,
};
