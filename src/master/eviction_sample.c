/*
 * eviction_sample.c - the sampled census of a selective BatchEvict cycle: the exact k-th oldest
 * plain lease deadline (the frontier's cutoff) without visiting every entry when the target is
 * small.
 *
 * The census of the selective path visits every entry to count the evictable population and
 * to copy every plain deadline, only to pick the k-th smallest, k ~ 1.1 * target of them. Two
 * things kept on the write path replace the visit:
 *   - each shard's population count (mc_shard.npop: entries whose cached bits are evictable and
 *     not hard-pinned), kept where the bits change (mc_shard_refresh_bits) and where entries
 *     go (unlink, unlink_many): the counts' base, exact, from 1024 integers;
 *   - each block of MC_ENT_BLOCK entries' lease floor (shard.h), a lower bound of its entries'
 *     deadlines, lowered where an insert or a move puts a lower deadline into the block (O(1),
 *     write lock) and raised to the exact minimum by every eviction scan that visits the block.
 * The cycle then
 *   1. samples every stride-th entry (about EV_SAMPLE_TARGET of them) and sums the population;
 *   2. takes as a guess c0 the sample deadline whose rank is k / stride plus a margin of three
 *      standard deviations and a sixteenth (a quarter cost the low census a sixth more blocks);
 *   3. runs the low census: every block whose floor is <= c0 is visited and its plain eligible
 *      entries with a deadline <= c0 are recorded as {deadline, shard, position, the object's
 *      address} (the predicate is the census's, ev_classify; no object is touched); every other
 *      block holds nothing <= c0, so these are all the plain deadlines <= c0;
 *   4. if it found at least k, the k-th smallest of them is the k-th smallest plain deadline of
 *      the table (the correction: exact, whatever the sample said); else the guess was low and
 *      step 2 doubles the rank (twice at most) before the cycle falls back to the census.
 * The frontier is then the recorded entries below the cutoff, and those at it up to the tie
 * quota: the census path's set, so the victims and their order are the census's. Their versions
 * are read under each shard's read lock while its gen (bumped by removals only) is what the low
 * census saw, so a position still names the same object (read through its entry; the address the
 * low census recorded only fetches it ahead, across shards: a record that gained a replica since
 * was reallocated at the same position); if any shard's gen moved, the census path's frontier
 * scan builds the frontier instead (eviction.c). What the sampled census does not know is the
 * number of plain eligible objects: it found >= k of them, so min(ideal, plain) is ideal, and
 * the path choice (k against a quarter of them) uses the sample's estimate; when that estimate
 * says the full path would be taken, or the guess stays low, the cycle takes the census as
 * before.
 */
#include <math.h>
#include <string.h>

#include "master/eviction_sample.h"

#define EV_SAMPLE_TARGET 16384u /* entries sampled per cycle */
#define EV_SAMPLE_TRIES 3

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

/* The low census at c0: every plain eligible entry with a deadline <= c0, as a candidate holding
 * its object's address instead of its version (the object is not touched), and each shard's
 * gen. */
static bool low_census(const struct ev_sample_in *in, uint64_t c0, uint64_t expect,
                       uint64_t *visited)
{
    struct ev_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.m = in->m;
    sc.now = in->now;
    sc.filter = EV_PLAIN_LOW;
    sc.cutoff = c0;
    sc.lease_max = c0;
    sc.skip_above = c0;
    sc.gens = in->gens;
    sc.parts = in->parts;
    /* The merge below adopts worker 0's buffer: hand it the larger of the two first, so that one
     * buffer serves cycle after cycle. Left to swap, each second cycle grew a fresh one from
     * nothing, and its page faults doubled that cycle's low census (4.2 against 2.4 ms at the
     * 1% target of a million objects). */
    if (in->cands->cap > in->parts[0].plain.cap) {
        struct ev_candv t = in->parts[0].plain;
        in->parts[0].plain = *in->cands;
        *in->cands = t;
    }
    /* sized once for what the sample expects (grown by doubling from nothing, a first cycle
     * wrote every record about twice, into pages faulted twice) */
    for (unsigned i = 0; i < in->nthreads; i++)
        (void)ev_candv_reserve(&in->parts[i].plain, expect / in->nthreads + expect / 8 + 64);
    ev_scan_run(&sc, in->nthreads);
    for (unsigned i = 0; i < in->nthreads; i++)
        *visited += in->parts[i].visited;
    in->cands->n = 0;
    return !ev_parts_oom(in->parts, in->nthreads) &&
           ev_merge_cands(in->cands, in->parts, in->nthreads, false);
}

