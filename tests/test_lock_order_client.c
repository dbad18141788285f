/*
 * test_lock_order_client.c - the client's locks under the lock-order checker
 * (common/lock_order.h) and the `_locked` assertions of the LOCAL_DISK store.
 *
 * A wrong order among the disk store's locks (the ring pool or the fault hook taken before the
 * store's mutex) aborts with one stderr line naming both locks; so does a `_locked` function
 * called without the store's mutex (MC_ASSERT names the function). Each such sequence runs in
 * a forked child whose stderr goes to a pipe. A real store driven through append, read, pin,
 * remove and capacity eviction leaves the thread holding nothing after every call and bytes
 * that read back as written.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "abort_fixture.h"
#include "client/disk_internal.h"
#include "client/peer_server.h"
#include "common/lock_order.h"
#include "disk_test_util.h"

#ifndef MC_LOCK_ORDER_CHECK
#error "test builds define MC_LOCK_ORDER_CHECK (top CMakeLists.txt)"
#endif

/* The store the child sequences use (opened by the parent before the fork). */
static struct mc_disk_store *g_store;
/* The peer server of the peer-table sequences (made, not started, before the fork). */
static struct mc_peer_server *g_ps;
static const struct mc_id PS_SEG = {7, 9};

static void expect_abort(af_seq_fn fn, const char *a, const char *b)
{
    af_expect_abort(fn, a, b, NULL);
}

static void store_under_pool(void)
{
    disk_pool_lock(g_store);
    disk_lock(g_store);
}
static void store_under_faults(void)
{
    disk_faults_lock(&g_store->faults);
    disk_lock(g_store);
}
static void pool_under_faults(void)
{
    disk_lock(g_store);
    disk_faults_lock(&g_store->faults);
    disk_pool_lock(g_store);
}
static void store_twice(void)
{
    disk_lock(g_store);
    disk_lock(g_store);
}
static void store_under_tier(void)
{
    mc_lo_acquire(MC_LO_DISK_TIER, 0);
    disk_lock(g_store);
}
static void master_shard_under_store(void)
{
    disk_lock(g_store);
    mc_lo_acquire(MC_LO_SHARD, 0);
}
/* The peer server's segment table is a leaf: nothing is taken under it. */
static void store_under_peer_segs(void)
{
    mc_lo_acquire(MC_LO_PEER_SEGS, 0);
    disk_lock(g_store);
}
/* A peer-server lookup made while the thread holds a peer segment table already: the server's
 * own lock goes through the checker, so taking it again aborts. */
static void peer_lookup_under_peer_segs(void)
{
    uint8_t *p;
    mc_lo_acquire(MC_LO_PEER_SEGS, 1000);
    (void)mc_peer_server_resolve(g_ps, PS_SEG, 1, 0, 1, &p);
}
/* The master link, the worker and its promotion pool are leaves. */
static void store_under_link(void)
{
    mc_lo_acquire(MC_LO_MASTER_LINK, 0);
    disk_lock(g_store);
}
static void link_under_worker(void)
{
    mc_lo_acquire(MC_LO_WORKER, 0);
    mc_lo_acquire(MC_LO_MASTER_LINK, 0);
}
static void worker_under_pool(void)
{
    mc_lo_acquire(MC_LO_PROMO_POOL, 0);
    mc_lo_acquire(MC_LO_WORKER, 0);
}
/* A `_locked` function called without the store's mutex. */
static void locked_fn_unlocked(void)
{
    disk_spares_drop_locked(g_store);
}
/* The same call with the mutex held (the harness's exit 0 shows the abort above is the
 * assertion's, not the call's). */
static void locked_fn_locked(void)
{
    disk_lock(g_store);
    disk_spares_drop_locked(g_store);
    (void)disk_capacity_locked(g_store);
    disk_unlock(g_store);
    if (mc_lo_depth() != 0)
        _exit(3);
}
/* The documented order, whole. */
static void legal_order(void)
{
    disk_lock(g_store);
    disk_pool_lock(g_store);
    disk_faults_lock(&g_store->faults);
    mc_lo_acquire(MC_LO_TCP_PEERS, 0);
    if (!mc_lo_holds(MC_LO_DISK_STORE, g_store->lo_idx, false) ||
        mc_lo_holds(MC_LO_DISK_STORE, g_store->lo_idx + 1, false))
        _exit(4);
    mc_lo_release(MC_LO_TCP_PEERS, 0);
    disk_unlock(g_store);
    disk_faults_unlock(&g_store->faults);
    disk_pool_unlock(g_store);
    if (mc_lo_depth() != 0 || mc_lo_holds(MC_LO_DISK_STORE, g_store->lo_idx, false))
        _exit(3);
}

static int store_setup(void **state)
{
    if (setup(state))
        return -1;
    struct env *e = *state;
    e->s = open_store(e->dir, 4 * MIB, 1 * MIB, NULL, NULL);
    g_store = e->s;
    return e->s ? 0 : -1;
}

