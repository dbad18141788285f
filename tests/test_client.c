/*
 * test_client.c - libmooncake_client against a real mooncake_master process.
 *
 * In-process: two (or three) clients in this process, each with its own segment and peer
 * server, so "local" reads are memcpy and "remote" reads and writes go over tcp to the other
 * client. Covered: sizes 1 B .. 64 MiB byte-equal both ways, put-once semantics, get/size/exist,
 * remove with and without force (lease), remove_all, batch put/get/exist with per-key results,
 * replica_num and preferred segments (checked with mc_query), surviving the loss of one replica,
 * hard and soft pins, the NO_AVAILABLE_HANDLE retry window, checksum mismatch (test hook),
 * size queries without a lease, mc_get_ex's size on BUFFER_OVERFLOW, mc_get_alloc's one call,
 * batches as one peer round trip per endpoint and one retry window per batch, lease expiry mid-read
 * (short TTL + read delay hook), master killed (fast RPC_FAIL) and restarted on the same port
 * (re-mount, then puts and gets work again), bad input. A true multi-process case re-executes this
 * binary as a child that opens its own client.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "common/clock.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "cluster_data.h"
#include "test_client_util.h"

#define MiB (1u << 20)

extern char **environ;

struct fx {
    struct test_master m;
    struct mc_client *c1, *c2;
};

static int group_setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    *state = NULL;
    if (tm_start(&f->m, 0, NULL) != 0) {
        free(f);
        return -1;
    }
    f->c1 = cu_open_client_at(f->m.addr, 80 * MiB, true);
    /* c2 holds test_sizes_round_trip's objects: 81 MiB in all, whose space a forced removal
     * of a just-read object keeps until the read lease ends (below 100 MiB: see no_space) */
    f->c2 = cu_open_client_at(f->m.addr, 96 * MiB, true);
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    struct fx *f = *state;
    if (!f)
        return 0;
    mc_client_close(f->c1);
    mc_client_close(f->c2);
    tm_stop(&f->m);
    free(f);
    return 0;
}

static void put_pref(struct mc_client *c, const char *key, const void *buf, size_t len,
                     const char *pref, uint32_t replicas)
{
    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    const char *p[1] = {pref};
    if (pref) {
        rc.preferred_segments = p;
        rc.preferred_segments_count = 1;
    }
    rc.replica_num = replicas;
    int r = mc_put(c, key, buf, len, &rc);
    if (r)
        fail_msg("put %s: %s", key, mc_strerror(r));
}

/* ---- data ---------------------------------------------------------------------------------- */

static void test_sizes_round_trip(void **state)
{
    struct fx *f = *state;
    static const size_t sizes[] = {1, 7, 4096, 65537, MiB + 1, 16 * MiB, 64 * MiB};
    uint8_t *src = malloc(64 * MiB), *dst = malloc(64 * MiB);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        char key[64];
        snprintf(key, sizeof(key), "size/%zu", n);
        tm_fill(src, n, (uint32_t)n);
        /* c1 writes into c2's segment over tcp */
        put_pref(f->c1, key, src, n, mc_client_endpoint(f->c2), 1);
        struct mc_object_info info;
        assert_int_equal(mc_query(f->c1, key, &info), 0);
        assert_int_equal(info.size, n);
        assert_int_equal(info.replica_count, 1);
        assert_string_equal(info.replicas[0].segment, mc_client_endpoint(f->c2));
        assert_string_equal(info.replicas[0].endpoint, mc_client_endpoint(f->c2));
        assert_int_equal(info.replicas[0].status, MC_REPLICA_COMPLETE);
        mc_object_info_free(&info);
        /* remote read (tcp) and local read (memcpy) */
        memset(dst, 0, n);
        assert_int_equal(mc_get(f->c1, key, dst, n), (int64_t)n);
        assert_memory_equal(dst, src, n);
        memset(dst, 0, n);
        assert_int_equal(mc_get(f->c2, key, dst, n), (int64_t)n);
        assert_memory_equal(dst, src, n);
        assert_int_equal(mc_get_size(f->c2, key), (int64_t)n);
        assert_int_equal(mc_remove(f->c1, key, true), 0);
    }
    free(src);
    free(dst);
}

static void test_put_get_exist_remove(void **state)
{
    struct fx *f = *state;
    char a[100], b[100], out[200];
    tm_fill((uint8_t *)a, sizeof(a), 1);
    tm_fill((uint8_t *)b, sizeof(b), 2);
    assert_int_equal(mc_exist(f->c1, "k/basic"), 0);
    assert_int_equal(mc_get(f->c1, "k/basic", out, sizeof(out)), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_put(f->c1, "k/basic", a, sizeof(a), NULL), 0);
    /* written once: a second put succeeds and changes nothing */
    assert_int_equal(mc_put(f->c2, "k/basic", b, sizeof(b), NULL), 0);
    assert_int_equal(mc_get(f->c2, "k/basic", out, sizeof(out)), (int64_t)sizeof(a));
    assert_memory_equal(out, a, sizeof(a));
    assert_int_equal(mc_get(f->c2, "k/basic", out, 99), MC_ERR_BUFFER_OVERFLOW);
    assert_int_equal(mc_exist(f->c1, "k/basic"), 1);
    /* the get leased it: a plain remove is refused, a forced one is not */
    assert_int_equal(mc_remove(f->c1, "k/basic", false), MC_ERR_OBJECT_HAS_LEASE);
    assert_int_equal(mc_remove(f->c1, "k/basic", true), 0);
    assert_int_equal(mc_exist(f->c2, "k/basic"), 0);
    assert_int_equal(mc_remove(f->c1, "k/basic", true), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_get_size(f->c1, "k/basic"), MC_ERR_OBJECT_NOT_FOUND);

    /* remove_all: every object goes (forced) */
    assert_int_equal(mc_put(f->c1, "k/all1", a, 10, NULL), 0);
    assert_int_equal(mc_put(f->c1, "k/all2", a, 10, NULL), 0);
    assert_true(mc_remove_all(f->c2, true) >= 2);
    assert_int_equal(mc_exist(f->c1, "k/all1"), 0);
    assert_int_equal(mc_exist(f->c1, "k/all2"), 0);
}

/* report_existing: a put of an existing key says OBJECT_ALREADY_EXISTS (single and batch) and
 * keeps the first value; the default and a caller built before the field stay silent. */
