/*
 * disk_internal.h - shared internals of the LOCAL_DISK store (disk_store.h), split by job:
 *   disk_store.c   open/close, read, pins, extent and entry bookkeeping
 *   disk_evict.c   capacity eviction, second-chance moves, extent deletion/reclaim and spares
 *   disk_write.c   append, remove
 *   disk_append_io.c an append's window: record encoding, 4 KiB-aligned writes, retries
 *   disk_dead.c    dead marks (headers rewritten in place)
 *   disk_index.c   the key -> record hash index
 *   disk_uring.c   the ring pool and the batched io_uring engine (+ fault injection)
 *   disk_recover.c the start-up scan that verifies extents and rebuilds the index
 *   disk_format.c  the on-disk record header (encode/verify)
 *
 * Locking: s->mu guards the index, the extent list and every counter; s->pool_mu guards the
 * ring pool (taken after s->mu when both are held); s->faults.mu guards the fault hook (taken
 * last). No lock is held during I/O or while a callback runs (except foreach, documented).
 * Every take and drop goes through disk_lock / disk_pool_lock / disk_faults_lock (below), which
 * checking builds feed to the lock-order checker (common/lock_order.h), and every function
 * named *_locked asserts s->mu is held (DISK_ASSERT_LOCKED).
 */
#ifndef MC_CLIENT_DISK_INTERNAL_H
#define MC_CLIENT_DISK_INTERNAL_H

#include <liburing.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "client/disk_store.h"
#include "common/lock_order.h"
#include "common/mc_assert.h"

#define DISK_COMP "disk"
#define DISK_HDR_SIZE 64u
#define DISK_MAGIC 0x5244434du    /* "MCDR" little-endian: a record header */
#define DISK_SB_MAGIC 0x5844434du /* "MCDX" little-endian: an extent superblock */
/* The format of new extents: 3 (records aligned to the store's record unit, 512 B where the
 * device takes direct I/O at that granularity); a store whose unit is 4 KiB writes format 2,
 * byte for byte what earlier versions wrote. Both are read; others are not adopted. */
#define DISK_FORMAT 3u
#define DISK_FORMAT_4K 2u
#define DISK_MIN_ALIGN 512u
#define DISK_FLAG_DEAD 2u /* superseded or removed: skipped by length at recovery */
#define DISK_MAX_VALUE (1ull << 30)
#define DISK_MAX_SLOTS 1024u
#define DISK_SB_RECYCLED 1u           /* superblock flag: the file held an older extent before */
#define DISK_MAX_SPARES 2u            /* evicted extent files kept for reuse (disk_evict.c) */
#define DISK_WINDOW_BYTES (64u << 20) /* scratch memory per I/O window of a write batch */

static inline uint64_t disk_round_up(uint64_t v)
{
    return (v + MC_DISK_BLOCK - 1) & ~(uint64_t)(MC_DISK_BLOCK - 1);
}
/* Record sizes are in units of an extent's record alignment (x->align: 512 or 4096, a power of
 * two): a record is [header + key][value], each part zero-padded to the unit. */
static inline uint64_t disk_pad(uint32_t align, uint64_t v)
{
    return (v + align - 1) & ~(uint64_t)(align - 1);
}
static inline uint64_t disk_hdr_block(uint32_t align, uint32_t key_len)
{
    return disk_pad(align, (uint64_t)DISK_HDR_SIZE + key_len);
}
static inline uint64_t disk_record_size(uint32_t align, uint32_t key_len, uint64_t value_len)
{
    return disk_hdr_block(align, key_len) + disk_pad(align, value_len);
}
static inline uint16_t disk_format_for(uint32_t align)
{
    return align == MC_DISK_BLOCK ? DISK_FORMAT_4K : DISK_FORMAT;
}

/* ---- extent superblock and record header (disk_format.c) ---- */
struct disk_hdr {
    uint32_t flags;
    uint32_t key_len;
    uint64_t value_len;
    uint64_t version;
    uint32_t value_crc;
    uint64_t ext_id; /* where the record lies: a header elsewhere does not verify */
    uint64_t off;
    uint64_t nonce; /* the extent's */
};
/* Writes an extent's superblock into blk (MC_DISK_BLOCK bytes); flags: DISK_SB_*; align: the
 * extent's record unit (format 2 for 4096, else format 3, which stores it). */
