/*
 * test_master_daemon_promotion.c - the real mooncake_master process, driven over its real ports
 * (master_daemon_fixture.h): promotion on hit over the RPCs: the holder's long-poll heartbeat,
 * AllocStart, success / failure, the metrics.
 */
#include "master_daemon_fixture.h"

struct promo_hb {
    struct mc_rpc_client *c;
    Mc__Uuid *client;
    uint32_t wait_ms;
    bool stage;                  /* ask for each task's staged replica */
    Mc__PromotionResult *result; /* a report to carry (NULL: none) */
    int rc;
    uint64_t ms;
    Mc__PromotionObjectHeartbeatResponse *resp;
};

static void *promo_hb_thread(void *arg)
{
    struct promo_hb *h = arg;
    Mc__PromotionObjectHeartbeatRequest req = MC__PROMOTION_OBJECT_HEARTBEAT_REQUEST__INIT;
    req.client_id = h->client;
    req.wait_ms = h->wait_ms;
    req.stage = h->stage;
    if (h->result) {
        req.n_results = 1;
        req.results = &h->result;
    }
    uint64_t t0 = mc_now_ms();
    ProtobufCMessage *resp = NULL;
    h->rc = mc_rpc_client_call_msg(h->c, MC_METHOD_PROMOTION_OBJECT_HEARTBEAT, &req.base,
                                   &mc__promotion_object_heartbeat_response__descriptor,
                                   h->wait_ms + 5000, &resp);
    h->ms = mc_now_ms() - t0;
    h->resp = (Mc__PromotionObjectHeartbeatResponse *)resp;
    return NULL;
}

/* MEMORY replicas of key as QueryKey lists them (-1: no such key); *processing those staged. */
static int query_memory(struct mc_rpc_client *c, const char *key, int *processing)
{
    Mc__QueryKeyRequest qk = MC__QUERY_KEY_REQUEST__INIT;
    qk.key = (char *)key;
    Mc__QueryKeyResponse *qr = NULL;
    if (md_call(c, MC_METHOD_QUERY_KEY, &qk, &mc__query_key_response__descriptor, &qr) != 0)
        return -1;
    int n = 0, p = 0;
    for (size_t i = 0; i < qr->n_replicas; i++) {
        const Mc__ReplicaDescriptor *r = qr->replicas[i]->replica;
        if (r->type != MC__REPLICA_TYPE__RT_MEMORY)
            continue;
        if (r->status == MC__REPLICA_STATUS__RS_COMPLETE)
            n++;
        else
            p++;
    }
    FREE_MSG(qr);
    if (processing)
        *processing = p;
    return n;
}

static bool get_lists_memory(struct mc_rpc_client *c, const char *key)
{
    Mc__GetReplicaListResponse *g = NULL;
    assert_int_equal(md_get(c, key, &g), 0);
    bool mem = false;
    for (size_t i = 0; i < g->n_replicas; i++)
        mem |= g->replicas[i]->type == MC__REPLICA_TYPE__RT_MEMORY;
    FREE_MSG(g);
    return mem;
}

/* Promotion through the RPCs of a real daemon: without offload the flag stays off (a warning) and
 * an out-of-range threshold is clamped (a warning); with it, a LOCAL_DISK-only key read twice is
 * handed to its holder's parked heartbeat at once, staged (holder only, size checked, invisible to
 * Get), committed, and the next Get lists DRAM; the funnel is in /metrics and GetStats. */
/* The state the promotion scenario's phases share. */
struct promo_x {
    struct daemon *d;
    struct mc_rpc_client *c2, *c3; /* c2: a's heartbeats; c3: bound to b */
    Mc__Uuid a, b, seg_id;
    uint64_t version, task_id;
};

#define MIB_ (1ull << 20)

