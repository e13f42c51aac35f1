/*
 * boot_fhrun.c -- the bootstrap used under tools/fhrun.
 *
 * One stream socket to the launcher (FH_BOOT_ADDR).  The handshake proves to
 * both sides that the other knows the per-job key (FH_JOB_KEY) without
 * sending it: over --listen TCP anyone on the path would otherwise learn it,
 * and a rank that took any answer for its launcher would run with whoever
 * answers.  After the handshake a watchdog thread owns all
 * reads from the socket: it hands allgather results to the waiting caller
 * (mutex + condvar) and ends the process with FH_EXIT_PEER_DEAD when the
 * launcher reports a dead rank or disappears.  The caller's thread only
 * writes.  Wire format: bootstrap.h and boot_wire.h.
 */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap.h"
#include "boot_impl.h"
#include "boot_decode.h"
#include "boot_wire.h"
#include "firehose.h"
#include "firehose/util/log.h"

/* Extra seconds a rank waits in an allgather beyond FH_BOOT_TIMEOUT: fhrun
 * enforces the same timeout on connections and reports first, naming the
 * ranks that are missing, which a rank cannot know. */
#define FHRUN_WAIT_SLACK 2

/* Largest allgather result (len * nranks) accepted. */
#define FHRUN_MAX_RESULT ((size_t)1 << 30)

typedef struct fhrun_priv {
    int fd;
    int timeout_s;
    const char *addr;
    pthread_t wd;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* CLOCK_MONOTONIC */
    /* Allgather hand-off, all under mu. */
    int have_request;       /* a request was sent, its result not yet read */
    size_t expect;          /* bytes of that result */
    int waiting;            /* the caller still wants it */
    unsigned char *result;  /* set by the watchdog when it arrives */
    int quiet;              /* finalize/abort underway: EOF is expected */
    int wd_done;            /* the watchdog has stopped reading */
    int broken;             /* a call timed out: refuse further calls */
    char *peer_failed;      /* "rank N ... failed in fh_init: why", or NULL */
} fhrun_priv_t;

static void timespec_at(struct timespec *ts, double t)
{
    /* fh_now() uses CLOCK_MONOTONIC, as does the condvar. */
    ts->tv_sec = (time_t)t;
    ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Waits (mu held) until the watchdog stopped or the deadline passed. */
static void wait_wd_done(fhrun_priv_t *p, double deadline)
{
    struct timespec ts;
    timespec_at(&ts, deadline);
    while (!p->wd_done)
        if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT)
            break;
}

/* ---- watchdog ---------------------------------------------------------- */

static void lost_launcher(fhrun_priv_t *p, const char *why)
{
    pthread_mutex_lock(&p->mu);
    int quiet = p->quiet;
    if (quiet) {
        p->wd_done = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        return;
    }
    /* Exit while still holding the lock: a caller waiting for an allgather
     * must not wake up first and report a generic bootstrap error instead
     * of the real cause. */
    fh_log_verbose(1, "bootstrap: connection to the launcher at %s: %s",
                   p->addr, why);
    fh_log_error("lost the launcher; aborting");
    _exit(FH_EXIT_PEER_DEAD);
}

static const char *io_why(void)
{
    return errno ? strerror(errno) : "connection closed";
}

/* A DEAD message (rx's payload: "<pid> <reason>", or the launcher's own
 * reason): records a peer's failed fh_init and returns, or ends the
 * process. */
