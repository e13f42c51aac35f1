/*
 * outsider.c -- a stranger on the host attacking a firehose job (the data
 * plane of the ofi conduit) with nothing but libfabric.
 *
 * What it tests: that a process which is not part of a firehose job -- no
 * job key, not in any rank's address vector, typically another Unix user --
 * cannot use the job's libfabric endpoints.  It links libfabric only (not
 * firehose) and knows what anyone can learn from the source: the wire format
 * of conduits/ofi (struct ofi_amh {u32 src; u32 seq} in front of every
 * active message) and firehose/am_wire.h (24-byte AM header), the handler
 * index the victim registers (sec_common.h), and that remote keys under
 * FH_REG_STRATEGY=pin-everything were small counters.
 *
 * How it finds the target: the target rank's pid is known (ps shows it).
 * Its listening TCP ports are read from /proc/<pid>/fd (socket inodes) and
 * /proc/net/tcp; /proc/net/tcp is world-readable, so a stranger who cannot
 * read /proc/<pid>/fd sees the same ports (it gets them from --ports, or
 * with --scan-uid tries every listening port >= 1024 of the target's uid;
 * off by default: on a shared host that hits other people's jobs).  tcp;ofi_rxm endpoint
 * names are struct sockaddr_in, so each port becomes an AV entry.
 * With --provider shm: firehose names shm endpoints
 * "fh_<pid>_<path>_<64 random bits>" (conduits/ofi/ofi_path.c), which
 * cannot be guessed -- but the shm provider backs each endpoint with a file
 * of that name in /dev/shm, which anyone can list, so the outsider reads
 * the names there.  The files are mode 0600: another uid cannot map them,
 * and fi_av_insert fails (reported, not a breach).
 *
 * Attacks (--attack, comma-separated; each against every port):
 *   rma      fi_read of 64 bytes and fi_write of 16 bytes with keys 0..64,
 *            each at the segment's virtual address (FI_MR_VIRT_ADDR) and at
 *            offset 0 / SEC_WRITE_OFF (offset addressing);
 *   am       well-formed forged AMs claiming to come from rank 1 (conduit
 *            source index of rank 1's last path, sequence 0..3) for
 *            SEC_HANDLER: short request, short reply, long request and long
 *            reply whose payload targets the segment;
 *   runt     messages of 1..7 bytes (shorter than struct ofi_amh);
 *   big      a 33-byte message (shifts the next one to an odd offset of the
 *            receive buffer), then a 65,539-byte message whose headers
 *            claim a medium request to SEC_HANDLER;
 *   badsrc   an AM header whose source rank (7) is outside the job, then a
 *            conduit header whose source index (0xfffffff0) is outside the
 *            job;
 *   garbage  40, 100 and 4096 random bytes.
 * The segment address and the pattern seed come from the driver (the worst
 * case: an attacker who learned them); the address is needed only for
 * virtual-address RMA and for the long AMs' destination, the seed only to
 * prove that a read returned the segment.
 *
 * libfabric 1.17 behaviour this relies on (tcp;ofi_rxm): rxm accepts a
 * connection from any peer, also one that is in none of the target's AVs,
 * and delivers its messages into the posted receive buffers; a bad remote
 * key makes the target's tcp provider drop the connection ("invalid rma
 * iov"), after which rxm fails every later operation on our AV entry, so
 * we open a new endpoint of ours after each failed operation (fresh()).
 * A target endpoint that its process never polls (a thread path nobody
 * uses) never completes rxm's connection handshake: posting keeps returning
 * -FI_EAGAIN, and we give up on it after 3 tries.
 *
 * What the outsider itself can observe is reported as "BREACH ..." lines:
 * a read that completes (its bytes are compared with the victim's pattern,
 * whose seed --seed gives us only to prove the read), a write that
 * completes.  What the forged messages did (handler runs, segment writes,
 * dead ranks) is judged by the victim (victim.c) and the driver.
 *
 * Exit status: 0 no breach seen from here, 1 at least one BREACH, 2 a setup
 * problem (no target port, bad arguments), 77 libfabric offers no such
 * provider.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "sec_common.h"

/* ------------------------------------------------------------ options */

static int target_pid = -1;
static const char *ports_opt;
static int list_ports_only;
static int scan_uid;
static uint64_t seg_addr, seg_len = SEC_SEG_BYTES, pat_seed;
static int have_seg, have_seed;
static const char *attacks = "rma,am,runt,big,badsrc,garbage";
static int npaths_opt;
static double op_timeout = 2.0;
static const char *provider;
static int use_shm;            /* provider shm: endpoint names, not ports */
static int max_key = 64;