void disk_sb_encode(void *blk, uint64_t id, uint64_t nonce, uint32_t flags, uint32_t align);
/* 0 and fills id/nonce/flags/align when blk holds a valid superblock (format 2: align 4096);
 * -2 when it starts with a record header of format 1 (an extent written by an older version);
 * -3 when it is a superblock of a format this version does not know (*format set: a newer
 * version wrote it); -1 otherwise. */
int disk_sb_decode(const void *blk, uint64_t *id, uint64_t *nonce, uint32_t *flags, uint32_t *align,
                   uint32_t *format);
/* Writes the header + key into blk (zero-filled up to the header block size for align). */
void disk_hdr_encode(void *blk, const struct disk_hdr *h, const char *key, uint32_t align);
/* Checks magic, format (the one align's extents are written in), header CRC (over header and
 * key; the key must be within avail bytes of blk) and sane lengths. Returns 0 and fills h, or
 * -1. */
int disk_hdr_decode(const void *blk, size_t avail, struct disk_hdr *h, uint32_t align);

/* ---- extents and index ---- */
struct disk_entry;

struct disk_extent {
    uint64_t id;
    uint64_t nonce; /* random, in the superblock and every record header */
    uint32_t align; /* record unit (disk_record_size): from the superblock */
    int fd;
    int slot;            /* registered-file slot, or -1 */
    uint64_t size;       /* bytes reserved (append offset) */
    uint64_t live_bytes; /* record bytes of live entries */
    uint64_t nlive;
    uint32_t pinned;            /* sum of pins of live entries */
    uint32_t readers;           /* reads in flight */
    uint32_t writers;           /* appends in flight */
    int sealed;                 /* takes no more appends */
    int recycled;               /* the file held an evicted extent before: past the records lie
                                 * its stale bytes (never verifiable here: other id, nonce) */
    int dropping;               /* chosen for eviction */
    uint32_t unkilled;          /* superseded records here that could not be marked dead: no newer
                                 * extent may be evicted before this one (the key would come back) */
    struct disk_entry *entries; /* live entries (intrusive list) */
    struct disk_extent *prev, *next; /* oldest first */
};

struct disk_entry {
    struct disk_entry *hnext;
    struct disk_entry *eprev, *enext;
    struct disk_extent *ext;
    uint64_t hash;
    uint64_t off; /* record start in the extent */
    uint64_t value_len;
    uint64_t version;
    uint32_t crc;
    uint32_t key_len;
    uint32_t pins;
    uint32_t accessed; /* read since it was written or last moved (second chance at eviction) */
    /* The eviction is copying this key's record (second chance): a removal waits until the copy
     * is done, so it can mark the copy dead too. Follows the key to a newer version. */
    uint32_t moving;
    /* The record's earlier copy in an extent being evicted, live on disk until that extent is
     * deleted (NULL: none): a removal marks it dead as well. Follows the key to a newer
     * version; the eviction clears it under s->mu just before it deletes the extent. */
    struct disk_extent *shadow;
    uint64_t shadow_off;
    char key[];
};

struct disk_index {
    struct disk_entry **buckets;
    size_t nbuckets; /* power of two */
    size_t count;
};

int disk_index_init(struct disk_index *ix);
void disk_index_destroy(struct disk_index *ix); /* frees every entry */
struct disk_entry *disk_index_find(struct disk_index *ix, const char *key, uint32_t key_len);
/* New entry (not inserted). NULL on allocation failure. */
struct disk_entry *disk_entry_new(const char *key, uint32_t key_len);
int disk_index_insert(struct disk_index *ix, struct disk_entry *e); /* -1: out of memory */
void disk_index_unlink(struct disk_index *ix, struct disk_entry *e);

/* ---- io engine (disk_uring.c) ---- */
struct disk_io {
    int fd;
    int slot; /* fixed-file slot, or -1 */
    void *buf;
    uint32_t len;
    uint64_t off;
    int write;
    int res; /* bytes transferred or -errno */
    /* engine state */
    uint32_t xfer;  /* bytes done so far (short transfers are resubmitted for the rest) */
    uint32_t tries; /* resubmissions */
};

#define DISK_IO_TRIES 16      /* resubmissions of one operation (short / EAGAIN) */
#define DISK_SUBMIT_TRIES 256 /* EINTR / EAGAIN / EBUSY from submit in a row, then hard */

