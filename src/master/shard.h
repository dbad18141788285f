/*
 * shard.h - the object table: its shards, their entries, index, in-flight Puts and groups, and
 * the group route map (shard.c; private to the master core).
 *
 * Object table (DESIGN.md §7): MC_NSHARDS shards; shard = xxh3(key) & (MC_NSHARDS-1), or of the
 * group id for grouped keys. Each shard, under one writer-preferring rwlock, has:
 *
 *   ents   a dense array (in chunks of MC_ENT_CHUNK) of 16-byte entries, one per object:
 *          { _Atomic lease deadline (ms), object pointer | eligibility bits }. It is the table's
 *          record list: a census streams it linearly without touching the objects. Removal swaps
 *          the last entry into the hole (the moved object's ent index is updated); an eviction
 *          round removes many at once, filling the holes from the tail (shard.c).
 *   htab   open addressing (linear probing, tombstone deletion) of 32-bit slots
 *          { 8 hash bits | 24-bit ent index }, for lookups by key.
 *   pend   a small dense array of in-flight Puts { object, owner, start time, soft pin TTL }.
 *   groups a chained hash of the shard's groups (id → member objects).
 *   slabs  the shard's object records (objslab.h).
 *
 * Get makes no allocation; Put makes one record (and a malloc when it creates a group).
 *
 * Leases: Get/Exist hold the shard lock shared and raise ents[i].lease with an atomic max;
 * everything else that changes an object holds the shard lock exclusively.
 *
 * Lock order: client registry → shards ascending → segment table → one segment's allocator →
 * mailbox table → one mailbox. The group route map, the discard list and the slab pool are
 * leaves (nothing is taken while holding them). Buffers are released outside shard locks
 * (freelist.h).
 */
#ifndef MC_MASTER_SHARD_H
#define MC_MASTER_SHARD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/id.h"
#include "master/lock_order.h"
#include "master/object_record.h"
#include "master/objslab.h"

struct mc_master;

#define MC_NSHARDS 1024u
#define MC_SHARD_MASK (MC_NSHARDS - 1)
#define MC_ENT_SHIFT 10
#define MC_ENT_CHUNK (1u << MC_ENT_SHIFT)
#define MC_NO_INDEX UINT32_MAX

/* ---- entries --------------------------------------------------------------------------------- */

/* Bits kept in the low bits of mc_obj_ent.obj_bits (objects are 16-byte aligned). */
enum {
    MC_ENT_EVICTABLE = 1u << 0, /* complete, a COMPLETE MEMORY replica with refcnt 0 */
    MC_ENT_HARD_PIN = 1u << 1,
    MC_ENT_SOFT_PIN = 1u << 2, /* soft pin set; check the object's deadline to be exact */
    MC_ENT_GROUPED = 1u << 3,
    MC_ENT_BITS = 0xfu,
};

struct mc_obj_ent {
    _Atomic uint64_t lease_ms; /* read-lease deadline, monotonic ms (0 = none) */
    uintptr_t obj_bits;        /* struct mc_object * | MC_ENT_* */
};

static inline struct mc_object *mc_ent_obj(const struct mc_obj_ent *e)
{
    return (struct mc_object *)(e->obj_bits & ~(uintptr_t)MC_ENT_BITS);
}
static inline unsigned mc_ent_bits(const struct mc_obj_ent *e)
{
    return (unsigned)(e->obj_bits & MC_ENT_BITS);
}

/* The MC_ENT_* bits of o computed from the object itself (shard lock held): what
 * mc_shard_refresh_bits caches in o's entry, and what eviction's revalidation reads (a segment
 * that died since the bits were cached is seen there). */
static inline unsigned mc_obj_ent_bits(const struct mc_object *o)
{
    unsigned bits = 0;
    if (o->flags & MC_OBJ_COMPLETE) {
        for (unsigned i = 0; i < o->nrep; i++) {
            if (mc_replica_evictable(&o->rep[i])) {
                bits |= MC_ENT_EVICTABLE;
                break;
            }
        }
    }
    if (o->flags & MC_OBJ_HARD_PIN)
        bits |= MC_ENT_HARD_PIN;
    if (o->flags & MC_OBJ_SOFT_PIN)
        bits |= MC_ENT_SOFT_PIN;
    if (o->flags & MC_OBJ_GROUPED)
        bits |= MC_ENT_GROUPED;
    return bits;
}

/* ---- groups and in-flight Puts --------------------------------------------------------------- */

