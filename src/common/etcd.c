/*
 * etcd.c - the etcd v3 gateway client: endpoints, libcurl transport, the calls of etcd.h.
 * Request bodies are built with jansson here; replies are read by etcd_json.c.
 */
#include "common/etcd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/etcd_json.h"
#include "common/log.h"
#include "mooncake/errors.h"

#define COMP "etcd"
#define MAX_REPLY (4u << 20) /* etcd replies here are small; a larger one is not the gateway */

struct buf {
    char *p;
    size_t len, cap;
    bool overflow;
};

struct mc_etcd {
    char *url[MC_ETCD_MAX_ENDPOINTS]; /* "http://h:p" */
    int n, cur;
    char *ca, *cert, *key;
    long connect_timeout_ms, timeout_ms;
    CURL *easy;
};

struct mc_etcd_watch {
    struct mc_etcd *e;
    CURLM *multi;
    CURL *easy;
    char *body;
    struct buf in;
    bool done;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
    struct buf *b = arg;
    size_t n = size * nmemb;
    if (b->len + n + 1 > MAX_REPLY) {
        b->overflow = true;
        return 0; /* makes curl fail the transfer */
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, ptr, n);
    b->len += n;
    b->p[b->len] = 0;
    return n;
}

void mc_etcd_kv_clear(struct mc_etcd_kv *kv)
{
    free(kv->key);
    free(kv->value);
    memset(kv, 0, sizeof(*kv));
}

void mc_etcd_watch_result_clear(struct mc_etcd_watch_result *r)
{
    for (int i = 0; i < r->nevents; i++)
        mc_etcd_kv_clear(&r->events[i].kv);
    memset(r, 0, sizeof(*r));
}

static char *dup_or_null(const char *s)
{
    return s && s[0] ? strdup(s) : NULL;
}

static int add_endpoint(struct mc_etcd *e, const char *tok, size_t len, bool tls)
{
    while (len && (tok[0] == ' ' || tok[0] == '\t'))
        tok++, len--;
    while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t' || tok[len - 1] == '/'))
        len--;
    if (len == 0)
        return 0;
    const char *scheme = tls ? "https://" : "http://";
    if (len > 7 && strncmp(tok, "http://", 7) == 0)
        tok += 7, len -= 7, scheme = "http://";
    else if (len > 8 && strncmp(tok, "https://", 8) == 0)
        tok += 8, len -= 8, scheme = "https://";
    const char *colon = memchr(tok, ':', len);
    if (!colon || colon == tok || colon == tok + len - 1 || len > 255 ||
        memchr(tok, '/', len) != NULL) {
        mc_error(COMP, "bad etcd endpoint (want host:port)", "entry=%.*s",
                 (int)(len > 80 ? 80 : len), tok);
        return MC_ERR_INVALID_PARAMS;
    }
    for (const char *p = colon + 1; p < tok + len; p++)
        if (*p < '0' || *p > '9') {
            mc_error(COMP, "bad etcd endpoint port", "entry=%.*s", (int)len, tok);
            return MC_ERR_INVALID_PARAMS;
        }
    if (e->n == MC_ETCD_MAX_ENDPOINTS) {
        mc_error(COMP, "too many etcd endpoints", "max=%d", MC_ETCD_MAX_ENDPOINTS);
        return MC_ERR_INVALID_PARAMS;
    }
    size_t cap = strlen(scheme) + len + 1;
    char *u = malloc(cap);
    if (!u)
        return MC_ERR_INTERNAL_ERROR;
    snprintf(u, cap, "%s%.*s", scheme, (int)len, tok);
    e->url[e->n++] = u;
    return 0;
}

int mc_etcd_new(const struct mc_etcd_config *cfg, struct mc_etcd **out)
{
    *out = NULL;
    static bool curl_ready; /* curl_global_init is not thread-safe before 7.84; call it early */
    if (!curl_ready) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        curl_ready = true;
    }
    if (!cfg || !cfg->endpoints)
        return MC_ERR_INVALID_PARAMS;
    struct mc_etcd *e = calloc(1, sizeof(*e));
    if (!e)
        return MC_ERR_INTERNAL_ERROR;
    bool tls = cfg->ca_file && cfg->ca_file[0];
    int rc = 0;
    const char *p = cfg->endpoints;
    while (rc == 0) {
        size_t n = strcspn(p, ";,");
        rc = add_endpoint(e, p, n, tls);
        if (!p[n])
            break;
        p += n + 1;
    }
    if (rc == 0 && e->n == 0) {
        mc_error(COMP, "no etcd endpoint given", "endpoints=\"%s\"", cfg->endpoints);
        rc = MC_ERR_INVALID_PARAMS;
    }
    e->ca = dup_or_null(cfg->ca_file);
    e->cert = dup_or_null(cfg->cert_file);
    e->key = dup_or_null(cfg->key_file);
    e->connect_timeout_ms = cfg->connect_timeout_ms ? cfg->connect_timeout_ms : 500;
    e->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 2000;
    if (rc == 0 && !(e->easy = curl_easy_init()))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc) {
        mc_etcd_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

void mc_etcd_free(struct mc_etcd *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->n; i++)
        free(e->url[i]);
    free(e->ca);
    free(e->cert);
    free(e->key);
    if (e->easy)
        curl_easy_cleanup(e->easy);
    free(e);
}

