/*
 * etcd_json.c - request and reply JSON of etcd's v3 gateway (see etcd.h for the quirks).
 *
 * jansson rather than json-c: jansson's json_loadb parses a buffer of known length (the curl
 * reply, not NUL-terminated), reports where a parse failed, and its integers are json_int_t
 * (long long), which holds etcd's int64 fields when a gateway sends them as numbers; json-c would
 * do as well, but needs a NUL-terminated string or its tokener API for the same job.
 */
#include "common/etcd_json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "common/log.h"
#include "mooncake/errors.h"

#define COMP "etcd"

int mc_etcdj_b64enc(const void *in, size_t len, char **out)
{
    *out = NULL;
    if (len > (size_t)1 << 30)
        return MC_ERR_BUFFER_OVERFLOW;
    size_t cap = 4 * ((len + 2) / 3) + 1;
    unsigned char *buf = malloc(cap);
    if (!buf)
        return MC_ERR_INTERNAL_ERROR;
    int n = EVP_EncodeBlock(buf, in, (int)len);
    buf[n] = 0;
    *out = (char *)buf;
    return 0;
}

int mc_etcdj_b64dec(const char *in, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    size_t n = strlen(in);
    if (n % 4 != 0 || n > (size_t)1 << 30)
        return MC_ERR_DESERIALIZE_FAIL;
    unsigned char *buf = malloc(n / 4 * 3 + 1);
    if (!buf)
        return MC_ERR_INTERNAL_ERROR;
    int got = n ? EVP_DecodeBlock(buf, (const unsigned char *)in, (int)n) : 0;
    if (got < 0) {
        free(buf);
        return MC_ERR_DESERIALIZE_FAIL;
    }
    /* EVP_DecodeBlock counts the padding as zero bytes */
    if (n && in[n - 1] == '=')
        got--;
    if (n > 1 && in[n - 2] == '=')
        got--;
    buf[got] = 0;
    *out = (char *)buf;
    *len = (size_t)got;
    return 0;
}

/* An int64/uint64 field: a string of digits (the gateway's way), or a JSON integer. Absent =
 * 0 (the gateway omits zero values). */
static int get_u64(const json_t *obj, const char *name, uint64_t *out)
{
    *out = 0;
    json_t *v = json_object_get(obj, name);
    if (!v)
        return 0;
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return MC_ERR_DESERIALIZE_FAIL;
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (!json_is_string(v))
        return MC_ERR_DESERIALIZE_FAIL;
    const char *s = json_string_value(v);
    if (s[0] < '0' || s[0] > '9')
        return MC_ERR_DESERIALIZE_FAIL;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (*end || errno)
        return MC_ERR_DESERIALIZE_FAIL;
    *out = (uint64_t)x;
    return 0;
}

static int get_i64(const json_t *obj, const char *name, int64_t *out)
{
    *out = 0;
    json_t *v = json_object_get(obj, name);
    if (!v)
        return 0;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 0;
    }
    if (!json_is_string(v))
        return MC_ERR_DESERIALIZE_FAIL;
    const char *s = json_string_value(v);
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!s[0] || *end || errno)
        return MC_ERR_DESERIALIZE_FAIL;
    *out = (int64_t)x;
    return 0;
}

/* An error reply. Unary: {"error":"...","message":"...","code":N}; streaming endpoints:
 * {"error":{"grpc_code":N,"http_code":H,"message":"..."}}. */
static int map_error(const json_t *root)
{
    json_t *err = json_object_get(root, "error");
    if (!err)
        return 0;
    const json_t *holder = json_is_object(err) ? err : root;
    int64_t code = 0;
    if (get_i64(holder, "code", &code) != 0 || code == 0)
        (void)get_i64(holder, "grpc_code", &code);
    const char *msg = json_string_value(json_object_get(holder, "message"));
    if (!msg)
        msg = json_is_string(err) ? json_string_value(err) : "";
    int rc = MC_ERR_RPC_FAIL;
    if (code == 5 && strstr(msg, "lease"))
        rc = MC_ERR_LEASE_EXPIRED;
    else if (strstr(msg, "request is too large") || (code == 8 && strstr(msg, "larger than max")))
        rc = MC_ERR_BUFFER_OVERFLOW;
    /* callers log the states they care about (a lease gone, no quorum) once; a request too
     * large is a bug of the caller's and always said */
    char q[200];
    mc_log_write(rc == MC_ERR_BUFFER_OVERFLOW ? MC_LOG_WARN : MC_LOG_DEBUG, COMP,
                 "etcd refused a request", "code=%lld rc=%s message=%s", (long long)code,
                 mc_strerror(rc), mc_log_quote(msg, q, sizeof(q)));
    return rc;
}

