/*
 * config.c -- the FH_* table and its parser.  See config.h.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "firehose.h"

#define F(field) offsetof(fh_config_t, field)

const fh_cfg_entry_t fh_config_table[] = {
    {"FH_CONDUIT", FH_CFG_ENUM, "auto", "auto|ofi|ibv|local", F(conduit), 1,
     "Network conduit; auto picks ibv when a usable RDMA device exists, else ofi; local: "
     "none at all when every rank is on this host in one node group (FH_SHM=auto), so "
     "a job starts without loading libfabric (coarray images' default), else as auto.", 0},
    {"FH_PATHS", FH_CFG_ENUM, "independent", "independent|shared|lazy", F(paths), 1,
     "independent: each thread gets its own endpoint and CQ, all made at fh_init; shared: "
     "one path for all; lazy: as independent, but the first thread uses the service path "
     "and each later one's path is made when it first calls in, so that call waits until "
     "every rank polls (ofi over tcp/verbs message endpoints; elsewhere as independent).", 0},
    {"FH_MAX_THREADS", FH_CFG_INT, "0", NULL, F(max_threads), 1,
     "Independent thread paths per rank (0 = the online cores divided by the ranks on the "
     "host, at least 1, at most 16, the smallest over all ranks); "
     "more threads than this share paths.", 0},
    {"FH_AM_MAX_MEDIUM", FH_CFG_SIZE, "4k", NULL, F(am_max_medium), 1,
     "Largest medium AM payload (bytes).", 0},
    {"FH_AM_CREDITS", FH_CFG_INT, "16", NULL, F(am_credits), 1,
     "AM requests a path may have in flight to one rank (flow control).", 0},
    {"FH_XFER_CHUNK", FH_CFG_SIZE, "4m", NULL, F(xfer_chunk), 0,
     "Largest single network operation; bigger puts/gets are split.", 0},
    {"FH_STRIDED_AM_MAX", FH_CFG_SIZE, "2k", NULL, F(strided_am_max), 0,
     "Strided put/get over the network: blocks up to this size (and up to "
     "FH_AM_MAX_MEDIUM) travel packed in AMs; larger ones as one RMA per block.", 0},
    {"FH_MAX_SEGMENTS", FH_CFG_INT, "1024", NULL, F(max_segments), 1,
     "Segments that may exist at once.", 0},
    {"FH_REG_STRATEGY", FH_CFG_ENUM, "firehose",
     "pin-everything|firehose|rendezvous|rendezvous-cache|bounce", F(reg_strategy), 1,
     "Memory registration strategy: firehose registers on demand through the "
     "registration cache; pin-everything registers whole segments; for comparison, "
     "rendezvous registers at the target per operation, rendezvous-cache asks the "
     "target per operation too but the target never deregisters, bounce copies "
     "through AMs (docs/firehose-cache.md).", 0},
    {"FH_BUCKET_SIZE", FH_CFG_SIZE, "64k", NULL, F(bucket_size), 1,
     "Firehose cache bucket (lookup unit; power of two, >= page size); halved, with "
     "a note from rank 0, while FH_FIREHOSE_M/(ranks-1) is smaller.", 0},
    {"FH_REGION_MAX", FH_CFG_SIZE, "1m", NULL, F(region_max), 1,
     "Firehose cache and rendezvous strategies: largest single registration.", 0},
    {"FH_FIREHOSE_M", FH_CFG_SIZE, "0", NULL, F(firehose_m), 1,
     "Firehose cache: bytes of this rank peers may hold registered; 0 = 3/4 of what "
     "can be pinned: min(conduit limit, 2/3 of RAM, and RLIMIT_MEMLOCK where "
     "registration pins: verbs, not tcp or shm). Each peer gets at least a page.", 0},
    {"FH_FIREHOSE_MAXVICTIM", FH_CFG_SIZE, "0", NULL, F(firehose_maxvictim), 1,
     "Firehose cache: bytes for local pins and unreferenced registrations kept; "
     "0 = 1/4 of what can be pinned.", 0},
    {"FH_FIREHOSE_BUDGET", FH_CFG_ENUM, "adaptive", "static|adaptive", F(firehose_budget), 1,
     "Firehose cache: each peer may hold FH_FIREHOSE_M/(ranks-1) on us (static), or "
     "a budget that grows with its demand and is reclaimed down to that floor when "
     "another peer needs it (adaptive; docs/firehose-cache.md, Budgets).", 0},
    {"FH_PUT_IN_MOVE", FH_CFG_SIZE, "3k", NULL, F(put_in_move), 1,
     "Firehose cache: puts up to this size travel inside the registration move AM.", 0},
    /* The adaptive victim FIFO (issue 32; docs/firehose-cache.md). */
    {"FH_FIREHOSE_VICTIM", FH_CFG_ENUM, "static", "static|adaptive", F(firehose_victim), 1,
     "Firehose cache: static keeps FH_FIREHOSE_MAXVICTIM; adaptive grows it while "
     "recently deregistered victims are registered again, up to "
     "FH_FIREHOSE_MAXVICTIM_MAX, and shrinks it back when they are not.", 0},
    {"FH_FIREHOSE_MAXVICTIM_MAX", FH_CFG_SIZE, "0", NULL, F(firehose_maxvictim_max), 1,
     "Firehose cache, FH_FIREHOSE_VICTIM=adaptive: largest MAXVICTIM; 0 = 4 x "
     "MAXVICTIM, within what can be pinned beside M. Pinned bytes stay <= M + this.", 0},
    {"FH_REG_CHECK", FH_CFG_BOOL, "0", NULL, F(reg_check), 0,
     "Firehose cache: check its invariants for the peer after every cache call "
     "(debugging; costs time proportional to that peer's firehoses).", 0},
    {"FH_MEMMON", FH_CFG_ENUM, "auto", "auto|uffd|off", F(memmon), 0,
     "Firehose cache: watch for freed memory (userfaultfd); auto falls back to "
     "uncached local registrations if unavailable; off caches anyway (memory "
     "must then never be freed or reused).", 0},
    {"FH_SEGMENT", FH_CFG_ENUM, "segments", "segments|everything", F(segment_mode), 1,
     "RMA targets: segments only, or (with FH_REG_STRATEGY=firehose) any mapped "
     "address of a rank, with cached registrations revoked when memory is freed.", 0},
    {"FH_SHM", FH_CFG_ENUM, "auto", "auto|off", F(shm), 1,
     "Ranks of one node group share their segments: put, get and atomics between them "
     "are loads and stores (fh_addr_local gives the pointers); off = every rank is "
     "reached through the network conduit.", 0},
    {"FH_SHM_CMA", FH_CFG_ENUM, "auto", "auto|off", F(shm_cma), 1,
     "With FH_SEGMENT=everything, memory of a node group member outside its segments: "
     "auto = one kernel copy (process_vm_readv/writev) when a probe at fh_init succeeds "
     "(under Yama ptrace_scope 1 each rank first allows its launcher's descendants, "
     "PR_SET_PTRACER), else the network; off = always the network.", 0},
    {"FH_SHM_MAX_GROUP", FH_CFG_INT, "0", NULL, F(shm_max_group), 1,
     "Largest node group: the ranks of one host are cut into groups of this many "
     "consecutive ranks (0 = one group per host); ranks of different groups talk "
     "through the network.", 0},
    {"FH_VERBOSE", FH_CFG_INT, "0", NULL, F(verbose), 0,
     "Log level: 1 prints the effective configuration and conduit choice.", 0},
    {"FH_STATS", FH_CFG_BOOL, "0", NULL, F(stats), 0,
     "Print per-peer statistics at fh_finalize.", 0},
    {"FH_BOOT_TIMEOUT", FH_CFG_INT, FH_CFG_STR(FH_BOOT_TIMEOUT_DEFAULT), NULL, F(boot_timeout), 0,
     "Seconds to wait for the launcher and peers during fh_init.", 0},
    {"FH_SEG_PROT_WAIT", FH_CFG_INT, "10", NULL, F(seg_prot_wait), 0,
     "Longest wait, in seconds, of an mprotect/pkey_mprotect/munmap of segment "
     "memory for the peers to acknowledge the change (and, under firehose, to "
     "give back their firehoses there); a peer that has not answered by then is "
     "named and not waited for (docs/reliability.md); 0 = wait for ever.", 0},
    {"FH_PEER_WATCH", FH_CFG_BOOL, "1", NULL, F(peer_watch), 0,
     "Watch the processes of the peers on this host (once a second while polling): "
     "a dead one ends this rank with a message naming it (docs/reliability.md); 0 = "
     "its death shows only as its lost connections, as a peer's on another host "
     "does (tests/integ/pmix.sh uses it to test that path on one host).", 0},
    {"FH_WAIT_SPIN", FH_CFG_INT, "32", NULL, F(wait_spin), 0,
     "Idle polls in a row a blocking call (fh_wait, fh_barrier, fh_poll_idle, ...) "
     "makes before it yields the core between polls (sched_yield); a poll that "
     "handled something resets the count; 0 = yield at once, -1 = never yield. "
     "Unset: 262144 when every rank of the job on this host can have a core "
     "(waits keep their core), 0 when the ranks outnumber the cores.", -1},
    {"FH_BIND", FH_CFG_ENUM, "auto", "auto|off", F(bind), 0,
     "auto = when the job's ranks on a host all start with the same CPU affinity "
     "(no launcher placed them) and there are at least as many CPUs as ranks, each "
     "rank binds its threads to its own slice of those CPUs (whole cores where it "
     "can); a rank's threads share its slice, so a rank that runs more threads than "
     "its slice has CPUs wants off; off = never bind.", 0},
    {"FH_NODE_BARRIER", FH_CFG_ENUM, "auto", "auto|dissemination|count", F(node_barrier), 1,
     "The barrier of a job whose ranks all share one node group: dissemination = "
     "log2(ranks) rounds of flags in shared memory (fastest when every rank has a CPU); "
     "count = one shared counter, the last rank in releases the others (fastest when "
     "ranks outnumber CPUs); auto = dissemination unless the job's ranks on this host "
     "outnumber its CPUs.", 0},
    {"FH_RANK_NAMES", FH_CFG_STRING, "", NULL, F(rank_names), 0,
     "How messages of the runtime and fhrun name ranks: '<label> <number of rank 0>', "
     "e.g. 'image 1' (cafrun sets it); empty = 'rank 0', 'rank 1', ... A program's "
     "fh_set_rank_names call wins over it.", 0},
    {"FH_CAF_HEAP", FH_CFG_SIZE, "1g", NULL, F(caf_heap), 1,
     "Coarray Fortran (libcaf_firehose): bytes per image for coarrays, allocated "
     "identically on every image; reserved address space, touched pages only are "
     "memory, and the registration cache pins only what transfers touch.", 0},
    {"FH_CAF_LOCAL_HEAP", FH_CFG_SIZE, "256m", NULL, F(caf_local_heap), 1,
     "Coarray Fortran: bytes per image for memory one image allocates alone that "
     "others reach (allocatable components of coarrays of derived type).", 0},
    {"FH_ENV_KNOWN", FH_CFG_STRING, "", NULL, F(env_known), 0,
     "FH_* names that are not firehose's but belong in the environment (a library's "
     "or a script's own), separated by spaces or commas; NAME* covers a prefix. "
     "fh_init warns (rank 0, one line per name) about any other FH_* variable no "
     "table knows, and fhinfo --check-env rejects it; libraries declare theirs with "
     "fh_env_register.", 0},
};
const size_t fh_config_table_len =
    sizeof fh_config_table / sizeof fh_config_table[0];

