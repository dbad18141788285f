/*
 * ha.c - leader election and fencing on etcd (see ha.h). One HA thread: campaign, then lead
 * (keepalives, watch of its own key) or follow (watch of the leader's key), again and again.
 */
#include "master/ha.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/etcd.h"
#include "common/log.h"
#include "common/metrics.h"
#include "master/fence.h"
#include "master/ha_fence.h"
#include "mooncake/errors.h"

#define COMP "ha"
#define POLL_MS 50     /* longest wait of the HA thread: stop and hand-over latency */
#define RETRY_MS 200   /* etcd unreachable: try again this soon */
#define REREAD_MS 3000 /* a standby re-reads the key this often even if the watch is quiet */

struct mc_ha {
    struct mc_ha_config cfg;
    char *endpoints, *cluster_id, *advertise, *ca, *cert, *key_file;
    char key[160];
    uint32_t ttl_s, margin_ms;
    struct mc_etcd *etcd;     /* the HA thread's */
    struct mc_etcd *put_etcd; /* mc_ha_put_fenced's, under put_mu */
    pthread_mutex_t put_mu;
    pthread_t th;
    bool started;
    _Atomic bool stop;
    /* published state */
    _Atomic bool leader;
    _Atomic uint64_t serve_until_ms; /* monotonic; the gate is open before it */
    _Atomic uint64_t epoch;
    pthread_mutex_t view_mu;
    char leader_addr[256];
    /* the HA thread's */
    uint64_t lease;
    bool lost;
    struct mc_fences *fences; /* the delete rule's fences, kept in etcd (ha_fence.h); may be NULL */
};

void mc_ha_set_fences(struct mc_ha *ha, struct mc_fences *f)
{
    ha->fences = f;
    if (f)
        mc_fences_require_durable(f); /* Removes wait for the record in etcd */
}

int mc_ha_leader_key(const char *cluster_id, char *buf, size_t cap)
{
    size_t n = strlen(cluster_id);
    if (n == 0 || n > 64)
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++) {
        char c = cluster_id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return MC_ERR_INVALID_PARAMS;
    }
    int w = snprintf(buf, cap, "/mooncake-c/%s/leader", cluster_id);
    return w > 0 && (size_t)w < cap ? 0 : MC_ERR_INVALID_PARAMS;
}

static char *dup0(const char *s)
{
    return strdup(s ? s : "");
}

int mc_ha_new(const struct mc_ha_config *cfg, struct mc_ha **out)
{
    *out = NULL;
    if (!cfg->endpoints || !cfg->endpoints[0]) {
        mc_error(COMP, "HA needs etcd endpoints (--etcd_endpoints)", "%s", "");
        return MC_ERR_INVALID_PARAMS;
    }
    if (!cfg->cluster_id || mc_ha_leader_key(cfg->cluster_id, (char[160]){0}, 160) != 0) {
        mc_error(COMP, "bad --cluster_id: 1..64 characters of [A-Za-z0-9._-]", "cluster_id=%s",
                 cfg->cluster_id ? cfg->cluster_id : "");
        return MC_ERR_INVALID_PARAMS;
    }
    uint32_t ttl = cfg->lease_ttl_s ? cfg->lease_ttl_s : 3;
    if (ttl > 60) {
        mc_error(COMP, "--ha_lease_ttl_sec must be in 1..60", "ttl=%u", ttl);
        return MC_ERR_INVALID_PARAMS;
    }
    struct mc_ha *ha = calloc(1, sizeof(*ha));
    if (!ha)
        return MC_ERR_INTERNAL_ERROR;
    ha->cfg = *cfg;
    ha->endpoints = dup0(cfg->endpoints);
    ha->cluster_id = dup0(cfg->cluster_id);
    ha->ca = dup0(cfg->ca_file);
    ha->cert = dup0(cfg->cert_file);
    ha->key_file = dup0(cfg->key_file);
    ha->ttl_s = ttl;
    ha->margin_ms = cfg->margin_ms ? cfg->margin_ms : (ttl * 1000 / 4 < 500 ? ttl * 1000 / 4 : 500);
    mc_ha_leader_key(ha->cluster_id, ha->key, sizeof(ha->key));
    pthread_mutex_init(&ha->put_mu, NULL);
    pthread_mutex_init(&ha->view_mu, NULL);
    struct mc_etcd_config ec = {.endpoints = ha->endpoints,
                                .ca_file = ha->ca,
                                .cert_file = ha->cert,
                                .key_file = ha->key_file,
                                .connect_timeout_ms = 500,
                                /* a keepalive must come back well inside the lease */
                                .timeout_ms = ttl * 1000 / 3 < 2000 ? ttl * 1000 / 3 : 2000};
    int rc = mc_etcd_new(&ec, &ha->etcd);
    if (rc == 0)
        rc = mc_etcd_new(&ec, &ha->put_etcd);
    if (rc) {
        mc_ha_free(ha);
        return rc;
    }
    *out = ha;
    return 0;
}

