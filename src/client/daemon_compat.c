/*
 * daemon_compat.c - see daemon_compat.h.
 */
#include "client/daemon_compat.h"

#include <stddef.h>
#include <string.h>

#include "common/log.h"

#define COMP "daemon"

struct mc_daemon_compat_flags mc_daemon_compat;

static const struct {
    const char *name;
    const char *why;
} g_no_effect[] = {
    {"metadata_server", "peers find each other through the master"},
    {"local_buffer_size", "this daemon serves no engine through shared memory"},
    {"port", "standalone-mode engines (setup_dummy) are not supported; peers use --data_port"},
    {"threads", "not used"},
    {"start_offload_rpc_server", "LOCAL_DISK reads are served on --data_port"},
    {"logtostderr", "logs always go to stderr"},
    {"v", "use --log_level=debug for more detail"},
};

/* alias given: use it unless the own flag is given too with another value. */
static const char *alias(const char *own_name, const char *own_val, const char *alias_name,
                         const char *alias_val)
{
    if (!mc_flags_was_set(alias_name))
        return NULL;
    if (mc_flags_was_set(own_name) && strcmp(own_val, alias_val) != 0)
        mc_flags_die("flags --%s=%s and --%s=%s disagree: --%s is upstream's name of --%s; give "
                     "one of them",
                     alias_name, alias_val, own_name, own_val, alias_name, own_name);
    return alias_val;
}

/* --device_names: upstream's name of --rdma_devices, which only --protocol=rdma reads. */
static const char *device_names(const char *rdma_devices, const char *protocol)
{
    const char *v =
        alias("rdma_devices", rdma_devices, "device_names", mc_daemon_compat.device_names);

    if (!v)
        return NULL;
    if (protocol && strcmp(protocol, "rdma") == 0)
        mc_info(COMP, "upstream flag accepted as --rdma_devices", "flag=--device_names devices=%s",
                v[0] ? v : "(the device that owns --host)");
    else
        mc_warn(COMP, "upstream flag accepted; it has no effect here",
                "flag=--device_names why=\"RDMA devices are used with --protocol=rdma only\"");
    return v;
}

void mc_daemon_compat_apply(const char *master, const char *segment_size, const char *disk_path,
                            const char *rdma_devices, const char *protocol,
                            struct mc_daemon_compat_result *out)
{
    memset(out, 0, sizeof(*out));
    out->master =
        alias("master", master, "master_server_address", mc_daemon_compat.master_server_address);
    out->segment_size = alias("segment_size", segment_size, "global_segment_size",
                              mc_daemon_compat.global_segment_size);
    out->rdma_devices = device_names(rdma_devices, protocol);
    for (size_t i = 0; i < sizeof(g_no_effect) / sizeof(g_no_effect[0]); i++)
        if (mc_flags_was_set(g_no_effect[i].name))
            mc_warn(COMP, "upstream flag accepted; it has no effect here", "flag=--%s why=\"%s\"",
                    g_no_effect[i].name, g_no_effect[i].why);
    if (strcmp(mc_daemon_compat.tenant_id, "default") != 0)
        mc_flags_die("flag --tenant_id=%s: this store has one tenant, 'default' (omit the flag)",
                     mc_daemon_compat.tenant_id);
    if (mc_flags_was_set("enable_offload")) {
        if (mc_daemon_compat.enable_offload && !(disk_path && disk_path[0]))
            mc_warn(COMP,
                    "--enable_offload alone turns nothing on here: give --disk_path=DIR (and "
                    "--disk_capacity) for a LOCAL_DISK tier, and --enable_offload on the master",
                    "flag=--enable_offload");
        else
            mc_info(COMP, "upstream flag accepted; the disk tier follows --disk_path",
                    "flag=--enable_offload");
    }
    if (mc_flags_was_set("enable_http_server"))
        out->enable_http = mc_daemon_compat.enable_http_server;
    if (mc_flags_was_set("http_port")) {
        out->has_http_port = true;
        out->http_port = mc_daemon_compat.http_port;
    }
}
