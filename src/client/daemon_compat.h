/*
 * daemon_compat.h - mooncake_client's copies of upstream's launch-script flags (part of the
 * daemon executable, not of libmooncake_client: it reads flags).
 *
 * Upstream's standalone client (real_client_main) is started with --master_server_address,
 * --global_segment_size, --metadata_server, --device_names, --local_buffer_size, --port, ...
 *   - --master_server_address and --global_segment_size are aliases of --master and
 *     --segment_size (both spellings with different values: exit 2);
 *   - --enable_http_server / --http_port are aliases of --enable_client_http_server /
 *     --client_http_port (upstream uses both spellings);
 *   - --device_names is upstream's name of --rdma_devices (both with different values: exit 2);
 *     with a protocol other than rdma it logs that it has no effect;
 *   - --metadata_server, --local_buffer_size, --port, --threads,
 *     --start_offload_rpc_server, --logtostderr and --v change nothing and log one line each
 *     when given; --enable_offload=true without --disk_path logs how to get a disk tier here;
 *     --tenant_id is accepted as 'default' only (another tenant: exit 2).
 * daemon_main.c puts MC_DAEMON_COMPAT_FLAGS at the end of its table and calls
 * mc_daemon_compat_apply() after mc_flags_parse().
 */
#ifndef MC_CLIENT_DAEMON_COMPAT_H
#define MC_CLIENT_DAEMON_COMPAT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/flags.h"

struct mc_daemon_compat_flags {
    const char *master_server_address;
    const char *global_segment_size;
    const char *metadata_server;
    const char *device_names;
    const char *local_buffer_size;
    int32_t port;
    int32_t threads;
    const char *tenant_id;
    bool enable_offload;
    bool start_offload_rpc_server;
    bool enable_http_server;
    int32_t http_port;
    bool logtostderr;
    int32_t v;
};

extern struct mc_daemon_compat_flags mc_daemon_compat;

#define MC_DAEMON_COMPAT_FLAGS                                                                     \
    MC_STRING_FLAG("master_server_address", "127.0.0.1:50051",                                     \
                   "upstream's name of --master (used when --master is not given)",                \
                   &mc_daemon_compat.master_server_address),                                       \
        MC_STRING_FLAG("global_segment_size", "4GiB",                                              \
                       "upstream's name of --segment_size (used when --segment_size is not "       \
                       "given; \"4 GB\" and \"4GB\" are read as 4 GiB)",                           \
                       &mc_daemon_compat.global_segment_size),                                     \
        MC_STRING_FLAG("metadata_server", "",                                                      \
                       "upstream compatibility, no effect: peers find each other through the "     \
                       "master (P2PHANDSHAKE, http://, etcd:// all accepted)",                     \
                       &mc_daemon_compat.metadata_server),                                         \
        MC_STRING_FLAG("device_names", "",                                                         \
                       "upstream's name of --rdma_devices (used when --rdma_devices is not "       \
                       "given; only --protocol=rdma uses devices)",                                \
                       &mc_daemon_compat.device_names),                                            \
        MC_STRING_FLAG("local_buffer_size", "0",                                                   \
                       "upstream compatibility, no effect: this daemon serves no engine through "  \
                       "shared memory, so it needs no local buffer",                               \
                       &mc_daemon_compat.local_buffer_size),                                       \
        MC_INT32_FLAG(                                                                             \
            "port", "50052",                                                                       \
            "upstream compatibility, no effect: upstream's RPC port for standalone-mode "          \
            "engines (setup_dummy), which are not supported; peers use --data_port",               \
            &mc_daemon_compat.port),                                                               \
        MC_INT32_FLAG("threads", "1", "upstream compatibility, no effect",                         \
                      &mc_daemon_compat.threads),                                                  \
        MC_STRING_FLAG("tenant_id", "default",                                                     \
                       "upstream compatibility: one tenant ('default') only; another value is "    \
                       "refused",                                                                  \
                       &mc_daemon_compat.tenant_id),                                               \
        MC_BOOL_FLAG("enable_offload", "false",                                                    \
                     "upstream compatibility: the disk tier is on when --disk_path is given",      \
                     &mc_daemon_compat.enable_offload),                                            \
        MC_BOOL_FLAG("start_offload_rpc_server", "true",                                           \
                     "upstream compatibility, no effect: LOCAL_DISK reads are served on "          \
                     "--data_port",                                                                \
                     &mc_daemon_compat.start_offload_rpc_server),                                  \
        MC_BOOL_FLAG("enable_http_server", "false",                                                \
                     "upstream's other name of "                                                   \
                     "--enable_client_http_server",                                                \
                     &mc_daemon_compat.enable_http_server),                                        \
        MC_INT32_FLAG("http_port", "9300", "upstream's other name of --client_http_port",          \
                      &mc_daemon_compat.http_port),                                                \
        MC_BOOL_FLAG("logtostderr", "false",                                                       \
                     "glog's flag (upstream), no effect: logs always go to stderr",                \
                     &mc_daemon_compat.logtostderr),                                               \
        MC_INT32_FLAG("v", "0", "glog's verbosity (upstream): use --log_level=debug instead",      \
                      &mc_daemon_compat.v)

/* What the aliases resolved to. */
struct mc_daemon_compat_result {
    const char *master;       /* NULL = keep --master */
    const char *segment_size; /* NULL = keep --segment_size */
    const char *rdma_devices; /* NULL = keep --rdma_devices */
    bool enable_http;         /* --enable_http_server given true */
    bool has_http_port;
    int32_t http_port;
};

/* After mc_flags_parse(): resolves the aliases against the daemon's own --master,
 * --segment_size and --rdma_devices (conflicting values: exit 2), refuses a tenant other than
 * 'default' (exit 2) and logs one line per no-effect flag given. disk_path, protocol: --disk_path
 * and --protocol. */
void mc_daemon_compat_apply(const char *master, const char *segment_size, const char *disk_path,
                            const char *rdma_devices, const char *protocol,
                            struct mc_daemon_compat_result *out);

#endif
