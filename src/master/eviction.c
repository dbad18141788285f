/*
 * eviction.c - the eviction loop (mc_master_tick_eviction) and one BatchEvict cycle
 * (mc_master_batch_evict): counts, path choice, the passes, the eviction rounds, and metrics.
 * The algorithm is described in eviction.h; the scans are in eviction_census.c.
 *
 * A pass wants `want` more objects evicted from a candidate vector. It works in rounds: the
 * `want - got` oldest remaining candidates are moved to the front of what is left (radix select
 * on their deadlines plus one partition pass, never a full sort), counting-sorted by shard, and
 * each shard holding some of them is write-locked once. Under that lock every candidate is
 * found again (at its entry if that still holds its version; else along the moves this
 * cycle's unlinks made, struct ev_fwd; else, when a Remove or Put moved entries between rounds,
 * by version in one walk over the shard's entries) and revalidated with
 * ev_classify() on bits recomputed from the object; a grouped one takes its group along or
 * is skipped whole. Candidates that fail are simply not counted, so the next round takes as
 * many next-oldest ones (the reserve). A round takes at most MC_EVICT_SLICE candidates (a
 * large target goes in slices, the holders' polls answered between them; a pass of several
 * slices selects all it wants once, and each slice within that). On the selective path an
 * exhausted frontier is refilled once with every eligible object past the cutoff that was not
 * materialized yet. Large rounds spread their shards over the eviction threads; the objects a
 * shard's round erases are unlinked from it together before its lock is dropped
 * (mc_shard_unlink_many when they are a quarter of the shard), and each worker frees its buffers
 * after dropping the shard lock.
 *
 * Threads: one cycle at a time per master (cycle_lock); the census and big rounds use up to
 * eviction_threads workers (default max(1, ncpu - 1)), spawned per phase, and only for tables of
 * EV_PARALLEL_MIN_OBJECTS objects or more.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"
#include "master/eviction_internal.h"
#include "master/eviction_moves.h"
#include "master/eviction_release.h"
#include "master/eviction_unlink.h"
#include "master/eviction_sample.h"
#include "master/freelist.h"
#include "master/object_events.h"
#include "mooncake/errors.h"

#define EV_BYPASS_RATIO (10.0 / 44.0) /* 1.1 * t > 1/4: the reserve outgrows the frontier */
#define EV_PARALLEL_MIN_OBJECTS 65536u
#define EV_PARALLEL_MIN_ROUND 8192u
#define EV_HOLD_MIN_ROUND 8192u      /* rounds this large release their buffers in handle order */
#define EV_SAMPLE_MIN_OBJECTS 65536u /* smaller tables take the census */
#define EV_BULK_UNLINK_MIN 8u        /* erased objects in one shard for a bulk unlink */
#define EV_BULK_UNLINK_SHARE 4u      /* ... and at least 1/4 of the shard */
#define EV_TAIL_AHEAD 16u            /* tail entries (and objects) a shard's round fetches early */

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
    struct mc_counter *cycles[3];
    struct mc_counter *materialized, *refilled;
    struct mc_histogram *duration;
};

struct ev_cycle {
    struct mc_master *m;
    struct mc_evictor *ev;
    struct mc_evict_stats *st;
    uint64_t now;
    unsigned nthreads;
    bool frontier; /* candidates are the frontier (selective path): refill is possible */
    bool refilled;
    bool soft_later;  /* soft-pinned candidates not collected yet (sampled census) */
    _Atomic bool oom; /* set by any worker: the cycle stops early */
    uint64_t cutoff;
    uint64_t victim_freq; /* the workers' victim_freq, summed */
};

const char *mc_evict_path_name(enum mc_evict_path p)
{
    switch (p) {
    case MC_EVICT_SELECTIVE:
        return "selective";
    case MC_EVICT_FULL_BYPASS:
        return "full_bypass";
    case MC_EVICT_FULL_FALLBACK:
        return "full_fallback";
    }
    return "unknown";
}

/* Materialization scan of plain candidates with a filter, appended to ev->plain. */
static uint64_t materialize(struct ev_cycle *cy, enum ev_plain_filter filter, uint64_t cutoff,
                            int64_t eq_quota, const struct ev_seen *seen)
{
    struct ev_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.m = cy->m;
    sc.now = cy->now;
    sc.filter = filter;
    sc.cutoff = cutoff;
    atomic_init(&sc.eq_quota, eq_quota);
    sc.seen = seen;
    sc.lease_max = UINT64_MAX;
    sc.skip_above = filter == EV_PLAIN_FRONTIER ? cutoff : UINT64_MAX;
    sc.parts = cy->ev->parts;
    size_t before = cy->ev->plain.n;
    ev_scan_run(&sc, cy->nthreads);
    if (ev_parts_oom(sc.parts, cy->nthreads))
        cy->oom = true;
    if (!ev_merge_cands(&cy->ev->plain, sc.parts, cy->nthreads, false))
        cy->oom = true;
    return cy->ev->plain.n - before;
}

