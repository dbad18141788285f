/*
 * tombstone.c - removed keys of the recovery window (see tombstone.h): an open-addressing table
 * of {key hash, version} under a mutex, doubled at half load.
 */
#include "master/tombstone.h"

#include <pthread.h>
#include <stdlib.h>

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
