/*
 * offset_alloc.h - O(1) offset allocator for one segment (a range [0, capacity) of bytes).
 *
 * Design: a two-level segregated-fit allocator in the spirit of TLSF / the "offset allocator"
 * family. Every block (free or used) is a node in a pool; free blocks sit in one of 512 bins
 * whose sizes follow a tiny floating-point encoding (6-bit exponent, 3-bit mantissa), so a bin
 * covers at most 12.5 % of its size. Two bitmaps (64 top bits, 8 leaf bits per top) find the
 * first non-empty bin that is large enough with two find-first-set instructions:
 *   - allocate: round the request UP to a bin, take any block from the first non-empty bin at or
 *     above it, split off the tail as a new free block;
 *   - free: merge with the address-order neighbours when they are free, file the result in the
 *     bin its size rounds DOWN to.
 * Neighbours are kept in a doubly linked list in address order, bins as doubly linked lists, so
 * both operations are O(1) apart from the bitmap scans. Sizes and offsets are counted in units
 * of the alignment (a power of two, default 64 bytes) in 31-bit fields, so a node is 24 bytes
 * (paid once per live allocation); a segment of more than 2^31 units (128 GiB at 64-byte
 * alignment) uses a coarser unit, the smallest power of two that fits (e.g. 512 bytes for a
 * 1 TiB segment), like upstream's multiplier bits.
 *
 * Nodes live in chunks of MC_OA_CHUNK_NODES allocated as the pool grows (and a free-node stack),
 * so the steady state makes no malloc calls; a chunk is only added when every existing node is
 * in use. Not thread-safe: the segment table wraps each allocator in its own mutex.
 */
#ifndef MC_MASTER_OFFSET_ALLOC_H
#define MC_MASTER_OFFSET_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

#define MC_OA_DEFAULT_ALIGN 64u
#define MC_OA_INVALID_HANDLE UINT32_MAX

struct mc_offset_alloc;

/* One allocation: its byte offset inside the segment and the handle that frees it. */
struct mc_oa_allocation {
    uint64_t offset;
    uint32_t handle;
};

struct mc_oa_stats {
    uint64_t capacity;     /* usable bytes (capacity rounded down to the alignment) */
    uint64_t allocated;    /* bytes in used blocks (each rounded up to the alignment) */
    uint64_t free;         /* capacity - allocated */
    uint64_t largest_free; /* the largest single free block */
    uint64_t used_blocks;  /* live allocations */
    uint64_t free_blocks;  /* free blocks (fragments) */
};

/* capacity in bytes (>= align); align a power of two >= 8 (0 = MC_OA_DEFAULT_ALIGN), raised
 * for segments above 2^31 units. NULL on bad arguments or out of memory. */
struct mc_offset_alloc *mc_offset_alloc_new(uint64_t capacity, uint32_t align);
void mc_offset_alloc_free(struct mc_offset_alloc *a);

/* Allocates size bytes (> 0). Returns 0 (MC_OK) and fills *out, or MC_ERR_NO_AVAILABLE_HANDLE
 * when no free block is large enough, MC_ERR_INVALID_PARAMS for size 0, MC_ERR_INTERNAL_ERROR
 * when the node pool cannot grow. The offset is a multiple of the alignment. */
int mc_offset_alloc_alloc(struct mc_offset_alloc *a, uint64_t size, struct mc_oa_allocation *out);

/* Allocates exactly [offset, offset + size) (offset aligned): a range a holder re-registers
 * after a master restart. hint: a live handle near offset (the previous claim's), or
 * MC_OA_INVALID_HANDLE; the walk to offset goes from it in address order, so claims in
 * ascending order cost O(1) each. 0 and *out, NO_AVAILABLE_HANDLE when part of the range is in
 * use, INVALID_PARAMS for a range outside the allocator or unaligned. */
int mc_offset_alloc_claim(struct mc_offset_alloc *a, uint64_t offset, uint64_t size, uint32_t hint,
                          struct mc_oa_allocation *out);

/* Frees an allocation by its handle. Returns 0, or MC_ERR_INVALID_PARAMS for a handle that is
 * not a live allocation (double free, garbage). */
int mc_offset_alloc_release(struct mc_offset_alloc *a, uint32_t handle);

/* Every live handle is below this bound (a bitmap of that many bits covers them all). */
uint32_t mc_offset_alloc_handle_bound(const struct mc_offset_alloc *a);

/* Live allocations (used blocks). */
uint64_t mc_offset_alloc_used_blocks(const struct mc_offset_alloc *a);

/* Frees every allocation at once: the allocator is as new (one free block) and gives back the
 * node chunks past its first. Every live handle becomes invalid, so only a caller that owns all
 * of them (used_blocks of them) may call it. */
void mc_offset_alloc_release_all(struct mc_offset_alloc *a);

/* A cache hint before releasing handle: its node, or (once the node is in cache) the nodes of
 * its address-order neighbours, which a release may merge with. Any handle value is harmless. */
void mc_offset_alloc_prefetch(const struct mc_offset_alloc *a, uint32_t handle, bool neighbours);

/* Bytes of the block behind a live handle (the rounded-up size), 0 for a bad handle. */
uint64_t mc_offset_alloc_block_size(const struct mc_offset_alloc *a, uint32_t handle);

void mc_offset_alloc_stats(const struct mc_offset_alloc *a, struct mc_oa_stats *out);

/* The largest request that would currently succeed (0 when full). O(bins in one bucket). */
uint64_t mc_offset_alloc_largest_free(const struct mc_offset_alloc *a);

/* Bin helpers, exposed for tests: the bin a size rounds up / down to, and a bin's size. */
uint32_t mc_oa_bin_round_up(uint64_t units);
uint32_t mc_oa_bin_round_down(uint64_t units);
uint64_t mc_oa_bin_size(uint32_t bin);

#endif
