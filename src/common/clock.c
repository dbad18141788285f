/* clock.c - see clock.h. */
#include "common/clock.h"

#include <stddef.h>
#include <time.h>

uint64_t mc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t system_now_ns(const struct mc_clock *clk)
{
    (void)clk;
    return mc_now_ns();
}

static const struct mc_clock g_system_clock = {.now_ns = system_now_ns};

const struct mc_clock *mc_clock_system(void)
{
    return &g_system_clock;
}

static uint64_t fake_now_ns(const struct mc_clock *clk)
{
    const struct mc_fake_clock *fc = (const struct mc_fake_clock *)((const char *)clk -
                                                                    offsetof(struct mc_fake_clock,
                                                                             clock));
    return atomic_load(&((struct mc_fake_clock *)fc)->ns);
}

void mc_fake_clock_init(struct mc_fake_clock *fc, uint64_t start_ns)
{
    fc->clock.now_ns = fake_now_ns;
    atomic_init(&fc->ns, start_ns);
}

void mc_fake_clock_advance_ms(struct mc_fake_clock *fc, uint64_t ms)
{
    atomic_fetch_add(&fc->ns, ms * 1000000ull);
}

void mc_fake_clock_set_ns(struct mc_fake_clock *fc, uint64_t ns)
{
    atomic_store(&fc->ns, ns);
}
