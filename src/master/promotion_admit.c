/*
 * promotion_admit.c - promotion's admission (see promotion.h): the gates, the sketch's victim
 * level and the eviction requests it rations (request_room), the retry candidates, and the
 * eviction tick that retries them. Shared state: promotion_internal.h.
 */
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "master/freelist.h"
#include "master/master_state.h"
#include "master/objects.h"
#include "master/promotion.h"
#include "master/promotion_core.h"
#include "master/promotion_internal.h"
#include "master/shard.h"
#include "master/sketch.h"
#include "mooncake/errors.h"

/* A Get handler's admissions push quietly and the holder's parked poll is answered after the
 * Get's reply is sent (mc_master_promotion_defer_wake / _wake_after): per thread, so a Get that
 * admitted nothing touches no shared state. */
static _Thread_local bool t_wake_deferred, t_wake_pending;

void mc_master_promotion_defer_wake(void)
{
    t_wake_deferred = true;
}

void mc_master_promotion_wake_after(struct mc_master *m)
{
    t_wake_deferred = false;
    if (!t_wake_pending)
        return;
    t_wake_pending = false;
    if (m->mailboxes)
        mc_mailboxes_wake(m->mailboxes);
}

enum admit_rc {
    ADMIT_OK,
    ADMIT_TRANSIENT, /* watermark or cap: worth retrying */
    ADMIT_NOT_ELIGIBLE,
    ADMIT_IN_FLIGHT, /* a task exists already */
};

/* ---- retry candidates ---------------------------------------------------------------------- */

static void cand_lock(struct mc_promoter *p)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    pthread_mutex_lock(&p->cand_lock);
}
static void cand_unlock(struct mc_promoter *p)
{
    pthread_mutex_unlock(&p->cand_lock);
    mc_lo_release(MC_LO_LEAF, 0);
}

static struct cand **cand_slot(struct mc_promoter *p, uint64_t h, const char *key, size_t len)
{
    struct cand **pp = &p->cb[(h >> 20) & (CAND_BUCKETS - 1)];
    while (*pp && !((*pp)->hash == h && (*pp)->key_len == len && !memcmp((*pp)->key, key, len)))
        pp = &(*pp)->next;
    return pp;
}

/* Funnel changes of the candidate table; made after cand_lock is dropped (both are leaves, and
 * leaves are never nested). */
static void cand_count(struct mc_promoter *p, uint64_t recorded, uint64_t admitted,
                       uint64_t dropped)
{
    if (!recorded && !admitted && !dropped)
        return;
    funnel_lock(p);
    p->f.candidate_recorded += recorded;
    p->f.candidate_admitted += admitted;
    p->f.candidate_dropped += dropped;
    p->f.candidates = p->f.candidates + recorded - admitted - dropped;
    funnel_unlock(p);
}

static void cand_record(struct mc_promoter *p, uint64_t h, const char *key, size_t len,
                        uint64_t now)
{
    uint64_t rec = 0, drop = 0;
    cand_lock(p);
    struct cand **pp = cand_slot(p, h, key, len);
    if (!*pp) {
        struct cand *c = NULL;
        if (atomic_load_explicit(&p->ncand, memory_order_relaxed) < MC_PROMO_CANDIDATES_MAX)
            c = malloc(sizeof(*c) + len);
        if (c) {
            c->next = NULL;
            c->hash = h;
            c->first_seen_ms = now;
            c->retry_after_ms = now + MC_PROMO_BACKOFF_MIN_MS;
            c->retries = 0;
            c->key_len = (uint16_t)len;
            memcpy(c->key, key, len);
            *pp = c;
            atomic_fetch_add_explicit(&p->ncand, 1, memory_order_relaxed);
            rec = 1;
        } else {
            rec = drop = 1; /* table full (or out of memory): recorded and dropped at once */
        }
    }
    cand_unlock(p);
    cand_count(p, rec, 0, drop);
}

/* The key was admitted: a candidate of it is done (counted admitted). */
static void cand_admitted(struct mc_promoter *p, uint64_t h, const char *key, size_t len)
{
    if (atomic_load_explicit(&p->ncand, memory_order_relaxed) == 0)
        return;
    struct cand *c = NULL;
    cand_lock(p);
    struct cand **pp = cand_slot(p, h, key, len);
    if (*pp) {
        c = *pp;
        *pp = c->next;
        atomic_fetch_sub_explicit(&p->ncand, 1, memory_order_relaxed);
    }
    cand_unlock(p);
    if (c) {
        free(c);
        cand_count(p, 0, 1, 0);
    }
}

/* ---- admission ----------------------------------------------------------------------------- */

