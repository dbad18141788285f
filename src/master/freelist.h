/*
 * freelist.h - buffers and records released after a shard lock is dropped (freelist.c; private
 * to the master core).
 *
 * Whatever erases or shrinks objects under a shard lock moves the replicas it drops (and the
 * records it does not release at once) to a struct mc_freelist, and calls mc_freelist_flush
 * once it holds no shard lock: segment allocators and holder references come after shards in
 * the lock order, and a flush releases a run of one segment's buffers under one allocator lock.
 * A freelist lives on its caller's stack; its first MC_MAX_REPLICAS entries need no malloc.
 */
#ifndef MC_MASTER_FREELIST_H
#define MC_MASTER_FREELIST_H

#include <stddef.h>
#include <stdint.h>

#include "master/object_record.h"

struct mc_shard;

struct mc_fl_ent {
    struct mc_replica r;
    uint64_t size; /* the object size (segment accounting) */
};
struct mc_freelist {
    struct mc_fl_ent *ents;
    size_t n, cap;
    struct mc_object *objs; /* records to release, chained through their group field */
    struct mc_fl_ent inline_ents[MC_MAX_REPLICAS];
};

void mc_freelist_init(struct mc_freelist *fl);
/* Moves every replica of o to fl (buffers released at flush) and queues o's record (released at
 * flush, which then takes its shard lock). */
void mc_freelist_add_object(struct mc_freelist *fl, struct mc_object *o);
/* The same, except that o's record is released now into s (o's shard, write-locked). */
void mc_freelist_add_object_locked(struct mc_freelist *fl, struct mc_shard *s, struct mc_object *o);
/* Moves one replica (of an object of size bytes) to fl. */
void mc_freelist_add_replica(struct mc_freelist *fl, const struct mc_replica *r, uint64_t size);
/* Releases everything collected (no shard lock may be held) and resets fl. */
void mc_freelist_flush(struct mc_freelist *fl);

#endif
