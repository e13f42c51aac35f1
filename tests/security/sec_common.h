/*
 * sec_common.h -- what the victim (victim.c, a firehose job) and the outsider
 * (outsider.c, a stranger with only libfabric) agree on in the security test
 * tests/security/outsider.sh.  Nothing here is a secret of the job: it is
 * the kind of thing an attacker learns by reading the application's source.
 *
 *   SEC_HANDLER        the user AM handler index the victim registers (and
 *                      the outsider forges messages for);
 *   SEC_ARG0           first argument of every forged AM, so the victim can
 *                      tell a forged call from anything else;
 *   sec_pat(seed, k)   byte k of the victim's segment (seed is random per run
 *                      and handed to the outsider only so that it can *prove*
 *                      a successful read: a read that returns these bytes is
 *                      a breach);
 *   SEC_PING/SEC_PONG  handlers of the victim's own traffic (SEC_TRAFFIC=1),
 *                      whose first argument is always SEC_PING_MAGIC;
 *   SEC_WRITE_OFF      where the outsider's guessed-key writes land relative
 *                      to the segment start (both address modes).
 */
#ifndef FH_SEC_COMMON_H
#define FH_SEC_COMMON_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define SEC_HANDLER    200u
#define SEC_ARG0       0x0F0B1DDE4AB1E5ULL    /* "forbidden able" */
#define SEC_PING       201u
#define SEC_PONG       202u
#define SEC_PING_MAGIC 0x9196A9E5ULL
#define SEC_SEG_BYTES  ((size_t)64 << 10)
#define SEC_WRITE_OFF  1024u
#define SEC_LONG_OFF   2048u                  /* forged long AM destination */

static inline uint64_t sec_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Byte k of the segment pattern; neighbouring bytes differ. */
static inline uint8_t sec_pat(uint64_t seed, uint64_t k)
{
    return (uint8_t)(sec_mix64(seed + (k >> 3)) >> ((k & 7) * 8));
}

/* Monotonic seconds. */
static inline double sec_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The attack programs' output: progress lines, and one "BREACH ..." line
 * per success of an attack (the scripts fail on any; sec_breaches counts
 * them for the program's exit status). */
#define say(...) do { printf(__VA_ARGS__); fflush(stdout); } while (0)

static unsigned long sec_breaches __attribute__((unused));

static inline void breach(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("BREACH ");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    sec_breaches++;
}

#endif /* FH_SEC_COMMON_H */
