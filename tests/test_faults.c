/*
 * test_faults.c - connection drops at every step of Put and Get (docs/testing.md), with
 * real processes: a mooncake_master and a mooncake_client daemon (the only DRAM), and an
 * in-test client library with no DRAM of its own, so every Put and Get crosses the network.
 *
 * The fault is the rpc client's test hook (rpc_client.h, MC_TEST_HOOKS): the next call of one
 * method made in this process loses its connection either before its request is sent (the
 * server never sees it) or once the server's reply has arrived (the server executed it, the
 * caller never learns the result). The steps:
 *   Put         PutStart, PeerWrite (the bytes to the daemon), PutEnd, and PutRevoke (the
 *               clean-up after a failed PeerWrite, itself dropped)
 *   Get         GetReplicaList, PeerRead
 *   batches     BatchPutStart, PeerBatchWrite, BatchPutEnd, BatchGetReplicaList, PeerBatchRead
 * each before the send and after the reply. After each fault:
 *   - the hook fired (the step really ran);
 *   - a Get of the key returns exactly the bytes put, or a clean miss (OBJECT_NOT_FOUND /
 *     REPLICA_IS_NOT_READY) when the Put failed, never other bytes; a Put that returned 0 is
 *     readable;
 *   - once the client is reconnected, the master has no Put in flight
 *     (master_processing_key_count returns to 0: the reaper frees a Put nobody finishes, with
 *     --put_start_release_timeout_sec short here), and the same Put and Get then succeed.
 * At the end every object ever committed is still there with its bytes (nothing complete was
 * lost), and after a forced RemoveAll the master holds no key and no allocated byte (no fault
 * path leaked a buffer). Pins (replica refcounts) are only taken by offload and promotion,
 * which the client does not run yet, so there is no pin to check here.
 *
 * Every process dies with the test; the temporary directory is removed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "client/master_conn.h"
#include "cluster_util.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "proto/master.pb-c.h"
#include "test_client_util.h"

#define LEN (300u * 1024u)
#define BATCH 3
#define MAX_KEYS 64
#define SETTLE_MS 15000

static struct {
    char dir[64];
    char daemon_bin[600];
    struct test_master m;
    struct cu_proc d;
    struct mc_client *c;
    struct mc_rpc_client *adm;
    char keys[MAX_KEYS][32];
    uint32_t seeds[MAX_KEYS];
    int nkeys; /* committed objects: key i holds pattern(seeds[i]) */
    uint8_t *buf, *want;
} g;

static const char *when_name(int when)
{
    return when == MC_RPC_TEST_DROP_BEFORE_SEND ? "before send" : "after reply";
}

