/*
 * sketch.c - the promotion gate's doorkeeper and CountMinSketch (see sketch.h).
 */
#include "master/sketch.h"

#include <stdbool.h>

/* Mixing constants: arbitrary odd numbers, none of them a shard's. */
#define SEED_BLOCK 0x9e3779b97f4a7c15ull
#define SEED_SLOT 0xc2b2ae3d27d4eb4full
#define SEED_WORD 0xa0761d6478bd642full
#define SEED_BIT 0xe7037ed1a0b428dbull

/* A 64-bit finalizer (every input bit moves every output bit). */
static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* The key's counters: one per row, all in one cache-line block (one miss, not four): row r's
 * counter is one of the block's 16 counters of that row, chosen by 4 bits of a second mix. */
static inline _Atomic uint8_t *counters(const struct mc_sketch *s, uint64_t h,
                                        _Atomic uint8_t *out[MC_SKETCH_DEPTH])
{
    _Atomic uint8_t *b = ((struct mc_sketch *)s)->c[mix(h ^ SEED_BLOCK) & (MC_SKETCH_BLOCKS - 1)];
    uint64_t slots = mix(h ^ SEED_SLOT);
    for (uint32_t r = 0; r < MC_SKETCH_DEPTH; r++)
        out[r] = &b[r * MC_SKETCH_ROW_SLOTS + ((slots >> (8 * r)) & (MC_SKETCH_ROW_SLOTS - 1))];
    return b;
}

/* The key's doorkeeper bits, all in one 64-bit word (a blocked bloom filter): the word and the
 * mask of its bits. */
static inline _Atomic uint64_t *door_word(const struct mc_sketch *s, uint64_t h, uint64_t *mask)
{
    uint64_t bits = mix(h ^ SEED_BIT);
    *mask = 0;
    for (uint32_t i = 0; i < MC_SKETCH_DOOR_HASHES; i++)
        *mask |= 1ull << ((bits >> (8 * i)) & 63);
    return &((struct mc_sketch *)s)->door[mix(h ^ SEED_WORD) & (MC_SKETCH_DOOR_BITS / 64 - 1)];
}

void mc_sketch_init(struct mc_sketch *s)
{
    for (uint32_t b = 0; b < MC_SKETCH_BLOCKS; b++)
        for (uint32_t i = 0; i < MC_SKETCH_BLOCK; i++)
            atomic_init(&s->c[b][i], 0);
    for (uint64_t i = 0; i < MC_SKETCH_DOOR_BITS / 64; i++)
        atomic_init(&s->door[i], 0);
    atomic_init(&s->increments, 0);
    atomic_init(&s->agings, 0);
}

void mc_sketch_age(struct mc_sketch *s)
{
    for (uint64_t i = 0; i < MC_SKETCH_DOOR_BITS / 64; i++)
        atomic_store_explicit(&s->door[i], 0, memory_order_relaxed);
    for (uint32_t b = 0; b < MC_SKETCH_BLOCKS; b++) {
        for (uint32_t i = 0; i < MC_SKETCH_BLOCK; i++) {
            _Atomic uint8_t *c = &s->c[b][i];
            uint8_t v = atomic_load_explicit(c, memory_order_relaxed);
            while (v && !atomic_compare_exchange_weak_explicit(
                            c, &v, (uint8_t)(v >> 1), memory_order_relaxed, memory_order_relaxed))
                ;
        }
    }
    atomic_fetch_add_explicit(&s->agings, 1, memory_order_relaxed);
}

/* Sets the key's doorkeeper bits; true when all of them were set already. */
static bool door_admit(struct mc_sketch *s, uint64_t h)
{
    uint64_t mask;
    _Atomic uint64_t *w = door_word(s, h, &mask);
    /* a plain load first: a key seen already (the common case for hot keys) costs no write */
    if ((atomic_load_explicit(w, memory_order_relaxed) & mask) == mask)
        return true;
    return (atomic_fetch_or_explicit(w, mask, memory_order_relaxed) & mask) == mask;
}

static bool door_has(const struct mc_sketch *s, uint64_t h)
{
    uint64_t mask;
    _Atomic uint64_t *w = door_word(s, h, &mask);
    return (atomic_load_explicit(w, memory_order_relaxed) & mask) == mask;
}

static uint32_t sketch_min(const struct mc_sketch *s, uint64_t h)
{
    _Atomic uint8_t *c[MC_SKETCH_DEPTH];
    counters(s, h, c);
    uint32_t min = MC_SKETCH_MAX;
    for (uint32_t r = 0; r < MC_SKETCH_DEPTH; r++) {
        uint8_t v = atomic_load_explicit(c[r], memory_order_relaxed);
        if (v < min)
            min = v;
    }
    return min;
}

/* Conservative update: raises the key's counters that are at its minimum; returns the minimum
 * after the increment. */
static uint32_t sketch_add(struct mc_sketch *s, uint64_t h)
{
    _Atomic uint8_t *c[MC_SKETCH_DEPTH];
    uint8_t v[MC_SKETCH_DEPTH];
    uint8_t min = MC_SKETCH_MAX;
    counters(s, h, c);
    for (uint32_t r = 0; r < MC_SKETCH_DEPTH; r++) {
        v[r] = atomic_load_explicit(c[r], memory_order_relaxed);
        if (v[r] < min)
            min = v[r];
    }
    if (min >= MC_SKETCH_MAX)
        return MC_SKETCH_MAX;
    for (uint32_t r = 0; r < MC_SKETCH_DEPTH; r++) {
        uint8_t cur = v[r];
        /* raise it while it is still at or below the minimum seen (a racing increment that
         * already raised it did this read's work: leave it) */
        while (cur <= min &&
               !atomic_compare_exchange_weak_explicit(c[r], &cur, (uint8_t)(min + 1),
                                                      memory_order_relaxed, memory_order_relaxed))
            ;
    }
    return (uint32_t)min + 1;
}

uint32_t mc_sketch_increment(struct mc_sketch *s, uint64_t key_hash)
{
    uint32_t est;
    if (!door_admit(s, key_hash)) /* the period's first read: the doorkeeper absorbs it */
        est = 1 + sketch_min(s, key_hash);
    else
        est = 1 + sketch_add(s, key_hash);
    uint64_t n = atomic_fetch_add_explicit(&s->increments, 1, memory_order_relaxed) + 1;
    if (n == MC_SKETCH_SAMPLE) {
        /* This thread's increment completed the sample: it ages the table and restarts the
         * count (reset first, so increments made meanwhile count toward the next sample). */
        atomic_fetch_sub_explicit(&s->increments, n, memory_order_relaxed);
        mc_sketch_age(s);
    }
    return est > MC_SKETCH_MAX ? MC_SKETCH_MAX : est;
}

uint32_t mc_sketch_estimate(const struct mc_sketch *s, uint64_t key_hash)
{
    uint32_t est = (door_has(s, key_hash) ? 1u : 0u) + sketch_min(s, key_hash);
    return est > MC_SKETCH_MAX ? MC_SKETCH_MAX : est;
}

uint64_t mc_sketch_agings(const struct mc_sketch *s)
{
    return atomic_load_explicit(&((struct mc_sketch *)s)->agings, memory_order_relaxed);
}
