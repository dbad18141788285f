/*
 * test_master_daemon_objects.c - the real mooncake_master process, driven over its real ports
 * (master_daemon_fixture.h): the object RPCs: PutStart / PutEnd / PutRevoke, Get, Exist, QueryKey,
 * their batch forms, Remove / BatchRemove / RemoveAll; late PutEnd / PutRevoke of a taken-over
 * Put refused by version.
 */
#include "master_daemon_fixture.h"

/* PutStart, not readable until PutEnd; Get of a missing or empty key. Returns the version. */
static uint64_t objects_put_get(struct daemon *d, Mc__Uuid *a)
{
    /* PutStart -> not readable -> PutEnd -> readable */
    Mc__PutStartResponse *ps = NULL;
    assert_int_equal(md_put_start(d->c, a, "k1", 4096, &ps), 0);
    assert_int_equal(ps->n_replicas, 1);
    assert_int_equal(ps->replicas[0]->status, MC__REPLICA_STATUS__RS_PROCESSING);
    md_check_replica(ps->replicas[0], 4096);
    uint64_t version = ps->version;
    assert_true(version != 0);
    FREE_MSG(ps);
    assert_int_equal(md_get(d->c, "k1", NULL), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(md_put_start(d->c, a, "k1", 4096, NULL), MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(md_put_end(d->c, a, "k1", 0xabcdef01u), 0);
    Mc__GetReplicaListResponse *g = NULL;
    assert_int_equal(md_get(d->c, "k1", &g), 0);
    assert_int_equal(g->status, 0);
    assert_int_equal(g->n_replicas, 1);
    assert_int_equal(g->replicas[0]->status, MC__REPLICA_STATUS__RS_COMPLETE);
    md_check_replica(g->replicas[0], 4096);
    assert_int_equal(g->size, 4096);
    assert_int_equal(g->version, version);
    assert_int_equal(g->crc32c, 0xabcdef01u);
    assert_true(g->crc_valid);
    assert_int_equal(g->lease_ttl_ms, 10000);
    FREE_MSG(g);
    assert_int_equal(md_get(d->c, "nope", NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(md_get(d->c, "", NULL), MC_ERR_INVALID_KEY);
    return version;
}

/* ExistKey of a present and a missing key. */
static void objects_exist(struct daemon *d)
{
    Mc__ExistKeyRequest ek = MC__EXIST_KEY_REQUEST__INIT;
    Mc__ExistKeyResponse *er = NULL;
    ek.key = "k1";
    assert_int_equal(
        md_call(d->c, MC_METHOD_EXIST_KEY, &ek, &mc__exist_key_response__descriptor, &er), 0);
    assert_true(er->exists);
    FREE_MSG(er);
    ek.key = "nope";
    assert_int_equal(
        md_call(d->c, MC_METHOD_EXIST_KEY, &ek, &mc__exist_key_response__descriptor, &er), 0);
    assert_false(er->exists);
    FREE_MSG(er);
}

/* BatchPutStart (one key already exists; mismatched lengths) and BatchPutEnd. */
static void objects_batch_put(struct daemon *d, Mc__Uuid *a)
{
    /* batch forms: b1, b2 put; "k1" already exists */
    char *bkeys[3] = {"b1", "b2", "k1"};
    uint64_t blens[3] = {1000, 2000, 3000};
    Mc__BatchPutStartResponse *bpr = NULL;
    assert_int_equal(md_batch_put_start(d->c, a, bkeys, 3, blens, 3, &bpr), 0);
    assert_int_equal(bpr->n_results, 3);
    assert_int_equal(bpr->results[0]->status, 0);
    assert_int_equal(bpr->results[0]->n_replicas, 1);
    md_check_replica(bpr->results[0]->replicas[0], 1000);
    assert_int_equal(bpr->results[1]->status, 0);
    assert_int_equal(bpr->results[2]->status, MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(bpr->results[2]->n_replicas, 0);
    FREE_MSG(bpr);
    /* mismatched lengths: every item INVALID_PARAMS */
    assert_int_equal(md_batch_put_start(d->c, a, bkeys, 3, blens, 2, &bpr), 0);
    assert_int_equal(bpr->n_results, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(bpr->results[i]->status, MC_ERR_INVALID_PARAMS);
    FREE_MSG(bpr);

    Mc__PutEndItem it[3] = {MC__PUT_END_ITEM__INIT, MC__PUT_END_ITEM__INIT, MC__PUT_END_ITEM__INIT};
    Mc__PutEndItem *itp[3] = {&it[0], &it[1], &it[2]};
    it[0].key = "b1";
    it[1].key = "b2";
    it[2].key = "never";
    Mc__BatchPutEndResponse *bper = NULL;
    assert_int_equal(md_batch_put_end(d->c, a, itp, 3, &bper), 0);
    assert_int_equal(bper->n_statuses, 3);
    assert_int_equal(bper->statuses[0], 0);
    assert_int_equal(bper->statuses[1], 0);
    assert_int_equal(bper->statuses[2], MC_ERR_OBJECT_NOT_FOUND);
    FREE_MSG(bper);
}

/* BatchGetReplicaList and BatchExistKey over present and missing keys. */
static void objects_batch_read(struct daemon *d, uint64_t version)
{
    char *gkeys[3] = {"b1", "missing", "k1"};
    Mc__BatchGetReplicaListRequest bg = MC__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
    bg.n_keys = 3;
    bg.keys = gkeys;
    Mc__BatchGetReplicaListResponse *bgr = NULL;
    assert_int_equal(md_call(d->c, MC_METHOD_BATCH_GET_REPLICA_LIST, &bg,
                             &mc__batch_get_replica_list_response__descriptor, &bgr),
                     0);
    assert_int_equal(bgr->n_results, 3);
    assert_int_equal(bgr->results[0]->status, 0);
    assert_int_equal(bgr->results[0]->size, 1000);
    md_check_replica(bgr->results[0]->replicas[0], 1000);
    assert_int_equal(bgr->results[1]->status, MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(bgr->results[1]->n_replicas, 0);
    assert_int_equal(bgr->results[2]->status, 0);
    assert_int_equal(bgr->results[2]->version, version);
    FREE_MSG(bgr);

    Mc__BatchExistKeyRequest be = MC__BATCH_EXIST_KEY_REQUEST__INIT;
    be.n_keys = 3;
    be.keys = gkeys;
    Mc__BatchExistKeyResponse *ber = NULL;
    assert_int_equal(md_call(d->c, MC_METHOD_BATCH_EXIST_KEY, &be,
                             &mc__batch_exist_key_response__descriptor, &ber),
                     0);
    assert_int_equal(ber->n_exists, 3);
    assert_int_equal(ber->n_statuses, 3);
    assert_true(ber->exists[0]);
    assert_false(ber->exists[1]);
    assert_true(ber->exists[2]);
    FREE_MSG(ber);
}

/* QueryKey and GetStats. */
static void objects_query(struct daemon *d, uint64_t version)
{
    /* QueryKey: lease visible (Get granted one), no side effects */
    Mc__QueryKeyRequest qk = MC__QUERY_KEY_REQUEST__INIT;
    qk.key = "k1";
    Mc__QueryKeyResponse *qr = NULL;
    assert_int_equal(
        md_call(d->c, MC_METHOD_QUERY_KEY, &qk, &mc__query_key_response__descriptor, &qr), 0);
    assert_string_equal(qr->key, "k1");
    assert_int_equal(qr->size, 4096);
    assert_int_equal(qr->version, version);
    assert_true(qr->lease_ms_left > 0);
    assert_false(qr->put_in_progress);
    assert_int_equal(qr->n_replicas, 1);
    assert_int_equal(qr->replicas[0]->replica->status, MC__REPLICA_STATUS__RS_COMPLETE);
    FREE_MSG(qr);
    qk.key = "missing";
    assert_int_equal(
        md_call(d->c, MC_METHOD_QUERY_KEY, &qk, &mc__query_key_response__descriptor, &qr),
        MC_ERR_OBJECT_NOT_FOUND);

    Mc__GetStatsResponse *st = md_stats(d->c);
    assert_int_equal(st->key_count, 3);
    assert_true(st->allocated_bytes >= 4096 + 1000 + 2000);
    FREE_MSG(st);
}

/* PutRevoke and BatchPutRevoke. */
static void objects_revoke(struct daemon *d, Mc__Uuid *a)
{
    /* PutRevoke */
    assert_int_equal(md_put_start(d->c, a, "r1", 100, NULL), 0);
    assert_int_equal(md_put_revoke(d->c, a, "r1", 0), 0);
    assert_int_equal(md_get(d->c, "r1", NULL), MC_ERR_OBJECT_NOT_FOUND);
    char *rkeys[2] = {"r2", "r3"};
    uint64_t rlens[2] = {10, 10};
    assert_int_equal(md_batch_put_start(d->c, a, rkeys, 2, rlens, 2, NULL), 0);
    Mc__BatchPutRevokeResponse *bpvr = NULL;
    assert_int_equal(md_batch_put_revoke(d->c, a, rkeys, 2, NULL, &bpvr), 0);
    assert_int_equal(bpvr->n_statuses, 2);
    assert_int_equal(bpvr->statuses[0], 0);
    assert_int_equal(bpvr->statuses[1], 0);
    FREE_MSG(bpvr);
}

/* Remove (a leased object only when forced), BatchRemove, RemoveAll. */
static void objects_remove(struct daemon *d)
{
    /* Remove: leased -> OBJECT_HAS_LEASE unless forced */
    Mc__RemoveRequest rr = MC__REMOVE_REQUEST__INIT;
    rr.key = "k1";
    assert_int_equal(md_call(d->c, MC_METHOD_REMOVE, &rr, &mc__remove_response__descriptor, NULL),
                     MC_ERR_OBJECT_HAS_LEASE);
    rr.force = 1;
    assert_int_equal(md_call(d->c, MC_METHOD_REMOVE, &rr, &mc__remove_response__descriptor, NULL),
                     0);
    assert_int_equal(md_call(d->c, MC_METHOD_REMOVE, &rr, &mc__remove_response__descriptor, NULL),
                     MC_ERR_OBJECT_NOT_FOUND);
    char *rmkeys[2] = {"b1", "zz"};
    Mc__BatchRemoveRequest br = MC__BATCH_REMOVE_REQUEST__INIT;
    br.n_keys = 2;
    br.keys = rmkeys;
    br.force = 1;
    Mc__BatchRemoveResponse *brr = NULL;
    assert_int_equal(
        md_call(d->c, MC_METHOD_BATCH_REMOVE, &br, &mc__batch_remove_response__descriptor, &brr),
        0);
    assert_int_equal(brr->n_statuses, 2);
    assert_int_equal(brr->statuses[0], 0);
    assert_int_equal(brr->statuses[1], MC_ERR_OBJECT_NOT_FOUND);
    FREE_MSG(brr);
    Mc__RemoveAllRequest ra = MC__REMOVE_ALL_REQUEST__INIT;
    ra.force = 1;
    Mc__RemoveAllResponse *rar = NULL;
    assert_int_equal(
        md_call(d->c, MC_METHOD_REMOVE_ALL, &ra, &mc__remove_all_response__descriptor, &rar), 0);
    assert_int_equal(rar->removed, 1); /* b2 */
    FREE_MSG(rar);
    Mc__GetStatsResponse *st = md_stats(d->c);
    assert_int_equal(st->key_count, 0);
    FREE_MSG(st);
}

static void test_objects(void **state)
{
    struct daemon *d = *state;
    md_start(d, NULL);
    d->c = md_connect(d);
    Mc__Uuid a = md_uuid(1, 2), seg_id = md_uuid(7, 8);
    assert_int_equal(md_mount(d->c, &a, &seg_id, "seg0"), 0);
    uint64_t version = objects_put_get(d, &a);
    objects_exist(d);
    objects_batch_put(d, &a);
    objects_batch_read(d, version);
    objects_query(d, version);
    objects_revoke(d, &a);
    objects_remove(d);
    md_stop_ok(d);
}

/* The takeover the Put versions exist for, through the real RPC service: a Put of "t" stalls
 * past --put_start_discard_timeout_sec, its owner PutStarts "t" again (v2), then the first
 * incarnation's PutEnd / PutRevoke (v1) arrive late, single and batched. Each is INVALID_VERSION
 * and v2 stays PROCESSING; only v2's own PutEnd completes it. A service that dropped a request's
 * version would hand the core 0 ("do not check") and the late call would succeed. */
/* A Put of "t" stalls past --put_start_discard_timeout_sec and its owner PutStarts "t"
 * again. Returns v2, the second incarnation's version; v1 into *v1_out. */
static uint64_t late_takeover(struct daemon *d, Mc__Uuid *a, uint64_t *v1_out)
{
    Mc__PutStartResponse *ps = NULL;
    assert_int_equal(md_put_start(d->c, a, "t", 100, &ps), 0);
    uint64_t v1 = ps->version;
    FREE_MSG(ps);
    /* the same owner starts "t" again once the first Put is past its discard timeout */
    uint64_t v2 = 0, deadline = mc_now_ms() + 10000;
    for (;;) {
        ps = NULL;
        int rc = md_put_start(d->c, a, "t", 100, &ps);
        if (rc == 0) {
            v2 = ps->version;
            FREE_MSG(ps);
            break;
        }
        assert_int_equal(rc, MC_ERR_OBJECT_ALREADY_EXISTS);
        assert_true(mc_now_ms() < deadline);
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_true(v2 > v1);
    *v1_out = v1;
    return v2;
}

/* v1's late PutEnd and PutRevoke: INVALID_VERSION. */
static void late_single(struct daemon *d, Mc__Uuid *a, uint64_t v1)
{
    assert_int_equal(md_put_end_v(d->c, a, "t", v1, 1), MC_ERR_INVALID_VERSION);
    assert_int_equal(md_put_revoke(d->c, a, "t", v1), MC_ERR_INVALID_VERSION);
}

/* The batch forms: each item's version is checked. */
static void late_batch(struct daemon *d, Mc__Uuid *a, uint64_t v1)
{
    /* the batch forms: each item's version is checked */
    Mc__PutEndItem item = MC__PUT_END_ITEM__INIT, *items[1] = {&item};
    item.key = "t";
    item.version = v1;
    item.crc32c = 1;
    item.crc_valid = 1;
    Mc__BatchPutEndResponse *ber = NULL;
    assert_int_equal(md_batch_put_end(d->c, a, items, 1, &ber), 0);
    assert_int_equal(ber->n_statuses, 1);
    assert_int_equal(ber->statuses[0], MC_ERR_INVALID_VERSION);
    FREE_MSG(ber);
    char *bkeys[1] = {"t"};
    uint64_t bvers[1] = {v1};
    Mc__BatchPutRevokeResponse *brr = NULL;
    assert_int_equal(md_batch_put_revoke(d->c, a, bkeys, 1, bvers, &brr), 0);
    assert_int_equal(brr->n_statuses, 1);
    assert_int_equal(brr->statuses[0], MC_ERR_INVALID_VERSION);
    FREE_MSG(brr);
}

/* v2 untouched by the late calls; only its own PutEnd completes it; v1 still refused after. */
static void late_v2_completes(struct daemon *d, Mc__Uuid *a, uint64_t v1, uint64_t v2)
{
    /* v2 is untouched: still PROCESSING, invisible to readers */
    assert_int_equal(md_get(d->c, "t", NULL), MC_ERR_REPLICA_IS_NOT_READY);
    /* its own PutEnd completes it, and a reader sees v2 with v2's CRC */
    assert_int_equal(md_put_end_v(d->c, a, "t", v2, 2), 0);
    Mc__GetReplicaListResponse *g = NULL;
    assert_int_equal(md_get(d->c, "t", &g), 0);
    assert_int_equal(g->version, v2);
    assert_int_equal(g->crc32c, 2);
    FREE_MSG(g);
    /* a late v1 on the completed object is still refused */
    assert_int_equal(md_put_end_v(d->c, a, "t", v1, 1), MC_ERR_INVALID_VERSION);
}

static void test_late_put_end_through_service(void **state)
{
    struct daemon *d = *state;
    md_start(d, "--put_start_discard_timeout_sec=200ms", NULL);
    d->c = md_connect(d);
    Mc__Uuid a = md_uuid(11, 12), seg_id = md_uuid(13, 14);
    assert_int_equal(md_mount(d->c, &a, &seg_id, "seg-late"), 0);
    uint64_t v1 = 0, v2 = late_takeover(d, &a, &v1);
    late_single(d, &a, v1);
    late_batch(d, &a, v1);
    late_v2_completes(d, &a, v1, v2);
    md_stop_ok(d);
}

int main(void)
{
    md_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_objects, md_setup, md_teardown),
        cmocka_unit_test_setup_teardown(test_late_put_end_through_service, md_setup, md_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