int fh_parse_size(const char *s, size_t *out)
{
    if (s == NULL || *s == '\0' || *s == '-')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: return -1;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0')
        return -1;
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    v <<= shift;
    if (v > SIZE_MAX)
        return -1;
    *out = (size_t)v;
    return 0;
}

/* The coarray heaps: at most the x86-64 user address space (libcaf_firehose
 * also bounds their sum by it, and FH_CAF_HEAP from below by what the
 * library keeps at start-up, which depends on the image count). */
#define FH_CAF_HEAP_MAX ((size_t)1 << 47)
#define FH_CAF_HEAP_MAX_TEXT "131072g (128 TiB)"

/* The largest value of a size variable, as text, if it has one. */
static const char *size_max_text(const char *name)
{
    if (strcmp(name, "FH_CAF_HEAP") == 0 || strcmp(name, "FH_CAF_LOCAL_HEAP") == 0)
        return FH_CAF_HEAP_MAX_TEXT;
    return NULL;
}

static int enum_index(const char *choices, const char *v)
{
    size_t vl = strlen(v);
    int idx = 0;
    for (const char *p = choices; *p; idx++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == vl && strncasecmp(p, v, len) == 0)
            return idx;
        if (!bar)
            break;
        p = bar + 1;
    }
    return -1;
}

