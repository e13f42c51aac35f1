/*
 * test_config.c -- unit tests of the FH_* table and its parser
 * (firehose/util/config.c), with the Check framework.
 *
 * Each test runs in its own process (Check's fork mode) and starts from an
 * environment without FH_* variables (see clear_fh_env), so setenv in one
 * test cannot leak into another.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "conduits/conduit.h"
#include "firehose/util/config.h"
#include "firehose/util/log.h"
#include "firehose.h"
#include "conduits/ofi/ofi_config.h"
#include "conduits/ibv/ibv_config.h"

extern char **environ;

/* ------------------------------------------------------------- helpers */

static void clear_fh_env(void)
{
    /* unsetenv shifts environ, so rescan from the start after each removal. */
    for (int again = 1; again;) {
        again = 0;
        for (char **ep = environ; *ep; ep++) {
            if (strncmp(*ep, "FH_", 3) == 0) {
                char name[128];
                size_t n = strcspn(*ep, "=");
                if (n >= sizeof name)
                    n = sizeof name - 1;
                memcpy(name, *ep, n);
                name[n] = '\0';
                unsetenv(name);
                again = 1;
                break;
            }
        }
    }
}

static const fh_cfg_entry_t *entry(const char *name)
{
    for (size_t i = 0; i < fh_config_table_len; i++)
        if (strcmp(fh_config_table[i].name, name) == 0)
            return &fh_config_table[i];
    ck_abort_msg("no entry %s in fh_config_table", name);
    return NULL;
}

/* Parses value for the named variable into *cfg; returns the status and
 * leaves the message in err. */
static int parse(const char *name, const char *value, fh_config_t *cfg,
                 char *err, size_t errlen)
{
    err[0] = '\0';
    return fh_config_parse_one(entry(name), value, cfg, err, errlen);
}

static size_t size_of(const char *s, int *rc)
{
    size_t v = 12345;
    *rc = fh_parse_size(s, &v);
    return v;
}

/* ----------------------------------------------------------- the table */

START_TEST(every_default_parses)
{
    for (size_t i = 0; i < fh_config_table_len; i++) {
        const fh_cfg_entry_t *e = &fh_config_table[i];
        fh_config_t cfg;
        char err[256] = "";
        memset(&cfg, 0, sizeof cfg);
        int rc = fh_config_parse_one(e, e->defval, &cfg, err, sizeof err);
        ck_assert_msg(rc == 0, "default of %s (\"%s\") should parse, got %d: %s",
                      e->name, e->defval, rc, err);
    }
}
END_TEST

START_TEST(table_entries_are_well_formed)
{
    for (size_t i = 0; i < fh_config_table_len; i++) {
        const fh_cfg_entry_t *e = &fh_config_table[i];
        ck_assert_msg(strncmp(e->name, "FH_", 3) == 0, "%s should start with FH_", e->name);
        ck_assert_msg(e->doc != NULL && e->doc[0] != '\0', "%s has no doc", e->name);
        ck_assert_msg(e->defval != NULL, "%s has no default", e->name);
        ck_assert_msg((e->type == FH_CFG_ENUM) == (e->choices != NULL),
                      "%s: choices must be set exactly for enums", e->name);
        ck_assert_msg(e->offset < sizeof(fh_config_t), "%s: offset %zu outside fh_config_t",
                      e->name, e->offset);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(e->name, fh_config_table[j].name) != 0,
                          "%s appears twice in the table", e->name);
    }
}
END_TEST

START_TEST(load_without_environment_gives_defaults)
{
    fh_config_t cfg;
    char err[256] = "";
    int rc = fh_config_load(&cfg, err, sizeof err);
    ck_assert_msg(rc == 0, "fh_config_load with no FH_* set should succeed, got %d: %s",
                  rc, err);
    /* Spot checks that the table's defaults reach the struct. */
    ck_assert_int_eq(cfg.conduit, FH_CONDUIT_AUTO);
    ck_assert_int_eq(cfg.paths, FH_PATHS_INDEPENDENT);
    ck_assert_uint_eq(cfg.am_max_medium, 4096);
    ck_assert_uint_eq(cfg.xfer_chunk, (size_t)4 << 20);
    ck_assert_int_eq(cfg.stats, 0);
}
END_TEST

/* --------------------------------------------------------------- sizes */

