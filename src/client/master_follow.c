/*
 * master_follow.c - the etcd:// leader resolver (see master_follow.h).
 */
#include "client/master_follow.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/auth.h"
#include "common/etcd.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"

#define PREFIX "etcd://"
#define DEFAULT_CLUSTER "mooncake_cluster"

struct mc_master_follow {
    struct mc_etcd *etcd;
    char key[160];
};

bool mc_master_follow_is_url(const char *address)
{
    return address && strncmp(address, PREFIX, strlen(PREFIX)) == 0;
}

static bool cluster_id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

int mc_master_follow_new(const char *url, struct mc_master_follow **out)
{
    *out = NULL;
    if (!mc_master_follow_is_url(url) || strlen(url) > 1024)
        return MC_ERR_INVALID_PARAMS;
    char eps[1024];
    snprintf(eps, sizeof(eps), "%s", url + strlen(PREFIX));
    const char *cluster = DEFAULT_CLUSTER;
    char *slash = strchr(eps, '/');
    if (slash) {
        *slash = 0;
        cluster = slash + 1;
    }
    if (!cluster_id_ok(cluster)) {
        mc_error("client",
                 "bad cluster id in the etcd:// master address (want "
                 "etcd://h1:2379;h2:2379[/cluster_id])",
                 "cluster_id=%s", cluster);
        return MC_ERR_INVALID_PARAMS;
    }
    struct mc_master_follow *f = calloc(1, sizeof(*f));
    if (!f)
        return MC_ERR_INTERNAL_ERROR;
    snprintf(f->key, sizeof(f->key), "/mooncake-c/%s/leader", cluster);
    /* a client waits at most this long for one etcd: it tries the next endpoint after it */
    struct mc_etcd_config ec = {.endpoints = eps, .connect_timeout_ms = 500, .timeout_ms = 1000};
    int rc = mc_etcd_new(&ec, &f->etcd);
    if (rc) {
        free(f);
        return rc;
    }
    *out = f;
    return 0;
}

void mc_master_follow_free(struct mc_master_follow *f)
{
    if (!f)
        return;
    mc_etcd_free(f->etcd);
    free(f);
}

int mc_master_follow_resolve(struct mc_master_follow *f, char *addr, size_t cap, uint64_t *epoch)
{
    struct mc_etcd_kv kv;
    bool found = false;
    int rc = mc_etcd_get(f->etcd, f->key, &kv, &found, NULL);
    if (rc)
        return MC_ERR_RPC_FAIL;
    if (!found || kv.value_len == 0 || kv.value_len >= cap ||
        !memchr(kv.value, ':', kv.value_len)) {
        mc_etcd_kv_clear(&kv);
        return MC_ERR_RPC_FAIL; /* no leader right now */
    }
    memcpy(addr, kv.value, kv.value_len);
    addr[kv.value_len] = 0;
    *epoch = kv.create_revision;
    mc_etcd_kv_clear(&kv);
    return 0;
}

struct mc_etcd *mc_master_follow_etcd(struct mc_master_follow *f)
{
    return f->etcd;
}

const char *mc_master_follow_key(const struct mc_master_follow *f)
{
    return f->key;
}

/* ---- the link ----------------------------------------------------------------------------- */

struct link_target {
    char addr[128];
    char host[128];
    struct mc_rpc_client *rpc;
};

struct mc_master_link {
    struct mc_rpc_client_config base;
    struct mc_auth_key auth;
    struct mc_master_follow *follow; /* etcd:// only */
    struct link_target t[MC_MASTER_LINK_MAX];
    int n;
    _Atomic(struct link_target *) cur;
    _Atomic bool ha;
    _Atomic uint64_t max_epoch;
};

/* The rpc client for addr (made on first use). NULL when the table is full or addr is bad. */
static struct link_target *target(struct mc_master_link *l, const char *addr)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->t[i].addr, addr) == 0)
            return &l->t[i];
    if (l->n == MC_MASTER_LINK_MAX || strlen(addr) >= sizeof(l->t[0].addr)) {
        mc_error("client", "too many master addresses on one link", "addr=%s", addr);
        return NULL;
    }
    struct link_target *t = &l->t[l->n];
    struct mc_rpc_client_config cfg = l->base;
    snprintf(t->addr, sizeof(t->addr), "%s", addr);
    if (mc_rpc_parse_endpoint(t->addr, t->host, sizeof(t->host), &cfg) != 0)
        return NULL;
    cfg.auth = l->auth.set ? &l->auth : NULL;
    if (mc_rpc_client_new(&cfg, &t->rpc) != 0)
        return NULL;
    l->n++;
    return t;
}

