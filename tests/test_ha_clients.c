/*
 * test_ha_clients.c - clients follow the leader of a high-availability cluster: one etcd
 * member, two mooncake_master processes (--enable_ha --enable_offload, lease TTL 2 s), a
 * mooncake_client holder daemon with a LOCAL_DISK store and an in-test library client W without
 * DRAM, both given the cluster as --master=etcd://127.0.0.1:P/t_hac.
 *
 *   W puts N objects (they land in the holder's DRAM and are offloaded to its disk); once every
 *   one has its LOCAL_DISK copy, the leader is SIGKILLed. The standby takes over (higher epoch),
 *   the holder and W find it through etcd, the holder re-mounts and re-registers its disk
 *   objects, and every object reads back through W with its exact bytes; a new Put succeeds.
 *   Only the disk copies are checked here; test_ha_dram checks DRAM copies.
 *   `mooncake_cli --master=etcd://...` reads one object through the new leader too.
 * Deadlines are generous liveness bounds. Exit 77 when etcd is not installed.
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

#include "client/master_conn.h"
#include "client/master_follow.h"
#include "cluster_data.h"
#include "ha_fixture.h"
#include "mooncake/client.h"
#include "tier_query.h"

#define N 8
#define VLEN (64u * 1024u)
#define WAIT_MS 30000

static struct hx g;
static const char *const g_master_flags[] = {"--enable_offload", NULL};

static void value_of(int i, uint8_t *buf)
{
    cu_fill(buf, VLEN, 0x5eed0000u + (uint64_t)i);
}

static int setup(void **state)
{
    (void)state;
    return hx_setup(&g, "mc-hac", "t_hac");
}

static int teardown(void **state)
{
    (void)state;
    hx_teardown(&g);
    return 0;
}

static void test_sigkill_leader(void **state)
{
    (void)state;
    if (g.etcd_rc == 77)
        skip();
    assert_int_equal(g.etcd_rc, 0);
    uint64_t e1 =
        hx_start_pair(&g, g_master_flags, WAIT_MS); /* the daemons and W name the cluster */

    char disk[300], ep[256];
    snprintf(disk, sizeof(disk), "--disk_path=%s/disk", g.c.dir);
    const char *hflags[] = {"--segment_size=16MiB", disk, "--disk_capacity=256MiB",
                            "--master_wait=20s", NULL};
    assert_int_equal(cu_start_daemon(&g.c, &g.holder, "holder", hflags, ep, sizeof(ep), 20000), 0);
    struct mc_client *w = NULL;
    assert_int_equal(cu_open_client(&g.c, 0, NULL, 0, 0, &w), 0);

    uint8_t *want = malloc(VLEN), *buf = malloc(VLEN);
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "ha-%d", i);
        value_of(i, want);
        assert_int_equal(cu_put_retry(w, key, want, VLEN, NULL, WAIT_MS), 0);
    }
    /* every object has its disk copy before the leader dies */
    struct mc_rpc_client *adm = hx_admin(g.rpc_a);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "ha-%d", i);
        uint64_t deadline = cu_now_ms() + WAIT_MS, v;
        int mem = 0, dsk = 0;
        while (!tq_replicas(adm, key, &mem, &dsk, &v) || dsk < 1) {
            if (cu_now_ms() > deadline)
                fail_msg("%s got no LOCAL_DISK copy", key);
            cu_sleep_ms(50);
        }
    }
    mc_rpc_client_free(adm);

    assert_int_equal(cu_stop(&g.ma, SIGKILL, 5000), 128 + SIGKILL);
    uint64_t e2 = hx_wait_leads(g.rpc_b, WAIT_MS);
    assert_true(e2 > e1);

    /* every object reads back, exact bytes, through the new leader (retryable errors while the
     * holder re-registers) */
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "ha-%d", i);
        value_of(i, want);
        uint64_t deadline = cu_now_ms() + WAIT_MS;
        int64_t r;
        while ((r = cu_read(w, key, buf, VLEN)) < 0 && cu_now_ms() < deadline)
            cu_sleep_ms(50);
        cu_assert_value(key, r, buf, want, VLEN);
    }
    value_of(100, want);
    assert_int_equal(cu_put_retry(w, "ha-new", want, VLEN, NULL, WAIT_MS), 0);
    int64_t r = cu_read(w, "ha-new", buf, VLEN);
    cu_assert_value("ha-new", r, buf, want, VLEN);

    /* the CLI finds the leader through etcd too */
    char mopt[320];
    snprintf(mopt, sizeof(mopt), "--master=%s", g.url);
    const char *argv[] = {g.c.cli_bin, mopt, "exist", "ha-3", NULL};
    struct cu_run run;
    cu_run(&run, g.c.dir, argv, NULL, 10000);
    if (run.status != 0)
        fprintf(stderr, "cli: %s %s\n", run.out, run.err);
    assert_int_equal(run.status, 0);
    cu_run_free(&run);

    mc_client_close(w);
    free(want);
    free(buf);
}