START_TEST(sizes_with_suffixes)
{
    int rc;
    ck_assert_uint_eq(size_of("4096", &rc), 4096);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(size_of("64k", &rc), 64u * 1024);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(size_of("64K", &rc), 64u * 1024);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(size_of("4M", &rc), (size_t)4 << 20);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(size_of("4m", &rc), (size_t)4 << 20);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(size_of("1G", &rc), (size_t)1 << 30);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(size_of("0", &rc), 0);
    ck_assert_int_eq(rc, 0);
}
END_TEST

START_TEST(sizes_rejected)
{
    static const char *bad[] = {
        "99999999999G",             /* overflows 64 bits after the shift */
        "99999999999999999999999",  /* overflows strtoull */
        "-1", "12x", "", "k", "4 M", "4MM", "0x10", "1T",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t v = 777;
        int rc = fh_parse_size(bad[i], &v);
        ck_assert_msg(rc == -1, "fh_parse_size(\"%s\") should fail, got rc %d value %zu",
                      bad[i], rc, v);
        ck_assert_msg(v == 777, "fh_parse_size(\"%s\") failed but wrote %zu", bad[i], v);
    }
    size_t v;
    ck_assert_int_eq(fh_parse_size(NULL, &v), -1);
}
END_TEST

START_TEST(size_variable_error_names_variable)
{
    fh_config_t cfg;
    char err[256];
    int rc = parse("FH_XFER_CHUNK", "12x", &cfg, err, sizeof err);
    ck_assert_int_eq(rc, FH_ERR_CONFIG);
    ck_assert_msg(strstr(err, "FH_XFER_CHUNK=12x") != NULL,
                  "message should name FH_XFER_CHUNK=12x, got \"%s\"", err);
}
END_TEST

/* --------------------------------------------------------------- enums */

START_TEST(enums_are_case_insensitive)
{
    fh_config_t cfg;
    char err[256];
    ck_assert_int_eq(parse("FH_CONDUIT", "OFI", &cfg, err, sizeof err), 0);
    ck_assert_int_eq(cfg.conduit, FH_CONDUIT_OFI);
    ck_assert_int_eq(parse("FH_CONDUIT", "Ibv", &cfg, err, sizeof err), 0);
    ck_assert_int_eq(cfg.conduit, FH_CONDUIT_IBV);
    ck_assert_int_eq(parse("FH_CONDUIT", "auto", &cfg, err, sizeof err), 0);
    ck_assert_int_eq(cfg.conduit, FH_CONDUIT_AUTO);
    ck_assert_int_eq(parse("FH_PATHS", "SHARED", &cfg, err, sizeof err), 0);
    ck_assert_int_eq(cfg.paths, FH_PATHS_SHARED);
}
END_TEST

START_TEST(enum_rejects_unknown_and_prefixes)
{
    fh_config_t cfg;
    char err[256];
    static const char *bad[] = {"verbs", "of", "ofix", "", "auto|ofi"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse("FH_CONDUIT", bad[i], &cfg, err, sizeof err);
        ck_assert_msg(rc == FH_ERR_CONFIG, "FH_CONDUIT=\"%s\" should be rejected, got %d",
                      bad[i], rc);
        ck_assert_msg(strstr(err, "FH_CONDUIT") != NULL && strstr(err, "auto|ofi|ibv"),
                      "message should name FH_CONDUIT and its choices, got \"%s\"", err);
    }
}
END_TEST

/* --------------------------------------------------------------- bools */

START_TEST(bool_forms)
{
    static const char *yes[] = {"1", "yes", "YES", "on", "On", "true", "TRUE", "y"};
    static const char *no[] = {"0", "no", "NO", "off", "false", "False", "n"};
    fh_config_t cfg;
    char err[256];
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        cfg.stats = 0;
        ck_assert_msg(parse("FH_STATS", yes[i], &cfg, err, sizeof err) == 0 && cfg.stats == 1,
                      "FH_STATS=%s should mean 1 (%s)", yes[i], err);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        cfg.stats = 1;
        ck_assert_msg(parse("FH_STATS", no[i], &cfg, err, sizeof err) == 0 && cfg.stats == 0,
                      "FH_STATS=%s should mean 0 (%s)", no[i], err);
    }
    static const char *bad[] = {"2", "maybe", "", "yess", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse("FH_STATS", bad[i], &cfg, err, sizeof err);
        ck_assert_msg(rc == FH_ERR_CONFIG, "FH_STATS=\"%s\" should be rejected", bad[i]);
        ck_assert_msg(strstr(err, "FH_STATS") != NULL,
                      "message should name FH_STATS, got \"%s\"", err);
    }
}
END_TEST

