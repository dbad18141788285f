/*
 * test_disk_tier.c - the LOCAL_DISK tier end to end, as separate processes on loopback.
 *
 * One cluster for the group: mooncake_master with --enable_offload --offload_on_evict, a short
 * --client_ttl and read lease; one holder daemon H (mooncake_client, a 64 MiB DRAM segment and
 * a --disk_path); an in-test libmooncake_client with no DRAM and no disk, so every byte it
 * reads crosses to H's peer server. The tests run in order and build on each other:
 *
 *   offload_readable     200 MiB of 1 MiB objects into the 64 MiB segment: eviction offloads
 *                        them and every key stays readable, byte-equal, from DRAM or disk
 *                        (mc_get and mc_batch_get_tiers, tiers reported); a batch of disk-only
 *                        keys is one PeerDiskRead to the holder
 *   restart_within_ttl   kill -9 H and restart it on the same directory at once: its disk
 *                        objects come back (bytes equal), and no MEMORY replica of the dead
 *                        process's segment is listed any more
 *   remove_reput         a disk-only key removed and put again with new bytes, then H killed
 *                        and restarted: the old bytes are never served
 *   restart_after_ttl    H killed, the TTL passes (its objects are dropped), H restarted: the
 *                        dropped objects stay gone (never resurrected), also after a second
 *                        restart
 *   master_restart       100 MiB put again (part offloaded), then the master killed and
 *                        restarted on its port: H re-mounts and re-registers, every disk
 *                        object is readable again, bytes equal
 *   in_process_holder    a holder inside this process: its disk objects are read from its own
 *                        store (no peer request), and idle its worker sends at most 2
 *                        heartbeats a second
 *
 * Everything is polled with deadlines; every process dies with the test (PR_SET_PDEATHSIG) and
 * is stopped in teardown; the temporary directory is removed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "client/disk_store.h"
#include "client/disk_tier.h"
#include "client/transport.h"
#include "cluster_data.h"
#include "common/rpc_client.h"
#include "cluster_util.h"
#include "mooncake/client.h"

#define NKEYS 200
#define VLEN (1u << 20)
#define START_MS 20000
#define WAIT_MS 20000

static struct {
    struct cu_cluster cl; /* binaries, directory, the master's addresses */
    int metrics_port;     /* the holder's /metrics */
    char disk[128];
    struct cu_proc master, h;
    char ep[256];
    struct mc_client *client;
    int gen[NKEYS];       /* generation of each key's bytes; -1 = not stored */
    int disk_keys[NKEYS]; /* keys read from LOCAL_DISK in offload_readable */
    int ndisk;
    uint8_t *buf, *want;
} g;

/* ---- helpers ----------------------------------------------------------------------------- */

static void key_of(int i, char *key, size_t cap)
{
    snprintf(key, cap, "dt-%03d", i);
}

/* The bytes of key i at generation gen: deterministic, distinct per key and generation. */
static void value_of(int i, int gen, uint8_t *buf)
{
    cu_fill(buf, VLEN,
            0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) + 0xabcdefull * (uint64_t)(gen + 1));
}

static int start_master(int rpc_port)
{
    static const char *const flags[] = {"--client_ttl=2",   "--default_kv_lease_ttl=1000",
                                        "--enable_offload", "--offload_on_evict",
                                        "--log_level=warn", NULL};
    return cu_start_master(&g.cl, &g.master, rpc_port, flags, START_MS);
}

static int start_holder(void)
{
    const struct cu_holder_opts o = {.segment_size = "64MiB", .metrics_port = g.metrics_port};
    return cu_start_holder(&g.cl, &g.h, g.disk, &o, g.ep, sizeof(g.ep), START_MS);
}

/* One series of the holder's /metrics (through mooncake_cli metrics). */
static double holder_metric(const char *name)
{
    char opt[64], master[128];
    struct cu_run r;
    snprintf(opt, sizeof(opt), "--metrics=127.0.0.1:%d", g.metrics_port);
    snprintf(master, sizeof(master), "--master=%s", g.cl.rpc);
    const char *argv[] = {g.cl.cli_bin, master, "metrics", opt, NULL};
    cu_run(&r, g.cl.dir, argv, NULL, 20000);
    if (r.status != 0)
        fprintf(stderr, "mooncake_cli metrics: %s\n", r.err);
    assert_int_equal(r.status, 0);
    double v = mc_metrics_value(r.out, name);
    cu_run_free(&r);
    assert_true(v >= 0);
    return v;
}

