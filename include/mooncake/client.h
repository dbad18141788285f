/*
 * client.h - the public C API of libmooncake_client.
 *
 * An inference engine links libmooncake_client (pkg-config: mooncake_client) and includes only
 * this header and errors.h. A client:
 *   - connects to the master (mooncake_master) and checks the protocol version;
 *   - contributes a DRAM segment (segment_size bytes, mmap'd, optionally huge pages) that peers
 *     read and write through its peer server on data_port, and optionally a LOCAL_DISK directory;
 *   - puts and gets objects (KV-cache blocks) by key, peer to peer: bytes never pass through the
 *     master.
 *
 * Every call is thread-safe. Functions return 0 (MC_OK) or a negative error code from errors.h
 * (mc_strerror names it); calls that return a size return it as a non-negative int64_t. Keys are
 * NUL-terminated strings of 1..4096 bytes (the master's --max_key_len).
 *
 * The library never installs signal handlers, calls exit, writes to stdout or registers flags.
 *
 * ABI policy. The SONAME is libmooncake_client.so.<major>; it changes only when an existing
 * function or field changes meaning or position. Within one major version the library grows by
 * adding functions and by appending fields at the end of the two config structs below. Each
 * config struct starts with `struct_size`, which its _init macro sets from the sizeof the
 * caller was compiled with (an _init never writes past it); the library reads only the fields that
 * size covers and gives every later field its default, so a program built against an older header
 * keeps working with a newer library. Always fill a config with its _init function before setting
 * fields: a config whose struct_size is 0 or unknown is refused with INVALID_PARAMS.
 */
#ifndef MOONCAKE_CLIENT_H
#define MOONCAKE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mooncake/errors.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mc_client;

/* Levels of a client's log lines (mc_client_config.log_level). */
enum mc_client_log_level {
    MC_CLIENT_LOG_DEBUG = 0,
    MC_CLIENT_LOG_INFO = 1,
    MC_CLIENT_LOG_WARN = 2,
    MC_CLIENT_LOG_ERROR = 3,
    MC_CLIENT_LOG_OFF = 4,
};

/* Receives a client's log lines (mc_client_config.log_fn): level is an enum mc_client_log_level,
 * line one structured line (`ts=... level=... comp=... msg="..." key=value...`) without its
 * newline, valid for the call only. Called on whichever thread logs (a caller's, or one of the
 * client's own), possibly concurrently: it must be thread-safe and must not call back into the
 * client. */
typedef void (*mc_client_log_fn)(void *arg, int level, const char *line);

