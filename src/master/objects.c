/*
 * objects.c - the object operations of the master core: PutStart / PutEnd / PutRevoke,
 * GetReplicaList, ExistKey, QueryKey, Remove and RemoveAll (single-key forms; the batch forms
 * are in objects_batch.c), and what other modules build on (objects.h): the single-key bodies
 * under a held shard lock, the erasure of an object and the eviction of one object.
 *
 * Each call hashes the key once (xxh3), finds its shard (the group route map is consulted only
 * when grouped keys exist), takes the shard lock shared (Get/Exist/QueryKey) or exclusive (the
 * rest), and releases any freed buffers after unlocking (freelist.h). An object whose buffers
 * may still be in use when it goes (a stale Put taken over, a forced Remove under a read lease)
 * is parked on the deferred-free list (discard.h). See master.h for the contract of each call,
 * objects.h for the record and shard.h for the table layout.
 */
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/metrics.h"
#include "master/delwait.h"
#include "master/discard.h"
#include "master/freelist.h"
#include "master/master_state.h"
#include "master/object_events.h"
#include "master/objects.h"
#include "master/shard.h"
#include "mooncake/errors.h"

/* ---- predicates and descriptors ------------------------------------------------------------ */

bool mc_replica_valid(const struct mc_replica *r)
{
    if (r->type == MC_REPLICA_TYPE_MEMORY)
        return mc_segment_alive(r->u.seg);
    if (r->type == MC_REPLICA_TYPE_LOCAL_DISK)
        return !atomic_load_explicit(&r->u.holder->dead, memory_order_acquire);
    return false;
}

bool mc_replica_readable(const struct mc_replica *r)
{
    return r->status == MC_REPLICA_STATUS_COMPLETE && mc_replica_valid(r);
}

bool mc_obj_soft_pinned(const struct mc_object *o, uint64_t now_ms)
{
    return (o->flags & MC_OBJ_SOFT_PIN) && now_ms < o->soft_pin_deadline_ms;
}

static void copy_str(char *dst, const char *src, size_t cap)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

void mc_replica_fill_desc(const struct mc_object *o, const struct mc_replica *r,
                          struct mc_replica_desc *d)
{
    d->id = r->id;
    d->type = r->type;
    d->status = r->status;
    d->refcnt = r->refcnt;
    d->size = o->size;
    if (r->type == MC_REPLICA_TYPE_MEMORY) {
        const struct mc_segment_desc *sd = &r->u.seg->desc;
        d->u.mem.segment_id = sd->id;
        copy_str(d->u.mem.segment_name, sd->name, sizeof(d->u.mem.segment_name));
        d->u.mem.offset = r->offset;
        d->u.mem.addr = sd->base + r->offset;
        d->u.mem.mount_epoch = r->u.seg->mount_epoch;
        copy_str(d->u.mem.endpoint, sd->endpoint, sizeof(d->u.mem.endpoint));
        copy_str(d->u.mem.protocol, sd->protocol, sizeof(d->u.mem.protocol));
        d->u.mem.rkey = sd->rkey;
        copy_str(d->u.mem.transport_meta, sd->transport_meta, sizeof(d->u.mem.transport_meta));
    } else {
        d->u.disk.holder = r->u.holder->id;
        copy_str(d->u.disk.endpoint, r->u.holder->endpoint, sizeof(d->u.disk.endpoint));
    }
}

/* ---- erase and evict ----------------------------------------------------------------------- */

/* What every erasure does before o leaves its shard (write lock): announces it (the policies
 * end their tasks on o; offload queues the deletes of its disk records) and takes it out of the
 * counters. */
static void erase_bookkeeping(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    mc_obj_ev_erased(m, s, o);
    if (o->flags & MC_OBJ_SOFT_PIN)
        atomic_fetch_sub_explicit(&m->c.soft_pin_key_count, 1, memory_order_relaxed);
    if (o->flags & MC_OBJ_PROCESSING)
        atomic_fetch_sub_explicit(&m->c.processing_count, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&m->c.key_count, 1, memory_order_relaxed);
}

/* Takes o out of s and out of the counters; the caller decides what happens to the block. */
static void detach_object(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    erase_bookkeeping(m, s, o);
    mc_shard_unlink(m, s, o);
}

void mc_master_erase_object(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            struct mc_freelist *fl)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true));
    detach_object(m, s, o);
    mc_freelist_add_object_locked(fl, s, o);
}

/* Removes one replica (index i) from o, keeping the key bytes (and group link) after the
 * replica array. */
