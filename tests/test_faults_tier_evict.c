/*
 * test_faults_tier_evict.c - connection drops of the LOCAL_DISK tier's capacity-eviction report
 * (docs/testing.md), with a real mooncake_master.
 *
 * Before the holder's disk store deletes an extent it tells the master which live records go,
 * BatchEvictDiskReplica (disk_tier.h; the client never sends the single-key EvictDiskReplica);
 * when the report fails the eviction is cancelled and nothing is deleted. The holder P runs in
 * this test's process (a small DRAM segment and a disk_path) so the rpc client's drop hook
 * (common/rpc_client.h, MC_TEST_HOOKS) fires on its tier's own call; MC_TEST_DISK_EXTENT_SIZE
 * (disk_tier.h) gives its store 1 MiB extents and a 6 MiB disk_capacity, so capacity eviction
 * runs every few offloads. A second client R (no DRAM, no disk) puts and reads everything, so
 * every Put lands in P's segment, DRAM eviction offloads to P's disk (--offload_on_evict) and
 * the disk fills. The report is dropped before its request is sent and after its reply arrived
 * (the master executed it but P sees a failure). After each drop:
 *   - the hook fired (a report really was dropped);
 *   - every object ever put reads back with its bytes or is a clean miss (OBJECT_NOT_FOUND,
 *     evicted from both tiers, as a cache may) that the master no longer lists; no Get returns
 *     other bytes;
 *   - every LOCAL_DISK replica the master lists has its record in P's store (a listed replica
 *     without a record is a lost object);
 *   - the master's offload tasks in flight (its pins) and Puts in flight return to 0;
 *   - later capacity evictions are reported and delete extents again.
 *
 * FT_DEBUG=1 in the environment logs the holder at info (its evictions and their reports).
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

#include <cmocka.h>

#include "client/client_internal.h"
#include "client/disk_store.h"
#include "client/disk_tier.h"
#include "cluster_data.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "proto/master.pb-c.h"
#include "test_client_util.h"
#include "tier_query.h"

#define VLEN (256u * 1024u)
#define SEG (16u << 20)       /* P's DRAM: 64 values */
#define EXTENT "1048576"      /* P's extent size: three values each */
#define DISK_CAP (6ull << 20) /* six extents */
#define BATCH 8
#define MAX_KEYS 2048
#define SETTLE_MS 20000
#define WAIT_MS 30000

static struct {
    char dir[64];
    struct test_master m;
    struct mc_client *p; /* the holder */
    struct mc_client *r; /* the reader / writer: no DRAM, no disk */
    struct mc_rpc_client *adm;
    char keys[MAX_KEYS][32];
    uint32_t seeds[MAX_KEYS];
    int nkeys;
    int next_seed;
    uint8_t *buf, *want;
} g;

static struct mc_disk_store *store(void)
{
    return mc_disk_tier_store(atomic_load(&g.p->disk));
}

/* ---- the master's figures ------------------------------------------------------------------ */

/* Offload tasks in flight and Puts in flight at the master. */
static void master_in_flight(uint64_t *offload, uint64_t *processing)
{
    ProtobufCMessage *m = NULL;
    assert_int_equal(mc_rpc_client_call_msg(g.adm, MC_METHOD_GET_STATS, NULL,
                                            &mc__get_stats_response__descriptor, 0, &m),
                     0);
    Mc__GetStatsResponse *r = (Mc__GetStatsResponse *)m;
    *offload = r->offload_in_flight;
    *processing = (uint64_t)tq_stats_extra(r, "master_processing_key_count");
    protobuf_c_message_free_unpacked(m, NULL);
}

/* Until both clients are connected and the master has no offload task or Put in flight. */
static void settle(const char *what)
{
    uint64_t deadline = mc_now_ms() + SETTLE_MS;
    uint64_t off, proc;
    struct mc_master_conn_stats a, b;
    for (;;) {
        mc_master_conn_get_stats(mc_client_master_conn(g.p), &a);
        mc_master_conn_get_stats(mc_client_master_conn(g.r), &b);
        master_in_flight(&off, &proc);
        if (a.up && b.up && off == 0 && proc == 0)
            return;
        if (mc_now_ms() >= deadline)
            fail_msg("%s: did not settle (offload in flight %llu, puts in flight %llu, holder "
                     "up %d, reader up %d)",
                     what, (unsigned long long)off, (unsigned long long)proc, a.up, b.up);
        cu_sleep_ms(50);
    }
}

