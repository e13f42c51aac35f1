/*
 * boot.c -- fh_boot_open(): picks the bootstrap from the environment
 * (fhrun, then PMIx, then singleton; see bootstrap.h).
 */
#include <stdlib.h>

#include "bootstrap.h"
#include "boot_impl.h"
#include "boot_wire.h"
#include "firehose.h"
#include "firehose/util/log.h"

int fh_boot_open(fh_boot_t **out)
{
    int timeout_s, rc;
    char err[256];
    *out = NULL;
    /* FH_BOOT_TIMEOUT is documented (and validated for fh_init) in config.c's
     * table.  The bootstrap runs before, or without, the parsed
     * configuration (tests and fhrun use it alone), so it reads the variable
     * itself, with the parser fhrun uses too. */
    if (fh_boot_timeout_env(&timeout_s, err, sizeof err) < 0) {
        fh_log_error("%s", err);
        return FH_ERR_BOOTSTRAP;
    }

    static const char *const fhvars[] = {"FH_BOOT_ADDR", "FH_JOB_KEY",
                                         "FH_RANK", "FH_NRANKS"};
    int nset = 0;
    for (int i = 0; i < 4; i++)
        nset += getenv(fhvars[i]) != NULL;
    if (nset == 4) {
        rc = fh_boot_fhrun_open(out, timeout_s);
    } else if (nset > 0) {
        for (int i = 0; i < 4; i++)
            if (!getenv(fhvars[i]))
                fh_log_error("bootstrap: %s is not set, but other fhrun "
                             "variables are (FH_BOOT_ADDR, FH_JOB_KEY, "
                             "FH_RANK, FH_NRANKS are set together by fhrun)",
                             fhvars[i]);
        return FH_ERR_BOOTSTRAP;
    } else if (getenv("PMIX_NAMESPACE") && getenv("PMIX_RANK")) {
#ifdef FH_HAVE_PMIX
        rc = fh_boot_pmix_open(out, timeout_s);
#else
        fh_log_error("bootstrap: started by a PMIx launcher (PMIX_NAMESPACE="
                     "%s) but this firehose was built without PMIx support; "
                     "rebuild with OpenPMIx (-DFH_HAVE_PMIX -lpmix) or start "
                     "the job with fhrun", getenv("PMIX_NAMESPACE"));
        return FH_ERR_BOOTSTRAP;
#endif
    } else {
        rc = fh_boot_single_open(out);
    }
    if (rc == FH_OK) {
        fh_log_set_rank((*out)->rank);
        fh_log_verbose(1, "bootstrap: %s, %s of %d (local %d of %d)",
                       (*out)->ops->name, FH_RANK_NAME((*out)->rank), (*out)->nranks,
                       (*out)->local_rank, (*out)->local_nranks);
    }
    return rc;
}
