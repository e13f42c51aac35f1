/*
 * ibv_cq.c -- verbs conduit: a path's completion queue and how it is
 * polled (FH_IBV_POLL).
 *
 *   ex       an extended CQ (ibv_create_cq_ex) with
 *            IBV_CREATE_CQ_ATTR_SINGLE_THREADED (the provider may drop its
 *            lock: the runtime serializes the calls on one path), inside
 *            the path's parent domain when it has one, polled with
 *            ibv_start_poll / ibv_end_poll (ibv_fetch_ex).  On mlx5 this
 *            is the lock-free completion path; ibv_poll_cq takes the CQ's
 *            lock whatever its flags.
 *   classic  ibv_poll_cq with an array (on an extended CQ through
 *            ibv_cq_ex_to_cq, or on a plain CQ).
 *   auto     ex for a path with a thread domain (where the lock-free CQ
 *            pays), classic otherwise.
 * Falling back: an extended CQ the provider refuses with the flag is tried
 * without it, one refused inside the parent domain outside it; if no
 * extended CQ can be made, or a new one is not empty (ibv_cq_ex_sane),
 * auto polls a plain CQ with ibv_poll_cq and FH_IBV_POLL=ex fails path
 * creation.  Either way a batch of completions is
 * copied into p->ev (struct ibv_ev) before any upcall.
 *
 * Sleeping.  Every path's CQ has a completion channel of its own (its fd
 * non-blocking) and sits on completion vector index % num_comp_vectors,
 * so that the interrupts of sleeping paths are spread over the vectors
 * (each vector is an MSI-X interrupt the administrator may steer to a
 * core).  The CQ is armed only by ibv_wait_fds, when the runtime is about
 * to sleep (firehose/path.c net_sleep, after 10 ms of idle waiting): it
 * reads and acknowledges the events the channel holds (each one disarmed
 * the CQ), arms it (ibv_req_notify_cq, any completion), and then polls it
 * once more, because a completion that came before the arming raises no
 * event; what that poll finds goes into p->ev for the next ibv_poll and
 * the runtime does not sleep.  A busy path never arms: polling costs
 * nothing more than without a channel.
 *
 * Size.  A CQ must hold every completion that may be pending at once: the
 * path's RMA contexts and send slots, its posted receive buffers, its UD
 * queues, and per RC QP one signal interval of work requests flushed on
 * an error (ibv_cq_need).  Receive buffers and QPs come with the
 * connections, so the CQ starts with room for the first receive chunk and
 * no QP, and ibv_cq_fit grows it (ibv_resize_cq, by a quarter at least)
 * before a QP is made or buffers are posted; a failed resize fails that
 * connection (error logged), and after a resize the CQ is armed afresh
 * before the next sleep (whether an arming survives one is up to the
 * provider).  Providers that cannot resize (the probe: a
 * resize to the size it has, at creation) get a CQ sized for every
 * possible peer, as all did before, and the verbose log says so once.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "ibv_internal.h"
#include "firehose/util/log.h"

/* A new extended CQ must be empty: ibv_start_poll says ENOENT.  rxe with
 * rdma-core 44 on Linux 6.1 reports completions full of zeros there (wr_id
 * 0, qp_num 0) and keeps doing so under traffic; such a CQ is not used
 * (auto: a plain CQ and ibv_poll_cq; FH_IBV_POLL=ex: path creation fails),
 * and the next paths do not try again. */
static int ibv_cq_ex_sane(struct fh_cpath *p)
{
    struct ibv_poll_cq_attr pa = {.comp_mask = 0};
    int e = ibv_start_poll(p->cqx, &pa);
    if (e == ENOENT)
        return 1;
    if (e == 0)
        ibv_end_poll(p->cqx);
    if (!p->c->cq_ex_broken)
        fh_log_verbose(1, "ibv: %s: a new extended CQ is not empty "
                       "(ibv_start_poll: %s, wr_id %llu): completions are "
                       "read with ibv_poll_cq from a plain CQ", p->c->devname,
                       e ? strerror(e) : "a completion",
                       e ? 0ull : (unsigned long long)p->cqx->wr_id);
    p->c->cq_ex_broken = 1;
    return 0;
}

/* The path's completion channel, non-blocking; none (the path cannot
 * sleep, said once per device) if the device refuses. */
static void ibv_path_channel(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    p->chan = ibv_create_comp_channel(c->ctx);
    int fl = p->chan ? fcntl(p->chan->fd, F_GETFL) : -1;
    if (fl >= 0 && fcntl(p->chan->fd, F_SETFL, fl | O_NONBLOCK) == 0)
        return;
    int e = errno;
    if (p->chan)
        ibv_destroy_comp_channel(p->chan);
    p->chan = NULL;
    fh_log_verbose(1, "ibv: path %d: no completion channel (%s): a waiting "
                   "rank polls this path and never sleeps on it", p->index,
                   strerror(e));
}

