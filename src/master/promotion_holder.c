/*
 * promotion_holder.c - promotion's holder-side operations (see promotion.h): the heartbeat that
 * hands out tasks, AllocStart (the staged replica in the holder's own segment), success and
 * failure. Shared state: promotion_internal.h.
 */
#include <stdlib.h>

#include "common/hash.h"
#include "common/log.h"
#include "master/freelist.h"
#include "master/master_state.h"
#include "master/objects.h"
#include "master/promotion.h"
#include "master/promotion_internal.h"
#include "master/shard.h"
#include "mooncake/errors.h"

#define COMP "promotion"

/* ---- holder operations --------------------------------------------------------------------- */

int mc_master_promotion_heartbeat(struct mc_master *m, struct mc_id holder, uint32_t max_items,
                                  uint32_t wait_ms, mc_mailbox_reply_fn reply, void *arg)
{
    if (mc_id_is_zero(holder) || !reply)
        return MC_ERR_INVALID_PARAMS;
    if (!m->mailboxes)
        return MC_ERR_UNABLE_OFFLOAD; /* no LOCAL_DISK tier */
    uint32_t cap = m->promoter ? m->promoter->max_per_hb : 1;
    uint32_t max = max_items == 0 || max_items > cap ? cap : max_items;
    int rc = mc_mailbox_park(m->mailboxes, holder, MC_TASK_PROMOTION, max, wait_ms, reply, arg);
    return rc == MC_ERR_CLIENT_NOT_FOUND ? MC_ERR_SEGMENT_NOT_FOUND : rc;
}

/* Finds key's object (write-locked) and task_id's record; *rc the refusal when either is
 * missing (the shard is then unlocked). */
static struct promo_task *find_task(struct mc_master *m, struct mc_id holder, uint64_t task_id,
                                    const char *key, size_t len, struct mc_shard **sp,
                                    struct mc_object **op, int *rc)
{
    *rc = mc_master_check_key(m, key, len);
    if (*rc != MC_OK)
        return NULL;
    if (mc_id_is_zero(holder) || !m->promoter) {
        *rc = MC_ERR_INVALID_PARAMS;
        return NULL;
    }
    uint64_t h = mc_hash_key(key, len);
    struct mc_object *o = mc_master_lock_find(m, h, key, len, true, sp);
    if (!o) {
        *rc = MC_ERR_OBJECT_NOT_FOUND;
        return NULL;
    }
    struct promo_task *t = task_by_id(&m->promoter->tab[(*sp)->index], task_id);
    if (!t || t->version != o->version) {
        mc_shard_unlock(*sp);
        *rc = MC_ERR_REPLICA_IS_NOT_READY;
        return NULL;
    }
    if (!mc_id_eq(t->holder, holder)) {
        mc_shard_unlock(*sp);
        *rc = MC_ERR_INVALID_PARAMS;
        return NULL;
    }
    *op = o;
    return t;
}

/* The holder reported on a task of key the master does not have: drop its mailbox entry, if
 * any (only one of that key: the id may be another key's live task). */
static void forget_stale(struct mc_master *m, struct mc_id holder, uint64_t task_id,
                         const char *key, size_t len)
{
    if (m->mailboxes && !mc_id_is_zero(holder) && mc_master_check_key(m, key, len) == MC_OK)
        free(mc_mailbox_remove(m->mailboxes, holder, task_id, key, len));
}

/* Places t's staged MEMORY replica in one of its holder's own segments (promotion.h, "Staged
 * space"; preferred names are never followed: a range elsewhere would outlive a stopped holder's
 * mount) and fills *out. s write-locked; *op may move (the object record grows). */
static int stage_locked(struct mc_master *m, struct mc_shard *s, struct mc_object **op,
                        struct promo_task *t, struct mc_replica_desc *out)
{
    struct mc_object *o = *op;
    if (o->nrep >= MC_MAX_REPLICAS)
        return MC_ERR_NO_AVAILABLE_HANDLE;
    struct mc_segment_alloc al;
    if (mc_segments_allocate_owned(m->segs, t->size, t->holder, &al) != MC_OK)
        return MC_ERR_NO_AVAILABLE_HANDLE;
    struct mc_object *no = mc_shard_obj_grow(s, o); /* o moves: nobody keeps its address */
    if (!no) {
        mc_segment_alloc_release(&al);
        return MC_ERR_INTERNAL_ERROR;
    }
    *op = o = no;
    struct mc_replica *r = &o->rep[o->nrep - 1];
    r->id = (uint32_t)atomic_fetch_add_explicit(&m->next_replica_id, 1, memory_order_relaxed);
    if (r->id == 0) /* 0 means "not staged" in a task */
        r->id = (uint32_t)atomic_fetch_add_explicit(&m->next_replica_id, 1, memory_order_relaxed);
    r->type = MC_REPLICA_TYPE_MEMORY;
    r->status = MC_REPLICA_STATUS_PROCESSING;
    r->u.seg = al.seg;
    r->offset = al.offset;
    r->handle = al.handle;
    mc_shard_refresh_bits(s, o);
    t->staged_id = r->id;
    t->start_ms = mc_master_now_ms(m); /* a fresh reaper window for the transfer */
    mc_replica_fill_desc(o, r, out);
    return MC_OK;
}

