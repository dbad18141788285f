/*
 * sketch.h - the promotion gate's frequency estimate (DESIGN.md §7): a doorkeeper in front of a
 * CountMinSketch with conservative update, aged over a fixed sample of reads (TinyLFU's shape).
 *
 * A key is named by its 64-bit key hash (mc_hash_key, which every caller has already); where its
 * counters and doorkeeper bits are comes from 64-bit mixes of it, so the keys of one shard (which
 * share the hash's low bits) spread over the whole table like any others. Each read touches two
 * cache lines: the key's four counters are in one 64-counter block (row r: one of the block's
 * 16 counters of that row), its doorkeeper bits in one 64-bit word.
 *
 * Doorkeeper: MC_SKETCH_DOOR_BITS bits, MC_SKETCH_DOOR_HASHES bits a key (in one word). A key's
 * first read in a sample period only sets its bits; the sketch is counted from its second read on.
 * One-shot reads, which are most reads of a large key space, therefore never load the sketch's
 * counters, so the counters stay low enough that a key read once estimates 1 and a key read
 * twice 2.
 *
 * Sketch: MC_SKETCH_DEPTH rows of MC_SKETCH_WIDTH saturating 8-bit counters. Conservative update:
 * an increment raises only the key's counters that equal its minimum (each by a compare-and-swap
 * that stops at MC_SKETCH_MAX), so a collision with a hot key does not lift a cold key's other
 * counters. The sketch part of an estimate is the minimum of the key's counters.
 *
 * Estimate = (the key's doorkeeper bits all set ? 1 : 0) + the sketch's minimum, at most
 * MC_SKETCH_MAX; never below the key's reads in the current period (until aging), above them
 * only by a doorkeeper false positive or by collisions on all rows.
 *
 * Aging: every increment counts in a shared counter; the thread whose increment completes a
 * sample of MC_SKETCH_SAMPLE reads (MC_SKETCH_SAMPLE_FACTOR x the width: 524,288) clears the
 * doorkeeper and halves every counter (each by its own CAS: an increment racing with it is kept
 * or halved, never turned into garbage), so hotness is recent hotness.
 *
 * Sizes. The doorkeeper holds at most one sample's keys and has 16 bits per read of a sample:
 * with 4 bits a key in one word, a key not read in the sample passes it with probability below
 * 1 % even when the sample is all distinct keys (about 0.24 % for bits spread over the whole
 * filter; blocking them into a word costs a little of that for one cache miss instead of four).
 * A key never read reaches the sketch's estimate 1 only when all four of its counters are shared
 * with keys read twice or more; with N such keys live (at most half a sample, 2 x the width, and
 * far fewer when repeated keys are read many times) that is about (1 - e^(-N/width))^4: 0.04 %
 * at N = 20,000, 1.5 % at N = width / 2 (test_admission measures it). Memory: 512 KiB of
 * counters and 1 MiB of doorkeeper.
 *
 * Lock-free: no lock is taken, any thread may increment or estimate at any time.
 */
#ifndef MC_MASTER_SKETCH_H
#define MC_MASTER_SKETCH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MC_SKETCH_WIDTH 131072u /* counters a row; a power of two */
#define MC_SKETCH_DEPTH 4u
#define MC_SKETCH_BLOCK 64u /* counters in a block (one cache line) */
#define MC_SKETCH_ROW_SLOTS (MC_SKETCH_BLOCK / MC_SKETCH_DEPTH) /* a row's counters in a block */
#define MC_SKETCH_BLOCKS (MC_SKETCH_WIDTH * MC_SKETCH_DEPTH / MC_SKETCH_BLOCK)
#define MC_SKETCH_MAX 255u
#define MC_SKETCH_SAMPLE_FACTOR 4u
#define MC_SKETCH_SAMPLE ((uint64_t)MC_SKETCH_WIDTH * MC_SKETCH_SAMPLE_FACTOR)
#define MC_SKETCH_DOOR_BITS (MC_SKETCH_SAMPLE * 16u) /* a power of two */
#define MC_SKETCH_DOOR_HASHES 4u

struct mc_sketch {
    _Atomic uint8_t c[MC_SKETCH_BLOCKS][MC_SKETCH_BLOCK];
    _Atomic uint64_t door[MC_SKETCH_DOOR_BITS / 64];
    _Atomic uint64_t increments; /* since the last aging */
    _Atomic uint64_t agings;
};

void mc_sketch_init(struct mc_sketch *s);
/* Counts one read of the key with this hash; returns its estimate after it (1..255). */
uint32_t mc_sketch_increment(struct mc_sketch *s, uint64_t key_hash);
/* The key's estimate without counting a read (0..255). */
uint32_t mc_sketch_estimate(const struct mc_sketch *s, uint64_t key_hash);
/* Ages now (what completing a sample does): the doorkeeper cleared, every counter halved. */
void mc_sketch_age(struct mc_sketch *s);
/* Agings so far. */
uint64_t mc_sketch_agings(const struct mc_sketch *s);

#endif
