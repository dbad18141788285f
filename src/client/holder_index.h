/*
 * holder_index.h - what this process's DRAM segments hold, as the master last told it
 * (DESIGN.md §7 "Holder index").
 *
 * Every process that mounts a DRAM segment keeps one index: per segment, the committed replicas
 * the master streamed to it (key, version, offset, length, CRC32C, last access, soft pin). It is
 * what the holder re-registers after a master restart, so the master need not persist DRAM
 * metadata anywhere.
 *
 * Rules:
 *   - a commit is filed only for a segment's current mount epoch (a commit of an earlier mount
 *     describes bytes that may already be reused);
 *   - every write to a segment drops every entry its range overlaps (the peer server and the
 *     local transport call mc_holder_index_drop_range before copying), and a commit drops the
 *     entries its own range overlaps: live entries of one segment never overlap, so an entry
 *     that comes back after a restart names bytes nobody wrote over since its commit (a commit
 *     that arrives after a later write of its range is caught by the CRC check at listing);
 *   - a delete (the delete rule) drops the key's entries at or below a version.
 *
 * Layout: entries (48 bytes + key, rounded up to 8) come from an arena of 256 KiB chunks with
 * a free list per size (holder_index_arena.h: no malloc header or 16-byte rounding), chained in
 * a key hash table (8 bytes a slot, load <= 1) and in a per-segment bucket array by start
 * offset (granularity >= 8 KiB, at most 2^20 buckets a segment), so an overlap query scans the
 * buckets its range covers plus the first non-empty bucket before it. One mutex; no call under
 * it. Measured by test_holder_index at 1M entries of 4 KiB values with 32-byte keys, entries,
 * hash table and buckets together: 92.6 bytes per entry (60.6 + key; 104.4, i.e. 72.4 + key,
 * with malloc'ed entries and 4 KiB buckets). The goal is <= 64 + key.
 */
#ifndef MC_CLIENT_HOLDER_INDEX_H
#define MC_CLIENT_HOLDER_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/id.h"

#define MC_HIDX_MAX_SEGMENTS 16

struct mc_holder_index;

/* One committed replica, as a commit files it and a listing returns it. */
struct mc_hidx_entry {
    const char *key;
    uint16_t key_len;
    uint64_t version;
    uint64_t offset;
    uint32_t len;
    uint32_t crc32c;
    bool crc_valid;
    bool soft_pin;
    uint32_t access_s; /* last access (the commit), seconds on this process's monotonic clock;
                        * kept at a minute's resolution */
};

struct mc_hidx_stats {
    uint64_t entries;   /* live entries, every segment */
    uint64_t bytes;     /* heap bytes the index holds now (entries + tables) */
    uint64_t key_bytes; /* of which key bytes */
    uint64_t committed; /* entries filed */
    uint64_t stale;     /* commits refused: another mount epoch, unknown segment */
    uint64_t dropped_by_write, dropped_by_delete, dropped_by_overlap;
};

struct mc_holder_index *mc_holder_index_new(void);
void mc_holder_index_free(struct mc_holder_index *ix);

/* Adds segment seg of size bytes (no mount yet: epoch 0 accepts no commit). 0, INVALID_PARAMS,
 * SEGMENT_ALREADY_EXISTS, NO_AVAILABLE_HANDLE (table full) or INTERNAL_ERROR. */
int mc_holder_index_add_segment(struct mc_holder_index *ix, struct mc_id seg, uint64_t size);
/* Sets seg's current mount epoch. keep: the entries stay (a re-mount that re-registered them);
 * otherwise they are dropped (a fresh mount: the master knows none of them). */
int mc_holder_index_set_epoch(struct mc_holder_index *ix, struct mc_id seg, uint64_t epoch,
                              bool keep);
uint64_t mc_holder_index_epoch(struct mc_holder_index *ix, struct mc_id seg);

/* Files e[0..n) for seg's mount epoch. Returns how many were filed. */
size_t mc_holder_index_commit(struct mc_holder_index *ix, struct mc_id seg, uint64_t epoch,
                              const struct mc_hidx_entry *e, size_t n);
/* A write of [offset, offset + len) to seg is about to land: drops every entry it overlaps. */
void mc_holder_index_drop_range(struct mc_holder_index *ix, struct mc_id seg, uint64_t offset,
                                uint64_t len);
/* Drops key's entries (every segment) of version <= version. Returns how many. */
size_t mc_holder_index_drop_key(struct mc_holder_index *ix, const char *key, size_t key_len,
                                uint64_t version);
/* Drops seg's entry of key at exactly version at offset (a re-registration the master refused). */
bool mc_holder_index_drop_exact(struct mc_holder_index *ix, struct mc_id seg, const char *key,
                                size_t key_len, uint64_t version, uint64_t offset);

/* Copies seg's entries into a new array (keys copied into one block *keys_out): *out, *n. The
 * caller frees both with free(). 0 or INTERNAL_ERROR / SEGMENT_NOT_FOUND. */
int mc_holder_index_list(struct mc_holder_index *ix, struct mc_id seg, struct mc_hidx_entry **out,
                         size_t *n, char **keys_out);

/* Drops every entry of every segment (the master fenced this holder's index). Returns how many. */
size_t mc_holder_index_clear(struct mc_holder_index *ix);

void mc_holder_index_stats(struct mc_holder_index *ix, struct mc_hidx_stats *st);

#endif
