/*
 * fhinfo_node.c -- `fhinfo --node`: what the node-local path (FH_SHM) can
 * use on this machine, found by trying it, as fh_init would:
 *   shared memory   a memfd piece (firehose/node/), with hugepages or not;
 *   cross-memory    for FH_SEGMENT=everything (FH_SHM_CMA): two sibling
 *   attach          processes, the target declaring their parent (this
 *                   process, standing in for the launcher) when Yama's
 *                   scope is 1, the other reading a word of it with
 *                   process_vm_readv -- the same steps as route.c.
 */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "firehose.h"
#include "firehose/node/node.h"
#include "firehose/util/log.h"

static const uint64_t probe_word = 0x66682d696e666f31ULL;   /* "fh-info1" */

/* Forks the target and the reader; the reader's exit status: 0 read the
 * word, 1 refused, 2 the word differed, 3 could not start. */
static int cma_probe(int yama)
{
    int go[2], ready[2];
    if (pipe(go) != 0 || pipe(ready) != 0)
        return 3;
    pid_t parent = getpid();
    pid_t target = fork();
    if (target < 0)
        return 3;
    if (target == 0) {           /* declares, says so, waits to be read */
        char c = 0;
        if (yama == 1)
            fh_node_cma_allow((int64_t)parent);
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) < 0)
            _exit(3);
        _exit(0);
    }
    char c;
    int st = 3;
    if (read(ready[0], &c, 1) == 1) {
        pid_t reader = fork();
        if (reader == 0) {
            uint64_t v = 0;
            int rc = fh_node_cma_copy((int64_t)target, false, &v,
                                      (uint64_t)(uintptr_t)&probe_word, sizeof v);
            _exit(rc != FH_OK ? 1 : v != probe_word ? 2 : 0);
        }
        int ws;
        if (reader > 0 && waitpid(reader, &ws, 0) == reader && WIFEXITED(ws))
            st = WEXITSTATUS(ws);
    }
    if (write(go[1], &c, 1) != 1)
        kill(target, SIGKILL);
    waitpid(target, NULL, 0);
    close(go[0]), close(go[1]), close(ready[0]), close(ready[1]);
    return st;
}

int fhinfo_print_node(void)
{
    printf("Node-local path (FH_SHM=auto: ranks of one host share their segments)\n");
    fh_node_piece_t p;
    size_t two_mib = (size_t)2 << 20;
    if (fh_node_memfd.create(two_mib, (size_t)sysconf(_SC_PAGESIZE), &p) == FH_OK) {
        printf("    shared memory: usable (%s, a 2 MiB piece: %s)\n", fh_node_memfd.name,
               p.huge ? "hugepages" : "normal pages; no hugepages reserved");
        fh_node_memfd.destroy(&p);
    } else {
        printf("    shared memory: NOT usable (%s): every rank goes through the "
               "network\n", fh_last_error());
    }
    int yama = fh_node_cma_yama();
    char scope[64];
    if (yama < 0)
        snprintf(scope, sizeof scope, "no Yama");
    else
        snprintf(scope, sizeof scope, "Yama ptrace_scope %d", yama);
    int st = yama >= 2 ? 1 : cma_probe(yama);
    printf("    cross-memory attach (memory outside segments, FH_SEGMENT=everything, "
           "FH_SHM_CMA=auto):\n        %s (%s%s)\n",
           st == 0 ? "usable" : "NOT usable: such memory goes through the network",
           scope,
           yama == 1 && st == 0 ? ": each rank allows its launcher's descendants"
           : st == 1 ? ": the kernel refused" : st == 2 ? ": read the wrong bytes"
           : st == 3 ? ": the probe could not run" : "");
    return 0;
}
