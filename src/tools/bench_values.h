/*
 * bench_values.h - the objects of the loopback benches (restart, failover): key i is
 * "PREFIX-%08d", its value SIZE bytes of a pattern seeded by i (xorshift), and the batched pass
 * that reads back the objects not back yet and checks each against its pattern.
 */
#ifndef MC_TOOLS_BENCH_VALUES_H
#define MC_TOOLS_BENCH_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mooncake/client.h"

#define MC_BENCH_VALUES_BATCH 256 /* keys per mc_batch_get of a read pass */

struct mc_bench_values {
    const char *bench;  /* names the bench in error lines */
    const char *prefix; /* keys are PREFIX-%08d (a short prefix: keys fit 32 bytes) */
    int objects;
    uint64_t size;
};

/* The key of object i into key. */
void mc_bench_value_key(const struct mc_bench_values *v, int i, char *key, size_t cap);
/* len bytes of the pattern of seed (object i's value: seed i). */
void mc_bench_value_fill(uint8_t *b, uint64_t len, uint64_t seed);
/* One pass over the objects not back yet (back[i] false): read in batches of
 * MC_BENCH_VALUES_BATCH into bufs (that many values) and compared with their pattern (built in
 * want, one value). An object read with its bytes is marked back; one read with other bytes or
 * another length is said on stderr and counted in *wrong. Returns how many are back now, or -1
 * when a batch was not carried out (the master did not answer: try again later). */
int mc_bench_read_pass(struct mc_client *c, const struct mc_bench_values *v, bool *back,
                       uint8_t *bufs, uint8_t *want, uint64_t *wrong);

#endif
