/*
 * eviction_internal.h - what eviction.c (the cycle: counts, passes, rounds, tick, metrics) and
 * eviction_census.c (the scans over the shards, the parallel runner, k-th selection) share.
 *
 * The eligibility predicate lives here, once: ev_classify() decides from an entry's bits, its
 * lease and (only for soft-pinned entries) the object, and it is what the census, every
 * materialization scan and the revalidation under the write lock call. The census feeds it the
 * entry's cached MC_ENT_* bits; revalidation feeds it bits recomputed from the object
 * (mc_obj_ent_bits, shard.h: the same function that fills the cache), so a segment that died
 * since the bits were cached is seen there.
 */
#ifndef MC_MASTER_EVICTION_INTERNAL_H
#define MC_MASTER_EVICTION_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "master/eviction.h"
#include "master/master_state.h"
#include "master/objects.h"
#include "master/shard.h"

#define EV_MAX_THREADS 64u
#define EV_HIST_BITS 16
#define EV_HIST_SIZE (1u << EV_HIST_BITS)

/* ---- the predicate -------------------------------------------------------------------------- */

enum ev_class {
    EV_OUT = 0,   /* not in the evictable population (no evictable replica, or hard-pinned) */
    EV_HELD = 1,  /* evictable replica but the lease is active */
    EV_PLAIN = 2, /* eligible, not soft-pinned */
    EV_SOFT = 3,  /* eligible, soft-pinned (a last-resort victim) */
};

/* bits: MC_ENT_* (cached or from mc_obj_ent_bits); o is read only when MC_ENT_SOFT_PIN is set. */
static inline enum ev_class ev_classify(unsigned bits, uint64_t lease_ms, uint64_t now_ms,
                                        const struct mc_object *o)
{
    if (!(bits & MC_ENT_EVICTABLE) || (bits & MC_ENT_HARD_PIN))
        return EV_OUT;
    if (now_ms < lease_ms)
        return EV_HELD;
    if ((bits & MC_ENT_SOFT_PIN) && mc_obj_soft_pinned(o, now_ms))
        return EV_SOFT;
    return EV_PLAIN;
}

/* The counts' rounding: ceil(base * ratio - 1e-9). */
static inline uint64_t ev_count_of(uint64_t base, double ratio)
{
    double x = (double)base * ratio - 1e-9;
    return x <= 0 ? 0 : (uint64_t)ceil(x);
}

/* ---- candidates and vectors ----------------------------------------------------------------- */

/* A materialized candidate: enough to find the object again under the write lock ({shard, ent,
 * version}; versions are unique per master). When its entry moved before its round, the round
 * finds it by version in one walk over that shard's entries (no key is hashed). 24 bytes. */
struct ev_cand {
    uint64_t lease;
    uint64_t version;
    uint32_t ent;
    uint16_t shard;
    uint16_t soft;
};

struct ev_u64v {
    uint64_t *v;
    size_t n, cap;
};
struct ev_candv {
    struct ev_cand *v;
    size_t n, cap;
};

bool ev_reserve(void **v, size_t *cap, size_t want, size_t elem);
/* Asks for transparent huge pages on a block of 4 MiB or more (advice; nothing on failure). */
void ev_ask_huge(void *v, size_t bytes);
static inline bool ev_u64v_reserve(struct ev_u64v *a, size_t want)
{
    return want <= a->cap || ev_reserve((void **)&a->v, &a->cap, want, sizeof(*a->v));
}
static inline bool ev_candv_reserve(struct ev_candv *a, size_t want)
{
    return want <= a->cap || ev_reserve((void **)&a->v, &a->cap, want, sizeof(*a->v));
}
static inline bool ev_u64v_push(struct ev_u64v *a, uint64_t x)
{
    if (a->n == a->cap && !ev_u64v_reserve(a, a->n + 1))
        return false;
    a->v[a->n++] = x;
    return true;
}
static inline struct ev_cand *ev_candv_push(struct ev_candv *a)
{
    if (a->n == a->cap && !ev_candv_reserve(a, a->n + 1))
        return NULL;
    return &a->v[a->n++];
}

/* ---- scans (eviction_census.c) -------------------------------------------------------------- */

