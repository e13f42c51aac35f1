/*
 * main.c -- fhrun: launches an N-rank firehose job on this host.
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
 *
 * This file: setup, the timers, the poll() loop and teardown.  The state
 * is struct fhrun (fhrun.h, which also says which file does what).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fhrun.h"

struct fhrun fr = {
    .opts.boot_timeout = FH_BOOT_TIMEOUT_DEFAULT,
    .job.listen_fd = -1,
    .job.sig_pipe = {-1, -1},
    .job.latent_rank = -1,
};

/* What each poll() entry is: the self-pipe, the listener, or W_* + an index
 * into fr.job.pend or fr.job.ranks. */
enum { W_SIG = -1, W_LISTEN = -2, W_PEND = 1 << 20, W_OUT = 2 << 20,
       W_ERR = 3 << 20, W_CONN = 4 << 20 };

/* Everything before the first spawn: the job key, descriptors, signals,
 * the listener and the rank table. */
static void setup(void)
{
    if (getrandom(fr.job.key, sizeof fr.job.key, 0) !=
        (ssize_t)sizeof fr.job.key)
        die(1, "getrandom: %s", strerror(errno));
    fh_hex(fr.job.key, sizeof fr.job.key, fr.job.key_hex);

    /* Up to 3 descriptors per rank. */
    getrlimit(RLIMIT_NOFILE, &fr.job.orig_nofile);
    struct rlimit rl = fr.job.orig_nofile;
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);

    if (pipe2(fr.job.sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        die(1, "pipe: %s", strerror(errno));
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    open_listener();
    guard_start();
    fr.job.ranks = calloc((size_t)fr.opts.nranks, sizeof *fr.job.ranks);
    if (!fr.job.ranks)
        die(1, "out of memory");
    for (int i = 0; i < fr.opts.nranks; i++) {
        fr.job.ranks[i].fd = -1;
        fr.job.ranks[i].pipe_fd[0] = fr.job.ranks[i].pipe_fd[1] = -1;
    }
}

/* Whatever is due at now: --timeout, the connect deadline, a rank's EOF
 * without finalize, stale handshakes (handshake.c), SIGKILL of stragglers. */
static void run_timers(double now)
{
    if (fr.opts.job_timeout > 0 && !fr.end.term_mode &&
        now >= fr.job.t_start + fr.opts.job_timeout) {
        msg("job timed out after %g s (--timeout); terminating it",
            fr.opts.job_timeout);
        terminate_job(124);
    }
    if (!fr.end.failed && fr.job.any_connected &&
        now >= fr.job.connect_deadline) {
        char list[512];
        size_t n = 0;
        int count = 0;
        for (int i = 0; i < fr.opts.nranks; i++)
            if (!fr.job.ranks[i].ever_connected && !fr.job.ranks[i].reaped) {
                if (n < sizeof list - FH_RANK_NAME_MAX - 2)
                    n += (size_t)snprintf(list + n, sizeof list - n, "%s%s",
                                          count ? ", " : "", FH_RANK_NAME(i));
                count++;
            }
        if (count)
            launcher_abort("%s never connected within %d s "
                           "(FH_BOOT_TIMEOUT)", list, fr.opts.boot_timeout);
        else
            fr.job.connect_deadline = 1e300;
    }
    for (int i = 0; i < fr.opts.nranks; i++) {
        rank_t *r = &fr.job.ranks[i];
        if (r->eof_deadline > 0 && now >= r->eof_deadline) {
            r->eof_deadline = 0;
            if (!r->reaped && !fr.end.failed)
                rank_death(i, 0, "closed its connection to fhrun before "
                                 "fh_finalize");
        }
    }
    pend_timers(now);
    if (fr.end.kill_at > 0 && now >= fr.end.kill_at) {
        fr.end.kill_at = 0;
        kill_stragglers();
    }
}

/* The poll() timeout: until the nearest timer, at most 250 ms. */
static int next_wakeup_ms(double now)
{
    double next = now + 0.25;
#define NEAR(t) do { if ((t) > 0 && (t) < next) next = (t); } while (0)
    if (fr.opts.job_timeout > 0 && !fr.end.term_mode)
        NEAR(fr.job.t_start + fr.opts.job_timeout);
    if (!fr.end.failed && fr.job.any_connected)
        NEAR(fr.job.connect_deadline);
    NEAR(fr.end.kill_at);
    for (int i = 0; i < fr.opts.nranks; i++)
        NEAR(fr.job.ranks[i].eof_deadline);
    NEAR(pend_next_timer());
#undef NEAR
    return next <= now ? 0 : (int)((next - now) * 1000) + 1;
}

/* Fills pfd/who with every descriptor to watch; returns their number. */
static size_t fill_pollset(struct pollfd *pfd, int *who)
{
    size_t n = 0;
    pfd[n] = (struct pollfd){.fd = fr.job.sig_pipe[0], .events = POLLIN};
    who[n++] = W_SIG;
    if (pend_room()) {
        pfd[n] = (struct pollfd){.fd = fr.job.listen_fd, .events = POLLIN};
        who[n++] = W_LISTEN;
    }
    for (int i = 0; i < fr.job.npend; i++) {
        pfd[n] = (struct pollfd){.fd = fr.job.pend[i].fd, .events = POLLIN};
        who[n++] = W_PEND + i;
    }
    for (int i = 0; i < fr.opts.nranks; i++) {
        rank_t *r = &fr.job.ranks[i];
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
    return n;
}

/* Serves the n entries poll() returned. */
static void dispatch(const struct pollfd *pfd, const int *who, size_t n)
{
    /* Pending handshakes are compacted as we go: walk backwards. */
    for (size_t k = n; k-- > 0;) {
        if (!pfd[k].revents)
            continue;
        int w = who[k];
        if (w >= W_PEND && w < W_OUT) {
            int i = w - W_PEND;
            if (read_pend(&fr.job.pend[i]))
                fr.job.pend[i] = fr.job.pend[--fr.job.npend];
        }
    }
    for (size_t k = 0; k < n; k++) {
        if (!pfd[k].revents)
            continue;
        int w = who[k];
        if (w == W_SIG) {
            unsigned char sigs[64];
            ssize_t got = read(fr.job.sig_pipe[0], sigs, sizeof sigs);
            for (ssize_t j = 0; j < got; j++) {
                if (sigs[j] == SIGCHLD)
                    continue;
                if (!fr.end.term_mode)
                    msg("got %s; terminating the job", strsignal(sigs[j]));
                terminate_job(128 + sigs[j]);
            }
            reap();
        } else if (w == W_LISTEN) {
            accept_all();
        } else if (w >= W_CONN) {
            rank_t *r = &fr.job.ranks[w - W_CONN];
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

/* After the loop: the last partial output lines, then every descriptor. */
static void teardown(void)
{
    for (int i = 0; i < fr.job.npend; i++)
        close(fr.job.pend[i].fd);
    for (int i = 0; i < fr.opts.nranks; i++) {
        rank_t *r = &fr.job.ranks[i];
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
    pend_report();
    shbuf_unref(fr.ag.buf);
    HASH_CLEAR(hh, fr.job.by_pid);
    free(fr.job.ranks);
    close(fr.job.listen_fd);
    close(fr.job.sig_pipe[0]);
    close(fr.job.sig_pipe[1]);
    cleanup_socket();
}

int main(int argc, char **argv)
{
    int rc = fhrun_parse_args(argc, argv);
    if (rc >= 0)
        return rc;
    check_program();
    setup();
    vlog(1, "%d rank(s), bootstrap at %s", fr.opts.nranks, fr.job.boot_addr);
    fr.job.t_start = fh_now();
    fr.job.connect_deadline = fr.job.t_start + fr.opts.boot_timeout;
    for (int i = 0; i < fr.opts.nranks; i++)
        spawn(i);

    size_t cap = 2 + MAX_PENDING + 3 * (size_t)fr.opts.nranks;
    struct pollfd *pfd = calloc(cap, sizeof *pfd);
    int *who = calloc(cap, sizeof *who);  /* which object each entry is */
    if (!pfd || !who)
        die(1, "out of memory");
    for (;;) {
        double now = fh_now();
        int outputs_open = 0;
        for (int i = 0; i < fr.opts.nranks; i++)
            outputs_open += (fr.job.ranks[i].pipe_fd[0] >= 0) +
                            (fr.job.ranks[i].pipe_fd[1] >= 0);
        if (fr.job.n_reaped == fr.opts.nranks &&
            (!outputs_open || now >= fr.end.drain_deadline))
            break;
        run_timers(now);
        int timeout_ms = next_wakeup_ms(now);
        size_t n = fill_pollset(pfd, who);
        int pr = poll(pfd, n, timeout_ms);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            die(1, "poll: %s", strerror(errno));
        }
        if (pr > 0)
            dispatch(pfd, who, n);
    }
    free(pfd);
    free(who);
    teardown();
    vlog(1, "job done, exit status %d", fr.end.exit_code);
    return fr.end.exit_code;
}
