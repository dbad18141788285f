/*
 * service_objects.c - RPC adapters of the object methods: PutStart/PutEnd/PutRevoke,
 * GetReplicaList, ExistKey, Remove, and their batches (decode -> mc_master_* -> encode).
 *
 * Single-key replies are built on the stack (descriptors point into the core's result struct,
 * which owns the strings). Batches go through mc_svc_batch (service_batch.c): each one here is
 * a spec plus the core call and, where the reply carries more than statuses, its encoding.
 *
 * GetReplicaList and BatchGetReplicaList replies are written by hand (service_encode.c) into
 * the reply frame itself: the core answers a batch in windows of BGET_WINDOW keys into one fixed
 * scratch, and each window is encoded before the next one reuses it, so the reply costs its own
 * bytes and nothing per key besides.
 */
#include <stdlib.h>
#include <string.h>

#include "master/promotion.h"
#include "master/service_internal.h"
#include "master/service_wire.h"
#include "mooncake/errors.h"

/* ---- conversions --------------------------------------------------------------------------- */

int mc_svc_config_from_pb(const Mc__ReplicateConfig *p, struct mc_master_replicate_config *c)
{
    mc_master_replicate_config_init(c);
    if (!p)
        return 0;
    if (p->replica_num > 0)
        c->replica_num = p->replica_num;
    c->with_soft_pin = p->with_soft_pin;
    c->soft_pin_ttl_ms = p->soft_pin_ttl_ms;
    c->with_hard_pin = p->with_hard_pin;
    if (p->n_preferred_segments > MC_SERVICE_MAX_BATCH)
        return MC_ERR_INVALID_PARAMS;
    c->preferred_segments = (const char *const *)p->preferred_segments;
    c->n_preferred = p->n_preferred_segments;
    if (p->group_id && p->group_id[0]) {
        c->group_id = p->group_id;
        c->group_id_len = strlen(p->group_id);
    }
    return 0;
}

/* INVALID_PARAMS when the request's ReplicateConfig (field "config" of desc) has a group id
 * holding a NUL: cut at it, the key would join another group (or none). */
static int check_group_id(struct mc_rpc_call *call, const ProtobufCMessageDescriptor *desc)
{
    struct mc_key_ref k = {.data = "", .len = 1};
    mc_svc_mark_nul_keys(call, mc_svc_field_num(desc, "config"),
                         mc_svc_field_num(&mc__replicate_config__descriptor, "group_id"), true, &k,
                         1);
    return k.len == 0 ? MC_ERR_INVALID_PARAMS : 0;
}

/* Puts only create MEMORY replicas, so ALL and MEMORY select the same ones. */
static int check_replica_type(Mc__ReplicaType t)
{
    if (t == MC__REPLICA_TYPE__RT_ALL || t == MC__REPLICA_TYPE__RT_MEMORY)
        return 0;
    return t == MC__REPLICA_TYPE__RT_LOCAL_DISK ? MC_ERR_NOT_SUPPORTED : MC_ERR_INVALID_PARAMS;
}

/* Protobuf view of one get result (service_internal.h): no longer what the replies are packed
 * from (service_encode.c writes them by hand), but what those bytes must equal. */
void mc_svc_get_fill(int status, const struct mc_get_result *g, Mc__GetReplicaListResponse *r,
                     struct mc_svc_pb_replica *reps, Mc__ReplicaDescriptor **ptrs)
{
    mc__get_replica_list_response__init(r);
    r->status = status;
    if (status != 0)
        return;
    r->n_replicas = mc_svc_replicas_to_pb(g->replicas, g->nreplicas, reps, ptrs);
    r->replicas = ptrs;
    r->lease_ttl_ms = g->lease_ttl_ms;
    r->size = g->size;
    r->version = g->version;
    r->crc32c = g->crc32c;
    r->crc_valid = g->has_crc;
}

/* The replicas of a BatchPutStart item. */
struct pb_put_start {
    struct mc_svc_pb_replica reps[MC_MAX_REPLICAS];
    Mc__ReplicaDescriptor *ptrs[MC_MAX_REPLICAS];
};

static void put_start_to_pb(const struct mc_put_start_result *ps, struct pb_put_start *p,
                            size_t *n_out, Mc__ReplicaDescriptor ***out)
{
    *n_out = mc_svc_replicas_to_pb(ps->replicas, ps->nreplicas, p->reps, p->ptrs);
    *out = p->ptrs;
}