enum ev_plain_filter {
    EV_PLAIN_NONE,     /* no plain candidates (the census of the selective path) */
    EV_PLAIN_ALL,      /* every eligible plain object (full path) */
    EV_PLAIN_FRONTIER, /* lease < cutoff, and lease == cutoff while eq_quota lasts */
    EV_PLAIN_REFILL,   /* lease >= cutoff and not materialized before (seen set) */
    /* lease <= cutoff, the object's address in version (not touched): the low census, its own
     * scan (scan_shard_low), which records these alone (no counts, deadlines or soft-pinned
     * candidates) and visits the blocks whose floor is at or below the cutoff */
    EV_PLAIN_LOW,
};

/* One worker's output of a scan. */
struct ev_part {
    struct ev_u64v leases;
    struct ev_candv plain, soft;
    uint64_t census, base, nplain, nsoft;
    uint64_t visited; /* entries in the blocks the scan did not skip */
    bool oom;
};

/* Versions already materialized (refill dedup): open addressing, 0 = empty (no version is 0). */
struct ev_seen {
    uint64_t *slots;
    size_t mask;
};

struct ev_scan {
    struct mc_master *m;
    uint64_t now;
    bool count;         /* census: fill census/base/nplain/nsoft */
    bool collect_lease; /* plain leases at or below lease_max (census, low census) */
    bool collect_soft;  /* soft-pinned eligible candidates (census, when allowed) */
    enum ev_plain_filter filter;
    uint64_t cutoff;
    uint64_t lease_max; /* collect_lease: only deadlines <= this (UINT64_MAX: all) */
    /* Blocks whose lease floor (shard.h) is above this are skipped (UINT64_MAX: none). Every
     * block a scan visits gets its floor raised to its exact minimum. */
    uint64_t skip_above;
    _Atomic int64_t eq_quota;
    const struct ev_seen *seen;
    uint32_t *gens; /* EV_PLAIN_LOW: each shard's gen when scanned (MC_NSHARDS) */
    _Atomic uint32_t next_shard;
    struct ev_part *parts; /* one per worker */
};

/* Runs fn(arg, worker) on nthreads workers (the caller is worker 0); workers that cannot be
 * started are simply missing, so fn must share work through an atomic cursor. */
void ev_parallel(unsigned nthreads, void (*fn)(void *arg, unsigned worker), void *arg);

/* Scans one shard (read lock) into p (appended; the caller resets p's counts). */
void ev_scan_one(struct ev_scan *sc, struct mc_shard *s, struct ev_part *p);
/* Scans every shard (read lock, one shard at a time) with nthreads workers into sc->parts[]. */
void ev_scan_run(struct ev_scan *sc, unsigned nthreads);

/* The workers' output merged into dst (worker 0's buffer adopted when dst is empty): the plain
 * deadlines, or the plain / soft candidates. false when out of memory. */
bool ev_merge_u64(struct ev_u64v *dst, struct ev_part *parts, unsigned n);
bool ev_merge_cands(struct ev_candv *dst, struct ev_part *parts, unsigned n, bool soft);
bool ev_parts_oom(const struct ev_part *parts, unsigned n);

/* The sampled census's first step: every shard read-locked in turn, its population count
 * (mc_shard.npop) summed into *base, and every stride-th entry (from a per-shard offset
 * that moves with salt) classified: the deadlines of the plain eligible ones go to out.
 * false when out of memory. */
bool ev_sample_run(struct mc_master *m, uint64_t now, uint32_t stride, uint32_t salt,
                   struct ev_u64v *out, uint64_t *base);

/* The k-th smallest (1 <= k <= n) of v[0..n) by radix selection over the value range (v is not
 * modified); *less = how many are strictly smaller. false when out of memory. */
bool ev_select_kth(const uint64_t *v, size_t n, size_t k, uint64_t *kth, size_t *less,
                   struct ev_u64v *scratch, uint32_t *hist);
/* The same over the lease deadlines of c[0..n), read in place. */
bool ev_select_kth_cand(const struct ev_cand *c, size_t n, size_t k, uint64_t *kth, size_t *less,
                        struct ev_u64v *scratch, uint32_t *hist);

bool ev_seen_build(struct ev_seen *s, const struct ev_cand *c, size_t n);
bool ev_seen_has(const struct ev_seen *s, uint64_t version);
void ev_seen_free(struct ev_seen *s);

#endif