/* Put with retries while the segment is full (eviction and offload make room). */
static int put_retry(const char *key, const void *buf, size_t len)
{
    return cu_put_retry(g.client, key, buf, len, NULL, WAIT_MS);
}

/* Which tiers key i lists (CU_TIER_* bits), from the admin query. */
static int tiers_of(int i)
{
    char key[32];
    key_of(i, key, sizeof(key));
    return cu_tiers(g.client, key);
}

/* mc_get of key i: its bytes at g.gen[i], or (allow_gone) OBJECT_NOT_FOUND; never other bytes. */
static void check_key(int i, bool allow_gone)
{
    char key[32];
    key_of(i, key, sizeof(key));
    int64_t n = cu_read(g.client, key, g.buf, VLEN);
    if (allow_gone && n < 0) {
        assert_int_equal(n, MC_ERR_OBJECT_NOT_FOUND);
        return;
    }
    value_of(i, g.gen[i], g.want);
    cu_assert_value(key, n, g.buf, g.want, VLEN);
}

/* Waits until key i lists a LOCAL_DISK replica (the restarted holder re-registered). */
static bool wait_disk(int i)
{
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    while (cu_now_ms() < deadline) {
        if (tiers_of(i) & CU_TIER_DISK)
            return true;
        cu_sleep_ms(50);
    }
    return false;
}

/* ---- setup / teardown -------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    g.master.out_fd = g.h.out_fd = -1;
    if (cu_cluster_init(&g.cl, "mc_disk_tier") != 0)
        return -1;
    g.metrics_port = cu_free_port();
    snprintf(g.disk, sizeof(g.disk), "%s/disk", g.cl.dir);
    g.buf = malloc(VLEN);
    g.want = malloc(VLEN);
    if (!g.buf || !g.want || start_master(0) != 0 || start_holder() != 0)
        return -1;
    if (cu_open_client(&g.cl, 0, NULL, 0, 3000, &g.client) != 0)
        return -1;
    for (int i = 0; i < NKEYS; i++)
        g.gen[i] = -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    mc_client_close(g.client);
    g.client = NULL;
    cu_stop(&g.h, SIGTERM, 10000);
    cu_stop(&g.master, SIGTERM, 10000);
    cu_cluster_destroy(&g.cl);
    free(g.buf);
    free(g.want);
    return 0;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_offload_readable(void **state)
{
    (void)state;
    char key[32];
    for (int i = 0; i < NKEYS; i++) {
        key_of(i, key, sizeof(key));
        value_of(i, 0, g.want);
        int rc = put_retry(key, g.want, VLEN);
        if (rc) {
            fprintf(stderr, "put %s: %s\n", key, mc_strerror(rc));
            cu_dump_log(&g.h, "holder");
            cu_dump_log(&g.master, "master");
        }
        assert_int_equal(rc, 0);
        g.gen[i] = 0;
    }
    /* every key readable, one at a time */
    for (int i = 0; i < NKEYS; i++)
        check_key(i, false);

    /* and in batches, with the tier that served each */
    enum { B = 16 };
    char keys[B][32];
    const char *kp[B];
    void *bufs[B];
    size_t caps[B];
    int64_t res[B];
    int tiers[B];
    int mem = 0, disk = 0;
    for (int k = 0; k < B; k++) {
        bufs[k] = malloc(VLEN);
        assert_non_null(bufs[k]);
        caps[k] = VLEN;
        kp[k] = keys[k];
    }
    for (int i0 = 0; i0 < NKEYS; i0 += B) {
        int nb = NKEYS - i0 < B ? NKEYS - i0 : B;
        for (int k = 0; k < nb; k++)
            key_of(i0 + k, keys[k], sizeof(keys[k]));
        assert_int_equal(mc_batch_get_tiers(g.client, (size_t)nb, kp, bufs, caps, res, tiers), 0);
        /* a batch of 16 MiB read from disk on a loaded host can outlast the 1 s read lease
         * (check_key retries single reads the same way) */
        for (int t = 0; t < 5; t++) {
            int expired = 0;
            for (int k = 0; k < nb; k++)
                expired |= res[k] == MC_ERR_LEASE_EXPIRED;
            if (!expired)
                break;
            assert_int_equal(mc_batch_get_tiers(g.client, (size_t)nb, kp, bufs, caps, res, tiers),
                             0);
        }
        for (int k = 0; k < nb; k++) {
            assert_int_equal(res[k], VLEN);
            value_of(i0 + k, 0, g.want);
            assert_memory_equal(bufs[k], g.want, VLEN);
            if (tiers[k] == MC_REPLICA_LOCAL_DISK) {
                disk++;
                g.disk_keys[g.ndisk++] = i0 + k;
            } else {
                assert_int_equal(tiers[k], MC_REPLICA_MEMORY);
                mem++;
            }
        }
    }
    fprintf(stderr, "offload_readable: %d keys from DRAM, %d from LOCAL_DISK\n", mem, disk);
    /* 200 MiB never fit the 64 MiB segment: most keys were read from the disk */
    assert_true(disk >= NKEYS - 64);

    /* a batch of disk-only keys costs one PeerDiskRead round trip to the holder */
    int picked = 0;
    for (int j = 0; j < g.ndisk && picked < B; j++)
        if (tiers_of(g.disk_keys[j]) == CU_TIER_DISK)
            key_of(g.disk_keys[j], keys[picked++], 32);
    assert_true(picked >= 4);
    struct mc_tcp_transport_stats s0, s1;
    mc_transport_tcp_get_stats(mc_client_tcp_transport(g.client), &s0);
    assert_int_equal(mc_batch_get_tiers(g.client, (size_t)picked, kp, bufs, caps, res, tiers), 0);
    mc_transport_tcp_get_stats(mc_client_tcp_transport(g.client), &s1);
    for (int k = 0; k < picked; k++) {
        assert_int_equal(res[k], VLEN);
        assert_int_equal(tiers[k], MC_REPLICA_LOCAL_DISK);
        value_of(atoi(keys[k] + 3), 0, g.want);
        assert_memory_equal(bufs[k], g.want, VLEN);
    }
    assert_int_equal(s1.slices - s0.slices, 1);
    for (int k = 0; k < B; k++)
        free(bufs[k]);
    /* the holder's /metrics counts what it did */
    double off = holder_metric("mooncake_client_offloaded_total");
    double served = holder_metric("mooncake_client_disk_peer_reads_total");
    fprintf(stderr, "offload_readable: holder offloaded %.0f, served %.0f disk reads\n", off,
            served);
    assert_true(off >= disk);
    assert_true(served >= disk + picked);
    assert_true(holder_metric("mooncake_client_disk_records") >= disk);
}

