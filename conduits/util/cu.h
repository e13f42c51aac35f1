/*
 * cu.h -- conduits/util: what every conduit needs and none should write again.
 *
 * The ofi and ibv conduits used to carry their own copies of these: the
 * argument checks of the ops that take untrusted-by-contract arguments
 * (open, path_create, mr_reg, put/get, am_send), the page-aligned
 * allocation of their AM buffers and the sizing of the send-slot pool.
 * A third conduit includes this header and links libfhconduit.
 *
 * Everything here is pure (no network headers, no state): the checks only
 * compare their arguments and, on a failure, record the error with
 * fh_set_error naming the conduit, so each returns FH_OK or the fh_err_t
 * the conduit's op returns unchanged.  `name` is the conduit's name as it
 * prefixes its messages ("ofi", "ibv"); `what` the op ("put", "am_send").
 * Thread-safe: no shared state (fh_set_error's record is per thread).
 */
#ifndef FH_CU_H
#define FH_CU_H

#include <stddef.h>

#include "conduits/conduit.h"

/* ------------------------------------------------------------ checks.c */

/* open: every pointer present, npaths >= 1, 0 <= rank < nranks,
 * am_max_packet > 0, every upcall set; else FH_ERR_INVALID. */
int cu_check_open(const char *name, const fh_conduit_config_t *cfg,
                  const fh_conduit_upcalls_t *up, const void *out,
                  const fh_conduit_limits_t *limits);

/* path_create: attr and out present and 0 <= attr->index < npaths
 * (FH_ERR_INVALID; cfg and paths NULL when the conduit is NULL); then
 * paths[attr->index] (the conduit's table of npaths paths) still NULL and
 * the conduit not connected (FH_ERR_STATE). */
int cu_check_path_create(const char *name, const fh_conduit_config_t *cfg,
                         struct fh_cpath *const *paths, int connected,
                         const fh_path_attr_t *attr, const void *out);

/* mr_reg: conduit and out present, addr NULL only for len 0, access only
 * FH_MR_* bits; else FH_ERR_INVALID. */
int cu_check_mr_reg(const char *name, const void *c, const void *out,
                    const void *addr, size_t len, unsigned access);

/* A destination of put/get/am_send: (rank, rpath) in [0, nranks) x
 * [0, npaths) (FH_ERR_RANK), then the conduit connected (FH_ERR_STATE). */
int cu_check_dest(const char *name, const char *what,
                  const fh_conduit_config_t *cfg, int connected,
                  int rank, int rpath);

/* put/get: a remote key given; else FH_ERR_INVALID. */
int cu_check_rkey(const char *name, const char *what, const fh_rkey_t *rkey);

/* am_send: hdr_len + len fits am_max_packet (and does not overflow);
 * else FH_ERR_TOO_BIG. */
int cu_check_am_size(const char *name, size_t hdr_len, size_t len,
                     size_t am_max_packet);

/* A bootstrap allgather of the address exchange failed: FH_ERR_BOOTSTRAP,
 * the text "<name>: <what> allgather failed: " followed by the reason the
 * bootstrap recorded (e.g. which peer's fh_init failed), if any. */
int cu_boot_failed(const char *name, const char *what);

/* ------------------------------------------------------------ mem.c */

/* CU_PAGE-aligned memory of len bytes (len 0 gives a valid 1-byte block),
 * for buffers a conduit registers with the NIC; free() releases it.
 * NULL when out of memory. */
#define CU_PAGE 4096
void *cu_alloc_pages(size_t len);

/* ------------------------------------------------------------ mem.c */

/* Send slots of a path (AM messages copied before they are posted):
 * CU_SLOT_BYTES of slot memory, but never fewer than CU_SLOTS_MIN nor more
 * than CU_SLOTS_MAX slots of slot_size bytes.  slot_size > 0. */
#define CU_SLOT_BYTES ((size_t)4 << 20)
#define CU_SLOTS_MIN  16
#define CU_SLOTS_MAX  256
size_t cu_send_slots(size_t slot_size);

#endif /* FH_CU_H */