struct mc_client_config {
    uint32_t struct_size;         /* set by mc_client_config_init; do not change */
    const char *master_address;   /* "host:port" of mooncake_master (default "127.0.0.1:50051"),
                                   * or etcd://h1:2379;h2:2379[/cluster_id] for an HA cluster:
                                   * the client follows its leader */
    const char *host;             /* host advertised to peers (default "127.0.0.1") */
    const char *bind_address;     /* address the peer server binds (default: host) */
    const char *protocol;         /* "tcp" (default) or "rdma" */
    uint16_t data_port;           /* peer server port; 0 = pick a free one */
    uint64_t segment_size;        /* DRAM contributed, bytes; 0 = contribute none */
    bool huge_pages;              /* back the segment with huge pages (MAP_HUGETLB) */
    const char *disk_path;        /* LOCAL_DISK directory; NULL = no disk tier */
    uint64_t disk_capacity;       /* record bytes in disk_path (+ up to 2 spare extents) */
    bool checksums;               /* verify value CRC32C on every get (default true) */
    uint32_t connect_timeout_ms;  /* master and peer connect timeout (default 3000) */
    uint32_t rpc_timeout_ms;      /* per-call timeout (default 5000) */
    uint32_t put_retry_window_ms; /* retry NO_AVAILABLE_HANDLE for this long (default 1000) */
    uint32_t ping_interval_ms;    /* liveness ping period (default 1000) */
    /* Logging, per client (two clients in a process keep their own): every line the client
     * writes, from its own threads or from calls made on it, below log_level is dropped; the
     * rest go to log_fn, or to stderr when log_fn is NULL. */
    int log_level;           /* enum mc_client_log_level (default MC_CLIENT_LOG_WARN) */
    mc_client_log_fn log_fn; /* NULL = stderr */
    void *log_arg;           /* passed to log_fn */
    /* Who may connect (README "Security"). A file holding the cluster's shared secret (16 to
     * 4096 bytes; a trailing newline is ignored); the master and every peer must be given the
     * same one. With it, this client proves the secret on every connection it opens (master
     * and peers; the secret itself is never sent) and its peer server serves only peers that
     * prove it. NULL (default) = no token. */
    const char *auth_token_file;
    /* Without a token the peer server serves loopback peers only (protected mode). false opts
     * out (a trusted network; logged as a warning). Default true. Ignored with a token. */
    bool protected_mode;
    /* Limits of the peer server, as mooncake_master's --idle_timeout and --max_conns_per_addr:
     * a peer connection with no call in flight and no byte moved for peer_idle_timeout_ms is
     * closed (default 300000; 0 = never), and at most peer_max_conns_per_addr connections are
     * served from one non-loopback address (default 1024; 0 = no limit; loopback is exempt). */
    uint32_t peer_idle_timeout_ms;
    uint32_t peer_max_conns_per_addr;
    /* protocol rdma only. rdma_devices: comma-separated device names (ibv_devices) to register
     * memory on, NULL or "" = the device that owns host. rdma_ack_timeout: the queue pairs'
     * ACK timeout, 4.096 us * 2^n (0 = 14, about 67 ms per try; -1 = rdma_cm's default).
     * rdma_tos: the connections' IP ToS / traffic class (0 = the fabric's default; lossless
     * RoCE fabrics name theirs, e.g. 106 for DSCP 26). rdma_qp_pool: idle queue pairs kept per
     * peer, about the threads that talk to one peer at once (0 = one per CPU, 4 .. 64). */
    const char *rdma_devices;
    int32_t rdma_ack_timeout;
    int32_t rdma_tos;
    uint32_t rdma_qp_pool;
    /* Peer connections in all (default 10000, as mooncake_client --max_connections; 0 = the
     * default); more are accepted and closed at once. */
    uint32_t peer_max_conns;
    /* TLS (README "Security") on every connection this client opens or serves over TCP (the
     * master and the peers; RDMA transfers are outside it): PEM files of this client's
     * certificate and key (needed to serve peers, and shown to servers that require client
     * certificates) and of the CA that signed the cluster's certificates (servers' certificates
     * are verified against it; with it the peer server also requires client certificates).
     * All NULL (default) = plain TCP. The auth token handshake, when set, runs inside TLS. */
    const char *tls_cert_file;
    const char *tls_key_file;
    const char *tls_ca_file;
};

/* Fills the first `size` bytes of cfg (the sizeof the caller was compiled with) with the defaults
 * documented above and sets struct_size to the part this library reads: min(size, its own
 * sizeof). Never writes past `size`. Call it through the mc_client_config_init macro. */
void mc_client_config_init_sized(struct mc_client_config *cfg, size_t size);
/* The function programs built before the sized init call: it fills the first published layout
 * only (up to ping_interval_ms), so it never writes past an older caller's smaller struct. */
void(mc_client_config_init)(struct mc_client_config *cfg);
#define mc_client_config_init(cfg) mc_client_config_init_sized((cfg), sizeof(*(cfg)))

/* Connects, mounts the segment and the disk directory, starts the peer server and the worker.
 * On success *out owns the client; release it with mc_client_close. */
int mc_client_open(const struct mc_client_config *cfg, struct mc_client **out);
/* Unmounts, stops every thread and frees the client. NULL is a no-op. */
void mc_client_close(struct mc_client *client);
/* "host:port" peers use to reach this client's segment (the endpoint `mooncake_cli segments`
 * shows). Valid until mc_client_close. */