static int has_attack(const char *name)
{
    size_t n = strlen(name);
    for (const char *p = attacks; p && *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if ((l == n && strncmp(p, name, n) == 0) ||
            (l == 3 && strncmp(p, "all", 3) == 0))
            return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* ------------------------------------------------------ port discovery */

struct lport {
    uint32_t addr;     /* network order, as in /proc/net/tcp */
    unsigned port;
    unsigned uid;
    unsigned long inode;
};

/* LISTEN sockets of /proc/net/tcp (IPv4; the victim's tcp endpoints bind
 * the IPv4 address of FI_TCP_IFACE). */
static size_t read_listeners(struct lport **out)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f)
        return 0;
    char line[512];
    size_t n = 0, cap = 0;
    struct lport *v = NULL;
    if (!fgets(line, sizeof line, f)) {     /* header */
        fclose(f);
        return 0;
    }
    while (fgets(line, sizeof line, f)) {
        unsigned sl, la, lp, ra, rp, st, uid;
        unsigned long inode;
        if (sscanf(line, " %u: %x:%x %x:%x %x %*x:%*x %*x:%*x %*x %u %*d %lu",
                   &sl, &la, &lp, &ra, &rp, &st, &uid, &inode) != 8)
            continue;
        if (st != 0x0A)                     /* TCP_LISTEN */
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            struct lport *nv = realloc(v, cap * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        v[n++] = (struct lport){la, lp, uid, inode};
    }
    fclose(f);
    *out = v;
    return n;
}

/* Socket inodes of pid; -1 (errno set) when /proc/<pid>/fd is unreadable. */
static long pid_socket_inodes(int pid, unsigned long **out)
{
    char dpath[64];
    snprintf(dpath, sizeof dpath, "/proc/%d/fd", pid);
    DIR *d = opendir(dpath);
    if (!d)
        return -1;
    size_t n = 0, cap = 0;
    unsigned long *v = NULL;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char lpath[512], tgt[128];
        snprintf(lpath, sizeof lpath, "%s/%s", dpath, de->d_name);
        ssize_t l = readlink(lpath, tgt, sizeof tgt - 1);
        if (l <= 0)
            continue;
        tgt[l] = '\0';
        unsigned long ino;
        if (sscanf(tgt, "socket:[%lu]", &ino) != 1)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            unsigned long *nv = realloc(v, cap * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        v[n++] = ino;
    }
    closedir(d);
    *out = v;
    return (long)n;
}

/* One target endpoint and our own endpoint + AV towards it.  Our endpoint
 * is replaced after every failed operation (see fresh()). */
struct target {
    struct sockaddr_in sin;    /* tcp: the endpoint name */
    char name[128];            /* shm: the endpoint name */
    char label[160];           /* for messages */
    int shm_denied;            /* shm: its /dev/shm file is not ours to open */
    struct fid_av *av;
    struct fid_ep *ep;
    fi_addr_t fa;
    int dead;          /* given up on; dead_why says why */
    char dead_why[200];
    unsigned silent;   /* sends without any answer */
    unsigned eps;      /* endpoints we opened towards it */
};

/* shm: firehose names its endpoints fh_<pid>_<path>_<64 random bits>
 * (conduits/ofi/ofi_path.c) and the shm provider backs each with a file of
 * that name in /dev/shm, a directory anyone can list. */
static size_t find_shm_targets(struct target **out)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "fh_%d_", target_pid);
    DIR *d = opendir("/dev/shm");
    if (!d) {
        say("discovery: cannot list /dev/shm: %s\n", strerror(errno));
        return 0;
    }
    size_t n = 0, cap = 8;
    struct target *t = calloc(cap, sizeof *t);
    struct dirent *de;
    while (t && (de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
            strlen(de->d_name) >= sizeof t->name)
            continue;
        if (n == cap) {
            struct target *nt = realloc(t, 2 * cap * sizeof *t);
            if (!nt)
                break;
            t = nt;
            memset(t + cap, 0, cap * sizeof *t);
            cap *= 2;
        }
        char path[300];
        snprintf(path, sizeof path, "/dev/shm/%s", de->d_name);
        struct stat st;
        int have = stat(path, &st) == 0;
        int rw = access(path, R_OK | W_OK) == 0;
        say("discovery: /dev/shm lists %s (owner uid %u, mode %03o): uid %u "
            "%s open it\n", de->d_name, have ? (unsigned)st.st_uid : 0u,
            have ? (unsigned)(st.st_mode & 0777) : 0u, (unsigned)getuid(),
            rw ? "CAN" : "cannot");
        snprintf(t[n].name, sizeof t[n].name, "%s", de->d_name);
        t[n].shm_denied = !rw;
        snprintf(t[n].label, sizeof t[n].label, "shm:%s", de->d_name);
        n++;
    }
    closedir(d);
    *out = t;
    return t ? n : 0;
}

