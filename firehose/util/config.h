/*
 * config.h -- every FH_* tunable, declared once.
 *
 * fh_config_table[] is the single source of truth: fh_config_load() parses
 * the environment with it, `tools/fhinfo` prints it (and `fhinfo --markdown`
 * generates the table in README.md; a test checks they agree), and FH_VERBOSE
 * prints the effective values.  Nobody calls getenv("FH_...") elsewhere.
 *
 * Adding a tunable: add a field to struct fh_config and one row to the table
 * in config.c (name, type, default, choices, field offset, documentation).
 * A conduit's own variables (FH_OFI_*, FH_IBV_*) live in its own table of
 * the same entries (conduits/<name>/<name>_config.c, see conduit.h), parsed
 * by the same functions into the conduit's own struct.
 */
#ifndef FH_CONFIG_H
#define FH_CONFIG_H

#include <stddef.h>

/* FH_BOOT_TIMEOUT's default, in seconds: how long a rank waits for the
 * launcher and its peers, and fhrun for its ranks to connect.  A number
 * here because the bootstrap and fhrun read the variable without the table
 * (fh_boot_timeout_env, firehose/boot/boot_wire.h); the table's row shows
 * it as text with FH_CFG_STR. */
#define FH_BOOT_TIMEOUT_DEFAULT 60
#define FH_CFG_STR_(x) #x
#define FH_CFG_STR(x)  FH_CFG_STR_(x)

typedef enum fh_cfg_type {
    FH_CFG_BOOL,    /* 0/1, yes/no, on/off, true/false          -> int    */
    FH_CFG_INT,     /* decimal integer (ranges: check_ranges)   -> long   */
    FH_CFG_SIZE,    /* bytes, with optional k/K, m/M, g/G suffix -> size_t */
    FH_CFG_ENUM,    /* one of `choices` ("a|b|c")               -> int index */
    FH_CFG_STRING   /* free text                                -> const char* */
} fh_cfg_type_t;

typedef struct fh_config {
    int         conduit;          /* FH_CONDUIT: index into "auto|ofi|ibv" */
    int         paths;            /* FH_PATHS: 0 independent, 1 shared */
    long        max_threads;      /* FH_MAX_THREADS: independent paths */
    size_t      am_max_medium;    /* FH_AM_MAX_MEDIUM */
    long        am_credits;       /* FH_AM_CREDITS */
    size_t      xfer_chunk;       /* FH_XFER_CHUNK */
    size_t      strided_am_max;   /* FH_STRIDED_AM_MAX */
    long        max_segments;     /* FH_MAX_SEGMENTS */
    int         reg_strategy;     /* FH_REG_STRATEGY */
    size_t      bucket_size;      /* FH_BUCKET_SIZE */
    size_t      region_max;       /* FH_REGION_MAX */
    size_t      firehose_m;       /* FH_FIREHOSE_M (0 = derived) */
    size_t      firehose_maxvictim; /* FH_FIREHOSE_MAXVICTIM (0 = derived) */
    int         firehose_budget;  /* FH_FIREHOSE_BUDGET: index into "static|adaptive" */
    size_t      put_in_move;      /* FH_PUT_IN_MOVE */
    int         reg_check;        /* FH_REG_CHECK */
    int         memmon;           /* FH_MEMMON: index into "auto|uffd|off" */
    int         segment_mode;     /* FH_SEGMENT: index into "segments|everything" */
    int         shm;              /* FH_SHM: index into "auto|off" */
    long        shm_max_group;    /* FH_SHM_MAX_GROUP (0 = no cap) */
    int         shm_cma;          /* FH_SHM_CMA: index into "auto|off" */
    long        verbose;          /* FH_VERBOSE */
    int         stats;            /* FH_STATS */
    long        boot_timeout;     /* FH_BOOT_TIMEOUT (seconds) */
    long        seg_prot_wait;    /* FH_SEG_PROT_WAIT (seconds, 0 = for ever) */
    int         peer_watch;       /* FH_PEER_WATCH */
    long        wait_spin;        /* FH_WAIT_SPIN: -1 (never yield) .. FH_WAIT_SPIN_MAX */
    int         bind;             /* FH_BIND: index into "auto|off" */
    int         node_barrier;     /* FH_NODE_BARRIER: "auto|dissemination|count" */
    size_t      caf_heap;         /* FH_CAF_HEAP (libcaf_firehose) */
    size_t      caf_local_heap;   /* FH_CAF_LOCAL_HEAP (libcaf_firehose) */
    const char *rank_names;       /* FH_RANK_NAMES (also read by fhrun) */
    const char *env_known;        /* FH_ENV_KNOWN (util/env.h) */
    size_t      firehose_maxvictim_max; /* FH_FIREHOSE_MAXVICTIM_MAX (0 = derived) */
    int         firehose_victim;  /* FH_FIREHOSE_VICTIM: index into "static|adaptive" */
} fh_config_t;

