/*
 * promotion_internal.h - what promotion.c (the funnel, parked staged ranges, task_end, the core's
 * hooks, the reaper, lifecycle and metrics), promotion_admit.c (retry candidates, admission and
 * the eviction tick) and promotion_holder.c (the holder-side operations) share: struct
 * mc_promoter and its parts, the funnel's lock, the shards' task tables and task_end.
 *
 * Locking is as described in promotion.c's top comment: a shard's table under that shard's lock;
 * the funnel, the parked ranges and the candidates each under their own leaf mutex.
 */
#ifndef MC_MASTER_PROMOTION_INTERNAL_H
#define MC_MASTER_PROMOTION_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/metrics.h"
#include "master/freelist.h"
#include "master/lock_order.h"
#include "master/master_state.h"
#include "master/objects.h"
#include "master/promotion.h"
#include "master/shard.h"
#include "master/sketch.h"

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

/* ---- funnel (promotion.c) ------------------------------------------------------------------ */

static inline void funnel_lock(struct mc_promoter *p)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    pthread_mutex_lock(&p->funnel_lock);
}
static inline void funnel_unlock(struct mc_promoter *p)
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

/* ---- the shards' tables (shard lock held) -------------------------------------------------- */

static inline struct promo_task *task_by_id(struct promo_shard *ps, uint64_t task_id)
{
    for (uint32_t i = 0; i < ps->n; i++)
        if (ps->v[i].task_id == task_id)
            return &ps->v[i];
    return NULL;
}

static inline struct promo_task *task_of(struct promo_shard *ps, const struct mc_object *o)
{
    for (uint32_t i = 0; i < ps->n; i++)
        if (ps->v[i].version == o->version)
            return &ps->v[i];
    return NULL;
}

static inline int task_add(struct promo_shard *ps, const struct promo_task *t)
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

static inline void task_del(struct promo_shard *ps, struct promo_task *t)
{
    *t = ps->v[--ps->n];
    atomic_store_explicit(&ps->count, ps->n, memory_order_relaxed);
    if (ps->n == 0 && ps->cap > 64) {
        free(ps->v);
        ps->v = NULL;
        ps->cap = 0;
    }
}

static inline int replica_index(const struct mc_object *o, uint32_t id)
{
    for (uint8_t i = 0; i < o->nrep; i++)
        if (o->rep[i].id == id)
            return i;
    return -1;
}

/* Ends task t of object o (o may be NULL: the object is gone or going with its replicas): the
 * staged replica to fl (when o and fl), the source unpinned, the record erased, the holder's
 * mailbox entry removed, the funnel told. t is invalid afterwards. */
void mc_promo_task_end(struct mc_master *m, struct mc_shard *s, struct promo_task *t,
                       struct mc_object *o, struct mc_freelist *fl, enum task_end how);

/* ---- parked staged ranges (promotion.c) ---------------------------------------------------- */

/* Releases the parked ranges of holder's task task_id (by_task) or, else, those whose segment's
 * mount ended. No master lock may be held (segment locks are taken). Returns how many. */
size_t mc_promo_park_release(struct mc_promoter *p, bool by_task, struct mc_id holder,
                             uint64_t task_id);

#endif
