/*
 * caf_team.c -- image numbering and teams.
 *
 * Every image index the compiler passes is relative to the current team;
 * caf_image_rank maps it to the firehose rank.  The initial team is every
 * rank in rank order (image i = rank i-1).
 */
#include "caf_internal.h"

#include <stdlib.h>

struct caf_team {
    uint64_t id;            /* same on every member; initial team 0 */
    int n;                  /* members */
    int *ranks;             /* [image-1] -> rank */
    int me;                 /* our 0-based index */
    int number;             /* TEAM_NUMBER; -1 for the initial team */
    struct caf_team *parent;
};

static caf_team_s initial;

static const caf_team_s *initial_team(void)
{
    if (initial.ranks == NULL) {
        initial.ranks = malloc((size_t)caf.nranks * sizeof *initial.ranks);
        if (initial.ranks == NULL)
            caf_fatal("start-up", "out of memory");
        for (int i = 0; i < caf.nranks; i++)
            initial.ranks[i] = i;
        initial.n = caf.nranks;
        initial.me = caf.rank;
        initial.number = -1;
        initial.id = 0;
    }
    return &initial;
}

static const caf_team_s *cur(void)
{
    return caf.team != NULL ? caf.team : initial_team();
}

const int *caf_initial_ranks(void)
{
    return initial_team()->ranks;
}

int caf_image_rank(int image)
{
    const caf_team_s *t = cur();
    if (image < 1 || image > t->n)
        return -1;
    return t->ranks[image - 1];
}

int caf_team_this_image(void)
{
    return cur()->me + 1;
}

int caf_team_num_images(void)
{
    return cur()->n;
}

const int *caf_team_ranks(int *n)
{
    const caf_team_s *t = cur();
    *n = t->n;
    return t->ranks;
}

uint64_t caf_team_id(void)
{
    return cur()->id;
}

bool caf_in_child_team(void)
{
    return cur() != &initial;
}

/* ------------------------------------------------------------ FORM TEAM
 *
 * FORM TEAM is collective over the current team P: every member sends its
 * (team number, new index) to every other member of P as a short AM tagged
 * with P's id, and waits until it has one record from each.  Records that
 * arrive early (a member ahead of us) wait in a list.  Short AMs from one
 * rank arrive in order and the members of P execute their FORM TEAMs over
 * P in the same order, so the k-th record from a rank tagged P is its k-th
 * FORM TEAM over P: we always take the oldest.
 *
 * The new team's id mixes P's id, the team number and the member list in
 * image order: the same on every member, different between siblings (their
 * numbers differ) and between teams of different parents.  Forming the same
 * team again gives the same id, so barrier state is reused, not leaked
 * (its members, in the same order, execute the same barriers). */

typedef struct form_rec {
    uint64_t parent;
    int src;
    int64_t number, index;
} form_rec_t;

static form_rec_t *recs;
static size_t nrecs, caprecs;
static bool recs_oom;

/* args: parent id, team number, new index (0 = none); checked by
 * caf_wire_form, which also bounds the records pending per sender. */
static void form_handler(fh_token_t tok, void *buf, size_t n,
                         const uint64_t *a, unsigned na)
{
    caf_am_in_t m = {.src = -1, .buf = buf, .nbytes = n, .args = a,
                     .nargs = na};
    fh_token_source(tok, &m.src);
    size_t pending = 0;
    for (size_t i = 0; i < nrecs; i++)
        pending += recs[i].src == m.src;
    const caf_job_t job = caf_job();
    caf_form_msg_t f;
    char why[160];
    if (!caf_wire_form(&job, &m, pending, &f, why, sizeof why)) {
        caf_drop("FORM TEAM record", m.src, why);
        return;
    }
    if (nrecs == caprecs) {
        size_t c = caprecs ? 2 * caprecs : 64;
        form_rec_t *r = realloc(recs, c * sizeof *r);
        if (r == NULL) {
            recs_oom = true;
            return;
        }
        recs = r;
        caprecs = c;
    }
    recs[nrecs++] = (form_rec_t){f.parent, f.src, f.number, f.index};
}

