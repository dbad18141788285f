/*
 * tombstone.h - the recovery window and the keys removed while a restarted master still
 * recovers its holders' copies (tombstone.c).
 *
 * After a restart the master learns its objects from the holders' re-registrations (LOCAL_DISK
 * records, offload_rereg.c; DRAM replicas, holder_rereg.c), and a slow holder may list a key
 * after this master already removed it (the Remove was acknowledged by the holders the master
 * knew of then). The recovery window (struct mc_recovery, --disk_recovery_window_sec) is open
 * for a while after the master starts (or takes over as the leader); every removal made while
 * it is open records {hash of the key, version removed}, and a re-registered copy of an absent
 * key at or below that version is refused, never recreated. When the window closes nothing is
 * recreated from holders' copies any more and the set is emptied. One window per master: the
 * disk tier's when there is one, else the DRAM holder stream's (master_state.h m->recovery).
 *
 * Keys are kept by their 64-bit hash: two keys sharing one refuse each other's older records
 * (a cache miss, never wrong bytes). The set holds at most `max` keys; an add past it fails and
 * the caller then closes the window early (recreation stops, which is always safe).
 *
 * Locking: one mutex, a leaf of the lock order (callers may hold a shard lock).
 */
#ifndef MC_MASTER_TOMBSTONE_H
#define MC_MASTER_TOMBSTONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_tombs;

struct mc_tombs *mc_tombs_new(size_t max);
void mc_tombs_free(struct mc_tombs *t);

/* Records that key_hash was removed at version (the highest version removed is kept). false
 * when the set is full or out of memory: nothing was recorded. */
bool mc_tombs_add(struct mc_tombs *t, uint64_t key_hash, uint64_t version);
/* Whether a record of key_hash at version was removed (version <= the highest removed). */
bool mc_tombs_blocks(struct mc_tombs *t, uint64_t key_hash, uint64_t version);
/* Drops every entry and its memory. */
void mc_tombs_clear(struct mc_tombs *t);
size_t mc_tombs_count(struct mc_tombs *t);

/* ---- the recovery window ------------------------------------------------------------------- */

struct mc_recovery;

/* The tombstones a window holds at most (16 bytes each at half load: 128 MiB); past them it
 * closes early. */
#define MC_RECOVERY_TOMBS_MAX (4u << 20)

/* A window open from now_ms for window_ms (0: 60000), holding at most max_keys tombstones
 * (past them it closes early: nothing is recreated any more, which is always safe). */
struct mc_recovery *mc_recovery_new(uint64_t now_ms, uint64_t window_ms, size_t max_keys);
void mc_recovery_free(struct mc_recovery *r);
/* Whether copies of keys the master does not have may still be recreated. */
bool mc_recovery_open(struct mc_recovery *r, uint64_t now_ms);
/* A removal of key_hash at version (call with the key's shard write-locked): remembered while
 * the window is open. */
void mc_recovery_note_removal(struct mc_recovery *r, uint64_t now_ms, uint64_t key_hash,
                              uint64_t version);
/* Whether a copy of the absent key_hash at version may be recreated now: the window is open and
 * no removal at or above version was noted (call with the key's shard write-locked). */
bool mc_recovery_may_recreate(struct mc_recovery *r, uint64_t now_ms, uint64_t key_hash,
                              uint64_t version);
/* The tick's part: the window closes (its tombstones dropped) once its time is over. */
void mc_recovery_tick(struct mc_recovery *r, uint64_t now_ms);
/* A standby became the leader: the window runs again from now_ms. */
void mc_recovery_restart(struct mc_recovery *r, uint64_t now_ms);

#endif
