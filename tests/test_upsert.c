/*
 * test_upsert.c - Upsert in the master core (src/master/upsert.c), on a fake clock:
 *   - UpsertStart reserves space and leaves the key as it is; UpsertEnd swaps in one step: a
 *     Get before it gets the old value (version, size, CRC), after it the new one, with a higher
 *     version; an upsert of a missing key creates it;
 *   - the old value's space is kept while a reader holds a lease on it and freed when the lease
 *     ends (a reader of the old bytes never sees them reused), at once without a reader;
 *   - a Put in flight is not replaced (REPLICA_IS_NOT_READY, the reservation's space returns);
 *   - only the starting client can end or revoke its reservation; a reservation that is never
 *     ended is released after put_start_release_timeout; grouped upserts are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "master/upsert.h"
#include "master_fixture.h"

static int setup(void **state)
{
    *state = mfx_new(5, 64 * MIB, 0);
    return *state ? 0 : -1;
}

/* Bytes allocated in the one segment. */
static uint64_t allocated(struct fx *f)
{
    struct mc_segment_info *si = NULL;
    size_t n = 0;
    assert_int_equal(mc_master_list_segments(f->m, &si, &n), MC_OK);
    assert_int_equal(n, 1);
    uint64_t a = si[0].allocated;
    free(si);
    return a;
}

static int upsert(struct fx *f, struct mc_id c, const char *k, uint64_t size, uint32_t crc,
                  uint64_t *version)
{
    struct mc_upsert_start_result us;
    int rc = mc_master_upsert_start(f->m, c, k, strlen(k), size, NULL, &us);
    if (rc != MC_OK)
        return rc;
    return mc_master_upsert_end(f->m, c, k, strlen(k), us.token, crc, true, version);
}

static void test_swap_is_one_step(void **state)
{
    struct fx *f = *state;
    assert_int_equal(tm_put(f->m, f->a, "k", 4096), MC_OK); /* crc = 1 ^ 4096 */
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "k", 1, &g), MC_OK);
    uint64_t v_old = g.version;
    mc_fake_clock_advance_ms(&f->fc, 20000); /* the lease ran out */
    struct mc_upsert_start_result us;
    assert_int_equal(mc_master_upsert_start(f->m, f->b, "k", 1, 8192, NULL, &us), MC_OK);
    assert_int_equal(us.nreplicas, 1);
    assert_int_equal(us.replicas[0].size, 8192);
    assert_int_equal(us.replicas[0].status, MC_REPLICA_STATUS_PROCESSING);
    assert_int_equal(mc_master_upsert_pending(f->m), 1);
    /* before the end: the old value, untouched */
    assert_int_equal(mc_master_get_replica_list(f->m, "k", 1, &g), MC_OK);
    assert_int_equal(g.version, v_old);
    assert_int_equal(g.size, 4096);
    assert_int_equal(g.crc32c, 1 ^ 4096);
    mc_fake_clock_advance_ms(&f->fc, 20000);
    uint64_t v_new = 0;
    assert_int_equal(mc_master_upsert_end(f->m, f->b, "k", 1, us.token, 0xabcd, true, &v_new),
                     MC_OK);
    assert_true(v_new > v_old);
    assert_int_equal(mc_master_upsert_pending(f->m), 0);
    assert_int_equal(mc_master_get_replica_list(f->m, "k", 1, &g), MC_OK);
    assert_int_equal(g.version, v_new);
    assert_int_equal(g.size, 8192);
    assert_int_equal(g.crc32c, 0xabcd);
    assert_int_equal(g.replicas[0].u.mem.offset, us.replicas[0].u.mem.offset);
    assert_int_equal(allocated(f), 8192); /* the old space went back (no reader) */
    /* the reservation is spent: a second end is refused */
    assert_int_equal(mc_master_upsert_end(f->m, f->b, "k", 1, us.token, 0, true, NULL),
                     MC_ERR_INVALID_PARAMS);
    /* versions keep growing over repeated upserts; a missing key is created */
    uint64_t v3 = 0, v4 = 0;
    assert_int_equal(upsert(f, f->a, "k", 100, 7, &v3), MC_OK);
    assert_true(v3 > v_new);
    assert_int_equal(upsert(f, f->a, "fresh", 100, 7, &v4), MC_OK);
    assert_true(v4 > v3);
    assert_int_equal(mc_master_get_replica_list(f->m, "fresh", 5, &g), MC_OK);
    assert_int_equal(g.size, 100);
}

