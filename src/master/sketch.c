/*
 * sketch.c - the CountMinSketch of the promotion gate (see sketch.h).
 */
#include "master/sketch.h"

#include <string.h>

#include "common/hash.h"

/* Row seeds: arbitrary odd constants, none of them the shard hash's (mc_hash_key is unseeded). */
static const uint64_t g_row_seed[MC_SKETCH_DEPTH] = {
    0x9e3779b97f4a7c15ull,
    0xc2b2ae3d27d4eb4full,
    0x165667b19e3779f9ull,
    0xd6e8feb86659fd93ull,
};

void mc_sketch_init(struct mc_sketch *s)
{
    for (uint32_t r = 0; r < MC_SKETCH_DEPTH; r++)
        for (uint32_t i = 0; i < MC_SKETCH_WIDTH; i++)
            atomic_init(&s->c[r][i], 0);
    atomic_init(&s->increments, 0);
    atomic_init(&s->halvings, 0);
}

static inline uint32_t row_index(uint32_t r, const void *key, size_t len)
{
    return (uint32_t)mc_hash_seeded(key, len, g_row_seed[r]) & (MC_SKETCH_WIDTH - 1);
}

void mc_sketch_halve(struct mc_sketch *s)
{
    for (uint32_t r = 0; r < MC_SKETCH_DEPTH; r++) {
        for (uint32_t i = 0; i < MC_SKETCH_WIDTH; i++) {
            _Atomic uint8_t *c = &s->c[r][i];
            uint8_t v = atomic_load_explicit(c, memory_order_relaxed);
            while (v && !atomic_compare_exchange_weak_explicit(
                            c, &v, (uint8_t)(v >> 1), memory_order_relaxed, memory_order_relaxed))
                ;
        }
    }
    atomic_fetch_add_explicit(&s->halvings, 1, memory_order_relaxed);
}

uint32_t mc_sketch_increment(struct mc_sketch *s, const void *key, size_t len)
{
    uint32_t min = MC_SKETCH_MAX;
    for (uint32_t r = 0; r < MC_SKETCH_DEPTH; r++) {
        _Atomic uint8_t *c = &s->c[r][row_index(r, key, len)];
        uint8_t v = atomic_load_explicit(c, memory_order_relaxed);
        while (v < MC_SKETCH_MAX &&
               !atomic_compare_exchange_weak_explicit(c, &v, (uint8_t)(v + 1), memory_order_relaxed,
                                                      memory_order_relaxed))
            ;
        uint32_t now = v < MC_SKETCH_MAX ? (uint32_t)v + 1 : MC_SKETCH_MAX;
        if (now < min)
            min = now;
    }
    uint64_t n = atomic_fetch_add_explicit(&s->increments, 1, memory_order_relaxed) + 1;
    if (n == (uint64_t)MC_SKETCH_WIDTH * MC_SKETCH_DEPTH) {
        /* This thread's increment reached the period: it halves and restarts the count. The
         * count is reset before the halving so the next period starts from here; increments
         * made meanwhile count toward it. */
        atomic_fetch_sub_explicit(&s->increments, n, memory_order_relaxed);
        mc_sketch_halve(s);
    }
    return min;
}

uint32_t mc_sketch_estimate(const struct mc_sketch *s, const void *key, size_t len)
{
    uint32_t min = MC_SKETCH_MAX;
    for (uint32_t r = 0; r < MC_SKETCH_DEPTH; r++) {
        uint8_t v = atomic_load_explicit(&((struct mc_sketch *)s)->c[r][row_index(r, key, len)],
                                         memory_order_relaxed);
        if (v < min)
            min = v;
    }
    return min;
}

uint64_t mc_sketch_halvings(const struct mc_sketch *s)
{
    return atomic_load_explicit(&((struct mc_sketch *)s)->halvings, memory_order_relaxed);
}
