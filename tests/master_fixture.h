/*
 * master_fixture.h - the fixture the master core tests share (test_master_objects,
 * test_master_safety, test_master_remove_all, test_upsert, test_remove_regex, test_admin_keys,
 * test_object_events, test_eviction_slices): the master library on a fake clock with manual
 * ticks (no threads, no sleeps), client a with its DRAM segment mounted and, when asked, client
 * b with its own; the one-call Put and the segment descriptions of test_master_util.h.
 */
#ifndef MC_TESTS_MASTER_FIXTURE_H
#define MC_TESTS_MASTER_FIXTURE_H

#include <stdint.h>

#include "test_master_util.h"

struct fx {
    struct mc_fake_clock fc;
    struct mc_master *m;
    struct mc_id a, b; /* tm_id(1), tm_id(2) */
};

/* The clock at 1000 s, a master of epoch (tm_master), a's segment tm_seg(1, seg_a) mounted and,
 * when seg_b is not 0, b's tm_seg(2, seg_b). NULL when any step fails (nothing is left). */
struct fx *mfx_new(uint16_t epoch, uint64_t seg_a, uint64_t seg_b);
/* Frees the master and f (NULL: nothing). */
void mfx_free(struct fx *f);
/* A cmocka teardown of a fixture that a setup left in *state. */
int mfx_teardown(void **state);

#endif
