/*
 * test_bench_master_enc.c - the hand encoders of `mooncake_bench master` (bench_master_enc.c)
 * against the generated protobuf-c code: every body they write is unpacked by protobuf-c and
 * its fields compared with what was encoded, and its bytes compared with the generated packer's
 * for the same message (GetReplicaList, ExistKey, BatchGetReplicaList, PutStart, PutEnd; zero
 * and multi-byte client ids and lengths); the decimal writer against snprintf.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/master.pb-c.h"
#include "tools/bench_master_enc.h"

static void expect_same_bytes(const ProtobufCMessage *m, const uint8_t *got, size_t n)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *want = malloc(len + 1);
    assert_non_null(want);
    assert_int_equal(protobuf_c_message_pack(m, want), len);
    assert_int_equal(n, len);
    assert_memory_equal(got, want, len);
    free(want);
}

static void test_u64_dec(void **state)
{
    (void)state;
    static const uint64_t vals[] = {0, 7, 10, 99999, 4294967295u, 123456789012ull, UINT64_MAX};
    static const int widths[] = {0, 1, 12, 20};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
            char want[32], got[32] = {0};
            snprintf(want, sizeof(want), "%0*llu", widths[w], (unsigned long long)vals[i]);
            size_t n = mc_bm_enc_u64_dec((uint8_t *)got, vals[i], widths[w]);
            assert_int_equal(n, strlen(want));
            assert_string_equal(got, want);
        }
    }
}

static void test_key_bodies(void **state)
{
    (void)state;
    uint8_t buf[1 << 16];
    char big[300];
    memset(big, 'k', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0; /* a key whose length takes a two-byte varint */
    const char *one[] = {"key:000000000042", big};
    for (size_t i = 0; i < 2; i++) {
        size_t len = strlen(one[i]);
        size_t n = mc_bm_enc_keys(buf, &one[i], &len, 1);
        Mc__GetReplicaListRequest *g = mc__get_replica_list_request__unpack(NULL, n, buf);
        assert_non_null(g);
        assert_string_equal(g->key, one[i]);
        assert_null(g->client_id);
        mc__get_replica_list_request__free_unpacked(g, NULL);
        Mc__ExistKeyRequest *e = mc__exist_key_request__unpack(NULL, n, buf);
        assert_non_null(e);
        assert_string_equal(e->key, one[i]);
        mc__exist_key_request__free_unpacked(e, NULL);
        Mc__GetReplicaListRequest gm = MC__GET_REPLICA_LIST_REQUEST__INIT;
        gm.key = (char *)one[i];
        expect_same_bytes(&gm.base, buf, n);
        Mc__ExistKeyRequest em = MC__EXIST_KEY_REQUEST__INIT;
        em.key = (char *)one[i];
        expect_same_bytes(&em.base, buf, n);
    }
    enum { N = 128 };
    static char kb[N][24];
    const char *keys[N];
    size_t lens[N];
    for (int i = 0; i < N; i++) {
        snprintf(kb[i], sizeof(kb[i]), "key:%012u", (unsigned)(i * 7919u));
        keys[i] = kb[i];
        lens[i] = strlen(kb[i]);
    }
    size_t n = mc_bm_enc_keys(buf, keys, lens, N);
    Mc__BatchGetReplicaListRequest *b = mc__batch_get_replica_list_request__unpack(NULL, n, buf);
    assert_non_null(b);
    assert_int_equal(b->n_keys, N);
    for (int i = 0; i < N; i++)
        assert_string_equal(b->keys[i], keys[i]);
    mc__batch_get_replica_list_request__free_unpacked(b, NULL);
    Mc__BatchGetReplicaListRequest bm = MC__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
    bm.n_keys = N;
    bm.keys = (char **)keys;
    expect_same_bytes(&bm.base, buf, n);
}

static void test_put_bodies(void **state)
{
    (void)state;
    static const uint64_t ids[][2] = {
        {0, 0}, {1, 0}, {0, 1}, {0x9e3779b97f4a7c15ull, 127}, {UINT64_MAX, UINT64_MAX}};
    static const uint64_t vlens[] = {1, 4096, 1ull << 40};
    const char *key = "put:12345:2:15:4294967295";
    uint8_t buf[256];
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        for (size_t v = 0; v < sizeof(vlens) / sizeof(vlens[0]); v++) {
            Mc__Uuid cu = MC__UUID__INIT;
            cu.hi = ids[i][0];
            cu.lo = ids[i][1];
            size_t n = mc_bm_enc_put(buf, 0, cu.hi, cu.lo, key, strlen(key), vlens[v]);
            assert_true(n <= strlen(key) + MC_BM_ENC_PUT_OVERHEAD);
            Mc__PutStartRequest *ps = mc__put_start_request__unpack(NULL, n, buf);
            assert_non_null(ps);
            assert_non_null(ps->client_id);
            assert_true(ps->client_id->hi == cu.hi && ps->client_id->lo == cu.lo);
            assert_string_equal(ps->key, key);
            assert_true(ps->value_length == vlens[v]);
            assert_null(ps->config);
            mc__put_start_request__free_unpacked(ps, NULL);
            Mc__PutStartRequest psm = MC__PUT_START_REQUEST__INIT;
            psm.client_id = &cu;
            psm.key = (char *)key;
            psm.value_length = vlens[v];
            expect_same_bytes(&psm.base, buf, n);

            n = mc_bm_enc_put(buf, 1, cu.hi, cu.lo, key, strlen(key), vlens[v]);
            Mc__PutEndRequest *pe = mc__put_end_request__unpack(NULL, n, buf);
            assert_non_null(pe);
            assert_non_null(pe->client_id);
            assert_true(pe->client_id->hi == cu.hi && pe->client_id->lo == cu.lo);
            assert_string_equal(pe->key, key);
            assert_true(pe->version == 0 && pe->crc_valid == 0);
            mc__put_end_request__free_unpacked(pe, NULL);
            Mc__PutEndRequest pem = MC__PUT_END_REQUEST__INIT;
            pem.client_id = &cu;
            pem.key = (char *)key;
            expect_same_bytes(&pem.base, buf, n);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u64_dec),
        cmocka_unit_test(test_key_bodies),
        cmocka_unit_test(test_put_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
