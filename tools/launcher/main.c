/*
 * main.c (fhrun) -- launches an N-rank firehose job on this host.
 *
 *   fhrun -n N [options] prog [args...]
 *
 * Serves the fhrun bootstrap (firehose/boot/bootstrap.h, boot_wire.h) on a
 * private socket; each rank and the launcher prove to each other that they
 * know a random per-job key (HMAC challenge-response: the key itself never
 * crosses the socket, which matters for --listen over TCP), forwards output
 * (optionally tagged with the rank), turns a dead rank into a clean end of
 * the job, and propagates the exit status.  See fhrun.1.
 *
 * Single-threaded: one poll() loop over the listening socket, the rank
 * connections, the output pipes and a self-pipe fed by the SIGCHLD, SIGINT,
 * SIGTERM and SIGHUP handlers.  All sockets and pipes are non-blocking;
 * output to ranks goes through per-connection queues of shared buffers (an
 * allgather result is built once and queued to every rank).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "firehose/boot/bootstrap.h"
#include "firehose/boot/boot_wire.h"
#include "firehose.h"

#define MAX_RANKS        4096
#define MAX_PENDING      256              /* unauthenticated connections */
#define MAX_RESULT       ((size_t)1 << 30)  /* allgather result, bytes */
#define DEAD_GRACE       3.0              /* s before SIGKILL after a death */
#define TERM_GRACE       2.0              /* s between SIGTERM and SIGKILL */
#define EOF_GRACE        1.0              /* s for a rank to exit after EOF */
#define DRAIN_GRACE      2.0              /* s to drain output after the end */
#define LINE_MAX_BYTES   65536

/* ---- output queues --------------------------------------------------------- */

typedef struct shbuf {
    size_t refs, len;
    unsigned char data[];
} shbuf_t;

typedef struct oitem {
    shbuf_t *b;
    size_t off;
    struct oitem *next;
} oitem_t;

static shbuf_t *shbuf_new(size_t len)
{
    shbuf_t *b = malloc(sizeof *b + len);
    if (!b) {
        fprintf(stderr, "fhrun: out of memory (%zu bytes)\n", len);
        exit(1);
    }
    b->refs = 1;
    b->len = len;
    return b;
}

static void shbuf_unref(shbuf_t *b)
{
    if (b && --b->refs == 0)
        free(b);
}

/* ---- state ------------------------------------------------------------------- */

enum { RS_OP, RS_AGLEN, RS_AGDATA, RS_ABHDR, RS_ABMSG };

typedef struct rank {
    pid_t pid;
    int reaped, code;        /* code: exit status or 128 + signal */
    int fd;                  /* authenticated connection, or -1 */
    int ever_connected, finalized, aborted, contributed;
    double eof_deadline;     /* EOF before FINALIZE: death unless reaped */
    /* request reader */
    int rstate;
    unsigned char hdr[8];
    unsigned char *dst, *payload;
    size_t need, have;
    uint32_t arg;            /* allgather len / abort code */
    oitem_t *oq, *oq_tail;
    /* --tag-output */
    int pipe_fd[2];
    char *line[2];
    size_t line_len[2];
} rank_t;

/* A connection in its handshake (bootstrap.h): reading the hello, then,
 * once our challenge is sent, the rank's proof. */
typedef struct pend {
    int fd;
    int got_hello;           /* 0: reading the hello; 1: reading the proof */
    size_t have;
    double deadline;
    unsigned char nonce_r[FH_BOOT_NONCE_BYTES], nonce_l[FH_BOOT_NONCE_BYTES];
    unsigned char buf[FH_BOOT_PROOF_BYTES];  /* the hello, then the proof */
} pend_t;
_Static_assert(FH_BOOT_PROOF_BYTES >= FH_BOOT_HELLO_BYTES,
               "pend_t.buf holds the hello too");

static int nranks;
static rank_t *ranks;
static pend_t pend[MAX_PENDING];
static int npend;
static int listen_fd = -1;
static int sig_pipe[2] = {-1, -1};
static unsigned char job_key[FH_KEY_BYTES];
static char job_key_hex[2 * FH_KEY_BYTES + 1];
static char boot_addr[PATH_MAX + 32];
static char sock_dir[PATH_MAX], sock_path[PATH_MAX + 16];
static int verbose, tag_output;
static char *prefix_cmd;
static const char *listen_spec;
static double job_timeout;           /* 0: none */
static int boot_timeout = 60;
static pid_t job_pgid;
static struct rlimit orig_nofile;

static double t_start, connect_deadline;
static int any_connected, n_reaped;
static int exit_code, code_set;
static int failed;                   /* teardown started */
static int term_mode;                /* signal/timeout: kill everyone */
static double kill_at;               /* SIGKILL stragglers at (0: none) */
static double drain_deadline;
static int latent_rank = -1;         /* exited 0 before connecting */
/* The death reported to ranks (also to late connections). */
static uint32_t death_rank, death_status;
static char death_msg[FH_BOOT_MAX_MSG];
/* Current allgather round. */
static shbuf_t *ag_buf;
static uint32_t ag_len;
static int ag_count, ag_first;

/* ---- messages ---------------------------------------------------------------- */

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd pf = {.fd = fd, .events = POLLOUT};
                poll(&pf, 1, 100);
                continue;
            }
            return;  /* EPIPE etc.: nobody is listening */
        }
        p += w;
        n -= (size_t)w;
    }
}

static void vmsg(const char *fmt, va_list ap)
{
    char line[2048];
    int n = snprintf(line, sizeof line, "fhrun: ");
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    write_all(STDERR_FILENO, line, len);
}

__attribute__((format(printf, 1, 2))) static void msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 2, 3))) static void vlog(int level,
                                                       const char *fmt, ...)
{
    if (verbose < level)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}