/* ---- eviction rounds ------------------------------------------------------------------------ */

struct ev_round {
    struct ev_cycle *cy;
    const struct ev_cand *c; /* the round's candidates; ev->ridx groups them by shard */
    bool soft_phase;
    bool hold; /* a large round: buffers held back and released in handle order */
    _Atomic uint32_t next;
};

static inline uint64_t lease_of(struct mc_shard *s, const struct mc_object *o)
{
    return atomic_load_explicit(&mc_shard_ent(s, o->ent)->lease_ms, memory_order_relaxed);
}

static void evict_now(struct ev_cycle *cy, struct mc_shard *s, struct mc_object *o,
                      struct ev_worker *w, struct mc_freelist *fl)
{
    uint32_t freq = 0; /* o's estimated read frequency, taken before o may be erased */
    uint64_t freed = mc_master_evict_object(cy->m, s, o, fl, &w->ub, &freq);
    if (freed) {
        w->evicted++;
        w->bytes += freed;
        w->victim_freq += freq;
    }
}

/* o is a live, resolved candidate in s (write-locked). */
static void evict_candidate(struct ev_cycle *cy, bool soft_phase, struct mc_shard *s,
                            struct mc_object *o, struct ev_worker *w, struct mc_freelist *fl)
{
    const uint64_t now = cy->now;
    enum ev_class cls = ev_classify(mc_obj_ent_bits(o), lease_of(s, o), now, o);
    if (!(cls == EV_PLAIN || (cls == EV_SOFT && soft_phase)))
        return;
    struct mc_group *g = mc_obj_group(o);
    if (!g) {
        evict_now(cy, s, o, w, fl);
        return;
    }
    /* A group goes whole, or not at all while any member holds a lease; one with a soft-pinned
     * member waits, whole, for the soft-pinned phase. */
    for (uint32_t i = 0; i < g->n; i++) {
        struct mc_object *mo = g->members[i];
        enum ev_class mc = ev_classify(mc_obj_ent_bits(mo), lease_of(s, mo), now, mo);
        if (mc == EV_HELD || (mc == EV_SOFT && !soft_phase))
            return;
    }
    uint32_t n = g->n;
    if (n > w->members_cap &&
        !ev_reserve((void **)&w->members, &w->members_cap, n, sizeof(*w->members))) {
        cy->oom = true;
        return;
    }
    memcpy(w->members, g->members, n * sizeof(*w->members)); /* g changes as members go */
    for (uint32_t i = 0; i < n; i++) {
        struct mc_object *mo = w->members[i];
        cls = ev_classify(mc_obj_ent_bits(mo), lease_of(s, mo), now, mo);
        if (cls == EV_PLAIN || (cls == EV_SOFT && soft_phase))
            evict_now(cy, s, mo, w, fl);
    }
}

/* Unlinks the objects this shard's round erased (write lock held): one bulk pass when they are
 * a large share of the shard, else one by one (a bulk pass costs a walk over the shard's entries
 * and slots, one by one two key hashes per object, each hashed once). The entries moved into the
 * holes are noted in f. */
static void unlink_erased(struct mc_shard *s, struct ev_worker *w, struct mc_freelist *fl,
                          struct ev_fwd *f)
{
    struct mc_unlink_batch *ub = &w->ub;
    uint32_t n0 = s->n;
    if (ub->n >= EV_BULK_UNLINK_MIN && ub->n * EV_BULK_UNLINK_SHARE >= s->n &&
        (s->n <= w->map_cap || ev_reserve((void **)&w->map, &w->map_cap, s->n, sizeof(*w->map)))) {
        mc_shard_unlink_many(s, ub->objs, ub->n, w->map);
        for (uint32_t j = s->n; j < n0; j++) /* map[j]: its new position, or UINT32_MAX: dead */
            if (w->map[j] != UINT32_MAX && w->map[j] != j)
                ev_fwd_set(f, j, w->map[j]);
    } else {
        ev_warm_unlinks(s, ub, &w->uh);
        for (size_t i = 0; i < ub->n; i++) {
            uint32_t last = s->n - 1, to = ub->objs[i]->ent;
            ev_unlink_one(s, ub, i, &w->uh); /* detached already: only the index and ents */
            if (last != to)
                ev_fwd_set(f, last, to);
            if (to < s->n)
                ev_refloor(s, to);
        }
    }
    for (size_t i = 0; i < ub->n; i++) {
        ub->objs[i]->flags &= ~(uint64_t)MC_OBJ_UNLINKING;
        mc_freelist_add_object_locked(fl, s, ub->objs[i]);
    }
    ub->n = 0;
}