const char *mc_client_endpoint(const struct mc_client *client);

/* How a put is placed and protected. */
struct mc_replicate_config {
    uint32_t struct_size;     /* set by mc_replicate_config_init; do not change */
    uint32_t replica_num;     /* MEMORY replicas, each on a different segment (default 1, not 0) */
    bool with_soft_pin;       /* evicted only after everything else */
    uint64_t soft_pin_ttl_ms; /* 0 = the master's default (30 min) */
    bool with_hard_pin;       /* never evicted */
    const char *const *preferred_segments; /* segment names (endpoints) to try first */
    size_t preferred_segments_count;
    const char *group_id; /* keys of a group share a shard, a lease and eviction fate */
    /* A put of a key that already exists keeps the existing value either way. false (default,
     * upstream's semantics): the put succeeds; true: it returns OBJECT_ALREADY_EXISTS (per key
     * in a batch), so a caller can tell that the value it gave was not stored. */
    bool report_existing;
};
/* Fills the first `size` bytes of rc with the defaults (one replica, no pins, no preference, no
 * group) and sets struct_size to min(size, this library's sizeof). Never writes past `size`.
 * Call it through the mc_replicate_config_init macro. */
void mc_replicate_config_init_sized(struct mc_replicate_config *rc, size_t size);
/* For programs built before the sized init: fills the first published layout only (up to
 * group_id). */
void(mc_replicate_config_init)(struct mc_replicate_config *rc);
#define mc_replicate_config_init(rc) mc_replicate_config_init_sized((rc), sizeof(*(rc)))

/* Stores len bytes under key (rc NULL = defaults). An existing readable key is left as it is and
 * the call succeeds (upstream semantics), or returns OBJECT_ALREADY_EXISTS with
 * rc->report_existing. Never leaves a half-visible object. */
int mc_put(struct mc_client *client, const char *key, const void *buf, size_t len,
           const struct mc_replicate_config *rc);
/* Reads the value of key into buf (capacity cap). Returns the size, or a negative error:
 * OBJECT_NOT_FOUND, BUFFER_OVERFLOW (cap too small), LEASE_EXPIRED (the read lease ran out
 * mid-read), CHECKSUM_MISMATCH (with checksums on), TRANSFER_FAIL, RPC_FAIL. */
int64_t mc_get(struct mc_client *client, const char *key, void *buf, size_t cap);
/* mc_get that also tells the value's size: *needed (when needed is not NULL) is set to it on
 * success and on BUFFER_OVERFLOW (cap too small: call again with a buffer of *needed bytes),
 * and to 0 on any other error. */
int64_t mc_get_ex(struct mc_client *client, const char *key, void *buf, size_t cap, size_t *needed);
/* Reads the value of key into a buffer this call allocates, of exactly the value's size: one
 * master round trip and one access (lease, eviction order, promotion count) however large the
 * value, for a reader that does not know the size beforehand. On success returns the size and
 * sets *out to the buffer (NULL for an empty value), which the caller releases with
 * mc_value_free; on error returns as mc_get does and sets *out to NULL. A value larger than
 * max_size (0 = no limit) is BUFFER_OVERFLOW, with nothing allocated; an allocation that fails
 * is INTERNAL_ERROR. */
int64_t mc_get_alloc(struct mc_client *client, const char *key, size_t max_size, void **out);
/* Releases a buffer from mc_get_alloc (NULL is a no-op). */
void mc_value_free(void *value);
/* Size of key's value, or a negative error (OBJECT_NOT_FOUND; REPLICA_IS_NOT_READY while its
 * Put is in flight). A size query is not a read: it takes no read lease and does not count as
 * an access (no effect on eviction order or promotion). */
int64_t mc_get_size(struct mc_client *client, const char *key);

