/*
 * daemon_main.c - mooncake_client: a standalone client process that contributes DRAM to the
 * store and serves peers (DESIGN.md §2). With --disk_path it is also a LOCAL_DISK holder: its
 * disk store (--disk_capacity bytes of the directory) is recovered and its records
 * re-registered with the master before READY, and its offload worker copies objects the master
 * asks for from its DRAM segment to the disk (src/client/disk_tier.h, worker.h). The client id
 * is kept in the directory, so a restart within the master's --client_ttl is the same holder.
 *
 * It is libmooncake_client and nothing else: flags (gflags, through common/flags.h) are copied
 * into a struct mc_client_config, mc_client_open() connects to the master, mounts the segment
 * and starts the peer server and the worker (pings, re-mount after a master restart). Once that
 * returned, the daemon prints exactly one line on stdout and flushes it:
 *
 *     READY endpoint=HOST:PORT
 *
 * where the endpoint is mc_client_endpoint(), byte for byte what `mooncake_cli segments` shows
 * for the segment. Scripts and tests wait for this line. Logs go to stderr.
 *
 * Signals: SIGTERM and SIGINT are blocked before any thread starts (so every library thread
 * inherits the mask) and the main thread waits for them with sigwait(); no handler runs in
 * signal context. On either, the daemon calls mc_client_close() (unmount, join every thread)
 * and exits 0. SIGPIPE is ignored (the library sends with MSG_NOSIGNAL; this covers stdout).
 *
 * Peer connection limits, with the meaning, defaults and parsing of mooncake_master's:
 * --idle_timeout (close a peer connection idle this long; 0 = never) and --max_conns_per_addr
 * (per non-loopback address; 0 = no limit), handed to the peer server through the client
 * config.
 *
 * Optional --metrics_port, or upstream's --enable_client_http_server with --client_http_port
 * (default 9300), serves /metrics and /health (common/http.h): the library's own counts of this
 * process's puts and gets (client_metrics.h) plus the daemon's series: configured sizes, uptime,
 * peer refusals and the LOCAL_DISK tier.
 *
 * Start-up: an unreachable master (not yet started, restarting) is retried with backoff for
 * --master_wait (default 30 s; 0 = give up at once), each attempt logged; SIGTERM/SIGINT end
 * the wait. A loopback --host with a remote master is warned about: peers elsewhere could not
 * reach the segment.
 *
 * Exit status: 0 after a signal, 1 when the client cannot start (reason logged), 2 bad usage.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "client/client_internal.h"
#include "client/daemon_compat.h"
#include "client/disk_store.h"
#include "client/peer_server.h"
#include "common/auth.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/net.h"
#include "common/rpc_client.h"
#include "common/http.h"
#include "common/log.h"
#include "common/metrics.h"
#include "mooncake/client.h"

static struct {
    const char *master;
    const char *host;
    const char *bind_address;
    int32_t data_port;
    const char *segment_size;
    bool huge_pages;
    const char *disk_path;
    const char *disk_capacity;
    const char *protocol;
    bool checksums;
    int32_t metrics_port;
    const char *log_level;
    const char *auth_token_file;
    const char *tls_cert_file, *tls_key_file, *tls_ca_file;
    bool protected_mode;
    const char *master_wait;
    const char *idle_timeout;
    uint32_t max_conns_per_addr;
    bool enable_client_http_server;
    int32_t client_http_port;
    const char *rdma_devices;
    int32_t rdma_ack_timeout;
    int32_t rdma_tos;
    uint32_t rdma_qp_pool;
    uint32_t max_connections;
    bool metrics_public;
    bool allow_readable_token_file;
} F;

static const struct mc_flag g_flags[] = {
    MC_STRING_FLAG(
        "master", "127.0.0.1:50051",
        "mooncake_master RPC address HOST:PORT, or etcd://H1:2379;H2:2379[/CLUSTER_ID] to "
        "follow the leader of an HA cluster",
        &F.master),
    MC_STRING_FLAG("host", "127.0.0.1",
                   "host advertised to peers (and bound, unless --bind_address is given)", &F.host),
    MC_STRING_FLAG("bind_address", "", "address the peer server binds (default: --host)",
                   &F.bind_address),
    MC_INT32_FLAG("data_port", "0", "peer server port (0 = pick a free one)", &F.data_port),
    MC_STRING_FLAG("segment_size", "4GiB", "DRAM contributed to the store (e.g. 256MiB, 4GiB)",
                   &F.segment_size),
    MC_BOOL_FLAG("huge_pages", "false", "back the segment with huge pages when available",
                 &F.huge_pages),
    MC_STRING_FLAG("disk_path", "",
                   "LOCAL_DISK directory (created if missing; keeps the client id and the "
                   "offloaded objects; empty = no disk tier)",
                   &F.disk_path),
    MC_STRING_FLAG("disk_capacity", "16GiB",
                   "bytes of records the store keeps in --disk_path; the directory may also hold "
                   "up to two evicted extent files kept for reuse as spares (an extent is "
                   "disk_capacity/16, between 1 MiB and 64 MiB)",
                   &F.disk_capacity),
    MC_STRING_FLAG("protocol", "tcp", "data-plane transport: tcp or rdma", &F.protocol),
    MC_BOOL_FLAG("checksums", "true",
                 "verify the value CRC32C on every get (--checksums=false turns it off)",
                 &F.checksums),
    MC_INT32_FLAG("metrics_port", "0", "HTTP /metrics and /health port (0 = off)", &F.metrics_port),
    MC_STRING_FLAG("log_level", "info", "debug|info|warn|error|off", &F.log_level),
    MC_STRING_FLAG("tls_cert_file", "",
                   "TLS: this daemon's certificate (PEM); with --tls_key_file and --tls_ca_file "
                   "every TCP connection (master, peers, the peer and HTTP ports) is TLS; empty = "
                   "plain TCP",
                   &F.tls_cert_file),
    MC_STRING_FLAG("tls_key_file", "", "TLS: the private key of --tls_cert_file (PEM)",
                   &F.tls_key_file),
    MC_STRING_FLAG("tls_ca_file", "",
                   "TLS: CA bundle (PEM) the master's and peers' certificates are checked "
                   "against; peers of this daemon's peer port must show a certificate it signed",
                   &F.tls_ca_file),
    MC_STRING_FLAG("auth_token_file", "",
                   "file holding the cluster's shared secret: every connection (master, peers) "
                   "proves it; empty = none",
                   &F.auth_token_file),
    MC_BOOL_FLAG("protected_mode", "true",
                 "without --auth_token_file, serve loopback peers only (false: any host; warns)",
                 &F.protected_mode),
    MC_STRING_FLAG("master_wait", "30s",
                   "at start-up, keep retrying an unreachable master this long, with backoff "
                   "(0 = give up at once; bare number = seconds)",
                   &F.master_wait),
    MC_STRING_FLAG("idle_timeout", "300",
                   "close a peer connection idle this long (no call in flight; bare number = s; "
                   "0 = never)",
                   &F.idle_timeout),
    MC_UINT32_FLAG("max_conns_per_addr", "1024",
                   "most peer connections from one non-loopback address (0 = no limit)",
                   &F.max_conns_per_addr),
    MC_BOOL_FLAG("enable_client_http_server", "false",
                 "serve /metrics and /health on --client_http_port (upstream's flag; the same "
                 "server as --metrics_port)",
                 &F.enable_client_http_server),
    MC_INT32_FLAG("client_http_port", "9300",
                  "port of --enable_client_http_server (0 = pick a free one)", &F.client_http_port),
    MC_DAEMON_COMPAT_FLAGS,
    MC_STRING_FLAG("rdma_devices", "",
                   "protocol rdma: comma-separated RDMA devices to register memory on (see "
                   "ibv_devices); empty = the device that owns --host",
                   &F.rdma_devices),
    MC_INT32_FLAG("rdma_ack_timeout", "14",
                  "protocol rdma: queue pair ACK timeout, 4.096us * 2^N (14 = ~67ms per retry; 0 "
                  "= rdma_cm's default)",
                  &F.rdma_ack_timeout),
    MC_INT32_FLAG("rdma_tos", "0",
                  "protocol rdma: IP ToS / traffic class of RDMA connections (0 = the fabric's "
                  "default; lossless RoCE fabrics name theirs)",
                  &F.rdma_tos),
    MC_UINT32_FLAG("rdma_qp_pool", "0",
                   "protocol rdma: idle queue pairs kept per peer, about the threads that talk to "
                   "one peer at once (0 = one per CPU, 4..64; at most 1024)",
                   &F.rdma_qp_pool),
    MC_BOOL_FLAG("allow_readable_token_file", "false",
                 "accept an --auth_token_file that group or others may read (refused otherwise)",
                 &F.allow_readable_token_file),
    MC_BOOL_FLAG("metrics_public", "false",
                 "serve /metrics and /health to any host even without --auth_token_file "
                 "(otherwise loopback only, as the peer port's protected mode)",
                 &F.metrics_public),
    MC_UINT32_FLAG("max_connections", "10000",
                   "most peer connections in all, 1..1000000 (connections still in the token "
                   "handshake have a smaller pool of their own)",
                   &F.max_connections),
    MC_FLAGS_END,
};

struct daemon_stats {
    struct mc_metrics *m; /* the client's (mc_client_registry), freed by mc_client_close */
    uint64_t start_ms;
};

