/*
 * master_state.h - the bottom floor of the master core: struct mc_master (configuration, clock,
 * epoch, the modules' state pointers, the object events' subscriber table) and its statistics
 * counters.
 *
 * Every module of the core receives a struct mc_master; each owns its private layout in its own
 * header and hangs it here by pointer, so this header includes no module's header: the floors
 * (docs/design.md "Floors of the master core", scripts/check_floors.py) start here.
 *
 * Lock order (DESIGN.md §7): client registry → shards ascending → segment table → one
 * segment's allocator → mailbox table → one mailbox; the group route map, the discard list and
 * the slab pool are leaves.
 */
#ifndef MC_MASTER_STATE_H
#define MC_MASTER_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "common/clock.h"
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
struct mc_clients;
struct mc_discard_list;
struct mc_delwait;
struct mc_holder_stream;
struct mc_recovery;
struct mc_obj_subscriber;

/* The subscriber table of object_events.h: per event, its subscribers in order (written by
 * mc_master_new only). */
#define MC_OBJ_EV_SLOTS 16
#define MC_OBJ_SUBS_MAX 4
struct mc_obj_events_tab {
    uint8_t n[MC_OBJ_EV_SLOTS];
    const struct mc_obj_subscriber *sub[MC_OBJ_EV_SLOTS][MC_OBJ_SUBS_MAX];
};

struct mc_master {
    struct mc_master_config cfg;
    const struct mc_clock *clock;
    uint64_t epoch;
    uint64_t version_base; /* mc_master_version_base */
    struct mc_segments *segs;
    struct mc_shard *shards; /* MC_NSHARDS */
    _Atomic uint64_t next_version;
    _Atomic uint64_t next_replica_id;
    _Atomic bool need_eviction; /* a PutStart failed for space */
    int evict_wake_fd; /* an eventfd (-1: none): written when need_eviction is armed, so the
                        * eviction loop runs at once, not at its next tick */
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

    struct mc_clients *clients;      /* the client registry (clients.h) */
    struct mc_discard_list *discard; /* unlinked objects awaiting their release time (discard.h) */
    struct mc_delwait *delwait;      /* the delete rule's waiting Removes (delwait.h; NULL
                                      * without the LOCAL_DISK tier) */
    struct mc_obj_events_tab events; /* the object events' subscribers (object_events.h) */

    /* grouped keys: key hash → shard (so a Get without the group id finds the key) */
    _Atomic uint64_t grouped_keys;
    struct mc_route_stripe *routes;

    uint64_t next_soft_pin_sweep_ms;
    _Atomic uint64_t reaper_shard_locks; /* shards the reaper write-locked (tests read it) */

    struct mc_holder_stream *hstream; /* the DRAM holders' stream (holder_stream.h; NULL: off) */
    struct mc_fences *own_fences;     /* the stream's fences when there is no offload (fence.h) */
    struct mc_recovery *recovery;     /* the recovery window (tombstone.h): offload's, else the
                                       * stream's; NULL with neither */
};

/* A PutStart refused for space asks for one eviction cycle and wakes the eviction loop
 * (mc_master_eviction_wait) when the request was not armed already: one write per request. */
static inline void mc_master_want_eviction(struct mc_master *m)
{
    if (atomic_exchange_explicit(&m->need_eviction, true, memory_order_relaxed) ||
        m->evict_wake_fd < 0)
        return;
    uint64_t one = 1;
    ssize_t w = write(m->evict_wake_fd, &one, sizeof(one));
    (void)w; /* EAGAIN: the counter is full, a wake is pending anyway */
}

static inline uint64_t mc_master_now_ms(const struct mc_master *m)
{
    return mc_clock_now_ms(m->clock);
}

#endif
