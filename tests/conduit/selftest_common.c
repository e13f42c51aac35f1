/*
 * selftest_common.c -- the test logic shared by the conduit self-tests; see
 * selftest_common.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conduits/ofi/ofi_config.h"
#include "conduits/conduit.h"
#include "firehose/boot/bootstrap.h"
#include "firehose/util/log.h"
#include "selftest_common.h"

int g_rank = 0;

/* FH_OFI_ENDPOINT=msg|rdm of the environment (the self-tests build their
 * ofi settings by hand; rdm is trusted: they run on loopback). */
int st_ofi_endpoint(void)
{
    const char *e = getenv("FH_OFI_ENDPOINT");
    if (e != NULL && strcmp(e, "rdm") == 0)
        return OFI_EPC_RDM;
    if (e != NULL && strcmp(e, "msg") == 0)
        return OFI_EPC_MSG;
    return OFI_EPC_AUTO;
}

/* ------------------------------------------------------------ boot stubs */

struct sock_boot { int fd; };

static void xwrite(int fd, const void *b, size_t n)
{
    const char *p = b;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        CHECK(w > 0, "write: %s", strerror(errno));
        p += w;
        n -= (size_t)w;
    }
}
static void xread(int fd, void *b, size_t n)
{
    char *p = b;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        CHECK(r > 0, "read: %s", r ? strerror(errno) : "EOF");
        p += r;
        n -= (size_t)r;
    }
}

static int ag_self(struct fh_boot *b, const void *in, void *out, size_t len)
{
    (void)b;
    memcpy(out, in, len);
    return 0;
}
/* Two ranks over a socketpair: write ours, read theirs.  The socket buffer
 * holds what we write before the peer reads (small exchanges only; larger
 * ones are done by a writer thread-free ordering: rank 0 writes first). */
static int ag_pair(struct fh_boot *b, const void *in, void *out, size_t len)
{
    struct sock_boot *sb = b->priv;
    char *o = out;
    uint64_t l = len, pl;
    if (b->rank == 0) {
        xwrite(sb->fd, &l, sizeof l);
        xwrite(sb->fd, in, len);
        xread(sb->fd, &pl, sizeof pl);
        CHECK(pl == l, "allgather length mismatch");
        xread(sb->fd, o + len, len);
    } else {
        xread(sb->fd, &pl, sizeof pl);
        CHECK(pl == l, "allgather length mismatch");
        xread(sb->fd, o, len);
        xwrite(sb->fd, &l, sizeof l);
        xwrite(sb->fd, in, len);
    }
    memcpy(o + (size_t)b->rank * len, in, len);
    return 0;
}
static int bar_any(struct fh_boot *b)
{
    char x = 0, y[2];
    return b->ops->allgather(b, &x, y, 1);
}
__attribute__((noreturn)) static void abort_any(struct fh_boot *b, int code,
                                                const char *msg)
{
    (void)b;
    fprintf(stderr, "abort: %s\n", msg);
    _exit(code);
}
static void fin_any(struct fh_boot *b) { (void)b; }
static void fail_any(struct fh_boot *b, const char *why) { (void)b; (void)why; }

static const fh_boot_ops_t self_ops = {"selftest-self", ag_self, bar_any,
                                       abort_any, fin_any, fail_any};
static const fh_boot_ops_t pair_ops = {"selftest-pair", ag_pair, bar_any,
                                       abort_any, fin_any, fail_any};

/* ------------------------------------------------------------ messages */

static size_t flood_len(const struct test *t, uint32_t seq)
{
    return st_flood_small && (seq / RX_MSGS) % 2 ? st_flood_small : t->P;
}

static size_t size_for(const struct test *t, uint32_t seq)
{
    /* 16..80 each, then 2^k-1, 2^k, 2^k+1 up to P, then P. */
    static size_t tab[256];
    static size_t n;   /* computed once per process (P is fixed) */
    if (!n) {
        for (size_t s = 16; s <= 80 && s <= t->P; s++)
            tab[n++] = s;
        for (size_t k = 128; k <= t->P; k <<= 1) {
            tab[n++] = k - 1;
            tab[n++] = k;
            if (k + 1 <= t->P)
                tab[n++] = k + 1;
        }
        tab[n++] = t->P;
    }
    return tab[(seq * 2654435761u) % n];
}

static void fill_msg(char *m, int kind, uint32_t seq, int rank, int path,
                     size_t len)
{
    struct amh h = {(uint32_t)kind, seq, (uint16_t)rank, (uint16_t)path,
                    (uint32_t)len};
    memcpy(m, &h, sizeof h);
    for (size_t i = sizeof h; i < len; i++)
        m[i] = (char)pat(seq, path, i);
}

