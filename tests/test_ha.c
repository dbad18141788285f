/*
 * test_ha.c - the election and fencing rules of master/ha.c, in-process, against a real etcd on
 * loopback (exit 77 without etcd). Two mc_ha instances play two masters of one cluster:
 *   - one wins (on_leader with the key's create_revision as epoch), the other follows and
 *     names it; the key holds the winner's address;
 *   - fenced writes: the leader's mc_ha_put_fenced lands; the standby's is NOT_LEADER;
 *   - the leader's lease revoked behind its back (what etcd #15247 does to a live lease): it
 *     steps down at once (on_lost), its gate closes, the other wins with a higher epoch, and a
 *     fenced write made with the old epoch is refused by etcd's compare;
 *   - resign (mc_ha_stop with resign) hands over without waiting for the TTL;
 *   - bad configs are refused.
 * Bounded polls, no fixed sleeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <stdatomic.h>

#include "common/etcd.h"
#include "etcd_util.h"
#include "master/ha.h"
#include "mooncake/errors.h"

static struct eu_etcd g_etcd;
static int g_etcd_rc;

struct node {
    struct mc_ha *ha;
    _Atomic uint64_t won_epoch;
    _Atomic int lost;
};

static void on_leader(void *arg, uint64_t epoch)
{
    struct node *n = arg;
    atomic_store(&n->won_epoch, epoch);
}

static void on_lost(void *arg, const char *why)
{
    (void)why;
    struct node *n = arg;
    atomic_fetch_add(&n->lost, 1);
}

static void node_start(struct node *n, const char *cluster, const char *addr)
{
    memset(n, 0, sizeof(*n));
    struct mc_ha_config cfg = {.endpoints = g_etcd.endpoints,
                               .cluster_id = cluster,
                               .lease_ttl_s = 2,
                               .on_leader = on_leader,
                               .on_lost = on_lost,
                               .cb_arg = n};
    assert_int_equal(mc_ha_new(&cfg, &n->ha), 0);
    assert_int_equal(mc_ha_start(n->ha, addr), 0);
}

static bool wait_until(bool (*pred)(struct node *), struct node *n, int ms)
{
    uint64_t deadline = cu_now_ms() + (uint64_t)ms;
    while (cu_now_ms() < deadline) {
        if (pred(n))
            return true;
        cu_sleep_ms(10);
    }
    return pred(n);
}

static bool is_leader(struct node *n)
{
    return mc_ha_gate(n->ha) == 0;
}

static bool knows_leader(struct node *n)
{
    struct mc_ha_view v;
    mc_ha_view(n->ha, &v);
    return v.leader_addr[0] != 0;
}

static bool has_lost(struct node *n)
{
    return atomic_load(&n->lost) > 0;
}

static void test_elect_fence_step_down(void **state)
{
    (void)state;
    if (g_etcd_rc == 77)
        skip();
    assert_int_equal(g_etcd_rc, 0);
    struct node a, b;
    node_start(&a, "t_unit", "10.0.0.1:50051");
    assert_true(wait_until(is_leader, &a, 10000));
    uint64_t e1 = atomic_load(&a.won_epoch);
    assert_true(e1 > 0);
    node_start(&b, "t_unit", "10.0.0.2:50051");
    assert_true(wait_until(knows_leader, &b, 10000));
    struct mc_ha_view v;
    mc_ha_view(b.ha, &v);
    assert_false(v.leader);
    assert_string_equal(v.leader_addr, "10.0.0.1:50051");
    assert_int_equal(v.epoch, e1);
    assert_int_equal(mc_ha_gate(b.ha), MC_ERR_NOT_LEADER);
    assert_int_equal(mc_ha_gate(NULL), 0); /* no HA: always open */

    /* the key holds a's address; its create_revision is the epoch */
    struct mc_etcd_config ec = {.endpoints = g_etcd.endpoints};
    struct mc_etcd *e;
    assert_int_equal(mc_etcd_new(&ec, &e), 0);
    struct mc_etcd_kv kv;
    bool found;
    assert_int_equal(mc_etcd_get(e, "/mooncake-c/t_unit/leader", &kv, &found, NULL), 0);
    assert_true(found);
    assert_string_equal(kv.value, "10.0.0.1:50051");
    assert_int_equal(kv.create_revision, e1);
    uint64_t lease = kv.lease;
    mc_etcd_kv_clear(&kv);

    /* fenced writes */
    assert_int_equal(mc_ha_put_fenced(a.ha, "/mooncake-c/t_unit/fence/x", "1", 1), 0);
    assert_int_equal(mc_ha_put_fenced(b.ha, "/mooncake-c/t_unit/fence/x", "2", 1),
                     MC_ERR_NOT_LEADER);

    /* the lease revoked behind a's back: a steps down at once, b takes over */
    assert_int_equal(mc_etcd_lease_revoke(e, lease), 0);
    assert_true(wait_until(has_lost, &a, 5000));
    assert_int_equal(mc_ha_gate(a.ha), MC_ERR_NOT_LEADER);
    assert_true(wait_until(is_leader, &b, 10000));
    uint64_t e2 = atomic_load(&b.won_epoch);
    assert_true(e2 > e1);
    /* a write guarded by the old epoch is refused by etcd itself */
    bool ok = true;
    assert_int_equal(mc_etcd_put_guarded(e, "/mooncake-c/t_unit/leader", e1,
                                         "/mooncake-c/t_unit/fence/x", "3", 1, &ok),
                     0);
    assert_false(ok);
    assert_int_equal(mc_etcd_get(e, "/mooncake-c/t_unit/fence/x", &kv, &found, NULL), 0);
    assert_string_equal(kv.value, "1");
    mc_etcd_kv_clear(&kv);
    assert_int_equal(mc_ha_put_fenced(a.ha, "/mooncake-c/t_unit/fence/x", "4", 1),
                     MC_ERR_NOT_LEADER);
    mc_ha_free(a.ha);

    /* resign: a new node follows b, b resigns, the new one leads long before a TTL */
    struct node c;
    node_start(&c, "t_unit", "10.0.0.3:50051");
    assert_true(wait_until(knows_leader, &c, 10000));
    uint64_t t0 = cu_now_ms();
    mc_ha_stop(b.ha, true);
    assert_true(wait_until(is_leader, &c, 10000));
    fprintf(stderr, "resign hand-over: %llu ms\n", (unsigned long long)(cu_now_ms() - t0));
    assert_true(atomic_load(&c.won_epoch) > e2);
    assert_int_equal(atomic_load(&b.lost), 0); /* resigning is not losing */
    mc_ha_free(b.ha);
    mc_ha_free(c.ha);
    mc_etcd_free(e);
}

