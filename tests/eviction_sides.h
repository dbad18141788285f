/*
 * eviction_sides.h - two masters fed the same operations, for the tests that compare two ways
 * of running a BatchEvict cycle (test_eviction_sample: the sampled census against the census of
 * every entry; test_eviction_cut: eviction by cut against materialized candidates). Each side is
 * the master library on its own fake clock with manual ticks, two DRAM segments of client 1,
 * soft-pinned eviction allowed; keys "k-NNNNNN" of ES_OBJ_SIZE bytes of several kinds; a key's
 * state is compared after each cycle. test_eviction uses es_make_disk_copy alone.
 */
#ifndef MC_TESTS_EVICTION_SIDES_H
#define MC_TESTS_EVICTION_SIDES_H

#include <stdbool.h>
#include <stdint.h>

#include "master/eviction.h"
#include "test_master_util.h"

#define ES_T0_MS 1000000ull
#define ES_TTL_MS 1000ull
#define ES_OBJ_SIZE 256ull

struct side {
    struct mc_fake_clock fc;
    struct mc_master *m;
    struct mc_id client;
};

/* A master with `threads` eviction threads (reserve min 4) and the test options o (NULL:
 * none). */
void es_side_init(struct side *s, uint32_t threads, const struct mc_evict_test_opts *o);

/* xorshift64: the seeded generator both sides' operations come from. */
uint64_t es_rnd(uint64_t *x);
/* when[0..n): a permutation of 0..n-1 (distinct read times) when per == 1; each value shared by
 * per keys otherwise. */
void es_read_times(uint32_t *when, int n, uint32_t per, uint64_t *seed);

/* Key i's name (four buffers in rotation). */
const char *es_key(int i);
void es_set_now(struct side *s, uint64_t ms);

enum es_kind { K_PLAIN, K_HARD, K_SOFT, K_TWO, K_DISK, K_INFLIGHT, K_NKINDS };
/* Key i's Put of the given kind: hard- or soft-pinned, two MEMORY replicas, one MEMORY and one
 * COMPLETE LOCAL_DISK (what a finished offload leaves), or a PutStart left in flight. */
void es_put_kind(struct side *s, int i, enum es_kind kd);
/* kinds[0..n): 70% plain, 5% hard-pinned, 5% soft-pinned, 8% two MEMORY replicas, 8% with a
 * LOCAL_DISK copy, 4% in flight. */
void es_random_kinds(enum es_kind *kinds, int n, uint64_t *seed);
/* Keys 0..n-1 Put with their kinds (NULL: all plain), then each read at ES_T0_MS + when[i]. */
void es_fill(struct side *s, int n, const enum es_kind *kinds, const uint32_t *when);
/* The same churn on both sides at fake time now: 100-299 Removes of random keys (moving the
 * shards' last entries into the holes), 60-139 new Puts (keys nkeys.., a quarter of them with a
 * LOCAL_DISK copy; their kinds written to kinds[nkeys..]) and 200-399 reads of random keys, at
 * now + 1 + j / per for the j-th (per keys share a deadline). Returns the keys Put; *nread: the
 * reads. */
int es_churn(struct side sides[2], int nkeys, enum es_kind *kinds, uint64_t now, uint32_t per,
             uint64_t *seed, int *nread);
/* Churn between a census and what follows it: es_churn_hook (an after_census hook of
 * mc_evict_test_opts, arg a struct es_churn) removes every rm_every-th key from rm_from on and
 * reads every read_every-th key below read_below (their leases are then held); 0: none. */
struct es_churn {
    struct side *s;
    int nkeys;
    int rm_from, rm_every, read_below, read_every;
};
void es_churn_hook(struct mc_master *m, void *arg);
/* Turns the second MEMORY replica of m's 2-replica object k into a COMPLETE LOCAL_DISK one (what
 * a finished offload leaves), through the core's internal header, under the shard lock. */
void es_make_disk_copy(struct mc_master *m, const char *k);
/* A Get of key i at fake time ms (an in-flight key's fails: fine). */
void es_read_at(struct side *s, int i, uint64_t ms);
/* Key i's state: -1 gone, else MEMORY replicas * 8 + LOCAL_DISK replicas. */
int es_state_of(struct side *s, int i);
/* What the scans rely on, over every shard: each block's lease floor is at most every deadline
 * in it, and npop counts the entries in the population (fails the test otherwise). */
void es_check_floors_and_counts(struct side *s);

#endif
