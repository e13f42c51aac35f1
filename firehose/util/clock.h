/*
 * clock.h -- the one clock of the runtime, the bootstrap and the launcher:
 * seconds since an arbitrary point, monotonic (CLOCK_MONOTONIC, which the
 * bootstrap's condition variables also use).  Thread-safe, handler-safe.
 */
#ifndef FH_CLOCK_H
#define FH_CLOCK_H

#include <time.h>

static inline double fh_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif /* FH_CLOCK_H */
