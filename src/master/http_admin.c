/*
 * http_admin.c - see http_admin.h. One route table (path, access, handler); the JSON is written
 * by hand with one string escaper (keys are arbitrary bytes: control characters and non-ASCII
 * bytes are escaped as \u00XX so the output is always valid JSON and ASCII).
 */
#include "master/http_admin.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/id.h"
#include "common/metrics.h"
#include "master/admin_keys.h"
#include "master/master.h"
#include "mooncake/errors.h"

#define JSON_TYPE "application/json; charset=utf-8"
#define KEYS_TYPE "text/plain; version=0.0.4"
#define CURSOR_HEADER "X-Mooncake-Next-Cursor"

typedef int (*route_fn)(struct mc_master_http *h, const struct mc_http_request *req,
                        struct mc_textbuf *body, const char **ctype);

static void json_str(struct mc_textbuf *b, const char *s, size_t len)
{
    mc_textbuf_append(b, "\"", 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            mc_textbuf_printf(b, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            mc_textbuf_printf(b, "\\u%04x", c);
        else
            mc_textbuf_append(b, (const char *)&s[i], 1);
    }
    mc_textbuf_append(b, "\"", 1);
}

static void json_cstr(struct mc_textbuf *b, const char *s)
{
    json_str(b, s, strlen(s));
}

static int json_error(struct mc_textbuf *b, const char **ctype, int status, int code,
                      const char *msg)
{
    *ctype = JSON_TYPE;
    mc_textbuf_printf(b, "{\"success\":false,\"error_code\":%d,\"error_message\":", code);
    json_cstr(b, msg);
    mc_textbuf_printf(b, "}");
    return status;
}

/* ---- public routes --------------------------------------------------------------------------- */

static int route_role(struct mc_master_http *h, const struct mc_http_request *req,
                      struct mc_textbuf *body, const char **ctype)
{
    (void)h;
    (void)req;
    (void)ctype;
    mc_textbuf_printf(body, "leader");
    return 200;
}

static int route_leader(struct mc_master_http *h, const struct mc_http_request *req,
                        struct mc_textbuf *body, const char **ctype)
{
    (void)req;
    *ctype = JSON_TYPE;
    mc_textbuf_printf(body, "{\"present\":true,\"leader_address\":");
    json_cstr(body, h->self_addr);
    mc_textbuf_printf(body, ",\"view_version\":0}");
    return 200;
}

static int route_all_segments(struct mc_master_http *h, const struct mc_http_request *req,
                              struct mc_textbuf *body, const char **ctype)
{
    struct mc_segment_info *segs = NULL;
    size_t n = 0;

    (void)req;
    *ctype = KEYS_TYPE;
    if (mc_master_list_segments(h->m, &segs, &n) != 0) {
        mc_textbuf_printf(body, "Failed to get all segments");
        return 500;
    }
    for (size_t i = 0; i < n; i++)
        mc_textbuf_printf(body, "%s\n", segs[i].desc.name);
    mc_textbuf_append(body, "", 0); /* an empty list is an empty 200 body */
    free(segs);
    return 200;
}

static int route_segments_detail(struct mc_master_http *h, const struct mc_http_request *req,
                                 struct mc_textbuf *body, const char **ctype)
{
    struct mc_segment_info *segs = NULL;
    size_t n = 0;
    char id[MC_ID_STRLEN], owner[MC_ID_STRLEN];

    (void)req;
    *ctype = JSON_TYPE;
    if (mc_master_list_segments(h->m, &segs, &n) != 0)
        return json_error(body, ctype, 500, MC_ERR_INTERNAL_ERROR, "Failed to get segments detail");
    mc_textbuf_printf(body, "{\"total_segments\":%zu,\"segments\":[", n);
    for (size_t i = 0; i < n; i++) {
        const struct mc_segment_info *s = &segs[i];
        mc_textbuf_printf(body, "%s{\"segment_name\":", i ? "," : "");
        json_cstr(body, s->desc.name);
        mc_textbuf_printf(body, ",\"segment_id\":\"%s\",\"client_id\":\"%s\"",
                          mc_id_format(s->desc.id, id), mc_id_format(s->owner, owner));
        mc_textbuf_printf(body,
                          ",\"base_address\":\"0x%" PRIx64 "\",\"size_bytes\":%" PRIu64
                          ",\"size_human\":\"%.3f GiB\",\"te_endpoint\":",
                          s->desc.base, s->desc.size, (double)s->desc.size / (1u << 30));
        json_cstr(body, s->desc.endpoint);
        mc_textbuf_printf(body, ",\"protocol\":");
        json_cstr(body, s->desc.protocol);
        mc_textbuf_printf(body,
                          ",\"status\":\"OK\",\"allocator_used_bytes\":%" PRIu64
                          ",\"allocator_capacity_bytes\":%" PRIu64
                          ",\"allocator_usage_percent\":%.2f}",
                          s->allocated, s->capacity,
                          s->capacity ? 100.0 * (double)s->allocated / (double)s->capacity : 0.0);
    }
    mc_textbuf_printf(body, "]}");
    free(segs);
    return 200;
}

static int route_query_segment(struct mc_master_http *h, const struct mc_http_request *req,
                               struct mc_textbuf *body, const char **ctype)
{
    const char *name = mc_http_request_arg(req, "segment");
    struct mc_segment_info *segs = NULL;
    size_t n = 0;
    int status = 404;

    *ctype = KEYS_TYPE;
    if (!name || !name[0]) {
        mc_textbuf_printf(body, "No segment provided. Use ?segment=NAME\n");
        return 400;
    }
    if (mc_master_list_segments(h->m, &segs, &n) != 0) {
        mc_textbuf_printf(body, "Failed to query segment\n");
        return 500;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(segs[i].desc.name, name) != 0)
            continue;
        mc_textbuf_printf(body, "%s\nUsed(bytes): %" PRIu64 "\nCapacity(bytes) : %" PRIu64 "\n",
                          segs[i].desc.name, segs[i].allocated, segs[i].capacity);
        status = 200;
        break;
    }
    if (status != 200)
        mc_textbuf_printf(body, "segment not found: %s\n", name);
    free(segs);
    return status;
}

