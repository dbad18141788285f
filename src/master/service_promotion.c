/*
 * service_promotion.c - RPC adapters of promotion, the holder side (promotion.h):
 * PromotionObjectHeartbeat, PromotionAllocStart, NotifyPromotionSuccess/Failure.
 *
 * PromotionObjectHeartbeat is a long-poll like OffloadObjectHeartbeat (service_disk.c): the
 * core keeps the reply callback (the call is its argument) until a task arrives or the wait
 * passes, and calls it with no master lock held; mc_svc_reply_tasks encodes the answer.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "master/holder_stream.h"
#include "master/offload.h"
#include "master/promotion.h"
#include "master/service_internal.h"
#include "mooncake/errors.h"

#define PROMO_MAX_WAIT_MS 60000u /* a heartbeat parks at most this long */

static void promo_task_to_pb(ProtobufCMessage *msg, const struct mc_task *t, void *scratch)
{
    (void)scratch;
    Mc__PromotionTaskItem *it = (Mc__PromotionTaskItem *)msg;
    it->task_id = t->task_id;
    it->key = (char *)t->key;
    it->size = t->size;
    it->version = t->version;
    it->crc32c = t->crc32c;
    it->crc_valid = t->crc_valid;
}

/* A parked heartbeat (either kind: arg is its call) can be answered while its connection is
 * open; a task handed to a closed one would wait for its reaper (mailbox.h). */
static bool poll_alive(void *arg)
{
    return !mc_rpc_call_conn_closed(arg);
}

void mc_svc_watch_polls(struct mc_master *m)
{
    struct mc_mailboxes *mb = mc_offload_mailboxes(m);
    if (mb)
        mc_mailboxes_set_alive(mb, poll_alive);
    if ((mb = mc_holder_stream_mailboxes(m)) != NULL) /* the DRAM holders' polls too */
        mc_mailboxes_set_alive(mb, poll_alive);
}

void mc_svc_drop_dead_polls(struct mc_master *m)
{
    struct mc_mailboxes *mb = mc_offload_mailboxes(m);
    if (mb)
        mc_mailboxes_drop_dead_polls(mb);
    if ((mb = mc_holder_stream_mailboxes(m)) != NULL)
        mc_mailboxes_drop_dead_polls(mb);
}

/* The heartbeat's answer (mc_mailbox_reply_fn): arg is the call. */
static void promo_hb_reply(void *arg, struct mc_task_list *tasks)
{
    mc_svc_reply_tasks(arg, &mc__promotion_object_heartbeat_response__descriptor,
                       &mc__promotion_task_item__descriptor, promo_task_to_pb, 0, tasks);
}

/* The answer of a heartbeat that asked for staged tasks: each task's staged replica placed now
 * (no master lock is held here), so the holder needs no PromotionAllocStart. A task that cannot
 * be placed goes out without one: the holder asks AllocStart or reports failure. */
static void promo_hb_reply_staged(void *arg, struct mc_task_list *tasks)
{
    struct mc_rpc_call *call = arg;
    struct mc_master_service *svc = mc_rpc_call_handler_arg(call);
    size_t n = tasks->n;
    struct staged_item {
        Mc__PromotionTaskItem it;
        struct mc_svc_pb_replica rep;
        struct mc_replica_desc d;
    } *v = n ? calloc(n, sizeof(*v) + sizeof(void *)) : NULL;
    if (n && !v) {
        mc_warn("service", "promotion heartbeat reply dropped (out of memory)", "tasks=%zu", n);
        mc_rpc_reply_status(call, MC_ERR_INTERNAL_ERROR);
        goto out;
    }
    Mc__PromotionTaskItem **ptrs = n ? (Mc__PromotionTaskItem **)(v + n) : NULL;
    size_t i = 0;
    for (struct mc_task *t = tasks->head; t && i < n; t = t->next, i++) {
        Mc__PromotionTaskItem *it = &v[i].it;
        mc__promotion_task_item__init(it);
        promo_task_to_pb(&it->base, t, NULL);
        if (mc_master_promotion_stage(svc->m, t->task_id, t->key, t->key_len, &v[i].d) == MC_OK) {
            mc_svc_replica_to_pb(&v[i].d, &v[i].rep);
            it->staged = &v[i].rep.d;
        }
        ptrs[i] = it;
    }
    Mc__PromotionObjectHeartbeatResponse r = MC__PROMOTION_OBJECT_HEARTBEAT_RESPONSE__INIT;
    r.n_items = i;
    r.items = ptrs;
    mc_rpc_reply_msg(call, 0, &r.base);
out:
    free(v);
    mc_task_list_free(tasks);
}