static double uptime_s(void *arg)
{
    const struct daemon_stats *st = arg;
    return (double)(mc_now_ms() - st->start_ms) / 1000.0;
}

static double peer_stat(void *arg, bool auth)
{
    struct mc_peer_server_stats ps;
    mc_peer_server_get_stats(mc_client_peer_server(arg), &ps);
    return (double)(auth ? ps.auth_failures : ps.protected_refusals);
}

static double auth_failures(void *arg)
{
    return peer_stat(arg, true);
}

static double protected_refusals(void *arg)
{
    return peer_stat(arg, false);
}

/* The LOCAL_DISK tier's figures (0 without --disk_path). */
enum tier_stat {
    TS_RECORDS,
    TS_BYTES_USED,
    TS_OFFLOADED,
    TS_NACKED,
    TS_PEER_READS,
    TS_EVICTED,
    TS_REINSERTED,
    TS_CAP_LIMIT,
    TS_RECLAIMED,
    TS_CORRUPT
};

static double tier_stat(struct mc_client *c, enum tier_stat which)
{
    struct mc_disk_tier *t = atomic_load(&c->disk);
    if (!t)
        return 0;
    struct mc_disk_usage u;
    struct mc_disk_tier_stats ts;
    struct mc_worker_stats ws = {0};
    mc_disk_store_usage(mc_disk_tier_store(t), &u);
    mc_disk_tier_get_stats(t, &ts);
    if (c->worker)
        mc_worker_get_stats(c->worker, &ws);
    switch (which) {
    case TS_RECORDS:
        return (double)u.records;
    case TS_BYTES_USED:
        return (double)u.bytes_used;
    case TS_OFFLOADED:
        return (double)ws.offloaded;
    case TS_NACKED:
        return (double)ws.nacked;
    case TS_PEER_READS:
        return (double)ts.peer_reads;
    case TS_EVICTED:
        return (double)u.evicted_records;
    case TS_REINSERTED:
        return (double)u.reinserted_records;
    case TS_CAP_LIMIT:
        return (double)u.capacity_limit;
    case TS_RECLAIMED:
        return (double)u.reclaimed_extents;
    case TS_CORRUPT:
        return (double)u.corrupt_dropped;
    }
    return 0;
}