/* Batch forms: per-key results in results[i] (0 / size, or an error); the return value is 0 when
 * the batch was carried out (look at results) or an error that applies to the whole batch. */
int mc_batch_put(struct mc_client *client, size_t n, const char *const *keys,
                 const void *const *bufs, const size_t *lens, const struct mc_replicate_config *rc,
                 int *results);
int mc_batch_get(struct mc_client *client, size_t n, const char *const *keys, void *const *bufs,
                 const size_t *caps, int64_t *results);
/* mc_batch_get that also says which tier served each key: tiers[i] is MC_REPLICA_MEMORY or
 * MC_REPLICA_LOCAL_DISK (enum mc_replica_type) for the replica that key i was read from when
 * results[i] >= 0, and -1 when it was not read. tiers NULL = mc_batch_get. */
int mc_batch_get_tiers(struct mc_client *client, size_t n, const char *const *keys,
                       void *const *bufs, const size_t *caps, int64_t *results, int *tiers);

/* This client's own counts in the Prometheus text format (version 0.0.4): objects stored and
 * read (reads by the tier that served them: memory, local_disk), their bytes, failed puts and
 * gets by error name, and the latency of each call in seconds (histograms, op = put | get |
 * batch_put | batch_get). Families: mooncake_client_puts_total, mooncake_client_put_bytes_total,
 * mooncake_client_gets_total{tier}, mooncake_client_get_bytes_total{tier},
 * mooncake_client_errors_total{op,code}, mooncake_client_op_latency_seconds{op}.
 * Writes at most cap bytes including a terminating NUL (cap 0: nothing) and returns the length
 * of the whole text, as snprintf does: a return >= cap means buf was too small. Negative on
 * error (INVALID_PARAMS). */
int64_t mc_client_metrics_text(struct mc_client *client, char *buf, size_t cap);

/* 1 when key exists and is readable, 0 when not, negative on error. Takes a read lease. */
int mc_exist(struct mc_client *client, const char *key);
int mc_batch_exist(struct mc_client *client, size_t n, const char *const *keys, int *results);

/* Removes key; an object under a read lease is kept (OBJECT_HAS_LEASE) unless force. */
int mc_remove(struct mc_client *client, const char *key, bool force);
/* Removes every removable object; returns how many, or a negative error. */
int64_t mc_remove_all(struct mc_client *client, bool force);

enum mc_replica_type { MC_REPLICA_MEMORY = 0, MC_REPLICA_LOCAL_DISK = 2 };
enum mc_replica_status { MC_REPLICA_PROCESSING = 2, MC_REPLICA_COMPLETE = 3 };

struct mc_replica_info {
    uint64_t id;
    enum mc_replica_type type;
    enum mc_replica_status status;
    char segment[128];  /* MEMORY: segment name */
    uint64_t offset;    /* MEMORY: offset in the segment */
    char endpoint[128]; /* host:port serving the bytes */
    char holder[33];    /* LOCAL_DISK: holder client id (hex) */
};

struct mc_object_info {
    uint64_t size;
    uint64_t version;
    uint32_t crc32c;
    uint64_t lease_ms_left;
    size_t replica_count;
    struct mc_replica_info *replicas; /* owned; release with mc_object_info_free */
    bool hard_pinned;                 /* never evicted */
    uint64_t soft_pin_ms_left;        /* 0 = not soft-pinned */
};

/* Replica descriptors of key, from the master's admin query (no lease, no promotion). */
int mc_query(struct mc_client *client, const char *key, struct mc_object_info *out);
void mc_object_info_free(struct mc_object_info *info);

/* ---- calls for engine connectors (client_batch.c) ------------------------------------------
 * Each is one master round trip for the whole batch (plus the transfers, one per endpoint as for
 * mc_batch_put / mc_batch_get); per-key results as the batch forms above. */

/* Puts n values, value i being the concatenation of nparts[i] parts (parts[i][j], part_lens[i][j]
 * bytes). A one-part value is sent from the caller's memory; a value of several parts is first
 * gathered into one staging buffer (one copy). */