static void evict_shard(struct ev_round *r, struct mc_shard *s, const struct ev_cand *c, size_t cnt,
                        struct ev_worker *w, struct mc_freelist *fl)
{
    if (cnt > w->objs_cap && !ev_reserve((void **)&w->objs, &w->objs_cap, cnt, sizeof(*w->objs))) {
        r->cy->oom = true;
        return;
    }
    size_t nmoved = 0;
    struct ev_fwd *f = &r->cy->ev->fwd[s->index];
    mc_shard_wrlock(s);
    if (!f->top)
        f->top = s->n ? s->n : 1;
    /* Resolve every candidate before the first eviction moves entries around. The candidates'
     * entries lie at random in the shard and their objects at random in memory: the entries are
     * fetched 16 ahead, the objects (read through the entries, which are cached by then) 8. */
    for (size_t i = 0; i < cnt && i < 16; i++)
        if (c[i].ent < s->n)
            __builtin_prefetch(mc_shard_ent(s, c[i].ent));
    /* The unlinks at the end move the shard's last entries into the victims' holes: those
     * entries now, their objects (whose keys are hashed then) once the candidates are resolved. */
    uint32_t ntail = cnt < EV_TAIL_AHEAD ? (uint32_t)cnt : EV_TAIL_AHEAD;
    ntail = ntail < s->n ? ntail : s->n;
    for (uint32_t j = 1; j <= ntail; j++)
        __builtin_prefetch(mc_shard_ent(s, s->n - j));
    for (size_t i = 0; i < cnt; i++) {
        if (i + 16 < cnt && c[i + 16].ent < s->n)
            __builtin_prefetch(mc_shard_ent(s, c[i + 16].ent));
        if (i + 8 < cnt && c[i + 8].ent < s->n)
            __builtin_prefetch(mc_ent_obj(mc_shard_ent(s, c[i + 8].ent)));
        if (c[i].ent < s->n) { /* the rest of its block and its floor, for the refloor */
            uint32_t b0 = c[i].ent & ~(MC_ENT_BLOCK - 1);
            __builtin_prefetch(mc_shard_ent(s, b0));
            __builtin_prefetch(mc_shard_ent(s, b0) + MC_ENT_BLOCK - 1);
            __builtin_prefetch(mc_shard_floor(s, b0));
        }
        w->objs[i] = mc_shard_revalidate(s, c[i].ent, c[i].version);
        if (!w->objs[i] && f->len)
            w->objs[i] = ev_follow_moves(s, f, &c[i]);
        nmoved += !w->objs[i];
    }
    if (nmoved) {
        ev_find_moved(s, c, cnt, w->objs, &w->moved, nmoved);
        w->walks++;
    }
    for (uint32_t j = 1; j <= ntail; j++) {
        const char *t = (const char *)mc_ent_obj(mc_shard_ent(s, s->n - j));
        __builtin_prefetch(t);
        __builtin_prefetch(t + 64);
    }
    for (size_t i = 0; i < cnt; i++) {
        if (i + 4 < cnt && w->objs[i + 4])
            __builtin_prefetch((const char *)w->objs[i + 4] + 64);
        struct mc_object *o = w->objs[i];
        /* gone, or erased with its group just now (unlink pending, or done at once after an
         * allocation failure) */
        if (!o || o->ent == MC_NO_INDEX || (o->flags & MC_OBJ_UNLINKING))
            continue;
        evict_candidate(r->cy, r->soft_phase, s, o, w, fl);
    }
    unlink_erased(s, w, fl, f);
    mc_shard_unlock(s);
    if (r->hold)
        ev_held_drain(&w->held, fl); /* buffers go back at the round's end, in handle order */
    else
        mc_freelist_flush(fl); /* buffers go back outside the shard lock */
}

static void round_worker(void *arg, unsigned worker)
{
    struct ev_round *r = arg;
    struct mc_evictor *ev = r->cy->ev;
    struct ev_worker *w = &ev->workers[worker];
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    for (;;) {
        uint32_t si = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
        if (si >= MC_NSHARDS)
            break;
        uint32_t b = ev->off[si], e = ev->off[si + 1];
        if (b == e)
            continue;
        if (!ev_candv_reserve(&w->shard_cands, e - b)) {
            r->cy->oom = true;
            continue;
        }
        for (uint32_t i = b; i < e; i++)
            w->shard_cands.v[i - b] = r->c[ev->ridx[i]];
        evict_shard(r, &r->cy->m->shards[si], w->shard_cands.v, e - b, w, &fl);
    }
    ev_held_release(&w->held);
}

