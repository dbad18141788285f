/*
 * eviction_unlink.c - what an eviction round does around its one-by-one unlinks (write lock):
 * warming the keys and index slots they will read, and raising the lease floor of a block that
 * lost its victim.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "master/eviction_unlink.h"

static uint64_t key_hash_of(struct mc_object *o)
{
    return mc_hash_key(mc_obj_key(o), o->key_len);
}

/* Before unlinking ub's objects one by one (write lock): each unlink finds its object and the
 * shard's last object (moved into the hole) in the index by their keys' hashes. Those keys are
 * fetched together first, then hashed once (kept in h for the unlinks) and the index slots their
 * hashes lead to fetched, so the misses overlap instead of coming one after another (the tail
 * objects are the likely ones to move); the victims' slab headers (their records go back there)
 * come along. */
void ev_warm_unlinks(struct mc_shard *s, const struct mc_unlink_batch *ub,
                     struct ev_unlink_hashes *h)
{
    uint32_t tails = ub->n < s->n ? (uint32_t)ub->n : s->n;
    h->ntail = 0;
    bool keep = ub->n <= h->cap;
    if (!keep) {
        size_t cap = h->cap ? h->cap : 64;
        while (cap < ub->n)
            cap *= 2;
        uint64_t *vh = realloc(h->vh, cap * sizeof(*vh));
        if (vh)
            h->vh = vh;
        uint64_t *th = realloc(h->th, cap * sizeof(*th));
        if (th)
            h->th = th;
        const struct mc_object **tl = realloc(h->tail, cap * sizeof(*tl));
        if (tl)
            h->tail = tl;
        keep = vh && th && tl;
        if (keep)
            h->cap = cap;
    }
    for (size_t i = 0; i < ub->n; i++) {
        __builtin_prefetch(ub->objs[i]);
        __builtin_prefetch((const char *)ub->objs[i] + 64);
        uint32_t b0 = ub->objs[i]->ent & ~(MC_ENT_BLOCK - 1); /* ev_refloor reads the block */
        __builtin_prefetch(mc_shard_floor(s, b0));
        __builtin_prefetch(mc_shard_ent(s, b0));
        if (b0 + 4 < s->n)
            __builtin_prefetch(mc_shard_ent(s, b0 + 4));
    }
    for (uint32_t j = 1; j <= tails; j++) {
        const char *o = (const char *)mc_ent_obj(mc_shard_ent(s, s->n - j));
        __builtin_prefetch(o);
        __builtin_prefetch(o + 64);
    }
    for (size_t i = 0; i < ub->n; i++) {
        uint64_t kh = key_hash_of(ub->objs[i]);
        if (keep)
            h->vh[i] = kh;
        mc_shard_prefetch(s, kh, 0);
        mc_objslab_prefetch(ub->objs[i]);
    }
    for (uint32_t j = 1; j <= tails; j++) {
        struct mc_object *o = mc_ent_obj(mc_shard_ent(s, s->n - j));
        uint64_t kh = key_hash_of(o);
        if (keep) {
            h->tail[j - 1] = o;
            h->th[j - 1] = kh;
        }
        mc_shard_prefetch(s, kh, 0);
    }
    if (keep)
        h->ntail = tails ? tails : UINT32_MAX; /* UINT32_MAX: the hashes are kept, no tail */
}

void ev_unlink_one(struct mc_shard *s, const struct mc_unlink_batch *ub, size_t i,
                   const struct ev_unlink_hashes *h)
{
    struct mc_object *o = ub->objs[i];
    if (!h->ntail) { /* nothing kept */
        mc_shard_unlink_hashed(s, o, key_hash_of(o), NULL, 0);
        return;
    }
    /* the i-th unlink's last position is the one the tail's i-th object held, unless an earlier
     * unlink moved another object there (mc_shard_unlink_hashed compares the objects) */
    bool t = h->ntail != UINT32_MAX && i < h->ntail;
    mc_shard_unlink_hashed(s, o, h->vh[i], t ? h->tail[i] : NULL, t ? h->th[i] : 0);
}

void ev_unlink_hashes_free(struct ev_unlink_hashes *h)
{
    free(h->vh);
    free(h->th);
    free(h->tail);
    memset(h, 0, sizeof(*h));
}

/* The lease floor of the block holding position e, raised to the block's exact minimum (write
 * lock): a victim was the oldest of its block, and the entry moved into its hole is usually
 * newer, so the next cycle's low census can skip the block again. */
void ev_refloor(struct mc_shard *s, uint32_t e)
{
    uint32_t b0 = e & ~(MC_ENT_BLOCK - 1), bl = b0 + MC_ENT_BLOCK < s->n ? b0 + MC_ENT_BLOCK : s->n;
    uint64_t bm = UINT64_MAX;
    for (uint32_t j = b0; j < bl; j++) {
        uint64_t l = atomic_load_explicit(&mc_shard_ent(s, j)->lease_ms, memory_order_relaxed);
        bm = l < bm ? l : bm;
    }
    *mc_shard_floor(s, e) = bm;
}
