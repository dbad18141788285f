/*
 * service_disk.c - RPC adapters of the LOCAL_DISK tier (MountLocalDiskSegment ...
 * BatchEvictDiskReplica): decode -> mc_master_* (offload.c) -> encode.
 *
 * OffloadObjectHeartbeat is a long-poll: the core keeps the reply callback (with the call as its
 * argument) until a task arrives or the wait passes and calls it with no master lock held; the
 * callback encodes the answer and completes the call from whatever thread it runs on (the
 * rpc_server queues it to the connection's I/O thread). A connection that closed meanwhile
 * makes the completion a no-op; at shutdown the server answers parked calls itself and the
 * core's later answer only frees them.
 */
#include "master/service_internal.h"
#include "mooncake/errors.h"

void mc_svc_mount_local_disk(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(MountLocalDiskSegmentRequest, mount_local_disk_segment_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    int rc = mc_svc_check_client(svc->m, call, client);
    if (rc == 0) /* peers will read disk replicas there: it must be the caller's address */
        rc = mc_rpc_call_check_endpoint(call, req->endpoint);
    if (rc == 0)
        rc = mc_master_mount_local_disk(svc->m, client, req->endpoint ? req->endpoint : "",
                                        req->capacity_bytes, req->enable_offloading);
    FREE_REQ(req);
    Mc__MountLocalDiskSegmentResponse r = MC__MOUNT_LOCAL_DISK_SEGMENT_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}

void mc_svc_unmount_local_disk(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(UnmountLocalDiskSegmentRequest, unmount_local_disk_segment_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    FREE_REQ(req);
    int rc = mc_svc_check_client(svc->m, call, client);
    if (rc == 0)
        rc = mc_master_unmount_local_disk(svc->m, client);
    Mc__UnmountLocalDiskSegmentResponse r = MC__UNMOUNT_LOCAL_DISK_SEGMENT_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}

/* An offload task's source location, in the item's scratch (freed with the reply). */
struct src_pb {
    Mc__MemoryLocation loc;
    Mc__Uuid uuid;
};

static void source_to_pb(Mc__OffloadTaskItem *it, const struct mc_task *t, struct src_pb *p)
{
    mc__memory_location__init(&p->loc);
    mc_svc_id_to_pb(t->src.segment, &p->uuid);
    p->loc.segment_id = &p->uuid;
    p->loc.offset = t->src.offset;
    p->loc.size = t->size;
    p->loc.mount_epoch = t->src.mount_epoch;
    it->source = &p->loc;
}

static void offload_task_to_pb(ProtobufCMessage *msg, const struct mc_task *t, void *scratch)
{
    Mc__OffloadTaskItem *it = (Mc__OffloadTaskItem *)msg;
    it->task_id = t->task_id; /* a delete's id comes back in acked_delete_task_ids */
    it->key = (char *)t->key;
    it->size = t->size;
    it->version = t->version;
    it->crc32c = t->crc32c;
    it->crc_valid = t->crc_valid;
    it->drop = t->kind == MC_TASK_DELETE;
    if (t->kind == MC_TASK_OFFLOAD && t->has_src)
        source_to_pb(it, t, scratch);
}

/* The heartbeat's answer (mc_mailbox_reply_fn): arg is the call. Out of memory, the offload
 * tasks stay in flight and expire; deletes are not acknowledged, so their holder is fenced after
 * holder_delete_timeout (the delete rule). */
static void heartbeat_reply(void *arg, struct mc_task_list *tasks)
{
    mc_svc_reply_tasks(arg, &mc__offload_object_heartbeat_response__descriptor,
                       &mc__offload_task_item__descriptor, offload_task_to_pb,
                       sizeof(struct src_pb), tasks);
}

void mc_svc_offload_heartbeat(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(OffloadObjectHeartbeatRequest, offload_object_heartbeat_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    bool enable = req->enable_offloading;
    uint32_t wait_ms = req->wait_ms, max = req->max_items;
    int rc = mc_svc_check_client(svc->m, call, client);
    /* the delete rule: acknowledged deletes first (the Removes waiting for them answer now) */
    if (rc == 0 && req->n_acked_delete_task_ids > MC_SERVICE_MAX_BATCH)
        rc = MC_ERR_INVALID_PARAMS;
    if (rc == 0 && req->n_acked_delete_task_ids > 0) {
        int k = mc_master_offload_ack_deletes(svc->m, client, req->acked_delete_task_ids,
                                              req->n_acked_delete_task_ids);
        if (k < 0)
            rc = k;
    }
    FREE_REQ(req);
    if (rc == 0)
        rc = mc_master_offload_heartbeat(svc->m, client, enable, max, wait_ms, heartbeat_reply,
                                         call);
    if (rc < 0) /* the reply callback was not called */
        mc_rpc_reply_status(call, rc);
}

/* NotifyOffloadSuccess: res = the core's view of each reported item, then (re-registration)
 * one master version per item. */
static uint64_t *notify_versions(struct mc_svc_batch *b)
{
    return (uint64_t *)((struct mc_offload_result *)b->res + b->n);
}

static int notify_offload_core(struct mc_svc_batch *b)
{
    const Mc__NotifyOffloadSuccessRequest *req = (const void *)b->req;
    struct mc_offload_result *items = b->res;
    for (size_t i = 0; i < b->n; i++) {
        const Mc__OffloadResult *it = req->items[i];
        items[i] = (struct mc_offload_result){
            .task_id = it->task_id,
            .key = b->keys[i].data,
            .key_len = b->keys[i].len, /* 0 (INVALID_KEY) when it held a NUL */
            .status = it->status,
            .size = it->size,
            .version = it->version,
            .crc32c = it->crc32c,
            .crc_valid = it->crc_valid,
        };
    }
    if (req->reregister)
        return mc_master_reregister_disk(b->m, b->client, items, b->n, req->reregister_complete,
                                         b->rcs, notify_versions(b));
    return mc_master_notify_offload(b->m, b->client, items, b->n, false, b->rcs);
}

static void notify_offload_encode(struct mc_svc_batch *b, ProtobufCMessage *resp)
{
    const Mc__NotifyOffloadSuccessRequest *req = (const void *)b->req;
    if (!req->reregister)
        return;
    Mc__NotifyOffloadSuccessResponse *r = (Mc__NotifyOffloadSuccessResponse *)resp;
    r->n_versions = b->n;
    r->versions = notify_versions(b);
}

void mc_svc_notify_offload_success(void *arg, struct mc_rpc_call *call)
{
    static const struct mc_svc_batch_spec spec = {
        .req = &mc__notify_offload_success_request__descriptor,
        .resp = &mc__notify_offload_success_response__descriptor,
        .items = "items",
        .item_key = "key",
        .res_size = sizeof(struct mc_offload_result) + sizeof(uint64_t),
        .core = notify_offload_core,
        .encode = notify_offload_encode,
    };
    mc_svc_batch(arg, call, &spec, NULL);
}

void mc_svc_evict_disk_replica(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(EvictDiskReplicaRequest, evict_disk_replica_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(evict_disk_replica_request), req->key);
    int rc = mc_svc_check_client(svc->m, call, client);
    if (rc == 0)
        rc = mc_master_evict_disk_replica(svc->m, client, key.data, key.len, req->version);
    FREE_REQ(req);
    Mc__EvictDiskReplicaResponse r = MC__EVICT_DISK_REPLICA_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}

/* BatchEvictDiskReplica: versions, when given, must pair with the keys (a whole-call error,
 * before the client check). */
static int batch_evict_check(struct mc_svc_batch *b)
{
    const Mc__BatchEvictDiskReplicaRequest *req = (const void *)b->req;
    return req->n_versions != 0 && req->n_versions != b->n ? MC_ERR_INVALID_PARAMS : 0;
}

static int batch_evict_core(struct mc_svc_batch *b)
{
    const Mc__BatchEvictDiskReplicaRequest *req = (const void *)b->req;
    return mc_master_batch_evict_disk_replica(b->m, b->client, b->keys,
                                              req->n_versions ? req->versions : NULL, b->n, b->rcs);
}

void mc_svc_batch_evict_disk_replica(void *arg, struct mc_rpc_call *call)
{
    static const struct mc_svc_batch_spec spec = {
        .req = &mc__batch_evict_disk_replica_request__descriptor,
        .resp = &mc__batch_evict_disk_replica_response__descriptor,
        .items = "keys",
        .check = batch_evict_check,
        .core = batch_evict_core,
    };
    mc_svc_batch(arg, call, &spec, NULL);
}
