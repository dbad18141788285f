/*
 * cli_hint.c - errors that say the limit or the remedy, for the data commands (cli_data.c).
 *
 * A bare error name (INVALID_KEY, NO_AVAILABLE_HANDLE, OBJECT_HAS_LEASE) tells a user what went
 * wrong but not what to do. These helpers print one more specific line first, looking up what
 * they need (the segments' sizes, the lease left) with lease-free admin calls, and then the usual
 * "mooncake_cli: OP: ERROR_NAME" line, so scripts that parse the last line keep working.
 */
#include <string.h>

#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "tools/cli.h"

int mc_cli_check_key(const char *op, const char *key)
{
    size_t len = strnlen(key, MC_CLI_MAX_KEY + 1);
    if (len == 0) {
        fprintf(stderr, "mooncake_cli: %s: the key is empty\n", op);
        return mc_cli_fail(op, MC_ERR_INVALID_KEY);
    }
    if (len > MC_CLI_MAX_KEY) {
        fprintf(stderr,
                "mooncake_cli: %s: the key is %zu bytes; keys are at most %d bytes (shorten or "
                "hash it)\n",
                op, strlen(key), MC_CLI_MAX_KEY);
        return mc_cli_fail(op, MC_ERR_INVALID_KEY);
    }
    return MC_CLI_EXIT_OK;
}

/* The largest mounted segment's size (0 when none or unknown). */
static uint64_t largest_segment(const struct mc_cli_opts *o, size_t *nsegs)
{
    Mc__ListSegmentsRequest req = MC__LIST_SEGMENTS_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    struct mc_rpc_client *c = NULL;
    uint64_t best = 0;

    *nsegs = 0;
    if (mc_cli_admin_connect(o, &c) == 0 &&
        mc_rpc_client_call_msg(c, MC_METHOD_LIST_SEGMENTS, &req.base,
                               &mc__list_segments_response__descriptor, 0, &m) == 0) {
        const Mc__ListSegmentsResponse *r = (const Mc__ListSegmentsResponse *)m;
        *nsegs = r->n_segments;
        for (size_t i = 0; i < r->n_segments; i++)
            if (r->segments[i]->size > best)
                best = r->segments[i]->size;
        protobuf_c_message_free_unpacked(m, NULL);
    }
    mc_rpc_client_free(c);
    return best;
}

int mc_cli_fail_put(const struct mc_cli_opts *o, size_t len, int rc)
{
    if (rc == MC_ERR_NO_AVAILABLE_HANDLE) {
        size_t nsegs;
        uint64_t best = largest_segment(o, &nsegs);
        if (nsegs == 0)
            fprintf(stderr,
                    "mooncake_cli: put: no segment is mounted: start a mooncake_client (with "
                    "--segment_size) against this master\n");
        else if (best && len > best)
            fprintf(stderr,
                    "mooncake_cli: put: the value is %zu bytes but the largest segment is %llu "
                    "bytes: no segment can hold it (a value is stored in one segment; start a "
                    "mooncake_client with a larger --segment_size)\n",
                    len, (unsigned long long)best);
        else
            fprintf(stderr,
                    "mooncake_cli: put: no segment has %zu free bytes now (the store is full: "
                    "retry after eviction, or add segments)\n",
                    len);
    }
    return mc_cli_fail("put", rc);
}

int mc_cli_fail_rm(struct mc_client *c, const char *key, int rc)
{
    if (rc == MC_ERR_OBJECT_HAS_LEASE && c) {
        struct mc_object_info info;
        memset(&info, 0, sizeof(info));
        if (mc_query(c, key, &info) == 0 && info.lease_ms_left > 0)
            fprintf(stderr,
                    "mooncake_cli: rm: '%s' is held by a reader for %llu ms more; --force to "
                    "remove anyway\n",
                    key, (unsigned long long)info.lease_ms_left);
        else
            fprintf(stderr,
                    "mooncake_cli: rm: '%s' is held by a reader; retry, or --force to remove "
                    "anyway\n",
                    key);
        mc_object_info_free(&info);
    }
    return mc_cli_fail("rm", rc);
}
