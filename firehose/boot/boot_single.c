/*
 * boot_single.c -- the singleton bootstrap: one rank, no exchange.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "boot_impl.h"
#include "firehose.h"
#include "firehose/util/log.h"

static int single_allgather(fh_boot_t *b, const void *in, void *out,
                            size_t len)
{
    (void)b;
    if (len && in != out)
        memmove(out, in, len);
    return FH_OK;
}

static int single_barrier(fh_boot_t *b)
{
    (void)b;
    return FH_OK;
}

__attribute__((noreturn)) static void single_abort(fh_boot_t *b, int code,
                                                const char *msg)
{
    (void)b;
    fh_log_error("aborting (code %d): %s", code, msg ? msg : "");
    _exit(code ? code : 1);
}

static void single_finalize(fh_boot_t *b)
{
    free(b);
}

static void single_fail(fh_boot_t *b, const char *why)
{
    (void)why;   /* nobody to tell */
    free(b);
}

static const fh_boot_ops_t single_ops = {
    .name = "singleton",
    .allgather = single_allgather,
    .barrier = single_barrier,
    .abort = single_abort,
    .fail = single_fail,
    .finalize = single_finalize,
};

int fh_boot_single_open(fh_boot_t **out)
{
    fh_boot_t *b = calloc(1, sizeof *b);
    if (!b) {
        fh_log_error("bootstrap: out of memory");
        return FH_ERR_BOOTSTRAP;
    }
    b->ops = &single_ops;
    b->rank = 0;
    b->nranks = 1;
    b->local_rank = 0;
    b->local_nranks = 1;
    *out = b;
    return FH_OK;
}