static void check_payload(const char *buf, size_t len, uint32_t seq, int path)
{
    for (size_t i = sizeof(struct amh); i < len; i++)
        if ((uint8_t)buf[i] != pat(seq, path, i))
            DIE("AM seq %u from path %d: byte %zu is %02x, want %02x", seq,
                path, i, (uint8_t)buf[i], pat(seq, path, i));
}

int do_poll(struct tpath *tp)
{
    int n = CD.poll(tp->cp, 64);
    CHECK(n >= 0, "poll path %d: %d", tp->index, n);
    return n;
}

/* Main thread only: polls tp and our service path (which must be polled
 * for anything to progress under manual progress, e.g. connection setup). */
void pump(struct tpath *tp)
{
    do_poll(tp);
    if (tp->index != 0)
        do_poll(&tp->t->paths[0]);
}

/* Sends hdr+payload split at 16 bytes, to exercise the concatenation. */
static int send_msg(struct tpath *tp, int rank, int path, const char *m,
                    size_t len)
{
    size_t h = len < sizeof(struct amh) ? len : sizeof(struct amh);
    return CD.am_send(tp->cp, rank, path, m, h, m + h, len - h);
}

static void pq_flush(struct test *t)
{
    struct tpath *tp = &t->paths[0];
    while (t->pq_head != t->pq_tail) {
        struct pending *pe = &t->pq[t->pq_head % 4096];
        size_t len = size_for(t, pe->seq * 7u + 3u);
        char *m = tp->msg;
        fill_msg(m, K_REP, pe->seq, t->rank, 0, len);
        int rc = send_msg(tp, pe->rank, pe->path, m, len);
        if (rc == FH_ERR_AGAIN)
            return;
        CHECK(rc == FH_OK, "reply send: %d", rc);
        t->pq_head++;
    }
}

/* ------------------------------------------------------------ upcalls */

static void on_am(void *arg, int src_rank, int src_path, const void *buf,
                  size_t len)
{
    (void)src_rank;
    (void)src_path;
    struct tpath *tp = arg;
    struct test *t = tp->t;
    if (((uintptr_t)buf & 7) != 0)
        t->misaligned++;
    if (tp->index == 0 && t->tiny_expect < 16 && len < sizeof(struct amh)) {
        /* tiny phase: lengths 0..15 in order, bytes = pat(len, 1, i) */
        CHECK(len == t->tiny_expect, "tiny AM: len %zu, want %u", len,
              t->tiny_expect);
        for (size_t i = 0; i < len; i++)
            CHECK((uint8_t)((const char *)buf)[i] == pat((uint32_t)len, 1, i),
                  "tiny AM %zu: byte %zu", len, i);
        t->tiny_expect++;
        return;
    }
    CHECK(len >= sizeof(struct amh), "AM of %zu bytes on path %d", len,
          tp->index);
    struct amh h;
    memcpy(&h, buf, sizeof h);
    CHECK(h.len == len, "AM header says %u bytes, got %zu", h.len, len);
    switch (h.kind) {
    case K_REQ: {
        CHECK(tp->index == 0, "request on path %d", tp->index);
        CHECK(h.src_rank < t->nranks && h.src_path < NPATHS, "bad source");
        uint32_t *ex = &t->expect[h.src_rank][h.src_path];
        CHECK(h.seq == *ex, "request from (%u,%u): seq %u, want %u",
              h.src_rank, h.src_path, h.seq, *ex);
        (*ex)++;
        CHECK(len == size_for(t, h.seq), "request %u: len %zu", h.seq, len);
        check_payload(buf, len, h.seq, h.src_path);
        /* reply from inside the upcall, as the runtime does */
        struct pending pe = {h.src_rank, h.src_path, h.seq};
        CHECK(t->pq_tail - t->pq_head < 4096, "reply queue overflow");
        t->pq[t->pq_tail++ % 4096] = pe;
        pq_flush(t);
        break;
    }
    case K_REP:
        CHECK(tp->index != 0, "reply on the service path");
        CHECK(h.seq == tp->reply_seq, "path %d: reply seq %u, want %u",
              tp->index, h.seq, tp->reply_seq);
        CHECK(len == size_for(t, h.seq * 7u + 3u), "reply %u: len %zu", h.seq,
              len);
        check_payload(buf, len, h.seq, 0);
        tp->reply_seq++;
        tp->credits++;
        break;
    case K_FLOOD:
        CHECK(tp->index == 0, "flood on path %d", tp->index);
        CHECK(h.seq == t->flood_expect, "flood seq %u, want %u", h.seq,
              t->flood_expect);
        CHECK(len == flood_len(t, h.seq), "flood len %zu", len);
        check_payload(buf, len, h.seq, h.src_path);
        t->flood_expect++;
        t->flood_recv++;
        t->paths[1].credits++;    /* emulated credit return */
        break;
    case K_DONE:
        t->peer_done++;
        break;
    default:
        DIE("unknown AM kind %u", h.kind);
    }
}