/* Largest FH_WAIT_SPIN (idle polls before a waiting thread yields). */
#define FH_WAIT_SPIN_MAX 1000000000L
/* FH_WAIT_SPIN's value when unset and every rank of the job on this host
 * can have a core (path.c, fh_wait_init): idle polls before a wait yields,
 * 0.03-0.3 s. */
#define FH_WAIT_SPIN_LONG 262144L

enum { FH_CONDUIT_AUTO = 0, FH_CONDUIT_OFI = 1, FH_CONDUIT_IBV = 2, FH_CONDUIT_LOCAL = 3 };
enum { FH_PATHS_INDEPENDENT = 0, FH_PATHS_SHARED = 1, FH_PATHS_LAZY = 2 };
enum { FH_REG_PIN_EVERYTHING = 0, FH_REG_FIREHOSE = 1, FH_REG_RENDEZVOUS = 2,
       FH_REG_RENDEZVOUS_CACHE = 3, FH_REG_BOUNCE = 4 };
enum { FH_SEGMENT_SEGMENTS = 0, FH_SEGMENT_EVERYTHING = 1 };

enum { FH_FIREHOSE_BUDGET_STATIC = 0, FH_FIREHOSE_BUDGET_ADAPTIVE = 1 };
enum { FH_SHM_AUTO = 0, FH_SHM_OFF = 1 };
enum { FH_SHM_CMA_AUTO = 0, FH_SHM_CMA_OFF = 1 };
enum { FH_BIND_AUTO = 0, FH_BIND_OFF = 1 };
enum { FH_NODE_BARRIER_AUTO = 0, FH_NODE_BARRIER_DISSEMINATION = 1, FH_NODE_BARRIER_COUNT = 2 };
enum { FH_MEMMON_AUTO = 0, FH_MEMMON_UFFD = 1, FH_MEMMON_OFF = 2 };
enum { FH_VICTIM_STATIC = 0, FH_VICTIM_ADAPTIVE = 1 };

typedef struct fh_cfg_entry {
    const char   *name;       /* "FH_CONDUIT" */
    fh_cfg_type_t type;
    const char   *defval;     /* default, as a user would write it */
    const char   *choices;    /* FH_CFG_ENUM: "auto|ofi|ibv"; else NULL */
    size_t        offset;     /* offsetof(fh_config_t, field), or of the
                                 conduit's settings struct */
    int           same_everywhere; /* must be equal on all ranks */
    const char   *doc;        /* one line */
    long          min;        /* FH_CFG_INT: smallest accepted value (0 unless set) */
} fh_cfg_entry_t;

extern const fh_cfg_entry_t fh_config_table[];
extern const size_t fh_config_table_len;

/* Fills *cfg from defaults and the environment.  On a bad value returns
 * FH_ERR_CONFIG and writes "FH_X=value: reason" into err. */
int fh_config_load(fh_config_t *cfg, char *err, size_t errlen);

/* Parses one value of the given entry into the struct at base (an
 * fh_config_t for fh_config_table; used by load, conduits and tests). */
int fh_config_parse_one(const fh_cfg_entry_t *e, const char *value,
                        void *base, char *err, size_t errlen);

/* Fills the struct at base (zeroed first, `size` bytes) from the defaults
 * of table[0..len) and the environment, without range checks: FH_OK, or
 * FH_ERR_CONFIG with "FH_X=value: reason" in err.  fh_config_load is this
 * for fh_config_table plus its ranges. */
int fh_config_load_table(const fh_cfg_entry_t *table, size_t len, void *base,
                         size_t size, char *err, size_t errlen);

/* Writes "NAME=value" for every entry, effective values, one per line, to a
 * FILE* (void * keeps stdio out). */
void fh_config_print(const fh_config_t *cfg, void *file, const char *prefix);
/* The same for any table and the struct it fills. */
void fh_config_print_table(const fh_cfg_entry_t *table, size_t len,
                           const void *base, void *file, const char *prefix);

/* FH_MAX_THREADS=0: the thread paths a rank gets, from the cores of its
 * host and the ranks sharing them: max(1, cores / local_ranks), at most
 * FH_AUTO_THREADS_MAX (paths beyond the cores a rank can use gain nothing
 * and cost queue pairs and receive memory on every peer).  cores < 1 or
 * local_ranks < 1 count as 1.  fh_init takes the minimum over all ranks
 * (npaths must be equal everywhere); fhinfo prints the same. */
#define FH_AUTO_THREADS_MAX 16
long fh_auto_threads(long cores, long local_ranks);

/* Parses "64k", "4M", "1g", "123": returns 0 or -1 (bad/overflow). */
int fh_parse_size(const char *s, size_t *out);

#endif /* FH_CONFIG_H */
