/*
 * caf_sync.c -- SYNC ALL, SYNC IMAGES, SYNC MEMORY.
 *
 * SYNC ALL is a dissemination barrier over active messages (log2(n) rounds;
 * in round k image i notifies image i+2^k and waits for image i-2^k), not
 * fh_barrier, because Fortran 2018 wants SYNC ALL to go on after images
 * stopped (returning STAT_STOPPED_IMAGE) and fh_barrier needs every rank.
 * An image that has stopped (or failed) takes part passively from its
 * termination loop: when a message of a barrier it has not joined arrives,
 * it joins (caf_sync_serve).  Each message carries the OR of what its
 * sender knows of this barrier -- "some image stopped", "some image
 * failed" -- so after the last round every image knows whether any member
 * stopped or failed, whatever order the status messages arrive in.
 *
 * Barrier state is kept per group (the initial team is group 0; teams add
 * theirs) as counters: arrived[round] counts messages of that round over
 * all epochs; epoch e's round k is complete when arrived[k] >= e (a partner
 * can be at most one epoch ahead, hence flags for two epochs).
 *
 * SYNC IMAGES: image i sends one message to each listed image j and waits
 * until it has received as many from j as it sent to j.
 */
#include "caf_internal.h"

#include <stdlib.h>
#include <string.h>

#define BAR_ROUNDS 32
#define BAR_FLAG_STOPPED 1u
#define BAR_FLAG_FAILED 2u
#define BAR_SLOTS 256

typedef struct bar_slot {
    uint64_t id;         /* group id; slot unused when !used */
    bool used;
    uint64_t arrived[BAR_ROUNDS];
    unsigned flags[BAR_ROUNDS][2];
    uint64_t epoch;      /* barriers this image entered in the group */
} bar_slot_t;

static bar_slot_t bar_slots[BAR_SLOTS];
static uint64_t *sync_sent, *sync_recv; /* SYNC IMAGES counts per rank */

static bar_slot_t *bar_slot(uint64_t id)
{
    size_t h = (size_t)(id * 0x9e3779b97f4a7c15ull >> 56) % BAR_SLOTS;
    for (size_t i = 0; i < BAR_SLOTS; i++) {
        bar_slot_t *s = &bar_slots[(h + i) % BAR_SLOTS];
        if (s->used && s->id == id)
            return s;
        if (!s->used) {
            s->used = true;
            s->id = id;
            return s;
        }
    }
    return NULL;
}

/* args: group id, round, epoch, flags */
static void bar_handler(fh_token_t tok, void *buf, size_t n,
                        const uint64_t *a, unsigned na)
{
    (void)tok;
    (void)buf;
    (void)n;
    if (na != 4 || a[1] >= BAR_ROUNDS)
        return;
    bar_slot_t *s = bar_slot(a[0]);
    if (s == NULL)
        return;
    s->arrived[a[1]]++;
    s->flags[a[1]][a[2] & 1] |= (unsigned)a[3] & 3u;
}

static void sync_images_handler(fh_token_t tok, void *buf, size_t n,
                                const uint64_t *a, unsigned na)
{
    (void)buf;
    (void)n;
    (void)a;
    (void)na;
    int src;
    if (fh_token_source(tok, &src) == FH_OK)
        sync_recv[src]++;
}

void caf_sync_init(void)
{
    sync_sent = calloc((size_t)caf.nranks, sizeof *sync_sent);
    sync_recv = calloc((size_t)caf.nranks, sizeof *sync_recv);
    if (sync_sent == NULL || sync_recv == NULL)
        caf_fatal("start-up", "out of memory");
    int rc = fh_am_register(CAF_H_SYNC_ALL, bar_handler, "caf sync all");
    if (rc == FH_OK)
        rc = fh_am_register(CAF_H_SYNC_IMAGES, sync_images_handler,
                            "caf sync images");
    if (rc != FH_OK)
        caf_fatal("start-up", "fh_am_register: %s", fh_strerror(rc));
}

static unsigned own_flags(void)
{
    switch (caf.status[caf.rank]) {
    case CAF_IMG_STOPPED: return BAR_FLAG_STOPPED;
    case CAF_IMG_FAILED: return BAR_FLAG_FAILED;
    default: return 0;
    }
}

/* One barrier of group id over ranks[0..n) (me = our index there).
 * give_up: when non-NULL, called while waiting; true abandons the barrier
 * (returns -1).  Otherwise returns the OR of the flags. */
static int group_barrier(uint64_t id, const int *ranks, int n, int me,
                         bool (*give_up)(void))
{
    bar_slot_t *s = bar_slot(id);
    if (s == NULL)
        caf_fatal("SYNC", "too many teams with barriers");
    uint64_t e = ++s->epoch;
    unsigned flags = own_flags();
    int k = 0;
    for (int dist = 1; dist < n; dist <<= 1, k++) {
        uint64_t args[4] = {id, (uint64_t)k, e, flags};
        int to = ranks[(me + dist) % n];
        int rc = fh_am_request_short(to, CAF_H_SYNC_ALL, args, 4);
        if (rc != FH_OK)
            caf_fatal("SYNC ALL", "notifying image %d: %s", to + 1,
                      fh_strerror(rc));
        unsigned spins = 0;
        while (s->arrived[k] < e) {
            caf_idle(&spins);
            if (give_up && give_up())
                return -1;
        }
        flags |= s->flags[k][e & 1];
        s->flags[k][e & 1] = 0;
    }
    return (int)flags;
}

static bool all_ended(void)
{
    return caf.nstopped + caf.nfailed >= caf.nranks;
}