int mc_etcd_endpoint_count(const struct mc_etcd *e)
{
    return e->n;
}

const char *mc_etcd_endpoint(const struct mc_etcd *e)
{
    return e->url[e->cur];
}

static void set_common(struct mc_etcd *e, CURL *h, const char *url, const char *body)
{
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, e->connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    if (e->ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, e->ca);
    if (e->cert)
        curl_easy_setopt(h, CURLOPT_SSLCERT, e->cert);
    if (e->key)
        curl_easy_setopt(h, CURLOPT_SSLKEY, e->key);
}

static bool retry_elsewhere(CURLcode c)
{
    return c == CURLE_COULDNT_CONNECT || c == CURLE_COULDNT_RESOLVE_HOST ||
           c == CURLE_OPERATION_TIMEDOUT || c == CURLE_SEND_ERROR || c == CURLE_RECV_ERROR ||
           c == CURLE_GOT_NOTHING || c == CURLE_SSL_CONNECT_ERROR;
}

/* POSTs req (consumed) to path; the reply body goes to *b (caller frees b->p). */
static int post(struct mc_etcd *e, const char *path, json_t *req, struct buf *b)
{
    memset(b, 0, sizeof(*b));
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!body)
        return MC_ERR_INTERNAL_ERROR;
    int rc = MC_ERR_RPC_FAIL;
    for (int tries = 0; tries < e->n; tries++) {
        char url[320];
        snprintf(url, sizeof(url), "%s%s", e->url[e->cur], path);
        curl_easy_reset(e->easy);
        set_common(e, e->easy, url, body);
        curl_easy_setopt(e->easy, CURLOPT_TIMEOUT_MS, e->timeout_ms);
        curl_easy_setopt(e->easy, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(e->easy, CURLOPT_WRITEDATA, b);
        b->len = 0;
        b->overflow = false;
        CURLcode c = curl_easy_perform(e->easy);
        if (c == CURLE_OK) {
            rc = 0;
            break;
        }
        if (b->overflow) {
            mc_warn(COMP, "etcd reply too large", "url=%s", url);
            rc = MC_ERR_BUFFER_OVERFLOW;
            break;
        }
        rc = c == CURLE_OPERATION_TIMEDOUT ? MC_ERR_RPC_TIMEOUT : MC_ERR_RPC_FAIL;
        /* debug: callers say once that etcd is unreachable (a retry loop would flood) */
        mc_debug(COMP, "etcd endpoint failed", "url=%s err=\"%s\"", url, curl_easy_strerror(c));
        if (!retry_elsewhere(c))
            break;
        e->cur = (e->cur + 1) % e->n;
    }
    free(body);
    if (rc == 0 && !b->p)
        rc = MC_ERR_DESERIALIZE_FAIL; /* empty reply: not the gateway */
    if (rc) {
        free(b->p);
        b->p = NULL;
    }
    return rc;
}

/* json string of the base64 of s[0..len). */
static json_t *b64(const void *s, size_t len)
{
    char *enc;
    if (mc_etcdj_b64enc(s, len, &enc) != 0)
        return NULL;
    json_t *j = json_string(enc);
    free(enc);
    return j;
}

static json_t *u64s(uint64_t v)
{
    char s[24];
    snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
    return json_string(s);
}

int mc_etcd_get(struct mc_etcd *e, const char *key, struct mc_etcd_kv *kv, bool *found,
                uint64_t *revision)
{
    memset(kv, 0, sizeof(*kv));
    *found = false;
    struct buf b;
    int rc = post(e, "/v3/kv/range", json_pack("{so}", "key", b64(key, strlen(key))), &b);
    if (rc == 0)
        rc = mc_etcdj_parse_range(b.p, b.len, kv, found, revision);
    free(b.p);
    return rc;
}

