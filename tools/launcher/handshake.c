/*
 * handshake.c -- connections on the bootstrap socket until they have
 * proven they know the job key: admission, the handshake itself, and the
 * bounds that keep strangers from starving the job's ranks.
 *
 * The handshake (bootstrap.h, boot_wire.h): the rank's hello (magic,
 * nonce_R), our challenge (magic, nonce_L), the rank's proof (rank, pid,
 * HMAC over both nonces), our accept with our own proof.  Nothing a peer
 * sends is acted on before its MAC checks out; then accept_rank (server.c)
 * takes the connection over.  Until then it is "pending" (fr.job.pend, at
 * most MAX_PENDING).
 *
 * Silent connections.  With --listen anyone who can reach the port can
 * connect, and until its proof nothing tells a rank from a stranger who
 * connects and says nothing.  Three rules keep such connections from
 * starving the ranks (issue 26):
 *   - a handshake deadline: a connection not accepted HANDSHAKE_TIMEOUT
 *     seconds after we accepted it is closed.  A rank needs milliseconds
 *     (it sends its hello and its proof as soon as it can).
 *   - a per-source cap (TCP): at most MAX_PENDING_PER_SOURCE pending
 *     connections per peer address, so one address holds at most a quarter
 *     of the table and cannot push out the connections of another.  A new
 *     connection from an address at its cap, or when the whole table is
 *     busy, is not refused: it takes the place of the pending connection
 *     least likely to be a rank (evict_one: one that has not even sent its
 *     hello, oldest first; else the oldest).  Refusing the newcomer instead
 *     would let a flooder that reconnects each time it is closed keep every
 *     slot of its address, and ranks on 127.0.0.1 share the address of any
 *     local flooder; with eviction it must open a whole cap's worth of
 *     connections within one rank's handshake (milliseconds) to push that
 *     rank out.
 *   - ranks retry (boot_fhrun.c): a handshake the launcher closed without
 *     an answer is tried again, with backoff, until FH_BOOT_TIMEOUT; only
 *     a refusal (wrong key, rank out of range, duplicate) or a launcher that
 *     fails its own proof is final.  So losing a slot costs a rank a retry,
 *     not the job.
 * On the unix socket (0700 directory: only the job's user can connect) there
 * is no per-source cap, and a full table is not evicted from: we stop
 * accepting until a slot frees, and new ranks wait in the kernel's backlog.
 *
 * Every refusal is logged, at most LOG_BURST a second (then how many were
 * not shown); the closures of the rules above are counted and summed up
 * at the end of the job (pend_report).
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fhrun.h"

/* ---- logging, rate-limited ------------------------------------------------ */

static void flush_hidden(void)
{
    struct fhrun_gate *g = &fr.gate;
    if (g->log_hidden)
        msg("%lu more message(s) about refused connections not shown (at "
            "most %d a second are)", g->log_hidden, LOG_BURST);
    g->log_hidden = 0;
}

/* "<verb> a connection[ from ADDR]: <fmt>", if the verbosity is at least
 * level, and at most LOG_BURST lines a second. */