static void cleanup_socket(void)
{
    if (sock_path[0]) {
        unlink(sock_path);
        sock_path[0] = '\0';
    }
    if (sock_dir[0]) {
        rmdir(sock_dir);
        sock_dir[0] = '\0';
    }
}

__attribute__((noreturn, format(printf, 2, 3))) static void die(int code,
                                                                const char *fmt,
                                                                ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    cleanup_socket();
    exit(code);
}

static void set_code(int c)
{
    if (!code_set && c != 0) {
        exit_code = c;
        code_set = 1;
    }
}

static void describe(int code, char *buf, size_t len)
{
    if (code >= 128 && code < 128 + 65)
        snprintf(buf, len, "killed by signal %d (%s)", code - 128,
                 strsignal(code - 128));
    else
        snprintf(buf, len, "exited with status %d", code);
}

/* ---- connections ----------------------------------------------------------- */

static void close_rank_conn(rank_t *r)
{
    if (r->fd < 0)
        return;
    close(r->fd);
    r->fd = -1;
    while (r->oq) {
        oitem_t *it = r->oq;
        r->oq = it->next;
        shbuf_unref(it->b);
        free(it);
    }
    r->oq_tail = NULL;
    free(r->payload);
    r->payload = NULL;
}

static void on_rank_eof(rank_t *r, const char *why)
{
    int rn = (int)(r - ranks);
    vlog(2, "rank %d: connection closed (%s)", rn, why);
    close_rank_conn(r);
    if (!r->finalized && !r->aborted && !r->reaped && !failed)
        r->eof_deadline = fh_now() + EOF_GRACE;
}

/* Returns -1 if the connection was closed. */
static int flush_rank(rank_t *r)
{
    while (r->fd >= 0 && r->oq) {
        oitem_t *it = r->oq;
        ssize_t w = send(r->fd, it->b->data + it->off, it->b->len - it->off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            on_rank_eof(r, strerror(errno));
            return -1;
        }
        it->off += (size_t)w;
        if (it->off == it->b->len) {
            r->oq = it->next;
            if (!r->oq)
                r->oq_tail = NULL;
            shbuf_unref(it->b);
            free(it);
        }
    }
    return r->fd >= 0 ? 0 : -1;
}

static void enqueue(rank_t *r, shbuf_t *b)
{
    if (r->fd < 0)
        return;
    oitem_t *it = malloc(sizeof *it);
    if (!it) {
        msg("out of memory");
        exit(1);
    }
    b->refs++;
    it->b = b;
    it->off = 0;
    it->next = NULL;
    if (r->oq_tail)
        r->oq_tail->next = it;
    else
        r->oq = it;
    r->oq_tail = it;
    flush_rank(r);
}

static void send_death(rank_t *r)
{
    size_t ml = strlen(death_msg);
    shbuf_t *b = shbuf_new(16 + ml);
    fh_put_u32(b->data, FH_BOOT_MSG_DEAD);
    fh_put_u32(b->data + 4, death_rank);
    fh_put_u32(b->data + 8, death_status);
    fh_put_u32(b->data + 12, (uint32_t)ml);
    memcpy(b->data + 16, death_msg, ml);
    enqueue(r, b);
    shbuf_unref(b);
}

/* ---- failures ------------------------------------------------------------------ */

static void reset_round(void)
{
    shbuf_unref(ag_buf);
    ag_buf = NULL;
    ag_count = 0;
    for (int i = 0; i < nranks; i++)
        ranks[i].contributed = 0;
}

/* First failure: tell every connected, unfinished rank, then give them
 * DEAD_GRACE seconds to exit before SIGKILL. */
static void job_fail(uint32_t rank, int status, const char *text)
{
    if (failed)
        return;
    failed = 1;
    death_rank = rank;
    death_status = (uint32_t)status;
    snprintf(death_msg, sizeof death_msg, "%s", text);
    reset_round();
    for (int i = 0; i < nranks; i++) {
        rank_t *r = &ranks[i];
        if (r->fd >= 0 && !r->finalized && !r->aborted)
            send_death(r);
    }
    kill_at = fh_now() + DEAD_GRACE;
}

__attribute__((format(printf, 1, 2))) static void launcher_abort(const char *fmt,
                                                                 ...)
{
    if (failed)
        return;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    msg("%s; aborting the job", text);
    set_code(1);
    job_fail(FH_BOOT_RANK_LAUNCHER, 1, text);
}

static void rank_death(int rn, int code, const char *what)
{
    rank_t *r = &ranks[rn];
    char text[512];
    if (failed) {
        vlog(1, "rank %d (pid %d) %s", rn, (int)r->pid, what);
        return;
    }
    msg("rank %d (pid %d) %s", rn, (int)r->pid, what);
    snprintf(text, sizeof text, "%d %s", (int)r->pid, what);
    set_code(code);
    job_fail((uint32_t)rn, code, text);
}

static void signal_ranks(int sig)
{
    int any = 0;
    for (int i = 0; i < nranks; i++)
        if (!ranks[i].reaped && ranks[i].pid > 0) {
            kill(ranks[i].pid, sig);
            any = 1;
        }
    /* The group exists while a member is unreaped; reaches grandchildren. */
    if (any && job_pgid > 0)
        kill(-job_pgid, sig);
}

/* Ctrl-C, SIGTERM, SIGHUP, --timeout: SIGTERM now, SIGKILL later. */
static void terminate_job(int code)
{
    exit_code = code;
    code_set = 1;
    failed = 1;
    if (term_mode) {  /* second request: no more patience */
        signal_ranks(SIGKILL);
        return;
    }
    term_mode = 1;
    reset_round();
    signal_ranks(SIGTERM);
    kill_at = fh_now() + TERM_GRACE;
}