int mc_master_link_new(const char *address, const struct mc_rpc_client_config *base,
                       struct mc_master_link **out)
{
    *out = NULL;
    struct mc_master_link *l = calloc(1, sizeof(*l));
    if (!l)
        return MC_ERR_INTERNAL_ERROR;
    l->base = *base;
    if (base->auth)
        l->auth = *base->auth;
    l->base.auth = NULL;
    int rc = 0;
    char addr[128];
    uint64_t epoch = 0;
    snprintf(addr, sizeof(addr), "%s", address);
    if (mc_master_follow_is_url(address)) {
        atomic_store(&l->ha, true);
        if (!l->base.connect_timeout_ms || l->base.connect_timeout_ms > 500)
            l->base.connect_timeout_ms = 500;
        rc = mc_master_follow_new(address, &l->follow);
        if (rc == 0)
            rc = mc_master_follow_resolve(l->follow, addr, sizeof(addr), &epoch);
        if (rc)
            mc_error("client", "no leader found in etcd", "master=%s rc=%s", address,
                     mc_strerror(rc));
    }
    struct link_target *t = rc ? NULL : target(l, addr);
    if (!rc && !t)
        rc = MC_ERR_INVALID_PARAMS;
    if (rc) {
        mc_master_link_free(l);
        return rc;
    }
    atomic_store(&l->cur, t);
    if (l->follow) /* etcd named this leader: an older one is refused from now on */
        atomic_store(&l->max_epoch, epoch);
    *out = l;
    return 0;
}

void mc_master_link_free(struct mc_master_link *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->n; i++)
        mc_rpc_client_free(l->t[i].rpc);
    mc_master_follow_free(l->follow);
    free(l);
}

struct mc_rpc_client *mc_master_link_rpc(struct mc_master_link *l)
{
    return atomic_load(&l->cur)->rpc;
}

const char *mc_master_link_addr(struct mc_master_link *l)
{
    return atomic_load(&l->cur)->addr;
}

bool mc_master_link_ha(struct mc_master_link *l)
{
    return atomic_load(&l->ha);
}

/* GetLeader on master t: the leader's address (t's own when it leads). */
static int ask(struct link_target *t, char *addr, size_t cap)
{
    Mc__GetLeaderRequest req = MC__GET_LEADER_REQUEST__INIT;
    Mc__GetLeaderResponse *r = NULL;
    int rc =
        mc_rpc_client_call_msg(t->rpc, MC_METHOD_GET_LEADER, &req.base,
                               &mc__get_leader_response__descriptor, 0, (ProtobufCMessage **)&r);
    if (rc)
        return rc;
    rc = MC_ERR_RPC_FAIL; /* knows no leader */
    if (strcmp(r->role, "leader") == 0) {
        snprintf(addr, cap, "%s", t->addr);
        rc = 0;
    } else if (r->leader_address[0] && strlen(r->leader_address) < cap) {
        snprintf(addr, cap, "%s", r->leader_address);
        rc = 0;
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return rc;
}

/* Plain addresses: ask the current master, then every other one this link knows. */
static int ask_around(struct mc_master_link *l, char *addr, size_t cap)
{
    struct link_target *cur = atomic_load(&l->cur);
    if (ask(cur, addr, cap) == 0)
        return 0;
    for (int i = 0; i < l->n; i++)
        if (&l->t[i] != cur && ask(&l->t[i], addr, cap) == 0)
            return 0;
    return MC_ERR_RPC_FAIL;
}

int mc_master_link_follow(struct mc_master_link *l, bool not_leader)
{
    char addr[128];
    uint64_t epoch = 0;
    int rc;
    if (not_leader)
        atomic_store(&l->ha, true);
    if (l->follow) {
        rc = mc_master_follow_resolve(l->follow, addr, sizeof(addr), &epoch);
        if (rc == 0 && epoch < atomic_load(&l->max_epoch)) {
            mc_warn("client", "etcd names a leader older than one seen: waiting",
                    "leader=%s epoch=%llu seen=%llu", addr, (unsigned long long)epoch,
                    (unsigned long long)atomic_load(&l->max_epoch));
            rc = MC_ERR_RPC_FAIL;
        }
    } else if (atomic_load(&l->ha)) {
        rc = ask_around(l, addr, sizeof(addr));
    } else {
        return 0; /* a plain master that failed: redial the same one */
    }
    if (rc)
        return rc;
    struct link_target *t = target(l, addr);
    if (!t)
        return MC_ERR_RPC_FAIL;
    struct link_target *old = atomic_exchange(&l->cur, t);
    if (old != t)
        mc_info("client", "following the master leader", "from=%s to=%s epoch=%llu", old->addr,
                t->addr, (unsigned long long)epoch);
    return 0;
}

uint64_t mc_master_link_epoch(struct mc_master_link *l)
{
    return atomic_load(&l->max_epoch);
}

int mc_master_link_check_epoch(struct mc_master_link *l, uint64_t epoch)
{
    if (!atomic_load(&l->ha))
        return 0;
    uint64_t seen = atomic_load(&l->max_epoch);
    while (epoch > seen && !atomic_compare_exchange_weak(&l->max_epoch, &seen, epoch))
        ;
    if (epoch < seen) {
        mc_warn("client", "master epoch below one seen: a deposed leader, refused",
                "master=%s epoch=%llu seen=%llu", mc_master_link_addr(l), (unsigned long long)epoch,
                (unsigned long long)seen);
        return MC_ERR_NOT_LEADER;
    }
    return 0;
}