void mc_obj_drop_replica(struct mc_object *o, uint8_t i)
{
    char *key = mc_obj_key(o);
    memmove(&o->rep[i], &o->rep[i + 1], (size_t)(o->nrep - i - 1) * sizeof(o->rep[0]));
    o->nrep--;
    memmove(mc_obj_key(o), key, mc_obj_tail_bytes(o));
}

/* Detaches o for a batched unlink (write lock): like mc_master_erase_object, except that o stays
 * in the index and the entry array (and keeps its remaining replicas) until the caller unlinks
 * it and moves it to a freelist; false when ub cannot grow. */
static bool defer_erase(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                        struct mc_unlink_batch *ub)
{
    if (ub->n == ub->cap) {
        size_t ncap = ub->cap ? ub->cap * 2 : 256;
        struct mc_object **no = realloc(ub->objs, ncap * sizeof(*no));
        if (!no)
            return false;
        ub->objs = no;
        ub->cap = ncap;
    }
    erase_bookkeeping(m, s, o);
    mc_shard_detach(m, s, o);
    o->flags |= MC_OBJ_UNLINKING;
    ub->objs[ub->n++] = o;
    return true;
}

uint64_t mc_master_evict_object(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                struct mc_freelist *fl, struct mc_unlink_batch *ub,
                                uint32_t *victim_freq)
{
    /* promotion estimates o's frequency (before o may be erased); offload on evict (modes B
     * and C) may take the eviction over */
    struct mc_obj_evict_ev ev = {.fl = fl, .ub = ub};
    mc_obj_ev_evict_chosen(m, s, o, &ev);
    if (victim_freq)
        *victim_freq = ev.victim_freq;
    return ev.taken ? ev.freed : mc_master_evict_memory(m, s, o, fl, ub);
}

uint64_t mc_master_evict_memory(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                struct mc_freelist *fl, struct mc_unlink_batch *ub)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true));
    uint64_t freed = 0;
    bool stays = false; /* a valid replica that is not evicted keeps the object */
    for (uint8_t i = 0; i < o->nrep; i++) {
        if (mc_replica_evictable(&o->rep[i]))
            freed += o->size;
        else
            stays |= mc_replica_valid(&o->rep[i]);
    }
    if (!stays) {
        /* Erased whole: its replicas (evicted and dead ones) go with it, and its key bytes are
         * not moved (they are on another cache line than the header). */
        if (!ub) {
            mc_master_erase_object(m, s, o, fl);
        } else if (!defer_erase(m, s, o, ub)) {
            /* the round may still look at o (its ent) under this lock: release at flush */
            detach_object(m, s, o);
            mc_freelist_add_object(fl, o);
        }
        return freed;
    }
    if (!freed)
        return 0;
    for (uint8_t i = 0; i < o->nrep;) {
        if (mc_replica_evictable(&o->rep[i])) {
            mc_freelist_add_replica(fl, &o->rep[i], o->size);
            mc_obj_drop_replica(o, i);
            continue;
        }
        i++;
    }
    mc_shard_refresh_bits(s, o);
    return freed;
}

/* ---- lookup -------------------------------------------------------------------------------- */

static int check_key(const struct mc_master *m, const char *key, size_t len)
{
    if (!key || len == 0 || len > m->cfg.max_key_len || memchr(key, 0, len))
        return MC_ERR_INVALID_KEY;
    return MC_OK;
}

/* Finds key and returns it with its shard locked (shared or exclusive); NULL and nothing
 * locked when absent. A grouped key is looked for in its group's shard first. */
static struct mc_object *lock_find(struct mc_master *m, uint64_t h, const char *key, size_t len,
                                   bool write, struct mc_shard **out)
{
    uint32_t home = (uint32_t)h & MC_SHARD_MASK;
    uint32_t si = mc_master_key_shard(m, h);
    for (;;) {
        struct mc_shard *s = &m->shards[si];
        if (write)
            mc_shard_wrlock(s);
        else
            mc_shard_rdlock(s);
        struct mc_object *o = mc_shard_find(s, h, key, len);
        if (o) {
            *out = s;
            return o;
        }
        mc_shard_unlock(s);
        if (si == home)
            break;
        si = home;
    }
    *out = NULL;
    return NULL;
}

/* lock_find of a valid key for a write: NULL with *rc = OBJECT_NOT_FOUND when absent. */
static struct mc_object *lock_key_write(struct mc_master *m, const char *key, size_t len,
                                        struct mc_shard **out, int *rc)
{
    struct mc_object *o = lock_find(m, mc_hash_key(key, len), key, len, true, out);
    if (!o)
        *rc = MC_ERR_OBJECT_NOT_FOUND;
    return o;
}

static inline void lease_raise(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (cur < v && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                             memory_order_relaxed))
        ;
}

