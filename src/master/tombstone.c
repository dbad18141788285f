/*
 * tombstone.c - removed keys of the recovery window (see tombstone.h): an open-addressing table
 * of {key hash, version} under a mutex, doubled at half load; the window itself is two atomics
 * (its end, whether it closed) around the table.
 */
#include "master/tombstone.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/log.h"
#include "master/lock_order.h"

struct tomb {
    uint64_t hash; /* 0: empty slot (a key hashing to 0 is stored as 1) */
    uint64_t version;
};

struct mc_tombs {
    pthread_mutex_t lock;
    struct tomb *v;
    size_t cap, n, max; /* cap: a power of two, or 0 */
};

static void t_lock(struct mc_tombs *t)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    pthread_mutex_lock(&t->lock);
}

static void t_unlock(struct mc_tombs *t)
{
    pthread_mutex_unlock(&t->lock);
    mc_lo_release(MC_LO_LEAF, 0);
}

struct mc_tombs *mc_tombs_new(size_t max)
{
    struct mc_tombs *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    pthread_mutex_init(&t->lock, NULL);
    t->max = max;
    return t;
}

void mc_tombs_free(struct mc_tombs *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->lock);
    free(t->v);
    free(t);
}

static struct tomb *slot(struct tomb *v, size_t cap, uint64_t h)
{
    size_t i = (size_t)(h ^ (h >> 29)) & (cap - 1);
    while (v[i].hash && v[i].hash != h)
        i = (i + 1) & (cap - 1);
    return &v[i];
}

static bool grow(struct mc_tombs *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 1024;
    struct tomb *nv = calloc(ncap, sizeof(*nv));
    if (!nv)
        return false;
    for (size_t i = 0; i < t->cap; i++)
        if (t->v[i].hash)
            *slot(nv, ncap, t->v[i].hash) = t->v[i];
    free(t->v);
    t->v = nv;
    t->cap = ncap;
    return true;
}

bool mc_tombs_add(struct mc_tombs *t, uint64_t key_hash, uint64_t version)
{
    uint64_t h = key_hash ? key_hash : 1;
    bool ok = true;
    t_lock(t);
    struct tomb *e = t->cap ? slot(t->v, t->cap, h) : NULL;
    if (e && e->hash) {
        if (version > e->version)
            e->version = version;
        goto out;
    }
    if (t->n >= t->max || ((t->n + 1) * 2 > t->cap && !grow(t))) {
        ok = false;
        goto out;
    }
    e = slot(t->v, t->cap, h);
    e->hash = h;
    e->version = version;
    t->n++;
out:
    t_unlock(t);
    return ok;
}

bool mc_tombs_blocks(struct mc_tombs *t, uint64_t key_hash, uint64_t version)
{
    uint64_t h = key_hash ? key_hash : 1;
    bool blocks = false;
    t_lock(t);
    if (t->cap) {
        const struct tomb *e = slot(t->v, t->cap, h);
        blocks = e->hash && version <= e->version;
    }
    t_unlock(t);
    return blocks;
}

void mc_tombs_clear(struct mc_tombs *t)
{
    t_lock(t);
    free(t->v);
    t->v = NULL;
    t->cap = t->n = 0;
    t_unlock(t);
}

size_t mc_tombs_count(struct mc_tombs *t)
{
    t_lock(t);
    size_t n = t->n;
    t_unlock(t);
    return n;
}

/* ---- the recovery window ------------------------------------------------------------------- */

struct mc_recovery {
    struct mc_tombs *tombs;
    uint64_t window_ms;
    _Atomic uint64_t end_ms; /* open until then (the HA thread rewrites it at a take-over) */
    _Atomic bool closed;     /* the window ended, or its tombstones ran out */
};

struct mc_recovery *mc_recovery_new(uint64_t now_ms, uint64_t window_ms, size_t max_keys)
{
    struct mc_recovery *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->tombs = mc_tombs_new(max_keys);
    if (!r->tombs) {
        free(r);
        return NULL;
    }
    r->window_ms = window_ms ? window_ms : 60000;
    atomic_init(&r->end_ms, now_ms + r->window_ms);
    atomic_init(&r->closed, false);
    return r;
}

void mc_recovery_free(struct mc_recovery *r)
{
    if (!r)
        return;
    mc_tombs_free(r->tombs);
    free(r);
}

bool mc_recovery_open(struct mc_recovery *r, uint64_t now_ms)
{
    return !atomic_load_explicit(&r->closed, memory_order_relaxed) &&
           now_ms < atomic_load(&r->end_ms);
}

static void recovery_close(struct mc_recovery *r, const char *why)
{
    if (atomic_exchange(&r->closed, true))
        return;
    size_t n = mc_tombs_count(r->tombs);
    mc_tombs_clear(r->tombs);
    mc_info("recovery", "recovery window closed: copies of unknown keys are no longer recreated",
            "why=%s tombstones=%zu", why, n);
}

void mc_recovery_note_removal(struct mc_recovery *r, uint64_t now_ms, uint64_t key_hash,
                              uint64_t version)
{
    if (!mc_recovery_open(r, now_ms))
        return;
    if (!mc_tombs_add(r->tombs, key_hash, version))
        recovery_close(r, "tombstones_full");
}

bool mc_recovery_may_recreate(struct mc_recovery *r, uint64_t now_ms, uint64_t key_hash,
                              uint64_t version)
{
    return mc_recovery_open(r, now_ms) && !mc_tombs_blocks(r->tombs, key_hash, version);
}

void mc_recovery_tick(struct mc_recovery *r, uint64_t now_ms)
{
    if (!atomic_load_explicit(&r->closed, memory_order_relaxed) && !mc_recovery_open(r, now_ms))
        recovery_close(r, "window_ended");
}

void mc_recovery_restart(struct mc_recovery *r, uint64_t now_ms)
{
    /* the HA thread's (a take-over) while the ticks read it: the end first, then the flag */
    atomic_store(&r->end_ms, now_ms + r->window_ms);
    atomic_store(&r->closed, false);
}
