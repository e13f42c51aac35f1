/*
 * caf_sync.c -- SYNC ALL, SYNC IMAGES, SYNC MEMORY.
 *
 * SYNC ALL of the initial team (and every other barrier of it: ALLOCATE,
 * DEALLOCATE) is the runtime's barrier, fh_barrier_or: on one node the
 * images meet in shared memory, across nodes the groups' leaders run a
 * dissemination barrier of AMs.  Fortran 2018 wants SYNC ALL to go on
 * after images stopped (returning STAT_STOPPED_IMAGE), and fh_barrier_or
 * needs every rank: so an image that has stopped (or failed) keeps taking
 * part from its termination loop -- it enters the initial team's barriers
 * one after the other (caf_sync_serve), each time bringing "I stopped" (or
 * "I failed"), while a running image brings "I run".  Every image leaves a
 * barrier with the OR of all of them: whether any member stopped or failed
 * (the STAT= of the statement, whatever order the status messages arrive
 * in), and whether any still runs -- the barrier in which none does is the
 * last one, left by every image at once (so every rank has made the same
 * fh_barrier_or calls when it reaches fh_finalize).  A stopped image takes
 * the barrier in two phases (fh_barrier_or_notify, then
 * fh_barrier_or_try until done): between tries it serves AMs and RMA, and
 * the barriers of its other teams (serve_groups), whose rounds it must
 * send -- which no AM handler run inside a blocking fh_barrier_or may.
 * A running image's word also carries which statement it is in (SYNC ALL
 * and the other barriers, ALLOCATE or DEALLOCATE of a coarray) and its
 * heap stamp (caf_heap_stamp: how many ALLOCATE / DEALLOCATE statements
 * of coarrays it executed, a hash of the last), each field x as x and ~x
 * side by side: the OR of equal values leaves no bit set in both halves,
 * different ones do.  So every image learns at the same barrier that the
 * images went different ways (one skipped a DEALLOCATE and waits in SYNC
 * ALL, or allocated another size): each says so with what its ledger and
 * the others' show, they meet once more (so that no image is ended by
 * another's abort before it spoke), and the job ends.  A stopped image
 * brings no statement and no stamp.
 *
 * The barriers of other teams are dissemination barriers over active
 * messages (log2(n) rounds; in round k image i notifies image i+2^k and
 * waits for image i-2^k).  Each message carries the OR of what its sender
 * knows of this barrier -- "some image stopped", "some image failed".
 * A stopped or failed member takes part from its termination loop
 * (serve_groups): it enters a group's next barrier when a member's
 * arrival shows that member is in it, so the running members' SYNC ALL of
 * a child team ends with STAT_STOPPED_IMAGE instead of waiting forever.
 *
 * After a stop (Fortran 2018 11.6.11).  SYNC ALL and SYNC TEAM
 * (CAF_SYNC_IMAGES) involve every image of the team: once one stopped they
 * have the effect of SYNC MEMORY and return STAT_STOPPED_IMAGE without
 * waiting (an image that waits in SYNC IMAGES for this one would never
 * come).  CHANGE TEAM, END TEAM, ALLOCATE and DEALLOCATE (CAF_SYNC_ACTIVE)
 * synchronize the active images whatever stopped.  The images learn of a
 * stop at different times but must still take the same barriers, so what
 * they skip follows from what they agree on:
 *   - a SYNC ALL takes a barrier unless a barrier of the team it completed
 *     showed a stopped member (stopped_seen) or it left one open;
 *   - it leaves its barrier open, returning at once, when a member stopped
 *     outside it (stopped_outside: the member's status message says it had
 *     not entered that barrier as a running image), known at entry or
 *     learnt during the wait: that barrier will show the stop on every
 *     image, and the termination loop completes it;
 *   - an active-images statement waits: it completes the barrier left open
 *     when another image's statement in it was also one (its flag or
 *     statement bits say), else takes a new barrier; a SYNC ALL whose
 *     completed barrier met such a statement (of an image that knew of the
 *     stop) counts for this image's next one (credit).
 * So SYNC ALL on some images never pairs with END TEAM on the others, and
 * the agreement check of ALLOCATE / DEALLOCATE is left out once a barrier
 * shows a stop (a statement may pair with a skipped SYNC ALL).
 *
 * Barrier state is kept per group (the initial team is group 0; teams add
 * theirs) as counters: arrived[round] counts messages of that round over
 * all epochs; epoch e's round k is complete when arrived[k] >= e (a partner
 * can be at most one epoch ahead, hence flags for two epochs).
 *
 * Trust: an arrival counts only when caf_wire_bar_turn accepts it -- it
 * comes from the member whose turn that round is (the sender the runtime
 * verified, never a rank the message names) and carries the next epoch of
 * its round; anything else is dropped (caf_drop).  Arrivals of a group this
 * image has not entered yet (a team whose other members finished FORM TEAM
 * first) wait in the slot's `early` list and are checked when it enters;
 * messages may create at most BAR_UNKNOWN_MAX such slots.
 *
 * SYNC IMAGES: image i notifies each listed image j once and waits until
 * it has received as many notifications from j as it sent to j.  Each
 * image counts what it received in the symmetric heap, one word per image
 * (sync_in[j]).  A partner whose memory this image maps (its node group,
 * fh_addr_local) is notified by an atomic add on its word for us, with
 * release order after fh_quiet; any other by a short AM, whose handler
 * adds to the same word -- once the sender is checked to be at most one
 * SYNC IMAGES ahead.  (A node peer's add is not checked: it could write
 * any of our memory anyway.)  The waiter loads the word with acquire
 * order, so what the partner did before its SYNC IMAGES is visible after.
 * A partner that has stopped is matched by the notifications it sent before
 * it stopped: its STOP is reported (STAT_STOPPED_IMAGE) only when its
 * count stays behind ours, i.e. it stopped before executing the matching
 * SYNC IMAGES.  Its notifications precede its status message on the way
 * to us (AMs of a pair arrive in order; a store precedes the status AM
 * sent after it), so when we see it stopped we have them all.
 */
