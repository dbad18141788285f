/*
 * test_ha_fence.c - the delete rule's fences kept in etcd under HA (master/ha_fence.c), in-process
 * against a real etcd on loopback (exit 77 without etcd). Two mc_ha instances with their own
 * fence tables play two masters:
 *   - a fence raised on leader A is written to etcd (one record per holder, the version in
 *     decimal) and leaves A's journal;
 *   - A resigns; B takes over and has loaded the fence before its gate opened: the holder's
 *     copies at or below the fence version are void on B too (what refuses their
 *     re-registration), newer ones are not;
 *   - a fence counts as durable (the Removes waiting on it may complete) once stored;
 *   - a fence write guarded by A's old epoch is refused (NOT_LEADER), stays pending and not
 *     durable;
 *   - a record that does not parse is skipped, not loaded.
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

#include "cluster_util.h"
#include "common/etcd.h"
#include "etcd_util.h"
#include "master/fence.h"
#include "master/ha.h"
#include "master/ha_fence.h"
#include "mooncake/errors.h"

static struct eu_etcd g_etcd;
static int g_etcd_rc;

struct node {
    struct mc_ha *ha;
    struct mc_fences *fences;
    _Atomic uint64_t won_epoch;
    _Atomic size_t fences_at_win; /* what the fence table held when on_leader ran */
};

static void on_leader(void *arg, uint64_t epoch)
{
    struct node *n = arg;
    atomic_store(&n->fences_at_win, mc_fences_count(n->fences));
    atomic_store(&n->won_epoch, epoch);
}

static void on_lost(void *arg, const char *why)
{
    (void)arg;
    (void)why;
}

static void node_start(struct node *n, const char *cluster, const char *addr)
{
    memset(n, 0, sizeof(*n));
    n->fences = mc_fences_new();
    assert_non_null(n->fences);
    struct mc_ha_config cfg = {.endpoints = g_etcd.endpoints,
                               .cluster_id = cluster,
                               .lease_ttl_s = 2,
                               .on_leader = on_leader,
                               .on_lost = on_lost,
                               .cb_arg = n};
    assert_int_equal(mc_ha_new(&cfg, &n->ha), 0);
    mc_ha_set_fences(n->ha, n->fences);
    assert_int_equal(mc_ha_start(n->ha, addr), 0);
}

static void node_free(struct node *n)
{
    mc_ha_free(n->ha);
    mc_fences_free(n->fences);
}

static bool wait_leader(struct node *n, int ms)
{
    uint64_t deadline = cu_now_ms() + (uint64_t)ms;
    while (cu_now_ms() < deadline && mc_ha_gate(n->ha) != 0)
        cu_sleep_ms(10);
    return mc_ha_gate(n->ha) == 0;
}

/* Until holder's fence at version is stored in etcd (drained and its txn answered). */
static bool wait_durable(struct node *n, struct mc_id holder, uint64_t version, int ms)
{
    uint64_t deadline = cu_now_ms() + (uint64_t)ms;
    while (cu_now_ms() < deadline && !mc_fences_durable(n->fences, holder, version))
        cu_sleep_ms(10);
    return mc_fences_durable(n->fences, holder, version) && mc_fences_pending(n->fences) == 0;
}

static void test_fences_survive_failover(void **state)
{
    (void)state;
    if (g_etcd_rc == 77)
        skip();
    assert_int_equal(g_etcd_rc, 0);
    struct mc_etcd_config ec = {.endpoints = g_etcd.endpoints};
    struct mc_etcd *e;
    assert_int_equal(mc_etcd_new(&ec, &e), 0);
    /* a record that is not a fence: skipped by the load */
    assert_int_equal(mc_etcd_put(e, "/mooncake-c/t_fence/fence/not-an-id", "7", 1, 0), 0);

    struct node a, b;
    node_start(&a, "t_fence", "10.0.0.1:50051");
    assert_true(wait_leader(&a, 10000));
    uint64_t e1 = atomic_load(&a.won_epoch);
    assert_int_equal(atomic_load(&a.fences_at_win), 0);
    node_start(&b, "t_fence", "10.0.0.2:50051");

    struct mc_id holder = mc_id_random(), other = mc_id_random();
    assert_int_equal(mc_fences_raise(a.fences, holder, 1000), 0);
    assert_int_equal(mc_fences_raise(a.fences, holder, 1500), 0); /* rises: one record */
    assert_false(mc_fences_durable(a.fences, holder, 1500));      /* its Removes wait for etcd */
    assert_true(wait_durable(&a, holder, 1500, 10000));
    char key[200];
    assert_int_equal(mc_ha_fence_key("t_fence", holder, key, sizeof(key)), 0);
    struct mc_etcd_kv kv;
    bool found = false;
    assert_int_equal(mc_etcd_get(e, key, &kv, &found, NULL), 0);
    assert_true(found);
    assert_int_equal(kv.value_len, 4);
    assert_memory_equal(kv.value, "1500", 4);
    mc_etcd_kv_clear(&kv);
    /* a lower raise changes nothing, so nothing is pending */
    assert_int_equal(mc_fences_raise(a.fences, holder, 900), 0);
    assert_int_equal(mc_fences_pending(a.fences), 0);

    /* a resigns: b takes over with the fence loaded before it serves */
    mc_ha_stop(a.ha, true);
    assert_true(wait_leader(&b, 10000));
    uint64_t e2 = atomic_load(&b.won_epoch);
    assert_true(e2 > e1);
    assert_int_equal(atomic_load(&b.fences_at_win), 1);
    assert_int_equal(mc_fences_get(b.fences, holder), 1500);
    assert_true(mc_fences_voids(b.fences, holder, 1500)); /* the removed key's stale copy */
    assert_true(mc_fences_voids(b.fences, holder, 1));
    assert_false(mc_fences_voids(b.fences, holder, 1501)); /* written after the fence */
    assert_false(mc_fences_voids(b.fences, other, 1));
    assert_int_equal(mc_fences_pending(b.fences), 0); /* loaded, not journalled again */

    /* a deposed leader's fence write is refused by etcd and stays pending */
    assert_int_equal(mc_fences_raise(a.fences, other, 42), 0);
    assert_int_equal(mc_ha_fences_sync(e, "/mooncake-c/t_fence/leader", e1, "t_fence", a.fences),
                     MC_ERR_NOT_LEADER);
    assert_int_equal(mc_fences_pending(a.fences), 1);
    assert_false(mc_fences_durable(a.fences, other, 42)); /* its Removes keep waiting */
    assert_int_equal(mc_ha_fence_key("t_fence", other, key, sizeof(key)), 0);
    assert_int_equal(mc_etcd_get(e, key, &kv, &found, NULL), 0);
    assert_false(found);

    /* b's own fence reaches etcd under its epoch */
    assert_int_equal(mc_fences_raise(b.fences, other, 77), 0);
    assert_true(wait_durable(&b, other, 77, 10000));
    assert_int_equal(mc_etcd_get(e, key, &kv, &found, NULL), 0);
    assert_true(found);
    assert_memory_equal(kv.value, "77", 2);
    mc_etcd_kv_clear(&kv);

    node_free(&a);
    node_free(&b);
    mc_etcd_free(e);
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
        cmocka_unit_test(test_fences_survive_failover),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    if (failed == 0 && g_etcd_rc == 77)
        return 77;
    return failed;
}
