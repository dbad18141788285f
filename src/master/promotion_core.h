/*
 * promotion_core.h - promotion.c's private entry points inside the master core: its lifecycle,
 * the handlers behind its object-event subscription (object_events.h: the object layer, the
 * client sweep and eviction announce, they do not call these) and the reaper's call. The public
 * calls and the design are in promotion.h.
 */
#ifndef MC_MASTER_PROMOTION_CORE_H
#define MC_MASTER_PROMOTION_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/id.h"
#include "master/objects.h"

struct mc_master;
struct mc_shard;
struct mc_freelist;

int mc_promotion_init(struct mc_master *m);
void mc_promotion_destroy(struct mc_master *m);
/* Subscribes promotion to the object events (object_events.h); mc_master_new calls it first. 0
 * or -1. */
int mc_promotion_subscribe(struct mc_master *m);
/* After a Get answered a candidate (no lock held): the gates, maybe an admission. */
void mc_promotion_on_get(struct mc_master *m, const char *key, size_t key_len, uint64_t key_hash);
/* The trigger of a BatchGet of batch_keys keys for one of them: gate 1 with the batch threshold
 * when batch_keys > 1, then as mc_promotion_on_get. Called after the key's shard lock is
 * dropped; a no-op when promotion is off. */
void mc_promotion_on_batch_get(struct mc_master *m, const char *key, size_t key_len,
                               uint64_t key_hash, size_t batch_keys);
/* A Get answered key_hash's object from a MEMORY replica (no lock needed; call it with no lock
 * held where the caller can): the read is counted in the admission sketch, so a DRAM object's
 * estimated frequency is known when eviction compares it with a candidate's (hot beats cold).
 * Callers skip it when promotion is off. */
void mc_promotion_on_memory_read(struct mc_master *m, uint64_t key_hash);
/* Hot beats cold, eviction's side (no lock of the sketch: it is lock-free): the estimated
 * frequency of o, about to be evicted (any shard lock held; 0 when promotion is off), and the
 * cycle's summary (sum of the estimates of the n objects it evicted, once the cycle is over). */
uint32_t mc_promotion_victim_estimate(struct mc_master *m, struct mc_object *o);
void mc_promotion_note_victims(struct mc_master *m, uint64_t sum, uint64_t n);
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
/* holder mounted its LOCAL_DISK segment again (a restart within its TTL): every task of it is
 * cancelled (staged ranges parked), since the tasks its earlier incarnation took are lost and a
 * task that was staged cannot be handed out again. No lock held. */
void mc_promotion_holder_remounted(struct mc_master *m, struct mc_id holder);
/* Reaper: tasks past promotion_task_timeout, and parked staged ranges whose segment's mount
 * ended. Returns how many tasks. */
int mc_promotion_reap(struct mc_master *m);

#endif