#define TIER_FN(name, which)                                                                       \
    static double name(void *arg)                                                                  \
    {                                                                                              \
        return tier_stat(arg, which);                                                              \
    }
TIER_FN(disk_records, TS_RECORDS)
TIER_FN(disk_bytes_used, TS_BYTES_USED)
TIER_FN(offloaded, TS_OFFLOADED)
TIER_FN(offload_nacked, TS_NACKED)
TIER_FN(disk_peer_reads, TS_PEER_READS)
TIER_FN(disk_evicted, TS_EVICTED)
TIER_FN(disk_reinserted, TS_REINSERTED)
TIER_FN(disk_capacity_limit, TS_CAP_LIMIT)
TIER_FN(disk_reclaimed, TS_RECLAIMED)
TIER_FN(disk_corrupt_dropped, TS_CORRUPT)

static int start_metrics(struct daemon_stats *st, const char *addr, uint16_t port, uint64_t seg,
                         uint64_t disk, struct mc_client *client, struct mc_http_server **out)
{
    struct mc_http_config hc = {0};
    struct mc_gauge *g;

    /* who may read it (common/http.h): loopback only unless a token or --metrics_public */
    hc.public_reads = F.metrics_public || F.auth_token_file[0];
    hc.protected_mode_off = !F.protected_mode;
    hc.tls_cert_file = F.tls_cert_file; /* HTTPS with the peer port's certificate */
    hc.tls_key_file = F.tls_key_file;

    /* the library's registry (its puts, gets, errors, latencies), with the daemon's series */
    st->m = mc_client_registry(client);
    if (!st->m)
        return MC_ERR_INTERNAL_ERROR;
    g = mc_metrics_gauge(st->m, "mooncake_client_segment_bytes",
                         "DRAM this daemon contributes to the store", NULL);
    if (g)
        mc_gauge_set(g, (int64_t)seg);
    g = mc_metrics_gauge(st->m, "mooncake_client_disk_capacity_bytes",
                         "LOCAL_DISK bytes this daemon may use (0 = no disk tier)", NULL);
    if (g)
        mc_gauge_set(g, (int64_t)disk);
    mc_metrics_gauge_fn(st->m, "mooncake_client_uptime_seconds", "seconds since start", NULL,
                        uptime_s, st);
    mc_metrics_counter_fn(st->m, "mooncake_client_peer_auth_failures_total",
                          "peer connections refused: failed handshake or a request before one",
                          NULL, auth_failures, client);
    mc_metrics_counter_fn(st->m, "mooncake_client_peer_protected_mode_refusals_total",
                          "non-loopback peers refused in protected mode", NULL, protected_refusals,
                          client);
    mc_metrics_gauge_fn(st->m, "mooncake_client_disk_records", "records in the LOCAL_DISK store",
                        NULL, disk_records, client);
    mc_metrics_gauge_fn(st->m, "mooncake_client_disk_used_bytes",
                        "bytes of the LOCAL_DISK store's extents", NULL, disk_bytes_used, client);
    mc_metrics_counter_fn(st->m, "mooncake_client_offloaded_total",
                          "objects copied to the disk and accepted by the master", NULL, offloaded,
                          client);
    mc_metrics_counter_fn(st->m, "mooncake_client_offload_nacked_total",
                          "offload tasks reported as not stored", NULL, offload_nacked, client);
    mc_metrics_counter_fn(st->m, "mooncake_client_disk_peer_reads_total",
                          "LOCAL_DISK values served to peers (PeerDiskRead items)", NULL,
                          disk_peer_reads, client);
    mc_metrics_counter_fn(st->m, "mooncake_client_disk_evicted_records_total",
                          "records dropped by disk capacity eviction (the master told first)", NULL,
                          disk_evicted, client);
    mc_metrics_counter_fn(st->m, "mooncake_client_disk_reinserted_records_total",
                          "read records that disk eviction moved to the newest extent instead of "
                          "dropping (second chance)",
                          NULL, disk_reinserted, client);
    mc_metrics_gauge_fn(st->m, "mooncake_client_disk_capacity_limit_bytes",
                        "LOCAL_DISK capacity eviction works against: the configured capacity, or "
                        "less while the filesystem is full (after ENOSPC)",
                        NULL, disk_capacity_limit, client);
    mc_metrics_counter_fn(st->m, "mooncake_client_disk_reclaimed_extents_total",
                          "disk extents deleted as soon as their last live record went", NULL,
                          disk_reclaimed, client);
    mc_metrics_counter_fn(st->m, "mooncake_client_disk_corrupt_dropped_total",
                          "disk records a read found damaged (CRC), dropped and reported to the "
                          "master",
                          NULL, disk_corrupt_dropped, client);
    hc.addr = addr;
    hc.port = port;
    hc.metrics = st->m;
    return mc_http_server_new(&hc, out);
}

