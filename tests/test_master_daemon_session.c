/*
 * test_master_daemon_session.c - the real mooncake_master process, driven over its real ports
 * (master_daemon_fixture.h): client identity and segments: ServiceReady and the version check,
 * Ping, ReMount, Mount / Unmount, ListSegments, GetStats; a connection bound to one client id,
 * unknown methods and the tier methods of a master without --enable_offload; client expiry.
 */
#include "master_daemon_fixture.h"

/* The version check and ServiceReady's protocol version. */
static void session_version(struct daemon *d)
{
    char ver[128];
    assert_int_equal(mc_service_ready_check(d->c, ver, sizeof(ver)), 0);
    assert_string_equal(ver, MC_SERVICE_VERSION);
    Mc__ServiceReadyResponse *sr = NULL;
    assert_int_equal(
        md_call(d->c, MC_METHOD_SERVICE_READY, NULL, &mc__service_ready_response__descriptor, &sr),
        0);
    assert_int_equal(sr->proto_version, MC_PROTO_VERSION);
    FREE_MSG(sr);
}

/* Ping before any mount: NEED_REMOUNT and the TTL; a zero id refused; ReMount with no segment
 * makes the client OK. */
static void session_ping_remount(struct daemon *d, Mc__Uuid *a)
{
    Mc__PingResponse *pr = NULL;
    assert_int_equal(md_ping(d->c, a, &pr), 0);
    assert_int_equal(pr->client_status, MC__CLIENT_STATUS__CS_NEED_REMOUNT);
    assert_int_equal(pr->client_ttl_ms, 3000);
    FREE_MSG(pr);
    /* a zero client id is refused by the core */
    Mc__Uuid zero = md_uuid(0, 0);
    assert_int_equal(md_ping(d->c, &zero, NULL), MC_ERR_INVALID_PARAMS);

    /* ReMount with no segment marks the client OK */
    Mc__ReMountSegmentRequest rm = MC__RE_MOUNT_SEGMENT_REQUEST__INIT;
    rm.client_id = a;
    assert_int_equal(md_call(d->c, MC_METHOD_REMOUNT_SEGMENT, &rm,
                             &mc__re_mount_segment_response__descriptor, NULL),
                     0);
    assert_int_equal(md_ping(d->c, a, &pr), 0);
    assert_int_equal(pr->client_status, MC__CLIENT_STATUS__CS_OK);
    FREE_MSG(pr);
}

