/*
 * agree.c -- settings that must be equal on every rank are compared at
 * fh_init (the rows of a config table with same_everywhere set).
 *
 * Unequal values of such a setting used to surface later, if at all, as a
 * hang or a protocol error far from the cause (e.g. different
 * FH_AM_CREDITS: one side sizes its receive space for fewer requests than
 * the other sends).  fh_config_agree makes it an error of fh_init instead:
 *
 *   round 1  allgather {a 64-bit hash of every flagged row's "NAME=value",
 *            the number of flagged rows}; all equal: done (the common case,
 *            16 bytes per rank);
 *   round 2  allgather one hash per flagged row, find the first row where a
 *            rank differs from rank 0;
 *   round 3  allgather that row's value as text, so every rank can name
 *            the variable, both ranks and both values.
 * Every rank sees the same gathered bytes and so takes the same rounds and
 * reaches the same verdict: each returns FH_ERR_CONFIG and none is left
 * waiting.  Values are compared as parsed ("16" and "0016" agree), before
 * anything is derived from them (FH_MAX_THREADS=0 is "0" on every host).
 *
 * The function walks tables, not names: a table added later (a conduit's
 * own variables) is one more entry in sources[].
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* One config table and the struct its offsets point into. */
typedef struct agree_src {
    const fh_cfg_entry_t *table;
    size_t len;
    const void *base;
} agree_src_t;

#define VALUE_TEXT 128   /* a value as text (FH_CFG_STRING values are cut) */

/* The effective value of e in base, as a user would write it. */
static void value_text(const fh_cfg_entry_t *e, const void *base, char *buf, size_t len)
{
    const char *field = (const char *)base + e->offset;
    switch (e->type) {
    case FH_CFG_BOOL: snprintf(buf, len, "%d", *(const int *)field); return;
    case FH_CFG_INT: snprintf(buf, len, "%ld", *(const long *)field); return;
    case FH_CFG_SIZE: snprintf(buf, len, "%zu", *(const size_t *)field); return;
    case FH_CFG_STRING: {
        const char *s = *(const char *const *)field;
        snprintf(buf, len, "%s", s ? s : "");
        return;
    }
    case FH_CFG_ENUM: {
        const char *p = e->choices;
        for (int k = 0; k < *(const int *)field && p; k++)
            if ((p = strchr(p, '|')) != NULL)
                p++;
        snprintf(buf, len, "%.*s", p ? (int)strcspn(p, "|") : 0, p ? p : "");
        return;
    }
    }
    snprintf(buf, len, "?");
}

/* FNV-1a, 64 bit, continued from h. */
static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}
#define FNV_INIT 0xcbf29ce484222325ull

/* The i-th flagged row over all sources, or NULL past the last. */
static const fh_cfg_entry_t *flagged(const agree_src_t *src, size_t nsrc, size_t i,
                                     const void **base)
{
    for (size_t s = 0; s < nsrc; s++)
        for (size_t k = 0; k < src[s].len; k++)
            if (src[s].table[k].same_everywhere && i-- == 0) {
                *base = src[s].base;
                return &src[s].table[k];
            }
    return NULL;
}

/* h continued over "NAME=value\n" (the full value, also of long strings). */
static uint64_t row_hash(uint64_t h, const fh_cfg_entry_t *e, const void *base)
{
    char v[VALUE_TEXT];
    const char *text = v;
    if (e->type == FH_CFG_STRING)
        text = *(const char *const *)((const char *)base + e->offset);
    else
        value_text(e, base, v, sizeof v);
    return fnv(fnv(fnv(fnv(h, e->name), "="), text ? text : ""), "\n");
}

/* Rounds 2 and 3: names the first differing row.  Always FH_ERR_CONFIG
 * (or the bootstrap's error). */