static void test_put_report_existing(void **state)
{
    struct fx *f = *state;
    char out[16];
    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    assert_false(rc.report_existing);
    rc.report_existing = true;
    assert_int_equal(mc_put(f->c1, "k/dup", "first", 5, &rc), 0);
    assert_int_equal(mc_put(f->c2, "k/dup", "second", 6, &rc), MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(mc_put(f->c2, "k/dup", "second", 6, NULL), 0);
    /* an older caller's struct ends before the field: defaults, silent */
    struct mc_replicate_config old = rc;
    old.struct_size = (uint32_t)offsetof(struct mc_replicate_config, report_existing);
    assert_int_equal(mc_put(f->c2, "k/dup", "second", 6, &old), 0);
    assert_int_equal(mc_get(f->c1, "k/dup", out, sizeof(out)), 5);
    assert_memory_equal(out, "first", 5);

    const char *keys[2] = {"k/dup", "k/dup-new"};
    const void *bufs[2] = {"x", "y"};
    size_t lens[2] = {1, 1};
    int res[2] = {1, 1};
    assert_int_equal(mc_batch_put(f->c2, 2, keys, bufs, lens, &rc, res), 0);
    assert_int_equal(res[0], MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(res[1], 0);
    keys[1] = "k/dup-new2";
    assert_int_equal(mc_batch_put(f->c2, 2, keys, bufs, lens, NULL, res), 0);
    assert_int_equal(res[0], 0);
    assert_int_equal(res[1], 0);
    assert_int_equal(mc_get(f->c1, "k/dup", out, sizeof(out)), 5);
    assert_memory_equal(out, "first", 5);
    for (int i = 0; i < 3; i++)
        assert_int_equal(mc_remove(f->c1,
                                   i == 0   ? "k/dup"
                                   : i == 1 ? "k/dup-new"
                                            : "k/dup-new2",
                                   true),
                         0);
}

/* A size query is not a read: no lease (a plain remove right after succeeds), nothing counted. */
static void test_get_size_takes_no_lease(void **state)
{
    struct fx *f = *state;
    uint8_t v[3000];
    tm_fill(v, sizeof(v), 21);
    put_pref(f->c1, "size/nolease", v, sizeof(v), mc_client_endpoint(f->c2), 1);
    assert_int_equal(mc_get_size(f->c1, "size/nolease"), (int64_t)sizeof(v));
    assert_int_equal(mc_get_size(f->c2, "size/nolease"), (int64_t)sizeof(v));
    struct mc_object_info info;
    assert_int_equal(mc_query(f->c1, "size/nolease", &info), 0);
    assert_int_equal(info.lease_ms_left, 0);
    mc_object_info_free(&info);
    assert_int_equal(mc_remove(f->c1, "size/nolease", false), 0);
    assert_int_equal(mc_get_size(f->c1, "size/nolease"), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_get_size(f->c1, ""), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_get_size(NULL, "x"), MC_ERR_INVALID_PARAMS);
}

/* mc_get_ex tells the size on BUFFER_OVERFLOW (and on success), so one call sizes a reader. */
static void test_get_ex_reports_needed(void **state)
{
    struct fx *f = *state;
    uint8_t v[5000], out[5000];
    tm_fill(v, sizeof(v), 22);
    put_pref(f->c1, "getex/k", v, sizeof(v), mc_client_endpoint(f->c2), 1);
    size_t needed = 1;
    assert_int_equal(mc_get_ex(f->c1, "getex/k", out, 10, &needed), MC_ERR_BUFFER_OVERFLOW);
    assert_int_equal(needed, sizeof(v));
    needed = 1;
    assert_int_equal(mc_get_ex(f->c1, "getex/k", out, sizeof(out), &needed), (int64_t)sizeof(v));
    assert_int_equal(needed, sizeof(v));
    assert_memory_equal(out, v, sizeof(v));
    assert_int_equal(mc_get_ex(f->c1, "getex/k", out, sizeof(out), NULL), (int64_t)sizeof(v));
    needed = 7;
    assert_int_equal(mc_get_ex(f->c1, "getex/none", out, sizeof(out), &needed),
                     MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(needed, 0);
    assert_int_equal(mc_remove(f->c1, "getex/k", true), 0);
}

/* mc_get_alloc sizes its own buffer from the one GetReplicaList: no size query (an armed drop
 * of QueryKey never fires), the bytes equal, a lease taken (it is the read), max_size honoured
 * with nothing allocated, errors leave *out NULL. */
static void test_get_alloc_one_call(void **state)
{
    struct fx *f = *state;
    static const size_t len = 3u << 20; /* bigger than any buffer a caller would guess */
    uint8_t *v = malloc(len);
    void *out = (void *)1;
    assert_non_null(v);
    tm_fill(v, len, 23);
    put_pref(f->c1, "getalloc/k", v, len, mc_client_endpoint(f->c2), 1);

    mc_rpc_test_drop_next(MC_METHOD_QUERY_KEY, MC_RPC_TEST_DROP_BEFORE_SEND);
    uint64_t fired = mc_rpc_test_drops_fired();
    assert_int_equal(mc_get_alloc(f->c1, "getalloc/k", 0, &out), (int64_t)len);
    assert_int_equal(mc_rpc_test_drops_armed(MC_METHOD_QUERY_KEY), 1); /* no QueryKey made */
    assert_int_equal(mc_rpc_test_drops_fired(), fired);
    mc_rpc_test_drop_reset();
    assert_non_null(out);
    assert_memory_equal(out, v, len);
    mc_value_free(out);

    /* it was a read: the key now holds a lease, so a plain remove is refused */
    struct mc_object_info info;
    assert_int_equal(mc_query(f->c1, "getalloc/k", &info), 0);
    assert_true(info.lease_ms_left > 0);
    mc_object_info_free(&info);

    out = (void *)1;
    assert_int_equal(mc_get_alloc(f->c1, "getalloc/k", len - 1, &out), MC_ERR_BUFFER_OVERFLOW);
    assert_null(out);
    assert_int_equal(mc_get_alloc(f->c1, "getalloc/k", len, &out), (int64_t)len);
    assert_memory_equal(out, v, len);
    mc_value_free(out);

    out = (void *)1;
    assert_int_equal(mc_get_alloc(f->c1, "getalloc/none", 0, &out), MC_ERR_OBJECT_NOT_FOUND);
    assert_null(out);
    assert_int_equal(mc_get_alloc(f->c1, "", 0, &out), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_get_alloc(NULL, "x", 0, &out), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_get_alloc(f->c1, "x", 0, NULL), MC_ERR_INVALID_PARAMS);

    mc_value_free(NULL);
    assert_int_equal(mc_remove(f->c1, "getalloc/k", true), 0);
    /* the GetReplicaList it depends on fails: an error, nothing allocated */
    out = (void *)1;
    mc_rpc_test_drop_next(MC_METHOD_GET_REPLICA_LIST, MC_RPC_TEST_DROP_BEFORE_SEND);
    assert_true(mc_get_alloc(f->c1, "getalloc/k", 0, &out) < 0);
    assert_null(out);
    mc_rpc_test_drop_reset();
    /* the client fails calls fast until its ping thread has the master back: wait for that */
    uint64_t deadline = mc_now_ms() + 10000;
    while (mc_exist(f->c1, "getalloc/k") == MC_ERR_RPC_FAIL && mc_now_ms() < deadline) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_not_equal(mc_exist(f->c1, "getalloc/k"), MC_ERR_RPC_FAIL);

    free(v);
}

static void test_batch(void **state)
{
    struct fx *f = *state;
    enum { N = 12 };
    char keys[N][32];
    const char *kp[N + 1];
    uint8_t *bufs[N], *outs[N + 1];
    size_t lens[N], caps[N + 1];
    int res[N + 1];
    int64_t gres[N + 1];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "batch/%d", i);
        kp[i] = keys[i];
        lens[i] = (size_t)(i * 37 * 1024 + 1);
        bufs[i] = malloc(lens[i]);
        tm_fill(bufs[i], lens[i], (uint32_t)(100 + i));
        outs[i] = calloc(1, lens[i]);
        caps[i] = lens[i];
        res[i] = 99;
    }
    /* one key exists already: the batch still succeeds for it */
    assert_int_equal(mc_put(f->c2, keys[3], bufs[3], lens[3], NULL), 0);
    assert_int_equal(mc_batch_put(f->c1, N, kp, (const void *const *)bufs, lens, NULL, res), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(res[i], 0);
    kp[N] = "batch/missing";
    outs[N] = calloc(1, 16);
    caps[N] = 16;
    caps[5] = lens[5] - 1; /* too small */
    assert_int_equal(mc_batch_get(f->c2, N + 1, kp, (void *const *)outs, caps, gres), 0);
    for (int i = 0; i < N; i++) {
        if (i == 5) {
            assert_int_equal(gres[i], MC_ERR_BUFFER_OVERFLOW);
            continue;
        }
        assert_int_equal(gres[i], (int64_t)lens[i]);
        assert_memory_equal(outs[i], bufs[i], lens[i]);
    }
    assert_int_equal(gres[N], MC_ERR_OBJECT_NOT_FOUND);
    /* the same batch again, asking which tier served each key: all DRAM here */
    int tiers[N + 1];
    memset(tiers, 0x5a, sizeof(tiers));
    assert_int_equal(mc_batch_get_tiers(f->c2, N + 1, kp, (void *const *)outs, caps, gres, tiers),
                     0);
    for (int i = 0; i < N; i++)
        assert_int_equal(tiers[i], i == 5 ? -1 : MC_REPLICA_MEMORY);
    assert_int_equal(tiers[N], -1);
    assert_int_equal(mc_batch_exist(f->c1, N + 1, kp, res), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(res[i], 1);
    assert_int_equal(res[N], 0);
    assert_int_equal(mc_batch_get(f->c1, 0, NULL, NULL, NULL, NULL), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(mc_remove(f->c1, keys[i], true), 0);
        free(bufs[i]);
        free(outs[i]);
    }
    free(outs[N]);
}

static uint64_t tcp_requests(struct mc_client *c)
{
    struct mc_tcp_transport_stats st;
    mc_transport_tcp_get_stats(c->tcp, &st);
    return st.slices;
}

static uint64_t peer_requests(struct mc_client *c)
{
    struct mc_peer_server_stats st;
    mc_peer_server_get_stats(mc_client_peer_server(c), &st);
    return st.requests;
}

/* A batch is one peer round trip per endpoint: N keys on two remote segments cost two requests
 * (BatchGet and BatchPut alike); keys in the reader's own segment are copied, not sent. */
static void test_batch_one_round_trip_per_endpoint(void **state)
{
    struct fx *f = *state;
    enum { N = 10, LEN = 20000 };
    struct mc_client *c3 = cu_open_client_at(f->m.addr, 8 * MiB, true);
    char keys[N][32];
    const char *kp[N];
    uint8_t *vals[N], *outs[N];
    size_t lens[N], caps[N];
    int64_t gres[N];
    int pres[N];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "rt/%d", i);
        kp[i] = keys[i];
        lens[i] = caps[i] = LEN + (size_t)i;
        vals[i] = malloc(lens[i]);
        outs[i] = calloc(1, lens[i]);
        tm_fill(vals[i], lens[i], (uint32_t)(300 + i));
        /* even keys on c2, odd keys on c3 */
        put_pref(f->c1, keys[i], vals[i], lens[i], mc_client_endpoint((i & 1) ? c3 : f->c2), 1);
    }
    uint64_t t0 = tcp_requests(f->c1), p2 = peer_requests(f->c2), p3 = peer_requests(c3);
    assert_int_equal(mc_batch_get(f->c1, N, kp, (void *const *)outs, caps, gres), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(gres[i], (int64_t)lens[i]);
        assert_memory_equal(outs[i], vals[i], lens[i]);
    }
    assert_int_equal(tcp_requests(f->c1) - t0, 2);
    assert_int_equal(peer_requests(f->c2) - p2, 1);
    assert_int_equal(peer_requests(c3) - p3, 1);

    /* c2 reads its own keys with memcpy: only c3's half goes out, as one request */
    for (int i = 0; i < N; i++)
        memset(outs[i], 0, lens[i]);
    t0 = tcp_requests(f->c2);
    p3 = peer_requests(c3);
    assert_int_equal(mc_batch_get(f->c2, N, kp, (void *const *)outs, caps, gres), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(gres[i], (int64_t)lens[i]);
        assert_memory_equal(outs[i], vals[i], lens[i]);
    }
    assert_int_equal(tcp_requests(f->c2) - t0, 1);
    assert_int_equal(peer_requests(c3) - p3, 1);
    for (int i = 0; i < N; i++)
        assert_int_equal(mc_remove(f->c1, keys[i], true), 0);

    /* BatchPut with two replicas, on c2 and c3: one PeerBatchWrite to each */
    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    const char *pref[2] = {mc_client_endpoint(f->c2), mc_client_endpoint(c3)};
    rc.preferred_segments = pref;
    rc.preferred_segments_count = 2;
    rc.replica_num = 2;
    t0 = tcp_requests(f->c1);
    p2 = peer_requests(f->c2);
    p3 = peer_requests(c3);
    assert_int_equal(mc_batch_put(f->c1, N, kp, (const void *const *)vals, lens, &rc, pres), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(pres[i], 0);
    assert_int_equal(tcp_requests(f->c1) - t0, 2);
    assert_int_equal(peer_requests(f->c2) - p2, 1);
    assert_int_equal(peer_requests(c3) - p3, 1);
    for (int i = 0; i < N; i++) {
        struct mc_object_info info;
        assert_int_equal(mc_query(f->c1, keys[i], &info), 0);
        assert_int_equal(info.replica_count, 2);
        mc_object_info_free(&info);
        /* each replica holds the bytes: c3 reads its local copy, c2 its own */
        memset(outs[i], 0, lens[i]);
        assert_int_equal(mc_get(c3, keys[i], outs[i], caps[i]), (int64_t)lens[i]);
        assert_memory_equal(outs[i], vals[i], lens[i]);
        memset(outs[i], 0, lens[i]);
        assert_int_equal(mc_get(f->c2, keys[i], outs[i], caps[i]), (int64_t)lens[i]);
        assert_memory_equal(outs[i], vals[i], lens[i]);
        assert_int_equal(mc_remove(f->c1, keys[i], true), 0);
        free(vals[i]);
        free(outs[i]);
    }
    mc_client_close(c3);
}

/* Keys refused for lack of space are retried together: the batch takes one retry window, not
 * one per key (20 keys used to take 20 windows). */
static void test_batch_put_no_space_one_window(void **state)
{
    struct fx *f = *state;
    enum { N = 20 };
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = f->m.addr;
    cfg.put_retry_window_ms = 300;
    struct mc_client *c = NULL;
    assert_int_equal(mc_client_open(&cfg, &c), 0); /* contributes no DRAM */
    size_t n = 100 * MiB;                          /* larger than any segment */
    uint8_t *big = calloc(1, n);
    char keys[N][32];
    const char *kp[N];
    const void *bufs[N];
    size_t lens[N];
    int res[N];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "nospace/%d", i);
        kp[i] = keys[i];
        bufs[i] = big;
        lens[i] = n;
    }
    uint64_t t0 = mc_now_ms();
    assert_int_equal(mc_batch_put(c, N, kp, bufs, lens, NULL, res), 0);
    uint64_t dt = mc_now_ms() - t0;
    for (int i = 0; i < N; i++)
        assert_int_equal(res[i], MC_ERR_NO_AVAILABLE_HANDLE);
    assert_true(dt >= 300); /* retried for the window */
    assert_true(dt < 3000); /* once: 20 windows would be 6 s */
    assert_int_equal(mc_exist(c, keys[0]), 0);
    free(big);
    mc_client_close(c);
}