static void on_complete(void *arg, void *op_ctx, int status)
{
    struct tpath *tp = arg;
    struct test *t = tp->t;
    CHECK(op_ctx == (void *)tp, "foreign op_ctx");
    if (t->expect_err == 2) {       /* ibv cqerr: either, counted */
        CHECK(status == FH_OK || status == FH_ERR_TRANSPORT,
              "completion with %s", fh_err_name(status));
        if (status != FH_OK)
            t->got_err++;
        tp->rma_pending--;
        return;
    }
    if (t->expect_err) {
        CHECK(status == FH_ERR_TRANSPORT || status == FH_ERR_PEER_DEAD,
              "an RMA that must fail (bad rkey, broken QP) completed "
              "with %s", fh_err_name(status));
        t->got_err = status;
        tp->rma_pending--;
        return;
    }
    CHECK(status == FH_OK, "RMA completion status %s", fh_err_name(status));
    if (t->v_expect) {
        /* 1 rank: the data must be visible right now. */
        if (memcmp(t->T + t->v_off, t->v_expect, t->v_len) != 0)
            DIE("put of %zu bytes at %zu completed but data not visible",
                t->v_len, t->v_off);
        t->verified_in_upcall++;
        t->v_expect = NULL;
    }
    tp->rma_pending--;
}

/* A selftest's peers never send anything malformed: a drop is a failure. */
static void on_drop(void *arg, int src_rank, const char *why)
{
    const struct tpath *tp = arg;
    CHECK(0, "path %d dropped a message from rank %d: %s", tp->index, src_rank,
          why);
}

const fh_conduit_upcalls_t st_upcalls = {.on_am = on_am, .on_drop = on_drop,
                                         .on_complete = on_complete};

/* ------------------------------------------------------------ helpers */

static uint64_t xs(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}
void gen(char *dst, size_t len, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = xs(&s);
        memcpy(dst + i, &v, 8);
    }
    uint64_t v = xs(&s);
    for (; i < len; i++, v >>= 8)
        dst[i] = (char)v;
}
double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Largest put/get of the rma phase (FH_SELFTEST_MAXRMA, read by the ibv
 * selftest; both ranks inherit it). */
size_t st_maxrma = MAXRMA;

/* Parameters of RMA test i, computed identically on both ranks. */
struct rparm { size_t len, soff, doff, goff; int inject, batch; };
static const size_t fixed_sizes[] = {1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32,
    33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1000, 4095, 4096, 4097,
    16383, 16384, 16385, 65535, 65536, 65537, (1u << 20), (1u << 20) + 3,
    (size_t)8 << 20};
#define NFIXED (sizeof fixed_sizes / sizeof fixed_sizes[0])
#define NRMA   (NFIXED + 60)

static struct rparm rma_parm(const struct test *t, int i)
{
    struct rparm r = {0};
    uint64_t s = (uint64_t)i * 7919u + 17u;
    xs(&s);
    if ((size_t)i < NFIXED) {
        r.len = fixed_sizes[i];
    } else if (i % 3 == 0 && t->lim.max_inject) {
        r.len = 1 + xs(&s) % t->lim.max_inject;
        r.inject = 1;
    } else {
        int bits = (int)(xs(&s) % 23);          /* log-uniform up to 8 MiB */
        r.len = 1 + xs(&s) % ((size_t)1 << (bits + 1));
        r.batch = (i % 5 == 1);
    }
    if (r.len > st_maxrma)
        r.len = st_maxrma;
    if (r.len <= t->lim.max_inject && i % 2)
        r.inject = 1;
    r.soff = xs(&s) % (TSZ - r.len);
    r.doff = xs(&s) % (TSZ - r.len);
    r.goff = xs(&s) % (TSZ - r.len);
    return r;
}

/* ------------------------------------------------------------ setup */

