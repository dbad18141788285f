/*
 * promotion.c - promotion on hit (see promotion.h): the gates, the shards' promotion tables,
 * the holder-side operations, cancellation, the reaper, retry candidates and the funnel.
 *
 * State (struct mc_promoter):
 *   sketch      the frequency gate (sketch.h), lock-free;
 *   tab[shard]  per shard, a small dense array of task records, guarded by that shard's lock
 *               (write to change, either to read); an object with a record carries
 *               MC_OBJ_PROMOTING, so every hook of the core costs one flag test for the others.
 *               A record names its object by {key hash, version} (versions are unique per
 *               master, and the object record may be reallocated while the task runs), and its
 *               replicas by replica id;
 *   funnel      every counter, under one mutex (a leaf of the lock order): admissions take it
 *               under the shard lock, so the cap check and the in-flight increment are one step
 *               and the cap is exact, not soft;
 *   candidates  a chained hash of retry candidates under its own mutex (a leaf), walked from a
 *               rotating bucket cursor by the eviction tick.
 *
 * Mailbox pushes happen after the shard lock is dropped (a push may answer a parked heartbeat,
 * and replies are never made under master locks): the task id is reserved and the record made
 * under the lock, then pushed. A cancel that runs in between finds no mailbox entry yet and the
 * push then leaves one the holder cannot use; every report on an unknown id (AllocStart, success,
 * failure) removes its mailbox entry, so such an entry lives until the holder's first call on it.
 */
#include "master/promotion.h"

#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/metrics.h"
#include "master/freelist.h"
#include "master/master_internal.h"
#include "master/objects.h"
#include "master/offload.h"
#include "master/promotion_core.h"
#include "master/shard.h"
#include "master/sketch.h"
#include "mooncake/errors.h"

#define COMP "promotion"
#define CAND_BUCKETS 16384u /* ~3 candidates a chain at the 50000 limit */

struct promo_task {
    uint64_t task_id;
    uint64_t key_hash;
    uint64_t version;
    uint64_t size;
    struct mc_id holder;
    uint32_t source_id; /* the pinned LOCAL_DISK replica */
    uint32_t staged_id; /* the staged MEMORY replica (0: not staged yet) */
    uint64_t start_ms;  /* reaper window: admission, then AllocStart */
    uint64_t admit_ms;  /* lag histogram */
};

struct promo_shard {
    struct promo_task *v;
    uint32_t n, cap;
    _Atomic uint32_t count; /* n, readable without the lock (reaper skip) */
};

struct funnel {
#define FUNNEL_FIELD(f, h) uint64_t f;
    MC_PROMOTION_COUNTERS(FUNNEL_FIELD)
#undef FUNNEL_FIELD
    uint64_t in_flight;
    uint64_t candidates;
    uint64_t parked;       /* staged ranges parked now */
    uint64_t parked_bytes; /* their value bytes */
};

/* A staged range whose task ended while its holder may still write it (see "Staged space" in
 * promotion.h): it keeps its allocation (and the segment reference) until released. */
struct parked {
    struct mc_id holder;
    uint64_t task_id;
    struct mc_segment *seg;
    uint32_t handle;
    uint64_t size;
};

struct cand {
    struct cand *next;
    uint64_t hash;
    uint64_t first_seen_ms, retry_after_ms;
    uint32_t retries;
    uint16_t key_len;
    char key[];
};

struct mc_promoter {
    struct mc_sketch sketch;
    uint32_t threshold, batch_threshold, max_per_hb;
    uint64_t limit, timeout_ms;
    struct promo_shard tab[MC_NSHARDS];
    _Atomic uint64_t in_flight; /* mirror of f.in_flight for lock-free skips */

    pthread_mutex_t funnel_lock;
    struct funnel f;
    struct funnel snap; /* taken by the metrics pre-scrape hook */
    struct mc_histogram *lag;

