/*
 * disk_store.h - the LOCAL_DISK store: a directory of append-only extent files on an SSD
 * (DESIGN.md §8 "Disk store", §11). Internal API of the client library; the offload and
 * promotion workers and mooncake_bench use it.
 *
 * On disk. The directory holds extent files "<16 hex digits>.ext" (ids grow; the oldest is the
 * smallest) written only with O_DIRECT and, but for dead marks, only by appending. An extent
 * starts with a 4 KiB superblock (magic, format, its id, a random nonce, its record unit). A
 * record is
 *     [header + key, zero-padded to the unit][value, zero-padded to the unit]
 * The unit is 512 B (format 3) where the directory takes O_DIRECT I/O at 512 B (probed at open),
 * else 4 KiB (format 2, the layout of earlier versions): a 4 KiB value with a key of up to 448
 * bytes takes 4.5 KiB (1.125x), a 64 KiB value 64.5 KiB (1.008x); the header part grows by one
 * unit per further 512 B of key. Extents of either format are read; a store mixes them.
 * The 64-byte little-endian header holds a magic, a format number, flags (dead), the key
 * length, the value length, the object version (u64), the value CRC32C, the extent id, the
 * record's own offset and the extent's nonce, and a CRC32C of the header and key: a header
 * verifies only where it was written. A record that is removed or replaced is marked dead in
 * place (its header rewritten with the dead flag; there are no tombstones), so a restart never
 * brings it back, whichever extents were evicted first. Other files in the directory are
 * ignored (the client keeps its id there); a LOCK file (flock) keeps a second process out.
 * Layout details in disk_format.c.
 *
 * In memory. key -> (extent, offset, length, version, crc, pins). The newest version of a key
 * wins (equal versions: the later append); an append older than the indexed version is refused
 * (INVALID_VERSION). A read goes straight from the SSD into the caller's buffer when that
 * buffer is 4 KiB aligned and holds the padded length, else through an aligned bounce buffer;
 * the value CRC is checked before the read reports success (CHECKSUM_MISMATCH otherwise, and
 * the caller's bytes are zeroed: wrong bytes are never returned).
 *
 * I/O. io_uring (liburing): every batch is submitted through a ring taken from the store's
 * pool, so each concurrently submitting thread has its own ring, with up to queue_depth
 * operations in flight and no thread per request. Each ring registers its staging buffer and a
 * sparse table of the extent files when the kernel allows it (RLIMIT_MEMLOCK for the buffer);
 * otherwise plain buffers and fds are used and one log line says so.
 *
 * Capacity. bytes_used is the sum of extent sizes. When an append would pass the capacity, whole
 * extents are dropped oldest first (an extent holding a pinned record is skipped while another
 * candidate exists) and the eviction callback is told which live keys go away BEFORE any file
 * is deleted; if the callback fails, nothing is deleted and the append fails (no silent loss).
 * After an append, usage above the high watermark drops further unpinned sealed extents the same
 * way (a callback failure there is logged; the append already succeeded); a record of the
 * append itself that this pass evicted (a batch past the watermark) fails with UNABLE_OFFLOAD,
 * since its caller has not told anyone it is stored. A dropped extent's
 * file is closed and unlinked only after its last reader (and writer) is done.
 *
 * Second chance (FIFO with reinsertion, an approximate LRU over extents). A read sets its
 * record's accessed bit. Before an extent is dropped, its live records with the bit set (and
 * pinned ones) are read back, checked against their CRC and appended again to the newest extent
 * with the same key, version and CRC, bit cleared; only the rest are reported to the callback
 * and go. The moved bytes are bounded by half the dropped extent's size and by the room left
 * under the capacity (so an eviction always frees space and usage never passes the capacity),
 * and a record is never moved into the extent being dropped. The old extent is deleted only
 * after the new copies are written (a crash in between leaves two copies of one key and
 * version: the start-up scan keeps the later one and marks the other dead). A record replaced
 * or removed while it was being moved keeps its new state: the moved copy is marked dead. A
 * removal never returns while a live copy of the key can remain on disk: one that finds the
 * key's record being copied waits until the copies of that window are written (then marks both),
 * and one that finds a moved record whose old extent is not yet deleted marks both copies dead
 * (an overwrite passes both duties to the newer version). If
 * the callback refuses, the moved records stay moved and their old copies are marked dead.
 * A failed move (I/O error, ENOSPC, bad CRC) only means that record goes. The moves go
 * through an io_uring ring in windows of 8 MiB: a window's records are read in one batch, then
 * written, each run of adjacent new places as one write (an eviction holds up the appends that
 * wait for room, so it should not take one synchronous read and write per record).
 * cfg.no_reinsert turns this off.
 *
 * Write failures. A record whose write fails is never indexed; its reservation is given back
 * (the extent is cut back and reused) unless a later record was reserved after it, in which
 * case it stays a zeroed hole. No failure seals an extent or opens a new one, so a fault that
 * persists costs no space and no good record. ENOSPC (or EDQUOT) from the filesystem is
 * capacity pressure: the append fails with UNABLE_OFFLOAD, usage.no_space is set, the spares
 * are deleted and the capacity eviction works against is lowered to what the store uses
 * (usage.capacity_limit); the watermark pass after the append then evicts below it at once
 * (the callback told first, as for any eviction), and an append while the filesystem still
 * has no room (fstatvfs) first makes room against that limit (the active extent included),
 * so appends resume. Only the change to full lowers the limit: a filesystem that keeps saying
 * ENOSPC costs one eviction, not the store. The limit rises again as the filesystem shows
 * room (free space less a new extent and 1 MiB) and goes once the configured capacity fits;
 * the next append that gets through clears no_space.
 *
 * Dead extents. An extent whose last live record goes (removed, replaced by a newer version,
 * dropped after a failed read check) is deleted as soon as no read, write or eviction uses
 * it (or kept as a spare), and its bytes leave bytes_used (usage.reclaimed_extents).
 *
 * Space. A new extent file gets its whole extent_size allocated at once (fallocate, best
 * effort), so appends write inside the file instead of extending it; the unwritten part reads
 * as zeros, which the start-up scan cuts off without counting it as dropped. An evicted extent's
 * file is not deleted but renamed "<id>.spr" (at most two such spares; the rename comes after
 * the callback and after its last reader, exactly where the delete was) and the next new
 * extent is written over it: a new superblock (new id, new nonce, flag RECYCLED) first, then
 * the rename to its new name. Writing over blocks the filesystem holds already skips the
 * unwritten-to-written conversion of fresh preallocated blocks (a journaled update per write)
 * and the discard that deleting a file sends on a filesystem mounted with `discard`: in steady
 * state (a full store evicting as it appends) the store writes as fio does over a laid-out
 * file. The old records never verify in their new place (other extent id, other nonce); the
 * start-up scan does not count stale bytes that run to the end of a RECYCLED extent as damage,
 * and a clean close cuts them off. Spares are not counted in bytes_used (the filesystem holds
 * up to two extents more than the capacity) and are deleted at open and close, and none is
 * kept while the filesystem is full (capacity_limit below capacity).
 *
 * Writes. An append's records go out from one aligned buffer in writes of up to 4 MiB cut at
 * 4 KiB-aligned offsets of the extent (a record may straddle two writes), and an append of 256
 * KiB or more in 512-byte units starts and ends on a 4 KiB boundary: dead filler records (at
 * most 3.5 KiB each, usage.filler_bytes) take the gaps. On ext4 a direct write that is not
 * aligned to the filesystem block into never written (preallocated) blocks takes the inode
 * exclusively and waits for every direct I/O in flight on the file, which ran a fresh extent's
 * writes one at a time. Each value is copied into the buffer and its CRC computed in the same
 * pass; a value that does not match its CRC is written as a dead record and its item fails with
 * CHECKSUM_MISMATCH (the others are stored).
 *
 * Start-up. Every extent is scanned and verified; a record whose header or value fails its CRC
 * is dropped and counted (a bad header is skipped by searching the following record units for
 * the next header that verifies at that very offset); garbage after the last good record (a
 * torn append) is counted and truncated away; an extent with no live record is deleted; one of
 * format 1, of a format newer than this version knows, or with a damaged superblock is logged
 * (naming the format), counted (skipped_extents) and left on disk. Appends always go to a fresh
 * extent after a restart.
 *
 * Durability: nothing is fsync'd. Once a call returns, its writes are on the device (O_DIRECT),
 * so a process crash loses nothing acknowledged; a power loss can lose recent acknowledged
 * records (never return wrong bytes: everything is CRC-checked).
 *
 * Thread safety: every function may be called from any thread. Callbacks (eviction, foreach) are
 * called without store locks held, except mc_disk_store_foreach's which must not call the store.
 */
