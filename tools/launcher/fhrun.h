/*
 * fhrun.h -- the launcher's state (one struct fhrun) and what its files
 * offer each other.
 *
 * fhrun launches an N-rank firehose job on this host (see fhrun.1 and
 * main.c).  One file per question:
 *   args.c    the command line and FH_BOOT_TIMEOUT -> fr.opts
 *   spawn.c   finding the program, fork and exec of each rank
 *   server.c  the bootstrap server: listening socket, requests of the
 *             accepted ranks (allgather, finalize, abort), death notices
 *   handshake.c  connections until they authenticate (HMAC
 *             challenge-response, bootstrap.h), and the bounds on them:
 *             deadline, per-address cap, rate-limited refusal log
 *   output.c  the launcher's own messages, per-connection send queues of
 *             shared buffers, --tag-output line forwarding
 *   reap.c    children that end, the first failure, termination on a
 *             signal or --timeout, SIGKILL of stragglers
 *   guard.c   the process that removes what fhrun leaves if killed
 *   main.c    setup, the timers and the poll() loop, teardown
 *
 * Single-threaded: everything runs in main()'s loop except on_signal(),
 * which only writes the signal number to fr.job.sig_pipe[1].  So the state
 * is one global instance, fr (main.c), without locks.
 */
#ifndef FHRUN_H
#define FHRUN_H

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>

/* uthash's allocation failure: like every other one in fhrun. */
#define uthash_fatal(why) die(1, "out of memory (%s)", why)
#include <uthash.h>

#include "firehose/boot/bootstrap.h"
#include "firehose/boot/boot_decode.h"
#include "firehose/boot/boot_wire.h"
#include "firehose/util/log.h"

#define MAX_RANKS        4096
#define MAX_PENDING      256              /* unauthenticated connections */
#define MAX_PENDING_PER_SOURCE (MAX_PENDING / 4)  /* of them per address */
#define HANDSHAKE_TIMEOUT 3.0             /* s from accept to authenticated */
#define ACCEPT_BATCH     64               /* accepts per poll() round */
#define LOG_BURST        10               /* refusal messages per second */
#define MAX_RESULT       ((size_t)1 << 30)  /* allgather result, bytes */
#define DEAD_GRACE       3.0              /* s before SIGKILL after a death */
#define TERM_GRACE       2.0              /* s between SIGTERM and SIGKILL */
#define EOF_GRACE        1.0              /* s for a rank to exit after EOF */
#define DRAIN_GRACE      2.0              /* s to drain output after the end */
#define LINE_MAX_BYTES   65536

/* A buffer queued to one or more connections (an allgather result is built
 * once and queued to every rank); freed when the last queue lets go. */
typedef struct shbuf {
    size_t refs, len;
    unsigned char data[];
} shbuf_t;

typedef struct oitem {
    shbuf_t *b;
    size_t off;
    struct oitem *next;
} oitem_t;

typedef struct rank {
    pid_t pid;
    int reaped, code;        /* code: exit status or 128 + signal */
    int fd;                  /* authenticated connection, or -1 */
    int ever_connected, finalized, aborted, contributed;
    int init_failed;         /* sent INITFAIL: its fh_init failed, it lives on */
    double eof_deadline;     /* EOF before FINALIZE: death unless reaped */
    fh_boot_rx_t rx;         /* request decoder (server.c read_rank) */
    oitem_t *oq, *oq_tail;
    /* --tag-output */
    int pipe_fd[2];
    char *line[2];
    size_t line_len[2];
    UT_hash_handle hh;       /* in fr.job.by_pid from spawn until reaped */
} rank_t;

/* A peer's address, as the per-source cap compares them (handshake.c):
 * family AF_INET (addr: 4 bytes, also for IPv4-mapped IPv6), AF_INET6 (16)
 * or AF_UNIX (every unix peer is one source); unused bytes are zero. */
typedef struct src {
    int family;
    unsigned char addr[16];
} src_t;

/* A connection in its handshake (bootstrap.h): reading the hello, then,
 * once our challenge is sent, the rank's proof. */
typedef struct pend {
    int fd;
    int got_hello;           /* 0: reading the hello; 1: reading the proof */
    size_t have;
    double since;            /* accepted at; closed at + HANDSHAKE_TIMEOUT */
    src_t src;
    unsigned char nonce_r[FH_BOOT_NONCE_BYTES], nonce_l[FH_BOOT_NONCE_BYTES];
    unsigned char buf[FH_BOOT_PROOF_BYTES];  /* the hello, then the proof */
} pend_t;
_Static_assert(FH_BOOT_PROOF_BYTES >= FH_BOOT_HELLO_BYTES,
               "pend_t.buf holds the hello too");

/* All of the launcher's state.  Written by the file named beside each
 * part; read anywhere. */
