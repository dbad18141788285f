/*
 * eviction_state.h - an evictor's state (struct mc_evictor, one per master: its buffers, kept
 * from cycle to cycle, its workers' scratch, its metrics), shared by the cycle (eviction.c) and
 * the module's lifecycle, loop and metrics (eviction_life.c).
 */
#ifndef MC_MASTER_EVICTION_STATE_H
#define MC_MASTER_EVICTION_STATE_H

#include <pthread.h>

#include "common/metrics.h"
#include "master/eviction.h"
#include "master/eviction_internal.h"
#include "master/eviction_moves.h"
#include "master/eviction_release.h"
#include "master/eviction_unlink.h"

/* Per-worker scratch of the eviction rounds. */
struct ev_worker {
    struct mc_object **objs;
    size_t objs_cap;
    struct mc_object **members;
    size_t members_cap;
    struct mc_unlink_batch ub;  /* the shard's erased objects, unlinked together */
    struct ev_unlink_hashes uh; /* their keys' hashes, for one-by-one unlinks */
    uint32_t *map;              /* mc_shard_unlink_many scratch */
    size_t map_cap;
    struct ev_moved_scratch moved; /* ev_find_moved's */
    uint64_t evicted, bytes, walks;
    uint64_t victim_freq; /* the evicted objects' estimated frequencies, summed (hot beats cold) */
    struct ev_held held;  /* a large round's buffers, released in handle order at its end */
    struct ev_candv shard_cands; /* one shard's candidates of the round, gathered in order */
};

struct mc_evictor {
    pthread_mutex_t cycle_lock;
    struct mc_evict_test_opts opts;
    unsigned nthreads;
    struct ev_part *parts;     /* nthreads */
    struct ev_worker *workers; /* nthreads */
    struct ev_u64v leases, scratch, sample;
    struct ev_candv plain, soft;
    /* A round's candidates grouped by shard, as indices into the round's array: 4 bytes each
     * where a copy of the candidates was 24 (12 MB of fresh pages in a first 0.5 cycle). */
    uint32_t *ridx;
    size_t ridx_cap;
    uint32_t *hist; /* EV_HIST_SIZE */
    uint32_t off[MC_NSHARDS + 1];
    uint32_t cur[MC_NSHARDS];
    uint32_t salt;             /* moves the sample's offsets from cycle to cycle */
    uint32_t gens[MC_NSHARDS]; /* the shards' gens the low census saw */
    struct ev_fwd fwd[MC_NSHARDS];
    struct mc_counter *cycles[4];
    struct mc_counter *materialized, *refilled;
    struct mc_histogram *duration;
};

/* Counts one finished cycle in the master's counters and the evictor's metrics. */
void ev_account(struct mc_master *m, struct mc_evictor *ev, const struct mc_evict_stats *st);

#endif
