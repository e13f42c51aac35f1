/*
 * interpose.h -- libfirehose's own mprotect, pkey_mprotect and munmap
 * (interpose.c): the application's calls of them reach us first (the
 * executable links libfirehose before libc), so the runtime can withdraw a
 * segment range from peers *before* the kernel changes it -- userfaultfd
 * has no event for mprotect, and an unmap event arrives after the fact.
 * Also mremap, mmap / mmap64 with MAP_FIXED and shmdt, which only call
 * the "after" hook: with munmap and mprotect they are the library calls
 * that can take access away from memory a process already had (not:
 * madvise's guard pages, which no query of the mappings shows either).
 * The after hook is how the caller's buffer check
 * (firehose/reg/local_check.c) trusts what it remembered of mappings no
 * memory monitor can watch (file mappings and SysV attachments, which the
 * write-protect registration refuses).
 *
 * Each wrapper calls the hook (if one is set) and then the system call
 * itself (syscall(2), never libc's symbol: no dlsym, no recursion), and
 * returns what the kernel returned with the kernel's errno: the hook
 * cannot change what the application's call does.  glibc's own callers
 * (malloc, the loader, thread stacks) use its internal symbols and are not
 * seen; they never touch segments.
 */
#ifndef FH_UTIL_INTERPOSE_H
#define FH_UTIL_INTERPOSE_H

#include <stddef.h>

/* Called before the kernel changes [addr, +len) to prot (munmap: prot -1).
 * It may poll and wait for peers; it must tolerate any argument (the
 * kernel has not checked them yet); the wrapper restores errno after it.
 * Runs in the application's thread, possibly
 * in a signal handler: it must do nothing but relaxed loads unless the
 * range meets memory it cares about. */
typedef void (*fh_interpose_hook_t)(void *addr, size_t len, int prot);

/* Sets the hook (NULL: pure pass-through, the state before fh_init and
 * after fh_finalize).  Any thread; the hook in use when a wrapper starts
 * is the one it calls. */
void fh_interpose_set(fh_interpose_hook_t hook);

/* 1 when libfirehose wraps mmap and mmap64 (MAP_FIXED replacing a
 * mapping is seen); 0 under ThreadSanitizer, where a program linking the
 * runtime statically would define mmap ahead of TSan's interceptor (TSan
 * faults at start-up): there the caller's buffer check remembers no file
 * mapping (local_check.c). */
#if defined(__SANITIZE_THREAD__)
#define FH_INTERPOSE_MMAP 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FH_INTERPOSE_MMAP 0
#endif
#endif
#ifndef FH_INTERPOSE_MMAP
#define FH_INTERPOSE_MMAP 1
#endif

/* Called after each of the wrappers' system calls returned, whatever it
 * returned (the wrapper restores errno after it).  Must be async-signal-
 * safe and never call the wrappers.  NULL: none. */
typedef void (*fh_interpose_after_t)(void);
void fh_interpose_set_after(fh_interpose_after_t after);

#endif /* FH_UTIL_INTERPOSE_H */