/* Protobuf view of a PutStart answer: what service_encode.c's PutStartResponse must equal. */
void mc_svc_put_start_fill(const struct mc_put_start_result *ps, Mc__PutStartResponse *r,
                           struct mc_svc_pb_replica *reps, Mc__ReplicaDescriptor **ptrs)
{
    mc__put_start_response__init(r);
    r->n_replicas = mc_svc_replicas_to_pb(ps->replicas, ps->nreplicas, reps, ptrs);
    r->replicas = ptrs;
    r->version = ps->version;
}

/* ---- Put ----------------------------------------------------------------------------------- */

void mc_svc_put_start(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(PutStartRequest, put_start_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_master_replicate_config cfg;
    struct mc_put_start_result ps;
    int rc = mc_svc_config_from_pb(req->config, &cfg);
    if (rc == 0 && req->config)
        rc = check_group_id(call, &mc__put_start_request__descriptor);
    if (rc == 0)
        rc = mc_svc_check_client(svc->m, call, client);
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(put_start_request), req->key);
    if (rc == 0) /* cfg points into req: call before freeing it */
        rc = mc_master_put_start(svc->m, client, key.data, key.len, req->value_length, &cfg, &ps);
    FREE_REQ(req);
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        return;
    }
    struct mc_svc_put_start_plan pl;
    struct mc_rpc_draft d = {0};
    mc_svc_put_start_reply_plan(&ps, &pl);
    uint8_t *p = mc_rpc_draft_room(&d, pl.size);
    if (p)
        mc_svc_put_start_reply_put(p, &pl);
    mc_rpc_reply_draft(call, &d, p ? pl.size : SIZE_MAX); /* no room: INTERNAL_ERROR */
}

/* PutEnd and PutRevoke: read in place (service_wire.h), no protobuf-c message. */
static bool put_end_decode(struct mc_rpc_call *call, bool end, struct mc_svc_put_end_req *r)
{
    size_t blen;
    const uint8_t *body = mc_rpc_call_body(call, &blen);
    const char *bad = mc_svc_decode_put_end(body, blen, end, r);
    if (bad)
        mc_rpc_call_refuse_body(call, bad);
    return bad == NULL;
}

void mc_svc_put_end(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    struct mc_svc_put_end_req req;
    if (!put_end_decode(call, true, &req))
        return;
    int rc = check_replica_type((Mc__ReplicaType)req.replica_type);
    if (rc == 0)
        rc = mc_svc_check_client(svc->m, call, req.client);
    if (rc == 0)
        rc = mc_master_put_end(svc->m, req.client, req.key.data, req.key.len, req.version,
                               req.crc32c, req.crc_valid);
    mc_rpc_reply_status(call, rc); /* PutEndResponse has no fields: an empty body either way */
}

void mc_svc_put_revoke(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    struct mc_svc_put_end_req req;
    if (!put_end_decode(call, false, &req))
        return;
    int rc = check_replica_type((Mc__ReplicaType)req.replica_type);
    if (rc == 0)
        rc = mc_svc_check_client(svc->m, call, req.client);
    if (rc == 0)
        rc = mc_master_put_revoke(svc->m, req.client, req.key.data, req.key.len, req.version);
    mc_rpc_reply_status(call, rc); /* PutRevokeResponse has no fields either */
}

/* BatchPutStart: res = the core's results, views = one PutStartResult (and its replicas) per
 * key. A request-wide problem (value lengths, config) is every item's status. */
struct put_start_view {
    Mc__PutStartResult r;
    struct pb_put_start p;
};

static int batch_put_start_core(struct mc_svc_batch *b)
{
    const Mc__BatchPutStartRequest *req = (const void *)b->req;
    struct mc_master_replicate_config cfg;
    int brc = req->n_value_lengths != b->n ? MC_ERR_INVALID_PARAMS
                                           : mc_svc_config_from_pb(req->config, &cfg);
    if (brc == 0 && req->config)
        brc = check_group_id(b->call, &mc__batch_put_start_request__descriptor);
    if (brc == 0 && b->n > 0)
        brc = mc_master_batch_put_start(b->m, b->client, b->keys, req->value_lengths, b->n, &cfg,
                                        b->res, b->rcs);
    for (size_t i = 0; brc != 0 && i < b->n; i++)
        b->rcs[i] = brc;
    return 0;
}