static void test_replicas_preferred_and_loss(void **state)
{
    struct fx *f = *state;
    struct mc_client *c3 = cu_open_client_at(f->m.addr, 8 * MiB, false);
    uint8_t v[300000], out[300000];
    tm_fill(v, sizeof(v), 5);
    put_pref(f->c1, "rep/two", v, sizeof(v), mc_client_endpoint(c3), 2);
    struct mc_object_info info;
    assert_int_equal(mc_query(f->c1, "rep/two", &info), 0);
    assert_int_equal(info.replica_count, 2);
    assert_string_equal(info.replicas[0].segment, mc_client_endpoint(c3));
    assert_string_not_equal(info.replicas[0].segment, info.replicas[1].segment);
    mc_object_info_free(&info);
    /* every replica holds the bytes: read from c3 (local copy), then lose c3 */
    assert_int_equal(mc_get(c3, "rep/two", out, sizeof(out)), (int64_t)sizeof(v));
    assert_memory_equal(out, v, sizeof(v));
    mc_client_close(c3);
    assert_int_equal(mc_query(f->c1, "rep/two", &info), 0);
    assert_int_equal(info.replica_count, 1);
    assert_string_not_equal(info.replicas[0].segment, "");
    mc_object_info_free(&info);
    memset(out, 0, sizeof(out));
    assert_int_equal(mc_get(f->c2, "rep/two", out, sizeof(out)), (int64_t)sizeof(v));
    assert_memory_equal(out, v, sizeof(v));
    assert_int_equal(mc_remove(f->c1, "rep/two", true), 0);
}