/* Without --enable_offload: promotion refused and said so; the threshold clamped. */
static void promo_refused_without_offload(struct daemon *d, Mc__Uuid *a)
{
    Mc__PromotionObjectHeartbeatRequest hb = MC__PROMOTION_OBJECT_HEARTBEAT_REQUEST__INIT;
    hb.client_id = a;
    assert_int_equal(md_call(d->c, MC_METHOD_PROMOTION_OBJECT_HEARTBEAT, &hb,
                             &mc__promotion_object_heartbeat_response__descriptor, NULL),
                     MC_ERR_UNABLE_OFFLOAD);
    md_stop_ok(d);
    char log[16384] = {0};
    int fd = open(d->err_path, O_RDONLY);
    assert_true(fd >= 0);
    assert_true(read(fd, log, sizeof(log) - 1) >= 0);
    close(fd);
    assert_non_null(strstr(log, "promotion_on_hit needs --enable_offload"));
    assert_non_null(strstr(log, "promotion_admission_threshold outside 1..255: clamped"));
}

/* The master with offload and promotion on; a holds a LOCAL_DISK segment, b does not.
 */
static void promo_setup(struct promo_x *x)
{
    struct daemon *d = x->d;
    Mc__Uuid a = x->a, b = x->b, seg_id = x->seg_id;
    md_start(d, "--enable_offload", "--promotion_on_hit", "--promotion_max_per_heartbeat=4", NULL);
    d->c = md_connect(d);
    x->c2 = md_connect(d);
    x->c3 = md_connect(d);
    struct mc_rpc_client *c3 = x->c3;
    assert_int_equal(md_mount(d->c, &a, &seg_id, "seg0"), 0);
    assert_int_equal(md_ping(c3, &b, NULL), 0); /* c3 is b's */
    Mc__MountLocalDiskSegmentRequest ml = MC__MOUNT_LOCAL_DISK_SEGMENT_REQUEST__INIT;
    ml.client_id = &a;
    ml.enable_offloading = 0; /* this test attaches its disk copy itself */
    ml.endpoint = "127.0.0.1:2";
    ml.capacity_bytes = 1ull << 30;
    assert_int_equal(md_call(d->c, MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT, &ml,
                             &mc__mount_local_disk_segment_response__descriptor, NULL),
                     0);
    Mc__PromotionObjectHeartbeatRequest hb = MC__PROMOTION_OBJECT_HEARTBEAT_REQUEST__INIT;
    hb.client_id = &b; /* no LOCAL_DISK registration */
    assert_int_equal(md_call(c3, MC_METHOD_PROMOTION_OBJECT_HEARTBEAT, &hb,
                             &mc__promotion_object_heartbeat_response__descriptor, NULL),
                     MC_ERR_SEGMENT_NOT_FOUND);
}

/* m1 with a disk copy (what the holder's scan re-registers), then evicted from DRAM. */
static void promo_disk_only(struct promo_x *x)
{
    struct daemon *d = x->d;
    Mc__Uuid a = x->a;
    /* m1 with a disk copy (what the holder's scan re-registers), then evicted from DRAM by the
     * Puts after it */
    Mc__PutStartResponse *ps = NULL;
    assert_int_equal(md_put_start(d->c, &a, "m1", MIB_, &ps), 0);
    uint64_t version = x->version = ps->version;
    FREE_MSG(ps);
    assert_int_equal(md_put_end(d->c, &a, "m1", 42), 0);
    Mc__OffloadResult res = MC__OFFLOAD_RESULT__INIT;
    res.key = "m1";
    res.size = MIB_;
    res.version = version;
    res.crc32c = 42;
    res.crc_valid = 1;
    Mc__OffloadResult *items[1] = {&res};
    Mc__NotifyOffloadSuccessRequest ns = MC__NOTIFY_OFFLOAD_SUCCESS_REQUEST__INIT;
    ns.client_id = &a;
    ns.n_items = 1;
    ns.items = items;
    ns.reregister = 1;
    Mc__NotifyOffloadSuccessResponse *nr = NULL;
    assert_int_equal(md_call(d->c, MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, &ns,
                             &mc__notify_offload_success_response__descriptor, &nr),
                     0);
    assert_int_equal(nr->statuses[0], 0);
    FREE_MSG(nr);
    /* eviction goes by last access in milliseconds, ties in table order: the fills must come
     * after m1's millisecond, or the cycle may take tied fills instead of m1 (it did, 1 run in
     * 10, once the master's records were in huge pages and its Puts faster) */
    struct timespec gap = {0, 5 * 1000000L};
    nanosleep(&gap, NULL);
    for (int i = 0; i < 60; i++) {
        char k[32];
        snprintf(k, sizeof(k), "fill-%d", i);
        if (md_put_start(d->c, &a, k, MIB_, NULL) == 0)
            assert_int_equal(md_put_end(d->c, &a, k, 1), 0);
    }
    uint64_t deadline = mc_now_ms() + 10000;
    while (query_memory(d->c, "m1", NULL) != 0 && mc_now_ms() < deadline) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(query_memory(d->c, "m1", NULL), 0);
}