void st_setup(struct test *t)
{
    int rc;
    st_open(t);
    t->P = t->lim.am_max_packet;
    (void)size_for(t, 0);    /* build the size table before threads start */
    for (int i = 0; i < NPATHS; i++) {
        struct tpath *tp = &t->paths[i];
        tp->index = i;
        tp->t = t;
        tp->msg = malloc(t->P);
        CHECK(tp->msg, "malloc");
        fh_path_attr_t pa = {.index = i, .rx_msgs = RX_MSGS,
                             .upcall_arg = tp};
        rc = CD.path_create(t->c, &pa, &tp->cp);
        CHECK(rc == FH_OK, "path_create %d: %d", i, rc);
    }
    rc = CD.connect(t->c, &t->boot);
    CHECK(rc == FH_OK, "connect: %d", rc);

    t->T = aligned_alloc(4096, TSZ);
    t->S = aligned_alloc(4096, TSZ);
    t->G = aligned_alloc(4096, TSZ);
    t->shadow = malloc(TSZ);
    CHECK(t->T && t->S && t->G && t->shadow, "malloc");
    memset(t->T, 0xEE, TSZ);
    memset(t->shadow, 0xEE, TSZ);
    rc = CD.mr_reg(t->c, t->T, TSZ,
                   FH_MR_LOCAL | FH_MR_REMOTE_READ | FH_MR_REMOTE_WRITE,
                   &t->mrT, &t->rk[t->rank]);
    CHECK(rc == FH_OK, "mr_reg T: %d", rc);
    rc = CD.mr_reg(t->c, t->S, TSZ, FH_MR_LOCAL, &t->mrS, NULL);
    CHECK(rc == FH_OK, "mr_reg S: %d", rc);
    rc = CD.mr_reg(t->c, t->G, TSZ, FH_MR_LOCAL, &t->mrG, NULL);
    CHECK(rc == FH_OK, "mr_reg G: %d", rc);
    struct { fh_rkey_t rk; uint64_t base; } mine = {t->rk[t->rank],
        (uint64_t)(uintptr_t)t->T}, all[2];
    t->boot.ops->allgather(&t->boot, &mine, all, sizeof mine);
    for (int r = 0; r < t->nranks; r++) {
        t->rk[r] = all[r].rk;
        t->tbase[r] = all[r].base;
    }
}

void st_finish(struct test *t)
{
    CHECK(CD.mr_dereg(t->c, t->mrT) == FH_OK, "dereg");
    CHECK(CD.mr_dereg(t->c, t->mrS) == FH_OK, "dereg");
    CHECK(CD.mr_dereg(t->c, t->mrG) == FH_OK, "dereg");
    for (int i = NPATHS - 1; i >= 0; i--) {
        CD.path_destroy(t->paths[i].cp);
        free(t->paths[i].msg);
    }
    CD.close(t->c);
    free(t->T);
    free(t->S);
    free(t->G);
    free(t->shadow);
    free(t);
}

/* Barrier that keeps the service path polled (a blocking bootstrap barrier
 * would stall the peer under manual progress). */
static void poll_barrier(struct test *t)
{
    if (t->nranks == 1)
        return;
    int round = ++t->barrier_round;
    struct tpath *tp = &t->paths[0];
    char m[sizeof(struct amh)];
    fill_msg(m, K_DONE, (uint32_t)round, t->rank, 0, sizeof m);
    int rc;
    while ((rc = send_msg(tp, t->peer, 0, m, sizeof m)) == FH_ERR_AGAIN)
        do_poll(tp);
    CHECK(rc == FH_OK, "DONE send: %d", rc);
    while (t->peer_done < round)
        do_poll(tp);
    double t0 = now();          /* let our last sends drain */
    while (now() - t0 < 0.05)
        do_poll(tp);
}

/* ------------------------------------------------------------ phases */

static void phase_tiny(struct test *t)
{
    struct tpath *p1 = &t->paths[1], *p0 = &t->paths[0];
    char m[16];
    for (uint32_t len = 0; len < 16; len++) {
        for (size_t i = 0; i < len; i++)
            m[i] = (char)pat(len, 1, i);
        int rc;
        while ((rc = CD.am_send(p1->cp, 0, 0, m, len / 2, m + len / 2,
                                len - len / 2)) == FH_ERR_AGAIN)
            pump(p1);
        CHECK(rc == FH_OK, "tiny send: %d", rc);
    }
    double t0 = now();
    while (t->tiny_expect < 16) {
        do_poll(p1);
        do_poll(p0);
        CHECK(now() - t0 < 30, "tiny: only %u of 16 arrived", t->tiny_expect);
    }
    printf("PASS tiny: AMs of 0..15 bytes delivered in order and intact\n");
}

