/*
 * alloc_meter.h - a test binary's allocations, counted: linking alloc_meter.c replaces malloc
 * and friends (glibc supports replacing them) with wrappers around glibc's own that keep the
 * bytes live now and their peak. Tests of memory bounds measure the peak over one operation
 * (mc_alloc_meter_reset_peak before, mc_alloc_meter_peak after) instead of timing it.
 */
#ifndef MC_TESTS_ALLOC_METER_H
#define MC_TESTS_ALLOC_METER_H

#include <stddef.h>

/* Bytes allocated and not yet freed (usable sizes). */
size_t mc_alloc_meter_live(void);
/* The highest live count since the last reset. */
size_t mc_alloc_meter_peak(void);
/* Starts a new peak at the current live count. */
void mc_alloc_meter_reset_peak(void);

#endif
