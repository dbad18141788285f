/*
 * service_upsert.c - RPC adapters of the key-replacing methods engine connectors call:
 * UpsertStart / UpsertEnd (upsert.h) and RemoveByRegex (remove_regex.h). UpsertEnd and
 * RemoveByRegex answer once the delete rule is met for the disk copies of what they removed,
 * as Remove and RemoveAll do.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "master/remove_regex.h"
#include "master/upsert.h"
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
    if (!mc_rpc_call_is_admin(call)) { /* --admin_token_file: a mass delete, as RemoveAll */
        mc_warn("master", "RemoveByRegex refused: the connection did not prove the admin token",
                "conn=%llu", (unsigned long long)mc_rpc_call_conn_id(call));
        FREE_REQ(req);
        mc_rpc_reply_status(call, MC_ERR_UNAUTHENTICATED);
        return;
    }
    struct regex_wait *w = calloc(1, sizeof(*w));
    int rc = mc_svc_check_client(svc->m, call, mc_svc_id_from_pb(req->client_id));
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

/* ---- Upsert -------------------------------------------------------------------------------- */

void mc_svc_upsert_start(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(UpsertStartRequest, upsert_start_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_master_replicate_config cfg;
    struct mc_upsert_start_result us;
    int rc = mc_svc_config_from_pb(req->config, &cfg);
    if (rc == 0)
        rc = mc_svc_check_client(svc->m, call, client);
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(upsert_start_request), req->key);
    if (rc == 0) /* cfg points into req: call before freeing it */
        rc =
            mc_master_upsert_start(svc->m, client, key.data, key.len, req->value_length, &cfg, &us);
    FREE_REQ(req);
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        return;
    }
    Mc__UpsertStartResponse r = MC__UPSERT_START_RESPONSE__INIT;
    struct mc_svc_pb_replica reps[MC_MAX_REPLICAS];
    Mc__ReplicaDescriptor *ptrs[MC_MAX_REPLICAS];
    r.n_replicas = mc_svc_replicas_to_pb(us.replicas, us.nreplicas, reps, ptrs);
    r.replicas = ptrs;
    r.token = us.token;
    mc_rpc_reply_msg(call, 0, &r.base);
}

struct upsert_wait {
    struct mc_rpc_call *call;
    uint64_t version;
};

static void upsert_done(void *arg, int rc)
{
    struct upsert_wait *w = arg;
    Mc__UpsertEndResponse r = MC__UPSERT_END_RESPONSE__INIT;
    r.version = w->version;
    mc_rpc_reply_msg(w->call, rc, &r.base);
    free(w);
}

void mc_svc_upsert_end(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(UpsertEndRequest, upsert_end_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct upsert_wait *w = calloc(1, sizeof(*w));
    int rc = mc_svc_check_client(svc->m, call, client);
    if (rc == 0 && !w)
        rc = MC_ERR_INTERNAL_ERROR;
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(upsert_end_request), req->key);
    if (rc == 0) {
        w->call = call;
        if (req->revoke)
            rc = mc_master_upsert_revoke(svc->m, client, key.data, key.len, req->token);
        else
            rc =
                mc_master_upsert_end_wait(svc->m, client, key.data, key.len, req->token,
                                          req->crc32c, req->crc_valid, &w->version, upsert_done, w);
    }
    FREE_REQ(req);
    if (rc == MC_MASTER_PENDING)
        return; /* upsert_done answers */
    if (w) {
        w->call = call;
        upsert_done(w, rc);
    } else {
        mc_rpc_reply_status(call, rc);
    }
}

/* BatchUpsertStart: every key its own reservation; res = the core's results, views = one
 * UpsertStartResult (and its replicas) per key. */
struct upsert_start_view {
    Mc__UpsertStartResult r;
    struct mc_svc_pb_replica reps[MC_MAX_REPLICAS];
    Mc__ReplicaDescriptor *ptrs[MC_MAX_REPLICAS];
};

