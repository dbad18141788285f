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
 *      standard deviations and a quarter;
 *   3. runs the low census: every block whose floor is <= c0 is visited and the deadlines of its
 *      plain eligible entries <= c0 are copied (the predicate is the census's, ev_classify);
 *      every other block holds nothing <= c0, so this is every plain deadline <= c0;
 *   4. if it found at least k, the k-th smallest of them is the k-th smallest plain deadline of
 *      the table (the correction: exact, whatever the sample said); else the guess was low and
 *      step 2 doubles the rank (twice at most) before the cycle falls back to the census.
 * The frontier materialization that follows is the census path's, with the same cutoff and tie
 * quota, so the victims and their order are the census's. What the sampled census does not
 * know is the number of plain eligible objects: it found >= k of them, so min(ideal, plain) is
 * ideal, and the path choice (k against a quarter of them) uses the sample's estimate; when that
 * estimate says the full path would be taken, or the guess stays low, the cycle takes the
 * census as before.
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

/* The low census at c0: every plain eligible deadline <= c0 into leases. */
static bool low_census(const struct ev_sample_in *in, uint64_t c0, struct ev_u64v *leases,
                       uint64_t *visited)
{
    struct ev_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.m = in->m;
    sc.now = in->now;
    sc.collect_lease = true;
    sc.filter = EV_PLAIN_NONE;
    sc.lease_max = c0;
    sc.skip_above = c0;
    sc.parts = in->parts;
    ev_scan_run(&sc, in->nthreads);
    for (unsigned i = 0; i < in->nthreads; i++)
        *visited += in->parts[i].visited;
    leases->n = 0;
    return !ev_parts_oom(in->parts, in->nthreads) && ev_merge_u64(leases, in->parts, in->nthreads);
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
    uint64_t rank = r + r / 4 + (uint64_t)(3.0 * sqrt((double)r)) + 8;
    for (int t = 0; t < EV_SAMPLE_TRIES; t++, rank *= 2) {
        uint64_t c0 = UINT64_MAX;
        size_t less;
        if (rank <= in->sample->n &&
            !ev_select_kth(in->sample->v, in->sample->n, rank, &c0, &less, in->scratch, in->hist))
            return EV_SAMPLE_OOM;
        if (c0 == UINT64_MAX)
            return EV_SAMPLE_CENSUS; /* the guess covers the whole table: the census is cheaper */
        if (!low_census(in, c0, in->leases, &out->visited))
            return EV_SAMPLE_OOM;
        out->tries = (uint32_t)t + 1;
        out->low = in->leases->n;
        if (out->low < out->k)
            continue;
        if (!ev_select_kth(in->leases->v, in->leases->n, out->k, &out->cut, &out->less, in->scratch,
                           in->hist))
            return EV_SAMPLE_OOM;
        return EV_SAMPLE_OK;
    }
    return EV_SAMPLE_CENSUS;
}