/* A heartbeat parked before the admission is answered by it: the task. */
static void promo_parked_heartbeat(struct promo_x *x)
{
    struct daemon *d = x->d;
    struct mc_rpc_client *c2 = x->c2;
    Mc__Uuid a = x->a;
    /* a heartbeat parked before the admission is answered by it */
    struct promo_hb h = {.c = c2, .client = &a, .wait_ms = 20000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, promo_hb_thread, &h), 0);
    struct timespec park = {0, 100 * 1000000L};
    nanosleep(&park, NULL);
    assert_false(get_lists_memory(d->c, "m1")); /* below the threshold */
    assert_false(get_lists_memory(d->c, "m1")); /* admitted: the Get itself is unchanged */
    pthread_join(th, NULL);
    assert_int_equal(h.rc, 0);
    assert_true(h.ms < 15000);
    assert_non_null(h.resp);
    assert_int_equal(h.resp->n_items, 1);
    assert_string_equal(h.resp->items[0]->key, "m1");
    assert_int_equal(h.resp->items[0]->size, MIB_);
    assert_int_equal(h.resp->items[0]->version, x->version);
    assert_int_equal(h.resp->items[0]->crc32c, 42);
    x->task_id = h.resp->items[0]->task_id;
    FREE_MSG(h.resp);
}

