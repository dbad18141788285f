/*
 * client.c - libmooncake_client: open/close, configuration, the small calls (exist, remove,
 * query, registered buffers). Put and Get live in client_put.c and client_get.c.
 *
 * mc_client_open order: peer server up first (its port is the segment's endpoint and name),
 * then the master link (ServiceReady); with disk_path, the segments a previous incarnation of
 * this client id still has mounted are unmounted (its MEMORY replicas died with it: they must
 * not stay listed as readable); then the segment (mmap, served by the peer server, then
 * MountSegment); with disk_path, the LOCAL_DISK tier (store recovered, MountLocalDiskSegment,
 * records re-registered: disk_tier.h) and the offload worker (worker.h); then the ping thread
 * (with disk_path it starts before the store's recovery scan, which may outlast client_ttl).
 * Only then does open return, so a daemon prints READY after the re-registration.
 * mc_client_close undoes it in reverse: worker, UnmountLocalDiskSegment and UnmountSegment
 * (best effort: a master that is gone will expire us), ping thread, peer server (its I/O
 * threads joined, so no reply still points into the segment), the tier's serve threads and
 * store, then munmap.
 *
 * The library never installs signal handlers, calls exit, writes to stdout or registers flags;
 * every send uses MSG_NOSIGNAL (rpc_client.c, transport_tcp.c).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/holder_index.h"
#include "client/holder_index_stream.h"
#include "client/client_id.h"
#include "client/client_internal.h"
#include "common/auth.h"
#include "common/crc32c.h"
#include "common/lock_order.h"
#include "common/tls.h"
#include "common/log.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "mooncake/client.h"

/* The first published layouts (0.1): every later library accepts at least these sizes. */
#define CLIENT_CONFIG_V0_SIZE                                                                      \
    (offsetof(struct mc_client_config, ping_interval_ms) + sizeof(uint32_t))
#define REPLICATE_CONFIG_V0_SIZE                                                                   \
    (offsetof(struct mc_replicate_config, group_id) + sizeof(const char *))

static void client_config_defaults(struct mc_client_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->struct_size = (uint32_t)sizeof(*cfg);
    cfg->master_address = "127.0.0.1:50051";
    cfg->host = "127.0.0.1";
    cfg->protocol = "tcp";
    cfg->connect_timeout_ms = 3000;
    cfg->rpc_timeout_ms = 5000;
    cfg->put_retry_window_ms = 1000;
    cfg->ping_interval_ms = 1000;
    cfg->log_level = MC_CLIENT_LOG_WARN;
    cfg->protected_mode = true;
    cfg->checksums = true;
    cfg->peer_idle_timeout_ms = 300000;
    cfg->peer_max_conns_per_addr = 1024;
    cfg->peer_max_conns = 10000;
}

static void replicate_config_defaults(struct mc_replicate_config *rc)
{
    memset(rc, 0, sizeof(*rc));
    rc->struct_size = (uint32_t)sizeof(*rc);
    rc->replica_num = 1;
}

/* Writes the first `size` bytes of `out` from the full-size defaults in `def` (zero beyond our
 * layout) and records in its leading uint32_t struct_size how much of it this library reads. */
static void init_sized(void *out, size_t size, const void *def, size_t our_size)
{
    if (!out || size < sizeof(uint32_t))
        return;
    size_t n = size < our_size ? size : our_size;
    memset(out, 0, size);
    memcpy(out, def, n);
    uint32_t sz = (uint32_t)n;
    memcpy(out, &sz, sizeof(sz));
}

void mc_client_config_init_sized(struct mc_client_config *cfg, size_t size)
{
    struct mc_client_config def;
    client_config_defaults(&def);
    init_sized(cfg, size, &def, sizeof(def));
}

void(mc_client_config_init)(struct mc_client_config *cfg)
{
    mc_client_config_init_sized(cfg, CLIENT_CONFIG_V0_SIZE);
}

void mc_replicate_config_init_sized(struct mc_replicate_config *rc, size_t size)
{
    struct mc_replicate_config def;
    replicate_config_defaults(&def);
    init_sized(rc, size, &def, sizeof(def));
}

void(mc_replicate_config_init)(struct mc_replicate_config *rc)
{
    mc_replicate_config_init_sized(rc, REPLICATE_CONFIG_V0_SIZE);
}

/* Copies the part of a caller's config its struct_size covers over the defaults (ABI policy in
 * client.h). A size below the first layout (no _init call) or above ours (a newer header than
 * this library) is INVALID_PARAMS. */
static int copy_sized(void *out, const void *in, uint32_t in_size, size_t min_size, size_t our_size,
                      const char *what)
{
    if (in_size < min_size || in_size > our_size) {
        mc_error("client", "config struct has an unknown size: fill it with its _init function",
                 "struct=%s struct_size=%u expected=%zu", what, in_size, our_size);
        return MC_ERR_INVALID_PARAMS;
    }
    memcpy(out, in, in_size);
    return 0;
}

