/*
 * upsert.c - Upsert (upsert.h): reservations of placed space, then a swap of the key's record
 * under its shard locks.
 *
 * The reservations are a small table under its own mutex (a leaf: no other lock is taken while
 * it is held, and it is never taken under a shard lock; MC_LO_LEAF / MC_LO_LEAF_UPSERTS in the
 * lock-order checker, taken through table_lock / table_unlock). A reservation holds the allocations
 * (segment references included) until UpsertEnd moves them into the new record, or UpsertRevoke
 * / the lazy expiry / mc_upserts_free release them.
 */
#include "master/upsert.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/mc_assert.h"
#include "common/metrics.h"
#include "master/delwait.h"
#include "master/freelist.h"
#include "master/lock_order.h"
#include "master/discard.h"
#include "master/master_state.h"
#include "master/object_events.h"
#include "master/objects.h"
#include "master/objslab.h"
#include "master/segments.h"
#include "master/shard.h"
#include "mooncake/errors.h"

struct reservation {
    uint64_t token;
    struct mc_id owner;
    uint64_t key_hash;
    size_t key_len;
    uint64_t size;
    uint64_t start_ms;
    uint64_t soft_pin_ttl_ms; /* 0 = no soft pin */
    bool hard_pin;
    uint32_t n;
    struct mc_segment_alloc al[MC_MAX_REPLICAS];
};

struct mc_upserts {
    pthread_mutex_t lock;
    struct reservation *v;
    size_t n, cap;
    uint64_t next_token;
};

