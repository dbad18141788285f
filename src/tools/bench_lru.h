/*
 * bench_lru.h - the caches `mooncake_bench replay` judges the store against: an exact LRU of a
 * given number of blocks (or an unbounded cache), driven with the same prefix-caching
 * semantics the replay uses against the store.
 *
 * Prefix caching. A request is a sequence of block ids. Its hits are the longest prefix of ids
 * present in the cache when it arrives (a block after the first missing one is not reusable:
 * KV-cache blocks depend on everything before them). Then every block of the request is
 * accessed in order: the prefix by being read, the rest by being written, so all of them become
 * the most recently used, the last block of the request the newest. A block the request writes
 * that the cache already held (present, but after the first miss) is only refreshed.
 *
 * Exactness. Capacity is in whole blocks; inserting into a full cache evicts the least recently
 * used block first, one at a time, so a request longer than the cache keeps only its newest
 * blocks. Capacity 0 caches nothing. Ids are any 64-bit values.
 */
#ifndef MC_TOOLS_BENCH_LRU_H
#define MC_TOOLS_BENCH_LRU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MC_LRU_UNBOUNDED UINT64_MAX

struct mc_lru;

/* A cache of at most capacity blocks (MC_LRU_UNBOUNDED: never evicts). NULL when out of memory. */
struct mc_lru *mc_lru_new(uint64_t capacity);
void mc_lru_free(struct mc_lru *lru);

bool mc_lru_contains(const struct mc_lru *lru, uint64_t id);
/* Makes id the most recently used block, inserting it (and evicting the least recently used
 * one when full) if absent. Returns 0, or -1 when out of memory (the cache is unchanged). */
int mc_lru_touch(struct mc_lru *lru, uint64_t id);
uint64_t mc_lru_size(const struct mc_lru *lru);
uint64_t mc_lru_capacity(const struct mc_lru *lru);
/* Blocks evicted so far. */
uint64_t mc_lru_evictions(const struct mc_lru *lru);
/* The least recently used block (the next to go); false when empty. */
bool mc_lru_oldest(const struct mc_lru *lru, uint64_t *id);

/* One prefix-caching request (see above): returns its hits (the length of the longest present
 * prefix of ids[0..n)), then touches all n ids in order. Returns -1 when out of memory. */
int64_t mc_lru_request(struct mc_lru *lru, const uint64_t *ids, size_t n);

/* The store's side of the same rule: the length of the longest prefix of exist results
 * (mc_batch_exist: 1 present, 0 absent, < 0 error) that are all 1. */
size_t mc_prefix_present(const int *exist, size_t n);
/* After reading that prefix: the length of the longest prefix of Get results that read the
 * whole block (results[i] == block_size); a block that failed ends the reusable prefix. */
size_t mc_prefix_read(const int64_t *results, size_t n, uint64_t block_size);

/* Usable capacities in whole blocks, as the store counts them (DESIGN.md §7, §8):
 * DRAM: floor(dram_bytes * high_watermark / block_size) over the sum of the segments (the
 * master's watermark is on total allocated / total capacity);
 * disk: per store, floor(disk_bytes * watermark / record), record = one 4 KiB block of header
 * and key plus the value padded to 4 KiB (MC_DISK_BLOCK). */
uint64_t mc_lru_dram_blocks(uint64_t dram_bytes, double high_watermark, uint64_t block_size);
uint64_t mc_lru_disk_blocks(uint64_t disk_bytes, double watermark, uint64_t block_size);

#endif
