/*
 * bench_values.c - the loopback benches' objects and their read-back pass. See bench_values.h.
 */
#include "tools/bench_values.h"

#include <stdio.h>
#include <string.h>

#define BATCH MC_BENCH_VALUES_BATCH

void mc_bench_value_key(const struct mc_bench_values *v, int i, char *key, size_t cap)
{
    snprintf(key, cap, "%s-%08d", v->prefix, i);
}

void mc_bench_value_fill(uint8_t *b, uint64_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (uint8_t)x;
    }
}

int mc_bench_read_pass(struct mc_client *c, const struct mc_bench_values *v, bool *back,
                       uint8_t *bufs, uint8_t *want, uint64_t *wrong)
{
    char kb[BATCH][32];
    const char *keys[BATCH];
    void *bp[BATCH];
    int64_t res[BATCH];
    size_t caps[BATCH];
    int idx[BATCH], nback = 0;
    for (int i = 0; i < v->objects;) {
        int n = 0;
        for (; i < v->objects && n < BATCH; i++) {
            if (back[i]) {
                nback++;
                continue;
            }
            mc_bench_value_key(v, i, kb[n], sizeof(kb[n]));
            keys[n] = kb[n];
            bp[n] = bufs + (size_t)n * v->size;
            caps[n] = v->size;
            res[n] = -1;
            idx[n++] = i;
        }
        if (!n)
            break;
        if (mc_batch_get(c, (size_t)n, keys, bp, caps, res) != 0)
            return -1;
        for (int j = 0; j < n; j++) {
            if (res[j] < 0)
                continue; /* not back yet */
            mc_bench_value_fill(want, v->size, (uint64_t)idx[j]);
            if (res[j] != (int64_t)v->size || memcmp(bp[j], want, v->size) != 0) {
                fprintf(stderr, "%s: %s read back other bytes\n", v->bench, keys[j]);
                (*wrong)++;
                continue;
            }
            back[idx[j]] = true;
            nback++;
        }
    }
    return nback;
}
