/*
 * fence.h - holder fences of the delete rule (DESIGN.md §7 "The delete rule"; fence.c).
 *
 * A holder that did not acknowledge a delete within holder_delete_timeout is fenced: one record
 * per holder, {holder id, fence version}, meaning every disk copy that holder has at or below
 * the fence version is void. A fenced holder re-registers nothing at or below its fence version.
 * Fences only rise. They live in memory for the master's life; under HA the leader also stores
 * them in etcd (ha_fence.c): a raise marks the record dirty (the journal), the HA thread drains
 * the dirty records into etcd and a new leader loads them (mc_fences_load) before it serves.
 *
 * Locking: one mutex, a leaf of the lock order (callers may hold a shard lock; nothing is called
 * under it).
 */
#ifndef MC_MASTER_FENCE_H
#define MC_MASTER_FENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/id.h"

struct mc_fences;

struct mc_fences *mc_fences_new(void);
void mc_fences_free(struct mc_fences *f);

/* Raises holder's fence to version (a lower version leaves it). 0, or -1 out of memory (the
 * caller then treats the holder as gone: it is dropped, see offload.c). */
int mc_fences_raise(struct mc_fences *f, struct mc_id holder, uint64_t version);
/* holder's fence version; 0 when it has none. */
uint64_t mc_fences_get(struct mc_fences *f, struct mc_id holder);
/* Whether a copy of version held by holder is void (version <= its fence). */
bool mc_fences_voids(struct mc_fences *f, struct mc_id holder, uint64_t version);
/* A raise that came from etcd (a new leader's load): not journalled again. */
int mc_fences_load(struct mc_fences *f, struct mc_id holder, uint64_t version);

/* The journal. drain: copies up to cap records raised since they were last drained into out and
 * clears their mark; returns how many. redirty: marks holder's record again (its write to etcd
 * failed). pending: how many records are marked. */
struct mc_fence {
    struct mc_id holder;
    uint64_t version;
};
size_t mc_fences_drain(struct mc_fences *f, struct mc_fence *out, size_t cap);
void mc_fences_redirty(struct mc_fences *f, struct mc_id holder);
size_t mc_fences_pending(struct mc_fences *f);

/* Durability (HA). require_durable: from now on a fence counts for the Removes that wait on it
 * only once its record is in etcd. stored: holder's record at version is in etcd (the HA
 * thread's sync; a load counts as stored). durable: whether holder's fence at version may
 * settle the deletes it covers (always true without require_durable). */
void mc_fences_require_durable(struct mc_fences *f);
void mc_fences_stored(struct mc_fences *f, struct mc_id holder, uint64_t version);
bool mc_fences_durable(struct mc_fences *f, struct mc_id holder, uint64_t version);

/* How many holders have a fence. */
size_t mc_fences_count(struct mc_fences *f);

#endif
