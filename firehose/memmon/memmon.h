/*
 * memmon.h -- the memory monitor: learns that the application unmapped,
 * moved or discarded memory that the registration cache has registered
 * (munmap, mremap, madvise DONTNEED/FREE/REMOVE, brk shrink), so that no
 * registration of the old pages is ever used again.  docs/firehose-cache.md,
 * "Memory that is freed or reused", is the design.
 *
 * Mechanism: userfaultfd non-cooperative events (UFFD_EVENT_UNMAP, _REMOVE,
 * _REMAP) on the ranges the cache registers (fh_memmon_watch).  A monitor
 * thread reads the events.  The kernel makes the unmapping thread wait until
 * its event has been read, so the monitor thread takes NO lock the
 * application or the runtime may hold: it only appends the range to a
 * bounded single-producer ring and advances an atomic state word.
 *
 * The state word.  Bit 0 is "busy": set (seq_cst) after poll() says an event
 * is queued and before read() releases the unmapping thread; cleared, with
 * the event count in bits 1.., once the events read are in the ring.  So a
 * thread that returned from munmap and then loads the state (acquire) sees
 * either busy or a count that includes its event: comparing one word with
 * the count last processed (fh_memmon_pending) is the whole cost on the hit
 * path, and it can never miss an unmap that happened-before the check.
 *
 * Registration modes.  MODE_WP (write-protect) is preferred: with it the
 * kernel never sends us page faults (we never write-protect a page), only the
 * events, so watching a range changes nothing for the program, and
 * UFFD_USER_MODE_ONLY (usable without privilege) is harmless.  On kernels
 * without anonymous WP, MODE_MISSING is used with a full (not user-mode-only)
 * descriptor and the monitor thread resolves every missing-page fault with
 * UFFDIO_ZEROPAGE: exactly what the kernel does for anonymous memory.
 *
 * Threads: fh_memmon_watch and fh_memmon_drain are called by the runtime
 * under its cache lock (one consumer at a time); fh_memmon_pending from any
 * thread.  Never from the monitor thread.
 */
#ifndef FH_MEMMON_H
#define FH_MEMMON_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fh_memmon fh_memmon_t;

typedef struct fh_memmon_range {
    uintptr_t start, end;          /* [start, end), page-aligned */
} fh_memmon_range_t;

/* Opens the userfaultfd and starts the monitor thread.  Returns 0 and a
 * monitor, or -errno with *out == NULL and a sentence in why (userfaultfd
 * missing, forbidden by privilege or seccomp, or lacking the events;
 * -ENOTSUP under valgrind or rr, which run one thread at a time, so that an
 * unmap waiting for the monitor thread would wait for ever). */
int  fh_memmon_create(fh_memmon_t **out, char *why, size_t whylen);
/* The same in MODE_MISSING even where WP works (tests: the fault-resolving
 * path of older kernels). */
int  fh_memmon_create_missing(fh_memmon_t **out, char *why, size_t whylen);
/* Stops the thread and closes the descriptor (which unregisters every
 * watched range).  The thread closes it itself before it exits, so no
 * unmap made while it exits (its own thread destructors included) can wait
 * for it.  No other call on m may run meanwhile.  NULL is a no-op. */
void fh_memmon_destroy(fh_memmon_t *m);

/* "wp" or "missing": the registration mode in use (for FH_VERBOSE). */
const char *fh_memmon_mode(const fh_memmon_t *m);

/* Watches [addr, addr+len).  In MODE_WP by watching every mapping that
 * holds a byte of it, whole: watching never splits a mapping, so it changes
 * nothing the application's own system calls do (an mremap of the whole
 * mapping still works).  In MODE_MISSING (kernels without anonymous WP)
 * only the pages of the range, since there every first touch of a watched
 * page waits for the monitor thread: a part of a mapping watched is split
 * from the rest, and an mremap across the split fails.  0, or -errno when the range cannot be watched (a hole, a file
 * mapping, a kernel without the mode): the caller must then not cache a
 * registration of it.  Ranges are never unwatched: an event for memory no
 * longer registered is harmless. */
int  fh_memmon_watch(fh_memmon_t *m, uintptr_t addr, size_t len);

/* The state word (see above).  Hit path: `if (fh_memmon_pending(m, seen))`
 * take the slow path.  seen is the value a previous drain returned. */
uint64_t fh_memmon_state(const fh_memmon_t *m);
static inline int fh_memmon_pending(const fh_memmon_t *m, uint64_t seen)
{
    return m != NULL && fh_memmon_state(m) != seen;
}
/* The state word itself, for callers that inline the check (the hit layer,
 * firehose_hit.c: an acquire load of it compared with the last value drained). */
const _Atomic uint64_t *fh_memmon_state_word(const fh_memmon_t *m);

/* Consumer (callers serialize): waits until the monitor is not busy (it
 * holds no lock, so this is short), then copies up to max ranges out of the
 * ring into out[] and returns how many.  *all is set when the ring
 * overflowed since the last drain: the caller must then treat every range
 * as invalid.  *state gets the state word all returned ranges account for;
 * once a drain returns fewer than max ranges, *state is the new `seen`. */
size_t fh_memmon_drain(fh_memmon_t *m, fh_memmon_range_t *out, size_t max, int *all,
                       uint64_t *state);

/* Events counted since creation (for FH_STATS). */
uint64_t fh_memmon_events(const fh_memmon_t *m);

#endif /* FH_MEMMON_H */
