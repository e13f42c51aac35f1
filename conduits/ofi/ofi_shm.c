/*
 * ofi_shm.c -- the shm provider's files in /dev/shm: their names, a lock
 * that says their owner lives, and the reclaiming of those that ranks
 * killed or aborted left behind.
 *
 * libfabric's shm provider backs each endpoint with a file /dev/shm/<name>
 * (several MiB) that it unlinks when the endpoint is closed.  A rank that
 * dies by SIGKILL, or ends through fh_abort, never closes it.  fhrun
 * removes its ranks' files (tools/launcher/reap.c); under another launcher
 * (mpirun, srun) nobody did, and a machine collected them (318 files, 2.2
 * GB after a day of test runs).  So:
 *   - an endpoint's name is "fh_<pid>_<path>_<64 random bits>": no process
 *     can collide with a leftover once PIDs wrap (fi_enable failed with
 *     EBUSY);
 *   - once enabled, the rank opens its file and holds a shared flock on it
 *     until the endpoint closes: a flock goes with its process, whatever
 *     ends it, and holds across PID namespaces that share /dev/shm (a PID
 *     that looks dead may live in another one);
 *   - before its first endpoint, a rank removes every file of that pattern
 *     that belongs to its user, is a regular file last modified over
 *     OFI_SHM_RECLAIM_AGE seconds ago (the moment between the provider's
 *     creating a file and its owner's locking it) and whose lock it can
 *     take exclusively: nobody holds it, so no live rank owns it.  A peer
 *     that still maps such a file keeps its mapping (unlink removes the
 *     name only).
 * Tested by tests/robust/shm_leftovers.sh.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ofi_internal.h"

#define OFI_SHM_DIR "/dev/shm"
#define OFI_SHM_RECLAIM_AGE 60

int ofi_shm_is(const struct fh_conduit *c)
{
    return strcmp(c->info->fabric_attr->prov_name, "shm") == 0;
}

/* Whether name is one of ours: fh_<digits>_<digits>_<16 hex digits>. */
static int ours(const char *name)
{
    int pid = 0, path = 0, n = 0;
    char hex[17] = "";
    if (sscanf(name, "fh_%d_%d_%16[0-9a-f]%n", &pid, &path, hex, &n) != 3)
        return 0;
    return name[n] == '\0' && strlen(hex) == 16 && pid > 0 && path >= 0;
}

void ofi_shm_reclaim(void)
{
    DIR *d = opendir(OFI_SHM_DIR);
    if (d == NULL)
        return;
    const time_t now = time(NULL);
    unsigned removed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!ours(e->d_name))
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
            now - st.st_mtime > OFI_SHM_RECLAIM_AGE &&
            flock(fd, LOCK_EX | LOCK_NB) == 0 && unlinkat(dirfd(d), e->d_name, 0) == 0)
            removed++;
        close(fd);
    }
    closedir(d);
    if (removed != 0)
        fh_log_verbose(1, "ofi: removed %u file(s) in " OFI_SHM_DIR " that ended ranks left "
                       "(shm endpoints nobody holds)", removed);
}

int ofi_shm_name(struct fh_cpath *p)
{
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        rnd = (uint64_t)(uintptr_t)p ^ (uint64_t)time(NULL);
    snprintf(p->shm_name, sizeof p->shm_name, "fh_%d_%d_%016" PRIx64, (int)getpid(),
             p->index, rnd);
    int ret = fi_setname(&p->ep->fid, p->shm_name, strlen(p->shm_name) + 1);
    if (ret)
        fh_log_error("ofi: path %d: fi_setname(%s): %s", p->index, p->shm_name,
                     fi_strerror(-ret));
    return ret;
}

void ofi_shm_hold(struct fh_cpath *p)
{
    char path[sizeof OFI_SHM_DIR + sizeof p->shm_name + 1];
    snprintf(path, sizeof path, OFI_SHM_DIR "/%s", p->shm_name);
    p->shm_fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (p->shm_fd >= 0 && flock(p->shm_fd, LOCK_SH) != 0) {
        close(p->shm_fd);
        p->shm_fd = -1;
    }
    if (p->shm_fd < 0)  /* the provider named it otherwise: nothing to reclaim later */
        fh_log_verbose(2, "ofi: path %d: cannot lock %s: %s", p->index, path, strerror(errno));
}

void ofi_shm_release(struct fh_cpath *p)
{
    if (p->shm_fd >= 0)
        close(p->shm_fd);
    p->shm_fd = -1;
}