int fh_config_parse_one(const fh_cfg_entry_t *e, const char *value,
                        void *base, char *err, size_t errlen)
{
    char *field = (char *)base + e->offset;
    switch (e->type) {
    case FH_CFG_BOOL: {
        static const char *yes[] = {"1", "yes", "on", "true", "y"};
        static const char *no[] = {"0", "no", "off", "false", "n"};
        for (size_t i = 0; i < 5; i++) {
            if (strcasecmp(value, yes[i]) == 0) { *(int *)field = 1; return 0; }
            if (strcasecmp(value, no[i]) == 0) { *(int *)field = 0; return 0; }
        }
        snprintf(err, errlen, "%s=%s: expected 0/1, yes/no, on/off", e->name, value);
        return FH_ERR_CONFIG;
    }
    case FH_CFG_INT: {
        errno = 0;
        char *end;
        long v = strtol(value, &end, 10);
        if (errno || end == value || *end != '\0' || v < e->min) {
            snprintf(err, errlen, "%s=%s: expected an integer >= %ld", e->name, value,
                     e->min);
            return FH_ERR_CONFIG;
        }
        *(long *)field = v;
        return 0;
    }
    case FH_CFG_SIZE: {
        size_t v;
        if (fh_parse_size(value, &v) != 0) {
            const char *max = size_max_text(e->name);
            snprintf(err, errlen, "%s=%s: expected a size such as 4096, 64k, 4M, 1G%s%s",
                     e->name, value, max ? ", at most " : "", max ? max : "");
            return FH_ERR_CONFIG;
        }
        *(size_t *)field = v;
        return 0;
    }
    case FH_CFG_ENUM: {
        int idx = enum_index(e->choices, value);
        if (idx < 0) {
            snprintf(err, errlen, "%s=%s: expected one of %s", e->name, value, e->choices);
            return FH_ERR_CONFIG;
        }
        *(int *)field = idx;
        return 0;
    }
    case FH_CFG_STRING:
        *(const char **)field = value;
        return 0;
    }
    snprintf(err, errlen, "%s: unknown type", e->name);
    return FH_ERR_CONFIG;
}

