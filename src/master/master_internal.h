/*
 * master_internal.h - the master core's internal layout, shared by its modules (objects.c,
 * shard.c, clients.c, master.c) and by later ones (eviction.c, offload, promotion).
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
 *
 * An object is one record: struct mc_object, its replicas, then its key bytes (48 + 24 per
 * replica + key bytes), from its shard's slabs (objslab.c; long keys: a malloc). Get makes no
 * allocation; Put makes one record (and a malloc when it creates a group).
 *
 * Leases: Get/Exist hold the shard lock shared and raise ents[i].lease with an atomic max;
 * everything else that changes an object holds the shard lock exclusively.
 *
 * Lock order: client registry → shards ascending → segment table → one segment's allocator →
 * mailbox table → one mailbox. The group route map, the discard list and the slab pool
 * (objslab.c) are leaves (nothing is taken while holding them). Buffers are released outside
 * shard locks: operations collect them in a struct mc_freelist and call mc_freelist_flush after
 * unlocking.
 */
#ifndef MC_MASTER_INTERNAL_H
#define MC_MASTER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "common/hash.h"
#include "common/id.h"
#include "master/lock_order.h"
#include "master/master.h"
#include "master/segments.h"

#define MC_NSHARDS 1024u
#define MC_SHARD_MASK (MC_NSHARDS - 1)
#define MC_ENT_SHIFT 10
#define MC_ENT_CHUNK (1u << MC_ENT_SHIFT)
#define MC_NO_INDEX UINT32_MAX
#define MC_SLAB_SIZE 8192u /* objslab.c: one slab, aligned to its size */
#define MC_SLAB_GRAIN 16u  /* size-class step (records stay 16-byte aligned) */
#define MC_SLAB_NCLASS 32u /* classes up to 512-byte records; longer ones are mallocs */

/* ---- objects ------------------------------------------------------------------------------ */

/* A LOCAL_DISK holder: the client whose SSD has the copy (refcounted, immutable but `dead`). */
struct mc_holder {
    _Atomic uint32_t refs;
    _Atomic bool dead;
    struct mc_id id;
    char endpoint[MC_ENDPOINT_MAX];
    /* LOCAL_DISK replicas referring to this holder and their bytes (offload.c adds, releasing a
     * replica through a freelist subtracts). */
    _Atomic int64_t nreplicas, bytes;
};

struct mc_replica { /* 24 bytes */
    union {
        struct mc_segment *seg;   /* MEMORY: holds a segment reference */
        struct mc_holder *holder; /* LOCAL_DISK: holds a holder reference */
    } u;
    uint64_t offset : MC_SEGMENT_OFFSET_BITS; /* MEMORY: byte offset inside the segment */
    uint64_t type : 2;                        /* enum mc_master_replica_type */
    uint64_t status : 3;                      /* enum mc_master_replica_status */
    uint64_t refcnt : 11; /* pins (offload source, promotion source); > 0: never evicted */
    uint32_t id;          /* unique among the object's replicas (a wrapping global counter) */
    uint32_t handle;      /* MEMORY: allocator handle */
};
#define MC_REPLICA_REFCNT_MAX 2047u
/* Every offset of the largest segment a mount accepts fits the offset field (segments.c refuses
 * larger ones), and the four fields fill one 64-bit word. */
_Static_assert(MC_SEGMENT_MAX_SIZE - 1 <= (1ull << MC_SEGMENT_OFFSET_BITS) - 1,
               "a segment offset must fit struct mc_replica.offset");
_Static_assert(MC_SEGMENT_OFFSET_BITS + 2 + 3 + 11 == 64, "struct mc_replica bitfields: one word");
_Static_assert(sizeof(struct mc_replica) == 24, "struct mc_replica is 24 bytes");
_Static_assert(MC_REPLICA_REFCNT_MAX == (1u << 11) - 1, "refcnt limit = its field width");
_Static_assert(MC_REPLICA_STATUS_FAILED < (1u << 3) && MC_REPLICA_TYPE_LOCAL_DISK < (1u << 2),
               "replica type and status fit their fields");

