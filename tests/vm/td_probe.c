/* tests/vm/td_probe.c -- does a verbs device support thread domains?
 *
 *   td_probe [DEVICE] [--expect-unsupported|--expect-supported]
 *
 * Opens DEVICE (default: the first one), allocates a PD, then tries
 * ibv_alloc_td() and ibv_alloc_parent_domain() and prints what happened.
 * Soft-RoCE (rxe, kernel 6.1 / rdma-core 44) supports neither: both fail
 * with errno EOPNOTSUPP (95), and firehose's ibv conduit must fall back.
 *
 * Exit status: 0 if the outcome matches the expectation (default
 * --expect-unsupported: ibv_alloc_td fails with EOPNOTSUPP), 1 if it does
 * not, 2 if the device cannot be opened.
 *
 * Built by tests/vm/run-vm.sh --smoke:  gcc -std=c11 td_probe.c -libverbs
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

int main(int argc, char **argv)
{
    const char *want = NULL;
    int expect_unsupported = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--expect-supported") == 0)
            expect_unsupported = 0;
        else if (strcmp(argv[i], "--expect-unsupported") == 0)
            expect_unsupported = 1;
        else
            want = argv[i];
    }

    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list == NULL || n == 0) {
        fprintf(stderr, "td_probe: no verbs devices (%s)\n", strerror(errno));
        return 2;
    }
    struct ibv_device *dev = NULL;
    for (int i = 0; i < n; i++)
        if (want == NULL || strcmp(ibv_get_device_name(list[i]), want) == 0) {
            dev = list[i];
            break;
        }
    if (dev == NULL) {
        fprintf(stderr, "td_probe: no device %s\n", want);
        ibv_free_device_list(list);
        return 2;
    }
    const char *name = ibv_get_device_name(dev);
    struct ibv_context *ctx = ibv_open_device(dev);
    if (ctx == NULL) {
        fprintf(stderr, "td_probe: ibv_open_device(%s): %s\n", name, strerror(errno));
        ibv_free_device_list(list);
        return 2;
    }
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    if (pd == NULL) {
        fprintf(stderr, "td_probe: ibv_alloc_pd(%s): %s\n", name, strerror(errno));
        ibv_close_device(ctx);
        ibv_free_device_list(list);
        return 2;
    }

    struct ibv_td_init_attr td_attr = { .comp_mask = 0 };
    errno = 0;
    struct ibv_td *td = ibv_alloc_td(ctx, &td_attr);
    int td_errno = td ? 0 : errno;
    printf("td_probe: %s: ibv_alloc_td: %s (errno %d %s)\n", name,
           td ? "supported" : "FAILED", td_errno, td ? "" : strerror(td_errno));

    struct ibv_parent_domain_init_attr pd_attr = { .pd = pd, .td = td };
    errno = 0;
    struct ibv_pd *parent = ibv_alloc_parent_domain(ctx, &pd_attr);
    int pad_errno = parent ? 0 : errno;
    printf("td_probe: %s: ibv_alloc_parent_domain: %s (errno %d %s)\n", name,
           parent ? "supported" : "FAILED", pad_errno,
           parent ? "" : strerror(pad_errno));

    if (parent)
        ibv_dealloc_pd(parent);
    if (td)
        ibv_dealloc_td(td);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);

    int ok = expect_unsupported ? (td == NULL && td_errno == EOPNOTSUPP) : (td != NULL);
    printf("td_probe: %s: expected %s: %s\n", name,
           expect_unsupported ? "ibv_alloc_td to fail with EOPNOTSUPP" : "thread domains",
           ok ? "yes" : "NO");
    return ok ? 0 : 1;
}