/* ------------------------------------------------------------ integers */

START_TEST(integers_rejected)
{
    static const char *bad[] = {"-1", "12x", "", "1.5", "99999999999999999999999"};
    fh_config_t cfg;
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse("FH_AM_CREDITS", bad[i], &cfg, err, sizeof err);
        ck_assert_msg(rc == FH_ERR_CONFIG, "FH_AM_CREDITS=\"%s\" should be rejected", bad[i]);
        ck_assert_msg(strstr(err, "FH_AM_CREDITS") != NULL,
                      "message should name FH_AM_CREDITS, got \"%s\"", err);
    }
}
END_TEST

/* --------------------------------------------------------- environment */

START_TEST(environment_overrides_defaults)
{
    setenv("FH_AM_CREDITS", "32", 1);
    setenv("FH_XFER_CHUNK", "8M", 1);
    setenv("FH_PATHS", "shared", 1);
    setenv("FH_STATS", "yes", 1);
    setenv("FH_OFI_PROVIDER", "shm", 1);
    fh_config_t cfg;
    char err[256] = "";
    int rc = fh_config_load(&cfg, err, sizeof err);
    ck_assert_msg(rc == 0, "load should succeed, got %d: %s", rc, err);
    ck_assert_int_eq(cfg.am_credits, 32);
    ck_assert_uint_eq(cfg.xfer_chunk, (size_t)8 << 20);
    ck_assert_int_eq(cfg.paths, FH_PATHS_SHARED);
    ck_assert_int_eq(cfg.stats, 1);
    /* A conduit's variable, through the conduit's own table. */
    ofi_settings_t os;
    ck_assert_int_eq(fh_conduit_settings_load(&fh_ofi_settings, &os, err, sizeof err), 0);
    ck_assert_str_eq(os.provider, "shm");
    /* Untouched variables keep their defaults. */
    fh_config_t def;
    memset(&def, 0, sizeof def);
    ck_assert_int_eq(parse("FH_MAX_THREADS", entry("FH_MAX_THREADS")->defval, &def,
                           err, sizeof err), 0);
    ck_assert_int_eq(cfg.max_threads, def.max_threads);
}
END_TEST

START_TEST(environment_bad_value_names_variable)
{
    setenv("FH_AM_MAX_MEDIUM", "lots", 1);
    fh_config_t cfg;
    char err[256] = "";
    ck_assert_int_eq(fh_config_load(&cfg, err, sizeof err), FH_ERR_CONFIG);
    ck_assert_msg(strstr(err, "FH_AM_MAX_MEDIUM=lots") != NULL,
                  "message should name FH_AM_MAX_MEDIUM=lots, got \"%s\"", err);
}
END_TEST

/* Every variable of the table, one at a time: a value its type cannot
 * parse makes fh_config_load fail with FH_ERR_CONFIG and a message naming
 * the variable and the value.  Free-text variables (FH_CFG_STRING) cannot
 * be wrong for the parser; they are checked where they are used (the
 * conduits; tests/integ/config_reject.sh), and must be listed here so that
 * a new one is a deliberate choice. */
/* Loads table t (-1: the core's, else conduit t's) from the environment. */
static int load_table(int t, char *err, size_t errlen)
{
    if (t < 0) {
        fh_config_t cfg;
        return fh_config_load(&cfg, err, errlen);
    }
    fh_conduit_settings_buf_t buf;
    return fh_conduit_settings_load(fh_conduit_settings_all[t], &buf, err, errlen);
}

