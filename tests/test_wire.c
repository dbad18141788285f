/* test_wire.c - frame header codec, validation, method names, peer body split, versions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "proto/peer.pb-c.h"

static void test_header_layout(void **state)
{
    (void)state;
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_RESPONSE, MC_METHOD_PUT_START, 0x0102030405060708ull,
                        MC_ERR_OBJECT_NOT_FOUND, 0xA1B2C3D4u);
    h.flags = 0x5A;
    uint8_t b[MC_WIRE_HEADER_SIZE];
    mc_wire_encode_header(&h, b);
    /* byte-exact little-endian layout of DESIGN.md §5 */
    const uint8_t want[32] = {'M',  'C',  'R',  'P',  1,    0,    2,    0x5A,
                              16,   0,    0,    0,    0x40, 0xFD, 0xFF, 0xFF, /* -704 */
                              8,    7,    6,    5,    4,    3,    2,    1,
                              0xD4, 0xC3, 0xB2, 0xA1, 0,    0,    0,    0};
    assert_memory_equal(b, want, 32);
    struct mc_wire_header d;
    mc_wire_decode_header(b, &d);
    assert_int_equal(d.magic, MC_WIRE_MAGIC);
    assert_int_equal(d.version, MC_WIRE_VERSION);
    assert_int_equal(d.kind, MC_WIRE_RESPONSE);
    assert_int_equal(d.flags, 0x5A);
    assert_int_equal(d.method, MC_METHOD_PUT_START);
    assert_int_equal(d.status, MC_ERR_OBJECT_NOT_FOUND);
    assert_true(d.request_id == 0x0102030405060708ull);
    assert_int_equal(d.body_length, 0xA1B2C3D4u);
    assert_int_equal(d.reserved0, 0);
    assert_int_equal(d.reserved1, 0);
}

static void test_validate(void **state)
{
    (void)state;
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_PING, 1, 0, 100);
    assert_int_equal(mc_wire_validate(&h, 100), MC_WIRE_OK);
    assert_int_equal(mc_wire_validate(&h, 99), MC_WIRE_TOO_LARGE);
    h.magic ^= 1;
    assert_int_equal(mc_wire_validate(&h, 1000), MC_WIRE_BAD_MAGIC);
    h.magic = MC_WIRE_MAGIC;
    h.version = 2;
    assert_int_equal(mc_wire_validate(&h, 1000), MC_WIRE_BAD_VERSION);
    h.version = MC_WIRE_VERSION;
    h.kind = 0;
    assert_int_equal(mc_wire_validate(&h, 1000), MC_WIRE_BAD_KIND);
    h.kind = 3;
    assert_int_equal(mc_wire_validate(&h, 1000), MC_WIRE_BAD_KIND);
    assert_string_equal(mc_wire_check_name(MC_WIRE_TOO_LARGE), "too_large");
}

