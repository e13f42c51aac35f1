/*
 * ofi_dl.h -- libfabric, loaded when the ofi conduit first needs it.
 *
 * Linking libfabric.so.1 costs every process that loads libfirehose ~0.2 s
 * before main (two libraries libfabric 1.17 links, PSM's libinfinipath
 * and libpsm2, each calibrate a timebase in a constructor: usleep in a
 * loop for 100 ms, pinned to CPU 0) and ~2 MiB
 * resident, whether or not it ever uses the ofi conduit: jobs on the ibv
 * conduit, fhinfo, programs that never call fh_init.  So libfirehose does
 * not link it: the six libfabric functions the conduit calls (everything
 * else in libfabric's API is an inline through the objects these return)
 * are renamed here to our wrappers (ofi_dl.c), which dlopen the library
 * on first use and call the very symbol versions a link would have bound
 * (configure reads them from a test link: FH_FI_SONAME, FH_FI_V_*).
 *
 * Include before any <rdma/...> header (ofi_internal.h does). */
#ifndef FH_OFI_DL_H
#define FH_OFI_DL_H

#include <stdbool.h>
#include <stddef.h>

#define fi_getinfo  fh_ofi_dl_getinfo
#define fi_freeinfo fh_ofi_dl_freeinfo
#define fi_dupinfo  fh_ofi_dl_dupinfo
#define fi_fabric   fh_ofi_dl_fabric
#define fi_strerror fh_ofi_dl_strerror
#define fi_tostr    fh_ofi_dl_tostr

/* Loads libfabric (once per process; later calls return the first
 * outcome).  true when every function resolved; else false with the
 * reason in why (the loader's message: library or symbol version not
 * found), and then fi_getinfo returns -FI_ENOSYS, fi_strerror a fixed
 * text, the others do nothing.
 * Thread-safe: yes. */
bool fh_ofi_dl_load(char *why, size_t len);

#endif /* FH_OFI_DL_H */
