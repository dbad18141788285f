/*
 * service_upsert.c - RPC adapters of the key-replacing methods engine connectors call:
 * RemoveByRegex (remove_regex.h). Each answers once the delete rule is met for the keys it
 * removed, as RemoveAll does.
 */
#include <stdlib.h>
#include <string.h>

#include "master/remove_regex.h"
#include "master/service_internal.h"
#include "mooncake/errors.h"

struct regex_wait {
    struct mc_rpc_call *call;
    uint64_t removed;
};

static void regex_done(void *arg, int rc)
{
    struct regex_wait *w = arg;
    Mc__RemoveByRegexResponse r = MC__REMOVE_BY_REGEX_RESPONSE__INIT;
    r.removed = w->removed;
    mc_rpc_reply_msg(w->call, rc, &r.base);
    free(w);
}

void mc_svc_remove_by_regex(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(RemoveByRegexRequest, remove_by_regex_request, req);
    struct regex_wait *w = calloc(1, sizeof(*w));
    int rc = mc_svc_check_client(call, mc_svc_id_from_pb(req->client_id));
    if (rc == 0 && !w)
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0) {
        w->call = call;
        const char *p = req->pattern ? req->pattern : "";
        rc = mc_master_remove_by_regex_wait(svc->m, p, strlen(p), req->force, &w->removed,
                                            regex_done, w);
    }
    FREE_REQ(req);
    if (rc == MC_MASTER_PENDING)
        return; /* regex_done answers */
    if (w) {
        w->call = call;
        regex_done(w, rc);
    } else {
        mc_rpc_reply_status(call, rc);
    }
}