#include "caf_internal.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAR_ROUNDS CAF_BAR_ROUNDS
#define BAR_FLAG_STOPPED CAF_BAR_FLAG_STOPPED
#define BAR_FLAG_FAILED CAF_BAR_FLAG_FAILED
#define BAR_FLAG_RUNNING CAF_BAR_FLAG_RUNNING
#define BAR_FLAG_ACTIVE CAF_BAR_FLAG_ACTIVE
/* The rest of a running image's word: its statement (CAF_BAR_SYNC,
 * CAF_BAR_ALLOCATE, CAF_BAR_DEALLOCATE, one bit each), then its heap
 * stamp's count (16 bits) and hash (12 bits), each beside its complement. */
#define BAR_STMT_SHIFT 3
#define BAR_SEQ_SHIFT 8
#define BAR_SEQ_BITS 16
#define BAR_HASH_SHIFT (BAR_SEQ_SHIFT + 2 * BAR_SEQ_BITS)
#define BAR_HASH_BITS 12
#define BAR_SLOTS 256
/* Slots messages may create for groups this image has not entered yet,
 * and the arrivals each may hold (no member gets past the first barrier
 * without us: at most one arrival per round). */
#define BAR_UNKNOWN_MAX 16
#define BAR_EARLY_MAX BAR_ROUNDS

/* This image's progress through one barrier of a group. */
typedef struct bar_run {
    uint64_t epoch;      /* 0: none runs */
    int round;           /* the round it waits in */
    bool sent;           /* ... whose notification went out */
    unsigned flags;      /* the OR it knows so far */
} bar_run_t;

typedef struct bar_slot {
    uint64_t id;         /* group id; slot unused when !used */
    bool used;
    caf_group_t group;   /* its members (group.ranks NULL until this image
                            enters a barrier of the group) */
    uint64_t arrived[BAR_ROUNDS];
    unsigned flags[BAR_ROUNDS][2];
    uint64_t epoch;      /* barriers this image entered in the group */
    bar_run_t run;       /* the one it is in, if any (a running image's
                            SYNC ALL may be left open: "After a stop") */
    bool stopped_seen;   /* one we completed showed a stopped member */
    bool credit;         /* ... and met an active-images statement of
                            others as our SYNC ALL: our next one is met */
    /* Arrivals that came before we knew the members, checked when we do. */
    caf_bar_msg_t early[BAR_EARLY_MAX];
    unsigned nearly;
} bar_slot_t;

