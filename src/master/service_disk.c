/*
 * service_disk.c - RPC adapters of the LOCAL_DISK tier (MountLocalDiskSegment ...
 * BatchEvictDiskReplica): decode -> mc_master_* (offload.c) -> encode, as service.c.
 *
 * OffloadObjectHeartbeat is a long-poll: the core keeps the reply callback (with the call as its
 * argument) until a task arrives or the wait passes and calls it with no master lock held; the
 * callback encodes the answer and completes the call from whatever thread it runs on (the
 * rpc_server queues it to the connection's I/O thread). A connection that closed meanwhile
 * makes the completion a no-op; at shutdown the server answers parked calls itself and the
 * core's later answer only frees them.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/rpc_server.h"
#include "master/master.h"
#include "master/service.h"
#include "master/service_internal.h"
#include "master/service_wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"

void mc_svc_mount_local_disk(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(MountLocalDiskSegmentRequest, mount_local_disk_segment_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    int rc = mc_svc_check_client(call, client);
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
    int rc = mc_svc_check_client(call, client);
    if (rc == 0)
        rc = mc_master_unmount_local_disk(svc->m, client);
    Mc__UnmountLocalDiskSegmentResponse r = MC__UNMOUNT_LOCAL_DISK_SEGMENT_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}

/* The heartbeat's answer (mc_mailbox_reply_fn): arg is the call. No master lock is held. */
static void heartbeat_reply(void *arg, struct mc_task_list *tasks)
{
    struct mc_rpc_call *call = arg;
    size_t n = tasks->n;
    Mc__OffloadTaskItem *items = n ? malloc(n * sizeof(*items)) : NULL;
    Mc__OffloadTaskItem **ptrs = n ? malloc(n * sizeof(*ptrs)) : NULL;
    if (n && (!items || !ptrs)) {
        /* the offload tasks stay in flight and expire; deletes are lost (the holder's scan
         * re-registers the record later and is told to delete it then) */
        mc_warn("service", "heartbeat reply dropped (out of memory)", "tasks=%zu", n);
        free(items);
        free(ptrs);
        mc_task_list_free(tasks);
        mc_rpc_reply_status(call, MC_ERR_INTERNAL_ERROR);
        return;
    }
    size_t i = 0;
    for (struct mc_task *t = tasks->head; t && i < n; t = t->next, i++) {
        mc__offload_task_item__init(&items[i]);
        items[i].task_id = t->kind == MC_TASK_DELETE ? 0 : t->task_id;
        items[i].key = t->key;
        items[i].size = t->size;
        items[i].version = t->version;
        items[i].crc32c = t->crc32c;
        items[i].crc_valid = t->crc_valid;
        items[i].drop = t->kind == MC_TASK_DELETE;
        ptrs[i] = &items[i];
    }
    Mc__OffloadObjectHeartbeatResponse r = MC__OFFLOAD_OBJECT_HEARTBEAT_RESPONSE__INIT;
    r.n_items = i;
    r.items = ptrs;
    mc_rpc_reply_msg(call, 0, &r.base);
    free(items);
    free(ptrs);
    mc_task_list_free(tasks);
}

void mc_svc_offload_heartbeat(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(OffloadObjectHeartbeatRequest, offload_object_heartbeat_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    bool enable = req->enable_offloading;
    uint32_t wait_ms = req->wait_ms, max = req->max_items;
    FREE_REQ(req);
    int rc = mc_svc_check_client(call, client);
    if (rc == 0)
        rc = mc_master_offload_heartbeat(svc->m, client, enable, max, wait_ms, heartbeat_reply,
                                         call);
    if (rc < 0) /* the reply callback was not called */
        mc_rpc_reply_status(call, rc);
}

void mc_svc_notify_offload_success(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(NotifyOffloadSuccessRequest, notify_offload_success_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    size_t n = req->n_items;
    struct mc_offload_result *items = NULL;
    struct mc_key_ref *keys = NULL;
    int *rcs = NULL;
    int rc = n > MC_SERVICE_MAX_BATCH ? MC_ERR_INVALID_PARAMS : mc_svc_check_client(call, client);
    if (rc == 0 && n > 0 &&
        (!(items = calloc(n, sizeof(*items))) || !(keys = malloc(n * sizeof(*keys))) ||
         !(rcs = malloc(n * sizeof(*rcs)))))
        rc = MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const Mc__OffloadResult *it = req->items[i];
        keys[i].data = it->key ? it->key : "";
        keys[i].len = strlen(keys[i].data);
    }
    if (rc == 0 && n > 0) {
        size_t len = 0;
        const uint8_t *body = mc_rpc_call_body(call, &len);
        mc_svc_mark_nul_strings(
            body, len, mc_svc_field_num(&mc__notify_offload_success_request__descriptor, "items"),
            mc_svc_field_num(&mc__offload_result__descriptor, "key"), false, keys, n);
        for (size_t i = 0; i < n; i++) {
            const Mc__OffloadResult *it = req->items[i];
            items[i] = (struct mc_offload_result){
                .task_id = it->task_id,
                .key = keys[i].data,
                .key_len = keys[i].len, /* 0 (INVALID_KEY) when it held a NUL */
                .status = it->status,
                .size = it->size,
                .version = it->version,
                .crc32c = it->crc32c,
                .crc_valid = it->crc_valid,
            };
        }
    }
    if (rc == 0)
        rc = mc_master_notify_offload(svc->m, client, items, n, req->reregister, rcs);
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
    } else {
        Mc__NotifyOffloadSuccessResponse r = MC__NOTIFY_OFFLOAD_SUCCESS_RESPONSE__INIT;
        mc_svc_reply_statuses(call, &r.base, &r.n_statuses, &r.statuses, rcs, n);
    }
    FREE_REQ(req);
    free(items);
    free(keys);
    free(rcs);
}

void mc_svc_evict_disk_replica(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(EvictDiskReplicaRequest, evict_disk_replica_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(evict_disk_replica_request), req->key);
    int rc = mc_svc_check_client(call, client);
    if (rc == 0)
        rc = mc_master_evict_disk_replica(svc->m, client, key.data, key.len, req->version);
    FREE_REQ(req);
    Mc__EvictDiskReplicaResponse r = MC__EVICT_DISK_REPLICA_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}

void mc_svc_batch_evict_disk_replica(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(BatchEvictDiskReplicaRequest, batch_evict_disk_replica_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    size_t n = req->n_keys;
    struct mc_key_ref *keys = NULL;
    int *rcs = NULL;
    int rc = mc_svc_keys_from_pb(call, KEYS(batch_evict_disk_replica_request), req->keys, n, &keys);
    if (rc == 0 && req->n_versions != 0 && req->n_versions != n)
        rc = MC_ERR_INVALID_PARAMS;
    if (rc == 0)
        rc = mc_svc_check_client(call, client);
    if (rc == 0 && n > 0 && !(rcs = malloc(n * sizeof(*rcs))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0)
        rc = mc_master_batch_evict_disk_replica(svc->m, client, keys,
                                                req->n_versions ? req->versions : NULL, n, rcs);
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
    } else {
        Mc__BatchEvictDiskReplicaResponse r = MC__BATCH_EVICT_DISK_REPLICA_RESPONSE__INIT;
        mc_svc_reply_statuses(call, &r.base, &r.n_statuses, &r.statuses, rcs, n);
    }
    FREE_REQ(req);
    free(keys);
    free(rcs);
}
