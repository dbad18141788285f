/*
 * master.h - the master core as a library: struct mc_master and the mc_master_* operations.
 *
 * The daemon (main.c) copies its flags into a struct mc_master_config, creates one mc_master,
 * and the RPC adapters (service_*.c) decode a request, call one function here, and encode the
 * result. Tests drive the same functions directly with a fake clock (config.clock) and call the
 * mc_master_tick_* entry points themselves; the library never starts a thread.
 *
 * Conventions:
 *   - every call returns 0 (MC_OK) or a negative code from include/mooncake/errors.h;
 *   - keys are (const char *, size_t) byte strings: 1..max_key_len bytes, no NUL byte;
 *     an empty key, a key longer than max_key_len or one containing NUL gives INVALID_KEY;
 *   - client ids are struct mc_id (zero = no client, INVALID_PARAMS where one is required);
 *   - results go to caller-provided out-structs (no allocation on Get); list calls that must
 *     allocate say so and the caller free()s;
 *   - batch calls return MC_OK when the batch itself was well formed and put one code per item
 *     in rcs[i] (and the item's result in out[i]); INVALID_PARAMS when it was not (NULL arrays
 *     with n > 0).
 *
 * Semantics follow upstream Mooncake Store (shared/reference/upstream-master.md §1-§5) and
 * DESIGN.md §4, §7; differences are noted per call.
 */
#ifndef MC_MASTER_MASTER_H
#define MC_MASTER_MASTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "common/id.h"
#include "master/mailbox.h"
#include "master/master_counters.h"
#include "master/master_types.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mc_master;
struct mc_fences;
struct mc_metrics;

/* ---- configuration ------------------------------------------------------------------------ */

struct mc_master_config {
    /* Time source for every deadline; NULL = mc_clock_system(). Must outlive the master. */
    const struct mc_clock *clock;
    /* true: nobody runs the background loops but the owner, who calls mc_master_tick_*
     * (tests). false: the daemon runs one thread per loop calling the same functions. The
     * library behaves the same either way; the flag is recorded for the daemon. */
    bool manual_ticks;

    uint64_t default_kv_lease_ttl_ms;      /* read lease granted by Get/Exist (10000) */
    uint64_t default_kv_soft_pin_ttl_ms;   /* soft pin TTL when a Put asks for one (30 min) */
    uint64_t max_kv_soft_pin_ttl_ms;       /* upper bound of a requested soft pin TTL (24 h) */
    bool allow_evict_soft_pinned_objects;  /* soft-pinned objects are last-resort victims (true) */
    double eviction_ratio;                 /* fraction freed per eviction cycle (0.05) */
    double eviction_high_watermark_ratio;  /* used ratio that triggers eviction (0.90) */
    uint64_t client_ttl_ms;                /* client liveness without Ping (10 s) */
    uint64_t put_start_discard_timeout_ms; /* an unfinished Put older than this is taken over by
                                              a new PutStart of the same key (30 s) */
    uint64_t put_start_release_timeout_ms; /* buffers of a discarded/stale Put are freed this
                                              long after its PutStart (600 s; > discard) */
    enum mc_alloc_strategy allocation_strategy; /* MC_ALLOC_RANDOM */
    uint32_t max_key_len;                       /* 4096; at most 65535 */
    /* Master epoch (Ping's view_version): changes when the master restarts. 0 = derive one
     * from the wall clock at mc_master_new. */
    uint64_t epoch;
    /* Wall-clock time source (ns since the Unix epoch), read once by mc_master_new to seed the
     * object versions; NULL = CLOCK_REALTIME. Must outlive mc_master_new only. */
    const struct mc_clock *wall_clock;

    /* Eviction (src/master/eviction.c): selective materialisation limits and census threads. */
    uint32_t eviction_reserve_min;  /* 1024 */
    uint32_t eviction_frontier_min; /* 65536 */
    uint32_t eviction_threads;      /* 0 = implementation default */

    /* Object records in 2 MiB transparent huge pages where the kernel allows (true): process-wide,
     * set by the last mc_master_new (objslab.h, mc_objslab_set_huge_pages). */
    bool object_huge_pages;