static bar_slot_t bar_slots[BAR_SLOTS];
static unsigned bar_unknown; /* used slots whose group.ranks is NULL */
/* The slots whose members this image knows, for serve_groups. */
static bar_slot_t *bar_known[BAR_SLOTS];
static unsigned bar_nknown;
/* SYNC IMAGES, per rank: notifications sent to it; received from it (our
 * symmetric-heap words); its words for us when we map its memory. */
static uint64_t *sync_sent;
static _Atomic uint64_t *sync_in;
static _Atomic uint64_t **sync_peer;
/* One statement's partners, and which ranks it listed (kept all zero). */
static int *sync_ranks;
static unsigned char *sync_seen;

/* The slot of group id; a free one is taken when create (NULL when none
 * is left, or none may be taken for a group we do not know yet). */
static bar_slot_t *bar_slot(uint64_t id, bool create, bool known)
{
    size_t h = (size_t)(id * 0x9e3779b97f4a7c15ull >> 56) % BAR_SLOTS;
    for (size_t i = 0; i < BAR_SLOTS; i++) {
        bar_slot_t *s = &bar_slots[(h + i) % BAR_SLOTS];
        if (s->used && s->id == id)
            return s;
        if (!s->used) {
            if (!create || (!known && bar_unknown >= BAR_UNKNOWN_MAX))
                return NULL;
            s->used = true;
            s->id = id;
            if (!known)
                bar_unknown++;
            return s;
        }
    }
    return NULL;
}

/* Counts arrival a in s, whose members are known, if it is the one due. */
static void bar_count(bar_slot_t *s, const caf_bar_msg_t *a)
{
    char why[200];
    if (!caf_wire_bar_turn(&s->group, s->arrived[a->round], a, why,
                           sizeof why)) {
        caf_drop("SYNC ALL arrival", a->src, why);
        return;
    }
    s->arrived[a->round]++;
    s->flags[a->round][a->epoch & 1] |= a->flags;
}

/* This image enters a barrier of group id: from now on its arrivals are
 * checked against its members as they come; the early ones now. */
static bar_slot_t *bar_enter(uint64_t id, const int *ranks, int n, int me)
{
    bar_slot_t *s = bar_slot(id, false, true);
    if (s != NULL && s->group.ranks == NULL)
        bar_unknown--; /* a message created it: now we know the group */
    if (s == NULL)
        s = bar_slot(id, true, true);
    if (s == NULL)
        caf_fatal("SYNC", "too many teams with barriers");
    if (s->group.ranks == NULL) {
        s->group = (caf_group_t){ranks, n, me};
        assert(bar_nknown < BAR_SLOTS);
        bar_known[bar_nknown++] = s;
        for (unsigned i = 0; i < s->nearly; i++)
            bar_count(s, &s->early[i]);
        s->nearly = 0;
    }
    /* A group id names one member list (a hash of it, caf_team.c). */
    assert(s->group.n == n && s->group.me == me);
    return s;
}

/* args: group id, round, epoch, flags (caf_wire.h) */
static void bar_handler(fh_token_t tok, void *buf, size_t n,
                        const uint64_t *args, unsigned nargs)
{
    caf_am_in_t m = {.src = -1, .buf = buf, .nbytes = n, .args = args,
                     .nargs = nargs};
    fh_token_source(tok, &m.src);
    const caf_job_t job = caf_job();
    caf_bar_msg_t a;
    char why[200];
    if (!caf_wire_bar(&job, &m, &a, why, sizeof why)) {
        caf_drop("SYNC ALL arrival", m.src, why);
        return;
    }
    if (a.group == 0) {
        /* The initial team meets in fh_barrier_or: no image sends these. */
        snprintf(why, sizeof why, "SYNC ALL arrival of round %u for the initial team, "
                 "whose barriers are the runtime's", (unsigned)a.round);
        caf_drop("SYNC ALL arrival", m.src, why);
        return;
    }
    bar_slot_t *s = bar_slot(a.group, true, false);
    if (s == NULL) {
        snprintf(why, sizeof why, "SYNC ALL arrival for group %#llx: no room "
                 "for another group this image has not entered",
                 (unsigned long long)a.group);
        caf_drop("SYNC ALL arrival", m.src, why);
        return;
    }
    if (s->group.ranks != NULL) {
        bar_count(s, &a);
    } else if (s->nearly < BAR_EARLY_MAX) {
        s->early[s->nearly++] = a;
    } else {
        snprintf(why, sizeof why, "SYNC ALL arrival for group %#llx: over %d "
                 "arrivals before this image entered it",
                 (unsigned long long)a.group, BAR_EARLY_MAX);
        caf_drop("SYNC ALL arrival", m.src, why);
    }
}

