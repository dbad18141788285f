/*
 * service_holder.c - RPC adapter of the DRAM holder stream (HolderIndexHeartbeat): decode ->
 * mc_master_holder_heartbeat (holder_stream.c) -> encode. A long-poll like
 * OffloadObjectHeartbeat (service_disk.c): the core keeps the reply callback until items arrive
 * or the wait passes and calls it with no master lock held.
 */
#include "master/holder_stream.h"
#include "master/service_internal.h"
#include "mooncake/errors.h"

/* A commit's location, in the item's scratch (freed with the reply). */
struct loc_pb {
    Mc__MemoryLocation loc;
    Mc__Uuid uuid;
};

static void item_to_pb(ProtobufCMessage *msg, const struct mc_task *t, void *scratch)
{
    Mc__OffloadTaskItem *it = (Mc__OffloadTaskItem *)msg;
    it->task_id = t->task_id;
    it->key = (char *)t->key;
    it->size = t->size;
    it->version = t->version;
    it->crc32c = t->crc32c;
    it->crc_valid = t->crc_valid;
    it->drop = !t->has_src;
    if (t->has_src) {
        struct loc_pb *p = scratch;
        mc__memory_location__init(&p->loc);
        mc_svc_id_to_pb(t->src.segment, &p->uuid);
        p->loc.segment_id = &p->uuid;
        p->loc.offset = t->src.offset;
        p->loc.size = t->size;
        p->loc.mount_epoch = t->src.mount_epoch;
        it->source = &p->loc;
    }
}

static void holder_reply(void *arg, struct mc_task_list *tasks)
{
    mc_svc_reply_tasks(arg, &mc__holder_index_heartbeat_response__descriptor,
                       &mc__offload_task_item__descriptor, item_to_pb, sizeof(struct loc_pb),
                       tasks);
}

void mc_svc_holder_index_heartbeat(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(HolderIndexHeartbeatRequest, holder_index_heartbeat_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    uint32_t wait_ms = req->wait_ms, max = req->max_items;
    FREE_REQ(req);
    int rc = mc_svc_check_client(call, client);
    if (rc == 0)
        rc = mc_master_holder_heartbeat(svc->m, client, max, wait_ms, holder_reply, call);
    if (rc < 0) /* the reply callback was not called */
        mc_rpc_reply_status(call, rc);
}
