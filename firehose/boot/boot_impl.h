/*
 * boot_impl.h -- internal interface between boot.c (the chooser) and the
 * three bootstrap implementations.  Not part of the bootstrap.h contract.
 */
#ifndef FH_BOOT_IMPL_H
#define FH_BOOT_IMPL_H

#include "bootstrap.h"

/* Each returns FH_OK or FH_ERR_BOOTSTRAP (after logging why).  timeout_s is
 * FH_BOOT_TIMEOUT: the longest wait for the launcher or for peers. */
int fh_boot_fhrun_open(fh_boot_t **out, int timeout_s);
int fh_boot_pmix_open(fh_boot_t **out, int timeout_s);
int fh_boot_single_open(fh_boot_t **out);

#endif /* FH_BOOT_IMPL_H */
