/*
 * log.c -- implementation of log.h: one write(2) per line, per-thread
 * last-error text.
 */
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
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
static _Thread_local char last_error[sizeof ((fh_error_stash_t *)0)->text];
/* Whether last_error may hold text (false: it is "").  Every entry point
 * clears the message: this flag, in the static TLS block (initial-exec: no
 * __tls_get_addr call from a shared library), makes that one load when
 * there is nothing to clear. */
static _Thread_local bool last_error_set __attribute__((tls_model("initial-exec")));

/* The rank names (log.h): written before the threads that log exist and
 * published by names_set (release; readers acquire). */
static char names_label[FH_RANK_LABEL_MAX] = "rank";
static int names_first;
static _Atomic int names_set;

void fh_log_set_rank(int rank) { log_rank = rank; }
void fh_log_set_verbose(int level) { log_verbose = level; }

int fh_log_set_names(const char *label, int first, char *err, size_t errlen)
{
    size_t n = label ? strlen(label) : 0;
    bool ok = n > 0 && n < FH_RANK_LABEL_MAX && isalpha((unsigned char)label[0]);
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)label[i]) || label[i] == '_' || label[i] == '-';
    if (!ok) {
        snprintf(err, errlen, "rank label '%.40s': expected 1 to %d letters, digits, "
                 "'_' or '-', starting with a letter", label ? label : "(null)",
                 FH_RANK_LABEL_MAX - 1);
        return -1;
    }
    if (first < 0 || first > FH_RANK_FIRST_MAX) {
        snprintf(err, errlen, "number of rank 0: %d: expected 0..%d", first,
                 FH_RANK_FIRST_MAX);
        return -1;
    }
    memcpy(names_label, label, n + 1);
    names_first = first;
    atomic_store_explicit(&names_set, strcmp(label, "rank") != 0 || first != 0,
                          memory_order_release);
    return 0;
}

int fh_log_set_names_spec(const char *spec, char *err, size_t errlen)
{
    if (spec == NULL || *spec == '\0')
        return 0;
    char label[FH_RANK_LABEL_MAX + 1];
    size_t n = strcspn(spec, " ");
    long first = 0;
    bool ok = n < sizeof label;
    if (ok && spec[n] != '\0') {
        char *end;
        errno = 0;
        first = strtol(spec + n + 1, &end, 10);
        ok = errno == 0 && end != spec + n + 1 && *end == '\0' &&
             isdigit((unsigned char)spec[n + 1]) && first <= FH_RANK_FIRST_MAX;
    }
    if (ok) {
        memcpy(label, spec, n);
        label[n] = '\0';
        char why[160];
        ok = fh_log_set_names(label, (int)first, why, sizeof why) == 0;
    }
    if (!ok) {
        snprintf(err, errlen, "FH_RANK_NAMES='%.40s': expected a label and the number "
                 "of rank 0, such as 'image 1' (label: 1 to %d letters, digits, '_' "
                 "or '-'; number 0..%d)", spec, FH_RANK_LABEL_MAX - 1, FH_RANK_FIRST_MAX);
        return -1;
    }
    return 0;
}

const char *fh_rank_name(int rank, char *buf, size_t len)
{
    if (atomic_load_explicit(&names_set, memory_order_acquire))
        snprintf(buf, len, "%s %lld", names_label, (long long)rank + names_first);
    else
        snprintf(buf, len, "rank %d", rank);
    return buf;
}

int fh_log_names_custom(void)
{
    return atomic_load_explicit(&names_set, memory_order_acquire);
}

static void emit(const char *fmt, va_list ap)
{
    char line[1024];
    int rank = atomic_load_explicit(&log_rank, memory_order_relaxed);
    char name[FH_RANK_NAME_MAX];
    int n = rank < 0 ? snprintf(line, sizeof line, "firehose[?]: ")
            : atomic_load_explicit(&names_set, memory_order_acquire)
                ? snprintf(line, sizeof line, "firehose[%s]: ",
                           fh_rank_name(rank, name, sizeof name))
                : snprintf(line, sizeof line, "firehose[%d]: ", rank);
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
    last_error_set = true;
    fh_log_verbose(2, "%s (%s)", last_error, fh_err_name(err));
    return err;
}

void fh_clear_error(void)
{
    if (last_error_set) {
        last_error[0] = '\0';
        last_error_set = false;
    }
}

bool fh_error_stash(fh_error_stash_t *st)
{
    st->held = last_error[0] != '\0';
    if (st->held)
        memcpy(st->text, last_error, sizeof st->text);
    return st->held;
}

void fh_error_unstash(const fh_error_stash_t *st)
{
    if (st->held)
        memcpy(last_error, st->text, sizeof last_error);
    else
        last_error[0] = '\0';
    last_error_set = st->held;
}

const char *fh_last_error(void) { return last_error; }
