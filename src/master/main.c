/*
 * main.c - mooncake_master: flags -> mc_master + RPC service + /metrics endpoint + background
 * loops + signals. The master itself is a library (master.h); this file only wires it.
 *
 * Start-up: parse the flag table (DESIGN.md §9, defaults of upstream's master), refuse flags
 * whose subsystem is not written yet (promotion: "--<flag>: not implemented yet", exit 2) and
 * inconsistent offload flags (--offload_on_evict without --enable_offload), create the master,
 * register the adapters (service.h) on an rpc_server, start the HTTP endpoint on the master's
 * metrics registry, start the background loops, and once both listeners are bound print exactly one
 * line on stdout:
 *
 *     READY rpc=ADDR:PORT metrics=ADDR:PORT
 *
 * Everything else (logs) goes to stderr.
 *
 * Background loops: one thread each, sleeping on a condition variable (CLOCK_MONOTONIC) so
 * stopping them is immediate: eviction every 10 ms (mc_master_tick_eviction), client monitor
 * every 1 s (mc_master_tick_monitor), reaper every 1 s (mc_master_tick_reaper), offload
 * long-poll deadlines every 20 ms (mc_master_tick_offload).
 *
 * High availability (--enable_ha, master/ha.h): the ports are bound first, then the master
 * campaigns in etcd; until it leads, every call but ServiceReady and GetLeader is answered
 * NOT_LEADER, and GET /role and /leader on the HTTP port say where it stands. SIGTERM makes a
 * leader revoke its lease before it stops (a standby takes over at once); a leader that loses
 * its leadership for good exits with status 3 (a supervisor restarts it as a standby).
 *
 * Signals: SIGTERM and SIGINT are blocked in every thread (the mask is set before any thread
 * starts) and read from a signalfd by the main thread, so no work happens in a handler.
 * Shutdown: stop the RPC server (no new connections; parked calls are answered
 * UNAVAILABLE_IN_CURRENT_STATUS; I/O threads joined), stop the loops, stop HTTP, free, exit 0.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/tls.h"
#include "common/flags.h"
#include "common/http.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "master/http_admin.h"
#include "master/main_compat.h"
#include "master/master.h"
#include "master/ha.h"
#include "master/segments.h"
#include "master/service.h"
#include "mooncake/errors.h"

#define COMP "master"

static struct {
    const char *rpc_address;
    int32_t rpc_port;
    int32_t rpc_thread_num;
    const char *metrics_host;
    int32_t metrics_port;
    const char *default_kv_lease_ttl;
    const char *default_kv_soft_pin_ttl;
    const char *max_kv_soft_pin_ttl;
    bool allow_evict_soft_pinned_objects;
    bool object_huge_pages;
    double eviction_ratio;
    double eviction_high_watermark_ratio;
    uint32_t eviction_threads;
    const char *client_ttl;
    const char *put_start_discard_timeout_sec;
    const char *put_start_release_timeout_sec;
    const char *allocation_strategy;
    uint32_t max_key_len;
    const char *max_frame_bytes;
    const char *log_level;
    const char *auth_token_file;
    bool protected_mode;
    const char *idle_timeout;
    uint32_t max_conns_per_addr;
    uint32_t max_inflight_per_conn;
    const char *output_buffer_limit;
    uint32_t max_connections;
    bool metrics_public;
    bool allow_readable_token_file;
    bool check_segment_endpoint;
    uint32_t max_segments_per_client;
    const char *admin_token_file;
    const char *tls_cert_file, *tls_key_file, *tls_ca_file;
    /* not implemented yet: must keep their defaults */
    bool enable_offload;
    bool offload_on_evict;
    bool offload_force_evict;
    uint64_t offloading_queue_limit;
    uint64_t delete_queue_limit;
    uint64_t holder_delete_timeout_ms;
    uint64_t disk_recovery_window_sec;
    bool holder_stream;
    uint64_t holder_index_flush_ms;
    uint64_t holder_backlog_limit;
    double offload_cap_ratio;
    bool promotion_on_hit;
    int32_t promotion_admission_threshold;
    int32_t promotion_batch_admission_threshold;
    uint64_t promotion_queue_limit;
    uint32_t promotion_max_per_heartbeat;
    const char *promotion_task_timeout_sec;
    /* high availability (master/ha.h) */
    bool enable_ha;
    const char *etcd_endpoints, *ha_backend_connstring, *ha_backend_type, *cluster_id;
    uint32_t ha_lease_ttl_sec;
    const char *etcd_ca_file, *etcd_cert_file, *etcd_key_file, *ha_advertise_address;
} F;