START_TEST(every_variable_rejects_a_bad_value)
{
    /* FH_RANK_NAMES: checked by fh_init and fhrun (rank_names below). */
    static const char *const free_text[] = {"FH_OFI_PROVIDER", "FH_OFI_DOMAIN",
                                            "FH_IBV_DEVICE", "FH_RANK_NAMES", "FH_ENV_KNOWN"};
    size_t checked = 0, total = 0;
    for (int t = -1; t < FH_NCONDUITS; t++) {
    const fh_cfg_entry_t *table = t < 0 ? fh_config_table : fh_conduit_settings_all[t]->table;
    size_t len = t < 0 ? fh_config_table_len : fh_conduit_settings_all[t]->len;
    total += len;
    for (size_t i = 0; i < len; i++) {
        const fh_cfg_entry_t *e = &table[i];
        const char *bad = NULL;
        switch (e->type) {
        case FH_CFG_BOOL:   bad = "maybe"; break;
        case FH_CFG_INT:    bad = "12x"; break;
        case FH_CFG_SIZE:   bad = "12q"; break;
        case FH_CFG_ENUM:   bad = "no-such-choice"; break;
        case FH_CFG_STRING: {
            int listed = 0;
            for (size_t k = 0; k < sizeof free_text / sizeof free_text[0]; k++)
                listed |= strcmp(e->name, free_text[k]) == 0;
            ck_assert_msg(listed, "%s is free text: add it to free_text[] and check its "
                          "values where it is used", e->name);
            continue;
        }
        }
        char want[128], err[256] = "";
        setenv(e->name, bad, 1);
        int rc = load_table(t, err, sizeof err);
        unsetenv(e->name);
        snprintf(want, sizeof want, "%s=%s", e->name, bad);
        ck_assert_msg(rc == FH_ERR_CONFIG, "%s should be rejected with FH_ERR_CONFIG, got %d",
                      want, rc);
        ck_assert_msg(strstr(err, want) != NULL, "message should name %s, got \"%s\"", want,
                      err);
        checked++;
    }
    }
    ck_assert_uint_eq(checked + sizeof free_text / sizeof free_text[0], total);
}
END_TEST

/* -------------------------------------------------------------- ranges */

static void expect_range_error_in(int table, const char *name, const char *value)
{
    setenv(name, value, 1);
    char err[256] = "";
    int rc = load_table(table, err, sizeof err);
    ck_assert_msg(rc == FH_ERR_CONFIG, "%s=%s should be rejected, got %d", name, value, rc);
    ck_assert_msg(strstr(err, name) != NULL, "message should name %s, got \"%s\"", name, err);
    unsetenv(name);
}

static void expect_range_error(const char *name, const char *value)
{
    expect_range_error_in(-1, name, value);
}

/* The ibv conduit's ranges (its check in conduits/ibv/ibv_config.c). */
START_TEST(conduit_ranges_rejected)
{
    int ibv = -1;
    for (int t = 0; t < FH_NCONDUITS; t++)
        if (fh_conduit_settings_all[t] == &fh_ibv_settings)
            ibv = t;
    ck_assert_int_ge(ibv, 0);
    expect_range_error_in(ibv, "FH_IBV_PORT", "256");
    expect_range_error_in(ibv, "FH_IBV_PORT", "-1");
    expect_range_error_in(ibv, "FH_IBV_GID_INDEX", "-2");
    expect_range_error_in(ibv, "FH_IBV_GID_INDEX", "65536");
    char err[256] = "";
    setenv("FH_IBV_PORT", "255", 1);
    setenv("FH_IBV_GID_INDEX", "65535", 1);
    ck_assert_int_eq(load_table(ibv, err, sizeof err), FH_OK);
    unsetenv("FH_IBV_PORT");
    unsetenv("FH_IBV_GID_INDEX");
}
END_TEST

/* FH_IBV_DEVICE as a list: rank r takes entry r mod n; a list with an
 * empty or too long entry is refused by the conduit's check. */
START_TEST(ibv_device_per_rank)
{
    char name[IBV_DEVNAME_MAX];
    ck_assert_int_eq(ibv_device_for_rank("mlx5_0", 7, name, sizeof name), 6);
    ck_assert_str_eq(name, "mlx5_0");
    const char *want[] = {"rxe0", "rxe1", "rxe0", "rxe1", "rxe0"};
    for (int r = 0; r < 5; r++) {
        ck_assert_int_eq(ibv_device_for_rank("rxe0,rxe1", r, name, sizeof name), 4);
        ck_assert_str_eq(name, want[r]);
    }
    ck_assert_int_eq(ibv_device_for_rank("a,bb,ccc", 5, name, sizeof name), 3);
    ck_assert_str_eq(name, "ccc");
    ck_assert_int_eq(ibv_device_for_rank("a,,c", 1, name, sizeof name), -1);
    ck_assert_int_eq(ibv_device_for_rank("a,", 1, name, sizeof name), -1);
    ck_assert_int_eq(ibv_device_for_rank("abcdef,x", 0, name, 6), -1);

    int ibv = -1;
    for (int t = 0; t < FH_NCONDUITS; t++)
        if (fh_conduit_settings_all[t] == &fh_ibv_settings)
            ibv = t;
    ck_assert_int_ge(ibv, 0);
    expect_range_error_in(ibv, "FH_IBV_DEVICE", "rxe0,");
    expect_range_error_in(ibv, "FH_IBV_DEVICE", ",rxe0");
    expect_range_error_in(ibv, "FH_IBV_DEVICE", "rxe0,,rxe1");
    char err[256] = "";
    setenv("FH_IBV_DEVICE", "rxe0,rxe1", 1);
    ck_assert_int_eq(load_table(ibv, err, sizeof err), FH_OK);
    unsetenv("FH_IBV_DEVICE");
}
END_TEST

