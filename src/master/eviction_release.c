/*
 * eviction_release.c - the DRAM buffers of a large eviction round, given back to their
 * segments in handle order.
 *
 * A round's victims are spread over the shards by key hash, so their buffers lie at random in
 * their segments' allocators; releasing them shard after shard touches the allocator's nodes at
 * random (a cache and TLB miss per node and per merged neighbour). A large round (a slice of a
 * 0.5 target is 65536 objects) instead holds its MEMORY buffers back in one bitmap per segment
 * per worker, and when the worker has done its shards releases each segment's set in handle
 * order, the nodes' memory order (mc_segment_release_set), as RemoveAll does. Anything else the
 * freelist holds (records, LOCAL_DISK replicas) is released at once as before; a buffer whose
 * bit cannot be set (no memory) is too.
 */
#include <stdlib.h>
#include <string.h>

#include "master/eviction_release.h"
#include "master/segments.h"

/* seg's set, made on first sight (a round's buffers come from a few segments: a linear
 * search); NULL when out of memory. */
static struct ev_held_seg *held_seg(struct ev_held *h, struct mc_segment *seg)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->v[i].seg == seg)
            return &h->v[i];
    if (h->n == h->cap) {
        size_t ncap = h->cap ? h->cap * 2 : 4;
        struct ev_held_seg *nv = realloc(h->v, ncap * sizeof(*nv));
        if (!nv)
            return NULL;
        h->v = nv;
        h->cap = ncap;
    }
    struct ev_held_seg *e = &h->v[h->n++];
    memset(e, 0, sizeof(*e));
    e->seg = seg;
    return e;
}

/* Sets handle in e (grown to the segment's handle bound); false when it cannot grow or the bit
 * is set already (the caller releases the buffer itself). */
static bool held_set(struct ev_held_seg *e, uint32_t handle)
{
    size_t w = handle / 64;
    if (w >= e->nwords) {
        size_t nw = (size_t)mc_segment_handle_bound(e->seg) / 64 + 1;
        if (nw <= w)
            nw = w + 1;
        uint64_t *nb = realloc(e->bits, nw * sizeof(*nb));
        if (!nb)
            return false;
        memset(nb + e->nwords, 0, (nw - e->nwords) * sizeof(*nb));
        e->bits = nb;
        e->nwords = nw;
    }
    uint64_t bit = 1ull << (handle % 64);
    if (e->bits[w] & bit)
        return false;
    e->bits[w] |= bit;
    return true;
}

void ev_held_drain(struct ev_held *h, struct mc_freelist *fl)
{
    size_t keep = 0;
    for (size_t i = 0; i < fl->n; i++) {
        struct mc_fl_ent *fe = &fl->ents[i];
        struct ev_held_seg *e = NULL;
        if (fe->r.type == MC_REPLICA_TYPE_MEMORY)
            e = held_seg(h, fe->r.u.seg);
        if (e && held_set(e, fe->r.handle)) {
            e->count++;
            e->bytes += fe->size;
        } else {
            fl->ents[keep++] = *fe;
        }
    }
    fl->n = keep;
    mc_freelist_flush(fl);
}

void ev_held_release(struct ev_held *h)
{
    for (size_t i = 0; i < h->n; i++) {
        struct ev_held_seg *e = &h->v[i];
        if (e->count)
            mc_segment_release_set(e->seg, e->bits, e->nwords, e->count, e->bytes);
        free(e->bits);
    }
    h->n = 0;
}

void ev_held_free(struct ev_held *h)
{
    ev_held_release(h);
    free(h->v);
    h->v = NULL;
    h->cap = 0;
}
