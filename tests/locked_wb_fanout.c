/* locked_wb_fanout.c - fanout.c's `_locked` functions for test_locked_asserts (locked_wb.h). */
#include "common/fanout.c"

#include <unistd.h>

#include "locked_wb.h"

void wb_fanout_claim_unlocked(void)
{
    struct job j = {.t = 2, .next_slot = 1};
    (void)claim_locked(&j);
}

void wb_fanout_unqueue_unlocked(void)
{
    struct job j = {.t = 2, .next_slot = 1};
    unqueue_locked(&j);
}

void wb_fanout_find_helpers_unlocked(void)
{
    find_helpers_locked(0);
}

/* The three with the pool's lock: a queued job's one offered slot is claimed and leaves the
 * queue; no helper is needed for nothing pending. */
void wb_fanout_all_locked(void)
{
    struct job j = {.t = 2, .next_slot = 1};
    pool_lock();
    j.next = queue;
    queue = &j;
    pending++;
    find_helpers_locked(0);
    size_t slot = claim_locked(&j);
    unqueue_locked(&j); /* already out: a no-op */
    bool gone = queue != &j;
    pool_unlock();
    if (slot != 1 || !gone || mc_lo_depth() != 0)
        _exit(3);
}