struct fhrun {
    /* opts: what the user asked for (args.c); fixed before the job starts. */
    struct fhrun_opts {
        int nranks;
        int verbose;                 /* -v count: 1 activity, 2 protocol */
        int tag_output;
        char *prefix_cmd;            /* --prefix-cmd, or NULL */
        const char *listen_spec;     /* --listen, or NULL: a unix socket */
        double job_timeout;          /* --timeout s; 0: none */
        int boot_timeout;            /* FH_BOOT_TIMEOUT, s */
        char **prog_argv;            /* the program and its arguments */
        int prog_argc;
    } opts;
    /* job: the running job (main.c, server.c, spawn.c, reap.c). */
    struct fhrun_job {
        rank_t *ranks;               /* [opts.nranks] */
        rank_t *by_pid;              /* uthash on pid: the unreaped ranks */
        pend_t pend[MAX_PENDING];    /* connections in their handshake */
        int npend;
        int listen_fd;
        int sig_pipe[2];             /* on_signal -> the poll loop */
        unsigned char key[FH_KEY_BYTES];
        char key_hex[2 * FH_KEY_BYTES + 1];
        char boot_addr[PATH_MAX + 32];           /* FH_BOOT_ADDR */
        char sock_dir[PATH_MAX], sock_path[PATH_MAX + 16];  /* "": none */
        pid_t pgid;                  /* the ranks' process group; 0: none */
        struct rlimit orig_nofile;   /* restored in the ranks */
        double t_start;
        double connect_deadline;     /* every rank connected by then */
        int any_connected, n_reaped;
        int latent_rank;             /* exited 0 before connecting; -1 */
    } job;
    /* end: how the job ends (reap.c). */
    struct fhrun_end {
        int exit_code, code_set;     /* the first non-zero code sticks */
        int failed;                  /* teardown started */
        int term_mode;               /* signal/timeout: kill everyone */
        double kill_at;              /* SIGKILL stragglers at (0: none) */
        double drain_deadline;       /* all reaped: stop waiting for output */
        /* The death reported to ranks (also to late connections). */
        uint32_t death_rank, death_status;
        char death_msg[FH_BOOT_MAX_MSG];
    } end;
    /* gate: what handshake.c counts of the connections it closed
     * unauthenticated, and its refusal log's rate limit. */
    struct fhrun_gate {
        unsigned long n_over_cap;    /* evicted: its address at its cap */
        unsigned long n_full;        /* evicted: every slot busy */
        unsigned long n_timed_out;   /* no handshake in HANDSHAKE_TIMEOUT */
        double log_window_end;       /* the current second of the log */
        int log_shown;               /* messages shown in it */
        unsigned long log_hidden;    /* messages not shown in it */
    } gate;
    /* ag: the current allgather round (server.c). */
    struct fhrun_ag {
        shbuf_t *buf;                /* the result being built, or NULL */
        uint32_t len;                /* bytes per rank */
        int count;                   /* contributions so far */
        int first;                   /* the rank that set len */
    } ag;
};

extern struct fhrun fr;

/* args.c */
/* Fills fr.opts from argv and the environment.  Returns -1 to go on, or
 * the exit status (--help, --version, a usage error); exits via die() on a
 * bad value. */
int fhrun_parse_args(int argc, char **argv);

/* output.c */
void write_all(int fd, const char *p, size_t n);
__attribute__((format(printf, 1, 2))) void msg(const char *fmt, ...);
__attribute__((format(printf, 2, 3))) void vlog(int level, const char *fmt,
                                                ...);
/* The message, then the socket removed, then exit(code). */
__attribute__((noreturn, format(printf, 2, 3))) void die(int code,
                                                         const char *fmt, ...);
shbuf_t *shbuf_new(size_t len);
void shbuf_unref(shbuf_t *b);
void enqueue(rank_t *r, shbuf_t *b);
int flush_rank(rank_t *r);   /* -1 if the connection was closed */
void emit_line(int rn, int s, const char *p, size_t n);
void read_output(int rn, int s);

/* server.c */
void open_listener(void);
void cleanup_socket(void);
/* guard.c: a process that cleans up after fhrun if it is killed; started
 * before the first spawn, told every rank pid. */
void guard_start(void);
void guard_add_rank(pid_t pid);
/* reap.c: removes /dev/shm/fh_<pid>_* (rank pid's shm endpoint files). */
void remove_rank_shm(pid_t pid);
/* Hands connection fd, whose handshake proved it is rank rn, to the request
 * reader and queues our accept; mac is our proof for it. */
void accept_rank(int rn, int fd, uint32_t pid,
                 const unsigned char mac[FH_BOOT_MAC_BYTES]);
void read_rank(int rn);
void close_rank_conn(rank_t *r);
void on_rank_eof(rank_t *r, const char *why);
void send_death(rank_t *r);
void reset_round(void);

/* handshake.c */
/* Accepts what the listener has (at most ACCEPT_BATCH), making room by the
 * rules of handshake.c.  Never blocks. */
void accept_all(void);
/* 0 if the listener is not to be polled (unix socket, every slot busy). */
int pend_room(void);
/* Reads what the peer sent and answers.  Returns 1 if the entry is finished
 * (fd closed, or handed over to accept_rank): the caller removes it. */
int read_pend(pend_t *p);
/* Closes the handshakes past their deadline; flushes the log's count. */
void pend_timers(double now);
/* When pend_timers next has work (fh_now() units), or 0: never. */
double pend_next_timer(void);
/* At the end: what was closed unauthenticated, if anything. */
void pend_report(void);

/* reap.c */
void set_code(int c);
void job_fail(uint32_t rank, int status, const char *text);
__attribute__((format(printf, 1, 2))) void launcher_abort(const char *fmt,
                                                          ...);
void rank_death(int rn, int code, const char *what);
void terminate_job(int code);
void kill_stragglers(void);
void reap(void);
void on_signal(int sig);

/* spawn.c */
void check_program(void);    /* dies (127/126) if it cannot be run */
void spawn(int rn);         /* rank rn of fr.opts.prog_argv */

#endif