    pthread_mutex_t park_lock; /* a leaf */
    struct parked *pk;
    uint32_t npk, pkcap;
    _Atomic uint32_t npk_seen; /* npk, readable without the lock (skips) */

    pthread_mutex_t cand_lock;
    struct cand *cb[CAND_BUCKETS];
    uint32_t cursor;
    _Atomic uint32_t ncand;

    /* hot beats cold: the victims' level (victim_level), eviction requests */
    _Atomic uint64_t victims; /* sketch agings << 32 | mean estimate of the victims x 16 */
    _Atomic uint64_t room_next_ms;
    _Atomic uint64_t room_backoff_ms;
    _Atomic bool room_pending;
    _Atomic uint64_t room_evicted_mark;
};

enum admit_rc {
    ADMIT_OK,
    ADMIT_TRANSIENT, /* watermark or cap: worth retrying */
    ADMIT_NOT_ELIGIBLE,
    ADMIT_IN_FLIGHT, /* a task exists already */
};

/* ---- funnel -------------------------------------------------------------------------------- */

static void funnel_lock(struct mc_promoter *p)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    pthread_mutex_lock(&p->funnel_lock);
}
static void funnel_unlock(struct mc_promoter *p)
{
    pthread_mutex_unlock(&p->funnel_lock);
    mc_lo_release(MC_LO_LEAF, 0);
}

#define FUNNEL_INC(p, field)                                                                       \
    do {                                                                                           \
        funnel_lock(p);                                                                            \
        (p)->f.field++;                                                                            \
        funnel_unlock(p);                                                                          \
    } while (0)

enum task_end { END_COMPLETED, END_FAILED, END_EXPIRED, END_CANCELLED };

/* A task leaves the table: in_flight - 1 and its outcome + 1, together. */
static void funnel_end(struct mc_promoter *p, enum task_end how, uint64_t bytes)
{
    funnel_lock(p);
    p->f.in_flight--;
    atomic_store_explicit(&p->in_flight, p->f.in_flight, memory_order_relaxed);
    switch (how) {
    case END_COMPLETED:
        p->f.completed++;
        p->f.completed_bytes += bytes;
        break;
    case END_FAILED:
        p->f.failed++;
        break;
    case END_EXPIRED:
        p->f.expired++;
        break;
    case END_CANCELLED:
        p->f.cancelled++;
        break;
    }
    funnel_unlock(p);
}

void mc_master_promotion_stats(struct mc_master *m, struct mc_promotion_stats *out)
{
    struct mc_promoter *p = m->promoter;
    memset(out, 0, sizeof(*out));
    if (!p)
        return;
    funnel_lock(p);
    struct funnel f = p->f;
    funnel_unlock(p);
#define COPY_FIELD(fl, h) out->fl = f.fl;
    MC_PROMOTION_COUNTERS(COPY_FIELD)
#undef COPY_FIELD
    out->in_flight = f.in_flight;
    out->candidates = f.candidates;
    out->parked = f.parked;
    out->parked_bytes = f.parked_bytes;
}

/* ---- parked staged ranges ------------------------------------------------------------------ */

static void park_lock(struct mc_promoter *p)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    pthread_mutex_lock(&p->park_lock);
}
static void park_unlock(struct mc_promoter *p)
{
    pthread_mutex_unlock(&p->park_lock);
    mc_lo_release(MC_LO_LEAF, 0);
}

static void park_count(struct mc_promoter *p, int64_t n, int64_t bytes)
{
    funnel_lock(p);
    p->f.parked = (uint64_t)((int64_t)p->f.parked + n);
    p->f.parked_bytes = (uint64_t)((int64_t)p->f.parked_bytes + bytes);
    funnel_unlock(p);
}

/* Parks r, the staged MEMORY replica of holder's task task_id (an object of size bytes): its
 * range stays allocated, whatever happens to the object, until the holder reports on the task
 * or the segment's mount ends (park_release). Any shard lock may be held. */
