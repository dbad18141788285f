/*
 * sketch.h - the promotion gate's frequency estimate: a CountMinSketch (DESIGN.md §7).
 *
 * MC_SKETCH_DEPTH rows of MC_SKETCH_WIDTH saturating 8-bit counters. A key's counter in row r
 * is at xxh3(key, seed_r) & (width - 1), where the row seeds are fixed constants distinct from
 * the shard hash's (so a shard's keys are not one row's neighbours). An increment raises each of
 * the key's counters by one with a compare-and-swap that stops at 255, and returns the minimum
 * of them after the increment: the estimate of how often the key was seen, never below the truth
 * (until decay) and above it only by collisions.
 *
 * Decay: every increment of a key counts once in a shared counter; the thread whose increment
 * reaches width × depth halves every counter (each one by its own CAS, so increments that race
 * with the halving are kept or halved, never lost into garbage) and starts the count again, so
 * a key that stopped being read fades out and hotness is recent hotness.
 *
 * Lock-free: no lock is taken, any thread may increment at any time.
 */
#ifndef MC_MASTER_SKETCH_H
#define MC_MASTER_SKETCH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MC_SKETCH_WIDTH 4096u /* a power of two */
#define MC_SKETCH_DEPTH 4u
#define MC_SKETCH_MAX 255u

struct mc_sketch {
    _Atomic uint8_t c[MC_SKETCH_DEPTH][MC_SKETCH_WIDTH];
    _Atomic uint64_t increments; /* since the last halving */
    _Atomic uint64_t halvings;
};

void mc_sketch_init(struct mc_sketch *s);
/* Counts one occurrence of key; returns the key's estimate after it (1..255). */
uint32_t mc_sketch_increment(struct mc_sketch *s, const void *key, size_t len);
/* The key's estimate without counting it (0..255). */
uint32_t mc_sketch_estimate(const struct mc_sketch *s, const void *key, size_t len);
/* Halves every counter now (what the decay does). */
void mc_sketch_halve(struct mc_sketch *s);
uint64_t mc_sketch_halvings(const struct mc_sketch *s);

#endif
