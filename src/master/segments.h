/*
 * segments.h - the master's segment table: mounted DRAM segments, their allocators, and the
 * allocation strategies that place replicas on them.
 *
 * A segment is a client's DRAM region ({id, name, base, size, endpoint, protocol, RDMA key});
 * the master never touches its bytes, it only hands out {segment, offset} ranges from an
 * offset allocator (offset_alloc.h) per segment.
 *
 * Locking (DESIGN.md §7 lock order: ... shards → segment table → one segment's allocator):
 *   - the table (list of mounted segments) is under a reader-writer lock: allocation and listing
 *     take it shared, mount/unmount exclusive;
 *   - each segment's allocator is under that segment's own mutex, so allocations on different
 *     segments run in parallel; a free takes only the segment mutex, never the table lock.
 *
 * Lifetime: segments are reference counted. The table holds one reference while the segment is
 * mounted, every live allocation holds one. Unmount marks the segment dead (no new allocation
 * lands there, replicas on it stop being readable — callers check mc_segment_alive()), removes it
 * from the table and drops the table's reference; the allocator and the segment itself are
 * freed when the last allocation is released.
 *
 * Mount epochs (DESIGN.md §6): every mount that creates a segment draws a fresh 64-bit epoch
 * from a per-table counter that starts at a random value (never 0), so an epoch is never reused
 * by this table and two master incarnations do not share one (short of a 2^-64-ish collision of
 * their random starts). Every MEMORY descriptor carries its segment's epoch and the owner's peer
 * server serves only the epoch of its latest mount, so a descriptor handed out before an
 * unmount (client expiry, explicit unmount, master restart) cannot reach the bytes of a later
 * mount of the same segment id. An idempotent repeat of a live mount returns that mount's epoch.
 *
 * Accounting (eviction trigger): capacity and allocated bytes per segment and for the whole
 * table, atomics readable without locks. "Allocated" counts requested bytes (as upstream), and a
 * dead segment leaves the global figures at unmount: its capacity and its still-allocated bytes
 * are subtracted together so used = allocated / capacity stays meaningful.
 */
#ifndef MC_MASTER_SEGMENTS_H
#define MC_MASTER_SEGMENTS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/id.h"
#include "master/master_types.h"
#include "master/offset_alloc.h"

struct mc_segments;

struct mc_segment {
    struct mc_segment_desc desc; /* immutable after mount */
    struct mc_id owner;          /* the client that mounted it */
    uint64_t mount_epoch;        /* this mount's epoch (immutable, never 0) */
    struct mc_segments *table;
    _Atomic uint32_t refs;
    _Atomic bool dead;
    pthread_mutex_t lock; /* guards alloc and the dead transition */
    struct mc_offset_alloc *alloc;
    _Atomic uint64_t allocated; /* requested bytes of live allocations */
    _Atomic uint64_t nallocs;
};

/* One placed buffer: holds a reference on seg until released. */
struct mc_segment_alloc {
    struct mc_segment *seg;
    uint64_t offset; /* inside the segment (the peer address is desc.base + offset) */
    uint64_t size;   /* requested bytes */
    uint32_t handle;
};

struct mc_segments *mc_segments_new(enum mc_alloc_strategy strategy);
/* Unmounts everything still mounted; segments with live allocations are freed when released. */
void mc_segments_free(struct mc_segments *t);

/* Validates and mounts d for owner. Same id, same owner, same base/size: OK (idempotent).
 * Errors: INVALID_PARAMS (zero id, empty/unterminated name or endpoint, base 0, size below
 * MC_SEGMENT_MIN_SIZE or above MC_SEGMENT_MAX_SIZE, base+size overflow, the total capacity
 * would pass MC_SEGMENTS_MAX_CAPACITY, unknown protocol, allocator creation failure; a log
 * line names the limit),
 * ILLEGAL_CLIENT (the id is mounted by another client), SEGMENT_ALREADY_EXISTS (same id with a
 * different base or size). On OK, *mount_epoch (may be NULL) is the mount's epoch: a fresh one
 * for a new mount, the existing one for an idempotent repeat. */
int mc_segments_mount(struct mc_segments *t, const struct mc_segment_desc *d, struct mc_id owner,
                      uint64_t *mount_epoch);

/* Unmounts a segment. Idempotent: an unknown id is OK with *unmounted = false. Non-zero owner
 * that differs from the mounting client: ILLEGAL_CLIENT. */
int mc_segments_unmount(struct mc_segments *t, struct mc_id seg_id, struct mc_id owner,
                        bool *unmounted);