size_t ibv_cq_need(const struct fh_cpath *p, size_t nrecv, size_t nqps)
{
    return p->nops + p->nslots + nrecv + 64 +
           IBV_CM_SQ + (p->index == 0 ? 64 : 8) +   /* ibv_cm.c */
           nqps * (size_t)p->sig_every;              /* error flushes */
}

int ibv_cq_fit(struct fh_cpath *p, size_t nrecv, size_t nqps)
{
    size_t need = ibv_cq_need(p, nrecv, nqps);
    if (!p->cq_grows || need <= (size_t)p->cqe || p->cqe >= p->cqe_full)
        return FH_OK;
    /* At least a quarter more: a resize per chunk or QP would be many. */
    size_t want = (size_t)p->cqe + (size_t)p->cqe / 4;
    if (want < need)
        want = need;
    if (want > (size_t)p->cqe_full)
        want = (size_t)p->cqe_full;
    int e = ibv_resize_cq(p->cq, (int)want);
    if (e != 0) {
        fh_log_error("ibv: path %d: cannot grow its CQ from %d to %zu "
                     "entries (ibv_resize_cq: %s)", p->index, p->cqe, want,
                     strerror(e));
        return e == ENOMEM ? FH_ERR_NO_MEMORY : FH_ERR_TRANSPORT;
    }
    fh_log_verbose(3, "ibv: path %d: CQ grown from %d to %zu entries (%d "
                   "on the device; %zu receive buffers, %zu RC QPs)",
                   p->index, p->cqe, want, p->cq->cqe, nrecv, nqps);
    p->cqe = (int)want;       /* what we asked: the device may round up */
    if (p->armed > 0)
        p->armed = 0;         /* arm it again before the next sleep */
    return FH_OK;
}

static int ibv_cq_make(struct fh_cpath *p);

int ibv_path_cq(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    ibv_path_channel(p);
    if (c->cq_fixed)
        p->cqe = p->cqe_full;
    int ret = ibv_cq_make(p);
    if (ret != FH_OK || p->cqe >= p->cqe_full)
        return ret;
    /* Can it grow?  A resize to the size it has asks the provider. */
    int e = ibv_resize_cq(p->cq, p->cqe);
    if (e == 0) {
        p->cq_grows = 1;
        return FH_OK;
    }
    if (!c->cq_fixed)
        fh_log_verbose(1, "ibv: %s cannot resize CQs (ibv_resize_cq: %s): "
                       "each path's CQ is sized for every possible peer",
                       c->devname, strerror(e));
    c->cq_fixed = 1;
    ibv_destroy_cq(p->cq);
    p->cq = NULL;
    p->cqx = NULL;
    p->cqe = p->cqe_full;
    return ibv_cq_make(p);
}

void ibv_path_cq_destroy(struct fh_cpath *p)
{
    if (p->cq)
        ibv_destroy_cq(p->cq);      /* every event was acknowledged */
    p->cq = NULL;
    p->cqx = NULL;
    if (p->chan)
        ibv_destroy_comp_channel(p->chan);
    p->chan = NULL;
}

/* The CQ of p->cqe entries on the path's channel (see the header). */
static int ibv_cq_make(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    int nvec = c->ctx->num_comp_vectors > 0 ? c->ctx->num_comp_vectors : 1;
    const uint32_t vec = (uint32_t)(p->index % nvec);
    const int want_ex = c->env.poll == IBV_POLL_EX ||
                        (c->env.poll == IBV_POLL_AUTO && p->ppd);
    /* attempts: (parent domain,) single-threaded flag, then neither */
    for (int attempt = p->ppd ? 0 : 1;
         (want_ex || p->ppd) && !c->cq_ex_broken && attempt < 3; attempt++) {
        struct ibv_cq_init_attr_ex a = {
            .cqe = (uint32_t)p->cqe,
            .cq_context = p,
            .channel = p->chan,
            .comp_vector = vec,
            .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM |
                        IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID,
            .comp_mask = attempt < 2 ? IBV_CQ_INIT_ATTR_MASK_FLAGS : 0u,
            .flags = attempt < 2 ? IBV_CREATE_CQ_ATTR_SINGLE_THREADED : 0u,
        };
        if (attempt == 0) {
            a.comp_mask |= IBV_CQ_INIT_ATTR_MASK_PD;
            a.parent_domain = p->ppd;
        }
        p->cqx = ibv_create_cq_ex(c->ctx, &a);
        if (p->cqx && !ibv_cq_ex_sane(p)) {
            ibv_destroy_cq(ibv_cq_ex_to_cq(p->cqx));
            p->cqx = NULL;
            break;
        }
        if (p->cqx) {
            p->cq = ibv_cq_ex_to_cq(p->cqx);
            p->poll_ex = want_ex;
            if (attempt > 0 && p->ppd)
                fh_log_verbose(2, "ibv: path %d: CQ outside the parent domain",
                               p->index);
            if (attempt == 2)
                fh_log_verbose(2, "ibv: path %d: CQ without the "
                               "single-threaded flag", p->index);
            return FH_OK;
        }
    }
    if (c->env.poll == IBV_POLL_EX) {
        fh_log_error("ibv: path %d: FH_IBV_POLL=ex: %s cannot create a "
                     "usable extended CQ of %d entries%s", p->index,
                     c->devname, p->cqe, c->cq_ex_broken
                         ? " (a new one is not empty)" : "");
        return FH_ERR_NOT_SUPPORTED;
    }
    p->cq = ibv_create_cq(c->ctx, p->cqe, p, p->chan, (int)vec);
    if (!p->cq) {
        fh_log_error("ibv: path %d: cannot create a CQ of %d entries: %s",
                     p->index, p->cqe, strerror(errno));
        return FH_ERR_TRANSPORT;
    }
    return FH_OK;
}