/* The first key of offload_readable that lists only a LOCAL_DISK replica now. */
static int disk_only_key(int skip)
{
    for (int j = 0; j < g.ndisk; j++) {
        int i = g.disk_keys[j];
        if (i != skip && g.gen[i] >= 0 && tiers_of(i) == CU_TIER_DISK)
            return i;
    }
    return -1;
}

static void test_restart_within_ttl(void **state)
{
    (void)state;
    /* which keys list which tiers before the crash */
    int before[NKEYS];
    for (int i = 0; i < NKEYS; i++)
        before[i] = tiers_of(i);
    assert_int_equal(cu_stop(&g.h, SIGKILL, 5000), 128 + SIGKILL);
    assert_int_equal(start_holder(), 0); /* READY after re-registration */
    int back = 0;
    for (int i = 0; i < NKEYS; i++) {
        int t = tiers_of(i);
        /* the dead process's DRAM is not listed any more */
        assert_int_equal(t & CU_TIER_MEMORY, 0);
        if (before[i] & CU_TIER_DISK) {
            assert_int_equal(t, CU_TIER_DISK);
            check_key(i, false);
            back++;
        } else {
            check_key(i, true);
            g.gen[i] = -1; /* its only copy died with the process */
        }
    }
    fprintf(stderr, "restart_within_ttl: %d disk objects back\n", back);
    assert_true(back >= NKEYS - 64);
}

static void test_remove_reput(void **state)
{
    (void)state;
    char key[32];
    int i = disk_only_key(-1);
    assert_true(i >= 0);
    key_of(i, key, sizeof(key));
    assert_int_equal(mc_remove(g.client, key, true), 0); /* force: it was read within the lease */
    value_of(i, 1, g.want);
    assert_int_equal(put_retry(key, g.want, VLEN), 0);
    g.gen[i] = 1;
    check_key(i, false);
    assert_int_equal(cu_stop(&g.h, SIGKILL, 5000), 128 + SIGKILL);
    assert_int_equal(start_holder(), 0);
    /* generation 1 lived in the dead DRAM: the key is gone or (if it was offloaded in time)
     * has generation 1's bytes; generation 0's bytes are never served */
    check_key(i, true);
    g.gen[i] = -1;
    /* and the other disk objects are back */
    int j = disk_only_key(i);
    assert_true(j >= 0);
    check_key(j, false);
}