/* The COMPLETE MEMORY / LOCAL_DISK replicas the master lists for key; false when it has none. */
static bool replicas(const char *key, int *mem, int *disk)
{
    return tq_replicas(g.adm, key, mem, disk, NULL) && *mem + *disk > 0;
}

/* ---- objects ------------------------------------------------------------------------------- */

/* Puts n new keys through R, each retried for up to WAIT_MS while eviction makes room. */
static void put_new(int n, const char *tag)
{
    for (int i = 0; i < n; i++) {
        assert_true(g.nkeys < MAX_KEYS);
        int k = g.nkeys;
        snprintf(g.keys[k], sizeof(g.keys[0]), "%s-%d", tag, k);
        g.seeds[k] = (uint32_t)(++g.next_seed * 7919u);
        tm_fill(g.want, VLEN, g.seeds[k]);
        uint64_t deadline = mc_now_ms() + WAIT_MS;
        int rc;
        while ((rc = mc_put(g.r, g.keys[k], g.want, VLEN, NULL)) != 0 && mc_now_ms() < deadline)
            cu_sleep_ms(20);
        if (rc)
            fail_msg("put %s: %s", g.keys[k], mc_strerror(rc));
        g.nkeys++;
    }
}

/* One Get of key k through R: 1 its bytes, 0 a clean miss, or a negative error. Other bytes
 * fail the test at once. */
static int get_one(int k, const char *what)
{
    tm_fill(g.want, VLEN, g.seeds[k]);
    return cu_get_checked(g.r, g.keys[k], g.buf, g.want, VLEN, what);
}

/* Every object ever put: its bytes, or a clean miss the master does not list; every LOCAL_DISK
 * replica the master lists has its record in P's store. Returns the objects read. */
static int check_all(const char *what)
{
    int found = 0;
    for (int k = 0; k < g.nkeys; k++) {
        int mem, disk;
        struct mc_disk_record_info ri;
        /* the master's view first: a listed LOCAL_DISK replica needs its record */
        if (replicas(g.keys[k], &mem, &disk) && disk > 0 &&
            mc_disk_store_lookup(store(), g.keys[k], (uint32_t)strlen(g.keys[k]), &ri) != 0)
            fail_msg("%s: %s has a LOCAL_DISK replica at the master but no record on the "
                     "holder's disk (memory replicas %d)",
                     what, g.keys[k], mem);
        int rc = get_one(k, what);
        for (int t = 0; rc < 0 && t < 20; t++) { /* a transient refusal (a replica mid-change) */
            cu_sleep_ms(50);
            rc = get_one(k, what);
        }
        if (rc < 0)
            fail_msg("%s: %s lost: get = %s, master lists it %d (memory %d, disk %d)", what,
                     g.keys[k], mc_strerror(rc), replicas(g.keys[k], &mem, &disk), mem, disk);
        if (rc == 0 && replicas(g.keys[k], &mem, &disk))
            fail_msg("%s: %s lost: not found but the master lists it (memory %d, disk %d)", what,
                     g.keys[k], mem, disk);
        found += rc;
    }
    return found;
}

/* Puts until the store has evicted more extents than `extents` and the tier reported more
 * records than `notified`. */
static void evictions_work(const char *what)
{
    struct mc_disk_usage u0, u;
    struct mc_disk_tier_stats t0, t;
    mc_disk_store_usage(store(), &u0);
    mc_disk_tier_get_stats(atomic_load(&g.p->disk), &t0);
    uint64_t deadline = mc_now_ms() + WAIT_MS;
    do {
        put_new(BATCH, "again");
        mc_disk_store_usage(store(), &u);
        mc_disk_tier_get_stats(atomic_load(&g.p->disk), &t);
    } while ((u.evicted_extents <= u0.evicted_extents || t.evict_notified <= t0.evict_notified) &&
             mc_now_ms() < deadline);
    if (u.evicted_extents <= u0.evicted_extents || t.evict_notified <= t0.evict_notified)
        fail_msg("%s: no capacity eviction afterwards (extents %llu -> %llu, reported %llu -> "
                 "%llu)",
                 what, (unsigned long long)u0.evicted_extents,
                 (unsigned long long)u.evicted_extents, (unsigned long long)t0.evict_notified,
                 (unsigned long long)t.evict_notified);
    assert_true(u.bytes_used <= u.capacity);
}

