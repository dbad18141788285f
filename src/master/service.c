/*
 * service.c - RPC adapters of the master (see service.h): decode -> mc_master_* -> encode.
 *
 * Layout: conversion helpers (ids, segments, replicate configs, replica descriptors), the
 * per-connection client binding, then one handler per method in proto order, then the table
 * that registers them. Handlers run on the connection's I/O thread and answer at once.
 *
 * Memory. Single-key replies are built on the stack (descriptors point into the core's result
 * struct, which owns the strings). Batch replies allocate one block per call for the core's
 * results and the protobuf views of them, freed after the reply is encoded (mc_rpc_reply_msg
 * copies the encoding).
 *
 * Mount epochs (DESIGN.md §6) belong to the core: every mount that creates a segment gets a
 * fresh one (segments.h). A MountSegment answer carries its segment's epoch, a ReMountSegment
 * answer one per segment (in request order), and every MEMORY replica descriptor the epoch of
 * its own segment (MemoryLocation.mount_epoch, from mc_replica_desc). The owner's peer server
 * refuses requests with another epoch (peer.proto), which stops a descriptor handed out before
 * the segment was unmounted (explicitly, by the client's expiry, or by a master restart) from
 * reading or writing bytes a later mount gave to another object.
 */
#include "master/service.h"
#include "master/service_internal.h"
#include "master/service_wire.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "master/master.h"
#include "master/promotion.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"

#define COMP "service"

/* What a connection is bound to (rpc_server per-connection context). */
struct conn_bind {
    struct mc_id client;
};

/* ---- conversions --------------------------------------------------------------------------- */

struct mc_id mc_svc_id_from_pb(const Mc__Uuid *u)
{
    struct mc_id id = {0, 0};
    if (u) {
        id.hi = u->hi;
        id.lo = u->lo;
    }
    return id;
}

void mc_svc_id_to_pb(struct mc_id id, Mc__Uuid *u)
{
    mc__uuid__init(u);
    u->hi = id.hi;
    u->lo = id.lo;
}

/* Copies a protobuf string into a fixed field; -1 if it does not fit. */
static int copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        return -1;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
    return 0;
}

static int segment_from_pb(const Mc__Segment *s, struct mc_segment_desc *d)
{
    memset(d, 0, sizeof(*d));
    if (!s)
        return MC_ERR_INVALID_PARAMS;
    d->id = mc_svc_id_from_pb(s->id);
    d->base = s->base_addr;
    d->size = s->size;
    if (copy_str(d->name, sizeof(d->name), s->name) ||
        copy_str(d->endpoint, sizeof(d->endpoint), s->endpoint))
        return MC_ERR_INVALID_PARAMS;
    switch (s->protocol) {
    case MC__PROTOCOL__PROTOCOL_TCP:
        strcpy(d->protocol, "tcp");
        break;
    case MC__PROTOCOL__PROTOCOL_RDMA:
        strcpy(d->protocol, "rdma");
        if (s->rdma) {
            d->rkey = s->rdma->rkey;
            if (copy_str(d->transport_meta, sizeof(d->transport_meta), s->rdma->device))
                return MC_ERR_INVALID_PARAMS;
        }
        break;
    default:
        return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

static Mc__Protocol protocol_to_pb(const char *p)
{
    return strcmp(p, "rdma") == 0 ? MC__PROTOCOL__PROTOCOL_RDMA : MC__PROTOCOL__PROTOCOL_TCP;
}

static int config_from_pb(const Mc__ReplicateConfig *p, struct mc_master_replicate_config *c)
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

/* Protobuf view of one replica descriptor; strings point into the source descriptor. */
struct pb_replica {
    Mc__ReplicaDescriptor d;
    Mc__MemoryLocation mem;
    Mc__LocalDiskLocation disk;
    Mc__Uuid uuid;
};

static void replica_to_pb(const struct mc_replica_desc *r, struct pb_replica *p)
{
    mc__replica_descriptor__init(&p->d);
    p->d.id = r->id;
    p->d.status = (Mc__ReplicaStatus)r->status;
    if (r->type == MC_REPLICA_TYPE_LOCAL_DISK) {
        p->d.type = MC__REPLICA_TYPE__RT_LOCAL_DISK;
        mc__local_disk_location__init(&p->disk);
        mc_svc_id_to_pb(r->u.disk.holder, &p->uuid);
        p->disk.holder = &p->uuid;
        p->disk.endpoint = (char *)r->u.disk.endpoint;
        p->disk.size = r->size;
        p->d.local_disk = &p->disk;
    } else {
        p->d.type = MC__REPLICA_TYPE__RT_MEMORY;
        mc__memory_location__init(&p->mem);
        mc_svc_id_to_pb(r->u.mem.segment_id, &p->uuid);
        p->mem.segment_id = &p->uuid;
        p->mem.segment_name = (char *)r->u.mem.segment_name;
        p->mem.offset = r->u.mem.offset;
        p->mem.size = r->size;
        p->mem.endpoint = (char *)r->u.mem.endpoint;
        p->mem.protocol = protocol_to_pb(r->u.mem.protocol);
        p->mem.remote_addr = r->u.mem.addr;
        p->mem.rkey = r->u.mem.rkey;
        p->mem.mount_epoch = r->u.mem.mount_epoch;
        p->d.memory = &p->mem;
    }
}

/* Fills r (and reps/ptrs, g->nreplicas of each, capped at MC_MAX_REPLICAS) from a get result. */
static void get_fill(int status, const struct mc_get_result *g, Mc__GetReplicaListResponse *r,
                     struct pb_replica *reps, Mc__ReplicaDescriptor **ptrs)
{
    mc__get_replica_list_response__init(r);
    r->status = status;
    if (status != 0)
        return;
    uint32_t n = g->nreplicas < MC_MAX_REPLICAS ? g->nreplicas : MC_MAX_REPLICAS;
    for (uint32_t i = 0; i < n; i++) {
        replica_to_pb(&g->replicas[i], &reps[i]);
        ptrs[i] = &reps[i].d;
    }
    r->n_replicas = n;
    r->replicas = ptrs;
    r->lease_ttl_ms = g->lease_ttl_ms;
    r->size = g->size;
    r->version = g->version;
    r->crc32c = g->crc32c;
    r->crc_valid = g->has_crc;
}

/* Protobuf view of one get result (GetReplicaListResponse). */
struct pb_get {
    Mc__GetReplicaListResponse r;
    struct pb_replica reps[MC_MAX_REPLICAS];
    Mc__ReplicaDescriptor *ptrs[MC_MAX_REPLICAS];
};

static void get_to_pb(int status, const struct mc_get_result *g, struct pb_get *p)
{
    get_fill(status, g, &p->r, p->reps, p->ptrs);
}

/* ---- keys holding a NUL ------------------------------------------------------------------- */

/* protobuf-c cuts a decoded string at its first NUL: see service_wire.h. */
static void mark_nul_keys(struct mc_rpc_call *call, uint32_t num, uint32_t sub, bool single,
                          struct mc_key_ref *keys, size_t n)
{
    size_t len = 0;
    const uint8_t *body = mc_rpc_call_body(call, &len);
    mc_svc_mark_nul_strings(body, len, num, sub, single, keys, n);
}

/* Number of a request's field, from its descriptor (0, matching nothing, if absent). */
uint32_t mc_svc_field_num(const ProtobufCMessageDescriptor *d, const char *name)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, name);
    return f ? f->id : 0;
}