static void test_master_restart(void **state)
{
    (void)state;
    const char *colon = strrchr(g.cl.rpc, ':');
    int port = colon ? atoi(colon + 1) : 0;
    assert_true(port > 0);
    /* restart_after_ttl dropped everything (a Put of an existing key would keep its value):
     * 100 MiB of fresh objects, part of them offloaded */
    char key[32];
    g.ndisk = 0;
    for (int k = 0; k < NKEYS / 2; k++) {
        key_of(k, key, sizeof(key));
        value_of(k, 2, g.want);
        assert_int_equal(put_retry(key, g.want, VLEN), 0);
        g.gen[k] = 2;
        g.disk_keys[g.ndisk++] = k;
    }
    int i = -1;
    uint64_t until = cu_now_ms() + WAIT_MS;
    while ((i = disk_only_key(-1)) < 0 && cu_now_ms() < until)
        cu_sleep_ms(50);
    assert_true(i >= 0);
    int ondisk = 0;
    static bool was_on_disk[NKEYS];
    for (int k = 0; k < NKEYS; k++) {
        was_on_disk[k] = k < NKEYS / 2 && (tiers_of(k) & CU_TIER_DISK) != 0;
        ondisk += was_on_disk[k];
    }
    assert_int_equal(cu_stop(&g.master, SIGKILL, 5000), 128 + SIGKILL);
    uint64_t deadline = cu_now_ms() + START_MS;
    while (start_master(port) != 0) {
        assert_true(cu_now_ms() < deadline);
        cu_sleep_ms(200);
    }
    /* H re-mounts on its own and re-registers its records; the in-test client reconnects */
    if (!wait_disk(i)) {
        cu_dump_log(&g.h, "holder");
        fail_msg("key %d not re-registered after the master restart", i);
    }
    int back = 0;
    for (int k = 0; k < NKEYS; k++) {
        if (g.gen[k] < 0)
            continue;
        check_key(k, true);
        /* every record on disk before the kill is listed again (a key that also had a DRAM copy
         * may have that back too, the holder index; offloads after the restart add more) */
        if (was_on_disk[k] && (tiers_of(k) & CU_TIER_DISK))
            back++;
    }
    fprintf(stderr, "master_restart: %d of %d disk objects re-registered\n", back, ondisk);
    assert_int_equal(back, ondisk);
}