/* A client whose --host is loopback cannot be reached by peers on other nodes: say so when the
 * master (and so the rest of the cluster) is elsewhere. */
static void warn_loopback_host(void)
{
    char buf[256];
    struct mc_rpc_client_config rc;

    mc_rpc_client_config_init(&rc);
    if (mc_rpc_parse_endpoint(F.master, buf, sizeof(buf), &rc) != 0)
        return;
    if (mc_net_host_is_loopback(F.host) && !mc_net_host_is_loopback(rc.host))
        mc_warn("daemon",
                "--host is a loopback address but the master is remote: peers on other nodes "
                "cannot reach this segment; set --host to this node's address",
                "host=%s master=%s", F.host, F.master);
}

/* mc_client_open, retried while the master is unreachable (RPC_FAIL / RPC_TIMEOUT) until
 * wait_ms has passed: backoff 100 ms doubling to 5 s. The waits are sigtimedwait on the blocked
 * SIGTERM/SIGINT, so a stop request ends the wait at once (*sig set, returns RPC_FAIL). */
static int open_with_retry(const struct mc_client_config *cfg, uint64_t wait_ms,
                           const sigset_t *set, int *sig, struct mc_client **out)
{
    uint64_t deadline = mc_now_ms() + wait_ms, backoff = 100;
    int attempt = 1;

    for (;;) {
        int rc = mc_client_open(cfg, out);
        uint64_t now = mc_now_ms();
        if (rc == 0 || (rc != MC_ERR_RPC_FAIL && rc != MC_ERR_RPC_TIMEOUT) || now >= deadline)
            return rc;
        uint64_t pause = backoff < deadline - now ? backoff : deadline - now;
        mc_warn("daemon", "master unreachable; retrying",
                "master=%s err=%s attempt=%d retry_in_ms=%llu", F.master, mc_strerror(rc), attempt,
                (unsigned long long)pause);
        struct timespec ts = {.tv_sec = (time_t)(pause / 1000),
                              .tv_nsec = (long)(pause % 1000) * 1000000L};
        int s = sigtimedwait(set, NULL, &ts);
        if (s > 0) {
            *sig = s;
            return rc;
        }
        backoff = backoff * 2 > 5000 ? 5000 : backoff * 2;
        attempt++;
    }
}

