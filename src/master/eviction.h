/*
 * eviction.h - BatchEvict: frees DRAM by evicting the MEMORY replicas of the objects whose read
 * leases expired longest ago (DESIGN.md §1.2 and §7, issue 7).
 *
 * The daemon calls mc_master_tick_eviction() (master.h) every 10 ms; it runs one cycle when
 * used > eviction_high_watermark_ratio or a PutStart failed for space since the last cycle that
 * freed something, with target = max(r, used - hw + r) and lower = max(target / 2, used - hw),
 * r = eviction_ratio. Tests and the benchmark call mc_master_batch_evict() directly.
 *
 * One cycle:
 *   1. census: every shard read-locked in turn (optionally by several threads), its entry array
 *      streamed: the evictable population (a COMPLETE MEMORY replica with refcnt 0, not
 *      hard-pinned), the eligible part of it (lease expired) split into plain and soft-pinned,
 *      and only the lease deadlines of the plain ones;
 *   2. counts from the evictable population: primary = min(ceil(base * target - 1e-9), plain),
 *      lower count = ceil(base * lower - 1e-9);
 *   3. selective materialization: k = primary + max(reserve_min, ceil(primary / 10)) and the
 *      k-th oldest plain deadline as a cutoff; a second scan builds candidate identities
 *      {shard, ent, version, lease} only at or below it (ties at the cutoff are taken up to k
 *      in all). The full path (every eligible object materialized, in the census itself)
 *      is taken when target >= 10/44 or k > max(frontier_min, ceil(plain / 4)): with a reserve
 *      of primary / 10 and a frontier of N / 4 the two limits meet at 1.1 * t = 1 / 4, so the
 *      bypass ratio follows from them instead of being tuned. A frontier holding fewer than
 *      primary candidates (leases granted between the scans) falls back to a full scan;
 *   4. first pass: rounds take the oldest remaining candidates, sort them by shard and evict them
 *      under each shard's write lock, revalidating every one there with the same predicate;
 *      candidates that fail are replaced by the next oldest (the reserve), and when the frontier
 *      is exhausted a refill scan materializes everything past the cutoff;
 *   5. second pass: up to the lower count from the remaining plain candidates, then soft-pinned
 *      ones (oldest first) when allow_evict_soft_pinned_objects.
 * Selective cycles on tables of EV_SAMPLE_MIN_OBJECTS (65536) objects or more first try the
 * sampled census instead of steps 1-3 (eviction_sample.c): the population count from the
 * shards' counters, a guess at the cutoff from a sample of ~16k entries, and a low census that
 * visits only the blocks whose lease floor is at or below the guess, recording positions; the
 * exact k-th deadline is then taken from what it found and the frontier cut from it in memory.
 * Same cutoff, same tie quota, so the same victims in the same order; it falls back to the
 * census when the guess stays low or the target is large, and collects soft-pinned candidates
 * only when the soft-pinned phase runs. A round of 8192+ victims gives its buffers back sorted
 * by handle at its end (eviction_release.c).
 * Where the full path would be taken, a table of EV_CUT_MIN_OBJECTS (65536) objects or more is
 * evicted by cut instead (not when forced full): step 1 collects the plain deadlines only, the
 * primary-th lowest is the cut, and each shard's round walks its entries under its write lock,
 * evicting the plain objects below the cut and, up to the census's quota, those at it, where
 * they lie (at most EV_CUT_HOLD_MAX of them a lock hold; then the walk starts over): no
 * candidate identity is built, selected or found again (a first 0.5 cycle at 1M
 * objects: 24 MB of fresh candidates and a selection over them gone). The victims are the full
 * path's: the same deadlines, ties taken (with one eviction thread) in shard and position order
 * as the full census lists them; a group taken along with a victim goes whole, as there, its
 * members above the cut counted on top (the full path counts them within a slice). A slice is a
 * range of shards holding about MC_EVICT_SLICE victims, so the order across slices is by
 * shard, not by age. When the walk comes up short (objects leased, removed or held
 * by a group between the census and the walk) the rest is taken as the full path takes it, from
 * every eligible object left (path full_fallback).
 * A grouped candidate is evicted with its whole group, and skipped whole while any member holds
 * a lease; a group with a soft-pinned member is a soft-pinned victim as a whole: skipped in the
 * passes over plain candidates (selective and full paths alike), evicted whole only when the
 * soft-pinned phase reaches that member (never when soft-pinned eviction is off). An object that
 * keeps a valid LOCAL_DISK replica loses only its MEMORY replicas.
 *
 * No stop-the-world: only per-shard locks, each held for one shard's work; buffers are released
 * after the shard lock is dropped. One cycle runs at a time per master.
 */
