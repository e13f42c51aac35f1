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

static const caf_team_s *cur(void)
{
    if (caf.team != NULL)
        return caf.team;
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