enum ev_sample_rc ev_sample_census(const struct ev_sample_in *in, struct ev_sample_out *out)
{
    memset(out, 0, sizeof(*out));
    uint64_t keys = in->keys ? in->keys : 1;
    uint32_t stride = keys > EV_SAMPLE_TARGET ? (uint32_t)(keys / EV_SAMPLE_TARGET) : 1;
    if (!ev_sample_run(in->m, in->now, stride, in->salt, in->sample, &out->base))
        return EV_SAMPLE_OOM;
    out->samples = in->sample->n;
    out->ideal = ev_count_of(out->base, in->target);
    if (out->ideal == 0)
        return EV_SAMPLE_NONE;
    uint64_t reserve = ceil_div(out->ideal, 10);
    if (reserve < in->reserve_min)
        reserve = in->reserve_min;
    out->k = out->ideal + reserve;
    uint64_t est_plain = (uint64_t)in->sample->n * stride;
    uint64_t flimit = ceil_div(est_plain, 4);
    if (flimit < in->frontier_min)
        flimit = in->frontier_min;
    if (out->k > flimit)
        return EV_SAMPLE_CENSUS; /* the census would take the full path */
    uint64_t r = ceil_div(out->k, stride);
    uint64_t rank = r + r / 16 + (uint64_t)(3.0 * sqrt((double)r)) + 8;
    for (int t = 0; t < EV_SAMPLE_TRIES; t++, rank *= 2) {
        uint64_t c0 = UINT64_MAX;
        size_t less;
        if (rank <= in->sample->n &&
            !ev_select_kth(in->sample->v, in->sample->n, rank, &c0, &less, in->scratch, in->hist))
            return EV_SAMPLE_OOM;
        if (c0 == UINT64_MAX)
            return EV_SAMPLE_CENSUS; /* the guess covers the whole table: the census is cheaper */
        if (!low_census(in, c0, rank * stride, &out->visited))
            return EV_SAMPLE_OOM;
        out->tries = (uint32_t)t + 1;
        out->low = in->cands->n;
        if (out->low < out->k)
            continue;
        if (!ev_select_kth_cand(in->cands->v, in->cands->n, out->k, &out->cut, &out->less,
                                in->scratch, in->hist))
            return EV_SAMPLE_OOM;
        return EV_SAMPLE_OK;
    }
    return EV_SAMPLE_CENSUS;
}

/* The records c[i..e) of s (read-locked, gen unchanged, so each record's position still holds
 * its object) that belong to the frontier, appended to dst at *dn (dst may be c itself:
 * *dn <= i), their objects' addresses replaced by their versions. */
static void take_records(struct mc_shard *s, const struct ev_cand *c, size_t i, size_t e,
                         uint64_t cut, uint64_t *quota, struct ev_cand *dst, size_t *dn)
{
    size_t first = *dn;
    for (size_t j = i; j < e; j++) {
        if (c[j].lease > cut || (c[j].lease == cut && *quota == 0))
            continue;
        *quota -= c[j].lease == cut;
        __builtin_prefetch(mc_shard_ent(s, c[j].ent));
        dst[(*dn)++] = c[j];
    }
    /* through the entry, not the recorded address: a record that gained a replica since the
     * low census was reallocated (mc_shard_obj_grow: same position, same version, no gen bump) */
    for (size_t j = first; j < *dn; j++)
        dst[j].version = mc_ent_obj(mc_shard_ent(s, dst[j].ent))->version;
}

/* How many records ahead the frontier fetches their objects (by the addresses the low census
 * recorded, across shard boundaries: a shard holds about ten of them at the 1% target). The
 * address is only a hint for the fetch: the version is read through the entry. */
#define EV_FRONTIER_AHEAD 16u

/* Keeps the low census's entries (plain, in scan order, objects' addresses in version) that
 * belong to the frontier: deadline < cut, and = cut while quota lasts. Then reads their
 * versions, shard run by shard run under the read lock, while each shard's gen is what the low
 * census saw; a shard whose gen moved gets a frontier scan of its own. false when out of
 * memory. */
bool ev_sample_frontier(struct mc_master *m, uint64_t now, struct ev_candv *plain,
                        struct ev_part *part, const uint32_t *gens, uint64_t cut, uint64_t quota)
{
    struct ev_cand *c = plain->v;
    const size_t nrec = plain->n;
    size_t n = 0;                /* kept in place while no shard changed */
    struct ev_candv *out = NULL; /* part->plain from the first changed shard on */
    struct ev_scan sc;           /* a changed shard's frontier scan */
    memset(&sc, 0, sizeof(sc));
    sc.m = m;
    sc.now = now;
    sc.filter = EV_PLAIN_FRONTIER;
    sc.cutoff = cut;
    sc.lease_max = UINT64_MAX;
    sc.skip_above = cut;
    size_t ahead = 0; /* records below this one have had their objects fetched */
    for (size_t i = 0; i < nrec;) {
        struct mc_shard *s = &m->shards[c[i].shard];
        size_t e = i;
        while (e < nrec && c[e].shard == c[i].shard)
            e++;
        /* a prefetch of an address that may since have been freed (a Remove, or a record
         * reallocated when it gained a replica) is harmless: it is never read through */
        for (; ahead < nrec && ahead < e + EV_FRONTIER_AHEAD; ahead++)
            __builtin_prefetch((const void *)(uintptr_t)c[ahead].version);
        mc_shard_rdlock(s);
        bool same = s->gen == gens[s->index];
        if (same && !out)
            take_records(s, c, i, e, cut, &quota, c, &n);
        else if (same) /* out has room for every record left */
            take_records(s, c, i, e, cut, &quota, out->v, &out->n);
        mc_shard_unlock(s);
        if (!same) {
            /* its candidates may now outnumber its records (Puts since the low census append
             * entries at deadline 0), so the result moves to a vector of its own */
            if (!out) {
                out = &part->plain;
                out->n = 0;
                part->oom = false;
                if (!ev_candv_reserve(out, n + (nrec - i)))
                    return false;
                memcpy(out->v, c, n * sizeof(*c));
                out->n = n;
            }
            atomic_init(&sc.eq_quota, (int64_t)quota);
            ev_scan_one(&sc, s, part);
            int64_t left = atomic_load_explicit(&sc.eq_quota, memory_order_relaxed);
            quota = left > 0 ? (uint64_t)left : 0;
            if (part->oom || !ev_candv_reserve(out, out->n + (nrec - e)))
                return false;
        }
        i = e;
    }
    if (!out) {
        plain->n = n;
        return true;
    }
    struct ev_candv t = *plain;
    *plain = *out;
    *out = t;
    out->n = 0;
    return true;
}