static struct mc_upserts *table(struct mc_master *m)
{
    struct mc_upserts *t = atomic_load_explicit(&m->upserts, memory_order_acquire);
    if (t)
        return t;
    struct mc_upserts *nt = calloc(1, sizeof(*nt));
    if (!nt)
        return NULL;
    pthread_mutex_init(&nt->lock, NULL);
    nt->next_token = 1;
    if (!atomic_compare_exchange_strong_explicit(&m->upserts, &t, nt, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        pthread_mutex_destroy(&nt->lock);
        free(nt);
        return t; /* another thread made it first */
    }
    return nt;
}

static void table_lock(struct mc_upserts *t)
{
    mc_lo_acquire(MC_LO_LEAF, MC_LO_LEAF_UPSERTS);
    pthread_mutex_lock(&t->lock);
}

static void table_unlock(struct mc_upserts *t)
{
    pthread_mutex_unlock(&t->lock);
    mc_lo_release(MC_LO_LEAF, MC_LO_LEAF_UPSERTS);
}

static void release_allocs(struct reservation *r)
{
    for (uint32_t i = 0; i < r->n; i++)
        mc_segment_alloc_release(&r->al[i]);
    r->n = 0;
}

/* Removes entry i into *out (table lock held). */
static void take_locked(struct mc_upserts *t, size_t i, struct reservation *out)
{
    MC_ASSERT(mc_lo_holds(MC_LO_LEAF, MC_LO_LEAF_UPSERTS, false));
    *out = t->v[i];
    t->v[i] = t->v[--t->n];
}

/* Releases the reservations older than the release timeout (their clients died); returns how
 * many. Called with no lock held. */
static int expire(struct mc_master *m, struct mc_upserts *t, uint64_t now)
{
    int n = 0;
    for (;; n++) {
        struct reservation r;
        bool found = false;
        table_lock(t);
        for (size_t i = 0; i < t->n; i++)
            if (now >= t->v[i].start_ms + m->cfg.put_start_release_timeout_ms) {
                take_locked(t, i, &r);
                found = true;
                break;
            }
        table_unlock(t);
        if (!found)
            return n;
        mc_info("master", "upsert reservation expired unfinished", "size=%llu",
                (unsigned long long)r.size);
        release_allocs(&r);
    }
}

int mc_upserts_reap(struct mc_master *m)
{
    struct mc_upserts *t = atomic_load_explicit(&m->upserts, memory_order_acquire);
    return t ? expire(m, t, mc_master_now_ms(m)) : 0;
}

static int check_args(struct mc_master *m, struct mc_id client, const char *key, size_t key_len)
{
    int rc = mc_master_check_key(m, key, key_len);
    if (rc != MC_OK)
        return rc;
    return mc_id_is_zero(client) ? MC_ERR_INVALID_PARAMS : MC_OK;
}

int mc_master_upsert_start(struct mc_master *m, struct mc_id client, const char *key,
                           size_t key_len, uint64_t size,
                           const struct mc_master_replicate_config *cfg,
                           struct mc_upsert_start_result *out)
{
    struct mc_master_replicate_config defcfg;
    if (!cfg) {
        mc_master_replicate_config_init(&defcfg);
        cfg = &defcfg;
    }
    int rc = check_args(m, client, key, key_len);
    if (rc != MC_OK)
        return rc;
    if (!out || size == 0 || size > MC_OBJECT_SIZE_MAX || cfg->replica_num == 0 ||
        cfg->replica_num > MC_MAX_REPLICAS || cfg->group_id_len ||
        (cfg->n_preferred && !cfg->preferred_segments) ||
        (cfg->with_soft_pin && cfg->soft_pin_ttl_ms > m->cfg.max_kv_soft_pin_ttl_ms))
        return MC_ERR_INVALID_PARAMS;
    struct mc_upserts *t = table(m);
    if (!t)
        return MC_ERR_INTERNAL_ERROR;
    uint64_t now = mc_master_now_ms(m);
    expire(m, t, now);
    struct reservation r = {
        .owner = client,
        .key_hash = mc_hash_key(key, key_len),
        .key_len = key_len,
        .size = size,
        .start_ms = now,
        .hard_pin = cfg->with_hard_pin,
    };
    if (cfg->with_soft_pin)
        r.soft_pin_ttl_ms =
            cfg->soft_pin_ttl_ms ? cfg->soft_pin_ttl_ms : m->cfg.default_kv_soft_pin_ttl_ms;
    rc = mc_segments_allocate(m->segs, size, cfg->replica_num, cfg->preferred_segments,
                              cfg->n_preferred, r.al, &r.n);
    if (rc != MC_OK) {
        if (rc == MC_ERR_NO_AVAILABLE_HANDLE && mc_segments_could_fit(m->segs, size))
            mc_master_want_eviction(m);
        return rc;
    }
    table_lock(t);
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct reservation *nv =
            t->n >= MC_UPSERT_MAX_PENDING ? NULL : realloc(t->v, cap * sizeof(*nv));
        if (!nv) {
            table_unlock(t);
            release_allocs(&r);
            return t->n >= MC_UPSERT_MAX_PENDING ? MC_ERR_TASK_PENDING_LIMIT_EXCEEDED
                                                 : MC_ERR_INTERNAL_ERROR;
        }
        t->v = nv;
        t->cap = cap;
    }
    r.token = t->next_token++;
    t->v[t->n++] = r;
    table_unlock(t);
    /* descriptors as PutStart gives them: a stand-in record for the size */
    struct mc_object hdr;
    memset(&hdr, 0, sizeof(hdr));
    hdr.size = size;
    out->token = r.token;
    out->nreplicas = r.n;
    for (uint32_t i = 0; i < r.n; i++) {
        struct mc_replica rep;
        memset(&rep, 0, sizeof(rep));
        rep.type = MC_REPLICA_TYPE_MEMORY;
        rep.status = MC_REPLICA_STATUS_PROCESSING;
        rep.u.seg = r.al[i].seg;
        rep.offset = r.al[i].offset;
        rep.handle = r.al[i].handle;
        mc_replica_fill_desc(&hdr, &rep, &out->replicas[i]);
    }
    return MC_OK;
}

/* Takes client's reservation token for the key out of the table; false when there is none. */
static bool claim(struct mc_master *m, struct mc_id client, uint64_t h, size_t key_len,
                  uint64_t token, struct reservation *out)
{
    struct mc_upserts *t = atomic_load_explicit(&m->upserts, memory_order_acquire);
    if (!t)
        return false;
    bool found = false;
    table_lock(t);
    for (size_t i = 0; i < t->n; i++) {
        const struct reservation *r = &t->v[i];
        if (r->token == token && mc_id_eq(r->owner, client) && r->key_hash == h &&
            r->key_len == key_len) {
            take_locked(t, i, out);
            found = true;
            break;
        }
    }
    table_unlock(t);
    return found;
}

/* Write-locks the key's home shard and its route shard (each once, ascending: the lock order);
 * set gets them. Returns how many. */
static int lock_key_shards(struct mc_master *m, uint64_t h, uint32_t set[2])
{
    uint32_t home = (uint32_t)h & MC_SHARD_MASK;
    for (;;) {
        uint32_t route = mc_master_key_shard(m, h);
        int n = 1;
        set[0] = home;
        if (route != home) {
            set[0] = route < home ? route : home;
            set[1] = route < home ? home : route;
            n = 2;
        }
        for (int i = 0; i < n; i++)
            mc_shard_wrlock(&m->shards[set[i]]);
        /* the route only gains an entry under the home lock: stable unless it was dropped */
        if (mc_master_key_shard(m, h) == route)
            return n;
        for (int i = n; i-- > 0;)
            mc_shard_unlock(&m->shards[set[i]]);
    }
}

