/*
 * client_metrics.c - see client_metrics.h.
 */
#include "client/client_metrics.h"

#include <stdio.h>

#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"

#define LAT_NAME "mooncake_client_op_latency_seconds"
#define LAT_HELP "latency of this client's calls in seconds (a batch is one call)"

static const double g_lat_bounds[] = {50e-6,  100e-6, 250e-6, 500e-6, 1e-3,   2.5e-3,
                                      5e-3,   10e-3,  25e-3,  50e-3,  100e-3, 250e-3,
                                      500e-3, 1.0,    2.5,    5.0,    10.0};
static const char *const g_op_names[MC_CM_NOPS] = {"put", "get", "batch_put", "batch_get"};
static const char *const g_tier_names[2] = {"memory", "local_disk"};

void mc_client_metrics_init(struct mc_client_metrics *cm)
{
    memset(cm, 0, sizeof(*cm));
    cm->reg = mc_metrics_new();
    if (!cm->reg)
        return;
    cm->puts = mc_metrics_counter(cm->reg, "mooncake_client_puts_total",
                                  "objects this client stored", NULL);
    cm->put_bytes = mc_metrics_counter(cm->reg, "mooncake_client_put_bytes_total",
                                       "bytes of the objects this client stored", NULL);
    for (int t = 0; t < 2; t++) {
        cm->gets[t] = mc_metrics_counter(cm->reg, "mooncake_client_gets_total",
                                         "objects this client read, by the tier that served them",
                                         MC_LABELS("tier", g_tier_names[t]));
        cm->get_bytes[t] =
            mc_metrics_counter(cm->reg, "mooncake_client_get_bytes_total",
                               "bytes this client read, by the tier that served them",
                               MC_LABELS("tier", g_tier_names[t]));
    }
    for (int op = 0; op < MC_CM_NOPS; op++)
        cm->latency[op] =
            mc_metrics_histogram(cm->reg, LAT_NAME, LAT_HELP, MC_LABELS("op", g_op_names[op]),
                                 g_lat_bounds, sizeof(g_lat_bounds) / sizeof(g_lat_bounds[0]));
    /* the error family exists (with the commonest series) before the first error */
    mc_metrics_counter(cm->reg, "mooncake_client_errors_total",
                       "failed puts and gets of this client, by error",
                       MC_LABELS("op", "get", "code", "OBJECT_NOT_FOUND"));
}

void mc_client_metrics_destroy(struct mc_client_metrics *cm)
{
    mc_metrics_free(cm->reg);
    memset(cm, 0, sizeof(*cm));
}

static void count_error(struct mc_client_metrics *cm, const char *op, int rc)
{
    struct mc_counter *e = mc_metrics_counter(cm->reg, "mooncake_client_errors_total",
                                              "failed puts and gets of this client, by error",
                                              MC_LABELS("op", op, "code", mc_strerror(rc)));
    if (e)
        mc_counter_inc(e);
}

void mc_cm_put(struct mc_client_metrics *cm, int rc, uint64_t bytes)
{
    if (!cm->reg)
        return;
    if (rc < 0) {
        count_error(cm, "put", rc);
        return;
    }
    if (cm->puts)
        mc_counter_inc(cm->puts);
    if (cm->put_bytes)
        mc_counter_add(cm->put_bytes, bytes);
}

void mc_cm_get(struct mc_client_metrics *cm, int64_t n, int tier)
{
    if (!cm->reg)
        return;
    if (n < 0) {
        count_error(cm, "get", (int)n);
        return;
    }
    int t = tier == MC_REPLICA_LOCAL_DISK ? 1 : 0;
    if (cm->gets[t])
        mc_counter_inc(cm->gets[t]);
    if (cm->get_bytes[t])
        mc_counter_add(cm->get_bytes[t], (uint64_t)n);
}

void mc_cm_latency(struct mc_client_metrics *cm, enum mc_cm_op op, uint64_t t0_ns)
{
    if (!cm->reg || !cm->latency[op])
        return;
    mc_histogram_observe(cm->latency[op], (double)(mc_now_ns() - t0_ns) / 1e9);
}

/* ---- the public text call (include/mooncake/client.h) -----------------------------------------
 */

int64_t mc_client_metrics_text(struct mc_client *c, char *buf, size_t cap)
{
    struct mc_textbuf tb;
    size_t len = 0;
    char *text;

    if (!c || (cap && !buf))
        return MC_ERR_INVALID_PARAMS;
    if (!c->metrics.reg)
        return MC_ERR_INTERNAL_ERROR;
    mc_textbuf_init(&tb);
    mc_metrics_render(c->metrics.reg, &tb);
    if (tb.failed) {
        mc_textbuf_destroy(&tb);
        return MC_ERR_INTERNAL_ERROR;
    }
    text = mc_textbuf_steal(&tb, &len);
    if (cap) {
        size_t n = len < cap - 1 ? len : cap - 1;
        if (n)
            memcpy(buf, text, n);
        buf[n] = '\0';
    }
    free(text);
    mc_textbuf_destroy(&tb);
    return (int64_t)len;
}

struct mc_metrics *mc_client_registry(struct mc_client *c)
{
    return c ? c->metrics.reg : NULL;
}