static void kill_stragglers(void)
{
    char list[256];
    size_t n = 0;
    int count = 0;
    list[0] = '\0';
    for (int i = 0; i < nranks; i++) {
        rank_t *r = &ranks[i];
        if (r->reaped || (r->finalized && !term_mode))
            continue;
        kill(r->pid, SIGKILL);
        if (n < sizeof list - 16)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%d",
                                  count ? "," : "", i);
        count++;
    }
    if (count) {
        if (job_pgid > 0)
            kill(-job_pgid, SIGKILL);
        if (term_mode)
            vlog(1, "killing rank(s) %s (still running %.0f s after SIGTERM)",
                 list, TERM_GRACE);
        else
            msg("killing rank(s) %s (still running %.0f s after the failure)",
                list, DEAD_GRACE);
    }
}

/* ---- requests from ranks ------------------------------------------------- */

static void contribute(int rn, const unsigned char *data, uint32_t len)
{
    if (failed)
        return;
    rank_t *r = &ranks[rn];
    for (int i = 0; i < nranks; i++)
        if (ranks[i].finalized) {
            launcher_abort("rank %d started an allgather/barrier after rank %d "
                           "called fh_finalize", rn, i);
            return;
        }
    if (r->contributed) {
        launcher_abort("rank %d joined the same allgather twice (protocol "
                       "error)", rn);
        return;
    }
    if (!ag_buf) {
        ag_buf = shbuf_new(4 + (size_t)len * (size_t)nranks);
        fh_put_u32(ag_buf->data, FH_BOOT_MSG_ALLGATHER);
        ag_len = len;
        ag_first = rn;
    } else if (len != ag_len) {
        launcher_abort("allgather length mismatch: rank %d contributed %u "
                       "bytes but rank %d contributed %u", ag_first, ag_len,
                       rn, len);
        return;
    }
    if (len)
        memcpy(ag_buf->data + 4 + (size_t)rn * len, data, len);
    r->contributed = 1;
    if (++ag_count < nranks)
        return;
    vlog(2, "allgather of %u bytes complete", len);
    shbuf_t *b = ag_buf;
    ag_buf = NULL;
    ag_count = 0;
    for (int i = 0; i < nranks; i++) {
        ranks[i].contributed = 0;
        enqueue(&ranks[i], b);
    }
    shbuf_unref(b);
}

static void on_finalize(int rn)
{
    rank_t *r = &ranks[rn];
    vlog(2, "rank %d: finalize", rn);
    r->finalized = 1;
    close_rank_conn(r);
    if (!failed && ag_count > 0)
        launcher_abort("rank %d called fh_finalize while %d rank(s) wait in an "
                       "allgather/barrier", rn, ag_count);
}

static void on_abort(int rn, uint32_t code, const char *text)
{
    rank_t *r = &ranks[rn];
    int c = (code & 0xff) ? (int)(code & 0xff) : 1;
    char what[FH_BOOT_MAX_MSG];
    r->aborted = 1;
    if (failed) {
        vlog(1, "rank %d aborted too (code %u): %s", rn, code, text);
    } else {
        msg("rank %d (pid %d) aborted the job (code %u): %s", rn, (int)r->pid,
            code, text);
        snprintf(what, sizeof what, "%d aborted the job (code %u): %s",
                 (int)r->pid, code, text);
        set_code(c);
        job_fail((uint32_t)rn, c, what);
    }
    /* Last: text may point into r->payload.  Closing tells the rank we have
     * read its request. */
    close_rank_conn(r);
}

/* A complete unit (per r->rstate) has arrived; moves to the next state. */
static void on_unit(int rn)
{
    rank_t *r = &ranks[rn];
    switch (r->rstate) {
    case RS_OP: {
        uint32_t op = fh_get_u32(r->hdr);
        if (op == FH_BOOT_OP_ALLGATHER) {
            r->rstate = RS_AGLEN;
            r->dst = r->hdr;
            r->need = 4;
        } else if (op == FH_BOOT_OP_ABORT) {
            r->rstate = RS_ABHDR;
            r->dst = r->hdr;
            r->need = 8;
        } else if (op == FH_BOOT_OP_FINALIZE) {
            on_finalize(rn);
            return;
        } else {
            launcher_abort("rank %d sent an unknown request %u (protocol "
                           "error)", rn, op);
            on_rank_eof(r, "protocol error");
            return;
        }
        break;
    }
    case RS_AGLEN:
        r->arg = fh_get_u32(r->hdr);
        if ((size_t)r->arg * (size_t)nranks > MAX_RESULT) {
            launcher_abort("rank %d asked for an allgather of %u bytes per "
                           "rank (over the %zu-byte limit)", rn, r->arg,
                           MAX_RESULT);
            on_rank_eof(r, "oversized request");
            return;
        }
        r->payload = malloc(r->arg ? r->arg : 1);
        if (!r->payload) {
            msg("out of memory");
            exit(1);
        }
        r->rstate = RS_AGDATA;
        r->dst = r->payload;
        r->need = r->arg;
        break;
    case RS_AGDATA:
        contribute(rn, r->payload, r->arg);
        free(r->payload);
        r->payload = NULL;
        r->rstate = RS_OP;
        r->dst = r->hdr;
        r->need = 4;
        break;
    case RS_ABHDR: {
        r->arg = fh_get_u32(r->hdr);
        uint32_t ml = fh_get_u32(r->hdr + 4);
        if (ml > FH_BOOT_MAX_MSG) {
            on_abort(rn, r->arg, "(message too long)");
            return;
        }
        r->payload = malloc(ml + 1);
        if (!r->payload) {
            msg("out of memory");
            exit(1);
        }
        r->rstate = RS_ABMSG;
        r->dst = r->payload;
        r->need = ml;
        break;
    }
    case RS_ABMSG:
        r->payload[r->need] = '\0';
        on_abort(rn, r->arg, (const char *)r->payload);
        return;
    }
    r->have = 0;
    if (r->need == 0 && r->fd >= 0)
        on_unit(rn);
}