    /* LOCAL_DISK tier (src/master/offload.c, DESIGN.md §7 "Offload modes"). Without
     * enable_offload, MountLocalDiskSegment answers UNABLE_OFFLOAD and nothing is offloaded.
     *   enable_offload alone            mode A: an offload task is queued at PutEnd;
     *   + offload_on_evict              mode B: queued when eviction picks the object (one
     *                                   MEMORY replica pinned until the disk copy exists; the
     *                                   object stays in DRAM when no mailbox takes the task);
     *   + offload_force_evict           mode C: once offloading_queue_limit x offload_cap_ratio
     *                                   tasks were queued in one eviction cycle (or a push is
     *                                   refused) objects are evicted without offload.
     * offload_on_evict without enable_offload is INVALID_PARAMS; offload_force_evict without
     * offload_on_evict is ignored (a warning; mode A). Offload tasks expire after
     * put_start_release_timeout (the pin is released). */
    bool enable_offload;
    bool offload_on_evict;
    bool offload_force_evict;
    double offload_cap_ratio;        /* 0.5; in [0,1] */
    uint32_t offloading_queue_limit; /* 50000 offload tasks per holder (queued + in flight) */
    uint32_t delete_queue_limit;     /* 1000000 disk-record delete tasks per holder not yet
                                      * pulled (0: no limit); its own bound, not the offload one */
    /* The delete rule (DESIGN.md §7): a Remove waits for every live holder of the key's disk
     * copies to acknowledge its delete; a holder silent this long is fenced (its copies at or
     * below the fence version are void) and the Remove completes. 0 = 2000. */
    uint64_t holder_delete_timeout_ms;
    /* After a (re)start, a holder's first registration recreates objects from its disk
     * records only within this long of the master's start; removals made meanwhile are
     * remembered so that a slower holder's older record of a removed key is refused
     * (tombstone.h). 0 = 60000. */
    uint64_t disk_recovery_window_ms;
    /* The DRAM holders' stream (holder_stream.h): commits and drops of the replicas in each
     * holder's segments, for its holder index. */
    bool holder_stream;             /* true */
    uint32_t holder_index_flush_ms; /* parked polls woken at most this often (10) */
    uint32_t holder_backlog_limit;  /* items waiting per holder; past it its index is fenced
                                     * (1000000; 0 = no limit) */

    /* Promotion on hit (src/master/promotion.c, promotion.h). The daemon turns it off unless
     * offload is on (a LOCAL_DISK replica only exists then). */
    bool promotion_on_hit;                  /* false */
    uint32_t promotion_admission_threshold; /* sketch count that admits (2; clamped to 1..255) */
    uint32_t promotion_batch_admission_threshold; /* the same for the keys of a BatchGet of
                                                     more than one key (12; 0 = the one above;
                                                     clamped to 1..255; promotion.h) */
    uint64_t promotion_queue_limit;               /* tasks in flight, all shards together (50000) */
    uint32_t promotion_max_per_heartbeat;         /* tasks one heartbeat hands out (32; 0 = 1) */
    uint64_t promotion_task_timeout_ms;           /* reaped this long after admission or AllocStart
                                                     (30 s; 0 = 30 s) */
};

/* Fills c with the defaults above (upstream's flag defaults; upstream has no batch promotion
 * threshold, its BatchGet uses promotion_admission_threshold). */
void mc_master_config_init(struct mc_master_config *c);

/* Creates a master. INVALID_PARAMS for an inconsistent config (ratios outside [0,1],
 * default soft pin TTL > max, release timeout <= discard timeout, max_key_len 0 or > 65535);
 * INTERNAL_ERROR when out of memory. */
int mc_master_new(const struct mc_master_config *c, struct mc_master **out);
/* Frees everything. No call may be in flight. */
void mc_master_free(struct mc_master *m);

uint64_t mc_master_epoch(const struct mc_master *m);
/* High availability (ha.h): this master won the election with epoch (the leader key's
 * create_revision). Sets the epoch Ping reports, raises the version base to the wall clock's
 * now (a standby's base dates from its start, maybe before the old leader's) and reopens the
 * disk recovery window. Call it before the master serves anything (a standby serves nothing). */
void mc_master_take_over(struct mc_master *m, uint64_t epoch);
/* The delete rule's holder fences (fence.h), NULL without enable_offload: HA keeps them in
 * etcd (ha_fence.h). */
struct mc_fences *mc_master_fences(struct mc_master *m);

/* Object versions: version = (wall-clock ms at mc_master_new since 2020-01-01) << 21, plus one
 * per PutStart. The high bits are the incarnation's start time, so a restarted master issues
 * versions above every version of the ones before it as long as the wall clock moved forward
 * between the starts (and no incarnation issued 2^21 versions per millisecond it lived).
 * Every version this incarnation issues is above mc_master_version_base: a version at or below
 * it was issued by an earlier incarnation (or another master). */
