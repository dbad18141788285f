/*
 * hash.h - key hashing (xxh3 from libxxhash).
 *
 * mc_hash_key() is the shard hash (shard = hash & (nshards-1)); mc_hash_seeded() gives
 * independent hashes for other uses (e.g. CountMinSketch rows), with seeds distinct from 0.
 */
#ifndef MC_COMMON_HASH_H
#define MC_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint64_t mc_hash_key(const void *key, size_t len);
uint64_t mc_hash_seeded(const void *key, size_t len, uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif
