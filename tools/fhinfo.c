/*
 * fhinfo.c -- what this firehose build offers and how it is configured.
 *
 *   fhinfo              every FH_* variable: type, default, choices, doc
 *   fhinfo -c           the effective values (defaults overridden by the
 *                       environment), after validating them
 *   fhinfo --markdown   the variable table of README.md (a test checks that
 *                       README.md contains exactly this output)
 *   fhinfo --check-env  exit 1 with a message if an FH_* variable in the
 *                       environment is unknown or has a bad value
 *   fhinfo --conduits   each conduit built in: its variables (effective
 *                       values) and whether it is usable here, and why not
 *                       (its probe, like ucx_info / fi_info)
 *   fhinfo --cost N [T [L [K]]]  what a rank of an N-rank job with T
 *                       threads calling in, L ranks per host, each talking
 *                       to K ranks, costs: paths, connections, receive
 *                       buffers, memory, descriptors, threads, and the ibv
 *                       conduit's QPs, CQ entries and pinned bytes
 *                       (fhinfo_cost.c)
 *
 * Everything printed comes from fh_config_table (firehose/util/config.c) and the
 * conduits' own tables (conduits/<name>/<name>_config.c, fh_conduit_settings_all),
 * so the documentation cannot drift from the parser.  fhinfo links the
 * common code and the conduits (for --conduits), never the runtime: it
 * works on a machine without a usable NIC.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conduits/conduit.h"
#include "firehose/util/config.h"
#include "firehose/util/env.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

extern char **environ;
int fhinfo_print_node(void);   /* fhinfo_node.c */
int fhinfo_print_cost(int nranks, int threads, int per_host, int peers); /* fhinfo_cost.c */

static const char *type_name(fh_cfg_type_t t)
{
    switch (t) {
    case FH_CFG_BOOL:   return "bool";
    case FH_CFG_INT:    return "integer";
    case FH_CFG_SIZE:   return "size";
    case FH_CFG_ENUM:   return "enum";
    case FH_CFG_STRING: return "string";
    }
    return "?";
}

/* The tables: 0 is the core's, 1..FH_NCONDUITS each conduit's. */
#define NTABLES (1 + FH_NCONDUITS)
static const fh_cfg_entry_t *table_of(int t, size_t *len)
{
    if (t == 0) {
        *len = fh_config_table_len;
        return fh_config_table;
    }
    *len = fh_conduit_settings_all[t - 1]->len;
    return fh_conduit_settings_all[t - 1]->table;
}

static const fh_cfg_entry_t *find_entry(const char *name, size_t namelen)
{
    for (int t = 0; t < NTABLES; t++) {
        size_t len;
        const fh_cfg_entry_t *tab = table_of(t, &len);
        for (size_t i = 0; i < len; i++) {
            const char *n = tab[i].name;
            if (strlen(n) == namelen && strncmp(n, name, namelen) == 0)
                return &tab[i];
        }
    }
    return NULL;
}

/* Loads and checks every table from the defaults and the environment:
 * 0, or 1 after printing the first error. */
static int load_all(void)
{
    fh_config_t cfg;
    fh_conduit_settings_buf_t buf;
    char err[256];
    int rc = fh_config_load(&cfg, err, sizeof err);
    for (int i = 0; rc == 0 && i < FH_NCONDUITS; i++)
        rc = fh_conduit_settings_load(fh_conduit_settings_all[i], &buf, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "fhinfo: %s\n", err);
        return 1;
    }
    return 0;
}

/* The tables as util/env.h takes them. */
static size_t env_tables(fh_cfg_table_ref_t tabs[NTABLES])
{
    for (int t = 0; t < NTABLES; t++)
        tabs[t].table = table_of(t, &tabs[t].len);
    return NTABLES;
}

/* ------------------------------------------------------------ outputs */

static void print_build(void)
{
    printf("firehose %s\n", PACKAGE_VERSION);
    printf("  conduits: ofi (libfabric)");
#ifdef FH_HAVE_IBV
    printf("; rdma-core found (ibv)");
#endif
    printf("\n  launchers: fhrun, singleton");
#ifdef FH_HAVE_PMIX
    printf(", pmix (mpirun, srun)");
#endif
    printf("\n\n");
}

static void print_entry(const fh_cfg_entry_t *e)
{
    printf("%s\n", e->name);
    printf("    type: %s", type_name(e->type));
    if (e->choices)
        printf(" (%s)", e->choices);
    printf("   default: %s", e->defval[0] ? e->defval : "(empty)");
    if (e->same_everywhere)
        printf("   same on all ranks");
    printf("\n    %s\n\n", e->doc);
}

