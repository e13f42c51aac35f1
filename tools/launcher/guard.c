/*
 * guard.c -- what fhrun leaves behind if it is killed with SIGKILL.
 *
 * fhrun removes its socket directory and each rank's /dev/shm endpoint
 * files itself (cleanup_socket, reap.c's remove_rank_shm) -- unless it is
 * killed outright.  So before the first spawn it forks a guard: a process
 * that holds the read end of a pipe, learns each rank's pid through it
 * (the child fhrun forked, and the pid the rank itself reports in its
 * handshake, which differs behind a forking --prefix-cmd),
 * and does nothing until the pipe closes, which happens however fhrun
 * ends.  Then it removes the socket and its directory, and the
 * "/dev/shm/fh_<pid>_*" files of every rank, again while any of them is
 * still alive (a rank behind a forking --prefix-cmd learns of fhrun's
 * death from its bootstrap connection within a second), for at most
 * GUARD_LINGER seconds.  After a normal end that finds nothing to do.
 *
 * The guard ignores the terminal's signals (fhrun handles those and then
 * ends, closing the pipe) and keeps no other descriptor of fhrun's: not
 * the listening socket, not the ranks' connections.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fhrun.h"

#define GUARD_LINGER 10.0     /* seconds to wait for ranks that still run */

static int guard_fd = -1;     /* fhrun's write end */

static void guard_main(int rd, const char *sock_path, const char *sock_dir)
{
    pid_t *pids = NULL;
    size_t n = 0, cap = 0;
    int32_t v;
    for (;;) {
        ssize_t got = read(rd, &v, sizeof v);
        if (got < 0 && errno == EINTR)
            continue;
        if (got != (ssize_t)sizeof v)
            break;                     /* fhrun is gone (or wrote garbage) */
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            pid_t *np = realloc(pids, nc * sizeof *np);
            if (np == NULL)
                continue;
            pids = np, cap = nc;
        }
        pids[n++] = (pid_t)v;
    }
    if (sock_path[0])
        unlink(sock_path);
    if (sock_dir[0])
        rmdir(sock_dir);
    double end = fh_now() + GUARD_LINGER;
    for (;;) {
        int alive = 0;
        for (size_t i = 0; i < n; i++) {
            remove_rank_shm(pids[i]);
            alive += kill(pids[i], 0) == 0 || errno == EPERM;
        }
        if (!alive || fh_now() >= end)
            break;
        usleep(100000);
    }
    _exit(0);
}

void guard_start(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        die(1, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die(1, "fork: %s", strerror(errno));
    if (pid == 0) {
        struct sigaction ign = {.sa_handler = SIG_IGN};
        sigemptyset(&ign.sa_mask);
        int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            sigaction(sigs[i], &ign, NULL);
        /* Keep only the pipe's read end: no terminal, no output pipe of
         * a caller waiting for fhrun's output to end. */
        int rd = p[0], null = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int fd = 0; fd < 3 && null >= 0; fd++)
            dup2(null, fd);
        if (rd > 3)
            close_range(3, (unsigned)rd - 1, 0);
        close_range((unsigned)rd + 1, ~0U, 0);
        guard_main(rd, fr.job.sock_path, fr.job.sock_dir);
    }
    close(p[0]);
    guard_fd = p[1];
}

void guard_add_rank(pid_t pid)
{
    int32_t v = (int32_t)pid;
    if (guard_fd >= 0 && write(guard_fd, &v, sizeof v) != (ssize_t)sizeof v)
        vlog(1, "the cleanup guard missed rank pid %d", (int)pid);
}