static void evict_report_case(int when)
{
    char what[96];
    snprintf(what, sizeof(what), "disk eviction, drop BatchEvictDiskReplica %s",
             when == MC_RPC_TEST_DROP_BEFORE_SEND ? "before send" : "after reply");
    struct mc_disk_usage u0, u;
    mc_disk_store_usage(store(), &u0);
    uint64_t fired = mc_rpc_test_drops_fired();
    mc_rpc_test_drop_next(MC_METHOD_BATCH_EVICT_DISK_REPLICA, (enum mc_rpc_test_drop)when);
    uint64_t deadline = mc_now_ms() + WAIT_MS;
    while (mc_rpc_test_drops_fired() == fired && mc_now_ms() < deadline)
        put_new(BATCH / 2, "fill");
    if (mc_rpc_test_drops_fired() == fired)
        fail_msg("%s: the drop never fired", what);
    settle(what);
    mc_disk_store_usage(store(), &u);
    fprintf(stderr, "%s: records %llu, extents evicted %llu, bytes used %llu of %llu\n", what,
            (unsigned long long)u.records,
            (unsigned long long)(u.evicted_extents - u0.evicted_extents),
            (unsigned long long)u.bytes_used, (unsigned long long)u.capacity);
    assert_true(u.bytes_used <= u.capacity);
    assert_true(check_all(what) > 0);
    evictions_work(what);
    settle(what);
    assert_true(check_all(what) > 0);
}

static void test_evict_report_drops(void **state)
{
    (void)state;
    /* DRAM full, then the disk full: capacity eviction runs from here on */
    evictions_work("base");
    settle("base");
    for (int i = 0; i < 2; i++) { /* whether a dropped reply was executed is a race: twice */
        evict_report_case(MC_RPC_TEST_DROP_BEFORE_SEND);
        evict_report_case(MC_RPC_TEST_DROP_AFTER_REPLY);
    }
}

/* ---- setup / teardown ---------------------------------------------------------------------- */

static int open_client(uint64_t seg, const char *disk, uint64_t disk_cap, struct mc_client **out)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = g.m.addr;
    cfg.segment_size = seg;
    cfg.disk_path = disk;
    cfg.disk_capacity = disk_cap;
    cfg.ping_interval_ms = 100;
    cfg.rpc_timeout_ms = 3000;
    cfg.put_retry_window_ms = 3000;
    cfg.log_level = getenv("FT_DEBUG") ? MC_CLIENT_LOG_INFO : MC_CLIENT_LOG_ERROR;
    return mc_client_open(&cfg, out);
}

static int group_setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    g.m.out_fd = -1;
    snprintf(g.dir, sizeof(g.dir), "/tmp/mc_faults_evict.XXXXXX");
    if (!mkdtemp(g.dir))
        return -1;
    g.buf = malloc(VLEN);
    g.want = malloc(VLEN);
    if (!g.buf || !g.want)
        return -1;
    const char *extra[] = {"--enable_offload",
                           "--offload_on_evict",
                           "--put_start_discard_timeout_sec=1",
                           "--put_start_release_timeout_sec=2",
                           "--default_kv_lease_ttl=200",
                           "--eviction_ratio=0.3",
                           "--client_ttl=10",
                           NULL};
    if (tm_start(&g.m, 0, extra) != 0)
        return -1;
    char disk[128];
    snprintf(disk, sizeof(disk), "%s/p_disk", g.dir);
    setenv("MC_TEST_DISK_EXTENT_SIZE", EXTENT, 1);
    int rc = open_client(SEG, disk, DISK_CAP, &g.p);
    unsetenv("MC_TEST_DISK_EXTENT_SIZE");
    if (rc != 0 || open_client(0, NULL, 0, &g.r) != 0)
        return -1;
    return cu_admin_open(g.m.addr, 5000, &g.adm);
}

static int group_teardown(void **state)
{
    (void)state;
    mc_rpc_test_drop_reset();
    mc_rpc_client_free(g.adm);
    mc_client_close(g.r);
    mc_client_close(g.p);
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
        cmocka_unit_test(test_evict_report_drops),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
