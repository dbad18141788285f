/*
 * test_faults_tier_kill.c - processes of the LOCAL_DISK tier killed while offloads run (see
 * docs/testing.md): a real mooncake_master with offload on eviction and a real mooncake_client
 * holder H with a --disk_path.
 *
 * Load: a writer thread puts new 256 KiB objects through an in-test client W with no DRAM and
 * no disk, so every Put lands in H's small segment and DRAM eviction keeps H's worker
 * offloading. A second in-test client C reads. The master's reaper runs with a short
 * --put_start_release_timeout_sec, so the offload tasks (pins) of a dead holder are released
 * within seconds.
 *   holder_kill    kill -9 H at a few seeded random points after an offload completed (the
 *                  load still running), restart it at once (within --client_ttl) on the same
 *                  --disk_path.
 *   master_kill    kill -9 the master under the same load and restart it on its port: H
 *                  re-mounts and re-registers its disk records.
 * Before each kill the keys the master lists with a COMPLETE LOCAL_DISK replica (and their
 * versions) are noted; their bytes are on H's disk. After each restart:
 *   - every object ever put reads back with its bytes or is a clean miss (its only copy was in
 *     the dead DRAM, or it was mid-Put); no Get returns other bytes;
 *   - every noted disk object is listed on LOCAL_DISK again, with the same version, and reads
 *     back with its bytes;
 *   - the master's offload tasks in flight and Puts in flight return to 0;
 *   - offload works again (the master counts new completed offloads).
 *
 * Every process dies with the test (PR_SET_PDEATHSIG) and is stopped in teardown; the temporary
 * directory is removed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_data.h"
#include "cluster_util.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "proto/master.pb-c.h"
#include "tier_query.h"

#define VLEN (256u * 1024u)
#define MAX_KEYS 8192
#define START_MS 20000
#define WAIT_MS 20000
#define KILLS 3
#define SEED 20261202u
/* The holder's disk holds every key the load can write (MAX_KEYS values, each with its record
 * header and its padding to the 4 KiB write alignment) below the store's 90% high watermark:
 * a noted disk object must come back, and one the holder evicted for room would not. */
#define DISK_CAP_MIB 4096
_Static_assert((uint64_t)MAX_KEYS *(VLEN + 8192u) < (uint64_t)DISK_CAP_MIB * 1024 * 1024 / 10 * 9,
               "the load would fill the holder's disk past its high watermark");

static struct {
    struct cu_cluster cl;
    char disk[128];
    int port; /* the master's RPC port, kept across its restarts */
    struct cu_proc master, h;
    char ep[256];
    struct mc_client *w, *c; /* writer, reader */
    struct mc_rpc_client *adm;
    char keys[MAX_KEYS][24];
    _Atomic int nkeys;           /* keys whose Put succeeded: [0, nkeys) */
    bool gone[MAX_KEYS];         /* a clean miss seen: not expected back */
    uint64_t disk_ver[MAX_KEYS]; /* version noted on LOCAL_DISK before a kill; 0 = none */
    pthread_t writer;
    _Atomic bool stop;
    _Atomic uint64_t puts_failed;
    uint8_t *buf, *want, *wbuf;
    uint32_t rnd;
} g;

static uint32_t rnd(void)
{
    g.rnd = g.rnd * 1103515245u + 12345u;
    return g.rnd >> 8;
}

static void value_of(int k, uint8_t *buf)
{
    cu_fill(buf, VLEN, 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1));
}

/* ---- processes ------------------------------------------------------------------------------ */

static int start_master(int port)
{
    static const char *const flags[] = {"--client_ttl=10",
                                        "--default_kv_lease_ttl=200",
                                        "--enable_offload",
                                        "--offload_on_evict",
                                        "--eviction_ratio=0.3",
                                        "--put_start_discard_timeout_sec=1",
                                        "--put_start_release_timeout_sec=2",
                                        "--log_level=warn",
                                        NULL};
    return cu_start_master(&g.cl, &g.master, port, flags, START_MS);
}

static int start_holder(void)
{
    char disk[160], cap[48];
    const char *flags[] = {"--segment_size=16MiB", disk, cap, "--log_level=warn",
                           "--master_wait=20s",    NULL};
    snprintf(disk, sizeof(disk), "--disk_path=%s", g.disk);
    snprintf(cap, sizeof(cap), "--disk_capacity=%dMiB", DISK_CAP_MIB);
    return cu_start_daemon(&g.cl, &g.h, "holder", flags, g.ep, sizeof(g.ep), START_MS);
}

static int admin_open(void)
{
    mc_rpc_client_free(g.adm);
    return cu_admin_open(g.cl.rpc, 5000, &g.adm);
}

/* ---- the master's view ---------------------------------------------------------------------- */