/* INVALID_PARAMS when the request's ReplicateConfig (field "config" of desc) has a group id
 * holding a NUL: cut at it, the key would join another group (or none). */
static int check_group_id(struct mc_rpc_call *call, const ProtobufCMessageDescriptor *desc)
{
    struct mc_key_ref k = {.data = "", .len = 1};
    mark_nul_keys(call, mc_svc_field_num(desc, "config"),
                  mc_svc_field_num(&mc__replicate_config__descriptor, "group_id"), true, &k, 1);
    return k.len == 0 ? MC_ERR_INVALID_PARAMS : 0;
}

/* The key of a single-key request (field num): len 0 when it holds a NUL. */
struct mc_key_ref mc_svc_key_from_pb(struct mc_rpc_call *call, uint32_t num, const char *key)
{
    struct mc_key_ref k = {.data = key ? key : "", .len = key ? strlen(key) : 0};
    mark_nul_keys(call, num, 0, true, &k, 1);
    return k;
}

/* Builds the key list of a batch request (field num); INVALID_PARAMS above
 * MC_SERVICE_MAX_BATCH. */
int mc_svc_keys_from_pb(struct mc_rpc_call *call, uint32_t num, char **keys, size_t n,
                        struct mc_key_ref **out)
{
    *out = NULL;
    if (n > MC_SERVICE_MAX_BATCH)
        return MC_ERR_INVALID_PARAMS;
    if (n == 0)
        return 0;
    struct mc_key_ref *k = malloc(n * sizeof(*k));
    if (!k)
        return MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < n; i++) {
        k[i].data = keys[i] ? keys[i] : "";
        k[i].len = strlen(k[i].data);
    }
    mark_nul_keys(call, num, 0, false, k, n);
    *out = k;
    return 0;
}

/* ---- client binding -------------------------------------------------------------------------- */

static void bind_client(struct mc_rpc_call *call, struct mc_id id)
{
    void **ctx = mc_rpc_call_conn_ctx(call);
    if (*ctx || mc_id_is_zero(id))
        return;
    struct conn_bind *b = malloc(sizeof(*b));
    if (!b) {
        mc_warn(COMP, "cannot bind client to connection (out of memory)", "conn=%llu",
                (unsigned long long)mc_rpc_call_conn_id(call));
        return;
    }
    b->client = id;
    *ctx = b;
}

/* ILLEGAL_CLIENT when the connection is bound to another client than the (non-zero) id named.
 * A connection is bound by the first request that names a client id, whatever the method: one
 * that has not pinged or mounted yet cannot act for one client and then another. (Only
 * authentication stops a fresh connection from claiming an id in the first place.) */
int mc_svc_check_client(struct mc_rpc_call *call, struct mc_id id)
{
    struct conn_bind *b = *mc_rpc_call_conn_ctx(call);
    if (!b) {
        bind_client(call, id);
        return 0;
    }
    if (mc_id_is_zero(id) || mc_id_eq(b->client, id))
        return 0;
    char want[MC_ID_STRLEN], got[MC_ID_STRLEN];
    mc_warn(COMP, "request names another client than the connection's",
            "method=%s conn=%llu "
            "bound=%s named=%s",
            mc_method_name(mc_rpc_call_method(call)), (unsigned long long)mc_rpc_call_conn_id(call),
            mc_id_format(b->client, want), mc_id_format(id, got));
    return MC_ERR_ILLEGAL_CLIENT;
}

void mc_master_service_on_close(void *arg, uint64_t conn_id, void *conn_ctx)
{
    (void)arg;
    (void)conn_id;
    free(conn_ctx);
}

/* ---- handshake, liveness, segments ------------------------------------------------------------
 */

static void h_service_ready(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    Mc__ServiceReadyResponse r = MC__SERVICE_READY_RESPONSE__INIT;
    r.version = (char *)MC_SERVICE_VERSION;
    r.proto_version = MC_PROTO_VERSION;
    mc_rpc_reply_msg(call, 0, &r.base);
}

static void h_ping(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(PingRequest, ping_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    FREE_REQ(req);
    struct mc_ping_result pr;
    int rc = mc_svc_check_client(call, client);
    if (rc == 0)
        rc = mc_master_ping(svc->m, client, &pr);
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        return;
    }
    bind_client(call, client);
    Mc__PingResponse r = MC__PING_RESPONSE__INIT;
    r.view_version = pr.view_version;
    r.client_status = (Mc__ClientStatus)pr.status;
    r.client_ttl_ms = mc_master_config_get(svc->m)->client_ttl_ms;
    mc_rpc_reply_msg(call, 0, &r.base);
}

