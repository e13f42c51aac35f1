/*
 * ibv_cost.c -- the verbs conduit's resources per process (ibv_cost.h).
 *
 * Per path (ibv_path.c): rx_msgs and rx_per_src as firehose/path.c gives
 * them (service path: N (c + 2) + N P c + 8 and 2c + 4; thread path:
 * N (c + 2) + 8 and c + 4); an SRQ of min(rx_msgs + slack,
 * rx_per_src x connections + slack) buffers of one packet (grown in chunks
 * of at least 64, so within 64 of this); a CQ of 256 + slots + posted
 * receive buffers + 64 + UD entries + QPs x signal interval (error
 * flushes), grown with the connections (ibv_resize_cq, by a quarter at
 * least, so up to 1.25 x this + 64 per path); where the device cannot resize, sized at
 * creation for every possible peer: rx_msgs + slack buffers and every slot
 * (cq_entries_max).
 */
#include "ibv_cost.h"

static double rx_bufs(double rx_msgs, double per_src, double conns)
{
    double want = per_src * conns + IBV_COST_RX_SLACK;
    double max = rx_msgs + IBV_COST_RX_SLACK;
    return want < max ? want : max;
}

void ibv_cost(const ibv_cost_shape_t *s, ibv_cost_t *out)
{
    const double n = (double)s->nranks, p = (double)s->npaths;
    const double c = (double)s->credits, k = (double)s->peers;
    const double u = s->npaths > 1 ? (double)s->used_paths : 0;
    const double st = (double)s->stride, sl = (double)s->nslots;
    const double rx0 = n * (c + 2) + n * p * c + 8, rxt = n * (c + 2) + 8;
    const double per0 = 2 * c + 4, pert = c + 4;

    /* Connections: P = 1, service paths talk to each other (one QP per
     * pair); else each talking thread path has K, and path 0 accepts the
     * K peers' talking paths. */
    const double acc0 = s->npaths > 1 ? u * k : k;
    out->rc_qps = s->npaths > 1 ? 2 * u * k : k;
    out->rc_qps_max = n * (2 * p - 1);
    out->rc_qps_eager = out->rc_qps_max;
    out->ud_qps = p;

    const double slots0 = n * p, sig0 = (slots0 > 1024 ? 32 : 128) / 2;
    const double base0 = IBV_COST_NOPS + sl + 64 + IBV_COST_CM_SQ + IBV_COST_CM_RX_SVC;
    const double baset = IBV_COST_NOPS + sl + 64 + IBV_COST_CM_SQ + IBV_COST_CM_RX_THR;
    double cq = base0 + rx0 + IBV_COST_RX_SLACK + slots0 * sig0;
    cq += (p - 1) * (baset + rxt + IBV_COST_RX_SLACK + n * 64);
    out->cq_entries_max = cq;

    const double rxb0 = rx_bufs(rx0, per0, acc0), rxbt = rx_bufs(rxt, pert, k);
    const double rxbi = rx_bufs(rxt, pert, 0);
    out->cq_entries = base0 + rxb0 + acc0 * sig0 +
                      u * (baset + rxbt + k * 64) + (p - 1 - u) * (baset + rxbi);

    double rx = rxb0 + u * rxbt + (p - 1 - u) * rxbi;
    out->rx_bytes = rx * st;
    out->rx_bytes_max = ((rx0 + IBV_COST_RX_SLACK) +
                         (p - 1) * (rxt + IBV_COST_RX_SLACK)) * st;
    out->other_bytes = p * sl * st +
                       (IBV_COST_CM_RX_SVC + p * IBV_COST_CM_SQ +
                        (p - 1) * IBV_COST_CM_RX_THR) * IBV_COST_CM_BUF;
}