static int name_mismatch(fh_boot_t *boot, const agree_src_t *src, size_t nsrc, size_t nrows)
{
    int n = boot->nranks;
    uint64_t *mine = calloc(nrows, sizeof *mine);
    uint64_t *all = calloc((size_t)n * nrows, sizeof *all);
    char *texts = calloc((size_t)n, VALUE_TEXT);
    int rc;
    if (mine == NULL || all == NULL || texts == NULL) {
        rc = fh_set_error(FH_ERR_NO_MEMORY, "fh_init: out of memory comparing settings");
        goto out;
    }
    const void *base;
    for (size_t i = 0; i < nrows; i++) {
        const fh_cfg_entry_t *e = flagged(src, nsrc, i, &base);
        mine[i] = row_hash(FNV_INIT, e, base);
    }
    if ((rc = boot->ops->allgather(boot, mine, all, nrows * sizeof *mine)) != FH_OK) {
        rc = fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: bootstrap allgather failed");
        goto out;
    }
    size_t row = 0;
    int other = -1;
    for (size_t i = 0; i < nrows && other < 0; i++)
        for (int r = 1; r < n; r++)
            if (all[(size_t)r * nrows + i] != all[i]) {
                row = i;
                other = r;
                break;
            }
    /* Round 1's hashes are made of these rows, so one of them differs;
     * should that ever fail, say so rather than run on. */
    if (other < 0) {
        rc = fh_set_error(FH_ERR_CONFIG, "fh_init: the settings that must be equal on "
                          "all ranks differ between ranks, but no single one does");
        goto out;
    }
    const fh_cfg_entry_t *e = flagged(src, nsrc, row, &base);
    char v[VALUE_TEXT] = "";
    value_text(e, base, v, sizeof v);
    if ((rc = boot->ops->allgather(boot, v, texts, VALUE_TEXT)) != FH_OK) {
        rc = fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: bootstrap allgather failed");
        goto out;
    }
    texts[VALUE_TEXT - 1] = '\0';
    texts[(size_t)other * VALUE_TEXT + VALUE_TEXT - 1] = '\0';
    rc = fh_set_error(FH_ERR_CONFIG, "fh_init: %s differs between ranks: %s has %s=%s, "
                      "%s has %s=%s (it must be equal on all ranks)", e->name,
                      FH_RANK_NAME(0), e->name, texts, FH_RANK_NAME(other), e->name,
                      texts + (size_t)other * VALUE_TEXT);
out:
    free(mine);
    free(all);
    free(texts);
    return rc;
}

int fh_config_agree(fh_boot_t *boot, const fh_config_t *cfg)
{
    const agree_src_t src[] = {
        {fh_config_table, fh_config_table_len, cfg},
    };
    const size_t nsrc = sizeof src / sizeof src[0];
    if (boot->nranks < 2)
        return FH_OK;
    uint64_t mine[2] = {FNV_INIT, 0};   /* {hash, flagged rows} */
    const void *base;
    for (const fh_cfg_entry_t *e; (e = flagged(src, nsrc, mine[1], &base)) != NULL;
         mine[1]++)
        mine[0] = row_hash(mine[0], e, base);
    uint64_t *all = calloc((size_t)boot->nranks, sizeof mine);
    if (all == NULL)
        return fh_set_error(FH_ERR_NO_MEMORY, "fh_init: out of memory comparing settings");
    int rc = boot->ops->allgather(boot, mine, all, sizeof mine);
    if (rc != FH_OK) {
        free(all);
        return fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: bootstrap allgather failed");
    }
    int hash_differs = 0, rows_differ = -1;
    for (int r = 1; r < boot->nranks; r++) {
        hash_differs |= all[2 * r] != all[0];
        if (rows_differ < 0 && all[2 * r + 1] != all[1])
            rows_differ = r;
    }
    if (rows_differ >= 0)
        rc = fh_set_error(FH_ERR_CONFIG, "fh_init: ranks 0 and %d were built with different "
                          "configuration tables (%llu and %llu settings that must be equal "
                          "on all ranks): one firehose library for the whole job",
                          rows_differ, (unsigned long long)all[1],
                          (unsigned long long)all[2 * rows_differ + 1]);
    else if (hash_differs)
        rc = name_mismatch(boot, src, nsrc, (size_t)mine[1]);
    free(all);
    if (rc != FH_OK && boot->rank == 0)
        fh_log_error("%s", fh_last_error());
    return rc;
}
