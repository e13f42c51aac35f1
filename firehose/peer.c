/*
 * peer.c -- the runtime's own dead-peer check, for when no launcher tells.
 *
 * include/firehose.h promises that a peer that dies makes every survivor
 * exit with a message naming it.  Under fhrun the launcher's watchdog does
 * it (boot_fhrun.c); under a PMIx launcher its events do, when it sends
 * them.  Without them (mpirun --enable-recovery, Open MPI 4.1's ORTE, which
 * sends no event for a dead peer) the network alone does not tell: a send to
 * a dead tcp peer is retried forever (the provider reconnects and says
 * FI_EAGAIN), a barrier or a credit waits for a message that never comes,
 * and shm cannot name the peer of a failed operation.
 *
 * So every rank publishes at fh_init who it is on its host: the kernel's
 * boot id, its pid namespace, its pid and the start time of its process.
 * While polling (fh_path_poll_locked), at most once a second, a rank looks
 * at the processes of the peers on its own host (same boot id and pid
 * namespace): one whose process is gone, a zombie, or another process with
 * the same pid ends this process with FH_EXIT_PEER_DEAD and a message naming
 * the rank (as the client names them: fh_set_rank_names, e.g. "image 2").
 * A peer on another host is not checked here (its death shows as a
 * transport error, or the launcher reports it); FH_PEER_WATCH=0 turns the
 * check off, so one host can test that path (tests/integ/pmix.sh).
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* What a rank publishes about itself (fixed size: one allgather). */
typedef struct peer_id {
    char host[64];            /* boot id + pid namespace; "" = unknown */
    int64_t pid;
    int64_t ppid;             /* its parent: the launcher (route.c, CMA) */
    uint64_t start;           /* /proc/<pid>/stat field 22 (clock ticks) */
    uint64_t cpus;            /* hash of its CPU affinity mask at fh_init */
} peer_id_t;

struct fh_peers {
    peer_id_t *ids;           /* [nranks] */
    _Atomic int64_t next_ns;  /* CLOCK_MONOTONIC time of the next check */
};

#define PEER_CHECK_NS 1000000000LL   /* one check per second at most */

/* The state letter and start time of process pid; 0, -1 if it is gone,
 * or 1 if we cannot tell now (we are out of descriptors or memory: a
 * stranger holding connections to our listener can exhaust our
 * descriptors, which must not pass for the death of a peer). */
static int proc_stat(int64_t pid, char *state, uint64_t *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return errno == ENOENT || errno == ESRCH ? -1 : 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) S ..." -- comm may hold spaces and parentheses. */
    char *p = strrchr(buf, ')');
    if (p == NULL || p[1] != ' ')
        return -1;
    *state = p[2];
    p += 3;
    for (int field = 4; field < 22 && p != NULL; field++) {
        p = strchr(p, ' ');
        if (p != NULL)
            p++;
    }
    if (p == NULL)
        return -1;
    *start = strtoull(p, NULL, 10);
    return 0;
}

/* A hash (FNV-1a) of the calling thread's CPU affinity mask; 0 if unknown. */
static uint64_t cpus_hash(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    const unsigned char *b = (const unsigned char *)&set;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof set; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static void my_id(peer_id_t *id)
{
    memset(id, 0, sizeof *id);
    id->pid = (int64_t)getpid();
    id->ppid = (int64_t)getppid();
    id->cpus = cpus_hash();
    char boot[40] = "", ns[32] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(boot, sizeof boot, f) == NULL)
            boot[0] = '\0';
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = '\0';
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0)
        snprintf(ns, sizeof ns, "%llx", (unsigned long long)st.st_ino);
    char state;
    if (boot[0] && ns[0] && proc_stat(id->pid, &state, &id->start) == 0)
        snprintf(id->host, sizeof id->host, "%.36s/%.20s", boot, ns);
}

int fh_peer_init(fh_rt_t *rt)
{
    struct fh_peers *pc = calloc(1, sizeof *pc);
    if (pc == NULL)
        return FH_ERR_NO_MEMORY;
    pc->ids = calloc((size_t)rt->nranks, sizeof *pc->ids);
    if (pc->ids == NULL) {
        free(pc);
        return FH_ERR_NO_MEMORY;
    }
    peer_id_t me;
    my_id(&me);
    if (rt->boot->ops->allgather(rt->boot, &me, pc->ids, sizeof me) != FH_OK) {
        free(pc->ids);
        free(pc);
        return fh_set_error(FH_ERR_BOOTSTRAP, "fh_init: the peer identity exchange failed");
    }
    for (int r = 0; r < rt->nranks; r++)
        pc->ids[r].host[sizeof pc->ids[r].host - 1] = '\0';   /* from the network */
    atomic_init(&pc->next_ns, 0);
    rt->peers = pc;
    return FH_OK;
}

/* Node groups: the ranks with our host identity, in rank order, cut into
 * runs of FH_SHM_MAX_GROUP; every rank computes the same partition from
 * the same exchanged identities. */
