/*
 * error.c -- fh_strerror / fh_err_name: one table, indexed by -code;
 * fh_xfer_strerror (log.h): a transfer's failure in words.
 */
#include "firehose.h"
#include "firehose/util/log.h"

static const struct {
    const char *name;
    const char *text;
} errors[] = {
    [0]  = {"FH_OK", "success"},
    [1]  = {"FH_ERR_INVALID", "invalid argument"},
    [2]  = {"FH_ERR_RANK", "rank is out of range"},
    [3]  = {"FH_ERR_OVERFLOW", "size or address arithmetic overflows"},
    [4]  = {"FH_ERR_OUT_OF_SEGMENT", "remote range is not inside one segment of the target"},
    [5]  = {"FH_ERR_HANDLER", "active-message handler index is unknown or not registered"},
    [6]  = {"FH_ERR_TOO_BIG", "payload, size or argument count is over the limit"},
    [7]  = {"FH_ERR_NOT_INIT", "firehose is not initialized (or already finalized)"},
    [8]  = {"FH_ERR_IN_HANDLER", "call not allowed here (inside an AM handler, or reply outside a request handler)"},
    [9]  = {"FH_ERR_HANDLE", "handle is stale, foreign to this thread, or corrupt"},
    [10] = {"FH_ERR_NO_MEMORY", "out of memory or memory registration failed"},
    [11] = {"FH_ERR_LIMIT", "a configured limit was reached"},
    [12] = {"FH_ERR_ALIGN", "atomic target is not aligned to its size"},
    [13] = {"FH_ERR_TRANSPORT", "the network reported an error"},
    [14] = {"FH_ERR_PEER_DEAD", "a peer exited or became unreachable"},
    [15] = {"FH_ERR_BOOTSTRAP", "job bootstrap (launcher or PMIx exchange) failed"},
    [16] = {"FH_ERR_CONFIG", "an FH_* environment variable has an invalid value"},
    [17] = {"FH_ERR_AGAIN", "operation not complete yet"},
    [18] = {"FH_ERR_NOT_SUPPORTED", "not supported by this build or conduit"},
    [19] = {"FH_ERR_STATE", "call out of order"},
};

#define NERRORS ((int)(sizeof errors / sizeof errors[0]))

const char *fh_strerror(int err)
{
    if (err > 0 || err <= -NERRORS)
        return "unknown error";
    return errors[-err].text;
}

const char *fh_err_name(int err)
{
    if (err > 0 || err <= -NERRORS)
        return "FH_ERR_UNKNOWN";
    return errors[-err].name;
}

const char *fh_xfer_strerror(int err, bool everything)
{
    if (err == FH_ERR_OUT_OF_SEGMENT && everything)
        return "a byte of it is not mapped at the target, or not readable (writable for "
               "a put), or past the end of a file mapped there (FH_SEGMENT=everything)";
    return fh_strerror(err);
}