static void park_range(struct mc_promoter *p, struct mc_id holder, uint64_t task_id,
                       const struct mc_replica *r, uint64_t size)
{
    bool ok = true;
    park_lock(p);
    if (p->npk == p->pkcap) {
        uint32_t ncap = p->pkcap ? p->pkcap * 2 : 16;
        struct parked *nv = realloc(p->pk, (size_t)ncap * sizeof(*nv));
        if (nv) {
            p->pk = nv;
            p->pkcap = ncap;
        } else {
            ok = false;
        }
    }
    if (ok) {
        p->pk[p->npk++] = (struct parked){.holder = holder,
                                          .task_id = task_id,
                                          .seg = r->u.seg,
                                          .handle = r->handle,
                                          .size = size};
        atomic_store_explicit(&p->npk_seen, p->npk, memory_order_relaxed);
    }
    park_unlock(p);
    if (!ok) {
        /* never freed is safe (a freed range could take the late write); only the space is lost */
        mc_error(COMP, "cannot record a parked staged range (out of memory): its space is lost",
                 "task=%llu size=%llu", (unsigned long long)task_id, (unsigned long long)size);
        return;
    }
    park_count(p, 1, (int64_t)size);
}

/* Releases the parked ranges of holder's task task_id (by_task) or, else, those whose segment's
 * mount ended. No master lock may be held (segment locks are taken). Returns how many. */
static size_t park_release(struct mc_promoter *p, bool by_task, struct mc_id holder,
                           uint64_t task_id)
{
    if (atomic_load_explicit(&p->npk_seen, memory_order_relaxed) == 0)
        return 0;
    struct parked one, *out = &one;
    size_t n = 0;
    int64_t bytes = 0;
    park_lock(p);
    if (!by_task && p->npk > 1)
        out = malloc((size_t)p->npk * sizeof(*out));
    if (!out)
        out = &one; /* out of memory: one this round, the next round takes more */
    size_t cap = out == &one ? 1 : p->npk;
    for (uint32_t i = p->npk; i-- > 0 && n < cap;) {
        struct parked *e = &p->pk[i];
        bool match = by_task ? mc_id_eq(e->holder, holder) && e->task_id == task_id
                             : !mc_segment_alive(e->seg);
        if (!match)
            continue;
        out[n++] = *e;
        *e = p->pk[--p->npk];
    }
    atomic_store_explicit(&p->npk_seen, p->npk, memory_order_relaxed);
    park_unlock(p);
    for (size_t i = 0; i < n; i++) {
        bytes += (int64_t)out[i].size;
        mc_segment_release(out[i].seg, out[i].handle, out[i].size);
    }
    if (out != &one)
        free(out);
    if (n)
        park_count(p, -(int64_t)n, -bytes);
    return n;
}

/* ---- the shards' tables (shard lock held) ------------------------------------------------- */

static struct promo_task *task_by_id(struct promo_shard *ps, uint64_t task_id)
{
    for (uint32_t i = 0; i < ps->n; i++)
        if (ps->v[i].task_id == task_id)
            return &ps->v[i];
    return NULL;
}

static struct promo_task *task_of(struct promo_shard *ps, const struct mc_object *o)
{
    for (uint32_t i = 0; i < ps->n; i++)
        if (ps->v[i].version == o->version)
            return &ps->v[i];
    return NULL;
}

static int task_add(struct promo_shard *ps, const struct promo_task *t)
{
    if (ps->n == ps->cap) {
        uint32_t ncap = ps->cap ? ps->cap * 2 : 4;
        struct promo_task *nv = realloc(ps->v, (size_t)ncap * sizeof(*nv));
        if (!nv)
            return -1;
        ps->v = nv;
        ps->cap = ncap;
    }
    ps->v[ps->n++] = *t;
    atomic_store_explicit(&ps->count, ps->n, memory_order_relaxed);
    return 0;
}

