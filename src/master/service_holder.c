/*
 * service_holder.c - RPC adapter of the DRAM holder stream (HolderIndexHeartbeat): decode ->
 * mc_master_holder_heartbeat (holder_stream.c) -> encode. A long-poll like
 * OffloadObjectHeartbeat (service_disk.c): the core keeps the reply callback until items arrive
 * or the wait passes and calls it with no master lock held.
 */
#include "master/holder_stream.h"
#include "master/service_internal.h"
#include "mooncake/errors.h"

#include <stdlib.h>
#include <string.h>

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
    int rc = mc_svc_check_client(svc->m, call, client);
    if (rc == 0 && req->n_acked_delete_task_ids > MC_SERVICE_MAX_BATCH)
        rc = MC_ERR_INVALID_PARAMS;
    if (rc == 0 && req->n_acked_delete_task_ids > 0) {
        int k = mc_master_holder_ack(svc->m, client, req->acked_delete_task_ids,
                                     req->n_acked_delete_task_ids);
        if (k < 0)
            rc = k;
    }
    FREE_REQ(req);
    if (rc == 0)
        rc = mc_master_holder_heartbeat(svc->m, client, max, wait_ms, holder_reply, call);
    if (rc < 0) /* the reply callback was not called */
        mc_rpc_reply_status(call, rc);
}

void mc_svc_holder_reregister(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(HolderReregisterRequest, holder_reregister_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_id seg = mc_svc_id_from_pb(req->segment_id);
    size_t n = req->n_items;
    struct mc_hrereg_item *items = NULL;
    int32_t *st = NULL;
    int *rcs = NULL;
    int rc = mc_svc_check_client(svc->m, call, client);
    if (rc == 0 && n > MC_SERVICE_MAX_BATCH)
        rc = MC_ERR_INVALID_PARAMS;
    if (rc == 0 && n) {
        items = calloc(n, sizeof(*items));
        st = calloc(n, sizeof(*st));
        rcs = calloc(n, sizeof(*rcs));
        if (!items || !st || !rcs)
            rc = MC_ERR_INTERNAL_ERROR;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const Mc__OffloadTaskItem *it = req->items[i];
        if (!it || !it->key || !it->source) {
            items[i] = (struct mc_hrereg_item){0}; /* refused as INVALID_PARAMS */
            continue;
        }
        items[i] = (struct mc_hrereg_item){.key = it->key,
                                           .key_len = strlen(it->key),
                                           .version = it->version,
                                           .offset = it->source->offset,
                                           .size = it->size,
                                           .crc32c = it->crc32c,
                                           .crc_valid = it->crc_valid};
    }
    const struct mc_hrereg_batch b = {.client = client,
                                      .segment = seg,
                                      .mount_epoch = req->mount_epoch,
                                      .listing = req->listing,
                                      .complete = req->complete};
    if (rc == 0)
        rc = mc_master_holder_reregister_batch(svc->m, &b, items, n, rcs);
    FREE_REQ(req);
    Mc__HolderReregisterResponse r = MC__HOLDER_REREGISTER_RESPONSE__INIT;
    if (rc == 0) {
        for (size_t i = 0; i < n; i++)
            st[i] = rcs[i];
        r.n_statuses = n;
        r.statuses = st;
    }
    mc_rpc_reply_msg(call, rc, &r.base);
    free(items);
    free(st);
    free(rcs);
}