/* The victims' level, x 16: the mean estimated frequency of the objects the last eviction
 * cycle that evicted anything evicted, halved once per sketch aging since (their estimates
 * halved with it); 0 before any such cycle. */
static uint64_t victim_level_x16(struct mc_promoter *p)
{
    uint64_t v = atomic_load_explicit(&p->victims, memory_order_relaxed);
    uint32_t aged = (uint32_t)mc_sketch_agings(&p->sketch) - (uint32_t)(v >> 32);
    uint64_t level = v & 0xffffffffull;
    return aged >= 32 ? 0 : level >> aged;
}

uint32_t mc_promotion_victim_estimate(struct mc_master *m, struct mc_object *o)
{
    struct mc_promoter *p = m->promoter;
    if (!p || !m->cfg.promotion_on_hit)
        return 0;
    return mc_sketch_estimate(&p->sketch, mc_hash_key(mc_obj_key(o), o->key_len));
}

void mc_promotion_note_victims(struct mc_master *m, uint64_t sum, uint64_t n)
{
    struct mc_promoter *p = m->promoter;
    if (!p || !m->cfg.promotion_on_hit || n == 0)
        return;
    uint64_t level = sum * 16 / n; /* <= 255 * 16 */
    atomic_store_explicit(&p->victims,
                          (uint64_t)(uint32_t)mc_sketch_agings(&p->sketch) << 32 | level,
                          memory_order_relaxed);
}

/* Hot beats cold: a watermark rejection of key h asks the eviction loop for one cycle, but only
 * when the key's estimated frequency exceeds the victims' level (the objects such a cycle evicts
 * are the LRU tail, the kind of objects the last cycle evicted: a candidate no hotter than they
 * are waits for room made by other means instead of displacing them), and at most once per
 * back-off period. Returns whether the candidate out-ranked the victims. */
static bool request_room(struct mc_master *m, struct mc_promoter *p, uint64_t h, uint64_t now)
{
    if ((uint64_t)mc_sketch_estimate(&p->sketch, h) * 16 <= victim_level_x16(p))
        return false;
    uint64_t next = atomic_load_explicit(&p->room_next_ms, memory_order_relaxed);
    if (now < next)
        return true;
    uint64_t bo = atomic_load_explicit(&p->room_backoff_ms, memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&p->room_next_ms, &next, now + bo,
                                                 memory_order_relaxed, memory_order_relaxed))
        return true; /* another reader asked just now */
    if (!atomic_exchange_explicit(&p->room_pending, true, memory_order_relaxed))
        atomic_store_explicit(&p->room_evicted_mark,
                              atomic_load_explicit(&m->c.evicted_key_count, memory_order_relaxed),
                              memory_order_relaxed);
    atomic_store_explicit(&m->need_eviction, true, memory_order_relaxed);
    return true;
}

/* Gates 2-4 and the admission itself (gate 1, the sketch, is the caller's). decision: this is a
 * Get's admission decision, whose refusals are counted (a retry of a candidate is not one). */
