/*
 * main_compat.h - mooncake_master's copies of upstream's launch-script flags (part of the
 * executable, not of the master library: it reads flags).
 *
 * Launch scripts written for upstream's mooncake_master pass flags this master has no use for
 * (--enable_http_metadata_server, --rpc_interface, --enable_snapshot, ...) or spells differently
 * (--port for --rpc_port, --max_threads for --rpc_thread_num). Each of them is accepted here:
 *   - the aliases work: --port, --max_threads and --rpc_conn_timeout_seconds stand for
 *     --rpc_port, --rpc_thread_num and --idle_timeout when those are not given themselves (an
 *     alias and its own flag both given: exit 2);
 *   - the others change nothing and, when given, log exactly one line saying so and why;
 *   - --config_path (upstream's JSON/YAML config file) is refused with exit 2 and the remedy
 *     (--flagfile): ignoring a configuration file would run a differently configured master.
 * The HA flags (--enable_ha, --etcd_endpoints, ...) are not here: they belong to the HA code.
 *
 * main.c puts MC_MASTER_COMPAT_FLAGS at the end of its table and calls mc_master_compat_apply()
 * after mc_flags_parse().
 */
#ifndef MC_MASTER_MAIN_COMPAT_H
#define MC_MASTER_MAIN_COMPAT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/flags.h"

struct mc_master_compat_flags {
    bool enable_http_metadata_server;
    const char *http_metadata_server_host;
    int32_t http_metadata_server_port;
    bool enable_metadata_cleanup_on_timeout;
    bool enable_metric_reporting;
    int32_t port;
    int32_t max_threads;
    int32_t rpc_conn_timeout_seconds;
    const char *rpc_interface;
    bool rpc_enable_tcp_no_delay;
    const char *memory_allocator;
    const char *config_path;
    const char *root_fs_dir;
    int64_t global_file_segment_size;
    bool enable_disk_eviction;
    uint64_t quota_bytes;
    bool enable_multi_tenants;
    const char *tenant_quota_connector_type;
    const char *tenant_quota_connector_uri;
    bool enable_kv_events;
    const char *kv_events_bind_endpoint;
    const char *kv_events_backend_id;
    bool enable_snapshot;
    bool enable_snapshot_restore;
    int32_t snapshot_interval_seconds;
    int32_t snapshot_retention_count;
    const char *snapshot_object_store_type;
    const char *dynamic_replication_mode;
    bool enable_cxl;
    const char *cxl_path;
    uint64_t cxl_size;
    const char *pod_name;
    const char *pod_namespace;
    int32_t v;
    bool logtostderr;
};

extern struct mc_master_compat_flags mc_master_compat;