int mc_batch_put_parts(struct mc_client *client, size_t n, const char *const *keys,
                       const void *const *const *parts, const size_t *const *part_lens,
                       const size_t *nparts, const struct mc_replicate_config *rc, int *results);
/* Reads n values, value i scattered over nparts[i] buffers (parts[i][j], part_caps[i][j] bytes, in
 * order). results[i] is the value's size, or an error (BUFFER_OVERFLOW when the buffers together
 * are too small). A value read into several buffers goes through one staging buffer. */
int mc_batch_get_parts(struct mc_client *client, size_t n, const char *const *keys,
                       void *const *const *parts, const size_t *const *part_caps,
                       const size_t *nparts, int64_t *results);
/* mc_get_alloc for n keys: outs[i] is a buffer of exactly key i's size (release each with
 * mc_value_free; NULL for an error or an empty value) and results[i] the size or an error. */
int mc_batch_get_alloc(struct mc_client *client, size_t n, const char *const *keys, size_t max_size,
                       void **outs, int64_t *results);
/* Byte ranges of values: range r copies lens[r] bytes from offset src_offsets[r] of the value of
 * keys[key_index[r]] to dsts[r]. results[r] is the bytes copied, or an error (the key's read
 * error, or INVALID_PARAMS for a range past the value's end). Each key is read once. */
int mc_batch_get_ranges(struct mc_client *client, size_t nkeys, const char *const *keys,
                        size_t nranges, const size_t *key_index, const uint64_t *src_offsets,
                        void *const *dsts, const size_t *lens, int64_t *results);
/* Replica descriptors of n keys from one BatchGetReplicaList (a read like upstream's: it takes a
 * read lease). outs[i] is filled when results[i] is 0; release each with mc_object_info_free. */
int mc_batch_query(struct mc_client *client, size_t n, const char *const *keys,
                   struct mc_object_info *outs, int *results);
/* mc_remove for n keys in one BatchRemove; results[i] is 0 or key i's error. */
int mc_batch_remove(struct mc_client *client, size_t n, const char *const *keys, bool force,
                    int *results);
/* Stores len bytes under key, replacing the value if the key exists (upstream's upsert): the
 * master swaps the old value for the new one in one step once the new bytes are written, so a
 * reader gets the old value or the new one, whole, and the new version is higher. The old
 * value's disk copies are deleted before the call returns (the delete rule); a reader holding
 * a lease on the old value keeps reading it until the lease ends. A key whose Put is in flight
 * is not replaced (REPLICA_IS_NOT_READY). rc->group_id is refused (INVALID_PARAMS). */
int mc_upsert(struct mc_client *client, const char *key, const void *buf, size_t len,
              const struct mc_replicate_config *rc);
/* mc_upsert for n keys (results[i] per key): one BatchUpsertStart and one BatchUpsertEnd for
 * the batch, each key its own swap. */
int mc_batch_upsert(struct mc_client *client, size_t n, const char *const *keys,
                    const void *const *bufs, const size_t *lens,
                    const struct mc_replicate_config *rc, int *results);

/* Removes every key the pattern matches, on the master in one call: a POSIX extended regular
 * expression matched against the whole key (anchored: "layer0/.*" removes the keys starting
 * with "layer0/"). Each key follows mc_remove's rules (leased keys kept unless force; disk
 * copies deleted before the answer). Returns how many were removed, or INVALID_PARAMS for a
 * pattern regcomp refuses. */
int64_t mc_remove_by_regex(struct mc_client *client, const char *pattern, bool force);

/* Registers a caller buffer for zero-copy transfers (needed by RDMA, harmless for TCP). */
int mc_register_buffer(struct mc_client *client, void *addr, size_t len);
int mc_unregister_buffer(struct mc_client *client, void *addr);

#ifdef __cplusplus
}
#endif
#endif /* MOONCAKE_CLIENT_H */