static int load(const char *body, size_t len, json_t **root)
{
    json_error_t jerr;
    *root = json_loadb(body, len, 0, &jerr);
    if (!*root || !json_is_object(*root)) {
        mc_warn(COMP, "reply is not a JSON object", "len=%zu pos=%d", len,
                *root ? 0 : jerr.position);
        json_decref(*root);
        *root = NULL;
        return MC_ERR_DESERIALIZE_FAIL;
    }
    return map_error(*root);
}

static int header_revision(const json_t *obj, uint64_t *revision)
{
    uint64_t rev = 0;
    json_t *h = json_object_get(obj, "header");
    if (h && get_u64(h, "revision", &rev) != 0)
        return MC_ERR_DESERIALIZE_FAIL;
    if (revision)
        *revision = rev;
    return 0;
}

static int parse_kv(const json_t *o, struct mc_etcd_kv *kv)
{
    memset(kv, 0, sizeof(*kv));
    if (!json_is_object(o))
        return MC_ERR_DESERIALIZE_FAIL;
    const char *k = json_string_value(json_object_get(o, "key"));
    const char *v = json_string_value(json_object_get(o, "value"));
    size_t klen;
    int rc = MC_ERR_DESERIALIZE_FAIL;
    if (!k || mc_etcdj_b64dec(k, &kv->key, &klen) != 0)
        goto out;
    if (strlen(kv->key) != klen) /* a key with a NUL byte is not one of ours */
        goto out;
    if (mc_etcdj_b64dec(v ? v : "", &kv->value, &kv->value_len) != 0)
        goto out;
    if (get_u64(o, "create_revision", &kv->create_revision) ||
        get_u64(o, "mod_revision", &kv->mod_revision) || get_u64(o, "version", &kv->version) ||
        get_u64(o, "lease", &kv->lease))
        goto out;
    rc = 0;
out:
    if (rc)
        mc_etcd_kv_clear(kv);
    return rc;
}

int mc_etcdj_parse_status(const char *body, size_t len, uint64_t *revision)
{
    json_t *root;
    int rc = load(body, len, &root);
    if (rc == 0)
        rc = header_revision(root, revision);
    json_decref(root);
    return rc;
}

static int range_from(const json_t *o, struct mc_etcd_kv *kv, bool *found)
{
    *found = false;
    json_t *kvs = json_object_get(o, "kvs");
    if (!kvs || json_array_size(kvs) == 0)
        return kvs && !json_is_array(kvs) ? MC_ERR_DESERIALIZE_FAIL : 0;
    int rc = parse_kv(json_array_get(kvs, 0), kv);
    *found = rc == 0;
    return rc;
}

int mc_etcdj_parse_range(const char *body, size_t len, struct mc_etcd_kv *kv, bool *found,
                         uint64_t *revision)
{
    json_t *root;
    *found = false;
    int rc = load(body, len, &root);
    if (rc == 0)
        rc = header_revision(root, revision);
    if (rc == 0)
        rc = range_from(root, kv, found);
    json_decref(root);
    return rc;
}

int mc_etcdj_parse_range_each(const char *body, size_t len,
                              int (*cb)(void *arg, const struct mc_etcd_kv *kv), void *arg)
{
    json_t *root;
    int rc = load(body, len, &root);
    if (rc)
        goto out;
    json_t *kvs = json_object_get(root, "kvs");
    if (kvs && !json_is_array(kvs)) {
        rc = MC_ERR_DESERIALIZE_FAIL;
        goto out;
    }
    for (size_t i = 0; rc == 0 && i < json_array_size(kvs); i++) {
        struct mc_etcd_kv kv;
        rc = parse_kv(json_array_get(kvs, i), &kv);
        if (rc == 0)
            rc = cb(arg, &kv);
        mc_etcd_kv_clear(&kv);
    }
out:
    json_decref(root);
    return rc;
}

