/*
 * interpose.c -- the application's mprotect, pkey_mprotect, munmap,
 * mremap, mmap (MAP_FIXED) and shmdt (interpose.h): a relaxed load of the hook, the hook when one is set,
 * then the system call, then the after hook.  The only work added to a
 * call that does not meet a segment is those loads and whatever the
 * hooks' own first tests cost; an mmap without MAP_FIXED pays one flag
 * test.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interpose.h"


static _Atomic(fh_interpose_hook_t) hook;
static _Atomic(fh_interpose_after_t) after;

void fh_interpose_set(fh_interpose_hook_t h)
{
    atomic_store_explicit(&hook, h, memory_order_release);
}

void fh_interpose_set_after(fh_interpose_after_t a)
{
    atomic_store_explicit(&after, a, memory_order_release);
}

static void run_hook(void *addr, size_t len, int prot)
{
    fh_interpose_hook_t h = atomic_load_explicit(&hook, memory_order_acquire);
    if (h != NULL) {
        int saved = errno;
        h(addr, len, prot);
        errno = saved;
    }
}

static void run_after(void)
{
    fh_interpose_after_t a = atomic_load_explicit(&after, memory_order_acquire);
    if (a != NULL) {
        int saved = errno;
        a();
        errno = saved;
    }
}

int mprotect(void *addr, size_t len, int prot)
{
    run_hook(addr, len, prot);
    int rc = (int)syscall(SYS_mprotect, addr, len, prot);
    run_after();
    return rc;
}

#ifdef SYS_pkey_mprotect
int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
    run_hook(addr, len, prot);
    int rc = (int)syscall(SYS_pkey_mprotect, addr, len, prot, pkey);
    run_after();
    return rc;
}
#endif

int munmap(void *addr, size_t len)
{
    run_hook(addr, len, -1);
    int rc = (int)syscall(SYS_munmap, addr, len);
    run_after();
    return rc;
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *to = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        to = va_arg(ap, void *);
        va_end(ap);
    }
    void *p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, to);
    run_after();
    return p;
}

/* Without MAP_FIXED the kernel never replaces a mapping: nothing to tell.
 * (An offset the kernel refuses comes back as EINVAL, as from libc.)  Not
 * under ThreadSanitizer (FH_INTERPOSE_MMAP, interpose.h). */
#if FH_INTERPOSE_MMAP
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    if (flags & MAP_FIXED)
        run_after();
    return p;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mmap(addr, len, prot, flags, fd, off);
}
#endif

int shmdt(const void *addr)
{
    int rc = (int)syscall(SYS_shmdt, addr);
    run_after();
    return rc;
}