struct disk_ring {
    struct io_uring ring;
    int uring; /* 0: synchronous pread/pwrite fallback */
    unsigned depth;
    char *staging;
    size_t staging_len;
    size_t staging_used; /* bump allocator, reset per batch */
    int buf_registered;  /* staging is registered buffer 0 */
    /* The write path's window buffer (disk_ring_window): mapped on first use and kept, so a
     * large append does not map, fault in and zero fresh memory every time. Registered as
     * buffer 1 when RLIMIT_MEMLOCK allows (window_registered). */
    char *window;
    size_t window_len;
    int window_registered;
    int files_registered;
    uint64_t files_gen;
    size_t *reaped; /* depth completions waiting for their callback */
    size_t *retry;  /* depth operations whose rest is resubmitted */
    size_t *pend;   /* depth operations prepared, not yet taken by the kernel */
    int broken;     /* a hard submit error: freed instead of pooled */
    struct disk_ring *next;
};

struct disk_faults {
    pthread_mutex_t mu;
    struct mc_disk_fault f;
};

typedef void (*disk_done_fn)(void *ctx, size_t i);

/* Runs n operations, up to the ring's depth in flight, calling done(ctx, i) as each completes.
 * Fault injection (test builds) applies when faults is non-NULL. */
void disk_ring_run(struct disk_ring *r, struct disk_io *ios, size_t n, struct disk_faults *faults,
                   disk_done_fn done, void *ctx);
/* Called once per operation just before its first transfer is queued (fills its buffer), so
 * the work of filling later operations overlaps the I/O of earlier ones. */
typedef void (*disk_fill_fn)(void *ctx, size_t i);
/* disk_ring_run, with fill(ctx, i) run before operation i first goes out (fill may be NULL). */
void disk_ring_run_fed(struct disk_ring *r, struct disk_io *ios, size_t n,
                       struct disk_faults *faults, disk_fill_fn fill, disk_done_fn done, void *ctx);
/* Aligned scratch: from the ring's staging when it fits (registered), else posix_memalign
 * (*heap = 1: the caller frees it). NULL on allocation failure. */
void *disk_ring_scratch(struct disk_ring *r, size_t len, int *heap);
/* Largest window buffer a ring keeps between calls; a larger request gets memory of its own. */
#define DISK_WINDOW_KEEP (128u << 20)
/* An aligned buffer of len bytes for one write window: the ring's staging when it fits, else
 * its kept window buffer (grown when too small, up to DISK_WINDOW_KEEP), else a one-off
 * mapping (*own = 1: give it back with disk_ring_window_release). Contents are undefined:
 * the caller writes every byte it sends. NULL when out of memory. */
void *disk_ring_window(struct mc_disk_store *s, struct disk_ring *r, size_t len, int *own);
void disk_ring_window_release(void *buf, size_t len, int own);

/* ---- an append's records on their way to disk (disk_write.c places and commits them,
 * disk_append_io.c encodes and writes them) ---- */
struct disk_wjob {
    const char *key;
    uint32_t key_len;
    uint64_t version;
    uint32_t crc;
    const void *data;
    uint64_t len;
    int result;
    int err; /* errno of a failed write */
    int rolled_back;
    struct disk_extent *x;
    uint64_t off;       /* the record's start in its extent */
    uint32_t pre, post; /* dead filler bytes reserved just before / after the record (they keep
                         * a large append's writes 4 KiB-aligned: disk_append_io.c) */
    uint64_t at;        /* where its record is encoded in the window buffer */
    int tried;          /* its record went out in a write */
    int encoded;        /* its bytes are in the window buffer */
    int retry;          /* a write holding part of it failed: rewritten on its own */
    int wres;           /* that write's result */
};
/* The bytes a placed job holds in its extent: fillers and the record. */
static inline uint64_t disk_wjob_span(const struct disk_wjob *j)
{
    return j->pre + disk_record_size(j->x->align, j->key_len, j->len) + j->post;
}
/* Write I/O of appends, for the usage counters. */
struct disk_wstats {
    uint64_t ios;   /* writes issued (first attempts) */
    uint64_t bytes; /* bytes they carried */
};
/* Encodes and writes the placed jobs [from, to) that are still MC_OK (no lock held; each holds
 * a writer on its extent): one window buffer, writes of up to 4 MiB cut at 4 KiB-aligned
 * offsets of the extent. A job whose bytes do not match its CRC is written as a dead record
 * and fails with CHECKSUM_MISMATCH; one whose write fails gets FILE_WRITE_FAIL or
 * UNABLE_OFFLOAD (err set) and its header zeroed on disk. */
void disk_append_window(struct mc_disk_store *s, struct disk_ring *r, struct disk_wjob *jobs,
                        size_t from, size_t to, struct disk_wstats *st);