static void test_bad_config(void **state)
{
    (void)state;
    struct mc_ha *ha = NULL;
    struct mc_ha_config cfg = {.endpoints = "127.0.0.1:1", .cluster_id = "a/b"};
    assert_int_equal(mc_ha_new(&cfg, &ha), MC_ERR_INVALID_PARAMS);
    cfg.cluster_id = "";
    assert_int_equal(mc_ha_new(&cfg, &ha), MC_ERR_INVALID_PARAMS);
    cfg.cluster_id = "ok";
    cfg.endpoints = "";
    assert_int_equal(mc_ha_new(&cfg, &ha), MC_ERR_INVALID_PARAMS);
    cfg.endpoints = "127.0.0.1:1";
    cfg.lease_ttl_s = 61;
    assert_int_equal(mc_ha_new(&cfg, &ha), MC_ERR_INVALID_PARAMS);
    cfg.lease_ttl_s = 0;
    assert_int_equal(mc_ha_new(&cfg, &ha), 0);
    assert_int_equal(mc_ha_start(ha, "no-port"), MC_ERR_INVALID_PARAMS);
    mc_ha_free(ha);
    char key[64];
    assert_int_equal(mc_ha_leader_key("c1", key, sizeof(key)), 0);
    assert_string_equal(key, "/mooncake-c/c1/leader");
}

static int setup(void **state)
{
    (void)state;
    g_etcd_rc = eu_start(&g_etcd, 1, 20000);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    eu_stop(&g_etcd);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_elect_fence_step_down),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    if (failed == 0 && g_etcd_rc == 77)
        return 77;
    return failed;
}