static size_t find_targets(struct target **out)
{
    if (use_shm)
        return find_shm_targets(out);
    struct lport *ls = NULL;
    size_t nl = read_listeners(&ls);
    struct target *t = calloc(nl ? nl : 1, sizeof *t);
    size_t nt = 0;
    if (!t)
        return 0;

    unsigned long *inodes = NULL;
    long ni = pid_socket_inodes(target_pid, &inodes);
    int fd_err = ni < 0 ? errno : 0;
    struct stat st;
    char ppath[64];
    snprintf(ppath, sizeof ppath, "/proc/%d", target_pid);
    int have_uid = stat(ppath, &st) == 0;

    if (ni >= 0)
        say("discovery: /proc/%d/fd readable: %ld sockets; matching them "
            "with /proc/net/tcp LISTEN entries\n", target_pid, ni);
    else if (ports_opt)
        say("discovery: /proc/%d/fd not readable by uid %u (%s); using "
            "--ports %s and checking that /proc/net/tcp (world-readable) "
            "shows them\n", target_pid, (unsigned)getuid(), strerror(fd_err),
            ports_opt);
    else if (scan_uid)
        say("discovery: /proc/%d/fd not readable by uid %u (%s); trying "
            "every LISTEN port >= 1024 of uid %u in /proc/net/tcp\n",
            target_pid, (unsigned)getuid(), strerror(fd_err),
            have_uid ? (unsigned)st.st_uid : 0u);
    else {
        say("discovery: /proc/%d/fd not readable by uid %u (%s); give "
            "--ports or --scan-uid\n", target_pid, (unsigned)getuid(),
            strerror(fd_err));
        nl = 0;
    }

    for (size_t i = 0; i < nl; i++) {
        int take = 0;
        if (ni >= 0) {
            for (long k = 0; k < ni; k++)
                if (inodes[k] == ls[i].inode)
                    take = 1;
        } else if (ports_opt) {
            char *dup = strdup(ports_opt), *save = NULL;
            for (char *p = strtok_r(dup, ",", &save); p;
                 p = strtok_r(NULL, ",", &save))
                if ((unsigned)atoi(p) == ls[i].port)
                    take = 1;
            free(dup);
        } else {
            take = have_uid && ls[i].uid == (unsigned)st.st_uid &&
                   ls[i].port >= 1024;
        }
        if (!take)
            continue;
        struct in_addr a = {.s_addr = ls[i].addr};
        if (a.s_addr == htonl(INADDR_ANY))
            a.s_addr = htonl(INADDR_LOOPBACK);
        t[nt].sin.sin_family = AF_INET;
        t[nt].sin.sin_port = htons((uint16_t)ls[i].port);
        t[nt].sin.sin_addr = a;
        snprintf(t[nt].label, sizeof t[nt].label, "%s:%u", inet_ntoa(a),
                 ls[i].port);
        struct in_addr la = {.s_addr = ls[i].addr};
        say("discovery: target listens on %s:%u (uid %u, inode %lu; "
            "visible in /proc/net/tcp to uid %u)\n", inet_ntoa(la),
            ls[i].port, ls[i].uid, ls[i].inode, (unsigned)getuid());
        nt++;
    }
    free(ls);
    free(inodes);
    *out = t;
    return nt;
}

/* ------------------------------------------------------------- fabric */

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_cq *cq;
static struct fid_mr *arena_mr;
static void *arena_desc;

#define NOPS       2048
#define SLOT_BYTES 256
#define BIG_BYTES  ((size_t)80 << 10)

struct op {
    struct fi_context2 ctx;    /* first: the completion's op_context */
    int posted, done, err, prov_errno;
    char errstr[160];
};
static struct op *ops;
static size_t nops_used;
static uint8_t *arena;         /* NOPS slots + one big buffer */

static struct op *new_op(uint8_t **buf)
{
    if (nops_used == NOPS)
        return NULL;
    size_t i = nops_used++;
    *buf = arena + i * SLOT_BYTES;
    memset(&ops[i], 0, sizeof ops[i]);
    return &ops[i];
}

static void reap(void)
{
    struct fi_cq_data_entry e[16];
    ssize_t n = fi_cq_read(cq, e, 16);
    if (n > 0) {
        for (ssize_t i = 0; i < n; i++) {
            struct op *o = e[i].op_context;
            if (o)
                o->done = 1;
        }
    } else if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry ee;
        memset(&ee, 0, sizeof ee);
        if (fi_cq_readerr(cq, &ee, 0) == 1) {
            struct op *o = ee.op_context;
            if (o) {
                o->done = 1;
                o->err = ee.err ? ee.err : FI_EOTHER;
                o->prov_errno = ee.prov_errno;
                const char *s = fi_cq_strerror(cq, ee.prov_errno, ee.err_data,
                                               NULL, 0);
                snprintf(o->errstr, sizeof o->errstr, "%s%s%s%s",
                         fi_strerror(o->err), s ? " (" : "", s ? s : "",
                         s ? ")" : "");
            }
        }
    }
}

/* Waits for o; 1 = completed OK, 0 = completed with an error, -1 = timed
 * out (o stays pending and its buffer is never reused). */
static int wait_op(struct op *o, double timeout)
{
    double t0 = sec_now_s();
    while (!o->done) {
        reap();
        if (sec_now_s() - t0 > timeout)
            return -1;
    }
    return o->err == 0;
}