/* ---- the store ---- */
struct mc_disk_store {
    struct mc_disk_store_config cfg;
    char *path;
    int dir_fd;
    int lock_fd;
    uint64_t hw_bytes;
    uint32_t align; /* record unit of the extents this store creates (probed at open) */

    pthread_mutex_t mu;
    pthread_cond_t cv; /* readers/writers of a dropping extent finished */
    struct disk_index idx;
    struct disk_extent *oldest, *newest;
    struct disk_extent *active;
    uint64_t next_extent_id;
    uint64_t bytes_used, live_bytes, nextents;
    uint64_t dropped_records, dropped_bytes, evicted_extents, evicted_records;
    /* read records an eviction moved to the newest extent (second chance) */
    uint64_t reinserted_records;
    int evicting; /* one eviction at a time */
    int no_space; /* the filesystem said ENOSPC: appends refused until it has room */
    /* The filesystem's room, when it is below cfg.capacity (0: none): set to bytes_used when the
     * filesystem says ENOSPC (eviction then works against it), raised as the filesystem has
     * room again (disk_write.c). */
    uint64_t cap_limit;
    uint64_t reclaimed_extents; /* extents deleted as soon as their last live record went */
    uint64_t corrupt_dropped;   /* records a read found damaged, dropped */
    uint64_t no_space_events;   /* times the store went full */
    uint64_t write_errors;      /* records whose write failed */
    uint64_t kill_failures;     /* dead marks that could not be written */
    uint64_t skipped_extents;   /* extents not adopted at recovery (older format, damaged) */

    int slot_fds[DISK_MAX_SLOTS];
    uint64_t files_gen;

    pthread_mutex_t pool_mu;
    struct disk_ring *pool;
    int logged_plain_bufs, logged_plain_files, logged_no_uring;
    int last_buf_registered, last_files_registered;
    uint64_t window_maps; /* window buffers mapped (kept ones and one-off ones), pool_mu */

    struct disk_faults faults;

    /* Evicted extent files kept for reuse as new extents, renamed "<old id>.spr" (s->mu):
     * writing over blocks the filesystem already holds costs neither the unwritten-extent
     * conversions of fresh preallocated blocks nor the discards of a delete. */
    struct {
        uint64_t id;
        int fd;
    } spares[DISK_MAX_SPARES];
    unsigned nspares;
    uint64_t recycled_extents;                     /* extents created from a spare */
    uint64_t write_ios, write_bytes, filler_bytes; /* appends' writes (usage) */
    uint32_t lo_idx; /* tells stores apart in the lock-order checker */
};

/* s->mu, s->pool_mu and the fault hook's mutex: every take and drop goes through these, so a
 * checking build knows which thread holds what (common/lock_order.h). */
static inline void disk_lock(struct mc_disk_store *s)
{
    mc_lo_acquire(MC_LO_DISK_STORE, s->lo_idx);
    pthread_mutex_lock(&s->mu);
}
static inline void disk_unlock(struct mc_disk_store *s)
{
    pthread_mutex_unlock(&s->mu);
    mc_lo_release(MC_LO_DISK_STORE, s->lo_idx);
}
static inline void disk_pool_lock(struct mc_disk_store *s)
{
    mc_lo_acquire(MC_LO_DISK_POOL, s->lo_idx);
    pthread_mutex_lock(&s->pool_mu);
}
static inline void disk_pool_unlock(struct mc_disk_store *s)
{
    pthread_mutex_unlock(&s->pool_mu);
    mc_lo_release(MC_LO_DISK_POOL, s->lo_idx);
}
static inline void disk_faults_lock(struct disk_faults *f)
{
    mc_lo_acquire(MC_LO_DISK_FAULTS, 0);
    pthread_mutex_lock(&f->mu);
}
static inline void disk_faults_unlock(struct disk_faults *f)
{
    pthread_mutex_unlock(&f->mu);
    mc_lo_release(MC_LO_DISK_FAULTS, 0);
}
/* The first line of every *_locked function of the store. */
#define DISK_ASSERT_LOCKED(s) MC_ASSERT(mc_lo_holds(MC_LO_DISK_STORE, (s)->lo_idx, false))

/* The capacity eviction works against: the configured one, or the filesystem's room when that
 * is lower (cap_limit), and its high watermark. s->mu held. */
