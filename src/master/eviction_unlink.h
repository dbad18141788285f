/*
 * eviction_unlink.h - helpers of an eviction round's one-by-one unlinks (eviction_unlink.c).
 */
#ifndef MC_MASTER_EVICTION_UNLINK_H
#define MC_MASTER_EVICTION_UNLINK_H

#include <stdint.h>

#include "master/objects.h"
#include "master/shard.h"

/* The key hashes ev_warm_unlinks computed, for mc_shard_unlink_hashed: vh[i] of ub->objs[i],
 * th[j] of tail[j], the object at the shard's position n - 1 - j when the round's unlinks began
 * (a worker's scratch, kept across rounds). */
struct ev_unlink_hashes {
    uint64_t *vh, *th;
    const struct mc_object **tail;
    size_t cap;
    uint32_t ntail;
};

/* Before unlinking ub's objects one by one (s write-locked): fetches their keys and the shard's
 * tail keys, then the index slots their hashes lead to, and the slab headers their records go
 * back to. The hashes are kept in h (h->ntail is 0 and vh unset when h cannot grow: the
 * unlinks then hash the keys themselves). */
void ev_warm_unlinks(struct mc_shard *s, const struct mc_unlink_batch *ub,
                     struct ev_unlink_hashes *h);
/* Unlinks ub->objs[i] (detached), the i-th of the round's one-by-one unlinks, with the hashes in
 * h (write lock). */
void ev_unlink_one(struct mc_shard *s, const struct mc_unlink_batch *ub, size_t i,
                   const struct ev_unlink_hashes *h);
void ev_unlink_hashes_free(struct ev_unlink_hashes *h);
/* Raises the lease floor of the block holding position e (< s->n) to its exact minimum (write
 * lock). */
void ev_refloor(struct mc_shard *s, uint32_t e);

#endif