/* Posts with retries on -FI_EAGAIN; returns 0 or the negative fi error. */
typedef ssize_t (*post_fn)(void *arg, struct op *o);
static ssize_t post(post_fn fn, void *arg, struct op *o, double timeout)
{
    double t0 = sec_now_s();
    for (;;) {
        ssize_t r = fn(arg, o);
        if (r != -FI_EAGAIN) {
            o->posted = r == 0;
            return r;
        }
        reap();
        if (sec_now_s() - t0 > timeout)
            return -FI_EAGAIN;
    }
}

static int fabric_open(void)
{
    struct fi_info *h = fi_allocinfo();
    if (!h)
        return -FI_ENOMEM;
    h->caps = FI_MSG | FI_RMA;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    if (!use_shm)
        h->addr_format = FI_SOCKADDR_IN;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                              FI_MR_PROV_KEY;
    h->tx_attr->size = 64;
    h->rx_attr->size = 64;
    h->domain_attr->av_type = FI_AV_TABLE;
    h->fabric_attr->prov_name = strdup(provider);
    int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
    fi_freeinfo(h);
    if (ret) {
        say("outsider: SKIP: fi_getinfo(provider %s): %s\n", provider,
            fi_strerror(-ret));
        return 77;
    }
    char *mrs = fi_tostr(&info->domain_attr->mr_mode, FI_TYPE_MR_MODE);
    say("outsider: provider %s, fabric %s, domain %s, mr_mode [%s]\n",
        info->fabric_attr->prov_name, info->fabric_attr->name,
        info->domain_attr->name, mrs ? mrs : "?");

#define TRY(call) do { ret = (call); if (ret) { \
        say("outsider: %s: %s\n", #call, fi_strerror(-ret)); return 2; } \
    } while (0)
    TRY(fi_fabric(info->fabric_attr, &fabric, NULL));
    TRY(fi_domain(fabric, info, &domain, NULL));
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_DATA,
                            .wait_obj = FI_WAIT_NONE, .size = NOPS + 64};
    TRY(fi_cq_open(domain, &ca, &cq, NULL));

    ops = calloc(NOPS, sizeof *ops);
    size_t alen = NOPS * SLOT_BYTES + BIG_BYTES;
    if (!ops || posix_memalign((void **)&arena, 4096, alen))
        return 2;
    memset(arena, 0, alen);
    TRY(fi_mr_reg(domain, arena, alen, FI_SEND | FI_RECV | FI_READ | FI_WRITE,
                  0, 0xC0FFEE5EC, 0, &arena_mr, NULL));
    arena_desc = fi_mr_desc(arena_mr);
#undef TRY
    return 0;
}

static void target_close(struct target *t)
{
    if (t->ep)
        fi_close(&t->ep->fid);
    if (t->av)
        fi_close(&t->av->fid);
    t->ep = NULL;
    t->av = NULL;
}

/* A new endpoint and AV of ours towards t.  Needed after a failed
 * operation: when the target drops the connection (it does for a bad key),
 * tcp;ofi_rxm fails every later operation on that AV entry with ENOTCONN;
 * fi_av_remove + fi_av_insert of the same address works only once rxm has
 * processed the shutdown (timing-dependent), and the victim's rxm keys
 * connections by *our* name, so a new endpoint (new port) is the reliable
 * way to get a new connection. */
static int fresh(struct target *t)
{
    target_close(t);
    if (t->dead)
        return -1;
    struct fi_av_attr aa = {.type = FI_AV_TABLE, .count = 4};
    int ret = fi_av_open(domain, &aa, &t->av, NULL);
    if (!ret)
        ret = fi_endpoint(domain, info, &t->ep, NULL);
    if (!ret)
        ret = fi_ep_bind(t->ep, &t->av->fid, 0);
    if (!ret)
        ret = fi_ep_bind(t->ep, &cq->fid, FI_TRANSMIT | FI_RECV);
    if (!ret)
        ret = fi_enable(t->ep);
    if (ret) {
        snprintf(t->dead_why, sizeof t->dead_why,
                 "opening an endpoint of ours failed: %s", fi_strerror(-ret));
        say("outsider: %s\n", t->dead_why);
        t->dead = 1;
        return -1;
    }
    const void *addr = use_shm ? (const void *)t->name : (const void *)&t->sin;
    int n = fi_av_insert(t->av, addr, 1, &t->fa, 0, NULL);
    if (n != 1) {
        snprintf(t->dead_why, sizeof t->dead_why,
                 "fi_av_insert of its address failed (%s)%s",
                 n < 0 ? fi_strerror(-n) : "address rejected",
                 t->shm_denied ? ": we may not open its /dev/shm file, so "
                                 "shm cannot map its region" : "");
        say("outsider: %s: %s\n", t->label, t->dead_why);
        t->dead = 1;
        return -1;
    }
    t->eps++;
    return 0;
}

static void fabric_close(void)
{
    if (arena_mr)
        fi_close(&arena_mr->fid);
    if (cq)
        fi_close(&cq->fid);
    if (domain)
        fi_close(&domain->fid);
    if (fabric)
        fi_close(&fabric->fid);
    if (info)
        fi_freeinfo(info);
}