/* Evicts the candidates c[0..d) (any order); returns the objects evicted. */
static uint64_t evict_round(struct ev_cycle *cy, const struct ev_cand *c, size_t d, bool soft_phase)
{
    struct mc_evictor *ev = cy->ev;
    if (d > UINT32_MAX || (d > ev->ridx_cap &&
                           !ev_reserve((void **)&ev->ridx, &ev->ridx_cap, d, sizeof(*ev->ridx)))) {
        cy->oom = true;
        return 0;
    }
    memset(ev->off, 0, sizeof(ev->off));
    for (size_t i = 0; i < d; i++)
        ev->off[c[i].shard + 1]++;
    for (uint32_t i = 0; i < MC_NSHARDS; i++) {
        ev->off[i + 1] += ev->off[i];
        ev->cur[i] = ev->off[i];
    }
    for (size_t i = 0; i < d; i++)
        ev->ridx[ev->cur[c[i].shard]++] = (uint32_t)i;

    struct ev_round r = {.cy = cy,
                         .c = c,
                         .soft_phase = soft_phase,
                         .hold = d >= EV_HOLD_MIN_ROUND || cy->ev->opts.parallel_min_objects};
    atomic_init(&r.next, 0);
    unsigned nw =
        d >= EV_PARALLEL_MIN_ROUND || cy->ev->opts.parallel_min_objects ? cy->nthreads : 1;
    for (unsigned i = 0; i < nw; i++)
        ev->workers[i].evicted = ev->workers[i].bytes = ev->workers[i].walks =
            ev->workers[i].victim_freq = 0;
    if (nw <= 1)
        round_worker(&r, 0);
    else
        ev_parallel(nw, round_worker, &r);
    uint64_t got = 0;
    for (unsigned i = 0; i < nw; i++) {
        got += ev->workers[i].evicted;
        cy->st->evicted_bytes += ev->workers[i].bytes;
        cy->st->moved_walks += ev->workers[i].walks;
        cy->victim_freq += ev->workers[i].victim_freq;
    }
    cy->st->evicted += got;
    return got;
}

static int cmp_lease(const void *a, const void *b)
{
    const struct ev_cand *x = a, *y = b;
    return x->lease < y->lease ? -1 : x->lease > y->lease;
}

/* Moves the d oldest of v[pos..end) to v[pos..pos+d). */
static void select_oldest(struct ev_cycle *cy, struct ev_candv *v, size_t pos, size_t end, size_t d)
{
    struct mc_evictor *ev = cy->ev;
    size_t cnt = end - pos;
    if (d >= cnt)
        return;
    uint64_t cut;
    size_t less;
    /* the deadlines are read in place (copying them out cost a pass and, in a fresh master's
     * first cycle, the page faults of an 8 MB buffer per million candidates) */
    bool ok = ev_select_kth_cand(v->v + pos, cnt, d, &cut, &less, &ev->scratch, ev->hist);
    if (!ok) { /* out of memory: sort in place instead */
        qsort(v->v + pos, cnt, sizeof(*v->v), cmp_lease);
        return;
    }
    size_t quota = d - less, j = pos;
    for (size_t i = pos; i < end; i++) {
        struct ev_cand c = v->v[i];
        bool take = c.lease < cut;
        if (!take && c.lease == cut && quota > 0) {
            take = true;
            quota--;
        }
        if (take) {
            v->v[i] = v->v[j];
            v->v[j++] = c;
        }
    }
}

static void refill(struct ev_cycle *cy)
{
    struct ev_seen seen;
    cy->refilled = true;
    if (!ev_seen_build(&seen, cy->ev->plain.v, cy->ev->plain.n)) {
        cy->oom = true;
        return;
    }
    uint64_t added = materialize(cy, EV_PLAIN_REFILL, cy->cutoff, 0, &seen);
    ev_seen_free(&seen);
    cy->st->refills += added;
    cy->st->materialized += added;
}

/* Evicts up to want objects from v[*pos..], oldest first. Returns the objects evicted.
 * A pass of several slices first moves all it wants, the oldest, to the front (one selection
 * over every remaining candidate), and each slice then selects only within that front: the
 * same victims in the same order as selecting each slice from everything left, without a
 * selection over the whole vector per slice. */
static uint64_t run_pass(struct ev_cycle *cy, struct ev_candv *v, size_t *pos, uint64_t want,
                         bool soft_phase)
{
    uint64_t got = 0;
    size_t front = *pos; /* v[*pos..front) holds the oldest remaining candidates */
    size_t slice = cy->ev->opts.slice_objects ? cy->ev->opts.slice_objects : MC_EVICT_SLICE;
    while (got < want && !atomic_load_explicit(&cy->oom, memory_order_relaxed)) {
        if (*pos == v->n) {
            if (!soft_phase && cy->frontier && !cy->refilled) {
                refill(cy);
                continue;
            }
            break;
        }
        size_t left = v->n - *pos;
        size_t d = want - got < left ? (size_t)(want - got) : left;
        size_t ds = d < slice ? d : slice;
        if (front < *pos + ds) { /* the front cannot supply this slice (skipped candidates) */
            if (d > ds) {
                select_oldest(cy, v, *pos, v->n, d);
                front = *pos + d;
            } else {
                front = v->n; /* one slice: it selects from everything left */
            }
        }
        if (cy->st->slices++ > 0)
            mc_obj_ev_unlocked(cy->m); /* the previous slice's offloads go out now */
        select_oldest(cy, v, *pos, front, ds);
        got += evict_round(cy, v->v + *pos, ds, soft_phase);
        *pos += ds;
    }
    return got;
}

