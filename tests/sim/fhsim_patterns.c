/*
 * fhsim_patterns.c -- hot-peer access patterns with a working set per pair
 * (fhsim.h).
 */
#include "fhsim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fhsim_pattern_kind(const char *name)
{
    static const char *const names[] = {
        [FHSIM_NEIGHBORS] = "neighbors", [FHSIM_MASTER_WORKER] = "master-worker",
        [FHSIM_SKEWED] = "skewed", [FHSIM_PHASE] = "phase",
    };
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

int fhsim_pattern_init(fhsim_pattern_t *p, char *why, size_t len)
{
    p->cdf = NULL;
    if (p->nodes < 2 || !p->bucket || p->ws < 1 || p->ws > p->seg) {
        snprintf(why, len, "need nodes >= 2 and 1 <= ws (%zu) <= seg (%zu)", p->ws,
                 p->seg);
        return -1;
    }
    if ((p->kind == FHSIM_NEIGHBORS || p->kind == FHSIM_PHASE) && !p->k) {
        snprintf(why, len, "need --k >= 1");
        return -1;
    }
    if (p->k > p->nodes - 1)
        p->k = p->nodes - 1;
    if (p->kind == FHSIM_PHASE && !p->period) {
        snprintf(why, len, "need --period >= 1");
        return -1;
    }
    if (p->kind == FHSIM_SKEWED) {
        if (!(p->zipf >= 0.0 && p->zipf <= 100.0)) {
            snprintf(why, len, "need 0 <= --zipf <= 100");
            return -1;
        }
        p->cdf = malloc((p->nodes - 1) * sizeof *p->cdf);
        if (!p->cdf) {
            snprintf(why, len, "out of memory");
            return -1;
        }
        double sum = 0;
        for (uint32_t d = 1; d < p->nodes; d++)
            p->cdf[d - 1] = sum += pow((double)d, -p->zipf);
        for (uint32_t d = 1; d < p->nodes; d++)
            p->cdf[d - 1] /= sum;
    }
    return 0;
}

void fhsim_pattern_fini(fhsim_pattern_t *p)
{
    free(p->cdf);
    p->cdf = NULL;
}

uint32_t fhsim_pattern_peer(const fhsim_pattern_t *p, uint32_t src, uint64_t now,
                            uint64_t r)
{
    uint32_t n = p->nodes, d;
    switch (p->kind) {
    case FHSIM_NEIGHBORS:
        d = 1 + (uint32_t)(((uint64_t)(r % p->k) * (n - 1)) / p->k);
        break;
    case FHSIM_MASTER_WORKER: {
        uint32_t partner = src ^ 1u;
        return partner < n ? partner : (src == 0 ? 1 : 0);
    }
    case FHSIM_SKEWED: {
        double u = (double)(r >> 11) * 0x1p-53;     /* [0, 1) */
        uint32_t lo = 0, hi = n - 2;                /* first cdf[i] > u */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (p->cdf[mid] > u)
                hi = mid;
            else
                lo = mid + 1;
        }
        d = lo + 1;
        break;
    }
    default: {                                      /* FHSIM_PHASE */
        uint64_t phase = now / p->period;
        d = 1 + (uint32_t)((phase * p->k + r % p->k) % (n - 1));
        break;
    }
    }
    return (src + d) % n;
}

size_t fhsim_pattern_window(const fhsim_pattern_t *p, uint32_t src)
{
    size_t slots = p->seg / p->ws;                  /* >= 1: ws <= seg */
    size_t off = (size_t)((src * 2654435761u) % slots) * p->ws;
    off -= off % p->bucket;
    return off;
}
