/*
 * test_master_service_batch.c - the contract of the master's batch RPC adapters, over a real
 * rpc_server on loopback with the master core in-process (fake clock, manual ticks).
 *
 * Every batch method runs through one generic adapter (service_batch.c), so these cases pin what
 * it must keep for each of them: the batch bound (MC_SERVICE_MAX_BATCH items pass, one more is
 * INVALID_PARAMS for the whole call, for key lists and message items alike), empty batches,
 * per-item answers in request order, request-wide problems answered per item where the method
 * says so (value_lengths, versions, replica type) and for the whole call where it says that
 * (BatchEvictDiskReplica versions, a bad ReMountSegment segment), and the order of those checks
 * against the connection's client binding: a call refused before its client check binds nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/rpc_client.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "master/service.h"
#include "proto/master.pb-c.h"
#include "test_master_util.h"

#define NMAX ((size_t)MC_SERVICE_MAX_BATCH)

struct fixture {
    struct mc_fake_clock fc;
    struct mc_master *m;
    struct mc_master_service *svc;
    struct mc_rpc_server *srv;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    mc_fake_clock_init(&f->fc, 1000ull * 1000000000ull);
    f->m = tm_master(&f->fc, 5);
    assert_non_null(f->m);
    struct mc_segment_desc sd = tm_seg(1, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(f->m, tm_id(1), &sd, NULL), MC_OK);
    assert_int_equal(mc_master_service_new(f->m, &f->svc), 0);
    struct mc_rpc_server_config rcfg;
    mc_rpc_server_config_init(&rcfg);
    rcfg.bind_addr = "127.0.0.1";
    rcfg.port = 0;
    rcfg.io_threads = 1;
    rcfg.name = "master";
    rcfg.on_close = mc_master_service_on_close;
    rcfg.on_close_arg = f->svc;
    assert_int_equal(mc_rpc_server_new(&rcfg, &f->srv), 0);
    assert_int_equal(mc_master_service_register(f->svc, f->srv), 0);
    assert_int_equal(mc_rpc_server_start(f->srv), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    mc_rpc_server_stop(f->srv);
    mc_rpc_server_free(f->srv);
    mc_master_service_free(f->svc);
    mc_master_free(f->m);
    free(f);
    return 0;
}

/* A fresh connection (so a fresh client binding). */
static struct mc_rpc_client *connect_to(struct fixture *f)
{
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = "127.0.0.1";
    cc.port = mc_rpc_server_port(f->srv);
    cc.call_timeout_ms = 20000;
    struct mc_rpc_client *c = NULL;
    assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
    assert_int_equal(mc_rpc_client_connect(c), 0);
    return c;
}

/* One call; the frame status. *resp (when asked for) is freed by the caller on 0. */
static int call(struct mc_rpc_client *c, uint16_t method, const ProtobufCMessage *req,
                const ProtobufCMessageDescriptor *desc, void *resp)
{
    ProtobufCMessage *r = NULL;
    int rc = mc_rpc_client_call_msg(c, method, req, desc, 0, &r);
    if (resp)
        *(ProtobufCMessage **)resp = r;
    else if (r)
        protobuf_c_message_free_unpacked(r, NULL);
    return rc;
}

static void free_msg(void *msg)
{
    protobuf_c_message_free_unpacked(msg, NULL);
}

static Mc__Uuid uuid_of(uint64_t n)
{
    struct mc_id id = tm_id(n);
    Mc__Uuid u = MC__UUID__INIT;
    u.hi = id.hi;
    u.lo = id.lo;
    return u;
}

/* ---- the batch bound ---------------------------------------------------------------------- */

/* n keys, all "k" (the arrays are static: 8193 pointers). */
static char **keys_n(size_t n)
{
    static char k[] = "k";
    static char *keys[NMAX + 1];
    assert_true(n <= NMAX + 1);
    for (size_t i = 0; i < n; i++)
        keys[i] = k;
    return keys;
}