static const struct mc_flag g_flags[] = {
    MC_STRING_FLAG("rpc_address", "0.0.0.0", "RPC bind address", &F.rpc_address),
    MC_INT32_FLAG("rpc_port", "50051", "RPC listen port (0 = pick a free one)", &F.rpc_port),
    MC_INT32_FLAG("rpc_thread_num", "0", "RPC I/O threads (0 = min(16, CPUs))", &F.rpc_thread_num),
    MC_STRING_FLAG("metrics_host", "0.0.0.0", "HTTP /metrics and /health bind address",
                   &F.metrics_host),
    MC_INT32_FLAG("metrics_port", "9003", "HTTP /metrics port (0 = pick a free one)",
                  &F.metrics_port),
    MC_STRING_FLAG("default_kv_lease_ttl", "10000",
                   "read lease granted by Get/Exist (bare number = ms; or 500ms, 10s)",
                   &F.default_kv_lease_ttl),
    MC_STRING_FLAG("default_kv_soft_pin_ttl", "1800000",
                   "soft pin TTL when a Put asks for one (bare number = ms)",
                   &F.default_kv_soft_pin_ttl),
    MC_STRING_FLAG("max_kv_soft_pin_ttl", "86400000",
                   "largest soft pin TTL a Put may ask for (bare number = ms)",
                   &F.max_kv_soft_pin_ttl),
    MC_BOOL_FLAG("allow_evict_soft_pinned_objects", "true",
                 "soft-pinned objects may be evicted as a last resort",
                 &F.allow_evict_soft_pinned_objects),
    MC_DOUBLE_FLAG("eviction_ratio", "0.05", "fraction of DRAM freed per eviction cycle [0,1]",
                   &F.eviction_ratio),
    MC_DOUBLE_FLAG("eviction_high_watermark_ratio", "0.90",
                   "used ratio above which eviction runs [0,1]", &F.eviction_high_watermark_ratio),
    MC_BOOL_FLAG("object_huge_pages", "true",
                 "keep object records in 2 MiB transparent huge pages where the kernel allows "
                 "(THP mode madvise or always): fewer TLB misses on the table's random reads "
                 "(eviction's candidates, Gets); false: 4 KiB pages",
                 &F.object_huge_pages),
    MC_UINT32_FLAG("eviction_threads", "0",
                   "workers of an eviction cycle's census and rounds, 0..64 (0 = max(1, CPUs - 1))",
                   &F.eviction_threads),
    MC_STRING_FLAG("client_ttl", "10", "client liveness without Ping (bare number = s)",
                   &F.client_ttl),
    MC_STRING_FLAG("put_start_discard_timeout_sec", "30",
                   "an unfinished Put older than this may be taken over (bare number = s)",
                   &F.put_start_discard_timeout_sec),
    MC_STRING_FLAG("put_start_release_timeout_sec", "600",
                   "buffers of a stale Put are freed this long after its start (bare number = s)",
                   &F.put_start_release_timeout_sec),
    MC_STRING_FLAG("allocation_strategy", "random", "replica placement: random|free_ratio_first",
                   &F.allocation_strategy),
    MC_UINT32_FLAG("max_key_len", "4096", "longest key in bytes (1..65535)", &F.max_key_len),
    MC_STRING_FLAG("max_frame_bytes", "64MiB", "largest RPC frame body accepted",
                   &F.max_frame_bytes),
    MC_STRING_FLAG("log_level", "info", "debug|info|warn|error|off", &F.log_level),
    MC_STRING_FLAG("auth_token_file", "",
                   "file holding the cluster's shared secret: every connection must prove it "
                   "(challenge-response, the secret is never sent); empty = none",
                   &F.auth_token_file),
    MC_STRING_FLAG("idle_timeout", "300",
                   "close a client connection idle this long (no call in flight; bare number = s; "
                   "0 = never)",
                   &F.idle_timeout),
    MC_UINT32_FLAG("max_conns_per_addr", "1024",
                   "most RPC connections from one non-loopback address (0 = no limit)",
                   &F.max_conns_per_addr),
    MC_UINT32_FLAG("max_inflight_per_conn", "1024",
                   "unanswered calls per connection before it is no longer read (back-pressure)",
                   &F.max_inflight_per_conn),
    MC_STRING_FLAG("admin_token_file", "",
                   "file holding the admin token (with --auth_token_file): RemoveAll and the "
                   "HTTP admin endpoints need it; an admin tool's own token file lists the admin "
                   "token first and the data token second. Empty = one token for everything",
                   &F.admin_token_file),
    MC_STRING_FLAG("tls_cert_file", "",
                   "TLS: this master's certificate (PEM, chain first); with --tls_key_file the "
                   "RPC and HTTP ports speak TLS only (empty = plain TCP)",
                   &F.tls_cert_file),
    MC_STRING_FLAG("tls_key_file", "", "TLS: the private key of --tls_cert_file (PEM)",
                   &F.tls_key_file),
    MC_STRING_FLAG("tls_ca_file", "",
                   "TLS: CA bundle (PEM); given, RPC clients must show a certificate it signed "
                   "(empty = any TLS client; the token decides)",
                   &F.tls_ca_file),
    MC_UINT32_FLAG("max_segments_per_client", "64",
                   "segments one client may have mounted (0 = no limit)",
                   &F.max_segments_per_client),
    MC_BOOL_FLAG("check_segment_endpoint", "true",
                 "a segment (or disk) mounted by a non-loopback client must name the client's "
                 "own address as its endpoint (numeric); false accepts any endpoint",
                 &F.check_segment_endpoint),
    MC_BOOL_FLAG("allow_readable_token_file", "false",
                 "accept an --auth_token_file that group or others may read (refused otherwise)",
                 &F.allow_readable_token_file),
    MC_BOOL_FLAG("metrics_public", "false",
                 "serve /metrics, /health and /get_all_segments to any host even without "
                 "--auth_token_file (otherwise loopback only, as the RPC port's protected mode; "
                 "other HTTP endpoints always need the admin token or loopback)",
                 &F.metrics_public),
    MC_UINT32_FLAG("max_connections", "10000",
                   "most RPC connections in all, 1..1000000 (connections still in the token "
                   "handshake have a smaller pool of their own)",
                   &F.max_connections),
    MC_STRING_FLAG("output_buffer_limit", "256MiB",
                   "unread replies one connection may hold: past a quarter of it its requests "
                   "are no longer read, past it the connection is closed",
                   &F.output_buffer_limit),
    MC_BOOL_FLAG("protected_mode", "true",
                 "without --auth_token_file, serve loopback clients only (false: any host; warns)",
                 &F.protected_mode),
    MC_BOOL_FLAG("enable_offload", "false",
                 "LOCAL_DISK tier: clients may mount a disk (MountLocalDiskSegment) and objects "
                 "are copied there; alone, an offload task is queued at every PutEnd",
                 &F.enable_offload),
    MC_BOOL_FLAG("offload_on_evict", "false",
                 "queue the offload when eviction picks an object instead of at PutEnd (one DRAM "
                 "copy stays pinned until the disk copy exists; needs --enable_offload)",
                 &F.offload_on_evict),
    MC_BOOL_FLAG("offload_force_evict", "false",
                 "with --offload_on_evict: evict without offload once offloading_queue_limit x "
                 "offload_cap_ratio tasks were queued in one eviction cycle, or when no holder "
                 "takes the task (ignored without --offload_on_evict)",
                 &F.offload_force_evict),
    MC_UINT64_FLAG("offloading_queue_limit", "50000",
                   "offload tasks one holder may have queued or in flight (offload only: "
                   "promotion tasks are bounded by --promotion_queue_limit, disk-record deletes "
                   "by --delete_queue_limit)",
                   &F.offloading_queue_limit),
    MC_UINT64_FLAG("delete_queue_limit", "1000000",
                   "disk-record delete tasks one holder may have queued and not yet pulled "
                   "(0 = no limit; a delete past it is refused, never dropped silently)",
                   &F.delete_queue_limit),
    MC_UINT64_FLAG("holder_delete_timeout_ms", "2000",
                   "a Remove waits this long at most for a disk holder to acknowledge deleting "
                   "its copy; a holder silent that long is fenced (its copies at or below the "
                   "fence version are void, its re-registration of them refused) and "
                   "deregistered, and the Remove completes, in 1..3600000 (keep it below the "
                   "clients' RPC timeout, 5 s by default)",
                   &F.holder_delete_timeout_ms),
    MC_UINT64_FLAG("disk_recovery_window_sec", "60",
                   "after the master starts (or takes over), holders that re-register within "
                   "this many seconds get their objects back, LOCAL_DISK records and DRAM "
                   "replicas alike (objects this master does not know are recreated from their "
                   "copies); a holder that re-registers later gets nothing recreated, as one that "
                   "came back after its TTL. Removals made in the window are remembered, with or "
                   "without a disk tier, so a slower holder's copy of a removed key stays "
                   "removed; in 1..86400",
                   &F.disk_recovery_window_sec),
    MC_BOOL_FLAG("holder_stream", "true",
                 "stream every DRAM holder the commits and drops of the replicas in its "
                 "segments, for the holder index it re-registers after a master restart "
                 "(false: DRAM objects are lost at a master restart)",
                 &F.holder_stream),
    MC_UINT64_FLAG("holder_index_flush_ms", "10",
                   "the holder stream answers parked polls at most this often, so one answer "
                   "carries this long's commits (a master crash loses at most the last "
                   "interval: misses, never wrong bytes), in 1..10000",
                   &F.holder_index_flush_ms),
    MC_UINT64_FLAG("holder_backlog_limit", "1000000",
                   "holder stream items one holder may have waiting; past it the holder's index "
                   "is fenced (dropped: its DRAM objects do not come back after a restart), "
                   "0 = no limit, at most 4294967295",
                   &F.holder_backlog_limit),
    MC_DOUBLE_FLAG("offload_cap_ratio", "0.5",
                   "per-cycle offload cap = offloading_queue_limit x ratio, in [0,1]",
                   &F.offload_cap_ratio),
    MC_BOOL_FLAG("promotion_on_hit", "false",
                 "copy hot LOCAL_DISK-only objects back into DRAM when they are read (needs "
                 "--enable_offload; without it promotion stays off, with a warning)",
                 &F.promotion_on_hit),
    MC_INT32_FLAG("promotion_admission_threshold", "2",
                  "reads (sketch count) of a disk-only key that admit its promotion, 1..255 "
                  "(values outside are clamped, with a warning)",
                  &F.promotion_admission_threshold),
    MC_INT32_FLAG("promotion_batch_admission_threshold", "12",
                  "the same for a key read by a BatchGet of more than one key (a prefix read, "
                  "which waits for its slowest block), 0..255; 0 = "
                  "--promotion_admission_threshold",
                  &F.promotion_batch_admission_threshold),
    MC_UINT64_FLAG("promotion_queue_limit", "50000",
                   "promotion tasks in flight at once, all shards together, and so at most per "
                   "holder (at least 1)",
                   &F.promotion_queue_limit),
    MC_UINT32_FLAG("promotion_max_per_heartbeat", "32",
                   "promotion tasks one PromotionObjectHeartbeat hands out (at least 1)",
                   &F.promotion_max_per_heartbeat),
    MC_STRING_FLAG("promotion_task_timeout_sec", "30",
                   "a promotion task not committed this long after its admission or its "
                   "AllocStart is reaped (bare number = s)",
                   &F.promotion_task_timeout_sec),
    MC_BOOL_FLAG("enable_ha", "false",
                 "high availability: elect a leader among masters through etcd (needs "
                 "--etcd_endpoints); a standby answers every call with NOT_LEADER",
                 &F.enable_ha),
    MC_STRING_FLAG("ha_backend_type", "etcd", "HA backend: etcd (redis and k8s are not supported)",
                   &F.ha_backend_type),
    MC_STRING_FLAG("etcd_endpoints", "", "etcd client endpoints for HA, \"h1:2379;h2:2379\"",
                   &F.etcd_endpoints),
    MC_STRING_FLAG("ha_backend_connstring", "", "alias of --etcd_endpoints",
                   &F.ha_backend_connstring),
    MC_STRING_FLAG("cluster_id", "mooncake_cluster",
                   "HA: the cluster's name in etcd (leader key /mooncake-c/<cluster_id>/leader)",
                   &F.cluster_id),
    MC_UINT32_FLAG("ha_lease_ttl_sec", "3",
                   "HA: the leader's etcd lease, 1..60 s; a dead leader is replaced after about "
                   "this long, a leader cut off from etcd stops serving before it ends",
                   &F.ha_lease_ttl_sec),
    MC_STRING_FLAG("etcd_ca_file", "", "HA: CA bundle for TLS to etcd (empty = plain http)",
                   &F.etcd_ca_file),
    MC_STRING_FLAG("etcd_cert_file", "", "HA: client certificate for TLS to etcd",
                   &F.etcd_cert_file),
    MC_STRING_FLAG("etcd_key_file", "", "HA: the client certificate's key", &F.etcd_key_file),
    MC_STRING_FLAG("ha_advertise_address", "",
                   "HA: the RPC address clients reach this master at, published in etcd when it "
                   "leads (empty = --rpc_address:port, or the host name when that is 0.0.0.0)",
                   &F.ha_advertise_address),
    MC_MASTER_COMPAT_FLAGS,
    MC_FLAGS_END,
};