#define MC_VERSION_SEQ_BITS 21
#define MC_VERSION_EPOCH_UNIX_MS 1577836800000ull /* 2020-01-01T00:00:00Z */
uint64_t mc_master_version_base(const struct mc_master *m);
const struct mc_master_config *mc_master_config_get(const struct mc_master *m);

/* ---- clients and segments ----------------------------------------------------------------- */

struct mc_ping_result {
    int64_t view_version; /* changes when the master restarts (= epoch) */
    enum mc_client_status status;
};

/* Refreshes the client's liveness. A client the master does not know (first contact, or any
 * client after a master restart) is registered with status NEED_REMOUNT: it answers with
 * ReMountSegment (possibly with no segments) and is OK from then on. */
int mc_master_ping(struct mc_master *m, struct mc_id client, struct mc_ping_result *out);

/* Mounts a DRAM segment (segments.h rules; idempotent for the same id, base and size).
 * Registers the client (status OK) if it is new and refreshes its liveness. On OK,
 * *mount_epoch (may be NULL) is the mount's epoch (DESIGN.md §6): fresh, never 0 and never
 * reused by this master, for every mount that (re)creates the segment; the current one for an
 * idempotent repeat. Every MEMORY descriptor of the segment carries it. Errors:
 * INVALID_PARAMS, ILLEGAL_CLIENT (segment id owned by another client),
 * SEGMENT_ALREADY_EXISTS (same id, other base/size). */
int mc_master_mount_segment(struct mc_master *m, struct mc_id client,
                            const struct mc_segment_desc *seg, uint64_t *mount_epoch);

/* After a master restart or the client's expiry (Ping said NEED_REMOUNT): mounts each listed
 * segment that is not mounted yet (already-mounted ones are fine), then marks the client OK.
 * n may be 0. mount_epochs (may be NULL) gets n entries: segment i's epoch, as
 * mc_master_mount_segment gives it. The first failing segment's code is returned; segments
 * before it stay mounted and the client stays NEED_REMOUNT, so the client retries. */
int mc_master_remount_segments(struct mc_master *m, struct mc_id client,
                               const struct mc_segment_desc *segs, size_t n,
                               uint64_t *mount_epochs);

/* Unmounts a segment: no new replica lands there and its replicas stop being readable at once
 * (Get/Exist/QueryKey skip them, an object left with none is OBJECT_NOT_FOUND to Get, QueryKey
 * and PutEnd, and its key can be Put again). The sweep that drops those replicas from the table and
 * erases the objects left with none is not done here (it walks every shard; this runs on an RPC I/O
 * thread) but by the next mc_master_tick_monitor; the segment's allocator is freed when the
 * last replica on it is gone. Idempotent (unknown id: OK). ILLEGAL_CLIENT when another client
 * mounted it. */
int mc_master_unmount_segment(struct mc_master *m, struct mc_id client, struct mc_id segment_id);

/* Admin: every mounted segment with its usage. *out is malloc'ed (free()), may be NULL if n 0. */
int mc_master_list_segments(struct mc_master *m, struct mc_segment_info **out, size_t *n);

/* ---- puts --------------------------------------------------------------------------------- */

/* Upstream's ReplicateConfig (the fields this implementation supports). */
struct mc_master_replicate_config {
    uint32_t replica_num; /* MEMORY replicas wanted, 1..MC_MAX_REPLICAS (default 1) */
    bool with_soft_pin;   /* soft pin the object (upstream soft_pin_action ENABLE) */
    uint64_t
        soft_pin_ttl_ms; /* 0 = default_kv_soft_pin_ttl; > max_kv_soft_pin_ttl: INVALID_PARAMS */
    bool with_hard_pin;  /* never evicted */
    const char *const *preferred_segments; /* segment names tried first, in order */
    size_t n_preferred;
    const char *group_id; /* optional: group members share a shard, leases and eviction */
    size_t group_id_len;  /* 0 = no group; at most MC_GROUP_ID_MAX - 1 bytes, no NUL */
};
/* Defaults: one replica, no pins, no preference, no group. */
static inline void mc_master_replicate_config_init(struct mc_master_replicate_config *c)
{
    *c = (struct mc_master_replicate_config){.replica_num = 1};
}

struct mc_put_start_result {
    uint64_t version;   /* mc_master_version_base + sequence; increases with every PutStart */
    uint32_t nreplicas; /* >= 1; may be fewer than asked (upstream's partial placement) */
    struct mc_replica_desc replicas[MC_MAX_REPLICAS]; /* status PROCESSING */
};