/* Grants a read lease on o (and its whole group); any shard lock held. */
void mc_master_grant_lease(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                           uint64_t now_ms)
{
    uint64_t until = now_ms + m->cfg.default_kv_lease_ttl_ms;
    struct mc_group *g = mc_obj_group(o);
    if (g) {
        for (uint32_t i = 0; i < g->n; i++)
            lease_raise(&mc_shard_ent(s, g->members[i]->ent)->lease_ms, until);
    } else {
        lease_raise(&mc_shard_ent(s, o->ent)->lease_ms, until);
    }
}

/* ---- PutStart ------------------------------------------------------------------------------ */

/* An existing record of the key in s (write-locked): OBJECT_ALREADY_EXISTS if it blocks a new
 * Put; otherwise it is erased (storage gone) or taken over (stale Put) and OK is returned. */
static int clear_existing(struct mc_master *m, struct mc_shard *s, uint64_t h, const char *key,
                          size_t len, uint64_t now, struct mc_freelist *fl)
{
    struct mc_object *o = mc_shard_find(s, h, key, len);
    if (!o)
        return MC_OK;
    struct mc_pending *p = mc_obj_pending(s, o);
    if (!p) {
        for (uint8_t i = 0; i < o->nrep; i++)
            if (mc_replica_valid(&o->rep[i]))
                return MC_ERR_OBJECT_ALREADY_EXISTS;
        mc_master_erase_object(m, s, o, fl); /* every replica's storage is gone */
        return MC_OK;
    }
    if (now < p->start_ms + m->cfg.put_start_discard_timeout_ms)
        return MC_ERR_OBJECT_ALREADY_EXISTS;
    /* Stale Put: take it over. Its writer may still be writing, so its buffers are only
     * released put_start_release_timeout after it started. */
    uint64_t release_ms = p->start_ms + m->cfg.put_start_release_timeout_ms;
    CNT_INC(m, put_start_discard_cnt);
    mc_info("master", "stale put taken over", "key_len=%zu age_ms=%llu", len,
            (unsigned long long)(now - p->start_ms));
    detach_object(m, s, o);
    if (release_ms <= now) {
        CNT_INC(m, put_start_release_cnt);
        mc_freelist_add_object_locked(fl, s, o);
    } else {
        mc_discard_push(m->discard, o, release_ms, true, fl);
    }
    return MC_OK;
}

static int check_put_config(const struct mc_master *m, const struct mc_master_replicate_config *cfg)
{
    if (cfg->replica_num == 0 || cfg->replica_num > MC_MAX_REPLICAS)
        return MC_ERR_INVALID_PARAMS;
    if (cfg->with_soft_pin && cfg->soft_pin_ttl_ms > m->cfg.max_kv_soft_pin_ttl_ms)
        return MC_ERR_INVALID_PARAMS;
    if (cfg->group_id_len) {
        if (!cfg->group_id || cfg->group_id_len >= MC_GROUP_ID_MAX ||
            memchr(cfg->group_id, 0, cfg->group_id_len))
            return MC_ERR_INVALID_PARAMS;
    }
    if (cfg->n_preferred && !cfg->preferred_segments)
        return MC_ERR_INVALID_PARAMS;
    return MC_OK;
}