static void test_wrong_order_aborts(void **state)
{
    (void)state;
    expect_abort(store_under_pool, "acquiring disk store", "holding disk ring pool");
    expect_abort(store_under_faults, "acquiring disk store", "holding disk fault hook");
    expect_abort(pool_under_faults, "acquiring disk ring pool", "holding disk fault hook");
    expect_abort(store_twice, "acquiring disk store", "holding disk store");
    expect_abort(store_under_tier, "acquiring disk store", "holding disk tier");
    expect_abort(master_shard_under_store, "acquiring shard[0]", "holding disk store");
    expect_abort(store_under_link, "acquiring disk store", "holding master link");
    expect_abort(link_under_worker, "acquiring master link", "holding worker");
    expect_abort(worker_under_pool, "acquiring worker", "holding promotion pool");
}

static void test_peer_segment_table_checked(void **state)
{
    (void)state;
    struct mc_peer_server_config cfg = {0};
    assert_int_equal(mc_peer_server_new(&cfg, &g_ps), 0);
    static uint8_t seg[4096];
    assert_int_equal(mc_peer_server_add_segment(g_ps, PS_SEG, seg, sizeof(seg)), 0);
    expect_abort(store_under_peer_segs, "acquiring disk store", "holding peer segment table");
    expect_abort(peer_lookup_under_peer_segs, "acquiring peer segment table",
                 "holding peer segment table");
    /* every table operation returns with nothing held, and does what it says */
    assert_int_equal(mc_peer_server_add_segment(g_ps, PS_SEG, seg, sizeof(seg)),
                     MC_ERR_SEGMENT_ALREADY_EXISTS);
    assert_int_equal(mc_lo_depth(), 0);
    assert_int_equal(mc_peer_server_set_segment_epoch(g_ps, PS_SEG, 5), 0);
    assert_int_equal(mc_lo_depth(), 0);
    const char msg[] = "peer-table";
    assert_int_equal(mc_peer_server_write_current(g_ps, PS_SEG, 5, 100, msg, sizeof(msg)), 0);
    assert_int_equal(mc_lo_depth(), 0);
    assert_memory_equal(seg + 100, msg, sizeof(msg));
    assert_int_equal(mc_peer_server_write_current(g_ps, PS_SEG, 4, 100, msg, sizeof(msg)),
                     MC_ERR_REPLICA_IS_GONE);
    uint8_t *p = NULL;
    assert_int_equal(mc_peer_server_resolve(g_ps, PS_SEG, 5, 100, sizeof(msg), &p), 0);
    assert_ptr_equal(p, seg + 100);
    assert_int_equal(mc_lo_depth(), 0);
    assert_true(mc_peer_server_has_segment(g_ps, PS_SEG));
    assert_int_equal(mc_peer_server_remove_segment(g_ps, PS_SEG), 0);
    assert_int_equal(mc_peer_server_resolve(g_ps, PS_SEG, 5, 100, 1, &p), MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(mc_lo_depth(), 0);
    mc_peer_server_free(g_ps);
    g_ps = NULL;
}

static void test_locked_function_asserts_its_lock(void **state)
{
    (void)state;
    expect_abort(locked_fn_unlocked, "disk_spares_drop_locked", "invariant failed");
    char buf[1024];
    int st = af_run_child(locked_fn_locked, buf, sizeof(buf));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("locked call failed (status %d): %s", st, buf);
    af_expect_clean(legal_order);
}

/* Every store call returns with no lock held by this thread; eviction (4 MiB capacity, 1 MiB
 * extents, 24 x 256 KiB appended) runs inside the appends. The survivors read back intact. */
static void test_store_paths_balanced(void **state)
{
    struct env *e = *state;
    char key[32];
    for (int i = 0; i < 24; i++) {
        snprintf(key, sizeof(key), "lo-%d", i);
        assert_int_equal(put_gen(e->s, key, 1, 256 * KIB, (uint64_t)i), MC_OK);
        assert_int_equal(mc_lo_depth(), 0);
    }
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_true(u.evicted_records > 0);
    assert_int_equal(mc_lo_depth(), 0);
    assert_int_equal(get_check(e->s, "lo-23", 256 * KIB, 23, 0), MC_OK);
    assert_int_equal(mc_lo_depth(), 0);
    uint64_t version = 0;
    assert_int_equal(mc_disk_store_pin(e->s, "lo-23", 5, &version), MC_OK);
    assert_int_equal(version, 1);
    assert_int_equal(mc_disk_store_unpin(e->s, "lo-23", 5), MC_OK);
    const char *keys[] = {"lo-22", "lo-23"};
    uint32_t lens[] = {5, 5};
    int res[2];
    assert_int_equal(mc_disk_store_remove(e->s, keys, lens, 2, res), MC_OK);
    assert_int_equal(mc_lo_depth(), 0);
    assert_int_equal(get_check(e->s, "lo-23", 256 * KIB, 23, 0), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_lo_depth(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_wrong_order_aborts, store_setup, teardown),
        cmocka_unit_test_setup_teardown(test_locked_function_asserts_its_lock, store_setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_paths_balanced, store_setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_segment_table_checked, store_setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