static enum admit_rc admit(struct mc_master *m, const char *key, size_t len, uint64_t h,
                           uint64_t now, bool decision, bool *watermark)
{
    struct mc_promoter *p = m->promoter;
    *watermark = false;
    if (mc_segments_used_ratio(m->segs) >= m->cfg.eviction_high_watermark_ratio) {
        if (decision)
            FUNNEL_INC(p, rejected_watermark);
        *watermark = true;
        return ADMIT_TRANSIENT;
    }
    /* At the cap, refuse before taking the shard's write lock: hot disk-only reads while the
     * cap is full must not write-lock their shards (and stall its readers) for nothing. The
     * exact check is made again under the lock. */
    if (atomic_load_explicit(&p->in_flight, memory_order_relaxed) >= p->limit) {
        if (decision)
            FUNNEL_INC(p, rejected_cap);
        return ADMIT_TRANSIENT;
    }
    struct mc_shard *s;
    struct mc_object *o = mc_master_lock_find(m, h, key, len, true, &s);
    if (!o)
        return ADMIT_NOT_ELIGIBLE;
    enum admit_rc rc = ADMIT_NOT_ELIGIBLE;
    struct mc_replica *src = NULL;
    if (o->flags & MC_OBJ_PROMOTING) {
        rc = ADMIT_IN_FLIGHT;
        goto unlock;
    }
    if ((o->flags & MC_OBJ_PROCESSING) || !(o->flags & MC_OBJ_COMPLETE))
        goto unlock;
    for (uint8_t i = 0; i < o->nrep; i++) {
        struct mc_replica *r = &o->rep[i];
        if (r->type == MC_REPLICA_TYPE_MEMORY)
            goto unlock;
        if (!src && r->type == MC_REPLICA_TYPE_LOCAL_DISK && mc_replica_readable(r))
            src = r;
    }
    /* the holder stages in its own DRAM only: one without a mounted segment gets no task */
    if (!src || src->refcnt >= MC_REPLICA_REFCNT_MAX ||
        !mc_mailbox_exists(m->mailboxes, src->u.holder->id) ||
        !mc_segments_owner_mounted(m->segs, src->u.holder->id))
        goto unlock;
    funnel_lock(p);
    if (p->f.in_flight + p->f.parked >= p->limit) { /* parked ranges count: they are bounded */
        p->f.rejected_cap += decision;
        funnel_unlock(p);
        rc = ADMIT_TRANSIENT;
        goto unlock;
    }
    struct promo_task t = {
        .task_id = mc_mailboxes_reserve_id(m->mailboxes),
        .key_hash = h,
        .version = o->version,
        .size = o->size,
        .holder = src->u.holder->id,
        .source_id = src->id,
        .start_ms = now,
        .admit_ms = now,
    };
    if (task_add(&p->tab[s->index], &t) != 0) {
        funnel_unlock(p);
        goto unlock;
    }
    p->f.in_flight++;
    p->f.admitted++;
    atomic_store_explicit(&p->in_flight, p->f.in_flight, memory_order_relaxed);
    funnel_unlock(p);
    src->refcnt++;
    o->flags |= MC_OBJ_PROMOTING;
    uint32_t crc = o->crc;
    bool has_crc = (o->flags & MC_OBJ_HAS_CRC) != 0;
    mc_shard_unlock(s);

    int prc = mc_mailbox_push_quiet_id(m->mailboxes, t.holder, MC_TASK_PROMOTION, key, len,
                                       t.version, t.size, crc, has_crc, 0, t.task_id);
    if (prc == MC_OK) {
        if (t_wake_deferred)
            t_wake_pending = true; /* the Get's reply goes first (mc_master_promotion_wake_after) */
        else
            mc_mailboxes_wake(m->mailboxes);
    }
    if (prc != MC_OK) {
        /* the holder's mailbox went away in between (unmount, expiry): undo as a cancel */
        struct mc_freelist fl;
        mc_freelist_init(&fl);
        o = mc_master_lock_find(m, h, key, len, true, &s);
        if (o) {
            struct promo_task *tt = task_by_id(&m->promoter->tab[s->index], t.task_id);
            if (tt)
                mc_promo_task_end(m, s, tt, mc_shard_find_version(s, h, tt->version), &fl,
                                  END_CANCELLED);
            mc_shard_unlock(s);
        }
        mc_freelist_flush(&fl);
        return ADMIT_NOT_ELIGIBLE;
    }
    return ADMIT_OK;
unlock:
    mc_shard_unlock(s);
    return rc;
}

/* Gate 1 against threshold, then the rest. */
static void on_read(struct mc_master *m, const char *key, size_t key_len, uint64_t key_hash,
                    uint32_t threshold)
{
    struct mc_promoter *p = m->promoter;
    uint32_t freq = mc_sketch_increment(&p->sketch, key_hash);
    funnel_lock(p);
    p->f.attempts++;
    bool low = freq < threshold;
    if (low)
        p->f.rejected_frequency++;
    funnel_unlock(p);
    if (low)
        return;
    uint64_t now = mc_master_now_ms(m);
    bool wm;
    enum admit_rc rc = admit(m, key, key_len, key_hash, now, true, &wm);
    if (rc == ADMIT_OK) {
        cand_admitted(p, key_hash, key, key_len);
    } else if (rc == ADMIT_TRANSIENT) {
        cand_record(p, key_hash, key, key_len, now);
        if (wm) {
            if (request_room(m, p, key_hash, now))
                FUNNEL_INC(p, room_asked);
            else
                FUNNEL_INC(p, room_declined);
        }
    }
}

void mc_promotion_on_memory_read(struct mc_master *m, uint64_t key_hash)
{
    if (m->promoter)
        (void)mc_sketch_increment(&m->promoter->sketch, key_hash);
}

void mc_promotion_on_get(struct mc_master *m, const char *key, size_t key_len, uint64_t key_hash)
{
    if (m->promoter)
        on_read(m, key, key_len, key_hash, m->promoter->threshold);
}

void mc_promotion_on_batch_get(struct mc_master *m, const char *key, size_t key_len,
                               uint64_t key_hash, size_t batch_keys)
{
    struct mc_promoter *p = m->promoter;
    if (p)
        on_read(m, key, key_len, key_hash, batch_keys > 1 ? p->batch_threshold : p->threshold);
}