/* Ranges that the parser alone cannot express. */
static int check_ranges(const fh_config_t *c, char *err, size_t errlen)
{
    if (c->verbose < 0) {
        snprintf(err, errlen, "FH_VERBOSE=%ld: expected 0 or more", c->verbose);
        return FH_ERR_CONFIG;
    }
    if (c->max_threads < 0 || c->max_threads > 255) {
        snprintf(err, errlen, "FH_MAX_THREADS=%ld: expected 0..255", c->max_threads);
        return FH_ERR_CONFIG;
    }
    if (c->am_max_medium < 64 || c->am_max_medium > (1u << 20)) {
        snprintf(err, errlen, "FH_AM_MAX_MEDIUM=%zu: expected 64..1M", c->am_max_medium);
        return FH_ERR_CONFIG;
    }
    if (c->am_credits < 1 || c->am_credits > 1024) {
        snprintf(err, errlen, "FH_AM_CREDITS=%ld: expected 1..1024", c->am_credits);
        return FH_ERR_CONFIG;
    }
    if (c->xfer_chunk < 4096) {
        snprintf(err, errlen, "FH_XFER_CHUNK=%zu: expected at least 4k", c->xfer_chunk);
        return FH_ERR_CONFIG;
    }
    if (c->max_segments < 1 || c->max_segments > (1L << 20)) {
        snprintf(err, errlen, "FH_MAX_SEGMENTS=%ld: expected 1..1M", c->max_segments);
        return FH_ERR_CONFIG;
    }
    if (c->bucket_size < 4096 || (c->bucket_size & (c->bucket_size - 1)) ||
        c->bucket_size > (1u << 30)) {
        snprintf(err, errlen, "FH_BUCKET_SIZE=%zu: expected a power of two in 4k..1G",
                 c->bucket_size);
        return FH_ERR_CONFIG;
    }
    if (c->region_max < c->bucket_size) {
        snprintf(err, errlen, "FH_REGION_MAX=%zu: expected at least FH_BUCKET_SIZE (%zu)",
                 c->region_max, c->bucket_size);
        return FH_ERR_CONFIG;
    }
    if (c->put_in_move > 65536) {
        snprintf(err, errlen, "FH_PUT_IN_MOVE=%zu: expected at most 64k", c->put_in_move);
        return FH_ERR_CONFIG;
    }
    if (c->segment_mode == FH_SEGMENT_EVERYTHING && c->reg_strategy != FH_REG_FIREHOSE) {
        snprintf(err, errlen, "FH_SEGMENT=everything: needs FH_REG_STRATEGY=firehose");
        return FH_ERR_CONFIG;
    }
    if (c->boot_timeout < 1) {
        snprintf(err, errlen, "FH_BOOT_TIMEOUT=%ld: expected at least 1", c->boot_timeout);
        return FH_ERR_CONFIG;
    }
    if (c->caf_heap > FH_CAF_HEAP_MAX || c->caf_local_heap > FH_CAF_HEAP_MAX) {
        bool heap = c->caf_heap > FH_CAF_HEAP_MAX;
        snprintf(err, errlen, "%s=%zu: expected at most " FH_CAF_HEAP_MAX_TEXT,
                 heap ? "FH_CAF_HEAP" : "FH_CAF_LOCAL_HEAP",
                 heap ? c->caf_heap : c->caf_local_heap);
        return FH_ERR_CONFIG;
    }
    if (c->wait_spin > FH_WAIT_SPIN_MAX) {
        snprintf(err, errlen, "FH_WAIT_SPIN=%ld: expected -1 (never yield) .. %ld",
                 c->wait_spin, FH_WAIT_SPIN_MAX);
        return FH_ERR_CONFIG;
    }
    return 0;
}

