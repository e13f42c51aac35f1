/*
 * selftest_common.h -- the test logic shared by the conduit self-tests
 * (ofi_selftest.c, ibv_selftest.c): boot stubs over a socketpair, the test
 * state, the upcalls, the phases (tiny, am, flood, rma) and the drivers of
 * the 1-rank, 2-rank and dead-peer modes.  Implemented in selftest_common.c.
 *
 * Each self-test provides the conduit-specific hooks below (the conduit,
 * its parameters and st_open) and keeps its own extra phases and main().
 */
#ifndef FH_SELFTEST_COMMON_H
#define FH_SELFTEST_COMMON_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "conduits/conduit.h"
#include "firehose/boot/bootstrap.h"

#define DIE(...) do { fprintf(stderr, "[rank %d] FAIL %s:%d: ", g_rank, \
        __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); \
        fputc('\n', stderr); exit(2); } while (0)
#define CHECK(c, ...) do { if (!(c)) DIE(__VA_ARGS__); } while (0)

extern int g_rank;
/* FH_OFI_ENDPOINT of the environment as an enum ofi_endpoint_choice. */
int st_ofi_endpoint(void);

/* ------------------------------------------------- provided by each test */

/* The conduit under test. */
extern const fh_conduit_ops_t *const st_cd;
#define CD (*st_cd)
/* Requests per sender path in the am phase. */
extern uint32_t st_nreq;
extern size_t st_maxrma;       /* rma phase: largest put/get (<= MAXRMA) */
/* Flood: 0 = every message is P bytes; else rounds alternate between P
 * bytes and st_flood_small bytes. */
extern const size_t st_flood_small;
/* Opens the conduit into t->c / t->lim (with st_upcalls) and prints its
 * limits; st_setup does the rest. */
struct test;
void st_open(struct test *t);

/* ------------------------------------------------------------ test state */

#define NPATHS   3
#define RX_MSGS  64
#define WINDOW   (RX_MSGS / 4)  /* 2 ranks' worth of senders share RX_MSGS */
#define TSZ      ((size_t)16 << 20)
#define MAXRMA   ((size_t)8 << 20)

enum { K_REQ = 1, K_REP, K_FLOOD, K_DONE, K_TINY };

struct amh {
    uint32_t kind, seq;
    uint16_t src_rank, src_path;
    uint32_t len;
};

struct tpath {
    int index;
    struct fh_cpath *cp;
    struct test *t;
    /* sender */
    uint32_t next_seq, reply_seq;
    int credits;
    atomic_int finished;
    char *msg;
    /* rma */
    int rma_pending;
    int rma_status;
};

struct pending { int rank, path; uint32_t seq; };

struct test {
    int rank, nranks, peer;
    const char *provider;             /* ofi: the libfabric provider */
    const char *dev;                  /* ibv: FH_IBV_DEVICE for this rank */
    int expect_err;                   /* ibv badkey: error completions wanted;
                                         2 (ibv cqerr): any, errors counted */
    int got_err;
    struct fh_conduit *c;
    fh_conduit_limits_t lim;
    size_t P;
    struct tpath paths[NPATHS];
    struct fh_boot boot;
    int oob;                          /* 2 ranks: out-of-band socket */
    /* service path state */
    uint32_t expect[2][NPATHS];
    uint32_t flood_expect, flood_recv;
    uint32_t tiny_expect;
    int peer_done;
    int barrier_round;
    struct pending pq[4096];
    size_t pq_head, pq_tail;
    long misaligned;
    /* rma */
    char *T, *S, *G, *shadow;
    struct fh_mr *mrT, *mrS, *mrG;
    fh_rkey_t rk[2];
    uint64_t tbase[2];
    /* 1-rank in-upcall verification of the current put */
    const char *v_expect;
    size_t v_off, v_len;
    long verified_in_upcall;
};

extern const fh_conduit_upcalls_t st_upcalls;

static inline uint8_t pat(uint32_t seq, int path, size_t i)
{
    return (uint8_t)(seq * 131u + i * 7u + (unsigned)path * 17u + (i >> 8));
}

/* ------------------------------------------------------------ helpers */

void gen(char *dst, size_t len, uint64_t seed);
double now(void);
int do_poll(struct tpath *tp);
/* Main thread only: polls tp and our service path. */
void pump(struct tpath *tp);
void wait_rma(struct test *t, struct tpath *tp);

/* ------------------------------------------------------------ drivers */

/* A 1-rank test (rank 0 talking to itself), not set up yet. */
struct test *st_new_one(const char *provider, const char *dev);
/* st_open, then paths, connect, buffers, registrations, rkey exchange. */
void st_setup(struct test *t);
/* Tears down and frees t. */
void st_finish(struct test *t);
/* 1 rank: set up, then tiny, am, flood, rma.  The caller runs any further
 * phases, prints its PASS line and calls st_finish. */
struct test *st_run_one(const char *provider, const char *dev);
/* 2 ranks (fork + socketpair): am, rma both ways.  Returns in rank 0 once
 * rank 1 has passed (rank 1 exits). */
void st_run_two(const char *provider, const char *dev0, const char *dev1);
/* Mode "dead": rank 1 exits after connect; rank 0's RMA to it must fail
 * with FH_ERR_PEER_DEAD / FH_ERR_TRANSPORT, not hang.  The PASS line names
 * the provider if given, else the conduit's description. */
int st_run_dead(const char *provider, const char *dev0, const char *dev1);

#endif
