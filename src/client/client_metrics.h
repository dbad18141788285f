/*
 * client_metrics.h - what a client counts about its own calls, in its own metrics registry
 * (common/metrics.h), upstream-style Prometheus names:
 *
 *   mooncake_client_puts_total                  objects stored (mc_put, one per mc_batch_put key)
 *   mooncake_client_put_bytes_total             their bytes
 *   mooncake_client_gets_total{tier}            objects read, tier="memory" | "local_disk"
 *   mooncake_client_get_bytes_total{tier}       their bytes
 *   mooncake_client_errors_total{op,code}       failed puts/gets by error name (op="put"|"get";
 *                                               OBJECT_NOT_FOUND counts here: a miss)
 *   mooncake_client_op_latency_seconds{op}      one observation per call, op = put | get |
 *                                               batch_put | batch_get (histogram)
 *
 * The registry is created by mc_client_open (mc_client_metrics_init) and freed by
 * mc_client_close; updates are relaxed atomics. The library exports the text through
 * mc_client_metrics_text() (include/mooncake/client.h); the daemon serves the same registry on
 * its HTTP port, with its own series added.
 */
#ifndef MC_CLIENT_CLIENT_METRICS_H
#define MC_CLIENT_CLIENT_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct mc_metrics;
struct mc_counter;
struct mc_histogram;

enum mc_cm_op { MC_CM_PUT, MC_CM_GET, MC_CM_BATCH_PUT, MC_CM_BATCH_GET, MC_CM_NOPS };

struct mc_client_metrics {
    struct mc_metrics *reg; /* NULL: counting is off (no memory at open) */
    struct mc_counter *puts, *put_bytes;
    struct mc_counter *gets[2], *get_bytes[2]; /* [0] memory, [1] local_disk */
    struct mc_histogram *latency[MC_CM_NOPS];
};

void mc_client_metrics_init(struct mc_client_metrics *cm);
void mc_client_metrics_destroy(struct mc_client_metrics *cm);

/* One stored object (rc 0) or one failed put (rc < 0). */
void mc_cm_put(struct mc_client_metrics *cm, int rc, uint64_t bytes);
/* One read object of n bytes (n >= 0) from tier (enum mc_replica_type; -1 = unknown: memory),
 * or one failed get (n < 0). */
void mc_cm_get(struct mc_client_metrics *cm, int64_t n, int tier);
/* One call's latency, from t0_ns (mc_now_ns()) to now. */
void mc_cm_latency(struct mc_client_metrics *cm, enum mc_cm_op op, uint64_t t0_ns);

#endif
