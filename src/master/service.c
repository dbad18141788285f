/*
 * service.c - the master's RPC method table and the service's lifetime (see service.h).
 *
 * Every method of proto/master.proto is one line below, in proto order, naming its adapter;
 * the adapters live by concern in the service_*.c files (service_internal.h lists them). A
 * handler runs on the connection's I/O thread and answers at once, except the two heartbeats,
 * which the core may park (service_disk.c, service_promotion.c).
 */
#include "master/service.h"

#include <stdlib.h>

#include "common/clock.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "master/service_internal.h"
#include "mooncake/errors.h"

static const struct {
    uint16_t method;
    mc_rpc_handler_fn fn;
} g_handlers[] = {
    {MC_METHOD_SERVICE_READY, mc_svc_service_ready},
    {MC_METHOD_PING, mc_svc_ping},
    {MC_METHOD_MOUNT_SEGMENT, mc_svc_mount_segment},
    {MC_METHOD_REMOUNT_SEGMENT, mc_svc_remount_segment},
    {MC_METHOD_UNMOUNT_SEGMENT, mc_svc_unmount_segment},
    {MC_METHOD_PUT_START, mc_svc_put_start},
    {MC_METHOD_PUT_END, mc_svc_put_end},
    {MC_METHOD_PUT_REVOKE, mc_svc_put_revoke},
    {MC_METHOD_BATCH_PUT_START, mc_svc_batch_put_start},
    {MC_METHOD_BATCH_PUT_END, mc_svc_batch_put_end},
    {MC_METHOD_BATCH_PUT_REVOKE, mc_svc_batch_put_revoke},
    {MC_METHOD_GET_REPLICA_LIST, mc_svc_get_replica_list},
    {MC_METHOD_BATCH_GET_REPLICA_LIST, mc_svc_batch_get_replica_list},
    {MC_METHOD_EXIST_KEY, mc_svc_exist_key},
    {MC_METHOD_BATCH_EXIST_KEY, mc_svc_batch_exist_key},
    {MC_METHOD_REMOVE, mc_svc_remove},
    {MC_METHOD_BATCH_REMOVE, mc_svc_batch_remove},
    {MC_METHOD_REMOVE_ALL, mc_svc_remove_all},
    {MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT, mc_svc_mount_local_disk},
    {MC_METHOD_UNMOUNT_LOCAL_DISK_SEGMENT, mc_svc_unmount_local_disk},
    {MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT, mc_svc_offload_heartbeat},
    {MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, mc_svc_notify_offload_success},
    {MC_METHOD_EVICT_DISK_REPLICA, mc_svc_evict_disk_replica},
    {MC_METHOD_BATCH_EVICT_DISK_REPLICA, mc_svc_batch_evict_disk_replica},
    {MC_METHOD_PROMOTION_OBJECT_HEARTBEAT, mc_svc_promotion_heartbeat},
    {MC_METHOD_PROMOTION_ALLOC_START, mc_svc_promotion_alloc_start},
    {MC_METHOD_NOTIFY_PROMOTION_SUCCESS, mc_svc_notify_promotion_success},
    {MC_METHOD_NOTIFY_PROMOTION_FAILURE, mc_svc_notify_promotion_failure},
    {MC_METHOD_QUERY_KEY, mc_svc_query_key},
    {MC_METHOD_LIST_SEGMENTS, mc_svc_list_segments},
    {MC_METHOD_GET_STATS, mc_svc_get_stats},
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
    mc_svc_watch_polls(m);
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