/* Starts a Put of size bytes: places the replicas and records the object as PROCESSING (not
 * readable). Errors: INVALID_KEY, INVALID_PARAMS (size 0 or >= 2^40, replica_num 0 or too large,
 * soft pin TTL above max, bad group id, zero client), OBJECT_ALREADY_EXISTS (the key has a COMPLETE
 * replica, or a Put of it started less than put_start_discard_timeout ago; an older unfinished
 * Put is taken over: its buffers are freed put_start_release_timeout after its start),
 * NO_AVAILABLE_HANDLE (no space: also raises the need-eviction flag). */
int mc_master_put_start(struct mc_master *m, struct mc_id client, const char *key, size_t key_len,
                        uint64_t size, const struct mc_master_replicate_config *cfg,
                        struct mc_put_start_result *out);

/* Completes a Put: its replicas become COMPLETE (readable), the value CRC32C is recorded
 * (has_crc false: none known), a requested soft pin starts now, and the object gets a
 * zero-length read lease (lease = now, upstream's GrantReadLease(0)): the lease deadline is its
 * last access, so never-read objects are evicted in PutEnd order among the read ones.
 * version is the one PutStart returned (0 = do not check, as the proto says). Errors:
 * INVALID_KEY, OBJECT_NOT_FOUND, INVALID_VERSION (the key's record has another version: e.g.
 * the Put was taken over by a newer PutStart; nothing changes), ILLEGAL_CLIENT (not the client
 * that started the Put, also once it is complete). Idempotent: the owner ending a completed
 * object again gets OK. */
int mc_master_put_end(struct mc_master *m, struct mc_id client, const char *key, size_t key_len,
                      uint64_t version, uint32_t crc32c, bool has_crc);

/* Abandons a Put: its buffers are freed and the object erased. version as for PutEnd. Errors:
 * INVALID_KEY, OBJECT_NOT_FOUND, INVALID_VERSION (another version: nothing changes),
 * ILLEGAL_CLIENT (not the Put's owner), INVALID_WRITE (the object is not being Put, e.g.
 * already completed). */
int mc_master_put_revoke(struct mc_master *m, struct mc_id client, const char *key, size_t key_len,
                         uint64_t version);

struct mc_key_ref {
    const char *data;
    size_t len;
};

/* Batch forms: one PutStart/End/Revoke per key with the same config. crcs may be NULL (no CRC
 * for any key); versions may be NULL (no version check for any key; a 0 entry: none for that
 * key). */
int mc_master_batch_put_start(struct mc_master *m, struct mc_id client,
                              const struct mc_key_ref *keys, const uint64_t *sizes, size_t n,
                              const struct mc_master_replicate_config *cfg,
                              struct mc_put_start_result *out, int *rcs);
int mc_master_batch_put_end(struct mc_master *m, struct mc_id client, const struct mc_key_ref *keys,
                            const uint64_t *versions, const uint32_t *crcs, size_t n, int *rcs);
int mc_master_batch_put_revoke(struct mc_master *m, struct mc_id client,
                               const struct mc_key_ref *keys, const uint64_t *versions, size_t n,
                               int *rcs);

/* ---- reads -------------------------------------------------------------------------------- */

struct mc_get_result {
    uint64_t version;
    uint64_t size;
    uint32_t crc32c;
    bool has_crc;
    uint64_t lease_ttl_ms; /* the lease just granted (default_kv_lease_ttl) */
    uint32_t nreplicas;    /* readable replicas, in stored order */
    struct mc_replica_desc replicas[MC_MAX_REPLICAS];
};

/* Readable replicas (COMPLETE, on a mounted segment / a live holder) of a key, and a read
 * lease of default_kv_lease_ttl on it (on every member when it belongs to a group). Makes no
 * allocation. Errors: INVALID_KEY, OBJECT_NOT_FOUND (absent, or no replica left),
 * REPLICA_IS_NOT_READY (being Put, nothing readable yet). */
int mc_master_get_replica_list(struct mc_master *m, const char *key, size_t key_len,
                               struct mc_get_result *out);
/* Keys are grouped by shard, each shard read-locked once. */
int mc_master_batch_get_replica_list(struct mc_master *m, const struct mc_key_ref *keys, size_t n,
                                     struct mc_get_result *out, int *rcs);
/* The same for callers that must not hold a full mc_get_result per key (an RPC reply sized by
 * what is there, not by MC_MAX_REPLICAS): keys are answered in windows of up to `window` keys
 * into out[0..window) and rcs[0..window), and after each window emit(arg, first, cnt, out, rcs)
 * runs with no master lock held (first = index of out[0] in keys). A non-zero return from emit
 * stops the batch and is returned. Counted as one batch call of n keys. */
