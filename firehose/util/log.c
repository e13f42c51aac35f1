/*
 * log.c -- implementation of log.h: one write(2) per line, per-thread
 * last-error text.
 */
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <unistd.h>

#include "firehose.h"

/* Set once at init; read by every thread, including the bootstrap
 * watchdog, hence atomic (relaxed: a stale value only changes a prefix). */
static _Atomic int log_rank = -1;
static _Atomic int log_verbose;
static _Thread_local char last_error[512];

void fh_log_set_rank(int rank) { log_rank = rank; }
void fh_log_set_verbose(int level) { log_verbose = level; }

static void emit(const char *fmt, va_list ap)
{
    char line[1024];
    int rank = atomic_load_explicit(&log_rank, memory_order_relaxed);
    int n = (rank >= 0)
                ? snprintf(line, sizeof line, "firehose[%d]: ", rank)
                : snprintf(line, sizeof line, "firehose[?]: ");
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void fh_log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(fmt, ap);
    va_end(ap);
}

void fh_log_verbose(int level, const char *fmt, ...)
{
    if (log_verbose < level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(fmt, ap);
    va_end(ap);
}

void fh_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(fmt, ap);
    va_end(ap);
    _exit(1);
}

int fh_set_error(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    fh_log_verbose(2, "%s (%s)", last_error, fh_err_name(err));
    return err;
}

void fh_clear_error(void) { last_error[0] = '\0'; }

const char *fh_last_error(void) { return last_error; }