static void sync_images_handler(fh_token_t tok, void *buf, size_t n,
                                const uint64_t *args, unsigned nargs)
{
    caf_am_in_t m = {.src = -1, .buf = buf, .nbytes = n, .args = args,
                     .nargs = nargs};
    fh_token_source(tok, &m.src);
    const caf_job_t job = caf_job();
    bool known = m.src >= 0 && m.src < caf.nranks;
    char why[200];
    uint64_t got = known ? atomic_load_explicit(&sync_in[m.src],
                                                memory_order_relaxed) : 0;
    if (!caf_wire_sync_images(&job, &m, got, known ? sync_sent[m.src] : 0,
                              why, sizeof why)) {
        caf_drop("SYNC IMAGES notification", m.src, why);
        return;
    }
    atomic_fetch_add_explicit(&sync_in[m.src], 1, memory_order_release);
}

void caf_sync_init(void)
{
    size_t n = (size_t)caf.nranks;
    sync_sent = calloc(n, sizeof *sync_sent);
    sync_peer = calloc(n, sizeof *sync_peer);
    sync_ranks = calloc(n, sizeof *sync_ranks);
    sync_seen = calloc(n, 1);
    if (sync_sent == NULL || sync_peer == NULL || sync_ranks == NULL ||
        sync_seen == NULL)
        caf_fatal("start-up", "out of memory");
    int rc = fh_am_register(CAF_H_SYNC_ALL, bar_handler, "caf sync all");
    if (rc == FH_OK)
        rc = fh_am_register(CAF_H_SYNC_IMAGES, sync_images_handler,
                            "caf sync images");
    if (rc != FH_OK)
        caf_fatal("start-up", "fh_am_register: %s", fh_strerror(rc));
}

void caf_sync_heap_init(void)
{
    size_t bytes = (size_t)caf.nranks * sizeof *sync_in;
    size_t off = caf_sym_alloc(bytes);
    if (off == (size_t)-1)
        caf_fatal("start-up", "no room for %zu bytes of SYNC IMAGES counts "
                  "in the coarray heap (FH_CAF_HEAP)", bytes);
    /* Zero (fresh heap memory, caf_heap.c), and not touched here: the heap
     * is checked to hold what start-up took only in caf_heap_started.
     * Nobody notifies before the start-up barrier that follows. */
    sync_in = (_Atomic uint64_t *)(void *)(caf.bases[caf.rank] + off);
    for (int r = 0; r < caf.nranks; r++)
        if (r != caf.rank)
            sync_peer[r] = fh_addr_local(r, caf.bases[r] + off);
}

static unsigned own_flags(void)
{
    switch (caf.status[caf.rank]) {
    case CAF_IMG_STOPPED: return BAR_FLAG_STOPPED;
    case CAF_IMG_FAILED: return BAR_FLAG_FAILED;
    default: return 0;
    }
}

/* Takes this image's barrier in s (s->run) as far as it goes without
 * waiting: whether it is complete (then s->run.flags is the OR). */
static bool group_step(bar_slot_t *s)
{
    bar_run_t *r = &s->run;
    const int n = s->group.n, me = s->group.me;
    for (; (1 << r->round) < n; r->round++, r->sent = false) {
        const int k = r->round;
        if (!r->sent) {
            uint64_t args[4] = {s->id, (uint64_t)k, r->epoch, r->flags};
            int to = s->group.ranks[(me + (1 << k)) % n];
            int rc = fh_am_request_short(to, CAF_H_SYNC_ALL, args, 4);
            if (rc != FH_OK)
                caf_fatal("SYNC ALL", "notifying image %d: %s", to + 1,
                          fh_strerror(rc));
            r->sent = true;
        }
        if (s->arrived[k] < r->epoch)
            return false;
        r->flags |= s->flags[k][r->epoch & 1];
        s->flags[k][r->epoch & 1] = 0;
    }
    return true;
}