struct mstats {
    uint64_t offload_in_flight, processing;
    double offload_completed;
};

static void master_stats(struct mstats *s)
{
    ProtobufCMessage *m = NULL;
    int rc = -1;
    for (int t = 0; t < 50 && rc != 0; t++) { /* the master may be restarting */
        rc = mc_rpc_client_call_msg(g.adm, MC_METHOD_GET_STATS, NULL,
                                    &mc__get_stats_response__descriptor, 0, &m);
        if (rc)
            cu_sleep_ms(100);
    }
    assert_int_equal(rc, 0);
    Mc__GetStatsResponse *r = (Mc__GetStatsResponse *)m;
    s->offload_in_flight = r->offload_in_flight;
    s->processing = (uint64_t)tq_stats_extra(r, "master_processing_key_count");
    s->offload_completed = tq_stats_extra(r, "master_offload_completed_total");
    protobuf_c_message_free_unpacked(m, NULL);
}

/* The version of key k when the master lists a COMPLETE LOCAL_DISK replica of it, else 0. */
static uint64_t disk_version(int k)
{
    int mem, disk;
    uint64_t v;
    return tq_replicas(g.adm, g.keys[k], &mem, &disk, &v) && disk > 0 ? v : 0;
}

/* Until the master has no offload task and no Put in flight. */
static void settle(const char *what)
{
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    struct mstats s;
    for (;;) {
        master_stats(&s);
        if (s.offload_in_flight == 0 && s.processing == 0)
            return;
        if (cu_now_ms() >= deadline)
            fail_msg("%s: did not settle (offload in flight %llu, puts in flight %llu)", what,
                     (unsigned long long)s.offload_in_flight, (unsigned long long)s.processing);
        cu_sleep_ms(50);
    }
}

/* ---- the load ------------------------------------------------------------------------------- */

static void *writer_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&g.stop)) {
        int k = atomic_load(&g.nkeys);
        if (k >= MAX_KEYS)
            break;
        snprintf(g.keys[k], sizeof(g.keys[0]), "tk-%d", k);
        value_of(k, g.wbuf);
        /* a Put that fails (the holder or the master is down) is tried again under the same
         * key: a key counts once its Put succeeded */
        int rc = mc_put(g.w, g.keys[k], g.wbuf, VLEN, NULL);
        /* ALREADY_EXISTS: a Put whose reply was lost had stored these very bytes */
        if (rc == 0 || rc == MC_ERR_OBJECT_ALREADY_EXISTS)
            atomic_store(&g.nkeys, k + 1);
        else {
            atomic_fetch_add(&g.puts_failed, 1);
            cu_sleep_ms(20);
        }
    }
    return NULL;
}

static void load_start(void)
{
    atomic_store(&g.stop, false);
    assert_int_equal(pthread_create(&g.writer, NULL, writer_main, NULL), 0);
}

static void load_stop(void)
{
    atomic_store(&g.stop, true);
    pthread_join(g.writer, NULL);
}

/* Until the master counts more completed offloads than it did at `since`. */
static bool offload_completes(double since, uint64_t wait_ms)
{
    uint64_t deadline = cu_now_ms() + wait_ms;
    struct mstats s;
    do {
        master_stats(&s);
        if (s.offload_completed > since)
            return true;
        cu_sleep_ms(20);
    } while (cu_now_ms() < deadline);
    return false;
}

/* Notes which keys the master lists on LOCAL_DISK (and at which version). */
static int note_disk(void)
{
    int n = atomic_load(&g.nkeys), on = 0;
    for (int k = 0; k < n; k++) {
        g.disk_ver[k] = g.gone[k] ? 0 : disk_version(k);
        on += g.disk_ver[k] != 0;
    }
    return on;
}

/* ---- checks --------------------------------------------------------------------------------- */

/* Every key: its bytes or a clean miss; a noted disk key: listed on LOCAL_DISK at its version
 * (waiting for the re-registration) and its bytes. Returns the noted keys back. */
static int check_all(const char *what)
{
    int n = atomic_load(&g.nkeys), back = 0;
    for (int k = 0; k < n; k++) {
        if (g.gone[k])
            continue;
        if (g.disk_ver[k]) {
            uint64_t deadline = cu_now_ms() + WAIT_MS, v;
            while ((v = disk_version(k)) != g.disk_ver[k] && cu_now_ms() < deadline)
                cu_sleep_ms(50);
            if (v != g.disk_ver[k])
                fail_msg("%s: %s was on LOCAL_DISK at version %llu before the kill, now %llu", what,
                         g.keys[k], (unsigned long long)g.disk_ver[k], (unsigned long long)v);
        }
        int64_t r = cu_read(g.c, g.keys[k], g.buf, VLEN);
        for (int t = 0; r < 0 && r != MC_ERR_OBJECT_NOT_FOUND && t < 40; t++) {
            cu_sleep_ms(50); /* a replica mid-change, a reconnect */
            r = cu_read(g.c, g.keys[k], g.buf, VLEN);
        }
        if (r == MC_ERR_OBJECT_NOT_FOUND && !g.disk_ver[k]) {
            g.gone[k] = true; /* its only copy was in the dead DRAM */
            continue;
        }
        value_of(k, g.want);
        cu_assert_value(g.keys[k], r, g.buf, g.want, VLEN);
        back += g.disk_ver[k] != 0;
    }
    return back;
}

