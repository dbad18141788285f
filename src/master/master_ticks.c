/*
 * master_ticks.c - the ticks that tie two policies together, on the lifecycle floor: an
 * eviction tick is followed by promotion's retries (room may just have appeared), so neither
 * policy calls the other.
 *
 * The daemon's eviction loop waits in mc_master_eviction_wait: a PutStart refused for space
 * (mc_master_want_eviction) ends the wait at once instead of at the next 10 ms tick.
 *
 * In a file of its own so that a program that never ticks eviction does not link eviction.c
 * (master.c reaches eviction only through weak references).
 */
#include <poll.h>
#include <stdint.h>
#include <unistd.h>

#include "master/eviction.h"
#include "master/holder_stream.h"
#include "master/master.h"
#include "master/master_state.h"
#include "master/offload.h"
#include "master/promotion.h"

int mc_master_tick_eviction(struct mc_master *m)
{
    int n = mc_eviction_tick(m);
    if (m) {
        mc_master_promotion_tick(m);
        mc_offload_census_step(m, 1); /* master_disk_only_key_count, one shard a tick */
        mc_holder_stream_tick(m);     /* the flush interval's commits to their holders */
    }
    return n;
}

int mc_master_eviction_wait(struct mc_master *m, uint64_t timeout_ms)
{
    if (!m || m->evict_wake_fd < 0)
        return 0;
    struct pollfd p = {.fd = m->evict_wake_fd, .events = POLLIN};
    int ms = timeout_ms > INT32_MAX ? INT32_MAX : (int)timeout_ms;
    if (poll(&p, 1, ms) <= 0)
        return 0;
    uint64_t v;
    return read(m->evict_wake_fd, &v, sizeof(v)) == (ssize_t)sizeof(v) ? 1 : 0;
}

void mc_master_eviction_wake(struct mc_master *m)
{
    if (!m || m->evict_wake_fd < 0)
        return;
    uint64_t one = 1;
    ssize_t w = write(m->evict_wake_fd, &one, sizeof(one));
    (void)w;
}
