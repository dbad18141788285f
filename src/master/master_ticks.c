/*
 * master_ticks.c - the ticks that tie two policies together, on the lifecycle floor: an
 * eviction tick is followed by promotion's retries (room may just have appeared), so neither
 * policy calls the other.
 *
 * In a file of its own so that a program that never ticks eviction does not link eviction.c
 * (master.c reaches eviction only through weak references).
 */
#include "master/eviction.h"
#include "master/master.h"
#include "master/offload.h"
#include "master/promotion.h"

int mc_master_tick_eviction(struct mc_master *m)
{
    int n = mc_eviction_tick(m);
    if (m) {
        mc_master_promotion_tick(m);
        mc_offload_census_step(m, 1); /* master_disk_only_key_count, one shard a tick */
    }
    return n;
}