static void test_pins(void **state)
{
    struct fx *f = *state;
    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    rc.with_hard_pin = true;
    assert_int_equal(mc_put(f->c1, "pin/hard", "x", 1, &rc), 0);
    mc_replicate_config_init(&rc);
    rc.with_soft_pin = true;
    rc.soft_pin_ttl_ms = 60000;
    assert_int_equal(mc_put(f->c1, "pin/soft", "y", 1, &rc), 0);
    assert_int_equal(mc_put(f->c1, "pin/none", "z", 1, NULL), 0);
    struct mc_object_info info;
    assert_int_equal(mc_query(f->c2, "pin/hard", &info), 0);
    assert_true(info.hard_pinned);
    assert_int_equal(info.soft_pin_ms_left, 0);
    mc_object_info_free(&info);
    assert_int_equal(mc_query(f->c2, "pin/soft", &info), 0);
    assert_false(info.hard_pinned);
    assert_true(info.soft_pin_ms_left > 0 && info.soft_pin_ms_left <= 60000);
    mc_object_info_free(&info);
    assert_int_equal(mc_query(f->c2, "pin/none", &info), 0);
    assert_false(info.hard_pinned);
    assert_int_equal(info.soft_pin_ms_left, 0);
    mc_object_info_free(&info);
    for (int i = 0; i < 3; i++)
        assert_int_equal(mc_remove(f->c1,
                                   i == 0   ? "pin/hard"
                                   : i == 1 ? "pin/soft"
                                            : "pin/none",
                                   true),
                         0);
}

static void test_no_space_retry_window(void **state)
{
    struct fx *f = *state;
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = f->m.addr;
    cfg.put_retry_window_ms = 300;
    struct mc_client *c = NULL;
    assert_int_equal(mc_client_open(&cfg, &c), 0); /* contributes no DRAM */
    size_t n = 100 * MiB;                          /* larger than any segment */
    uint8_t *big = calloc(1, n);
    uint64_t t0 = mc_now_ms();
    assert_int_equal(mc_put(c, "nospace", big, n, NULL), MC_ERR_NO_AVAILABLE_HANDLE);
    uint64_t dt = mc_now_ms() - t0;
    assert_true(dt >= 300); /* retried for the whole window */
    assert_true(dt < 3000); /* and then gave up */
    assert_int_equal(mc_exist(c, "nospace"), 0);
    free(big);
    mc_client_close(c);
}

