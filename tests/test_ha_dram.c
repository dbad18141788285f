/*
 * test_ha_dram.c - DRAM objects survive a high-availability fail-over: one etcd member, two
 * mooncake_master processes (--enable_ha, lease TTL 2 s, no disk tier anywhere), a
 * mooncake_client holder daemon with a DRAM segment only, and an in-test library client W
 * without DRAM, both given the cluster as --master=etcd://127.0.0.1:P/t_had.
 *
 *   W puts N objects (they land in the holder's DRAM; the holder stream files them in the
 *   holder's index), waits past the index's flush interval, removes a few of them, removes one
 *   more while the holder is SIGSTOPped (answered once the holder is fenced), and the leader is
 *   SIGKILLed; the holder is continued. The standby takes over with a higher epoch, the holder
 * finds it through etcd, re-mounts its segment with the same range and re-registers its index:
 * every object that was not removed reads back through W with its exact bytes (content hash and
 * full compare), every removed one stays removed, and a new Put lands beside them. Deadlines are
 * generous liveness bounds. Exit 77 when etcd is not installed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_data.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "etcd_util.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "test_skip.h"

#define N 32
#define NREMOVED 4           /* dram-0..3: removed just before the kill */
#define STOPPED_KEY NREMOVED /* dram-4: removed while the holder is SIGSTOPped */
#define FIRST_KEPT (NREMOVED + 1)
#define VLEN (64u * 1024u)
#define WAIT_MS 30000

static struct eu_etcd g_etcd;
static int g_etcd_rc;
static struct cu_cluster g_c;
static struct cu_proc g_ma, g_mb, g_holder;
static char g_rpc_a[64], g_rpc_b[64], g_url[300];

static void start_master(struct cu_proc *p, char *rpc)
{
    char ep[300];
    snprintf(ep, sizeof(ep), "--etcd_endpoints=%s", g_etcd.endpoints);
    const char *flags[] = {"--enable_ha",
                           ep,
                           "--cluster_id=t_had",
                           "--ha_lease_ttl_sec=2",
                           "--holder_delete_timeout_ms=500",
                           NULL};
    assert_int_equal(cu_start_master(&g_c, p, 0, flags, 10000), 0);
    snprintf(rpc, 64, "%s", g_c.rpc);
}