static void print_table(void)
{
    print_build();
    printf("Environment variables (fhinfo -c shows the effective values):\n\n");
    for (size_t i = 0; i < fh_config_table_len; i++)
        print_entry(&fh_config_table[i]);
    for (int k = 0; k < FH_NCONDUITS; k++) {
        const fh_conduit_settings_t *s = fh_conduit_settings_all[k];
        printf("Conduit %s (fhinfo --conduits tells whether it is usable here):\n\n",
               s->conduit);
        for (size_t i = 0; i < s->len; i++)
            print_entry(&s->table[i]);
    }
}

/* One "NAME=value" line: the environment's or the default. */
static void print_value(const char *prefix, const fh_cfg_entry_t *e)
{
    const char *env = getenv(e->name);
    if (env != NULL)
        printf("%s%s=%s    # environment (default: %s)\n", prefix, e->name, env,
               e->defval[0] ? e->defval : "empty");
    else
        printf("%s%s=%s\n", prefix, e->name, e->defval);
}

static int print_effective(void)
{
    if (load_all() != 0)
        return 1;
    printf("# effective FH_* configuration (defaults overridden by the environment)\n");
    for (int t = 0; t < NTABLES; t++) {
        size_t len;
        const fh_cfg_entry_t *tab = table_of(t, &len);
        for (size_t i = 0; i < len; i++)
            print_value("", &tab[i]);
    }
    return 0;
}

/* Writes s with the characters Markdown tables care about escaped. */
static void md_text(const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", stdout);
        else
            putchar(*s);
    }
}

static void md_row(const fh_cfg_entry_t *e)
{
    printf("| `%s` | ", e->name);
    if (e->defval[0])
        printf("`%s`", e->defval);
    else
        printf("(empty)");
    printf(" | ");
    md_text(e->doc);
    if (e->choices) {
        printf(" Choices: ");
        const char *p = e->choices;
        for (;;) {
            size_t len = strcspn(p, "|");
            printf("`%.*s`", (int)len, p);
            if (p[len] == '\0')
                break;
            printf(", ");
            p += len + 1;
        }
        printf(".");
    }
    if (e->type == FH_CFG_SIZE)
        printf(" Accepts k, M, G suffixes.");
    if (e->type == FH_CFG_BOOL)
        printf(" Accepts 0/1, yes/no, on/off, true/false.");
    if (e->same_everywhere)
        printf(" Must be equal on all ranks.");
    printf(" |\n");
}

/* The core's table, then one table per conduit (its own variables). */
static void print_markdown(void)
{
    printf("| Variable | Default | Description |\n");
    printf("|---|---|---|\n");
    for (size_t i = 0; i < fh_config_table_len; i++)
        md_row(&fh_config_table[i]);
    for (int k = 0; k < FH_NCONDUITS; k++) {
        const fh_conduit_settings_t *s = fh_conduit_settings_all[k];
        printf("\nThe `%s` conduit's own variables (`conduits/%s/%s_config.c`):\n\n",
               s->conduit, s->conduit, s->conduit);
        printf("| Variable | Default | Description |\n");
        printf("|---|---|---|\n");
        for (size_t i = 0; i < s->len; i++)
            md_row(&s->table[i]);
    }
}

/* The conduits built into this fhinfo (and the runtime beside it). */
static const fh_conduit_ops_t *const built[] = {
    &fh_conduit_ofi,
    &fh_conduit_local,
#ifdef FH_HAVE_IBV
    &fh_conduit_ibv,
#endif
};

static int print_conduits(void)
{
    if (load_all() != 0)
        return 1;
    printf("Conduits built in (FH_CONDUIT chooses; auto takes ibv when usable, "
           "else ofi; local takes none when every rank is on this host):\n");
#ifndef FH_HAVE_IBV
    printf("\nibv\n    not built: configure did not find rdma-core (libibverbs-dev)\n");
#endif
    for (size_t k = 0; k < sizeof built / sizeof built[0]; k++) {
        const fh_conduit_ops_t *ops = built[k];
        fh_conduit_settings_buf_t buf;
        char err[256], why[256] = "";
        if (ops->settings != NULL)   /* local has no variables */
            fh_conduit_settings_load(ops->settings, &buf, err, sizeof err);
        /* One rank alone on this host: what fh_init would ask first. */
        fh_conduit_config_t cfg = {
            .rank = 0, .nranks = 1, .npaths = 1, .am_max_packet = 4096,
            .all_local = 1, .verbose = 0, .settings = ops->settings ? &buf : NULL,
        };
        int ok = ops->probe == NULL || ops->probe(&cfg, why, sizeof why);
        printf("\n%s\n    %s%s%s\n", ops->name, ok ? "usable" : "not usable",
               why[0] ? ": " : "", why);
        for (size_t i = 0; ops->settings != NULL && i < ops->settings->len; i++)
            print_value("    ", &ops->settings->table[i]);
    }
    return 0;
}