static void conn_log(int level, const pend_t *p, const char *verb,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void conn_log(int level, const pend_t *p, const char *verb,
                     const char *fmt, ...)
{
    struct fhrun_gate *g = &fr.gate;
    if (fr.opts.verbose < level)
        return;
    double now = fh_now();
    if (now >= g->log_window_end) {
        flush_hidden();
        g->log_window_end = now + 1.0;
        g->log_shown = 0;
    }
    if (g->log_shown >= LOG_BURST) {
        g->log_hidden++;
        return;
    }
    g->log_shown++;
    char text[256], from[INET6_ADDRSTRLEN + 8] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (p->src.family == AF_INET || p->src.family == AF_INET6) {
        char a[INET6_ADDRSTRLEN];
        if (inet_ntop(p->src.family, p->src.addr, a, sizeof a))
            snprintf(from, sizeof from, " from %s", a);
    }
    msg("%s a connection%s: %s", verb, from, text);
}

/* ---- the handshake -------------------------------------------------------- */

/* Sends status why and closes nothing (the caller does). */
static void refuse(pend_t *p, uint32_t why, const char *text)
{
    conn_log(0, p, "refused", "%s", text);
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

/* Sends our challenge once the hello (magic, nonce_R) is in.  Returns 0, or
 * -1 if the connection is to be closed (refusal already sent and logged). */
static int send_challenge(pend_t *p)
{
    if (fh_boot_hello_decode(p->buf, p->nonce_r) != 0) {
        /* Not this protocol: an older rank (it would have sent its key),
         * a stray client.  Reported as a key failure, as before. */
        refuse(p, FH_BOOT_REFUSED_KEY, "bad job key");
        return -1;
    }
    if (fh_boot_nonce(p->nonce_l) < 0) {
        conn_log(0, p, "refused", "getrandom: %s", strerror(errno));
        return -1;
    }
    unsigned char ch[FH_BOOT_CHALLENGE_BYTES];
    fh_put_u32(ch, FH_BOOT_MAGIC);
    memcpy(ch + 4, p->nonce_l, FH_BOOT_NONCE_BYTES);
    /* The peer has sent nothing since its hello and waits for this: the
     * socket's send buffer is empty, 36 bytes always fit. */
    ssize_t w = send(p->fd, ch, sizeof ch, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w != (ssize_t)sizeof ch) {
        conn_log(1, p, "dropped", "during the handshake: %s",
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
    uint32_t rn = 0, pid = 0;
    unsigned char mine[FH_BOOT_MAC_BYTES];
    char text[128];
    /* Nothing the peer sent is acted on before its MAC checks out
     * (fh_boot_proof_check). */
    uint32_t st = fh_boot_proof_check(p->buf, fr.job.key, p->nonce_r,
                                      p->nonce_l, (uint32_t)fr.opts.nranks,
                                      &rn, &pid, mine);
    if (st == FH_BOOT_REFUSED_KEY) {
        refuse(p, FH_BOOT_REFUSED_KEY, "bad job key");
    } else if (st == FH_BOOT_REFUSED_RANK) {
        snprintf(text, sizeof text, "rank %u out of range (job has %d ranks)",
                 rn, fr.opts.nranks);
        refuse(p, FH_BOOT_REFUSED_RANK, text);
    } else if (fr.job.ranks[rn].ever_connected) {
        snprintf(text, sizeof text, "%s is already connected (duplicate "
                 "rank)", FH_RANK_NAME((int)rn));
        refuse(p, FH_BOOT_REFUSED_DUP, text);
    } else {
        accept_rank((int)rn, p->fd, pid, mine);
        return 1;
    }
    return 0;
}

int read_pend(pend_t *p)
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
        conn_log(1, p, "dropped", "closed by the peer during the handshake");
    close(p->fd);
    return 1;
}

/* ---- admission and the bounds ------------------------------------------- */

/* The peer's address, the key of the per-source cap: IPv4-mapped IPv6
 * counts as IPv4; every unix peer is one source. */
static void source_of(const struct sockaddr_storage *ss, src_t *s)
{
    memset(s, 0, sizeof *s);
    s->family = ss->ss_family;
    if (ss->ss_family == AF_INET) {
        memcpy(s->addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            s->family = AF_INET;
            memcpy(s->addr, a->s6_addr + 12, 4);
        } else {
            memcpy(s->addr, a->s6_addr, 16);
        }
    }
}

static int same_source(const src_t *a, const src_t *b)
{
    return a->family == b->family && !memcmp(a->addr, b->addr, sizeof a->addr);
}

/* Closes pending entry i (moving the last entry into its place). */
static void drop_pend(int i)
{
    close(fr.job.pend[i].fd);
    fr.job.pend[i] = fr.job.pend[--fr.job.npend];
}

/* Makes room for a connection from src: among src's own entries (its cap),
 * or if src is null in the whole table (every slot busy).  The victim is the entry least likely to be
 * a rank: no complete hello yet (a rank sends it with its connect), oldest
 * first; else the oldest. */
static void evict_one(const src_t *src)
{
    int victim = -1;
    for (int i = 0; i < fr.job.npend; i++) {
        const pend_t *p = &fr.job.pend[i];
        if (src && !same_source(src, &p->src))
            continue;
        if (victim < 0) {
            victim = i;
            continue;
        }
        const pend_t *v = &fr.job.pend[victim];
        if (p->got_hello != v->got_hello ? !p->got_hello : p->since < v->since)
            victim = i;
    }
    assert(victim >= 0);  /* callers evict only from a non-empty set */
    if (src) {
        conn_log(0, &fr.job.pend[victim], "refused", "closed for a newer one "
                 "(%d from that address in their handshake)",
                 MAX_PENDING_PER_SOURCE);
        fr.gate.n_over_cap++;
    } else {
        conn_log(0, &fr.job.pend[victim], "refused", "closed for a newer one "
                 "(all %d handshake slots busy)", MAX_PENDING);
        fr.gate.n_full++;
    }
    drop_pend(victim);
}

int pend_room(void)
{
    /* TCP always accepts (and evicts, admit); the unix socket waits. */
    return fr.opts.listen_spec || fr.job.npend < MAX_PENDING;
}

/* Takes a new connection fd from ss into the table, making room first. */
static void admit(int fd, const struct sockaddr_storage *ss)
{
    src_t src;
    source_of(ss, &src);
    if (src.family != AF_UNIX) {
        int same = 0;
        for (int i = 0; i < fr.job.npend; i++)
            same += same_source(&src, &fr.job.pend[i].src);
        if (same >= MAX_PENDING_PER_SOURCE)
            evict_one(&src);
    }
    if (fr.job.npend == MAX_PENDING)
        evict_one(NULL);
    pend_t *p = &fr.job.pend[fr.job.npend++];
    memset(p, 0, sizeof *p);
    p->fd = fd;
    p->src = src;
    p->since = fh_now();
    /* A rank sends its hello with its connect: read it now, so the entry
     * counts as speaking the protocol before the next connection arrives. */
    if (read_pend(p))
        fr.job.npend--;  /* p is the last entry */
}

void accept_all(void)
{
    /* At most ACCEPT_BATCH per call: the handshakes in progress are served
     * between batches, however fast connections arrive. */
    for (int k = 0; k < ACCEPT_BATCH && pend_room(); k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        memset(&ss, 0, sizeof ss);
        int fd = accept4(fr.job.listen_fd, (struct sockaddr *)&ss, &sl,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return;  /* EAGAIN, or EMFILE etc.: retried on the next poll */
        }
        admit(fd, &ss);
    }
}

void pend_timers(double now)
{
    for (int i = 0; i < fr.job.npend; i++)
        if (now >= fr.job.pend[i].since + HANDSHAKE_TIMEOUT) {
            conn_log(0, &fr.job.pend[i], "refused", "no handshake within %g s",
                     HANDSHAKE_TIMEOUT);
            fr.gate.n_timed_out++;
            drop_pend(i--);
        }
    if (fr.gate.log_hidden && now >= fr.gate.log_window_end)
        flush_hidden();
}

double pend_next_timer(void)
{
    double next = fr.gate.log_hidden ? fr.gate.log_window_end : 0;
    for (int i = 0; i < fr.job.npend; i++) {
        double t = fr.job.pend[i].since + HANDSHAKE_TIMEOUT;
        if (next == 0 || t < next)
            next = t;
    }
    return next;
}

void pend_report(void)
{
    const struct fhrun_gate *g = &fr.gate;
    flush_hidden();
    unsigned long n = g->n_over_cap + g->n_full + g->n_timed_out;
    if (n)
        msg("closed %lu unauthenticated connection(s): %lu over the limit of "
            "%d per address, %lu when all %d handshake slots were busy, %lu "
            "without a handshake within %g s", n, g->n_over_cap,
            MAX_PENDING_PER_SOURCE, g->n_full, MAX_PENDING, g->n_timed_out,
            HANDSHAKE_TIMEOUT);
}
