/*
 * tombstone.h - keys removed while a restarted master still recovers disk records (tombstone.c).
 *
 * After a restart the master learns its LOCAL_DISK objects from the holders' re-registrations,
 * and a slow holder may list a key after this master already removed it (the Remove was
 * acknowledged by the holders the master knew of then). Every removal made during the recovery
 * window (offload.c, --disk_recovery_window_sec) records {hash of the key, version removed};
 * a re-registered record of an absent key at or below that version is refused, never recreated.
 * When the window closes nothing is recreated from records any more and the set is emptied.
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

#endif