enum {
    MC_OBJ_COMPLETE = 1u << 0, /* PutEnd done */
    MC_OBJ_HAS_CRC = 1u << 1,
    MC_OBJ_HARD_PIN = 1u << 2,
    MC_OBJ_SOFT_PIN = 1u << 3,   /* soft_pin_deadline_ms is set (active while now < deadline) */
    MC_OBJ_PROCESSING = 1u << 4, /* a Put is in flight: its record is in the shard's pend */
    MC_OBJ_UNLINKING = 1u << 5,  /* erased, awaiting mc_shard_unlink_many (eviction round) */
    MC_OBJ_HEAP = 1u << 6,       /* the record is a malloc (too long for a slab class) */
    MC_OBJ_OFFLOADING = 1u << 7, /* an offload task exists: one MEMORY replica is pinned for it
                                  * (offload.c; the only pins MEMORY replicas get) */
    MC_OBJ_PROMOTING = 1u << 8,  /* has a task in its shard's promotion table (promotion.c) */
};
#define MC_OBJECT_SIZE_BITS 40
#define MC_OBJECT_SIZE_MAX ((1ull << MC_OBJECT_SIZE_BITS) - 1)
/* An object fits in the largest segment, and the capacity cap in a 64-bit counter. */
_Static_assert(MC_OBJECT_SIZE_MAX < MC_SEGMENT_MAX_SIZE, "an object fits one segment");
_Static_assert(MC_SEGMENTS_MAX_CAPACITY <= UINT64_MAX - MC_SEGMENT_MAX_SIZE,
               "capacity + one more segment cannot wrap");

struct mc_group;
struct mc_slab;

struct mc_object {                       /* 48 bytes, then nrep replicas, then key_len key bytes */
    uint64_t size : MC_OBJECT_SIZE_BITS; /* value bytes, <= MC_OBJECT_SIZE_MAX */
    uint64_t key_len : 16;
    uint64_t nrep : 8;
    uint64_t version;
    uint64_t soft_pin_deadline_ms : 48;
    uint64_t flags : 16;    /* MC_OBJ_* */
    struct mc_group *group; /* NULL when not grouped */
    uint32_t crc;
    uint32_t ent;       /* index in the shard's ents */
    uint64_t owner_tag; /* mc_owner_tag() of the client that PutStarted it (PutEnd checks it
                         * after completion, when the pending record is gone) */
    struct mc_replica rep[];
};

/* A 64-bit fingerprint of a client id, kept per object instead of the 16-byte id. */
static inline uint64_t mc_owner_tag(struct mc_id id)
{
    return mc_hash_seeded(&id, sizeof(id), 0x6f776e6572ull);
}

static inline char *mc_obj_key(struct mc_object *o)
{
    return (char *)&o->rep[o->nrep];
}

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

/* ---- shards ------------------------------------------------------------------------------- */