static int put_start_locked(struct mc_master *m, struct mc_shard *s, struct mc_id client,
                            uint64_t h, const char *key, size_t len, uint64_t size,
                            const struct mc_master_replicate_config *cfg, uint64_t now,
                            struct mc_put_start_result *out, struct mc_freelist *fl)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true));
    int rc = clear_existing(m, s, h, key, len, now, fl);
    if (rc != MC_OK)
        return rc;
    struct mc_segment_alloc al[MC_MAX_REPLICAS];
    uint32_t n = 0;
    rc = mc_segments_allocate(m->segs, size, cfg->replica_num, cfg->preferred_segments,
                              cfg->n_preferred, al, &n);
    if (rc != MC_OK) {
        CNT_INC(m, put_start_alloc_failures);
        /* ask the eviction loop for a cycle only when freeing space could help */
        if (rc == MC_ERR_NO_AVAILABLE_HANDLE && mc_segments_could_fit(m->segs, size))
            mc_master_want_eviction(m);
        return rc;
    }
    if (n < cfg->replica_num)
        CNT_INC(m, put_start_partial_allocations);
    struct mc_object *o = mc_obj_alloc(s, mc_obj_record_bytes(n, len, cfg->group_id_len != 0));
    if (!o)
        goto oom;
    o->size = size;
    o->version =
        m->version_base + atomic_fetch_add_explicit(&m->next_version, 1, memory_order_relaxed);
    o->ent = MC_NO_INDEX;
    o->owner_tag = mc_owner_tag(client);
    o->key_len = (uint16_t)len;
    o->nrep = (uint8_t)n;
    o->flags |= cfg->with_hard_pin ? MC_OBJ_HARD_PIN : 0;
    for (uint32_t i = 0; i < n; i++) {
        struct mc_replica *r = &o->rep[i];
        memset(r, 0, sizeof(*r));
        r->id = (uint32_t)atomic_fetch_add_explicit(&m->next_replica_id, 1, memory_order_relaxed);
        r->type = MC_REPLICA_TYPE_MEMORY;
        r->status = MC_REPLICA_STATUS_PROCESSING;
        r->handle = al[i].handle;
        r->u.seg = al[i].seg;
        r->offset = al[i].offset;
    }
    memcpy(mc_obj_key(o), key, len);
    if (mc_shard_insert(s, h, o) != 0) {
        mc_obj_free_locked(s, o);
        goto oom;
    }
    atomic_fetch_add_explicit(&m->c.key_count, 1, memory_order_relaxed);
    uint64_t pin_ttl = 0;
    if (cfg->with_soft_pin)
        pin_ttl = cfg->soft_pin_ttl_ms ? cfg->soft_pin_ttl_ms : m->cfg.default_kv_soft_pin_ttl_ms;
    if (mc_shard_pend_add(s, o, client, now, pin_ttl) != 0)
        goto oom_erase;
    atomic_fetch_add_explicit(&m->c.processing_count, 1, memory_order_relaxed);
    if (cfg->group_id_len) {
        if (mc_shard_group_join(m, s, o, cfg->group_id, cfg->group_id_len, h) != 0)
            goto oom_erase;
        mc_shard_refresh_bits(s, o);
    }
    out->version = o->version;
    out->nreplicas = n;
    for (uint32_t i = 0; i < n; i++)
        mc_replica_fill_desc(o, &o->rep[i], &out->replicas[i]);
    return MC_OK;
oom_erase:
    mc_master_erase_object(m, s, o, fl);
    return MC_ERR_INTERNAL_ERROR;
oom:
    for (uint32_t i = 0; i < n; i++)
        mc_segment_alloc_release(&al[i]);
    return MC_ERR_INTERNAL_ERROR;
}

/* Write-locks home, target and the key's current route shard, each once, in ascending order
 * (the lock order); set gets the locked indices, ascending. Returns how many. */
static int lock_put_shards(struct mc_master *m, uint64_t h, uint32_t home, uint32_t target,
                           uint32_t set[3])
{
    uint32_t v[3] = {home, target, mc_master_key_shard(m, h)};
    int n = 0;
    for (int i = 0; i < 3; i++) {
        int j = n;
        bool dup = false;
        for (int k = 0; k < n; k++)
            dup |= set[k] == v[i];
        if (dup)
            continue;
        while (j > 0 && set[j - 1] > v[i]) {
            set[j] = set[j - 1];
            j--;
        }
        set[j] = v[i];
        n++;
    }
    for (int i = 0; i < n; i++)
        mc_shard_wrlock(&m->shards[set[i]]);
    return n;
}

static void unlock_put_shards(struct mc_master *m, const uint32_t *set, int n)
{
    for (int i = n; i-- > 0;)
        mc_shard_unlock(&m->shards[set[i]]);
}

/* r when it is one of the locked shards, else UINT32_MAX (the caller retries). */
static uint32_t set_route(const uint32_t *set, int n, uint32_t r)
{
    for (int i = 0; i < n; i++)
        if (set[i] == r)
            return r;
    return UINT32_MAX;
}

int mc_master_put_start(struct mc_master *m, struct mc_id client, const char *key, size_t key_len,
                        uint64_t size, const struct mc_master_replicate_config *cfg,
                        struct mc_put_start_result *out)
{
    CNT_INC(m, put_start_requests);
    struct mc_master_replicate_config defcfg;
    if (!cfg) {
        mc_master_replicate_config_init(&defcfg);
        cfg = &defcfg;
    }
    int rc = check_key(m, key, key_len);
    if (rc != MC_OK)
        goto out;
    if (mc_id_is_zero(client) || size == 0 || size > MC_OBJECT_SIZE_MAX || !out) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    if ((rc = check_put_config(m, cfg)) != MC_OK)
        goto out;
    out->nreplicas = 0;
    uint64_t now = mc_master_now_ms(m);
    uint64_t h = mc_hash_key(key, key_len);
    uint32_t home = (uint32_t)h & MC_SHARD_MASK;
    uint32_t target = cfg->group_id_len
                          ? (uint32_t)mc_hash_key(cfg->group_id, cfg->group_id_len) & MC_SHARD_MASK
                          : home;
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    /* The key may have a record in its home shard (ungrouped) or in the shard its route names
     * (grouped); the new record goes to target. All of them are write-locked together, in
     * ascending order, so the existence check and the insert are one step: every PutStart of a
     * key holds its home shard, and a key's route only gains an entry under that lock, so a
     * route read again under the locks is stable unless it lost its entry (then it names home). */
    uint32_t set[3];
    int nset;
    for (;;) {
        nset = lock_put_shards(m, h, home, target, set);
        uint32_t route = mc_master_key_shard(m, h);
        if (set_route(set, nset, route) == route)
            break;
        unlock_put_shards(m, set, nset);
    }
    for (int k = 0; k < nset && rc == MC_OK; k++)
        if (set[k] != target)
            rc = clear_existing(m, &m->shards[set[k]], h, key, key_len, now, &fl);
    if (rc == MC_OK)
        rc = put_start_locked(m, &m->shards[target], client, h, key, key_len, size, cfg, now, out,
                              &fl);
    unlock_put_shards(m, set, nset);
    mc_freelist_flush(&fl);
out:
    if (rc != MC_OK)
        CNT_INC(m, put_start_failures);
    return rc;
}