/* ---- the eviction tick: room back-off, candidate retries ----------------------------------- */

struct due {
    uint64_t hash;
    uint16_t len;
    char *key;
};

int mc_master_promotion_tick(struct mc_master *m)
{
    struct mc_promoter *p = m->promoter;
    if (!p)
        return 0;
    if (m->mailboxes)
        mc_mailboxes_tick_polls(m->mailboxes); /* heartbeats past their wait */
    uint64_t now = mc_master_now_ms(m);
    if (atomic_load_explicit(&p->room_pending, memory_order_relaxed)) {
        /* the cycle asked for ran (or the next tick will run it): did it free anything? */
        if (!atomic_load_explicit(&m->need_eviction, memory_order_relaxed)) {
            atomic_store_explicit(&p->room_pending, false, memory_order_relaxed);
            uint64_t ev = atomic_load_explicit(&m->c.evicted_key_count, memory_order_relaxed);
            uint64_t bo = atomic_load_explicit(&p->room_backoff_ms, memory_order_relaxed);
            if (ev == atomic_load_explicit(&p->room_evicted_mark, memory_order_relaxed))
                bo = bo * 2 > MC_PROMO_BACKOFF_MAX_MS ? MC_PROMO_BACKOFF_MAX_MS : bo * 2;
            else
                bo = MC_PROMO_BACKOFF_MIN_MS;
            atomic_store_explicit(&p->room_backoff_ms, bo, memory_order_relaxed);
        }
    }
    if (atomic_load_explicit(&p->ncand, memory_order_relaxed) == 0)
        return 0;
    /* Collect up to a batch of due candidates (keys copied), dropping the dead ones. */
    struct due due[MC_PROMO_RETRY_BATCH];
    size_t nd = 0;
    uint64_t dropped = 0;
    cand_lock(p);
    for (uint32_t b = 0; b < CAND_BUCKETS && nd < MC_PROMO_RETRY_BATCH; b++) {
        uint32_t bi = (p->cursor + b) & (CAND_BUCKETS - 1);
        for (struct cand **pp = &p->cb[bi]; *pp && nd < MC_PROMO_RETRY_BATCH;) {
            struct cand *c = *pp;
            if (now >= c->first_seen_ms + MC_PROMO_CANDIDATE_TTL_MS ||
                c->retries >= MC_PROMO_CANDIDATE_RETRIES) {
                *pp = c->next;
                free(c);
                atomic_fetch_sub_explicit(&p->ncand, 1, memory_order_relaxed);
                dropped++;
                continue;
            }
            if (now >= c->retry_after_ms) {
                char *k = malloc(c->key_len);
                if (k) {
                    memcpy(k, c->key, c->key_len);
                    due[nd++] = (struct due){.hash = c->hash, .len = c->key_len, .key = k};
                }
            }
            pp = &c->next;
        }
        if (nd >= MC_PROMO_RETRY_BATCH)
            p->cursor = bi; /* resume here next tick */
    }
    cand_unlock(p);
    cand_count(p, 0, 0, dropped);
    int admitted = 0;
    for (size_t i = 0; i < nd; i++) {
        bool wm;
        FUNNEL_INC(p, candidate_retried);
        enum admit_rc rc = admit(m, due[i].key, due[i].len, due[i].hash, now, false, &wm);
        uint64_t adm = 0, drop = 0;
        struct cand *gone = NULL;
        cand_lock(p);
        struct cand **pp = cand_slot(p, due[i].hash, due[i].key, due[i].len);
        if (*pp) {
            struct cand *c = *pp;
            if (rc == ADMIT_TRANSIENT && c->retries + 1 < MC_PROMO_CANDIDATE_RETRIES) {
                c->retries++;
                uint64_t bo = (uint64_t)MC_PROMO_BACKOFF_MIN_MS << c->retries; /* 20, 40 .. ms */
                c->retry_after_ms =
                    now + (bo > MC_PROMO_BACKOFF_MAX_MS ? MC_PROMO_BACKOFF_MAX_MS : bo);
            } else { /* admitted, gone, not eligible, or out of retries */
                *pp = c->next;
                gone = c;
                atomic_fetch_sub_explicit(&p->ncand, 1, memory_order_relaxed);
                adm = rc == ADMIT_OK;
                drop = !adm;
            }
        }
        cand_unlock(p);
        free(gone);
        cand_count(p, 0, adm, drop);
        admitted += (int)adm;
        free(due[i].key);
        if (rc == ADMIT_TRANSIENT && wm)
            (void)request_room(m, p, due[i].hash, now);
    }
    return admitted;
}
