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
 *
 * Everything printed comes from fh_config_table (firehose/util/config.c), so the
 * documentation cannot drift from the parser.  fhinfo links only the common
 * code (config, log, error), never the network runtime: it works on a
 * machine without a usable NIC.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "firehose/util/config.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

extern char **environ;

/* Variables that tools/fhrun sets for its ranks (see bootstrap.h and
 * fh_boot_open in firehose/boot/boot.c).  They are
 * not tunables, so they are not in the table, but they are not typos
 * either. */
static const char *const launcher_vars[] = {
    "FH_BOOT_ADDR", "FH_JOB_KEY", "FH_RANK", "FH_NRANKS",
};

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

static const fh_cfg_entry_t *find_entry(const char *name, size_t namelen)
{
    for (size_t i = 0; i < fh_config_table_len; i++) {
        const char *n = fh_config_table[i].name;
        if (strlen(n) == namelen && strncmp(n, name, namelen) == 0)
            return &fh_config_table[i];
    }
    return NULL;
}

static int is_launcher_var(const char *name, size_t namelen)
{
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
        if (strlen(launcher_vars[i]) == namelen &&
            strncmp(launcher_vars[i], name, namelen) == 0)
            return 1;
    return 0;
}

/* Edit distance, for "did you mean" on a misspelt variable. */
static size_t distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b);
    if (la > 64 || lb > 64)
        return (size_t)-1;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static const char *closest_name(const char *name, size_t namelen)
{
    const char *best = NULL;
    size_t best_d = 4; /* suggest only close matches */
    for (size_t i = 0; i < fh_config_table_len; i++) {
        size_t d = distance(name, namelen, fh_config_table[i].name);
        if (d < best_d) {
            best_d = d;
            best = fh_config_table[i].name;
        }
    }
    return best;
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

static void print_table(void)
{
    print_build();
    printf("Environment variables (fhinfo -c shows the effective values):\n\n");
    for (size_t i = 0; i < fh_config_table_len; i++) {
        const fh_cfg_entry_t *e = &fh_config_table[i];
        printf("%s\n", e->name);
        printf("    type: %s", type_name(e->type));
        if (e->choices)
            printf(" (%s)", e->choices);
        printf("   default: %s", e->defval[0] ? e->defval : "(empty)");
        if (e->same_everywhere)
            printf("   same on all ranks");
        printf("\n    %s\n\n", e->doc);
    }
}

static int print_effective(void)
{
    fh_config_t cfg;
    char err[256];
    if (fh_config_load(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "fhinfo: %s\n", err);
        return 1;
    }
    printf("# effective FH_* configuration (defaults overridden by the environment)\n");
    for (size_t i = 0; i < fh_config_table_len; i++) {
        const fh_cfg_entry_t *e = &fh_config_table[i];
        const char *env = getenv(e->name);
        if (env != NULL)
            printf("%s=%s    # environment (default: %s)\n", e->name, env,
                   e->defval[0] ? e->defval : "empty");
        else
            printf("%s=%s\n", e->name, e->defval);
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

static void print_markdown(void)
{
    printf("| Variable | Default | Description |\n");
    printf("|---|---|---|\n");
    for (size_t i = 0; i < fh_config_table_len; i++) {
        const fh_cfg_entry_t *e = &fh_config_table[i];
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
}

static int check_env(void)
{
    int problems = 0, set = 0;
    fh_config_t scratch;
    char err[256];

    for (char **ep = environ; *ep != NULL; ep++) {
        const char *var = *ep;
        if (strncmp(var, "FH_", 3) != 0)
            continue;
        const char *eq = strchr(var, '=');
        size_t namelen = eq ? (size_t)(eq - var) : strlen(var);
        const fh_cfg_entry_t *e = find_entry(var, namelen);
        if (e == NULL) {
            if (is_launcher_var(var, namelen))
                continue;
            const char *hint = closest_name(var, namelen);
            fprintf(stderr, "fhinfo: %.*s is not a firehose variable", (int)namelen, var);
            if (hint)
                fprintf(stderr, " (did you mean %s?)", hint);
            fprintf(stderr, "; `fhinfo` lists them all\n");
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
    if (problems == 0 && fh_config_load(&scratch, err, sizeof err) != 0) {
        fprintf(stderr, "fhinfo: %s\n", err);
        problems++;
    }
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
        "  --version     print the version\n"
        "  -h, --help    this text\n");
}

int main(int argc, char **argv)
{
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