static void *sender_thread(void *arg)
{
    struct tpath *tp = arg;
    struct test *t = tp->t;
    tp->credits = WINDOW;
    double t0 = now();
    while (tp->reply_seq < st_nreq) {
        if (tp->next_seq < st_nreq && tp->credits > 0) {
            size_t len = size_for(t, tp->next_seq);
            fill_msg(tp->msg, K_REQ, tp->next_seq, t->rank, tp->index, len);
            int rc = send_msg(tp, t->peer, 0, tp->msg, len);
            if (rc == FH_OK) {
                tp->next_seq++;
                tp->credits--;
                continue;
            }
            CHECK(rc == FH_ERR_AGAIN, "am_send: %d", rc);
        }
        do_poll(tp);
        CHECK(now() - t0 < 120, "path %d: stuck at %u/%u replies", tp->index,
              tp->reply_seq, st_nreq);
    }
    atomic_store(&tp->finished, 1);
    return NULL;
}

static void phase_am(struct test *t)
{
    pthread_t th[NPATHS];
    double t0 = now();
    for (int i = 1; i < NPATHS; i++)
        CHECK(pthread_create(&th[i], NULL, sender_thread, &t->paths[i]) == 0,
              "pthread_create");
    struct tpath *p0 = &t->paths[0];
    for (;;) {
        do_poll(p0);
        pq_flush(t);
        int done = 1;
        for (int i = 1; i < NPATHS; i++)
            done &= atomic_load(&t->paths[i].finished);
        for (int i = 1; i < NPATHS; i++)
            done &= t->expect[t->peer][i] == st_nreq;
        if (done && t->pq_head == t->pq_tail)
            break;
        CHECK(now() - t0 < 180, "am phase stuck");
    }
    for (int i = 1; i < NPATHS; i++)
        pthread_join(th[i], NULL);
    double dt = now() - t0;
    poll_barrier(t);
    printf("[rank %d] PASS am: 2 threads x %u requests (16..%zu B, window %d)"
           " + replies from on_am, in order and intact, %.2f s; "
           "misaligned on_am buffers %ld\n", t->rank, st_nreq, t->P, WINDOW,
           dt, t->misaligned);
}

static void phase_flood(struct test *t)
{
    struct tpath *p1 = &t->paths[1], *p0 = &t->paths[0];
    const int rounds = 20;
    p1->credits = RX_MSGS;
    uint32_t seq = 0, total = (uint32_t)rounds * RX_MSGS;
    double t0 = now();
    while (t->flood_recv < total) {
        /* use the whole window without polling the receiver */
        while (seq < total && p1->credits > 0) {
            fill_msg(p1->msg, K_FLOOD, seq, 0, 1, flood_len(t, seq));
            int rc = send_msg(p1, 0, 0, p1->msg, flood_len(t, seq));
            if (rc == FH_ERR_AGAIN) {
                pump(p1);
                continue;
            }
            CHECK(rc == FH_OK, "flood send: %d", rc);
            seq++;
            p1->credits--;
        }
        do_poll(p1);
        do_poll(p0);
        CHECK(now() - t0 < 60, "flood stuck at %u/%u", t->flood_recv, total);
    }
    if (st_flood_small)
        printf("PASS flood: %u AMs of %zu B and %zu B (alternating rounds) "
               "with a window of rx_msgs=%d, none lost, in order, %.2f s\n",
               total, t->P, st_flood_small, RX_MSGS, now() - t0);
    else
        printf("PASS flood: %u AMs of %zu B with a window of rx_msgs=%d, "
               "none lost, in order\n", total, t->P, RX_MSGS);
}

/* OOB protocol (2 ranks): initiator sends {op, i}; target answers 1 byte. */
enum { OOB_CHECK = 1, OOB_END = 2 };

static void target_verify(struct test *t, int i)
{
    struct rparm r = rma_parm(t, i);
    gen(t->shadow + r.doff, r.len, (uint64_t)i);
    if (memcmp(t->T, t->shadow, TSZ) != 0) {
        size_t k = 0;
        while (t->T[k] == t->shadow[k])
            k++;
        DIE("put %d (%zu B at %zu): target memory differs at %zu right "
            "after the initiator's completion", i, r.len, r.doff, k);
    }
}

void wait_rma(struct test *t, struct tpath *tp)
{
    double t0 = now();
    while (tp->rma_pending > 0) {
        do_poll(tp);
        if (t->nranks == 1 || tp->index != 0)
            do_poll(&t->paths[0]);
        CHECK(now() - t0 < 60, "RMA completion never came");
    }
}