/* A reader leased the old value: its space stays allocated until the lease ends, so the bytes
 * it is reading are never rewritten by a later Put. */
static void test_old_space_outlives_reader_lease(void **state)
{
    struct fx *f = *state;
    assert_int_equal(tm_put(f->m, f->a, "k", 1 * MIB), MC_OK);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "k", 1, &g), MC_OK); /* 10 s lease */
    assert_int_equal(upsert(f, f->b, "k", 2 * MIB, 5, NULL), MC_OK);
    assert_int_equal(allocated(f), 3 * MIB); /* old kept for the reader */
    mc_fake_clock_advance_ms(&f->fc, 10001);
    mc_master_tick_reaper(f->m); /* the discard list frees what is due */
    assert_int_equal(allocated(f), 2 * MIB);
    assert_int_equal(mc_master_get_replica_list(f->m, "k", 1, &g), MC_OK);
    assert_int_equal(g.size, 2 * MIB);
}

static void test_put_in_flight_is_not_replaced(void **state)
{
    struct fx *f = *state;
    struct mc_put_start_result ps;
    assert_int_equal(mc_master_put_start(f->m, f->a, "k", 1, 4096, NULL, &ps), MC_OK);
    struct mc_upsert_start_result us;
    assert_int_equal(mc_master_upsert_start(f->m, f->b, "k", 1, 8192, NULL, &us), MC_OK);
    assert_int_equal(allocated(f), 4096 + 8192);
    assert_int_equal(mc_master_upsert_end(f->m, f->b, "k", 1, us.token, 0, true, NULL),
                     MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(allocated(f), 4096); /* the reservation's space went back */
    assert_int_equal(mc_master_put_end(f->m, f->a, "k", 1, ps.version, 9, true), MC_OK);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "k", 1, &g), MC_OK);
    assert_int_equal(g.version, ps.version);
}

static void test_reservations_belong_to_their_client(void **state)
{
    struct fx *f = *state;
    struct mc_upsert_start_result us;
    assert_int_equal(mc_master_upsert_start(f->m, f->a, "k", 1, 4096, NULL, &us), MC_OK);
    assert_int_equal(mc_master_upsert_end(f->m, f->b, "k", 1, us.token, 0, true, NULL),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_upsert_end(f->m, f->a, "other", 5, us.token, 0, true, NULL),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_upsert_revoke(f->m, f->b, "k", 1, us.token), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_upsert_revoke(f->m, f->a, "k", 1, us.token), MC_OK);
    assert_int_equal(allocated(f), 0);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "k", 1, &ki), MC_ERR_OBJECT_NOT_FOUND);
    /* grouped upserts are refused; so are bad sizes and keys */
    struct mc_master_replicate_config c;
    mc_master_replicate_config_init(&c);
    c.group_id = "g";
    c.group_id_len = 1;
    assert_int_equal(mc_master_upsert_start(f->m, f->a, "k", 1, 4096, &c, &us),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_upsert_start(f->m, f->a, "k", 1, 0, NULL, &us),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_upsert_start(f->m, f->a, "", 0, 1, NULL, &us), MC_ERR_INVALID_KEY);
}

/* A client that died between start and end: its reservation is released after
 * put_start_release_timeout, by the reaper tick or by the next upsert call. */