static void on_dead(fhrun_priv_t *p, const fh_boot_rx_t *rx)
{
    const char *msg = (const char *)rx->payload;
    uint32_t dead = rx->a, status = rx->b;
    long pid;
    const char *why;
    pthread_mutex_lock(&p->mu);
    int quiet = p->quiet;
    pthread_mutex_unlock(&p->mu);
    if (quiet)
        return;  /* we are finishing anyway */
    fh_boot_dead_text(msg, &pid, &why);
    if (status == FH_BOOT_DEAD_INIT_FAILED && dead != FH_BOOT_RANK_LAUNCHER) {
        /* A peer's fh_init failed: ours cannot succeed either, but it
         * fails (returns), it does not end the process. */
        size_t n = strlen(why) + 64;
        char *text = malloc(n);
        if (text != NULL)
            snprintf(text, n, "%s (pid %ld) %s", FH_RANK_NAME((int)dead), pid, why);
        pthread_mutex_lock(&p->mu);
        if (p->peer_failed == NULL && text != NULL) {
            p->peer_failed = text;
            text = NULL;
        }
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        free(text);
        return;
    }
    if (dead == FH_BOOT_RANK_LAUNCHER)
        fh_log_error("the launcher aborted the job: %s; aborting", msg);
    else if (pid >= 0)
        fh_log_error("%s (pid %ld) died: %s; aborting",
                     FH_RANK_NAME((int)dead), pid, why);
    else
        fh_log_error("%s died: %s; aborting", FH_RANK_NAME((int)dead), msg);
    _exit(FH_EXIT_PEER_DEAD);
}

/* Reads the launcher's messages (boot_decode.h) until the connection ends
 * or a DEAD message ends the process. */
static void *watchdog(void *arg)
{
    fhrun_priv_t *p = arg;
    fh_boot_rx_t rx;
    fh_boot_rx_init(&rx, 1, 0);
    for (;;) {
        unsigned char *dst;
        size_t want = fh_boot_rx_space(&rx, &dst);
        ssize_t r = read(p->fd, dst, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = 0;
            fh_boot_rx_free(&rx);
            lost_launcher(p, io_why());
            return NULL;
        }
        int what = fh_boot_rx_got(&rx, (size_t)r);
        if (what == FH_BOOT_RX_LEN) {
            pthread_mutex_lock(&p->mu);
            long long n = p->have_request ? (long long)p->expect : -1;
            pthread_mutex_unlock(&p->mu);
            what = fh_boot_rx_expect(&rx, n);
        }
        if (what == FH_BOOT_RX_BAD) {
            fh_log_error("bootstrap: the launcher at %s sent %s (protocol "
                         "error)", p->addr, rx.err);
            lost_launcher(p, "protocol error");
            return NULL;
        }
        if (what != FH_BOOT_RX_MSG)
            continue;
        if (rx.type == FH_BOOT_MSG_DEAD) {
            on_dead(p, &rx);
            continue;
        }
        /* FH_BOOT_MSG_ALLGATHER */
        unsigned char *buf = fh_boot_rx_take(&rx);
        pthread_mutex_lock(&p->mu);
        p->have_request = 0;
        if (p->waiting) {
            p->result = buf;
            pthread_cond_broadcast(&p->cv);
            buf = NULL;
        }
        pthread_mutex_unlock(&p->mu);
        free(buf);  /* the caller gave up (timeout) */
    }
}

/* ---- collectives --------------------------------------------------------- */