int mc_etcdj_parse_txn(const char *body, size_t len, bool *succeeded, uint64_t *revision,
                       struct mc_etcd_kv *kv)
{
    json_t *root;
    *succeeded = false;
    if (kv)
        memset(kv, 0, sizeof(*kv));
    int rc = load(body, len, &root);
    if (rc == 0)
        rc = header_revision(root, revision);
    if (rc)
        goto out;
    json_t *s = json_object_get(root, "succeeded"); /* omitted when false */
    if (s && !json_is_boolean(s)) {
        rc = MC_ERR_DESERIALIZE_FAIL;
        goto out;
    }
    *succeeded = s && json_is_true(s);
    json_t *resps = json_object_get(root, "responses");
    for (size_t i = 0; kv && i < json_array_size(resps); i++) {
        json_t *rr = json_object_get(json_array_get(resps, i), "response_range");
        if (!rr)
            continue;
        bool found;
        rc = range_from(rr, kv, &found);
        break;
    }
out:
    json_decref(root);
    return rc;
}

int mc_etcdj_parse_member_status(const char *body, size_t len, uint64_t *member_id,
                                 uint64_t *leader_id)
{
    json_t *root;
    *member_id = *leader_id = 0;
    int rc = load(body, len, &root);
    if (rc == 0 && (get_u64(json_object_get(root, "header"), "member_id", member_id) ||
                    get_u64(root, "leader", leader_id)))
        rc = MC_ERR_DESERIALIZE_FAIL;
    json_decref(root);
    return rc;
}

int mc_etcdj_parse_grant(const char *body, size_t len, uint64_t *id, int64_t *ttl)
{
    json_t *root;
    int rc = load(body, len, &root);
    if (rc == 0 && (get_u64(root, "ID", id) || get_i64(root, "TTL", ttl)))
        rc = MC_ERR_DESERIALIZE_FAIL;
    if (rc == 0 && *id == 0)
        rc = MC_ERR_DESERIALIZE_FAIL;
    json_decref(root);
    return rc;
}

int mc_etcdj_parse_keepalive(const char *body, size_t len, int64_t *ttl)
{
    json_t *root;
    *ttl = 0;
    int rc = load(body, len, &root);
    if (rc)
        goto out;
    json_t *res = json_object_get(root, "result");
    if (!json_is_object(res) || get_i64(res, "TTL", ttl) != 0)
        rc = MC_ERR_DESERIALIZE_FAIL;
out:
    json_decref(root);
    return rc;
}

int mc_etcdj_parse_watch(const char *msg, size_t len, struct mc_etcd_watch_result *r, int *dropped)
{
    json_t *root;
    int rc = load(msg, len, &root);
    if (rc)
        goto out;
    json_t *res = json_object_get(root, "result");
    if (!json_is_object(res)) {
        rc = MC_ERR_DESERIALIZE_FAIL;
        goto out;
    }
    if (header_revision(res, &r->revision) != 0 ||
        get_u64(res, "compact_revision", &r->compact_revision) != 0) {
        rc = MC_ERR_DESERIALIZE_FAIL;
        goto out;
    }
    if (json_is_true(json_object_get(res, "created")))
        r->created = true;
    if (json_is_true(json_object_get(res, "canceled")))
        r->canceled = true;
    json_t *evs = json_object_get(res, "events");
    for (size_t i = 0; i < json_array_size(evs); i++) {
        json_t *ev = json_array_get(evs, i);
        const char *type = json_string_value(json_object_get(ev, "type"));
        struct mc_etcd_event e = {.type = MC_ETCD_EV_PUT};
        if (type && strcmp(type, "DELETE") == 0)
            e.type = MC_ETCD_EV_DELETE;
        else if (type && strcmp(type, "PUT") != 0) {
            rc = MC_ERR_DESERIALIZE_FAIL;
            goto out;
        }
        rc = parse_kv(json_object_get(ev, "kv"), &e.kv);
        if (rc)
            goto out;
        int cap = (int)(sizeof(r->events) / sizeof(r->events[0]));
        if (r->nevents == cap) { /* keep the newest: drop the oldest */
            mc_etcd_kv_clear(&r->events[0].kv);
            memmove(&r->events[0], &r->events[1], sizeof(r->events[0]) * (size_t)(cap - 1));
            r->nevents--;
            (*dropped)++;
        }
        r->events[r->nevents++] = e;
    }
out:
    json_decref(root);
    return rc;
}