int mc_etcd_get_prefix(struct mc_etcd *e, const char *prefix,
                       int (*cb)(void *arg, const struct mc_etcd_kv *kv), void *arg)
{
    size_t n = strlen(prefix);
    if (n == 0 || n > 1024 || (unsigned char)prefix[n - 1] == 0xff)
        return MC_ERR_INVALID_PARAMS;
    char end[1025];
    memcpy(end, prefix, n);
    end[n - 1] = (char)((unsigned char)end[n - 1] + 1); /* the first key past the prefix */
    struct buf b;
    int rc = post(e, "/v3/kv/range",
                  json_pack("{soso}", "key", b64(prefix, n), "range_end", b64(end, n)), &b);
    if (rc == 0)
        rc = mc_etcdj_parse_range_each(b.p, b.len, cb, arg);
    free(b.p);
    return rc;
}

static json_t *put_req(const char *key, const void *val, size_t len, uint64_t lease)
{
    json_t *r = json_pack("{soso}", "key", b64(key, strlen(key)), "value", b64(val, len));
    if (r && lease)
        json_object_set_new(r, "lease", u64s(lease));
    return r;
}

int mc_etcd_put(struct mc_etcd *e, const char *key, const void *val, size_t len, uint64_t lease)
{
    struct buf b;
    int rc = post(e, "/v3/kv/put", put_req(key, val, len, lease), &b);
    if (rc == 0)
        rc = mc_etcdj_parse_status(b.p, b.len, NULL);
    free(b.p);
    return rc;
}

int mc_etcd_delete(struct mc_etcd *e, const char *key)
{
    struct buf b;
    int rc = post(e, "/v3/kv/deleterange", json_pack("{so}", "key", b64(key, strlen(key))), &b);
    if (rc == 0)
        rc = mc_etcdj_parse_status(b.p, b.len, NULL);
    free(b.p);
    return rc;
}

int mc_etcd_create_if_absent(struct mc_etcd *e, const char *key, const void *val, size_t len,
                             uint64_t lease, bool *created, uint64_t *revision,
                             struct mc_etcd_kv *kv)
{
    *created = false;
    *revision = 0;
    memset(kv, 0, sizeof(*kv));
    json_t *req = json_pack(
        "{s[{sossssso}]s[{so}]s[{s{so}}]}", "compare", "key", b64(key, strlen(key)), "target",
        "CREATE", "result", "EQUAL", "create_revision", u64s(0), "success", "request_put",
        put_req(key, val, len, lease), "failure", "request_range", "key", b64(key, strlen(key)));
    struct buf b;
    int rc = post(e, "/v3/kv/txn", req, &b);
    if (rc == 0)
        rc = mc_etcdj_parse_txn(b.p, b.len, created, revision, kv);
    free(b.p);
    if (rc == 0 && !*created && lease && kv->key && kv->lease == lease) {
        /* our own earlier attempt went through (its reply was lost and we retried) */
        *created = true;
        *revision = kv->create_revision;
        mc_etcd_kv_clear(kv);
    }
    return rc;
}

int mc_etcd_put_guarded(struct mc_etcd *e, const char *guard_key, uint64_t guard_rev,
                        const char *key, const void *val, size_t len, bool *ok)
{
    *ok = false;
    json_t *req =
        json_pack("{s[{sossssso}]s[{so}]}", "compare", "key", b64(guard_key, strlen(guard_key)),
                  "target", "CREATE", "result", "EQUAL", "create_revision", u64s(guard_rev),
                  "success", "request_put", put_req(key, val, len, 0));
    struct buf b;
    uint64_t rev;
    int rc = post(e, "/v3/kv/txn", req, &b);
    if (rc == 0)
        rc = mc_etcdj_parse_txn(b.p, b.len, ok, &rev, NULL);
    free(b.p);
    return rc;
}

int mc_etcd_status(struct mc_etcd *e, uint64_t *member_id, uint64_t *leader_id)
{
    struct buf b;
    int rc = post(e, "/v3/maintenance/status", json_object(), &b);
    if (rc == 0)
        rc = mc_etcdj_parse_member_status(b.p, b.len, member_id, leader_id);
    free(b.p);
    return rc;
}

int mc_etcd_compact(struct mc_etcd *e, uint64_t revision)
{
    struct buf b;
    int rc = post(e, "/v3/kv/compaction", json_pack("{so}", "revision", u64s(revision)), &b);
    if (rc == 0)
        rc = mc_etcdj_parse_status(b.p, b.len, NULL);
    free(b.p);
    return rc;
}

int mc_etcd_lease_grant(struct mc_etcd *e, int64_t ttl_s, uint64_t *id, int64_t *ttl_s_out)
{
    struct buf b;
    *id = 0;
    int64_t ttl = 0;
    int rc = post(e, "/v3/lease/grant", json_pack("{sI}", "TTL", (json_int_t)ttl_s), &b);
    if (rc == 0)
        rc = mc_etcdj_parse_grant(b.p, b.len, id, &ttl);
    free(b.p);
    if (ttl_s_out)
        *ttl_s_out = ttl;
    return rc;
}