struct mc_group {
    struct mc_group *next; /* hash chain */
    uint64_t hash;
    uint32_t n, cap;
    struct mc_object **members;
    uint16_t id_len;
    char id[];
};

struct mc_pending {
    struct mc_object *obj;
    struct mc_id owner;
    uint64_t start_ms;
    uint64_t soft_pin_ttl_ms; /* 0: no soft pin requested */
};

/* ---- the shard ------------------------------------------------------------------------------- */

struct mc_shard {
    pthread_rwlock_t lock;
    uint32_t index;
    uint32_t gen;  /* bumped by every removal (write lock): while it holds, no entry has moved
                    * (inserts only append), so a position names the same object */
    uint32_t npop; /* entries whose cached bits are in eviction's population (mc_ent_in_pop) */
    /* ents */
    struct mc_obj_ent **chunks;
    uint32_t nchunks, chunks_cap;
    uint32_t n; /* objects */
    /* htab */
    uint32_t *slots; /* tag:8 | ent:24, or empty, or a tombstone (shard.c) */
    uint32_t mask;   /* slots - 1 */
    uint32_t ntomb;  /* tombstones in slots */
    /* in-flight puts */
    struct mc_pending *pend;
    uint32_t npend, pend_cap;
    /* A lower bound of the start time of the shard's in-flight Puts (UINT64_MAX: none since the
     * reaper last looked): lowered by every PutStart, made exact by the reaper under the lock, read
     * by the reaper without it to skip shards with nothing to reap. */
    _Atomic uint64_t pend_oldest_ms;
    /* groups */
    struct mc_group **gbuckets;
    uint32_t ngroups, gmask;
    /* object records (objslab.c): per size class, the slabs with room */
    struct mc_slab *slabs[MC_SLAB_NCLASS];
    char pad[64];
};

static inline struct mc_obj_ent *mc_shard_ent(const struct mc_shard *s, uint32_t i)
{
    return &s->chunks[i >> MC_ENT_SHIFT][i & (MC_ENT_CHUNK - 1)];
}

/* Lease floors for eviction (eviction_census.c): every MC_ENT_BLOCK consecutive entries have a
 * floor, stored after their chunk's entries, that is <= the lease deadline of each of them.
 * Deadlines only grow in place (atomic max), so only what puts a lower deadline into a block has
 * to lower its floor: an insert (deadline 0) and an entry moved into a hole (write lock, here).
 * Eviction's scans raise a floor to its block's exact minimum (read lock; a concurrent raise only
 * makes the floor lower than needed). Whoever lowers a deadline in place must lower the floor. */
#define MC_ENT_BLOCK_SHIFT 3
#define MC_ENT_BLOCK (1u << MC_ENT_BLOCK_SHIFT)
/* A block is two cache lines, and a chunk starts on a line (shard.c), so the two lines a scan
 * fetches ahead of a block are all of it. */
_Static_assert(MC_ENT_BLOCK * sizeof(struct mc_obj_ent) == 128, "a block is two cache lines");
static inline uint64_t *mc_shard_floor(const struct mc_shard *s, uint32_t i)
{
    uint64_t *floors = (uint64_t *)(s->chunks[i >> MC_ENT_SHIFT] + MC_ENT_CHUNK);
    return &floors[(i & (MC_ENT_CHUNK - 1)) >> MC_ENT_BLOCK_SHIFT];
}

/* In eviction's population (its counts' base): evictable and not hard-pinned, by cached bits. */
static inline unsigned mc_ent_in_pop(uintptr_t bits)
{
    return (bits & (MC_ENT_EVICTABLE | MC_ENT_HARD_PIN)) == MC_ENT_EVICTABLE;
}

/* Every shard lock goes through these (lock_order.h checks the order in checking builds). */
static inline void mc_shard_rdlock(struct mc_shard *s)
{
    mc_lo_acquire(MC_LO_SHARD, s->index);
    pthread_rwlock_rdlock(&s->lock);
}
static inline void mc_shard_wrlock(struct mc_shard *s)
{
    mc_lo_acquire_write(MC_LO_SHARD, s->index);
    pthread_rwlock_wrlock(&s->lock);
}
static inline void mc_shard_unlock(struct mc_shard *s)
{
    pthread_rwlock_unlock(&s->lock);
    mc_lo_release(MC_LO_SHARD, s->index);
}

/* ---- shard.c: the table mechanics (caller holds the shard lock as noted) --------------------- */