typedef int (*mc_batch_get_emit_fn)(void *arg, size_t first, size_t cnt,
                                    const struct mc_get_result *out, const int *rcs);
int mc_master_batch_get_replica_list_windowed(struct mc_master *m, const struct mc_key_ref *keys,
                                              size_t n, size_t window, struct mc_get_result *out,
                                              int *rcs, mc_batch_get_emit_fn emit, void *arg);

/* *exists = the key has a readable replica; true grants the read lease. INVALID_KEY only. */
int mc_master_exist_key(struct mc_master *m, const char *key, size_t key_len, bool *exists);
int mc_master_batch_exist_key(struct mc_master *m, const struct mc_key_ref *keys, size_t n,
                              bool *exists, int *rcs);

/* ---- removal ------------------------------------------------------------------------------ */

/* Erases a key and frees its buffers. Errors: INVALID_KEY, OBJECT_NOT_FOUND, OBJECT_HAS_LEASE
 * (lease active and !force), REPLICA_IS_NOT_READY (being Put — even with force),
 * OBJECT_HAS_REPLICATION_TASK (a replica is pinned by an offload/promotion task and !force).
 * Forced under an active lease, the key goes at once but its buffers stay allocated until the
 * lease ends (the reaper frees them then): a reader inside its lease never sees reused bytes.
 * The same holds for RemoveAll with force. */
int mc_master_remove(struct mc_master *m, const char *key, size_t key_len, bool force);
int mc_master_batch_remove(struct mc_master *m, const struct mc_key_ref *keys, size_t n, bool force,
                           int *rcs);
/* Erases every object that is complete and (force or lease expired); *removed = count. */
int mc_master_remove_all(struct mc_master *m, bool force, uint64_t *removed);

/* The delete rule (DESIGN.md §7 "The delete rule"). The calls above erase at once and queue
 * the deletes of the disk copies without waiting for them (the deletes are still tracked: a
 * holder that does not acknowledge in time is fenced). The forms below are what the RPCs use:
 * the object is erased at once (invisible to Gets, and to re-registration while the deletes are
 * outstanding), and the answer waits until every live holder of its LOCAL_DISK copies has
 * acknowledged the delete durable (mc_master_offload_ack_deletes) or was fenced by
 * mc_master_tick_offload after holder_delete_timeout. They return MC_MASTER_PENDING when they
 * wait: done(arg, rc) is then called exactly once, later, from the thread of the ack or of the
 * tick, with no master lock held. Otherwise they return the answer now and never call done.
 * A delete that cannot be queued (a holder's delete queue is full) fails that key's Remove with
 * TASK_PENDING_LIMIT_EXCEEDED; the object stays. */
#define MC_MASTER_PENDING 1
typedef void (*mc_master_done_fn)(void *arg, int rc);
int mc_master_remove_wait(struct mc_master *m, const char *key, size_t key_len, bool force,
                          mc_master_done_fn done, void *arg);
/* rcs are final when this returns; done only says the deletes are settled (rc MC_OK). */
int mc_master_batch_remove_wait(struct mc_master *m, const struct mc_key_ref *keys, size_t n,
                                bool force, int *rcs, mc_master_done_fn done, void *arg);
/* *removed is final when this returns. */
int mc_master_remove_all_wait(struct mc_master *m, bool force, uint64_t *removed,
                              mc_master_done_fn done, void *arg);

/* ---- admin -------------------------------------------------------------------------------- */

struct mc_key_info {
    uint64_t version;
    uint64_t size;
    uint32_t crc32c;
    bool has_crc;
    bool complete;                  /* false while being Put */
    struct mc_id put_owner;         /* while being Put */
    uint64_t lease_remaining_ms;    /* 0 = no active lease */
    uint64_t soft_pin_remaining_ms; /* 0 = not soft pinned */
    bool hard_pinned;
    char group_id[MC_GROUP_ID_MAX]; /* "" = none */
    bool offload_pending;           /* an offload task exists (one MEMORY replica pinned) */
    uint32_t nreplicas; /* every replica whose storage is still there (segment mounted, holder
                         * alive), any status */
    struct mc_replica_desc replicas[MC_MAX_REPLICAS];
};

/* QueryKey: the whole record of a key, no lease, no side effects. OBJECT_NOT_FOUND if absent
 * or if every replica's storage is gone (an unmounted segment, awaiting the monitor's sweep). */
int mc_master_query_key(struct mc_master *m, const char *key, size_t key_len,
                        struct mc_key_info *out);