static void read_rank(int rn)
{
    rank_t *r = &ranks[rn];
    while (r->fd >= 0) {
        ssize_t n = read(r->fd, r->dst + r->have, r->need - r->have);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            on_rank_eof(r, strerror(errno));
            return;
        }
        if (n == 0) {
            on_rank_eof(r, "EOF");
            return;
        }
        r->have += (size_t)n;
        if (r->have == r->need)
            on_unit(rn);
    }
}

/* ---- handshakes ---------------------------------------------------------------- */

static void refuse(pend_t *p, uint32_t why, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(pend_t *p, uint32_t why, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    msg("refused a connection: %s", text);
    unsigned char st[4];
    fh_put_u32(st, why);
    ssize_t w = send(p->fd, st, 4, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    /* Discard what the peer sent beyond the message we judged (a rank of
     * the old protocol sends a longer hello): closing a socket with unread
     * input resets the connection, and the peer could lose the status. */
    unsigned char junk[256];
    for (int i = 0; i < 16; i++)
        if (recv(p->fd, junk, sizeof junk, MSG_DONTWAIT) <= 0)
            break;
}

/* mac: the launcher's proof for this rank (sent after status 0). */
static void accept_rank(int rn, int fd, uint32_t pid,
                        const unsigned char mac[FH_BOOT_MAC_BYTES])
{
    rank_t *r = &ranks[rn];
    r->fd = fd;
    r->ever_connected = 1;
    r->rstate = RS_OP;
    r->dst = r->hdr;
    r->need = 4;
    r->have = 0;
    r->eof_deadline = 0;
    vlog(1, "rank %d connected (pid %u)", rn, pid);
    if (!any_connected) {
        any_connected = 1;
        if (fh_now() > connect_deadline)
            connect_deadline = fh_now() + boot_timeout;
    }
    shbuf_t *b = shbuf_new(FH_BOOT_ACCEPT_BYTES);
    fh_put_u32(b->data, 0);
    memcpy(b->data + 4, mac, FH_BOOT_MAC_BYTES);
    enqueue(r, b);
    shbuf_unref(b);
    if (failed) {
        send_death(r);
    } else if (latent_rank >= 0) {
        int lr = latent_rank;
        latent_rank = -1;
        rank_death(lr, 0, "exited with status 0 before fh_finalize");
    }
}

/* Sends our challenge once the hello (magic, nonce_R) is in.  Returns 0, or
 * -1 if the connection is to be closed (refusal already sent and logged). */
static int send_challenge(pend_t *p)
{
    if (fh_get_u32(p->buf) != FH_BOOT_MAGIC) {
        /* Not this protocol: an older rank (it would have sent its key),
         * a stray client.  Reported as a key failure, as before. */
        refuse(p, FH_BOOT_REFUSED_KEY, "bad job key");
        return -1;
    }
    memcpy(p->nonce_r, p->buf + 4, FH_BOOT_NONCE_BYTES);
    if (fh_boot_nonce(p->nonce_l) < 0) {
        msg("refused a connection: getrandom: %s", strerror(errno));
        return -1;
    }
    unsigned char ch[FH_BOOT_CHALLENGE_BYTES];
    fh_put_u32(ch, FH_BOOT_MAGIC);
    memcpy(ch + 4, p->nonce_l, FH_BOOT_NONCE_BYTES);
    /* The peer has sent nothing since its hello and waits for this: the
     * socket's send buffer is empty, 36 bytes always fit. */
    ssize_t w = send(p->fd, ch, sizeof ch, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w != (ssize_t)sizeof ch) {
        vlog(1, "dropped a connection during the handshake: %s",
             w < 0 ? strerror(errno) : "short send");
        return -1;
    }
    p->got_hello = 1;
    p->have = 0;
    return 0;
}

/* The proof (rank, pid, MAC) is in.  Returns 1 if the rank was accepted
 * (fd handed over), 0 if refused (refusal sent and logged). */
static int check_proof(pend_t *p)
{
    uint32_t rn = fh_get_u32(p->buf);
    uint32_t pid = fh_get_u32(p->buf + 4);
    unsigned char want[FH_BOOT_MAC_BYTES], mine[FH_BOOT_MAC_BYTES];
    /* Nothing the peer sent is acted on before its MAC checks out: rn and
     * pid are only MAC input until then. */
    if (fh_boot_mac(job_key, FH_BOOT_LABEL_RANK, p->nonce_r, p->nonce_l, rn,
                    pid, want) < 0 ||
        !fh_boot_mac_equal(p->buf + 8, want))
        refuse(p, FH_BOOT_REFUSED_KEY, "bad job key");
    else if (rn >= (uint32_t)nranks)
        refuse(p, FH_BOOT_REFUSED_RANK, "rank %u out of range (job has "
               "%d ranks)", rn, nranks);
    else if (ranks[rn].ever_connected)
        refuse(p, FH_BOOT_REFUSED_DUP, "rank %u is already connected "
               "(duplicate rank)", rn);
    else if (fh_boot_mac(job_key, FH_BOOT_LABEL_LAUNCHER, p->nonce_r,
                         p->nonce_l, rn, pid, mine) < 0)
        refuse(p, FH_BOOT_REFUSED_KEY, "cannot compute the handshake MAC "
               "(libcrypto)");
    else {
        accept_rank((int)rn, p->fd, pid, mine);
        return 1;
    }
    return 0;
}

/* Returns 1 if the pending entry is finished (fd closed or handed over). */
static int read_pend(pend_t *p)
{
    int complete = 0;  /* the peer sent all we asked for (vs EOF/error) */
    for (;;) {
        size_t want = p->got_hello ? FH_BOOT_PROOF_BYTES : FH_BOOT_HELLO_BYTES;
        ssize_t n = read(p->fd, p->buf + p->have, want - p->have);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            break;
        }
        if (n == 0)
            break;
        p->have += (size_t)n;
        if (p->have < want)
            continue;
        complete = 1;
        if (!p->got_hello) {
            if (send_challenge(p) < 0)
                break;
            complete = 0;
            continue;  /* the proof may be in already (it cannot be valid) */
        }
        if (check_proof(p))
            return 1;
        break;
    }
    if (!complete)
        vlog(1, "dropped a connection that closed during the handshake");
    close(p->fd);
    return 1;
}

static void accept_all(void)
{
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return;  /* EAGAIN, or EMFILE etc.: retried on the next poll */
        }
        if (npend == MAX_PENDING) {
            msg("refused a connection: too many connections in handshake");
            close(fd);
            continue;
        }
        pend[npend].fd = fd;
        pend[npend].got_hello = 0;
        pend[npend].have = 0;
        pend[npend].deadline = fh_now() + boot_timeout;
        npend++;
    }
}

