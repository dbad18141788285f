/*
 * objects.h - the object operations other core modules build on (objects.c; private to the
 * master core). The record itself is object_record.h; records are only read or changed with
 * their shard's lock held, as each call notes.
 *
 * The calls below are objects.c's pieces that batches, eviction, offload, promotion and the
 * client sweep reuse: the single-key bodies under a held lock, erasure (hooks, counters, unlink)
 * and the eviction of one object. Buffers always leave through a struct mc_freelist
 * (freelist.h), released after the shard lock is dropped.
 */
#ifndef MC_MASTER_OBJECTS_H
#define MC_MASTER_OBJECTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/hash.h"
#include "common/id.h"
#include "master/master.h"
#include "master/object_events.h"
#include "master/object_record.h"
#include "master/segments.h"

struct mc_shard;
struct mc_freelist;
struct mc_group;

/* ---- predicates and descriptors (any shard lock held) --------------------------------------- */

bool mc_replica_readable(const struct mc_replica *r);
bool mc_replica_valid(const struct mc_replica *r); /* storage still there (any status) */
bool mc_obj_soft_pinned(const struct mc_object *o, uint64_t now_ms);
void mc_replica_fill_desc(const struct mc_object *o, const struct mc_replica *r,
                          struct mc_replica_desc *d);
/* The tiers a read of o finds (any shard lock held). */
static inline unsigned mc_obj_found_tiers(const struct mc_object *o)
{
    unsigned found = 0;
    for (uint8_t i = 0; i < o->nrep; i++) {
        if (o->rep[i].type == MC_REPLICA_TYPE_MEMORY)
            found |= MC_READ_FOUND_MEMORY;
        else if (o->rep[i].type == MC_REPLICA_TYPE_LOCAL_DISK && mc_replica_readable(&o->rep[i]))
            found |= MC_READ_FOUND_DISK;
    }
    return found;
}
/* Removes replica i from o without releasing it (write lock; caller moved it to a freelist). */
void mc_obj_drop_replica(struct mc_object *o, uint8_t i);

/* ---- lookup and the single-key bodies -------------------------------------------------------- */

int mc_master_check_key(const struct mc_master *m, const char *key, size_t len);
/* Finds a key with its shard locked (NULL, nothing locked, when absent). */
struct mc_object *mc_master_lock_find(struct mc_master *m, uint64_t h, const char *key, size_t len,
                                      bool write, struct mc_shard **out);
/* Read lease of default_kv_lease_ttl on o and its group (any shard lock). */
void mc_master_grant_lease(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                           uint64_t now_ms);
/* Single-key bodies shared by the batch forms (the shard lock held as the call needs). */
int mc_master_get_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o, uint64_t now,
                         struct mc_get_result *out);
bool mc_master_exist_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            uint64_t now);
struct mc_delop;
/* The delete rule: o's disk copies' deletes are recorded for op (NULL: nobody waits); a delete
 * that cannot be queued fails the Remove (offload.h). */
int mc_master_remove_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            bool force, uint64_t now, struct mc_freelist *fl, struct mc_delop *op);

/* RemoveAll's walk (remove_all.c): removes every object the Remove rules allow (force as in
 * RemoveAll), the deletes of disk copies recorded for op (NULL: nobody waits); no lock held.
 * Returns how many went. */
uint64_t mc_master_remove_all_run(struct mc_master *m, bool force, struct mc_delop *op);

/* ---- erasure and eviction of one object (write lock) ----------------------------------------- */

/* Erases o from s: hooks, counters, unlink, everything to fl. */
void mc_master_erase_object(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            struct mc_freelist *fl);
/* Objects erased but still in their shard's index, for one mc_shard_unlink_many. */
struct mc_unlink_batch {
    struct mc_object **objs;
    size_t n, cap;
};
/* Eviction of one object: drops its evictable MEMORY replicas; erases it when no valid replica
 * is left. Returns the bytes freed (0 when nothing was evictable). With ub, an erased object is
 * only detached (hooks, counters, group, pending Put), marked MC_OBJ_UNLINKING and appended to
 * ub: before unlocking the shard the caller unlinks them (mc_shard_unlink_many, or
 * mc_shard_unlink one by one) and moves them to a freelist. The policies see it first
 * (MC_OBJ_EV_EVICT_CHOSEN): *victim_freq (may be NULL) gets o's estimated read frequency, and
 * offload on evict may take the eviction over. */
uint64_t mc_master_evict_object(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                struct mc_freelist *fl, struct mc_unlink_batch *ub,
                                uint32_t *victim_freq);
/* Eviction of o's MEMORY replicas only, whatever the offload mode (mc_master_evict_object's
 * rules without the offload step). */
uint64_t mc_master_evict_memory(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                struct mc_freelist *fl, struct mc_unlink_batch *ub);

/* ---- an object re-registered by a holder (objects_rereg.c, write lock) ----------------------- */

/* What a holder's copy says of the object it brings back. */
struct mc_restored {
    const char *key;
    size_t key_len;
    uint64_t version, size;
    uint32_t crc32c;
    bool crc_valid;
    enum mc_master_replica_type type; /* of its one replica */
};
/* A new complete object of c with one COMPLETE replica of c->type (its id set), no lease, not in
 * the shard yet: the caller fills the replica's location, then inserts it. NULL: out of memory. */
struct mc_object *mc_obj_new_restored(struct mc_master *m, struct mc_shard *s,
                                      const struct mc_restored *c);
/* Inserts o (from mc_obj_new_restored, its replica filled) under key_hash and counts it. MC_OK,
 * or INTERNAL_ERROR with o freed (the caller releases what its replica refers to). */
int mc_obj_insert_restored(struct mc_master *m, struct mc_shard *s, uint64_t key_hash,
                           struct mc_object *o);

/* Whether replica r of o is one to drop (mc_obj_drop_picked; any lock o's callers hold). */
typedef bool (*mc_replica_pick_fn)(const struct mc_master *m, const struct mc_object *o,
                                   const struct mc_replica *r, const void *arg);
/* Drops o's replicas pick chooses, or only the first of them with first_only (write lock): the
 * policies are told first (a copy that goes may be a task's source), each buffer goes to fl.
 * Then o settles: erased when no valid replica is left and no Put is in flight, else its shard
 * bits refreshed. Returns how many were dropped; o is untouched when pick chose none. */
unsigned mc_obj_drop_picked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            struct mc_freelist *fl, mc_replica_pick_fn pick, const void *arg,
                            bool first_only);

/* ---- whole-table walks ------------------------------------------------------------------------
 */

/* Visits one object under its shard's write lock; may drop its replicas or erase it (buffers to
 * fl). Returns true to count the object. */
typedef bool (*mc_object_visit_fn)(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                   struct mc_freelist *fl, void *arg);
/* Calls fn on every object, one shard at a time under its write lock (no lock held on entry),
 * releasing what fn moved to fl after each shard's lock is dropped. Returns how many calls
 * returned true. */
uint64_t mc_master_each_object(struct mc_master *m, mc_object_visit_fn fn, void *arg);

#endif
