/*
 * node_local_test.c -- ranks of one node group reach each other's segments
 * with loads and stores; ranks of other groups through the network; both
 * give the same results (include/firehose.h: fh_addr_local, FH_SHM).
 *
 * Usage: fhrun -n N node_local_test --group G
 *   G = the node group size the run was started with: 0 for FH_SHM=off
 *   (every peer through the network), N for one group, 2 for
 *   FH_SHM_MAX_GROUP=2.  Every rank checks:
 *   - fh_addr_local of each rank's segment base is non-NULL exactly for
 *     the ranks of its group (itself always: the address itself), NULL
 *     with FH_ERR_NOT_SUPPORTED in fh_last_error for the others, and NULL
 *     for an address past a piece, a NULL address and ranks -1 and N;
 *   - a store through fh_addr_local into the right neighbour's piece is
 *     seen by that neighbour after a barrier (group members only);
 *   - blocking, NB, NBI and strided puts and gets with every rank, then a
 *     byte-for-byte check by the owner: whichever path each pair takes;
 *   --hold S: sleep S seconds once the segment exists (node_local.sh
 *   tries to open it as another user meanwhile);
 *   - 64- and 32-bit fetch-adds by every rank on rank 0's words, mixed
 *     with rank 0's own: the sums are exact (the two paths' atomics are
 *     mutually atomic).
 */
#include "testutil.h"

#include <string.h>

#define SEG      (1u << 20)
#define SLOT     4096          /* per writer, in each rank's piece */
#define ADDS     2000

static int in_group(int me, int r, long g)
{
    return r == me || (g > 0 && r / g == me / g);
}