int mc_client_config_copy(const struct mc_client_config *in, struct mc_client_config *out)
{
    client_config_defaults(out);
    int rc = copy_sized(out, in, in->struct_size, CLIENT_CONFIG_V0_SIZE, sizeof(*out),
                        "mc_client_config");
    out->struct_size = (uint32_t)sizeof(*out);
    return rc;
}

int mc_replicate_config_copy(const struct mc_replicate_config *in, struct mc_replicate_config *out)
{
    replicate_config_defaults(out);
    if (!in)
        return 0;
    int rc = copy_sized(out, in, in->struct_size, REPLICATE_CONFIG_V0_SIZE, sizeof(*out),
                        "mc_replicate_config");
    out->struct_size = (uint32_t)sizeof(*out);
    return rc;
}

int mc_client_check_key(const char *key)
{
    if (!key || !*key || strnlen(key, MC_CLIENT_MAX_KEY + 1) > MC_CLIENT_MAX_KEY)
        return MC_ERR_INVALID_KEY;
    return 0;
}

Mc__Uuid *mc_client_uuid(const struct mc_client *c, Mc__Uuid *u)
{
    mc__uuid__init(u);
    u->hi = c->id.hi;
    u->lo = c->id.lo;
    return u;
}

const char *mc_client_endpoint(const struct mc_client *client)
{
    return client ? client->endpoint : "";
}

struct mc_master_conn *mc_client_master_conn(struct mc_client *c)
{
    return c->mc;
}

struct mc_peer_server *mc_client_peer_server(struct mc_client *c)
{
    return c->ps;
}

struct mc_id mc_client_segment_id(const struct mc_client *c)
{
    return c->seg_id;
}

struct mc_transport *mc_client_tcp_transport(struct mc_client *c)
{
    return c->tcp;
}

/* The ping thread's housekeeping: idle peer connections are closed even when no transfer runs. */
static void on_tick(void *arg)
{
    struct mc_client *c = arg;
    mc_transport_tcp_prune(c->tcp);
}

/* master_conn's callback: the master lost track of this client and its segments are mounted
 * again; the LOCAL_DISK tier and its records must be registered again too (by the worker). */
static void on_remounted(void *arg)
{
    struct mc_client *c = arg;
    struct mc_disk_tier *t = atomic_load(&c->disk);
    if (t)
        mc_disk_tier_want_register(t);
}

/* The peer server's PeerDiskRead handler: the tier's, once it exists. */
static void on_disk_read(void *arg, struct mc_rpc_call *call)
{
    struct mc_client *c = arg;
    struct mc_disk_tier *t = atomic_load(&c->disk);
    if (t)
        mc_disk_tier_on_peer_read(t, call);
    else
        mc_rpc_reply_status(call, MC_ERR_NOT_SUPPORTED);
}

/* A restart of a client with a persisted id (disk_path) within the master's client_ttl finds
 * its previous incarnation's DRAM segments still mounted, and their MEMORY replicas listed as
 * readable although those bytes died with the old process: unmount every segment the master
 * lists with this client as owner before mounting the new one. */