/* The record that takes the key: r's replicas, COMPLETE (home shard s write-locked). The
 * allocations on segments unmounted meanwhile are released first (r keeps the live ones). */
static struct mc_object *new_record(struct mc_master *m, struct mc_shard *s, struct reservation *r,
                                    const char *key, uint32_t crc, bool has_crc, uint64_t now)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        if (mc_segment_alive(r->al[i].seg))
            r->al[n++] = r->al[i];
        else
            mc_segment_alloc_release(&r->al[i]);
    }
    r->n = n;
    if (n == 0)
        return NULL;
    struct mc_object *o = mc_obj_alloc(s, sizeof(*o) + n * sizeof(o->rep[0]) + r->key_len);
    if (!o)
        return NULL;
    o->size = r->size;
    o->version =
        m->version_base + atomic_fetch_add_explicit(&m->next_version, 1, memory_order_relaxed);
    o->ent = MC_NO_INDEX;
    o->owner_tag = mc_owner_tag(r->owner);
    o->key_len = (uint16_t)r->key_len;
    o->nrep = (uint8_t)n;
    o->flags |= MC_OBJ_COMPLETE | (r->hard_pin ? MC_OBJ_HARD_PIN : 0);
    if (has_crc) {
        o->crc = crc;
        o->flags |= MC_OBJ_HAS_CRC;
    }
    if (r->soft_pin_ttl_ms) {
        o->soft_pin_deadline_ms = now + r->soft_pin_ttl_ms;
        o->flags |= MC_OBJ_SOFT_PIN;
    }
    for (uint32_t i = 0; i < n; i++) {
        struct mc_replica *rep = &o->rep[i];
        memset(rep, 0, sizeof(*rep));
        rep->id = (uint32_t)atomic_fetch_add_explicit(&m->next_replica_id, 1, memory_order_relaxed);
        rep->type = MC_REPLICA_TYPE_MEMORY;
        rep->status = MC_REPLICA_STATUS_COMPLETE;
        rep->handle = r->al[i].handle;
        rep->u.seg = r->al[i].seg;
        rep->offset = r->al[i].offset;
    }
    memcpy(mc_obj_key(o), key, r->key_len);
    return o;
}

/* The swap (both key shards write-locked): the old record goes by the forced Remove rules,
 * then o takes the key. On error nothing changed and o is freed. */
static int swap_locked(struct mc_master *m, const uint32_t *set, int nset, uint64_t h,
                       const char *key, size_t key_len, struct mc_object *o, uint64_t now,
                       struct mc_freelist *fl, struct mc_delop *op)
{
    struct mc_shard *home = &m->shards[h & MC_SHARD_MASK];
    for (int i = 0; i < nset; i++)
        MC_ASSERT(mc_lo_holds(MC_LO_SHARD, set[i], true));
    for (int i = 0; i < nset; i++) {
        struct mc_shard *s = &m->shards[set[i]];
        struct mc_object *old = mc_shard_find(s, h, key, key_len);
        if (!old)
            continue;
        int rc = mc_master_remove_locked(m, s, old, true, now, fl, op);
        if (rc != MC_OK) {
            mc_obj_free_locked(home, o);
            return rc;
        }
    }
    if (mc_shard_insert(home, h, o) != 0) {
        /* the old value is gone and the new one cannot be recorded: say so loudly */
        mc_error("master", "upsert: out of memory recording the new value; key lost", "key_len=%zu",
                 key_len);
        mc_obj_free_locked(home, o);
        return MC_ERR_INTERNAL_ERROR;
    }
    atomic_fetch_add_explicit(&m->c.key_count, 1, memory_order_relaxed);
    if (o->flags & MC_OBJ_SOFT_PIN)
        atomic_fetch_add_explicit(&m->c.soft_pin_key_count, 1, memory_order_relaxed);
    /* like PutEnd: the last access is now (eviction order) */
    atomic_store_explicit(&mc_shard_ent(home, o->ent)->lease_ms, now, memory_order_relaxed);
    mc_shard_refresh_bits(home, o);
    mc_histogram_observe(m->value_size, (double)o->size);
    mc_obj_ev_put_end(m, home, o); /* offload mode A queues the offload task now (quiet) */
    return MC_OK;
}

