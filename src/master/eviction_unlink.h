/*
 * eviction_unlink.h - helpers of an eviction round's one-by-one unlinks (eviction_unlink.c).
 */
#ifndef MC_MASTER_EVICTION_UNLINK_H
#define MC_MASTER_EVICTION_UNLINK_H

#include <stdint.h>

#include "master/objects.h"
#include "master/shard.h"

/* Before unlinking ub's objects one by one (s write-locked): fetches their keys and the shard's
 * tail keys, then the index slots their hashes lead to. */
void ev_warm_unlinks(struct mc_shard *s, const struct mc_unlink_batch *ub);
/* Raises the lease floor of the block holding position e (< s->n) to its exact minimum (write
 * lock). */
void ev_refloor(struct mc_shard *s, uint32_t e);

#endif