/* ---- one cycle ------------------------------------------------------------------------------ */

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

static void account(struct mc_master *m, struct mc_evictor *ev, const struct mc_evict_stats *st)
{
    if (st->evicted) {
        atomic_fetch_add_explicit(&m->c.successful_evictions, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->c.evicted_key_count, st->evicted, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->c.evicted_size_bytes, st->evicted_bytes,
                                  memory_order_relaxed);
    } else if (st->evictable) {
        atomic_fetch_add_explicit(&m->c.attempted_evictions, 1, memory_order_relaxed);
    }
    if (ev->cycles[st->path])
        mc_counter_inc(ev->cycles[st->path]);
    if (ev->materialized)
        mc_counter_add(ev->materialized, st->materialized);
    if (ev->refilled)
        mc_counter_add(ev->refilled, st->refills);
    if (ev->duration)
        mc_histogram_observe(ev->duration, (double)st->duration_ns / 1e6);
}

/* The selective path's cutoff from the sampled census (eviction_sample.c) instead of a census
 * of every entry: true when it set the cycle up (frontier materialized, or nothing to do),
 * false when the census must run (nothing changed but stats). */
static bool run_sampled(struct ev_cycle *cy, double target, double lower, uint64_t keys)
{
    struct mc_master *m = cy->m;
    struct mc_evictor *ev = cy->ev;
    struct mc_evict_stats *st = cy->st;
    const struct ev_sample_in in = {
        .m = m,
        .now = cy->now,
        .keys = keys,
        .target = target,
        .reserve_min = m->cfg.eviction_reserve_min,
        .frontier_min = m->cfg.eviction_frontier_min,
        .salt = ev->salt++,
        .nthreads = cy->nthreads,
        .parts = ev->parts,
        .sample = &ev->sample,
        .cands = &ev->plain,
        .gens = ev->gens,
        .scratch = &ev->scratch,
        .hist = ev->hist,
    };
    struct ev_sample_out o;
    enum ev_sample_rc rc = ev_sample_census(&in, &o);
    st->sample_tries = o.tries;
    if (rc == EV_SAMPLE_CENSUS)
        return false;
    if (rc == EV_SAMPLE_OOM) {
        cy->oom = true;
        return true;
    }
    st->path = MC_EVICT_SELECTIVE;
    st->sampled = true;
    st->census = o.visited;
    st->evictable = o.base;
    st->eligible = o.low; /* a lower bound: those at or below the guess */
    st->lower = ev_count_of(o.base, lower);
    st->primary = o.ideal; /* found >= k > ideal plain ones: min(ideal, plain) is ideal */
    cy->soft_later = m->cfg.allow_evict_soft_pinned_objects;
    if (ev->opts.after_census)
        ev->opts.after_census(m, ev->opts.arg);
    if (rc == EV_SAMPLE_NONE)
        return true;
    st->k = o.k;
    if (!ev_sample_frontier(m, cy->now, &ev->plain, &ev->parts[0], ev->gens, o.cut, o.k - o.less)) {
        ev->plain.n = 0; /* out of memory there: scan every shard for the frontier */
        materialize(cy, EV_PLAIN_FRONTIER, o.cut, (int64_t)(o.k - o.less), NULL);
    }
    if (ev->plain.n < st->primary) { /* churn between the scans: the frontier is short */
        st->path = MC_EVICT_FULL_FALLBACK;
        ev->plain.n = 0;
        materialize(cy, EV_PLAIN_ALL, 0, 0, NULL);
    } else {
        cy->frontier = true;
        cy->cutoff = o.cut;
    }
    st->materialized = ev->plain.n;
    return true;
}

/* The sampled census left the soft-pinned candidates for when they are needed: one scan of
 * every entry for them, now. */
static void collect_soft(struct ev_cycle *cy)
{
    struct ev_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.m = cy->m;
    sc.now = cy->now;
    sc.collect_soft = true;
    sc.filter = EV_PLAIN_NONE;
    sc.lease_max = sc.skip_above = UINT64_MAX;
    sc.parts = cy->ev->parts;
    cy->soft_later = false;
    ev_scan_run(&sc, cy->nthreads);
    if (ev_parts_oom(sc.parts, cy->nthreads) ||
        !ev_merge_cands(&cy->ev->soft, sc.parts, cy->nthreads, true))
        cy->oom = true;
    cy->st->soft_eligible = cy->ev->soft.n;
}