/* ---- --tag-output ------------------------------------------------------------ */

static void emit_line(int rn, int s, const char *p, size_t n)
{
    char pre[16];
    int pl = snprintf(pre, sizeof pre, "[%d] ", rn);
    char *buf = malloc((size_t)pl + n + 1);
    if (!buf)
        return;
    memcpy(buf, pre, (size_t)pl);
    memcpy(buf + pl, p, n);
    buf[(size_t)pl + n] = '\n';
    write_all(s == 0 ? STDOUT_FILENO : STDERR_FILENO, buf, (size_t)pl + n + 1);
    free(buf);
}

static void read_output(int rn, int s)
{
    rank_t *r = &ranks[rn];
    char chunk[65536];
    for (;;) {
        ssize_t n = read(r->pipe_fd[s], chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {  /* EOF or error */
            if (r->line_len[s])
                emit_line(rn, s, r->line[s], r->line_len[s]);
            r->line_len[s] = 0;
            close(r->pipe_fd[s]);
            r->pipe_fd[s] = -1;
            return;
        }
        for (ssize_t i = 0; i < n; i++) {
            char c = chunk[i];
            if (c == '\n') {
                emit_line(rn, s, r->line[s], r->line_len[s]);
                r->line_len[s] = 0;
                continue;
            }
            if (r->line_len[s] == LINE_MAX_BYTES) {  /* split huge lines */
                emit_line(rn, s, r->line[s], r->line_len[s]);
                r->line_len[s] = 0;
            }
            r->line[s][r->line_len[s]++] = c;
        }
    }
}

/* ---- children ---------------------------------------------------------------- */

/* A rank that ends without closing its endpoints (killed, _exit after a
 * peer's death, fh_abort) leaves the shared-memory files of libfabric's shm
 * endpoints in /dev/shm.  The ofi conduit names them "fh_<pid>_<path>_<rnd>"
 * (conduits/ofi/ofi_path.c), so the launcher, which knows each rank's pid,
 * removes exactly its ranks' files once the rank is gone.  Peers that still
 * map them keep their mapping; the name was only needed to attach. */
static void remove_rank_shm(pid_t pid)
{
    char prefix[32];
    int plen = snprintf(prefix, sizeof prefix, "fh_%d_", (int)pid);
    DIR *d = opendir("/dev/shm");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, (size_t)plen) == 0 &&
            unlinkat(dirfd(d), e->d_name, 0) == 0)
            vlog(2, "removed /dev/shm/%s of rank pid %d", e->d_name, (int)pid);
    closedir(d);
}

static void reap(void)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0)
            return;
        int rn = -1;
        for (int i = 0; i < nranks; i++)
            if (ranks[i].pid == pid && !ranks[i].reaped) {
                rn = i;
                break;
            }
        if (rn < 0)
            continue;
        rank_t *r = &ranks[rn];
        r->reaped = 1;
        remove_rank_shm(pid);
        r->code = WIFEXITED(st) ? WEXITSTATUS(st)
                                : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        n_reaped++;
        char what[128];
        describe(r->code, what, sizeof what);
        vlog(1, "rank %d (pid %d) %s", rn, (int)pid, what);
        if (r->finalized || r->aborted || term_mode) {
            if (r->code && r->finalized && !failed)
                msg("rank %d (pid %d) %s after fh_finalize", rn, (int)pid,
                    what);
            set_code(r->code);
        } else if (r->code != 0) {
            rank_death(rn, r->code, what);
        } else if (any_connected) {
            rank_death(rn, 0, "exited with status 0 before fh_finalize");
        } else if (latent_rank < 0) {
            latent_rank = rn;  /* a death only if this is a firehose job */
        }
        if (failed)
            set_code(r->code);
        close_rank_conn(r);
        if (n_reaped == nranks)
            drain_deadline = fh_now() + DRAIN_GRACE;
    }
}

static void on_signal(int sig)
{
    int e = errno;
    unsigned char c = (unsigned char)sig;
    ssize_t w = write(sig_pipe[1], &c, 1);
    (void)w;
    errno = e;
}

/* Finds prog the way execvp would; returns 0, or an errno. */
static int find_program(const char *prog)
{
    if (strchr(prog, '/'))
        return access(prog, X_OK) == 0 ? 0 : errno;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    int err = ENOENT;
    for (;;) {
        const char *end = strchr(path, ':');
        size_t dl = end ? (size_t)(end - path) : strlen(path);
        char full[PATH_MAX];
        struct stat sb;
        if (snprintf(full, sizeof full, "%.*s/%s", (int)(dl ? dl : 1),
                     dl ? path : ".", prog) < (int)sizeof full &&
            stat(full, &sb) == 0 && S_ISREG(sb.st_mode)) {
            if (access(full, X_OK) == 0)
                return 0;
            err = EACCES;
        }
        if (!end)
            break;
        path = end + 1;
    }
    return err;
}