static void batch_put_start_encode(struct mc_svc_batch *b, ProtobufCMessage *resp)
{
    const struct mc_put_start_result *ps = b->res;
    struct put_start_view *v = b->views;
    for (size_t i = 0; i < b->n; i++) {
        mc__put_start_result__init(&v[i].r);
        v[i].r.status = b->rcs[i];
        if (b->rcs[i] == 0) {
            put_start_to_pb(&ps[i], &v[i].p, &v[i].r.n_replicas, &v[i].r.replicas);
            v[i].r.version = ps[i].version;
        }
        b->ptrs[i] = &v[i].r;
    }
    mc_svc_set_repeated(resp, "results", b->n, b->ptrs);
}

void mc_svc_batch_put_start(void *arg, struct mc_rpc_call *call)
{
    static const struct mc_svc_batch_spec spec = {
        .req = &mc__batch_put_start_request__descriptor,
        .resp = &mc__batch_put_start_response__descriptor,
        .items = "keys",
        .res_size = sizeof(struct mc_put_start_result),
        .view_size = sizeof(struct put_start_view),
        .core = batch_put_start_core,
        .encode = batch_put_start_encode,
    };
    mc_svc_batch(arg, call, &spec, NULL);
}

/* BatchPutEnd: the batch call takes all CRCs or none; a mixed batch goes item by item. */
static int batch_put_end_core(struct mc_svc_batch *b)
{
    const Mc__BatchPutEndRequest *req = (const void *)b->req;
    int rc = check_replica_type(req->replica_type);
    if (rc != 0) {
        for (size_t i = 0; i < b->n; i++)
            b->rcs[i] = rc;
        return 0;
    }
    uint64_t *vers = NULL;
    uint32_t *crcs = NULL;
    if (b->n > 0 && !(vers = malloc(b->n * (sizeof(*vers) + sizeof(*crcs)))))
        return MC_ERR_INTERNAL_ERROR;
    if (vers)
        crcs = (uint32_t *)(vers + b->n);
    size_t ncrc = 0;
    for (size_t i = 0; i < b->n; i++) {
        vers[i] = req->items[i]->version;
        crcs[i] = req->items[i]->crc32c;
        ncrc += req->items[i]->crc_valid ? 1 : 0;
    }
    if (ncrc == 0 || ncrc == b->n)
        rc = mc_master_batch_put_end(b->m, b->client, b->keys, vers, ncrc ? crcs : NULL, b->n,
                                     b->rcs);
    else
        for (size_t i = 0; i < b->n; i++)
            b->rcs[i] = mc_master_put_end(b->m, b->client, b->keys[i].data, b->keys[i].len, vers[i],
                                          crcs[i], req->items[i]->crc_valid);
    free(vers);
    return rc;
}

void mc_svc_batch_put_end(void *arg, struct mc_rpc_call *call)
{
    static const struct mc_svc_batch_spec spec = {
        .req = &mc__batch_put_end_request__descriptor,
        .resp = &mc__batch_put_end_response__descriptor,
        .items = "items",
        .item_key = "key",
        .core = batch_put_end_core,
    };
    mc_svc_batch(arg, call, &spec, NULL);
}

static int batch_put_revoke_core(struct mc_svc_batch *b)
{
    const Mc__BatchPutRevokeRequest *req = (const void *)b->req;
    int rc = check_replica_type(req->replica_type);
    if (rc == 0 && req->n_versions != 0 && req->n_versions != b->n)
        rc = MC_ERR_INVALID_PARAMS;
    if (rc != 0) {
        for (size_t i = 0; i < b->n; i++)
            b->rcs[i] = rc;
        return 0;
    }
    if (b->n == 0)
        return 0;
    return mc_master_batch_put_revoke(b->m, b->client, b->keys,
                                      req->n_versions ? req->versions : NULL, b->n, b->rcs);
}

void mc_svc_batch_put_revoke(void *arg, struct mc_rpc_call *call)
{
    static const struct mc_svc_batch_spec spec = {
        .req = &mc__batch_put_revoke_request__descriptor,
        .resp = &mc__batch_put_revoke_response__descriptor,
        .items = "keys",
        .core = batch_put_revoke_core,
    };
    mc_svc_batch(arg, call, &spec, NULL);
}