static void h_mount_segment(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(MountSegmentRequest, mount_segment_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_segment_desc d;
    int rc = segment_from_pb(req->segment, &d);
    FREE_REQ(req);
    if (rc == 0)
        rc = mc_svc_check_client(call, client);
    uint64_t epoch = 0;
    if (rc == 0)
        rc = mc_master_mount_segment(svc->m, client, &d, &epoch);
    if (rc == 0)
        bind_client(call, client);
    Mc__MountSegmentResponse r = MC__MOUNT_SEGMENT_RESPONSE__INIT;
    r.mount_epoch = epoch;
    mc_rpc_reply_msg(call, rc, &r.base);
}

static void h_remount_segment(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(ReMountSegmentRequest, re_mount_segment_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_segment_desc *d = NULL;
    uint64_t *epochs = NULL;
    size_t n = req->n_segments;
    int rc = n > MC_SERVICE_MAX_BATCH ? MC_ERR_INVALID_PARAMS : 0;
    if (rc == 0 && n > 0 &&
        (!(d = calloc(n, sizeof(*d))) || !(epochs = calloc(n, sizeof(*epochs)))))
        rc = MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = segment_from_pb(req->segments[i], &d[i]);
    FREE_REQ(req);
    if (rc == 0)
        rc = mc_svc_check_client(call, client);
    if (rc == 0)
        rc = mc_master_remount_segments(svc->m, client, d, n, epochs);
    if (rc == 0)
        bind_client(call, client);
    free(d);
    Mc__ReMountSegmentResponse r = MC__RE_MOUNT_SEGMENT_RESPONSE__INIT;
    if (rc == 0) {
        r.n_mount_epochs = n;
        r.mount_epochs = epochs;
    }
    mc_rpc_reply_msg(call, rc, &r.base);
    free(epochs);
}

static void h_unmount_segment(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(UnmountSegmentRequest, unmount_segment_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_id seg = mc_svc_id_from_pb(req->segment_id);
    FREE_REQ(req);
    int rc = mc_svc_check_client(call, client);
    if (rc == 0)
        rc = mc_master_unmount_segment(svc->m, client, seg);
    Mc__UnmountSegmentResponse r = MC__UNMOUNT_SEGMENT_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}

/* ---- Put ------------------------------------------------------------------------------------- */

/* Puts only create MEMORY replicas, so ALL and MEMORY select the same ones. */
static int check_replica_type(Mc__ReplicaType t)
{
    if (t == MC__REPLICA_TYPE__RT_ALL || t == MC__REPLICA_TYPE__RT_MEMORY)
        return 0;
    return t == MC__REPLICA_TYPE__RT_LOCAL_DISK ? MC_ERR_NOT_SUPPORTED : MC_ERR_INVALID_PARAMS;
}

struct pb_put_start {
    struct pb_replica reps[MC_MAX_REPLICAS];
    Mc__ReplicaDescriptor *ptrs[MC_MAX_REPLICAS];
};

static void put_start_to_pb(const struct mc_put_start_result *ps, struct pb_put_start *p,
                            size_t *n_out, Mc__ReplicaDescriptor ***out)
{
    uint32_t n = ps->nreplicas < MC_MAX_REPLICAS ? ps->nreplicas : MC_MAX_REPLICAS;
    for (uint32_t i = 0; i < n; i++) {
        replica_to_pb(&ps->replicas[i], &p->reps[i]);
        p->ptrs[i] = &p->reps[i].d;
    }
    *n_out = n;
    *out = p->ptrs;
}

static void h_put_start(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(PutStartRequest, put_start_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_master_replicate_config cfg;
    struct mc_put_start_result ps;
    int rc = config_from_pb(req->config, &cfg);
    if (rc == 0 && req->config)
        rc = check_group_id(call, &mc__put_start_request__descriptor);
    if (rc == 0)
        rc = mc_svc_check_client(call, client);
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(put_start_request), req->key);
    if (rc == 0) /* cfg points into req: call before freeing it */
        rc = mc_master_put_start(svc->m, client, key.data, key.len, req->value_length, &cfg, &ps);
    FREE_REQ(req);
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        return;
    }
    Mc__PutStartResponse r = MC__PUT_START_RESPONSE__INIT;
    struct pb_put_start p;
    put_start_to_pb(&ps, &p, &r.n_replicas, &r.replicas);
    r.version = ps.version;
    mc_rpc_reply_msg(call, 0, &r.base);
}

static void h_put_end(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(PutEndRequest, put_end_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    int rc = check_replica_type(req->replica_type);
    if (rc == 0)
        rc = mc_svc_check_client(call, client);
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(put_end_request), req->key);
    if (rc == 0)
        rc = mc_master_put_end(svc->m, client, key.data, key.len, req->version, req->crc32c,
                               req->crc_valid);
    FREE_REQ(req);
    Mc__PutEndResponse r = MC__PUT_END_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}

static void h_put_revoke(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(PutRevokeRequest, put_revoke_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    int rc = check_replica_type(req->replica_type);
    if (rc == 0)
        rc = mc_svc_check_client(call, client);
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(put_revoke_request), req->key);
    if (rc == 0)
        rc = mc_master_put_revoke(svc->m, client, key.data, key.len, req->version);
    FREE_REQ(req);
    Mc__PutRevokeResponse r = MC__PUT_REVOKE_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}

static void h_batch_put_start(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(BatchPutStartRequest, batch_put_start_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    size_t n = req->n_keys;
    struct mc_key_ref *keys = NULL;
    struct mc_put_start_result *ps = NULL;
    int *rcs = NULL;
    Mc__PutStartResult *items = NULL, **item_ptrs = NULL;
    struct pb_put_start *views = NULL;
    struct mc_master_replicate_config cfg;
    int rc = mc_svc_keys_from_pb(call, KEYS(batch_put_start_request), req->keys, n, &keys);
    if (rc == 0)
        rc = mc_svc_check_client(call, client);
    if (rc != 0)
        goto fail;
    if (n > 0) {
        ps = malloc(n * sizeof(*ps));
        rcs = malloc(n * sizeof(*rcs));
        items = malloc(n * sizeof(*items));
        item_ptrs = malloc(n * sizeof(*item_ptrs));
        views = malloc(n * sizeof(*views));
        if (!ps || !rcs || !items || !item_ptrs || !views) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto fail;
        }
    }
    int brc = req->n_value_lengths != n ? MC_ERR_INVALID_PARAMS : config_from_pb(req->config, &cfg);
    if (brc == 0 && req->config)
        brc = check_group_id(call, &mc__batch_put_start_request__descriptor);
    if (brc == 0 && n > 0)
        brc = mc_master_batch_put_start(svc->m, client, keys, req->value_lengths, n, &cfg, ps, rcs);
    for (size_t i = 0; i < n; i++) {
        mc__put_start_result__init(&items[i]);
        items[i].status = brc != 0 ? brc : rcs[i];
        if (items[i].status == 0) {
            put_start_to_pb(&ps[i], &views[i], &items[i].n_replicas, &items[i].replicas);
            items[i].version = ps[i].version;
        }
        item_ptrs[i] = &items[i];
    }
    Mc__BatchPutStartResponse r = MC__BATCH_PUT_START_RESPONSE__INIT;
    r.n_results = n;
    r.results = item_ptrs;
    mc_rpc_reply_msg(call, 0, &r.base);
    goto out;
fail:
    mc_rpc_reply_status(call, rc);
out:
    FREE_REQ(req);
    free(keys);
    free(ps);
    free(rcs);
    free(items);
    free(item_ptrs);
    free(views);
}

/* Replies a batch of per-item statuses with one of the statuses-only response types. */
void mc_svc_reply_statuses(struct mc_rpc_call *call, ProtobufCMessage *msg, size_t *n_field,
                           int32_t **field, int *rcs, size_t n)
{
    *n_field = n;
    *field = (int32_t *)rcs;
    mc_rpc_reply_msg(call, 0, msg);
}

static void h_batch_put_end(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(BatchPutEndRequest, batch_put_end_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    size_t n = req->n_items;
    struct mc_key_ref *keys = NULL;
    uint32_t *crcs = NULL;
    uint64_t *vers = NULL;
    int *rcs = NULL;
    int rc = n > MC_SERVICE_MAX_BATCH ? MC_ERR_INVALID_PARAMS : mc_svc_check_client(call, client);
    if (rc == 0 && n > 0 &&
        (!(keys = malloc(n * sizeof(*keys))) || !(crcs = malloc(n * sizeof(*crcs))) ||
         !(vers = malloc(n * sizeof(*vers))) || !(rcs = malloc(n * sizeof(*rcs)))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        goto out;
    }
    size_t ncrc = 0;
    for (size_t i = 0; i < n; i++) {
        const Mc__PutEndItem *it = req->items[i];
        keys[i].data = it->key ? it->key : "";
        keys[i].len = strlen(keys[i].data);
        crcs[i] = it->crc32c;
        vers[i] = it->version;
        ncrc += it->crc_valid ? 1 : 0;
    }
    mark_nul_keys(call, mc_svc_field_num(&mc__batch_put_end_request__descriptor, "items"),
                  mc_svc_field_num(&mc__put_end_item__descriptor, "key"), false, keys, n);
    int trc = check_replica_type(req->replica_type);
    if (trc != 0) {
        for (size_t i = 0; i < n; i++)
            rcs[i] = trc;
    } else if (ncrc == 0 || ncrc == n) {
        rc = mc_master_batch_put_end(svc->m, client, keys, vers, ncrc ? crcs : NULL, n, rcs);
    } else { /* mixed: the batch call takes all CRCs or none */
        for (size_t i = 0; i < n; i++)
            rcs[i] = mc_master_put_end(svc->m, client, keys[i].data, keys[i].len, vers[i], crcs[i],
                                       req->items[i]->crc_valid);
    }
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        goto out;
    }
    Mc__BatchPutEndResponse r = MC__BATCH_PUT_END_RESPONSE__INIT;
    mc_svc_reply_statuses(call, &r.base, &r.n_statuses, &r.statuses, rcs, n);
out:
    FREE_REQ(req);
    free(keys);
    free(crcs);
    free(vers);
    free(rcs);
}

static void h_batch_put_revoke(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(BatchPutRevokeRequest, batch_put_revoke_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    size_t n = req->n_keys;
    struct mc_key_ref *keys = NULL;
    int *rcs = NULL;
    int rc = mc_svc_keys_from_pb(call, KEYS(batch_put_revoke_request), req->keys, n, &keys);
    if (rc == 0)
        rc = mc_svc_check_client(call, client);
    if (rc == 0 && n > 0 && !(rcs = malloc(n * sizeof(*rcs))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0) {
        int trc = check_replica_type(req->replica_type);
        if (trc == 0 && req->n_versions != 0 && req->n_versions != n)
            trc = MC_ERR_INVALID_PARAMS;
        if (trc != 0) {
            for (size_t i = 0; i < n; i++)
                rcs[i] = trc;
        } else if (n > 0) {
            rc = mc_master_batch_put_revoke(svc->m, client, keys,
                                            req->n_versions ? req->versions : NULL, n, rcs);
        }
    }
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
    } else {
        Mc__BatchPutRevokeResponse r = MC__BATCH_PUT_REVOKE_RESPONSE__INIT;
        mc_svc_reply_statuses(call, &r.base, &r.n_statuses, &r.statuses, rcs, n);
    }
    FREE_REQ(req);
    free(keys);
    free(rcs);
}

/* ---- Get / Exist -------------------------------------------------------------------------------
 */

static void h_get_replica_list(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(GetReplicaListRequest, get_replica_list_request, req);
    struct mc_get_result g;
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(get_replica_list_request), req->key);
    int rc = mc_svc_check_client(call, mc_svc_id_from_pb(req->client_id));
    if (rc == 0)
        rc = mc_master_get_replica_list(svc->m, key.data, key.len, &g);
    FREE_REQ(req);
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        return;
    }
    struct pb_get p;
    get_to_pb(0, &g, &p);
    mc_rpc_reply_msg(call, 0, &p.r.base);
}

/* BatchGetReplicaList replies are sized by what is there: the core answers windows of
 * BGET_WINDOW keys into one fixed scratch, and each key's reply takes one response struct plus,
 * from an arena, one descriptor per replica it actually has; the segment names and endpoints the
 * descriptors point to are copied once per distinct string (a few segments serve most keys). */
#define BGET_WINDOW 64
#define BGET_CHUNK 65536
#define BGET_STRS 16

struct bget_chunk {
    struct bget_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

struct bget {
    Mc__GetReplicaListResponse *items, **ptrs; /* one per key */
    struct bget_chunk *chunks;
    size_t first_cap; /* the first chunk's size: a guess from the key count */
    const char *strs[BGET_STRS];
    unsigned nstrs, next_str;
};

static void *bget_alloc(struct bget *b, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    struct bget_chunk *c = b->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = c ? BGET_CHUNK : b->first_cap;
        if (cap < n)
            cap = n;
        if (!(c = malloc(sizeof(*c) + cap)))
            return NULL;
        c->next = b->chunks;
        c->used = 0;
        c->cap = cap;
        b->chunks = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

/* A copy of s that lives as long as the reply, shared with the keys that had the same string. */
static char *bget_str(struct bget *b, const char *s)
{
    for (unsigned i = 0; i < b->nstrs; i++)
        if (!strcmp(b->strs[i], s))
            return (char *)b->strs[i];
    size_t len = strlen(s) + 1;
    char *d = bget_alloc(b, len);
    if (!d)
        return NULL;
    memcpy(d, s, len);
    b->strs[b->next_str] = d;
    b->next_str = (b->next_str + 1) % BGET_STRS;
    if (b->nstrs < BGET_STRS)
        b->nstrs++;
    return d;
}

static int bget_emit(void *arg, size_t first, size_t cnt, const struct mc_get_result *out,
                     const int *rcs)
{
    struct bget *b = arg;
    for (size_t j = 0; j < cnt; j++) {
        Mc__GetReplicaListResponse *r = &b->items[first + j];
        b->ptrs[first + j] = r;
        uint32_t n = rcs[j] != 0                          ? 0
                     : out[j].nreplicas < MC_MAX_REPLICAS ? out[j].nreplicas
                                                          : MC_MAX_REPLICAS;
        struct pb_replica *reps = NULL;
        Mc__ReplicaDescriptor **ptrs = NULL;
        if (n && (!(reps = bget_alloc(b, n * sizeof(*reps))) ||
                  !(ptrs = bget_alloc(b, n * sizeof(*ptrs)))))
            return MC_ERR_INTERNAL_ERROR;
        get_fill(rcs[j], &out[j], r, reps, ptrs);
        for (uint32_t k = 0; k < n; k++) { /* the strings out[] holds are reused next window */
            if (reps[k].d.memory) {
                reps[k].mem.segment_name = bget_str(b, reps[k].mem.segment_name);
                reps[k].mem.endpoint = bget_str(b, reps[k].mem.endpoint);
                if (!reps[k].mem.segment_name || !reps[k].mem.endpoint)
                    return MC_ERR_INTERNAL_ERROR;
            } else if (reps[k].d.local_disk) {
                if (!(reps[k].disk.endpoint = bget_str(b, reps[k].disk.endpoint)))
                    return MC_ERR_INTERNAL_ERROR;
            }
        }
    }
    return 0;
}

static void h_batch_get_replica_list(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(BatchGetReplicaListRequest, batch_get_replica_list_request, req);
    size_t n = req->n_keys;
    size_t w = n < BGET_WINDOW ? n : BGET_WINDOW;
    struct mc_key_ref *keys = NULL;
    struct mc_get_result *g = NULL;
    int *rcs = NULL;
    struct bget b = {0};
    /* ~1 replica of ~200 bytes of descriptors per key; later chunks are BGET_CHUNK */
    b.first_cap = n * 256 < BGET_CHUNK ? n * 256 : BGET_CHUNK;
    int rc = mc_svc_keys_from_pb(call, KEYS(batch_get_replica_list_request), req->keys, n, &keys);
    if (rc == 0)
        rc = mc_svc_check_client(call, mc_svc_id_from_pb(req->client_id));
    if (rc == 0 && n > 0 &&
        (!(g = malloc(w * sizeof(*g))) || !(rcs = malloc(w * sizeof(*rcs))) ||
         !(b.items = malloc(n * sizeof(*b.items))) || !(b.ptrs = malloc(n * sizeof(*b.ptrs)))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0 && n > 0)
        rc = mc_master_batch_get_replica_list_windowed(svc->m, keys, n, w, g, rcs, bget_emit, &b);
    free(g); /* before encoding: the reply holds no pointer into it */
    g = NULL;
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        goto out;
    }
    Mc__BatchGetReplicaListResponse r = MC__BATCH_GET_REPLICA_LIST_RESPONSE__INIT;
    r.n_results = n;
    r.results = b.ptrs;
    mc_rpc_reply_msg(call, 0, &r.base);
out:
    FREE_REQ(req);
    free(keys);
    free(rcs);
    free(b.items);
    free(b.ptrs);
    for (struct bget_chunk *c = b.chunks, *nx; c; c = nx) {
        nx = c->next;
        free(c);
    }
}

static void h_exist_key(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(ExistKeyRequest, exist_key_request, req);
    bool exists = false;
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(exist_key_request), req->key);
    int rc = mc_master_exist_key(svc->m, key.data, key.len, &exists);
    FREE_REQ(req);
    Mc__ExistKeyResponse r = MC__EXIST_KEY_RESPONSE__INIT;
    r.exists = exists;
    mc_rpc_reply_msg(call, rc, &r.base);
}

static void h_batch_exist_key(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(BatchExistKeyRequest, batch_exist_key_request, req);
    size_t n = req->n_keys;
    struct mc_key_ref *keys = NULL;
    bool *ex = NULL;
    protobuf_c_boolean *pex = NULL;
    int *rcs = NULL;
    int rc = mc_svc_keys_from_pb(call, KEYS(batch_exist_key_request), req->keys, n, &keys);
    if (rc == 0 && n > 0 &&
        (!(ex = malloc(n * sizeof(*ex))) || !(pex = malloc(n * sizeof(*pex))) ||
         !(rcs = malloc(n * sizeof(*rcs)))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0 && n > 0)
        rc = mc_master_batch_exist_key(svc->m, keys, n, ex, rcs);
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        pex[i] = rcs[i] == 0 && ex[i];
    Mc__BatchExistKeyResponse r = MC__BATCH_EXIST_KEY_RESPONSE__INIT;
    r.n_exists = n;
    r.exists = pex;
    mc_svc_reply_statuses(call, &r.base, &r.n_statuses, &r.statuses, rcs, n);
out:
    FREE_REQ(req);
    free(keys);
    free(ex);
    free(pex);
    free(rcs);
}

/* ---- Remove -----------------------------------------------------------------------------------
 */

static void h_remove(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(RemoveRequest, remove_request, req);
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(remove_request), req->key);
    int rc = mc_svc_check_client(call, mc_svc_id_from_pb(req->client_id));
    if (rc == 0)
        rc = mc_master_remove(svc->m, key.data, key.len, req->force);
    FREE_REQ(req);
    Mc__RemoveResponse r = MC__REMOVE_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}

static void h_batch_remove(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(BatchRemoveRequest, batch_remove_request, req);
    size_t n = req->n_keys;
    struct mc_key_ref *keys = NULL;
    int *rcs = NULL;
    int rc = mc_svc_keys_from_pb(call, KEYS(batch_remove_request), req->keys, n, &keys);
    if (rc == 0)
        rc = mc_svc_check_client(call, mc_svc_id_from_pb(req->client_id));
    if (rc == 0 && n > 0 && !(rcs = malloc(n * sizeof(*rcs))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0 && n > 0)
        rc = mc_master_batch_remove(svc->m, keys, n, req->force, rcs);
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
    } else {
        Mc__BatchRemoveResponse r = MC__BATCH_REMOVE_RESPONSE__INIT;
        mc_svc_reply_statuses(call, &r.base, &r.n_statuses, &r.statuses, rcs, n);
    }
    FREE_REQ(req);
    free(keys);
    free(rcs);
}

static void h_remove_all(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(RemoveAllRequest, remove_all_request, req);
    uint64_t removed = 0;
    int rc = mc_svc_check_client(call, mc_svc_id_from_pb(req->client_id));
    if (rc == 0)
        rc = mc_master_remove_all(svc->m, req->force, &removed);
    FREE_REQ(req);
    Mc__RemoveAllResponse r = MC__REMOVE_ALL_RESPONSE__INIT;
    r.removed = removed;
    mc_rpc_reply_msg(call, rc, &r.base);
}

/* ---- promotion (holder side; promotion.h) -------------------------------------------------- */

#define PROMO_MAX_WAIT_MS 60000u /* a heartbeat parks at most this long */

/* Answers a PromotionObjectHeartbeat with its tasks (mailbox reply: no master lock held). */
static void promo_hb_reply(void *arg, struct mc_task_list *tasks)
{
    struct mc_rpc_call *call = arg;
    size_t n = tasks->n;
    Mc__PromotionTaskItem *items = NULL, **ptrs = NULL;
    if (n && (!(items = malloc(n * sizeof(*items))) || !(ptrs = malloc(n * sizeof(*ptrs))))) {
        /* the tasks stay in flight in the mailbox; the reaper ends them */
        mc_rpc_reply_status(call, MC_ERR_INTERNAL_ERROR);
        goto out;
    }
    size_t i = 0;
    for (struct mc_task *t = tasks->head; t && i < n; t = t->next, i++) {
        mc__promotion_task_item__init(&items[i]);
        items[i].task_id = t->task_id;
        items[i].key = t->key;
        items[i].size = t->size;
        items[i].version = t->version;
        items[i].crc32c = t->crc32c;
        items[i].crc_valid = t->crc_valid;
        ptrs[i] = &items[i];
    }
    Mc__PromotionObjectHeartbeatResponse r = MC__PROMOTION_OBJECT_HEARTBEAT_RESPONSE__INIT;
    r.n_items = i;
    r.items = ptrs;
    mc_rpc_reply_msg(call, 0, &r.base);
out:
    free(items);
    free(ptrs);
    mc_task_list_free(tasks);
}

static void h_promotion_heartbeat(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(PromotionObjectHeartbeatRequest, promotion_object_heartbeat_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    uint32_t wait = req->wait_ms < PROMO_MAX_WAIT_MS ? req->wait_ms : PROMO_MAX_WAIT_MS;
    uint32_t max = req->max_items;
    FREE_REQ(req);
    int rc = mc_svc_check_client(call, client);
    if (rc == 0) /* answered now (1), parked (0), or refused (< 0: not answered) */
        rc = mc_master_promotion_heartbeat(svc->m, client, max, wait, promo_hb_reply, call);
    if (rc < 0)
        mc_rpc_reply_status(call, rc);
}

static void h_promotion_alloc_start(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(PromotionAllocStartRequest, promotion_alloc_start_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_replica_desc d;
    int rc = req->n_preferred_segments > MC_SERVICE_MAX_BATCH ? MC_ERR_INVALID_PARAMS
                                                              : mc_svc_check_client(call, client);
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(promotion_alloc_start_request), req->key);
    if (rc == 0)
        rc = mc_master_promotion_alloc_start(
            svc->m, client, req->task_id, key.data, key.len, req->size,
            (const char *const *)req->preferred_segments, req->n_preferred_segments, &d);
    FREE_REQ(req);
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        return;
    }
    struct pb_replica p;
    replica_to_pb(&d, &p);
    Mc__PromotionAllocStartResponse r = MC__PROMOTION_ALLOC_START_RESPONSE__INIT;
    r.replica = &p.d;
    mc_rpc_reply_msg(call, 0, &r.base);
}

static void h_notify_promotion_success(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(NotifyPromotionSuccessRequest, notify_promotion_success_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    int rc = mc_svc_check_client(call, client);
    struct mc_key_ref key =
        mc_svc_key_from_pb(call, KEY(notify_promotion_success_request), req->key);
    if (rc == 0)
        rc = mc_master_promotion_success(svc->m, client, req->task_id, key.data, key.len);
    FREE_REQ(req);
    Mc__NotifyPromotionSuccessResponse r = MC__NOTIFY_PROMOTION_SUCCESS_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}

static void h_notify_promotion_failure(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(NotifyPromotionFailureRequest, notify_promotion_failure_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    int rc = mc_svc_check_client(call, client);
    struct mc_key_ref key =
        mc_svc_key_from_pb(call, KEY(notify_promotion_failure_request), req->key);
    if (rc == 0)
        rc = mc_master_promotion_failure(svc->m, client, req->task_id, key.data, key.len,
                                         req->reason);
    FREE_REQ(req);
    Mc__NotifyPromotionFailureResponse r = MC__NOTIFY_PROMOTION_FAILURE_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}

/* ---- admin ------------------------------------------------------------------------------------
 */

static int64_t ms_left(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

static void h_query_key(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(QueryKeyRequest, query_key_request, req);
    struct mc_key_info ki;
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(query_key_request), req->key);
    int rc = mc_master_query_key(svc->m, key.data, key.len, &ki);
    if (rc != 0) {
        FREE_REQ(req);
        mc_rpc_reply_status(call, rc);
        return;
    }
    Mc__QueryKeyResponse r = MC__QUERY_KEY_RESPONSE__INIT;
    struct pb_replica reps[MC_MAX_REPLICAS];
    Mc__ReplicaInfo infos[MC_MAX_REPLICAS];
    Mc__ReplicaInfo *ptrs[MC_MAX_REPLICAS];
    uint32_t n = ki.nreplicas < MC_MAX_REPLICAS ? ki.nreplicas : MC_MAX_REPLICAS;
    for (uint32_t i = 0; i < n; i++) {
        replica_to_pb(&ki.replicas[i], &reps[i]);
        mc__replica_info__init(&infos[i]);
        infos[i].replica = &reps[i].d;
        infos[i].refcnt = ki.replicas[i].refcnt;
        ptrs[i] = &infos[i];
    }
    ki.group_id[sizeof(ki.group_id) - 1] = '\0';
    r.key = req->key;
    r.size = ki.size;
    r.version = ki.version;
    r.crc32c = ki.crc32c;
    r.crc_valid = ki.has_crc;
    r.lease_ms_left = ms_left(ki.lease_remaining_ms);
    r.soft_pin_ms_left = ms_left(ki.soft_pin_remaining_ms);
    r.hard_pinned = ki.hard_pinned;
    r.put_in_progress = !ki.complete;
    r.group_id = ki.group_id;
    r.offload_pending = ki.offload_pending;
    r.n_replicas = n;
    r.replicas = ptrs;
    mc_rpc_reply_msg(call, 0, &r.base);
    FREE_REQ(req);
}

static void h_list_segments(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    struct mc_segment_info *segs = NULL;
    struct mc_local_disk_info *disks = NULL;
    size_t n = 0, nd = 0;
    Mc__SegmentInfo *items = NULL, **ptrs = NULL;
    Mc__LocalDiskInfo *ditems = NULL, **dptrs = NULL;
    Mc__Uuid *uuids = NULL;
    int rc = mc_master_list_segments(svc->m, &segs, &n);
    if (rc == 0)
        rc = mc_master_list_local_disks(svc->m, &disks, &nd);
    if (rc == 0 && n > 0 &&
        (!(items = malloc(n * sizeof(*items))) || !(ptrs = malloc(n * sizeof(*ptrs)))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0 && nd > 0 &&
        (!(ditems = malloc(nd * sizeof(*ditems))) || !(dptrs = malloc(nd * sizeof(*dptrs)))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0 && n + nd > 0 && !(uuids = malloc((2 * n + nd) * sizeof(*uuids))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const struct mc_segment_info *s = &segs[i];
        Mc__SegmentInfo *it = &items[i];
        mc__segment_info__init(it);
        mc_svc_id_to_pb(s->desc.id, &uuids[2 * i]);
        mc_svc_id_to_pb(s->owner, &uuids[2 * i + 1]);
        it->id = &uuids[2 * i];
        it->owner = &uuids[2 * i + 1];
        it->name = (char *)s->desc.name;
        it->endpoint = (char *)s->desc.endpoint;
        it->protocol = protocol_to_pb(s->desc.protocol);
        it->size = s->capacity;
        it->used = s->allocated;
        it->status = MC__SEGMENT_STATUS__SS_OK;
        it->replica_count = s->nallocs;
        ptrs[i] = it;
    }
    for (size_t i = 0; i < nd; i++) {
        const struct mc_local_disk_info *ld = &disks[i];
        Mc__LocalDiskInfo *it = &ditems[i];
        mc__local_disk_info__init(it);
        mc_svc_id_to_pb(ld->client, &uuids[2 * n + i]);
        it->client_id = &uuids[2 * n + i];
        it->endpoint = (char *)ld->endpoint;
        it->capacity_bytes = ld->capacity_bytes;
        it->replica_count = ld->replica_count;
        it->used_bytes = ld->used_bytes;
        it->enable_offloading = ld->enable_offloading;
        dptrs[i] = it;
    }
    Mc__ListSegmentsResponse r = MC__LIST_SEGMENTS_RESPONSE__INIT;
    r.n_segments = n;
    r.segments = ptrs;
    r.n_local_disks = nd;
    r.local_disks = dptrs;
    mc_rpc_reply_msg(call, 0, &r.base);
out:
    free(segs);
    free(disks);
    free(items);
    free(ptrs);
    free(ditems);
    free(dptrs);
    free(uuids);
}

static void h_get_stats(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    struct mc_master_stats st;
    mc_master_get_stats(svc->m, &st);
    Mc__GetStatsResponse r = MC__GET_STATS_RESPONSE__INIT;
    r.version = (char *)MC_SERVICE_VERSION;
    r.uptime_ms = mc_now_ms() - svc->start_ms;
    r.key_count = st.key_count;
    r.allocated_bytes = st.allocated_bytes;
    r.capacity_bytes = st.total_capacity_bytes;
    r.segment_count = st.segment_count;
    r.client_count = st.active_clients;
    struct mc_offload_stats os;
    mc_master_offload_stats(svc->m, &os);
    r.local_disk_replica_count = os.disk_replicas;
    r.offload_in_flight = os.in_flight;
    /* Everything else by its upstream metric name. */
    const struct {
        const char *name;
        double v;
    } extra[] = {
        {"master_soft_pin_key_count", (double)st.soft_pin_key_count},
        {"master_processing_key_count", (double)st.processing_count},
        {"master_used_ratio", st.used_ratio},
        {"master_put_start_requests_total", (double)st.put_start_requests},
        {"master_put_start_failures_total", (double)st.put_start_failures},
        {"master_put_end_requests_total", (double)st.put_end_requests},
        {"master_put_end_failures_total", (double)st.put_end_failures},
        {"master_put_revoke_requests_total", (double)st.put_revoke_requests},
        {"master_put_revoke_failures_total", (double)st.put_revoke_failures},
        {"master_get_replica_list_requests_total", (double)st.get_replica_list_requests},
        {"master_get_replica_list_failures_total", (double)st.get_replica_list_failures},
        {"master_exist_key_requests_total", (double)st.exist_key_requests},
        {"master_exist_key_failures_total", (double)st.exist_key_failures},
        {"master_remove_requests_total", (double)st.remove_requests},
        {"master_remove_failures_total", (double)st.remove_failures},
        {"master_remove_all_requests_total", (double)st.remove_all_requests},
        {"master_mount_segment_requests_total", (double)st.mount_segment_requests},
        {"master_mount_segment_failures_total", (double)st.mount_segment_failures},
        {"master_unmount_segment_requests_total", (double)st.unmount_segment_requests},
        {"master_unmount_segment_failures_total", (double)st.unmount_segment_failures},
        {"master_remount_segment_requests_total", (double)st.remount_segment_requests},
        {"master_remount_segment_failures_total", (double)st.remount_segment_failures},
        {"master_ping_requests_total", (double)st.ping_requests},
        {"master_put_start_alloc_failures_total", (double)st.put_start_alloc_failures},
        {"master_put_start_partial_allocations_total", (double)st.put_start_partial_allocations},
        {"master_put_start_discard_cnt", (double)st.put_start_discard_cnt},
        {"master_put_start_release_cnt", (double)st.put_start_release_cnt},
        {"master_expired_clients_total", (double)st.expired_clients},
        {"master_evicted_key_count", (double)st.evicted_key_count},
        {"master_evicted_size_bytes", (double)st.evicted_size_bytes},
        {"master_successful_evictions_total", (double)st.successful_evictions},
        {"master_attempted_evictions_total", (double)st.attempted_evictions},
        {"master_offload_queued_total", (double)os.queued},
        {"master_offload_completed_total", (double)os.completed},
        {"master_offload_nacked_total", (double)os.nacked},
        {"master_offload_expired_total", (double)os.expired},
        {"master_offload_cancelled_total", (double)os.cancelled},
        {"master_offload_refused_total", (double)os.refused},
        {"master_allocated_file_size_bytes", (double)os.file_allocated_bytes},
        {"master_total_file_capacity_bytes", (double)os.file_capacity_bytes},
        {"master_disk_only_key_count", (double)os.disk_only_keys},
        {"master_local_disk_count", (double)os.holders},
    };
    enum { NEXTRA = sizeof(extra) / sizeof(extra[0]) };
    /* the promotion funnel, one snapshot, by its metric names */
    struct mc_promotion_stats ps;
    mc_master_promotion_stats(svc->m, &ps);
    const struct {
        const char *name;
        double v;
    } promo[] = {
#define PROMO_EXTRA(f, h) {"master_promotion_" #f "_total", (double)ps.f},
        MC_PROMOTION_COUNTERS(PROMO_EXTRA)
#undef PROMO_EXTRA
            {"master_promotion_in_flight", (double)ps.in_flight},
    };
    enum { NPROMO = sizeof(promo) / sizeof(promo[0]) };
    Mc__NamedValue nv[NEXTRA + NPROMO];
    Mc__NamedValue *nvp[NEXTRA + NPROMO];
    for (size_t i = 0; i < NEXTRA + NPROMO; i++) {
        mc__named_value__init(&nv[i]);
        nv[i].name = (char *)(i < NEXTRA ? extra[i].name : promo[i - NEXTRA].name);
        nv[i].value = i < NEXTRA ? extra[i].v : promo[i - NEXTRA].v;
        nvp[i] = &nv[i];
    }
    r.n_extra = NEXTRA + NPROMO;
    r.extra = nvp;
    mc_rpc_reply_msg(call, 0, &r.base);
}

/* ---- registration -----------------------------------------------------------------------------
 */

static const struct {
    uint16_t method;
    mc_rpc_handler_fn fn;
} g_handlers[] = {
    {MC_METHOD_SERVICE_READY, h_service_ready},
    {MC_METHOD_PING, h_ping},
    {MC_METHOD_MOUNT_SEGMENT, h_mount_segment},
    {MC_METHOD_REMOUNT_SEGMENT, h_remount_segment},
    {MC_METHOD_UNMOUNT_SEGMENT, h_unmount_segment},
    {MC_METHOD_PUT_START, h_put_start},
    {MC_METHOD_PUT_END, h_put_end},
    {MC_METHOD_PUT_REVOKE, h_put_revoke},
    {MC_METHOD_BATCH_PUT_START, h_batch_put_start},
    {MC_METHOD_BATCH_PUT_END, h_batch_put_end},
    {MC_METHOD_BATCH_PUT_REVOKE, h_batch_put_revoke},
    {MC_METHOD_GET_REPLICA_LIST, h_get_replica_list},
    {MC_METHOD_BATCH_GET_REPLICA_LIST, h_batch_get_replica_list},
    {MC_METHOD_EXIST_KEY, h_exist_key},
    {MC_METHOD_BATCH_EXIST_KEY, h_batch_exist_key},
    {MC_METHOD_REMOVE, h_remove},
    {MC_METHOD_BATCH_REMOVE, h_batch_remove},
    {MC_METHOD_REMOVE_ALL, h_remove_all},
    {MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT, mc_svc_mount_local_disk},
    {MC_METHOD_UNMOUNT_LOCAL_DISK_SEGMENT, mc_svc_unmount_local_disk},
    {MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT, mc_svc_offload_heartbeat},
    {MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, mc_svc_notify_offload_success},
    {MC_METHOD_EVICT_DISK_REPLICA, mc_svc_evict_disk_replica},
    {MC_METHOD_BATCH_EVICT_DISK_REPLICA, mc_svc_batch_evict_disk_replica},
    {MC_METHOD_PROMOTION_OBJECT_HEARTBEAT, h_promotion_heartbeat},
    {MC_METHOD_PROMOTION_ALLOC_START, h_promotion_alloc_start},
    {MC_METHOD_NOTIFY_PROMOTION_SUCCESS, h_notify_promotion_success},
    {MC_METHOD_NOTIFY_PROMOTION_FAILURE, h_notify_promotion_failure},
    {MC_METHOD_QUERY_KEY, h_query_key},
    {MC_METHOD_LIST_SEGMENTS, h_list_segments},
    {MC_METHOD_GET_STATS, h_get_stats},
};

int mc_master_service_new(struct mc_master *m, struct mc_master_service **out)
{
    *out = NULL;
    if (!m)
        return MC_ERR_INVALID_PARAMS;
    struct mc_master_service *svc = calloc(1, sizeof(*svc));
    if (!svc)
        return MC_ERR_INTERNAL_ERROR;
    svc->m = m;
    svc->start_ms = mc_now_ms();
    *out = svc;
    return 0;
}

int mc_master_service_register(struct mc_master_service *svc, struct mc_rpc_server *srv)
{
    for (size_t i = 0; i < sizeof(g_handlers) / sizeof(g_handlers[0]); i++) {
        int rc = mc_rpc_server_register(srv, g_handlers[i].method, g_handlers[i].fn, svc);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void mc_master_service_free(struct mc_master_service *svc)
{
    free(svc);
}