static void initiator(struct test *t)
{
    struct tpath *p1 = &t->paths[1];
    const int tr = t->peer;
    size_t bytes = 0;
    int ninject = 0, nbatch = 0;
    double t0 = now();
    for (int i = 0; i < (int)NRMA; i++) {
        struct rparm r = rma_parm(t, i);
        uint64_t raddr = t->tbase[tr] + r.doff;
        int rc;
        if (t->nranks == 1) {
            /* expected bytes, to be checked inside on_complete */
            gen(t->shadow + r.doff, r.len, (uint64_t)i);
            t->v_expect = t->shadow + r.doff;
            t->v_off = r.doff;
            t->v_len = r.len;
        }
        if (r.inject) {
            char stackbuf[65536];
            CHECK(r.len <= sizeof stackbuf, "inject size");
            gen(stackbuf, r.len, (uint64_t)i);
            p1->rma_pending++;
            while ((rc = CD.put(p1->cp, tr, 0, stackbuf, r.len, NULL, raddr,
                                &t->rk[tr], p1, 0)) == FH_ERR_AGAIN)
                pump(p1);
            CHECK(rc == FH_OK, "inject put: %d", rc);
            memset(stackbuf, 0x5A, r.len);   /* source reusable at return */
            ninject++;
        } else if (r.batch && r.len >= 8) {
            /* same bytes as one put, posted as 4 pieces with FH_POST_MORE */
            gen(t->S + r.soff, r.len, (uint64_t)i);
            t->v_expect = NULL;       /* checked below after all 4 */
            size_t q = r.len / 4;
            for (int k = 0; k < 4; k++) {
                size_t off = (size_t)k * q;
                size_t l = k == 3 ? r.len - off : q;
                p1->rma_pending++;
                while ((rc = CD.put(p1->cp, tr, 0, t->S + r.soff + off, l,
                                    t->mrS, raddr + off, &t->rk[tr], p1,
                                    k < 3 ? FH_POST_MORE : 0)) ==
                       FH_ERR_AGAIN)
                    pump(p1);
                CHECK(rc == FH_OK, "batched put: %d", rc);
            }
            nbatch++;
        } else {
            gen(t->S + r.soff, r.len, (uint64_t)i);
            p1->rma_pending++;
            while ((rc = CD.put(p1->cp, tr, 0, t->S + r.soff, r.len,
                                t->mrS, raddr, &t->rk[tr], p1, 0)) ==
                   FH_ERR_AGAIN)
                pump(p1);
            CHECK(rc == FH_OK, "put: %d", rc);
        }
        wait_rma(t, p1);
        if (t->nranks == 1) {
            CHECK(t->v_expect == NULL, "completion without verification");
            CHECK(memcmp(t->T, t->shadow, TSZ) == 0,
                  "put %d: target memory differs from shadow", i);
        } else {
            uint32_t msg[2] = {OOB_CHECK, (uint32_t)i};
            xwrite(t->oob, msg, sizeof msg);
            char ok = 0;
            /* keep our service path polled while the target checks */
            struct pollfd pf = {.fd = t->oob, .events = POLLIN};
            while (poll(&pf, 1, 0) == 0)
                do_poll(&t->paths[0]);
            xread(t->oob, &ok, 1);
            CHECK(ok == 1, "target rejected put %d", i);
        }
        /* get it back */
        memset(t->G + r.goff, 0, r.len);
        p1->rma_pending++;
        while ((rc = CD.get(p1->cp, tr, 0, t->G + r.goff, r.len, t->mrG,
                            raddr, &t->rk[tr], p1, 0)) == FH_ERR_AGAIN)
            pump(p1);
        CHECK(rc == FH_OK, "get: %d", rc);
        wait_rma(t, p1);
        gen(t->S + r.soff, r.len, (uint64_t)i);
        CHECK(memcmp(t->G + r.goff, t->S + r.soff, r.len) == 0,
              "get %d (%zu B): wrong data", i, r.len);
        bytes += r.len;
    }
    if (t->nranks > 1) {
        uint32_t msg[2] = {OOB_END, 0};
        xwrite(t->oob, msg, sizeof msg);
    }
    printf("[rank %d] PASS rma: %d puts+gets to rank %d (1 B..8 MiB, random "
           "offsets, %d inject from scribbled stack buffers, %d FH_POST_MORE "
           "batches), %.1f MiB, %.2f s; delivery checked %s\n", t->rank,
           (int)NRMA, tr, ninject, nbatch, bytes / 1048576.0, now() - t0,
           t->nranks == 1 ? "inside on_complete"
                          : "by the target right after completion (OOB)");
}

static void target(struct test *t)
{
    struct tpath *p0 = &t->paths[0];
    struct pollfd pf = {.fd = t->oob, .events = POLLIN};
    int nchecked = 0;
    for (;;) {
        do_poll(p0);
        if (poll(&pf, 1, 0) <= 0)
            continue;
        /* From here on we do NOT poll: the data must already be there. */
        uint32_t msg[2];
        xread(t->oob, msg, sizeof msg);
        if (msg[0] == OOB_END)
            break;
        target_verify(t, (int)msg[1]);
        nchecked++;
        char ok = 1;
        xwrite(t->oob, &ok, 1);
    }
    printf("[rank %d] PASS rma-target: %d puts verified without polling "
           "after the initiator's completion\n", t->rank, nchecked);
}

