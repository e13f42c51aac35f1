/*
 * sec_shim.c -- an LD_PRELOAD library for the security tests: it lets a
 * process lie about the port it listens on, and records what a process
 * writes on the TCP connections it opens.  Built by `make check` as
 * tests/security/.libs/libsec_shim.so; never part of firehose.
 *
 * Port announcement (tests/security/impostor.c --attack takeover,
 * forge_test.c's takeover phase).  tcp;ofi_rxm (libfabric 1.17) learns the
 * port it announces in its connection requests from fi_getname on its
 * listening endpoint, i.e. getsockname(2) of the listening socket
 * (prov/rxm/src/rxm_conn.c, rxm_start_listen); the peer believes that port.
 * A program that calls sec_shim_set_port(P) (found with dlsym, so that it
 * runs without the shim too) makes getsockname report port P for every
 * listening socket asked about from then on, until sec_shim_set_port(0); a
 * socket keeps the port it was first reported with.  Other sockets, and
 * everything while no port is set, are passed through.
 *
 * Capture (tests/security/takeover.sh --attack replay, stands in for root
 * sniffing the wire).  With SEC_SHIM_CAPTURE=PATH in the environment, the
 * first SEC_SHIM_WRITES (default 8) writes on each IPv4 socket the process
 * connect()s are appended to PATH.<pid>, one line each:
 *     c <pid> <conn> <dst port> <write#> <hex bytes>
 * (<conn> counts the process's connections from 1; at most 4096 bytes of a
 * write are kept).  send, sendto, sendmsg, write and writev are watched: the
 * libfabric tcp provider uses send and sendmsg.
 *
 * Everything goes to the next definition (dlsym RTLD_NEXT) in the end; a
 * state lock makes the table safe for the provider's threads.
 */
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define SHIM_FDS     1024      /* fds above this are passed through */
#define SHIM_KEEP    4096      /* bytes of one write that are recorded */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint16_t fake_port;             /* host order; 0: off */
static uint16_t fd_port[SHIM_FDS];     /* listening fd -> port it was given */
static unsigned fd_conn[SHIM_FDS];     /* connected fd -> connection number */
static unsigned fd_writes[SHIM_FDS];
static uint16_t fd_dport[SHIM_FDS];
static unsigned nconn;

/* Exported: the only way a program turns the port lie on and off. */
void sec_shim_set_port(unsigned port);
void sec_shim_set_port(unsigned port)
{
    pthread_mutex_lock(&lock);
    fake_port = (uint16_t)port;
    pthread_mutex_unlock(&lock);
}

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "sec_shim: dlsym(%s): %s\n", name, dlerror());
        abort();
    }
    return f;
}

int getsockname(int fd, struct sockaddr *restrict sa, socklen_t *restrict len)
{
    static int (*real)(int, struct sockaddr *restrict, socklen_t *restrict);
    if (!real)
        real = (int (*)(int, struct sockaddr *restrict, socklen_t *restrict))
            next("getsockname");
    int ret = real(fd, sa, len);
    if (ret != 0 || fd < 0 || fd >= SHIM_FDS || sa == NULL ||
        *len < (socklen_t)sizeof(struct sockaddr_in) ||
        (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
        return ret;
    int listening = 0;
    socklen_t l = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l) != 0 ||
        !listening)
        return ret;
    pthread_mutex_lock(&lock);
    if (fd_port[fd] == 0 && fake_port != 0)
        fd_port[fd] = fake_port;
    uint16_t p = fd_port[fd];
    pthread_mutex_unlock(&lock);
    if (p == 0)
        return ret;
    if (sa->sa_family == AF_INET)
        ((struct sockaddr_in *)sa)->sin_port = htons(p);
    else
        ((struct sockaddr_in6 *)sa)->sin6_port = htons(p);
    return ret;
}