static int fhrun_exchange(fh_boot_t *b, const void *in, void *out, size_t len,
                          const char *what)
{
    fhrun_priv_t *p = b->priv;
    size_t total = len * (size_t)b->nranks;
    if (len > UINT32_MAX || total / (size_t)b->nranks != len ||
        total > FHRUN_MAX_RESULT) {
        fh_log_error("bootstrap: allgather of %zu bytes per rank over %d ranks "
                     "is too large (limit %zu bytes in all)", len, b->nranks,
                     FHRUN_MAX_RESULT);
        return FH_ERR_BOOTSTRAP;
    }
    pthread_mutex_lock(&p->mu);
    if (p->peer_failed != NULL) {
        int rc = fh_set_error(FH_ERR_BOOTSTRAP, "%s", p->peer_failed);
        pthread_mutex_unlock(&p->mu);
        return rc;
    }
    if (p->broken || p->quiet || p->have_request) {
        pthread_mutex_unlock(&p->mu);
        fh_log_error("bootstrap: %s after an earlier bootstrap failure", what);
        return FH_ERR_BOOTSTRAP;
    }
    p->have_request = 1;
    p->expect = total;
    p->waiting = 1;
    p->result = NULL;
    pthread_mutex_unlock(&p->mu);

    double deadline = fh_now() + p->timeout_s;
    unsigned char hdr[8];
    fh_put_u32(hdr, FH_BOOT_OP_ALLGATHER);
    fh_put_u32(hdr + 4, (uint32_t)len);
    if (fh_write_full(p->fd, hdr, 8, deadline) < 0 ||
        fh_write_full(p->fd, in, len, deadline) < 0) {
        int e = errno;
        pthread_mutex_lock(&p->mu);
        p->waiting = 0;
        p->broken = 1;
        pthread_mutex_unlock(&p->mu);
        fh_log_error("bootstrap: %s: cannot send to the launcher at %s: %s",
                     what, p->addr, e == ETIMEDOUT ? "timed out" : strerror(e));
        return FH_ERR_BOOTSTRAP;
    }

    struct timespec ts;
    timespec_at(&ts, deadline + FHRUN_WAIT_SLACK);
    pthread_mutex_lock(&p->mu);
    while (!p->result && !p->wd_done && !p->peer_failed)
        if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT)
            break;
    unsigned char *res = p->result;
    p->result = NULL;
    p->waiting = 0;
    if (!res && p->peer_failed) {
        /* The launcher sends no result for this round: it is over. */
        int rc = fh_set_error(FH_ERR_BOOTSTRAP, "%s", p->peer_failed);
        pthread_mutex_unlock(&p->mu);
        return rc;
    }
    if (!res)
        p->broken = 1;
    pthread_mutex_unlock(&p->mu);
    if (!res) {
        fh_log_error("bootstrap: timed out after %d s (FH_BOOT_TIMEOUT) in the "
                     "%s: waiting for all %d ranks to join it (launcher %s)",
                     p->timeout_s + FHRUN_WAIT_SLACK, what, b->nranks, p->addr);
        return FH_ERR_BOOTSTRAP;
    }
    if (total)
        memcpy(out, res, total);
    free(res);
    return FH_OK;
}

static int fhrun_allgather(fh_boot_t *b, const void *in, void *out, size_t len)
{
    char what[64];
    snprintf(what, sizeof what, "allgather of %zu bytes", len);
    return fhrun_exchange(b, in, out, len, what);
}

static int fhrun_barrier(fh_boot_t *b)
{
    return fhrun_exchange(b, NULL, NULL, 0, "barrier");
}

__attribute__((noreturn)) static void fhrun_abort(fh_boot_t *b, int code,
                                               const char *msg)
{
    fhrun_priv_t *p = b->priv;
    if (!msg)
        msg = "";
    size_t mlen = strlen(msg);
    if (mlen > FH_BOOT_MAX_MSG)
        mlen = FH_BOOT_MAX_MSG;
    if (code == 0)
        code = 1;
    fh_log_error("aborting the job (code %d): %.*s", code, (int)mlen, msg);
    pthread_mutex_lock(&p->mu);
    p->quiet = 1;
    pthread_mutex_unlock(&p->mu);
    unsigned char hdr[12];
    fh_put_u32(hdr, FH_BOOT_OP_ABORT);
    fh_put_u32(hdr + 4, (uint32_t)code);
    fh_put_u32(hdr + 8, (uint32_t)mlen);
    double deadline = fh_now() + 2;
    if (fh_write_full(p->fd, hdr, 12, deadline) == 0 &&
        fh_write_full(p->fd, msg, mlen, deadline) == 0) {
        /* Let the launcher read it before our socket goes away. */
        pthread_mutex_lock(&p->mu);
        wait_wd_done(p, deadline);
        pthread_mutex_unlock(&p->mu);
    }
    _exit(code & 0xff ? code & 0xff : 1);
}

/* Sends the last request (FINALIZE, or INITFAIL with its text), waits for
 * the launcher to close the connection (so it has read everything), and
 * frees b. */
