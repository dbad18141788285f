/*
 * promotion_fixture.h - the fixture the promotion tests (test_promotion_*.c) share: a master
 * on a fake clock with manual ticks, an owner that Puts, a LOCAL_DISK holder and a third
 * client; LOCAL_DISK-only objects made the way a holder's scan and an eviction make them; the
 * holder's side of a promotion (heartbeat pulls, AllocStart, success, failure); and the funnel
 * invariant every scenario ends with (check_funnel).
 *
 * The holder registers its LOCAL_DISK segment (MountLocalDiskSegment, offloading off so no
 * offload task pins anything); a disk copy is attached the way a holder's start-up scan attaches
 * one (NotifyOffloadSuccess, re-registration of the same version), and a LOCAL_DISK-only object
 * is such an object whose MEMORY replica was then evicted (dropped under its shard lock).
 * The funnel invariant: admitted = completed + failed + expired + cancelled + in_flight, and
 * in_flight = task records = pins = promotion tasks in the mailboxes.
 */
#ifndef MC_TESTS_PROMOTION_FIXTURE_H
#define MC_TESTS_PROMOTION_FIXTURE_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/hash.h"
#include "common/metrics.h"
#include "master/eviction.h"
#include "master/lock_order.h"
#include "master/mailbox.h"
#include "master/freelist.h"
#include "master/master_internal.h"
#include "master/objects.h"
#include "master/promotion.h"
#include "master/promotion_core.h"
#include "master/shard.h"
#include "test_master_util.h"

#define T0_MS 1000000ull
#define TTL_MS 1000ull
#define OBJ 4096ull

struct fx {
    struct mc_fake_clock fc;
    struct mc_master *m;
    struct mc_id owner;  /* the client that Puts */
    struct mc_id holder; /* the LOCAL_DISK holder */
    struct mc_id other;  /* a third client */
};

/* Heartbeat answers collected (wait 0 unless parked explicitly). */
struct hb {
    int calls;
    size_t n;
    uint64_t ids[64];
    uint64_t sizes[64];
    uint64_t versions[64];
    char keys[64][64];
};

void cfg_defaults(struct mc_master_config *c);
struct fx *fx_new_cfg(struct mc_master_config *c, uint64_t holder_seg, uint64_t other_seg);
struct fx *fx_new(void);
void fx_free(struct fx *f);
int fx_setup(void **state);
int fx_setup_threshold1(void **state);
int fx_teardown(void **state);
void advance(struct fx *f, uint64_t ms);
const char *key(const char *p, int i);
void put_n(struct fx *f, const char *k, uint64_t size, uint32_t nrep);
void add_disk_copy(struct fx *f, const char *k);
void drop_memory(struct fx *f, const char *k);
void disk_only(struct fx *f, const char *k, uint64_t size);
int get(struct fx *f, const char *k, struct mc_get_result *g);
void get_n(struct fx *f, const char *k, int n);
struct mc_promotion_stats stats(struct fx *f);
void check_funnel(struct fx *f);
void on_hb(void *arg, struct mc_task_list *tasks);
size_t pull(struct fx *f, uint32_t max, struct hb *h);
int alloc_start(struct fx *f, struct mc_id who, uint64_t id, const char *k, uint64_t size,
                struct mc_replica_desc *d);
int success(struct fx *f, struct mc_id who, uint64_t id, const char *k);
int failure(struct fx *f, struct mc_id who, uint64_t id, const char *k);
size_t promote_all(struct fx *f);
unsigned mem_replicas(struct fx *f, const char *k, unsigned *processing);
bool lists_memory(struct fx *f, const char *k);
uint64_t admit_one(struct fx *f, const char *k);

#endif
