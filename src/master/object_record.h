/*
 * object_record.h - the object record (struct mc_object, its replicas, its key bytes) and the
 * LOCAL_DISK holder a replica refers to (private to the master core).
 *
 * An object is one record: struct mc_object, its replicas, then its key bytes (40 + 24 per
 * replica + key bytes), and for a grouped object its group link (8 more bytes after the key),
 * from its shard's slabs (objslab.h; long keys: a malloc). The group link lives behind the key
 * rather than in the header because few objects are grouped: a 64-byte key with one replica
 * makes a 128-byte record, one slab class below where the 48-byte header put it. A replica is
 * MEMORY (a range of a mounted segment, holding a segment reference) or LOCAL_DISK (a copy on a
 * client's SSD, holding a holder reference). Records live in a shard's table (shard.h) and are
 * only read or changed with that shard's lock held. The layout sits on the structures' floor,
 * below the object operations (objects.h), so that the shards, slabs and freelists that store
 * records need nothing above them.
 */
#ifndef MC_MASTER_OBJECT_RECORD_H
#define MC_MASTER_OBJECT_RECORD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/id.h"
#include "master/master_types.h"
#include "master/segments.h"

struct mc_shard;
struct mc_freelist;
struct mc_group;

/* ---- the record ------------------------------------------------------------------------------ */

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

/* Drops one reference to h (NULL: nothing); the last one frees it. */
static inline void mc_holder_unref(struct mc_holder *h)
{
    if (h && atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
        free(h);
}

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
    uint32_t handle;      /* MEMORY: allocator handle; LOCAL_DISK: the holder listing that last
                           * confirmed it (offload.c) */
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
    MC_OBJ_GROUPED = 1u << 9,    /* in a group: the record's group link (mc_obj_group) is set */
    /* bits 14-15: offload NACKs for a full disk so far (offload.c; a 2-bit count) */
    MC_OBJ_OFFLOAD_NACKS_SHIFT = 14,
    MC_OBJ_OFFLOAD_NACKS_MASK = 3u << 14,
};
#define MC_OBJECT_SIZE_BITS 40
#define MC_OBJECT_SIZE_MAX ((1ull << MC_OBJECT_SIZE_BITS) - 1)
/* An object fits in the largest segment, and the capacity cap in a 64-bit counter. */
_Static_assert(MC_OBJECT_SIZE_MAX < MC_SEGMENT_MAX_SIZE, "an object fits one segment");
_Static_assert(MC_SEGMENTS_MAX_CAPACITY <= UINT64_MAX - MC_SEGMENT_MAX_SIZE,
               "capacity + one more segment cannot wrap");

struct mc_object { /* 40 bytes, then nrep replicas, key_len key bytes, [group link] */
    uint64_t size : MC_OBJECT_SIZE_BITS; /* value bytes, <= MC_OBJECT_SIZE_MAX */
    uint64_t key_len : 16;
    uint64_t nrep : 8;
    uint64_t version;
    uint64_t soft_pin_deadline_ms : 48;
    uint64_t flags : 16; /* MC_OBJ_* */
    uint32_t crc;
    uint32_t ent;       /* index in the shard's ents */
    uint64_t owner_tag; /* mc_owner_tag() of the client that PutStarted it (PutEnd checks it
                         * after completion, when the pending record is gone; a record on a
                         * freelist keeps the list's link here) */
    struct mc_replica rep[];
};
_Static_assert(sizeof(struct mc_object) == 40, "struct mc_object is 40 bytes");

/* A 64-bit fingerprint of a client id, kept per object instead of the 16-byte id. */
static inline uint64_t mc_owner_tag(struct mc_id id)
{
    return mc_hash_seeded(&id, sizeof(id), 0x6f776e6572ull);
}

static inline char *mc_obj_key(struct mc_object *o)
{
    return (char *)&o->rep[o->nrep];
}

/* Bytes of a record of nrep replicas and a key_len-byte key, with room for a group link when
 * grouped (the size mc_obj_alloc is asked for). */
static inline size_t mc_obj_record_bytes(uint32_t nrep, size_t key_len, bool grouped)
{
    return sizeof(struct mc_object) + nrep * sizeof(struct mc_replica) + key_len +
           (grouped ? sizeof(struct mc_group *) : 0);
}

/* Bytes after the replicas: the key, then the group link of a grouped object. */
static inline size_t mc_obj_tail_bytes(const struct mc_object *o)
{
    return o->key_len + ((o->flags & MC_OBJ_GROUPED) ? sizeof(struct mc_group *) : 0);
}

/* The object's group (shard.h), NULL when not grouped. The link sits right after the key bytes,
 * unaligned (memcpy). */
static inline struct mc_group *mc_obj_group(const struct mc_object *o)
{
    struct mc_group *g = NULL;
    if (o->flags & MC_OBJ_GROUPED)
        memcpy(&g, (const char *)&o->rep[o->nrep] + o->key_len, sizeof(g));
    return g;
}

/* Sets o's group link (g non-NULL; the record was allocated with room for it, grouped = true)
 * or clears it (g NULL; the room stays unused). */
static inline void mc_obj_set_group(struct mc_object *o, struct mc_group *g)
{
    if (g) {
        o->flags |= MC_OBJ_GROUPED;
        memcpy((char *)&o->rep[o->nrep] + o->key_len, &g, sizeof(g));
    } else {
        o->flags &= ~(unsigned)MC_OBJ_GROUPED;
    }
}

/* A MEMORY replica eviction may drop: complete, unpinned, on a live segment (any lock). */
static inline bool mc_replica_evictable(const struct mc_replica *r)
{
    return r->type == MC_REPLICA_TYPE_MEMORY && r->status == MC_REPLICA_STATUS_COMPLETE &&
           r->refcnt == 0 && mc_segment_alive(r->u.seg);
}

#endif