/* 4. first pass to the target, 5. second pass to the lower bound, then soft-pinned ones. */
static void run_passes(struct ev_cycle *cy)
{
    struct mc_evictor *ev = cy->ev;
    struct mc_evict_stats *st = cy->st;
    size_t pos = 0, spos = 0;
    uint64_t got = run_pass(cy, &ev->plain, &pos, st->primary, false);
    if (got < st->lower)
        got += run_pass(cy, &ev->plain, &pos, st->lower - got, false);
    if (got < st->lower && cy->m->cfg.allow_evict_soft_pinned_objects) {
        if (cy->soft_later)
            collect_soft(cy);
        run_pass(cy, &ev->soft, &spos, st->lower - got, true);
    }
}

static void run_cycle(struct ev_cycle *cy, double target, double lower)
{
    struct mc_master *m = cy->m;
    struct mc_evictor *ev = cy->ev;
    struct mc_evict_stats *st = cy->st;
    bool allow_soft = m->cfg.allow_evict_soft_pinned_objects;
    bool bypass = ev->opts.force_full || target >= EV_BYPASS_RATIO;
    ev->leases.n = ev->plain.n = ev->soft.n = 0;
    int64_t nkeys = atomic_load_explicit(&m->c.key_count, memory_order_relaxed);
    uint32_t smin =
        ev->opts.sample_min_objects ? ev->opts.sample_min_objects : EV_SAMPLE_MIN_OBJECTS;
    if (!bypass && nkeys >= (int64_t)smin && run_sampled(cy, target, lower, (uint64_t)nkeys)) {
        if (!atomic_load_explicit(&cy->oom, memory_order_relaxed) && st->evictable)
            run_passes(cy);
        return;
    }
    /* the sampled census's low deadlines and records, if it ran and gave up */
    ev->leases.n = ev->plain.n = 0;
    if (!bypass) {
        /* merge_u64 adopts worker 0's deadlines: give the adopted buffer back so that one
         * large buffer is reused cycle after cycle (not a second one grown from scratch,
         * page faults and doubling copies included), and size it once for a lone worker. */
        struct ev_u64v *w0 = &ev->parts[0].leases;
        if (ev->leases.cap > w0->cap) {
            struct ev_u64v t = *w0;
            *w0 = ev->leases;
            ev->leases = t;
        }
        int64_t keys = atomic_load_explicit(&m->c.key_count, memory_order_relaxed);
        if (cy->nthreads == 1 && keys > 0)
            (void)ev_u64v_reserve(w0, (size_t)keys + (size_t)keys / 16);
    } else {
        /* The same for the candidates the full path's census materializes (24 bytes each):
         * grown by doubling from nothing they cost the first cycle a copy of every step and
         * twice the page faults. */
        struct ev_candv *w0 = &ev->parts[0].plain;
        if (ev->plain.cap > w0->cap) {
            struct ev_candv t = *w0;
            *w0 = ev->plain;
            ev->plain = t;
        }
        int64_t keys = atomic_load_explicit(&m->c.key_count, memory_order_relaxed);
        if (cy->nthreads == 1 && keys > 0)
            (void)ev_candv_reserve(w0, (size_t)keys + (size_t)keys / 16);
    }

    /* 1. census: counts, plain deadlines (selective) or plain candidates (bypass), soft ones. */
    struct ev_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.m = m;
    sc.now = cy->now;
    sc.count = true;
    sc.collect_lease = !bypass;
    sc.collect_soft = allow_soft;
    sc.filter = bypass ? EV_PLAIN_ALL : EV_PLAIN_NONE;
    sc.lease_max = sc.skip_above = UINT64_MAX;
    sc.parts = ev->parts;
    ev_scan_run(&sc, cy->nthreads);
    uint64_t base = 0, nplain = 0;
    for (unsigned i = 0; i < cy->nthreads; i++) {
        st->census += sc.parts[i].census;
        base += sc.parts[i].base;
        nplain += sc.parts[i].nplain;
        st->soft_eligible += sc.parts[i].nsoft;
    }
    st->evictable = base;
    st->eligible = nplain;
    st->path = bypass ? MC_EVICT_FULL_BYPASS : MC_EVICT_SELECTIVE;
    if (ev_parts_oom(sc.parts, cy->nthreads) ||
        (!bypass && !ev_merge_u64(&ev->leases, sc.parts, cy->nthreads)) ||
        (bypass && !ev_merge_cands(&ev->plain, sc.parts, cy->nthreads, false)) ||
        !ev_merge_cands(&ev->soft, sc.parts, cy->nthreads, true)) {
        cy->oom = true;
        return;
    }
    if (ev->opts.after_census)
        ev->opts.after_census(m, ev->opts.arg);
    if (base == 0)
        return;

    /* 2. counts from the evictable population. */
    uint64_t ideal = ev_count_of(base, target);
    st->lower = ev_count_of(base, lower);
    st->primary = ideal < nplain ? ideal : nplain;

    /* 3. materialization. */
    if (!bypass && st->primary > 0) {
        uint64_t reserve = ceil_div(st->primary, 10);
        if (reserve < m->cfg.eviction_reserve_min)
            reserve = m->cfg.eviction_reserve_min;
        uint64_t k = st->primary + reserve < nplain ? st->primary + reserve : nplain;
        uint64_t flimit = ceil_div(nplain, 4);
        if (flimit < m->cfg.eviction_frontier_min)
            flimit = m->cfg.eviction_frontier_min;
        uint64_t cut;
        size_t less;
        if (k > flimit) {
            st->path = MC_EVICT_FULL_BYPASS;
            materialize(cy, EV_PLAIN_ALL, 0, 0, NULL);
        } else if (!ev_select_kth(ev->leases.v, ev->leases.n, k, &cut, &less, &ev->scratch,
                                  ev->hist)) {
            st->path = MC_EVICT_FULL_FALLBACK;
            materialize(cy, EV_PLAIN_ALL, 0, 0, NULL);
        } else {
            st->k = k;
            materialize(cy, EV_PLAIN_FRONTIER, cut, (int64_t)(k - less), NULL);
            if (ev->plain.n < st->primary) { /* churn between the scans: the frontier is short */
                st->path = MC_EVICT_FULL_FALLBACK;
                ev->plain.n = 0;
                materialize(cy, EV_PLAIN_ALL, 0, 0, NULL);
            } else {
                cy->frontier = true;
                cy->cutoff = cut;
            }
        }
    }
    st->materialized = ev->plain.n;
    run_passes(cy);
}

