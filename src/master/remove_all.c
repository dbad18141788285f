/*
 * remove_all.c - RemoveAll's walk: every object the Remove rules allow, in bounded steps, with
 * the freed DRAM buffers given back to their segments in handle order.
 *
 * Steps: at most REMOVE_ALL_STEP objects per shard write lock, so a Put or Get on the shard waits
 * for one step, not for the whole shard, however large it grows.
 *
 * Buffers: a shard's objects were placed at random among all of a segment's allocations (the
 * shard is a hash of the key), so releasing them shard after shard touches the segment
 * allocator's nodes (24 bytes per live buffer) at random: at 10M objects that is a cache and TLB
 * miss per node and per merged neighbour, and the cost per object rose ~4x from 1M to 10M. So
 * the MEMORY replicas a step frees are not released at once: each one's handle is set in a
 * bitmap of its segment (one bit per allocator node: 1.25 MB at 10M), and every RELEASE_BATCH
 * objects (and at the end) each segment releases its set in handle order, which is the nodes'
 * memory order (mc_segment_release_set); a set that is every live allocation of its segment
 * resets the allocator at once and gives its node memory back. Anything else a step frees
 * (records, LOCAL_DISK replicas) goes through the freelist as before; when a bitmap cannot be
 * allocated its buffers do too.
 *
 * The slab pool keeps the freed slabs' pages during the walk and gives them back at its end, in
 * few long madvise runs (one call per slab was most of the time at 10M: each call is a TLB
 * shootdown); after a large RemoveAll it keeps at most TRIM_KEEP free slabs with their pages
 * and malloc gives its free pages back, so what stays resident after a large RemoveAll is bounded
 * by a few MiB (the per-shard slabs kept for reuse and the pool's warm ones), not by the table's
 * peak size.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "master/freelist.h"
#include "master/master_state.h"
#include "master/object_events.h"
#include "master/objects.h"
#include "master/objslab.h"
#include "master/shard.h"
#include "mooncake/errors.h"

#define REMOVE_ALL_STEP 4096u
#define RELEASE_BATCH (1u << 20) /* buffers held back at most before their segments get them */
#define TRIM_AT 65536u           /* a RemoveAll of at least this many objects trims memory */
#define TRIM_KEEP 256u           /* free slabs the pool keeps warm after a trim (2 MiB) */

/* One segment's held-back buffers. */
struct held_seg {
    struct mc_segment *seg;
    uint64_t *bits;
    size_t nwords;
    uint64_t count, bytes;
};

/* The held-back buffers of every segment, found by segment address (open addressing). */
struct held {
    struct held_seg *v;
    size_t n, cap;
    uint32_t *slot; /* index + 1 into v, 0: empty */
    size_t mask;
    uint64_t pending;
};

static size_t ptr_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static bool held_rehash(struct held *h, size_t ncap)
{
    uint32_t *ns = calloc(ncap, sizeof(*ns));
    if (!ns)
        return false;
    for (size_t i = 0; i < h->n; i++) {
        size_t j = ptr_hash(h->v[i].seg) & (ncap - 1);
        while (ns[j])
            j = (j + 1) & (ncap - 1);
        ns[j] = (uint32_t)i + 1;
    }
    free(h->slot);
    h->slot = ns;
    h->mask = ncap - 1;
    return true;
}

/* seg's entry, made on first sight; NULL when out of memory. */
static struct held_seg *held_find(struct held *h, struct mc_segment *seg)
{
    if (h->slot) {
        for (size_t j = ptr_hash(seg) & h->mask; h->slot[j]; j = (j + 1) & h->mask)
            if (h->v[h->slot[j] - 1].seg == seg)
                return &h->v[h->slot[j] - 1];
    }
    if ((h->n + 1) * 2 > (h->slot ? h->mask + 1 : 0) &&
        !held_rehash(h, h->slot ? (h->mask + 1) * 2 : 16))
        return NULL;
    if (h->n == h->cap) {
        size_t ncap = h->cap ? h->cap * 2 : 8;
        struct held_seg *nv = realloc(h->v, ncap * sizeof(*nv));
        if (!nv)
            return NULL;
        h->v = nv;
        h->cap = ncap;
    }
    struct held_seg *e = &h->v[h->n];
    memset(e, 0, sizeof(*e));
    e->seg = seg;
    size_t j = ptr_hash(seg) & h->mask;
    while (h->slot[j])
        j = (j + 1) & h->mask;
    h->slot[j] = (uint32_t)++h->n;
    return e;
}