START_TEST(max_threads_zero_means_auto)
{
    /* 0 is not an error: it means one path per online core. */
    setenv("FH_MAX_THREADS", "0", 1);
    fh_config_t cfg;
    char err[256] = "";
    ck_assert_int_eq(fh_config_load(&cfg, err, sizeof err), FH_OK);
    ck_assert_int_eq(cfg.max_threads, 0);
    unsetenv("FH_MAX_THREADS");
}
END_TEST

START_TEST(auto_threads_from_cores_and_local_ranks)
{
    /* FH_MAX_THREADS=0: the host's cores shared among its ranks, at least
     * one thread path, at most FH_AUTO_THREADS_MAX. */
    ck_assert_int_eq(fh_auto_threads(2, 1), 2);
    ck_assert_int_eq(fh_auto_threads(2, 16), 1);     /* 16 ranks, 2 cores */
    ck_assert_int_eq(fh_auto_threads(64, 64), 1);
    ck_assert_int_eq(fh_auto_threads(64, 4), 16);
    ck_assert_int_eq(fh_auto_threads(64, 8), 8);
    ck_assert_int_eq(fh_auto_threads(128, 1), FH_AUTO_THREADS_MAX);
    ck_assert_int_eq(fh_auto_threads(48, 5), 9);     /* rounded down */
    ck_assert_int_eq(fh_auto_threads(0, 0), 1);      /* unknown: one */
    ck_assert_int_eq(fh_auto_threads(-1, 3), 1);
}
END_TEST

START_TEST(am_credits_zero_rejected)
{
    expect_range_error("FH_AM_CREDITS", "0");
}
END_TEST

START_TEST(other_ranges_rejected)
{
    expect_range_error("FH_MAX_THREADS", "256");
    expect_range_error("FH_AM_MAX_MEDIUM", "16");
    expect_range_error("FH_AM_MAX_MEDIUM", "2M");
    expect_range_error("FH_XFER_CHUNK", "1k");
    expect_range_error("FH_MAX_SEGMENTS", "0");
    expect_range_error("FH_BOOT_TIMEOUT", "0");
    expect_range_error("FH_CAF_HEAP", "131073g");
    expect_range_error("FH_CAF_LOCAL_HEAP", "200000g");
}
END_TEST

/* FH_RANK_NAMES (firehose/util/log.h): a label and the number of rank 0;
 * a bad value is refused naming it, and keeps the names. */
START_TEST(rank_names)
{
    char err[256] = "", buf[FH_RANK_NAME_MAX];
    ck_assert_int_eq(fh_log_set_names_spec("image 1", err, sizeof err), 0);
    ck_assert_str_eq(fh_rank_name(1, buf, sizeof buf), "image 2");
    ck_assert_int_eq(fh_log_names_custom(), 1);
    ck_assert_int_eq(fh_log_set_names_spec("thread", err, sizeof err), 0);
    ck_assert_str_eq(fh_rank_name(3, buf, sizeof buf), "thread 3");
    static const char *bad[] = {"1image 1", "image x", "image -1", "image 1 2",
                                "image 1000001", "image ", "a.b 1",
                                "abcdefghijklmnop 1", " image 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_msg(fh_log_set_names_spec(bad[i], err, sizeof err) == -1,
                      "FH_RANK_NAMES='%s' should be refused", bad[i]);
        ck_assert_msg(strstr(err, "FH_RANK_NAMES='") && strstr(err, "such as 'image 1'"),
                      "FH_RANK_NAMES='%s': message should name it and the form, got \"%s\"",
                      bad[i], err);
        ck_assert_str_eq(fh_rank_name(3, buf, sizeof buf), "thread 3");
    }
    ck_assert_int_eq(fh_log_set_names_spec("rank 0", err, sizeof err), 0);
    ck_assert_int_eq(fh_log_names_custom(), 0);
    ck_assert_str_eq(fh_rank_name(5, buf, sizeof buf), "rank 5");
    ck_assert_int_eq(fh_log_set_names_spec("", err, sizeof err), 0);
}
END_TEST