/* No etcd needed: etcd:// parsing, and the epoch floor of a link that follows a leader. */
static void test_link_rules(void **state)
{
    (void)state;
    struct mc_master_follow *f = NULL;
    assert_true(mc_master_follow_is_url("etcd://h:2379"));
    assert_false(mc_master_follow_is_url("h:2379"));
    assert_int_equal(mc_master_follow_new("etcd://", &f), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_follow_new("etcd://h:1/bad/id", &f), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_follow_new("etcd://h:x", &f), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_follow_new("etcd://h1:1;h2:2,h3:3/ok.id", &f), 0);
    mc_master_follow_free(f);

    /* a plain address: no epoch rule until a master said NOT_LEADER */
    struct mc_rpc_client_config base;
    mc_rpc_client_config_init(&base);
    base.connect_timeout_ms = 200;
    struct mc_master_link *l = NULL;
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", cu_free_port()); /* nobody there */
    assert_int_equal(mc_master_link_new(addr, &base, &l), 0);
    assert_string_equal(mc_master_link_addr(l), addr);
    assert_false(mc_master_link_ha(l));
    assert_int_equal(mc_master_link_check_epoch(l, 10), 0);
    assert_int_equal(mc_master_link_check_epoch(l, 5), 0);
    /* NOT_LEADER seen: the link follows (nobody answers here: it stays) and the floor holds */
    assert_int_equal(mc_master_link_follow(l, true), MC_ERR_RPC_FAIL);
    assert_true(mc_master_link_ha(l));
    assert_int_equal(mc_master_link_check_epoch(l, 10), 0);
    assert_int_equal(mc_master_link_check_epoch(l, 5), MC_ERR_NOT_LEADER);
    assert_int_equal(mc_master_link_check_epoch(l, 10), 0);
    assert_int_equal(mc_master_link_check_epoch(l, 11), 0);
    assert_int_equal(mc_master_link_check_epoch(l, 10), MC_ERR_NOT_LEADER);
    mc_master_link_free(l);
}

/* The leader key's watch: a client whose ping is a minute apart moves to a new leader at once
 * (a SIGTERM hand-over), not at its next failed call or ping. Runs after test_sigkill_leader
 * (B leads). */
static void test_watch_moves_client(void **state)
{
    (void)state;
    if (g.etcd_rc == 77)
        skip();
    assert_int_equal(g.etcd_rc, 0);
    assert_true(g.url[0]);
    hx_start_master(&g, &g.ma, g.rpc_a, g_master_flags); /* stands by: B leads */
    uint64_t eb = hx_wait_leads(g.rpc_b, WAIT_MS);
    struct mc_master_conn_config cfg = {
        .address = g.url, .client_id = mc_id_random(), .ping_interval_ms = 60000};
    struct mc_master_conn *mc = NULL;
    assert_int_equal(mc_master_conn_open(&cfg, &mc), 0);
    assert_int_equal(mc_master_conn_start(mc), 0);
    struct mc_master_conn_stats st;
    mc_master_conn_get_stats(mc, &st);
    assert_int_equal(st.reconnects, 0);
    assert_int_equal(cu_stop(&g.mb, SIGTERM, 10000), 0);
    uint64_t ea = hx_wait_leads(g.rpc_a, WAIT_MS);
    assert_true(ea > eb);
    /* a liveness bound far below the ping interval */
    uint64_t deadline = cu_now_ms() + 10000;
    do {
        mc_master_conn_get_stats(mc, &st);
        if (st.reconnects >= 1)
            break;
        cu_sleep_ms(20);
    } while (cu_now_ms() < deadline);
    assert_true(st.reconnects >= 1);
    mc_master_conn_close(mc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_link_rules),
        cmocka_unit_test(test_sigkill_leader),
        cmocka_unit_test(test_watch_moves_client),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    if (failed == 0 && g.etcd_rc == 77)
        return 77;
    return failed;
}