static void task_del(struct promo_shard *ps, struct promo_task *t)
{
    *t = ps->v[--ps->n];
    atomic_store_explicit(&ps->count, ps->n, memory_order_relaxed);
    if (ps->n == 0 && ps->cap > 64) {
        free(ps->v);
        ps->v = NULL;
        ps->cap = 0;
    }
}

static int replica_index(const struct mc_object *o, uint32_t id)
{
    for (uint8_t i = 0; i < o->nrep; i++)
        if (o->rep[i].id == id)
            return i;
    return -1;
}

/* Ends task t of object o (o may be NULL: the object is gone or going with its replicas): the
 * staged replica to fl (when o and fl), the source unpinned, the record erased, the holder's
 * mailbox entry removed, the funnel told. t is invalid afterwards. */
static void task_end(struct mc_master *m, struct mc_shard *s, struct promo_task *t,
                     struct mc_object *o, struct mc_freelist *fl, enum task_end how)
{
    struct mc_promoter *p = m->promoter;
    struct promo_shard *ps = &p->tab[s->index];
    if (o) {
        int si = replica_index(o, t->source_id);
        if (si >= 0 && o->rep[si].refcnt > 0)
            o->rep[si].refcnt--;
        int ri = t->staged_id && how != END_COMPLETED ? replica_index(o, t->staged_id) : -1;
        if (ri >= 0) {
            const struct mc_replica *r = &o->rep[ri];
            if (how != END_FAILED && mc_segment_alive(r->u.seg)) {
                /* the holder may still write it: parked, never freed under a live mount */
                park_range(p, t->holder, t->task_id, r, o->size);
                mc_obj_drop_replica(o, (uint8_t)ri);
            } else if (fl) { /* reported by the holder, or its mount is gone */
                mc_freelist_add_replica(fl, r, o->size);
                mc_obj_drop_replica(o, (uint8_t)ri);
            } /* else it goes with the object */
        }
        o->flags &= ~(uint64_t)MC_OBJ_PROMOTING;
        if (o->ent != MC_NO_INDEX && !(o->flags & MC_OBJ_UNLINKING))
            mc_shard_refresh_bits(s, o);
    }
    struct mc_id holder = t->holder;
    uint64_t id = t->task_id, size = t->size, admit = t->admit_ms;
    task_del(ps, t);
    struct mc_task *mt = !m->mailboxes ? NULL
                         : how == END_COMPLETED || how == END_FAILED
                             ? mc_mailbox_complete(m->mailboxes, holder, id, how == END_FAILED)
                             : NULL;
    if (!mt && m->mailboxes)
        mt = mc_mailbox_remove(m->mailboxes, holder, id, NULL, 0);
    free(mt);
    if (how == END_COMPLETED && p->lag) {
        uint64_t now = mc_master_now_ms(m);
        mc_histogram_observe(p->lag, now > admit ? (double)(now - admit) / 1000.0 : 0.0);
    }
    funnel_end(p, how, size);
}

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

    int prc = mc_mailbox_push_id(m->mailboxes, t.holder, MC_TASK_PROMOTION, key, len, t.version,
                                 t.size, crc, has_crc, 0, t.task_id);
    if (prc != MC_OK) {
        /* the holder's mailbox went away in between (unmount, expiry): undo as a cancel */
        struct mc_freelist fl;
        mc_freelist_init(&fl);
        o = mc_master_lock_find(m, h, key, len, true, &s);
        if (o) {
            struct promo_task *tt = task_by_id(&m->promoter->tab[s->index], t.task_id);
            if (tt)
                task_end(m, s, tt, mc_shard_find_version(s, h, tt->version), &fl, END_CANCELLED);
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

/* ---- the core's hooks ---------------------------------------------------------------------- */

void mc_promotion_object_erased(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    struct mc_promoter *p = m->promoter;
    if (!p || !(o->flags & MC_OBJ_PROMOTING))
        return;
    struct promo_task *t = task_of(&p->tab[s->index], o);
    if (t) /* a staged range is parked; the other replicas go with the object */
        task_end(m, s, t, o, NULL, END_CANCELLED);
    o->flags &= ~(uint64_t)MC_OBJ_PROMOTING;
}

bool mc_promotion_cancel_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                struct mc_freelist *fl)
{
    struct mc_promoter *p = m->promoter;
    if (!p || !(o->flags & MC_OBJ_PROMOTING))
        return false;
    struct promo_task *t = task_of(&p->tab[s->index], o);
    if (!t) {
        o->flags &= ~(uint64_t)MC_OBJ_PROMOTING;
        return false;
    }
    task_end(m, s, t, o, fl, END_CANCELLED);
    return true;
}

int mc_promotion_before_remove(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                               bool force, struct mc_freelist *fl)
{
    struct mc_promoter *p = m->promoter;
    struct promo_task *t = p ? task_of(&p->tab[s->index], o) : NULL;
    if (!t)
        return MC_OK;
    /* Remove's own rules with the promotion's replica and pin left out. */
    for (uint8_t i = 0; i < o->nrep; i++) {
        const struct mc_replica *r = &o->rep[i];
        if (r->id == t->staged_id)
            continue;
        if (r->status != MC_REPLICA_STATUS_COMPLETE)
            return MC_ERR_REPLICA_IS_NOT_READY;
        unsigned pins = r->refcnt - (r->id == t->source_id && r->refcnt > 0 ? 1u : 0u);
        /* an offload pin does not block a Remove either (offload.c cancels it) */
        if (r->type == MC_REPLICA_TYPE_MEMORY && (o->flags & MC_OBJ_OFFLOADING))
            pins = 0;
        if (!force && pins)
            return MC_ERR_OBJECT_HAS_REPLICATION_TASK;
    }
    task_end(m, s, t, o, fl, END_CANCELLED);
    return MC_OK;
}

void mc_promotion_check_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                               struct mc_freelist *fl)
{
    struct mc_promoter *p = m->promoter;
    struct promo_task *t = p ? task_of(&p->tab[s->index], o) : NULL;
    if (!t)
        return;
    int si = replica_index(o, t->source_id);
    int ri = t->staged_id ? replica_index(o, t->staged_id) : 0;
    if (si < 0 || !mc_replica_valid(&o->rep[si]) || ri < 0 ||
        (t->staged_id && !mc_replica_valid(&o->rep[ri])))
        task_end(m, s, t, o, fl, END_CANCELLED);
}