static void fhrun_close(fh_boot_t *b, uint32_t op, const char *text)
{
    fhrun_priv_t *p = b->priv;
    pthread_mutex_lock(&p->mu);
    p->quiet = 1;
    pthread_mutex_unlock(&p->mu);
    size_t mlen = text != NULL ? strlen(text) : 0;
    if (mlen > FH_BOOT_MAX_MSG)
        mlen = FH_BOOT_MAX_MSG;
    unsigned char hdr[12];
    size_t hlen = 4;
    fh_put_u32(hdr, op);
    if (op == FH_BOOT_OP_INITFAIL) {
        fh_put_u32(hdr + 4, 0);
        fh_put_u32(hdr + 8, (uint32_t)mlen);
        hlen = 12;
    }
    double deadline = fh_now() + p->timeout_s;
    if (fh_write_full(p->fd, hdr, hlen, deadline) < 0 ||
        (mlen && fh_write_full(p->fd, text, mlen, deadline) < 0))
        fh_log_verbose(1, "bootstrap: %s: cannot tell the launcher: %s",
                       op == FH_BOOT_OP_INITFAIL ? "init failure" : "finalize",
                       strerror(errno));
    pthread_mutex_lock(&p->mu);
    wait_wd_done(p, deadline);
    pthread_mutex_unlock(&p->mu);
    shutdown(p->fd, SHUT_RDWR);  /* unblocks the watchdog if still reading */
    pthread_join(p->wd, NULL);
    close(p->fd);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->peer_failed);
    free(p);
    free(b);
}

static void fhrun_finalize(fh_boot_t *b)
{
    fhrun_close(b, FH_BOOT_OP_FINALIZE, NULL);
}

static void fhrun_fail(fh_boot_t *b, const char *why)
{
    fhrun_close(b, FH_BOOT_OP_INITFAIL, why != NULL && why[0] ? why : "fh_init failed");
}

static const fh_boot_ops_t fhrun_ops = {
    .name = "fhrun",
    .allgather = fhrun_allgather,
    .barrier = fhrun_barrier,
    .abort = fhrun_abort,
    .fail = fhrun_fail,
    .finalize = fhrun_finalize,
};

/* ---- open ------------------------------------------------------------------ */

static int transient(int e)
{
    return e == ECONNREFUSED || e == ENOENT || e == ETIMEDOUT ||
           e == ENETUNREACH || e == EHOSTUNREACH || e == EAGAIN ||
           e == ECONNRESET || e == EINTR;
}

/* One connection attempt.  Returns the fd, or -1 with errno set (or, for a
 * name lookup failure, *gai set). */
static int connect_once(int kind, const char *host, const char *port,
                        double deadline, int *gai)
{
    *gai = 0;
    if (kind == 'u') {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(host) >= sizeof sa.sun_path) {
            errno = ENAMETOOLONG;
            return -1;
        }
        strcpy(sa.sun_path, host);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        int r;
        do
            r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
        while (r < 0 && errno == EINTR);
        if (r < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        return fd;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g) {
        *gai = g;
        errno = g == EAI_AGAIN ? EAGAIN : EINVAL;
        return -1;
    }
    int fd = -1, e = ECONNREFUSED;
    for (ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    ai->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (r < 0 && (errno == EINPROGRESS || errno == EINTR)) {
            if (fh_wait_fd(fd, POLLOUT, deadline) == 0) {
                socklen_t sl = sizeof e;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) < 0)
                    e = errno;
                r = e ? -1 : 0;
            } else {
                e = errno;
            }
        } else if (r < 0) {
            e = errno;
        }
        if (r == 0) {
            int fl = fcntl(fd, F_GETFL);
            fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            break;
        }
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        errno = e;
    return fd;
}

