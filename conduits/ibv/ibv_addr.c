/*
 * ibv_addr.c -- verbs conduit: the address vector and the read/atomic
 * depths of a connection, computed from what the peer sent and our
 * settings, and what a failed thread-domain allocation means.  Pure
 * functions (no device): tests/unit/test_ibv_addr.c checks them on a
 * machine without RDMA hardware.
 */
#include <errno.h>
#include <string.h>

#include "ibv_internal.h"

void ibv_fill_av(struct ibv_ah_attr *ah, const struct ibv_peer_addr *a)
{
    memset(ah, 0, sizeof *ah);
    ah->port_num = a->port;
    ah->sl = a->sl;
    ah->dlid = a->lid;          /* always: InfiniBand routes by it */
    if (a->sgid_index >= 0) {
        ah->is_global = 1;
        memcpy(ah->grh.dgid.raw, a->gid, 16);
        ah->grh.sgid_index = (uint8_t)a->sgid_index;
        ah->grh.hop_limit = 64;
        ah->grh.traffic_class = a->tclass;
    }
}

static uint8_t ibv_depth(unsigned x, unsigned y)
{
    unsigned d = x < y ? x : y;
    if (d > 16)
        d = 16;
    return (uint8_t)(d > 0 ? d : 1);
}

void ibv_rd_depths(unsigned my_resp, unsigned my_init, unsigned peer_resp,
                   unsigned peer_init, uint8_t *resp_depth,
                   uint8_t *init_depth)
{
    *resp_depth = ibv_depth(my_resp, peer_init);
    *init_depth = ibv_depth(my_init, peer_resp);
}

int ibv_needs_grh(const uint8_t my_gid[16], const uint8_t peer_gid[16])
{
    return memcmp(my_gid, peer_gid, 8) != 0;
}

int ibv_td_error_permanent(int err)
{
    switch (err) {
    case ENOMEM:
    case ENOSPC:
    case EAGAIN:
    case EBUSY:
    case EMFILE:
    case ENFILE:
        return 0;       /* out of resources now: a later path may get one */
    default:
        return 1;       /* EOPNOTSUPP and the rest: the device has none */
    }
}