/* ---- published state ---------------------------------------------------------------------- */

static void set_view(struct mc_ha *ha, const char *addr, size_t len, uint64_t epoch)
{
    pthread_mutex_lock(&ha->view_mu);
    if (len >= sizeof(ha->leader_addr))
        len = sizeof(ha->leader_addr) - 1;
    memcpy(ha->leader_addr, addr, len);
    ha->leader_addr[len] = 0;
    pthread_mutex_unlock(&ha->view_mu);
    atomic_store(&ha->epoch, epoch);
}

int mc_ha_gate(const struct mc_ha *ha)
{
    if (!ha)
        return 0;
    if (!atomic_load_explicit(&ha->leader, memory_order_acquire))
        return MC_ERR_NOT_LEADER;
    return mc_now_ms() < atomic_load_explicit(&ha->serve_until_ms, memory_order_acquire)
               ? 0
               : MC_ERR_NOT_LEADER;
}

void mc_ha_view(const struct mc_ha *ha, struct mc_ha_view *v)
{
    struct mc_ha *h = (struct mc_ha *)ha;
    memset(v, 0, sizeof(*v));
    v->leader = atomic_load(&h->leader);
    pthread_mutex_lock(&h->view_mu);
    memcpy(v->leader_addr, h->leader_addr, sizeof(v->leader_addr));
    pthread_mutex_unlock(&h->view_mu);
    v->epoch = atomic_load(&h->epoch);
}

int mc_ha_http_role(const struct mc_ha *ha, struct mc_textbuf *body)
{
    mc_textbuf_printf(body, "%s\n", mc_ha_gate(ha) == 0 ? "leader" : "standby");
    return 200;
}

int mc_ha_http_health(const struct mc_ha *ha, struct mc_textbuf *body)
{
    struct mc_ha_view v;
    mc_ha_view(ha, &v);
    bool serving = mc_ha_gate(ha) == 0;
    /* a leader whose gate is closed (etcd unreachable, past its lease) is "fenced" */
    const char *state = serving ? "leader" : v.leader ? "fenced" : "standby";
    mc_textbuf_printf(body,
                      "{\"status\":\"ok\",\"role\":\"%s\",\"ha_state\":\"%s\","
                      "\"service_ready\":%s,\"epoch\":%llu}",
                      serving ? "leader" : "standby", state, serving ? "true" : "false",
                      (unsigned long long)v.epoch);
    return 200;
}

int mc_ha_http_leader(const struct mc_ha *ha, struct mc_textbuf *body)
{
    struct mc_ha_view v;
    mc_ha_view(ha, &v);
    if (!v.leader_addr[0]) {
        mc_textbuf_printf(body, "unknown\n");
        return 503;
    }
    mc_textbuf_printf(body, "%s\n", v.leader_addr);
    return 200;
}

int mc_ha_put_fenced(struct mc_ha *ha, const char *key, const void *val, size_t len)
{
    if (mc_ha_gate(ha) != 0)
        return MC_ERR_NOT_LEADER;
    bool ok = false;
    pthread_mutex_lock(&ha->put_mu);
    int rc =
        mc_etcd_put_guarded(ha->put_etcd, ha->key, atomic_load(&ha->epoch), key, val, len, &ok);
    pthread_mutex_unlock(&ha->put_mu);
    if (rc == 0 && !ok)
        rc = MC_ERR_NOT_LEADER;
    return rc;
}

