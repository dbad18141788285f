/*
 * etcd.h - a small etcd v3 client over etcd's HTTP/JSON gateway (libcurl + jansson).
 *
 * What it speaks. etcd 3.4 serves its v3 API as JSON on the client port under /v3/ (also
 * /v3beta/): POST /v3/kv/range|put|txn|deleterange, /v3/lease/grant|keepalive|revoke and the
 * streaming POST /v3/watch. Nothing of etcd is generated or vendored: the few messages used here
 * are built and read by hand (etcd_json.c), which is where the gateway's quirks are handled:
 *   - int64 and uint64 fields travel as JSON strings ("revision":"7"); numbers are accepted too;
 *   - keys and values are base64;
 *   - fields equal to zero are omitted: a txn whose compare failed has no "succeeded", a lease
 *     keepalive on an expired lease has no "TTL", a PUT watch event has no "type";
 *   - errors come back as {"error","message","code"} (gRPC codes): code 5 (NOT_FOUND) for a put
 *     or keepalive on a lease that no longer exists -> MC_ERR_LEASE_EXPIRED; "request is too
 *     large" (code 3, above etcd's --max-request-bytes, 1.5 MiB by default) ->
 *     MC_ERR_BUFFER_OVERFLOW, as is the gateway's own "received message larger than max" (code 8,
 *     above 2 MiB); other codes -> MC_ERR_RPC_FAIL, each with a log line;
 *   - a watch the server cancels (its start revision was compacted) says "canceled":true with
 *     "compact_revision": the caller must re-read and watch again from there.
 *
 * Endpoints. cfg.endpoints lists "host:port" entries separated by ';' or ',' (an "http://" or
 * "https://" prefix is allowed; TLS is used when ca_file is given). A call that cannot connect
 * (or times out) moves to the next endpoint and tries it, once round the list, then fails with
 * MC_ERR_RPC_FAIL (connection) or MC_ERR_RPC_TIMEOUT. The endpoint that worked stays current.
 *
 * Threads. An mc_etcd is used by one thread at a time (the HA thread); unary calls reuse one
 * curl easy handle (keep-alive connection). A watch has its own curl multi handle, so the HA
 * thread can wait on it with a timeout (mc_etcd_watch_poll) between its unary calls.
 */
#ifndef MC_COMMON_ETCD_H
#define MC_COMMON_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_etcd;
struct mc_etcd_watch;

#define MC_ETCD_MAX_ENDPOINTS 16

struct mc_etcd_config {
    const char *endpoints;       /* "h1:2379;h2:2379" (or commas) */
    const char *ca_file;         /* TLS: CA bundle (NULL/"" = plain http) */
    const char *cert_file;       /* TLS client certificate (optional) */
    const char *key_file;        /* its key */
    uint32_t connect_timeout_ms; /* 0 = 500 */
    uint32_t timeout_ms;         /* a unary call, all in; 0 = 2000 */
};

/* One key-value as etcd reports it. value is malloc'd (NUL-terminated for convenience, len
 * excludes the NUL); free with mc_etcd_kv_clear. */
struct mc_etcd_kv {
    char *key;
    char *value;
    size_t value_len;
    uint64_t create_revision, mod_revision, version, lease;
};
void mc_etcd_kv_clear(struct mc_etcd_kv *kv);

/* Parses cfg->endpoints. Returns 0, or MC_ERR_INVALID_PARAMS (empty list, a bad entry, more than
 * MC_ETCD_MAX_ENDPOINTS) or MC_ERR_INTERNAL_ERROR. No network I/O. */
int mc_etcd_new(const struct mc_etcd_config *cfg, struct mc_etcd **out);
void mc_etcd_free(struct mc_etcd *e);
/* Number of endpoints, and the base URL of the current one ("http://h:p"). */
int mc_etcd_endpoint_count(const struct mc_etcd *e);
const char *mc_etcd_endpoint(const struct mc_etcd *e);

/* Reads key. *found says whether it exists (kv filled then); *revision (may be NULL) is the
 * store's revision at the read. */