static void group_begin(bar_slot_t *s, unsigned flags)
{
    assert(s->run.epoch == 0);
    s->run = (bar_run_t){.epoch = ++s->epoch, .flags = own_flags() | flags};
}

/* Whether a member of ranks[0..n) known to have stopped had not entered
 * barrier `epoch` of team `team` as a running image when it stopped (its
 * status message says how many it had entered): then that barrier, and
 * every later one, involves an image that stopped.  One that entered it
 * before it stopped completed its part of it. */
static bool stopped_outside(const int *ranks, int n, uint64_t team,
                            uint64_t epoch)
{
    if (caf.nstopped == 0 || caf.ended == NULL)
        return false;
    for (int i = 0; i < n; i++) {
        if (caf.status[ranks[i]] != CAF_IMG_STOPPED)
            continue;
        const caf_status_msg_t *e = &caf.ended[ranks[i]];
        uint64_t in = team == 0 ? e->bar0 : e->team == team ? e->bar : 0;
        if (in < epoch)
            return true;
    }
    return false;
}

/* The flags of a statement of kind CAF_SYNC_IMAGES that an image which
 * stopped keeps from synchronizing: STOPPED, and FAILED if a member failed. */
static unsigned ended_flags(const int *ranks, int n)
{
    unsigned f = BAR_FLAG_STOPPED;
    for (int i = 0; i < n && caf.nfailed > 0; i++)
        if (caf.status[ranks[i]] == CAF_IMG_FAILED)
            f |= BAR_FLAG_FAILED;
    return f;
}

/* Takes s's barrier, entered, to its end: its OR; or, when may_leave and
 * a member stopped outside it (checked after the first step, then
 * whenever another image is known to have stopped), leaves it open
 * (s->run.epoch stays set). */
static unsigned group_finish(bar_slot_t *s, const int *ranks, int n,
                             bool may_leave)
{
    unsigned spins = 0;
    int seen = -1;
    while (!group_step(s)) {
        if (may_leave && caf.nstopped != seen) {
            seen = caf.nstopped;
            if (stopped_outside(ranks, n, s->id, s->run.epoch))
                return ended_flags(ranks, n);
        }
        caf_idle(&spins);
    }
    s->run.epoch = 0;
    if (s->run.flags & BAR_FLAG_STOPPED)
        s->stopped_seen = true;
    return s->run.flags;
}

/* One barrier of group id over ranks[0..n) (me = our index there) for a
 * statement of kind `kind` (caf_internal.h): the OR of the flags, by the
 * rules at the top of the file ("After a stop"). */
static int group_barrier(uint64_t id, const int *ranks, int n, int me, int kind)
{
    bar_slot_t *s = bar_enter(id, ranks, n, me);
    const bool active = kind == CAF_SYNC_ACTIVE;
    if (!active && (s->run.epoch != 0 || s->stopped_seen))
        return (int)ended_flags(ranks, n);
    if (active && s->credit) {
        s->credit = false;
        return (int)ended_flags(ranks, n);
    }
    if (s->run.epoch != 0) {
        /* Our SYNC ALL left open: the others' statement in it decides. */
        unsigned f = group_finish(s, ranks, n, false);
        if (f & BAR_FLAG_ACTIVE)
            return (int)f;
    }
    group_begin(s, active ? BAR_FLAG_ACTIVE : 0);
    /* The first step sends what needs no wait; a SYNC ALL that already
     * knows of the stop then leaves at once. */
    unsigned f = group_finish(s, ranks, n, !active);
    if (s->run.epoch == 0 && !active && (f & BAR_FLAG_STOPPED) && (f & BAR_FLAG_ACTIVE))
        s->credit = true;
    return (int)f;
}

/* A stopped (or failed) image takes part in the barriers of every group it
 * is a member of, bringing "I stopped": it enters the next one as soon as
 * a member's arrival shows that member is in it (a member is in barrier
 * e + 1 of a group when an arrival of it counted beyond e, and each
 * member's first arrival comes from its predecessor, which is in it or
 * serves it too), and answers its rounds between the initial team's
 * barrier's polls (caf_sync_serve).  So the running members' SYNC ALL,
 * SYNC TEAM, END TEAM of a child team complete and tell them that an image
 * stopped, as in the initial team. */
