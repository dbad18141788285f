/*
 * offload_fixture.h - the master the LOCAL_DISK core tests (test_offload, test_offload_rereg,
 * test_delete_rule, test_master_scale) start from: the master core on fake clocks with manual
 * ticks, one eviction thread and enable_offload, a holder with a DRAM segment and a LOCAL_DISK
 * mount, a Put placed on that segment, and the queries those tests make. Each test sets what is
 * its own (epoch, modes, bounds) on the config before of_master.
 */
#ifndef MC_TESTS_OFFLOAD_FIXTURE_H
#define MC_TESTS_OFFLOAD_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"
#include "master/master.h"

#define OF_T0_MS 1000000ull
#define OF_WALL0_NS (1767225600000ull * 1000000ull) /* 2026-01-01 */
#define OF_DISK_EP "10.0.0.1:18001"

/* The shared config: clock fc, wall clock wall (NULL: none), manual ticks, epoch, one eviction
 * thread, client TTL ttl_ms, enable_offload; release_ms, when not 0, is the PutStart release
 * timeout. */
struct mc_master_config of_config(struct mc_fake_clock *fc, struct mc_fake_clock *wall,
                                  uint16_t epoch, uint64_t ttl_ms, uint64_t release_ms);
/* mc_master_new(c), which must succeed. */
struct mc_master *of_master(const struct mc_master_config *c);
/* Mounts holder a's DRAM segment seg-1 (tm_seg(1, seg_size)) and, with disk, its LOCAL_DISK at
 * OF_DISK_EP (1 GiB); both must succeed. */
void of_mount_holder(struct mc_master *m, struct mc_id a, uint64_t seg_size, bool disk);
/* PutStart + PutEnd by a, placed on seg-1 (crc = size ^ 0x5a); both must succeed. Returns the
 * version. */
uint64_t of_put(struct mc_master *m, struct mc_id a, const char *key, uint64_t size);
/* QueryKey, which must answer want_rc. */
struct mc_key_info of_query(struct mc_master *m, const char *key, int want_rc);
struct mc_offload_stats of_stats(struct mc_master *m);
/* Frees m; the thread must hold no lock afterwards. */
void of_free(struct mc_master *m);

#endif