static void test_restart_after_ttl(void **state)
{
    (void)state;
    int i = disk_only_key(-1);
    assert_true(i >= 0);
    assert_int_equal(cu_stop(&g.h, SIGKILL, 5000), 128 + SIGKILL);
    /* the master expires H (2 s TTL) and drops its LOCAL_DISK replicas */
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    char key[32];
    key_of(i, key, sizeof(key));
    while (cu_now_ms() < deadline && mc_get(g.client, key, g.buf, VLEN) != MC_ERR_OBJECT_NOT_FOUND)
        cu_sleep_ms(100);
    assert_int_equal(mc_get(g.client, key, g.buf, VLEN), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(start_holder(), 0);
    /* re-registered records of dropped objects are refused: nothing comes back */
    for (int k = 0; k < NKEYS; k++) {
        key_of(k, key, sizeof(key));
        assert_int_equal(mc_get(g.client, key, g.buf, VLEN), MC_ERR_OBJECT_NOT_FOUND);
    }
    /* not later either (a second restart finds the refused records deleted) */
    assert_int_equal(cu_stop(&g.h, SIGKILL, 5000), 128 + SIGKILL);
    assert_int_equal(start_holder(), 0);
    key_of(i, key, sizeof(key));
    assert_int_equal(mc_get(g.client, key, g.buf, VLEN), MC_ERR_OBJECT_NOT_FOUND);
}

/* A holder in this process (mc_client with disk_path): its own disk objects are read from its
 * store directly, with no peer request; its worker offloads them from the source each task names,
 * without a QueryKey (an armed QueryKey drop never fires); idle, it sends at most 2 heartbeats a
 * second. */
static void test_in_process_holder(void **state)
{
    (void)state;
    enum { N = 40 };
    char key[32], disk2[160];
    /* H leaves (SIGTERM unmounts it at once): the in-process holder's segment is the only one */
    assert_int_equal(cu_stop(&g.h, SIGTERM, 10000), 0);
    snprintf(disk2, sizeof(disk2), "%s/disk2", g.cl.dir);
    struct mc_client *p = NULL;
    assert_int_equal(cu_open_client(&g.cl, 16u << 20, disk2, 256u << 20, 3000, &p), 0);
    mc_rpc_test_drop_reset();
    mc_rpc_test_drop_next(MC_METHOD_QUERY_KEY, MC_RPC_TEST_DROP_BEFORE_SEND);
    uint64_t fired = mc_rpc_test_drops_fired();
    for (int i = 0; i < N; i++) {
        key_of(1000 + i, key, sizeof(key));
        value_of(1000 + i, 0, g.want);
        assert_int_equal(cu_put_retry(p, key, g.want, VLEN, NULL, WAIT_MS), 0);
    }
    int disk = 0;
    struct mc_tcp_transport_stats s0, s1;
    mc_transport_tcp_get_stats(mc_client_tcp_transport(p), &s0);
    for (int i = 0; i < N; i++) {
        const char *kp[1] = {key};
        void *bufs[1] = {g.buf};
        size_t caps[1] = {VLEN};
        int64_t res[1];
        int tiers[1];
        key_of(1000 + i, key, sizeof(key));
        assert_int_equal(mc_batch_get_tiers(p, 1, kp, bufs, caps, res, tiers), 0);
        assert_int_equal(res[0], VLEN);
        value_of(1000 + i, 0, g.want);
        assert_memory_equal(g.buf, g.want, VLEN);
        disk += tiers[0] == MC_REPLICA_LOCAL_DISK;
    }
    mc_transport_tcp_get_stats(mc_client_tcp_transport(p), &s1);
    fprintf(stderr, "in_process_holder: %d of %d keys read from its own disk\n", disk, N);
    assert_true(disk >= N - 16);
    assert_int_equal(s1.slices, s0.slices); /* no peer request: its own store */
    assert_int_equal(mc_rpc_test_drops_armed(MC_METHOD_QUERY_KEY), 1); /* no QueryKey made */
    assert_int_equal(mc_rpc_test_drops_fired(), fired);
    mc_rpc_test_drop_reset();

    /* idle: the long-poll keeps the worker at <= 2 control RPCs a second besides Ping */
    struct mc_worker_stats w0, w1;
    cu_sleep_ms(300);
    mc_worker_get_stats(p->worker, &w0);
    cu_sleep_ms(3000);
    mc_worker_get_stats(p->worker, &w1);
    uint64_t calls = (w1.heartbeats - w0.heartbeats) + (w1.errors - w0.errors);
    fprintf(stderr, "in_process_holder: %llu heartbeats in 3 s idle\n", (unsigned long long)calls);
    assert_true(calls >= 1 && calls <= 6);

    /* the worker's batched delete (the master's deletes of one heartbeat): a record at or below
     * its version goes, a newer one stays, an absent key or a repeat is done already */
    struct mc_disk_tier *t = atomic_load(&p->disk);
    struct mc_disk_store *st = mc_disk_tier_store(t);
    char names[2][32];
    uint64_t vers[2];
    int found = 0;
    for (int i = 0; i < N && found < 2; i++) {
        struct mc_disk_record_info ri;
        key_of(1000 + i, names[found], sizeof(names[found]));
        if (mc_disk_store_lookup(st, names[found], (uint32_t)strlen(names[found]), &ri) == 0)
            vers[found++] = ri.version;
    }
    assert_int_equal(found, 2);
    const char *dk[4] = {names[0], names[1], "no-such-key", names[0]};
    uint64_t dv[4] = {vers[0], vers[1] - 1, 1, vers[0]};
    int drc[4] = {-1, -1, -1, -1};
    assert_int_equal(mc_disk_tier_delete_many(t, dk, dv, 4, drc), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(drc[i], 0);
    struct mc_disk_record_info ri;
    assert_int_equal(mc_disk_store_lookup(st, names[0], (uint32_t)strlen(names[0]), &ri),
                     MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_disk_store_lookup(st, names[1], (uint32_t)strlen(names[1]), &ri), 0);
    mc_client_close(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offload_readable), cmocka_unit_test(test_restart_within_ttl),
        cmocka_unit_test(test_remove_reput),     cmocka_unit_test(test_restart_after_ttl),
        cmocka_unit_test(test_master_restart),   cmocka_unit_test(test_in_process_holder),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
