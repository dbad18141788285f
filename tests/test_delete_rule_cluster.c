/*
 * test_delete_rule_cluster.c - an acknowledged Remove stays removed across a master crash (the
 * delete rule, DESIGN.md §7; README "Reliability"), with the real binaries on loopback: a
 * mooncake_master with --enable_offload alone (an offload task at every PutEnd) and a
 * mooncake_client holder H with a --disk_path. An in-test client W with no DRAM puts, so every
 * object lands in H's segment and H offloads it to its disk.
 *
 *   1. 300 keys are Put and offloaded (each listed on LOCAL_DISK).
 *   2. Keys 0..49 are removed, then Put again with new bytes, and offloaded again.
 *   3. Keys 50..199 are removed, each Remove returning 0; the master is SIGKILLed right after
 *      the last one returns, and restarted on its port.
 *   4. H re-registers its disk records with the new master. Then: none of keys 50..199 comes
 *      back; keys 0..49 read their new bytes; keys 200..299 read their old bytes.
 *
 * Then the one residual window (README "Reliability"), with H dead (kill -9) when a key is
 * removed: the Remove still returns 0, once H is fenced after --holder_delete_timeout_ms;
 *   5. H restarted while the master lives: its record of the key is refused (fenced) and
 *      deleted, the key stays removed;
 *   6. the master killed and restarted before H is back (no HA: the fence was in its memory):
 *      H's record brings the removed key back, with its old bytes, as README states.
 *
 * Values carry their key and generation (the fill's seed), so a resurrected old value is told
 * from the new one. Every process dies with the test and is stopped in teardown; the temporary
 * directory is removed.
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

#include "cluster_data.h"
#include "cluster_util.h"
#include "common/rpc_client.h"
#include "mooncake/client.h"
#include "tier_query.h"

#define VLEN (16u * 1024u)
#define NKEYS 300
#define NREPUT 50    /* keys 0..49: removed, then Put again before the crash */
#define NREMOVED 150 /* keys 50..199: removed right before the crash */
#define START_MS 20000
#define WAIT_MS 20000

static struct {
    struct cu_cluster cl;
    char disk[128];
    int port;
    struct cu_proc master, h;
    char ep[256];
    struct mc_client *w;
    struct mc_rpc_client *adm;
    uint8_t *buf, *want;
} g;

static void key_of(int k, char *key, size_t cap)
{
    snprintf(key, cap, "dr-%d", k);
}

/* The bytes of key k at generation gen (1: first Put, 2: the Put after its Remove). */
static void value_of(int k, int gen, uint8_t *buf)
{
    cu_fill(buf, VLEN, 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1) + (uint64_t)gen * 0x1000193ull);
}

static int start_master(int port)
{
    static const char *const flags[] = {"--client_ttl=10", "--default_kv_lease_ttl=200",
                                        "--enable_offload", "--log_level=warn", NULL};
    return cu_start_master(&g.cl, &g.master, port, flags, START_MS);
}

static int start_holder(void)
{
    const struct cu_holder_opts o = {.segment_size = "64MiB", .log_level = "warn"};
    return cu_start_holder(&g.cl, &g.h, g.disk, &o, g.ep, sizeof(g.ep), START_MS);
}

static int admin_open(void)
{
    mc_rpc_client_free(g.adm);
    return cu_admin_open(g.cl.rpc, 5000, &g.adm);
}

/* The version of key k when the master lists a COMPLETE LOCAL_DISK replica of it, else 0. */
static uint64_t disk_version(int k)
{
    char key[32];
    key_of(k, key, sizeof(key));
    int mem, disk;
    uint64_t v;
    return tq_replicas(g.adm, key, &mem, &disk, &v) && disk > 0 ? v : 0;
}

/* Until keys [from, to) are all on LOCAL_DISK (at a version above min[k] when min is given). */
static void wait_on_disk(int from, int to, const uint64_t *min, const char *what)
{
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    for (int k = from; k < to; k++) {
        uint64_t v;
        while ((v = disk_version(k)) == 0 || (min && v <= min[k])) {
            if (cu_now_ms() >= deadline)
                fail_msg("%s: key %d not on LOCAL_DISK (version %llu)", what, k,
                         (unsigned long long)v);
            cu_sleep_ms(20);
        }
    }
}

static void put_key(int k, int gen)
{
    char key[32];
    key_of(k, key, sizeof(key));
    value_of(k, gen, g.want);
    assert_int_equal(cu_put_retry(g.w, key, g.want, VLEN, NULL, 10000), 0);
}

static void check_value(int k, int gen)
{
    char key[32];
    key_of(k, key, sizeof(key));
    int64_t r = cu_read(g.w, key, g.buf, VLEN);
    for (int t = 0; r < 0 && r != MC_ERR_OBJECT_NOT_FOUND && t < 40; t++) {
        cu_sleep_ms(50); /* a reconnect to the new master */
        r = cu_read(g.w, key, g.buf, VLEN);
    }
    value_of(k, gen, g.want);
    cu_assert_value(key, r, g.buf, g.want, VLEN);
}

