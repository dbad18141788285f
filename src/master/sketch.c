/*
 * sketch.c - the promotion gate's doorkeeper and CountMinSketch (see sketch.h).
 */
#include "master/sketch.h"

#include <stdbool.h>

/* Per-row and per-doorkeeper-bit constants: arbitrary odd numbers, none of them a shard's. */
static const uint64_t g_row_seed[MC_SKETCH_DEPTH] = {
    0x9e3779b97f4a7c15ull,
    0xc2b2ae3d27d4eb4full,
    0x165667b19e3779f9ull,
    0xd6e8feb86659fd93ull,
};
static const uint64_t g_door_seed[MC_SKETCH_DOOR_HASHES] = {
    0xa0761d6478bd642full,
    0xe7037ed1a0b428dbull,
    0x8ebc6af09c88c6e3ull,
    0x589965cc75374cc3ull,
};

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

static inline uint32_t row_index(uint32_t r, uint64_t h)
{
    return (uint32_t)(mix(h ^ g_row_seed[r]) & (MC_SKETCH_WIDTH - 1));
}

static inline uint64_t door_bit(uint32_t i, uint64_t h)
{
    return mix(h ^ g_door_seed[i]) & (MC_SKETCH_DOOR_BITS - 1);
}

void mc_sketch_init(struct mc_sketch *s)
{
    for (uint32_t r = 0; r < MC_SKETCH_DEPTH; r++)
        for (uint32_t i = 0; i < MC_SKETCH_WIDTH; i++)
            atomic_init(&s->c[r][i], 0);
    for (uint64_t i = 0; i < MC_SKETCH_DOOR_BITS / 64; i++)
        atomic_init(&s->door[i], 0);
    atomic_init(&s->increments, 0);
    atomic_init(&s->agings, 0);
}

void mc_sketch_age(struct mc_sketch *s)
{
    for (uint64_t i = 0; i < MC_SKETCH_DOOR_BITS / 64; i++)
        atomic_store_explicit(&s->door[i], 0, memory_order_relaxed);
    for (uint32_t r = 0; r < MC_SKETCH_DEPTH; r++) {
        for (uint32_t i = 0; i < MC_SKETCH_WIDTH; i++) {
            _Atomic uint8_t *c = &s->c[r][i];
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
    bool seen = true;
    for (uint32_t i = 0; i < MC_SKETCH_DOOR_HASHES; i++) {
        uint64_t b = door_bit(i, h), bit = 1ull << (b & 63);
        _Atomic uint64_t *w = &s->door[b >> 6];
        if (atomic_load_explicit(w, memory_order_relaxed) & bit)
            continue; /* a plain load first: set bits (the common case later on) cost no write */
        if (!(atomic_fetch_or_explicit(w, bit, memory_order_relaxed) & bit))
            seen = false;
    }
    return seen;
}

static bool door_has(const struct mc_sketch *s, uint64_t h)
{
    for (uint32_t i = 0; i < MC_SKETCH_DOOR_HASHES; i++) {
        uint64_t b = door_bit(i, h);
        if (!(atomic_load_explicit(&((struct mc_sketch *)s)->door[b >> 6], memory_order_relaxed) &
              (1ull << (b & 63))))
            return false;
    }
    return true;
}

static uint32_t sketch_min(const struct mc_sketch *s, uint64_t h)
{
    uint32_t min = MC_SKETCH_MAX;
    for (uint32_t r = 0; r < MC_SKETCH_DEPTH; r++) {
        uint8_t v = atomic_load_explicit(&((struct mc_sketch *)s)->c[r][row_index(r, h)],
                                         memory_order_relaxed);
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
    for (uint32_t r = 0; r < MC_SKETCH_DEPTH; r++) {
        c[r] = &s->c[r][row_index(r, h)];
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