/* Sets handle in e's bitmap (grown to cover it). False when it cannot grow or the bit is set
 * already (the caller then releases the buffer itself, as before). */
static bool held_set(struct held_seg *e, uint32_t handle)
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

/* Gives every held-back buffer to its segment and empties h (the segments' references go with
 * them: a segment may be freed here). */
static void held_release(struct held *h)
{
    for (size_t i = 0; i < h->n; i++) {
        struct held_seg *e = &h->v[i];
        mc_segment_release_set(e->seg, e->bits, e->nwords, e->count, e->bytes);
        free(e->bits);
    }
    h->n = 0;
    h->pending = 0;
    if (h->slot)
        memset(h->slot, 0, (h->mask + 1) * sizeof(*h->slot));
}

static void held_free(struct held *h)
{
    held_release(h);
    free(h->v);
    free(h->slot);
}

/* After a step (no lock held): fl's MEMORY buffers are held back, the rest released. */
static void drain(struct held *h, struct mc_freelist *fl)
{
    size_t keep = 0;
    for (size_t i = 0; i < fl->n; i++) {
        struct mc_fl_ent *fe = &fl->ents[i];
        struct held_seg *e = NULL;
        if (fe->r.type == MC_REPLICA_TYPE_MEMORY)
            e = held_find(h, fe->r.u.seg);
        if (e && held_set(e, fe->r.handle)) {
            e->count++;
            e->bytes += fe->size;
            h->pending++;
        } else {
            fl->ents[keep++] = *fe;
        }
    }
    fl->n = keep;
    mc_freelist_flush(fl);
    if (h->pending >= RELEASE_BATCH)
        held_release(h);
}

struct remove_all_arg {
    bool force;
    uint64_t now;
    struct mc_delop *op;
};

/* Removes every object of s it may, in steps of REMOVE_ALL_STEP under the write lock; returns
 * how many went. Downwards: an erase moves the last entry (already visited) into the hole; an
 * entry a concurrent erase moves below i between steps is visited then (a removal that failed
 * fails again, uncounted). */
static uint64_t remove_all_shard(struct mc_master *m, struct mc_shard *s,
                                 const struct remove_all_arg *ra, struct mc_freelist *fl,
                                 struct held *h)
{
    uint64_t hits = 0;
    mc_shard_wrlock(s);
    uint32_t i = s->n;
    for (;;) {
        uint32_t stop = i > REMOVE_ALL_STEP ? i - REMOVE_ALL_STEP : 0;
        for (; i-- > stop;) {
            struct mc_object *o = mc_ent_obj(mc_shard_ent(s, i));
            hits += mc_master_remove_locked(m, s, o, ra->force, ra->now, fl, ra->op) == MC_OK;
        }
        i = stop;
        mc_shard_unlock(s);
        drain(h, fl);
        mc_obj_ev_unlocked(m); /* deletes pushed under the lock */
        if (i == 0)
            break;
        mc_shard_wrlock(s);
        if (i > s->n)
            i = s->n; /* entries went meanwhile */
    }
    return hits;
}

uint64_t mc_master_remove_all_run(struct mc_master *m, bool force, struct mc_delop *op)
{
    CNT_INC(m, remove_all_requests);
    struct remove_all_arg ra = {.force = force, .now = mc_master_now_ms(m), .op = op};
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    struct held h;
    memset(&h, 0, sizeof(h));
    uint64_t n = 0;
    mc_objslab_pool_hold();
    for (uint32_t si = 0; si < MC_NSHARDS; si++)
        n += remove_all_shard(m, &m->shards[si], &ra, &fl, &h);
    held_free(&h);
    /* the emptied shards freed their tables (shard_shrink) and the segments their node pools;
     * hand the free slabs' and the malloc heaps' pages back too */
    mc_objslab_pool_unhold(n >= TRIM_AT ? TRIM_KEEP : SIZE_MAX);
    if (n >= TRIM_AT)
        malloc_trim(0);
    return n;
}