struct mc_shard {
    pthread_rwlock_t lock;
    uint32_t index;
    uint32_t gen; /* bumped by every insert and removal (write lock): eviction's per-block
                   * deadline minima of a shard stay valid while gen is unchanged */
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

/* Every shard lock goes through these (lock_order.h checks the order in checking builds). */
static inline void mc_shard_rdlock(struct mc_shard *s)
{
    mc_lo_acquire(MC_LO_SHARD, s->index);
    pthread_rwlock_rdlock(&s->lock);
}
static inline void mc_shard_wrlock(struct mc_shard *s)
{
    mc_lo_acquire(MC_LO_SHARD, s->index);
    pthread_rwlock_wrlock(&s->lock);
}
static inline void mc_shard_unlock(struct mc_shard *s)
{
    pthread_rwlock_unlock(&s->lock);
    mc_lo_release(MC_LO_SHARD, s->index);
}

/* Buffers to release after the shard lock is dropped, and object records queued where their
 * shard lock is not held (flush takes it; under the lock records go back at once). */
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

/* Batch operations with upstream's master_batch_<op>_* counter families. */
enum mc_batch_op {
    MC_BATCH_EXIST_KEY,
    MC_BATCH_GET_REPLICA_LIST,
    MC_BATCH_PUT_START,
    MC_BATCH_PUT_END,
    MC_BATCH_PUT_REVOKE,
    MC_BATCH_NOPS
};
/* Per batch op: calls, calls where every item failed, calls where some did, items, failed. */
enum { MC_BF_REQUESTS, MC_BF_FAILURES, MC_BF_PARTIAL, MC_BF_ITEMS, MC_BF_FAILED_ITEMS, MC_BF_N };

/* Statistics kept as plain atomics (exported by GetStats and the metrics registry). */
struct mc_master_counters {
    _Atomic uint64_t batch[MC_BATCH_NOPS][MC_BF_N];
    /* the tables of master_counters.h */
#define MC_CNT_U64(f, ...) _Atomic uint64_t f;
#define MC_CNT_I64(f, ...) _Atomic int64_t f;
    MC_MASTER_GET_COUNTERS(MC_CNT_U64)
    MC_MASTER_CALL_COUNTERS(MC_CNT_U64)
    MC_MASTER_EVICTION_COUNTERS(MC_CNT_U64)
    MC_MASTER_GAUGES(MC_CNT_I64)
#undef MC_CNT_U64
#undef MC_CNT_I64
};

struct mc_client_rec {
    struct mc_client_rec *next;
    struct mc_id id;
    uint64_t deadline_ms;
    enum mc_client_status status;
};

/* The deferred-free list: objects unlinked from their shard whose buffers someone may still be
 * using, released by the reaper once release_ms passed: a taken-over Put (its writer may still
 * write) and a force-removed object under a read lease (a reader may still read). */
struct mc_discarded {
    struct mc_object *obj; /* unlinked from its shard, still owning its buffers */
    uint64_t release_ms;
    bool put; /* a taken-over Put (counted by put_start_release_cnt) */
};

struct mc_route_stripe;
struct mc_evictor;
struct mc_offload;
struct mc_promoter;
struct mc_mailboxes;

/* Optional callbacks of later modules (offload/promotion): NULL when unused. */
struct mc_master_hooks {
    /* An object is being erased (Remove, eviction, sweep, reaper); the shard is write-locked. */
    void (*object_erased)(struct mc_master *m, struct mc_shard *s, struct mc_object *o);
};

struct mc_master {
    struct mc_master_config cfg;
    const struct mc_clock *clock;
    uint16_t epoch;
    uint64_t version_base; /* mc_master_version_base */
    struct mc_segments *segs;
    struct mc_shard *shards; /* MC_NSHARDS */
    _Atomic uint64_t next_version;
    _Atomic uint64_t next_replica_id;
    _Atomic bool need_eviction; /* a PutStart failed for space */
    _Atomic bool sweep_pending; /* an UnmountSegment left replicas on a dead segment: the next
                                 * monitor tick sweeps them (mc_master_sweep_invalid) */
    struct mc_master_counters c;
    struct mc_master_hooks hooks;
    struct mc_metrics *metrics;      /* the master's own registry (upstream metric names) */
    struct mc_histogram *value_size; /* master_value_size_bytes, observed at PutEnd */
    struct mc_evictor *evictor;      /* eviction.c's state (NULL when eviction.c is absent) */
    struct mc_offload *offload;      /* offload.c's state (NULL unless cfg.enable_offload) */
    struct mc_promoter *promoter;    /* promotion.c's state */
    struct mc_mailboxes *mailboxes;  /* offload's mailbox table (NULL without it) */

    /* client registry */
    pthread_mutex_t clients_lock;
    struct mc_client_rec **cbuckets;
    uint32_t cmask, nclients;

    /* discarded Puts awaiting their release time */
    pthread_mutex_t discard_lock;
    struct mc_discarded *discard;
    size_t ndiscard, discard_cap;

    /* grouped keys: key hash → shard (so a Get without the group id finds the key) */
    _Atomic uint64_t grouped_keys;
    struct mc_route_stripe *routes;

    uint64_t next_soft_pin_sweep_ms;
    _Atomic uint64_t reaper_shard_locks; /* shards the reaper write-locked (tests read it) */
};

/* The client registry (first in the lock order) and the discard list (a leaf). */
static inline void mc_registry_lock(struct mc_master *m)
{
    mc_lo_acquire(MC_LO_REGISTRY, 0);
    pthread_mutex_lock(&m->clients_lock);
}
static inline void mc_registry_unlock(struct mc_master *m)
{
    pthread_mutex_unlock(&m->clients_lock);
    mc_lo_release(MC_LO_REGISTRY, 0);
}
static inline void mc_discard_lock(struct mc_master *m)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    pthread_mutex_lock(&m->discard_lock);
}
static inline void mc_discard_unlock(struct mc_master *m)
{
    pthread_mutex_unlock(&m->discard_lock);
    mc_lo_release(MC_LO_LEAF, 0);
}

static inline uint64_t mc_master_now_ms(const struct mc_master *m)
{
    return mc_clock_now_ms(m->clock);
}

/* ---- shard.c: the table mechanics (caller holds the shard lock as noted) ------------------ */

int mc_shards_init(struct mc_master *m);
void mc_shards_destroy(struct mc_master *m);
/* Shard of a key: its group's shard when grouped (route map), else hash & MASK. */
uint32_t mc_master_key_shard(struct mc_master *m, uint64_t key_hash);
/* Lookup under either lock; NULL when absent. */
struct mc_object *mc_shard_find(struct mc_shard *s, uint64_t key_hash, const char *key,
                                size_t key_len);
