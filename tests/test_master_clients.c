/*
 * test_master_clients.c - client registry and liveness of the master core (src/master/clients.c):
 * Ping statuses, mount/remount/unmount, client expiry (segments unmounted, replicas and objects
 * dropped), re-mount after a master restart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "common/metrics.h"
#include "test_master_util.h"

static void test_ping_statuses(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 5000000000ull);
    struct mc_master *m = tm_master(&fc, 3);
    struct mc_ping_result pr;
    struct mc_id zero = {0, 0};
    assert_int_equal(mc_master_ping(m, zero, &pr), MC_ERR_INVALID_PARAMS);
    /* Unknown client: told to re-mount; an empty re-mount makes it OK. */
    assert_int_equal(mc_master_ping(m, tm_id(1), &pr), MC_OK);
    assert_int_equal(pr.status, MC_CLIENT_NEED_REMOUNT);
    assert_int_equal(pr.view_version, 3);
    assert_int_equal(mc_master_remount_segments(m, tm_id(1), NULL, 0, NULL), MC_OK);
    assert_int_equal(mc_master_ping(m, tm_id(1), &pr), MC_OK);
    assert_int_equal(pr.status, MC_CLIENT_OK);
    /* A first Mount registers the client as OK. */
    struct mc_segment_desc s = tm_seg(2, 16 * MIB);
    assert_int_equal(mc_master_mount_segment(m, tm_id(2), &s, NULL), MC_OK);
    assert_int_equal(mc_master_ping(m, tm_id(2), &pr), MC_OK);
    assert_int_equal(pr.status, MC_CLIENT_OK);
    /* Mount errors come from the segment table and register nobody. */
    struct mc_segment_desc bad = tm_seg(3, 0);
    assert_int_equal(mc_master_mount_segment(m, tm_id(3), &bad, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_mount_segment(m, tm_id(3), &s, NULL), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_mount_segment(m, zero, &s, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_unmount_segment(m, tm_id(3), s.id), MC_ERR_ILLEGAL_CLIENT);
    struct mc_master_stats st;
    mc_master_get_stats(m, &st);
    assert_int_equal(st.active_clients, 2);
    assert_int_equal(st.mount_segment_failures, 3);
    assert_int_equal(st.ping_requests, 4);
    mc_master_free(m);
}

/* A replica offset is 48 bits: a segment larger than that is refused (it would alias offsets:
 * with 1 PiB and 1 TiB objects, object 256 lands at 2^48, stored as offset 0 like object 0), the
 * largest one is accepted and every object placed on it has its own offset range inside it. */
static void test_mount_size_limits(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 5000000000ull);
    struct mc_master *m = tm_master(&fc, 3);
    struct mc_segment_desc big = tm_seg(1, 1ull << 50);
    assert_int_equal(mc_master_mount_segment(m, tm_id(1), &big, NULL), MC_ERR_INVALID_PARAMS);
    struct mc_segment_desc s = tm_seg(1, MC_SEGMENT_MAX_SIZE);
    assert_int_equal(mc_master_mount_segment(m, tm_id(1), &s, NULL), MC_OK);
    enum { N = 256 };
    const uint64_t size = (1ull << 40) - 1; /* the largest object */
    static uint64_t off[N];
    char key[32];
    struct mc_put_start_result ps;
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "big%d", i);
        assert_int_equal(mc_master_put_start(m, tm_id(1), key, strlen(key), size, NULL, &ps),
                         MC_OK);
        assert_int_equal(ps.nreplicas, 1);
        off[i] = ps.replicas[0].u.mem.offset;
        assert_true(off[i] + size <= MC_SEGMENT_MAX_SIZE);
        assert_int_equal(ps.replicas[0].u.mem.addr, s.base + off[i]);
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < i; j++)
            if (!(off[i] + size <= off[j] || off[j] + size <= off[i]))
                fail_msg("objects %d and %d overlap (offsets %llu, %llu)", i, j,
                         (unsigned long long)off[i], (unsigned long long)off[j]);
    mc_master_free(m);
}

