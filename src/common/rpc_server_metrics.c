/*
 * rpc_server_metrics.c - an RPC server's protection counters as Prometheus series, so a daemon
 * exports them with one call (the names get the daemon's prefix, e.g. "master_rpc_...").
 */
#include <stddef.h>
#include <stdio.h>

#include "common/metrics.h"
#include "common/rpc_server.h"
#include "common/rpc_server_internal.h"

struct series {
    const char *name; /* after "<prefix>_rpc_" */
    const char *help;
    size_t off; /* in struct mc_rpc_server_stats */
    bool gauge;
};

#define S(n, f, g, h)                                                                              \
    {                                                                                              \
        n, h, offsetof(struct mc_rpc_server_stats, f), g                                           \
    }
static const struct series g_series[MC_RPCS_METRIC_SERIES] = {
    S("connections_open", conns_open, true, "RPC connections open now"),
    S("connections_rejected_total", conns_rejected, false,
      "RPC connections refused at accept (connection limits)"),
    S("decode_refusals_total", decode_refusals, false,
      "request bodies refused before or while decoding: a repeated field over the batch cap, "
      "or more memory than the body's budget"),
    S("output_buffer_paused_total", out_paused, false,
      "times a connection stopped being read because its unread replies passed the soft limit"),
    S("output_buffer_closed_total", out_closed, false,
      "connections closed because their unread replies passed the hard limit"),
    S("output_buffer_bytes", out_bytes_queued, true, "reply bytes queued and not yet sent"),
    S("idle_closed_total", idle_closed, false,
      "connections closed for idleness, a stalled body or output, or a slow handshake"),
};
#undef S

static double value(void *arg)
{
    const struct mc_rpcs_metric_arg *a = arg;
    struct mc_rpc_server_stats st;
    mc_rpc_server_get_stats(a->srv, &st);
    return (double)*(const uint64_t *)((const char *)&st + g_series[a->index].off);
}

int mc_rpc_server_export_metrics(struct mc_rpc_server *s, struct mc_metrics *m, const char *prefix)
{
    for (int i = 0; i < MC_RPCS_METRIC_SERIES; i++) {
        struct mc_rpcs_metric_arg *a = &s->metric_args[i];
        a->srv = s;
        a->index = i;
        char name[128];
        snprintf(name, sizeof(name), "%s_rpc_%s", prefix, g_series[i].name);
        int rc = g_series[i].gauge
                     ? mc_metrics_gauge_fn(m, name, g_series[i].help, NULL, value, a)
                     : mc_metrics_counter_fn(m, name, g_series[i].help, NULL, value, a);
        if (rc != 0)
            return rc;
    }
    return 0;
}
