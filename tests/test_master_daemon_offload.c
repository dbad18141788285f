/*
 * test_master_daemon_offload.c - the real mooncake_master process, driven over its real ports
 * (master_daemon_fixture.h): the LOCAL_DISK tier through the daemon: MountLocalDiskSegment, offload
 * heartbeats, NotifyOffloadSuccess, disk replica eviction.
 */
#include "master_daemon_fixture.h"

struct hb_call {
    struct mc_rpc_client *c;
    Mc__Uuid *client;
    uint32_t wait_ms;
    int rc;
    uint64_t ms;
    Mc__OffloadObjectHeartbeatResponse *resp;
};

static void *hb_thread(void *arg)
{
    struct hb_call *h = arg;
    Mc__OffloadObjectHeartbeatRequest req = MC__OFFLOAD_OBJECT_HEARTBEAT_REQUEST__INIT;
    req.client_id = h->client;
    req.enable_offloading = 1;
    req.wait_ms = h->wait_ms;
    req.max_items = 16;
    uint64_t t0 = mc_now_ms();
    ProtobufCMessage *resp = NULL;
    h->rc = mc_rpc_client_call_msg(h->c, MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT, &req.base,
                                   &mc__offload_object_heartbeat_response__descriptor,
                                   h->wait_ms + 5000, &resp);
    h->ms = mc_now_ms() - t0;
    h->resp = (Mc__OffloadObjectHeartbeatResponse *)resp;
    return NULL;
}

/* A Remove on its own connection (it waits for the holder's ack). */
struct rm_call {
    struct mc_rpc_client *c;
    Mc__Uuid *client;
    const char *key;
    int rc;
    uint64_t ms;
};

static void *rm_thread(void *arg)
{
    struct rm_call *r = arg;
    Mc__RemoveRequest rm = MC__REMOVE_REQUEST__INIT;
    rm.client_id = r->client;
    rm.key = (char *)r->key;
    rm.force = 1;
    uint64_t t0 = mc_now_ms();
    r->rc = md_call(r->c, MC_METHOD_REMOVE, &rm, &mc__remove_response__descriptor, NULL);
    r->ms = mc_now_ms() - t0;
    return NULL;
}

/* --enable_offload: a holder mounts its disk, long-polls for the task of a Put (answered when the
 * task arrives, or empty at its wait), reports it stored; Get lists the LOCAL_DISK replica with
 * the holder's endpoint; ListSegments and /metrics show the disk; a Remove sends the holder a
 * delete and answers once the holder acknowledges it; SIGTERM with a heartbeat parked exits
 * cleanly. */
/* The state the offload scenario's phases share. */
struct off_x {
    struct daemon *d;
    struct mc_rpc_client *c2; /* a's heartbeats */
    Mc__Uuid a, seg_id;
    uint64_t version, task_id; /* the Put of "k" and its offload task */
};

/* a's DRAM segment and its LOCAL_DISK segment, offloading on. */
static void off_setup(struct off_x *x)
{
    struct daemon *d = x->d;
    Mc__Uuid a = x->a, seg_id = x->seg_id;
    assert_int_equal(md_mount(d->c, &a, &seg_id, "seg0"), 0);
    Mc__MountLocalDiskSegmentRequest ml = MC__MOUNT_LOCAL_DISK_SEGMENT_REQUEST__INIT;
    ml.client_id = &a;
    ml.enable_offloading = 1;
    ml.endpoint = "127.0.0.1:2";
    ml.capacity_bytes = 1ull << 30;
    assert_int_equal(md_call(d->c, MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT, &ml,
                             &mc__mount_local_disk_segment_response__descriptor, NULL),
                     0);
}

/* A heartbeat parked on c2 is answered by the Put's offload task. */
static void off_task_by_put(struct off_x *x)
{
    struct daemon *d = x->d;
    struct mc_rpc_client *c2 = x->c2;
    Mc__Uuid a = x->a;
    /* a heartbeat parked on c2 is answered by the Put's task */
    struct hb_call h = {.c = c2, .client = &a, .wait_ms = 20000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, hb_thread, &h), 0);
    Mc__PutStartResponse *ps = NULL;
    assert_int_equal(md_put_start(d->c, &a, "k", 100, &ps), 0);
    x->version = ps->version;
    FREE_MSG(ps);
    assert_int_equal(md_put_end(d->c, &a, "k", 42), 0);
    pthread_join(th, NULL);
    assert_int_equal(h.rc, 0);
    assert_true(h.ms < 15000); /* not the 20 s wait */
    assert_non_null(h.resp);
    assert_int_equal(h.resp->n_items, 1);
    Mc__OffloadTaskItem *it = h.resp->items[0];
    assert_string_equal(it->key, "k");
    assert_int_equal(it->version, x->version);
    assert_int_equal(it->size, 100);
    assert_int_equal(it->crc32c, 42);
    assert_false(it->drop);
    x->task_id = it->task_id;
    FREE_MSG(h.resp);
}