void caf_team_init(void)
{
    int rc = fh_am_register(CAF_H_TEAM, form_handler, "caf form team");
    if (rc != FH_OK)
        caf_fatal("start-up", "fh_am_register: %s", fh_strerror(rc));
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h;
}

typedef struct member {
    int pidx;          /* index in the parent (0-based) */
    int64_t number, index;
} member_t;

static int by_index(const void *a, const void *b)
{
    const member_t *x = a, *y = b;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return x->pidx < y->pidx ? -1 : x->pidx > y->pidx;
}

void _gfortran_caf_form_team(int team_number, caf_team_t *team, int index)
{
    const char *stmt = "FORM TEAM";
    const caf_team_s *p = cur();
    if (team == NULL)
        caf_fatal(stmt, "no team variable");
    if (team_number < 1)
        caf_fatal(stmt, "team number %d is not positive", team_number);
    if (index < 0)
        caf_fatal(stmt, "NEW_INDEX= %d is not positive", index);
    int rc = fh_quiet();
    if (rc != FH_OK)
        caf_fatal(stmt, "completing transfers: %s", fh_strerror(rc));
    uint64_t args[3] = {p->id, (uint64_t)(int64_t)team_number,
                        (uint64_t)(int64_t)index};
    for (int i = 0; i < p->n; i++) {
        if (i == p->me)
            continue;
        rc = fh_am_request_short(p->ranks[i], CAF_H_TEAM, args, 3);
        if (rc != FH_OK)
            caf_fatal(stmt, "notifying image %d: %s", i + 1, fh_strerror(rc));
    }
    member_t *all = malloc((size_t)p->n * sizeof *all);
    bool *have = calloc((size_t)p->n, sizeof *have);
    int *pos = malloc((size_t)caf.nranks * sizeof *pos);
    if (all == NULL || have == NULL || pos == NULL)
        caf_fatal(stmt, "out of memory");
    for (int r = 0; r < caf.nranks; r++)
        pos[r] = -1;
    for (int i = 0; i < p->n; i++)
        pos[p->ranks[i]] = i;
    all[p->me] = (member_t){p->me, team_number, index};
    have[p->me] = true;
    int missing = p->n - 1;
    unsigned spins = 0;
    while (missing > 0) {
        /* Take the oldest record of each member (see above). */
        size_t k = 0;
        for (size_t i = 0; i < nrecs; i++) {
            form_rec_t *r = &recs[i];
            int j = r->src >= 0 && r->src < caf.nranks ? pos[r->src] : -1;
            if (r->parent == p->id && j >= 0 && !have[j]) {
                all[j] = (member_t){j, r->number, r->index};
                have[j] = true;
                missing--;
                continue; /* consumed */
            }
            recs[k++] = *r;
        }
        nrecs = k;
        if (recs_oom)
            caf_fatal(stmt, "out of memory");
        if (missing == 0)
            break;
        for (int i = 0; i < p->n; i++) {
            if (!have[i] && caf.status[p->ranks[i]] != CAF_IMG_RUNNING)
                caf_fatal(stmt, "image %d of the current team has %s", i + 1,
                          caf.status[p->ranks[i]] == CAF_IMG_FAILED
                              ? "failed" : "stopped");
        }
        caf_idle(&spins);
    }
    /* Members of our new team, in parent order, then by NEW_INDEX. */
    int n = 0;
    bool indexed = false;
    for (int i = 0; i < p->n; i++) {
        if (all[i].number != team_number)
            continue;
        all[n++] = all[i];
        if (all[i].index != 0)
            indexed = true;
    }
    if (indexed) {
        qsort(all, (size_t)n, sizeof *all, by_index);
        for (int i = 0; i < n; i++) {
            if (all[i].index != i + 1)
                caf_fatal(stmt, "the NEW_INDEX= values of team %d are not "
                          "1..%d, each once (image %d gave %lld)", team_number,
                          n, all[i].pidx + 1, (long long)all[i].index);
        }
    }
    caf_team_s *t = calloc(1, sizeof *t);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    if (t == NULL || ranks == NULL)
        caf_fatal(stmt, "out of memory");
    uint64_t id = mix(mix(p->id, 0x7ea3ull), (uint64_t)team_number);
    for (int i = 0; i < n; i++) {
        ranks[i] = p->ranks[all[i].pidx];
        if (all[i].pidx == p->me)
            t->me = i;
        id = mix(id, (uint64_t)ranks[i]);
    }
    t->id = id != 0 ? id : 1; /* 0 is the initial team */
    t->n = n;
    t->ranks = ranks;
    t->number = team_number;
    t->parent = (caf_team_s *)p;
    /* The old team value, if any, is not freed: gfortran 12 never tells us
     * when a team variable dies, and a copy of it may still be used. */
    caf_sync_team_formed(t->id, t->ranks, t->n, t->me);
    *team = t;
    free(all);
    free(have);
    free(pos);
}

