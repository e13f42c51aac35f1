/*
 * interpose.c -- the application's mprotect, pkey_mprotect and munmap
 * (interpose.h): a relaxed load of the hook, the hook when one is set,
 * then the system call.  The only work added to a call that does not meet
 * a segment is that load and whatever the hook's own first test costs.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interpose.h"

static _Atomic(fh_interpose_hook_t) hook;

void fh_interpose_set(fh_interpose_hook_t h)
{
    atomic_store_explicit(&hook, h, memory_order_release);
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

int mprotect(void *addr, size_t len, int prot)
{
    run_hook(addr, len, prot);
    return (int)syscall(SYS_mprotect, addr, len, prot);
}

#ifdef SYS_pkey_mprotect
int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
    run_hook(addr, len, prot);
    return (int)syscall(SYS_pkey_mprotect, addr, len, prot, pkey);
}
#endif

int munmap(void *addr, size_t len)
{
    run_hook(addr, len, -1);
    return (int)syscall(SYS_munmap, addr, len);
}