/* Insert a new object (write lock). 0 or -1 when out of memory (nothing changed). */
int mc_shard_insert(struct mc_shard *s, uint64_t key_hash, struct mc_object *o);
/* Unlink an object from htab, ents, pend and its group (write lock); the caller owns it. */
void mc_shard_unlink(struct mc_master *m, struct mc_shard *s, struct mc_object *o);
/* The first half of an unlink: takes o out of its group and the pending Puts (write lock). */
void mc_shard_detach(struct mc_master *m, struct mc_shard *s, struct mc_object *o);
/* The second half, for many objects at once (write lock): removes objs[0..cnt) (distinct,
 * detached, still indexed) from htab and ents in O(objects + slots) without hashing any key;
 * map is scratch for s->n uint32_t. Each object's ent becomes MC_NO_INDEX. */
void mc_shard_unlink_many(struct mc_shard *s, struct mc_object *const *objs, size_t cnt,
                          uint32_t *map);
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
/* Recomputes the MC_ENT_* bits of o's entry (write lock) after any change to o. */
void mc_shard_refresh_bits(struct mc_shard *s, struct mc_object *o);
/* A census/eviction candidate is {shard, ent, version}: returns the object if ents[ent] still
 * holds that version (write or read lock), else NULL. */
struct mc_object *mc_shard_revalidate(struct mc_shard *s, uint32_t ent, uint64_t version);
/* Cache hints for batched lookups (either lock held), issued for a window of keys one stage at a
 * time so their misses overlap: stage 0 the key's home slot, 1 the entry of the first slot
 * whose tag matches, 2 that entry's object (header, replicas, key). */
void mc_shard_prefetch(const struct mc_shard *s, uint64_t key_hash, int stage);
/* The object with this key hash and version (versions are unique per master), found through
 * the index without the key bytes; NULL if it is gone or was replaced (either lock). */
struct mc_object *mc_shard_find_version(struct mc_shard *s, uint64_t key_hash, uint64_t version);
/* Group route map (leaf lock). */
int mc_routes_init(struct mc_master *m);
void mc_routes_destroy(struct mc_master *m);
int mc_route_add(struct mc_master *m, uint64_t key_hash, uint32_t shard);
void mc_route_del(struct mc_master *m, uint64_t key_hash, uint32_t shard);

/* ---- objslab.c: object records ----------------------------------------------------------- */

/* A record of bytes (>= sizeof(struct mc_object)) for shard s (write lock): the header zeroed
 * except MC_OBJ_HEAP in flags (keep it). NULL when out of memory. */
struct mc_object *mc_obj_alloc(struct mc_shard *s, size_t bytes);
/* Releases o's record; s (o's shard, the one that allocated it) is write-locked. */
void mc_obj_free_locked(struct mc_shard *s, struct mc_object *o);
/* Releases o's record with no shard lock held (takes the owning shard's lock). */
void mc_obj_free(struct mc_object *o);
/* Frees s's slabs (the shard is being destroyed; its records are released already). */
void mc_objslab_destroy(struct mc_shard *s);

/* ---- objects.c ---------------------------------------------------------------------------- */

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

/* Replica predicates (any shard lock held). */
bool mc_replica_readable(const struct mc_replica *r);
bool mc_replica_valid(const struct mc_replica *r); /* storage still there (any status) */
static inline bool mc_replica_evictable(const struct mc_replica *r)
{
    return r->type == MC_REPLICA_TYPE_MEMORY && r->status == MC_REPLICA_STATUS_COMPLETE &&
           r->refcnt == 0 && mc_segment_alive(r->u.seg);
}
bool mc_obj_soft_pinned(const struct mc_object *o, uint64_t now_ms);

/* Erases o from s (write lock): hooks, counters, unlink, everything to fl. */
void mc_master_erase_object(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            struct mc_freelist *fl);
/* Objects erased but still in their shard's index, for one mc_shard_unlink_many. */
struct mc_unlink_batch {
    struct mc_object **objs;
    size_t n, cap;
};
/* Eviction of one object (write lock): drops its evictable MEMORY replicas; erases it when no
 * valid replica is left. Returns the bytes freed (0 when nothing was evictable). With ub, an
 * erased object is only detached (hooks, counters, group, pending Put), marked
 * MC_OBJ_UNLINKING and appended to ub: before unlocking the shard the caller unlinks them
 * (mc_shard_unlink_many, or mc_shard_unlink one by one) and moves them to a freelist. */