/* ---- admin routes ---------------------------------------------------------------------------- */

/* Writes key_info's complete replicas: "values":[DRAM...] and, when any, "local_disk_values". */
static void replicas_json(struct mc_textbuf *b, const struct mc_key_info *ki, bool mem_only)
{
    char holder[MC_ID_STRLEN];
    int nm = 0, nd = 0;

    mc_textbuf_printf(b, mem_only ? "[" : "\"values\":[");
    for (uint32_t i = 0; i < ki->nreplicas; i++) {
        const struct mc_replica_desc *r = &ki->replicas[i];
        if (r->type != MC_REPLICA_TYPE_MEMORY || r->status != MC_REPLICA_STATUS_COMPLETE)
            continue;
        mc_textbuf_printf(b,
                          "%s{\"size_\":%" PRIu64 ",\"buffer_address_\":%" PRIu64 ",\"protocol_\":",
                          nm++ ? "," : "", r->size, r->u.mem.addr);
        json_cstr(b, r->u.mem.protocol);
        mc_textbuf_printf(b, ",\"transport_endpoint_\":");
        json_cstr(b, r->u.mem.endpoint);
        mc_textbuf_printf(b, "}");
    }
    mc_textbuf_printf(b, "]");
    if (mem_only)
        return;
    for (uint32_t i = 0; i < ki->nreplicas; i++) {
        const struct mc_replica_desc *r = &ki->replicas[i];
        if (r->type != MC_REPLICA_TYPE_LOCAL_DISK || r->status != MC_REPLICA_STATUS_COMPLETE)
            continue;
        mc_textbuf_printf(
            b, "%s{\"client_id\":\"%s\",\"object_size\":%" PRIu64 ",\"transport_endpoint\":",
            nd++ ? "," : ",\"local_disk_values\":[", mc_id_format(r->u.disk.holder, holder),
            r->size);
        json_cstr(b, r->u.disk.endpoint);
        mc_textbuf_printf(b, "}");
    }
    if (nd)
        mc_textbuf_printf(b, "]");
}

static int route_query_key(struct mc_master_http *h, const struct mc_http_request *req,
                           struct mc_textbuf *body, const char **ctype)
{
    const char *key = mc_http_request_arg(req, "key");
    struct mc_key_info *ki;
    int rc;