/* The master's counters: keys, allocated bytes, Puts in flight. */
static void master_stats(uint64_t *keys, uint64_t *allocated, uint64_t *processing)
{
    ProtobufCMessage *m = NULL;
    assert_int_equal(mc_rpc_client_call_msg(g.adm, MC_METHOD_GET_STATS, NULL,
                                            &mc__get_stats_response__descriptor, 0, &m),
                     0);
    Mc__GetStatsResponse *r = (Mc__GetStatsResponse *)m;
    *keys = r->key_count;
    *allocated = r->allocated_bytes;
    *processing = UINT64_MAX;
    for (size_t i = 0; i < r->n_extra; i++)
        if (strcmp(r->extra[i]->name, "master_processing_key_count") == 0)
            *processing = (uint64_t)r->extra[i]->value;
    assert_true(*processing != UINT64_MAX);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* Until the client's master connection is back and the master has no Put in flight. "Back"
 * means a call goes through: a drop after the reply leaves the call answered and the client's
 * state up while its socket is already shut (the connection's reader notices a moment later),
 * and a call made in that moment fails with RPC_FAIL and takes the connection down for the ping
 * thread to bring back; that call is the probe here, not the next step's. */
static void settle(const char *what)
{
    uint64_t deadline = mc_now_ms() + SETTLE_MS, keys = 0, alloc = 0, proc = 0;
    struct mc_master_conn_stats st;
    for (;;) {
        mc_master_conn_get_stats(mc_client_master_conn(g.c), &st);
        master_stats(&keys, &alloc, &proc);
        if (st.up && proc == 0 && mc_exist(g.c, "settle-probe") >= 0)
            return;
        if (mc_now_ms() >= deadline)
            fail_msg("%s: did not settle (client up=%d, puts in flight %llu)", what, st.up,
                     (unsigned long long)proc);
        cu_sleep_ms(20);
    }
}

/* A Get of key (seed) after a fault: the bytes put, or (only when allow_miss) a clean miss. */
static void check_get(const char *key, uint32_t seed, bool allow_miss, const char *what)
{
    tm_fill(g.want, LEN, seed);
    memset(g.buf, 0, LEN);
    int64_t n = mc_get(g.c, key, g.buf, LEN);
    if (n == (int64_t)LEN) {
        assert_memory_equal(g.buf, g.want, LEN);
        return;
    }
    if (allow_miss && (n == MC_ERR_OBJECT_NOT_FOUND || n == MC_ERR_REPLICA_IS_NOT_READY))
        return;
    fail_msg("%s: get %s = %lld (%s)", what, key, (long long)n,
             n < 0 ? mc_strerror((int)n) : "a wrong length");
}

static void commit(const char *key, uint32_t seed)
{
    assert_true(g.nkeys < MAX_KEYS);
    snprintf(g.keys[g.nkeys], sizeof(g.keys[0]), "%s", key);
    g.seeds[g.nkeys++] = seed;
}

/* One Put with `n` drops armed (methods[i], when[i]); the last one is the step under test and
 * must fire. must_fail: the Put may not succeed (its data write was made to fail). */
static void put_case(const char *key, uint32_t seed, int n, const uint16_t *methods,
                     const int *when, bool must_fail)
{
    char what[160];
    uint16_t step = methods[n - 1];
    snprintf(what, sizeof(what), "put %s, drop %s %s%s", key, mc_method_name(step),
             when_name(when[n - 1]), n > 1 ? " (after failed data writes)" : "");
    settle(what);
    for (int i = 0; i < n; i++)
        mc_rpc_test_drop_next(methods[i], (enum mc_rpc_test_drop)when[i]);
    assert_true(mc_rpc_test_drops_armed(step) >= 1);
    tm_fill(g.want, LEN, seed);
    int rc = mc_put(g.c, key, g.want, LEN, NULL);
    int left = mc_rpc_test_drops_armed(step);
    mc_rpc_test_drop_reset();
    if (left != 0)
        fail_msg("%s: the step did not run (put rc %s)", what, mc_strerror(rc));
    if (must_fail && rc == 0)
        fail_msg("%s: the put succeeded although every data write failed", what);
    print_message("%s: put %s\n", what, mc_strerror(rc));
    settle(what);
    check_get(key, seed, rc != 0, what);
    /* the system recovers: the same Put succeeds (or finds the first one's object) */
    assert_int_equal(mc_put(g.c, key, g.want, LEN, NULL), 0);
    check_get(key, seed, false, what);
    commit(key, seed);
}

static void get_case(uint16_t method, int when)
{
    char key[32], what[160];
    uint32_t seed = 0x6e70 + (uint32_t)method * 4 + (uint32_t)when;
    snprintf(key, sizeof(key), "get-%x-%d", method, when);
    snprintf(what, sizeof(what), "get, drop %s %s", mc_method_name(method), when_name(when));
    settle(what);
    tm_fill(g.want, LEN, seed);
    assert_int_equal(mc_put(g.c, key, g.want, LEN, NULL), 0);
    commit(key, seed);
    uint64_t fired = mc_rpc_test_drops_fired();
    mc_rpc_test_drop_next(method, (enum mc_rpc_test_drop)when);
    memset(g.buf, 0, LEN);
    int64_t n = mc_get(g.c, key, g.buf, LEN);
    mc_rpc_test_drop_reset();
    assert_int_equal(mc_rpc_test_drops_fired(), fired + 1);
    print_message("%s: get %lld\n", what, (long long)n);
    if (n == (int64_t)LEN)
        assert_memory_equal(g.buf, g.want, LEN); /* a Get that succeeds has the bytes */
    else
        assert_true(n < 0);
    settle(what);
    check_get(key, seed, false, what);
}

static void batch_case(uint16_t method, int when, bool is_get)
{
    char kb[BATCH][32], what[160];
    const char *keys[BATCH];
    const void *bufs[BATCH];
    void *gbufs[BATCH];
    size_t lens[BATCH], caps[BATCH];
    uint8_t *vals[BATCH];
    uint32_t seeds[BATCH];
    int res[BATCH];
    int64_t gres[BATCH];
    snprintf(what, sizeof(what), "batch %s, drop %s %s", is_get ? "get" : "put",
             mc_method_name(method), when_name(when));
    for (int i = 0; i < BATCH; i++) {
        snprintf(kb[i], sizeof(kb[i]), "b-%x-%d-%d", method, when, i);
        keys[i] = kb[i];
        seeds[i] = 0xba00 + (uint32_t)method * 16 + (uint32_t)when * 4 + (uint32_t)i;
        vals[i] = malloc(LEN);
        assert_non_null(vals[i]);
        tm_fill(vals[i], LEN, seeds[i]);
        bufs[i] = vals[i];
        lens[i] = caps[i] = LEN;
        gbufs[i] = malloc(LEN);
        assert_non_null(gbufs[i]);
    }
    settle(what);
    uint64_t fired = mc_rpc_test_drops_fired();
    if (!is_get)
        mc_rpc_test_drop_next(method, (enum mc_rpc_test_drop)when);
    int rc = mc_batch_put(g.c, BATCH, keys, bufs, lens, NULL, res);
    if (!is_get) {
        mc_rpc_test_drop_reset();
        assert_int_equal(mc_rpc_test_drops_fired(), fired + 1);
        print_message("%s: batch put %s\n", what, mc_strerror(rc));
        settle(what);
        for (int i = 0; i < BATCH; i++)
            check_get(keys[i], seeds[i], rc != 0 || res[i] != 0, what);
        rc = mc_batch_put(g.c, BATCH, keys, bufs, lens, NULL, res);
    }
    assert_int_equal(rc, 0);
    for (int i = 0; i < BATCH; i++) {
        assert_int_equal(res[i], 0);
        commit(keys[i], seeds[i]);
    }
    if (is_get) {
        settle(what);
        mc_rpc_test_drop_next(method, (enum mc_rpc_test_drop)when);
        for (int i = 0; i < BATCH; i++)
            memset(gbufs[i], 0, LEN);
        rc = mc_batch_get(g.c, BATCH, keys, gbufs, caps, gres);
        mc_rpc_test_drop_reset();
        assert_int_equal(mc_rpc_test_drops_fired(), fired + 1);
        print_message("%s: batch get %s\n", what, mc_strerror(rc));
        for (int i = 0; i < BATCH && rc == 0; i++) {
            if (gres[i] == (int64_t)LEN)
                assert_memory_equal(gbufs[i], vals[i], LEN);
            else
                assert_true(gres[i] < 0);
        }
        settle(what);
        rc = mc_batch_get(g.c, BATCH, keys, gbufs, caps, gres);
        assert_int_equal(rc, 0);
        for (int i = 0; i < BATCH; i++) {
            assert_int_equal(gres[i], (int64_t)LEN);
            assert_memory_equal(gbufs[i], vals[i], LEN);
        }
    }
    for (int i = 0; i < BATCH; i++) {
        free(vals[i]);
        free(gbufs[i]);
    }
}

/* ---- tests -------------------------------------------------------------------------------- */

static const int WHENS[2] = {MC_RPC_TEST_DROP_BEFORE_SEND, MC_RPC_TEST_DROP_AFTER_REPLY};

static void test_put_steps(void **state)
{
    (void)state;
    const uint16_t steps[] = {MC_METHOD_PUT_START, MC_METHOD_PEER_WRITE, MC_METHOD_PUT_END};
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++)
        for (int w = 0; w < 2; w++) {
            char key[32];
            snprintf(key, sizeof(key), "put-%x-%d", steps[s], WHENS[w]);
            put_case(key, 0x9070 + (uint32_t)s * 2 + (uint32_t)w, 1, &steps[s], &WHENS[w], false);
        }
    /* the revoke after a failed data write (a stale pooled connection is retried once on a
     * fresh one, so both attempts are dropped), itself dropped */
    for (int w = 0; w < 2; w++) {
        char key[32];
        const uint16_t m[3] = {MC_METHOD_PEER_WRITE, MC_METHOD_PEER_WRITE, MC_METHOD_PUT_REVOKE};
        const int when[3] = {MC_RPC_TEST_DROP_BEFORE_SEND, MC_RPC_TEST_DROP_BEFORE_SEND, WHENS[w]};
        snprintf(key, sizeof(key), "revoke-%d", WHENS[w]);
        put_case(key, 0x7e70 + (uint32_t)w, 3, m, when, true);
    }
}

static void test_get_steps(void **state)
{
    (void)state;
    const uint16_t steps[] = {MC_METHOD_GET_REPLICA_LIST, MC_METHOD_PEER_READ};
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++)
        for (int w = 0; w < 2; w++)
            get_case(steps[s], WHENS[w]);
}