uint64_t mc_master_evict_object(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                struct mc_freelist *fl, struct mc_unlink_batch *ub);
/* Drops replicas whose storage is gone (dead segment / dead holder) from every shard and erases
 * objects left with none. Returns the number of objects erased. */
uint64_t mc_master_sweep_invalid(struct mc_master *m);
void mc_replica_fill_desc(const struct mc_object *o, const struct mc_replica *r,
                          struct mc_replica_desc *d);
void mc_holder_unref(struct mc_holder *h);
/* Eviction of o's MEMORY replicas only, whatever the offload mode (mc_master_evict_object's
 * rules without the offload step). */
uint64_t mc_master_evict_memory(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                struct mc_freelist *fl, struct mc_unlink_batch *ub);
/* Moves o's record to one with room for one more replica (write lock): the new replica
 * rep[nrep - 1] is zeroed for the caller to fill; every reference the shard keeps (entry, group,
 * pending Put) is moved, o's record is released. NULL when o has MC_MAX_REPLICAS already or
 * memory ran out (o unchanged). Nobody may keep o's old address across the call. */
struct mc_object *mc_shard_obj_grow(struct mc_shard *s, struct mc_object *o);
/* Removes replica i from o without releasing it (write lock; caller moved it to a freelist). */
void mc_obj_drop_replica(struct mc_object *o, uint8_t i);
/* Read lease of default_kv_lease_ttl on o and its group (any shard lock). */
void mc_master_grant_lease(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                           uint64_t now_ms);
/* Single-key bodies shared by the batch forms (the shard lock held as the call needs). */
int mc_master_get_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o, uint64_t now,
                         struct mc_get_result *out);
bool mc_master_exist_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            uint64_t now);
int mc_master_remove_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            bool force, uint64_t now, struct mc_freelist *fl);
/* Finds a key with its shard locked (NULL, nothing locked, when absent). */
struct mc_object *mc_master_lock_find(struct mc_master *m, uint64_t h, const char *key, size_t len,
                                      bool write, struct mc_shard **out);
int mc_master_check_key(const struct mc_master *m, const char *key, size_t len);

/* ---- eviction.c ------------------------------------------------------------------------- */

/* mc_master_tick_eviction (master.h) is defined by eviction.c; master.c holds a weak no-op
 * default only so the core links while eviction.c is absent. mc_master_new calls
 * mc_eviction_init after the metrics registry exists, mc_master_free calls mc_eviction_destroy
 * first (weak references: skipped when eviction.c is not linked). */
int mc_eviction_init(struct mc_master *m) __attribute__((weak));
void mc_eviction_destroy(struct mc_master *m) __attribute__((weak));

/* ---- promotion.c (promotion.h): the core's calls into it ------------------------------------ */

int mc_promotion_init(struct mc_master *m);
void mc_promotion_destroy(struct mc_master *m);
/* A Get may trigger a promotion of o (any shard lock held): no MEMORY replica of any status and
 * a readable LOCAL_DISK one. */
static inline bool mc_promotion_candidate(const struct mc_object *o)
{
    bool disk = false;
    for (uint8_t i = 0; i < o->nrep; i++) {
        if (o->rep[i].type == MC_REPLICA_TYPE_MEMORY)
            return false;
        disk |= o->rep[i].type == MC_REPLICA_TYPE_LOCAL_DISK && mc_replica_readable(&o->rep[i]);
    }
    return disk;
}
/* After a Get answered a candidate (no lock held): the gates, maybe an admission. */
void mc_promotion_on_get(struct mc_master *m, const char *key, size_t key_len, uint64_t key_hash);
/* o (MC_OBJ_PROMOTING) is being erased (write lock): its task is cancelled; its replicas go with
 * the object. */
void mc_promotion_object_erased(struct mc_master *m, struct mc_shard *s, struct mc_object *o);
/* Remove of o (MC_OBJ_PROMOTING, write lock; lease and Put checks passed): OK when the object
 * could be removed but for its promotion, which is then cancelled (staged replica to fl); else
 * the refusal, nothing changed. */
int mc_promotion_before_remove(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                               bool force, struct mc_freelist *fl);
/* Cancels o's task if its source or staged replica lost its storage (write lock; sweep). */
void mc_promotion_check_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                               struct mc_freelist *fl);
/* Cancels o's task, if any (write lock): staged replica to fl, source unpinned. For callers about
 * to drop the source replica (disk eviction). Returns true when a task was cancelled. */
bool mc_promotion_cancel_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                struct mc_freelist *fl);
/* Reaper: tasks past promotion_task_timeout. Returns how many. */
int mc_promotion_reap(struct mc_master *m);

#endif
