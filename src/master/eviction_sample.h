/*
 * eviction_sample.h - the sampled census of a selective BatchEvict cycle (eviction_sample.c):
 * the counts' base and the exact k-th oldest plain deadline from a sample, the shards'
 * population counts and a low census over the blocks whose lease floor is at or below a guess.
 */
#ifndef MC_MASTER_EVICTION_SAMPLE_H
#define MC_MASTER_EVICTION_SAMPLE_H

#include "master/eviction_internal.h"

struct ev_sample_in {
    struct mc_master *m;
    uint64_t now;
    uint64_t keys; /* the table's size (for the stride) */
    double target;
    uint32_t reserve_min, frontier_min;
    uint32_t salt;
    unsigned nthreads;
    struct ev_part *parts;  /* nthreads */
    struct ev_u64v *sample; /* scratch: the sampled plain deadlines */
    struct ev_candv *cands; /* out: every plain entry with a deadline <= the guess (no version) */
    uint32_t *gens;         /* out: each shard's gen when the low census read it (MC_NSHARDS) */
    struct ev_u64v *scratch;
    uint32_t *hist;
};

struct ev_sample_out {
    uint64_t base;    /* the evictable population (exact) */
    uint64_t ideal;   /* ev_count_of(base, target) */
    uint64_t k;       /* ideal + reserve */
    uint64_t cut;     /* OK: the k-th smallest plain deadline */
    size_t less;      /* OK: plain deadlines < cut */
    uint64_t low;     /* plain deadlines found <= the last guess */
    uint64_t visited; /* entries the low census(es) visited */
    uint64_t samples; /* plain entries in the sample */
    uint32_t tries;   /* low censuses run */
};

enum ev_sample_rc {
    EV_SAMPLE_OK,     /* out->cut and out->less are exact */
    EV_SAMPLE_NONE,   /* nothing to evict (ideal == 0); out->base is exact */
    EV_SAMPLE_CENSUS, /* take the census (a large target, or the guesses stayed low) */
    EV_SAMPLE_OOM,
};

enum ev_sample_rc ev_sample_census(const struct ev_sample_in *in, struct ev_sample_out *out);

/* Keeps the low census's entries (plain, in scan order, versions unset) that belong to the
 * frontier (deadline < cut, and = cut while quota lasts) and reads their versions under each
 * shard's read lock while its gen is the one in gens; a shard whose gen moved (a removal moved
 * its entries) is scanned again for its frontier with the quota left (the frontier scan's rule,
 * for that shard alone). The result is built in part->plain and swapped into *plain. false when
 * out of memory (the caller scans every shard for the frontier instead). */
bool ev_sample_frontier(struct mc_master *m, uint64_t now, struct ev_candv *plain,
                        struct ev_part *part, const uint32_t *gens, uint64_t cut, uint64_t quota);

#endif
