/*
 * discard.c - the deferred-free list (discard.h): unlinked objects parked until their buffers
 * may be reused.
 *
 * An unordered array under one leaf mutex. Pushes come from Remove (forced under a lease) and
 * PutStart (a stale Put taken over) with a shard lock held, so the list only moves objects in
 * and out: releasing their buffers is left to the caller's freelist, flushed once it holds no
 * lock. The reaper walks the whole array each tick; the list holds only the rare objects of
 * those two cases.
 */
#include <stdlib.h>

#include "common/log.h"
#include "master/discard.h"
#include "master/freelist.h"
#include "master/lock_order.h"

static void discard_lock(struct mc_discard_list *d)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    pthread_mutex_lock(&d->lock);
}

static void discard_unlock(struct mc_discard_list *d)
{
    pthread_mutex_unlock(&d->lock);
    mc_lo_release(MC_LO_LEAF, 0);
}

void mc_discard_init(struct mc_discard_list *d)
{
    pthread_mutex_init(&d->lock, NULL);
    d->v = NULL;
    d->n = d->cap = 0;
}

void mc_discard_destroy(struct mc_discard_list *d, struct mc_freelist *fl)
{
    for (size_t i = 0; i < d->n; i++)
        mc_freelist_add_object(fl, d->v[i].obj);
    free(d->v);
    d->v = NULL;
    d->n = d->cap = 0;
    pthread_mutex_destroy(&d->lock);
}

void mc_discard_push(struct mc_discard_list *d, struct mc_object *o, uint64_t release_ms, bool put,
                     struct mc_freelist *fl)
{
    discard_lock(d);
    if (d->n == d->cap) {
        size_t ncap = d->cap ? d->cap * 2 : 16;
        struct mc_discarded *nd = realloc(d->v, ncap * sizeof(*nd));
        if (!nd) {
            discard_unlock(d);
            mc_warn("master", "discard list full, freeing at once", "size=%llu",
                    (unsigned long long)o->size);
            mc_freelist_add_object(fl, o);
            return;
        }
        d->v = nd;
        d->cap = ncap;
    }
    d->v[d->n++] = (struct mc_discarded){.obj = o, .release_ms = release_ms, .put = put};
    discard_unlock(d);
}

int mc_discard_reap(struct mc_discard_list *d, uint64_t now, struct mc_freelist *fl, int *puts)
{
    int n = 0;
    *puts = 0;
    discard_lock(d);
    for (size_t i = d->n; i-- > 0;) {
        if (d->v[i].release_ms > now)
            continue;
        mc_freelist_add_object(fl, d->v[i].obj);
        *puts += d->v[i].put;
        d->v[i] = d->v[--d->n];
        n++;
    }
    discard_unlock(d);
    return n;
}