/* Nothing queued: a heartbeat is answered empty once its wait passed. */
static void off_idle_heartbeat(struct off_x *x)
{
    struct mc_rpc_client *c2 = x->c2;
    Mc__Uuid a = x->a;
    /* nothing queued: answered empty once its wait passed */
    struct hb_call h = {.c = c2, .client = &a, .wait_ms = 300};
    hb_thread(&h);
    assert_int_equal(h.rc, 0);
    assert_true(h.ms >= 250);
    assert_int_equal(h.resp->n_items, 0);
    FREE_MSG(h.resp);
}

/* NotifyOffloadSuccess; the same report again finds no task. */
static void off_success(struct off_x *x)
{
    struct daemon *d = x->d;
    Mc__Uuid a = x->a;
    Mc__OffloadResult res = MC__OFFLOAD_RESULT__INIT;
    res.task_id = x->task_id;
    res.key = "k";
    res.size = 100;
    res.version = x->version;
    res.crc32c = 42;
    res.crc_valid = 1;
    Mc__OffloadResult *resp_items[1] = {&res};
    Mc__NotifyOffloadSuccessRequest ns = MC__NOTIFY_OFFLOAD_SUCCESS_REQUEST__INIT;
    ns.client_id = &a;
    ns.n_items = 1;
    ns.items = resp_items;
    Mc__NotifyOffloadSuccessResponse *nr = NULL;
    assert_int_equal(md_call(d->c, MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, &ns,
                             &mc__notify_offload_success_response__descriptor, &nr),
                     0);
    assert_int_equal(nr->n_statuses, 1);
    assert_int_equal(nr->statuses[0], 0);
    FREE_MSG(nr);
    /* the same report again: the task is gone, the holder is told so */
    assert_int_equal(md_call(d->c, MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, &ns,
                             &mc__notify_offload_success_response__descriptor, &nr),
                     0);
    assert_int_equal(nr->statuses[0], MC_ERR_TASK_NOT_FOUND);
    FREE_MSG(nr);
}

/* The disk replica in GetReplicaList, ListSegments, GetStats and /metrics. */
static void off_visible(struct off_x *x)
{
    struct daemon *d = x->d;
    Mc__GetReplicaListResponse *g = NULL;
    assert_int_equal(md_get(d->c, "k", &g), 0);
    assert_int_equal(g->n_replicas, 2);
    assert_int_equal(g->replicas[1]->type, MC__REPLICA_TYPE__RT_LOCAL_DISK);
    assert_non_null(g->replicas[1]->local_disk);
    assert_string_equal(g->replicas[1]->local_disk->endpoint, "127.0.0.1:2");
    assert_int_equal(g->replicas[1]->local_disk->holder->lo, 2);
    assert_int_equal(g->replicas[1]->local_disk->size, 100);
    FREE_MSG(g);

    Mc__ListSegmentsResponse *ls = NULL;
    assert_int_equal(
        md_call(d->c, MC_METHOD_LIST_SEGMENTS, NULL, &mc__list_segments_response__descriptor, &ls),
        0);
    assert_int_equal(ls->n_local_disks, 1);
    assert_string_equal(ls->local_disks[0]->endpoint, "127.0.0.1:2");
    assert_int_equal(ls->local_disks[0]->replica_count, 1);
    assert_int_equal(ls->local_disks[0]->used_bytes, 100);
    assert_int_equal(ls->local_disks[0]->capacity_bytes, 1ull << 30);
    assert_true(ls->local_disks[0]->enable_offloading);
    FREE_MSG(ls);
    Mc__GetStatsResponse *st = md_stats(d->c);
    assert_int_equal(st->local_disk_replica_count, 1);
    assert_int_equal(st->offload_in_flight, 0);
    FREE_MSG(st);
    assert_int_equal(md_http_get(d->metrics_port, "/metrics", &d->body), 200);
    int found = 0;
    assert_true(md_metric_value(d->body, "master_offload_completed_total", &found) == 1.0);
    assert_true(found);
    assert_true(md_metric_value(d->body, "master_allocated_file_size_bytes", &found) == 100.0);
    assert_true(found);
    assert_true(md_metric_value(d->body, "master_total_file_capacity_bytes", &found) ==
                (double)(1ull << 30));
    assert_true(found);
    free(d->body);
    d->body = NULL;
}

