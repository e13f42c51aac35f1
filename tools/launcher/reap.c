/*
 * reap.c -- how the job ends: children that exit, the first failure, and
 * termination on a signal or --timeout.
 *
 * A rank that dies before fh_finalize (or closes its connection, or aborts)
 * fails the job: every connected rank is told who died and why
 * (FH_BOOT_MSG_DEAD, job_fail), and what still runs DEAD_GRACE seconds
 * later is killed.  A signal to fhrun or --timeout sends SIGTERM, then
 * SIGKILL after TERM_GRACE.  fhrun's exit status is the first non-zero
 * code: a rank's exit status or 128 + its signal, 124 on --timeout, 128 +
 * the signal fhrun got, 1 when the launcher itself aborts the job.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fhrun.h"

void set_code(int c)
{
    if (!fr.end.code_set && c != 0) {
        fr.end.exit_code = c;
        fr.end.code_set = 1;
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

/* First failure: tell every connected, unfinished rank, then give them
 * DEAD_GRACE seconds to exit before SIGKILL. */
void job_fail(uint32_t rank, int status, const char *text)
{
    if (fr.end.failed)
        return;
    fr.end.failed = 1;
    fr.end.death_rank = rank;
    fr.end.death_status = (uint32_t)status;
    snprintf(fr.end.death_msg, sizeof fr.end.death_msg, "%s", text);
    reset_round();
    for (int i = 0; i < fr.opts.nranks; i++) {
        rank_t *r = &fr.job.ranks[i];
        if (r->fd >= 0 && !r->finalized && !r->aborted)
            send_death(r);
    }
    fr.end.kill_at = fh_now() + DEAD_GRACE;
}

__attribute__((format(printf, 1, 2))) void launcher_abort(const char *fmt,
                                                                 ...)
{
    if (fr.end.failed)
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

void rank_death(int rn, int code, const char *what)
{
    rank_t *r = &fr.job.ranks[rn];
    char text[512];
    if (fr.end.failed) {
        vlog(1, "%s (pid %d) %s", FH_RANK_NAME(rn), (int)r->pid, what);
        return;
    }
    msg("%s (pid %d) %s", FH_RANK_NAME(rn), (int)r->pid, what);
    snprintf(text, sizeof text, "%d %s", (int)r->pid, what);
    set_code(code);
    job_fail((uint32_t)rn, code, text);
}

static void signal_ranks(int sig)
{
    int any = 0;
    for (int i = 0; i < fr.opts.nranks; i++)
        if (!fr.job.ranks[i].reaped && fr.job.ranks[i].pid > 0) {
            kill(fr.job.ranks[i].pid, sig);
            any = 1;
        }
    /* The group exists while a member is unreaped; reaches grandchildren. */
    if (any && fr.job.pgid > 0)
        kill(-fr.job.pgid, sig);
}

/* Ctrl-C, SIGTERM, SIGHUP, --timeout: SIGTERM now, SIGKILL later. */
void terminate_job(int code)
{
    fr.end.exit_code = code;
    fr.end.code_set = 1;
    fr.end.failed = 1;
    if (fr.end.term_mode) {  /* second request: no more patience */
        signal_ranks(SIGKILL);
        return;
    }
    fr.end.term_mode = 1;
    reset_round();
    signal_ranks(SIGTERM);
    fr.end.kill_at = fh_now() + TERM_GRACE;
}

void kill_stragglers(void)
{
    char list[256];
    size_t n = 0;
    int count = 0;
    list[0] = '\0';
    for (int i = 0; i < fr.opts.nranks; i++) {
        rank_t *r = &fr.job.ranks[i];
        /* A rank whose fh_init failed is not killed for it: it learnt so
         * from fh_init and may still be cleaning up. */
        if (r->reaped ||
            ((r->finalized || r->init_failed) && !fr.end.term_mode))
            continue;
        kill(r->pid, SIGKILL);
        if (n < sizeof list - FH_RANK_NAME_MAX - 2)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s",
                                  count ? ", " : "", FH_RANK_NAME(i));
        count++;
    }
    if (count) {
        if (fr.job.pgid > 0)
            kill(-fr.job.pgid, SIGKILL);
        if (fr.end.term_mode)
            vlog(1, "killing %s (still running %.0f s after SIGTERM)",
                 list, TERM_GRACE);
        else
            msg("killing %s (still running %.0f s after the failure)",
                list, DEAD_GRACE);
    }
}

/* ---- children ------------------------------------------------------------ */

/* A rank that ends without closing its endpoints (killed, _exit after a
 * peer's death, fh_abort) leaves the shared-memory files of libfabric's shm
 * endpoints in /dev/shm.  The ofi conduit names them "fh_<pid>_<path>_<rnd>"
 * (conduits/ofi/ofi_path.c), so the launcher, which knows each rank's pid,
 * removes exactly its ranks' files once the rank is gone.  Peers that still
 * map them keep their mapping; the name was only needed to attach. */
void remove_rank_shm(pid_t pid)
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

void reap(void)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0)
            return;
        rank_t *r;
        HASH_FIND(hh, fr.job.by_pid, &pid, sizeof pid, r);
        if (!r)
            continue;
        int rn = (int)(r - fr.job.ranks);
        HASH_DEL(fr.job.by_pid, r);
        r->reaped = 1;
        remove_rank_shm(pid);
        r->code = WIFEXITED(st) ? WEXITSTATUS(st)
                                : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        fr.job.n_reaped++;
        char what[128];
        describe(r->code, what, sizeof what);
        vlog(1, "%s (pid %d) %s", FH_RANK_NAME(rn), (int)pid, what);
        if (r->init_failed && !fr.end.term_mode) {
            msg("%s (pid %d) %s after its fh_init failed", FH_RANK_NAME(rn), (int)pid,
                what);
            /* Its own status before the peers' (they may exit first); a
             * job whose fh_init failed never ends with 0. */
            if (!fr.end.code_set || fr.end.exit_code == FH_EXIT_PEER_DEAD)
                fr.end.code_set = 0;
            set_code(r->code ? r->code : 1);
        } else if (r->finalized || r->aborted || fr.end.term_mode) {
            if (r->code && r->finalized && !fr.end.failed)
                msg("%s (pid %d) %s after fh_finalize", FH_RANK_NAME(rn),
                    (int)pid, what);
            set_code(r->code);
        } else if (r->code != 0) {
            rank_death(rn, r->code, what);
        } else if (fr.job.any_connected) {
            rank_death(rn, 0, "exited with status 0 before fh_finalize");
        } else if (fr.job.latent_rank < 0) {
            /* a death only if this is a firehose job */
            fr.job.latent_rank = rn;
        }
        if (fr.end.failed)
            set_code(r->code);
        close_rank_conn(r);
        if (fr.job.n_reaped == fr.opts.nranks)
            fr.end.drain_deadline = fh_now() + DRAIN_GRACE;
    }
}

void on_signal(int sig)
{
    int e = errno;
    unsigned char c = (unsigned char)sig;
    ssize_t w = write(fr.job.sig_pipe[1], &c, 1);
    (void)w;
    errno = e;
}