/* Ends, as how, every task for which match(t, arg) holds, one shard write-locked at a time (its
 * object looked up by version: it may be gone). Returns how many. */
static int end_tasks_where(struct mc_master *m,
                           bool (*match)(const struct promo_task *t, const void *arg),
                           const void *arg, enum task_end how)
{
    struct mc_promoter *p = m->promoter;
    int n = 0;
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    for (uint32_t si = 0; si < MC_NSHARDS; si++) {
        struct promo_shard *ps = &p->tab[si];
        if (atomic_load_explicit(&ps->count, memory_order_relaxed) == 0)
            continue;
        struct mc_shard *s = &m->shards[si];
        mc_shard_wrlock(s);
        for (uint32_t i = ps->n; i-- > 0;) {
            struct promo_task *t = &ps->v[i];
            if (!match(t, arg))
                continue;
            task_end(m, s, t, mc_shard_find_version(s, t->key_hash, t->version), &fl, how);
            n++;
        }
        mc_shard_unlock(s);
        mc_freelist_flush(&fl);
    }
    return n;
}

static bool of_holder(const struct promo_task *t, const void *arg)
{
    return mc_id_eq(t->holder, *(const struct mc_id *)arg);
}

void mc_promotion_holder_remounted(struct mc_master *m, struct mc_id holder)
{
    struct mc_promoter *p = m->promoter;
    if (!p || atomic_load_explicit(&p->in_flight, memory_order_relaxed) == 0)
        return;
    int n = end_tasks_where(m, of_holder, &holder, END_CANCELLED);
    if (n) {
        char buf[MC_ID_STRLEN];
        mc_info(COMP, "holder mounted again: its promotion tasks cancelled (read again to retry)",
                "client=%s count=%d", mc_id_format(holder, buf), n);
    }
}

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
    if (size != t->size) {
        rc = MC_ERR_INVALID_PARAMS;
        goto unlock;
    }
    if (t->staged_id) {
        rc = MC_ERR_REPLICA_IS_NOT_READY;
        goto unlock;
    }
    if (o->nrep >= MC_MAX_REPLICAS) {
        rc = MC_ERR_NO_AVAILABLE_HANDLE;
        goto unlock;
    }
    /* the holder's own segments only (promotion.h, "Staged space"); preferred names are not
     * followed: a range elsewhere would outlive a stopped holder's mount */
    (void)preferred;
    (void)npreferred;
    struct mc_segment_alloc al;
    rc = mc_segments_allocate_owned(m->segs, size, holder, &al);
    if (rc != MC_OK) {
        rc = MC_ERR_NO_AVAILABLE_HANDLE;
        goto unlock;
    }
    struct mc_object *no = mc_shard_obj_grow(s, o); /* o moves: nobody keeps its address */
    if (!no) {
        mc_segment_alloc_release(&al);
        rc = MC_ERR_INTERNAL_ERROR;
        goto unlock;
    }
    o = no;
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
unlock:
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
            park_release(m->promoter, true, holder, task_id); /* the holder is done with it */
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
        task_end(m, s, t, o, &fl, END_CANCELLED); /* its segment went away */
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
    task_end(m, s, t, o, &fl, END_COMPLETED); /* unpins, refreshes the entry's bits */
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
            park_release(m->promoter, true, holder, task_id); /* the holder is done with it */
            rc = MC_OK;                                       /* idempotent */
        }
        return rc;
    }
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    mc_debug(COMP, "promotion failed by its holder", "task=%llu reason=%d",
             (unsigned long long)task_id, reason);
    task_end(m, s, t, o, &fl, END_FAILED);
    mc_shard_unlock(s);
    mc_freelist_flush(&fl);
    return MC_OK;
}

