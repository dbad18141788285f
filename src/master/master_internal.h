/*
 * master_internal.h - struct mc_master, the master core's state, and its statistics counters
 * (private to the master core).
 *
 * The core is a set of modules with one job each, and each owns its private layout in its own
 * header: the object record and the single-object operations (objects.h), the shards, their
 * index and the group route map (shard.h), the record allocator (objslab.h), buffers released
 * after a lock is dropped (freelist.h), the client registry (clients.h), the deferred-free list
 * (discard.h), eviction (eviction_internal.h), offload (offload.h) and promotion
 * (promotion_core.h). This header holds only what ties them together: struct mc_master, which
 * every module receives, and the counters the operations bump. A module or test includes this
 * header and the headers of the modules it uses.
 *
 * Lock order (DESIGN.md §7): client registry → shards ascending → segment table → one
 * segment's allocator → mailbox table → one mailbox; the group route map, the discard list and
 * the slab pool are leaves.
 */
#ifndef MC_MASTER_INTERNAL_H
#define MC_MASTER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"
#include "master/clients.h"
#include "master/discard.h"
#include "master/master.h"

/* Batch operations with upstream's master_batch_<op>_* counter families. */
enum mc_batch_op {
    MC_BATCH_EXIST_KEY,
    MC_BATCH_GET_REPLICA_LIST,
    MC_BATCH_PUT_START,
    MC_BATCH_PUT_END,
    MC_BATCH_PUT_REVOKE,
    MC_BATCH_NOPS
};
/* Per batch op: calls, calls where every item failed, calls where some did, items, failed. */
enum { MC_BF_REQUESTS, MC_BF_FAILURES, MC_BF_PARTIAL, MC_BF_ITEMS, MC_BF_FAILED_ITEMS, MC_BF_N };

/* Statistics kept as plain atomics (exported by GetStats and the metrics registry). */
struct mc_master_counters {
    _Atomic uint64_t batch[MC_BATCH_NOPS][MC_BF_N];
    /* the tables of master_counters.h */
#define MC_CNT_U64(f, ...) _Atomic uint64_t f;
#define MC_CNT_I64(f, ...) _Atomic int64_t f;
    MC_MASTER_GET_COUNTERS(MC_CNT_U64)
    MC_MASTER_CALL_COUNTERS(MC_CNT_U64)
    MC_MASTER_EVICTION_COUNTERS(MC_CNT_U64)
    MC_MASTER_GAUGES(MC_CNT_I64)
#undef MC_CNT_U64
#undef MC_CNT_I64
};

struct mc_route_stripe;
struct mc_segments;
struct mc_shard;
struct mc_metrics;
struct mc_histogram;
struct mc_evictor;
struct mc_offload;
struct mc_promoter;
struct mc_mailboxes;
struct mc_upserts;

struct mc_master {
    struct mc_master_config cfg;
    const struct mc_clock *clock;
    uint16_t epoch;
    uint64_t version_base; /* mc_master_version_base */
    struct mc_segments *segs;
    struct mc_shard *shards; /* MC_NSHARDS */
    _Atomic uint64_t next_version;
    _Atomic uint64_t next_replica_id;
    _Atomic bool need_eviction; /* a PutStart failed for space */
    _Atomic bool sweep_pending; /* an UnmountSegment left replicas on a dead segment: the next
                                 * monitor tick sweeps them (clients.c) */
    struct mc_master_counters c;
    struct mc_metrics *metrics;      /* the master's own registry (upstream metric names) */
    struct mc_histogram *value_size; /* master_value_size_bytes, observed at PutEnd */
    struct mc_evictor *evictor;      /* eviction.c's state (NULL when eviction.c is not linked) */
    struct mc_offload *offload;      /* offload.c's state (NULL unless cfg.enable_offload) */
    struct mc_promoter *promoter;    /* promotion.c's state */
    struct mc_mailboxes *mailboxes;  /* offload's mailbox table (NULL without it) */
    struct mc_upserts *_Atomic upserts; /* upsert.c's reservations (made on first use) */

    struct mc_clients clients;      /* the client registry (clients.h) */
    struct mc_discard_list discard; /* unlinked objects awaiting their release time (discard.h) */

    /* grouped keys: key hash → shard (so a Get without the group id finds the key) */
    _Atomic uint64_t grouped_keys;
    struct mc_route_stripe *routes;

    uint64_t next_soft_pin_sweep_ms;
    _Atomic uint64_t reaper_shard_locks; /* shards the reaper write-locked (tests read it) */
};

static inline uint64_t mc_master_now_ms(const struct mc_master *m)
{
    return mc_clock_now_ms(m->clock);
}

#endif