int mc_etcd_lease_keepalive(struct mc_etcd *e, uint64_t id, int64_t *ttl_s)
{
    struct buf b;
    *ttl_s = 0;
    int rc = post(e, "/v3/lease/keepalive", json_pack("{so}", "ID", u64s(id)), &b);
    if (rc == 0)
        rc = mc_etcdj_parse_keepalive(b.p, b.len, ttl_s);
    free(b.p);
    return rc;
}

int mc_etcd_lease_revoke(struct mc_etcd *e, uint64_t id)
{
    struct buf b;
    int rc = post(e, "/v3/lease/revoke", json_pack("{so}", "ID", u64s(id)), &b);
    if (rc == 0)
        rc = mc_etcdj_parse_status(b.p, b.len, NULL);
    free(b.p);
    return rc;
}

/* ---- watch -------------------------------------------------------------------------------- */

int mc_etcd_watch_new(struct mc_etcd *e, const char *key, uint64_t start_revision,
                      struct mc_etcd_watch **out)
{
    *out = NULL;
    struct mc_etcd_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return MC_ERR_INTERNAL_ERROR;
    w->e = e;
    json_t *cr = json_pack("{so}", "key", b64(key, strlen(key)));
    if (cr && start_revision)
        json_object_set_new(cr, "start_revision", u64s(start_revision));
    json_t *req = json_pack("{so}", "create_request", cr);
    w->body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    w->multi = curl_multi_init();
    w->easy = curl_easy_init();
    if (!w->body || !w->multi || !w->easy) {
        mc_etcd_watch_free(w);
        return MC_ERR_INTERNAL_ERROR;
    }
    char url[320];
    snprintf(url, sizeof(url), "%s/v3/watch", e->url[e->cur]);
    set_common(e, w->easy, url, w->body);
    curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, &w->in);
    curl_easy_setopt(w->easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(w->easy, CURLOPT_TCP_KEEPIDLE, 1L);
    curl_easy_setopt(w->easy, CURLOPT_TCP_KEEPINTVL, 1L);
    curl_multi_add_handle(w->multi, w->easy);
    *out = w;
    return 0;
}

void mc_etcd_watch_free(struct mc_etcd_watch *w)
{
    if (!w)
        return;
    if (w->multi && w->easy)
        curl_multi_remove_handle(w->multi, w->easy);
    if (w->easy)
        curl_easy_cleanup(w->easy);
    if (w->multi)
        curl_multi_cleanup(w->multi);
    free(w->body);
    free(w->in.p);
    free(w);
}

/* Parses the complete (newline-terminated) messages in the input buffer. */
static int drain_lines(struct mc_etcd_watch *w, struct mc_etcd_watch_result *r)
{
    size_t off = 0;
    int rc = 0, dropped = 0;
    while (off < w->in.len) {
        char *nl = memchr(w->in.p + off, '\n', w->in.len - off);
        if (!nl)
            break;
        size_t n = (size_t)(nl - (w->in.p + off));
        if (n > 0 && (rc = mc_etcdj_parse_watch(w->in.p + off, n, r, &dropped)) != 0)
            break;
        off += n + 1;
    }
    if (!w->in.p)
        return rc; /* nothing received yet */
    memmove(w->in.p, w->in.p + off, w->in.len - off);
    w->in.len -= off;
    w->in.p[w->in.len] = 0;
    if (dropped)
        mc_warn(COMP, "watch events past the batch were dropped (older ones)", "dropped=%d",
                dropped);
    return rc;
}

int mc_etcd_watch_poll(struct mc_etcd_watch *w, int timeout_ms, struct mc_etcd_watch_result *r)
{
    memset(r, 0, sizeof(*r));
    if (w->done) {
        r->closed = true;
        return 0;
    }
    int running = 0;
    curl_multi_perform(w->multi, &running);
    if (running && w->in.len == 0) {
        curl_multi_poll(w->multi, NULL, 0, timeout_ms, NULL);
        curl_multi_perform(w->multi, &running);
    }
    int q;
    CURLMsg *m;
    while ((m = curl_multi_info_read(w->multi, &q)) != NULL) {
        if (m->msg == CURLMSG_DONE) {
            w->done = true;
            if (m->data.result != CURLE_OK) {
                mc_debug(COMP, "etcd watch stream failed", "url=%s err=\"%s\"",
                         w->e->url[w->e->cur], curl_easy_strerror(m->data.result));
                if (retry_elsewhere(m->data.result)) /* the next watch tries the next one */
                    w->e->cur = (w->e->cur + 1) % w->e->n;
            }
        }
    }
    int rc = drain_lines(w, r);
    if (w->done && !r->nevents)
        r->closed = true;
    return rc;
}
