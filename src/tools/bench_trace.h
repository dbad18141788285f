/*
 * bench_trace.h - Mooncake's trace format and the replay's block bytes.
 *
 * A trace is JSON lines, one request each (shared/traces/README.md):
 *     {"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [ids]}
 * Only timestamp (a non-negative number, milliseconds) and hash_ids (an array of non-negative
 * integers, each one KV-cache block) are used; other members are skipped whatever their type.
 * Blank lines are ignored. A malformed line is an error naming its line number, never a crash.
 *
 * Block bytes. The value stored for block id under a seed is a deterministic pseudo-random
 * stream derived from both, so a reader can check every byte without keeping a copy, and a
 * block read under another id (or from another run's seed) fails the check.
 */
#ifndef MC_TOOLS_BENCH_TRACE_H
#define MC_TOOLS_BENCH_TRACE_H

#include <stddef.h>
#include <stdint.h>

struct mc_trace_req {
    uint64_t timestamp_ms;
    uint32_t n;    /* hash ids */
    uint64_t *ids; /* points into the trace's id array */
};

struct mc_trace {
    size_t nreq;
    struct mc_trace_req *reqs;
    uint64_t *ids;  /* every request's ids, back to back */
    size_t nids;    /* sum of n */
    uint32_t max_n; /* longest request */
};

/* Parses the text of a trace (len bytes), keeping at most limit requests (0 = all). Returns 0,
 * or -1 with a reason in err (line number included). */
int mc_trace_parse(const char *text, size_t len, size_t limit, struct mc_trace *out, char *err,
                   size_t errlen);
/* Reads and parses the file at path. */
int mc_trace_load(const char *path, size_t limit, struct mc_trace *out, char *err, size_t errlen);
void mc_trace_destroy(struct mc_trace *t);

/* Fills buf with the len bytes of block id under seed. */
void mc_block_fill(void *buf, size_t len, uint64_t id, uint64_t seed);
/* Counts the bytes of buf[0..len) that differ from block id's bytes under seed. */
uint64_t mc_block_check(const void *buf, size_t len, uint64_t id, uint64_t seed);

#endif
