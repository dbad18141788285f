/*
 * eviction.c - one BatchEvict cycle (mc_master_batch_evict): counts, path choice, the passes and
 * the eviction rounds. The algorithm is described in eviction.h; the scans are in
 * eviction_census.c; the loop's tick, the metrics and the lifecycle in eviction_life.c.
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
 * materialized yet. A cycle whose candidates would be every eligible object (a large target,
 * or a reserve past the frontier's limit) on a table of EV_CUT_MIN_OBJECTS or more evicts by cut
 * instead: its census collects only the plain deadlines, the primary-th lowest is the cut, and
 * each shard's round walks its entries under the write lock and evicts the plain objects below
 * the cut (and those at it, up to a quota) where they lie, with no candidate built, selected or
 * found again; a slice is then a range of shards. Objects leased or removed between the census
 * and the walk leave it short, and a pass over every eligible object takes the rest, oldest
 * first. Large rounds spread their shards over the eviction threads; the objects a
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
#include "master/eviction_sample.h"
#include "master/eviction_state.h"
#include "master/freelist.h"
#include "master/object_events.h"
#include "mooncake/errors.h"

#define EV_BYPASS_RATIO (10.0 / 44.0) /* 1.1 * t > 1/4: the reserve outgrows the frontier */
#define EV_PARALLEL_MIN_OBJECTS 65536u
#define EV_PARALLEL_MIN_ROUND 8192u
#define EV_HOLD_MIN_ROUND 8192u      /* rounds this large release their buffers in handle order */
#define EV_SAMPLE_MIN_OBJECTS 65536u /* smaller tables take the census */
#define EV_CUT_MIN_OBJECTS 65536u    /* smaller tables materialize every candidate instead */
#define EV_CUT_HOLD_MAX 4096u        /* victims by cut per shard write-lock hold */
#define EV_BULK_UNLINK_MIN 8u        /* erased objects in one shard for a bulk unlink */
#define EV_BULK_UNLINK_SHARE 4u      /* ... and at least 1/4 of the shard */
#define EV_TAIL_AHEAD 16u            /* tail entries (and objects) a shard's round fetches early */

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
    uint32_t end; /* shards [next, end) */
    /* by cut (c is NULL): plain objects with a deadline below cut are the victims, and up to
     * eq of those at cut; budget caps them (objects Put between the census and the round) */
    uint64_t cut;
    _Atomic int64_t eq, budget;
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

static void evict_resolved(struct ev_round *r, struct mc_shard *s, struct mc_object **objs,
                           size_t cnt, uint32_t ntail, struct ev_worker *w, struct mc_freelist *fl);

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
    evict_resolved(r, s, w->objs, cnt, ntail, w, fl);
}

/* Victims of a round by cut in s: every entry of s is looked at (blocks whose lease floor is
 * above the cut skipped), and each plain object under the cut is evicted where it lies. One
 * write-lock hold takes at most hold_max victims (a shard of a very large table would otherwise
 * be held for its whole walk): then they are evicted and unlinked, the lock dropped, and the
 * walk starts over (the victims' blocks get exact floors as they are unlinked, so the blocks
 * walked before are skipped again, except where an entry moved in or a candidate stayed). */
static bool cut_hold(struct ev_round *r, struct mc_shard *s, struct ev_worker *w,
                     struct mc_freelist *fl, uint32_t hold_max)
{
    const uint64_t now = r->cy->now, cut = r->cut;
    struct ev_fwd *f = &r->cy->ev->fwd[s->index];
    mc_shard_wrlock(s);
    uint32_t n = s->n;
    if (!f->top)
        f->top = n ? n : 1;
    size_t want = n < hold_max ? n : hold_max;
    if (want > w->objs_cap &&
        !ev_reserve((void **)&w->objs, &w->objs_cap, want, sizeof(*w->objs))) {
        r->cy->oom = true;
        mc_shard_unlock(s);
        return false;
    }
    size_t cnt = 0;
    bool more = false; /* stopped at hold_max */
    for (uint32_t base = 0, c = 0; base < n; base += MC_ENT_CHUNK, c++) {
        struct mc_obj_ent *chunk = s->chunks[c];
        const uint64_t *floors = (const uint64_t *)(chunk + MC_ENT_CHUNK);
        uint32_t lim = n - base < MC_ENT_CHUNK ? n - base : MC_ENT_CHUNK;
        for (uint32_t b0 = 0; b0 < lim; b0 += MC_ENT_BLOCK) {
            if (floors[b0 >> MC_ENT_BLOCK_SHIFT] > cut)
                continue; /* a floor is at most its block's lowest deadline */
            uint32_t bl = lim - b0 < MC_ENT_BLOCK ? lim : b0 + MC_ENT_BLOCK;
            for (uint32_t j = b0; j < bl; j++) {
                struct mc_obj_ent *e = &chunk[j];
                uint64_t lease = atomic_load_explicit(&e->lease_ms, memory_order_relaxed);
                unsigned bits = mc_ent_bits(e);
                if (lease > cut || !(bits & MC_ENT_EVICTABLE) || (bits & MC_ENT_HARD_PIN))
                    continue;
                struct mc_object *o = mc_ent_obj(e);
                if (ev_classify(bits, lease, now, (bits & MC_ENT_SOFT_PIN) ? o : NULL) != EV_PLAIN)
                    continue;
                if (cnt == hold_max) {
                    more = true;
                    goto walked;
                }
                if (lease == cut && atomic_fetch_sub_explicit(&r->eq, 1, memory_order_relaxed) <= 0)
                    continue;
                __builtin_prefetch(o); /* read by the eviction below, in this order */
                w->objs[cnt++] = o;
            }
        }
    }
walked:;
    /* the round's budget: this hold's victims are taken from it in one step */
    int64_t left = atomic_fetch_sub_explicit(&r->budget, (int64_t)cnt, memory_order_relaxed);
    if (left < (int64_t)cnt) {
        cnt = left > 0 ? (size_t)left : 0;
        more = false;
    }
    uint32_t ntail = cnt < EV_TAIL_AHEAD ? (uint32_t)cnt : EV_TAIL_AHEAD;
    ntail = ntail < n ? ntail : n;
    for (uint32_t j = 1; j <= ntail; j++)
        __builtin_prefetch(mc_shard_ent(s, n - j));
    evict_resolved(r, s, w->objs, cnt, ntail, w, fl);
    return more;
}