int close(int fd)
{
    static int (*real)(int);
    if (!real)
        real = (int (*)(int))next("close");
    if (fd >= 0 && fd < SHIM_FDS) {
        pthread_mutex_lock(&lock);
        fd_port[fd] = 0;
        fd_conn[fd] = 0;
        pthread_mutex_unlock(&lock);
    }
    return real(fd);
}

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    static int (*real)(int, const struct sockaddr *, socklen_t);
    if (!real)
        real = (int (*)(int, const struct sockaddr *, socklen_t))
            next("connect");
    if (getenv("SEC_SHIM_CAPTURE") && fd >= 0 && fd < SHIM_FDS && sa &&
        sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        pthread_mutex_lock(&lock);
        fd_conn[fd] = ++nconn;
        fd_writes[fd] = 0;
        fd_dport[fd] = ntohs(((const struct sockaddr_in *)sa)->sin_port);
        pthread_mutex_unlock(&lock);
    }
    return real(fd, sa, len);
}

/* Appends one record of what was written on fd (n bytes of iov). */
static void record(int fd, const struct iovec *iov, int iovcnt, ssize_t n)
{
    if (n <= 0 || fd < 0 || fd >= SHIM_FDS)
        return;
    const char *path = getenv("SEC_SHIM_CAPTURE");
    const char *w = getenv("SEC_SHIM_WRITES");
    unsigned maxw = w && *w ? (unsigned)atoi(w) : 8;
    pthread_mutex_lock(&lock);
    unsigned conn = fd_conn[fd];
    unsigned k = conn ? ++fd_writes[fd] : 0;
    unsigned dport = fd_dport[fd];
    pthread_mutex_unlock(&lock);
    if (!path || conn == 0 || k > maxw)
        return;
    size_t keep = (size_t)n < SHIM_KEEP ? (size_t)n : SHIM_KEEP;
    char *line = malloc(64 + 2 * keep);
    if (!line)
        return;
    int off = snprintf(line, 64, "c %d %u %u %u ", (int)getpid(), conn, dport,
                       k);
    size_t done = 0;
    for (int i = 0; i < iovcnt && done < keep; i++) {
        const unsigned char *b = iov[i].iov_base;
        for (size_t j = 0; j < iov[i].iov_len && done < keep; j++, done++)
            off += sprintf(line + off, "%02x", b[j]);
    }
    line[off++] = '\n';
    char fname[4096];
    snprintf(fname, sizeof fname, "%s.%d", path, (int)getpid());
    FILE *f = fopen(fname, "a");
    if (f) {
        fwrite(line, 1, (size_t)off, f);
        fclose(f);
    }
    free(line);
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    static ssize_t (*real)(int, const void *, size_t, int);
    if (!real)
        real = (ssize_t (*)(int, const void *, size_t, int))next("send");
    ssize_t r = real(fd, buf, n, flags);
    int e = errno;
    struct iovec iov = {(void *)buf, n};
    record(fd, &iov, 1, r);
    errno = e;
    return r;
}

ssize_t sendto(int fd, const void *buf, size_t n, int flags,
               const struct sockaddr *sa, socklen_t len)
{
    static ssize_t (*real)(int, const void *, size_t, int,
                           const struct sockaddr *, socklen_t);
    if (!real)
        real = (ssize_t (*)(int, const void *, size_t, int,
                            const struct sockaddr *, socklen_t))next("sendto");
    ssize_t r = real(fd, buf, n, flags, sa, len);
    int e = errno;
    struct iovec iov = {(void *)buf, n};
    record(fd, &iov, 1, r);
    errno = e;
    return r;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    static ssize_t (*real)(int, const struct msghdr *, int);
    if (!real)
        real = (ssize_t (*)(int, const struct msghdr *, int))next("sendmsg");
    ssize_t r = real(fd, m, flags);
    int e = errno;
    record(fd, m->msg_iov, (int)m->msg_iovlen, r);
    errno = e;
    return r;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (!real)
        real = (ssize_t (*)(int, const void *, size_t))next("write");
    ssize_t r = real(fd, buf, n);
    int e = errno;
    struct iovec iov = {(void *)buf, n};
    record(fd, &iov, 1, r);
    errno = e;
    return r;
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    static ssize_t (*real)(int, const struct iovec *, int);
    if (!real)
        real = (ssize_t (*)(int, const struct iovec *, int))next("writev");
    ssize_t r = real(fd, iov, iovcnt);
    int e = errno;
    record(fd, iov, iovcnt, r);
    errno = e;
    return r;
}