START_TEST(range_limits_accepted)
{
    setenv("FH_MAX_THREADS", "255", 1);
    setenv("FH_AM_CREDITS", "1024", 1);
    setenv("FH_AM_MAX_MEDIUM", "64", 1);
    setenv("FH_XFER_CHUNK", "4k", 1);
    fh_config_t cfg;
    char err[256] = "";
    int rc = fh_config_load(&cfg, err, sizeof err);
    ck_assert_msg(rc == 0, "limits of the ranges should be accepted, got %d: %s", rc, err);
}
END_TEST

/* FH_WAIT_SPIN: -1 (never yield), 0 (yield at once) .. FH_WAIT_SPIN_MAX; no
 * other spelling of "never" is accepted. */
START_TEST(wait_spin_encoding)
{
    static const struct { const char *v; long want; } good[] = {
        {"-1", -1}, {"0", 0}, {"32", 32}, {"1000000000", FH_WAIT_SPIN_MAX}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        setenv("FH_WAIT_SPIN", good[i].v, 1);
        fh_config_t cfg;
        char err[256] = "";
        int rc = fh_config_load(&cfg, err, sizeof err);
        ck_assert_msg(rc == 0, "FH_WAIT_SPIN=%s should be accepted, got %d: %s",
                      good[i].v, rc, err);
        ck_assert_int_eq(cfg.wait_spin, good[i].want);
    }
    unsetenv("FH_WAIT_SPIN");
    static const char *bad[] = {"-2", "1000000001", "inf", "never", "", "32x", "1.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_range_error("FH_WAIT_SPIN", bad[i]);
}
END_TEST

/* ------------------------------------------------------------- printing */

START_TEST(print_lists_every_variable)
{
    fh_config_t cfg;
    char err[256] = "";
    ck_assert_int_eq(fh_config_load(&cfg, err, sizeof err), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    fh_config_print(&cfg, f, "cfg: ");
    fclose(f);
    for (size_t i = 0; i < fh_config_table_len; i++) {
        char want[128];
        snprintf(want, sizeof want, "cfg: %s=", fh_config_table[i].name);
        ck_assert_msg(strstr(buf, want) != NULL, "output should contain \"%s\":\n%s",
                      want, buf);
    }
    ck_assert_msg(strstr(buf, "cfg: FH_CONDUIT=auto\n") != NULL,
                  "enum should print by name, got:\n%s", buf);
    free(buf);
}
END_TEST

/* ---------------------------------------------------------------- suite */

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc;

    tc = tcase_create("table");
    tcase_add_checked_fixture(tc, clear_fh_env, NULL);
    tcase_add_test(tc, every_default_parses);
    tcase_add_test(tc, ibv_device_per_rank);
    tcase_add_test(tc, table_entries_are_well_formed);
    tcase_add_test(tc, load_without_environment_gives_defaults);
    tcase_add_test(tc, print_lists_every_variable);
    suite_add_tcase(s, tc);

    tc = tcase_create("values");
    tcase_add_checked_fixture(tc, clear_fh_env, NULL);
    tcase_add_test(tc, sizes_with_suffixes);
    tcase_add_test(tc, sizes_rejected);
    tcase_add_test(tc, size_variable_error_names_variable);
    tcase_add_test(tc, enums_are_case_insensitive);
    tcase_add_test(tc, enum_rejects_unknown_and_prefixes);
    tcase_add_test(tc, bool_forms);
    tcase_add_test(tc, integers_rejected);
    suite_add_tcase(s, tc);

    tc = tcase_create("environment");
    tcase_add_checked_fixture(tc, clear_fh_env, NULL);
    tcase_add_test(tc, environment_overrides_defaults);
    tcase_add_test(tc, environment_bad_value_names_variable);
    tcase_add_test(tc, every_variable_rejects_a_bad_value);
    tcase_add_test(tc, max_threads_zero_means_auto);
    tcase_add_test(tc, auto_threads_from_cores_and_local_ranks);
    tcase_add_test(tc, am_credits_zero_rejected);
    tcase_add_test(tc, other_ranges_rejected);
    tcase_add_test(tc, conduit_ranges_rejected);
    tcase_add_test(tc, range_limits_accepted);
    tcase_add_test(tc, wait_spin_encoding);
    tcase_add_test(tc, rank_names);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    return fh_check_run(config_suite());
}
