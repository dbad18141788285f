/*
 * test_disk_read.c - LOCAL_DISK reads through the holder (disk_tier.c's PeerDiskRead handler
 * and transport_tcp_disk.c), without a master: a disk tier over a real store in a temporary
 * directory, a peer server serving it on loopback, and the tcp transport as the reader.
 *
 *   batch_one_round_trip   16 values of assorted sizes (1 B .. 1 MiB + 7) read as one batch:
 *                          bytes and stored CRCs equal, one request on the wire
 *   stale_never_served     a version other than the stored one, an unknown key, a size other
 *                          than the stored one: REPLICA_NOT_FOUND each, the others in the same
 *                          batch still served; a newer append replaces the old record
 *   local_read             the holder's own process reads its store directly (same rules)
 *   frame_limit            a batch whose values exceed one reply frame is split by the reader
 *                          into several requests, every value still correct
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/disk_store.h"
#include "client/disk_tier.h"
#include "client/peer_server.h"
#include "client/transport.h"
#include "common/crc32c.h"
#include "disk_test_util.h"

#define ITEM(k, s, v, b)                                                                           \
    ((struct mc_disk_read_item){.key = (k), .size = (s), .version = (v), .buf = (b)})

struct holder {
    char dir[64];
    struct mc_disk_tier *tier;
    struct mc_peer_server *ps;
    struct mc_transport *tcp;
    char ep[64];
};

static void value(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
}

static int h_setup(void **state)
{
    struct holder *h = calloc(1, sizeof(*h));
    if (!h)
        return -1;
    strcpy(h->dir, "/tmp/mc_disk_read_XXXXXX");
    if (!mkdtemp(h->dir))
        return -1;
    struct mc_disk_tier_config dc = {.path = h->dir,
                                     .capacity = 256ull << 20,
                                     .endpoint = "127.0.0.1:0",
                                     .max_payload = 8u << 20};
    if (mc_disk_tier_open(&dc, &h->tier) != 0)
        return -1;
    struct mc_peer_server_config pc = {.bind_addr = "127.0.0.1",
                                       .max_frame_bytes = 9u << 20,
                                       .on_disk_read = mc_disk_tier_on_peer_read,
                                       .disk_arg = h->tier};
    if (mc_peer_server_new(&pc, &h->ps) != 0 || mc_peer_server_start(h->ps) != 0)
        return -1;
    snprintf(h->ep, sizeof(h->ep), "127.0.0.1:%u", mc_peer_server_port(h->ps));
    struct mc_tcp_transport_config tc;
    mc_tcp_transport_config_init(&tc);
    tc.max_frame_bytes = 9u << 20;
    if (mc_transport_tcp_new(&tc, &h->tcp) != 0)
        return -1;
    *state = h;
    return 0;
}

static int h_teardown(void **state)
{
    struct holder *h = *state;
    mc_transport_free(h->tcp);
    mc_peer_server_stop(h->ps);
    mc_disk_tier_close(h->tier);
    mc_peer_server_free(h->ps);
    rm_rf(h->dir);
    free(h);
    return 0;
}

static void put_rec(struct holder *h, const char *key, uint64_t version, const void *data,
                    size_t len)
{
    struct mc_disk_put p = {.key = key,
                            .key_len = (uint32_t)strlen(key),
                            .version = version,
                            .crc = mc_crc32c(data, len),
                            .data = data,
                            .len = len};
    assert_int_equal(mc_disk_store_append(mc_disk_tier_store(h->tier), &p, 1, NULL), 0);
}

static uint64_t requests(struct holder *h)
{
    struct mc_tcp_transport_stats st;
    mc_transport_tcp_get_stats(h->tcp, &st);
    return st.slices;
}

static void test_batch_one_round_trip(void **state)
{
    struct holder *h = *state;
    enum { N = 16 };
    static const size_t sizes[N] = {1,       100,           4095,  4096,  4097,  65536,
                                    65537,   100000,        12345, 32768, 77777, 65536,
                                    1 << 20, (1 << 20) + 7, 3,     8191};
    char keys[N][16];
    uint8_t *want[N], *got[N];
    struct mc_disk_read_item it[N];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "b%d", i);
        want[i] = malloc(sizes[i]);
        got[i] = malloc(sizes[i]);
        value(want[i], sizes[i], (uint64_t)i);
        put_rec(h, keys[i], 100 + (uint64_t)i, want[i], sizes[i]);
        it[i] = ITEM(keys[i], sizes[i], 100 + (uint64_t)i, got[i]);
    }
    uint64_t r0 = requests(h);
    assert_int_equal(mc_transport_tcp_disk_read(h->tcp, h->ep, it, N), 0);
    assert_int_equal(requests(h) - r0, 1);
    for (int i = 0; i < N; i++) {
        assert_int_equal(it[i].status, 0);
        assert_memory_equal(got[i], want[i], sizes[i]);
        assert_true(it[i].crc_valid);
        assert_int_equal(it[i].crc, mc_crc32c(want[i], sizes[i]));
        free(want[i]);
        free(got[i]);
    }
}

static void test_stale_never_served(void **state)
{
    struct holder *h = *state;
    uint8_t v1[5000], v2[5000], buf[5000];
    value(v1, sizeof(v1), 7);
    value(v2, sizeof(v2), 8);
    put_rec(h, "s", 10, v1, sizeof(v1));
    put_rec(h, "t", 11, v1, sizeof(v1));
    struct mc_disk_read_item it[4] = {
        ITEM("s", sizeof(v1), 9, buf),      /* another version */
        ITEM("nope", 10, 0, buf),           /* no record */
        ITEM("s", sizeof(v1) - 1, 10, buf), /* another size */
        ITEM("t", sizeof(v1), 11, buf),     /* served */
    };
    assert_int_equal(mc_transport_tcp_disk_read(h->tcp, h->ep, it, 4), 0);
    assert_int_equal(it[0].status, MC_ERR_REPLICA_NOT_FOUND);
    assert_int_equal(it[1].status, MC_ERR_REPLICA_NOT_FOUND);
    assert_int_equal(it[2].status, MC_ERR_REPLICA_NOT_FOUND);
    assert_int_equal(it[3].status, 0);
    assert_memory_equal(buf, v1, sizeof(v1));
    /* a newer version replaces the record: the old one is no longer served */
    put_rec(h, "s", 12, v2, sizeof(v2));
    struct mc_disk_read_item a = ITEM("s", sizeof(v1), 10, buf), b = ITEM("s", sizeof(v2), 12, buf);
    assert_int_equal(mc_transport_tcp_disk_read(h->tcp, h->ep, &a, 1), 0);
    assert_int_equal(a.status, MC_ERR_REPLICA_NOT_FOUND);
    assert_int_equal(mc_transport_tcp_disk_read(h->tcp, h->ep, &b, 1), 0);
    assert_int_equal(b.status, 0);
    assert_memory_equal(buf, v2, sizeof(v2));
    /* deleted on the master's request: gone */
    assert_int_equal(mc_disk_tier_delete(h->tier, "s", 12), 0);
    assert_int_equal(mc_transport_tcp_disk_read(h->tcp, h->ep, &b, 1), 0);
    assert_int_equal(b.status, MC_ERR_REPLICA_NOT_FOUND);
    /* a delete of an older version leaves a newer record */
    assert_int_equal(mc_disk_tier_delete(h->tier, "t", 5), 0);
    struct mc_disk_read_item c = ITEM("t", sizeof(v1), 11, buf);
    assert_int_equal(mc_transport_tcp_disk_read(h->tcp, h->ep, &c, 1), 0);
    assert_int_equal(c.status, 0);
}