static void phase_rma(struct test *t, int initiator_rank)
{
    if (t->rank == initiator_rank)
        initiator(t);
    else
        target(t);
    poll_barrier(t);
    /* both ranks: reset T so the next round starts from the same state */
    memset(t->T, 0xEE, TSZ);
    memset(t->shadow, 0xEE, TSZ);
    poll_barrier(t);
}

/* ------------------------------------------------------------ drivers */

/* Two ranks: the bootstrap socketpair (and the out-of-band one if oob is
 * not NULL), then fork.  Returns our rank: 1 in the child. */
static int fork_pair(struct sock_boot *sb, int *oob, pid_t *pid)
{
    int sv[2], ov[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    if (oob)
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, ov) == 0, "socketpair");
    fflush(stdout);
    *pid = fork();
    CHECK(*pid >= 0, "fork");
    int rank = *pid == 0 ? 1 : 0;
    g_rank = rank;
    sb->fd = rank ? sv[1] : sv[0];
    close(rank ? sv[0] : sv[1]);
    if (oob) {
        *oob = rank ? ov[1] : ov[0];
        close(rank ? ov[0] : ov[1]);
    }
    return rank;
}

struct test *st_new_one(const char *provider, const char *dev)
{
    struct test *t = calloc(1, sizeof *t);
    t->rank = 0;
    t->nranks = 1;
    t->peer = 0;
    t->provider = provider;
    t->dev = dev;
    t->boot = (struct fh_boot){&self_ops, 0, 1, 0, 1, NULL};
    return t;
}

struct test *st_run_one(const char *provider, const char *dev)
{
    struct test *t = st_new_one(provider, dev);
    st_setup(t);
    phase_tiny(t);
    phase_am(t);
    phase_flood(t);
    phase_rma(t, 0);
    return t;
}

void st_run_two(const char *provider, const char *dev0, const char *dev1)
{
    struct sock_boot sb;
    int oob;
    pid_t pid;
    int rank = fork_pair(&sb, &oob, &pid);
    struct test *t = calloc(1, sizeof *t);
    t->rank = rank;
    t->nranks = 2;
    t->peer = 1 - rank;
    t->provider = provider;
    t->dev = rank ? dev1 : dev0;
    t->oob = oob;
    t->boot = (struct fh_boot){&pair_ops, rank, 2, rank, 2, &sb};
    st_setup(t);
    phase_am(t);
    phase_rma(t, 1);     /* rank 1 puts/gets into rank 0 */
    phase_rma(t, 0);     /* and the other way round */
    st_finish(t);
    fflush(stdout);
    if (rank == 1)
        _exit(0);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 1 failed (status %d)",
          st);
}

/* Mode "dead": rank 1 exits abruptly after connect; rank 0's puts/gets to
 * it must end with FH_ERR_PEER_DEAD or FH_ERR_TRANSPORT (and a log line
 * naming rank 1), never hang. */
static int dead_status;
static long dead_ok;
static void on_complete_dead(void *arg, void *op_ctx, int status)
{
    (void)arg;
    (void)op_ctx;
    if (status == FH_OK)
        dead_ok++;
    else if (!dead_status)
        dead_status = status;
}
static void on_am_dead(void *arg, int src_rank, int src_path,
                       const void *buf, size_t len)
{
    (void)arg;
    (void)src_rank;
    (void)src_path;
    (void)buf;
    (void)len;
}

static void on_drop_dead(void *arg, int src_rank, const char *why)
{
    (void)arg;
    (void)src_rank;
    (void)why;
}