static void test_batch_steps(void **state)
{
    (void)state;
    const uint16_t puts[] = {MC_METHOD_BATCH_PUT_START, MC_METHOD_PEER_BATCH_WRITE,
                             MC_METHOD_BATCH_PUT_END};
    const uint16_t gets[] = {MC_METHOD_BATCH_GET_REPLICA_LIST, MC_METHOD_PEER_BATCH_READ};
    for (int w = 0; w < 2; w++) {
        for (size_t s = 0; s < sizeof(puts) / sizeof(puts[0]); s++)
            batch_case(puts[s], WHENS[w], false);
        for (size_t s = 0; s < sizeof(gets) / sizeof(gets[0]); s++)
            batch_case(gets[s], WHENS[w], true);
    }
}

/* Nothing committed was lost; a forced RemoveAll leaves no key and no allocated byte. */
static void test_invariants_at_the_end(void **state)
{
    (void)state;
    settle("end");
    assert_true(g.nkeys > 0);
    for (int i = 0; i < g.nkeys; i++)
        check_get(g.keys[i], g.seeds[i], false, "end");
    uint64_t keys = 0, alloc = 0, proc = 0;
    master_stats(&keys, &alloc, &proc);
    assert_int_equal(keys, (uint64_t)g.nkeys);
    assert_int_equal(proc, 0);
    assert_int_equal(mc_remove_all(g.c, true), g.nkeys);
    /* forced removal under the reads' leases parks the space until they end (short here) */
    uint64_t deadline = mc_now_ms() + SETTLE_MS;
    do {
        master_stats(&keys, &alloc, &proc);
        if (keys == 0 && alloc == 0 && proc == 0)
            break;
        cu_sleep_ms(20);
    } while (mc_now_ms() < deadline);
    assert_int_equal(keys, 0);
    assert_int_equal(proc, 0);
    assert_int_equal(alloc, 0);
}