struct mc_master_stats {
    /* gauges first (clamped at 0), then the counters (master_counters.h) */
#define MC_STAT_U64(f, ...) uint64_t f;
    MC_MASTER_GAUGES(MC_STAT_U64)
    uint64_t total_capacity_bytes;
    uint64_t allocated_bytes;
    double used_ratio;
    uint64_t segment_count;
    uint64_t active_clients;
    MC_MASTER_CALL_COUNTERS(MC_STAT_U64)
    MC_MASTER_EVICTION_COUNTERS(MC_STAT_U64)
#undef MC_STAT_U64
};

/* GetStats: a snapshot of the counters and gauges above. */
void mc_master_get_stats(struct mc_master *m, struct mc_master_stats *out);

/* The master's own metrics registry (common/metrics.h), upstream metric names (DESIGN §10).
 * Rendered by the daemon's /metrics endpoint. */
struct mc_metrics *mc_master_metrics(struct mc_master *m);

/* ---- LOCAL_DISK tier and offload (offload.c; DESIGN.md §7, §11) -------------------------- */

/* Every call here answers UNABLE_OFFLOAD when the master runs without cfg.enable_offload.
 *
 * A *holder* is a client that mounted a LOCAL_DISK segment: its SSD keeps copies of objects as
 * LOCAL_DISK replicas {holder id, holder endpoint, size}, listed by Get/BatchGet/QueryKey
 * (disk-only objects stay readable) and never counted as evictable DRAM. Each holder has one
 * mailbox (mailbox.h) for its tasks: MC_TASK_OFFLOAD (copy key, at this version, from the
 * holder's own DRAM segment to its SSD; one MEMORY replica of the object stays pinned until the
 * holder reports, the task expires after put_start_release_timeout or is cancelled) and
 * MC_TASK_DELETE (drop the disk record of key, any version <= version: the object was removed).
 *
 * Versions (never serve stale bytes): a LOCAL_DISK replica is attached only to the object
 * version it holds. An offload report or a re-registered disk record of another version is
 * refused (a non-zero per-item status: the holder deletes that record); an absent object is
 * recreated from a re-registered record only if the record's version is at or below
 * mc_master_version_base (written before this master incarnation started). */

/* Registers client as a holder reachable at endpoint ("host:port" of its peer server,
 * < MC_ENDPOINT_MAX bytes), opens its mailbox and refreshes its liveness (an unknown client
 * is registered as by Ping). capacity_bytes: its SSD budget (0 = unknown).
 * enable_offloading false: a holder that serves reads but takes no offload task. Idempotent;
 * a repeat with another endpoint moves the holder's replicas to the new endpoint (a restarted
 * holder). Errors: UNABLE_OFFLOAD, INVALID_PARAMS. */
int mc_master_mount_local_disk(struct mc_master *m, struct mc_id client, const char *endpoint,
                               uint64_t capacity_bytes, bool enable_offloading);
/* Deregisters the holder: its mailbox is closed (tasks cancelled, pins released) and its
 * LOCAL_DISK replicas stop being readable at once (dropped by the next monitor tick; objects
 * left with none are erased). Idempotent (OK for an unknown client). UNABLE_OFFLOAD,
 * INVALID_PARAMS. Holder expiry (the monitor) does the same. */
int mc_master_unmount_local_disk(struct mc_master *m, struct mc_id client);

/* Tasks handed out per heartbeat at most (also when max_items is 0 or above it). */
#define MC_OFFLOAD_MAX_PER_HEARTBEAT 1024u

/* OffloadObjectHeartbeat, a long-poll: reply(arg, tasks) is called exactly once, with no master
 * lock held, with at most max_items tasks (0 = MC_OFFLOAD_MAX_PER_HEARTBEAT): queued deletes
 * (MC_TASK_DELETE) when there are any, alone, so the holder applies and acknowledges them before
 * other work; else offload tasks (MC_TASK_OFFLOAD), oldest first; the callee owns the list
 * (mc_task_list_free). Answered at once (returns 1) when tasks are queued or wait_ms is 0;
 * otherwise parked (returns 0) until a delete or an offload task arrives (answered by the thread
 * that queued it, once that thread dropped its locks) or wait_ms passes (answered empty by
 * mc_master_tick_offload).
 * Offload tasks handed out stay in flight until mc_master_notify_offload, expiry or
 * cancellation. enable_offloading false: the holder's queued offload tasks are cancelled (pins
 * released), it is given no new ones until a heartbeat says true again, and only deletes are
 * returned (at once). Errors (reply not called): UNABLE_OFFLOAD, INVALID_PARAMS,
 * SEGMENT_NOT_FOUND (client is not a holder). */