/* argv for rank rn: the --prefix-cmd words (with %r expanded) + the program. */
static char **build_argv(int rn, char **prog_argv, int prog_argc)
{
    int nwords = 0;
    char *copy = NULL;
    char *words[256];
    if (prefix_cmd) {
        copy = strdup(prefix_cmd);
        for (char *save = NULL, *w = strtok_r(copy, " \t", &save);
             w && nwords < 256; w = strtok_r(NULL, " \t", &save))
            words[nwords++] = w;
    }
    char **argv = calloc((size_t)(nwords + prog_argc + 1), sizeof *argv);
    for (int i = 0; i < nwords; i++) {
        char buf[4096];
        size_t o = 0;
        for (const char *s = words[i]; *s && o < sizeof buf - 16; s++) {
            if (s[0] == '%' && s[1] == 'r') {
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%d", rn);
                s++;
            } else if (s[0] == '%' && s[1] == '%') {
                buf[o++] = '%';
                s++;
            } else {
                buf[o++] = *s;
            }
        }
        buf[o] = '\0';
        argv[i] = strdup(buf);
    }
    for (int i = 0; i < prog_argc; i++)
        argv[nwords + i] = strdup(prog_argv[i]);
    free(copy);
    return argv;
}

static void free_argv(char **argv)
{
    for (char **a = argv; *a; a++)
        free(*a);
    free(argv);
}

static void spawn(int rn, char **prog_argv, int prog_argc)
{
    rank_t *r = &ranks[rn];
    int pout[2] = {-1, -1}, perr[2] = {-1, -1};
    if (tag_output &&
        (pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0))
        die(1, "cannot create output pipes: %s", strerror(errno));
    char **argv = build_argv(rn, prog_argv, prog_argc);
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die(1, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* Die with the launcher, even if it is killed with SIGKILL. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        setpgid(0, job_pgid ? job_pgid : 0);
        struct sigaction sa = {.sa_handler = SIG_DFL};
        sigemptyset(&sa.sa_mask);
        int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGPIPE};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            sigaction(sigs[i], &sa, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        setrlimit(RLIMIT_NOFILE, &orig_nofile);
        if (tag_output) {
            dup2(pout[1], STDOUT_FILENO);
            dup2(perr[1], STDERR_FILENO);
        }
        /* Only rank 0 reads stdin, and only from a file or pipe (the ranks
         * are in a background process group). */
        if (rn != 0 || isatty(STDIN_FILENO)) {
            int nul = open("/dev/null", O_RDONLY);
            if (nul >= 0 && nul != STDIN_FILENO) {
                dup2(nul, STDIN_FILENO);
                close(nul);
            }
        }
        char num[16];
        snprintf(num, sizeof num, "%d", rn);
        setenv("FH_RANK", num, 1);
        snprintf(num, sizeof num, "%d", nranks);
        setenv("FH_NRANKS", num, 1);
        setenv("FH_BOOT_ADDR", boot_addr, 1);
        setenv("FH_JOB_KEY", job_key_hex, 1);
        execvp(argv[0], argv);
        int e = errno;
        char line[PATH_MAX + 128];
        int n = snprintf(line, sizeof line, "fhrun: rank %d: cannot run '%s': "
                         "%s\n", rn, argv[0], strerror(e));
        if (n > 0)
            write_all(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n
                                                                  : sizeof line - 1);
        _exit(e == ENOENT ? 127 : 126);
    }
    if (!job_pgid)
        job_pgid = pid;
    setpgid(pid, job_pgid);  /* also in the child: whichever runs first */
    r->pid = pid;
    free_argv(argv);
    if (tag_output) {
        close(pout[1]);
        close(perr[1]);
        r->pipe_fd[0] = pout[0];
        r->pipe_fd[1] = perr[0];
        fcntl(pout[0], F_SETFL, O_NONBLOCK);
        fcntl(perr[0], F_SETFL, O_NONBLOCK);
        r->line[0] = malloc(LINE_MAX_BYTES);
        r->line[1] = malloc(LINE_MAX_BYTES);
        if (!r->line[0] || !r->line[1])
            die(1, "out of memory");
    }
}

/* ---- listening socket ------------------------------------------------------- */

static void open_listener(void)
{
    if (!listen_spec) {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp)
            tmp = "/tmp";
        if (snprintf(sock_dir, sizeof sock_dir, "%s/fhrun.XXXXXX", tmp) >=
            (int)sizeof sock_dir)
            die(1, "TMPDIR is too long");
        if (!mkdtemp(sock_dir)) {
            int e = errno;
            sock_dir[0] = '\0';
            die(1, "cannot create a directory in %s: %s", tmp, strerror(e));
        }
        snprintf(sock_path, sizeof sock_path, "%s/boot.sock", sock_dir);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(sock_path) >= sizeof sa.sun_path)
            die(1, "socket path %s is too long for a unix socket (%zu bytes "
                "max); set TMPDIR to a shorter directory", sock_path,
                sizeof sa.sun_path - 1);
        strcpy(sa.sun_path, sock_path);
        listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                           0);
        if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0)
            die(1, "cannot create the socket %s: %s", sock_path, strerror(errno));
        snprintf(boot_addr, sizeof boot_addr, "unix:%s", sock_path);
    } else {
        char host[256], port[16];
        if (fh_parse_addr(listen_spec, host, sizeof host, port, sizeof port) != 't')
            die(1, "--listen %s: expected tcp:ADDR:PORT", listen_spec);
        if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "*"))
            die(1, "--listen %s: give an address the ranks can connect to, not "
                "a wildcard", listen_spec);
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
        int g = getaddrinfo(host, port, &hints, &res);
        if (g)
            die(1, "--listen %s: %s", listen_spec, gai_strerror(g));
        int e = 0;
        for (ai = res; ai; ai = ai->ai_next) {
            listen_fd = socket(ai->ai_family,
                               ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                               ai->ai_protocol);
            if (listen_fd < 0) {
                e = errno;
                continue;
            }
            int one = 1;
            setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (bind(listen_fd, ai->ai_addr, ai->ai_addrlen) == 0)
                break;
            e = errno;
            close(listen_fd);
            listen_fd = -1;
        }
        freeaddrinfo(res);
        if (listen_fd < 0)
            die(1, "--listen %s: cannot bind: %s", listen_spec, strerror(e));
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        getsockname(listen_fd, (struct sockaddr *)&ss, &sl);
        unsigned p = ss.ss_family == AF_INET6
                         ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        snprintf(boot_addr, sizeof boot_addr,
                 strchr(host, ':') ? "tcp:[%s]:%u" : "tcp:%s:%u", host, p);
    }
    if (listen(listen_fd, SOMAXCONN) < 0)
        die(1, "listen on %s: %s", boot_addr, strerror(errno));
}