static void test_checksum_mismatch(void **state)
{
    struct fx *f = *state;
    uint8_t v[5000], out[5000];
    tm_fill(v, sizeof(v), 9);
    put_pref(f->c1, "crc/k", v, sizeof(v), mc_client_endpoint(f->c2), 1);
    mc_client_test_corrupt_reads(f->c1, 1);
    assert_int_equal(mc_get(f->c1, "crc/k", out, sizeof(out)), MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(mc_get(f->c1, "crc/k", out, sizeof(out)), (int64_t)sizeof(v));
    assert_memory_equal(out, v, sizeof(v));
    /* the same through a batch (its tcp read checked as the bytes arrive): a corrupted batch
     * read is caught and read again the single way; when that is corrupted too, the key fails */
    const char *keys[1] = {"crc/k"};
    void *bufs[1] = {out};
    size_t caps[1] = {sizeof(out)};
    int64_t res[1] = {0};
    memset(out, 0, sizeof(out));
    mc_client_test_corrupt_reads(f->c1, 1);
    assert_int_equal(mc_batch_get(f->c1, 1, keys, bufs, caps, res), 0);
    assert_int_equal(res[0], (int64_t)sizeof(v));
    assert_memory_equal(out, v, sizeof(v));
    mc_client_test_corrupt_reads(f->c1, 2);
    assert_int_equal(mc_batch_get(f->c1, 1, keys, bufs, caps, res), 0);
    assert_int_equal(res[0], MC_ERR_CHECKSUM_MISMATCH);
    mc_client_test_corrupt_reads(f->c1, 0);
    /* without checksums the same corruption goes unnoticed: the check is what catches it */
    struct mc_client *nc = cu_open_client_at(f->m.addr, 0, false);
    mc_client_test_corrupt_reads(nc, 1);
    assert_int_equal(mc_get(nc, "crc/k", out, sizeof(out)), (int64_t)sizeof(v));
    assert_memory_not_equal(out, v, sizeof(v));
    mc_client_close(nc);
    /* checksums are on by default: a client configured by mc_client_config_init alone catches
     * the corruption */
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    assert_true(cfg.checksums);
    cfg.master_address = f->m.addr;
    assert_int_equal(mc_client_open(&cfg, &nc), 0);
    mc_client_test_corrupt_reads(nc, 1);
    assert_int_equal(mc_get(nc, "crc/k", out, sizeof(out)), MC_ERR_CHECKSUM_MISMATCH);
    mc_client_close(nc);
    assert_int_equal(mc_remove(f->c1, "crc/k", true), 0);
}

/* A replica whose bytes fail the checksum is skipped for the next one: with two MEMORY replicas
 * (c1's own segment and c2's), a corrupted read of the first still returns the right bytes,
 * single and batch (both failed CHECKSUM_MISMATCH before); only when every replica's bytes are
 * bad does the Get fail, never with wrong bytes. */
static void test_checksum_mismatch_falls_back(void **state)
{
    struct fx *f = *state;
    uint8_t v[5000], out[5000];
    tm_fill(v, sizeof(v), 19);
    put_pref(f->c1, "crc/two", v, sizeof(v), NULL, 2);
    struct mc_object_info info;
    assert_int_equal(mc_query(f->c1, "crc/two", &info), 0);
    assert_int_equal(info.replica_count, 2);
    mc_object_info_free(&info);
    memset(out, 0, sizeof(out));
    mc_client_test_corrupt_reads(f->c1, 1);
    assert_int_equal(mc_get(f->c1, "crc/two", out, sizeof(out)), (int64_t)sizeof(v));
    assert_memory_equal(out, v, sizeof(v));
    const char *keys[1] = {"crc/two"};
    void *bufs[1] = {out};
    size_t caps[1] = {sizeof(out)};
    int64_t res[1] = {0};
    memset(out, 0, sizeof(out));
    mc_client_test_corrupt_reads(f->c1, 2); /* the batch read and the first single-way one */
    assert_int_equal(mc_batch_get(f->c1, 1, keys, bufs, caps, res), 0);
    assert_int_equal(res[0], (int64_t)sizeof(v));
    assert_memory_equal(out, v, sizeof(v));
    mc_client_test_corrupt_reads(f->c1, 2);
    assert_int_equal(mc_get(f->c1, "crc/two", out, sizeof(out)), MC_ERR_CHECKSUM_MISMATCH);
    mc_client_test_corrupt_reads(f->c1, 0);
    assert_int_equal(mc_remove(f->c1, "crc/two", true), 0);
}

static void test_bad_input(void **state)
{
    struct fx *f = *state;
    char big[5000];
    memset(big, 'k', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    char out[8];
    assert_int_equal(mc_put(f->c1, NULL, "x", 1, NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_put(f->c1, "", "x", 1, NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_put(f->c1, big, "x", 1, NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_put(f->c1, "k", NULL, 1, NULL), MC_ERR_INVALID_PARAMS);
    /* replica_num 0 is refused, not taken as 1 (single and batch); nothing is stored */
    struct mc_replicate_config zero;
    mc_replicate_config_init(&zero);
    zero.replica_num = 0;
    assert_int_equal(mc_put(f->c1, "zero-replicas", "x", 1, &zero), MC_ERR_INVALID_PARAMS);
    const char *zk[1] = {"zero-replicas"};
    const void *zb[1] = {"x"};
    size_t zl[1] = {1};
    int zr[1];
    assert_int_equal(mc_batch_put(f->c1, 1, zk, zb, zl, &zero, zr), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_exist(f->c1, "zero-replicas"), 0);
    assert_int_equal(mc_get(f->c1, big, out, sizeof(out)), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_exist(f->c1, ""), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_remove(NULL, "k", false), MC_ERR_INVALID_PARAMS);
    const char *keys[2] = {"ok", NULL};
    int res[2];
    assert_int_equal(mc_batch_exist(f->c1, 2, keys, res), MC_ERR_INVALID_KEY);
    uint8_t reg[64];
    assert_int_equal(mc_register_buffer(f->c1, reg, sizeof(reg)), 0);
    assert_int_equal(mc_register_buffer(f->c1, reg + 8, 8), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_unregister_buffer(f->c1, reg), 0);
    assert_int_equal(mc_unregister_buffer(f->c1, reg), MC_ERR_INVALID_PARAMS);

    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = f->m.addr;
    cfg.protocol = "carrier-pigeon";
    struct mc_client *c = NULL;
    assert_int_equal(mc_client_open(&cfg, &c), MC_ERR_NOT_SUPPORTED);
    assert_null(c);
    cfg.protocol = "tcp";
    cfg.master_address = "127.0.0.1:1"; /* nothing listens */
    uint64_t t0 = mc_now_ms();
    assert_int_equal(mc_client_open(&cfg, &c), MC_ERR_RPC_FAIL);
    assert_true(mc_now_ms() - t0 < 2000);
    cfg.master_address = "no-port";
    assert_int_equal(mc_client_open(&cfg, &c), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_client_open(NULL, &c), MC_ERR_INVALID_PARAMS);
    mc_client_close(NULL);
}

/* ABI policy (client.h): a config is read as far as its struct_size goes; a config never
 * filled by its _init (size 0) or from a newer header (size above ours) is refused, and a
 * caller built with the first layout gets defaults for every later field. */
static void test_config_struct_size(void **state)
{
    struct fx *f = *state;
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    assert_int_equal(cfg.struct_size, sizeof(cfg));
    cfg.master_address = f->m.addr;
    struct mc_client *c = NULL;
    cfg.struct_size = 0;
    assert_int_equal(mc_client_open(&cfg, &c), MC_ERR_INVALID_PARAMS);
    assert_null(c);
    cfg.struct_size = (uint32_t)sizeof(cfg) + 8;
    assert_int_equal(mc_client_open(&cfg, &c), MC_ERR_INVALID_PARAMS);
    /* the first published layout ends at ping_interval_ms */
    cfg.struct_size = (uint32_t)(offsetof(struct mc_client_config, ping_interval_ms) +
                                 sizeof(cfg.ping_interval_ms));
    assert_int_equal(mc_client_open(&cfg, &c), 0);
    assert_non_null(c);
    mc_client_close(c);

    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    assert_int_equal(rc.struct_size, sizeof(rc));
    rc.struct_size = 0;
    assert_int_equal(mc_put(f->c1, "abi/k", "x", 1, &rc), MC_ERR_INVALID_PARAMS);
    const char *keys[1] = {"abi/k"};
    const void *bufs[1] = {"x"};
    size_t lens[1] = {1};
    int res[1];
    assert_int_equal(mc_batch_put(f->c1, 1, keys, bufs, lens, &rc, res), MC_ERR_INVALID_PARAMS);
    mc_replicate_config_init(&rc);
    assert_int_equal(mc_put(f->c1, "abi/k", "x", 1, &rc), 0);
    assert_int_equal(mc_remove(f->c1, "abi/k", true), 0);
}

/* An _init never writes past the caller's struct: a program built with the first, smaller
 * layout (or calling the unsized function, as binaries built before the sized init do) keeps the
 * bytes after its struct, gets struct_size = its own size, and that config opens a client. */
static void test_config_init_never_overruns(void **state)
{
    struct fx *f = *state;
    const size_t v0 = offsetof(struct mc_client_config, ping_interval_ms) + sizeof(uint32_t);
    const size_t r0 = offsetof(struct mc_replicate_config, group_id) + sizeof(const char *);
    union {
        struct mc_client_config cfg;
        unsigned char b[sizeof(struct mc_client_config) + 16];
    } u;
    for (int legacy = 0; legacy < 2; legacy++) {
        memset(u.b, 0xA5, sizeof(u.b));
        if (legacy)
            (mc_client_config_init)(&u.cfg);
        else
            mc_client_config_init_sized(&u.cfg, v0);
        for (size_t i = v0; i < sizeof(u.b); i++)
            assert_int_equal(u.b[i], 0xA5);
        assert_int_equal(u.cfg.struct_size, v0);
        assert_int_equal(u.cfg.ping_interval_ms, 1000);
        u.cfg.master_address = f->m.addr;
        u.cfg.segment_size = 0;
        struct mc_client *c = NULL;
        assert_int_equal(mc_client_open(&u.cfg, &c), 0);
        mc_client_close(c);
    }
    union {
        struct mc_replicate_config rc;
        unsigned char b[sizeof(struct mc_replicate_config) + 16];
    } r;
    for (int legacy = 0; legacy < 2; legacy++) {
        memset(r.b, 0x5A, sizeof(r.b));
        if (legacy)
            (mc_replicate_config_init)(&r.rc);
        else
            mc_replicate_config_init_sized(&r.rc, r0);
        for (size_t i = r0; i < sizeof(r.b); i++)
            assert_int_equal(r.b[i], 0x5A);
        assert_int_equal(r.rc.struct_size, r0);
        assert_int_equal(r.rc.replica_num, 1);
        assert_int_equal(mc_put(f->c1, "abi/old", "x", 1, &r.rc), 0);
        assert_int_equal(mc_remove(f->c1, "abi/old", true), 0);
    }
    /* a struct larger than ours (a newer header): zeroed beyond our layout, struct_size = ours */
    memset(u.b, 0xA5, sizeof(u.b));
    mc_client_config_init_sized(&u.cfg, sizeof(u.b));
    assert_int_equal(u.cfg.struct_size, sizeof(u.cfg));
    for (size_t i = sizeof(u.cfg); i < sizeof(u.b); i++)
        assert_int_equal(u.b[i], 0);
}

/* A replica whose peer is gone: the Put is revoked (nothing visible, the key not stuck), and a
 * Get falls over to the next replica. */
static void test_failed_write_revokes_and_read_fails_over(void **state)
{
    struct fx *f = *state;
    struct mc_client *c3 = cu_open_client_at(f->m.addr, 8 * MiB, false);
    uint8_t v[200000], out[200000];
    tm_fill(v, sizeof(v), 31);
    /* both replicas readable first: c3's and c1's; then c3's peer server dies */
    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    const char *pref[2] = {mc_client_endpoint(c3), mc_client_endpoint(f->c1)};
    rc.preferred_segments = pref;
    rc.preferred_segments_count = 2;
    rc.replica_num = 2;
    assert_int_equal(mc_put(f->c2, "fo/two", v, sizeof(v), &rc), 0);
    mc_peer_server_stop(mc_client_peer_server(c3)); /* still mounted, no longer serving */
    struct mc_object_info info;
    assert_int_equal(mc_query(f->c2, "fo/two", &info), 0);
    assert_int_equal(info.replica_count, 2);
    mc_object_info_free(&info);
    memset(out, 0, sizeof(out));
    assert_int_equal(mc_get(f->c2, "fo/two", out, sizeof(out)), (int64_t)sizeof(v));
    assert_memory_equal(out, v, sizeof(v));

    rc.replica_num = 1;
    rc.preferred_segments_count = 1; /* c3 only */
    assert_int_equal(mc_put(f->c2, "fo/one", v, sizeof(v), &rc), MC_ERR_TRANSFER_FAIL);
    assert_int_equal(mc_exist(f->c1, "fo/one"), 0);
    assert_int_equal(mc_query(f->c1, "fo/one", &info), MC_ERR_OBJECT_NOT_FOUND);
    put_pref(f->c2, "fo/one", v, sizeof(v), mc_client_endpoint(f->c1), 1); /* not stuck */
    assert_int_equal(mc_get(f->c2, "fo/one", out, sizeof(out)), (int64_t)sizeof(v));
    mc_client_close(c3);
    assert_int_equal(mc_remove(f->c1, "fo/one", true), 0);
    assert_int_equal(mc_remove(f->c1, "fo/two", true), 0);
}

static void test_huge_pages_or_fallback(void **state)
{
    struct fx *f = *state;
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = f->m.addr;
    cfg.segment_size = 3 * MiB; /* not a multiple of the huge page size */
    cfg.huge_pages = true;
    struct mc_client *c = NULL;
    assert_int_equal(mc_client_open(&cfg, &c), 0); /* huge pages or a logged fallback */
    uint8_t v[4096], out[4096];
    tm_fill(v, sizeof(v), 8);
    put_pref(f->c1, "huge/k", v, sizeof(v), mc_client_endpoint(c), 1);
    assert_int_equal(mc_get(c, "huge/k", out, sizeof(out)), (int64_t)sizeof(v));
    assert_memory_equal(out, v, sizeof(v));
    mc_client_close(c);
    assert_int_equal(mc_exist(f->c1, "huge/k"), 0);
}

/* Many threads share each client (the API is thread-safe): puts, gets (local and remote),
 * exists and removes interleave; every byte comes back. */
struct worker {
    struct fx *f;
    int idx;
    int errors;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    size_t n = 64 * 1024 + (size_t)w->idx * 1000;
    uint8_t *v = malloc(n), *out = malloc(n);
    for (int i = 0; i < 16; i++) {
        char key[64];
        snprintf(key, sizeof(key), "conc/%d/%d", w->idx, i);
        tm_fill(v, n, (uint32_t)(w->idx * 1000 + i));
        struct mc_client *wr = (i & 1) ? w->f->c1 : w->f->c2;
        struct mc_client *rd = (i & 2) ? w->f->c1 : w->f->c2;
        int prc = mc_put(wr, key, v, n, NULL);
        int erc = prc == 0 ? mc_exist(rd, key) : -1;
        int64_t grc = erc == 1 ? mc_get(rd, key, out, n) : -1;
        int same = grc == (int64_t)n && memcmp(out, v, n) == 0;
        int rrc = same ? mc_remove(wr, key, true) : -1;
        if (prc != 0 || erc != 1 || !same || rrc != 0) {
            fprintf(stderr, "concurrent %s: put=%d exist=%d get=%lld same=%d remove=%d\n", key, prc,
                    erc, (long long)grc, same, rrc);
            w->errors++;
        }
    }
    free(v);
    free(out);
    return NULL;
}

static void test_concurrent_callers(void **state)
{
    struct fx *f = *state;
    enum { NT = 6 };
    struct worker w[NT];
    pthread_t th[NT];
    for (int i = 0; i < NT; i++) {
        w[i] = (struct worker){f, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].errors, 0);
    }
}

/* ---- leases and master faults (own masters) ------------------------------------------------ */

static void test_lease_expiry_mid_read(void **state)
{
    (void)state;
    struct test_master m;
    const char *extra[] = {"--default_kv_lease_ttl=200", NULL};
    assert_int_equal(tm_start(&m, 0, extra), 0);
    struct mc_client *c = cu_open_client_at(m.addr, 8 * MiB, false);
    uint8_t v[10000], out[10000];
    tm_fill(v, sizeof(v), 3);
    assert_int_equal(mc_put(c, "lease/k", v, sizeof(v), NULL), 0);
    assert_int_equal(mc_get(c, "lease/k", out, sizeof(out)), (int64_t)sizeof(v));
    mc_client_test_set_read_delay(c, 450);
    assert_int_equal(mc_get(c, "lease/k", out, sizeof(out)), MC_ERR_LEASE_EXPIRED);
    const char *k[1] = {"lease/k"};
    void *bufs[1] = {out};
    size_t caps[1] = {sizeof(out)};
    int64_t res[1];
    assert_int_equal(mc_batch_get(c, 1, k, bufs, caps, res), 0);
    assert_int_equal(res[0], MC_ERR_LEASE_EXPIRED);
    mc_client_test_set_read_delay(c, 0);
    assert_int_equal(mc_get(c, "lease/k", out, sizeof(out)), (int64_t)sizeof(v));
    mc_client_close(c);
    tm_stop(&m);
}

static void test_master_down_and_restart(void **state)
{
    (void)state;
    struct test_master m;
    assert_int_equal(tm_start(&m, 0, NULL), 0);
    uint16_t port = m.port;
    char addr[64];
    snprintf(addr, sizeof(addr), "%s", m.addr);
    struct mc_client *c = cu_open_client_at(addr, 8 * MiB, false);
    uint8_t v[70000], out[70000];
    tm_fill(v, sizeof(v), 4);
    assert_int_equal(mc_put(c, "mr/before", v, sizeof(v), NULL), 0);

    tm_kill(&m);
    /* the first call notices; from then on calls fail fast */
    uint64_t deadline = mc_now_ms() + 5000;
    while (mc_exist(c, "mr/before") != MC_ERR_RPC_FAIL && mc_now_ms() < deadline)
        ;
    for (int i = 0; i < 20; i++) {
        uint64_t t0 = mc_now_ms();
        assert_int_equal(mc_put(c, "mr/during", v, 10, NULL), MC_ERR_RPC_FAIL);
        assert_int_equal(mc_get(c, "mr/before", out, sizeof(out)), MC_ERR_RPC_FAIL);
        assert_true(mc_now_ms() - t0 < 200);
    }
    struct mc_master_conn_stats st;
    mc_master_conn_get_stats(mc_client_master_conn(c), &st);
    assert_false(st.up);
    assert_true(st.fast_failures >= 40);

    /* the master comes back on the same port with no state: the client re-mounts (without the
     * holder stream, so the new master never learns mr/before: DRAM re-registration is
     * test_holder_stream's subject) */
    const char *no_stream[] = {"--holder_stream=false", NULL};
    assert_int_equal(tm_start(&m, port, no_stream), 0);
    deadline = mc_now_ms() + 10000;
    int rc;
    while ((rc = mc_put(c, "mr/after", v, sizeof(v), NULL)) != 0 && mc_now_ms() < deadline) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(rc, 0);
    memset(out, 0, sizeof(out));
    assert_int_equal(mc_get(c, "mr/after", out, sizeof(out)), (int64_t)sizeof(v));
    assert_memory_equal(out, v, sizeof(v));
    struct mc_object_info info;
    assert_int_equal(mc_query(c, "mr/after", &info), 0);
    assert_string_equal(info.replicas[0].segment, mc_client_endpoint(c)); /* re-mounted */
    mc_object_info_free(&info);
    assert_int_equal(mc_exist(c, "mr/before"), 0); /* the new master never knew it */
    mc_master_conn_get_stats(mc_client_master_conn(c), &st);
    assert_true(st.up);
    assert_true(st.reconnects >= 1);
    assert_true(st.remounts >= 1);
    mc_client_close(c);
    tm_stop(&m);
}

/* ---- another process ----------------------------------------------------------------------- */

/* The child: opens a client, puts "mp/child", prints "READY <endpoint>", waits for "GO", reads
 * "mp/parent" (which the parent wrote into this child's segment), prints OK or BAD, waits for
 * EOF on stdin, closes. */
static int child_main(const char *master)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = master;
    cfg.segment_size = 16 * MiB;
    cfg.checksums = true;
    struct mc_client *c = NULL;
    if (mc_client_open(&cfg, &c) != 0)
        return 1;
    size_t n = 3 * MiB;
    uint8_t *v = malloc(n), *out = malloc(n);
    tm_fill(v, n, 77);
    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    const char *p[1] = {mc_client_endpoint(c)};
    rc.preferred_segments = p;
    rc.preferred_segments_count = 1;
    int ret = mc_put(c, "mp/child", v, n, &rc);
    printf("READY %s\n", mc_client_endpoint(c));
    fflush(stdout);
    char line[64];
    if (ret == 0 && fgets(line, sizeof(line), stdin) && strncmp(line, "GO", 2) == 0) {
        tm_fill(v, n, 78);
        int64_t got = mc_get(c, "mp/parent", out, n);
        bool ok = got == (int64_t)n && memcmp(out, v, n) == 0;
        printf("%s %lld\n", ok ? "OK" : "BAD", (long long)got);
        fflush(stdout);
        while (fgets(line, sizeof(line), stdin))
            ;
    }
    mc_client_close(c);
    free(v);
    free(out);
    return ret ? 1 : 0;
}

static int read_line(int fd, char *buf, size_t cap, int timeout_ms)
{
    size_t got = 0;
    uint64_t deadline = mc_now_ms() + (uint64_t)timeout_ms;
    while (got < cap - 1 && mc_now_ms() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        if (read(fd, buf + got, 1) != 1)
            break;
        if (buf[got++] == '\n')
            break;
    }
    buf[got] = '\0';
    return (int)got;
}

static void test_multi_process(void **state)
{
    struct fx *f = *state;
    int in[2], outp[2];
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    assert_int_equal(pipe2(outp, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
    char self[1024];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    assert_true(sl > 0);
    self[sl] = '\0';
    char *argv[] = {self, (char *)"--child", f->m.addr, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, self, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(outp[1]);
    char line[256];
    assert_true(read_line(outp[0], line, sizeof(line), 15000) > 0);
    assert_memory_equal(line, "READY ", 6);
    line[strcspn(line, "\n")] = '\0';
    char child_ep[256];
    snprintf(child_ep, sizeof(child_ep), "%s", line + 6);

    size_t n = 3 * MiB;
    uint8_t *v = malloc(n), *out = malloc(n);
    tm_fill(v, n, 77);
    assert_int_equal(mc_get(f->c1, "mp/child", out, n), (int64_t)n); /* from the child's DRAM */
    assert_memory_equal(out, v, n);
    tm_fill(v, n, 78);
    put_pref(f->c1, "mp/parent", v, n, child_ep, 1); /* into the child's DRAM */
    assert_int_equal(write(in[1], "GO\n", 3), 3);
    assert_true(read_line(outp[0], line, sizeof(line), 15000) > 0);
    assert_memory_equal(line, "OK", 2);
    close(in[1]); /* EOF: the child closes its client and exits */
    int st = 0;
    uint64_t deadline = mc_now_ms() + 10000;
    pid_t r;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && mc_now_ms() < deadline) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (r != pid) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        fail_msg("child did not exit");
    }
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(outp[0]);
    /* its segment went with it */
    assert_int_equal(mc_exist(f->c1, "mp/child"), 0);
    assert_int_equal(mc_exist(f->c1, "mp/parent"), 0);
    free(v);
    free(out);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2]);
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_round_trip),
        cmocka_unit_test(test_put_get_exist_remove),
        cmocka_unit_test(test_get_size_takes_no_lease),
        cmocka_unit_test(test_put_report_existing),
        cmocka_unit_test(test_get_ex_reports_needed),
        cmocka_unit_test(test_get_alloc_one_call),
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_batch_one_round_trip_per_endpoint),
        cmocka_unit_test(test_batch_put_no_space_one_window),
        cmocka_unit_test(test_replicas_preferred_and_loss),
        cmocka_unit_test(test_pins),
        cmocka_unit_test(test_no_space_retry_window),
        cmocka_unit_test(test_checksum_mismatch),
        cmocka_unit_test(test_checksum_mismatch_falls_back),
        cmocka_unit_test(test_failed_write_revokes_and_read_fails_over),
        cmocka_unit_test(test_huge_pages_or_fallback),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_config_struct_size),
        cmocka_unit_test(test_config_init_never_overruns),
        cmocka_unit_test(test_multi_process),
        cmocka_unit_test(test_lease_expiry_mid_read),
        cmocka_unit_test(test_master_down_and_restart),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
