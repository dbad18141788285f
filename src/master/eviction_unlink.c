/*
 * eviction_unlink.c - what an eviction round does around its one-by-one unlinks (write lock):
 * warming the keys and index slots they will read, and raising the lease floor of a block that
 * lost its victim.
 */
#include <stdatomic.h>

#include "common/hash.h"
#include "master/eviction_unlink.h"

static uint64_t key_hash_of(struct mc_object *o)
{
    return mc_hash_key(mc_obj_key(o), o->key_len);
}

/* Before unlinking ub's objects one by one (write lock): each unlink hashes its object's key and
 * the key of the shard's last object (moved into the hole) and finds both in the index. Those
 * keys are fetched together first, then the index slots their hashes lead to, so the misses
 * overlap instead of coming one after another (the tail objects are the likely ones to move). */
void ev_warm_unlinks(struct mc_shard *s, const struct mc_unlink_batch *ub)
{
    uint32_t tails = ub->n < s->n ? (uint32_t)ub->n : s->n;
    for (size_t i = 0; i < ub->n; i++) {
        __builtin_prefetch(ub->objs[i]);
        __builtin_prefetch((const char *)ub->objs[i] + 64);
        uint32_t b0 = ub->objs[i]->ent & ~(MC_ENT_BLOCK - 1); /* ev_refloor reads the block */
        __builtin_prefetch(mc_shard_floor(s, b0));
        __builtin_prefetch(mc_shard_ent(s, b0));
        if (b0 + 4 < s->n)
            __builtin_prefetch(mc_shard_ent(s, b0 + 4));
    }
    for (uint32_t j = 1; j <= tails; j++) {
        const char *o = (const char *)mc_ent_obj(mc_shard_ent(s, s->n - j));
        __builtin_prefetch(o);
        __builtin_prefetch(o + 64);
    }
    for (size_t i = 0; i < ub->n; i++)
        mc_shard_prefetch(s, key_hash_of(ub->objs[i]), 0);
    for (uint32_t j = 1; j <= tails; j++)
        mc_shard_prefetch(s, key_hash_of(mc_ent_obj(mc_shard_ent(s, s->n - j))), 0);
}

/* The lease floor of the block holding position e, raised to the block's exact minimum (write
 * lock): a victim was the oldest of its block, and the entry moved into its hole is usually
 * newer, so the next cycle's low census can skip the block again. */
void ev_refloor(struct mc_shard *s, uint32_t e)
{
    uint32_t b0 = e & ~(MC_ENT_BLOCK - 1), bl = b0 + MC_ENT_BLOCK < s->n ? b0 + MC_ENT_BLOCK : s->n;
    uint64_t bm = UINT64_MAX;
    for (uint32_t j = b0; j < bl; j++) {
        uint64_t l = atomic_load_explicit(&mc_shard_ent(s, j)->lease_ms, memory_order_relaxed);
        bm = l < bm ? l : bm;
    }
    *mc_shard_floor(s, e) = bm;
}
