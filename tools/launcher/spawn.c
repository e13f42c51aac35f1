/*
 * spawn.c -- starting the ranks: each is forked, put in the job's process
 * group, given the bootstrap variables (FH_RANK, FH_NRANKS, FH_BOOT_ADDR,
 * FH_JOB_KEY) and exec'd, behind the --prefix-cmd words if any.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fhrun.h"

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
    if (fr.opts.prefix_cmd) {
        copy = strdup(fr.opts.prefix_cmd);
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

/* Fails early, once, if the command cannot be found. */
void check_program(void)
{
    char **a0 = build_argv(0, fr.opts.prog_argv, fr.opts.prog_argc);
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

void spawn(int rn)
{
    rank_t *r = &fr.job.ranks[rn];
    int pout[2] = {-1, -1}, perr[2] = {-1, -1};
    if (fr.opts.tag_output &&
        (pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0))
        die(1, "cannot create output pipes: %s", strerror(errno));
    char **argv = build_argv(rn, fr.opts.prog_argv, fr.opts.prog_argc);
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
        setpgid(0, fr.job.pgid ? fr.job.pgid : 0);
        struct sigaction sa = {.sa_handler = SIG_DFL};
        sigemptyset(&sa.sa_mask);
        int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGPIPE};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            sigaction(sigs[i], &sa, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        setrlimit(RLIMIT_NOFILE, &fr.job.orig_nofile);
        if (fr.opts.tag_output) {
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
        snprintf(num, sizeof num, "%d", fr.opts.nranks);
        setenv("FH_NRANKS", num, 1);
        setenv("FH_BOOT_ADDR", fr.job.boot_addr, 1);
        setenv("FH_JOB_KEY", fr.job.key_hex, 1);
        execvp(argv[0], argv);
        int e = errno;
        char line[PATH_MAX + 128];
        int n = snprintf(line, sizeof line, "fhrun: %s: cannot run '%s': "
                         "%s\n", FH_RANK_NAME(rn), argv[0], strerror(e));
        if (n > 0)
            write_all(STDERR_FILENO, line,
                      (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        _exit(e == ENOENT ? 127 : 126);
    }
    if (!fr.job.pgid)
        fr.job.pgid = pid;
    setpgid(pid, fr.job.pgid);  /* also in the child: whichever runs first */
    r->pid = pid;
    HASH_ADD(hh, fr.job.by_pid, pid, sizeof r->pid, r);
    guard_add_rank(pid);
    free_argv(argv);
    if (fr.opts.tag_output) {
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