/* The holder's reports on staged tasks, carried by its heartbeat: each as
 * NotifyPromotionSuccess (status 0) or NotifyPromotionFailure would apply it. A report the
 * master refuses (a stale task) is logged and dropped: the holder is done with it either way. */
static void apply_results(struct mc_master *m, struct mc_rpc_call *call, struct mc_id client,
                          const Mc__PromotionObjectHeartbeatRequest *req)
{
    size_t n = req->n_results;
    struct mc_key_ref one, *keys = n > 1 ? calloc(n, sizeof(*keys)) : &one;
    if (!keys) {
        mc_warn("service", "promotion results dropped (out of memory): their tasks expire",
                "count=%zu", n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *k = req->results[i] && req->results[i]->key ? req->results[i]->key : "";
        keys[i] = (struct mc_key_ref){.data = k, .len = strlen(k)};
    }
    mc_svc_mark_nul_keys(
        call, mc_svc_field_num(&mc__promotion_object_heartbeat_request__descriptor, "results"),
        mc_svc_field_num(&mc__promotion_result__descriptor, "key"), false, keys, n);
    for (size_t i = 0; i < n; i++) {
        const Mc__PromotionResult *r = req->results[i];
        if (!r)
            continue;
        int rc = r->status == 0
                     ? mc_master_promotion_success(m, client, r->task_id, keys[i].data, keys[i].len)
                     : mc_master_promotion_failure(m, client, r->task_id, keys[i].data, keys[i].len,
                                                   r->status);
        if (rc != MC_OK)
            mc_debug("service", "promotion result not applied", "task=%llu status=%d rc=%s",
                     (unsigned long long)r->task_id, (int)r->status, mc_strerror(rc));
    }
    if (keys != &one)
        free(keys);
}

void mc_svc_promotion_heartbeat(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(PromotionObjectHeartbeatRequest, promotion_object_heartbeat_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    uint32_t wait = req->wait_ms < PROMO_MAX_WAIT_MS ? req->wait_ms : PROMO_MAX_WAIT_MS;
    uint32_t max = req->max_items;
    bool stage = req->stage;
    int rc = req->n_results > MC_SERVICE_MAX_BATCH ? MC_ERR_INVALID_PARAMS
                                                   : mc_svc_check_client(svc->m, call, client);
    if (rc == 0 && req->n_results) /* reports first: they free room for the tasks handed out */
        apply_results(svc->m, call, client, req);
    FREE_REQ(req);
    if (rc == 0) /* answered now (1), parked (0), or refused (< 0: not answered) */
        rc = mc_master_promotion_heartbeat(svc->m, client, max, wait,
                                           stage ? promo_hb_reply_staged : promo_hb_reply, call);
    if (rc < 0)
        mc_rpc_reply_status(call, rc);
}

void mc_svc_promotion_alloc_start(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(PromotionAllocStartRequest, promotion_alloc_start_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_replica_desc d;
    int rc = req->n_preferred_segments > MC_SERVICE_MAX_BATCH
                 ? MC_ERR_INVALID_PARAMS
                 : mc_svc_check_client(svc->m, call, client);
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
    struct mc_svc_pb_replica p;
    mc_svc_replica_to_pb(&d, &p);
    Mc__PromotionAllocStartResponse r = MC__PROMOTION_ALLOC_START_RESPONSE__INIT;
    r.replica = &p.d;
    mc_rpc_reply_msg(call, 0, &r.base);
}

void mc_svc_notify_promotion_success(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(NotifyPromotionSuccessRequest, notify_promotion_success_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    int rc = mc_svc_check_client(svc->m, call, client);
    struct mc_key_ref key =
        mc_svc_key_from_pb(call, KEY(notify_promotion_success_request), req->key);
    if (rc == 0)
        rc = mc_master_promotion_success(svc->m, client, req->task_id, key.data, key.len);
    FREE_REQ(req);
    Mc__NotifyPromotionSuccessResponse r = MC__NOTIFY_PROMOTION_SUCCESS_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}

void mc_svc_notify_promotion_failure(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(NotifyPromotionFailureRequest, notify_promotion_failure_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    int rc = mc_svc_check_client(svc->m, call, client);
    struct mc_key_ref key =
        mc_svc_key_from_pb(call, KEY(notify_promotion_failure_request), req->key);
    if (rc == 0)
        rc = mc_master_promotion_failure(svc->m, client, req->task_id, key.data, key.len,
                                         req->reason);
    FREE_REQ(req);
    Mc__NotifyPromotionFailureResponse r = MC__NOTIFY_PROMOTION_FAILURE_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}