    *ctype = JSON_TYPE;
    if (!key || !key[0])
        return json_error(body, ctype, 400, MC_ERR_INVALID_PARAMS, "No key provided. Use ?key=KEY");
    ki = malloc(sizeof(*ki));
    if (!ki)
        return json_error(body, ctype, 500, MC_ERR_INTERNAL_ERROR, "out of memory");
    rc = mc_master_query_key(h->m, key, strlen(key), ki);
    if (rc != 0) {
        free(ki);
        return json_error(body, ctype, rc == MC_ERR_OBJECT_NOT_FOUND ? 404 : 400, rc,
                          mc_strerror(rc));
    }
    mc_textbuf_printf(body, "{\"success\":true,\"data\":");
    replicas_json(body, ki, true);
    mc_textbuf_printf(body, "}");
    free(ki);
    return 200;
}

static int route_batch_query_keys(struct mc_master_http *h, const struct mc_http_request *req,
                                  struct mc_textbuf *body, const char **ctype)
{
    const char *keys = mc_http_request_arg(req, "keys");
    struct mc_key_info *ki;
    size_t nkeys = 1;

    *ctype = JSON_TYPE;
    if (!keys || !keys[0])
        return json_error(body, ctype, 400, MC_ERR_INVALID_PARAMS,
                          "No keys provided. Use ?keys=key1,key2,...");
    for (const char *p = keys; *p; p++)
        nkeys += *p == ',';
    if (nkeys > MC_HTTP_ADMIN_MAX_BATCH) {
        char msg[96];
        snprintf(msg, sizeof(msg), "too many keys: %zu given, at most %d per request", nkeys,
                 MC_HTTP_ADMIN_MAX_BATCH);
        return json_error(body, ctype, 400, MC_ERR_INVALID_PARAMS, msg);
    }
    ki = malloc(sizeof(*ki));
    if (!ki)
        return json_error(body, ctype, 500, MC_ERR_INTERNAL_ERROR, "out of memory");
    mc_textbuf_printf(body, "{\"success\":true,\"data\":{");
    const char *p = keys;
    for (size_t i = 0; i < nkeys; i++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        mc_textbuf_printf(body, "%s", i ? "," : "");
        json_str(body, p, len);
        int rc = len ? mc_master_query_key(h->m, p, len, ki) : MC_ERR_INVALID_PARAMS;
        if (rc != 0) {
            mc_textbuf_printf(body, ":{\"ok\":false,\"error\":\"%s\"}", mc_strerror(rc));
        } else {
            mc_textbuf_printf(body, ":{\"ok\":true,");
            replicas_json(body, ki, false);
            mc_textbuf_printf(body, "}");
        }
        p = end ? end + 1 : p + len;
    }
    mc_textbuf_printf(body, "}}");
    free(ki);
    return 200;
}

/* Cursor text: "<shard>:<hex of the last key>". Returns 0 or -1. */
static int parse_cursor(const char *c, uint32_t *shard, char **after, size_t *after_len)
{
    char *end;
    unsigned long s = strtoul(c, &end, 10);
    *after = NULL;
    *after_len = 0;
    if (end == c || *end != ':' || s >= mc_master_list_keys_shards())
        return -1;
    const char *hex = end + 1;
    size_t hl = strlen(hex);
    if (hl % 2 || hl == 0 || hl > 2 * 65535)
        return -1;
    char *k = malloc(hl / 2 + 1);
    if (!k)
        return -1;
    for (size_t i = 0; i < hl / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1 || !strchr("0123456789abcdefABCDEF", hex[2 * i]) ||
            !strchr("0123456789abcdefABCDEF", hex[2 * i + 1])) {
            free(k);
            return -1;
        }
        k[i] = (char)v;
    }
    *shard = (uint32_t)s;
    *after = k;
    *after_len = hl / 2;
    return 0;
}

static int route_all_keys(struct mc_master_http *h, const struct mc_http_request *req,
                          struct mc_textbuf *body, const char **ctype)
{
    const char *ls = mc_http_request_arg(req, "limit"), *cs = mc_http_request_arg(req, "cursor");
    unsigned long limit = MC_HTTP_ADMIN_DEFAULT_LIMIT;
    uint32_t shard = 0;
    char *after = NULL;
    size_t after_len = 0;
    struct mc_key_page pg;