static void test_abandoned_reservation_expires(void **state)
{
    struct fx *f = *state;
    struct mc_upsert_start_result us, us2;
    assert_int_equal(mc_master_upsert_start(f->m, f->a, "k", 1, 4096, NULL, &us), MC_OK);
    mc_fake_clock_advance_ms(&f->fc, 600000 - 1);
    assert_int_equal(mc_master_tick_reaper(f->m), 0);
    assert_int_equal(upsert(f, f->b, "other", 100, 1, NULL), MC_OK);
    assert_int_equal(mc_master_upsert_pending(f->m), 1);
    mc_fake_clock_advance_ms(&f->fc, 1);
    assert_int_equal(mc_master_tick_reaper(f->m), 1);
    assert_int_equal(mc_master_upsert_pending(f->m), 0);
    assert_int_equal(allocated(f), 100);
    assert_int_equal(mc_master_upsert_end(f->m, f->a, "k", 1, us.token, 0, true, NULL),
                     MC_ERR_INVALID_PARAMS);
    /* without a reaper tick, the next upsert call releases it */
    assert_int_equal(mc_master_upsert_start(f->m, f->a, "k", 1, 4096, NULL, &us2), MC_OK);
    mc_fake_clock_advance_ms(&f->fc, 600000);
    assert_int_equal(upsert(f, f->b, "other", 200, 1, NULL), MC_OK);
    assert_int_equal(mc_master_upsert_pending(f->m), 0);
    assert_int_equal(allocated(f), 200);
}

static void on_done(void *arg, int rc)
{
    *(int *)arg = rc + 1000; /* never called without a disk tier */
}

/* A batch end: each key its own swap, a revoke gives its space back, a bad token fails alone. */
static void test_batch_end(void **state)
{
    struct fx *f = *state;
    assert_int_equal(tm_put(f->m, f->a, "x", 100), MC_OK);
    struct mc_upsert_start_result u0, u1, u2;
    assert_int_equal(mc_master_upsert_start(f->m, f->a, "x", 1, 200, NULL, &u0), MC_OK);
    assert_int_equal(mc_master_upsert_start(f->m, f->a, "y", 1, 300, NULL, &u1), MC_OK);
    assert_int_equal(mc_master_upsert_start(f->m, f->a, "z", 1, 400, NULL, &u2), MC_OK);
    struct mc_key_ref keys[4] = {{"x", 1}, {"y", 1}, {"z", 1}, {"w", 1}};
    struct mc_upsert_end_item items[4] = {{u0.token, 1, true, false},
                                          {u1.token, 2, true, true},
                                          {u2.token, 3, true, false},
                                          {u2.token, 3, true, false}};
    int rcs[4] = {-1, -1, -1, -1}, called = 0;
    assert_int_equal(
        mc_master_batch_upsert_end_wait(f->m, f->a, keys, 4, items, rcs, on_done, &called), MC_OK);
    assert_int_equal(called, 0);
    assert_int_equal(rcs[0], MC_OK);
    assert_int_equal(rcs[1], MC_OK); /* revoked */
    assert_int_equal(rcs[2], MC_OK);
    assert_int_equal(rcs[3], MC_ERR_INVALID_PARAMS); /* z's token, spent, under another key */
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "x", 1, &g), MC_OK);
    assert_int_equal(g.size, 200);
    assert_int_equal(mc_master_get_replica_list(f->m, "y", 1, &g), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_get_replica_list(f->m, "z", 1, &g), MC_OK);
    assert_int_equal(g.crc32c, 3);
    assert_int_equal(allocated(f), 600);
    assert_int_equal(mc_master_upsert_pending(f->m), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_swap_is_one_step, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_old_space_outlives_reader_lease, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_put_in_flight_is_not_replaced, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_reservations_belong_to_their_client, setup,
                                        mfx_teardown),
        cmocka_unit_test_setup_teardown(test_abandoned_reservation_expires, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_batch_end, setup, mfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