#ifndef MC_CLIENT_DISK_STORE_H
#define MC_CLIENT_DISK_STORE_H

#include <stddef.h>
#include <stdint.h>

#define MC_DISK_BLOCK 4096u
#define MC_DISK_MAX_KEY_LEN 65000u

struct mc_disk_store;

/* The default extent size follows the capacity: capacity / MC_DISK_MIN_EXTENTS rounded down to
 * 4 KiB, within [MC_DISK_EXTENT_MIN, MC_DISK_EXTENT_MAX]. Eviction drops whole extents, so with
 * at least 16 of them (capacity >= 16 MiB) a tier keeps every record until at least
 * MC_DISK_KEEP_FRACTION of its capacity has been appended after it (high watermark 0.90 less
 * one extent dropped past it and one partly filled active extent: 0.90 - 2/16 >= 3/4). The
 * floor of 1 MiB keeps appends large and sequential and the extent files few. */
#define MC_DISK_MIN_EXTENTS 16u
#define MC_DISK_EXTENT_MIN (1ull << 20)
#define MC_DISK_EXTENT_MAX (64ull << 20)
#define MC_DISK_KEEP_FRACTION 0.75
uint64_t mc_disk_extent_size_for(uint64_t capacity);

/* One live record that an eviction removes (keys are not NUL-terminated). */
struct mc_disk_evict_item {
    const char *key;
    uint32_t key_len;
    uint64_t version;
    uint64_t size;
};