void caf_sync_serve(void)
{
    caf_poll();
    bar_slot_t *s = bar_slot(0);
    for (int k = 0; k < BAR_ROUNDS; k++) {
        if (s->arrived[k] > s->epoch) {
            /* A barrier of the initial team we have not joined: join. */
            group_barrier(0, caf_initial_ranks(), caf.nranks, caf.rank, all_ended);
            return;
        }
    }
}

int caf_barrier(void)
{
    int n;
    const int *ranks = caf_team_ranks(&n);
    return caf_barrier_group(caf_team_id(), ranks, n,
                             caf_team_this_image() - 1);
}

int caf_barrier_group(uint64_t id, const int *ranks, int n, int me)
{
    int flags = group_barrier(id, ranks, n, me, NULL);
    if (flags & BAR_FLAG_FAILED)
        return CAF_STAT_FAILED_IMAGE;
    if (flags & BAR_FLAG_STOPPED)
        return CAF_STAT_STOPPED_IMAGE;
    return 0;
}

/* gfortran 12 passes ERRMSG= of SYNC ALL, SYNC IMAGES and SYNC MEMORY as
 * the address of a pointer to the variable (checked in its assembly; the
 * other statements pass the variable's address). */
static char *sync_errmsg(char *errmsg)
{
    char *p = NULL;
    if (errmsg != NULL)
        memcpy(&p, errmsg, sizeof p);
    return p;
}

void _gfortran_caf_sync_all(int *stat, char *errmsg, size_t errmsg_len)
{
    errmsg = sync_errmsg(errmsg);
    int rc = fh_quiet();
    if (rc != FH_OK)
        caf_fatal("SYNC ALL", "completing transfers: %s", fh_strerror(rc));
    int st = caf_barrier();
    if (st != 0) {
        caf_error(stat, errmsg, errmsg_len, st, "SYNC ALL", "%s",
                  st == CAF_STAT_FAILED_IMAGE ? "an image has failed"
                                              : "an image has stopped");
        return;
    }
    caf_ok(stat);
}

void _gfortran_caf_sync_memory(int *stat, char *errmsg, size_t errmsg_len)
{
    errmsg = sync_errmsg(errmsg);
    int rc = fh_quiet();
    /* A full fence for this image's own loads and stores (a sequentially
     * consistent read-modify-write: ThreadSanitizer refuses bare fences). */
    static int fence_word;
    __atomic_fetch_add(&fence_word, 0, __ATOMIC_SEQ_CST);
    if (rc != FH_OK) {
        caf_error(stat, errmsg, errmsg_len, 1, "SYNC MEMORY", "%s",
                  fh_strerror(rc));
        return;
    }
    caf_ok(stat);
}

void _gfortran_caf_sync_images(int count, int images[], int *stat,
                               char *errmsg, size_t errmsg_len)
{
    const char *stmt = "SYNC IMAGES";
    errmsg = sync_errmsg(errmsg);
    int n;
    const int *team = caf_team_ranks(&n);
    int all = count < 0;
    if (all)
        count = n;
    if (count == 0) {
        caf_ok(stat);
        return;
    }
    int *ranks = malloc((size_t)count * sizeof *ranks);
    unsigned char *seen = calloc((size_t)caf.nranks, 1);
    if (ranks == NULL || seen == NULL)
        caf_fatal(stmt, "out of memory");
    int m = 0;
    for (int i = 0; i < count; i++) {
        int rank = all ? team[i] : caf_image_rank(images[i]);
        if (rank < 0) {
            caf_error(stat, errmsg, errmsg_len, 1, stmt,
                      "image index %d is out of range [1, %d]", images[i], n);
            goto out;
        }
        if (seen[rank]) {
            caf_error(stat, errmsg, errmsg_len, 3 /* STAT_DUP_SYNC_IMAGES */,
                      stmt, "image %d is listed twice", images[i]);
            goto out;
        }
        seen[rank] = 1;
        if (rank != caf.rank)
            ranks[m++] = rank;
    }
    int rc = fh_quiet();
    if (rc != FH_OK)
        caf_fatal(stmt, "completing transfers: %s", fh_strerror(rc));
    for (int i = 0; i < m; i++) {
        if (caf.status[ranks[i]] != CAF_IMG_RUNNING)
            continue;
        sync_sent[ranks[i]]++;
        rc = fh_am_request_short(ranks[i], CAF_H_SYNC_IMAGES, NULL, 0);
        if (rc != FH_OK)
            caf_fatal(stmt, "notifying image %d: %s", ranks[i] + 1,
                      fh_strerror(rc));
    }
    int bad = 0, bad_rank = -1;
    for (int i = 0; i < m; i++) {
        int r = ranks[i];
        unsigned spins = 0;
        while (sync_recv[r] < sync_sent[r] && caf.status[r] == CAF_IMG_RUNNING)
            caf_idle(&spins);
        if (sync_recv[r] < sync_sent[r] || caf.status[r] != CAF_IMG_RUNNING) {
            /* It ended before answering: its count will never catch up. */
            int st = caf.status[r] == CAF_IMG_FAILED ? CAF_STAT_FAILED_IMAGE
                                                      : CAF_STAT_STOPPED_IMAGE;
            if (bad != CAF_STAT_FAILED_IMAGE) {
                bad = st;
                bad_rank = r;
            }
            sync_sent[r] = sync_recv[r];
        }
    }
    if (bad) {
        caf_error(stat, errmsg, errmsg_len, bad, stmt, "image %d has %s",
                  bad_rank + 1, bad == CAF_STAT_FAILED_IMAGE ? "failed" : "stopped");
        goto out;
    }
    caf_ok(stat);
out:
    free(ranks);
    free(seen);
}