int main(int argc, char **argv)
{
    struct mc_client_config cfg;
    struct mc_client *client = NULL;
    struct mc_http_server *http = NULL;
    struct daemon_stats st = {.start_ms = mc_now_ms()};
    sigset_t set;
    int sig = 0, rc, status = 1;
    uint64_t seg_size, disk_cap;

    mc_flags_parse(g_flags, "mooncake_client [flags]", &argc, &argv);
    mc_flags_apply_log_level("log_level", F.log_level);
    if (argc > 1)
        mc_flags_die("unexpected argument '%s'", argv[1]);
    struct mc_daemon_compat_result compat;
    mc_daemon_compat_apply(F.master, F.segment_size, F.disk_path, F.rdma_devices, F.protocol,
                           &compat);
    if (compat.master)
        F.master = compat.master;
    if (compat.rdma_devices)
        F.rdma_devices = compat.rdma_devices;
    seg_size = compat.segment_size ? mc_flags_size("global_segment_size", compat.segment_size)
                                   : mc_flags_size("segment_size", F.segment_size);
    if (compat.enable_http)
        F.enable_client_http_server = true;
    if (compat.has_http_port)
        F.client_http_port = compat.http_port;
    if (F.enable_client_http_server) {
        if (F.metrics_port > 0)
            mc_flags_die("flags --metrics_port and --enable_client_http_server both start the "
                         "HTTP server: give one of them");
        if (F.client_http_port < 0 || F.client_http_port > 65535)
            mc_flags_die("flag --client_http_port must be 0..65535 (got %d)", F.client_http_port);
    }
    disk_cap = mc_flags_size("disk_capacity", F.disk_capacity);
    if (F.data_port < 0 || F.data_port > 65535)
        mc_flags_die("flag --data_port must be 0..65535 (got %d)", F.data_port);
    if (F.metrics_port < 0 || F.metrics_port > 65535)
        mc_flags_die("flag --metrics_port must be 0..65535 (got %d)", F.metrics_port);
    if (strcmp(F.protocol, "tcp") != 0 && strcmp(F.protocol, "rdma") != 0)
        mc_flags_die("flag --protocol must be tcp or rdma (got '%s')", F.protocol);
    if (!F.master[0] || !F.host[0])
        mc_flags_die("flags --master and --host must not be empty");
    if (F.rdma_ack_timeout < 0 || F.rdma_ack_timeout > 31)
        mc_flags_die("flag --rdma_ack_timeout must be 0..31 (got %d)", F.rdma_ack_timeout);
    if (F.rdma_qp_pool > 1024)
        mc_flags_die("flag --rdma_qp_pool must be 0..1024 (got %u)", F.rdma_qp_pool);
    if (F.rdma_tos < 0 || F.rdma_tos > 255)
        mc_flags_die("flag --rdma_tos must be 0..255 (got %d)", F.rdma_tos);
    if (F.disk_path[0] && disk_cap == 0)
        mc_flags_die("flag --disk_capacity must be > 0 with --disk_path");
    uint64_t master_wait_ms = mc_flags_duration_ms("master_wait", F.master_wait, MC_UNIT_S);
    uint64_t idle_ms = mc_flags_duration_ms("idle_timeout", F.idle_timeout, MC_UNIT_S);
    if (idle_ms > UINT32_MAX)
        mc_flags_die("flag --idle_timeout must be below 49 days");
    warn_loopback_host();

    /* Before any thread exists: every thread inherits the blocked mask, and only sigwait below
     * sees SIGTERM/SIGINT. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    mc_client_config_init(&cfg);
    cfg.master_address = F.master;
    cfg.host = F.host;
    cfg.bind_address = F.bind_address[0] ? F.bind_address : NULL;
    cfg.protocol = F.protocol;
    cfg.data_port = (uint16_t)F.data_port;
    cfg.segment_size = seg_size;
    cfg.huge_pages = F.huge_pages;
    cfg.disk_path = F.disk_path[0] ? F.disk_path : NULL;
    cfg.disk_capacity = cfg.disk_path ? disk_cap : 0;
    cfg.checksums = F.checksums;
    cfg.log_level = (int)mc_log_get_level(); /* --log_level (info by default), not the library's */
    cfg.auth_token_file = F.auth_token_file[0] ? F.auth_token_file : NULL;
    cfg.tls_cert_file = F.tls_cert_file[0] ? F.tls_cert_file : NULL;
    cfg.tls_key_file = F.tls_key_file[0] ? F.tls_key_file : NULL;
    cfg.tls_ca_file = F.tls_ca_file[0] ? F.tls_ca_file : NULL;
    mc_auth_allow_readable_token_file(F.allow_readable_token_file);
    cfg.protected_mode = F.protected_mode;
    cfg.peer_idle_timeout_ms = (uint32_t)idle_ms;
    cfg.peer_max_conns_per_addr = F.max_conns_per_addr;
    cfg.rdma_devices = F.rdma_devices[0] ? F.rdma_devices : NULL;
    cfg.rdma_ack_timeout = F.rdma_ack_timeout == 0 ? -1 : F.rdma_ack_timeout;
    cfg.rdma_tos = F.rdma_tos;
    cfg.rdma_qp_pool = F.rdma_qp_pool;
    if (F.max_connections == 0 || F.max_connections > 1000000)
        mc_flags_die("flag --max_connections must be 1..1000000");
    cfg.peer_max_conns = F.max_connections;

    rc = open_with_retry(&cfg, master_wait_ms, &set, &sig, &client);
    if (sig) {
        mc_info("daemon", "stopped while waiting for the master", "signal=%d", sig);
        status = 0;
        goto out;
    }
    if (rc) {
        mc_error("daemon", "cannot start the client", "master=%s err=%s", F.master,
                 mc_strerror(rc));
        if (rc == MC_ERR_NOT_SUPPORTED && strcmp(F.protocol, "rdma") == 0)
            mc_error("daemon",
                     "protocol rdma is not available here (see above); "
                     "restart with --protocol=tcp",
                     "protocol=%s", F.protocol);
        goto out;
    }
    if (F.metrics_port > 0 || F.enable_client_http_server) {
        uint16_t port =
            (uint16_t)(F.enable_client_http_server ? F.client_http_port : F.metrics_port);
        rc = start_metrics(&st, F.bind_address[0] ? F.bind_address : F.host, port, seg_size,
                           cfg.disk_capacity, client, &http);
        if (rc) {
            mc_error("daemon", "cannot serve metrics", "port=%d err=%s", F.metrics_port,
                     mc_strerror(rc));
            goto out;
        }
        mc_info("daemon", "metrics", "addr=%s", mc_http_server_addr(http));
    }

    printf("READY endpoint=%s\n", mc_client_endpoint(client));
    fflush(stdout);
    mc_info("daemon", "serving", "endpoint=%s master=%s segment_bytes=%llu disk_path=%s",
            mc_client_endpoint(client), F.master, (unsigned long long)seg_size,
            cfg.disk_path ? cfg.disk_path : "-");

    while (sigwait(&set, &sig) != 0)
        ;
    mc_info("daemon", "stopping", "signal=%d", sig);
    status = 0;
out:
    mc_http_server_free(http);
    mc_client_close(client); /* frees st.m, the client's registry */
    if (status == 0)
        mc_info("daemon", "stopped", "%s", "");
    return status;
}