static void test_client_expiry(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 5000000000ull);
    struct mc_master *m = tm_master(&fc, 3);
    struct mc_id a = tm_id(1), b = tm_id(2);
    struct mc_segment_desc sa = tm_seg(1, 32 * MIB), sb = tm_seg(2, 32 * MIB);
    assert_int_equal(mc_master_mount_segment(m, a, &sa, NULL), MC_OK);
    assert_int_equal(mc_master_mount_segment(m, b, &sb, NULL), MC_OK);
    const char *pa[] = {"seg-1"}, *pb[] = {"seg-2"};
    struct mc_master_replicate_config ca, cb, both;
    mc_master_replicate_config_init(&ca);
    ca.preferred_segments = pa;
    ca.n_preferred = 1;
    cb = ca;
    cb.preferred_segments = pb;
    mc_master_replicate_config_init(&both);
    both.replica_num = 2;
    char key[32];
    struct mc_put_start_result ps;
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "a%d", i);
        assert_int_equal(mc_master_put_start(m, b, key, strlen(key), 4096, &ca, &ps), MC_OK);
        assert_int_equal(mc_master_put_end(m, b, key, strlen(key), 0, 0, false), MC_OK);
        snprintf(key, sizeof(key), "b%d", i);
        assert_int_equal(mc_master_put_start(m, a, key, strlen(key), 4096, &cb, &ps), MC_OK);
        assert_int_equal(mc_master_put_end(m, a, key, strlen(key), 0, 0, false), MC_OK);
    }
    assert_int_equal(mc_master_put_start(m, a, "both", 4, 4096, &both, &ps), MC_OK);
    assert_int_equal(mc_master_put_end(m, a, "both", 4, 0, 0, false), MC_OK);
    /* b keeps pinging, a goes quiet. */
    assert_int_equal(mc_master_tick_monitor(m), 0);
    mc_fake_clock_advance_ms(&fc, 6000);
    struct mc_ping_result pr;
    assert_int_equal(mc_master_ping(m, b, &pr), MC_OK);
    mc_fake_clock_advance_ms(&fc, 3999);
    assert_int_equal(mc_master_tick_monitor(m), 0);
    mc_fake_clock_advance_ms(&fc, 1);
    assert_int_equal(mc_master_tick_monitor(m), 1);
    /* a's segment is gone with every object that lived only there. */
    struct mc_get_result g;
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "a%d", i);
        assert_int_equal(mc_master_get_replica_list(m, key, strlen(key), &g),
                         MC_ERR_OBJECT_NOT_FOUND);
        snprintf(key, sizeof(key), "b%d", i);
        assert_int_equal(mc_master_get_replica_list(m, key, strlen(key), &g), MC_OK);
    }
    assert_int_equal(mc_master_get_replica_list(m, "both", 4, &g), MC_OK);
    assert_int_equal(g.nreplicas, 1);
    assert_string_equal(g.replicas[0].u.mem.segment_name, "seg-2");
    struct mc_master_stats st;
    mc_master_get_stats(m, &st);
    assert_int_equal(st.key_count, 21);
    assert_int_equal(st.total_capacity_bytes, 32 * MIB);
    assert_int_equal(st.allocated_bytes, 21 * 4096);
    assert_int_equal(st.active_clients, 1);
    assert_int_equal(st.expired_clients, 1);
    assert_int_equal(st.segment_count, 1);
    /* The expired client comes back: told to re-mount, and it can. */
    assert_int_equal(mc_master_ping(m, a, &pr), MC_OK);
    assert_int_equal(pr.status, MC_CLIENT_NEED_REMOUNT);
    assert_int_equal(mc_master_remount_segments(m, a, &sa, 1, NULL), MC_OK);
    assert_int_equal(mc_master_ping(m, a, &pr), MC_OK);
    assert_int_equal(pr.status, MC_CLIENT_OK);
    mc_master_get_stats(m, &st);
    assert_int_equal(st.total_capacity_bytes, 64 * MIB);
    /* Both expire. */
    mc_fake_clock_advance_ms(&fc, 10000);
    assert_int_equal(mc_master_tick_monitor(m), 2);
    mc_master_get_stats(m, &st);
    assert_int_equal(st.key_count, 0);
    assert_int_equal(st.total_capacity_bytes, 0);
    assert_int_equal(st.allocated_bytes, 0);
    mc_master_free(m);
}

/* Mount epochs (DESIGN.md §6): one per mount of a segment, not per master. A client that the
 * master expired and that re-mounts gets new epochs (per segment, all distinct), descriptors
 * handed out before carry the old ones and new descriptors the new ones; an idempotent repeat of
 * a live mount keeps its epoch; an explicit unmount and mount again gives yet another; another
 * master never gives the same. */