static int unmount_previous_segments(struct mc_client *c)
{
    Mc__ListSegmentsRequest req = MC__LIST_SEGMENTS_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(c->mc, MC_METHOD_LIST_SEGMENTS, &req.base,
                                 &mc__list_segments_response__descriptor, &m);
    if (rc)
        return rc;
    const Mc__ListSegmentsResponse *r = (const Mc__ListSegmentsResponse *)m;
    for (size_t i = 0; rc == 0 && i < r->n_segments; i++) {
        const Mc__SegmentInfo *s = r->segments[i];
        if (!s || !s->owner || !s->id || s->owner->hi != c->id.hi || s->owner->lo != c->id.lo)
            continue;
        struct mc_id sid = {s->id->hi, s->id->lo};
        char idbuf[MC_ID_STRLEN];
        rc = mc_master_conn_unmount(c->mc, sid);
        if (rc == MC_ERR_SEGMENT_NOT_FOUND)
            rc = 0;
        mc_info("client", "previous incarnation's segment unmounted", "segment=%s name=%s rc=%s",
                mc_id_format(sid, idbuf), s->name ? s->name : "", mc_strerror(rc));
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* master_conn's callback: a (Re)MountSegment answer named the mount epoch of one of our
 * segments (or 0: a Ping asked for a re-mount, the old mount is gone); the peer server serves
 * only descriptors of that epoch (none for 0). One-sided RDMA never asks the peer server, so
 * with protocol rdma the fence also registers the segment afresh: the old rkey dies now, and
 * the ReMountSegment that follows announces the new one (transport_rdma.c). */
static void on_mount_epoch(void *arg, struct mc_id segment_id, uint64_t epoch)
{
    struct mc_client *c = arg;
    if (mc_id_is_zero(segment_id))
        return;
    mc_peer_server_set_segment_epoch(c->ps, segment_id, epoch);
    if (c->hidx) {
        /* the entries stay through a re-mount (epoch 0 accepts no commit meanwhile); the new
         * mount's master is told of them by the stream's thread (re-registration) */
        mc_holder_index_set_epoch(c->hidx, segment_id, epoch, true);
        if (epoch) {
            pthread_mutex_lock(&c->hstream_lock);
            mc_hidx_stream_reregister(atomic_load(&c->hstream), segment_id, epoch);
            pthread_mutex_unlock(&c->hstream_lock);
        }
    }
    mc_client_rdma_fence(c, segment_id, epoch);
}

#ifdef MC_TEST_HOOKS
void mc_client_test_set_read_delay(struct mc_client *c, uint32_t ms)
{
    atomic_store(&c->test_read_delay_ms, ms);
}

void mc_client_test_corrupt_reads(struct mc_client *c, int n)
{
    atomic_store(&c->test_corrupt_reads, n);
}

static const struct mc_rdma_ops *_Atomic test_rdma_ops;

void mc_client_test_set_rdma_ops(const struct mc_rdma_ops *ops)
{
    atomic_store(&test_rdma_ops, ops);
}
#endif

bool mc_client_replica_is_rdma(const struct mc_client *c, const Mc__ReplicaDescriptor *r)
{
    const Mc__MemoryLocation *m = r->memory;
    return c->rdma && m && m->protocol == MC__PROTOCOL__PROTOCOL_RDMA && m->rkey && m->remote_addr;
}

int mc_client_replica_loc(struct mc_client *c, const Mc__ReplicaDescriptor *r, size_t len,
                          struct mc_xfer_loc *loc, bool *local)
{
    const Mc__MemoryLocation *m = r->memory;
    if (r->type != MC__REPLICA_TYPE__RT_MEMORY || !m || !m->segment_id)
        return MC_ERR_INVALID_REPLICA;
    if (m->size && m->size < len)
        return MC_ERR_INVALID_REPLICA;
    *loc = (struct mc_xfer_loc){.segment_id = {m->segment_id->hi, m->segment_id->lo},
                                .offset = m->offset,
                                .endpoint = m->endpoint,
                                .mount_epoch = m->mount_epoch,
                                .remote_addr = m->remote_addr,
                                .rkey = m->rkey};
    *local = mc_peer_server_has_segment(c->ps, loc->segment_id);
    if (!*local && (!m->endpoint || !*m->endpoint))
        return MC_ERR_INVALID_REPLICA;
    return 0;
}

/* mc_client_replica_io; a write with crc also sets *crc to the CRC32C of the bytes (taken as
 * they are copied when the replica is local). */
static int replica_xfer(struct mc_client *c, const Mc__ReplicaDescriptor *r, bool is_write,
                        void *buf, size_t len, uint32_t *crc)
{
    struct mc_xfer_loc loc;
    bool local;
    int rc = mc_client_replica_loc(c, r, len, &loc, &local);
    if (rc)
        return rc;
    if (crc && is_write && local)
        return mc_transport_local_write_crc(c->local, &loc, buf, len, crc);
    if (crc)
        *crc = mc_crc32c(buf, len);
    struct mc_transport *t = local ? c->local : c->tcp;
    if (!local && mc_client_replica_is_rdma(c, r))
        t = c->rdma;
    return is_write ? mc_transport_write(t, &loc, buf, len) : mc_transport_read(t, &loc, buf, len);
}

int mc_client_replica_io(struct mc_client *c, const Mc__ReplicaDescriptor *r, bool is_write,
                         void *buf, size_t len)
{
    return replica_xfer(c, r, is_write, buf, len, NULL);
}

int mc_client_replica_write_crc(struct mc_client *c, const Mc__ReplicaDescriptor *r,
                                const void *buf, size_t len, uint32_t *crc)
{
    return replica_xfer(c, r, true, (void *)buf, len, crc);
}

/* ---- open / close ------------------------------------------------------------------------ */

_Static_assert((int)MC_CLIENT_LOG_DEBUG == (int)MC_LOG_DEBUG &&
                   (int)MC_CLIENT_LOG_INFO == (int)MC_LOG_INFO &&
                   (int)MC_CLIENT_LOG_WARN == (int)MC_LOG_WARN &&
                   (int)MC_CLIENT_LOG_ERROR == (int)MC_LOG_ERROR &&
                   (int)MC_CLIENT_LOG_OFF == (int)MC_LOG_OFF,
               "public and internal log levels differ");

static void log_to_fn(void *arg, enum mc_log_level level, const char *line, size_t len)
{
    const struct mc_client *c = arg;
    (void)len;
    c->cfg.log_fn(c->cfg.log_arg, (int)level, line);
}

static int copy_str(char *dst, size_t cap, const char *src, const char *dflt)
{
    const char *s = src && *src ? src : dflt;
    if (!s)
        s = "";
    if (strlen(s) >= cap)
        return MC_ERR_INVALID_PARAMS;
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

/* Open step: the caller's config over the defaults, the log level, and c->logger made current
 * (from here on this call, and every thread the client starts, logs through it). */
static int open_logging(struct mc_client *c, const struct mc_client_config *cfg)
{
    int rc = mc_client_config_copy(cfg, &c->cfg);
    if (rc)
        return rc;
    if (c->cfg.log_level < MC_CLIENT_LOG_DEBUG || c->cfg.log_level > MC_CLIENT_LOG_OFF) {
        mc_error("client", "log_level out of range", "log_level=%d", c->cfg.log_level);
        return MC_ERR_INVALID_PARAMS;
    }
    c->logger.level = (enum mc_log_level)c->cfg.log_level;
    c->logger.sink = c->cfg.log_fn ? log_to_fn : NULL;
    c->logger.arg = c;
    mc_log_set_current(&c->logger);
    return 0;
}

/* Open step: the config's strings copied into c (the caller's are not kept), zero timeouts
 * replaced by their defaults, the protocol and the segment size checked. */
static int open_config(struct mc_client *c, const struct mc_client_config *cfg)
{
    (void)cfg;
    int rc = copy_str(c->master_address, sizeof(c->master_address), c->cfg.master_address,
                      "127.0.0.1:50051");
    if (!rc)
        rc = copy_str(c->host, sizeof(c->host), c->cfg.host, "127.0.0.1");
    if (!rc)
        rc = copy_str(c->bind_address, sizeof(c->bind_address), c->cfg.bind_address, c->host);
    if (!rc)
        rc = copy_str(c->protocol, sizeof(c->protocol), c->cfg.protocol, "tcp");
    if (!rc)
        rc = copy_str(c->disk_path, sizeof(c->disk_path), c->cfg.disk_path, "");
    if (rc)
        return rc;
    c->cfg.master_address = c->master_address;
    c->cfg.host = c->host;
    c->cfg.bind_address = c->bind_address;
    c->cfg.protocol = c->protocol;
    c->cfg.disk_path = c->disk_path[0] ? c->disk_path : NULL;
    if (!c->cfg.connect_timeout_ms)
        c->cfg.connect_timeout_ms = 3000;
    if (!c->cfg.rpc_timeout_ms)
        c->cfg.rpc_timeout_ms = 5000;
    if (!c->cfg.ping_interval_ms)
        c->cfg.ping_interval_ms = 1000;
    if (strcmp(c->protocol, "rdma") != 0 && strcmp(c->protocol, "tcp") != 0) {
        mc_error("client", "unknown protocol: use tcp or rdma", "protocol=%s", c->protocol);
        return MC_ERR_NOT_SUPPORTED;
    }
    if (c->cfg.segment_size && c->cfg.segment_size < 4096)
        return MC_ERR_INVALID_PARAMS;
    return 0;
}

/* Open step: the auth token, read from the caller's auth_token_file (the path is not kept). */
static int open_auth(struct mc_client *c, const struct mc_client_config *cfg)
{
    c->cfg.auth_token_file = NULL;
    if (cfg->struct_size >= offsetof(struct mc_client_config, auth_token_file) + sizeof(char *) &&
        cfg->auth_token_file && *cfg->auth_token_file) {
        char err[160];
        int rc = mc_auth_key_load(cfg->auth_token_file, &c->auth, err, sizeof(err));
        if (rc) {
            mc_error("client", "cannot load the auth token", "path=%s reason=\"%s\"",
                     cfg->auth_token_file, err);
            return rc;
        }
    }
    if (cfg->struct_size >= offsetof(struct mc_client_config, tls_ca_file) + sizeof(char *)) {
        struct mc_tls_files f = {cfg->tls_cert_file, cfg->tls_key_file, cfg->tls_ca_file};
        char err[256];
        if (mc_tls_files_set(&f) && mc_tls_ctx_new(&f, true, &c->tls, err, sizeof(err)) != 0) {
            mc_error("client", "cannot set up TLS", "reason=\"%s\"", err);
            return MC_ERR_INVALID_PARAMS;
        }
    }
    c->cfg.tls_cert_file = c->cfg.tls_key_file = c->cfg.tls_ca_file = NULL;
    if (!c->auth.set && !c->cfg.protected_mode)
        mc_warn("client",
                "protected mode is off and no auth token is set: any host that reaches the peer "
                "port can read and write this client's segment",
                "bind=%s", c->bind_address);
    return 0;
}

/* Open step: the client id; with disk_path it lives there, so a restarted client is the same
 * client to the master. */
static int open_identity(struct mc_client *c, const struct mc_client_config *cfg)
{
    (void)cfg;
    if (!c->cfg.disk_path) {
        c->id = mc_id_random();
        return 0;
    }
    bool created;
    int rc = mc_client_id_load_or_create(c->disk_path, &c->id, &created);
    if (rc)
        return rc;
    mc_info("client", "client id kept in disk_path", "path=%s new_id=%d", c->disk_path,
            created ? 1 : 0);
    return 0;
}

/* Open step: with protocol rdma, the rdma transport, before anything else: a host without a
 * device (or a build without RDMA) fails here, never falls back to tcp (client_rdma.c). */
static int open_rdma(struct mc_client *c, const struct mc_client_config *cfg)
{
    (void)cfg;
    if (strcmp(c->protocol, "rdma") != 0)
        return 0;
    const struct mc_rdma_ops *ops = NULL; /* the real libraries */
#ifdef MC_TEST_HOOKS
    ops = atomic_load(&test_rdma_ops);
#endif
    return mc_client_rdma_open(c, ops);
}

/* Open step: the peer server (its port makes the endpoint, which is also the segment's name),
 * then the rdma listener on the same port number. */
static int open_peer_server(struct mc_client *c, const struct mc_client_config *cfg)
{
    (void)cfg;
    struct mc_peer_server_config pc = {.bind_addr = c->bind_address,
                                       .port = c->cfg.data_port,
                                       .auth = &c->auth,
                                       .tls = c->tls,
                                       .protected_mode_off = !c->cfg.protected_mode,
                                       .idle_timeout_ms = c->cfg.peer_idle_timeout_ms,
                                       .max_conns_per_addr = c->cfg.peer_max_conns_per_addr,
                                       .on_disk_read = on_disk_read,
                                       .disk_arg = c};
    pc.max_conns = c->cfg.peer_max_conns > 1000000 ? 1000000 : (int)c->cfg.peer_max_conns;
    int rc = mc_peer_server_new(&pc, &c->ps);
    if (!rc)
        rc = mc_peer_server_start(c->ps);
    if (rc)
        return rc;
    if (snprintf(c->endpoint, sizeof(c->endpoint), "%s:%u", c->host, mc_peer_server_port(c->ps)) >=
        (int)sizeof(c->endpoint))
        return MC_ERR_INVALID_PARAMS;
    return mc_client_rdma_listen(c);
}

/* Open step: the local and tcp transports. */
static int open_transports(struct mc_client *c, const struct mc_client_config *cfg)
{
    (void)cfg;
    struct mc_tcp_transport_config tc;
    mc_tcp_transport_config_init(&tc);
    tc.connect_timeout_ms = c->cfg.connect_timeout_ms;
    tc.io_timeout_ms = c->cfg.rpc_timeout_ms;
    tc.auth = &c->auth;
    tc.tls = c->tls;
    int rc = mc_transport_local_new(c->ps, &c->local);
    if (!rc)
        rc = mc_transport_tcp_new(&tc, &c->tcp);
    return rc;
}

/* Open step: the master link (ServiceReady). With disk_path, the previous incarnation's
 * segments are unmounted and the ping thread starts now: the recovery scan of a large
 * disk_path can outlast the master's client_ttl, and a restart within the TTL must not expire
 * while it runs. */
static int open_master(struct mc_client *c, const struct mc_client_config *cfg)
{
    (void)cfg;
    if (c->auth.set) { /* the credential proves our id to every master (common/auth.h) */
        uint8_t id[MC_AUTH_ID_BYTES];
        mc_id_to_bytes(c->id, id);
        c->cred = mc_auth_cred_new(id, c->cfg.disk_path);
        if (!c->cred)
            return MC_ERR_INTERNAL_ERROR;
        c->master_auth = c->auth;
        c->master_auth.cred = c->cred;
    }
    struct mc_master_conn_config mcc = {
        .address = c->master_address,
        .client_id = c->id,
        .connect_timeout_ms = c->cfg.connect_timeout_ms,
        .rpc_timeout_ms = c->cfg.rpc_timeout_ms,
        .ping_interval_ms = c->cfg.ping_interval_ms,
        .auth = &c->master_auth,
        .tls = c->tls,
        .on_mount_epoch = on_mount_epoch,
        .on_tick = on_tick,
        .on_remounted = on_remounted,
        .remount_ready = mc_client_rdma_remount_ready,
        .cb_arg = c,
    };
    int rc = mc_master_conn_open(&mcc, &c->mc);
    if (rc == 0) /* with a token and no credential: become the id the master mints */
        rc = mc_client_id_adopt(c->mc, c->cred, c->cfg.disk_path, &c->id);
    if (rc || !c->cfg.disk_path)
        return rc;
    rc = unmount_previous_segments(c);
    if (rc) {
        mc_error("client", "cannot unmount the previous incarnation's segments", "master=%s rc=%s",
                 c->master_address, mc_strerror(rc));
        return rc;
    }
    return mc_master_conn_start(c->mc);
}

/* Open step: the DRAM segment (segment_size > 0): mapped, served by the peer server with no
 * epoch until the MountSegment answer, registered for rdma, then mounted. */
static int open_segment(struct mc_client *c, const struct mc_client_config *cfg)
{
    (void)cfg;
    if (!c->cfg.segment_size)
        return 0;
    int rc = mc_segment_mem_init(&c->seg, c->cfg.segment_size, c->cfg.huge_pages);
    if (rc)
        return rc;
    c->seg_id = mc_id_random();
    rc = mc_peer_server_add_segment(c->ps, c->seg_id, c->seg.base, c->seg.size);
    if (rc)
        return rc;
    c->hidx = mc_holder_index_new();
    if (!c->hidx)
        return MC_ERR_INTERNAL_ERROR;
    rc = mc_holder_index_add_segment(c->hidx, c->seg_id, c->seg.size);
    if (rc)
        return rc;
    mc_peer_server_set_index(c->ps, c->hidx);
    struct mc_mounted_segment ms = {
        .id = c->seg_id, .base = (uint64_t)(uintptr_t)c->seg.base, .size = c->seg.size};
    rc = mc_client_rdma_mount_keys(c, &ms);
    if (rc)
        return rc;
    memcpy(ms.name, c->endpoint, sizeof(ms.name));
    memcpy(ms.endpoint, c->endpoint, sizeof(ms.endpoint));
    rc = mc_master_conn_mount(c->mc, &ms);
    if (rc) {
        mc_error("client", "cannot mount segment", "master=%s rc=%s%s", c->master_address,
                 mc_strerror(rc),
                 rc == MC_ERR_ILLEGAL_CLIENT && c->cred
                     ? " hint=\"the master's tokens do not check our credential: remove "
                       "client_cred from disk_path to register afresh\""
                     : "");
        return rc;
    }
    c->mounted = true;
    return 0;
}

/* Open step: with disk_path, the LOCAL_DISK tier (store recovered, mounted, records
 * re-registered) and the offload worker. */
static int open_disk_tier(struct mc_client *c, const struct mc_client_config *cfg)
{
    (void)cfg;
    if (!c->cfg.disk_path)
        return 0;
    if (!c->cfg.disk_capacity) {
        mc_error("client", "disk_capacity must be > 0 with disk_path", "path=%s", c->disk_path);
        return MC_ERR_INVALID_PARAMS;
    }
    struct mc_disk_tier_config dc = {.path = c->disk_path,
                                     .capacity = c->cfg.disk_capacity,
                                     .mc = c->mc,
                                     .client_id = c->id,
                                     .endpoint = c->endpoint,
                                     .max_payload = mc_peer_server_max_payload(c->ps),
                                     .enable_offloading = true,
                                     .rdma = c->rdma};
    struct mc_disk_tier *t = NULL;
    int rc = mc_disk_tier_open(&dc, &t);
    if (rc)
        return rc;
    atomic_store(&c->disk, t);
    rc = mc_disk_tier_register(t);
    if (mc_disk_tier_master_lacks_tier(rc)) {
        /* the master runs without the tier (no --enable_offload): keep the records on
         * disk, untouched, and serve DRAM only; the worker registers once it can */
        mc_warn("client",
                "the master has no LOCAL_DISK tier (start it with --enable_offload): "
                "running without offload; the records in disk_path are kept",
                "path=%s rc=%s", c->disk_path, mc_strerror(rc));
        mc_disk_tier_want_register(t);
        rc = 0;
    }
    if (rc)
        return rc;
    struct mc_worker_config wc = {
        .mc = c->mc, .client_id = c->id, .tier = t, .ps = c->ps, .hidx = c->hidx};
    return mc_worker_start(&wc, &c->worker);
}

/* Open step: with a DRAM segment, the holder stream that feeds its index (every such process
 * runs it, disk tier or not). */
static int open_holder_stream(struct mc_client *c, const struct mc_client_config *cfg)
{
    (void)cfg;
    if (!c->hidx)
        return 0;
    struct mc_hidx_stream *s = NULL;
    int rc = mc_hidx_stream_start(c->mc, c->id, c->hidx, c->ps, 0, &s);
    pthread_mutex_lock(&c->hstream_lock);
    atomic_store(&c->hstream, s);
    pthread_mutex_unlock(&c->hstream_lock);
    return rc;
}

/* Open step: the ping thread (already running with disk_path: starting it again is a no-op). */
static int open_ping(struct mc_client *c, const struct mc_client_config *cfg)
{
    (void)cfg;
    return mc_master_conn_start(c->mc);
}

/* mc_client_open's steps, in order (the order is explained at the top of this file); the
 * first that fails ends the open, and mc_client_close undoes what the earlier ones did. */
static int (*const open_steps[])(struct mc_client *, const struct mc_client_config *) = {
    open_logging, open_config,      open_auth,          open_identity,
    open_rdma,    open_peer_server, open_transports,    open_master,
    open_segment, open_disk_tier,   open_holder_stream, open_ping,
};

int mc_client_open(const struct mc_client_config *cfg, struct mc_client **out)
{
    if (!out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    if (!cfg)
        return MC_ERR_INVALID_PARAMS;
    struct mc_client *c = calloc(1, sizeof(*c));
    if (!c)
        return MC_ERR_INTERNAL_ERROR;
    mc_client_metrics_init(&c->metrics);
    const struct mc_logger *prev_logger = mc_log_current();
    c->logger.level = MC_LOG_WARN; /* until the config is read */
    pthread_mutex_init(&c->buf_lock, NULL);
    pthread_mutex_init(&c->hstream_lock, NULL);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(open_steps) / sizeof(open_steps[0]); i++)
        rc = open_steps[i](c, cfg);
    if (rc) {
        mc_client_close(c);
        mc_log_set_current(prev_logger);
        return rc;
    }
    char idbuf[MC_ID_STRLEN];
    mc_info("client", "client open", "id=%s endpoint=%s master=%s segment_size=%llu huge=%d",
            mc_id_format(c->id, idbuf), c->endpoint, c->master_address,
            (unsigned long long)c->cfg.segment_size, c->seg.huge ? 1 : 0);
    *out = c;
    mc_log_set_current(prev_logger);
    return 0;
}

void mc_client_close(struct mc_client *c)
{
    if (!c)
        return;
    const struct mc_logger *prev = mc_log_set_current(&c->logger);
    mc_worker_stop(c->worker);
    c->worker = NULL;
    /* taken under the lock the mount-epoch callback holds while it uses the stream: once
     * it is NULL no re-mount can reach the stream, and only then is it stopped and freed */
    pthread_mutex_lock(&c->hstream_lock);
    struct mc_hidx_stream *hs = atomic_exchange(&c->hstream, NULL);
    pthread_mutex_unlock(&c->hstream_lock);
    mc_hidx_stream_stop(hs);
    struct mc_disk_tier *disk = atomic_load(&c->disk);
    if (disk && c->mc)
        mc_disk_tier_unmount(disk);
    if (c->mounted) {
        int rc = mc_master_conn_unmount(c->mc, c->seg_id);
        if (rc)
            mc_info("client", "unmount at close failed (the master expires the client)", "rc=%s",
                    mc_strerror(rc));
        c->mounted = false;
    }
    mc_client_rdma_stop(c); /* its worker kicks c->mc */
    mc_master_conn_close(c->mc);
    if (c->ps) {
        mc_peer_server_remove_segment(c->ps, c->seg_id);
        mc_peer_server_stop(c->ps);
    }
    atomic_store(&c->disk, NULL);
    mc_disk_tier_close(disk);   /* after the peer server stopped: no new disk read arrives */
    mc_transport_free(c->rdma); /* deregisters the segment before it is unmapped */
    mc_transport_free(c->tcp);
    mc_transport_free(c->local);
    mc_peer_server_free(c->ps);
    mc_holder_index_free(c->hidx); /* after the peer server: no write announces itself now */
    mc_tls_ctx_free(c->tls);       /* after every connection that used it */
    mc_segment_mem_destroy(&c->seg);
    free(c->bufs);
    pthread_mutex_destroy(&c->buf_lock);
    pthread_mutex_destroy(&c->hstream_lock);
    mc_client_metrics_destroy(&c->metrics);
    mc_auth_cred_free(c->cred);
    mc_log_set_current(prev);
    free(c);
}

/* ---- exist / remove --------------------------------------------------------------------- */

int mc_exist(struct mc_client *c, const char *key)
{
    if (!c)
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    int rc = mc_client_check_key(key);
    if (rc)
        return rc;
    Mc__ExistKeyRequest req = MC__EXIST_KEY_REQUEST__INIT;
    req.key = (char *)key;
    ProtobufCMessage *m = NULL;
    rc = mc_master_conn_call(c->mc, MC_METHOD_EXIST_KEY, &req.base,
                             &mc__exist_key_response__descriptor, &m);
    if (rc)
        return rc;
    int ex = ((Mc__ExistKeyResponse *)m)->exists ? 1 : 0;
    protobuf_c_message_free_unpacked(m, NULL);
    return ex;
}

int mc_batch_exist(struct mc_client *c, size_t n, const char *const *keys, int *results)
{
    if (!c || (n && (!keys || !results)))
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (mc_client_check_key(keys[i]))
            return MC_ERR_INVALID_KEY;
    Mc__BatchExistKeyRequest req = MC__BATCH_EXIST_KEY_REQUEST__INIT;
    req.n_keys = n;
    req.keys = (char **)keys;
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(c->mc, MC_METHOD_BATCH_EXIST_KEY, &req.base,
                                 &mc__batch_exist_key_response__descriptor, &m);
    if (rc)
        return rc;
    Mc__BatchExistKeyResponse *r = (Mc__BatchExistKeyResponse *)m;
    if (r->n_exists != n || (r->n_statuses && r->n_statuses != n)) {
        rc = MC_ERR_RPC_FAIL;
    } else {
        for (size_t i = 0; i < n; i++) {
            int st = r->n_statuses ? r->statuses[i] : 0;
            results[i] = st ? st : (r->exists[i] ? 1 : 0);
        }
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

int mc_remove(struct mc_client *c, const char *key, bool force)
{
    if (!c)
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    int rc = mc_client_check_key(key);
    if (rc)
        return rc;
    Mc__Uuid u;
    Mc__RemoveRequest req = MC__REMOVE_REQUEST__INIT;
    req.key = (char *)key;
    req.force = force;
    req.client_id = mc_client_uuid(c, &u);
    ProtobufCMessage *m = NULL;
    rc = mc_master_conn_call(c->mc, MC_METHOD_REMOVE, &req.base, &mc__remove_response__descriptor,
                             &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

int64_t mc_remove_all(struct mc_client *c, bool force)
{
    if (!c)
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    Mc__Uuid u;
    Mc__RemoveAllRequest req = MC__REMOVE_ALL_REQUEST__INIT;
    req.force = force;
    req.client_id = mc_client_uuid(c, &u);
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(c->mc, MC_METHOD_REMOVE_ALL, &req.base,
                                 &mc__remove_all_response__descriptor, &m);
    if (rc)
        return rc;
    int64_t n = (int64_t)((Mc__RemoveAllResponse *)m)->removed;
    protobuf_c_message_free_unpacked(m, NULL);
    return n;
}

/* ---- query -------------------------------------------------------------------------------- */

void mc_client_fill_replica(struct mc_replica_info *o, const Mc__ReplicaDescriptor *d)
{
    memset(o, 0, sizeof(*o));
    o->id = d->id;
    o->type =
        d->type == MC__REPLICA_TYPE__RT_LOCAL_DISK ? MC_REPLICA_LOCAL_DISK : MC_REPLICA_MEMORY;
    o->status =
        d->status == MC__REPLICA_STATUS__RS_COMPLETE ? MC_REPLICA_COMPLETE : MC_REPLICA_PROCESSING;
    if (d->memory) {
        snprintf(o->segment, sizeof(o->segment), "%s",
                 d->memory->segment_name ? d->memory->segment_name : "");
        o->offset = d->memory->offset;
        snprintf(o->endpoint, sizeof(o->endpoint), "%s",
                 d->memory->endpoint ? d->memory->endpoint : "");
    }
    if (d->local_disk) {
        snprintf(o->endpoint, sizeof(o->endpoint), "%s",
                 d->local_disk->endpoint ? d->local_disk->endpoint : "");
        if (d->local_disk->holder) {
            struct mc_id h = {d->local_disk->holder->hi, d->local_disk->holder->lo};
            mc_id_format(h, o->holder);
        }
    }
}

int mc_query(struct mc_client *c, const char *key, struct mc_object_info *out)
{
    if (!c || !out)
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    memset(out, 0, sizeof(*out));
    int rc = mc_client_check_key(key);
    if (rc)
        return rc;
    Mc__QueryKeyRequest req = MC__QUERY_KEY_REQUEST__INIT;
    req.key = (char *)key;
    ProtobufCMessage *m = NULL;
    rc = mc_master_conn_call(c->mc, MC_METHOD_QUERY_KEY, &req.base,
                             &mc__query_key_response__descriptor, &m);
    if (rc)
        return rc;
    Mc__QueryKeyResponse *r = (Mc__QueryKeyResponse *)m;
    out->size = r->size;
    out->version = r->version;
    out->crc32c = r->crc32c;
    out->lease_ms_left = r->lease_ms_left > 0 ? (uint64_t)r->lease_ms_left : 0;
    out->hard_pinned = r->hard_pinned;
    out->soft_pin_ms_left = r->soft_pin_ms_left > 0 ? (uint64_t)r->soft_pin_ms_left : 0;
    if (r->n_replicas) {
        out->replicas = calloc(r->n_replicas, sizeof(*out->replicas));
        if (!out->replicas) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        for (size_t i = 0; i < r->n_replicas; i++)
            if (r->replicas[i] && r->replicas[i]->replica)
                mc_client_fill_replica(&out->replicas[out->replica_count++],
                                       r->replicas[i]->replica);
    }
out:
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

void mc_object_info_free(struct mc_object_info *info)
{
    if (!info)
        return;
    free(info->replicas);
    info->replicas = NULL;
    info->replica_count = 0;
}

/* ---- registered buffers ------------------------------------------------------------------ */

/* buf_lock: before the RDMA context's mr_lock in the lock order (common/lock_order.h). */
static void bufs_lock(struct mc_client *c)
{
    mc_lo_acquire(MC_LO_CLIENT_BUFS, 0);
    pthread_mutex_lock(&c->buf_lock);
}

static void bufs_unlock(struct mc_client *c)
{
    pthread_mutex_unlock(&c->buf_lock);
    mc_lo_release(MC_LO_CLIENT_BUFS, 0);
}

int mc_register_buffer(struct mc_client *c, void *addr, size_t len)
{
    if (!c || !addr || len == 0 || (uintptr_t)addr + len < (uintptr_t)addr)
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    int rc = 0;
    bufs_lock(c);
    for (size_t i = 0; i < c->nbufs; i++) {
        uintptr_t a = (uintptr_t)c->bufs[i].addr, b = (uintptr_t)addr;
        if (b < a + c->bufs[i].len && a < b + len) {
            rc = MC_ERR_INVALID_PARAMS; /* overlaps a registered range */
            goto out;
        }
    }
    if (c->nbufs == c->capbufs) {
        size_t cap = c->capbufs ? c->capbufs * 2 : 8;
        struct mc_reg_buffer *nb = realloc(c->bufs, cap * sizeof(*nb));
        if (!nb) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        c->bufs = nb;
        c->capbufs = cap;
    }
    rc = mc_client_rdma_register_buffer(c, addr, len);
    if (rc)
        goto out;
    c->bufs[c->nbufs++] = (struct mc_reg_buffer){addr, len};
out:
    bufs_unlock(c);
    return rc;
}

int mc_unregister_buffer(struct mc_client *c, void *addr)
{
    if (!c || !addr)
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    int rc = MC_ERR_INVALID_PARAMS;
    bufs_lock(c);
    for (size_t i = 0; i < c->nbufs; i++)
        if (c->bufs[i].addr == addr) {
            mc_client_rdma_unregister_buffer(c, addr);
            c->bufs[i] = c->bufs[--c->nbufs];
            rc = 0;
            break;
        }
    bufs_unlock(c);
    return rc;
}
