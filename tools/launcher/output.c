/*
 * output.c -- everything fhrun writes: its own messages on stderr, the send
 * queues of the rank connections, and --tag-output's forwarding of the
 * ranks' stdout and stderr line by line with a "[rank] " prefix.
 *
 * All descriptors are non-blocking.  A buffer sent to several ranks (an
 * allgather result, bootstrap.h) is one shbuf_t referenced by each queue.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fhrun.h"

/* ---- messages ------------------------------------------------------------ */

void write_all(int fd, const char *p, size_t n)
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

void msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}

void vlog(int level, const char *fmt, ...)
{
    if (fr.opts.verbose < level)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}

void die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    cleanup_socket();
    exit(code);
}

/* ---- send queues --------------------------------------------------------- */

shbuf_t *shbuf_new(size_t len)
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

void shbuf_unref(shbuf_t *b)
{
    if (b && --b->refs == 0)
        free(b);
}

/* Returns -1 if the connection was closed. */
int flush_rank(rank_t *r)
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

void enqueue(rank_t *r, shbuf_t *b)
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

/* ---- --tag-output -------------------------------------------------------- */

void emit_line(int rn, int s, const char *p, size_t n)
{
    char pre[FH_RANK_NAME_MAX + 4];
    int pl = fh_log_names_custom()
                 ? snprintf(pre, sizeof pre, "[%s] ", FH_RANK_NAME(rn))
                 : snprintf(pre, sizeof pre, "[%d] ", rn);
    char *buf = malloc((size_t)pl + n + 1);
    if (!buf)
        return;
    memcpy(buf, pre, (size_t)pl);
    memcpy(buf + pl, p, n);
    buf[(size_t)pl + n] = '\n';
    write_all(s == 0 ? STDOUT_FILENO : STDERR_FILENO, buf, (size_t)pl + n + 1);
    free(buf);
}

void read_output(int rn, int s)
{
    rank_t *r = &fr.job.ranks[rn];
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
