/*
 * http_admin.h - the master's HTTP admin API, upstream's paths and formats, served next to
 * /metrics on --metrics_port (common/http.h routes /metrics and /health itself; everything else
 * comes here). Routes, their access class and their answer:
 *
 * - /health (public): {"status":"ok","role":"leader","ha_state":"standalone",
 *   "service_ready":true} (the body of the HTTP server's /health).
 * - /role (public): "leader" (text).
 * - /leader (public): {"present":true,"leader_address":"HOST:PORT","view_version":0}, this
 *   master's RPC address.
 * - /get_all_segments (public): mounted segment names, one per line (empty body: none yet).
 * - /get_segments_detail (public): {"total_segments":N,"segments":[{segment_name, segment_id,
 *   client_id, base_address, size_bytes, size_human, te_endpoint, protocol, status,
 *   allocator_used_bytes, allocator_capacity_bytes, allocator_usage_percent}]}.
 * - /query_segment?segment=NAME (public): "NAME\nUsed(bytes): U\nCapacity(bytes) : C\n", or 404.
 * - /query_key?key=K (admin): {"success":true,"data":[{size_, buffer_address_, protocol_,
 *   transport_endpoint_}]} for K's complete DRAM replicas, or 404 with
 *   {"success":false,"error_code":-704,"error_message":"OBJECT_NOT_FOUND"}.
 * - /batch_query_keys?keys=A,B (admin): {"success":true,"data":{"A":{"ok":true,"values":[...],
 *   "local_disk_values":[...]},"B":{"ok":false,"error":"..."}}}; at most
 *   MC_HTTP_ADMIN_MAX_BATCH keys (400 beyond).
 * - /get_all_keys (admin): keys, one per line, a page at a time: ?limit=N (default
 *   MC_HTTP_ADMIN_DEFAULT_LIMIT, at most MC_HTTP_ADMIN_MAX_LIMIT) and ?cursor=C; when keys remain
 *   the reply carries the header X-Mooncake-Next-Cursor: C for the next page (absent on the last).
 *
 * Nothing here grants a lease, promotes or counts a hit. Access: an admin route needs
 * "Authorization: Bearer TOKEN" (the token of --auth_token_file) when the master has a token,
 * else 401; without a token every route answers (the HTTP port's own protections are the HTTP
 * server's). Each route's access is also available to the server through
 * mc_master_http_route_access().
 */
#ifndef MC_MASTER_HTTP_ADMIN_H
#define MC_MASTER_HTTP_ADMIN_H

#include <stdbool.h>

#include "common/auth.h"
#include "common/http.h"

#define MC_HTTP_ADMIN_DEFAULT_LIMIT 10000
#define MC_HTTP_ADMIN_MAX_LIMIT 100000
#define MC_HTTP_ADMIN_MAX_BATCH 1000

struct mc_master;

enum mc_http_access {
    MC_HTTP_ACCESS_NONE = 0, /* not a route of this API */
    MC_HTTP_ACCESS_PUBLIC,
    MC_HTTP_ACCESS_ADMIN, /* lists keys or their placement */
};

struct mc_master_http {
    struct mc_master *m;
    char self_addr[128];          /* this master's RPC address as clients reach it */
    struct mc_auth_key admin_key; /* !set: admin routes are open */
};

/* The access class of a path (query excluded). */
enum mc_http_access mc_master_http_route_access(const char *path);

/* mc_http_handler_fn for the routes above; arg = struct mc_master_http. */
int mc_master_http_handle(void *arg, const char *path, const struct mc_http_request *req,
                          struct mc_textbuf *body, const char **content_type);

/* mc_http_health_fn answering upstream's /health JSON; arg = struct mc_master_http. */
int mc_master_http_health(void *arg, struct mc_textbuf *body);

#endif