int st_run_dead(const char *provider, const char *dev0, const char *dev1)
{
    struct sock_boot sb;
    pid_t pid;
    int rank = fork_pair(&sb, NULL, &pid);
    struct fh_boot boot = {&pair_ops, rank, 2, rank, 2, &sb};
    /* ofi: the provider given; ibv (provider NULL): FH_IBV_* from the
     * environment (settings NULL). */
    const ofi_settings_t os = {.provider = provider, .domain = "",
                               .endpoint = st_ofi_endpoint(), .trust_fabric = 1};
    fh_conduit_config_t cfg = {.rank = rank, .nranks = 2, .npaths = 2,
                               .am_max_packet = 4096,
                               .settings = provider ? &os : NULL};
    fh_log_set_rank(rank);
    if (rank ? dev1 : dev0)
        setenv("FH_IBV_DEVICE", rank ? dev1 : dev0, 1);
    static const fh_conduit_upcalls_t up = {.on_am = on_am_dead,
                                            .on_drop = on_drop_dead,
                                            .on_complete = on_complete_dead};
    struct fh_conduit *c;
    fh_conduit_limits_t lim;
    CHECK(CD.open(&cfg, &up, &c, &lim) == FH_OK, "open");
    struct fh_cpath *cp[2];
    for (int i = 0; i < 2; i++) {
        fh_path_attr_t pa = {.index = i, .rx_msgs = 16, .upcall_arg = NULL};
        CHECK(CD.path_create(c, &pa, &cp[i]) == FH_OK, "path");
    }
    CHECK(CD.connect(c, &boot) == FH_OK, "connect");
    size_t sz = 1 << 20;
    char *buf = aligned_alloc(4096, sz);
    memset(buf, 1, sz);
    struct fh_mr *mr;
    fh_rkey_t rk, rks[2];
    CHECK(CD.mr_reg(c, buf, sz, FH_MR_LOCAL | FH_MR_REMOTE_READ |
                    FH_MR_REMOTE_WRITE, &mr, &rk) == FH_OK, "reg");
    struct { fh_rkey_t rk; uint64_t base; } mine = {rk, (uint64_t)(uintptr_t)buf},
        all[2];
    boot.ops->allgather(&boot, &mine, all, sizeof mine);
    (void)rks;
    if (rank == 1) {
        /* be reachable for a moment (connection set up), then die */
        double t0 = now();
        while (now() - t0 < 0.5)
            CD.poll(cp[0], 64);
        _exit(0);
    }
    /* one successful round trip while rank 1 lives */
    int rc;
    while ((rc = CD.get(cp[1], 1, 0, buf, 4096, mr, all[1].base,
                        &all[1].rk, buf, 0)) == FH_ERR_AGAIN)
        CD.poll(cp[1], 64);
    CHECK(rc == FH_OK, "get: %d", rc);
    while (dead_ok < 1 && !dead_status) {
        CD.poll(cp[1], 64);
        CD.poll(cp[0], 64);
    }
    CHECK(dead_ok == 1, "first get failed (%d)", dead_status);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    /* rank 1 is gone: keep posting until an error completion arrives */
    double t0 = now();
    long posted = 0;
    while (!dead_status) {
        rc = (posted & 1)
                 ? CD.get(cp[1], 1, 0, buf, sz, mr, all[1].base,
                          &all[1].rk, buf, 0)
                 : CD.put(cp[1], 1, 0, buf, sz, mr, all[1].base,
                          &all[1].rk, buf, 0);
        if (rc == FH_OK)
            posted++;
        else if (rc != FH_ERR_AGAIN && !dead_status)
            dead_status = rc;    /* refused at post: also acceptable */
        for (int k = 0; k < 100 && !dead_status; k++) {
            CD.poll(cp[1], 64);
            CD.poll(cp[0], 64);
        }
        CHECK(now() - t0 < 60, "RMA to a dead peer hangs (%ld posted, %ld ok)",
              posted, dead_ok);
    }
    CHECK(dead_status == FH_ERR_PEER_DEAD || dead_status == FH_ERR_TRANSPORT,
          "dead peer status %d", dead_status);
    printf("PASS dead (%s): RMA to an exited rank ended with %s after %ld "
           "posts, %.2f s\n", provider ? provider : lim.description,
           fh_err_name(dead_status), posted, now() - t0);
    if (provider == NULL) {
        /* ibv connects on first use: path 0 never talked to rank 1, so
         * this AM asks for a connection nobody answers; it must fail with
         * FH_ERR_PEER_DEAD naming rank 1 (FH_IBV_CONNECT_TIMEOUT). */
        t0 = now();
        while ((rc = CD.am_send(cp[0], 1, 0, "x", 1, NULL, 0)) == FH_ERR_AGAIN) {
            CD.poll(cp[0], 64);
            CHECK(now() - t0 < 60, "connection request to a dead peer hangs");
        }
        CHECK(rc == FH_ERR_PEER_DEAD && strstr(fh_last_error(), "rank 1 did not answer"),
              "connect to a dead peer: %s (%s)", fh_err_name(rc), fh_last_error());
        printf("PASS dead-connect: a first AM to the exited rank failed with %s after "
               "%.2f s: %s\n", fh_err_name(rc), now() - t0, fh_last_error());
    }
    /* drain what is left, then tear down */
    t0 = now();
    while (now() - t0 < 0.5) {
        CD.poll(cp[1], 64);
        CD.poll(cp[0], 64);
    }
    CD.mr_dereg(c, mr);
    CD.path_destroy(cp[1]);
    CD.path_destroy(cp[0]);
    CD.close(c);
    free(buf);
    return 0;
}

