/*
 * tcp_fds.h -- the connected TCP sockets of this process (tests/robust/):
 * a test that loses a connection on purpose shuts them down (shutdown(2)),
 * from a thread that never calls the runtime, or while the peer is quiet.
 * fhrun's own connection is a Unix socket and is not among them.
 */
#ifndef FH_TESTS_TCP_FDS_H
#define FH_TESTS_TCP_FDS_H

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../integ/testutil.h"

#define MAXFD 64

/* The connected TCP sockets of this process: fds into out, their count. */
static inline int tcp_fds(int *out)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL, "/proc/self/fd", "%s", strerror(errno));
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name);
        if (fd <= 2 || fd == dirfd(d))
            continue;
        struct sockaddr_storage a;
        socklen_t al = sizeof a;
        int type = 0;
        socklen_t tl = sizeof type;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM)
            continue;
        if (getsockname(fd, (struct sockaddr *)&a, &al) != 0
            || (a.ss_family != AF_INET && a.ss_family != AF_INET6))
            continue;
        al = sizeof a;
        if (getpeername(fd, (struct sockaddr *)&a, &al) != 0)
            continue;                   /* a listener */
        if (n < MAXFD)
            out[n++] = fd;
    }
    closedir(d);
    return n;
}

/* Shuts down every connected TCP socket of this process; their count. */
static inline int tcp_shutdown_all(void)
{
    int fd[MAXFD];
    int n = tcp_fds(fd);
    for (int i = 0; i < n; i++)
        shutdown(fd[i], SHUT_RDWR);
    return n;
}

#endif /* FH_TESTS_TCP_FDS_H */