int main(int argc, char **argv)
{
    CHECK_OK(fh_init(&argc, &argv));
    tu_init_rank("node_local_test");
    const int me = fh_rank(), n = fh_nranks();
    const long g = tu_opt(argc, argv, "--group", n);
    CHECK(n * SLOT * 3 + 64 <= (int)SEG, "setup", "at most %d ranks", (int)SEG / SLOT / 3);
    fh_seg_t seg;
    char *mine;
    CHECK_OK(fh_segment_create(SEG, &seg, (void **)&mine));
    memset(mine, 0, SEG);
    char **base = calloc((size_t)n, sizeof *base);
    CHECK(base != NULL, "calloc", "memory");
    for (int r = 0; r < n; r++)
        CHECK_OK(fh_segment_query(seg, r, (void **)&base[r], NULL));
    CHECK_OK(fh_barrier());
    long hold = tu_opt(argc, argv, "--hold", 0);
    if (hold > 0)
        sleep((unsigned)hold);

    /* 1. who is reachable by load/store */
    int local = 0;
    for (int r = 0; r < n; r++) {
        char *p = fh_addr_local(r, base[r] + 100);
        if (in_group(me, r, g)) {
            CHECK(p != NULL, "fh_addr_local", "a pointer to rank %d (group %ld), saw NULL: %s",
                  r, g, fh_last_error());
            if (r == me)
                CHECK(p == mine + 100, "fh_addr_local", "our own address back, saw %p", p);
            local++;
        } else {
            CHECK(p == NULL, "fh_addr_local", "NULL for rank %d (group %ld), saw %p", r, g, p);
            CHECK(strstr(fh_last_error(), "does not share") != NULL, "fh_last_error",
                  "FH_ERR_NOT_SUPPORTED's reason, saw '%s'", fh_last_error());
        }
        CHECK(fh_addr_local(r, base[r] + SEG) == NULL, "fh_addr_local", "NULL past the piece");
    }
    CHECK(fh_addr_local(me, NULL) == NULL, "fh_addr_local", "NULL for a NULL address");
    CHECK(fh_addr_local(-1, mine) == NULL && fh_addr_local(n, mine) == NULL,
          "fh_addr_local", "NULL for ranks -1 and %d", n);
    TU_LOG("NOTE %d of %d ranks reachable by load/store\n", local, n);

    /* 2. a store through the pointer, seen after a barrier */
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    uint64_t *rp = (uint64_t *)(void *)fh_addr_local(right, base[right]);
    if (rp != NULL)
        rp[me] = 0xabc0000000000000ull + (uint64_t)me;
    CHECK_OK(fh_barrier());
    if (in_group(me, left, g) && left != me) {
        uint64_t v = ((uint64_t *)(void *)mine)[left];
        CHECK(v == 0xabc0000000000000ull + (uint64_t)left, "store through fh_addr_local",
              "0x%llx from rank %d, saw 0x%llx",
              (unsigned long long)(0xabc0000000000000ull + (uint64_t)left), left,
              (unsigned long long)v);
    }
    CHECK_OK(fh_barrier());
    memset(mine, 0, SEG);
    CHECK_OK(fh_barrier());

    /* 3. every put/get form with every rank; the owner checks */
    char *src = malloc(SLOT), *back = malloc(SLOT);
    CHECK(src && back, "malloc", "buffers");
    const size_t off = 64 + (size_t)me * SLOT;                 /* my slot in each piece */
    for (int r = 0; r < n; r++) {
        uint64_t key = tu_key(1, (uint64_t)me, (uint64_t)r);
        tu_fill(src, SLOT, key, 0);
        char *dst = base[r] + off;
        switch (r % 3) {
        case 0:
            CHECK_OK(fh_put(r, dst, src, SLOT / 2));
            CHECK_OK(fh_put_nbi(r, dst + SLOT / 2, src + SLOT / 2, SLOT / 2));
            CHECK_OK(fh_wait_nbi());
            break;
        case 1: {
            fh_handle_t h;
            CHECK_OK(fh_put_nb(r, dst, src, SLOT, &h));
            CHECK_OK(fh_wait(h));
            break;
        }
        default:   /* 64 blocks of 32 bytes at stride 64, twice interleaved */
            CHECK_OK(fh_put_strided(r, dst, 64, src, 64, 32, SLOT / 64));
            CHECK_OK(fh_put_strided(r, dst + 32, 64, src + 32, 64, 32, SLOT / 64));
        }
        memset(back, 0, SLOT);
        if (r % 2)
            CHECK_OK(fh_get(back, r, dst, SLOT));
        else
            CHECK_OK(fh_get_strided(back, 128, r, dst, 128, 128, SLOT / 128));
        TU_VERIFY(back, SLOT, key, 0, "get back from rank %d", r);
    }
    CHECK_OK(fh_barrier());
    for (int w = 0; w < n; w++)
        TU_VERIFY(mine + 64 + (size_t)w * SLOT, SLOT, tu_key(1, (uint64_t)w, (uint64_t)me), 0,
                  "slot of rank %d", w);
    CHECK_OK(fh_barrier());

    /* 4. atomics from every rank and path on rank 0's words */
    uint64_t *c64 = (uint64_t *)(void *)(base[0] + SEG - 64);
    uint32_t *c32 = (uint32_t *)(void *)(base[0] + SEG - 32);
    for (int i = 0; i < ADDS; i++) {
        uint64_t old;
        uint32_t old32;
        CHECK_OK(fh_atomic(0, c64, FH_AOP_FETCH_ADD, 3, 0, &old));
        CHECK_OK(fh_atomic32(0, c32, FH_AOP_FETCH_ADD, 1, 0, &old32));
    }
    CHECK_OK(fh_barrier());
    if (me == 0) {
        uint64_t want = 3ull * ADDS * (uint64_t)n;
        uint32_t want32 = (uint32_t)(ADDS * n);
        CHECK(*(volatile uint64_t *)c64 == want && *(volatile uint32_t *)c32 == want32,
              "atomics", "%llu and %u, saw %llu and %u", (unsigned long long)want, want32,
              (unsigned long long)*(volatile uint64_t *)c64, *(volatile uint32_t *)c32);
    }
    CHECK_OK(fh_barrier());
    CHECK_OK(fh_segment_destroy(seg));
    free(src);
    free(back);
    free(base);
    TU_SAY("PASS node_local_test\n");
    CHECK_OK(fh_finalize());
    return 0;
}