int mc_master_offload_heartbeat(struct mc_master *m, struct mc_id client, bool enable_offloading,
                                uint32_t max_items, uint32_t wait_ms, mc_mailbox_reply_fn reply,
                                void *arg);

/* The holder client acknowledged delete tasks ids (each one's dead mark is durable on its disk):
 * the Removes waiting for them complete before this returns. Unknown ids (settled already, a
 * master restart) are ignored. Returns how many were settled, or UNABLE_OFFLOAD /
 * INVALID_PARAMS. */
int mc_master_offload_ack_deletes(struct mc_master *m, struct mc_id client, const uint64_t *ids,
                                  size_t n);

/* One item of NotifyOffloadSuccess: the report of one offload task, or (reregister) one disk
 * record found by the holder's start-up scan (task_id 0). */
struct mc_offload_result {
    uint64_t task_id;
    const char *key;
    size_t key_len;
    int32_t status; /* 0 = stored; non-zero = NACK (task dropped, pin released) */
    uint64_t size;
    uint64_t version;
    uint32_t crc32c;
    bool crc_valid;
};

/* NotifyOffloadSuccess. Per item, rcs[i]:
 *   task form (reregister false): the in-flight task task_id of this holder is finished and its
 *   pin released whatever the outcome. NACK: MC_OK. Stored: MC_OK and a COMPLETE LOCAL_DISK
 *   replica attached when key, version (task's = report's = object's current), size and CRC
 *   (when both sides know one) match; otherwise the record must be deleted by the holder:
 *   TASK_NOT_FOUND (expired, cancelled or unknown task), INVALID_VERSION (the object was
 *   removed or re-Put since), INVALID_PARAMS (key or size differ), CHECKSUM_MISMATCH.
 *   re-registration (reregister true; status must be 0): MC_OK when the record's version is the
 *   object's current one (replica attached, or already there), or when the object is absent and
 *   the version is at or below mc_master_version_base (the object is recreated, disk-only, with
 *   that version, size and CRC, no lease); else INVALID_VERSION (another version exists),
 *   OBJECT_NOT_FOUND (absent, and written by this incarnation: it was removed),
 *   CHECKSUM_MISMATCH, INVALID_PARAMS / INVALID_KEY (bad item) — delete the record.
 * An object that has MC_MAX_REPLICAS already gets INVALID_REPLICA. Returns MC_OK for a
 * well-formed call; UNABLE_OFFLOAD, INVALID_PARAMS, SEGMENT_NOT_FOUND (not a holder now: its
 * mounted registration is gone) for the whole call. */
int mc_master_notify_offload(struct mc_master *m, struct mc_id client,
                             const struct mc_offload_result *items, size_t n, bool reregister,
                             int *rcs);

/* Re-registration of holder client's disk records (NotifyOffloadSuccess with reregister; the
 * reregister form of mc_master_notify_offload is this call with complete false and no versions).
 * Per item as above, except that where the record and the object differ in version the higher
 * one wins: a record newer than an object recreated from an older record of another holder
 * (both from before this incarnation, in the holder's first registration) replaces it — the
 * older copy is dropped and its holder gets a delete. versions (may be NULL): per item, the
 * key's version at the master after the call, 0 when it has none; a holder deletes a refused
 * record only when that is 0 or not below the record's version. complete: this call ends a
 * complete listing of the holder's records (every call since its last
 * mc_master_mount_local_disk): its LOCAL_DISK replicas that no call of the listing confirmed
 * are dropped (objects left with no replica are erased). */
int mc_master_reregister_disk(struct mc_master *m, struct mc_id client,
                              const struct mc_offload_result *items, size_t n, bool complete,
                              int *rcs, uint64_t *versions);

/* EvictDiskReplica: the holder is about to delete its disk record of key (version 0 = whatever
 * version the object has): its LOCAL_DISK replica of key is dropped (the object is erased when
 * no replica is left). Errors: UNABLE_OFFLOAD, INVALID_PARAMS, INVALID_KEY, OBJECT_NOT_FOUND,
 * INVALID_VERSION (the object has another version: nothing changed), REPLICA_NOT_FOUND (no
 * replica of this holder). Batch form: one code per key in rcs; versions may be NULL. */
int mc_master_evict_disk_replica(struct mc_master *m, struct mc_id client, const char *key,
                                 size_t key_len, uint64_t version);
int mc_master_batch_evict_disk_replica(struct mc_master *m, struct mc_id client,
                                       const struct mc_key_ref *keys, const uint64_t *versions,
                                       size_t n, int *rcs);

