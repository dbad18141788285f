/*
 * objslab.h - the allocator of object records (objslab.c; private to the master core).
 *
 * Records come from slabs owned by one shard each and are allocated and released under that
 * shard's write lock; a record too long for the largest size class is a malloc marked
 * MC_OBJ_HEAP. The slab pool behind the slabs is a leaf of the lock order. The design is in
 * objslab.c's header comment.
 */
#ifndef MC_MASTER_OBJSLAB_H
#define MC_MASTER_OBJSLAB_H

#include <stddef.h>
#include <stdint.h>

#define MC_SLAB_SIZE 8192u /* one slab, aligned to its size */
#define MC_SLAB_GRAIN 16u  /* size-class step (records stay 16-byte aligned) */
#define MC_SLAB_NCLASS 32u /* classes up to 512-byte records; longer ones are mallocs */

struct mc_shard;
struct mc_object;
struct mc_slab;

/* A record of bytes (>= sizeof(struct mc_object)) for shard s (write lock): the header zeroed
 * except MC_OBJ_HEAP in flags (keep it). NULL when out of memory. */
struct mc_object *mc_obj_alloc(struct mc_shard *s, size_t bytes);
/* A cache hint for a later mc_obj_free_locked of o: its slab's header (a record allocated
 * with malloc, MC_OBJ_HEAP, has none: the hint then reads nothing useful, and faults never). */
static inline void mc_objslab_prefetch(const void *o)
{
    __builtin_prefetch((const void *)((uintptr_t)o & ~(uintptr_t)(MC_SLAB_SIZE - 1)), 1);
}
/* Releases o's record; s (o's shard, the one that allocated it) is write-locked. */
void mc_obj_free_locked(struct mc_shard *s, struct mc_object *o);
/* Releases o's record with no shard lock held (takes the owning shard's lock). */
void mc_obj_free(struct mc_object *o);
/* A large removal brackets itself with these: meanwhile the pool keeps freed slabs' pages (no
 * madvise per batch of slabs), and when the last hold ends it gives back the pages of all but
 * min(keep, its usual bound) free slabs in one pass (few long runs). */
void mc_objslab_pool_hold(void);
/* Gives back the pages of the pool's free slabs past its bound once enough gathered (call with
 * no shard lock held: mc_freelist_flush does). Cheap when there is nothing to do. */
void mc_objslab_pool_trim_if_over(void);
void mc_objslab_pool_unhold(size_t keep);
/* The slab pool's figures (tests): free slabs with their pages (warm) and without (cold), and
 * slabs carved from fresh mappings so far. */
struct mc_objslab_pool_stats {
    size_t warm, cold, carved;
};
void mc_objslab_pool_stats(struct mc_objslab_pool_stats *out);
/* Whether slab arenas mapped from now on ask for transparent huge pages (process-wide; the
 * default is yes). */
void mc_objslab_set_huge_pages(bool on);
/* Frees s's slabs (the shard is being destroyed; its records are released already). */
void mc_objslab_destroy(struct mc_shard *s);

#endif
