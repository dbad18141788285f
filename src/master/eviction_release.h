/*
 * eviction_release.h - a large eviction round's DRAM buffers held back per segment and given
 * back in handle order (eviction_release.c).
 */
#ifndef MC_MASTER_EVICTION_RELEASE_H
#define MC_MASTER_EVICTION_RELEASE_H

#include <stddef.h>
#include <stdint.h>

#include "master/freelist.h"

struct mc_segment;

struct ev_held_buf {
    uint32_t handle;
    uint64_t size;
};

struct ev_held_seg {
    struct mc_segment *seg;
    struct ev_held_buf *b; /* kept across rounds (entries up to cap are allocated) */
    size_t n, cap;
};

/* One worker's held-back buffers, by segment. */
struct ev_held {
    struct ev_held_seg *v;
    size_t n, cap;
    struct ev_held_buf *tmp; /* the sort's second buffer, kept across rounds */
    size_t tmp_cap;
};

/* After a shard's work (no shard lock held): fl's MEMORY buffers are held back in h, the rest
 * of fl is released (mc_freelist_flush). */
void ev_held_drain(struct ev_held *h, struct mc_freelist *fl);
/* Gives every held-back buffer to its segment, in handle order, and empties h (keeping its
 * lists' memory for the next round). */
void ev_held_release(struct ev_held *h);
void ev_held_free(struct ev_held *h);

#endif
