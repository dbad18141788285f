/*
 * master_counters.h - the master's counter list, written once (an X-macro table, as
 * include/mooncake/errors.h and offload.c's funnel table).
 *
 * Each table below is expanded where the list used to be repeated by hand: the atomics of
 * struct mc_master_counters (master_state.h), the snapshot struct mc_master_stats
 * (master.h), the snapshot itself (mc_master_get_stats), the metrics registry (master.c) and
 * GetStats' named values (service_admin.c). Adding a counter is one line here plus its
 * CNT_INC where it happens; its metric, its snapshot field and its GetStats entry follow.
 *
 *   MC_MASTER_GAUGES(X)             X(field, metric name, help, listed by GetStats' extra):
 *                                   signed levels (_Atomic int64_t), clamped at 0 in a snapshot.
 *   MC_MASTER_CALL_COUNTERS(X)      X(field, metric name, help): registered by master.c, in
 *                                   the snapshot and in GetStats' extra, in this order.
 *   MC_MASTER_EVICTION_COUNTERS(X)  X(field, metric name): in the snapshot and GetStats' extra;
 *                                   eviction.c registers their metrics (with its help texts).
 *   MC_MASTER_GET_COUNTERS(X)       X(field, metric name, help): upstream's Get cache-hit
 *                                   family (names as upstream spells them, trailing underscores
 *                                   too): every Get key, the ones answered, and those by the
 *                                   type of the first replica returned (MEMORY: mem,
 *                                   LOCAL_DISK: file); metrics only.
 *
 * The per-batch-op counters (struct mc_master_counters' batch array) are a matrix of generated
 * names, kept as master.c's g_batch_ops x g_batch_fields.
 *
 * Only macros live here; CNT_INC is for the core's files (it needs struct mc_master).
 */
#ifndef MC_MASTER_COUNTERS_H
#define MC_MASTER_COUNTERS_H

#define MC_MASTER_GAUGES(X)                                                                        \
    X(key_count, "master_key_count", "objects in the table", 0)                                    \
    X(soft_pin_key_count, "master_soft_pin_key_count", "soft-pinned objects", 1)                   \
    X(processing_count, "master_processing_key_count", "Puts in flight", 1)

#define MC_MASTER_CALL_COUNTERS(X)                                                                 \
    X(put_start_requests, "master_put_start_requests_total", "PutStart calls")                     \
    X(put_start_failures, "master_put_start_failures_total", "failed PutStart calls")              \
    X(put_end_requests, "master_put_end_requests_total", "PutEnd calls")                           \
    X(put_end_failures, "master_put_end_failures_total", "failed PutEnd calls")                    \
    X(put_revoke_requests, "master_put_revoke_requests_total", "PutRevoke calls")                  \
    X(put_revoke_failures, "master_put_revoke_failures_total", "failed PutRevoke calls")           \
    X(get_replica_list_requests, "master_get_replica_list_requests_total", "GetReplicaList keys")  \
    X(get_replica_list_failures, "master_get_replica_list_failures_total",                         \
      "failed GetReplicaList keys")                                                                \
    X(exist_key_requests, "master_exist_key_requests_total", "ExistKey keys")                      \
    X(exist_key_failures, "master_exist_key_failures_total", "failed ExistKey keys")               \
    X(remove_requests, "master_remove_requests_total", "Remove calls")                             \
    X(remove_failures, "master_remove_failures_total", "failed Remove calls")                      \
    X(remove_all_requests, "master_remove_all_requests_total", "RemoveAll calls")                  \
    X(mount_segment_requests, "master_mount_segment_requests_total", "MountSegment calls")         \
    X(mount_segment_failures, "master_mount_segment_failures_total", "failed MountSegment calls")  \
    X(unmount_segment_requests, "master_unmount_segment_requests_total", "UnmountSegment calls")   \
    X(unmount_segment_failures, "master_unmount_segment_failures_total",                           \
      "failed UnmountSegment calls")                                                               \
    X(remount_segment_requests, "master_remount_segment_requests_total", "ReMountSegment calls")   \
    X(remount_segment_failures, "master_remount_segment_failures_total",                           \
      "failed ReMountSegment calls")                                                               \
    X(ping_requests, "master_ping_requests_total", "Ping calls")                                   \
    X(put_start_alloc_failures, "master_put_start_alloc_failures_total",                           \
      "PutStart calls that found no space")                                                        \
    X(put_start_partial_allocations, "master_put_start_partial_allocations_total",                 \
      "PutStart calls that placed fewer replicas than asked")                                      \
    X(put_start_discard_cnt, "master_put_start_discard_cnt",                                       \
      "stale Puts taken over by a new PutStart")                                                   \
    X(put_start_release_cnt, "master_put_start_release_cnt",                                       \
      "buffers of stale or taken-over Puts released")                                              \
    X(expired_clients, "master_expired_clients_total", "clients expired by the monitor")

#define MC_MASTER_EVICTION_COUNTERS(X)                                                             \
    X(evicted_key_count, "master_evicted_key_count")                                               \
    X(evicted_size_bytes, "master_evicted_size_bytes")                                             \
    X(successful_evictions, "master_successful_evictions_total")                                   \
    X(attempted_evictions, "master_attempted_evictions_total")

#define MC_MASTER_GET_COUNTERS(X)                                                                  \
    X(total_get_nums, "total_get_nums_", "GetReplicaList keys")                                    \
    X(valid_get_nums, "valid_get_nums_", "GetReplicaList keys answered with a replica")            \
    X(mem_cache_hit_nums, "mem_cache_hit_nums_", "Gets answered with a MEMORY replica first")      \
    X(file_cache_hit_nums, "file_cache_hit_nums_",                                                 \
      "Gets answered with a LOCAL_DISK replica first")                                             \
    X(mem_cache_hit_bytes, "mem_cache_hit_bytes_total", "value bytes of the MEMORY hits")          \
    X(file_cache_hit_bytes, "file_cache_hit_bytes_total", "value bytes of the LOCAL_DISK hits")

/* One more event on counter field of master m (relaxed: counters order nothing). */
#define CNT_INC(m, field) atomic_fetch_add_explicit(&(m)->c.field, 1, memory_order_relaxed)

#endif