static uint16_t port_flag(const char *name, int32_t v)
{
    if (v < 0 || v > 65535)
        mc_flags_die("flag --%s must be a port number (0..65535), got %d", name, v);
    return (uint16_t)v;
}

/* Promotion flags: off without offload (no LOCAL_DISK replica exists then), the threshold
 * clamped to the sketch's counter range. */
static void promotion_from_flags(struct mc_master_config *c)
{
    c->promotion_on_hit = F.promotion_on_hit;
    if (F.promotion_on_hit && !F.enable_offload) {
        mc_warn(COMP, "--promotion_on_hit needs --enable_offload: promotion stays off",
                "flag=promotion_on_hit");
        c->promotion_on_hit = false;
    }
    int32_t th = F.promotion_admission_threshold;
    if (th < 1 || th > 255) {
        int32_t to = th < 1 ? 1 : 255;
        mc_warn(COMP, "--promotion_admission_threshold outside 1..255: clamped", "given=%d used=%d",
                th, to);
        th = to;
    }
    c->promotion_admission_threshold = (uint32_t)th;
    th = F.promotion_batch_admission_threshold;
    if (th < 0 || th > 255) {
        int32_t to = th < 0 ? 0 : 255;
        mc_warn(COMP, "--promotion_batch_admission_threshold outside 0..255: clamped",
                "given=%d used=%d", th, to);
        th = to;
    }
    c->promotion_batch_admission_threshold = (uint32_t)th;
    if (F.promotion_queue_limit == 0)
        mc_flags_die("flag --promotion_queue_limit must be at least 1");
    c->promotion_queue_limit = F.promotion_queue_limit;
    if (F.promotion_max_per_heartbeat == 0)
        mc_flags_die("flag --promotion_max_per_heartbeat must be at least 1");
    c->promotion_max_per_heartbeat = F.promotion_max_per_heartbeat;
    c->promotion_task_timeout_ms =
        mc_flags_duration_ms("promotion_task_timeout_sec", F.promotion_task_timeout_sec, MC_UNIT_S);
    if (c->promotion_task_timeout_ms == 0)
        mc_flags_die("flag --promotion_task_timeout_sec must be positive");
}