int mc_etcd_get(struct mc_etcd *e, const char *key, struct mc_etcd_kv *kv, bool *found,
                uint64_t *revision);
/* Reads every key that starts with prefix; cb runs for each (kv freed after it returns) and
 * the first non-zero return of cb ends the walk and is returned. One request: for small sets
 * (the gateway answers at most its request size limit). */
int mc_etcd_get_prefix(struct mc_etcd *e, const char *prefix,
                       int (*cb)(void *arg, const struct mc_etcd_kv *kv), void *arg);
/* Unconditional put (lease 0 = none). MC_ERR_LEASE_EXPIRED when the lease is gone. */
int mc_etcd_put(struct mc_etcd *e, const char *key, const void *val, size_t len, uint64_t lease);
/* Unconditional delete of one key. */
int mc_etcd_delete(struct mc_etcd *e, const char *key);

/* Creates key = val on lease only if key does not exist (one txn). On success *created says
 * which branch ran; when created, *revision is the new key's create_revision; when not, kv gets
 * the existing key (it may have vanished in between: then kv->key is NULL). */
int mc_etcd_create_if_absent(struct mc_etcd *e, const char *key, const void *val, size_t len,
                             uint64_t lease, bool *created, uint64_t *revision,
                             struct mc_etcd_kv *kv);
/* A fenced write: puts key = val (no lease) only while guard_key's create_revision equals
 * guard_rev (one txn). *ok = false when the guard failed (nothing written). */
int mc_etcd_put_guarded(struct mc_etcd *e, const char *guard_key, uint64_t guard_rev,
                        const char *key, const void *val, size_t len, bool *ok);

/* The current endpoint's member id and the id of the raft leader it knows (0 = none). */
int mc_etcd_status(struct mc_etcd *e, uint64_t *member_id, uint64_t *leader_id);
/* Compacts the store's history up to revision (watches from before it get cancelled). */
int mc_etcd_compact(struct mc_etcd *e, uint64_t revision);

/* Leases. grant: *id and the granted *ttl_s. keepalive: *ttl_s = the remaining TTL, 0 when
 * the lease no longer exists (the gateway then omits TTL: not an error). */
int mc_etcd_lease_grant(struct mc_etcd *e, int64_t ttl_s, uint64_t *id, int64_t *ttl_s_out);
int mc_etcd_lease_keepalive(struct mc_etcd *e, uint64_t id, int64_t *ttl_s);
int mc_etcd_lease_revoke(struct mc_etcd *e, uint64_t id);

/* ---- watch -------------------------------------------------------------------------------- */

enum mc_etcd_event_type {
    MC_ETCD_EV_PUT = 0,
    MC_ETCD_EV_DELETE = 1,
};

struct mc_etcd_event {
    enum mc_etcd_event_type type;
    struct mc_etcd_kv kv; /* for DELETE: key and mod_revision only */
};

/* Watches one key from start_revision (0 = from now). Opens the stream on the current endpoint
 * (rotating on connection failure is the caller's: watch again after an error). */
int mc_etcd_watch_new(struct mc_etcd *e, const char *key, uint64_t start_revision,
                      struct mc_etcd_watch **out);
void mc_etcd_watch_free(struct mc_etcd_watch *w);

/* What one poll found. */
struct mc_etcd_watch_result {
    int nevents;
    struct mc_etcd_event events[16]; /* the rest stays queued for the next poll */
    bool created;                    /* the server confirmed the watch */
    bool canceled;                   /* the server cancelled it: re-read and watch again */
    uint64_t compact_revision;       /* when cancelled because of compaction */
    bool closed;                     /* the stream ended or failed: watch again */
    uint64_t revision;               /* header revision of the last message */
};
void mc_etcd_watch_result_clear(struct mc_etcd_watch_result *r);

/* Waits up to timeout_ms for stream data and returns what arrived (may be nothing). Returns 0
 * (look at *r), or an error for a malformed message. */
int mc_etcd_watch_poll(struct mc_etcd_watch *w, int timeout_ms, struct mc_etcd_watch_result *r);

#endif