/* PromotionAllocStart: refused to a non-holder and for a wrong size; a staged copy. */
static void promo_alloc_start(struct promo_x *x)
{
    struct daemon *d = x->d;
    struct mc_rpc_client *c3 = x->c3;
    Mc__Uuid a = x->a, b = x->b;
    Mc__PromotionAllocStartRequest as = MC__PROMOTION_ALLOC_START_REQUEST__INIT;
    as.client_id = &b;
    as.task_id = x->task_id;
    as.key = "m1";
    as.size = MIB_;
    assert_int_equal(md_call(c3, MC_METHOD_PROMOTION_ALLOC_START, &as,
                             &mc__promotion_alloc_start_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS); /* not the holder */
    as.client_id = &a;
    as.size = MIB_ + 1;
    assert_int_equal(md_call(d->c, MC_METHOD_PROMOTION_ALLOC_START, &as,
                             &mc__promotion_alloc_start_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS); /* wrong size */
    as.size = MIB_;
    Mc__PromotionAllocStartResponse *ar = NULL;
    assert_int_equal(md_call(d->c, MC_METHOD_PROMOTION_ALLOC_START, &as,
                             &mc__promotion_alloc_start_response__descriptor, &ar),
                     0);
    assert_non_null(ar->replica);
    assert_int_equal(ar->replica->type, MC__REPLICA_TYPE__RT_MEMORY);
    assert_int_equal(ar->replica->status, MC__REPLICA_STATUS__RS_PROCESSING);
    assert_string_equal(ar->replica->memory->segment_name, "seg0");
    assert_true(ar->replica->memory->mount_epoch != 0);
    FREE_MSG(ar);
    int staged = 0;
    assert_int_equal(query_memory(d->c, "m1", &staged), 0);
    assert_int_equal(staged, 1);
    assert_false(get_lists_memory(d->c, "m1")); /* invisible to readers */
}

/* Success by the holder only, then stale; failure idempotent; m1 readable from DRAM. */
static void promo_commit(struct promo_x *x)
{
    struct daemon *d = x->d;
    struct mc_rpc_client *c3 = x->c3;
    Mc__Uuid a = x->a, b = x->b;
    int staged = 0;
    Mc__NotifyPromotionSuccessRequest ok = MC__NOTIFY_PROMOTION_SUCCESS_REQUEST__INIT;
    ok.client_id = &b;
    ok.task_id = x->task_id;
    ok.key = "m1";
    assert_int_equal(md_call(c3, MC_METHOD_NOTIFY_PROMOTION_SUCCESS, &ok,
                             &mc__notify_promotion_success_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS);
    ok.client_id = &a;
    assert_int_equal(md_call(d->c, MC_METHOD_NOTIFY_PROMOTION_SUCCESS, &ok,
                             &mc__notify_promotion_success_response__descriptor, NULL),
                     0);
    assert_int_equal(md_call(d->c, MC_METHOD_NOTIFY_PROMOTION_SUCCESS, &ok,
                             &mc__notify_promotion_success_response__descriptor, NULL),
                     MC_ERR_REPLICA_IS_NOT_READY); /* stale now */
    Mc__NotifyPromotionFailureRequest ko = MC__NOTIFY_PROMOTION_FAILURE_REQUEST__INIT;
    ko.client_id = &a;
    ko.task_id = x->task_id;
    ko.key = "m1";
    assert_int_equal(md_call(d->c, MC_METHOD_NOTIFY_PROMOTION_FAILURE, &ko,
                             &mc__notify_promotion_failure_response__descriptor, NULL),
                     0); /* idempotent */
    ko.key = "";
    assert_int_equal(md_call(d->c, MC_METHOD_NOTIFY_PROMOTION_FAILURE, &ko,
                             &mc__notify_promotion_failure_response__descriptor, NULL),
                     MC_ERR_INVALID_KEY);
    assert_true(get_lists_memory(d->c, "m1"));
    assert_int_equal(query_memory(d->c, "m1", &staged), 1);
    assert_int_equal(staged, 0);
}

/* An empty heartbeat after its wait; the metrics and GetStats counted it. */
static void promo_idle_and_metrics(struct promo_x *x)
{
    struct daemon *d = x->d;
    struct mc_rpc_client *c2 = x->c2;
    Mc__Uuid a = x->a;
    /* nothing queued: a heartbeat is answered empty once its wait passed */
    struct promo_hb h = {.c = c2, .client = &a, .wait_ms = 300};
    promo_hb_thread(&h);
    assert_int_equal(h.rc, 0);
    assert_true(h.ms >= 250);
    assert_int_equal(h.resp->n_items, 0);
    FREE_MSG(h.resp);

    assert_int_equal(md_http_get(d->metrics_port, "/metrics", &d->body), 200);
    int found = 0;
    assert_true(md_metric_value(d->body, "master_promotion_admitted_total", &found) == 1.0);
    assert_true(found);
    assert_true(md_metric_value(d->body, "master_promotion_completed_total", &found) == 1.0);
    assert_true(found);
    assert_true(md_metric_value(d->body, "master_promotion_completed_bytes_total", &found) ==
                (double)MIB_);
    assert_true(found);
    assert_true(md_metric_value(d->body, "master_promotion_in_flight", &found) == 0.0);
    assert_true(found);
    assert_non_null(strstr(d->body, "master_promotion_lag_seconds_count 1"));
    free(d->body);
    d->body = NULL;
    Mc__GetStatsResponse *st = md_stats(d->c);
    bool seen = false;
    for (size_t i = 0; i < st->n_extra; i++)
        if (!strcmp(st->extra[i]->name, "master_promotion_completed_total"))
            seen = st->extra[i]->value == 1.0;
    assert_true(seen);
    FREE_MSG(st);
}

static void test_promotion_rpcs(void **state)
{
    struct daemon *d = *state;
    struct promo_x x = {.d = d, .a = md_uuid(1, 2), .b = md_uuid(3, 4), .seg_id = md_uuid(7, 8)};
    md_start(d, "--promotion_on_hit", "--promotion_admission_threshold=300", NULL);
    d->c = md_connect(d);
    promo_refused_without_offload(d, &x.a);
    promo_setup(&x);
    promo_disk_only(&x);
    promo_parked_heartbeat(&x);
    promo_alloc_start(&x);
    promo_commit(&x);
    promo_idle_and_metrics(&x);
    mc_rpc_client_free(x.c2);
    mc_rpc_client_free(x.c3);
    md_stop_ok(d);
}

/* A heartbeat that asks for staging gets the task with its staged replica (the holder's own
 * segment, PROCESSING, invisible to Get: no AllocStart), and the next heartbeat's report
 * commits it (no NotifyPromotionSuccess); a report again on the ended task changes nothing. */
static void test_promotion_staged_heartbeat(void **state)
{
    struct daemon *d = *state;
    struct promo_x x = {.d = d, .a = md_uuid(1, 2), .b = md_uuid(3, 4), .seg_id = md_uuid(7, 8)};
    promo_setup(&x);
    promo_disk_only(&x);
    struct promo_hb h = {.c = x.c2, .client = &x.a, .wait_ms = 20000, .stage = true};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, promo_hb_thread, &h), 0);
    struct timespec park = {0, 100 * 1000000L};
    nanosleep(&park, NULL);
    assert_false(get_lists_memory(d->c, "m1")); /* below the threshold */
    assert_false(get_lists_memory(d->c, "m1")); /* admitted */
    pthread_join(th, NULL);
    assert_int_equal(h.rc, 0);
    assert_non_null(h.resp);
    assert_int_equal(h.resp->n_items, 1);
    const Mc__PromotionTaskItem *it = h.resp->items[0];
    assert_string_equal(it->key, "m1");
    assert_non_null(it->staged);
    assert_int_equal(it->staged->type, MC__REPLICA_TYPE__RT_MEMORY);
    assert_int_equal(it->staged->status, MC__REPLICA_STATUS__RS_PROCESSING);
    assert_string_equal(it->staged->memory->segment_name, "seg0");
    assert_true(it->staged->memory->mount_epoch != 0);
    uint64_t task_id = it->task_id;
    FREE_MSG(h.resp);
    int staged = 0;
    assert_int_equal(query_memory(d->c, "m1", &staged), 0);
    assert_int_equal(staged, 1);
    assert_false(get_lists_memory(d->c, "m1")); /* invisible to readers */

    /* the outcome rides on the next heartbeat */
    Mc__PromotionResult res = MC__PROMOTION_RESULT__INIT;
    res.task_id = task_id;
    res.key = "m1";
    res.status = 0;
    struct promo_hb h2 = {.c = x.c2, .client = &x.a, .wait_ms = 0, .stage = true, .result = &res};
    promo_hb_thread(&h2);
    assert_int_equal(h2.rc, 0);
    assert_int_equal(h2.resp->n_items, 0);
    FREE_MSG(h2.resp);
    assert_true(get_lists_memory(d->c, "m1"));
    assert_int_equal(query_memory(d->c, "m1", &staged), 1);
    assert_int_equal(staged, 0);

    /* the same report again (a heartbeat sent twice): the task ended, nothing changes */
    struct promo_hb h3 = {.c = x.c2, .client = &x.a, .wait_ms = 0, .stage = true, .result = &res};
    promo_hb_thread(&h3);
    assert_int_equal(h3.rc, 0);
    FREE_MSG(h3.resp);
    assert_int_equal(query_memory(d->c, "m1", &staged), 1);
    assert_int_equal(staged, 0);
    assert_int_equal(md_http_get(d->metrics_port, "/metrics", &d->body), 200);
    int found = 0;
    assert_true(md_metric_value(d->body, "master_promotion_completed_total", &found) == 1.0);
    assert_true(found);
    assert_true(md_metric_value(d->body, "master_promotion_in_flight", &found) == 0.0);
    free(d->body);
    d->body = NULL;
    mc_rpc_client_free(x.c2);
    mc_rpc_client_free(x.c3);
    md_stop_ok(d);
}

int main(void)
{
    md_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_promotion_rpcs, md_setup, md_teardown),
        cmocka_unit_test_setup_teardown(test_promotion_staged_heartbeat, md_setup, md_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