int mc_shards_init(struct mc_master *m);
void mc_shards_destroy(struct mc_master *m);
/* Shard of a key: its group's shard when grouped (route map), else hash & MASK. */
uint32_t mc_master_key_shard(struct mc_master *m, uint64_t key_hash);
/* Lookup under either lock; NULL when absent. */
struct mc_object *mc_shard_find(struct mc_shard *s, uint64_t key_hash, const char *key,
                                size_t key_len);
/* The object with this key hash and version (versions are unique per master), found through
 * the index without the key bytes; NULL if it is gone or was replaced (either lock). */
struct mc_object *mc_shard_find_version(struct mc_shard *s, uint64_t key_hash, uint64_t version);
/* Cache hints for batched lookups (either lock held), issued for a window of keys one stage at a
 * time so their misses overlap: stage 0 the key's home slot, 1 the entry of the first slot
 * whose tag matches, 2 that entry's object (header, replicas, key). */
void mc_shard_prefetch(const struct mc_shard *s, uint64_t key_hash, int stage);
/* Insert a new object (write lock). 0 or -1 when out of memory (nothing changed). */
int mc_shard_insert(struct mc_shard *s, uint64_t key_hash, struct mc_object *o);
/* Unlink an object from htab, ents, pend and its group (write lock); the caller owns it. */
void mc_shard_unlink(struct mc_master *m, struct mc_shard *s, struct mc_object *o);
/* mc_shard_unlink of a detached o with the hash of its key known (oh), and the hash of the
 * shard's last object's key too when that object is last_obj (lh; any other last object's key is
 * hashed here): an eviction round hashes its victims' and the tail's keys once, to warm their
 * index slots, and hands the hashes over (write lock). */
void mc_shard_unlink_hashed(struct mc_shard *s, struct mc_object *o, uint64_t oh,
                            const struct mc_object *last_obj, uint64_t lh);
/* The first half of an unlink: takes o out of its group and the pending Puts (write lock). */
void mc_shard_detach(struct mc_master *m, struct mc_shard *s, struct mc_object *o);
/* The second half, for many objects at once (write lock): removes objs[0..cnt) (distinct,
 * detached, still indexed) from htab and ents in O(objects + slots) without hashing any key;
 * map is scratch for s->n uint32_t. Each object's ent becomes MC_NO_INDEX. */
void mc_shard_unlink_many(struct mc_shard *s, struct mc_object *const *objs, size_t cnt,
                          uint32_t *map);
/* Recomputes the MC_ENT_* bits of o's entry (write lock) after any change to o. */
void mc_shard_refresh_bits(struct mc_shard *s, struct mc_object *o);
/* A census/eviction candidate is {shard, ent, version}: returns the object if ents[ent] still
 * holds that version (write or read lock), else NULL. */
struct mc_object *mc_shard_revalidate(struct mc_shard *s, uint32_t ent, uint64_t version);
/* Moves o's record to one with room for one more replica (write lock): the new replica
 * rep[nrep - 1] is zeroed for the caller to fill; every reference the shard keeps (entry, group,
 * pending Put) is moved, o's record is released. NULL when o has MC_MAX_REPLICAS already or
 * memory ran out (o unchanged). Nobody may keep o's old address across the call. */
struct mc_object *mc_shard_obj_grow(struct mc_shard *s, struct mc_object *o);

/* Pending Put bookkeeping (write lock). */
int mc_shard_pend_add(struct mc_shard *s, struct mc_object *o, struct mc_id owner,
                      uint64_t start_ms, uint64_t soft_pin_ttl_ms);
void mc_shard_pend_remove(struct mc_shard *s, struct mc_object *o);
/* The in-flight Put record of o (a scan of the shard's few in-flight Puts), NULL if none. */
static inline struct mc_pending *mc_obj_pending(struct mc_shard *s, struct mc_object *o)
{
    if (!(o->flags & MC_OBJ_PROCESSING))
        return NULL;
    for (uint32_t i = 0; i < s->npend; i++)
        if (s->pend[i].obj == o)
            return &s->pend[i];
    return NULL;
}

/* Groups (write lock): find or create the group and add o to it. 0 or -1 (out of memory). */
int mc_shard_group_join(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                        const char *gid, size_t gid_len, uint64_t key_hash);

/* Group route map (leaf lock). */
int mc_routes_init(struct mc_master *m);
void mc_routes_destroy(struct mc_master *m);
int mc_route_add(struct mc_master *m, uint64_t key_hash, uint32_t shard);
void mc_route_del(struct mc_master *m, uint64_t key_hash, uint32_t shard);

#endif