static int parse_int_env(const char *name, long lo, long hi, long *out)
{
    const char *s = getenv(name);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) {
        fh_log_error("bootstrap: %s=%s: expected an integer in %ld..%ld "
                     "(set by fhrun)", name, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* Host identity for local_rank/local_nranks: same kernel boot and same
 * network namespace.  Ranks in different namespaces of one host (the netns
 * tests, containers) share memory but not loopback, and the conduit lets
 * "local" jobs listen on loopback only (conduit.h all_local). */
#define HOSTID_BYTES 128
static void host_id(char id[HOSTID_BYTES])
{
    memset(id, 0, HOSTID_BYTES);
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    ssize_t n = 0;
    if (fd >= 0) {
        n = read(fd, id, 48);
        close(fd);
    }
    if (n <= 0) {
        n = 0;
        gethostname(id, 64);
        n = (ssize_t)strlen(id);
    }
    /* "net:[4026531992]": the namespace's inode. */
    ssize_t m = readlink("/proc/self/ns/net", id + n, (size_t)(HOSTID_BYTES - 1 - n));
    (void)m;
    id[HOSTID_BYTES - 1] = '\0';
}

/* The launcher closed the connection before it answered: it closes
 * handshakes that take too long, or to make room when strangers fill its
 * slots (tools/launcher/handshake.c).  Worth another try; errno 0 is EOF. */
static int closed_early(int e)
{
    return e == 0 || e == ECONNRESET || e == EPIPE || e == ECONNABORTED;
}

/* A handshake read or write failed with errno e: returns 1 (retry, not
 * logged) if the launcher closed the connection early, else logs why and
 * returns -1. */
static int handshake_io_error(const char *addr, long rank, int timeout_s,
                              int e)
{
    if (closed_early(e))
        return 1;
    if (e == ETIMEDOUT)
        fh_log_error("bootstrap: timed out after %d s (FH_BOOT_TIMEOUT) "
                     "waiting for the launcher at %s to accept %s",
                     timeout_s, addr, FH_RANK_NAME((int)rank));
    else
        fh_log_error("bootstrap: handshake with the launcher at %s failed: "
                     "%s", addr, strerror(e));
    return -1;
}

static void refused(const char *addr, long rank, uint32_t status)
{
    if (status == FH_BOOT_REFUSED_KEY)
        fh_log_error("bootstrap: FH_JOB_KEY rejected by the launcher at %s",
                     addr);
    else if (status == FH_BOOT_REFUSED_RANK)
        fh_log_error("bootstrap: the launcher at %s refused %s (out "
                     "of range)", addr, FH_RANK_NAME((int)rank));
    else if (status == FH_BOOT_REFUSED_DUP)
        fh_log_error("bootstrap: the launcher at %s refused %s: "
                     "already connected (duplicate rank)", addr, FH_RANK_NAME((int)rank));
    else
        fh_log_error("bootstrap: the launcher at %s refused %s "
                     "(status %u)", addr, FH_RANK_NAME((int)rank), status);
}

static void launcher_unproven(const char *addr, const char *why)
{
    fh_log_error("bootstrap: the launcher at %s did not prove it knows the "
                 "job key (%s); refusing to run with it", addr, why);
}

/* The handshake of bootstrap.h, rank side.  Returns 0 once both sides have
 * proven they know the key; 1 if the launcher closed the connection before
 * its answer (status word) was in, which is worth a retry on a new
 * connection (not logged); or -1 (logged), final.  Refusal codes from the
 * launcher are reported as such although they are not authenticated: any
 * answer other than a valid proof ends this rank anyway, and so does a
 * launcher that closes after its status 0 instead of proving itself. */
static int handshake(int fd, const unsigned char key[FH_KEY_BYTES],
                     uint32_t rank, const char *addr, double deadline,
                     int timeout_s)
{
    unsigned char nonce_r[FH_BOOT_NONCE_BYTES], nonce_l[FH_BOOT_NONCE_BYTES];
    unsigned char hello[FH_BOOT_HELLO_BYTES], ch[FH_BOOT_CHALLENGE_BYTES];
    unsigned char proof[FH_BOOT_PROOF_BYTES], acc[FH_BOOT_ACCEPT_BYTES];
    unsigned char want[FH_BOOT_MAC_BYTES];
    uint32_t pid = (uint32_t)getpid();

    if (fh_boot_nonce(nonce_r) < 0) {
        fh_log_error("bootstrap: getrandom: %s", strerror(errno));
        return -1;
    }
    fh_put_u32(hello, FH_BOOT_MAGIC);
    memcpy(hello + 4, nonce_r, FH_BOOT_NONCE_BYTES);
    if (fh_write_full(fd, hello, sizeof hello, deadline) < 0 ||
        fh_read_full(fd, ch, 4, deadline) < 0)
        return handshake_io_error(addr, rank, timeout_s, errno);
    uint32_t w = fh_boot_challenge_word(ch);
    if (w != 0) {
        if (w != UINT32_MAX)
            refused(addr, rank, w);
        else
            launcher_unproven(addr, "it does not answer with a fhrun "
                              "challenge");
        return -1;
    }
    if (fh_read_full(fd, ch + 4, FH_BOOT_NONCE_BYTES, deadline) < 0)
        return handshake_io_error(addr, rank, timeout_s, errno);
    memcpy(nonce_l, ch + 4, FH_BOOT_NONCE_BYTES);

    fh_put_u32(proof, rank);
    fh_put_u32(proof + 4, pid);
    if (fh_boot_mac(key, FH_BOOT_LABEL_RANK, nonce_r, nonce_l, rank, pid,
                    proof + 8) < 0 ||
        fh_boot_mac(key, FH_BOOT_LABEL_LAUNCHER, nonce_r, nonce_l, rank, pid,
                    want) < 0) {
        fh_log_error("bootstrap: cannot compute the handshake MAC "
                     "(libcrypto HMAC-SHA256 failed)");
        return -1;
    }
    if (fh_write_full(fd, proof, sizeof proof, deadline) < 0 ||
        fh_read_full(fd, acc, 4, deadline) < 0)
        return handshake_io_error(addr, rank, timeout_s, errno);
    uint32_t status = fh_get_u32(acc);
    if (status != 0) {
        refused(addr, rank, status);
        return -1;
    }
    if (fh_read_full(fd, acc + 4, FH_BOOT_MAC_BYTES, deadline) < 0) {
        int e = errno;
        if (e == ETIMEDOUT)
            (void)handshake_io_error(addr, rank, timeout_s, e);
        else
            launcher_unproven(addr, e ? strerror(e) : "it closed the "
                              "connection instead");
        return -1;
    }
    if (!fh_boot_accept_check(acc, want)) {
        launcher_unproven(addr, "wrong proof: a different job's launcher, "
                          "or not a launcher");
        return -1;
    }
    return 0;
}

/* Sleeps about *delay_ms (between half and one and a half times: ranks
 * that failed together do not retry together), then doubles it up to
 * 500 ms. */
static void backoff(int *delay_ms)
{
    unsigned short r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (unsigned short)getpid();
    long ms = *delay_ms / 2 + (long)(r % (unsigned)*delay_ms);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    if (*delay_ms < 500)
        *delay_ms *= 2;
}

/* Connects to the launcher and completes the handshake, both retried with
 * backoff until the deadline: connecting while the launcher is not
 * listening yet (transient errors), and a handshake the launcher closed
 * before answering (handshake() returns 1; see closed_early).  Returns the
 * connection, or -1 (logged). */
static int connect_and_handshake(int kind, const char *host, const char *port,
                                 const char *addr,
                                 const unsigned char key[FH_KEY_BYTES],
                                 long rank, double deadline, int timeout_s)
{
    int gai, delay_ms = 10, closed = 0;
    for (;;) {
        int fd = connect_once(kind, host, port, deadline, &gai);
        if (fd < 0) {
            int e = errno;
            if (transient(e) && fh_now() + delay_ms / 1000.0 < deadline) {
                backoff(&delay_ms);
                continue;
            }
            const char *why = gai ? gai_strerror(gai) : strerror(e);
            if (transient(e))
                fh_log_error("bootstrap: cannot connect to the launcher at %s "
                             "within %d s (FH_BOOT_TIMEOUT): %s", addr,
                             timeout_s, why);
            else
                fh_log_error("bootstrap: cannot connect to the launcher at "
                             "%s: %s", addr, why);
            return -1;
        }
        int h = handshake(fd, key, (uint32_t)rank, addr, deadline, timeout_s);
        if (h == 0)
            return fd;
        close(fd);
        if (h < 0)
            return -1;
        closed++;
        if (fh_now() + delay_ms / 1000.0 >= deadline) {
            fh_log_error("bootstrap: timed out after %d s (FH_BOOT_TIMEOUT) "
                         "waiting for the launcher at %s to accept %s: "
                         "it closed the handshake %d time(s) without an "
                         "answer (too many other connections?)", timeout_s,
                         addr, FH_RANK_NAME((int)rank), closed);
            return -1;
        }
        fh_log_verbose(1, "bootstrap: the launcher at %s closed the handshake "
                       "without an answer (attempt %d); retrying", addr,
                       closed);
        backoff(&delay_ms);
    }
}

int fh_boot_fhrun_open(fh_boot_t **out, int timeout_s)
{
    const char *addr = getenv("FH_BOOT_ADDR");
    const char *keyhex = getenv("FH_JOB_KEY");
    long rank, nranks;
    unsigned char key[FH_KEY_BYTES];
    char host[256], port[16];

    if (parse_int_env("FH_NRANKS", 1, 1 << 24, &nranks) < 0 ||
        parse_int_env("FH_RANK", 0, nranks - 1, &rank) < 0)
        return FH_ERR_BOOTSTRAP;
    fh_log_set_rank((int)rank);  /* messages from here on name the rank */
    if (fh_unhex(keyhex, key, FH_KEY_BYTES) < 0) {
        fh_log_error("bootstrap: FH_JOB_KEY is malformed (expected %d hex "
                     "digits, set by fhrun)", 2 * FH_KEY_BYTES);
        return FH_ERR_BOOTSTRAP;
    }
    int kind = fh_parse_addr(addr, host, sizeof host, port, sizeof port);
    if (!kind) {
        fh_log_error("bootstrap: FH_BOOT_ADDR=%s: expected unix:/path or "
                     "tcp:host:port", addr);
        return FH_ERR_BOOTSTRAP;
    }

    double deadline = fh_now() + timeout_s;
    int fd = connect_and_handshake(kind, host, port, addr, key, rank,
                                   deadline, timeout_s);
    if (fd < 0)
        return FH_ERR_BOOTSTRAP;

    fh_boot_t *b = calloc(1, sizeof *b);
    fhrun_priv_t *p = calloc(1, sizeof *p);
    if (!b || !p) {
        free(b);
        free(p);
        close(fd);
        fh_log_error("bootstrap: out of memory");
        return FH_ERR_BOOTSTRAP;
    }
    p->fd = fd;
    p->timeout_s = timeout_s;
    p->addr = addr;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    b->ops = &fhrun_ops;
    b->rank = (int)rank;
    b->nranks = (int)nranks;
    b->priv = p;

    /* The watchdog must not take the application's signals. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&p->wd, NULL, watchdog, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        fh_log_error("bootstrap: cannot start the watchdog thread: %s",
                     strerror(rc));
        close(fd);
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p);
        free(b);
        return FH_ERR_BOOTSTRAP;
    }

    /* Node-local ranks: exchange host identities. */
    char id[HOSTID_BYTES];
    char *ids = malloc((size_t)nranks * HOSTID_BYTES);
    host_id(id);
    if (!ids || fhrun_exchange(b, id, ids, HOSTID_BYTES,
                               "exchange of host names") != FH_OK) {
        free(ids);
        fh_log_error("bootstrap: could not complete the fhrun bootstrap");
        fhrun_finalize(b);
        return FH_ERR_BOOTSTRAP;
    }
    for (long i = 0; i < nranks; i++) {
        if (memcmp(ids + i * HOSTID_BYTES, id, HOSTID_BYTES) != 0)
            continue;
        if (i < rank)
            b->local_rank++;
        b->local_nranks++;
    }
    free(ids);
    *out = b;
    return FH_OK;
}