static void test_local_read(void **state)
{
    struct holder *h = *state;
    uint8_t v[70000], buf[70001];
    value(v, sizeof(v), 3);
    put_rec(h, "loc", 5, v, sizeof(v));
    struct mc_disk_read_item it[2] = {ITEM("loc", sizeof(v), 5, buf + 1),
                                      ITEM("loc", sizeof(v), 4, buf)};
    mc_disk_tier_read(h->tier, it, 1); /* an unaligned buffer: through the store's bounce */
    assert_int_equal(it[0].status, 0);
    assert_memory_equal(buf + 1, v, sizeof(v));
    assert_int_equal(it[0].crc, mc_crc32c(v, sizeof(v)));
    mc_disk_tier_read(h->tier, it + 1, 1);
    assert_int_equal(it[1].status, MC_ERR_REPLICA_NOT_FOUND);
}

static void test_frame_limit(void **state)
{
    struct holder *h = *state;
    enum { N = 12, LEN = 1 << 20 }; /* 12 MiB: more than one 9 MiB frame */
    char keys[N][16];
    uint8_t *got = malloc((size_t)N * LEN), *want = malloc(LEN);
    struct mc_disk_read_item it[N];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "f%d", i);
        value(want, LEN, 50 + (uint64_t)i);
        put_rec(h, keys[i], 1, want, LEN);
        it[i] = ITEM(keys[i], LEN, 1, got + (size_t)i * LEN);
    }
    uint64_t r0 = requests(h);
    assert_int_equal(mc_transport_tcp_disk_read(h->tcp, h->ep, it, N), 0);
    assert_true(requests(h) - r0 >= 2);
    for (int i = 0; i < N; i++) {
        assert_int_equal(it[i].status, 0);
        value(want, LEN, 50 + (uint64_t)i);
        assert_memory_equal(got + (size_t)i * LEN, want, LEN);
    }
    free(got);
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_batch_one_round_trip, h_setup, h_teardown),
        cmocka_unit_test_setup_teardown(test_stale_never_served, h_setup, h_teardown),
        cmocka_unit_test_setup_teardown(test_local_read, h_setup, h_teardown),
        cmocka_unit_test_setup_teardown(test_frame_limit, h_setup, h_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
