/*
 * fence.c - holder fences (see fence.h): a small array of {holder, version} under a mutex.
 * Holders are tens, not thousands, and a fence is looked up once per re-registered record.
 */
#include "master/fence.h"

#include <pthread.h>
#include <stdlib.h>

#include "master/lock_order.h"

struct fence_rec {
    struct mc_id holder;
    uint64_t version;
    bool dirty;      /* raised since mc_fences_drain last took it (the HA journal) */
    uint64_t stored; /* the version known to be in etcd */
};

struct mc_fences {
    pthread_mutex_t lock;
    struct fence_rec *v;
    size_t n, cap;
    bool need_durable; /* HA: a fence counts once its record is in etcd */
};

static void f_lock(struct mc_fences *f)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    pthread_mutex_lock(&f->lock);
}

static void f_unlock(struct mc_fences *f)
{
    pthread_mutex_unlock(&f->lock);
    mc_lo_release(MC_LO_LEAF, 0);
}

struct mc_fences *mc_fences_new(void)
{
    struct mc_fences *f = calloc(1, sizeof(*f));
    if (f)
        pthread_mutex_init(&f->lock, NULL);
    return f;
}

void mc_fences_free(struct mc_fences *f)
{
    if (!f)
        return;
    pthread_mutex_destroy(&f->lock);
    free(f->v);
    free(f);
}

static struct fence_rec *find(struct mc_fences *f, struct mc_id holder)
{
    for (size_t i = 0; i < f->n; i++)
        if (mc_id_eq(f->v[i].holder, holder))
            return &f->v[i];
    return NULL;
}

static int raise_rec(struct mc_fences *f, struct mc_id holder, uint64_t version, bool dirty)
{
    int rc = 0;
    f_lock(f);
    struct fence_rec *r = find(f, holder);
    if (r) {
        if (version > r->version) {
            r->version = version;
            r->dirty = r->dirty || dirty;
        }
        goto out;
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        struct fence_rec *nv = realloc(f->v, cap * sizeof(*nv));
        if (!nv) {
            rc = -1;
            goto out;
        }
        f->v = nv;
        f->cap = cap;
    }
    f->v[f->n++] = (struct fence_rec){.holder = holder, .version = version, .dirty = dirty};
out:
    f_unlock(f);
    return rc;
}

int mc_fences_raise(struct mc_fences *f, struct mc_id holder, uint64_t version)
{
    return raise_rec(f, holder, version, true);
}

int mc_fences_load(struct mc_fences *f, struct mc_id holder, uint64_t version)
{
    int rc = raise_rec(f, holder, version, false);
    if (rc == 0)
        mc_fences_stored(f, holder, version);
    return rc;
}

void mc_fences_require_durable(struct mc_fences *f)
{
    f_lock(f);
    f->need_durable = true;
    f_unlock(f);
}

void mc_fences_stored(struct mc_fences *f, struct mc_id holder, uint64_t version)
{
    f_lock(f);
    struct fence_rec *r = find(f, holder);
    if (r && version > r->stored)
        r->stored = version;
    f_unlock(f);
}

bool mc_fences_durable(struct mc_fences *f, struct mc_id holder, uint64_t version)
{
    f_lock(f);
    struct fence_rec *r = find(f, holder);
    bool ok = !f->need_durable || (r && r->stored >= version);
    f_unlock(f);
    return ok;
}

size_t mc_fences_drain(struct mc_fences *f, struct mc_fence *out, size_t cap)
{
    size_t n = 0;
    f_lock(f);
    for (size_t i = 0; i < f->n && n < cap; i++) {
        if (!f->v[i].dirty)
            continue;
        f->v[i].dirty = false;
        out[n++] = (struct mc_fence){.holder = f->v[i].holder, .version = f->v[i].version};
    }
    f_unlock(f);
    return n;
}

void mc_fences_redirty(struct mc_fences *f, struct mc_id holder)
{
    f_lock(f);
    struct fence_rec *r = find(f, holder);
    if (r)
        r->dirty = true;
    f_unlock(f);
}

size_t mc_fences_pending(struct mc_fences *f)
{
    size_t n = 0;
    f_lock(f);
    for (size_t i = 0; i < f->n; i++)
        n += f->v[i].dirty;
    f_unlock(f);
    return n;
}

uint64_t mc_fences_get(struct mc_fences *f, struct mc_id holder)
{
    f_lock(f);
    struct fence_rec *r = find(f, holder);
    uint64_t v = r ? r->version : 0;
    f_unlock(f);
    return v;
}

bool mc_fences_voids(struct mc_fences *f, struct mc_id holder, uint64_t version)
{
    uint64_t v = mc_fences_get(f, holder);
    return v != 0 && version <= v;
}

size_t mc_fences_count(struct mc_fences *f)
{
    f_lock(f);
    size_t n = f->n;
    f_unlock(f);
    return n;
}
