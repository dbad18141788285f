/*
 * lock_order.h - the master core's lock order, asserted per thread in checking builds.
 *
 * DESIGN.md §7: client registry → shards ascending → segment table (rwlock) → one segment's
 * allocator → mailbox table → one mailbox. The discard list and the group route stripes are
 * leaves: nothing is taken while one is held, and only one is held at a time.
 *
 * With MC_LOCK_ORDER_CHECK defined (test and Debug builds, see the top CMakeLists.txt) every
 * thread keeps the levels it holds, in acquisition order, in a small thread-local stack (kept
 * out of line in lock_order.c, so all the core's files share one per thread). Call
 * mc_lo_acquire(level, idx) before taking a lock and mc_lo_release(level, idx) after dropping it;
 * idx tells shards apart (and is 0 elsewhere). Acquisition checks only the top of the stack: since
 * every push is checked, the stack is ascending and its top is the highest level held. A lock may
 * be taken when its level is above the top's, or when both are shards and its index is above the
 * top's (several shards only in ascending order). Anything else, a release of a lock not held, or
 * more than 64 locks, prints one line naming both locks on stderr and aborts: these are programming
 * errors, and a debug build should stop at the first one rather than deadlock later.
 *
 * Without MC_LOCK_ORDER_CHECK every function here is an empty static inline: zero cost.
 */
#ifndef MC_MASTER_LOCK_ORDER_H
#define MC_MASTER_LOCK_ORDER_H

#include <stdbool.h>
#include <stdint.h>

enum mc_lo_level {
    MC_LO_REGISTRY = 1, /* struct mc_clients.lock (clients.h) */
    MC_LO_SHARD = 2,    /* struct mc_shard.lock; idx = shard index */
    MC_LO_SEGTABLE = 3, /* struct mc_segments.lock */
    MC_LO_SEGMENT = 4,  /* struct mc_segment.lock (its allocator) */
    MC_LO_MAILBOX_TABLE = 5,
    MC_LO_MAILBOX = 6,
    MC_LO_LEAF = 7, /* discard list, group route stripes */
};

#ifdef MC_LOCK_ORDER_CHECK

/* Out of line (lock_order.c): checking builds only, where speed does not matter. */
void mc_lo_acquire(enum mc_lo_level level, uint32_t idx);
void mc_lo_release(enum mc_lo_level level, uint32_t idx);
/* As mc_lo_acquire, for a shard's write lock (mc_lo_holds tells the modes apart). */
void mc_lo_acquire_write(enum mc_lo_level level, uint32_t idx);
/* Whether this thread holds (level, idx), for writing when write (MC_ASSERT in _locked code). */
bool mc_lo_holds(enum mc_lo_level level, uint32_t idx, bool write);
/* Locks this thread holds now (tests assert 0 after each operation). */
uint32_t mc_lo_depth(void);

#else

static inline void mc_lo_acquire(enum mc_lo_level level, uint32_t idx)
{
    (void)level;
    (void)idx;
}
static inline void mc_lo_release(enum mc_lo_level level, uint32_t idx)
{
    (void)level;
    (void)idx;
}
static inline void mc_lo_acquire_write(enum mc_lo_level level, uint32_t idx)
{
    (void)level;
    (void)idx;
}
/* Without the checker nothing is known: true, so that an MC_ASSERT built without the checker
 * (MC_CHECKS alone) does not fire. */
static inline bool mc_lo_holds(enum mc_lo_level level, uint32_t idx, bool write)
{
    (void)level;
    (void)idx;
    (void)write;
    return true;
}
static inline uint32_t mc_lo_depth(void)
{
    return 0;
}

#endif

#endif