/* ---- Get ----------------------------------------------------------------------------------- */

void mc_svc_get_replica_list(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    struct mc_key_ref key;
    struct mc_id client;
    size_t blen;
    const uint8_t *body = mc_rpc_call_body(call, &blen);
    const char *bad = mc_svc_decode_key_request(body, blen, MC_SVC_GET_KEY_FIELD,
                                                MC_SVC_GET_CLIENT_FIELD, &key, &client);
    if (bad) {
        mc_rpc_call_refuse_body(call, bad);
        return;
    }
    struct mc_get_result g;
    int rc = mc_svc_check_client(svc->m, call, client);
    mc_master_promotion_defer_wake(); /* a promotion it admits: the holder after the reply */
    if (rc == 0)
        rc = mc_master_get_replica_list(svc->m, key.data, key.len, &g);
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
    } else {
        struct mc_svc_get_plan pl;
        struct mc_rpc_draft d = {0};
        mc_svc_get_reply_plan(0, &g, &pl);
        uint8_t *p = mc_rpc_draft_room(&d, pl.size);
        if (p)
            mc_svc_get_reply_put(p, &pl);
        mc_rpc_reply_draft(call, &d, p ? pl.size : SIZE_MAX); /* no room: INTERNAL_ERROR */
    }
    mc_master_promotion_wake_after(svc->m);
}

#define BGET_WINDOW 64
#define BGET_GUESS 160 /* bytes per key to reserve first: one replica with short strings */

/* One BatchGetReplicaList reply, written by hand window by window into its frame. */
struct bget {
    struct mc_rpc_draft d;
    size_t used;
};

static int bget_emit(void *arg, size_t first, size_t cnt, const struct mc_get_result *out,
                     const int *rcs)
{
    (void)first;
    struct bget *g = arg;
    for (size_t j = 0; j < cnt; j++) {
        struct mc_svc_get_plan pl;
        mc_svc_get_reply_plan(rcs[j], &out[j], &pl);
        uint8_t *base = mc_rpc_draft_room(&g->d, g->used + mc_svc_batch_item_size(&pl));
        if (!base)
            return MC_ERR_INTERNAL_ERROR;
        g->used = (size_t)(mc_svc_batch_item_put(base + g->used, &pl) - base);
    }
    return 0;
}

/* Answers the call itself (MC_SVC_DEFERRED) once every window is written; a whole-call error
 * is returned for mc_svc_batch to answer. */
static int batch_get_core(struct mc_svc_batch *b)
{
    if (b->n == 0)
        return 0;
    struct bget *g = b->ctx;
    size_t w = b->n < BGET_WINDOW ? b->n : BGET_WINDOW;
    struct mc_get_result *out = malloc(w * sizeof(*out));
    if (!out || !mc_rpc_draft_room(&g->d, b->n * BGET_GUESS)) {
        free(out);
        return MC_ERR_INTERNAL_ERROR;
    }
    int rc = mc_master_batch_get_replica_list_windowed(b->m, b->keys, b->n, w, out, b->rcs,
                                                       bget_emit, g);
    free(out);
    if (rc != 0)
        return rc;
    mc_rpc_reply_draft(b->call, &g->d, g->used);
    return MC_SVC_DEFERRED;
}

void mc_svc_batch_get_replica_list(void *arg, struct mc_rpc_call *call)
{
    static const struct mc_svc_batch_spec spec = {
        .req = &mc__batch_get_replica_list_request__descriptor,
        .resp = &mc__batch_get_replica_list_response__descriptor,
        .items = "keys",
        .core = batch_get_core,
    };
    struct bget g = {{0}, 0};
    mc_master_promotion_defer_wake(); /* a promotion it admits: the holder after the reply */
    mc_svc_batch(arg, call, &spec, &g);
    mc_master_promotion_wake_after(((struct mc_master_service *)arg)->m);
    mc_rpc_draft_free(&g.d); /* an error was answered instead */
}

/* ---- Exist --------------------------------------------------------------------------------- */