/* Mount (idempotent; no size is bad input), ListSegments, GetStats, Unmount. */
static void session_segments(struct daemon *d, Mc__Uuid *a, Mc__Uuid *seg_id)
{
    assert_int_equal(md_mount(d->c, a, seg_id, "seg0"), 0);
    assert_int_equal(md_mount(d->c, a, seg_id, "seg0"), 0); /* idempotent */
    /* a segment with no size is bad input, not a crash */
    Mc__Segment bad = MC__SEGMENT__INIT;
    Mc__Uuid bad_id = md_uuid(9, 9);
    bad.id = &bad_id;
    bad.name = "bad";
    bad.base_addr = SEG_BASE;
    Mc__MountSegmentRequest mreq = MC__MOUNT_SEGMENT_REQUEST__INIT;
    mreq.segment = &bad;
    mreq.client_id = a;
    assert_int_equal(md_call(d->c, MC_METHOD_MOUNT_SEGMENT, &mreq,
                             &mc__mount_segment_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS);

    Mc__ListSegmentsResponse *ls = NULL;
    assert_int_equal(
        md_call(d->c, MC_METHOD_LIST_SEGMENTS, NULL, &mc__list_segments_response__descriptor, &ls),
        0);
    assert_int_equal(ls->n_segments, 1);
    assert_string_equal(ls->segments[0]->name, "seg0");
    assert_int_equal(ls->segments[0]->size, SEG_SIZE);
    assert_int_equal(ls->segments[0]->used, 0);
    assert_int_equal(ls->segments[0]->owner->lo, 2);
    FREE_MSG(ls);

    Mc__GetStatsResponse *st = md_stats(d->c);
    assert_string_equal(st->version, MC_SERVICE_VERSION);
    assert_int_equal(st->segment_count, 1);
    assert_int_equal(st->capacity_bytes, SEG_SIZE);
    assert_int_equal(st->key_count, 0);
    assert_true(st->n_extra > 0);
    FREE_MSG(st);

    Mc__UnmountSegmentRequest um = MC__UNMOUNT_SEGMENT_REQUEST__INIT;
    um.segment_id = seg_id;
    um.client_id = a;
    assert_int_equal(md_call(d->c, MC_METHOD_UNMOUNT_SEGMENT, &um,
                             &mc__unmount_segment_response__descriptor, NULL),
                     0);
    st = md_stats(d->c);
    assert_int_equal(st->segment_count, 0);
    FREE_MSG(st);
}

static void test_version_ping_segments(void **state)
{
    struct daemon *d = *state;
    md_start(d, "--client_ttl=3s", NULL);
    d->c = md_connect(d);
    Mc__Uuid a = md_uuid(1, 2), seg_id = md_uuid(7, 8);
    session_version(d);
    session_ping_remount(d, &a);
    session_segments(d, &a, &seg_id);
    md_stop_ok(d);
}

/* A connection that never pinged or mounted is bound by the first id it names: it cannot act
 * for a and then for b; PutEnd's version reaches the core. */
static void unbound_connection(struct daemon *d, Mc__Uuid *a, Mc__Uuid *b)
{
    /* A connection that never pinged or mounted is bound by the first id it names: it cannot
     * act for a and then for b. */
    struct mc_rpc_client *c3 = md_connect(d);
    Mc__PutStartResponse *ps = NULL;
    assert_int_equal(md_put_start(c3, a, "y", 10, &ps), 0);
    uint64_t v = ps->version;
    protobuf_c_message_free_unpacked(&ps->base, NULL);
    assert_int_equal(md_put_start(c3, b, "z", 10, NULL), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(md_put_end(c3, b, "y", 0), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(md_ping(c3, b, NULL), MC_ERR_ILLEGAL_CLIENT);
    /* the service hands PutEnd's version to the core: a wrong one changes nothing */
    Mc__PutEndRequest pe = MC__PUT_END_REQUEST__INIT;
    pe.client_id = a;
    pe.key = "y";
    pe.version = v + 1;
    assert_int_equal(md_call(c3, MC_METHOD_PUT_END, &pe, &mc__put_end_response__descriptor, NULL),
                     MC_ERR_INVALID_VERSION);
    pe.version = v;
    assert_int_equal(md_call(c3, MC_METHOD_PUT_END, &pe, &mc__put_end_response__descriptor, NULL),
                     0);
    mc_rpc_client_free(c3);
}

static void test_illegal_client_and_unknown_methods(void **state)
{
    struct daemon *d = *state;
    md_start(d, NULL);
    d->c = md_connect(d);
    struct mc_rpc_client *c2 = md_connect(d);
    Mc__Uuid a = md_uuid(1, 2), b = md_uuid(3, 4), seg_id = md_uuid(7, 8);
    assert_int_equal(md_ping(d->c, &a, NULL), 0); /* binds d->c to a */
    assert_int_equal(md_ping(d->c, &b, NULL), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(md_mount(d->c, &b, &seg_id, "seg0"), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(md_mount(d->c, &a, &seg_id, "seg0"), 0);
    assert_int_equal(md_put_start(d->c, &b, "x", 10, NULL), MC_ERR_ILLEGAL_CLIENT);
    Mc__RemoveAllRequest ra = MC__REMOVE_ALL_REQUEST__INIT;
    ra.client_id = &b;
    assert_int_equal(
        md_call(d->c, MC_METHOD_REMOVE_ALL, &ra, &mc__remove_all_response__descriptor, NULL),
        MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(md_put_start(d->c, &a, "x", 10, NULL), 0);
    /* another connection bound to b: the Put is a's (owner check in the core) */
    assert_int_equal(md_ping(c2, &b, NULL), 0);
    assert_int_equal(md_put_end(c2, &b, "x", 0), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(md_put_end(c2, &a, "x", 0), MC_ERR_ILLEGAL_CLIENT); /* c2 is bound to b */
    /* b cannot mount over a's segment id */
    assert_int_equal(md_mount(c2, &b, &seg_id, "seg0"), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(md_put_end(d->c, &a, "x", 0), 0);

    /* an unassigned method number: NOT_SUPPORTED */
    assert_int_equal(mc_rpc_client_call(c2, 200, NULL, 0, 0, NULL, NULL), MC_ERR_NOT_SUPPORTED);
    /* the LOCAL_DISK tier's methods, on a master started without --enable_offload */
    static const uint16_t tier[] = {
        MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT, MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT,
        MC_METHOD_NOTIFY_OFFLOAD_SUCCESS,   MC_METHOD_EVICT_DISK_REPLICA,
        MC_METHOD_BATCH_EVICT_DISK_REPLICA, MC_METHOD_UNMOUNT_LOCAL_DISK_SEGMENT};
    for (size_t i = 0; i < sizeof(tier) / sizeof(tier[0]); i++)
        assert_int_equal(mc_rpc_client_call(c2, tier[i], NULL, 0, 0, NULL, NULL),
                         MC_ERR_UNABLE_OFFLOAD);
    /* an undecodable body */
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    assert_int_equal(mc_rpc_client_call(c2, MC_METHOD_PUT_START, junk, sizeof(junk), 0, NULL, NULL),
                     MC_ERR_DESERIALIZE_FAIL);
    assert_int_equal(md_ping(c2, &b, NULL), 0);

    unbound_connection(d, &a, &b);
    mc_rpc_client_free(c2);
    md_stop_ok(d);
}

/* The client monitor thread runs: a client that stops pinging loses its segment. */
static void test_client_expiry(void **state)
{
    struct daemon *d = *state;
    md_start(d, "--client_ttl=300ms", NULL);
    d->c = md_connect(d);
    Mc__Uuid a = md_uuid(1, 2), seg_id = md_uuid(7, 8);
    assert_int_equal(md_mount(d->c, &a, &seg_id, "seg0"), 0);
    uint64_t deadline = mc_now_ms() + 10000;
    uint64_t segs = 1;
    while (segs != 0 && mc_now_ms() < deadline) {
        Mc__GetStatsResponse *st = md_stats(d->c);
        segs = st->segment_count;
        FREE_MSG(st);
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(segs, 0);
    md_stop_ok(d);
}

int main(void)
{
    md_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_version_ping_segments, md_setup, md_teardown),
        cmocka_unit_test_setup_teardown(test_illegal_client_and_unknown_methods, md_setup,
                                        md_teardown),
        cmocka_unit_test_setup_teardown(test_client_expiry, md_setup, md_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