static void serve_groups(void)
{
    for (unsigned i = 0; i < bar_nknown; i++) {
        bar_slot_t *s = bar_known[i];
        if (s->run.epoch == 0) {
            bool ahead = false;
            for (int k = 0; (1 << k) < s->group.n; k++)
                ahead |= s->arrived[k] > s->epoch;
            if (!ahead)
                continue;
            group_begin(s, 0);
        }
        if (group_step(s))
            s->run.epoch = 0;
    }
}

void caf_sync_team_formed(uint64_t id, const int *ranks, int n, int me)
{
    if (id != 0 && n > 1)
        (void)bar_enter(id, ranks, n, me);
}

static uint64_t field_pair(uint64_t x, unsigned bits, unsigned shift)
{
    const uint64_t m = ((uint64_t)1 << bits) - 1;
    return ((x & m) | (~x & m) << bits) << shift;
}

/* Whether the OR of field_pair words shows different values. */
static bool field_differs(uint64_t all, unsigned bits, unsigned shift)
{
    const uint64_t m = ((uint64_t)1 << bits) - 1;
    return ((all >> shift) & (all >> (shift + bits)) & m) != 0;
}

static const char *const stmt_names[] = {"SYNC ALL", "ALLOCATE", "DEALLOCATE"};

/* The images went different ways (see the top of the file): every image
 * reports it, they meet once more, and the job ends. */
static void heap_disagreement(unsigned stmt, uint64_t all)
{
    char met[200] = "", mine[500];
    for (unsigned k = 0, w = 0; k < 3; k++)
        if ((all >> (BAR_STMT_SHIFT + k)) & 1u)
            w += (unsigned)snprintf(met + w, sizeof met - w, "%s%s", w ? ", " : "",
                                    stmt_names[k]);
    caf_heap_disagreement(mine, sizeof mine);
    caf_error_all(stmt == CAF_BAR_ALLOCATE ? "ALLOCATE" : stmt == CAF_BAR_DEALLOCATE
                  ? "DEALLOCATE" : "SYNC ALL",
                  "the images disagree on their ALLOCATE or DEALLOCATE statements of "
                  "coarrays (every image must execute the same ones in the same order): "
                  "met in %s; %s", met, mine);
}

/* Set once this image left the initial team's last barrier (no member
 * runs any more): it enters no other. */
static bool bar_last_done;
/* Barriers of the initial team this image entered as a running image;
 * the initial team's stopped_seen and credit (bar_slot_t). */
static uint64_t bar0_entered;
static bool bar0_stopped_seen, bar0_credit;
/* This image's initial-team barrier is open (fh_barrier_or_notify): a
 * stopped image's, between two polls of its termination loop, or the one
 * a running image left when it learnt that an image stopped. */
static bool bar_split_open;

uint64_t caf_sync_entered(uint64_t team)
{
    if (team == 0)
        return bar0_entered;
    const bar_slot_t *s = bar_slot(team, false, false);
    return s != NULL && s->group.ranks != NULL ? s->epoch : 0;
}

/* Whether the initial team's statements differ (see the top of the file). */
static bool stmts_differ(uint64_t all)
{
    unsigned stmts = (unsigned)(all >> BAR_STMT_SHIFT) & 7u;
    return (stmts & (stmts - 1)) != 0 ||
           field_differs(all, BAR_SEQ_BITS, BAR_SEQ_SHIFT) ||
           field_differs(all, BAR_HASH_BITS, BAR_HASH_SHIFT);
}

/* Takes the initial team's barrier, notified, to its end: its OR; or, when
 * may_leave and an image stopped outside it (checked before the first
 * wait, then whenever another image is known to have stopped), leaves it
 * open (bar_split_open stays set). */
static uint64_t initial_finish(bool may_leave)
{
    const int *ranks = caf_initial_ranks();
    uint64_t all = 0;
    unsigned idle = 0;
    int rc, seen = -1;
    for (;;) {
        if (may_leave && caf.nstopped != seen) {
            seen = caf.nstopped;
            if (stopped_outside(ranks, caf.nranks, 0, bar0_entered))
                return ended_flags(ranks, caf.nranks);
        }
        if ((rc = fh_barrier_or_try_idle(&all, &idle)) != FH_ERR_AGAIN)
            break;
    }
    bar_split_open = false;
    if (rc != FH_OK)
        caf_fatal("SYNC ALL", "fh_barrier_or_try: %s (%s)", fh_strerror(rc),
                  fh_last_error());
    if (all & BAR_FLAG_STOPPED)
        bar0_stopped_seen = true;
    /* The member that brought "stopped" or "failed" announced it before it
     * entered a barrier, but its status message may still be on its way:
     * wait for it, so that IMAGE_STATUS and the statements after this one
     * know what the barrier knew. */
    for (unsigned spins = 0;
         ((all & BAR_FLAG_STOPPED) && caf.nstopped == 0) ||
         ((all & BAR_FLAG_FAILED) && caf.nfailed == 0);)
        caf_idle(&spins);
    return all;
}