/* ---- main ------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fhrun -n N [options] program [args...]\n"
            "Runs N ranks of a firehose program on this host.\n\n"
            "  -n, --np N            number of ranks (1..%d)\n"
            "      --tag-output      prefix each output line with \"[rank] \"\n"
            "      --prefix-cmd CMD  run each rank as CMD program args; CMD is\n"
            "                        split on spaces, %%r becomes the rank\n"
            "                        (e.g. \"ip netns exec fhns%%r\")\n"
            "      --listen tcp:ADDR:PORT\n"
            "                        serve the bootstrap on TCP (default: a\n"
            "                        private unix socket under $TMPDIR)\n"
            "      --timeout SEC     kill the job after SEC seconds (exit 124)\n"
            "  -v, --verbose         report launcher activity (repeat for more)\n"
            "  -h, --help            this help\n"
            "      --version         print the version\n\n"
            "Environment: FH_BOOT_TIMEOUT (s, default 60) bounds how long ranks\n"
            "may take to connect.  See fhrun(1).\n",
            MAX_RANKS);
}

int main(int argc, char **argv)
{
    enum { O_TAG = 256, O_PREFIX, O_LISTEN, O_TIMEOUT, O_VERSION };
    static const struct option opts[] = {
        {"np", required_argument, NULL, 'n'},
        {"tag-output", no_argument, NULL, O_TAG},
        {"prefix-cmd", required_argument, NULL, O_PREFIX},
        {"listen", required_argument, NULL, O_LISTEN},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, O_VERSION},
        {NULL, 0, NULL, 0},
    };
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "+n:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'n': {
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno || *end || !*optarg || v < 1 || v > MAX_RANKS)
                die(2, "-n %s: expected a number of ranks in 1..%d", optarg,
                    MAX_RANKS);
            nranks = (int)v;
            break;
        }
        case O_TAG: tag_output = 1; break;
        case O_PREFIX: prefix_cmd = optarg; break;
        case O_LISTEN: listen_spec = optarg; break;
        case O_TIMEOUT:
            errno = 0;
            job_timeout = strtod(optarg, &end);
            if (errno || *end || !*optarg || !(job_timeout > 0) ||
                job_timeout > 1e9)
                die(2, "--timeout %s: expected a positive number of seconds",
                    optarg);
            break;
        case 'v': verbose++; break;
        case 'h': usage(stdout); return 0;
        case O_VERSION:
            printf("fhrun (firehose) %d.%d\n", FH_VERSION_MAJOR,
                   FH_VERSION_MINOR);
            return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    if (nranks == 0)
        die(2, "missing -n N (the number of ranks)");
    const char *bt = getenv("FH_BOOT_TIMEOUT");
    if (bt && *bt) {
        errno = 0;
        long v = strtol(bt, &end, 10);
        if (errno || *end || v < 1 || v > INT_MAX / 1000)
            die(2, "FH_BOOT_TIMEOUT=%s: expected a number of seconds, at least "
                "1", bt);
        boot_timeout = (int)v;
    }
    if (prefix_cmd && !prefix_cmd[strspn(prefix_cmd, " \t")])
        die(2, "--prefix-cmd: empty command");

    /* Fail early, once, if the command cannot be found. */
    {
        char **a0 = build_argv(0, argv + optind, argc - optind);
        int e = find_program(a0[0]);
        if (e) {
            char name[PATH_MAX];
            snprintf(name, sizeof name, "%s", a0[0]);
            free_argv(a0);
            die(e == ENOENT ? 127 : 126, "cannot run '%s': %s", name,
                e == ENOENT && !strchr(name, '/') ? "command not found in PATH"
                                                  : strerror(e));
        }
        free_argv(a0);
    }

    if (getrandom(job_key, sizeof job_key, 0) != (ssize_t)sizeof job_key)
        die(1, "getrandom: %s", strerror(errno));
    fh_hex(job_key, sizeof job_key, job_key_hex);

    /* Up to 3 descriptors per rank. */
    getrlimit(RLIMIT_NOFILE, &orig_nofile);
    struct rlimit rl = orig_nofile;
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);

    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        die(1, "pipe: %s", strerror(errno));
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    open_listener();
    ranks = calloc((size_t)nranks, sizeof *ranks);
    if (!ranks)
        die(1, "out of memory");
    for (int i = 0; i < nranks; i++) {
        ranks[i].fd = -1;
        ranks[i].pipe_fd[0] = ranks[i].pipe_fd[1] = -1;
    }
    vlog(1, "%d rank(s), bootstrap at %s", nranks, boot_addr);
    t_start = fh_now();
    connect_deadline = t_start + boot_timeout;
    for (int i = 0; i < nranks; i++)
        spawn(i, argv + optind, argc - optind);

    size_t cap = 2 + MAX_PENDING + 3 * (size_t)nranks;
    struct pollfd *pfd = calloc(cap, sizeof *pfd);
    int *who = calloc(cap, sizeof *who);  /* which object each entry is */
    if (!pfd || !who)
        die(1, "out of memory");
    enum { W_SIG = -1, W_LISTEN = -2, W_PEND = 1 << 20, W_OUT = 2 << 20,
           W_ERR = 3 << 20, W_CONN = 4 << 20 };

    for (;;) {
        double now = fh_now();
        int outputs_open = 0;
        for (int i = 0; i < nranks; i++)
            outputs_open += (ranks[i].pipe_fd[0] >= 0) + (ranks[i].pipe_fd[1] >= 0);
        if (n_reaped == nranks && (!outputs_open || now >= drain_deadline))
            break;

        /* Timers. */
        if (job_timeout > 0 && !term_mode && now >= t_start + job_timeout) {
            msg("job timed out after %g s (--timeout); terminating it",
                job_timeout);
            terminate_job(124);
        }
        if (!failed && any_connected && now >= connect_deadline) {
            char list[512];
            size_t n = 0;
            int count = 0;
            for (int i = 0; i < nranks; i++)
                if (!ranks[i].ever_connected && !ranks[i].reaped) {
                    if (n < sizeof list - 16)
                        n += (size_t)snprintf(list + n, sizeof list - n, "%s%d",
                                              count ? "," : "", i);
                    count++;
                }
            if (count)
                launcher_abort("rank(s) %s never connected within %d s "
                               "(FH_BOOT_TIMEOUT)", list, boot_timeout);
            else
                connect_deadline = 1e300;
        }
        for (int i = 0; i < nranks; i++) {
            rank_t *r = &ranks[i];
            if (r->eof_deadline > 0 && now >= r->eof_deadline) {
                r->eof_deadline = 0;
                if (!r->reaped && !failed)
                    rank_death(i, 0, "closed its connection to fhrun before "
                                     "fh_finalize");
            }
        }
        for (int i = 0; i < npend; i++)
            if (now >= pend[i].deadline) {
                msg("refused a connection: no handshake within %d s",
                    boot_timeout);
                close(pend[i].fd);
                pend[i--] = pend[--npend];
            }
        if (kill_at > 0 && now >= kill_at) {
            kill_at = 0;
            kill_stragglers();
        }

        /* Next wake-up: the nearest timer, at most 250 ms away. */
        double next = now + 0.25;
#define NEAR(t) do { if ((t) > 0 && (t) < next) next = (t); } while (0)
        if (job_timeout > 0 && !term_mode)
            NEAR(t_start + job_timeout);
        if (!failed && any_connected)
            NEAR(connect_deadline);
        NEAR(kill_at);
        for (int i = 0; i < nranks; i++)
            NEAR(ranks[i].eof_deadline);
        for (int i = 0; i < npend; i++)
            NEAR(pend[i].deadline);
#undef NEAR
        int timeout_ms = next <= now ? 0 : (int)((next - now) * 1000) + 1;

        size_t n = 0;
        pfd[n] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
        who[n++] = W_SIG;
        pfd[n] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
        who[n++] = W_LISTEN;
        for (int i = 0; i < npend; i++) {
            pfd[n] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
            who[n++] = W_PEND + i;
        }
        for (int i = 0; i < nranks; i++) {
            rank_t *r = &ranks[i];
            if (r->fd >= 0) {
                pfd[n] = (struct pollfd){
                    .fd = r->fd, .events = POLLIN | (r->oq ? POLLOUT : 0)};
                who[n++] = W_CONN + i;
            }
            if (r->pipe_fd[0] >= 0) {
                pfd[n] = (struct pollfd){.fd = r->pipe_fd[0], .events = POLLIN};
                who[n++] = W_OUT + i;
            }
            if (r->pipe_fd[1] >= 0) {
                pfd[n] = (struct pollfd){.fd = r->pipe_fd[1], .events = POLLIN};
                who[n++] = W_ERR + i;
            }
        }
        int pr = poll(pfd, n, timeout_ms);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            die(1, "poll: %s", strerror(errno));
        }
        if (pr == 0)
            continue;

        /* Pending handshakes are compacted as we go: walk backwards. */
        for (size_t k = n; k-- > 0;) {
            if (!pfd[k].revents)
                continue;
            int w = who[k];
            if (w >= W_PEND && w < W_OUT) {
                int i = w - W_PEND;
                if (read_pend(&pend[i]))
                    pend[i] = pend[--npend];
            }
        }
        for (size_t k = 0; k < n; k++) {
            if (!pfd[k].revents)
                continue;
            int w = who[k];
            if (w == W_SIG) {
                unsigned char sigs[64];
                ssize_t got = read(sig_pipe[0], sigs, sizeof sigs);
                for (ssize_t j = 0; j < got; j++) {
                    if (sigs[j] == SIGCHLD)
                        continue;
                    if (!term_mode)
                        msg("got %s; terminating the job", strsignal(sigs[j]));
                    terminate_job(128 + sigs[j]);
                }
                reap();
            } else if (w == W_LISTEN) {
                accept_all();
            } else if (w >= W_CONN) {
                rank_t *r = &ranks[w - W_CONN];
                if (r->fd < 0 || r->fd != pfd[k].fd)
                    continue;
                if (pfd[k].revents & POLLOUT)
                    flush_rank(r);
                if (r->fd >= 0 && (pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                    read_rank(w - W_CONN);
            } else if (w >= W_ERR) {
                read_output(w - W_ERR, 1);
            } else if (w >= W_OUT) {
                read_output(w - W_OUT, 0);
            }
        }
    }

    for (int i = 0; i < npend; i++)
        close(pend[i].fd);
    for (int i = 0; i < nranks; i++) {
        rank_t *r = &ranks[i];
        close_rank_conn(r);
        for (int s = 0; s < 2; s++) {
            if (r->pipe_fd[s] >= 0) {
                if (r->line_len[s])
                    emit_line(i, s, r->line[s], r->line_len[s]);
                close(r->pipe_fd[s]);
            }
            free(r->line[s]);
        }
    }
    shbuf_unref(ag_buf);
    free(ranks);
    free(pfd);
    free(who);
    close(listen_fd);
    close(sig_pipe[0]);
    close(sig_pipe[1]);
    cleanup_socket();
    vlog(1, "job done, exit status %d", exit_code);
    return exit_code;
}
