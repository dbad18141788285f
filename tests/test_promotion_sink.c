/*
 * test_promotion_sink.c - the disk store's read into a consumer (mc_disk_get.sink), the path a
 * holder's promotion takes to put a value straight into its staged DRAM replica
 * (worker_promote.c): the store reads into its own staging and the sink copies out, taking the
 * CRC in the same pass; the store checks that CRC as it checks its own reads.
 *
 *   sink_gets_the_value     values of assorted sizes, sink and buffer items in one batch: each
 *                           sink is called once with the stored bytes, len, version and CRC
 *   sink_crc_is_checked     a bit flipped in a value on disk: the sink's read fails
 *                           CHECKSUM_MISMATCH and the damaged record is dropped, as for a
 *                           buffer read
 *   sink_refusal_is_kept    a sink that does not copy (a stale mount): its code is the read's
 *                           result and the record stays, readable afterwards
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/disk_store.h"
#include "common/crc32c.h"
#include "mooncake/errors.h"

/* offsets below are written for 4 KiB record units (as test_disk_store.c) */
#define DISK_TEST_RECORD_ALIGN MC_DISK_BLOCK
#include "disk_test_util.h"

struct sink {
    uint8_t *dst; /* where the bytes go */
    size_t cap;   /* its size */
    int calls;    /* times called */
    int refuse;   /* non-zero: return this without copying */
    uint64_t len; /* what the store said */
    uint64_t version;
    uint32_t crc;
};

static int sink_fn(void *ctx, const struct mc_disk_get *g, const void *bytes, uint32_t *crc)
{
    struct sink *k = ctx;
    k->calls++;
    k->len = g->len;
    k->version = g->version;
    k->crc = g->crc;
    if (k->refuse)
        return k->refuse;
    assert_true(g->len <= k->cap);
    *crc = mc_crc32c_copy(0, k->dst, bytes, (size_t)g->len);
    return 0;
}

static void test_sink_gets_the_value(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    static const size_t sizes[] = {1, 100, 4096, 65536, 65536 + 7, MIB + 7};
    enum { N = sizeof(sizes) / sizeof(sizes[0]) };
    char keys[N][16];
    struct sink k[N];
    struct mc_disk_get g[N + 1];
    memset(k, 0, sizeof(k));
    memset(g, 0, sizeof(g));
    for (size_t i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%zu", i);
        assert_int_equal(put_gen(e->s, keys[i], 10 + i, sizes[i], 100 + i), MC_OK);
        k[i].cap = sizes[i];
        k[i].dst = calloc(1, sizes[i]);
        g[i] = (struct mc_disk_get){.key = keys[i],
                                    .key_len = (uint32_t)strlen(keys[i]),
                                    .cap = sizes[i] + 4096,
                                    .sink = sink_fn,
                                    .sink_ctx = &k[i]};
    }
    /* and one plain buffer read in the same batch */
    assert_int_equal(put_gen(e->s, "plain", 3, 8192, 7), MC_OK);
    char *buf = NULL;
    assert_int_equal(posix_memalign((void **)&buf, 4096, 8192), 0);
    g[N] = (struct mc_disk_get){.key = "plain", .key_len = 5, .buf = buf, .cap = 8192};
    assert_int_equal(mc_disk_store_read(e->s, g, N + 1), MC_OK);
    for (size_t i = 0; i < N; i++) {
        uint8_t *want = malloc(sizes[i]);
        fill(want, sizes[i], 100 + i);
        assert_int_equal(g[i].result, MC_OK);
        assert_int_equal(k[i].calls, 1);
        assert_int_equal(k[i].len, sizes[i]);
        assert_int_equal(k[i].version, 10 + i);
        assert_int_equal(k[i].crc, mc_crc32c(want, sizes[i]));
        assert_int_equal(g[i].len, sizes[i]);
        assert_memory_equal(k[i].dst, want, sizes[i]);
        free(want);
        free(k[i].dst);
    }
    char want[8192];
    fill(want, sizeof(want), 7);
    assert_int_equal(g[N].result, MC_OK);
    assert_memory_equal(buf, want, sizeof(want));
    free(buf);
}

static void test_sink_crc_is_checked(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    assert_int_equal(put_gen(e->s, "x", 1, 8192, 9), MC_OK);
    char path[512];
    nth_extent(e->dir, 1, path, sizeof(path));
    flip_bit(path, 8 * KIB + 3); /* x's value (after the superblock and its header) */
    uint8_t dst[8192];
    struct sink k = {.dst = dst, .cap = sizeof(dst)};
    struct mc_disk_get g = {.key = "x", .key_len = 1, .cap = 8192, .sink = sink_fn, .sink_ctx = &k};
    assert_int_equal(mc_disk_store_read(e->s, &g, 1), MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(g.result, MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(k.calls, 1);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.corrupt_dropped, 1);
    assert_int_equal(mc_disk_store_lookup(e->s, "x", 1, NULL), MC_ERR_OBJECT_NOT_FOUND);
}

static void test_sink_refusal_is_kept(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    assert_int_equal(put_gen(e->s, "x", 1, 65536, 5), MC_OK);
    struct sink k = {.refuse = MC_ERR_REPLICA_IS_GONE};
    struct mc_disk_get g = {
        .key = "x", .key_len = 1, .cap = 65536, .sink = sink_fn, .sink_ctx = &k};
    assert_int_equal(mc_disk_store_read(e->s, &g, 1), MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(k.calls, 1);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.corrupt_dropped, 0);
    assert_int_equal(get_check(e->s, "x", 65536, 5, 0), MC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sink_gets_the_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sink_crc_is_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sink_refusal_is_kept, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
