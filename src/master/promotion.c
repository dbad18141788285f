/*
 * promotion.c - promotion on hit (see promotion.h): the funnel, parked staged ranges, ending a
 * task, the core's hooks (cancellation), the reaper, lifecycle and metrics. The rest lives in
 * promotion_admit.c (the gates, request_room, retry candidates and the eviction tick that
 * retries them) and promotion_holder.c (the holder-side operations: heartbeat, AllocStart,
 * success, failure); what the three share (struct mc_promoter, the shards' task tables, the
 * funnel's lock, task_end) is in promotion_internal.h.
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
#include "common/mc_assert.h"
#include "master/promotion.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/metrics.h"
#include "master/freelist.h"
#include "master/master_state.h"
#include "master/object_events.h"
#include "master/objects.h"
#include "master/offload.h"
#include "master/promotion_core.h"
#include "master/promotion_internal.h"
#include "master/shard.h"
#include "master/sketch.h"
#include "mooncake/errors.h"

#define COMP "promotion"

/* ---- funnel -------------------------------------------------------------------------------- */

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
size_t mc_promo_park_release(struct mc_promoter *p, bool by_task, struct mc_id holder,
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

/* ---- ending a task (the shards' tables: promotion_internal.h) ------------------------------ */

/* Ends task t of object o (o may be NULL: the object is gone or going with its replicas): the
 * staged replica to fl (when o and fl), the source unpinned, the record erased, the holder's
 * mailbox entry removed, the funnel told. t is invalid afterwards. */
void mc_promo_task_end(struct mc_master *m, struct mc_shard *s, struct promo_task *t,
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

/* ---- the core's hooks ---------------------------------------------------------------------- */

void mc_promotion_object_erased(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
    struct mc_promoter *p = m->promoter;
    if (!p || !(o->flags & MC_OBJ_PROMOTING))
        return;
    struct promo_task *t = task_of(&p->tab[s->index], o);
    if (t) /* a staged range is parked; the other replicas go with the object */
        mc_promo_task_end(m, s, t, o, NULL, END_CANCELLED);
    o->flags &= ~(uint64_t)MC_OBJ_PROMOTING;
}

bool mc_promotion_cancel_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                struct mc_freelist *fl)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
    struct mc_promoter *p = m->promoter;
    if (!p || !(o->flags & MC_OBJ_PROMOTING))
        return false;
    struct promo_task *t = task_of(&p->tab[s->index], o);
    if (!t) {
        o->flags &= ~(uint64_t)MC_OBJ_PROMOTING;
        return false;
    }
    mc_promo_task_end(m, s, t, o, fl, END_CANCELLED);
    return true;
}

int mc_promotion_before_remove(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                               bool force, struct mc_freelist *fl)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
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
    mc_promo_task_end(m, s, t, o, fl, END_CANCELLED);
    return MC_OK;
}

void mc_promotion_check_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                               struct mc_freelist *fl)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
    struct mc_promoter *p = m->promoter;
    struct promo_task *t = p ? task_of(&p->tab[s->index], o) : NULL;
    if (!t)
        return;
    int si = replica_index(o, t->source_id);
    int ri = t->staged_id ? replica_index(o, t->staged_id) : 0;
    if (si < 0 || !mc_replica_valid(&o->rep[si]) || ri < 0 ||
        (t->staged_id && !mc_replica_valid(&o->rep[ri])))
        mc_promo_task_end(m, s, t, o, fl, END_CANCELLED);
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
            mc_promo_task_end(m, s, t, mc_shard_find_version(s, t->key_hash, t->version), &fl, how);
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

/* ---- the reaper ---------------------------------------------------------------------------- */

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
    mc_promo_park_release(p, false, (struct mc_id){0, 0}, 0);
    if (atomic_load_explicit(&p->in_flight, memory_order_relaxed) == 0)
        return 0;
    struct past_due due = {.now = mc_master_now_ms(m), .timeout_ms = p->timeout_ms};
    int n = end_tasks_where(m, is_past_due, &due, END_EXPIRED);
    if (n)
        mc_info(COMP, "promotion tasks reaped", "count=%d", n);
    return n;
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

/* ---- the object events promotion subscribes to (object_events.h) ---------------------------- */

/* A read that found only a readable disk copy may admit a promotion; any other read is counted
 * in the admission sketch (a DRAM hit: hot beats cold). */
static void ev_read(struct mc_master *m, const struct mc_obj_read_ev *ev)
{
    if (ev->found == MC_READ_FOUND_DISK)
        mc_promotion_on_batch_get(m, ev->key, ev->key_len, ev->key_hash, ev->batch_keys);
    else
        mc_promotion_on_memory_read(m, ev->key_hash);
}

static int ev_remove_claim(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                           const struct mc_obj_remove_ev *ev)
{
    if (!(o->flags & MC_OBJ_PROMOTING))
        return MC_OK;
    return mc_promotion_before_remove(m, s, o, ev->force, ev->fl);
}

static void ev_evict_chosen(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            struct mc_obj_evict_ev *ev)
{
    (void)s;
    ev->victim_freq = mc_promotion_victim_estimate(m, o);
}

static void ev_evict_cycle_end(struct mc_master *m, const struct mc_obj_cycle_ev *ev)
{
    mc_promotion_note_victims(m, ev->victim_freq_sum, ev->evicted);
}

static void ev_replica_dropping(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                const struct mc_obj_drop_ev *ev)
{
    if (!(o->flags & MC_OBJ_PROMOTING))
        return;
    if (ev->storage_lost)
        mc_promotion_check_locked(m, s, o, ev->fl); /* only if its own replicas are lost */
    else
        (void)mc_promotion_cancel_locked(m, s, o, ev->fl); /* its source may be the copy */
}

/* With promotion_on_hit the reads and eviction's victims feed admission; without it only the
 * tasks' ends are followed (there are none to follow unless a test queued one). */
static const struct mc_obj_subscriber promotion_on_hit = {
    .name = "promotion",
    .read = ev_read,
    .remove_claim = ev_remove_claim,
    .erased = mc_promotion_object_erased,
    .evict_chosen = ev_evict_chosen,
    .evict_cycle_end = ev_evict_cycle_end,
    .replica_dropping = ev_replica_dropping,
    .holder_remounted = mc_promotion_holder_remounted,
};
static const struct mc_obj_subscriber promotion_tasks_only = {
    .name = "promotion",
    .remove_claim = ev_remove_claim,
    .erased = mc_promotion_object_erased,
    .replica_dropping = ev_replica_dropping,
    .holder_remounted = mc_promotion_holder_remounted,
};

int mc_promotion_subscribe(struct mc_master *m)
{
    if (!m->promoter)
        return 0;
    return mc_obj_events_register(m, m->cfg.promotion_on_hit ? &promotion_on_hit
                                                             : &promotion_tasks_only);
}