static int batch_upsert_start_core(struct mc_svc_batch *b)
{
    const Mc__BatchUpsertStartRequest *req = (const void *)b->req;
    struct mc_master_replicate_config cfg;
    struct mc_upsert_start_result *res = b->res;
    int brc = req->n_value_lengths != b->n ? MC_ERR_INVALID_PARAMS
                                           : mc_svc_config_from_pb(req->config, &cfg);
    for (size_t i = 0; i < b->n; i++)
        b->rcs[i] = brc ? brc
                        : mc_master_upsert_start(b->m, b->client, b->keys[i].data, b->keys[i].len,
                                                 req->value_lengths[i], &cfg, &res[i]);
    return 0;
}

static void batch_upsert_start_encode(struct mc_svc_batch *b, ProtobufCMessage *resp)
{
    const struct mc_upsert_start_result *us = b->res;
    struct upsert_start_view *v = b->views;
    for (size_t i = 0; i < b->n; i++) {
        mc__upsert_start_result__init(&v[i].r);
        v[i].r.status = b->rcs[i];
        if (b->rcs[i] == 0) {
            v[i].r.n_replicas =
                mc_svc_replicas_to_pb(us[i].replicas, us[i].nreplicas, v[i].reps, v[i].ptrs);
            v[i].r.replicas = v[i].ptrs;
            v[i].r.token = us[i].token;
        }
        b->ptrs[i] = &v[i].r;
    }
    mc_svc_set_repeated(resp, "results", b->n, b->ptrs);
}

void mc_svc_batch_upsert_start(void *arg, struct mc_rpc_call *call)
{
    static const struct mc_svc_batch_spec spec = {
        .req = &mc__batch_upsert_start_request__descriptor,
        .resp = &mc__batch_upsert_start_response__descriptor,
        .items = "keys",
        .res_size = sizeof(struct mc_upsert_start_result),
        .view_size = sizeof(struct upsert_start_view),
        .core = batch_upsert_start_core,
        .encode = batch_upsert_start_encode,
    };
    mc_svc_batch(arg, call, &spec, NULL);
}

/* A BatchUpsertEnd waiting for the delete rule: its statuses, final, until the answer. */
struct batch_upsert_wait {
    struct mc_rpc_call *call;
    size_t n;
    int rcs[];
};

static void batch_upsert_done(void *arg, int rc)
{
    struct batch_upsert_wait *w = arg;
    if (rc != 0) {
        mc_rpc_reply_status(w->call, rc);
    } else {
        Mc__BatchUpsertEndResponse r = MC__BATCH_UPSERT_END_RESPONSE__INIT;
        r.n_statuses = w->n;
        r.statuses = w->rcs;
        mc_rpc_reply_msg(w->call, 0, &r.base);
    }
    free(w);
}

static int batch_upsert_end_core(struct mc_svc_batch *b)
{
    const Mc__BatchUpsertEndRequest *req = (const void *)b->req;
    if (b->n == 0)
        return 0;
    struct batch_upsert_wait *w = malloc(sizeof(*w) + b->n * sizeof(int));
    struct mc_upsert_end_item *items = calloc(b->n, sizeof(*items));
    if (!w || !items) {
        free(w);
        free(items);
        return MC_ERR_INTERNAL_ERROR;
    }
    w->call = b->call;
    w->n = b->n;
    for (size_t i = 0; i < b->n; i++)
        items[i] = (struct mc_upsert_end_item){.token = req->items[i]->token,
                                               .crc32c = req->items[i]->crc32c,
                                               .has_crc = req->items[i]->crc_valid,
                                               .revoke = req->items[i]->revoke};
    int rc = mc_master_batch_upsert_end_wait(b->m, b->client, b->keys, b->n, items, w->rcs,
                                             batch_upsert_done, w);
    free(items);
    if (rc == MC_MASTER_PENDING)
        return MC_SVC_DEFERRED; /* batch_upsert_done answers */
    if (rc == MC_OK)
        memcpy(b->rcs, w->rcs, b->n * sizeof(int));
    free(w);
    return rc;
}

void mc_svc_batch_upsert_end(void *arg, struct mc_rpc_call *call)
{
    static const struct mc_svc_batch_spec spec = {
        .req = &mc__batch_upsert_end_request__descriptor,
        .resp = &mc__batch_upsert_end_response__descriptor,
        .items = "items",
        .item_key = "key",
        .core = batch_upsert_end_core,
    };
    mc_svc_batch(arg, call, &spec, NULL);
}