/* Called before the extents holding these records are deleted. Return 0 when the owner (the
 * master) has been told; any other value cancels the eviction and nothing is deleted. Runs in
 * the appending thread without store locks; it may read the store but must not append or
 * remove (evictions are serialized, so that would wait for itself). */
typedef int (*mc_disk_evict_fn)(void *ctx, const struct mc_disk_evict_item *items, size_t n);

struct mc_disk_store_config {
    const char *path;          /* directory; created if missing (one level) */
    uint64_t capacity;         /* bytes, > 0 */
    double high_watermark;     /* fraction of capacity; 0 -> 0.90 */
    uint64_t extent_size;      /* target extent file size, a multiple of 4 KiB; 0 ->
                                  mc_disk_extent_size_for(capacity) */
    unsigned queue_depth;      /* operations in flight per ring; 0 -> 32 */
    size_t staging_bytes;      /* aligned staging buffer per ring; 0 -> 4 MiB */
    mc_disk_evict_fn evict_cb; /* NULL: evictions tell no one */
    void *evict_ctx;
    /* Records a read found damaged (value CRC mismatch): already dropped (dead mark written,
     * out of the index) when this is called, from the reading thread without store locks;
     * the return value is only logged. NULL: no one is told. Same rules as evict_cb. */
    mc_disk_evict_fn drop_cb;
    void *drop_ctx;
    int no_reinsert;         /* 1: eviction drops whole extents plainly (FIFO); default 0:
                                read records get a second chance (see Capacity above) */
    int no_recycle;          /* 1: an evicted extent's file is deleted; default 0: up to two
                                are kept as spares and written over (see Space above) */
    int test_refuse_odirect; /* test builds only: the O_DIRECT probe fails with EINVAL */
    /* Record unit of new extents: 512 or 4096 (4096 writes the format-2 layout of earlier
     * versions); 0 -> the smallest the directory takes O_DIRECT I/O at (probed at open). */
    unsigned record_align;
};

/* An append. crc must be the CRC32C of data[0..len) (checked; CHECKSUM_MISMATCH if not). */
struct mc_disk_put {
    const char *key;
    uint32_t key_len;
    uint64_t version;
    uint32_t crc;
    const void *data;
    uint64_t len;
};