/* The holds of s: another while the last stopped at hold_max and evicted something (victims
 * that stay, a group held by a member's lease, come back to every walk; once they fill a hold
 * the rest of the shard is left to the cycle's pass over every eligible object). */
static void evict_shard_cut(struct ev_round *r, struct mc_shard *s, struct ev_worker *w,
                            struct mc_freelist *fl)
{
    const struct mc_evict_test_opts *o = &r->cy->ev->opts;
    uint32_t hold_max = o->cut_hold_max ? o->cut_hold_max : EV_CUT_HOLD_MAX;
    for (;;) {
        uint64_t before = w->evicted;
        bool more = cut_hold(r, s, w, fl, hold_max);
        if (!more || w->evicted == before ||
            atomic_load_explicit(&r->cy->oom, memory_order_relaxed) ||
            atomic_load_explicit(&r->budget, memory_order_relaxed) <= 0)
            break;
    }
}

/* Evicts the resolved objects[0..cnt) of s (write-locked; NULL: gone), unlinks them, unlocks. */
static void evict_resolved(struct ev_round *r, struct mc_shard *s, struct mc_object **objs,
                           size_t cnt, uint32_t ntail, struct ev_worker *w, struct mc_freelist *fl)
{
    struct ev_fwd *f = &r->cy->ev->fwd[s->index];
    for (uint32_t j = 1; j <= ntail; j++) {
        const char *t = (const char *)mc_ent_obj(mc_shard_ent(s, s->n - j));
        __builtin_prefetch(t);
        __builtin_prefetch(t + 64);
    }
    for (size_t i = 0; i < cnt; i++) {
        if (i + 4 < cnt && objs[i + 4])
            __builtin_prefetch((const char *)objs[i + 4] + 64);
        struct mc_object *o = objs[i];
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
        if (si >= r->end)
            break;
        if (!r->c) {
            if (atomic_load_explicit(&r->budget, memory_order_relaxed) > 0)
                evict_shard_cut(r, &r->cy->m->shards[si], w, &fl);
            continue;
        }
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

/* Runs round r over its shards with the eviction threads (d: the objects it wants); returns
 * the objects evicted. */
static uint64_t run_round(struct ev_cycle *cy, struct ev_round *r, size_t d)
{
    struct mc_evictor *ev = cy->ev;
    unsigned nw =
        d >= EV_PARALLEL_MIN_ROUND || cy->ev->opts.parallel_min_objects ? cy->nthreads : 1;
    for (unsigned i = 0; i < nw; i++)
        ev->workers[i].evicted = ev->workers[i].bytes = ev->workers[i].walks =
            ev->workers[i].victim_freq = 0;
    if (nw <= 1)
        round_worker(r, 0);
    else
        ev_parallel(nw, round_worker, r);
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
                         .hold = d >= EV_HOLD_MIN_ROUND || cy->ev->opts.parallel_min_objects,
                         .end = MC_NSHARDS};
    atomic_init(&r.next, 0);
    return run_round(cy, &r, d);
}

/* Evicts by cut: the plain objects with a deadline below cut, and eq of those at it, want at
 * most, walking the shards in slices of about the slice size. Returns the objects evicted. */
static uint64_t evict_by_cut(struct ev_cycle *cy, uint64_t cut, uint64_t eq, uint64_t want)
{
    struct ev_round r = {.cy = cy, .cut = cut, .hold = true};
    atomic_init(&r.eq, (int64_t)eq);
    atomic_init(&r.budget, want > INT64_MAX ? INT64_MAX : (int64_t)want);
    size_t slice = cy->ev->opts.slice_objects ? cy->ev->opts.slice_objects : MC_EVICT_SLICE;
    uint64_t step = want > slice ? (uint64_t)MC_NSHARDS * slice / want : MC_NSHARDS;
    step = step ? step : 1;
    uint64_t got = 0;
    for (uint32_t s0 = 0; s0 < MC_NSHARDS; s0 += (uint32_t)step) {
        if (atomic_load_explicit(&cy->oom, memory_order_relaxed) ||
            atomic_load_explicit(&r.budget, memory_order_relaxed) <= 0)
            break;
        if (cy->st->slices++ > 0)
            mc_obj_ev_unlocked(cy->m); /* the previous slice's offloads go out now */
        atomic_store_explicit(&r.next, s0, memory_order_relaxed);
        r.end = s0 + step < MC_NSHARDS ? s0 + (uint32_t)step : MC_NSHARDS;
        got += run_round(cy, &r, (size_t)(want / MC_NSHARDS * (r.end - s0)));
    }
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

/* 4. first pass to the target, 5. second pass to the lower bound, then soft-pinned ones; got
 * objects were evicted already (by cut). */
static void run_passes(struct ev_cycle *cy, uint64_t got)
{
    struct mc_evictor *ev = cy->ev;
    struct mc_evict_stats *st = cy->st;
    size_t pos = 0, spos = 0;
    if (got < st->primary)
        got += run_pass(cy, &ev->plain, &pos, st->primary - got, false);
    if (got < st->lower)
        got += run_pass(cy, &ev->plain, &pos, st->lower - got, false);
    if (got < st->lower && cy->m->cfg.allow_evict_soft_pinned_objects) {
        if (cy->soft_later)
            collect_soft(cy);
        run_pass(cy, &ev->soft, &spos, st->lower - got, true);
    }
}

/* 3b. by cut: the primary-th lowest deadline of the census is the cut, and the victims are
 * evicted where they lie (no candidate is materialized). Objects leased, Put or held between
 * the census and the rounds leave it short: the rest comes from every eligible object, as the
 * full path takes it. */
static void run_by_cut(struct ev_cycle *cy)
{
    struct mc_evictor *ev = cy->ev;
    struct mc_evict_stats *st = cy->st;
    uint64_t cut, got = 0;
    size_t less;
    st->path = MC_EVICT_BY_CUT;
    if (ev_select_kth(ev->leases.v, ev->leases.n, st->primary, &cut, &less, &ev->scratch, ev->hist))
        got = evict_by_cut(cy, cut, st->primary - less, st->primary);
    if (got < st->primary && !atomic_load_explicit(&cy->oom, memory_order_relaxed)) {
        st->path = MC_EVICT_FULL_FALLBACK;
        for (unsigned i = 0; i < MC_NSHARDS; i++)
            ev->fwd[i].len = ev->fwd[i].top = 0; /* positions from here on are the table's own */
        materialize(cy, EV_PLAIN_ALL, 0, 0, NULL);
    }
    st->materialized = ev->plain.n;
    run_passes(cy, got);
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
            run_passes(cy, 0);
        return;
    }
    /* the sampled census's low deadlines and records, if it ran and gave up */
    ev->leases.n = ev->plain.n = 0;
    uint32_t cmin = ev->opts.cut_min_objects ? ev->opts.cut_min_objects : EV_CUT_MIN_OBJECTS;
    bool by_cut = !ev->opts.force_full && nkeys >= (int64_t)cmin;
    bool all = bypass && !by_cut; /* the census materializes every eligible object */
    if (!all) {
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

    /* 1. census: counts, plain deadlines (selective, by cut) or plain candidates (all), soft
     * ones. */
    struct ev_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.m = m;
    sc.now = cy->now;
    sc.count = true;
    sc.collect_lease = !all;
    sc.collect_soft = allow_soft;
    sc.filter = all ? EV_PLAIN_ALL : EV_PLAIN_NONE;
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
    st->path = all ? MC_EVICT_FULL_BYPASS : MC_EVICT_SELECTIVE;
    if (ev_parts_oom(sc.parts, cy->nthreads) ||
        (!all && !ev_merge_u64(&ev->leases, sc.parts, cy->nthreads)) ||
        (all && !ev_merge_cands(&ev->plain, sc.parts, cy->nthreads, false)) ||
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

    /* 3. materialization, or the cut. */
    if (!all && st->primary > 0) {
        uint64_t reserve = ceil_div(st->primary, 10);
        if (reserve < m->cfg.eviction_reserve_min)
            reserve = m->cfg.eviction_reserve_min;
        uint64_t k = st->primary + reserve < nplain ? st->primary + reserve : nplain;
        uint64_t flimit = ceil_div(nplain, 4);
        if (flimit < m->cfg.eviction_frontier_min)
            flimit = m->cfg.eviction_frontier_min;
        uint64_t cut;
        size_t less;
        if (by_cut && (bypass || k > flimit)) {
            run_by_cut(cy);
            return;
        } else if (k > flimit) {
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
    run_passes(cy, 0);
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
    ev_account(m, ev, &st);
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