/* ---- PutEnd / PutRevoke -------------------------------------------------------------------- */

int mc_master_put_end(struct mc_master *m, struct mc_id client, const char *key, size_t key_len,
                      uint64_t version, uint32_t crc32c, bool has_crc)
{
    CNT_INC(m, put_end_requests);
    int rc = check_key(m, key, key_len);
    if (rc != MC_OK)
        goto out;
    if (mc_id_is_zero(client)) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    struct mc_shard *s;
    struct mc_object *o = lock_key_write(m, key, key_len, &s, &rc);
    if (!o)
        goto out;
    if (version && o->version != version) {
        rc = MC_ERR_INVALID_VERSION; /* a late PutEnd of a Put that was taken over */
        goto unlock;
    }
    struct mc_pending *p = mc_obj_pending(s, o);
    if (!p) { /* already complete: idempotent for its owner */
        if (o->owner_tag != mc_owner_tag(client))
            rc = MC_ERR_ILLEGAL_CLIENT;
        goto unlock;
    }
    if (!mc_id_eq(p->owner, client)) {
        rc = MC_ERR_ILLEGAL_CLIENT;
        goto unlock;
    }
    bool valid = false;
    for (uint8_t i = 0; i < o->nrep && !valid; i++)
        valid = mc_replica_valid(&o->rep[i]);
    if (!valid) { /* every segment it was written to is unmounted: the next sweep erases it */
        rc = MC_ERR_OBJECT_NOT_FOUND;
        goto unlock;
    }
    for (uint8_t i = 0; i < o->nrep; i++)
        if (o->rep[i].status == MC_REPLICA_STATUS_PROCESSING)
            o->rep[i].status = MC_REPLICA_STATUS_COMPLETE;
    o->flags |= MC_OBJ_COMPLETE;
    if (has_crc) {
        o->crc = crc32c;
        o->flags |= MC_OBJ_HAS_CRC;
    }
    uint64_t now = mc_master_now_ms(m);
    if (p->soft_pin_ttl_ms) {
        o->soft_pin_deadline_ms = now + p->soft_pin_ttl_ms;
        o->flags |= MC_OBJ_SOFT_PIN;
        atomic_fetch_add_explicit(&m->c.soft_pin_key_count, 1, memory_order_relaxed);
    }
    /* GrantReadLease(0): the lease deadline doubles as the last access for eviction order. */
    lease_raise(&mc_shard_ent(s, o->ent)->lease_ms, now);
    mc_shard_pend_remove(s, o);
    atomic_fetch_sub_explicit(&m->c.processing_count, 1, memory_order_relaxed);
    mc_shard_refresh_bits(s, o);
    mc_histogram_observe(m->value_size, (double)o->size); /* lock-free */
    mc_obj_ev_put_end(m, s, o); /* offload mode A queues the offload task now (quiet) */
unlock:
    mc_shard_unlock(s);
    mc_obj_ev_unlocked(m); /* answer a holder's poll the task was pushed for, lock-free */
out:
    if (rc != MC_OK)
        CNT_INC(m, put_end_failures);
    return rc;
}

