/* hash.c - see hash.h. */
#include "common/hash.h"

#include <xxhash.h>

uint64_t mc_hash_key(const void *key, size_t len)
{
    return XXH3_64bits(key, len);
}

uint64_t mc_hash_seeded(const void *key, size_t len, uint64_t seed)
{
    return XXH3_64bits_withSeed(key, len, seed);
}