static void config_from_flags(struct mc_master_config *c, uint32_t *max_frame)
{
    mc_master_config_init(c);
    c->default_kv_lease_ttl_ms =
        mc_flags_duration_ms("default_kv_lease_ttl", F.default_kv_lease_ttl, MC_UNIT_MS);
    c->default_kv_soft_pin_ttl_ms =
        mc_flags_duration_ms("default_kv_soft_pin_ttl", F.default_kv_soft_pin_ttl, MC_UNIT_MS);
    c->max_kv_soft_pin_ttl_ms =
        mc_flags_duration_ms("max_kv_soft_pin_ttl", F.max_kv_soft_pin_ttl, MC_UNIT_MS);
    c->allow_evict_soft_pinned_objects = F.allow_evict_soft_pinned_objects;
    c->object_huge_pages = F.object_huge_pages;
    if (!(F.eviction_ratio >= 0 && F.eviction_ratio <= 1))
        mc_flags_die("flag --eviction_ratio must be in [0,1]");
    if (!(F.eviction_high_watermark_ratio >= 0 && F.eviction_high_watermark_ratio <= 1))
        mc_flags_die("flag --eviction_high_watermark_ratio must be in [0,1]");
    c->eviction_ratio = F.eviction_ratio;
    c->eviction_high_watermark_ratio = F.eviction_high_watermark_ratio;
    if (F.eviction_threads > 64)
        mc_flags_die("flag --eviction_threads must be in 0..64");
    c->eviction_threads = F.eviction_threads;
    c->client_ttl_ms = mc_flags_duration_ms("client_ttl", F.client_ttl, MC_UNIT_S);
    if (c->client_ttl_ms == 0)
        mc_flags_die("flag --client_ttl must be positive");
    c->put_start_discard_timeout_ms = mc_flags_duration_ms(
        "put_start_discard_timeout_sec", F.put_start_discard_timeout_sec, MC_UNIT_S);
    c->put_start_release_timeout_ms = mc_flags_duration_ms(
        "put_start_release_timeout_sec", F.put_start_release_timeout_sec, MC_UNIT_S);
    if (c->put_start_release_timeout_ms <= c->put_start_discard_timeout_ms)
        mc_flags_die("flag --put_start_release_timeout_sec must be larger than "
                     "--put_start_discard_timeout_sec");
    if (c->default_kv_soft_pin_ttl_ms > c->max_kv_soft_pin_ttl_ms)
        mc_flags_die("flag --default_kv_soft_pin_ttl must not exceed --max_kv_soft_pin_ttl");
    if (mc_alloc_strategy_parse(F.allocation_strategy, &c->allocation_strategy) != 0)
        mc_flags_die("flag --allocation_strategy must be random or free_ratio_first, got '%s'",
                     F.allocation_strategy);
    if (F.max_key_len == 0 || F.max_key_len > 65535)
        mc_flags_die("flag --max_key_len must be in 1..65535");
    c->max_key_len = F.max_key_len;
    uint64_t mf = mc_flags_size("max_frame_bytes", F.max_frame_bytes);
    if (mf < MC_WIRE_MIN_MAX_FRAME_BYTES || mf > UINT32_MAX)
        mc_flags_die("flag --max_frame_bytes must be between %u and 4GiB-1",
                     MC_WIRE_MIN_MAX_FRAME_BYTES);
    *max_frame = (uint32_t)mf;
    if (F.offload_on_evict && !F.enable_offload)
        mc_flags_die("flag --offload_on_evict needs --enable_offload (there is no disk tier to "
                     "offload to without it)");
    if (F.offloading_queue_limit == 0 || F.offloading_queue_limit > UINT32_MAX)
        mc_flags_die("flag --offloading_queue_limit must be in 1..4294967295");
    if (!(F.offload_cap_ratio >= 0 && F.offload_cap_ratio <= 1))
        mc_flags_die("flag --offload_cap_ratio must be in [0,1]");
    c->enable_offload = F.enable_offload;
    c->offload_on_evict = F.offload_on_evict;
    c->offload_force_evict = F.offload_force_evict; /* alone: ignored by the core (a warning) */
    c->offloading_queue_limit = (uint32_t)F.offloading_queue_limit;
    if (F.delete_queue_limit > UINT32_MAX)
        mc_flags_die("flag --delete_queue_limit must be in 0..4294967295");
    c->delete_queue_limit = (uint32_t)F.delete_queue_limit;
    if (F.holder_delete_timeout_ms == 0 || F.holder_delete_timeout_ms > 3600000)
        mc_flags_die("flag --holder_delete_timeout_ms must be in 1..3600000");
    c->holder_delete_timeout_ms = F.holder_delete_timeout_ms;
    if (F.disk_recovery_window_sec == 0 || F.disk_recovery_window_sec > 86400)
        mc_flags_die("flag --disk_recovery_window_sec must be in 1..86400");
    c->disk_recovery_window_ms = F.disk_recovery_window_sec * 1000;
    c->holder_stream = F.holder_stream;
    if (F.holder_index_flush_ms == 0 || F.holder_index_flush_ms > 10000)
        mc_flags_die("flag --holder_index_flush_ms must be in 1..10000");
    c->holder_index_flush_ms = (uint32_t)F.holder_index_flush_ms;
    if (F.holder_backlog_limit > UINT32_MAX)
        mc_flags_die("flag --holder_backlog_limit must be in 0..4294967295");
    c->holder_backlog_limit = (uint32_t)F.holder_backlog_limit;
    c->offload_cap_ratio = F.offload_cap_ratio;
    promotion_from_flags(c);
    c->manual_ticks = false;
}