int fh_peer_groups(fh_rt_t *rt)
{
    rt->node_peer = calloc((size_t)rt->nranks, 1);
    if (rt->node_peer == NULL)
        return FH_ERR_NO_MEMORY;
    rt->node_peer[rt->rank] = 1;
    rt->node_size = 1;
    rt->host_ranks = 1;
    const peer_id_t *ids = rt->peers->ids, *me = &ids[rt->rank];
    if (me->host[0] == '\0')
        return FH_OK;
    long mine = -1;       /* our index among the ranks of this host */
    rt->host_ranks = 0;
    for (int r = 0; r < rt->nranks; r++)
        if (strcmp(ids[r].host, me->host) == 0) {
            if (r == rt->rank)
                mine = rt->host_ranks;
            rt->host_ranks++;
        }
    assert(mine >= 0);
    if (rt->cfg.shm == FH_SHM_OFF)
        return FH_OK;
    long cap = rt->cfg.shm_max_group > 0 ? rt->cfg.shm_max_group : (long)rt->nranks;
    long idx = 0;
    for (int r = 0; r < rt->nranks; r++)
        if (strcmp(ids[r].host, me->host) == 0) {
            if (idx / cap == mine / cap && r != rt->rank) {
                rt->node_peer[r] = 1;
                rt->node_size++;
            }
            idx++;
        }
    fh_log_verbose(1, "node group: %d rank%s of %ld on this host share segments "
                   "(FH_SHM_MAX_GROUP=%ld)", rt->node_size, rt->node_size == 1 ? "" : "s",
                   idx, rt->cfg.shm_max_group);
    return FH_OK;
}

int fh_peer_host_index(const fh_rt_t *rt, bool *same_cpus)
{
    const peer_id_t *ids = rt->peers->ids, *me = &ids[rt->rank];
    int index = 0;
    *same_cpus = true;
    if (me->host[0] == '\0')
        return 0;
    for (int r = 0; r < rt->nranks; r++)
        if (strcmp(ids[r].host, me->host) == 0) {
            index += r < rt->rank;
            *same_cpus &= ids[r].cpus == me->cpus;
        }
    return index;
}

int64_t fh_peer_pid(const fh_rt_t *rt, int rank, bool parent)
{
    const peer_id_t *id = &rt->peers->ids[rank];
    return parent ? id->ppid : id->pid;
}

void fh_peer_fini(fh_rt_t *rt)
{
    free(rt->node_peer);
    rt->node_peer = NULL;
    if (rt->peers == NULL)
        return;
    free(rt->peers->ids);
    free(rt->peers);
    rt->peers = NULL;
}

void fh_peer_check(fh_rt_t *rt)
{
    struct fh_peers *pc = rt->peers;
    if (pc == NULL || !rt->cfg.peer_watch ||
        atomic_load_explicit(&rt->finalizing, memory_order_relaxed))
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    int64_t next = atomic_load_explicit(&pc->next_ns, memory_order_relaxed);
    if (now < next ||
        !atomic_compare_exchange_strong(&pc->next_ns, &next, now + PEER_CHECK_NS))
        return;      /* not yet, or another thread checks this round */
    const peer_id_t *me = &pc->ids[rt->rank];
    if (me->host[0] == '\0')
        return;
    for (int r = 0; r < rt->nranks; r++) {
        const peer_id_t *id = &pc->ids[r];
        if (r == rt->rank || strcmp(id->host, me->host) != 0 || id->pid <= 0)
            continue;
        char state = '?';
        uint64_t start = 0;
        const char *why = NULL;
        int st = proc_stat(id->pid, &state, &start);
        if (st > 0)
            continue;             /* cannot tell: the next check will */
        if (st < 0)
            why = "its process is gone";
        else if (start != id->start)
            why = "its pid now belongs to another process";
        else if (state == 'Z' || state == 'X')
            why = "its process has exited";
        if (why != NULL) {
            fh_log_error("%s (pid %lld) died: %s; aborting", FH_RANK_NAME(r),
                         (long long)id->pid, why);
            _exit(FH_EXIT_PEER_DEAD);
        }
    }
}

/* fh_am_lost (firehose.h): the marks am.c's up_on_lost leaves.  Atomic
 * loads only: thread- and handler-safe, never waits. */
int fh_am_lost(int rank, uint64_t *mark)
{
    fh_rt_t *rt = fh_rt;
    if (rt == NULL || fh_rank() < 0)
        return fh_set_error(FH_ERR_NOT_INIT, "fh_am_lost: firehose is not initialized");
    if (mark == NULL || rank < -1 || rank >= rt->nranks)
        return fh_set_error(FH_ERR_INVALID, "fh_am_lost: rank %d out of [-1, %d) or NULL "
                            "mark", rank, rt->nranks);
    if (rank < 0) {
        *mark = atomic_load(&rt->am_lost_seq);
    } else {
        uint64_t req = atomic_load(&rt->am_lost_req[rank]);
        uint64_t in = atomic_load(&rt->am_lost_in[rank]);
        *mark = req > in ? req : in;
    }
    return FH_OK;
}