#ifndef MC_MASTER_EVICTION_H
#define MC_MASTER_EVICTION_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct mc_master;

enum mc_evict_path {
    MC_EVICT_SELECTIVE = 0,     /* census + frontier materialization (+ refill) */
    MC_EVICT_FULL_BYPASS = 1,   /* every eligible object materialized (high target, or forced) */
    MC_EVICT_FULL_FALLBACK = 2, /* the frontier came up short: full scan after all */
    MC_EVICT_BY_CUT = 3,        /* census of deadlines, the cut selected from them, and the
                                 * victims (deadline below the cut) evicted where they lie, shard
                                 * by shard: a large target on a large table */
};

struct mc_evict_stats {
    enum mc_evict_path path;
    uint64_t census;        /* objects the census visited (the whole table) */
    uint64_t evictable;     /* the evictable population: the base of the counts */
    uint64_t eligible;      /* N: lease expired, not soft-pinned */
    uint64_t soft_eligible; /* lease expired, soft-pinned (0 unless allowed) */
    uint64_t primary;       /* first-pass target count */
    uint64_t lower;         /* lower-bound count */
    uint64_t k;             /* primary + reserve (selective path; 0 otherwise) */
    uint64_t materialized;  /* plain candidate identities built (frontier + refills, or all) */
    uint64_t refills;       /* of which built by refill scans */
    uint64_t evicted;       /* objects that lost their MEMORY replicas */
    uint64_t evicted_bytes; /* bytes of DRAM released */
    uint64_t duration_ns;   /* wall time of the cycle */
    uint64_t slices;        /* eviction rounds run (each at most MC_EVICT_SLICE objects) */
    uint64_t moved_walks;   /* shard walks to find candidates whose entry moved (a Remove or
                             * Put between rounds; this cycle's own unlinks are followed) */
    bool sampled;           /* the cutoff came from the sampled census: census counts the
                             * entries it visited, eligible the plain ones at or below its
                             * guess (a lower bound), soft_eligible is 0 unless needed */
    uint32_t sample_tries;  /* low censuses the sampled census ran (0: not tried) */
};

/* A large target is evicted in slices of at most this many objects, oldest first (by cut: a
 * slice is the victims of a range of shards, as many shards as hold about this many); between
 * slices the object events' unlocked hook runs (holders' polls woken by the slice's offloads
 * are answered, so their copies start while the cycle goes on). */
#define MC_EVICT_SLICE 65536u

/* One BatchEvict cycle with explicit ratios (both in [0,1]; lower above target is clamped to
 * target). out may be NULL. Returns MC_OK or INVALID_PARAMS. */
int mc_master_batch_evict(struct mc_master *m, double target_ratio, double lower_ratio,
                          struct mc_evict_stats *out);

/* Test and benchmark knobs (not for production use). */
struct mc_evict_test_opts {
    /* Runs after the census and before materialization, with no lock held (tests lease or
     * remove objects there to simulate churn between the scans). */
    void (*after_census)(struct mc_master *m, void *arg);
    void *arg;
    /* Always take the single-pass full path (the benchmark's baseline). */
    bool force_full;
    /* Tables of at least this many objects use the eviction threads (0: the default, 65536);
     * tests set 1 to run the parallel code on small tables. */
    uint32_t parallel_min_objects;
    /* The slice size (0: MC_EVICT_SLICE); tests set small ones. */
    uint32_t slice_objects;
    /* Selective cycles on tables of at least this many objects try the sampled census (0: the
     * default, 65536; UINT32_MAX: never); tests set 1 to run it on small tables. */
    uint32_t sample_min_objects;
    /* Cycles whose candidates would be every eligible object (a large target) evict by cut on
     * tables of at least this many objects (0: the default, 65536; UINT32_MAX: never); tests
     * set 1 to run it on small tables. */
    uint32_t cut_min_objects;
    /* Victims by cut per shard write-lock hold (0: the default, 4096); tests set small ones. */
    uint32_t cut_hold_max;
};
void mc_master_evict_set_test_opts(struct mc_master *m, const struct mc_evict_test_opts *opts);

const char *mc_evict_path_name(enum mc_evict_path p);

/* The module's lifecycle (mc_master_new, mc_master_free: through weak references, master.c)
 * and one eviction tick: a cycle when usage is over the high watermark or a PutStart asked for
 * room (master_ticks.c calls it from mc_master_tick_eviction). Returns objects evicted. */
int mc_eviction_init(struct mc_master *m);
void mc_eviction_destroy(struct mc_master *m);
int mc_eviction_tick(struct mc_master *m);

#ifdef __cplusplus
}
#endif
#endif
