/*
 * local_check.c -- "is the caller's own buffer there?" before a transfer
 * is posted, for strategies that hand the caller's buffer to the conduit
 * as it is (pin-everything).  Over libfabric tcp a put of up to the inject
 * size is copied by fi_writemsg in the caller's thread (an unmapped source
 * faults there), and a longer put or a get makes the provider's socket
 * call fail midway (the connection's byte stream is then broken): both
 * must be refused before posting.
 *
 * Cost.  The first check of a mapping asks the kernel (fh_vma_check,
 * firehose/util/vma.h); the mapping is then watched by a memory monitor --
 * the firehose strategy's, shared because a mapping can be registered
 * with one userfaultfd only, or one of its own under the other strategies
 * (firehose/memmon, write-protect mode only: watching never changes the
 * application's system calls) and remembered per thread (the thread
 * state's lc_tab, services.h).  A later check inside it (fh_lc_check,
 * inline in reg.h) is two compares and one load of the monitor's
 * state word: any unmap, move or discard of watched memory anywhere makes
 * every thread's entry stale.  Without the monitor (FH_MEMMON=off, no
 * userfaultfd, valgrind, kernels without write-protect) every call asks
 * the kernel (~1 us).
 *
 * mprotect has no userfaultfd event: libfirehose's own mprotect,
 * pkey_mprotect and munmap (firehose/util/interpose.c) call fh_lc_stale
 * before the kernel acts when they take access away, and every wrapper
 * there (mremap, mmap with MAP_FIXED and shmdt too) after its system
 * call, which makes every thread's entries stale.
 *
 * File mappings.  A monitor cannot watch a file mapping (userfaultfd's
 * write-protect mode covers anonymous and shared memory only), and a put
 * from the executable's own data -- a static or initialized array, a
 * coarray program's everyday source -- asked the kernel on every call
 * (2.1 us against 19 ns for a stack buffer on the node route).  Such a
 * mapping is remembered too, valid while the generation stands: glibc's
 * own unmaps (malloc, thread stacks) never touch one, and the library
 * calls that can are the wrappers above.  Not seen, for file mappings and
 * for protections: a change made with the raw system call, and a library's
 * data unmapped by dlclose (the loader's own munmap) -- a put from it then
 * faults, as in any runtime that does not check.  A ThreadSanitizer build
 * does not wrap mmap (interpose.h) and remembers no file mapping.
 *
 * Threads: any thread; per-thread entries, no lock on the hit path.
 * Declared in reg.h (fh_lc_*): the core calls it for every strategy, and
 * for the node and self routes' copies (route.c).
 */
#include <stdatomic.h>
#include <string.h>

#include "firehose_internal.h"
#include "reg.h"
#include "firehose/memmon/memmon.h"
#include "firehose/util/interpose.h"
#include "firehose/util/vma.h"

static fh_memmon_t *lc_mon;                  /* NULL: ask the kernel every time */
static bool lc_own;                          /* lc_mon is ours (else firehose's) */
const _Atomic uint64_t *fh_lc_word;          /* lc_mon's state word */
_Atomic unsigned fh_lc_gen;                  /* monitors started + protections taken */

void fh_lc_init(fh_core_t *rt)
{
    fh_interpose_set_after(fh_lc_stale);
    if (lc_mon != NULL || rt->cfg.memmon == FH_MEMMON_OFF)
        return;
    char why[160] = "";
    fh_memmon_t *m = NULL;
    if (rt->mm != NULL) {
        /* The firehose strategy made (or failed to make) its monitor: a
         * mapping can be registered with one userfaultfd only, so share
         * it, and never make a second one.  Missing-page mode: no cache. */
        m = fh_mm_monitor(rt);
        if (m != NULL && strcmp(fh_memmon_mode(m), "wp") == 0) {
            lc_mon = m;
            lc_own = false;
            atomic_fetch_add(&fh_lc_gen, 1);
            fh_lc_word = fh_memmon_state_word(m);
        }
        return;
    }
    if (fh_memmon_create(&m, why, sizeof why) != 0) {
        fh_log_verbose(1, "local buffer check: no memory monitor (%s): every put and get "
                       "asks the kernel about the caller's buffer", why);
        return;
    }
    if (strcmp(fh_memmon_mode(m), "wp") != 0) {
        /* Missing-page mode splits the mappings it watches: not for
         * memory the application never gave us. */
        fh_memmon_destroy(m);
        fh_log_verbose(1, "local buffer check: the memory monitor lacks write-protect "
                       "mode: every put and get asks the kernel about the caller's buffer");
        return;
    }
    lc_mon = m;
    lc_own = true;
    atomic_fetch_add(&fh_lc_gen, 1);
    fh_lc_word = fh_memmon_state_word(m);
}

