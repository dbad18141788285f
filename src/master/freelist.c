/*
 * freelist.c - buffers and records released after the shard lock is dropped (freelist.h).
 *
 * Entries are replica copies with their object's size, in an inline array that grows into a
 * malloc (x4) past MC_MAX_REPLICAS; when that malloc fails the replica is released at once,
 * which the lock order allows (it is only slower). Records queued without their shard's lock
 * are chained through their dead group field and released at flush, which takes each owning
 * shard's lock (objslab.c). A flush releases MEMORY buffers in runs of one segment, one
 * allocator lock per run (mc_segment_release_many), and LOCAL_DISK replicas by dropping their
 * holder's counts and reference.
 */
#include <stdlib.h>
#include <string.h>

#include "common/mc_assert.h"
#include "master/freelist.h"
#include "master/objslab.h"
#include "master/segments.h"
#include "master/shard.h"

void mc_freelist_init(struct mc_freelist *fl)
{
    fl->ents = fl->inline_ents;
    fl->n = 0;
    fl->cap = MC_MAX_REPLICAS;
    fl->objs = NULL;
}

static void release_replica(const struct mc_replica *r, uint64_t size)
{
    if (r->type == MC_REPLICA_TYPE_MEMORY)
        mc_segment_release(r->u.seg, r->handle, size);
    else if (r->type == MC_REPLICA_TYPE_LOCAL_DISK) {
        atomic_fetch_sub_explicit(&r->u.holder->nreplicas, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&r->u.holder->bytes, (int64_t)size, memory_order_relaxed);
        mc_holder_unref(r->u.holder);
    }
}

void mc_freelist_add_replica(struct mc_freelist *fl, const struct mc_replica *r, uint64_t size)
{
    if (fl->n == fl->cap) {
        size_t ncap = fl->cap * 4;
        struct mc_fl_ent *ne = malloc(ncap * sizeof(*ne));
        if (!ne) {
            /* Out of memory: release now (allowed by the lock order, just slower). */
            release_replica(r, size);
            return;
        }
        memcpy(ne, fl->ents, fl->n * sizeof(*ne));
        if (fl->ents != fl->inline_ents)
            free(fl->ents);
        fl->ents = ne;
        fl->cap = ncap;
    }
    fl->ents[fl->n].r = *r;
    fl->ents[fl->n].size = size;
    fl->n++;
}

static void move_replicas(struct mc_freelist *fl, struct mc_object *o)
{
    for (uint8_t i = 0; i < o->nrep; i++)
        mc_freelist_add_replica(fl, &o->rep[i], o->size);
    o->nrep = 0;
}

void mc_freelist_add_object(struct mc_freelist *fl, struct mc_object *o)
{
    move_replicas(fl, o);
    o->owner_tag = (uint64_t)(uintptr_t)fl->objs; /* the owner tag is dead: the list's link */
    fl->objs = o;
}

void mc_freelist_add_object_locked(struct mc_freelist *fl, struct mc_shard *s, struct mc_object *o)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
    move_replicas(fl, o);
    mc_obj_free_locked(s, o);
}

/* Releases fl's MEMORY buffers in runs of one segment (one lock per run of up to RUN). */
static void flush_replicas(struct mc_freelist *fl)
{
    enum { RUN = 256 };
    uint32_t handles[RUN];
    uint64_t sizes[RUN];
    for (size_t i = 0; i < fl->n;) {
        const struct mc_replica *r = &fl->ents[i].r;
        if (r->type != MC_REPLICA_TYPE_MEMORY) {
            release_replica(r, fl->ents[i].size);
            i++;
            continue;
        }
        struct mc_segment *seg = r->u.seg;
        size_t k = 0;
        for (; i < fl->n && k < RUN; i++, k++) {
            const struct mc_fl_ent *e = &fl->ents[i];
            if (e->r.type != MC_REPLICA_TYPE_MEMORY || e->r.u.seg != seg)
                break;
            handles[k] = e->r.handle;
            sizes[k] = e->size;
        }
        mc_segment_release_many(seg, handles, sizes, k);
    }
}

void mc_freelist_flush(struct mc_freelist *fl)
{
    flush_replicas(fl);
    for (struct mc_object *o = fl->objs, *nx; o; o = nx) {
        nx = (struct mc_object *)(uintptr_t)o->owner_tag;
        mc_obj_free(o);
    }
    if (fl->ents != fl->inline_ents)
        free(fl->ents);
    mc_freelist_init(fl);
    mc_objslab_pool_trim_if_over(); /* the slab pool's madvise calls, outside any shard lock */
}