static void test_mount_epoch_per_mount(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 5000000000ull);
    struct mc_master *m = tm_master(&fc, 3);
    struct mc_id a = tm_id(1);
    struct mc_segment_desc segs[2] = {tm_seg(1, 32 * MIB), tm_seg(2, 32 * MIB)};
    uint64_t e1[2] = {0, 0}, again = 0;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(mc_master_mount_segment(m, a, &segs[i], &e1[i]), MC_OK);
        assert_true(e1[i] != 0);
    }
    assert_true(e1[0] != e1[1]);
    assert_int_equal(mc_master_mount_segment(m, a, &segs[0], &again), MC_OK); /* idempotent */
    assert_int_equal(again, e1[0]);
    struct mc_segment_info *info;
    size_t n;
    assert_int_equal(mc_master_list_segments(m, &info, &n), MC_OK);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(info[i].mount_epoch,
                         mc_id_eq(info[i].desc.id, segs[0].id) ? e1[0] : e1[1]);
    free(info);

    /* a descriptor handed out before the expiry carries the first mount's epoch */
    assert_int_equal(tm_put(m, a, "old", 4096), MC_OK);
    struct mc_get_result before;
    assert_int_equal(mc_master_get_replica_list(m, "old", 3, &before), MC_OK);
    int si = mc_id_eq(before.replicas[0].u.mem.segment_id, segs[0].id) ? 0 : 1;
    assert_int_equal(before.replicas[0].u.mem.mount_epoch, e1[si]);

    /* a stops pinging, is expired, comes back and re-mounts both segments */
    mc_fake_clock_advance_ms(&fc, 10001);
    assert_int_equal(mc_master_tick_monitor(m), 1);
    struct mc_ping_result pr;
    assert_int_equal(mc_master_ping(m, a, &pr), MC_OK);
    assert_int_equal(pr.status, MC_CLIENT_NEED_REMOUNT);
    uint64_t e2[2] = {0, 0};
    assert_int_equal(mc_master_remount_segments(m, a, segs, 2, e2), MC_OK);
    for (int i = 0; i < 2; i++) {
        assert_true(e2[i] != 0);
        assert_true(e2[i] != e1[0] && e2[i] != e1[1]);
    }
    assert_true(e2[0] != e2[1]);
    /* a repeated ReMount of live mounts answers their epochs */
    uint64_t e2b[2] = {0, 0};
    assert_int_equal(mc_master_remount_segments(m, a, segs, 2, e2b), MC_OK);
    assert_memory_equal(e2b, e2, sizeof(e2));

    /* the same offset is handed out again, now under the new epoch: only the epoch tells the
     * old descriptor from the new one */
    assert_int_equal(tm_put(m, a, "new", 4096), MC_OK);
    struct mc_get_result after;
    assert_int_equal(mc_master_get_replica_list(m, "new", 3, &after), MC_OK);
    int sj = mc_id_eq(after.replicas[0].u.mem.segment_id, segs[0].id) ? 0 : 1;
    assert_int_equal(after.replicas[0].u.mem.mount_epoch, e2[sj]);
    assert_true(after.replicas[0].u.mem.mount_epoch != before.replicas[0].u.mem.mount_epoch);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(m, "new", 3, &ki), MC_OK);
    assert_int_equal(ki.replicas[0].u.mem.mount_epoch, e2[sj]);

    /* an explicit unmount and a mount again: yet another epoch */
    assert_int_equal(mc_master_unmount_segment(m, a, segs[0].id), MC_OK);
    uint64_t e3 = 0;
    assert_int_equal(mc_master_mount_segment(m, a, &segs[0], &e3), MC_OK);
    assert_true(e3 != 0 && e3 != e1[0] && e3 != e1[1] && e3 != e2[0] && e3 != e2[1]);
    mc_master_free(m);

    /* another master (a restart) draws its epochs elsewhere */
    struct mc_master *m2 = tm_master(&fc, 4);
    uint64_t e4 = 0;
    assert_int_equal(mc_master_mount_segment(m2, a, &segs[0], &e4), MC_OK);
    assert_true(e4 != 0 && e4 != e1[0] && e4 != e1[1] && e4 != e2[0] && e4 != e2[1] && e4 != e3);
    mc_master_free(m2);
}