/* Remove and the delete rule: answered by the holder's ack, not the fence. */
static void off_remove(struct off_x *x)
{
    struct daemon *d = x->d;
    struct mc_rpc_client *c2 = x->c2;
    Mc__Uuid a = x->a;
    /* Remove: the holder's parked heartbeat gets a delete of that version at once, and the
     * Remove answers when the holder acknowledges it (the delete rule), not at the timeout */
    struct hb_call h = {.c = c2, .client = &a, .wait_ms = 5000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, hb_thread, &h), 0);
    struct rm_call rmc = {.c = d->c, .client = &a, .key = "k"};
    pthread_t rth;
    assert_int_equal(pthread_create(&rth, NULL, rm_thread, &rmc), 0);
    pthread_join(th, NULL);
    assert_int_equal(h.rc, 0);
    assert_true(h.ms < 4000); /* woken by the delete, not the 5 s wait */
    assert_int_equal(h.resp->n_items, 1);
    assert_true(h.resp->items[0]->drop);
    assert_int_equal(h.resp->items[0]->version, x->version);
    uint64_t del_id = h.resp->items[0]->task_id;
    assert_int_not_equal(del_id, 0);
    FREE_MSG(h.resp);
    Mc__OffloadObjectHeartbeatRequest ackr = MC__OFFLOAD_OBJECT_HEARTBEAT_REQUEST__INIT;
    ackr.client_id = &a;
    ackr.enable_offloading = 1;
    ackr.n_acked_delete_task_ids = 1;
    ackr.acked_delete_task_ids = &del_id;
    assert_int_equal(md_call(c2, MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT, &ackr,
                             &mc__offload_object_heartbeat_response__descriptor, NULL),
                     0);
    pthread_join(rth, NULL);
    assert_int_equal(rmc.rc, 0);
    assert_true(rmc.ms < 1500); /* the ack answered it, not the 2 s fence */
}

/* A disk eviction of an absent key. */
static void off_evict_absent(struct off_x *x)
{
    struct daemon *d = x->d;
    Mc__Uuid a = x->a;
    /* a disk eviction of an absent key, and one of a non-holder */
    Mc__EvictDiskReplicaRequest ev = MC__EVICT_DISK_REPLICA_REQUEST__INIT;
    ev.client_id = &a;
    ev.key = "k";
    assert_int_equal(md_call(d->c, MC_METHOD_EVICT_DISK_REPLICA, &ev,
                             &mc__evict_disk_replica_response__descriptor, NULL),
                     MC_ERR_OBJECT_NOT_FOUND);
}

/* SIGTERM while a heartbeat is parked: it is answered and the master exits 0. */
static void off_sigterm_parked(struct off_x *x)
{
    struct daemon *d = x->d;
    struct mc_rpc_client *c2 = x->c2;
    Mc__Uuid a = x->a;
    /* SIGTERM while a heartbeat is parked: the daemon answers it and exits 0 */
    struct hb_call h = {.c = c2, .client = &a, .wait_ms = 30000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, hb_thread, &h), 0);
    Mc__GetStatsResponse *st2 = md_stats(d->c); /* the heartbeat had time to reach the master */
    FREE_MSG(st2);
    md_stop_ok(d);
    pthread_join(th, NULL);
    assert_int_not_equal(h.rc, 0);
    assert_true(h.ms < 25000);
    if (h.resp)
        FREE_MSG(h.resp);
}

static void test_offload_rpcs(void **state)
{
    struct daemon *d = *state;
    struct off_x x = {.d = d, .a = md_uuid(1, 2), .seg_id = md_uuid(7, 8)};
    md_start(d, "--enable_offload", NULL);
    d->c = md_connect(d);
    x.c2 = md_connect(d);
    off_setup(&x);
    off_task_by_put(&x);
    off_idle_heartbeat(&x);
    off_success(&x);
    off_visible(&x);
    off_remove(&x);
    off_evict_absent(&x);
    off_sigterm_parked(&x);
    mc_rpc_client_free(x.c2);
}

int main(void)
{
    md_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_offload_rpcs, md_setup, md_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