int mc_master_put_revoke(struct mc_master *m, struct mc_id client, const char *key, size_t key_len,
                         uint64_t version)
{
    CNT_INC(m, put_revoke_requests);
    int rc = check_key(m, key, key_len);
    if (rc != MC_OK)
        goto out;
    if (mc_id_is_zero(client)) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    struct mc_shard *s;
    struct mc_object *o = lock_key_write(m, key, key_len, &s, &rc);
    if (!o)
        goto out;
    struct mc_pending *p = mc_obj_pending(s, o);
    if (version && o->version != version)
        rc = MC_ERR_INVALID_VERSION; /* a stale revoke must not kill the Put that took over */
    else if (!p)
        rc = MC_ERR_INVALID_WRITE;
    else if (!mc_id_eq(p->owner, client))
        rc = MC_ERR_ILLEGAL_CLIENT;
    else
        mc_master_erase_object(m, s, o, &fl);
    mc_shard_unlock(s);
    mc_freelist_flush(&fl);
out:
    if (rc != MC_OK)
        CNT_INC(m, put_revoke_failures);
    return rc;
}

/* ---- GetReplicaList / ExistKey / QueryKey -------------------------------------------------- */

/* Fills out from o (shard lock held, any mode) and grants the lease when readable. */
int mc_master_get_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o, uint64_t now,
                         struct mc_get_result *out)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, false));
    uint32_t n = 0;
    bool any_valid = false;
    unsigned first_type = 0;
    for (uint8_t i = 0; i < o->nrep; i++) {
        const struct mc_replica *r = &o->rep[i];
        if (!mc_replica_valid(r))
            continue;
        any_valid = true;
        if (r->status == MC_REPLICA_STATUS_COMPLETE) {
            if (n == 0)
                first_type = r->type;
            mc_replica_fill_desc(o, r, &out->replicas[n++]);
        }
    }
    out->nreplicas = n;
    if (n == 0)
        return any_valid ? MC_ERR_REPLICA_IS_NOT_READY : MC_ERR_OBJECT_NOT_FOUND;
    /* Upstream's cache-hit counters: classified by the first replica returned. */
    CNT_INC(m, valid_get_nums);
    if (first_type == MC_REPLICA_TYPE_MEMORY) {
        CNT_INC(m, mem_cache_hit_nums);
        atomic_fetch_add_explicit(&m->c.mem_cache_hit_bytes, o->size, memory_order_relaxed);
    } else if (first_type == MC_REPLICA_TYPE_LOCAL_DISK) {
        CNT_INC(m, file_cache_hit_nums);
        atomic_fetch_add_explicit(&m->c.file_cache_hit_bytes, o->size, memory_order_relaxed);
    }
    out->version = o->version;
    out->size = o->size;
    out->has_crc = (o->flags & MC_OBJ_HAS_CRC) != 0;
    out->crc32c = o->crc;
    out->lease_ttl_ms = m->cfg.default_kv_lease_ttl_ms;
    mc_master_grant_lease(m, s, o, now);
    return MC_OK;
}

int mc_master_get_replica_list(struct mc_master *m, const char *key, size_t key_len,
                               struct mc_get_result *out)
{
    CNT_INC(m, get_replica_list_requests);
    CNT_INC(m, total_get_nums);
    int rc = check_key(m, key, key_len);
    if (rc != MC_OK || !out) {
        rc = rc != MC_OK ? rc : MC_ERR_INVALID_PARAMS;
        goto out;
    }
    out->nreplicas = 0;
    struct mc_shard *s;
    uint64_t h = mc_hash_key(key, key_len);
    struct mc_object *o = lock_find(m, h, key, key_len, false, &s);
    if (!o) {
        rc = MC_ERR_OBJECT_NOT_FOUND;
        goto out;
    }
    rc = mc_master_get_locked(m, s, o, mc_master_now_ms(m), out);
    bool announce = rc == MC_OK && mc_obj_events_wanted(m, MC_OBJ_EV_READ);
    unsigned found = announce ? mc_obj_found_tiers(o) : 0;
    mc_shard_unlock(s);
    if (announce) { /* after the answer is built and the read lock dropped */
        struct mc_obj_read_ev ev = {
            .key = key, .key_len = key_len, .key_hash = h, .batch_keys = 1, .found = found};
        mc_obj_ev_read(m, &ev);
    }
out:
    if (rc != MC_OK)
        CNT_INC(m, get_replica_list_failures);
    return rc;
}

/* true when o has a readable replica; grants the lease then (shard lock held). */
bool mc_master_exist_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            uint64_t now)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, false));
    for (uint8_t i = 0; i < o->nrep; i++) {
        if (mc_replica_readable(&o->rep[i])) {
            mc_master_grant_lease(m, s, o, now);
            return true;
        }
    }
    return false;
}

int mc_master_exist_key(struct mc_master *m, const char *key, size_t key_len, bool *exists)
{
    CNT_INC(m, exist_key_requests);
    int rc = check_key(m, key, key_len);
    if (rc != MC_OK || !exists) {
        CNT_INC(m, exist_key_failures);
        return rc != MC_OK ? rc : MC_ERR_INVALID_PARAMS;
    }
    *exists = false;
    struct mc_shard *s;
    struct mc_object *o = lock_find(m, mc_hash_key(key, key_len), key, key_len, false, &s);
    if (o) {
        *exists = mc_master_exist_locked(m, s, o, mc_master_now_ms(m));
        mc_shard_unlock(s);
    }
    return MC_OK;
}

