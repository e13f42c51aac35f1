/*
 * args.c -- fhrun's command line (and FH_BOOT_TIMEOUT, which fhrun reads
 * itself: it bounds the handshakes it serves) into fr.opts.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "firehose.h"
#include "fhrun.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fhrun -n N [options] program [args...]\n"
            "Runs N ranks of a firehose program on this host.\n\n"
            "  -n, --np N            number of ranks (1..%d)\n"
            "      --tag-output      prefix each output line with \"[rank] \"\n"
            "      --prefix-cmd CMD  run each rank as CMD program args; CMD is\n"
            "                        split on spaces, %%r becomes the rank\n"
            "                        (e.g. \"ip netns exec fhns%%r\")\n"
            "      --listen tcp:ADDR:PORT\n"
            "                        serve the bootstrap on TCP (default: a\n"
            "                        private unix socket under $TMPDIR)\n"
            "      --timeout SEC     kill the job after SEC seconds (exit 124)\n"
            "  -v, --verbose         report launcher activity (repeat for more)\n"
            "  -h, --help            this help\n"
            "      --version         print the version\n\n"
            "Environment: FH_BOOT_TIMEOUT (s, default %d) bounds how long ranks\n"
            "may take to connect.  See fhrun(1).\n",
            MAX_RANKS, FH_BOOT_TIMEOUT_DEFAULT);
}

int fhrun_parse_args(int argc, char **argv)
{
    enum { O_TAG = 256, O_PREFIX, O_LISTEN, O_TIMEOUT, O_VERSION };
    static const struct option opts[] = {
        {"np", required_argument, NULL, 'n'},
        {"tag-output", no_argument, NULL, O_TAG},
        {"prefix-cmd", required_argument, NULL, O_PREFIX},
        {"listen", required_argument, NULL, O_LISTEN},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, O_VERSION},
        {NULL, 0, NULL, 0},
    };
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "+n:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'n': {
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno || *end || !*optarg || v < 1 || v > MAX_RANKS)
                die(2, "-n %s: expected a number of ranks in 1..%d", optarg,
                    MAX_RANKS);
            fr.opts.nranks = (int)v;
            break;
        }
        case O_TAG: fr.opts.tag_output = 1; break;
        case O_PREFIX: fr.opts.prefix_cmd = optarg; break;
        case O_LISTEN: fr.opts.listen_spec = optarg; break;
        case O_TIMEOUT:
            errno = 0;
            fr.opts.job_timeout = strtod(optarg, &end);
            if (errno || *end || !*optarg || !(fr.opts.job_timeout > 0) ||
                fr.opts.job_timeout > 1e9)
                die(2, "--timeout %s: expected a positive number of seconds",
                    optarg);
            break;
        case 'v': fr.opts.verbose++; break;
        case 'h': usage(stdout); return 0;
        case O_VERSION:
            printf("fhrun (firehose) %d.%d\n", FH_VERSION_MAJOR,
                   FH_VERSION_MINOR);
            return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    if (fr.opts.nranks == 0)
        die(2, "missing -n N (the number of ranks)");
    char err[256];
    if (fh_boot_timeout_env(&fr.opts.boot_timeout, err, sizeof err) < 0)
        die(2, "%s", err);
    /* The names the ranks give themselves (fh_init reads it too). */
    if (fh_log_set_names_spec(getenv("FH_RANK_NAMES"), err, sizeof err) < 0)
        die(2, "%s", err);
    const char *pc = fr.opts.prefix_cmd;
    if (pc && !pc[strspn(pc, " \t")])
        die(2, "--prefix-cmd: empty command");
    fr.opts.prog_argv = argv + optind;
    fr.opts.prog_argc = argc - optind;
    return -1;
}
