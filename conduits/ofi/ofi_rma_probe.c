/*
 * ofi_rma_probe.c -- libfabric conduit, message-endpoint mode: before an
 * RMA past FH_OFI_RMA_TIMEOUT fails, ask whether its target is serving it.
 *
 * Why: over tcp the target's provider moves an RMA's bytes only while the
 * target polls (calls the runtime).  An RMA that has not completed after
 * the timeout is either stuck -- the target's provider met a fault in the
 * target's memory and stopped serving the connection without a word
 * (docs/reliability.md) -- or its target is computing and will serve it
 * when it next calls the runtime.  Failing the second would fail a correct
 * program, so the caller asks.
 *
 * How: the RMA's path asks path 0 to probe the target (an OFI_AMH_PROBE
 * control message on the service paths' connection, not the RMA's own);
 * the target's service path answers from its poll (OFI_AMH_ANSWER), with
 * how many times it had polled.  Polling its service path is what serves
 * the RMA (the RMA's connection completes on that path's queue).  The RMA
 * fails only when, after a first answer, a grace period (the timeout
 * again) passed and a later answer shows the target polled at least
 * OFI_PROBE_POLLS times in between, and no other RMA of its connection
 * completed meanwhile: the target was in the runtime, its provider ran,
 * and the connection moved nothing (an RMA queued behind long ones on a
 * connection that moves is waited for).  No answer -- the target
 * computes, or is stopped -- means wait on: the caller waits as long as
 * the target does not call the runtime.  An RMA of the service path itself
 * is waited for, never failed: its probe would travel on the connection in
 * question (under FH_PATHS=shared the pair has no other; the first thread
 * of a rank under FH_PATHS=lazy uses the service path), where an answer
 * cannot overtake the RMA's own bytes and no answer cannot tell a stuck
 * provider from a target that computes -- and failing it ended the pair
 * (a service paths' connection is not made again), so a get from a rank
 * that computed past the timeout failed a correct program.  A target that
 * dies ends the job through the launcher (docs/reliability.md).
 *
 * Per op: pstate 0 (not yet past the timeout) -> 1 (probe asked, waiting
 * for an answer to a probe sent after the asking) -> 2 (answered: grace)
 * -> 3 (a second probe asked) -> fail, or back to 2 when the target polled
 * less than OFI_PROBE_POLLS times (it answered, then computed again); 4: a
 * service-path RMA past the timeout (waits).
 */
#include <stdlib.h>

#include "ofi_internal.h"

#define OFI_PROBE_POLLS 100u   /* the target's service-path polls between two
                                  answers that fail a stuck RMA */

int ofi_probe_alloc(struct fh_conduit *c)
{
    const size_t n = (size_t)c->cfg.nranks;
    c->probe_want = calloc(n, sizeof *c->probe_want);
    c->probe_sent = calloc(n, sizeof *c->probe_sent);
    c->probe_ans = calloc(n, sizeof *c->probe_ans);
    c->ans_owed = calloc(n, sizeof *c->ans_owed);
    if (!c->probe_want || !c->probe_sent || !c->probe_ans || !c->ans_owed)
        return FH_ERR_NO_MEMORY;
    return FH_OK;
}

void ofi_probe_free(struct fh_conduit *c)
{
    free(c->probe_want);
    free(c->probe_sent);
    free(c->probe_ans);
    free(c->ans_owed);
    c->probe_want = NULL;
    c->probe_sent = NULL;
    c->probe_ans = NULL;
    c->ans_owed = NULL;
}

/* A probe of rank, sent by path 0's next poll; the sequence number from
 * which an answer counts. */
static uint32_t ask(struct fh_conduit *c, int rank)
{
    atomic_store(&c->probe_want[rank], 1);
    atomic_store(&c->paths[0]->cm_work, 1);
    return atomic_load(&c->probe_sent[rank]) + 1;
}