int mc_master_batch_evict(struct mc_master *m, double target_ratio, double lower_ratio,
                          struct mc_evict_stats *out)
{
    if (!m || !m->evictor || !(target_ratio >= 0.0 && target_ratio <= 1.0) ||
        !(lower_ratio >= 0.0 && lower_ratio <= 1.0))
        return MC_ERR_INVALID_PARAMS;
    if (lower_ratio > target_ratio)
        lower_ratio = target_ratio;
    struct mc_evictor *ev = m->evictor;
    struct mc_evict_stats st;
    memset(&st, 0, sizeof(st));
    pthread_mutex_lock(&ev->cycle_lock);
    uint64_t t0 = mc_now_ns();
    int64_t keys = atomic_load_explicit(&m->c.key_count, memory_order_relaxed);
    uint32_t par_min =
        ev->opts.parallel_min_objects ? ev->opts.parallel_min_objects : EV_PARALLEL_MIN_OBJECTS;
    struct ev_cycle cy = {
        .m = m,
        .ev = ev,
        .st = &st,
        .now = mc_master_now_ms(m),
        .nthreads = keys >= (int64_t)par_min ? ev->nthreads : 1,
    };
    for (unsigned i = 0; i < MC_NSHARDS; i++)
        ev->fwd[i].len = ev->fwd[i].top = 0;
    mc_obj_ev_evict_cycle_begin(m);
    run_cycle(&cy, target_ratio, lower_ratio);
    st.duration_ns = mc_now_ns() - t0;
    if (atomic_load(&cy.oom))
        mc_warn("eviction", "cycle cut short: out of memory", "evicted=%llu",
                (unsigned long long)st.evicted);
    account(m, ev, &st);
    const struct mc_obj_cycle_ev cev = {.victim_freq_sum = cy.victim_freq, .evicted = st.evicted};
    mc_obj_ev_evict_cycle_end(m, &cev);
    if (st.duration_ns > 100ull * 1000 * 1000)
        mc_info("eviction", "slow cycle", "path=%s census=%llu evicted=%llu ms=%.1f",
                mc_evict_path_name(st.path), (unsigned long long)st.census,
                (unsigned long long)st.evicted, (double)st.duration_ns / 1e6);
    pthread_mutex_unlock(&ev->cycle_lock);
    mc_obj_ev_unlocked(m); /* answer the holders' polls the cycle's offloads woke */
    if (out)
        *out = st;
    return MC_OK;
}

/* ---- the loop ------------------------------------------------------------------------------- */

int mc_eviction_tick(struct mc_master *m)
{
    if (!m || !m->evictor)
        return 0;
    double used = mc_segments_used_ratio(m->segs);
    double hw = m->cfg.eviction_high_watermark_ratio, r = m->cfg.eviction_ratio;
    bool need = atomic_load_explicit(&m->need_eviction, memory_order_relaxed);
    if (!(used > hw || (need && r > 0)))
        return 0;
    double target = used - hw + r > r ? used - hw + r : r;
    if (target > 1.0)
        target = 1.0;
    double lower = used - hw > target / 2 ? used - hw : target / 2;
    struct mc_evict_stats st;
    /* A failed PutStart asks for one cycle, not for eviction until something goes: a request
     * left armed while every candidate is leased would later evict objects Put long after the
     * failure, at any usage. A PutStart that fails again (a client retrying) asks again. */
    if (need)
        atomic_store_explicit(&m->need_eviction, false, memory_order_relaxed);
    if (mc_master_batch_evict(m, target, lower, &st) != MC_OK)
        return 0;
    return st.evicted > (uint64_t)INT32_MAX ? INT32_MAX : (int)st.evicted;
}