void fh_lc_fini(void)
{
    fh_memmon_t *m = lc_mon;
    fh_interpose_set_after(NULL);
    fh_lc_word = NULL;
    lc_mon = NULL;
    if (lc_own)
        fh_memmon_destroy(m);
    lc_own = false;
}

/* The slow path: ask the kernel, remember the mapping when its loss can
 * be seen -- watched by the monitor, or a file mapping (the monitor cannot
 * watch one; only the library calls the after hook follows remove one). */
int fh_lc_slow(fh_thread_t *t, bool is_put, int rank, const char *local, size_t n,
               uint64_t remote)
{
    const int prot = is_put ? FH_VMA_READ : FH_VMA_WRITE;
    uintptr_t a = (uintptr_t)local, bad = a;
    /* The state before the kernel is asked: an unmap after these loads
     * changes the word or (after its system call) the generation, so the
     * entry made below is stale at once. */
    uint64_t s0 = fh_lc_word != NULL ? atomic_load_explicit(fh_lc_word, memory_order_acquire)
                                     : 0;
    unsigned g0 = atomic_load_explicit(&fh_lc_gen, memory_order_acquire);
    /* One query when the buffer lies in one mapping (the common case). */
    fh_vma_t v;
    bool whole = fh_vma_at(a, &v) == 0 && a + n > a && a + n <= v.end;
    if (whole ? (v.prot & prot) != prot : !fh_vma_check(a, n, prot, &bad))
        goto refuse;
    if (lc_mon == NULL)
        return FH_OK;
    fh_lc_entry_t e = {.lo = a, .hi = a + n, .prot = prot, .state = s0, .gen = g0};
    if (whole) {                   /* the whole mapping, as watched */
        e.lo = v.start;
        e.hi = v.end;
        e.prot = v.prot;
    }
    if (fh_memmon_watch(lc_mon, e.lo, e.hi - e.lo) != 0) {
        /* A file mapping (the executable's data, a library's, a mapped
         * file): the monitor cannot watch it, but only the calls
         * firehose/util/interpose.c follows can remove it or take access
         * away, and each makes the generation move after its system
         * call.  Anything else (a hole since, anonymous memory the
         * monitor refused): not remembered, asked again next time. */
        if (!whole || !v.file || !FH_INTERPOSE_MMAP)
            return FH_OK;
        t->lc_tab[t->lc_next++ % FH_LC_ENTRIES] = e;
        return FH_OK;
    }
    /* Watched only now: an unmap between the kernel's answer and the watch
     * sent no event.  Ask once more, after the watch. */
    if (!fh_vma_check(a, n, prot, &bad))
        goto refuse;
    t->lc_tab[t->lc_next++ % FH_LC_ENTRIES] = e;
    return FH_OK;
refuse:
    return fh_set_error(FH_ERR_INVALID,
                        "%s %s %s at 0x%llx: the caller's %s [%p, +%zu) is not "
                        "mapped %s at %p; nothing was sent",
                        is_put ? "put" : "get", is_put ? "to" : "from", FH_RANK_NAME(rank),
                        (unsigned long long)remote, is_put ? "source" : "destination",
                        (const void *)local, n, is_put ? "readable" : "writable",
                        (void *)bad);
}

void fh_lc_stale(void)
{
    atomic_fetch_add_explicit(&fh_lc_gen, 1, memory_order_relaxed);
}