static int end(struct mc_master *m, struct mc_id client, const char *key, size_t key_len,
               uint64_t token, uint32_t crc, bool has_crc, uint64_t *version, struct mc_delop *op)
{
    int rc = check_args(m, client, key, key_len);
    if (rc != MC_OK)
        return rc;
    uint64_t h = mc_hash_key(key, key_len);
    struct reservation r;
    if (!claim(m, client, h, key_len, token, &r))
        return MC_ERR_INVALID_PARAMS;
    uint64_t now = mc_master_now_ms(m);
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    uint32_t set[2];
    int nset = lock_key_shards(m, h, set);
    struct mc_shard *home = &m->shards[h & MC_SHARD_MASK];
    struct mc_object *o = new_record(m, home, &r, key, crc, has_crc, now);
    if (!o) { /* every segment it was written to is gone, or out of memory */
        rc = r.n ? MC_ERR_INTERNAL_ERROR : MC_ERR_OBJECT_NOT_FOUND;
    } else {
        rc = swap_locked(m, set, nset, h, key, key_len, o, now, &fl, op);
        if (rc == MC_OK && version)
            *version = o->version;
    }
    for (int i = nset; i-- > 0;)
        mc_shard_unlock(&m->shards[set[i]]);
    mc_freelist_flush(&fl);
    mc_obj_ev_unlocked(m); /* the deletes and the offload task pushed under the lock */
    if (rc != MC_OK)       /* else the record holds the allocations now */
        release_allocs(&r);
    return rc;
}

int mc_master_upsert_end(struct mc_master *m, struct mc_id client, const char *key, size_t key_len,
                         uint64_t token, uint32_t crc32c, bool has_crc, uint64_t *version)
{
    return end(m, client, key, key_len, token, crc32c, has_crc, version, NULL);
}

int mc_master_upsert_end_wait(struct mc_master *m, struct mc_id client, const char *key,
                              size_t key_len, uint64_t token, uint32_t crc32c, bool has_crc,
                              uint64_t *version, mc_master_done_fn done, void *arg)
{
    struct mc_delwait *dw = m->delwait;
    struct mc_delop *op = NULL;
    if (dw && !(op = mc_delop_new(done, arg)))
        return MC_ERR_INTERNAL_ERROR;
    int rc = end(m, client, key, key_len, token, crc32c, has_crc, version, op);
    if (!op)
        return rc;
    return mc_delop_seal(dw, op, rc) ? rc : MC_MASTER_PENDING;
}

int mc_master_batch_upsert_end_wait(struct mc_master *m, struct mc_id client,
                                    const struct mc_key_ref *keys, size_t n,
                                    const struct mc_upsert_end_item *items, int *rcs,
                                    mc_master_done_fn done, void *arg)
{
    if (n && (!keys || !items || !rcs))
        return MC_ERR_INVALID_PARAMS;
    struct mc_delwait *dw = m->delwait;
    struct mc_delop *op = NULL;
    if (dw && !(op = mc_delop_new(done, arg)))
        return MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < n; i++)
        rcs[i] = items[i].revoke
                     ? mc_master_upsert_revoke(m, client, keys[i].data, keys[i].len, items[i].token)
                     : end(m, client, keys[i].data, keys[i].len, items[i].token, items[i].crc32c,
                           items[i].has_crc, NULL, op);
    if (!op)
        return MC_OK;
    return mc_delop_seal(dw, op, MC_OK) ? MC_OK : MC_MASTER_PENDING;
}

int mc_master_upsert_revoke(struct mc_master *m, struct mc_id client, const char *key,
                            size_t key_len, uint64_t token)
{
    int rc = check_args(m, client, key, key_len);
    if (rc != MC_OK)
        return rc;
    struct reservation r;
    if (!claim(m, client, mc_hash_key(key, key_len), key_len, token, &r))
        return MC_ERR_INVALID_PARAMS;
    release_allocs(&r);
    return MC_OK;
}

size_t mc_master_upsert_pending(struct mc_master *m)
{
    struct mc_upserts *t = atomic_load_explicit(&m->upserts, memory_order_acquire);
    if (!t)
        return 0;
    table_lock(t);
    size_t n = t->n;
    table_unlock(t);
    return n;
}

void mc_upserts_free(struct mc_master *m)
{
    struct mc_upserts *t = atomic_exchange_explicit(&m->upserts, NULL, memory_order_acq_rel);
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        release_allocs(&t->v[i]);
    free(t->v);
    pthread_mutex_destroy(&t->lock);
    free(t);
}