int fh_config_load_table(const fh_cfg_entry_t *table, size_t len, void *base,
                         size_t size, char *err, size_t errlen)
{
    memset(base, 0, size);
    for (size_t i = 0; i < len; i++) {
        const fh_cfg_entry_t *e = &table[i];
        int rc = fh_config_parse_one(e, e->defval, base, err, errlen);
        if (rc)
            return rc; /* a bad default is a bug; the test suite catches it */
        const char *v = getenv(e->name);
        if (v != NULL && (rc = fh_config_parse_one(e, v, base, err, errlen)))
            return rc;
    }
    return 0;
}

int fh_config_load(fh_config_t *cfg, char *err, size_t errlen)
{
    int rc = fh_config_load_table(fh_config_table, fh_config_table_len, cfg,
                                  sizeof *cfg, err, errlen);
    return rc ? rc : check_ranges(cfg, err, errlen);
}

void fh_config_print(const fh_config_t *cfg, void *file, const char *prefix)
{
    fh_config_print_table(fh_config_table, fh_config_table_len, cfg, file, prefix);
}

void fh_config_print_table(const fh_cfg_entry_t *table, size_t len,
                           const void *base, void *file, const char *prefix)
{
    FILE *f = file;
    for (size_t i = 0; i < len; i++) {
        const fh_cfg_entry_t *e = &table[i];
        const char *field = (const char *)base + e->offset;
        fprintf(f, "%s%s=", prefix ? prefix : "", e->name);
        switch (e->type) {
        case FH_CFG_BOOL: fprintf(f, "%d\n", *(const int *)field); break;
        case FH_CFG_INT: fprintf(f, "%ld\n", *(const long *)field); break;
        case FH_CFG_SIZE: fprintf(f, "%zu\n", *(const size_t *)field); break;
        case FH_CFG_STRING: fprintf(f, "%s\n", *(const char *const *)field); break;
        case FH_CFG_ENUM: {
            int idx = *(const int *)field;
            const char *p = e->choices;
            for (int k = 0; k < idx && p; k++) {
                p = strchr(p, '|');
                if (p) p++;
            }
            int len = p ? (int)strcspn(p, "|") : 0;
            fprintf(f, "%.*s\n", len, p ? p : "");
            break;
        }
        }
    }
}

long fh_auto_threads(long cores, long local_ranks)
{
    if (cores < 1)
        cores = 1;
    if (local_ranks < 1)
        local_ranks = 1;
    long t = cores / local_ranks;
    return t < 1 ? 1 : t > FH_AUTO_THREADS_MAX ? FH_AUTO_THREADS_MAX : t;
}