/* After a restart: the load offloads again and everything checks. */
static void after_restart(const char *what, int noted)
{
    settle(what);
    int back = check_all(what);
    fprintf(stderr, "%s: %d of %d disk objects back, %d keys, %llu failed puts\n", what, back,
            noted, atomic_load(&g.nkeys), (unsigned long long)atomic_load(&g.puts_failed));
    assert_int_equal(back, noted);
    struct mstats s;
    master_stats(&s);
    load_start();
    bool ok = offload_completes(s.offload_completed, WAIT_MS);
    load_stop();
    if (!ok)
        fail_msg("%s: no offload completed after the restart (%d of %d keys written)", what,
                 atomic_load(&g.nkeys), MAX_KEYS);
    settle(what);
}

/* The load runs until an offload completed, then a seeded random while longer. */
static void load_until_offloading(const char *what)
{
    struct mstats s;
    master_stats(&s);
    load_start();
    if (!offload_completes(s.offload_completed, WAIT_MS)) {
        load_stop();
        fail_msg("%s: no offload before the kill (%d of %d keys written)", what,
                 atomic_load(&g.nkeys), MAX_KEYS);
    }
    cu_sleep_ms((int)(rnd() % 700));
}

static void test_holder_kill(void **state)
{
    (void)state;
    for (int i = 0; i < KILLS; i++) {
        char what[64];
        snprintf(what, sizeof(what), "holder kill %d", i + 1);
        load_until_offloading(what);
        int noted = note_disk(); /* the load still runs */
        int rc = cu_stop(&g.h, SIGKILL, 5000);
        load_stop();
        assert_int_equal(rc, 128 + SIGKILL);
        assert_int_equal(start_holder(), 0); /* READY after re-registration */
        after_restart(what, noted);
    }
}

static void test_master_kill(void **state)
{
    (void)state;
    const char *what = "master kill";
    load_until_offloading(what);
    int noted = note_disk();
    int rc = cu_stop(&g.master, SIGKILL, 5000);
    assert_int_equal(rc, 128 + SIGKILL);
    uint64_t deadline = cu_now_ms() + START_MS;
    while (start_master(g.port) != 0) {
        if (cu_now_ms() >= deadline) {
            load_stop();
            fail_msg("the master did not restart on port %d", g.port);
        }
        cu_sleep_ms(200);
    }
    cu_sleep_ms((int)(rnd() % 500)); /* the load meets the new master */
    load_stop();
    assert_int_equal(admin_open(), 0);
    after_restart(what, noted);
}

/* ---- setup / teardown ----------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    g.master.out_fd = g.h.out_fd = -1;
    const char *seed = getenv("MC_TEST_SEED");
    g.rnd = seed ? (uint32_t)strtoul(seed, NULL, 10) : SEED;
    fprintf(stderr, "seed %u (MC_TEST_SEED)\n", g.rnd);
    if (cu_cluster_init(&g.cl, "mc_ftk") != 0)
        return -1;
    snprintf(g.disk, sizeof(g.disk), "%s/disk", g.cl.dir);
    g.buf = malloc(VLEN);
    g.want = malloc(VLEN);
    g.wbuf = malloc(VLEN);
    if (!g.buf || !g.want || !g.wbuf || start_master(0) != 0 || start_holder() != 0)
        return -1;
    const char *colon = strrchr(g.cl.rpc, ':');
    g.port = colon ? atoi(colon + 1) : 0;
    if (g.port <= 0 || admin_open() != 0)
        return -1;
    if (cu_open_client(&g.cl, 0, NULL, 0, 3000, &g.w) != 0 ||
        cu_open_client(&g.cl, 0, NULL, 0, 3000, &g.c) != 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    mc_client_close(g.w);
    mc_client_close(g.c);
    mc_rpc_client_free(g.adm);
    cu_stop(&g.h, SIGTERM, 10000);
    cu_stop(&g.master, SIGTERM, 10000);
    cu_cluster_destroy(&g.cl);
    free(g.buf);
    free(g.want);
    free(g.wbuf);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_holder_kill),
        cmocka_unit_test(test_master_kill),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