static inline uint64_t disk_capacity_locked(const struct mc_disk_store *s)
{
    DISK_ASSERT_LOCKED(s);
    return s->cap_limit && s->cap_limit < s->cfg.capacity ? s->cap_limit : s->cfg.capacity;
}
static inline uint64_t disk_high_water_locked(const struct mc_disk_store *s)
{
    DISK_ASSERT_LOCKED(s);
    if (!s->cap_limit || s->cap_limit >= s->cfg.capacity)
        return s->hw_bytes;
    return (uint64_t)((double)s->cap_limit * s->cfg.high_watermark);
}

/* Ring pool (disk_uring.c). disk_ring_get falls back to synchronous I/O when io_uring is not
 * available; NULL only when out of memory. disk_ring_put_locked: with s->mu held. */
struct disk_ring *disk_ring_get(struct mc_disk_store *s);
void disk_ring_put_locked(struct mc_disk_store *s, struct disk_ring *r);
/* With s->mu held: bring r's registered file table up to date. */
void disk_ring_sync_files_locked(struct mc_disk_store *s, struct disk_ring *r);
/* With s->mu held: sync every idle ring (after an extent's fd was closed). */
void disk_pool_sync_files_locked(struct mc_disk_store *s);
void disk_pool_destroy(struct mc_disk_store *s);

/* Extent helpers (disk_store.c; reclaim and spares: disk_evict.c), s->mu held. */
struct disk_extent *disk_extent_add_locked(struct mc_disk_store *s, uint64_t id, int fd,
                                           uint64_t size);
void disk_entry_attach_locked(struct mc_disk_store *s, struct disk_entry *e, struct disk_extent *x);
void disk_entry_detach_locked(struct mc_disk_store *s, struct disk_entry *e);
void disk_entry_drop_locked(struct mc_disk_store *s, struct disk_entry *e); /* detach + free */
/* Deletes x (or keeps it as a spare) when it holds no live record and nothing uses it (no
 * reader, writer or eviction): a dead extent's space comes back at once. The caller must not
 * touch x afterwards; call it after dropping the last count this caller held on x. */
void disk_reclaim_locked(struct mc_disk_store *s, struct disk_extent *x);
/* Closes and deletes the spare files (their blocks go back to the filesystem). */
void disk_spares_drop_locked(struct mc_disk_store *s);
/* Eviction (disk_evict.c): make bytes_used + need fit the capacity (0 or an error code), and
 * the after-append watermark pass. Both may release s->mu while the callback runs. */
int disk_make_room_locked(struct mc_disk_store *s, uint64_t need);
void disk_watermark_evict_locked(struct mc_disk_store *s);
int disk_open_extent_fd(struct mc_disk_store *s, uint64_t id, int create);
/* "<16 hex digits>.ext" / ".spr" (a spare: deleted at open and close). */
void disk_extent_name(uint64_t id, int spare, char *name, size_t len);
/* Reserves rec bytes at the end of the active extent (a new extent when it is sealed or full)
 * for a record the store moves itself, and counts a writer on it. Capacity is the caller's
 * business. s->mu held. 0, or an error code (UNABLE_OFFLOAD while the filesystem is full). */
int disk_reserve_locked(struct mc_disk_store *s, uint64_t rec, struct disk_extent **x,
                        uint64_t *off);

/* A record to mark dead in place (its header rewritten with DISK_FLAG_DEAD). */
struct disk_kill {
    struct disk_extent *x;
    uint64_t off;
    const char *key;
    uint32_t key_len;
    uint64_t version;
    uint32_t crc;
    uint64_t value_len;
    int held; /* the killer counted a writer on x */
    int res;  /* 0 or -errno */
};
/* Encodes k's dead header into blk (disk_hdr_block(k->x->align, k->key_len) bytes). */
void disk_kill_encode(void *blk, const struct disk_kill *k);
/* Synchronous kill (recovery): 0 or -errno. */
int disk_kill_sync(const struct disk_kill *k);
/* Writes the dead marks through r, in windows of DISK_WINDOW_BYTES (no lock held; the caller
 * holds writers on each k->x); each k->res gets 0 or -errno. */
void disk_kill_run(struct mc_disk_store *s, struct disk_ring *r, struct disk_kill *kills,
                   size_t nk);
/* After disk_kill_run, s->mu held: drops the writer counts the marks held and counts the
 * failed marks on their extents (x->unkilled). */
void disk_kill_finish_locked(struct mc_disk_store *s, struct disk_kill *kills, size_t nk);

/* Start-up scan (disk_recover.c): called from open, before any other thread sees the store. */
int disk_recover(struct mc_disk_store *s, char *err, size_t errlen);

#endif