/* Unmounts every segment mounted by owner; returns how many. */
size_t mc_segments_unmount_owner(struct mc_segments *t, struct mc_id owner);

bool mc_segments_is_mounted(struct mc_segments *t, struct mc_id seg_id);
size_t mc_segments_count(struct mc_segments *t);

/* Places up to replica_num (1..MC_MAX_REPLICAS) buffers of size bytes on distinct segments by
 * the table's strategy: preferred segment names first (in order), then the strategy's walk
 * (at most MC_ALLOC_MAX_TRIES segments). Returns OK with *nout >= 1 (partial placement is
 * allowed, as upstream), NO_AVAILABLE_HANDLE when nothing fits or nothing is mounted,
 * INVALID_PARAMS for size 0 or a bad replica_num. */
int mc_segments_allocate(struct mc_segments *t, uint64_t size, uint32_t replica_num,
                         const char *const *preferred, size_t npreferred,
                         struct mc_segment_alloc *out, uint32_t *nout);

/* Places one buffer of size bytes on one of owner's mounted segments only (a random start among
 * them; never another client's): a promotion's staged replica. NO_AVAILABLE_HANDLE when owner
 * has none or none has room; INVALID_PARAMS for size 0 or a zero owner. */
int mc_segments_allocate_owned(struct mc_segments *t, uint64_t size, struct mc_id owner,
                               struct mc_segment_alloc *out);
/* Whether owner has a mounted (live) segment. */
bool mc_segments_owner_mounted(struct mc_segments *t, struct mc_id owner);
/* Allocates exactly [offset, offset + size) of segment seg_id, which owner mounted with
 * mount_epoch (a DRAM holder re-registering a replica after a master restart). hint: the
 * previous claim's handle on that segment (or MC_OA_INVALID_HANDLE). MC_OK and *out (holds a
 * segment reference), SEGMENT_NOT_FOUND, REPLICA_IS_GONE (another owner or mount),
 * NO_AVAILABLE_HANDLE (part of the range is in use), INVALID_PARAMS. */
int mc_segments_claim(struct mc_segments *t, struct mc_id seg_id, struct mc_id owner,
                      uint64_t mount_epoch, uint64_t offset, uint64_t size, uint32_t hint,
                      struct mc_segment_alloc *out);

/* Releases a buffer (its allocator slot and its segment reference). Safe on dead segments. */
void mc_segment_alloc_release(const struct mc_segment_alloc *a);
void mc_segment_release(struct mc_segment *seg, uint32_t handle, uint64_t size);
/* Releases n buffers of one segment (sizes[i] requested bytes each) under one allocator lock,
 * with the allocator's nodes prefetched ahead; drops n segment references. */
void mc_segment_release_many(struct mc_segment *seg, const uint32_t *handles, const uint64_t *sizes,
                             size_t n);

/* Releases count buffers of seg (bytes requested in all) whose handles are the bits set in
 * bits[0..nwords), in handle order, so a large set walks the allocator's nodes in memory order
 * instead of at random; when they are every live allocation of seg, all at once (the allocator
 * starts afresh and gives its node memory back). Drops count segment references. */
void mc_segment_release_set(struct mc_segment *seg, const uint64_t *bits, size_t nwords,
                            uint64_t count, uint64_t bytes);
/* The bound every handle of seg's live allocations is below (seg's lock is taken). */
uint32_t mc_segment_handle_bound(struct mc_segment *seg);

void mc_segment_ref(struct mc_segment *seg);
void mc_segment_unref(struct mc_segment *seg);
static inline bool mc_segment_alive(const struct mc_segment *seg)
{
    return !atomic_load_explicit(&((struct mc_segment *)seg)->dead, memory_order_acquire);
}

/* Global accounting. */
uint64_t mc_segments_capacity(struct mc_segments *t);
uint64_t mc_segments_allocated(struct mc_segments *t);
double mc_segments_used_ratio(struct mc_segments *t); /* 0 when nothing is mounted */
/* Whether eviction could ever make room for one buffer of size bytes: some live segment is at
 * least that large. A request larger than every segment must not ask for eviction. */
bool mc_segments_could_fit(struct mc_segments *t, uint64_t size);

/* Snapshot of every mounted segment; *out is malloc'ed (free()), *n entries. */
int mc_segments_list(struct mc_segments *t, struct mc_segment_info **out, size_t *n);

/* Parses "random" | "free_ratio_first". Returns 0 or -1. */
int mc_alloc_strategy_parse(const char *s, enum mc_alloc_strategy *out);
const char *mc_alloc_strategy_name(enum mc_alloc_strategy s);

#endif