/* ---------------------------------------------------------------- RMA */

struct rma_arg {
    int write;
    uint8_t *buf;
    size_t len;
    struct fid_ep *ep;
    fi_addr_t dest;
    uint64_t addr, key;
};

static ssize_t rma_post(void *arg, struct op *o)
{
    struct rma_arg *a = arg;
    struct iovec iov = {.iov_base = a->buf, .iov_len = a->len};
    struct fi_rma_iov riov = {.addr = a->addr, .len = a->len, .key = a->key};
    struct fi_msg_rma m = {
        .msg_iov = &iov, .desc = &arena_desc, .iov_count = 1,
        .addr = a->dest, .rma_iov = &riov, .rma_iov_count = 1,
        .context = &o->ctx,
    };
    return a->write ? fi_writemsg(a->ep, &m,
                                  FI_COMPLETION | FI_DELIVERY_COMPLETE)
                    : fi_readmsg(a->ep, &m, FI_COMPLETION);
}

struct tally {
    unsigned ok, rejected, timeout, postfail;
    char first_err[200];
};

static void tally_err(struct tally *t, const char *fmt, ...)
{
    if (t->first_err[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->first_err, sizeof t->first_err, fmt, ap);
    va_end(ap);
}

static const char *mode_name(int m) { return m ? "offset" : "virt-addr"; }

static void hex(char *out, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
}

static void attack_rma(struct target *t, size_t nt)
{
    const size_t rlen = 64, wlen = 16;
    static const char mark[17] = "OUTSIDER-WROTE!!";
    for (size_t ti = 0; ti < nt; ti++) {
        for (int write = 0; write <= 1; write++) {
            struct tally ty = {0};
            if (t[ti].dead) {
                say("rma: %s: %s not attempted: %s\n", t[ti].label,
                    write ? "fi_write" : "fi_read", t[ti].dead_why);
                continue;
            }
            unsigned consecutive_timeouts = 0;
            for (int key = 0; key <= max_key && !t[ti].dead; key++) {
                for (int mode = 0; mode <= 1 && !t[ti].dead; mode++) {
                    uint8_t *buf;
                    struct op *o = new_op(&buf);
                    if (!o) {
                        say("outsider: out of operation slots\n");
                        return;
                    }
                    uint64_t off = write ? SEC_WRITE_OFF : 0;
                    struct rma_arg a = {
                        .write = write, .buf = buf, .len = write ? wlen : rlen,
                        .ep = t[ti].ep, .dest = t[ti].fa, .key = (uint64_t)key,
                        .addr = mode ? off : seg_addr + off,
                    };
                    if (write)
                        memcpy(buf, mark, wlen);
                    else
                        memset(buf, 0, rlen);
                    ssize_t r = post(rma_post, &a, o, op_timeout);
                    int w = r ? -1 : wait_op(o, op_timeout);
                    if (r && r != -FI_EAGAIN) {
                        ty.postfail++;
                        tally_err(&ty, "post: %s", fi_strerror((int)-r));
                        fresh(&t[ti]);
                        continue;
                    }
                    if (w < 0) {
                        /* Not accepted for posting (no connection) or no
                         * completion within op_timeout. */
                        ty.timeout++;
                        tally_err(&ty, "key %d %s: %s", key, mode_name(mode),
                                  r ? "posting kept returning -FI_EAGAIN "
                                      "(no connection)" : "no completion");
                        fresh(&t[ti]);
                        if (++consecutive_timeouts >= 3) {
                            snprintf(t[ti].dead_why, sizeof t[ti].dead_why,
                                     "it stopped answering (3 operations "
                                     "in a row got no completion within "
                                     "%.1f s)", op_timeout);
                            say("rma: %s: %s; skipping it\n", t[ti].label,
                                t[ti].dead_why);
                            t[ti].dead = 1;
                        }
                        continue;
                    }
                    consecutive_timeouts = 0;
                    if (w == 0) {
                        ty.rejected++;
                        tally_err(&ty, "key %d %s: %s", key, mode_name(mode),
                                  o->errstr);
                        fresh(&t[ti]);
                        continue;
                    }
                    ty.ok++;
                    if (write) {
                        breach("rma: fi_write of %zu bytes with guessed key "
                               "%d (%s address 0x%" PRIx64 ") to %s "
                               "completed: the target accepted the key",
                               wlen, key, mode_name(mode), a.addr,
                               t[ti].label);
                        continue;
                    }
                    size_t match = 0;
                    for (size_t k = 0; k < rlen; k++)
                        match += have_seed && buf[k] == sec_pat(pat_seed, k);
                    char hx[2 * 16 + 1];
                    hex(hx, buf, 16);
                    if (have_seed && match == rlen)
                        breach("rma: fi_read of %zu bytes with guessed key %d "
                               "(%s address 0x%" PRIx64 ") from %s "
                               "returned the victim's secret segment pattern "
                               "(%s...)", rlen, key, mode_name(mode), a.addr,
                               t[ti].label, hx);
                    else
                        breach("rma: fi_read of %zu bytes with guessed key %d "
                               "(%s address 0x%" PRIx64 ") from %s "
                               "completed: the target accepted the key and "
                               "returned %s... (%zu of %zu bytes match the "
                               "segment pattern)", rlen, key, mode_name(mode),
                               a.addr, t[ti].label, hx, match, rlen);
                }
            }
            say("rma: %s: %s with keys 0..%d x {virt-addr, offset}: %u "
                "completed, %u rejected, %u timed out, %u failed to post%s%s\n",
                t[ti].label,
                write ? "fi_write" : "fi_read", max_key, ty.ok, ty.rejected,
                ty.timeout, ty.postfail, ty.first_err[0] ? "; first error: " : "",
                ty.first_err);
        }
    }
}

/* ------------------------------------------------------------ sending */

struct send_arg {
    const void *buf;
    size_t len;
    struct fid_ep *ep;
    fi_addr_t dest;
};

static ssize_t send_post(void *arg, struct op *o)
{
    struct send_arg *a = arg;
    struct iovec iov = {.iov_base = (void *)a->buf, .iov_len = a->len};
    struct fi_msg m = {.msg_iov = &iov, .desc = &arena_desc, .iov_count = 1,
                       .addr = a->dest, .context = &o->ctx};
    return fi_sendmsg(a->ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

/* Sends len bytes (already in the arena at buf) and reports the outcome. */
static void send_one(struct target *t, const char *what, const uint8_t *buf,
                     size_t len, struct op *o)
{
    if (t->dead) {
        say("  %-44s -> %s: not sent: %s\n", what, t->label, t->dead_why);
        return;
    }
    struct send_arg a = {buf, len, t->ep, t->fa};
    ssize_t r = post(send_post, &a, o, op_timeout);
    const char *res;
    char tmp[200];
    int failed = 1;
    if (r == -FI_EAGAIN) {
        res = "not posted: -FI_EAGAIN for the whole timeout (no connection)";
    } else if (r) {
        snprintf(tmp, sizeof tmp, "not posted: %s", fi_strerror((int)-r));
        res = tmp;
    } else {
        int w = wait_op(o, op_timeout);
        if (w > 0) {
            res = "delivered (FI_DELIVERY_COMPLETE)";
            failed = 0;
        } else if (w == 0) {
            snprintf(tmp, sizeof tmp, "failed: %s", o->errstr);
            res = tmp;
        } else {
            res = "no completion (timed out)";
        }
    }
    say("  %-44s -> %s: %zu bytes, %s\n", what, t->label, len, res);
    if (failed) {
        if (r == -FI_EAGAIN || !o->done)
            t->silent++;
        if (t->silent >= 3 && !t->dead) {
            snprintf(t->dead_why, sizeof t->dead_why,
                     "it stopped answering (3 messages without an answer)");
            t->dead = 1;
        }
        fresh(t);       /* the next message gets a new connection */
    }
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* struct ofi_amh (conduits/ofi/ofi_internal.h) + the 24-byte AM header
 * (firehose/am_wire.h) + nargs arguments; returns the bytes written. */
static size_t forge(uint8_t *p, uint32_t csrc, uint32_t seq, uint8_t kind,
                    uint8_t handler, uint16_t src_path, uint32_t src_rank,
                    uint32_t payload_len, uint64_t long_dst,
                    const uint64_t *args, unsigned nargs)
{
    put32(p, csrc);
    put32(p + 4, seq);
    uint8_t *h = p + 8;
    h[0] = 0xF4;              /* FH_AM_MAGIC */
    h[1] = kind;
    h[2] = handler;
    h[3] = (uint8_t)nargs;
    put16(h + 4, src_path);
    put16(h + 6, 0);          /* credits */
    put32(h + 8, src_rank);
    put32(h + 12, payload_len);
    put64(h + 16, long_dst);
    for (unsigned i = 0; i < nargs; i++)
        put64(h + 24 + 8 * i, args[i]);
    return 8 + 24 + 8 * (size_t)nargs;
}

enum { K_REQ_SHORT = 1, K_REQ_MEDIUM = 2, K_REQ_LONG = 3, K_REP_SHORT = 5,
       K_REP_LONG = 7 };

static int npaths(void)
{
    if (npaths_opt > 0)
        return npaths_opt;
    /* What fh_init computes with the defaults (FH_PATHS=independent,
     * FH_MAX_THREADS=0) on this same host. */
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    c = c < 1 ? 1 : c > 16 ? 16 : c;
    return 1 + (int)c;
}

static void attack_am(struct target *t, size_t nt)
{
    const int P = npaths();
    /* Rank 1's last path: the victim's main thread uses path 1, so this
     * source has sent nothing yet and its next sequence number is 0. */
    const uint32_t csrc = (uint32_t)(1 * P + (P - 1));
    static const char lpay[17] = "FORGED-LONG-AM!!";
    say("am: forged AMs claiming rank 1 path %d (conduit source index %u = "
        "rank 1 x %d paths + path %d, sequence 0..3), handler %u\n", P - 1,
        csrc, P, P - 1, SEC_HANDLER);
    for (size_t ti = 0; ti < nt; ti++) {
        uint64_t args[2] = {SEC_ARG0, 0};
        struct { const char *what; uint8_t kind; uint32_t plen;
                 uint64_t dst; } m[] = {
            {"forged short request (rank 1)", K_REQ_SHORT, 0, 0},
            {"forged short reply (rank 1)", K_REP_SHORT, 0, 0},
            {"forged long request into the segment", K_REQ_LONG, 16,
             seg_addr + SEC_LONG_OFF},
            {"forged long reply into the segment", K_REP_LONG, 16,
             seg_addr + SEC_LONG_OFF + 32},
        };
        for (unsigned i = 0; i < sizeof m / sizeof m[0]; i++) {
            uint8_t *buf;
            struct op *o = new_op(&buf);
            if (!o)
                return;
            args[1] = (uint64_t)((ti << 8) | i);
            size_t len = forge(buf, csrc, i, m[i].kind, SEC_HANDLER,
                               (uint16_t)(P - 1), 1, m[i].plen, m[i].dst,
                               args, 2);
            if (m[i].plen) {
                memcpy(buf + len, lpay, m[i].plen);
                len += m[i].plen;
            }
            send_one(&t[ti], m[i].what, buf, len, o);
        }
    }
}

static void attack_runt(struct target *t, size_t nt)
{
    for (size_t ti = 0; ti < nt; ti++)
        for (size_t len = 1; len <= 7; len++) {
            uint8_t *buf;
            struct op *o = new_op(&buf);
            if (!o)
                return;
            memset(buf, 0, len);
            char what[64];
            snprintf(what, sizeof what, "runt of %zu byte%s", len,
                     len == 1 ? "" : "s");
            send_one(&t[ti], what, buf, len, o);
        }
}

static void attack_big(struct target *t, size_t nt)
{
    const int P = npaths();
    const uint32_t csrc = (uint32_t)(1 * P + (P - 1));
    uint8_t *big = arena + NOPS * SLOT_BYTES;
    const size_t blen = ((size_t)64 << 10) + 3;
    for (size_t ti = 0; ti < nt; ti++) {
        uint8_t *buf;
        struct op *o = new_op(&buf);
        if (!o)
            return;
        /* 33 bytes: conduit header (in sequence) + 25 bytes that are no AM
         * header, so the next message starts at an odd offset. */
        put32(buf, csrc);
        put32(buf + 4, 0);
        memset(buf + 8, 0xA5, 25);
        send_one(&t[ti], "33-byte shim (odd offset)", buf, 33, o);

        o = new_op(&buf);
        if (!o)
            return;
        uint64_t args[2] = {SEC_ARG0, 0xB16};
        size_t h = forge(big, csrc, 1, K_REQ_MEDIUM, SEC_HANDLER,
                         (uint16_t)(P - 1), 1, 0, 0, args, 2);
        put32(big + 8 + 12, (uint32_t)(blen - h));   /* payload_len */
        for (size_t k = h; k < blen; k++)
            big[k] = (uint8_t)(k * 7);
        send_one(&t[ti], "oversized medium request (64 KiB + 3)", big, blen,
                 o);
    }
}

static void attack_badsrc(struct target *t, size_t nt)
{
    const int P = npaths();
    const uint32_t csrc = (uint32_t)(1 * P + (P - 1));
    for (size_t ti = 0; ti < nt; ti++) {
        uint8_t *buf;
        uint64_t args[2] = {SEC_ARG0, 0xBAD5};
        struct op *o = new_op(&buf);
        if (!o)
            return;
        size_t len = forge(buf, csrc, 0, K_REQ_SHORT, SEC_HANDLER, 0, 7, 0, 0,
                           args, 2);
        send_one(&t[ti], "AM header source rank 7 (job of 2)", buf, len, o);
        o = new_op(&buf);
        if (!o)
            return;
        len = forge(buf, 0xFFFFFFF0u, 0, K_REQ_SHORT, SEC_HANDLER, 0, 1, 0, 0,
                    args, 2);
        send_one(&t[ti], "conduit source index 0xfffffff0", buf, len, o);
    }
}

static void attack_garbage(struct target *t, size_t nt)
{
    static const size_t lens[] = {40, 100, 4096};
    uint64_t s = 0x5EC0BAD5EEDULL;
    for (size_t ti = 0; ti < nt; ti++)
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            uint8_t *buf;
            struct op *o = new_op(&buf);
            if (!o)
                return;
            uint8_t *dst = lens[i] <= SLOT_BYTES ? buf
                                                 : arena + NOPS * SLOT_BYTES;
            for (size_t k = 0; k < lens[i]; k++) {
                s += 0x9e3779b97f4a7c15ULL;
                dst[k] = (uint8_t)sec_mix64(s);
            }
            char what[64];
            snprintf(what, sizeof what, "%zu random bytes", lens[i]);
            send_one(&t[ti], what, dst, lens[i], o);
        }
}

/* --------------------------------------------------------------- main */

static void usage(void)
{
    fprintf(stderr,
            "usage: outsider --pid PID [--ports P1,P2,...|--scan-uid] --seg ADDR "
            "[--len N] [--seed S]\n"
            "                [--attack rma,am,runt,big,badsrc,garbage|all] "
            "[--npaths N]\n"
            "                [--timeout SEC] [--provider NAME] "
            "[--max-key K]\n"
            "       outsider --list-ports --pid PID\n");
    exit(2);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const struct option lo[] = {
        {"pid", required_argument, NULL, 'p'},
        {"ports", required_argument, NULL, 'P'},
        {"list-ports", no_argument, NULL, 'L'},
        {"scan-uid", no_argument, NULL, 'U'},
        {"seg", required_argument, NULL, 's'},
        {"len", required_argument, NULL, 'l'},
        {"seed", required_argument, NULL, 'S'},
        {"attack", required_argument, NULL, 'a'},
        {"npaths", required_argument, NULL, 'n'},
        {"timeout", required_argument, NULL, 't'},
        {"provider", required_argument, NULL, 'v'},
        {"max-key", required_argument, NULL, 'k'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'p': target_pid = atoi(optarg); break;
        case 'P': ports_opt = optarg; break;
        case 'L': list_ports_only = 1; break;
        case 'U': scan_uid = 1; break;
        case 's': seg_addr = strtoull(optarg, NULL, 0); have_seg = 1; break;
        case 'l': seg_len = strtoull(optarg, NULL, 0); break;
        case 'S': pat_seed = strtoull(optarg, NULL, 0); have_seed = 1; break;
        case 'a': attacks = optarg; break;
        case 'n': npaths_opt = atoi(optarg); break;
        case 't': op_timeout = atof(optarg); break;
        case 'v': provider = optarg; break;
        case 'k': max_key = atoi(optarg); break;
        default: usage();
        }
    }
    if (target_pid <= 0)
        usage();

    if (list_ports_only) {
        struct lport *ls = NULL;
        size_t nl = read_listeners(&ls);
        unsigned long *ino = NULL;
        long ni = pid_socket_inodes(target_pid, &ino);
        if (ni < 0) {
            fprintf(stderr, "outsider: /proc/%d/fd: %s\n", target_pid,
                    strerror(errno));
            return 2;
        }
        int first = 1;
        for (size_t i = 0; i < nl; i++)
            for (long k = 0; k < ni; k++)
                if (ino[k] == ls[i].inode) {
                    printf("%s%u", first ? "" : ",", ls[i].port);
                    first = 0;
                }
        printf("\n");
        free(ls);
        free(ino);
        return first ? 2 : 0;
    }
    if (!have_seg && (has_attack("rma") || has_attack("am")))
        usage();
    if (!provider)
        provider = getenv("FI_PROVIDER");
    if (!provider || !*provider)
        provider = "tcp";
    use_shm = strcmp(provider, "shm") == 0;

    say("outsider: uid %u gid %u pid %d attacking pid %d (segment 0x%" PRIx64
        ", %" PRIu64 " bytes), attacks %s\n", (unsigned)getuid(),
        (unsigned)getgid(), (int)getpid(), target_pid, seg_addr, seg_len,
        attacks);

    struct target *t = NULL;
    size_t nt = find_targets(&t);
    if (nt == 0) {
        say("outsider: ERROR: found no %s of pid %d\n",
            use_shm ? "shm endpoint name" : "listening TCP port", target_pid);
        return 2;
    }
    int ret = fabric_open();
    if (ret) {
        fabric_close();
        return ret;
    }
    for (size_t i = 0; i < nt; i++)
        fresh(&t[i]);

    double t0 = sec_now_s();
    if (has_attack("rma"))
        attack_rma(t, nt);
    if (has_attack("am"))
        attack_am(t, nt);
    if (has_attack("big"))
        attack_big(t, nt);
    if (has_attack("badsrc"))
        attack_badsrc(t, nt);
    if (has_attack("garbage"))
        attack_garbage(t, nt);
    if (has_attack("runt"))
        attack_runt(t, nt);
    /* Let the victim process what was sent before our endpoint closes. */
    for (double t1 = sec_now_s(); sec_now_s() - t1 < 1.0;)
        reap();
    unsigned neps = 0;
    for (size_t i = 0; i < nt; i++) {
        neps += t[i].eps;
        target_close(&t[i]);
    }
    say("outsider: done in %.1f s, %zu operations over %u endpoints of ours, "
        "%lu breach%s seen from here\n", sec_now_s() - t0, nops_used, neps,
        sec_breaches, sec_breaches == 1 ? "" : "es");
    fabric_close();
    free(t);
    free(ops);
    free(arena);
    return sec_breaches ? 1 : 0;
}