/* One barrier of a running image for statement stmt (CAF_BAR_*) of kind
 * `kind` in the initial team (the rules at the top of the file, "After a
 * stop"): the OR of the members' flags.  Split phase: the wait must watch
 * for a stop (fh_barrier_or_try_idle waits as fh_barrier_or does). */
static unsigned initial_barrier(unsigned stmt, int kind)
{
    assert(own_flags() == 0 && stmt != 0);
    const int *ranks = caf_initial_ranks();
    const int n = caf.nranks;
    const bool active = kind == CAF_SYNC_ACTIVE;
    const unsigned keep = BAR_FLAG_STOPPED | BAR_FLAG_FAILED | BAR_FLAG_RUNNING;
    if (!active && (bar_split_open || bar0_stopped_seen))
        return ended_flags(ranks, n);
    if (active && bar0_credit) {
        bar0_credit = false;
        return ended_flags(ranks, n);
    }
    if (bar_split_open) {
        /* Our SYNC ALL left open: the others' statement in it decides. */
        uint64_t all = initial_finish(false);
        if (all & ((uint64_t)(CAF_BAR_ALLOCATE | CAF_BAR_DEALLOCATE) << BAR_STMT_SHIFT))
            return (unsigned)all & keep;
    }
    uint64_t seq, hash;
    caf_heap_stamp(&seq, &hash);
    uint64_t word = BAR_FLAG_RUNNING | (uint64_t)stmt << BAR_STMT_SHIFT |
                    field_pair(seq, BAR_SEQ_BITS, BAR_SEQ_SHIFT) |
                    field_pair(hash, BAR_HASH_BITS, BAR_HASH_SHIFT);
    int rc = fh_barrier_or_notify(word);
    if (rc != FH_OK)
        caf_fatal("SYNC ALL", "fh_barrier_or_notify: %s (%s)", fh_strerror(rc),
                  fh_last_error());
    bar_split_open = true;
    bar0_entered++;
    uint64_t all = initial_finish(!active);
    if (bar_split_open)
        return (unsigned)all;   /* left open */
    if (!(all & BAR_FLAG_STOPPED) && stmts_differ(all))
        heap_disagreement(stmt, all);
    if (!active && (all & BAR_FLAG_STOPPED) &&
        (all & ((uint64_t)(CAF_BAR_ALLOCATE | CAF_BAR_DEALLOCATE) << BAR_STMT_SHIFT)))
        bar0_credit = true;
    return (unsigned)all & keep;
}

bool caf_sync_serve(bool *moved)
{
    assert(own_flags() != 0); /* called after this image stopped or failed */
    *moved = false;
    if (bar_last_done) {
        caf_poll();
        serve_groups();
        return true;
    }
    if (!bar_split_open) {
        int rc = fh_barrier_or_notify(own_flags());
        if (rc != FH_OK)
            caf_fatal("SYNC ALL", "fh_barrier_or_notify: %s (%s)", fh_strerror(rc),
                      fh_last_error());
        bar_split_open = true;
    }
    uint64_t all = 0;
    int rc = fh_barrier_or_try(&all);   /* polls too */
    serve_groups();
    if (rc == FH_ERR_AGAIN)
        return false;
    if (rc != FH_OK)
        caf_fatal("SYNC ALL", "fh_barrier_or_try: %s (%s)", fh_strerror(rc),
                  fh_last_error());
    bar_split_open = false;
    bar_last_done = (all & BAR_FLAG_RUNNING) == 0;
    *moved = true;
    return bar_last_done;
}

int caf_barrier(int kind)
{
    int n;
    const int *ranks = caf_team_ranks(&n);
    return caf_barrier_group(caf_team_id(), ranks, n,
                             caf_team_this_image() - 1, kind);
}