/* A read: in key/key_len/buf/cap; out len/version/crc/result. On BUFFER_OVERFLOW len is the
 * value's length (what cap must be); on any other error len is 0. A record whose value fails
 * its CRC (CHECKSUM_MISMATCH) is dropped: marked dead, out of the index, reported through
 * cfg.drop_cb, so the next read of the key finds OBJECT_NOT_FOUND instead of the same bad
 * bytes forever. */
struct mc_disk_get;
/* A read's consumer instead of buf (mc_disk_get.sink): called once the value's bytes are in the
 * store's own (registered) staging, with g's len/version/crc filled in; it copies the len bytes
 * where it wants them and returns 0 with *crc the CRC32C of what it copied (taken in the same
 * pass), which the store then checks as it checks its own reads; or an error code when it did
 * not copy, which becomes g->result. */
typedef int (*mc_disk_sink_fn)(void *ctx, const struct mc_disk_get *g, const void *bytes,
                               uint32_t *crc);

struct mc_disk_get {
    const char *key;
    uint32_t key_len;
    void *buf;
    uint64_t cap;
    uint64_t len;
    uint64_t version;
    uint32_t crc;
    int result; /* MC_OK, OBJECT_NOT_FOUND, BUFFER_OVERFLOW, CHECKSUM_MISMATCH, FILE_READ_FAIL */
    mc_disk_sink_fn sink; /* NULL: the value lands in buf; else buf is unused (cap still bounds) */
    void *sink_ctx;
};

struct mc_disk_record_info {
    const char *key;
    uint32_t key_len;
    uint64_t version;
    uint32_t crc;
    uint64_t size;
    uint32_t pins;
};

struct mc_disk_usage {
    uint64_t bytes_used; /* sum of extent sizes (what counts against capacity) */
    uint64_t capacity;
    uint64_t live_bytes; /* bytes of live records (header blocks + padded values) */
    uint64_t records;    /* live keys */
    uint64_t extents;
    uint64_t dropped_records_at_recovery;
    uint64_t dropped_bytes_at_recovery;
    uint64_t evicted_extents;
    uint64_t evicted_records;
    /* read records that an eviction moved (second chance) instead of dropping */
    uint64_t reinserted_records;
    int no_space;               /* 1 while the filesystem is full (ENOSPC): appends are refused
                                   with UNABLE_OFFLOAD without touching the disk until it has room */
    uint64_t no_space_events;   /* times the store went full */
    uint64_t write_errors;      /* records whose write failed (space given back when possible) */
    uint64_t kill_failures;     /* superseded records whose dead mark could not be written */
    uint64_t skipped_extents;   /* extent files not adopted at open (older format, damaged
                                   superblock): logged and left on disk */
    int registered_buffers;     /* 1 when the last ring created has a registered staging buffer */
    int registered_files;       /* 1 when the last ring created has a registered file table */
    uint64_t recycled_extents;  /* extents written over an evicted extent's file (a spare) */
    uint64_t window_maps;       /* write window buffers mapped: rings keep theirs between appends,
                                   so this grows with rings (and batch sizes), not with appends */
    uint64_t capacity_limit;    /* the capacity eviction works against: `capacity`, or less while
                                   the filesystem has less room (after ENOSPC) */
    uint64_t reclaimed_extents; /* extents deleted as soon as they held no live record */
    uint64_t corrupt_dropped;   /* records dropped because a read found their value damaged */
    uint32_t record_unit;       /* record alignment of new extents: 512 or 4096 bytes */
    uint64_t write_ios;         /* writes the appends issued (first attempts, merged records) */
    uint64_t write_bytes;       /* bytes those writes carried (records and fillers) */
    uint64_t filler_bytes;      /* dead filler bytes appends reserved to keep their writes
                                   4 KiB-aligned (see Writes in the header comment) */
};

/* Opens (and recovers) the store. On failure returns an error code, *out = NULL, and err (if
 * non-NULL) holds a message naming the path (e.g. a filesystem that refuses O_DIRECT). */
int mc_disk_store_open(const struct mc_disk_store_config *cfg, struct mc_disk_store **out,
                       char *err, size_t errlen);