/* QueryKey: an admin view of one key (no lease, no promotion, no Get counters). */
int mc_master_query_key(struct mc_master *m, const char *key, size_t key_len,
                        struct mc_key_info *out)
{
    int rc = check_key(m, key, key_len);
    if (rc != MC_OK)
        return rc;
    if (!out)
        return MC_ERR_INVALID_PARAMS;
    memset(out, 0, sizeof(*out));
    struct mc_shard *s;
    struct mc_object *o = lock_find(m, mc_hash_key(key, key_len), key, key_len, false, &s);
    uint32_t n = 0;
    for (uint8_t i = 0; o && i < o->nrep; i++) /* replicas whose storage is still there */
        if (mc_replica_valid(&o->rep[i]))
            mc_replica_fill_desc(o, &o->rep[i], &out->replicas[n++]);
    if (o && n == 0) { /* every segment it was on is unmounted; the next sweep erases it */
        mc_shard_unlock(s);
        o = NULL;
    }
    if (!o)
        return MC_ERR_OBJECT_NOT_FOUND;
    uint64_t now = mc_master_now_ms(m);
    out->version = o->version;
    out->size = o->size;
    out->crc32c = o->crc;
    out->has_crc = (o->flags & MC_OBJ_HAS_CRC) != 0;
    out->complete = (o->flags & MC_OBJ_COMPLETE) != 0;
    struct mc_pending *p = mc_obj_pending(s, o);
    if (p)
        out->put_owner = p->owner;
    uint64_t lease = atomic_load_explicit(&mc_shard_ent(s, o->ent)->lease_ms, memory_order_relaxed);
    out->lease_remaining_ms = lease > now ? lease - now : 0;
    out->soft_pin_remaining_ms = mc_obj_soft_pinned(o, now) ? o->soft_pin_deadline_ms - now : 0;
    out->hard_pinned = (o->flags & MC_OBJ_HARD_PIN) != 0;
    out->offload_pending = (o->flags & MC_OBJ_OFFLOADING) != 0;
    const struct mc_group *grp = mc_obj_group(o);
    if (grp) {
        memcpy(out->group_id, grp->id, grp->id_len);
        out->group_id[grp->id_len] = 0;
    }
    out->nreplicas = n;
    mc_shard_unlock(s);
    return MC_OK;
}

/* ---- Remove / RemoveAll ---------------------------------------------------------------------- */

/* Remove rules for o (write lock): erases it to fl or returns the refusal. Its disk copies
 * are deleted under the delete rule, recorded for op (NULL: nobody waits; offload.h). */
int mc_master_remove_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            bool force, uint64_t now, struct mc_freelist *fl, struct mc_delop *op)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true));
    const struct mc_obj_remove_ev ev = {.force = force, .fl = fl, .op = op};
    uint64_t lease = atomic_load_explicit(&mc_shard_ent(s, o->ent)->lease_ms, memory_order_relaxed);
    if (!force && now < lease)
        return MC_ERR_OBJECT_HAS_LEASE;
    if (o->flags & MC_OBJ_PROCESSING)
        return MC_ERR_REPLICA_IS_NOT_READY;
    /* a promotion does not block Remove: it is cancelled (or refuses the Remove) */
    int rc = mc_obj_ev_remove_claim(m, s, o, &ev);
    if (rc != MC_OK)
        return rc;
    for (uint8_t i = 0; i < o->nrep; i++) {
        if (o->rep[i].status != MC_REPLICA_STATUS_COMPLETE)
            return MC_ERR_REPLICA_IS_NOT_READY;
        /* an offload source does not block a Remove: the task is cancelled with the object */
        if (!force && o->rep[i].refcnt &&
            !(o->rep[i].type == MC_REPLICA_TYPE_MEMORY && (o->flags & MC_OBJ_OFFLOADING)))
            return MC_ERR_OBJECT_HAS_REPLICATION_TASK;
    }
    /* the delete rule: its disk copies' deletes are queued first (offload) */
    rc = mc_obj_ev_before_remove(m, s, o, &ev);
    if (rc != MC_OK)
        return rc;
    if (now < lease) {
        /* Forced under a lease: a reader may be reading the buffers, which must not be reused
         * (and rewritten) before the lease ends. The key goes now, the space then. */
        detach_object(m, s, o);
        mc_discard_push(m->discard, o, lease, false, fl);
        return MC_OK;
    }
    mc_master_erase_object(m, s, o, fl);
    return MC_OK;
}