void mc_svc_exist_key(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    struct mc_key_ref key;
    size_t blen;
    const uint8_t *body = mc_rpc_call_body(call, &blen);
    const char *bad = mc_svc_decode_key_request(body, blen, MC_SVC_EXIST_KEY_FIELD, 0, &key, NULL);
    if (bad) {
        mc_rpc_call_refuse_body(call, bad);
        return;
    }
    bool exists = false;
    int rc = mc_master_exist_key(svc->m, key.data, key.len, &exists);
    Mc__ExistKeyResponse r = MC__EXIST_KEY_RESPONSE__INIT;
    r.exists = exists;
    mc_rpc_reply_msg(call, rc, &r.base);
}

/* BatchExistKey: res = the core's answers, views = their protobuf booleans. */
static int batch_exist_core(struct mc_svc_batch *b)
{
    return b->n > 0 ? mc_master_batch_exist_key(b->m, b->keys, b->n, b->res, b->rcs) : 0;
}

static void batch_exist_encode(struct mc_svc_batch *b, ProtobufCMessage *resp)
{
    const bool *ex = b->res;
    protobuf_c_boolean *pex = b->views;
    for (size_t i = 0; i < b->n; i++)
        pex[i] = b->rcs[i] == 0 && ex[i];
    mc_svc_set_repeated(resp, "exists", b->n, pex);
}

void mc_svc_batch_exist_key(void *arg, struct mc_rpc_call *call)
{
    static const struct mc_svc_batch_spec spec = {
        .req = &mc__batch_exist_key_request__descriptor,
        .resp = &mc__batch_exist_key_response__descriptor,
        .items = "keys",
        .no_client = true,
        .res_size = sizeof(bool),
        .view_size = sizeof(protobuf_c_boolean),
        .core = batch_exist_core,
        .encode = batch_exist_encode,
    };
    mc_svc_batch(arg, call, &spec, NULL);
}

/* ---- Remove -------------------------------------------------------------------------------- */

/* Remove answers once the delete rule is met: the core calls this (no master lock held) when
 * the key's disk copies are durably gone or their holders fenced. arg is the call. */
static void remove_done(void *arg, int rc)
{
    Mc__RemoveResponse r = MC__REMOVE_RESPONSE__INIT;
    mc_rpc_reply_msg(arg, rc, &r.base);
}

void mc_svc_remove(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(RemoveRequest, remove_request, req);
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(remove_request), req->key);
    int rc = mc_svc_check_client(svc->m, call, mc_svc_id_from_pb(req->client_id));
    if (rc == 0)
        rc = mc_master_remove_wait(svc->m, key.data, key.len, req->force, remove_done, call);
    FREE_REQ(req);
    if (rc == MC_MASTER_PENDING)
        return; /* remove_done answers */
    remove_done(call, rc);
}

/* A BatchRemove waiting for the delete rule: its statuses, final, until the answer. */
struct batch_remove_wait {
    struct mc_rpc_call *call;
    size_t n;
    int rcs[];
};

static void batch_remove_done(void *arg, int rc)
{
    struct batch_remove_wait *w = arg;
    if (rc != 0) {
        mc_rpc_reply_status(w->call, rc);
    } else {
        Mc__BatchRemoveResponse r = MC__BATCH_REMOVE_RESPONSE__INIT;
        r.n_statuses = w->n;
        r.statuses = w->rcs;
        mc_rpc_reply_msg(w->call, 0, &r.base);
    }
    free(w);
}

static int batch_remove_core(struct mc_svc_batch *b)
{
    const Mc__BatchRemoveRequest *req = (const void *)b->req;
    if (b->n == 0)
        return 0;
    struct batch_remove_wait *w = malloc(sizeof(*w) + b->n * sizeof(int));
    if (!w)
        return MC_ERR_INTERNAL_ERROR;
    w->call = b->call;
    w->n = b->n;
    int rc =
        mc_master_batch_remove_wait(b->m, b->keys, b->n, req->force, w->rcs, batch_remove_done, w);
    if (rc == MC_MASTER_PENDING)
        return MC_SVC_DEFERRED; /* batch_remove_done answers */
    if (rc == MC_OK)
        memcpy(b->rcs, w->rcs, b->n * sizeof(int));
    free(w);
    return rc;
}

void mc_svc_batch_remove(void *arg, struct mc_rpc_call *call)
{
    static const struct mc_svc_batch_spec spec = {
        .req = &mc__batch_remove_request__descriptor,
        .resp = &mc__batch_remove_response__descriptor,
        .items = "keys",
        .core = batch_remove_core,
    };
    mc_svc_batch(arg, call, &spec, NULL);
}