/* Table entries (gflags registers them with the daemon's own, so --help lists them). */
#define MC_MASTER_COMPAT_FLAGS                                                                     \
    MC_BOOL_FLAG("enable_http_metadata_server", "false",                                           \
                 "upstream compatibility, no effect: no transfer-engine metadata server is "       \
                 "needed (clients exchange endpoints through the master)",                         \
                 &mc_master_compat.enable_http_metadata_server),                                   \
        MC_STRING_FLAG("http_metadata_server_host", "0.0.0.0",                                     \
                       "upstream compatibility, no effect (see --enable_http_metadata_server)",    \
                       &mc_master_compat.http_metadata_server_host),                               \
        MC_INT32_FLAG("http_metadata_server_port", "8080",                                         \
                      "upstream compatibility, no effect (see --enable_http_metadata_server)",     \
                      &mc_master_compat.http_metadata_server_port),                                \
        MC_BOOL_FLAG("enable_metadata_cleanup_on_timeout", "false",                                \
                     "upstream compatibility, no effect: there is no metadata server to clean",    \
                     &mc_master_compat.enable_metadata_cleanup_on_timeout),                        \
        MC_BOOL_FLAG("enable_metric_reporting", "true",                                            \
                     "upstream compatibility: metrics are always served on --metrics_port "        \
                     "(/metrics); no periodic summary is logged",                                  \
                     &mc_master_compat.enable_metric_reporting),                                   \
        MC_INT32_FLAG("port", "50051",                                                             \
                      "upstream's older name of --rpc_port (used when --rpc_port "                 \
                      "is not given)",                                                             \
                      &mc_master_compat.port),                                                     \
        MC_INT32_FLAG("max_threads", "16",                                                         \
                      "upstream's older name of --rpc_thread_num (used when --rpc_thread_num is "  \
                      "not given)",                                                                \
                      &mc_master_compat.max_threads),                                              \
        MC_INT32_FLAG("rpc_conn_timeout_seconds", "0",                                             \
                      "upstream's name of --idle_timeout in seconds, 0 = never (used when "        \
                      "--idle_timeout is not given)",                                              \
                      &mc_master_compat.rpc_conn_timeout_seconds),                                 \
        MC_STRING_FLAG("rpc_interface", "",                                                        \
                       "upstream compatibility, no effect: give --rpc_address instead",            \
                       &mc_master_compat.rpc_interface),                                           \
        MC_BOOL_FLAG("rpc_enable_tcp_no_delay", "true",                                            \
                     "upstream compatibility, no effect: TCP_NODELAY is always on",                \
                     &mc_master_compat.rpc_enable_tcp_no_delay),                                   \
        MC_STRING_FLAG("memory_allocator", "offset",                                               \
                       "upstream compatibility: segments always use the offset allocator",         \
                       &mc_master_compat.memory_allocator),                                        \
        MC_STRING_FLAG("config_path", "",                                                          \
                       "upstream's JSON/YAML config file: not read here (refused); put the flags " \
                       "in a file and pass --flagfile=FILE",                                       \
                       &mc_master_compat.config_path),                                             \
        MC_STRING_FLAG("root_fs_dir", "",                                                          \
                       "upstream compatibility, no effect: no shared-filesystem DISK replicas "    \
                       "(the disk tier is the clients' LOCAL_DISK, --enable_offload)",             \
                       &mc_master_compat.root_fs_dir),                                             \
        MC_INT64_FLAG("global_file_segment_size", "9223372036854775807",                           \
                      "upstream compatibility, no effect (see --root_fs_dir)",                     \
                      &mc_master_compat.global_file_segment_size),                                 \
        MC_BOOL_FLAG("enable_disk_eviction", "true",                                               \
                     "upstream compatibility, no effect (see --root_fs_dir)",                      \
                     &mc_master_compat.enable_disk_eviction),                                      \
        MC_UINT64_FLAG("quota_bytes", "0",                                                         \
                       "upstream compatibility, no effect (see --root_fs_dir)",                    \
                       &mc_master_compat.quota_bytes),                                             \
        MC_BOOL_FLAG("enable_multi_tenants", "false",                                              \
                     "upstream compatibility, no effect: one tenant ('default') only",             \
                     &mc_master_compat.enable_multi_tenants),                                      \
        MC_STRING_FLAG("tenant_quota_connector_type", "file",                                      \
                       "upstream compatibility, no effect (see --enable_multi_tenants)",           \
                       &mc_master_compat.tenant_quota_connector_type),                             \
        MC_STRING_FLAG("tenant_quota_connector_uri", "",                                           \
                       "upstream compatibility, no effect (see --enable_multi_tenants)",           \
                       &mc_master_compat.tenant_quota_connector_uri),                              \
        MC_BOOL_FLAG("enable_kv_events", "false",                                                  \
                     "upstream compatibility, no effect: no KV-event publisher",                   \
                     &mc_master_compat.enable_kv_events),                                          \
        MC_STRING_FLAG("kv_events_bind_endpoint", "",                                              \
                       "upstream compatibility, no effect (see --enable_kv_events)",               \
                       &mc_master_compat.kv_events_bind_endpoint),                                 \
        MC_STRING_FLAG("kv_events_backend_id", "",                                                 \
                       "upstream compatibility, no effect (see --enable_kv_events)",               \
                       &mc_master_compat.kv_events_backend_id),                                    \
        MC_BOOL_FLAG("enable_snapshot", "false",                                                   \
                     "upstream compatibility, no effect: no metadata snapshots",                   \
                     &mc_master_compat.enable_snapshot),                                           \
        MC_BOOL_FLAG("enable_snapshot_restore", "false",                                           \
                     "upstream compatibility, no effect (see --enable_snapshot)",                  \
                     &mc_master_compat.enable_snapshot_restore),                                   \
        MC_INT32_FLAG("snapshot_interval_seconds", "600",                                          \
                      "upstream compatibility, no effect (see --enable_snapshot)",                 \
                      &mc_master_compat.snapshot_interval_seconds),                                \
        MC_INT32_FLAG("snapshot_retention_count", "2",                                             \
                      "upstream compatibility, no effect (see --enable_snapshot)",                 \
                      &mc_master_compat.snapshot_retention_count),                                 \
        MC_STRING_FLAG("snapshot_object_store_type", "",                                           \
                       "upstream compatibility, no effect (see --enable_snapshot)",                \
                       &mc_master_compat.snapshot_object_store_type),                              \
        MC_STRING_FLAG("dynamic_replication_mode", "off",                                          \
                       "upstream compatibility, no effect: replica counts are fixed at Put",       \
                       &mc_master_compat.dynamic_replication_mode),                                \
        MC_BOOL_FLAG("enable_cxl", "false", "upstream compatibility, no effect: no CXL segments",  \
                     &mc_master_compat.enable_cxl),                                                \
        MC_STRING_FLAG("cxl_path", "/dev/dax0.0",                                                  \
                       "upstream compatibility, no effect (see --enable_cxl)",                     \
                       &mc_master_compat.cxl_path),                                                \
        MC_UINT64_FLAG("cxl_size", "8589934592",                                                   \
                       "upstream compatibility, no effect (see --enable_cxl)",                     \
                       &mc_master_compat.cxl_size),                                                \
        MC_STRING_FLAG("pod_name", "", "upstream compatibility, no effect",                        \
                       &mc_master_compat.pod_name),                                                \
        MC_STRING_FLAG("pod_namespace", "", "upstream compatibility, no effect",                   \
                       &mc_master_compat.pod_namespace),                                           \
        MC_INT32_FLAG("v", "0", "glog's verbosity (upstream): use --log_level=debug instead",      \
                      &mc_master_compat.v),                                                        \
        MC_BOOL_FLAG("logtostderr", "false",                                                       \
                     "glog's flag (upstream), no effect: logs always go to stderr",                \
                     &mc_master_compat.logtostderr)

/* What the aliases resolved to: a field is used by main.c only when its has_ flag is true. */
struct mc_master_compat_result {
    bool has_rpc_port;
    int32_t rpc_port;
    bool has_rpc_thread_num;
    int32_t rpc_thread_num;
    bool has_idle_timeout_ms;
    uint64_t idle_timeout_ms;
};

/* After mc_flags_parse(): refuses --config_path (exit 2), resolves the aliases against the
 * flags main.c owns (conflicting values: exit 2) and logs one line per no-effect flag given. */
void mc_master_compat_apply(struct mc_master_compat_result *out);

#endif