/* ---- background loops ------------------------------------------------------------------------ */

struct loops {
    struct mc_master *m;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    int nstarted;
    pthread_t th[4];
};

struct loop_def {
    const char *name;
    int (*tick)(struct mc_master *);
    uint64_t period_ms;
};

static const struct loop_def g_loops[4] = {
    {"eviction", mc_master_tick_eviction, 10},
    {"monitor", mc_master_tick_monitor, 1000},
    {"reaper", mc_master_tick_reaper, 1000},
    {"offload", mc_master_tick_offload, 20}, /* long-poll deadlines; a no-op without offload */
};

struct loop_arg {
    struct loops *l;
    const struct loop_def *def;
};
static struct loop_arg g_loop_args[4];

static void *loop_main(void *arg)
{
    struct loop_arg *a = arg;
    struct loops *l = a->l;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        uint64_t ns = (uint64_t)next.tv_nsec + a->def->period_ms * 1000000ull;
        next.tv_sec += (time_t)(ns / 1000000000ull);
        next.tv_nsec = (long)(ns % 1000000000ull);
        if (a->def->tick == mc_master_tick_eviction) {
            /* a PutStart refused for space ends this wait at once (mc_master_eviction_wait) */
            pthread_mutex_unlock(&l->mu);
            mc_master_eviction_wait(l->m, a->def->period_ms);
            pthread_mutex_lock(&l->mu);
        } else {
            while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &next) != ETIMEDOUT)
                ;
        }
        if (l->stop)
            break;
        pthread_mutex_unlock(&l->mu);
        int n = a->def->tick(l->m);
        if (n > 0)
            mc_debug(COMP, "background tick", "loop=%s items=%d", a->def->name, n);
        pthread_mutex_lock(&l->mu);
        /* a tick that overran its period does not cause a burst of catch-up ticks */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec))
            next = now;
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static int loops_start(struct loops *l, struct mc_master *m)
{
    memset(l, 0, sizeof(*l));
    l->m = m;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&l->mu, NULL);
    for (int i = 0; i < 4; i++) {
        g_loop_args[i].l = l;
        g_loop_args[i].def = &g_loops[i];
        int err = pthread_create(&l->th[i], NULL, loop_main, &g_loop_args[i]);
        if (err != 0) {
            mc_error(COMP, "cannot start background thread", "loop=%s err=\"%s\"", g_loops[i].name,
                     strerror(err));
            return -1;
        }
        l->nstarted++;
    }
    return 0;
}