int ofi_probe_fail(struct fh_cpath *p, struct ofi_op *op, double now)
{
    struct fh_conduit *c = p->c;
    if (p->index == 0) {
        if (op->pstate == 0)
            fh_log_verbose(1, "ofi: path 0: %s %s at 0x%llx (+%zu) incomplete after %.0f s: "
                           "waiting (a service-path RMA is not probed)",
                           op->kind == OFI_OP_PUT ? "put to" : "get from",
                           FH_RANK_NAME(op->rank), (unsigned long long)op->raddr, op->len,
                           c->rma_timeout);
        op->pstate = 4;
        return 0;
    }
    if (c->probe_ans == NULL || op->rank == c->cfg.rank)
        return 1;
    const uint64_t a = atomic_load(&c->probe_ans[op->rank]);
    const int answered = (int32_t)((uint32_t)(a >> 32) - op->pneed) >= 0;
    switch (op->pstate) {
    case 0:
        op->pneed = ask(c, op->rank);
        op->pstate = 1;
        fh_log_verbose(1, "ofi: path %d: %s %s at 0x%llx (+%zu) incomplete after %.0f s: "
                       "probing it", p->index, op->kind == OFI_OP_PUT ? "put to" : "get from",
                       FH_RANK_NAME(op->rank), (unsigned long long)op->raddr, op->len,
                       c->rma_timeout);
        return 0;
    case 1:
    case 3:
        if (!answered) {
            (void)ask(c, op->rank);    /* again: the last one may be lost */
            return 0;
        }
        if (op->pstate == 3 && (uint32_t)a - (uint32_t)op->ans1 >= OFI_PROBE_POLLS
            && (op->conn == NULL || op->conn->rma_done == op->done1))
            return 1;
        op->ans1 = a;
        op->done1 = op->conn != NULL ? op->conn->rma_done : 0;
        op->t1 = now;
        op->pstate = 2;
        return 0;
    default:
        if (now < op->t1 + c->rma_timeout)
            return 0;
        op->pneed = ask(c, op->rank);
        op->pstate = 3;
        return 0;
    }
}

void ofi_probe_on_ctl(struct fh_cpath *p, uint32_t src, unsigned kind,
                      const struct ofi_ctl_msg *m)
{
    struct fh_conduit *c = p->c;
    const uint32_t np = (uint32_t)c->cfg.npaths, rank = src / np;
    if (c->ans_owed == NULL || src % np != 0) {
        c->up.on_drop(p->upcall_arg, (int)rank, "probe from a path other than the service "
                      "path");
        return;
    }
    if (kind == OFI_AMH_PROBE) {
        c->ans_owed[rank] = m->a ? m->a : 1;
        atomic_store(&p->cm_work, 1);
        return;
    }
    /* An answer: kept if newer than the last (a forged one can only make
     * our RMAs to that rank fail sooner or wait longer: it comes on the
     * rank's own authenticated connection). */
    uint64_t v = (uint64_t)m->a << 32 | m->b, old = atomic_load(&c->probe_ans[rank]);
    if ((int32_t)(m->a - (uint32_t)(old >> 32)) > 0)
        atomic_store(&c->probe_ans[rank], v);
}

void ofi_probe_poll(struct fh_cpath *p)
{
    struct fh_conduit *c = p->c;
    const uint32_t np = (uint32_t)c->cfg.npaths;
    for (int r = 0; r < c->cfg.nranks; r++) {
        if (c->ans_owed[r] != 0) {
            struct ofi_ctl_msg m = {.a = c->ans_owed[r], .b = (uint32_t)p->npolls};
            int rc = ofi_ctl_send(p, (uint32_t)r * np, OFI_AMH_ANSWER, &m);
            if (rc == FH_ERR_AGAIN)
                atomic_store(&p->cm_work, 1);
            else
                c->ans_owed[r] = 0;
        }
        if (atomic_exchange(&c->probe_want[r], 0)) {
            struct ofi_ctl_msg m = {.a = atomic_load(&c->probe_sent[r]) + 1};
            if (m.a == 0)
                m.a = 1;
            int rc = ofi_ctl_send(p, (uint32_t)r * np, OFI_AMH_PROBE, &m);
            if (rc == FH_OK) {
                atomic_store(&c->probe_sent[r], m.a);
            } else if (rc == FH_ERR_AGAIN) {
                atomic_store(&c->probe_want[r], 1);
                atomic_store(&p->cm_work, 1);
            }
        }
    }
}
