/*
 * lock_order.h - the lock order of the master core and of the client, asserted per thread in
 * checking builds.
 *
 * Master (DESIGN.md §7): client registry → shards ascending → segment table (rwlock) → one
 * segment's allocator → mailbox table → one mailbox. The discard list and the group route
 * stripes are leaves: nothing is taken while one is held, and only one is held at a time.
 *
 * Client (docs/design.md "Locks and their order"): a disk store's s->mu → its ring pool
 * (s->pool_mu) → its fault hook (s->faults.mu); the tcp transport's peer table (t->lock), the
 * disk tier's t->mu, the peer server's segment table (ps->lock), the master link's lock, the
 * worker's mu and its promotion pool's mu are leaves. Master and client
 * levels never nest in one thread (they talk over RPC); a process that runs both (the tests) checks
 * each thread against the one order below.
 *
 * Common (both sides): an RPC client's connect_lock → its send_lock → its lock
 * (rpc_client_internal.h) come after every level above, because callers hold their own locks
 * while they call (the master link's, a transport's peer table): nothing of the levels above is
 * taken under them, and one thread holds the locks of one RPC client at a time. The fanout
 * pool's lock (fanout.c) is a leaf. A client's registered-buffer list (buf_lock) is taken
 * before its RDMA context's memory-region table (mr_lock), a leaf: the data path looks keys up
 * in it under whatever it holds. The rdma transport's other locks (its peer table and
 * counters, its staging slots, its re-registration state, the listener's accepted list) are
 * the last leaves.
 *
 * With MC_LOCK_ORDER_CHECK defined (test and Debug builds, see the top CMakeLists.txt) every
 * thread keeps the levels it holds, in acquisition order, in a small thread-local stack (kept
 * out of line in lock_order.c, so all files share one per thread). Call mc_lo_acquire(level,
 * idx) before taking a lock and mc_lo_release(level, idx) after dropping it; idx tells shards
 * (and disk stores) apart and is 0 elsewhere. Acquisition checks only the top of the stack:
 * since every push is checked, the stack is ascending and its top is the highest level held. A
 * lock may be taken when its level is above the top's, or when both are shards and its index is
 * above the top's (several shards only in ascending order). Anything else, a release of a lock
 * not held, or more than 64 locks, prints one line naming both locks on stderr and aborts: these
 * are programming errors, and a debug build should stop at the first one rather than deadlock
 * later. mc_lo_holds(level, idx, write) says whether this thread holds that lock (for writing when
 * write; mc_lo_acquire_write records a shard's write lock): the `_locked`
 * functions assert it (MC_ASSERT, common/mc_assert.h).
 *
 * Without MC_LOCK_ORDER_CHECK every function here is an empty static inline: zero cost.
 */
#ifndef MC_COMMON_LOCK_ORDER_H
#define MC_COMMON_LOCK_ORDER_H

#include <stdbool.h>
#include <stdint.h>

enum mc_lo_level {
    /* master core */
    MC_LO_REGISTRY = 1, /* struct mc_clients.lock (clients.h) */
    MC_LO_SHARD = 2,    /* struct mc_shard.lock; idx = shard index */
    MC_LO_SEGTABLE = 3, /* struct mc_segments.lock */
    MC_LO_SEGMENT = 4,  /* struct mc_segment.lock (its allocator) */
    MC_LO_MAILBOX_TABLE = 5,
    MC_LO_MAILBOX = 6,
    MC_LO_LEAF = 7, /* discard list, group route stripes */
    /* client */
    MC_LO_DISK_STORE = 10,  /* struct mc_disk_store.mu; idx = the store's lo_idx */
    MC_LO_DISK_POOL = 11,   /* struct mc_disk_store.pool_mu (the ring pool) */
    MC_LO_DISK_FAULTS = 12, /* struct mc_disk_store.faults.mu (fault injection) */
    MC_LO_TCP_PEERS = 13,   /* the tcp transport's peer table (transport_tcp.c) */
    MC_LO_DISK_TIER = 14,   /* struct mc_disk_tier.mu (stats, serve queue): a leaf */
    MC_LO_MASTER_LINK = 16, /* struct mc_master_conn.lock (segments, counters, ping wake): a leaf */
    MC_LO_WORKER = 17,      /* struct mc_worker.mu (stats, stop): a leaf */
    MC_LO_PROMO_POOL = 18,  /* struct mc_promote_pool.mu (the promotion job queue): a leaf */
    MC_LO_PEER_SEGS = 15,   /* the peer server's segment table rwlock (peer_server.c): a leaf;
                             * idx = the server's lo_idx */
    MC_LO_CLIENT_BUFS = 19, /* struct mc_client.buf_lock (registered buffers); idx = 0 */
    /* common */
    MC_LO_RPC_CONNECT = 20, /* struct mc_rpc_client.connect_lock; idx = the client's lo_idx */
    MC_LO_RPC_SEND = 21,    /* struct mc_rpc_client.send_lock; idx = the client's lo_idx */
    MC_LO_RPC = 22,         /* struct mc_rpc_client.lock; idx = the client's lo_idx */
    MC_LO_FANOUT = 23,      /* the fanout pool's lock (fanout.c): a leaf */
    MC_LO_RDMA_MR = 24,     /* struct rdma_ctx.mr_lock (rdma_mr.c): a leaf; idx = the
                             * context's lo_idx */
    MC_LO_RDMA_LEAF = 25,   /* the rdma transport's t->lock, staging_lock, rr.lock and the
                             * listener's lock: leaves, one at a time; idx = 0 */
};

/* idx values of MC_LO_LEAF locks whose `_locked` functions assert that very lock (the other
 * leaves use 0; only one leaf is ever held, so idx only makes mc_lo_holds exact). */
#define MC_LO_LEAF_UPSERTS 1u /* the Upsert reservation table (upsert.c) */

#ifdef MC_LOCK_ORDER_CHECK

/* Out of line (lock_order.c): checking builds only, where speed does not matter. */
void mc_lo_acquire(enum mc_lo_level level, uint32_t idx);
void mc_lo_release(enum mc_lo_level level, uint32_t idx);
/* As mc_lo_acquire, for a write (exclusive) lock of a rwlock (mc_lo_holds tells the modes
 * apart). */
void mc_lo_acquire_write(enum mc_lo_level level, uint32_t idx);
/* Whether this thread holds the lock (level, idx), for writing when write (MC_ASSERT in _locked
 * code). */
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