static void loops_stop(struct loops *l)
{
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    mc_master_eviction_wake(l->m); /* the eviction loop waits on its own wake */
    for (int i = 0; i < l->nstarted; i++)
        pthread_join(l->th[i], NULL);
    l->nstarted = 0;
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
}

/* ---- high availability ------------------------------------------------------------------- */

/* Flags -> ha config; exits 2 on a bad combination. Without --enable_ha: nothing (NULL). */
static bool ha_from_flags(struct mc_ha_config *hc)
{
    memset(hc, 0, sizeof(*hc));
    bool any_ha_flag = F.etcd_endpoints[0] || F.ha_backend_connstring[0];
    if (!F.enable_ha) {
        if (any_ha_flag)
            mc_warn(COMP, "etcd endpoints given without --enable_ha: HA stays off", "%s", "");
        return false;
    }
    if (strcmp(F.ha_backend_type, "etcd") != 0)
        mc_flags_die("flag --ha_backend_type=%s is not supported: only etcd is (redis and k8s "
                     "backends are not implemented)",
                     F.ha_backend_type);
    if (F.etcd_endpoints[0] && F.ha_backend_connstring[0] &&
        strcmp(F.etcd_endpoints, F.ha_backend_connstring) != 0)
        mc_flags_die("flags --etcd_endpoints and --ha_backend_connstring disagree (one is an "
                     "alias of the other: give one)");
    hc->endpoints = F.etcd_endpoints[0] ? F.etcd_endpoints : F.ha_backend_connstring;
    if (!hc->endpoints[0])
        mc_flags_die("flag --enable_ha needs --etcd_endpoints (\"h1:2379;h2:2379\")");
    if (F.ha_lease_ttl_sec < 1 || F.ha_lease_ttl_sec > 60)
        mc_flags_die("flag --ha_lease_ttl_sec must be in 1..60");
    hc->cluster_id = F.cluster_id;
    hc->lease_ttl_s = F.ha_lease_ttl_sec;
    hc->ca_file = F.etcd_ca_file;
    hc->cert_file = F.etcd_cert_file;
    hc->key_file = F.etcd_key_file;
    return true;
}

static void ha_on_leader(void *arg, uint64_t epoch)
{
    mc_master_take_over(arg, epoch);
}

static _Atomic bool g_ha_lost; /* a lost leadership ends the process (exit status 3) */

static void ha_on_lost(void *arg, const char *why)
{
    (void)arg;
    mc_error(COMP,
             "no longer the leader: exiting (a supervisor restarts this master as a standby; "
             "its state may be stale)",
             "why=%s", why);
    atomic_store(&g_ha_lost, true);
    kill(getpid(), SIGTERM); /* read by main's signalfd: the usual shutdown */
}

/* GET /role and /leader (mc_ha_http_*); other paths 404. */
static int ha_http(void *arg, const char *path, const struct mc_http_request *req,
                   struct mc_textbuf *body, const char **content_type)
{
    (void)req;
    (void)content_type;
    if (strcmp(path, "/role") == 0)
        return mc_ha_http_role(arg, body);
    if (strcmp(path, "/leader") == 0)
        return mc_ha_http_leader(arg, body);
    return 0;
}

/* The HTTP port's handler: the admin API (http_admin.c), with /role and /leader answered by the
 * election when HA is on. */
static struct mc_ha *g_http_ha;
/* Routes of the admin API any reader may see (http_admin.h); the HTTP layer adds /metrics, /health
 * and /get_all_segments, and treats every other path as an admin route. */
static const char *const g_http_public_paths[] = {"/role", "/leader", "/get_segments_detail",
                                                  "/query_segment", NULL};
static int master_http(void *arg, const char *path, const struct mc_http_request *req,
                       struct mc_textbuf *body, const char **content_type)
{
    if (g_http_ha && (strcmp(path, "/role") == 0 || strcmp(path, "/leader") == 0))
        return ha_http(g_http_ha, path, req, body, content_type);
    return mc_master_http_handle(arg, path, req, body, content_type);
}

/* /health: the election's role under HA, else the standalone answer (http_admin.c). */
static int master_health(void *arg, struct mc_textbuf *body)
{
    if (g_http_ha)
        return mc_ha_http_health(g_http_ha, body);
    return mc_master_http_health(arg, body);
}

/* The address a leader publishes: --ha_advertise_address, else rpc_address:port (the host name
 * when bound to every address). */
static void ha_advertise(char *buf, size_t cap, uint16_t port)
{
    if (F.ha_advertise_address[0]) {
        snprintf(buf, cap, "%s", F.ha_advertise_address);
        return;
    }
    char host[256] = "";
    if (strcmp(F.rpc_address, "0.0.0.0") != 0 && F.rpc_address[0])
        snprintf(host, sizeof(host), "%s", F.rpc_address);
    else if (gethostname(host, sizeof(host) - 1) != 0)
        snprintf(host, sizeof(host), "localhost");
    snprintf(buf, cap, "%s:%u", host, port);
}

/* ---- main ------------------------------------------------------------------------------------ */

static double rpc_auth_failures(void *arg)
{
    struct mc_rpc_server_stats st;
    mc_rpc_server_get_stats(arg, &st);
    return (double)st.auth_failures;
}