/* ---- reaper and the eviction tick ---------------------------------------------------------- */

struct past_due {
    uint64_t now, timeout_ms;
};

static bool is_past_due(const struct promo_task *t, const void *arg)
{
    const struct past_due *d = arg;
    return d->now >= t->start_ms + d->timeout_ms;
}

int mc_promotion_reap(struct mc_master *m)
{
    struct mc_promoter *p = m->promoter;
    if (!p)
        return 0;
    /* parked ranges whose segment's mount ended (unmount, client expiry, re-mount) */
    park_release(p, false, (struct mc_id){0, 0}, 0);
    if (atomic_load_explicit(&p->in_flight, memory_order_relaxed) == 0)
        return 0;
    struct past_due due = {.now = mc_master_now_ms(m), .timeout_ms = p->timeout_ms};
    int n = end_tasks_where(m, is_past_due, &due, END_EXPIRED);
    if (n)
        mc_info(COMP, "promotion tasks reaped", "count=%d", n);
    return n;
}

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

/* ---- lifecycle and metrics ----------------------------------------------------------------- */

static void prescrape(void *arg)
{
    struct mc_promoter *p = arg;
    funnel_lock(p);
    p->snap = p->f;
    funnel_unlock(p);
}

#define SNAP_READER(f, h)                                                                          \
    static double rd_##f(void *arg)                                                                \
    {                                                                                              \
        return (double)((struct mc_promoter *)arg)->snap.f;                                        \
    }