/* ---- the HA thread ------------------------------------------------------------------------ */

static void nap(struct mc_ha *ha, uint64_t ms)
{
    uint64_t end = mc_now_ms() + ms;
    while (!atomic_load(&ha->stop) && mc_now_ms() < end) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void lose(struct mc_ha *ha, const char *why)
{
    atomic_store_explicit(&ha->serve_until_ms, 0, memory_order_release);
    atomic_store_explicit(&ha->leader, false, memory_order_release);
    ha->lost = true;
    mc_error(COMP, "leadership lost", "why=%s epoch=%llu", why,
             (unsigned long long)atomic_load(&ha->epoch));
    if (ha->cfg.on_lost)
        ha->cfg.on_lost(ha->cfg.cb_arg, why);
}

enum campaign_result { WON, LOST_ELECTION, ETCD_DOWN };

/* Grants a lease and tries to create the key. On LOST_ELECTION *rev is the store revision the
 * leader's key was read at (watch from rev + 1). */
static enum campaign_result campaign(struct mc_ha *ha, uint64_t *rev)
{
    uint64_t t0 = mc_now_ms();
    int64_t ttl = 0;
    if (!ha->lease && mc_etcd_lease_grant(ha->etcd, ha->ttl_s, &ha->lease, &ttl) != 0)
        return ETCD_DOWN;
    if (ttl == 0)
        ttl = ha->ttl_s;
    bool created = false;
    struct mc_etcd_kv kv;
    int rc = mc_etcd_create_if_absent(ha->etcd, ha->key, ha->advertise, strlen(ha->advertise),
                                      ha->lease, &created, rev, &kv);
    if (rc == MC_ERR_LEASE_EXPIRED) {
        ha->lease = 0;
        return ETCD_DOWN;
    }
    if (rc != 0)
        return ETCD_DOWN;
    if (!created) {
        if (kv.key)
            set_view(ha, kv.value, kv.value_len, kv.create_revision);
        else
            set_view(ha, "", 0, 0);
        bool absent = kv.key == NULL;
        mc_etcd_kv_clear(&kv);
        /* a new lease for the next campaign: this one would lapse unrenewed meanwhile */
        (void)mc_etcd_lease_revoke(ha->etcd, ha->lease);
        ha->lease = 0;
        return absent ? ETCD_DOWN : LOST_ELECTION; /* vanished in between: campaign again */
    }
    uint64_t epoch = *rev;
    size_t nf = 0;
    if (ha->fences && (rc = mc_ha_fences_load(ha->etcd, ha->cluster_id, ha->fences, &nf)) != 0) {
        /* serving without the fences could accept a fenced holder's stale copies */
        mc_warn(COMP, "won, but cannot load the fence records: resigning to try again", "rc=%s",
                mc_strerror(rc));
        (void)mc_etcd_lease_revoke(ha->etcd, ha->lease);
        ha->lease = 0;
        return ETCD_DOWN;
    }
    if (nf)
        mc_info(COMP, "fence records loaded", "count=%zu", nf);
    set_view(ha, ha->advertise, strlen(ha->advertise), epoch);
    if (ha->cfg.on_leader)
        ha->cfg.on_leader(ha->cfg.cb_arg, epoch);
    atomic_store_explicit(&ha->serve_until_ms, t0 + (uint64_t)ttl * 1000 - ha->margin_ms,
                          memory_order_release);
    atomic_store_explicit(&ha->leader, true, memory_order_release);
    mc_info(COMP, "elected leader", "key=%s epoch=%llu lease_ttl_s=%lld addr=%s", ha->key,
            (unsigned long long)epoch, (long long)ttl, ha->advertise);
    return WON;
}

/* Drains a watch poll into what the caller needs: deleted, or a PUT's view. */
struct watch_seen {
    bool deleted, other_leader, broken;
    uint64_t last_rev;
};

static void watch_step(struct mc_ha *ha, struct mc_etcd_watch *w, int timeout_ms,
                       struct watch_seen *s)
{
    struct mc_etcd_watch_result r;
    if (mc_etcd_watch_poll(w, timeout_ms, &r) != 0) {
        s->broken = true;
        return;
    }
    for (int i = 0; i < r.nevents; i++) {
        struct mc_etcd_event *e = &r.events[i];
        s->last_rev = e->kv.mod_revision;
        if (e->type == MC_ETCD_EV_DELETE) {
            s->deleted = true;
            continue;
        }
        s->deleted = false;
        if (e->kv.create_revision != atomic_load(&ha->epoch))
            s->other_leader = true;
        set_view(ha, e->kv.value, e->kv.value_len, e->kv.create_revision);
    }
    if (r.canceled || r.closed)
        s->broken = true;
    mc_etcd_watch_result_clear(&r);
}

static void lead(struct mc_ha *ha)
{
    uint64_t epoch = atomic_load(&ha->epoch);
    struct mc_etcd_watch *w = NULL;
    uint64_t from = epoch + 1, next_ka = mc_now_ms() + ha->ttl_s * 1000 / 3, next_fence = 0;
    bool warned = false;
    while (!atomic_load(&ha->stop)) {
        if (!w && mc_etcd_watch_new(ha->etcd, ha->key, from, &w) != 0)
            w = NULL;
        uint64_t now = mc_now_ms();
        int wait = next_ka > now ? (int)(next_ka - now) : 0;
        if (wait > POLL_MS)
            wait = POLL_MS;
        struct watch_seen s = {0};
        if (w)
            watch_step(ha, w, wait, &s);
        else
            nap(ha, (uint64_t)wait);
        if (s.last_rev)
            from = s.last_rev + 1;
        if (s.deleted || s.other_leader) {
            set_view(ha, "", 0, epoch);
            lose(ha, s.deleted ? "leader_key_deleted" : "leader_key_replaced");
            break;
        }
        if (s.broken) {
            mc_etcd_watch_free(w);
            w = NULL;
        }
        now = mc_now_ms();
        if (ha->fences && now >= next_fence && mc_ha_gate(ha) == 0 &&
            mc_fences_pending(ha->fences) > 0) {
            int frc = mc_ha_fences_sync(ha->etcd, ha->key, epoch, ha->cluster_id, ha->fences);
            if (frc == MC_ERR_NOT_LEADER) {
                set_view(ha, "", 0, epoch);
                lose(ha, "leader_key_replaced");
                break;
            }
            if (frc != 0) {
                mc_warn(COMP, "cannot store a fence record in etcd: retrying", "rc=%s",
                        mc_strerror(frc));
                next_fence = now + RETRY_MS;
            }
        }
        if (now < next_ka)
            continue;
        int64_t ttl = 0;
        int rc = mc_etcd_lease_keepalive(ha->etcd, ha->lease, &ttl);
        if ((rc == 0 && ttl <= 0) || rc == MC_ERR_LEASE_EXPIRED) {
            lose(ha, "lease_gone");
            break;
        }
        if (rc != 0) {
            if (!warned)
                mc_warn(COMP, "lease keepalive failed: serving stops when the lease may lapse",
                        "rc=%s serve_until_in_ms=%lld", mc_strerror(rc),
                        (long long)(atomic_load(&ha->serve_until_ms) - (int64_t)now));
            warned = true;
            next_ka = mc_now_ms() + RETRY_MS;
            continue;
        }
        if (warned)
            mc_info(COMP, "lease keepalive works again", "ttl_s=%lld", (long long)ttl);
        warned = false;
        atomic_store_explicit(&ha->serve_until_ms, now + (uint64_t)ttl * 1000 - ha->margin_ms,
                              memory_order_release);
        next_ka = mc_now_ms() + (uint64_t)ttl * 1000 / 3;
    }
    mc_etcd_watch_free(w);
}

/* Re-reads the key; returns false when it is absent (campaign) or etcd failed (*err). */
static bool reread(struct mc_ha *ha, uint64_t *rev, bool *err)
{
    struct mc_etcd_kv kv;
    bool found = false;
    *err = mc_etcd_get(ha->etcd, ha->key, &kv, &found, rev) != 0;
    if (*err)
        return false;
    if (found)
        set_view(ha, kv.value, kv.value_len, kv.create_revision);
    mc_etcd_kv_clear(&kv);
    return found;
}

static void follow(struct mc_ha *ha, uint64_t rev)
{
    struct mc_etcd_watch *w = NULL;
    uint64_t from = rev + 1, next_read = mc_now_ms() + REREAD_MS;
    while (!atomic_load(&ha->stop)) {
        if (!w && mc_etcd_watch_new(ha->etcd, ha->key, from, &w) != 0)
            w = NULL;
        struct watch_seen s = {0};
        if (w)
            watch_step(ha, w, POLL_MS, &s);
        else
            nap(ha, POLL_MS);
        if (s.last_rev)
            from = s.last_rev + 1;
        if (s.deleted)
            break; /* campaign */
        if (s.broken || mc_now_ms() >= next_read) {
            mc_etcd_watch_free(w);
            w = NULL;
            bool err;
            uint64_t r = 0;
            if (!reread(ha, &r, &err) && !err)
                break;
            if (err) {
                nap(ha, RETRY_MS);
            } else {
                from = r + 1;
            }
            next_read = mc_now_ms() + REREAD_MS;
        }
    }
    mc_etcd_watch_free(w);
}

static void *ha_main(void *arg)
{
    struct mc_ha *ha = arg;
    bool warned = false;
    while (!atomic_load(&ha->stop) && !ha->lost) {
        uint64_t rev = 0;
        switch (campaign(ha, &rev)) {
        case WON:
            warned = false;
            lead(ha);
            break;
        case LOST_ELECTION:
            warned = false;
            mc_info(COMP, "standing by", "key=%s", ha->key);
            follow(ha, rev);
            break;
        case ETCD_DOWN:
            if (!warned)
                mc_warn(COMP, "cannot campaign: etcd unreachable or refused; retrying",
                        "endpoint=%s", mc_etcd_endpoint(ha->etcd));
            warned = true;
            nap(ha, RETRY_MS);
            break;
        }
    }
    return NULL;
}

int mc_ha_start(struct mc_ha *ha, const char *advertise)
{
    if (!advertise || !strchr(advertise, ':') || strlen(advertise) > 255) {
        mc_error(COMP, "bad advertised RPC address", "addr=%s", advertise ? advertise : "");
        return MC_ERR_INVALID_PARAMS;
    }
    free(ha->advertise);
    if (!(ha->advertise = strdup(advertise)))
        return MC_ERR_INTERNAL_ERROR;
    if (pthread_create(&ha->th, NULL, ha_main, ha) != 0)
        return MC_ERR_INTERNAL_ERROR;
    ha->started = true;
    mc_info(COMP, "campaigning", "key=%s addr=%s endpoints=\"%s\" lease_ttl_s=%u margin_ms=%u",
            ha->key, ha->advertise, ha->endpoints, ha->ttl_s, ha->margin_ms);
    return 0;
}

void mc_ha_stop(struct mc_ha *ha, bool resign)
{
    if (!ha || !ha->started)
        return;
    bool was_leader = atomic_load(&ha->leader);
    /* stop acknowledging first: nothing is acknowledged after the key may be gone */
    atomic_store_explicit(&ha->serve_until_ms, 0, memory_order_release);
    atomic_store(&ha->stop, true);
    pthread_join(ha->th, NULL);
    ha->started = false;
    if (resign && ha->lease) {
        int rc = mc_etcd_lease_revoke(ha->etcd, ha->lease);
        mc_info(COMP, was_leader ? "resigned: lease revoked" : "lease revoked", "rc=%s",
                mc_strerror(rc));
        ha->lease = 0;
    }
    atomic_store(&ha->leader, false);
}

void mc_ha_free(struct mc_ha *ha)
{
    if (!ha)
        return;
    mc_ha_stop(ha, false);
    mc_etcd_free(ha->etcd);
    mc_etcd_free(ha->put_etcd);
    pthread_mutex_destroy(&ha->put_mu);
    pthread_mutex_destroy(&ha->view_mu);
    free(ha->endpoints);
    free(ha->cluster_id);
    free(ha->advertise);
    free(ha->ca);
    free(ha->cert);
    free(ha->key_file);
    free(ha);
}