static void test_remount_after_restart(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 5000000000ull);
    struct mc_id a = tm_id(1);
    struct mc_segment_desc segs[2] = {tm_seg(1, 32 * MIB), tm_seg(2, 16 * MIB)};
    struct mc_master *m1 = tm_master(&fc, 1);
    for (int i = 0; i < 2; i++)
        assert_int_equal(mc_master_mount_segment(m1, a, &segs[i], NULL), MC_OK);
    assert_int_equal(tm_put(m1, a, "before", 1000), MC_OK);
    struct mc_ping_result pr;
    assert_int_equal(mc_master_ping(m1, a, &pr), MC_OK);
    assert_int_equal(pr.status, MC_CLIENT_OK);
    mc_master_free(m1);

    /* The restarted master knows nobody. */
    struct mc_master *m2 = tm_master(&fc, 2);
    assert_int_equal(mc_master_ping(m2, a, &pr), MC_OK);
    assert_int_equal(pr.status, MC_CLIENT_NEED_REMOUNT);
    assert_int_equal(pr.view_version, 2);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(m2, "before", 6, &g), MC_ERR_OBJECT_NOT_FOUND);
    /* A bad descriptor fails the re-mount and leaves the client NEED_REMOUNT. */
    struct mc_segment_desc bad[2] = {segs[0], tm_seg(3, 0)};
    assert_int_equal(mc_master_remount_segments(m2, a, bad, 2, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_ping(m2, a, &pr), MC_OK);
    assert_int_equal(pr.status, MC_CLIENT_NEED_REMOUNT);
    /* The real re-mount (twice: idempotent) restores the segments. */
    assert_int_equal(mc_master_remount_segments(m2, a, segs, 2, NULL), MC_OK);
    assert_int_equal(mc_master_remount_segments(m2, a, segs, 2, NULL), MC_OK);
    assert_int_equal(mc_master_ping(m2, a, &pr), MC_OK);
    assert_int_equal(pr.status, MC_CLIENT_OK);
    struct mc_segment_info *info;
    size_t n;
    assert_int_equal(mc_master_list_segments(m2, &info, &n), MC_OK);
    assert_int_equal(n, 2);
    uint64_t cap = info[0].capacity + info[1].capacity;
    free(info);
    assert_int_equal(cap, 48 * MIB);
    assert_int_equal(tm_put(m2, a, "after", 1000), MC_OK);
    assert_int_equal(mc_master_get_replica_list(m2, "after", 5, &g), MC_OK);
    assert_true(g.version > mc_master_version_base(m2));
    struct mc_master_stats st;
    mc_master_get_stats(m2, &st);
    assert_int_equal(st.remount_segment_requests, 3);
    assert_int_equal(st.remount_segment_failures, 1);
    mc_master_free(m2);
}

static void test_metrics_registry(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 5000000000ull);
    struct mc_master *m = tm_master(&fc, 3);
    struct mc_segment_desc s = tm_seg(1, 16 * MIB);
    assert_int_equal(mc_master_mount_segment(m, tm_id(1), &s, NULL), MC_OK);
    assert_int_equal(tm_put(m, tm_id(1), "a", 1000), MC_OK);
    assert_int_equal(tm_put(m, tm_id(1), "b", 24), MC_OK);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(m, "zz", 2, &g), MC_ERR_OBJECT_NOT_FOUND);
    struct mc_textbuf tb;
    mc_textbuf_init(&tb);
    assert_non_null(mc_master_metrics(m));
    assert_int_equal(mc_metrics_render(mc_master_metrics(m), &tb), 0);
    assert_non_null(strstr(tb.data, "\nmaster_key_count 2\n"));
    assert_non_null(strstr(tb.data, "\nmaster_allocated_bytes 1024\n"));
    assert_non_null(strstr(tb.data, "\nmaster_total_capacity_bytes 16777216\n"));
    assert_non_null(strstr(tb.data, "\nmaster_put_start_requests_total 2\n"));
    assert_non_null(strstr(tb.data, "\nmaster_get_replica_list_failures_total 1\n"));
    assert_non_null(strstr(tb.data, "\nmaster_active_clients 1\n"));
    assert_non_null(strstr(tb.data, "\nmaster_remove_all_requests_total 0\n")); /* zeros too */
    mc_textbuf_destroy(&tb);
    mc_master_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ping_statuses),         cmocka_unit_test(test_mount_size_limits),
        cmocka_unit_test(test_client_expiry),         cmocka_unit_test(test_mount_epoch_per_mount),
        cmocka_unit_test(test_remount_after_restart), cmocka_unit_test(test_metrics_registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