void mc_master_evict_set_test_opts(struct mc_master *m, const struct mc_evict_test_opts *opts)
{
    if (!m || !m->evictor)
        return;
    pthread_mutex_lock(&m->evictor->cycle_lock);
    if (opts)
        m->evictor->opts = *opts;
    else
        memset(&m->evictor->opts, 0, sizeof(m->evictor->opts));
    pthread_mutex_unlock(&m->evictor->cycle_lock);
}

/* ---- lifecycle and metrics ------------------------------------------------------------------ */

#define RD_COUNTER(fn, field)                                                                      \
    static double fn(void *arg)                                                                    \
    {                                                                                              \
        struct mc_master *m = arg;                                                                 \
        return (double)atomic_load_explicit(&m->c.field, memory_order_relaxed);                    \
    }
RD_COUNTER(rd_successful, successful_evictions)
RD_COUNTER(rd_attempted, attempted_evictions)
RD_COUNTER(rd_keys, evicted_key_count)
RD_COUNTER(rd_bytes, evicted_size_bytes)

static void register_metrics(struct mc_master *m, struct mc_evictor *ev)
{
    struct mc_metrics *reg = m->metrics;
    if (!reg)
        return;
    mc_metrics_counter_fn(reg, "master_successful_evictions_total",
                          "eviction cycles that evicted something", NULL, rd_successful, m);
    mc_metrics_counter_fn(reg, "master_attempted_evictions_total",
                          "eviction cycles that found candidates but evicted nothing", NULL,
                          rd_attempted, m);
    mc_metrics_counter_fn(reg, "master_evicted_key_count", "objects evicted from DRAM", NULL,
                          rd_keys, m);
    mc_metrics_counter_fn(reg, "master_evicted_size_bytes", "DRAM bytes released by eviction", NULL,
                          rd_bytes, m);
    static const char *const path_help = "eviction cycles by candidate path";
    for (int p = 0; p < 3; p++)
        ev->cycles[p] = mc_metrics_counter(reg, "master_eviction_cycles_total", path_help,
                                           MC_LABELS("path", mc_evict_path_name(p)));
    ev->materialized = mc_metrics_counter(
        reg, "master_eviction_materialized_total",
        "candidate identities built by eviction cycles (refills included)", NULL);
    ev->refilled = mc_metrics_counter(reg, "master_eviction_refilled_total",
                                      "candidate identities built by refill scans", NULL);
    double bounds[14];
    mc_metrics_exp_buckets(bounds, 14, 0.125, 2.0); /* 0.125 ms .. 1 s */
    ev->duration = mc_metrics_histogram(reg, "master_eviction_duration_ms",
                                        "wall time of one eviction cycle", NULL, bounds, 14);
}

int mc_eviction_init(struct mc_master *m)
{
    struct mc_evictor *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return -1;
    pthread_mutex_init(&ev->cycle_lock, NULL);
    unsigned n = m->cfg.eviction_threads;
    if (n == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus > 1 ? (unsigned)(cpus - 1) : 1;
    }
    ev->nthreads = n > EV_MAX_THREADS ? EV_MAX_THREADS : n;
    ev->parts = calloc(ev->nthreads, sizeof(*ev->parts));
    ev->workers = calloc(ev->nthreads, sizeof(*ev->workers));
    ev->hist = malloc(EV_HIST_SIZE * sizeof(*ev->hist));
    m->evictor = ev;
    if (!ev->parts || !ev->workers || !ev->hist) {
        mc_eviction_destroy(m);
        return -1;
    }
    register_metrics(m, ev);
    return 0;
}

void mc_eviction_destroy(struct mc_master *m)
{
    struct mc_evictor *ev = m->evictor;
    if (!ev)
        return;
    for (unsigned i = 0; ev->parts && i < ev->nthreads; i++) {
        free(ev->parts[i].leases.v);
        free(ev->parts[i].plain.v);
        free(ev->parts[i].soft.v);
    }
    for (unsigned i = 0; ev->workers && i < ev->nthreads; i++) {
        free(ev->workers[i].objs);
        free(ev->workers[i].members);
        free(ev->workers[i].ub.objs);
        free(ev->workers[i].map);
        ev_unlink_hashes_free(&ev->workers[i].uh);
        free(ev->workers[i].moved.v);
        ev_held_free(&ev->workers[i].held);
        free(ev->workers[i].shard_cands.v);
    }
    for (unsigned i = 0; i < MC_NSHARDS; i++) {
        free(ev->fwd[i].v);
    }
    free(ev->parts);
    free(ev->workers);
    free(ev->leases.v);
    free(ev->scratch.v);
    free(ev->sample.v);
    free(ev->plain.v);
    free(ev->soft.v);
    free(ev->ridx);
    free(ev->hist);
    pthread_mutex_destroy(&ev->cycle_lock);
    free(ev);
    m->evictor = NULL;
}