static bool leads(const char *addr, uint64_t *epoch)
{
    char host[64];
    struct mc_rpc_client_config cfg;
    mc_rpc_client_config_init(&cfg);
    assert_int_equal(mc_rpc_parse_endpoint(addr, host, sizeof(host), &cfg), 0);
    cfg.call_timeout_ms = 3000;
    struct mc_rpc_client *c;
    assert_int_equal(mc_rpc_client_new(&cfg, &c), 0);
    Mc__GetLeaderRequest req = MC__GET_LEADER_REQUEST__INIT;
    Mc__GetLeaderResponse *r = NULL;
    bool yes = false;
    if (mc_rpc_client_call_msg(c, MC_METHOD_GET_LEADER, &req.base,
                               &mc__get_leader_response__descriptor, 0,
                               (ProtobufCMessage **)&r) == 0) {
        yes = strcmp(r->role, "leader") == 0;
        *epoch = r->epoch;
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    mc_rpc_client_free(c);
    return yes;
}

static uint64_t wait_leads(const char *addr)
{
    uint64_t deadline = cu_now_ms() + WAIT_MS, e = 0;
    while (!leads(addr, &e)) {
        if (cu_now_ms() > deadline)
            fail_msg("%s never led", addr);
        cu_sleep_ms(20);
    }
    return e;
}

static void value_of(int i, uint8_t *buf)
{
    cu_fill(buf, VLEN, 0xd7a40000u + (uint64_t)i);
}

/* FNV-1a 64 of the bytes: the content hash compared first, the full compare after it. */
static uint64_t content_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void check_key(struct mc_client *w, int i, uint8_t *want, uint8_t *buf, int wait_ms)
{
    char key[32];
    snprintf(key, sizeof(key), "dram-%d", i);
    value_of(i, want);
    memset(buf, 0, VLEN);
    uint64_t deadline = cu_now_ms() + (uint64_t)wait_ms;
    int64_t r;
    while ((r = cu_read(w, key, buf, VLEN)) < 0 && cu_now_ms() < deadline)
        cu_sleep_ms(50);
    if (r != (int64_t)VLEN)
        fail_msg("%s: read returned %lld (%s) after the fail-over", key, (long long)r,
                 r < 0 ? mc_strerror((int)r) : "short");
    assert_true(content_hash(buf, VLEN) == content_hash(want, VLEN));
    cu_assert_value(key, r, buf, want, VLEN);
}

static int setup(void **state)
{
    (void)state;
    g_etcd_rc = eu_start(&g_etcd, 1, 20000);
    if (g_etcd_rc != 0)
        return 0;
    return cu_cluster_init(&g_c, "mc-had");
}

static int teardown(void **state)
{
    (void)state;
    cu_stop(&g_holder, SIGKILL, 5000);
    cu_stop(&g_ma, SIGKILL, 5000);
    cu_stop(&g_mb, SIGKILL, 5000);
    if (g_etcd_rc == 0) {
        eu_stop(&g_etcd);
        cu_cluster_destroy(&g_c);
    }
    return 0;
}

static void test_dram_survives_failover(void **state)
{
    (void)state;
    if (g_etcd_rc == 77)
        MC_SKIP("etcd is not installed");
    assert_int_equal(g_etcd_rc, 0);
    start_master(&g_ma, g_rpc_a);
    uint64_t e1 = wait_leads(g_rpc_a);
    start_master(&g_mb, g_rpc_b);
    snprintf(g_url, sizeof(g_url), "etcd://%s/t_had", g_etcd.endpoints);
    assert_true(strlen(g_url) < sizeof(g_c.rpc));
    memcpy(g_c.rpc, g_url, strlen(g_url) + 1); /* the daemon and W name the cluster */

    char ep[256];
    const char *hflags[] = {"--segment_size=16MiB", "--master_wait=20s", NULL};
    assert_int_equal(cu_start_daemon(&g_c, &g_holder, "holder", hflags, ep, sizeof(ep), 20000), 0);
    struct mc_client *w = NULL;
    assert_int_equal(cu_open_client(&g_c, 0, NULL, 0, 0, &w), 0);

    uint8_t *want = malloc(VLEN), *buf = malloc(VLEN);
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "dram-%d", i);
        value_of(i, want);
        assert_int_equal(cu_put_retry(w, key, want, VLEN, NULL, WAIT_MS), 0);
    }
    /* the holder index files commits every --holder_index_flush_ms (10 ms): objects put well
     * before the kill are in it */
    cu_sleep_ms(300);
    /* removed immediately before the kill: answered once the holder dropped them (the delete
     * rule), so the re-registration cannot bring them back */
    for (int i = 0; i < NREMOVED; i++) {
        snprintf(key, sizeof(key), "dram-%d", i);
        assert_int_equal(mc_remove(w, key, false), 0);
    }

    /* removed while the holder is stopped: answered after --holder_delete_timeout_ms (the
     * holder's index fenced), then the leader dies before the holder runs again */
    assert_int_equal(cu_freeze(g_holder.pid), 0); /* every thread stopped, not just signalled */
    snprintf(key, sizeof(key), "dram-%d", STOPPED_KEY);
    int stopped_rm = mc_remove(w, key, false);
    assert_int_equal(cu_stop(&g_ma, SIGKILL, 5000), 128 + SIGKILL);
    assert_int_equal(kill(g_holder.pid, SIGCONT), 0);
    assert_int_equal(stopped_rm, 0);
    uint64_t e2 = wait_leads(g_rpc_b);
    assert_true(e2 > e1);

    /* every object not removed reads back, exact bytes, through the new leader (misses while
     * the holder re-mounts and re-registers) */
    for (int i = FIRST_KEPT; i < N; i++)
        check_key(w, i, want, buf, WAIT_MS);
    /* the re-registration has been applied (it is one batch): the removed keys stay removed */
    for (int i = 0; i < FIRST_KEPT; i++) {
        snprintf(key, sizeof(key), "dram-%d", i);
        assert_int_equal(mc_get(w, key, buf, VLEN), MC_ERR_OBJECT_NOT_FOUND);
    }
    /* a new Put lands beside the re-registered ranges, never on them */
    for (int i = N; i < 2 * N; i++) {
        snprintf(key, sizeof(key), "dram-%d", i);
        value_of(i, want);
        assert_int_equal(cu_put_retry(w, key, want, VLEN, NULL, WAIT_MS), 0);
    }
    for (int i = FIRST_KEPT; i < 2 * N; i++)
        check_key(w, i, want, buf, 0);

    mc_client_close(w);
    free(want);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dram_survives_failover),
    };
    return MC_RUN_TESTS(tests, setup, teardown);
}
