/*
 * server.c -- the bootstrap server (the launcher's side of bootstrap.h).
 *
 * open_listener() creates the socket the ranks find in FH_BOOT_ADDR: a
 * private unix socket under $TMPDIR, or TCP with --listen.  A new
 * connection is "pending" until its handshake proves it is one of the
 * job's ranks (handshake.c, which also says how connections that never
 * authenticate are kept from taking every slot); then accept_rank hands it
 * over.  An accepted rank sends requests (allgather, finalize, abort),
 * decoded by firehose/boot/boot_decode.h (read_rank, on_request); a round of allgather completes when
 * every rank contributed, and the result goes to every rank from one shared
 * buffer.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fhrun.h"

/* ---- listening socket ---------------------------------------------------- */

/* A private unix socket, $TMPDIR/fhrun.XXXXXX/boot.sock. */
static void listen_unix(struct fhrun_job *j)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    if (snprintf(j->sock_dir, sizeof j->sock_dir, "%s/fhrun.XXXXXX", tmp) >=
        (int)sizeof j->sock_dir)
        die(1, "TMPDIR is too long");
    if (!mkdtemp(j->sock_dir)) {
        int e = errno;
        j->sock_dir[0] = '\0';
        die(1, "cannot create a directory in %s: %s", tmp, strerror(e));
    }
    snprintf(j->sock_path, sizeof j->sock_path, "%s/boot.sock", j->sock_dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(j->sock_path) >= sizeof sa.sun_path)
        die(1, "socket path %s is too long for a unix socket (%zu bytes "
            "max); set TMPDIR to a shorter directory", j->sock_path,
            sizeof sa.sun_path - 1);
    strcpy(sa.sun_path, j->sock_path);
    j->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                          0);
    if (j->listen_fd < 0 ||
        bind(j->listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        die(1, "cannot create the socket %s: %s", j->sock_path,
            strerror(errno));
    snprintf(j->boot_addr, sizeof j->boot_addr, "unix:%s", j->sock_path);
}

/* TCP on spec (--listen tcp:ADDR:PORT): an address the ranks can reach,
 * not a wildcard; port 0 picks one. */
static void listen_tcp(struct fhrun_job *j, const char *spec)
{
    char host[256], port[16];
    if (fh_parse_addr(spec, host, sizeof host, port, sizeof port) != 't')
        die(1, "--listen %s: expected tcp:ADDR:PORT", spec);
    if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "*"))
        die(1, "--listen %s: give an address the ranks can connect to, not "
            "a wildcard", spec);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g)
        die(1, "--listen %s: %s", spec, gai_strerror(g));
    int e = 0;
    for (ai = res; ai; ai = ai->ai_next) {
        j->listen_fd = socket(ai->ai_family,
                              ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                              ai->ai_protocol);
        if (j->listen_fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(j->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(j->listen_fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        e = errno;
        close(j->listen_fd);
        j->listen_fd = -1;
    }
    freeaddrinfo(res);
    if (j->listen_fd < 0)
        die(1, "--listen %s: cannot bind: %s", spec, strerror(e));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(j->listen_fd, (struct sockaddr *)&ss, &sl);
    unsigned p = ss.ss_family == AF_INET6
                     ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                     : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    snprintf(j->boot_addr, sizeof j->boot_addr,
             strchr(host, ':') ? "tcp:[%s]:%u" : "tcp:%s:%u", host, p);
}

void open_listener(void)
{
    if (!fr.opts.listen_spec)
        listen_unix(&fr.job);
    else
        listen_tcp(&fr.job, fr.opts.listen_spec);
    if (listen(fr.job.listen_fd, SOMAXCONN) < 0)
        die(1, "listen on %s: %s", fr.job.boot_addr, strerror(errno));
}

void cleanup_socket(void)
{
    if (fr.job.sock_path[0]) {
        unlink(fr.job.sock_path);
        fr.job.sock_path[0] = '\0';
    }
    if (fr.job.sock_dir[0]) {
        rmdir(fr.job.sock_dir);
        fr.job.sock_dir[0] = '\0';
    }
}

/* ---- connections --------------------------------------------------------- */

void close_rank_conn(rank_t *r)
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
    fh_boot_rx_free(&r->rx);
}

void on_rank_eof(rank_t *r, const char *why)
{
    int rn = (int)(r - fr.job.ranks);
    vlog(2, "%s: connection closed (%s)", FH_RANK_NAME(rn), why);
    close_rank_conn(r);
    if (!r->finalized && !r->aborted && !r->reaped && !fr.end.failed)
        r->eof_deadline = fh_now() + EOF_GRACE;
}

void send_death(rank_t *r)
{
    size_t ml = strlen(fr.end.death_msg);
    shbuf_t *b = shbuf_new(16 + ml);
    fh_put_u32(b->data, FH_BOOT_MSG_DEAD);
    fh_put_u32(b->data + 4, fr.end.death_rank);
    fh_put_u32(b->data + 8, fr.end.death_status);
    fh_put_u32(b->data + 12, (uint32_t)ml);
    memcpy(b->data + 16, fr.end.death_msg, ml);
    enqueue(r, b);
    shbuf_unref(b);
}

/* ---- ranks that passed the handshake ------------------------------------- */

/* The handshake's end (handshake.c): our accept (status 0 and mac) is the
 * first thing queued to the rank. */
void accept_rank(int rn, int fd, uint32_t pid,
                 const unsigned char mac[FH_BOOT_MAC_BYTES])
{
    rank_t *r = &fr.job.ranks[rn];
    r->fd = fd;
    r->ever_connected = 1;
    fh_boot_rx_init(&r->rx, 0, MAX_RESULT / (size_t)fr.opts.nranks);
    r->eof_deadline = 0;
    vlog(1, "%s connected (pid %u)", FH_RANK_NAME(rn), pid);
    guard_add_rank((pid_t)pid);
    if (!fr.job.any_connected) {
        fr.job.any_connected = 1;
        if (fh_now() > fr.job.connect_deadline)
            fr.job.connect_deadline = fh_now() + fr.opts.boot_timeout;
    }
    shbuf_t *b = shbuf_new(FH_BOOT_ACCEPT_BYTES);
    fh_put_u32(b->data, 0);
    memcpy(b->data + 4, mac, FH_BOOT_MAC_BYTES);
    enqueue(r, b);
    shbuf_unref(b);
    if (fr.end.failed) {
        send_death(r);
    } else if (fr.job.latent_rank >= 0) {
        int lr = fr.job.latent_rank;
        fr.job.latent_rank = -1;
        rank_death(lr, 0, "exited with status 0 before fh_finalize");
    }
}

/* ---- requests from ranks ------------------------------------------------- */

void reset_round(void)
{
    shbuf_unref(fr.ag.buf);
    fr.ag.buf = NULL;
    fr.ag.count = 0;
    for (int i = 0; i < fr.opts.nranks; i++)
        fr.job.ranks[i].contributed = 0;
}

static void contribute(int rn, const unsigned char *data, uint32_t len)
{
    if (fr.end.failed)
        return;
    rank_t *r = &fr.job.ranks[rn];
    for (int i = 0; i < fr.opts.nranks; i++)
        if (fr.job.ranks[i].finalized) {
            launcher_abort("%s started an allgather/barrier after %s "
                           "called fh_finalize", FH_RANK_NAME(rn), FH_RANK_NAME(i));
            return;
        }
    if (r->contributed) {
        launcher_abort("%s joined the same allgather twice (protocol "
                       "error)", FH_RANK_NAME(rn));
        return;
    }
    if (!fr.ag.buf) {
        fr.ag.buf = shbuf_new(4 + (size_t)len * (size_t)fr.opts.nranks);
        fh_put_u32(fr.ag.buf->data, FH_BOOT_MSG_ALLGATHER);
        fr.ag.len = len;
        fr.ag.first = rn;
    } else if (len != fr.ag.len) {
        launcher_abort("allgather length mismatch: %s contributed %u "
                       "bytes but %s contributed %u", FH_RANK_NAME(fr.ag.first),
                       fr.ag.len, FH_RANK_NAME(rn), len);
        return;
    }
    if (len)
        memcpy(fr.ag.buf->data + 4 + (size_t)rn * len, data, len);
    r->contributed = 1;
    if (++fr.ag.count < fr.opts.nranks)
        return;
    vlog(2, "allgather of %u bytes complete", len);
    shbuf_t *b = fr.ag.buf;
    fr.ag.buf = NULL;
    fr.ag.count = 0;
    for (int i = 0; i < fr.opts.nranks; i++) {
        fr.job.ranks[i].contributed = 0;
        enqueue(&fr.job.ranks[i], b);
    }
    shbuf_unref(b);
}

static void on_finalize(int rn)
{
    rank_t *r = &fr.job.ranks[rn];
    vlog(2, "%s: finalize", FH_RANK_NAME(rn));
    r->finalized = 1;
    close_rank_conn(r);
    if (!fr.end.failed && fr.ag.count > 0)
        launcher_abort("%s called fh_finalize while %d rank(s) wait in an "
                       "allgather/barrier", FH_RANK_NAME(rn), fr.ag.count);
}

static void on_abort(int rn, uint32_t code, const char *text)
{
    rank_t *r = &fr.job.ranks[rn];
    int c = (code & 0xff) ? (int)(code & 0xff) : 1;
    char what[FH_BOOT_MAX_MSG];
    r->aborted = 1;
    if (fr.end.failed) {
        vlog(1, "%s aborted too (code %u): %s", FH_RANK_NAME(rn), code, text);
    } else {
        msg("%s (pid %d) aborted the job (code %u): %s", FH_RANK_NAME(rn),
            (int)r->pid, code, text);
        snprintf(what, sizeof what, "%d aborted the job (code %u): %s",
                 (int)r->pid, code, text);
        set_code(c);
        job_fail((uint32_t)rn, c, what);
    }
    /* Last: text may point into r->rx's payload.  Closing tells the rank we have
     * read its request. */
    close_rank_conn(r);
}

/* The rank's fh_init failed: it goes on running (its program decides what
 * to do), the others are told so their fh_init fails too rather than wait.
 * The job has failed; the rank is not killed for it, and its exit status
 * is reported as that of a rank whose fh_init failed (reap.c). */
static void on_init_failed(int rn, const char *text)
{
    rank_t *r = &fr.job.ranks[rn];
    r->init_failed = 1;
    if (strncmp(text, "fh_init: ", 9) == 0)
        text += 9;
    if (fr.end.failed) {
        vlog(1, "%s failed in fh_init too: %s", FH_RANK_NAME(rn), text);
    } else {
        char what[FH_BOOT_MAX_MSG];
        msg("%s (pid %d) failed in fh_init: %s", FH_RANK_NAME(rn), (int)r->pid, text);
        snprintf(what, sizeof what, "%d failed in fh_init: %s", (int)r->pid,
                 text);
        job_fail((uint32_t)rn, (int)FH_BOOT_DEAD_INIT_FAILED, what);
        /* The others return from fh_init at their next bootstrap call,
         * which may come after a slow conduit open: not DEAD_GRACE, the
         * bootstrap's own timeout before the stragglers are killed. */
        fr.end.kill_at = fh_now() + fr.opts.boot_timeout;
    }
    close_rank_conn(r);   /* last: text may point into r->rx's payload */
}

/* The message r->rx completed, or the stream's error (FH_BOOT_RX_BAD). */
static void on_request(int rn, int what)
{
    rank_t *r = &fr.job.ranks[rn];
    fh_boot_rx_t *rx = &r->rx;
    if (what == FH_BOOT_RX_BAD) {
        if (rx->type == FH_BOOT_OP_ABORT || rx->type == FH_BOOT_OP_INITFAIL) {
            /* Its text is too long: the request stands, without it. */
            if (rx->type == FH_BOOT_OP_INITFAIL)
                on_init_failed(rn, "(message too long)");
            else
                on_abort(rn, rx->a, "(message too long)");
            return;
        }
        launcher_abort("%s sent %s (protocol error)", FH_RANK_NAME(rn), rx->err);
        on_rank_eof(r, "protocol error");
        return;
    }
    switch (rx->type) {
    case FH_BOOT_OP_ALLGATHER:
        contribute(rn, rx->payload, (uint32_t)rx->len);
        break;
    case FH_BOOT_OP_FINALIZE:
        on_finalize(rn);
        break;
    case FH_BOOT_OP_ABORT:
        on_abort(rn, rx->a, (const char *)rx->payload);
        break;
    default:                     /* FH_BOOT_OP_INITFAIL */
        on_init_failed(rn, (const char *)rx->payload);
        break;
    }
}

void read_rank(int rn)
{
    rank_t *r = &fr.job.ranks[rn];
    while (r->fd >= 0) {
        unsigned char *dst;
        size_t want = fh_boot_rx_space(&r->rx, &dst);
        ssize_t n = read(r->fd, dst, want);
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
        int what = fh_boot_rx_got(&r->rx, (size_t)n);
        if (what != FH_BOOT_RX_MORE)
            on_request(rn, what);  /* a rank never gets FH_BOOT_RX_LEN */
    }
}