int mc_master_promotion_alloc_start(struct mc_master *m, struct mc_id holder, uint64_t task_id,
                                    const char *key, size_t key_len, uint64_t size,
                                    const char *const *preferred, size_t npreferred,
                                    struct mc_replica_desc *out)
{
    if (!out || (npreferred && !preferred))
        return MC_ERR_INVALID_PARAMS;
    struct mc_shard *s;
    struct mc_object *o;
    int rc;
    struct promo_task *t = find_task(m, holder, task_id, key, key_len, &s, &o, &rc);
    if (!t) {
        if (rc == MC_ERR_REPLICA_IS_NOT_READY || rc == MC_ERR_OBJECT_NOT_FOUND)
            forget_stale(m, holder, task_id, key, key_len);
        return rc;
    }
    if (size != t->size)
        rc = MC_ERR_INVALID_PARAMS;
    else if (t->staged_id)
        rc = MC_ERR_REPLICA_IS_NOT_READY;
    else
        rc = stage_locked(m, s, &o, t, out);
    mc_shard_unlock(s);
    return rc;
}

int mc_master_promotion_stage(struct mc_master *m, uint64_t task_id, const char *key,
                              size_t key_len, struct mc_replica_desc *out)
{
    if (!out || !m->promoter)
        return MC_ERR_INVALID_PARAMS;
    int rc = mc_master_check_key(m, key, key_len);
    if (rc != MC_OK)
        return rc;
    struct mc_shard *s;
    struct mc_object *o = mc_master_lock_find(m, mc_hash_key(key, key_len), key, key_len, true, &s);
    if (!o)
        return MC_ERR_OBJECT_NOT_FOUND;
    struct promo_task *t = task_by_id(&m->promoter->tab[s->index], task_id);
    if (!t || t->version != o->version) {
        rc = MC_ERR_REPLICA_IS_NOT_READY;
    } else if (t->staged_id) {
        /* handed out again (its first answer went to a closed connection): the same range */
        int ri = replica_index(o, t->staged_id);
        if (ri >= 0 && mc_replica_valid(&o->rep[ri]))
            mc_replica_fill_desc(o, &o->rep[ri], out);
        else
            rc = MC_ERR_REPLICA_IS_NOT_READY;
    } else {
        rc = stage_locked(m, s, &o, t, out);
    }
    mc_shard_unlock(s);
    return rc;
}

int mc_master_promotion_success(struct mc_master *m, struct mc_id holder, uint64_t task_id,
                                const char *key, size_t key_len)
{
    struct mc_shard *s;
    struct mc_object *o;
    int rc;
    struct promo_task *t = find_task(m, holder, task_id, key, key_len, &s, &o, &rc);
    if (!t) {
        if (rc == MC_ERR_OBJECT_NOT_FOUND)
            rc = MC_ERR_REPLICA_IS_NOT_READY; /* removed meanwhile: a stale task */
        if (rc == MC_ERR_REPLICA_IS_NOT_READY) {
            forget_stale(m, holder, task_id, key, key_len);
            /* the holder is done with it */
            mc_promo_park_release(m->promoter, true, holder, task_id);
        }
        return rc;
    }
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    if (!t->staged_id) {
        rc = MC_ERR_REPLICA_IS_NOT_READY; /* nothing staged: the task stays */
        goto unlock;
    }
    int ri = replica_index(o, t->staged_id);
    if (ri < 0 || !mc_replica_valid(&o->rep[ri])) {
        mc_promo_task_end(m, s, t, o, &fl, END_CANCELLED); /* its segment went away */
        rc = MC_ERR_REPLICA_IS_NOT_READY;
        goto unlock;
    }
    o->rep[ri].status = MC_REPLICA_STATUS_COMPLETE;
    uint64_t now = mc_master_now_ms(m);
    /* PutEnd's zero-length lease: the newest LRU position, no lease that blocks eviction */
    _Atomic uint64_t *lease = &mc_shard_ent(s, o->ent)->lease_ms;
    uint64_t cur = atomic_load_explicit(lease, memory_order_relaxed);
    while (cur < now && !atomic_compare_exchange_weak_explicit(
                            lease, &cur, now, memory_order_relaxed, memory_order_relaxed))
        ;
    mc_promo_task_end(m, s, t, o, &fl, END_COMPLETED); /* unpins, refreshes the entry's bits */
unlock:
    mc_shard_unlock(s);
    mc_freelist_flush(&fl);
    return rc;
}

int mc_master_promotion_failure(struct mc_master *m, struct mc_id holder, uint64_t task_id,
                                const char *key, size_t key_len, int reason)
{
    struct mc_shard *s;
    struct mc_object *o;
    int rc;
    struct promo_task *t = find_task(m, holder, task_id, key, key_len, &s, &o, &rc);
    if (!t) {
        if (rc == MC_ERR_OBJECT_NOT_FOUND || rc == MC_ERR_REPLICA_IS_NOT_READY) {
            forget_stale(m, holder, task_id, key, key_len);
            /* the holder is done with it */
            mc_promo_park_release(m->promoter, true, holder, task_id);
            rc = MC_OK; /* idempotent */
        }
        return rc;
    }
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    mc_debug(COMP, "promotion failed by its holder", "task=%llu reason=%d",
             (unsigned long long)task_id, reason);
    mc_promo_task_end(m, s, t, o, &fl, END_FAILED);
    mc_shard_unlock(s);
    mc_freelist_flush(&fl);
    return MC_OK;
}
