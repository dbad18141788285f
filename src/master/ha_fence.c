/*
 * ha_fence.c - holder fences in etcd (see ha_fence.h). HA thread only: the etcd handle it is
 * given is the HA thread's.
 */
#include "master/ha_fence.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/etcd.h"
#include "common/log.h"
#include "master/fence.h"
#include "mooncake/errors.h"

#define COMP "ha"
#define SYNC_BATCH 16

static int prefix_of(const char *cluster_id, char *buf, size_t cap)
{
    int w = snprintf(buf, cap, "/mooncake-c/%s/fence/", cluster_id);
    return w > 0 && (size_t)w < cap ? 0 : MC_ERR_INVALID_PARAMS;
}

int mc_ha_fence_key(const char *cluster_id, struct mc_id holder, char *buf, size_t cap)
{
    char id[MC_ID_STRLEN];
    int w = snprintf(buf, cap, "/mooncake-c/%s/fence/%s", cluster_id, mc_id_format(holder, id));
    return w > 0 && (size_t)w < cap ? 0 : MC_ERR_INVALID_PARAMS;
}

struct load_ctx {
    struct mc_fences *f;
    size_t plen, n;
};

static int load_one(void *arg, const struct mc_etcd_kv *kv)
{
    struct load_ctx *c = arg;
    struct mc_id holder;
    char num[24];
    char *end = NULL;
    unsigned long long v = 0;
    bool ok = strlen(kv->key) > c->plen && mc_id_parse(kv->key + c->plen, &holder) == 0 &&
              kv->value_len > 0 && kv->value_len < sizeof(num);
    if (ok) {
        memcpy(num, kv->value, kv->value_len);
        num[kv->value_len] = 0;
        v = strtoull(num, &end, 10);
        ok = *end == 0 && num[0] >= '0' && num[0] <= '9' && v > 0;
    }
    if (!ok) {
        mc_warn(COMP, "fence record in etcd does not parse: skipped", "key=%s value_len=%zu",
                kv->key, kv->value_len);
        return 0;
    }
    if (mc_fences_load(c->f, holder, v) != 0)
        return MC_ERR_INTERNAL_ERROR;
    c->n++;
    return 0;
}

int mc_ha_fences_load(struct mc_etcd *e, const char *cluster_id, struct mc_fences *f, size_t *n)
{
    char prefix[160];
    *n = 0;
    int rc = prefix_of(cluster_id, prefix, sizeof(prefix));
    if (rc)
        return rc;
    struct load_ctx c = {.f = f, .plen = strlen(prefix)};
    rc = mc_etcd_get_prefix(e, prefix, load_one, &c);
    *n = c.n;
    return rc;
}

int mc_ha_fences_sync(struct mc_etcd *e, const char *guard_key, uint64_t epoch,
                      const char *cluster_id, struct mc_fences *f)
{
    struct mc_fence batch[SYNC_BATCH];
    size_t n = mc_fences_drain(f, batch, SYNC_BATCH);
    int rc = 0;
    size_t i = 0;
    for (; i < n; i++) {
        char key[200], val[24];
        rc = mc_ha_fence_key(cluster_id, batch[i].holder, key, sizeof(key));
        if (rc)
            break;
        int len = snprintf(val, sizeof(val), "%" PRIu64, batch[i].version);
        bool ok = false;
        rc = mc_etcd_put_guarded(e, guard_key, epoch, key, val, (size_t)len, &ok);
        if (rc == 0 && !ok)
            rc = MC_ERR_NOT_LEADER;
        if (rc)
            break;
        mc_fences_stored(f, batch[i].holder, batch[i].version);
        char id[MC_ID_STRLEN];
        mc_info(COMP, "fence stored in etcd", "client=%s fence_version=%" PRIu64 " epoch=%" PRIu64,
                mc_id_format(batch[i].holder, id), batch[i].version, epoch);
    }
    for (; i < n; i++) /* not written: pending again */
        mc_fences_redirty(f, batch[i].holder);
    return rc;
}