static void test_removed_keys_stay_removed_across_master_crash(void **state)
{
    (void)state;
    uint64_t v1[NKEYS];
    /* 1. 300 keys on H's disk */
    for (int k = 0; k < NKEYS; k++)
        put_key(k, 1);
    wait_on_disk(0, NKEYS, NULL, "first offload");
    for (int k = 0; k < NKEYS; k++)
        v1[k] = disk_version(k);
    /* 2. removed, then Put again and offloaded again */
    char key[32];
    for (int k = 0; k < NREPUT; k++) {
        key_of(k, key, sizeof(key));
        assert_int_equal(mc_remove(g.w, key, false), 0);
        put_key(k, 2);
    }
    wait_on_disk(0, NREPUT, v1, "offload of the new versions");
    /* 3. removed, the master killed right after the last Remove returned */
    struct timespec ts0, ts1;
    clock_gettime(CLOCK_MONOTONIC, &ts0);
    for (int k = NREPUT; k < NREPUT + NREMOVED; k++) {
        key_of(k, key, sizeof(key));
        assert_int_equal(mc_remove(g.w, key, false), 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &ts1);
    double ms = (double)(ts1.tv_sec - ts0.tv_sec) * 1e3 + (double)(ts1.tv_nsec - ts0.tv_nsec) / 1e6;
    fprintf(stderr, "%d Removes of offloaded keys (a real holder): %.3f ms each on average\n",
            NREMOVED, ms / NREMOVED);
    assert_int_equal(cu_stop(&g.master, SIGKILL, 5000), 128 + SIGKILL);
    uint64_t deadline = cu_now_ms() + START_MS;
    while (start_master(g.port) != 0) {
        if (cu_now_ms() >= deadline)
            fail_msg("the master did not restart on port %d", g.port);
        cu_sleep_ms(200);
    }
    assert_int_equal(admin_open(), 0);
    /* 4. H re-registers: everything it still has is listed again */
    wait_on_disk(0, NREPUT, v1, "re-registration (new versions)");
    wait_on_disk(NREPUT + NREMOVED, NKEYS, NULL, "re-registration (kept keys)");
    cu_sleep_ms(300); /* the rest of its records, if it had any more */
    int back = 0;
    for (int k = NREPUT; k < NREPUT + NREMOVED; k++) {
        key_of(k, key, sizeof(key));
        int64_t r = cu_read(g.w, key, g.buf, VLEN);
        if (r != MC_ERR_OBJECT_NOT_FOUND) {
            back++;
            fprintf(stderr, "removed key %s came back: read %lld\n", key, (long long)r);
        }
    }
    fprintf(stderr, "%d of %d removed keys came back after the master crash\n", back, NREMOVED);
    assert_int_equal(back, 0);
    for (int k = 0; k < NREPUT; k++)
        check_value(k, 2);
    for (int k = NREPUT + NREMOVED; k < NKEYS; k++)
        check_value(k, 1);
}

/* Puts key at gen and waits until it is on LOCAL_DISK. */
static void put_on_disk(int k, int gen)
{
    put_key(k, gen);
    wait_on_disk(k, k + 1, NULL, "offload");
}

/* Removes key k while H is dead: returns 0 once H is fenced (after the delete timeout). */
static void remove_with_holder_dead(int k)
{
    assert_int_equal(cu_stop(&g.h, SIGKILL, 5000), 128 + SIGKILL);
    char key[32];
    key_of(k, key, sizeof(key));
    uint64_t t0 = cu_now_ms();
    assert_int_equal(mc_remove(g.w, key, false), 0);
    uint64_t took = cu_now_ms() - t0;
    fprintf(stderr, "Remove with the holder dead took %llu ms\n", (unsigned long long)took);
    assert_true(took >= 1500);       /* it waited for the holder ... */
    assert_true(took < 2000 + 2500); /* ... until the timeout, then the fence */
}

static void test_unreachable_holder_window(void **state)
{
    (void)state;
    char key[32];
    /* 5. the master stays up: the fence holds */
    int ka = NKEYS, kb = NKEYS + 1, kp = NKEYS + 2;
    put_on_disk(ka, 1);
    remove_with_holder_dead(ka);
    assert_int_equal(start_holder(), 0); /* READY after its re-registration */
    put_on_disk(kp, 1);                  /* H takes work again */
    key_of(ka, key, sizeof(key));
    assert_int_equal(cu_read(g.w, key, g.buf, VLEN), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(disk_version(ka), 0);
    /* 6. the master restarts before H is back: the window */
    put_on_disk(kb, 1);
    remove_with_holder_dead(kb);
    assert_int_equal(cu_stop(&g.master, SIGKILL, 5000), 128 + SIGKILL);
    uint64_t deadline = cu_now_ms() + START_MS;
    while (start_master(g.port) != 0) {
        if (cu_now_ms() >= deadline)
            fail_msg("the master did not restart on port %d", g.port);
        cu_sleep_ms(200);
    }
    assert_int_equal(admin_open(), 0);
    assert_int_equal(start_holder(), 0);
    wait_on_disk(kb, kb + 1, NULL, "the window: the removed key re-registered");
    check_value(kb, 1); /* its old bytes, never other bytes */
    fprintf(stderr, "the residual window: removed key %d came back after the master restart\n", kb);
}

static int group_setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    g.master.out_fd = g.h.out_fd = -1;
    if (cu_cluster_init(&g.cl, "mc_drc") != 0)
        return -1;
    snprintf(g.disk, sizeof(g.disk), "%s/disk", g.cl.dir);
    g.buf = malloc(VLEN);
    g.want = malloc(VLEN);
    if (!g.buf || !g.want || start_master(0) != 0 || start_holder() != 0)
        return -1;
    const char *colon = strrchr(g.cl.rpc, ':');
    g.port = colon ? atoi(colon + 1) : 0;
    if (g.port <= 0 || admin_open() != 0)
        return -1;
    return cu_open_client(&g.cl, 0, NULL, 0, 3000, &g.w) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    mc_client_close(g.w);
    mc_rpc_client_free(g.adm);
    cu_stop(&g.h, SIGTERM, 10000);
    cu_stop(&g.master, SIGTERM, 10000);
    cu_cluster_destroy(&g.cl);
    free(g.buf);
    free(g.want);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_removed_keys_stay_removed_across_master_crash),
        cmocka_unit_test(test_unreachable_holder_window),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