static int barrier_stat(int flags)
{
    if (flags & BAR_FLAG_FAILED)
        return CAF_STAT_FAILED_IMAGE;
    if (flags & BAR_FLAG_STOPPED)
        return CAF_STAT_STOPPED_IMAGE;
    return 0;
}

int caf_barrier_group(uint64_t id, const int *ranks, int n, int me, int kind)
{
    assert(kind == CAF_SYNC_IMAGES || kind == CAF_SYNC_ACTIVE);
    if (id != 0)
        return barrier_stat(group_barrier(id, ranks, n, me, kind));
    assert(n == caf.nranks && me == caf.rank);     /* the initial team */
    return barrier_stat((int)initial_barrier(CAF_BAR_SYNC, kind));
}

int caf_barrier_heap(unsigned stmt)
{
    assert(stmt == CAF_BAR_ALLOCATE || stmt == CAF_BAR_DEALLOCATE);
    if (caf_team_id() != 0)   /* no coarray is allocated in a child team */
        return caf_barrier(CAF_SYNC_ACTIVE);
    return barrier_stat((int)initial_barrier(stmt, CAF_SYNC_ACTIVE));
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
    int st = caf_barrier(CAF_SYNC_IMAGES);
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
    int *ranks = sync_ranks, m = 0, i, rc;
    bool listed_ok = true;
    for (i = 0; i < count && listed_ok; i++) {
        int rank = all ? team[i] : caf_image_rank(images[i]);
        if (rank < 0) {
            caf_error(stat, errmsg, errmsg_len, 1, stmt,
                      "image index %d is out of range [1, %d]", images[i], n);
            listed_ok = false;
        } else if (sync_seen[rank]) {
            caf_error(stat, errmsg, errmsg_len, 3 /* STAT_DUP_SYNC_IMAGES */,
                      stmt, "image %d is listed twice", images[i]);
            listed_ok = false;
        } else {
            sync_seen[rank] = 1;
            if (rank != caf.rank)
                ranks[m++] = rank;
        }
    }
    /* Leave sync_seen all zero (the image itself is in no ranks[]). */
    for (int j = 0; j < m; j++)
        sync_seen[ranks[j]] = 0;
    sync_seen[caf.rank] = 0;
    if (!listed_ok)
        return;
    rc = fh_quiet();
    if (rc != FH_OK)
        caf_fatal(stmt, "completing transfers: %s", fh_strerror(rc));
    for (i = 0; i < m; i++) {
        int r = ranks[i];
        sync_sent[r]++;
        if (caf.status[r] != CAF_IMG_RUNNING)
            continue; /* no use telling it; it may have matched already */
        if (sync_peer[r] != NULL) {
            atomic_fetch_add_explicit(&sync_peer[r][caf.rank], 1,
                                      memory_order_release);
            continue;
        }
        rc = fh_am_request_short(r, CAF_H_SYNC_IMAGES, NULL, 0);
        if (rc != FH_OK)
            caf_fatal(stmt, "notifying image %d: %s", r + 1, fh_strerror(rc));
    }
    int bad = 0, bad_rank = -1;
    for (i = 0; i < m; i++) {
        int r = ranks[i];
        unsigned spins = 0;
        while (atomic_load_explicit(&sync_in[r], memory_order_acquire) <
                   sync_sent[r] && caf.status[r] == CAF_IMG_RUNNING)
            caf_idle(&spins);
        uint64_t got = atomic_load_explicit(&sync_in[r], memory_order_acquire);
        if (got < sync_sent[r]) {
            /* It ended before matching: its count will never catch up. */
            int st = caf.status[r] == CAF_IMG_FAILED ? CAF_STAT_FAILED_IMAGE
                                                      : CAF_STAT_STOPPED_IMAGE;
            if (bad != CAF_STAT_FAILED_IMAGE) {
                bad = st;
                bad_rank = r;
            }
            sync_sent[r] = got;
        }
    }
    if (bad) {
        caf_error(stat, errmsg, errmsg_len, bad, stmt, "image %d has %s",
                  bad_rank + 1, bad == CAF_STAT_FAILED_IMAGE ? "failed" : "stopped");
        return;
    }
    caf_ok(stat);
}
