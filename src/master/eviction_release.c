/*
 * eviction_release.c - the DRAM buffers of a large eviction round, given back to their
 * segments in handle order.
 *
 * A round's victims are spread over the shards by key hash, so their buffers lie at random in
 * their segments' allocators; releasing them shard after shard touches the allocator's nodes at
 * random (a cache and TLB miss per node and per merged neighbour). A large round (a slice of a
 * 0.5 target is 65536 objects) instead holds its MEMORY buffers back in one list per segment
 * per worker, and when the worker has done its shards releases each segment's set in handle
 * order, the nodes' memory order (mc_segment_release_many), as RemoveAll does. Anything else the
 * freelist holds (records, LOCAL_DISK replicas) is released at once as before; a buffer that
 * cannot be held (no memory) is too.
 */
#include <stdlib.h>
#include <string.h>

#include "master/eviction_internal.h"
#include "master/eviction_release.h"
#include "master/segments.h"

/* seg's list, made on first sight (a round's buffers come from a few segments: a linear
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
        memset(nv + h->cap, 0, (ncap - h->cap) * sizeof(*nv));
        h->v = nv;
        h->cap = ncap;
    }
    struct ev_held_seg *e = &h->v[h->n++];
    e->seg = seg;
    e->n = 0;
    return e;
}

static bool held_push(struct ev_held_seg *e, uint32_t handle, uint64_t size)
{
    if (e->n == e->cap) {
        size_t ncap = e->cap ? e->cap * 2 : 1024;
        struct ev_held_buf *nb = realloc(e->b, ncap * sizeof(*nb));
        if (!nb)
            return false;
        ev_ask_huge(nb, ncap * sizeof(*nb));
        e->b = nb;
        e->cap = ncap;
    }
    e->b[e->n++] = (struct ev_held_buf){.handle = handle, .size = size};
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
        if (!e || !held_push(e, fe->r.handle, fe->size))
            fl->ents[keep++] = *fe;
    }
    fl->n = keep;
    mc_freelist_flush(fl);
}

/* Sorts e's buffers by handle: least significant digit first, SORT_BITS at a time, as many
 * passes as the largest handle needs (two for a million handles), between e->b and h->tmp, which
 * trade places when the passes are odd. The histogram lives on the stack and the second buffer
 * is kept across rounds: a histogram of 2^16 counters and a fresh buffer per call cost a 10k
 * round (the 1% target of a million objects) more than its releases did, in memsets and
 * page faults. false when out of memory (e unchanged). */
#define SORT_BITS 11
static bool sort_by_handle(struct ev_held *h, struct ev_held_seg *e)
{
    size_t n = e->n;
    uint32_t hi = 0;
    for (size_t i = 0; i < n; i++)
        hi |= e->b[i].handle;
    if (n < 2 || !hi)
        return true;
    if (n > h->tmp_cap) {
        size_t ncap = e->cap; /* what e->b holds: the two can trade places */
        struct ev_held_buf *nt = realloc(h->tmp, ncap * sizeof(*nt));
        if (!nt)
            return false;
        ev_ask_huge(nt, ncap * sizeof(*nt));
        h->tmp = nt;
        h->tmp_cap = ncap;
    }
    uint32_t hist[1u << SORT_BITS];
    struct ev_held_buf *src = e->b, *dst = h->tmp;
    int width = 32 - __builtin_clz(hi);
    for (int shift = 0; shift < width; shift += SORT_BITS) {
        memset(hist, 0, sizeof(hist));
        for (size_t i = 0; i < n; i++)
            hist[(src[i].handle >> shift) & ((1u << SORT_BITS) - 1)]++;
        uint32_t sum = 0;
        for (size_t d = 0; d < (1u << SORT_BITS); d++) {
            uint32_t c = hist[d];
            hist[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[hist[(src[i].handle >> shift) & ((1u << SORT_BITS) - 1)]++] = src[i];
        struct ev_held_buf *t = src;
        src = dst;
        dst = t;
    }
    if (src != e->b) { /* odd passes: the sorted buffers are in tmp; the two trade places */
        size_t cap = e->cap;
        h->tmp = e->b;
        e->b = src;
        e->cap = h->tmp_cap;
        h->tmp_cap = cap;
    }
    return true;
}

void ev_held_release(struct ev_held *h)
{
    enum { RUN = 4096 }; /* buffers per allocator lock (a Put placing there waits one run) */
    uint32_t handles[RUN];
    uint64_t sizes[RUN];
    for (size_t i = 0; i < h->n; i++) {
        struct ev_held_seg *e = &h->v[i];
        (void)sort_by_handle(h, e); /* unsorted (no memory): released all the same */
        for (size_t j = 0; j < e->n;) {
            size_t k = 0;
            for (; j < e->n && k < RUN; j++, k++) {
                handles[k] = e->b[j].handle;
                sizes[k] = e->b[j].size;
            }
            mc_segment_release_many(e->seg, handles, sizes, k);
        }
        e->n = 0;
    }
    h->n = 0;
}

void ev_held_free(struct ev_held *h)
{
    ev_held_release(h);
    for (size_t i = 0; i < h->cap; i++)
        free(h->v[i].b);
    free(h->v);
    free(h->tmp);
    h->v = NULL;
    h->tmp = NULL;
    h->cap = h->tmp_cap = 0;
}
