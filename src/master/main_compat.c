/*
 * main_compat.c - see main_compat.h.
 */
#include "master/main_compat.h"

#include <stddef.h>
#include <string.h>

#include "common/log.h"

#define COMP "master"

struct mc_master_compat_flags mc_master_compat;

/* The flags that change nothing here, with the reason given in their one log line. */
static const struct {
    const char *name;
    const char *why;
} g_no_effect[] = {
    {"enable_http_metadata_server",
     "no transfer-engine metadata server is needed: clients exchange endpoints through the "
     "master (a client's --metadata_server is ignored as well)"},
    {"http_metadata_server_host", "no transfer-engine metadata server runs here"},
    {"http_metadata_server_port", "no transfer-engine metadata server runs here"},
    {"enable_metadata_cleanup_on_timeout", "there is no metadata server to clean up"},
    {"enable_metric_reporting",
     "metrics are always served on --metrics_port (/metrics); no periodic summary is logged"},
    {"rpc_interface", "give the address with --rpc_address"},
    {"rpc_enable_tcp_no_delay", "TCP_NODELAY is always set"},
    {"memory_allocator", "segments always use the offset allocator"},
    {"root_fs_dir", "no shared-filesystem DISK replicas; the disk tier is the clients' LOCAL_DISK "
                    "(--enable_offload)"},
    {"global_file_segment_size", "no shared-filesystem DISK replicas"},
    {"enable_disk_eviction", "no shared-filesystem DISK replicas"},
    {"quota_bytes", "no shared-filesystem DISK replicas"},
    {"enable_multi_tenants", "one tenant ('default') only"},
    {"tenant_quota_connector_type", "one tenant ('default') only"},
    {"tenant_quota_connector_uri", "one tenant ('default') only"},
    {"enable_kv_events", "no KV-event publisher"},
    {"kv_events_bind_endpoint", "no KV-event publisher"},
    {"kv_events_backend_id", "no KV-event publisher"},
    {"enable_snapshot", "no metadata snapshots"},
    {"enable_snapshot_restore", "no metadata snapshots"},
    {"snapshot_interval_seconds", "no metadata snapshots"},
    {"snapshot_retention_count", "no metadata snapshots"},
    {"snapshot_object_store_type", "no metadata snapshots"},
    {"dynamic_replication_mode", "replica counts are fixed at Put"},
    {"enable_cxl", "no CXL segments"},
    {"cxl_path", "no CXL segments"},
    {"cxl_size", "no CXL segments"},
    {"pod_name", "not used"},
    {"pod_namespace", "not used"},
    {"v", "use --log_level=debug for more detail"},
    {"logtostderr", "logs always go to stderr"},
};

static void log_no_effect(void)
{
    for (size_t i = 0; i < sizeof(g_no_effect) / sizeof(g_no_effect[0]); i++)
        if (mc_flags_was_set(g_no_effect[i].name))
            mc_warn(COMP, "upstream flag accepted; it has no effect here", "flag=--%s why=\"%s\"",
                    g_no_effect[i].name, g_no_effect[i].why);
}

void mc_master_compat_apply(struct mc_master_compat_result *out)
{
    memset(out, 0, sizeof(*out));
    if (mc_flags_was_set("config_path"))
        mc_flags_die("flag --config_path (upstream's JSON/YAML config file) is not read by this "
                     "master: write the settings as flags, one per line (--name=value), in a file "
                     "and pass --flagfile=FILE");
    if (mc_flags_was_set("port")) {
        if (mc_flags_was_set("rpc_port"))
            mc_flags_die("flags --port and --rpc_port both given: --port is upstream's older name "
                         "of --rpc_port; give only --rpc_port");
        out->has_rpc_port = true;
        out->rpc_port = mc_master_compat.port;
        mc_info(COMP, "upstream flag --port used as --rpc_port", "rpc_port=%d",
                mc_master_compat.port);
    }
    if (mc_flags_was_set("max_threads")) {
        if (mc_flags_was_set("rpc_thread_num"))
            mc_flags_die("flags --max_threads and --rpc_thread_num both given: --max_threads is "
                         "upstream's older name of --rpc_thread_num; give only --rpc_thread_num");
        out->has_rpc_thread_num = true;
        out->rpc_thread_num = mc_master_compat.max_threads;
        mc_info(COMP, "upstream flag --max_threads used as --rpc_thread_num", "rpc_thread_num=%d",
                mc_master_compat.max_threads);
    }
    if (mc_flags_was_set("rpc_conn_timeout_seconds")) {
        if (mc_flags_was_set("idle_timeout"))
            mc_flags_die("flags --rpc_conn_timeout_seconds and --idle_timeout both given: give "
                         "only --idle_timeout");
        if (mc_master_compat.rpc_conn_timeout_seconds < 0)
            mc_flags_die("flag --rpc_conn_timeout_seconds must not be negative");
        out->has_idle_timeout_ms = true;
        out->idle_timeout_ms = (uint64_t)mc_master_compat.rpc_conn_timeout_seconds * 1000u;
        mc_info(COMP, "upstream flag --rpc_conn_timeout_seconds used as --idle_timeout",
                "idle_timeout_ms=%llu", (unsigned long long)out->idle_timeout_ms);
    }
    log_no_effect();
}
