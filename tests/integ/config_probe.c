/*
 * config_probe.c -- calls fh_init and says how it went, for config_reject.sh
 * and config_mismatch.sh:
 *   "fh_init: FH_OK" (then fh_finalize, exit 0), or
 *   "fh_init: <FH_ERR_...>: <fh_last_error()>" and exit 3.
 * Every failure returns (never exits inside fh_init): a setting that must
 * be equal on all ranks but differs is FH_ERR_CONFIG on every rank, a rank
 * that cannot open its conduit fails every rank's fh_init (exit 3).
 */
#include <stdio.h>

#include "firehose.h"

int main(int argc, char **argv)
{
    int rc = fh_init(&argc, &argv);
    if (rc != FH_OK) {
        printf("fh_init: %s: %s\n", fh_err_name(rc), fh_last_error());
        return 3;
    }
    printf("fh_init: FH_OK\n");
    fflush(stdout);
    return fh_finalize() == FH_OK ? 0 : 4;
}