static int check_env(void)
{
    int problems = 0, set = 0;
    union { fh_config_t core; fh_conduit_settings_buf_t conduit; } scratch;
    char err[256];

    for (char **ep = environ; *ep != NULL; ep++) {
        const char *var = *ep;
        if (strncmp(var, "FH_", 3) != 0)
            continue;
        const char *eq = strchr(var, '=');
        size_t namelen = eq ? (size_t)(eq - var) : strlen(var);
        const fh_cfg_entry_t *e = find_entry(var, namelen);
        if (e == NULL) {
            fh_cfg_table_ref_t tabs[NTABLES];
            size_t nt = env_tables(tabs);
            if (fh_env_is_known(var, namelen, tabs, nt, getenv("FH_ENV_KNOWN")))
                continue;
            const char *hint = fh_env_closest(var, namelen, tabs, nt);
            fprintf(stderr, "fhinfo: %.*s is not a firehose variable", (int)namelen, var);
            if (hint)
                fprintf(stderr, " (did you mean %s?)", hint);
            fprintf(stderr, "; `fhinfo` lists them all, FH_ENV_KNOWN declares others\n");
            problems++;
            continue;
        }
        set++;
        memset(&scratch, 0, sizeof scratch);
        if (fh_config_parse_one(e, eq ? eq + 1 : "", &scratch, err, sizeof err) != 0) {
            fprintf(stderr, "fhinfo: %s\n", err);
            problems++;
        }
    }
    /* Each value parses on its own; now the ranges and combinations. */
    if (problems == 0 && load_all() != 0)
        problems++;
    if (problems) {
        fprintf(stderr, "fhinfo: %d problem%s in the FH_* environment\n", problems,
                problems == 1 ? "" : "s");
        return 1;
    }
    printf("fhinfo: FH_* environment is valid (%d variable%s set)\n", set,
           set == 1 ? "" : "s");
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: fhinfo [option]\n"
        "  (no option)   list every FH_* variable: type, default, choices, doc\n"
        "  -c            print the effective values (environment over defaults)\n"
        "  --markdown    print the variable table in Markdown (as in README.md)\n"
        "  --check-env   exit 1 if an FH_* variable in the environment is unknown\n"
        "                or has an invalid value\n"
        "  --conduits    each conduit built in: its variables and whether it is\n"
        "                usable on this machine (and if not, why)\n"
        "  --node        what the node-local path (FH_SHM) can use on this machine\n"
        "  --cost N [T [L [K]]]  what one rank of an N-rank job costs (paths,\n"
        "                connections, receive buffers, memory, descriptors,\n"
        "                threads; ibv: QPs, CQ entries, pinned bytes) when T\n"
        "                threads per rank call firehose (default 1), L ranks\n"
        "                share a host (default 1) and each thread talks to K\n"
        "                ranks (default N)\n"
        "  --version     print the version\n"
        "  -h, --help    this text\n");
}

int main(int argc, char **argv)
{
    if (argc >= 3 && argc <= 6 && strcmp(argv[1], "--cost") == 0) {
        long v[4] = {0, 1, 1, 0};
        const long hi[4] = {1000000, 4096, 1000000, 1000000};
        int bad = 0;
        for (int i = 2; i < argc; i++) {
            char *end = NULL;
            v[i - 2] = strtol(argv[i], &end, 10);
            bad |= *end != '\0' || v[i - 2] < 1 || v[i - 2] > hi[i - 2];
        }
        if (v[3] == 0)
            v[3] = v[0];
        if (bad || v[2] > v[0] || v[3] > v[0]) {
            fprintf(stderr, "fhinfo: --cost N [T [L [K]]]: N ranks (1..1000000), T threads "
                    "(1..4096), L ranks per host (1..N), K peers each thread talks to "
                    "(1..N)\n");
            return 2;
        }
        return fhinfo_print_cost((int)v[0], (int)v[1], (int)v[2], (int)v[3]);
    }
    if (argc > 2) {
        usage(stderr);
        return 2;
    }
    const char *opt = argc == 2 ? argv[1] : NULL;
    if (opt == NULL) {
        print_table();
        return 0;
    }
    if (strcmp(opt, "-c") == 0)
        return print_effective();
    if (strcmp(opt, "--markdown") == 0) {
        print_markdown();
        return 0;
    }
    if (strcmp(opt, "--check-env") == 0)
        return check_env();
    if (strcmp(opt, "--conduits") == 0)
        return print_conduits();
    if (strcmp(opt, "--node") == 0)
        return fhinfo_print_node();
    if (strcmp(opt, "--version") == 0) {
        printf("fhinfo (firehose) %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (strcmp(opt, "-h") == 0 || strcmp(opt, "--help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "fhinfo: unknown option %s\n", opt);
    usage(stderr);
    return 2;
}