/* One completion per ibv_start_poll / ibv_end_poll cycle, never
 * ibv_next_poll: with next_poll batches, rxe (rdma-core 44, Linux 6.1)
 * handed out receive completions of 0 bytes in our VM runs; start, read,
 * end is valid on every provider, and on a single-threaded CQ a cycle
 * takes no lock. */
static int ibv_fetch_ex(struct fh_cpath *p, int want)
{
    struct ibv_cq_ex *cq = p->cqx;
    int n = 0;
    while (n < want) {
        struct ibv_poll_cq_attr pa = {.comp_mask = 0};
        int e = ibv_start_poll(cq, &pa);
        if (e == ENOENT)
            break;
        if (e != 0) {
            fh_log_error("ibv: path %d: ibv_start_poll failed: %s", p->index,
                         strerror(e));
            return n ? n : FH_ERR_TRANSPORT;
        }
        p->ev[n++] = (struct ibv_ev){
            cq->wr_id, ibv_wc_read_byte_len(cq), ibv_wc_read_qp_num(cq),
            ibv_wc_read_vendor_err(cq), (int)cq->status,
            ibv_wc_read_src_qp(cq), (uint16_t)ibv_wc_read_slid(cq),
            (ibv_wc_read_wc_flags(cq) & IBV_WC_GRH) != 0};
        ibv_end_poll(cq);
    }
    return n;
}

int ibv_fetch(struct fh_cpath *p, int want)
{
    if (p->poll_ex)
        return ibv_fetch_ex(p, want);
    struct ibv_wc wc[IBV_CQ_BATCH];
    int n = ibv_poll_cq(p->cq, want, wc);
    if (n < 0) {
        fh_log_error("ibv: path %d: ibv_poll_cq failed (%d)", p->index, n);
        return FH_ERR_TRANSPORT;
    }
    for (int i = 0; i < n; i++)
        p->ev[i] = (struct ibv_ev){wc[i].wr_id, wc[i].byte_len, wc[i].qp_num,
                                   wc[i].vendor_err, (int)wc[i].status,
                                   wc[i].src_qp, wc[i].slid,
                                   (wc[i].wc_flags & IBV_WC_GRH) != 0};
    return n;
}

int ibv_wait_fds(struct fh_cpath *p, int *fds, int max)
{
    if (p->chan == NULL || p->armed < 0 || max < 1 || p->err != FH_OK)
        return 0;
    if (p->ev_head < p->ev_n || p->failed || p->open || p->nrepost)
        return -1;
    struct ibv_cq *ecq;
    void *ectx;
    while (ibv_get_cq_event(p->chan, &ecq, &ectx) == 0) {
        ibv_ack_cq_events(ecq, 1);
        p->armed = 0;
    }
    if (!p->armed) {
        int e = ibv_req_notify_cq(p->cq, 0);
        if (e != 0) {
            fh_log_verbose(1, "ibv: path %d: ibv_req_notify_cq: %s: the "
                           "path no longer sleeps", p->index, strerror(e));
            p->armed = -1;
            return 0;
        }
        p->armed = 1;
        int n = ibv_fetch(p, IBV_CQ_BATCH);
        if (n != 0) {
            /* Came before the arming (or an error): the poll takes them. */
            p->ev_head = 0;
            p->ev_n = n > 0 ? n : 0;
            return -1;
        }
    }
    fds[0] = p->chan->fd;
    return 1;
}
