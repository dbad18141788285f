/*
 * offload.h - the LOCAL_DISK tier's private entry points inside the master core (offload.c).
 *
 * The public calls (MountLocalDiskSegment ... BatchEvictDiskReplica) are in master.h; these are
 * the hooks other core modules call. Every one is a no-op, or is not called at all, when
 * m->offload is NULL (enable_offload off), so a master without the tier pays one branch.
 *
 * Locking: the *_locked calls run with the object's shard write-locked; they take the holder
 * table (a leaf) and the mailbox table/mailbox (after shards in the lock order) and push quietly
 * (mc_mailbox_push_quiet): the caller answers the woken long-polls with mc_offload_wake once it
 * dropped its locks, so a reply is never encoded under a master lock.
 */
#ifndef MC_MASTER_OFFLOAD_H
#define MC_MASTER_OFFLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/id.h"

struct mc_master;
struct mc_shard;
struct mc_object;
struct mc_freelist;
struct mc_unlink_batch;
struct mc_delop;

/* Creates m->offload when m->cfg.enable_offload (else leaves it NULL) and registers the
 * metrics. 0 or -1 (out of memory). */
int mc_offload_init(struct mc_master *m);
/* Subscribes offload to the object events (object_events.h) when the tier is on; mc_master_new
 * calls it after promotion's. 0 or -1. */
int mc_offload_subscribe(struct mc_master *m);
/* The holders' mailbox table (promotion.c queues its tasks there too); NULL without the tier. */
struct mc_mailboxes *mc_offload_mailboxes(struct mc_master *m);
/* Frees the tier's state: every parked poll is answered empty, every task freed. */
void mc_offload_destroy(struct mc_master *m);
/* Recounts nshards shards (round robin) for master_disk_only_key_count, which a scrape then
 * reads without walking the objects (offload_stats.c). Called by the eviction tick. */
void mc_offload_census_step(struct mc_master *m, uint32_t nshards);

/* Mode A: o was just completed by PutEnd; queues its offload task. */
void mc_offload_put_end_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o);
/* Answers the holders' polls that quiet pushes gave work (no lock held). */
void mc_offload_wake(struct mc_master *m);

/* Modes B and C: eviction picked o (write lock). Returns the DRAM bytes freed, as
 * mc_master_evict_object. */
uint64_t mc_offload_evict_object(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                 struct mc_freelist *fl, struct mc_unlink_batch *ub);
/* Around one BatchEvict cycle: resets the per-cycle count (mode C), then wakes the polls. */
void mc_offload_cycle_begin(struct mc_master *m);
void mc_offload_cycle_end(struct mc_master *m);

/* o is being erased (write lock; MC_OBJ_EV_ERASED, announced for every erasure, after promotion
 * sees it): cancels o's offload task and queues a delete of every disk record of o at its
 * holder. */
void mc_offload_object_erased(struct mc_master *m, struct mc_shard *s, struct mc_object *o);

/* The delete rule (DESIGN.md §7), for a Remove of o (write lock), before o is erased: queues a
 * delete of every disk record of o at its holder (and at the holder its offload task went to,
 * which may be writing one), each recorded for op (NULL: nobody waits), and takes those LOCAL_DISK
 * replicas off o (to fl). A holder with no mailbox is fenced at once. MC_OK, or the error of a
 * push that failed (TASK_PENDING_LIMIT_EXCEEDED: its delete queue is full; INTERNAL_ERROR): the
 * Remove fails, o keeps that holder's replica (the copies whose deletes were queued are off o).
 * The pushes are quiet: call mc_offload_wake once unlocked. */
int mc_offload_remove_copies_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                    struct mc_delop *op, struct mc_freelist *fl);
/* The operations of the delete rule's waits (delwait.h); NULL without the tier. */
struct mc_delwait *mc_offload_delwait(struct mc_master *m);
/* Whether the delete rule refuses a re-registered record (holder, key, version): OBJECT_NOT_FOUND
 * when holder is fenced at or above version (the copy is void), or when key is absent and a
 * Remove of it at or above version is still waiting for its deletes; MC_OK otherwise. No lock
 * held. */
int mc_offload_rereg_check(struct mc_master *m, struct mc_id holder, const char *key,
                           size_t key_len, uint64_t version);

/* The client expired (monitor, no lock held): its LOCAL_DISK registration goes as by
 * UnmountLocalDiskSegment (tasks cancelled, pins released, replicas dropped by the next sweep). */
void mc_offload_client_expired(struct mc_master *m, struct mc_id client);

/* Reaper: offload tasks past their deadline are expired and their pins released. Returns how
 * many. */
int mc_offload_reap(struct mc_master *m);

#endif