static caf_team_s *team_arg(caf_team_t *team, const char *stmt)
{
    if (team == NULL || *team == NULL)
        caf_fatal(stmt, "the team variable was not defined by FORM TEAM");
    return *team;
}

/* kind: CAF_SYNC_ACTIVE for CHANGE TEAM and END TEAM, which synchronize
 * the active images of the team (a stopped image is no error: the others
 * go on), CAF_SYNC_IMAGES for SYNC TEAM, which involves every image of it
 * (gfortran 12 passes no STAT=: a stopped one is an error). */
static void team_sync(const caf_team_s *t, const char *stmt, int kind)
{
    int rc = fh_quiet();
    if (rc != FH_OK)
        caf_fatal(stmt, "completing transfers: %s", fh_strerror(rc));
    int st = caf_barrier_group(t->id, t->ranks, t->n, t->me, kind);
    if (st == CAF_STAT_FAILED_IMAGE)
        caf_fatal(stmt, "an image of the team has failed");
    if (st != 0 && kind == CAF_SYNC_IMAGES)
        caf_fatal(stmt, "an image of the team has stopped");
}

void _gfortran_caf_change_team(caf_team_t *team, int coselector)
{
    const char *stmt = "CHANGE TEAM";
    (void)coselector;
    caf_team_s *t = team_arg(team, stmt);
    if (t->parent != cur())
        caf_fatal(stmt, "the team was not formed by FORM TEAM in the current "
                  "team");
    caf.team = t;
    /* CHANGE TEAM synchronizes the active images of the new team. */
    team_sync(t, stmt, CAF_SYNC_ACTIVE);
}

void _gfortran_caf_end_team(caf_team_t *team)
{
    const char *stmt = "END TEAM";
    caf_team_s *t = (caf_team_s *)cur();
    if (t == &initial)
        caf_fatal(stmt, "not inside CHANGE TEAM");
    if (team != NULL && *team != NULL && *team != t)
        caf_fatal(stmt, "the team is not the current team");
    /* END TEAM synchronizes the active images of the team it ends. */
    team_sync(t, stmt, CAF_SYNC_ACTIVE);
    caf.team = t->parent == &initial ? NULL : t->parent;
}

void _gfortran_caf_sync_team(caf_team_t *team, int unused)
{
    const char *stmt = "SYNC TEAM";
    (void)unused;
    const caf_team_s *t = team_arg(team, stmt);
    /* The current team, an ancestor or a team formed in the current team:
     * we must be a member. */
    bool member = false;
    for (int i = 0; i < t->n; i++)
        member |= t->ranks[i] == caf.rank;
    if (!member)
        caf_fatal(stmt, "this image is not a member of the team");
    team_sync(t, stmt, CAF_SYNC_IMAGES);
}

/* gfortran 12 passes the team value itself here (team_number(t) compiles
 * to _gfortran_caf_team_number(t)), or NULL for the current team. */
int _gfortran_caf_team_number(caf_team_t *team)
{
    if (team == NULL)
        return cur()->number;
    const caf_team_s *t = (const caf_team_s *)team;
    return t->number;
}