/* One Remove; its deletes are recorded for op (NULL: nobody waits). */
static int remove_one(struct mc_master *m, const char *key, size_t key_len, bool force,
                      struct mc_delop *op, bool wake)
{
    CNT_INC(m, remove_requests);
    int rc = check_key(m, key, key_len);
    if (rc != MC_OK)
        goto out;
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    struct mc_shard *s;
    struct mc_object *o = lock_key_write(m, key, key_len, &s, &rc);
    if (!o)
        goto out;
    rc = mc_master_remove_locked(m, s, o, force, mc_master_now_ms(m), &fl, op);
    mc_shard_unlock(s);
    mc_freelist_flush(&fl);
    if (wake)
        mc_obj_ev_unlocked(m); /* the deletes pushed under the lock */
out:
    if (rc != MC_OK)
        CNT_INC(m, remove_failures);
    return rc;
}

int mc_master_remove(struct mc_master *m, const char *key, size_t key_len, bool force)
{
    return remove_one(m, key, key_len, force, NULL, true);
}

/* The waiting forms share this: an operation for the deletes (none without the tier), run,
 * then seal. */
static struct mc_delop *op_begin(struct mc_master *m, mc_master_done_fn done, void *arg, int *rc)
{
    *rc = MC_OK;
    if (!m->delwait)
        return NULL;
    struct mc_delop *op = mc_delop_new(done, arg);
    if (!op)
        *rc = MC_ERR_INTERNAL_ERROR;
    return op;
}

static int op_end(struct mc_master *m, struct mc_delop *op, int rc)
{
    if (!op)
        return rc;
    return mc_delop_seal(m->delwait, op, rc) ? rc : MC_MASTER_PENDING;
}

int mc_master_remove_wait(struct mc_master *m, const char *key, size_t key_len, bool force,
                          mc_master_done_fn done, void *arg)
{
    int rc;
    struct mc_delop *op = op_begin(m, done, arg, &rc);
    if (rc != MC_OK)
        return rc;
    return op_end(m, op, remove_one(m, key, key_len, force, op, true));
}

int mc_master_batch_remove_wait(struct mc_master *m, const struct mc_key_ref *keys, size_t n,
                                bool force, int *rcs, mc_master_done_fn done, void *arg)
{
    if (n && (!keys || !rcs))
        return MC_ERR_INVALID_PARAMS;
    int rc;
    struct mc_delop *op = op_begin(m, done, arg, &rc);
    if (rc != MC_OK)
        return rc;
    /* one wake at the end: each holder gets the batch's deletes in one answer */
    for (size_t i = 0; i < n; i++)
        rcs[i] = remove_one(m, keys[i].data, keys[i].len, force, op, false);
    mc_obj_ev_unlocked(m);
    return op_end(m, op, MC_OK);
}

uint64_t mc_master_each_object(struct mc_master *m, mc_object_visit_fn fn, void *arg)
{
    uint64_t hits = 0;
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    for (uint32_t si = 0; si < MC_NSHARDS; si++) {
        struct mc_shard *s = &m->shards[si];
        mc_shard_wrlock(s);
        /* Downwards: an erase moves the last entry (already visited) into the hole. */
        for (uint32_t i = s->n; i-- > 0;)
            hits += fn(m, s, mc_ent_obj(mc_shard_ent(s, i)), &fl, arg);
        mc_shard_unlock(s);
        mc_freelist_flush(&fl);
        mc_obj_ev_unlocked(m); /* deletes pushed under the lock */
    }
    return hits;
}

int mc_master_remove_all(struct mc_master *m, bool force, uint64_t *removed)
{
    uint64_t count = mc_master_remove_all_run(m, force, NULL);
    if (removed)
        *removed = count;
    return MC_OK;
}

int mc_master_remove_all_wait(struct mc_master *m, bool force, uint64_t *removed,
                              mc_master_done_fn done, void *arg)
{
    int rc;
    struct mc_delop *op = op_begin(m, done, arg, &rc);
    if (rc != MC_OK)
        return rc;
    uint64_t count = mc_master_remove_all_run(m, force, op);
    if (removed)
        *removed = count;
    return op_end(m, op, MC_OK);
}

/* Exposed for the batches, offload and promotion (objects.h). */
struct mc_object *mc_master_lock_find(struct mc_master *m, uint64_t h, const char *key, size_t len,
                                      bool write, struct mc_shard **out)
{
    return lock_find(m, h, key, len, write, out);
}

int mc_master_check_key(const struct mc_master *m, const char *key, size_t len)
{
    return check_key(m, key, len);
}