static void test_method_names(void **state)
{
    (void)state;
    /* every number in the contract has a distinct name */
    static const uint16_t all[] = {MC_METHOD_SERVICE_READY,
                                   MC_METHOD_PING,
                                   MC_METHOD_MOUNT_SEGMENT,
                                   MC_METHOD_REMOUNT_SEGMENT,
                                   MC_METHOD_UNMOUNT_SEGMENT,
                                   MC_METHOD_AUTH_CHALLENGE,
                                   MC_METHOD_AUTH_PROVE,
                                   MC_METHOD_REGISTER_CLIENT,
                                   MC_METHOD_PUT_START,
                                   MC_METHOD_PUT_END,
                                   MC_METHOD_PUT_REVOKE,
                                   MC_METHOD_BATCH_PUT_START,
                                   MC_METHOD_BATCH_PUT_END,
                                   MC_METHOD_BATCH_PUT_REVOKE,
                                   MC_METHOD_GET_REPLICA_LIST,
                                   MC_METHOD_BATCH_GET_REPLICA_LIST,
                                   MC_METHOD_EXIST_KEY,
                                   MC_METHOD_BATCH_EXIST_KEY,
                                   MC_METHOD_REMOVE,
                                   MC_METHOD_BATCH_REMOVE,
                                   MC_METHOD_REMOVE_ALL,
                                   MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT,
                                   MC_METHOD_UNMOUNT_LOCAL_DISK_SEGMENT,
                                   MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT,
                                   MC_METHOD_NOTIFY_OFFLOAD_SUCCESS,
                                   MC_METHOD_EVICT_DISK_REPLICA,
                                   MC_METHOD_BATCH_EVICT_DISK_REPLICA,
                                   MC_METHOD_PROMOTION_OBJECT_HEARTBEAT,
                                   MC_METHOD_PROMOTION_ALLOC_START,
                                   MC_METHOD_NOTIFY_PROMOTION_SUCCESS,
                                   MC_METHOD_NOTIFY_PROMOTION_FAILURE,
                                   MC_METHOD_QUERY_KEY,
                                   MC_METHOD_LIST_SEGMENTS,
                                   MC_METHOD_GET_STATS,
                                   MC_METHOD_ECHO,
                                   MC_METHOD_PEER_WRITE,
                                   MC_METHOD_PEER_READ,
                                   MC_METHOD_PEER_BATCH_WRITE,
                                   MC_METHOD_PEER_BATCH_READ,
                                   MC_METHOD_PEER_DISK_READ,
                                   MC_METHOD_PEER_RDMA_CONNECT};
    size_t n = sizeof(all) / sizeof(all[0]);
    for (size_t i = 0; i < n; i++) {
        const char *a = mc_method_name(all[i]);
        assert_non_null(a);
        assert_true(all[i] < MC_METHOD_TABLE_SIZE);
        for (size_t j = i + 1; j < n; j++)
            assert_string_not_equal(a, mc_method_name(all[j]));
        assert_int_equal(mc_method_is_peer(all[i]), all[i] >= 0x100 && all[i] <= 0x1FF);
    }
    assert_string_equal(mc_method_name(MC_METHOD_PUT_START), "PutStart");
    assert_string_equal(mc_method_name(MC_METHOD_PEER_READ), "PeerRead");
    assert_string_equal(mc_method_name(0x305), "Test");
    assert_null(mc_method_name(0));
    assert_string_equal(mc_method_name(MC_METHOD_REGISTER_CLIENT), "RegisterClient");
    assert_null(mc_method_name(10)); /* 1..9 are the session methods; 10 is unassigned */
    assert_null(mc_method_name(0xFFFF));
}

static void test_peer_split(void **state)
{
    (void)state;
    uint8_t body[16] = {0};
    const uint8_t *ctl, *pl;
    size_t cl, pll;
    assert_int_equal(mc_wire_peer_split(body, 3, &ctl, &cl, &pl, &pll), MC_ERR_DESERIALIZE_FAIL);
    mc_wire_put_u32(body, 5);
    assert_int_equal(mc_wire_peer_split(body, 16, &ctl, &cl, &pl, &pll), 0);
    assert_ptr_equal(ctl, body + 4);
    assert_int_equal(cl, 5);
    assert_ptr_equal(pl, body + 9);
    assert_int_equal(pll, 7);
    mc_wire_put_u32(body, 12); /* exactly fills: empty payload */
    assert_int_equal(mc_wire_peer_split(body, 16, &ctl, &cl, &pl, &pll), 0);
    assert_int_equal(pll, 0);
    mc_wire_put_u32(body, 13);
    assert_int_equal(mc_wire_peer_split(body, 16, &ctl, &cl, &pl, &pll), MC_ERR_DESERIALIZE_FAIL);
    mc_wire_put_u32(body, 0xFFFFFFFFu);
    assert_int_equal(mc_wire_peer_split(body, 16, &ctl, &cl, &pl, &pll), MC_ERR_DESERIALIZE_FAIL);
}