MC_PROMOTION_COUNTERS(SNAP_READER)
SNAP_READER(in_flight, "")
SNAP_READER(candidates, "")
SNAP_READER(parked, "")
SNAP_READER(parked_bytes, "")
#undef SNAP_READER

/* The holders' mailboxes, for the closed-connection counters (mailbox.h). */
static double rd_dead_polls(void *arg)
{
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(arg, &st);
    return (double)st.dead_polls;
}
static double rd_requeued(void *arg)
{
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(arg, &st);
    return (double)st.requeued;
}

static int register_metrics(struct mc_master *m, struct mc_promoter *p)
{
    struct mc_metrics *r = m->metrics;
    if (!r)
        return 0;
#define REG(f, h)                                                                                  \
    if (mc_metrics_counter_fn(r, "master_promotion_" #f "_total", h, NULL, rd_##f, p) != 0)        \
        return -1;
    MC_PROMOTION_COUNTERS(REG)
#undef REG
    if (mc_metrics_gauge_fn(r, "master_promotion_in_flight", "promotion tasks admitted, not ended",
                            NULL, rd_in_flight, p) != 0 ||
        mc_metrics_gauge_fn(r, "master_promotion_candidates", "retry candidates remembered", NULL,
                            rd_candidates, p) != 0 ||
        mc_metrics_gauge_fn(r, "master_promotion_parked_ranges",
                            "staged ranges of ended tasks kept until their holder reports or "
                            "their segment's mount ends",
                            NULL, rd_parked, p) != 0 ||
        mc_metrics_gauge_fn(r, "master_promotion_parked_bytes", "value bytes of the parked ranges",
                            NULL, rd_parked_bytes, p) != 0)
        return -1;
    double bounds[16];
    mc_metrics_exp_buckets(bounds, 16, 0.001, 2.0); /* 1 ms .. 33 s */
    p->lag = mc_metrics_histogram(r, "master_promotion_lag_seconds",
                                  "admission to COMPLETE of committed promotions (master clock)",
                                  NULL, bounds, 16);
    if (!p->lag)
        return -1;
    if (m->mailboxes &&
        (mc_metrics_counter_fn(r, "master_mailbox_dead_polls_total",
                               "holder polls dropped because their connection closed (no task "
                               "is handed to them)",
                               NULL, rd_dead_polls, m->mailboxes) != 0 ||
         mc_metrics_counter_fn(r, "master_mailbox_requeued_total",
                               "tasks put back in a holder's queue: taken for a closed connection, "
                               "or in flight when the holder mounted again",
                               NULL, rd_requeued, m->mailboxes) != 0))
        return -1;
    mc_metrics_set_prescrape(r, prescrape, p);
    return 0;
}

int mc_promotion_init(struct mc_master *m)
{
    m->mailboxes = mc_offload_mailboxes(m);
    if (m->cfg.promotion_on_hit && !m->mailboxes) {
        /* no LOCAL_DISK tier: no replica to promote and no holder to ask */
        mc_warn(COMP, "promotion_on_hit needs enable_offload: promotion stays off",
                "promotion_on_hit=1 enable_offload=0");
        m->cfg.promotion_on_hit = false;
    }
    struct mc_promoter *p = calloc(1, sizeof(*p));
    if (!p)
        return -1;
    mc_sketch_init(&p->sketch);
    uint32_t th = m->cfg.promotion_admission_threshold;
    if (th < 1 || th > MC_SKETCH_MAX) {
        uint32_t to = th < 1 ? 1 : MC_SKETCH_MAX;
        mc_warn(COMP, "promotion_admission_threshold out of range: clamped", "given=%u used=%u", th,
                to);
        th = to;
        m->cfg.promotion_admission_threshold = th;
    }
    p->threshold = th;
    th = m->cfg.promotion_batch_admission_threshold;
    if (th == 0) {
        th = p->threshold;
    } else if (th > MC_SKETCH_MAX) {
        mc_warn(COMP, "promotion_batch_admission_threshold out of range: clamped",
                "given=%u used=%u", th, MC_SKETCH_MAX);
        th = MC_SKETCH_MAX;
    }
    m->cfg.promotion_batch_admission_threshold = th;
    p->batch_threshold = th;
    if (m->cfg.promotion_max_per_heartbeat == 0)
        m->cfg.promotion_max_per_heartbeat = 1;
    p->max_per_hb = m->cfg.promotion_max_per_heartbeat;
    if (m->cfg.promotion_task_timeout_ms == 0)
        m->cfg.promotion_task_timeout_ms = 30000;
    p->timeout_ms = m->cfg.promotion_task_timeout_ms;
    p->limit = m->cfg.promotion_queue_limit;
    pthread_mutex_init(&p->funnel_lock, NULL);
    pthread_mutex_init(&p->cand_lock, NULL);
    pthread_mutex_init(&p->park_lock, NULL);
    atomic_init(&p->npk_seen, 0);
    atomic_init(&p->room_backoff_ms, MC_PROMO_BACKOFF_MIN_MS);
    for (uint32_t i = 0; i < MC_NSHARDS; i++)
        atomic_init(&p->tab[i].count, 0);
    m->promoter = p;
    if (register_metrics(m, p) != 0) {
        mc_promotion_destroy(m);
        return -1;
    }
    return 0;
}

void mc_promotion_destroy(struct mc_master *m)
{
    struct mc_promoter *p = m->promoter;
    if (!p)
        return;
    if (m->metrics)
        mc_metrics_set_prescrape(m->metrics, NULL, NULL);
    for (uint32_t i = 0; i < MC_NSHARDS; i++)
        free(p->tab[i].v);
    for (uint32_t b = 0; b < CAND_BUCKETS; b++) {
        for (struct cand *c = p->cb[b], *nx; c; c = nx) {
            nx = c->next;
            free(c);
        }
    }
    /* parked ranges: released (the segments outlive the promoter: mc_segments_free) */
    for (uint32_t i = 0; i < p->npk; i++)
        mc_segment_release(p->pk[i].seg, p->pk[i].handle, p->pk[i].size);
    free(p->pk);
    pthread_mutex_destroy(&p->funnel_lock);
    pthread_mutex_destroy(&p->cand_lock);
    pthread_mutex_destroy(&p->park_lock);
    free(p);
    m->promoter = NULL;
    m->mailboxes = NULL; /* offload's, freed by it */
}

/* ---- debug counts -------------------------------------------------------------------------- */

void mc_master_promotion_debug_counts(struct mc_master *m, struct mc_promotion_debug *out)
{
    memset(out, 0, sizeof(*out));
    struct mc_promoter *p = m->promoter;
    if (!p)
        return;
    for (uint32_t si = 0; si < MC_NSHARDS; si++) {
        struct mc_shard *s = &m->shards[si];
        mc_shard_rdlock(s);
        out->tasks += p->tab[si].n;
        for (uint32_t i = 0; i < s->n; i++) {
            struct mc_object *o = mc_ent_obj(mc_shard_ent(s, i));
            for (uint8_t r = 0; r < o->nrep; r++) {
                const struct mc_replica *rp = &o->rep[r];
                if (rp->type == MC_REPLICA_TYPE_LOCAL_DISK)
                    out->pins += rp->refcnt;
                else if ((o->flags & MC_OBJ_COMPLETE) && rp->status == MC_REPLICA_STATUS_PROCESSING)
                    out->staged++;
            }
        }
        mc_shard_unlock(s);
    }
    out->mailbox_tasks = m->mailboxes ? mc_mailbox_count_kind(m->mailboxes, MC_TASK_PROMOTION) : 0;
    funnel_lock(p);
    out->in_flight = p->f.in_flight;
    out->candidates = p->f.candidates;
    out->parked = p->f.parked;
    funnel_unlock(p);
}
