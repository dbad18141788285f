/*
 * clock.h - a replaceable monotonic clock.
 *
 * Everything with a deadline (leases, TTLs, reapers) reads time through a struct mc_clock so
 * tests can inject a fake one and advance it by hand instead of sleeping. mc_clock_system()
 * is CLOCK_MONOTONIC; a fake clock is a struct mc_fake_clock whose .clock member is passed on.
 */
#ifndef MC_COMMON_CLOCK_H
#define MC_COMMON_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>

struct mc_clock {
    uint64_t (*now_ns)(const struct mc_clock *clk);
};

static inline uint64_t mc_clock_now_ns(const struct mc_clock *clk)
{
    return clk->now_ns(clk);
}
static inline uint64_t mc_clock_now_ms(const struct mc_clock *clk)
{
    return clk->now_ns(clk) / 1000000ull;
}

/* The process-wide CLOCK_MONOTONIC clock (stateless, shared). */
const struct mc_clock *mc_clock_system(void);
/* Direct monotonic readings, for code that never needs a fake clock (benchmarks, timeouts). */
uint64_t mc_now_ns(void);
static inline uint64_t mc_now_ms(void)
{
    return mc_now_ns() / 1000000ull;
}

/* A clock that moves only when told to. Thread-safe. */
struct mc_fake_clock {
    struct mc_clock clock;
    _Atomic uint64_t ns;
};
void mc_fake_clock_init(struct mc_fake_clock *fc, uint64_t start_ns);
void mc_fake_clock_advance_ms(struct mc_fake_clock *fc, uint64_t ms);
void mc_fake_clock_set_ns(struct mc_fake_clock *fc, uint64_t ns);

#endif