/* ---- setup / teardown -------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    const char *bin = getenv("MC_BIN_DIR");
    memset(&g, 0, sizeof(g));
    g.d.out_fd = -1;
    g.m.out_fd = -1;
    if (!bin)
        return -1;
    snprintf(g.daemon_bin, sizeof(g.daemon_bin), "%s/mooncake_client", bin);
    snprintf(g.dir, sizeof(g.dir), "/tmp/mc_faults.XXXXXX");
    if (!mkdtemp(g.dir))
        return -1;
    g.buf = malloc(LEN);
    g.want = malloc(LEN);
    if (!g.buf || !g.want)
        return -1;
    /* short leases and a short release of unfinished Puts keep the settling quick */
    const char *extra[] = {"--default_kv_lease_ttl=200", "--put_start_discard_timeout_sec=300ms",
                           "--put_start_release_timeout_sec=600ms", NULL};
    if (tm_start(&g.m, 0, extra) != 0)
        return -1;
    char master[96], log[128];
    snprintf(master, sizeof(master), "--master=%s", g.m.addr);
    snprintf(log, sizeof(log), "%s/daemon.log", g.dir);
    const char *argv[] = {g.daemon_bin,       master, "--host=127.0.0.1", "--segment_size=64MiB",
                          "--log_level=warn", NULL};
    if (cu_spawn(&g.d, argv, log) != 0)
        return -1;
    struct mc_proc_ready ready;
    if (cu_await_ready(&g.d, MC_PROC_READY_DAEMON, &ready, "daemon", 20000) != 0)
        return -1;
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = g.m.addr;
    cfg.segment_size = 0; /* every byte crosses the network */
    cfg.ping_interval_ms = 50;
    cfg.rpc_timeout_ms = 3000;
    cfg.log_level = MC_CLIENT_LOG_ERROR;
    if (mc_client_open(&cfg, &g.c) != 0)
        return -1;
    return cu_admin_open(g.m.addr, 5000, &g.adm);
}

static int group_teardown(void **state)
{
    (void)state;
    mc_rpc_client_free(g.adm);
    mc_client_close(g.c);
    cu_stop(&g.d, SIGTERM, 10000);
    tm_stop(&g.m);
    free(g.buf);
    free(g.want);
    if (g.dir[0])
        cu_rm_rf(g.dir);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    mc_log_set_level(MC_LOG_ERROR); /* the hook's and the reconnects' warnings are expected */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_steps),
        cmocka_unit_test(test_get_steps),
        cmocka_unit_test(test_batch_steps),
        cmocka_unit_test(test_invariants_at_the_end),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