/* A holder as ListSegments shows it. */
struct mc_local_disk_info {
    struct mc_id client;
    char endpoint[MC_ENDPOINT_MAX];
    uint64_t capacity_bytes;
    uint64_t used_bytes;    /* object bytes of its LOCAL_DISK replicas */
    uint64_t replica_count; /* its LOCAL_DISK replicas */
    bool enable_offloading;
};
/* Every holder. *out is malloc'ed (free()), NULL when n is 0 (also without enable_offload). */
int mc_master_list_local_disks(struct mc_master *m, struct mc_local_disk_info **out, size_t *n);

struct mc_offload_stats {
    uint64_t queued, completed, nacked, expired, cancelled; /* offload tasks */
    uint64_t refused;          /* pushes no mailbox took (no holder, queue limit, disabled) */
    uint64_t forced_evictions; /* mode C: objects evicted without offload */
    uint64_t in_flight;        /* offload tasks queued or handed out now (= pins) */
    uint64_t reregistered;     /* disk copies re-registration added (each once, not re-listings) */
    uint64_t reregister_refused;
    uint64_t stale_refused;       /* task reports refused (version, CRC, key, size, unknown task) */
    uint64_t deletes_queued;      /* delete tasks pushed (Remove, RemoveAll, drops) */
    uint64_t deletes_acked;       /* of them, acknowledged durable by their holder */
    uint64_t deletes_refused;     /* Removes failed: a delete could not be queued */
    uint64_t holders_fenced;      /* fences recorded (timeout, or no mailbox) */
    uint64_t deletes_outstanding; /* deletes waiting for their holder's ack now */
    uint64_t holders;
    uint64_t file_capacity_bytes;  /* master_total_file_capacity_bytes */
    uint64_t file_allocated_bytes; /* master_allocated_file_size_bytes */
    uint64_t disk_replicas;
    uint64_t disk_only_keys; /* objects whose only readable replicas are LOCAL_DISK (a census:
                              * one shard per eviction tick, at most 1024 ticks old) */
    uint64_t
        reregister_replaced;   /* objects replaced by a re-registered record of a higher version */
    uint64_t unlisted_dropped; /* LOCAL_DISK replicas a holder's complete listing left out */
    uint64_t holder_backoffs;  /* back-off decisions after UNABLE_OFFLOAD (disk full) */
    uint64_t given_up;         /* objects no longer offered for offload (disk full) */
    uint64_t reregister_confirmed; /* re-registered records the master already had */
};
/* Zeroes without enable_offload. */
void mc_master_offload_stats(struct mc_master *m, struct mc_offload_stats *out);

/* ---- background work (one call = one loop iteration) ------------------------------------- */

/* Client monitor (every 1 s): expires clients whose TTL passed — unmounts their segments,
 * drops their replicas, erases objects left with none, releases what they pinned — and does
 * the same sweep for segments UnmountSegment unmounted since the last tick. Returns the number
 * of clients expired. */
int mc_master_tick_monitor(struct mc_master *m);

/* Reaper: frees buffers of Puts unfinished put_start_release_timeout after their start, of
 * taken-over Puts whose release time came and of objects force-removed under a read lease whose
 * lease ended, clears expired soft pins and expires offload tasks past put_start_release_timeout
 * (their pins released). Returns the number of items reaped. */
int mc_master_tick_reaper(struct mc_master *m);

/* Offload long-polls (every few tens of ms; 20 in the daemon): answers parked heartbeats whose
 * wait passed and any a quiet push woke, and fences the holders that left a delete
 * unacknowledged past holder_delete_timeout (the delete rule: they are deregistered as by their
 * expiry, and the Removes that waited for them complete). Task expiry is the reaper's. Returns
 * how many holders it fenced. */
int mc_master_tick_offload(struct mc_master *m);

/* Eviction (every 10 ms): when used > high watermark or a PutStart failed for space, one
 * BatchEvict cycle (src/master/eviction.c). Returns the number of objects evicted. */
int mc_master_tick_eviction(struct mc_master *m);
/* The eviction loop's wait between ticks: returns 1 as soon as a PutStart refused for space
 * asked for a cycle (or mc_master_eviction_wake was called), 0 after timeout_ms (real time). */
int mc_master_eviction_wait(struct mc_master *m, uint64_t timeout_ms);
/* Wakes a thread in mc_master_eviction_wait (a daemon stopping its loops). */
void mc_master_eviction_wake(struct mc_master *m);

#ifdef __cplusplus
}
#endif
#endif