static double rpc_protected_refusals(void *arg)
{
    struct mc_rpc_server_stats st;
    mc_rpc_server_get_stats(arg, &st);
    return (double)st.protected_refusals;
}

static int wait_for_signal(int sfd)
{
    for (;;) {
        struct signalfd_siginfo si;
        ssize_t n = read(sfd, &si, sizeof(si));
        if (n == (ssize_t)sizeof(si))
            return (int)si.ssi_signo;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

int main(int argc, char **argv)
{
    mc_flags_parse(g_flags, "mooncake_master [flags]: the Mooncake metadata daemon", &argc, &argv);
    mc_flags_apply_log_level("log_level", F.log_level);
    if (argc > 1)
        mc_flags_die("unexpected argument '%s'", argv[1]);
    struct mc_master_compat_result compat;
    mc_master_compat_apply(&compat);
    struct mc_master_config mcfg;
    uint32_t max_frame = 0;
    config_from_flags(&mcfg, &max_frame);
    struct mc_ha_config hacfg;
    bool ha_on = ha_from_flags(&hacfg);
    uint64_t idle = compat.has_idle_timeout_ms
                        ? compat.idle_timeout_ms
                        : mc_flags_duration_ms("idle_timeout", F.idle_timeout, MC_UNIT_S);
    if (idle > UINT32_MAX)
        mc_flags_die("flag --idle_timeout must be below 49 days");
    uint32_t idle_ms = (uint32_t)idle;
    if (F.max_inflight_per_conn == 0 || F.max_inflight_per_conn > 1000000)
        mc_flags_die("flag --max_inflight_per_conn must be 1..1000000");
    uint16_t rpc_port = compat.has_rpc_port ? port_flag("port", compat.rpc_port)
                                            : port_flag("rpc_port", F.rpc_port);
    uint16_t metrics_port = port_flag("metrics_port", F.metrics_port);
    int io_threads = compat.has_rpc_thread_num ? compat.rpc_thread_num : F.rpc_thread_num;
    if (io_threads < 0)
        mc_flags_die("flag --rpc_thread_num must not be negative");
    if (io_threads == 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        io_threads = ncpu < 1 ? 1 : ncpu > 16 ? 16 : (int)ncpu;
    }

    /* Before any thread exists: SIGTERM/SIGINT only through the signalfd; no SIGPIPE. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);

    int status = 1;
    struct mc_master *m = NULL;
    struct mc_master_service *svc = NULL;
    struct mc_rpc_server *srv = NULL;
    struct mc_http_server *http = NULL;
    struct mc_tls_ctx *tls = NULL;
    struct loops loops = {0};
    bool loops_running = false;
    struct mc_ha *ha = NULL;
    if (sfd < 0) {
        mc_error(COMP, "signalfd failed", "err=\"%s\"", strerror(errno));
        goto out;
    }
    int rc = mc_master_new(&mcfg, &m);
    if (rc != 0) {
        mc_error(COMP, "cannot create the master", "rc=%s", mc_strerror(rc));
        status = rc == MC_ERR_INVALID_PARAMS ? 2 : 1;
        goto out;
    }
    if (mc_master_service_new(m, &svc) != 0)
        goto out;
    if (ha_on) { /* the gate is in place before the first call can arrive */
        hacfg.on_leader = ha_on_leader;
        hacfg.on_lost = ha_on_lost;
        hacfg.cb_arg = m;
        if (mc_ha_new(&hacfg, &ha) != 0) {
            status = 2;
            goto out;
        }
        mc_ha_set_fences(ha, mc_master_fences(m));
        mc_master_service_set_ha(svc, ha);
    }
    mc_master_service_set_segment_cap(svc, F.max_segments_per_client);
    struct mc_auth_key auth = {0};
    mc_auth_allow_readable_token_file(F.allow_readable_token_file);
    if (F.auth_token_file[0]) {
        char err[160];
        if (mc_auth_key_load(F.auth_token_file, &auth, err, sizeof(err)) != 0) {
            mc_error(COMP, "cannot load the auth token", "path=%s reason=\"%s\"", F.auth_token_file,
                     err);
            status = 2;
            goto out;
        }
    } else if (!F.protected_mode) {
        mc_warn(COMP,
                "protected mode is off and no auth token is set: any host that reaches the RPC "
                "port can call every master method",
                "rpc_address=%s", F.rpc_address);
    }
    struct mc_auth_key admin = {0};
    if (F.admin_token_file[0]) {
        char err[160];
        if (!auth.set) {
            mc_error(COMP, "--admin_token_file needs --auth_token_file (the data token)",
                     "admin_token_file=%s", F.admin_token_file);
            status = 2;
            goto out;
        }
        if (mc_auth_key_load(F.admin_token_file, &admin, err, sizeof(err)) != 0) {
            mc_error(COMP, "cannot load the admin token", "path=%s reason=\"%s\"",
                     F.admin_token_file, err);
            status = 2;
            goto out;
        }
    }
    struct mc_rpc_server_config rcfg;
    mc_rpc_server_config_init(&rcfg);
    rcfg.admin_auth = &admin;
    rcfg.bind_addr = F.rpc_address;
    rcfg.port = rpc_port;
    rcfg.io_threads = io_threads;
    rcfg.max_frame_bytes = max_frame;
    rcfg.name = "master";
    rcfg.on_close = mc_master_service_on_close;
    rcfg.on_close_arg = svc;
    rcfg.auth = &auth;
    rcfg.protected_mode = F.protected_mode;
    rcfg.idle_timeout_ms = idle_ms;
    rcfg.max_conns_per_addr = F.max_conns_per_addr;
    rcfg.max_inflight_per_conn = (int)F.max_inflight_per_conn;
    if (F.max_connections == 0 || F.max_connections > 1000000)
        mc_flags_die("flag --max_connections must be 1..1000000");
    rcfg.max_conns = (int)F.max_connections;
    rcfg.endpoint_check_off = !F.check_segment_endpoint;
    rcfg.out_hard_bytes = mc_flags_size("output_buffer_limit", F.output_buffer_limit);
    rcfg.out_soft_bytes = rcfg.out_hard_bytes / 4;
    if (rcfg.out_hard_bytes < (1u << 20))
        mc_flags_die("flag --output_buffer_limit must be at least 1MiB");
    struct mc_tls_files tls_files = {F.tls_cert_file, F.tls_key_file, F.tls_ca_file};
    if (mc_tls_files_set(&tls_files)) {
        char err[256];
        if (mc_tls_ctx_new(&tls_files, true, &tls, err, sizeof(err)) != 0) {
            mc_error(COMP, "cannot set up TLS", "reason=\"%s\"", err);
            goto out;
        }
        rcfg.tls = tls;
        mc_info(COMP, "TLS on the RPC and HTTP ports", "client_certificates=%s",
                mc_tls_ctx_verifies_clients(tls) ? "required" : "not asked");
    }
    if (mc_rpc_server_new(&rcfg, &srv) != 0 || mc_master_service_register(svc, srv) != 0) {
        mc_error(COMP, "cannot create the RPC server", "addr=%s", F.rpc_address);
        goto out;
    }
    if (mc_rpc_server_start(srv) != 0) {
        mc_error(COMP, "cannot listen for RPC", "addr=%s port=%u", F.rpc_address, rpc_port);
        goto out;
    }
    static struct mc_master_http http_admin; /* lives until exit; the HTTP server reads it */
    http_admin.m = m;
    /* the admin API checks the same Bearer token as the HTTP layer (common/http.c) */
    http_admin.admin_key = admin.set ? admin : auth;
    snprintf(http_admin.self_addr, sizeof(http_admin.self_addr), "%s:%u", F.rpc_address,
             mc_rpc_server_port(srv));
    struct mc_http_config hcfg = {.addr = F.metrics_host,
                                  .port = metrics_port,
                                  .metrics = mc_master_metrics(m),
                                  .health = master_health,
                                  .health_arg = &http_admin,
                                  .handler = master_http,
                                  .handler_arg = &http_admin};
    g_http_ha = ha; /* with HA, /role and /leader answer from the election */
    hcfg.admin_key = admin.set ? &admin : &auth; /* admin endpoints: Bearer <token> */
    hcfg.public_reads = F.metrics_public;
    hcfg.protected_mode_off = !F.protected_mode;
    hcfg.public_paths = g_http_public_paths; /* the admin API's public routes */
    hcfg.tls_cert_file = F.tls_cert_file;    /* HTTPS with the RPC port's certificate */
    hcfg.tls_key_file = F.tls_key_file;
    if (mc_http_server_new(&hcfg, &http) != 0) {
        mc_error(COMP, "cannot serve HTTP metrics", "addr=%s port=%u", F.metrics_host,
                 metrics_port);
        goto out;
    }
    mc_master_service_set_http_port(svc, mc_http_server_port(http));
    mc_metrics_counter_fn(mc_master_metrics(m), "master_rpc_auth_failures_total",
                          "RPC connections refused: failed handshake or a request before one", NULL,
                          rpc_auth_failures, srv);
    mc_metrics_counter_fn(mc_master_metrics(m), "master_rpc_protected_mode_refusals_total",
                          "non-loopback RPC clients refused in protected mode", NULL,
                          rpc_protected_refusals, srv);
    mc_rpc_server_export_metrics(srv, mc_master_metrics(m), "master");
    if (loops_start(&loops, m) != 0) {
        loops_running = true; /* join what started */
        goto out;
    }
    loops_running = true;
    if (ha) { /* both ports are bound: campaign */
        char adv[300];
        ha_advertise(adv, sizeof(adv), mc_rpc_server_port(srv));
        if (mc_ha_start(ha, adv) != 0)
            goto out;
    }

    mc_info(COMP, "serving", "rpc=%s:%u metrics=%s io_threads=%d version=\"%s\"", F.rpc_address,
            mc_rpc_server_port(srv), mc_http_server_addr(http), io_threads, MC_SERVICE_VERSION);
    printf("READY rpc=%s:%u metrics=%s\n", F.rpc_address, mc_rpc_server_port(srv),
           mc_http_server_addr(http));
    fflush(stdout);

    int sig = wait_for_signal(sfd);
    mc_info(COMP, "stopping", "signal=%s",
            sig == SIGINT    ? "SIGINT"
            : sig == SIGTERM ? "SIGTERM"
                             : "?");
    status = sig > 0 ? 0 : 1;
    if (atomic_load(&g_ha_lost))
        status = 3;
out:
    /* a leader resigns first (revokes its lease): a standby takes over at once */
    mc_ha_stop(ha, true);
    if (srv)
        mc_rpc_server_stop(srv);
    if (loops_running)
        loops_stop(&loops);
    mc_http_server_free(http);
    /* The master before the server: freeing it answers the holders' parked heartbeats, which
     * must find the (stopped) server still there (their completion is then only a free). */
    if (m)
        mc_master_free(m);
    mc_rpc_server_free(srv);
    mc_tls_ctx_free(tls);
    mc_master_service_free(svc);
    mc_ha_free(ha);
    if (sfd >= 0)
        close(sfd);
    if (status == 0)
        mc_info(COMP, "stopped", "%s", "");
    return status;
}