    *ctype = KEYS_TYPE;
    if (ls && ls[0]) {
        char *end;
        limit = strtoul(ls, &end, 10);
        if (*end || limit == 0 || limit > MC_HTTP_ADMIN_MAX_LIMIT) {
            mc_textbuf_printf(body, "limit must be 1..%d\n", MC_HTTP_ADMIN_MAX_LIMIT);
            return 400;
        }
    }
    if (cs && cs[0] && parse_cursor(cs, &shard, &after, &after_len) != 0) {
        mc_textbuf_printf(body, "bad cursor: pass the %s header of the previous page as is\n",
                          CURSOR_HEADER);
        return 400;
    }
    int rc = mc_master_list_keys(h->m, shard, after, after_len, limit, &pg);
    free(after);
    if (rc != 0) {
        mc_textbuf_printf(body, "Failed to get all keys\n");
        return 500;
    }
    for (size_t i = 0; i < pg.n; i++) {
        mc_textbuf_append(body, pg.buf + pg.keys_off[i], pg.keys_len[i]);
        mc_textbuf_append(body, "\n", 1);
    }
    mc_textbuf_append(body, "", 0);
    if (pg.more) {
        size_t cap = 16 + 2 * pg.next_after_len + 1;
        char *cur = malloc(cap);
        if (cur) {
            int off = snprintf(cur, cap, "%u:", pg.next_shard);
            for (size_t i = 0; i < pg.next_after_len; i++)
                off +=
                    snprintf(cur + off, cap - (size_t)off, "%02x", (unsigned char)pg.next_after[i]);
            mc_http_reply_header(req, CURSOR_HEADER, cur);
            free(cur);
        } else {
            mc_key_page_free(&pg);
            mc_textbuf_destroy(body);
            mc_textbuf_printf(body, "out of memory\n");
            return 500;
        }
    }
    mc_key_page_free(&pg);
    return 200;
}

/* ---- routing --------------------------------------------------------------------------------- */

static const struct route {
    const char *path;
    enum mc_http_access access;
    route_fn fn;
} g_routes[] = {
    {"/role", MC_HTTP_ACCESS_PUBLIC, route_role},
    {"/leader", MC_HTTP_ACCESS_PUBLIC, route_leader},
    {"/get_all_segments", MC_HTTP_ACCESS_PUBLIC, route_all_segments},
    {"/get_segments_detail", MC_HTTP_ACCESS_PUBLIC, route_segments_detail},
    {"/query_segment", MC_HTTP_ACCESS_PUBLIC, route_query_segment},
    {"/query_key", MC_HTTP_ACCESS_ADMIN, route_query_key},
    {"/batch_query_keys", MC_HTTP_ACCESS_ADMIN, route_batch_query_keys},
    {"/get_all_keys", MC_HTTP_ACCESS_ADMIN, route_all_keys},
};

enum mc_http_access mc_master_http_route_access(const char *path)
{
    if (!path)
        return MC_HTTP_ACCESS_NONE;
    if (strcmp(path, "/health") == 0 || strcmp(path, "/metrics") == 0)
        return MC_HTTP_ACCESS_PUBLIC;
    for (size_t i = 0; i < sizeof(g_routes) / sizeof(g_routes[0]); i++)
        if (strcmp(path, g_routes[i].path) == 0)
            return g_routes[i].access;
    return MC_HTTP_ACCESS_NONE;
}

static bool admin_allowed(const struct mc_master_http *h, const struct mc_http_request *req)
{
    struct mc_auth_key k;
    const char *a;

    if (!h->admin_key.set)
        return true;
    a = mc_http_request_header(req, "Authorization");
    if (!a || strncmp(a, "Bearer ", 7) != 0)
        return false;
    a += 7;
    if (mc_auth_key_from_token(a, strlen(a), &k) != 0)
        return false;
    return mc_auth_mac_equal(k.k, h->admin_key.k);
}

int mc_master_http_handle(void *arg, const char *path, const struct mc_http_request *req,
                          struct mc_textbuf *body, const char **content_type)
{
    struct mc_master_http *h = arg;
    for (size_t i = 0; i < sizeof(g_routes) / sizeof(g_routes[0]); i++) {
        const struct route *r = &g_routes[i];
        if (strcmp(path, r->path) != 0)
            continue;
        if (r->access == MC_HTTP_ACCESS_ADMIN && !admin_allowed(h, req))
            return json_error(body, content_type, 401, MC_ERR_UNAUTHENTICATED,
                              "admin endpoint: send 'Authorization: Bearer TOKEN' with the "
                              "token of the master's --auth_token_file");
        return r->fn(h, req, body, content_type);
    }
    return 0;
}

int mc_master_http_health(void *arg, struct mc_textbuf *body)
{
    (void)arg;
    mc_textbuf_printf(body, "{\"status\":\"ok\",\"role\":\"leader\",\"ha_state\":\"standalone\","
                            "\"service_ready\":true}");
    return 200;
}