/* Closes the store; no other call may be in flight. Files stay on disk. */
void mc_disk_store_close(struct mc_disk_store *s);

/* Appends n records. results (may be NULL) gets one code per item. Returns MC_OK when all
 * succeeded, else the first failing item's code. Space errors: UNABLE_OFFLOAD when nothing can be
 * evicted to make room; the callback's code (or INTERNAL_ERROR) when it refused an eviction. */
int mc_disk_store_append(struct mc_disk_store *s, const struct mc_disk_put *items, size_t n,
                         int *results);

/* Reads n keys into the callers' buffers; per-key result in items[i].result. Returns MC_OK when
 * all succeeded, else the first failing item's code. */
int mc_disk_store_read(struct mc_disk_store *s, struct mc_disk_get *items, size_t n);

/* Removes keys: each present key's record is marked dead in place (no space needed), then it
 * leaves the index; FILE_WRITE_FAIL (the key stays) when the mark cannot be written. results
 * may be NULL. */
int mc_disk_store_remove(struct mc_disk_store *s, const char *const *keys, const uint32_t *key_lens,
                         size_t n, int *results);

/* The indexed record of a key (info->key points into the store: valid until the next call). */
int mc_disk_store_lookup(struct mc_disk_store *s, const char *key, uint32_t key_len,
                         struct mc_disk_record_info *info);

/* Pins a key's record (a promotion source): eviction prefers other extents. Pins follow the key
 * to a newer version; removal drops them. *version (may be NULL) gets the pinned version. */
int mc_disk_store_pin(struct mc_disk_store *s, const char *key, uint32_t key_len,
                      uint64_t *version);
int mc_disk_store_unpin(struct mc_disk_store *s, const char *key, uint32_t key_len);

/* Calls fn for each live record under the store lock (fn must not call the store); a non-zero
 * return stops the walk and is returned. */
typedef int (*mc_disk_foreach_fn)(void *ctx, const struct mc_disk_record_info *rec);
int mc_disk_store_foreach(struct mc_disk_store *s, mc_disk_foreach_fn fn, void *ctx);

void mc_disk_store_usage(struct mc_disk_store *s, struct mc_disk_usage *u);

/* Fault injection (test builds only: the setter exists with MC_TEST_HOOKS; without it the types
 * stay for the store's internals, and no fault can ever be set). After `skip` matching
 * transfers pass, the next `count` (-1: all) matching transfers fail: EIO / ENOSPC / EAGAIN are
 * reported without touching the disk; SHORT really transfers half the remaining bytes (rounded
 * down to 4 KiB) and reports that count (the engine resubmits the rest, which is another
 * transfer). SUBMIT counts submit calls instead of transfers: the matching call fails hard. */
enum mc_disk_fault_kind {
    MC_DISK_FAULT_NONE,
    MC_DISK_FAULT_EIO,
    MC_DISK_FAULT_ENOSPC,
    MC_DISK_FAULT_SHORT,
    MC_DISK_FAULT_EAGAIN,
    MC_DISK_FAULT_SUBMIT
};
enum { MC_DISK_FAULT_READ = 1, MC_DISK_FAULT_WRITE = 2 };
struct mc_disk_fault {
    enum mc_disk_fault_kind kind;
    int ops; /* MC_DISK_FAULT_READ | MC_DISK_FAULT_WRITE */
    int skip;
    int count;
    /* Called by the submitting thread before each batch's I/O (kind may be NONE): a test can
     * hold a read here while it holds its extent's reader count. */
    void (*before_io)(void *ctx, int write);
    void *before_io_ctx;
    /* Called by the evicting thread, without store locks, at the points of a second-chance move
     * (MC_DISK_MOVE_*): a test stops a move there, acts, and copies the directory (a crash). */
    void (*on_move)(void *ctx, int stage);
    void *on_move_ctx;
};
enum {
    MC_DISK_MOVE_COPIED = 1,  /* new copies written, the index still at the old ones */
    MC_DISK_MOVE_SWITCHED = 2 /* the index at the new copies, the old extent not yet deleted */
};
#ifdef MC_TEST_HOOKS
void mc_disk_store_test_set_fault(struct mc_disk_store *s, const struct mc_disk_fault *f);
#endif

#endif