static void test_batch_bound(void **state)
{
    struct fixture *f = *state;
    struct mc_rpc_client *c = connect_to(f);
    Mc__Uuid me = uuid_of(1);
    static uint64_t lens[NMAX + 1];
    for (size_t n = NMAX; n <= NMAX + 1; n++) {
        int want = n > NMAX ? MC_ERR_INVALID_PARAMS : 0;
        Mc__BatchExistKeyRequest be = MC__BATCH_EXIST_KEY_REQUEST__INIT;
        be.n_keys = n;
        be.keys = keys_n(n);
        Mc__BatchExistKeyResponse *ber = NULL;
        assert_int_equal(call(c, MC_METHOD_BATCH_EXIST_KEY, &be.base,
                              &mc__batch_exist_key_response__descriptor, &ber),
                         want);
        if (want == 0) {
            assert_int_equal(ber->n_statuses, n);
            assert_int_equal(ber->n_exists, n);
            assert_false(ber->exists[n - 1]);
            free_msg(ber);
        }
        Mc__BatchGetReplicaListRequest bg = MC__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
        bg.n_keys = n;
        bg.keys = keys_n(n);
        bg.client_id = &me;
        Mc__BatchGetReplicaListResponse *bgr = NULL;
        assert_int_equal(call(c, MC_METHOD_BATCH_GET_REPLICA_LIST, &bg.base,
                              &mc__batch_get_replica_list_response__descriptor, &bgr),
                         want);
        if (want == 0) {
            assert_int_equal(bgr->n_results, n);
            assert_int_equal(bgr->results[n - 1]->status, MC_ERR_OBJECT_NOT_FOUND);
            free_msg(bgr);
        }
    }
    /* one over the bound, every other batch method */
    size_t n = NMAX + 1;
    Mc__BatchPutStartRequest bps = MC__BATCH_PUT_START_REQUEST__INIT;
    bps.client_id = &me;
    bps.n_keys = n;
    bps.keys = keys_n(n);
    bps.n_value_lengths = n;
    bps.value_lengths = lens;
    assert_int_equal(call(c, MC_METHOD_BATCH_PUT_START, &bps.base,
                          &mc__batch_put_start_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS);
    Mc__BatchPutRevokeRequest bpv = MC__BATCH_PUT_REVOKE_REQUEST__INIT;
    bpv.client_id = &me;
    bpv.n_keys = n;
    bpv.keys = keys_n(n);
    assert_int_equal(call(c, MC_METHOD_BATCH_PUT_REVOKE, &bpv.base,
                          &mc__batch_put_revoke_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS);
    Mc__BatchRemoveRequest br = MC__BATCH_REMOVE_REQUEST__INIT;
    br.client_id = &me;
    br.n_keys = n;
    br.keys = keys_n(n);
    assert_int_equal(
        call(c, MC_METHOD_BATCH_REMOVE, &br.base, &mc__batch_remove_response__descriptor, NULL),
        MC_ERR_INVALID_PARAMS);
    Mc__BatchEvictDiskReplicaRequest bev = MC__BATCH_EVICT_DISK_REPLICA_REQUEST__INIT;
    bev.client_id = &me;
    bev.n_keys = n;
    bev.keys = keys_n(n);
    assert_int_equal(call(c, MC_METHOD_BATCH_EVICT_DISK_REPLICA, &bev.base,
                          &mc__batch_evict_disk_replica_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS);
    /* message items: the same bound */
    static Mc__PutEndItem *end_items[NMAX + 1];
    static Mc__OffloadResult *off_items[NMAX + 1];
    static Mc__Segment *segs[NMAX + 1];
    Mc__PutEndItem pe = MC__PUT_END_ITEM__INIT;
    Mc__OffloadResult orr = MC__OFFLOAD_RESULT__INIT;
    Mc__Segment sg = MC__SEGMENT__INIT;
    pe.key = "k";
    orr.key = "k";
    for (size_t i = 0; i < n; i++) {
        end_items[i] = &pe;
        off_items[i] = &orr;
        segs[i] = &sg;
    }
    Mc__BatchPutEndRequest bpe = MC__BATCH_PUT_END_REQUEST__INIT;
    bpe.client_id = &me;
    bpe.n_items = n;
    bpe.items = end_items;
    assert_int_equal(
        call(c, MC_METHOD_BATCH_PUT_END, &bpe.base, &mc__batch_put_end_response__descriptor, NULL),
        MC_ERR_INVALID_PARAMS);
    Mc__NotifyOffloadSuccessRequest ns = MC__NOTIFY_OFFLOAD_SUCCESS_REQUEST__INIT;
    ns.client_id = &me;
    ns.n_items = n;
    ns.items = off_items;
    assert_int_equal(call(c, MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, &ns.base,
                          &mc__notify_offload_success_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS);
    Mc__ReMountSegmentRequest rm = MC__RE_MOUNT_SEGMENT_REQUEST__INIT;
    rm.client_id = &me;
    rm.n_segments = n;
    rm.segments = segs;
    assert_int_equal(call(c, MC_METHOD_REMOUNT_SEGMENT, &rm.base,
                          &mc__re_mount_segment_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS);
    mc_rpc_client_free(c);
}

/* ---- per-item answers ----------------------------------------------------------------------- */

static void test_batch_round_trip(void **state)
{
    struct fixture *f = *state;
    struct mc_rpc_client *c = connect_to(f);
    Mc__Uuid me = uuid_of(2);
    char *keys[] = {"a", "b", "c", "absent"};
    uint64_t lens[] = {100, 200, 300};

    /* empty batches: answered, nothing in them */
    Mc__BatchRemoveRequest br = MC__BATCH_REMOVE_REQUEST__INIT;
    br.client_id = &me;
    Mc__BatchRemoveResponse *brr = NULL;
    assert_int_equal(
        call(c, MC_METHOD_BATCH_REMOVE, &br.base, &mc__batch_remove_response__descriptor, &brr), 0);
    assert_int_equal(brr->n_statuses, 0);
    free_msg(brr);

    Mc__BatchPutStartRequest bps = MC__BATCH_PUT_START_REQUEST__INIT;
    bps.client_id = &me;
    bps.n_keys = 3;
    bps.keys = keys;
    bps.n_value_lengths = 3;
    bps.value_lengths = lens;
    Mc__BatchPutStartResponse *bpsr = NULL;
    assert_int_equal(call(c, MC_METHOD_BATCH_PUT_START, &bps.base,
                          &mc__batch_put_start_response__descriptor, &bpsr),
                     0);
    assert_int_equal(bpsr->n_results, 3);
    Mc__PutEndItem items[3];
    Mc__PutEndItem *item_ptrs[3];
    for (int i = 0; i < 3; i++) {
        Mc__PutStartResult *r = bpsr->results[i];
        assert_int_equal(r->status, 0);
        assert_int_equal(r->n_replicas, 1);
        assert_int_equal(r->replicas[0]->memory->size, lens[i]);
        assert_string_equal(r->replicas[0]->memory->segment_name, "seg-1");
        mc__put_end_item__init(&items[i]);
        items[i].key = keys[i];
        items[i].version = r->version;
        items[i].crc32c = 7;
        items[i].crc_valid = i != 1; /* mixed: the adapter goes item by item */
        item_ptrs[i] = &items[i];
    }
    free_msg(bpsr);
    Mc__BatchPutEndRequest bpe = MC__BATCH_PUT_END_REQUEST__INIT;
    bpe.client_id = &me;
    bpe.n_items = 3;
    bpe.items = item_ptrs;
    Mc__BatchPutEndResponse *bper = NULL;
    assert_int_equal(
        call(c, MC_METHOD_BATCH_PUT_END, &bpe.base, &mc__batch_put_end_response__descriptor, &bper),
        0);
    assert_int_equal(bper->n_statuses, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(bper->statuses[i], 0);
    free_msg(bper);

    Mc__BatchGetReplicaListRequest bg = MC__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
    bg.client_id = &me;
    bg.n_keys = 4;
    bg.keys = keys;
    Mc__BatchGetReplicaListResponse *bgr = NULL;
    assert_int_equal(call(c, MC_METHOD_BATCH_GET_REPLICA_LIST, &bg.base,
                          &mc__batch_get_replica_list_response__descriptor, &bgr),
                     0);
    assert_int_equal(bgr->n_results, 4);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(bgr->results[i]->status, 0);
        assert_int_equal(bgr->results[i]->size, lens[i]);
        assert_int_equal(bgr->results[i]->crc_valid, i != 1);
    }
    assert_int_equal(bgr->results[3]->status, MC_ERR_OBJECT_NOT_FOUND);
    free_msg(bgr);

    br.n_keys = 4;
    br.keys = keys;
    br.force = true; /* the Get above leased them */
    assert_int_equal(
        call(c, MC_METHOD_BATCH_REMOVE, &br.base, &mc__batch_remove_response__descriptor, &brr), 0);
    assert_int_equal(brr->n_statuses, 4);
    for (int i = 0; i < 3; i++)
        assert_int_equal(brr->statuses[i], 0);
    assert_int_equal(brr->statuses[3], MC_ERR_OBJECT_NOT_FOUND);
    free_msg(brr);

    Mc__BatchExistKeyRequest be = MC__BATCH_EXIST_KEY_REQUEST__INIT;
    be.n_keys = 4;
    be.keys = keys;
    Mc__BatchExistKeyResponse *ber = NULL;
    assert_int_equal(call(c, MC_METHOD_BATCH_EXIST_KEY, &be.base,
                          &mc__batch_exist_key_response__descriptor, &ber),
                     0);
    assert_int_equal(ber->n_exists, 4);
    for (int i = 0; i < 4; i++)
        assert_false(ber->exists[i]);
    free_msg(ber);
    mc_rpc_client_free(c);
}

/* Request-wide problems: per item where the method answers per item, else the whole call. */
static void test_request_wide_errors(void **state)
{
    struct fixture *f = *state;
    struct mc_rpc_client *c = connect_to(f);
    Mc__Uuid me = uuid_of(3);
    char *keys[] = {"x", "y"};
    uint64_t one[] = {64};

    Mc__BatchPutStartRequest bps = MC__BATCH_PUT_START_REQUEST__INIT;
    bps.client_id = &me;
    bps.n_keys = 2;
    bps.keys = keys;
    bps.n_value_lengths = 1; /* not one per key */
    bps.value_lengths = one;
    Mc__BatchPutStartResponse *bpsr = NULL;
    assert_int_equal(call(c, MC_METHOD_BATCH_PUT_START, &bps.base,
                          &mc__batch_put_start_response__descriptor, &bpsr),
                     0);
    assert_int_equal(bpsr->n_results, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(bpsr->results[i]->status, MC_ERR_INVALID_PARAMS);
        assert_int_equal(bpsr->results[i]->n_replicas, 0);
    }
    free_msg(bpsr);

    Mc__BatchPutRevokeRequest bpv = MC__BATCH_PUT_REVOKE_REQUEST__INIT;
    bpv.client_id = &me;
    bpv.n_keys = 2;
    bpv.keys = keys;
    bpv.n_versions = 1;
    bpv.versions = one;
    Mc__BatchPutRevokeResponse *bpvr = NULL;
    assert_int_equal(call(c, MC_METHOD_BATCH_PUT_REVOKE, &bpv.base,
                          &mc__batch_put_revoke_response__descriptor, &bpvr),
                     0);
    assert_int_equal(bpvr->n_statuses, 2);
    assert_int_equal(bpvr->statuses[0], MC_ERR_INVALID_PARAMS);
    assert_int_equal(bpvr->statuses[1], MC_ERR_INVALID_PARAMS);
    free_msg(bpvr);

    Mc__PutEndItem it = MC__PUT_END_ITEM__INIT;
    it.key = "x";
    Mc__PutEndItem *its[] = {&it, &it};
    Mc__BatchPutEndRequest bpe = MC__BATCH_PUT_END_REQUEST__INIT;
    bpe.client_id = &me;
    bpe.n_items = 2;
    bpe.items = its;
    bpe.replica_type = MC__REPLICA_TYPE__RT_LOCAL_DISK;
    Mc__BatchPutEndResponse *bper = NULL;
    assert_int_equal(
        call(c, MC_METHOD_BATCH_PUT_END, &bpe.base, &mc__batch_put_end_response__descriptor, &bper),
        0);
    assert_int_equal(bper->n_statuses, 2);
    assert_int_equal(bper->statuses[0], MC_ERR_NOT_SUPPORTED);
    assert_int_equal(bper->statuses[1], MC_ERR_NOT_SUPPORTED);
    free_msg(bper);
    mc_rpc_client_free(c);
}

/* A call refused before its client check binds nothing; one past it binds the connection. */
static void test_checks_before_the_binding(void **state)
{
    struct fixture *f = *state;
    struct mc_rpc_client *c = connect_to(f);
    Mc__Uuid a = uuid_of(4), b = uuid_of(5);
    char *keys[] = {"x", "y"};
    uint64_t one[] = {1};

    Mc__BatchEvictDiskReplicaRequest bev = MC__BATCH_EVICT_DISK_REPLICA_REQUEST__INIT;
    bev.client_id = &a;
    bev.n_keys = 2;
    bev.keys = keys;
    bev.n_versions = 1; /* not one per key: the whole call */
    bev.versions = one;
    assert_int_equal(call(c, MC_METHOD_BATCH_EVICT_DISK_REPLICA, &bev.base,
                          &mc__batch_evict_disk_replica_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS);
    Mc__Segment bad = MC__SEGMENT__INIT;
    bad.name = "s";
    bad.endpoint = "127.0.0.1:1";
    bad.size = MIB;
    bad.protocol = (Mc__Protocol)77;
    Mc__Segment *segs[] = {&bad};
    Mc__ReMountSegmentRequest rm = MC__RE_MOUNT_SEGMENT_REQUEST__INIT;
    rm.client_id = &a;
    rm.n_segments = 1;
    rm.segments = segs;
    assert_int_equal(call(c, MC_METHOD_REMOUNT_SEGMENT, &rm.base,
                          &mc__re_mount_segment_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS);

    /* still unbound: b may bind it now, and then a is another client */
    Mc__BatchRemoveRequest br = MC__BATCH_REMOVE_REQUEST__INIT;
    br.client_id = &b;
    br.n_keys = 2;
    br.keys = keys;
    Mc__BatchRemoveResponse *brr = NULL;
    assert_int_equal(
        call(c, MC_METHOD_BATCH_REMOVE, &br.base, &mc__batch_remove_response__descriptor, &brr), 0);
    assert_int_equal(brr->n_statuses, 2);
    assert_int_equal(brr->statuses[0], MC_ERR_OBJECT_NOT_FOUND);
    free_msg(brr);
    br.client_id = &a;
    assert_int_equal(
        call(c, MC_METHOD_BATCH_REMOVE, &br.base, &mc__batch_remove_response__descriptor, NULL),
        MC_ERR_ILLEGAL_CLIENT);
    bev.n_versions = 0;
    assert_int_equal(call(c, MC_METHOD_BATCH_EVICT_DISK_REPLICA, &bev.base,
                          &mc__batch_evict_disk_replica_response__descriptor, NULL),
                     MC_ERR_ILLEGAL_CLIENT);
    /* BatchExistKey names no client: never refused for one */
    Mc__BatchExistKeyRequest be = MC__BATCH_EXIST_KEY_REQUEST__INIT;
    be.n_keys = 2;
    be.keys = keys;
    assert_int_equal(call(c, MC_METHOD_BATCH_EXIST_KEY, &be.base,
                          &mc__batch_exist_key_response__descriptor, NULL),
                     0);
    mc_rpc_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_batch_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_wide_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checks_before_the_binding, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
