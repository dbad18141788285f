/*
 * test_client_get_local.c - the same-process Get (client_get.c): a value held in this process's
 * own segment is copied and checked against its CRC32C in one pass (mc_crc32c_copy). Against a
 * real mooncake_master: a stored byte damaged in the segment fails the Get with
 * CHECKSUM_MISMATCH (single and batch), and the same Get returns the exact bytes once the byte
 * is mended; values of odd sizes read into unaligned buffers come back byte for byte, with the
 * bytes around the buffer untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "mooncake/client.h"
#include "test_client_util.h"

#define MiB (1u << 20)
#define GUARD 64u

struct fx {
    struct test_master m;
    struct mc_client *c;
};

static int group_setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    *state = NULL;
    if (!f || tm_start(&f->m, 0, NULL) != 0) {
        free(f);
        return -1;
    }
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = f->m.addr;
    cfg.segment_size = 64 * MiB;
    cfg.rpc_timeout_ms = 2000;
    if (mc_client_open(&cfg, &f->c) != 0) {
        tm_stop(&f->m);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    struct fx *f = *state;
    if (!f)
        return 0;
    mc_client_close(f->c);
    tm_stop(&f->m);
    free(f);
    return 0;
}

/* The value's only replica is a MEMORY one in this client's own segment. */
static void assert_local_only(struct mc_client *c, const char *key)
{
    struct mc_object_info info;
    assert_int_equal(mc_query(c, key, &info), 0);
    assert_int_equal(info.replica_count, 1);
    assert_int_equal(info.replicas[0].type, MC_REPLICA_MEMORY);
    assert_string_equal(info.replicas[0].endpoint, mc_client_endpoint(c));
    mc_object_info_free(&info);
}

/* A byte of the stored value damaged in the segment itself (not in the copy): the fused copy's
 * CRC must see it, for the single and the batch Get; mended, the same Gets return the bytes. */
static void test_corrupt_stored_byte(void **state)
{
    struct fx *f = *state;
    const size_t n = 4 * MiB + 13;
    uint8_t *v = malloc(n), *out = malloc(n);
    assert_non_null(v);
    assert_non_null(out);
    tm_fill(v, n, 21);
    assert_int_equal(mc_put(f->c, "local/crc", v, n, NULL), 0);
    assert_local_only(f->c, "local/crc");
    const size_t at[] = {0, 32768 + 5, n / 2, n - 1}; /* first, in a later chunk, middle, last */
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        assert_int_equal(mc_client_test_flip_stored(f->c, "local/crc", at[i]), 0);
        assert_int_equal(mc_get(f->c, "local/crc", out, n), MC_ERR_CHECKSUM_MISMATCH);
        const char *keys[1] = {"local/crc"};
        void *bufs[1] = {out};
        size_t caps[1] = {n};
        int64_t res[1] = {0};
        assert_int_equal(mc_batch_get(f->c, 1, keys, bufs, caps, res), 0);
        assert_int_equal(res[0], MC_ERR_CHECKSUM_MISMATCH);
        assert_int_equal(mc_client_test_flip_stored(f->c, "local/crc", at[i]), 0); /* mended */
        memset(out, 0, n);
        assert_int_equal(mc_get(f->c, "local/crc", out, n), (int64_t)n);
        assert_memory_equal(out, v, n);
        memset(out, 0, n);
        assert_int_equal(mc_batch_get(f->c, 1, keys, bufs, caps, res), 0);
        assert_int_equal(res[0], (int64_t)n);
        assert_memory_equal(out, v, n);
    }
    assert_int_equal(mc_remove(f->c, "local/crc", true), 0);
    free(v);
    free(out);
}

/* Odd sizes (below, at and across the copy's chunks, and a 4 MiB value plus some) read into
 * buffers at odd addresses: the exact bytes, and nothing written around them. */
static void test_unaligned_odd_sizes(void **state)
{
    struct fx *f = *state;
    static const size_t sizes[] = {1, 63, 4097, 32767, 32769, 3 * 65536 + 7, 4 * MiB + 4099};
    static const size_t offs[] = {1, 3, 7};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t n = sizes[s];
        uint8_t *v = malloc(n), *raw = malloc(n + 2 * GUARD + 8);
        assert_non_null(v);
        assert_non_null(raw);
        tm_fill(v, n, (uint32_t)(s + 1));
        char key[64];
        snprintf(key, sizeof(key), "local/odd/%zu", n);
        assert_int_equal(mc_put(f->c, key, v, n, NULL), 0);
        assert_local_only(f->c, key);
        for (size_t o = 0; o < sizeof(offs) / sizeof(offs[0]); o++) {
            for (int batch = 0; batch < 2; batch++) {
                memset(raw, 0xa5, n + 2 * GUARD + 8);
                uint8_t *buf = raw + GUARD + offs[o];
                int64_t got;
                if (batch) {
                    const char *keys[1] = {key};
                    void *bufs[1] = {buf};
                    size_t caps[1] = {n};
                    assert_int_equal(mc_batch_get(f->c, 1, keys, bufs, caps, &got), 0);
                } else {
                    got = mc_get(f->c, key, buf, n);
                }
                assert_int_equal(got, (int64_t)n);
                assert_memory_equal(buf, v, n);
                for (size_t i = 0; i < GUARD + offs[o]; i++)
                    assert_int_equal(raw[i], 0xa5);
                for (size_t i = 0; i < GUARD; i++)
                    assert_int_equal(buf[n + i], 0xa5);
            }
        }
        assert_int_equal(mc_remove(f->c, key, true), 0);
        free(v);
        free(raw);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corrupt_stored_byte),
        cmocka_unit_test(test_unaligned_odd_sizes),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