static void test_versions(void **state)
{
    (void)state;
    uint32_t v = 0;
    assert_int_equal(mc_wire_parse_proto_version(MC_SERVICE_VERSION, &v), 0);
    assert_int_equal(v, MC_PROTO_VERSION);
    assert_int_equal(strncmp(MC_SERVICE_VERSION, "mooncake-c/", 11), 0);
    assert_int_equal(mc_wire_parse_proto_version("mooncake-c/9.9.9 proto=42", &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(mc_wire_parse_proto_version("2.0.0", &v), -1);
    assert_int_equal(mc_wire_parse_proto_version("x proto=", &v), -1);
    assert_int_equal(mc_wire_parse_proto_version("x proto=1x", &v), -1);
    assert_int_equal(mc_wire_parse_proto_version(NULL, &v), -1);
}

/* The generated messages round-trip, including negative per-key statuses and 128-bit ids. */
static void test_proto_roundtrip(void **state)
{
    (void)state;
    Mc__Uuid id = MC__UUID__INIT;
    id.hi = UINT64_MAX;
    id.lo = 7;
    Mc__MemoryLocation mem = MC__MEMORY_LOCATION__INIT;
    mem.segment_id = &id;
    mem.segment_name = "seg0";
    mem.offset = 4096;
    mem.size = 1 << 20;
    mem.endpoint = "127.0.0.1:1234";
    mem.protocol = MC__PROTOCOL__PROTOCOL_RDMA;
    mem.remote_addr = 0x7f0000001000ull;
    mem.rkey = 0xabcd;
    Mc__ReplicaDescriptor rd = MC__REPLICA_DESCRIPTOR__INIT;
    rd.id = 99;
    rd.type = MC__REPLICA_TYPE__RT_MEMORY;
    rd.status = MC__REPLICA_STATUS__RS_COMPLETE;
    rd.memory = &mem;
    Mc__ReplicaDescriptor *rds[1] = {&rd};
    Mc__GetReplicaListResponse r0 = MC__GET_REPLICA_LIST_RESPONSE__INIT, r1 = r0;
    r0.n_replicas = 1;
    r0.replicas = rds;
    r0.lease_ttl_ms = 10000;
    r0.version = (5ull << 48) | 3;
    r0.crc32c = 0xdeadbeef;
    r0.crc_valid = 1;
    r1.status = MC_ERR_OBJECT_NOT_FOUND;
    Mc__GetReplicaListResponse *rs[2] = {&r0, &r1};
    Mc__BatchGetReplicaListResponse b = MC__BATCH_GET_REPLICA_LIST_RESPONSE__INIT;
    b.n_results = 2;
    b.results = rs;
    size_t n = mc__batch_get_replica_list_response__get_packed_size(&b);
    uint8_t *buf = malloc(n);
    assert_int_equal(mc__batch_get_replica_list_response__pack(&b, buf), n);
    Mc__BatchGetReplicaListResponse *d = mc__batch_get_replica_list_response__unpack(NULL, n, buf);
    assert_non_null(d);
    assert_int_equal(d->n_results, 2);
    assert_int_equal(d->results[1]->status, MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(d->results[0]->n_replicas, 1);
    Mc__ReplicaDescriptor *x = d->results[0]->replicas[0];
    assert_int_equal(x->id, 99);
    assert_true(x->memory->segment_id->hi == UINT64_MAX);
    assert_string_equal(x->memory->endpoint, "127.0.0.1:1234");
    assert_int_equal(x->memory->rkey, 0xabcd);
    assert_null(x->local_disk);
    assert_true(d->results[0]->version == ((5ull << 48) | 3));
    mc__batch_get_replica_list_response__free_unpacked(d, NULL);
    /* garbage does not decode */
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02};
    assert_null(mc__batch_get_replica_list_response__unpack(NULL, sizeof(junk), junk));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_layout), cmocka_unit_test(test_validate),
        cmocka_unit_test(test_method_names),  cmocka_unit_test(test_peer_split),
        cmocka_unit_test(test_versions),      cmocka_unit_test(test_proto_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
