/*
 * test_master_daemon_input.c - the real mooncake_master process, driven over its real ports
 * (master_daemon_fixture.h): bad input on the RPC port: raw frames, bad lengths and bodies; the
 * master keeps serving.
 */
#include "master_daemon_fixture.h"

/* Bytes that are no frame: garbage, an oversized length, truncated frames and headers. Each
 * connection is closed; the master keeps serving. */
static void input_raw_frames(struct daemon *d)
{
    /* garbage bytes: the connection is closed, the server keeps serving */
    int fd = md_tcp_connect(d->rpc_port);
    uint8_t junk[64];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    assert_int_equal(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
    uint8_t rb[128];
    assert_true(recv(fd, rb, sizeof(rb), 0) <= 0);
    close(fd);
    assert_int_equal(mc_service_ready_check(d->c, NULL, 0), 0);

    /* oversized length: refused, connection closed */
    struct mc_wire_header h;
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_PUT_START, 1, 0, 0xF0000000u);
    mc_wire_encode_header(&h, hb);
    fd = md_tcp_connect(d->rpc_port);
    assert_int_equal(send(fd, hb, sizeof(hb), MSG_NOSIGNAL), (ssize_t)sizeof(hb));
    assert_true(recv(fd, rb, sizeof(rb), 0) <= 0);
    close(fd);
    assert_int_equal(mc_service_ready_check(d->c, NULL, 0), 0);

    /* truncated frame: header announces 100 bytes, 10 arrive, then the peer goes away */
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_GET_REPLICA_LIST, 2, 0, 100);
    mc_wire_encode_header(&h, hb);
    fd = md_tcp_connect(d->rpc_port);
    assert_int_equal(send(fd, hb, sizeof(hb), MSG_NOSIGNAL), (ssize_t)sizeof(hb));
    assert_int_equal(send(fd, junk, 10, MSG_NOSIGNAL), 10);
    close(fd);
    /* truncated header */
    fd = md_tcp_connect(d->rpc_port);
    assert_int_equal(send(fd, hb, 7, MSG_NOSIGNAL), 7);
    close(fd);
    assert_int_equal(mc_service_ready_check(d->c, NULL, 0), 0);
    Mc__GetReplicaListResponse *g = NULL;
    assert_int_equal(md_get(d->c, "m1", &g), 0);
    assert_int_equal(g->size, 100);
    FREE_MSG(g);
}

/* Keys holding a NUL inside a valid protobuf body: refused per key, never truncated. */
static void input_nul_keys(struct daemon *d)
{
    /* A protobuf string may hold a NUL, a key may not: "m1\0x" is refused (INVALID_KEY), never
     * cut at the NUL into the key "m1". Raw bodies, since protobuf-c cannot encode one. */
    static const uint8_t get_nul[] = {0x0a, 4, 'm', '1', 0, 'x'}; /* key = 1 */
    assert_int_equal(mc_rpc_client_call(d->c, MC_METHOD_GET_REPLICA_LIST, get_nul, sizeof(get_nul),
                                        0, NULL, NULL),
                     MC_ERR_INVALID_KEY);
    /* the same key twice: the last occurrence is the one decoded, and it is clean */
    static const uint8_t get_twice[] = {0x0a, 4, 'm', '1', 0, 'x', 0x0a, 2, 'm', '1'};
    assert_int_equal(mc_rpc_client_call(d->c, MC_METHOD_GET_REPLICA_LIST, get_twice,
                                        sizeof(get_twice), 0, NULL, NULL),
                     0);
    /* batch: only the bad key fails */
    static const uint8_t exist_nul[] = {0x0a, 2, 'm', '1', 0x0a, 4, 'm', '1', 0, 'x'};
    void *resp = NULL;
    size_t resp_len = 0;
    assert_int_equal(mc_rpc_client_call(d->c, MC_METHOD_BATCH_EXIST_KEY, exist_nul,
                                        sizeof(exist_nul), 0, &resp, &resp_len),
                     0);
    Mc__BatchExistKeyResponse *ex = mc__batch_exist_key_response__unpack(NULL, resp_len, resp);
    free(resp);
    assert_non_null(ex);
    assert_int_equal(ex->n_statuses, 2);
    assert_int_equal(ex->statuses[0], 0);
    assert_true(ex->exists[0]);
    assert_int_equal(ex->statuses[1], MC_ERR_INVALID_KEY);
    assert_false(ex->exists[1]);
    FREE_MSG(ex);
    /* nested: BatchPutEnd item {key = 1}, client_id = {1, 2} */
    static const uint8_t end_nul[] = {0x0a, 4, 0x08, 1,   0x10, 2,   0x12, 6,
                                      0x0a, 4, 'm',  '1', 0,    'x', 0x18, 1};
    resp = NULL;
    assert_int_equal(mc_rpc_client_call(d->c, MC_METHOD_BATCH_PUT_END, end_nul, sizeof(end_nul), 0,
                                        &resp, &resp_len),
                     0);
    Mc__BatchPutEndResponse *pe = mc__batch_put_end_response__unpack(NULL, resp_len, resp);
    free(resp);
    assert_non_null(pe);
    assert_int_equal(pe->n_statuses, 1);
    assert_int_equal(pe->statuses[0], MC_ERR_INVALID_KEY);
    FREE_MSG(pe);
    /* a group id holding a NUL would join the group "g": PutStart {client {1, 2}, key "g1",
     * value_length 100, config {group_id "g\0x"}} is refused and creates nothing */
    static const uint8_t group_nul[] = {0x0a, 4,   0x08, 1, 0x10, 2, 0x12, 2,    'g', '1',
                                        0x18, 100, 0x22, 5, 0x32, 3, 'g',  0x00, 'x'};
    assert_int_equal(
        mc_rpc_client_call(d->c, MC_METHOD_PUT_START, group_nul, sizeof(group_nul), 0, NULL, NULL),
        MC_ERR_INVALID_PARAMS);
    assert_int_equal(md_get(d->c, "g1", NULL), MC_ERR_OBJECT_NOT_FOUND);
}

static void test_bad_input(void **state)
{
    struct daemon *d = *state;
    md_start(d, NULL);
    d->c = md_connect(d);
    Mc__Uuid a = md_uuid(1, 2), seg_id = md_uuid(7, 8);
    assert_int_equal(md_mount(d->c, &a, &seg_id, "seg0"), 0);
    assert_int_equal(md_put_start(d->c, &a, "m1", 100, NULL), 0);
    assert_int_equal(md_put_end(d->c, &a, "m1", 0), 0);
    input_raw_frames(d);
    input_nul_keys(d);
    md_stop_ok(d);
}

int main(void)
{
    md_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_input, md_setup, md_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
