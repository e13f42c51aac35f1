/*
 * ofi_dl.c -- the libfabric functions the ofi conduit calls, resolved on
 * first use (ofi_dl.h says why).
 *
 * dlopen(FH_FI_SONAME, RTLD_NOW | RTLD_LOCAL): the conduit reaches
 * libfabric only through these six pointers and the objects they return,
 * so nothing else in the process sees its symbols (a program that links
 * libfabric itself gets the same, already loaded, copy).  dlvsym binds the
 * version configure saw a link bind (fi_getinfo@FABRIC_1.3 on libfabric
 * 1.17): a newer libfabric keeps that version for binaries built against
 * the older headers, so the structures agree with the ones we compiled.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ofi_dl.h"
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

static struct {
    int (*getinfo)(uint32_t, const char *, const char *, uint64_t,
                   const struct fi_info *, struct fi_info **);
    void (*freeinfo)(struct fi_info *);
    struct fi_info *(*dupinfo)(const struct fi_info *);
    int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
    const char *(*strerror)(int);
    char *(*tostr)(const void *, enum fi_type);
} fi;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char load_why[256];

/* *slot = name@version of the library, or a reason in load_why. */
static bool bind_sym(void *lib, void *slot, const char *name, const char *version)
{
    void *f = dlvsym(lib, name, version);
    if (f == NULL) {
        snprintf(load_why, sizeof load_why, "%s has no %s@%s (a libfabric older than "
                 "the one firehose was built with?)", FH_FI_SONAME, name, version);
        return false;
    }
    memcpy(slot, &f, sizeof f);
    return true;
}

static void load(void)
{
    void *lib = dlopen(FH_FI_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *e = dlerror();
        snprintf(load_why, sizeof load_why, "cannot load %s: %s (install the Debian "
                 "package libfabric1)", FH_FI_SONAME, e ? e : "?");
        return;
    }
    loaded = bind_sym(lib, &fi.getinfo, "fi_getinfo", FH_FI_V_GETINFO) &&
             bind_sym(lib, &fi.freeinfo, "fi_freeinfo", FH_FI_V_FREEINFO) &&
             bind_sym(lib, &fi.dupinfo, "fi_dupinfo", FH_FI_V_DUPINFO) &&
             bind_sym(lib, &fi.fabric, "fi_fabric", FH_FI_V_FABRIC) &&
             bind_sym(lib, &fi.strerror, "fi_strerror", FH_FI_V_STRERROR) &&
             bind_sym(lib, &fi.tostr, "fi_tostr", FH_FI_V_TOSTR);
    /* Never closed: the providers' objects live as long as the process. */
}

bool fh_ofi_dl_load(char *why, size_t len)
{
    pthread_once(&once, load);
    if (!loaded && why != NULL && len > 0)
        snprintf(why, len, "%s", load_why);
    return loaded;
}

int fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
               const struct fi_info *hints, struct fi_info **info)
{
    if (!fh_ofi_dl_load(NULL, 0))
        return -FI_ENOSYS;
    return fi.getinfo(version, node, service, flags, hints, info);
}

void fi_freeinfo(struct fi_info *info)
{
    if (info != NULL && fh_ofi_dl_load(NULL, 0))
        fi.freeinfo(info);
}

struct fi_info *fi_dupinfo(const struct fi_info *info)
{
    return fh_ofi_dl_load(NULL, 0) ? fi.dupinfo(info) : NULL;
}

int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
    if (!fh_ofi_dl_load(NULL, 0))
        return -FI_ENOSYS;
    return fi.fabric(attr, fabric, context);
}

const char *fi_strerror(int errnum)
{
    if (!fh_ofi_dl_load(NULL, 0))
        return "libfabric is not loaded";
    return fi.strerror(errnum);
}

char *fi_tostr(const void *data, enum fi_type datatype)
{
    return fh_ofi_dl_load(NULL, 0) ? fi.tostr(data, datatype) : NULL;
}
