/*
 * eviction_census.c - the scans of a BatchEvict cycle over the object table, the small
 * parallel runner they use, and the k-th-oldest selection.
 *
 * A scan visits every shard once, read-locked for just that shard, streaming its dense entry
 * array ({atomic lease, object pointer | MC_ENT_* bits}, 16 bytes each): the census only counts
 * and copies lease deadlines, touching an object only when the entry says it is soft-pinned
 * (to check the deadline). Materialization scans touch an object only when its entry passes the
 * predicate and the filter (at or below the cutoff, say), to copy its version.
 * The census of the selective path also writes each shard's per-block deadline minima
 * (ev_blocks), which let the frontier scan skip blocks that hold nothing at or below the cutoff.
 * Workers take shards from an atomic cursor in chunks, each writing to its own ev_part.
 *
 * Selection (ev_select_kth) is a radix select over [min, max] of the values with 2^16 buckets
 * per round: one counting pass over all values, then rounds over the (small) bucket that holds
 * the k-th value. Deadlines are milliseconds, so two or three rounds settle any table.
 */
#include <stddef.h>
#include <string.h>

#include "master/eviction_internal.h"

#define SHARDS_PER_GRAB 8u
#define EV_PREFETCH 8u

bool ev_reserve(void **v, size_t *cap, size_t want, size_t elem)
{
    size_t ncap = *cap ? *cap : 64;
    while (ncap < want)
        ncap *= 2;
    void *nv = realloc(*v, ncap * elem);
    if (!nv)
        return false;
    *v = nv;
    *cap = ncap;
    return true;
}

/* ---- parallel runner ------------------------------------------------------------------------ */

struct ev_thread_arg {
    void (*fn)(void *, unsigned);
    void *arg;
    unsigned worker;
};

static void *ev_thread_main(void *p)
{
    struct ev_thread_arg *a = p;
    a->fn(a->arg, a->worker);
    return NULL;
}

void ev_parallel(unsigned nthreads, void (*fn)(void *arg, unsigned worker), void *arg)
{
    pthread_t th[EV_MAX_THREADS];
    struct ev_thread_arg ta[EV_MAX_THREADS];
    unsigned started = 0;
    if (nthreads > EV_MAX_THREADS)
        nthreads = EV_MAX_THREADS;
    for (unsigned i = 1; i < nthreads; i++) {
        ta[started] = (struct ev_thread_arg){.fn = fn, .arg = arg, .worker = i};
        if (pthread_create(&th[started], NULL, ev_thread_main, &ta[started]) != 0)
            break;
        started++;
    }
    fn(arg, 0);
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

/* ---- scans ---------------------------------------------------------------------------------- */

static void make_cand(struct ev_cand *c, struct mc_object *o, uint32_t shard, uint32_t ent,
                      uint64_t lease, bool soft)
{
    c->lease = lease;
    c->version = o->version;
    c->ent = ent;
    c->shard = (uint16_t)shard;
    c->soft = soft;
}

static bool want_plain(struct ev_scan *sc, uint64_t lease, const struct mc_object *o)
{
    switch (sc->filter) {
    case EV_PLAIN_ALL:
        return true;
    case EV_PLAIN_FRONTIER:
        if (lease < sc->cutoff)
            return true;
        return lease == sc->cutoff &&
               atomic_fetch_sub_explicit(&sc->eq_quota, 1, memory_order_relaxed) > 0;
    case EV_PLAIN_REFILL:
        return lease >= sc->cutoff && !ev_seen_has(sc->seen, o->version);
    case EV_PLAIN_NONE:
        break;
    }
    return false;
}

/* The census's block minima for shard s: storage for its n entries, or NULL (no skipping). */
static uint64_t *blocks_for_census(struct ev_blocks *bk, uint32_t n)
{
    bk->valid = false;
    uint32_t want = (n + EV_BLOCK - 1) >> EV_BLOCK_SHIFT;
    if (want > bk->cap) {
        uint64_t *nv = realloc(bk->min, (size_t)want * sizeof(*nv));
        if (!nv)
            return NULL;
        bk->min = nv;
        bk->cap = want;
    }
    return bk->min;
}

static void scan_shard(struct ev_scan *sc, struct mc_shard *s, struct ev_part *p)
{
    const uint64_t now = sc->now;
    const bool prefetch = sc->filter == EV_PLAIN_ALL;
    mc_shard_rdlock(s);
    uint32_t n = s->n;
    if (sc->count)
        p->census += n;
    struct ev_blocks *bk = sc->blocks ? &sc->blocks[s->index] : NULL;
    uint64_t *track = NULL;      /* census: write the block minima here */
    const uint64_t *skip = NULL; /* frontier: skip blocks whose minimum is past the cutoff */
    if (bk && sc->collect_lease)
        track = blocks_for_census(bk, n);
    else if (bk && sc->filter == EV_PLAIN_FRONTIER && bk->valid && bk->gen == s->gen)
        skip = bk->min;
    for (uint32_t base = 0, c = 0; base < n && !p->oom; base += MC_ENT_CHUNK, c++) {
        struct mc_obj_ent *chunk = s->chunks[c];
        uint32_t lim = n - base < MC_ENT_CHUNK ? n - base : MC_ENT_CHUNK;
        for (uint32_t b0 = 0; b0 < lim && !p->oom; b0 += EV_BLOCK) {
            uint32_t bl = lim - b0 < EV_BLOCK ? lim : b0 + EV_BLOCK;
            if (track) {
                uint64_t bm = UINT64_MAX;
                for (uint32_t j = b0; j < bl; j++) {
                    uint64_t l = atomic_load_explicit(&chunk[j].lease_ms, memory_order_relaxed);
                    bm = l < bm ? l : bm;
                }
                track[(base + b0) >> EV_BLOCK_SHIFT] = bm;
            } else if (skip && skip[(base + b0) >> EV_BLOCK_SHIFT] > sc->cutoff) {
                continue;
            }
            for (uint32_t j = b0; j < bl; j++) {
                struct mc_obj_ent *e = &chunk[j];
                if (prefetch && j + EV_PREFETCH < lim) {
                    /* full materialization touches most objects: fetch ahead (header, key) */
                    const char *ahead = (const char *)mc_ent_obj(&chunk[j + EV_PREFETCH]);
                    __builtin_prefetch(ahead);
                    __builtin_prefetch(ahead + 64);
                }
                unsigned bits = mc_ent_bits(e);
                if (!(bits & MC_ENT_EVICTABLE) || (bits & MC_ENT_HARD_PIN))
                    continue; /* EV_OUT without touching the lease */
                uint64_t lease = atomic_load_explicit(&e->lease_ms, memory_order_relaxed);
                struct mc_object *o = (bits & MC_ENT_SOFT_PIN) ? mc_ent_obj(e) : NULL;
                enum ev_class cls = ev_classify(bits, lease, now, o);
                if (sc->count)
                    p->base++;
                if (cls == EV_PLAIN) {
                    if (sc->count)
                        p->nplain++;
                    if (sc->collect_lease && !ev_u64v_push(&p->leases, lease)) {
                        p->oom = true;
                        break;
                    }
                    if (sc->filter == EV_PLAIN_NONE)
                        continue;
                    o = mc_ent_obj(e);
                    if (!want_plain(sc, lease, o))
                        continue;
                    struct ev_cand *cd = ev_candv_push(&p->plain);
                    if (!cd) {
                        p->oom = true;
                        break;
                    }
                    make_cand(cd, o, s->index, base + j, lease, false);
                } else if (cls == EV_SOFT && sc->collect_soft) {
                    if (sc->count)
                        p->nsoft++;
                    struct ev_cand *cd = ev_candv_push(&p->soft);
                    if (!cd) {
                        p->oom = true;
                        break;
                    }
                    make_cand(cd, o, s->index, base + j, lease, true);
                }
            }
        }
    }
    if (track && !p->oom) {
        bk->gen = s->gen;
        bk->valid = true;
    }
    mc_shard_unlock(s);
}

static void scan_worker(void *arg, unsigned worker)
{
    struct ev_scan *sc = arg;
    struct ev_part *p = &sc->parts[worker];
    for (;;) {
        uint32_t first =
            atomic_fetch_add_explicit(&sc->next_shard, SHARDS_PER_GRAB, memory_order_relaxed);
        if (first >= MC_NSHARDS)
            break;
        for (uint32_t i = first; i < first + SHARDS_PER_GRAB && i < MC_NSHARDS; i++)
            scan_shard(sc, &sc->m->shards[i], p);
    }
}

void ev_scan_run(struct ev_scan *sc, unsigned nthreads)
{
    atomic_store_explicit(&sc->next_shard, 0, memory_order_relaxed);
    for (unsigned i = 0; i < nthreads; i++) {
        struct ev_part *p = &sc->parts[i];
        p->leases.n = p->plain.n = p->soft.n = 0;
        p->census = p->base = p->nplain = p->nsoft = 0;
        p->oom = false;
    }
    if (nthreads <= 1)
        scan_worker(sc, 0);
    else
        ev_parallel(nthreads, scan_worker, sc);
}

/* ---- k-th selection ------------------------------------------------------------------------- */

/* Inlined into each caller below with a constant stride, so the counting passes stay as tight
 * as a plain array's. */
static inline __attribute__((always_inline)) bool select_kth(const uint64_t *v, size_t stride,
                                                             size_t n, size_t k, uint64_t *kth,
                                                             size_t *less, struct ev_u64v *scratch,
                                                             uint32_t *hist)
{
    const uint64_t *cur = v;
    size_t cn = n, below = 0, st = stride; /* st: the stride of cur (1 once in scratch) */
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = v[i * stride];
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    for (;;) {
        if (lo == hi) {
            *kth = lo;
            *less = below;
            return true;
        }
        uint64_t range = hi - lo;
        int width = 64 - __builtin_clzll(range);
        int shift = width > EV_HIST_BITS ? width - EV_HIST_BITS : 0;
        size_t nb = (size_t)(range >> shift) + 1;
        memset(hist, 0, nb * sizeof(*hist));
        for (size_t i = 0; i < cn; i++)
            hist[(cur[i * st] - lo) >> shift]++;
        size_t b = 0, cum = 0;
        while (cum + hist[b] < k)
            cum += hist[b++];
        below += cum;
        k -= cum;
        uint64_t blo = lo + ((uint64_t)b << shift);
        if (shift == 0) {
            *kth = blo;
            *less = below;
            return true;
        }
        /* Keep only bucket b's values (in place once they already live in scratch). */
        size_t cnt = hist[b];
        if (cur != scratch->v && !ev_u64v_reserve(scratch, cnt))
            return false;
        uint64_t *out = scratch->v;
        size_t w = 0;
        uint64_t nlo = UINT64_MAX, nhi = 0;
        for (size_t i = 0; i < cn; i++) {
            uint64_t x = cur[i * st];
            if (((x - lo) >> shift) != b)
                continue;
            out[w++] = x;
            nlo = x < nlo ? x : nlo;
            nhi = x > nhi ? x : nhi;
        }
        cur = out;
        st = 1;
        cn = w;
        lo = nlo;
        hi = nhi;
    }
}

bool ev_select_kth(const uint64_t *v, size_t n, size_t k, uint64_t *kth, size_t *less,
                   struct ev_u64v *scratch, uint32_t *hist)
{
    return select_kth(v, 1, n, k, kth, less, scratch, hist);
}

bool ev_select_kth_cand(const struct ev_cand *c, size_t n, size_t k, uint64_t *kth, size_t *less,
                        struct ev_u64v *scratch, uint32_t *hist)
{
    _Static_assert(offsetof(struct ev_cand, lease) == 0 && sizeof(struct ev_cand) == 24,
                   "ev_cand: the lease first, 24 bytes");
    return select_kth(&c->lease, sizeof(*c) / sizeof(uint64_t), n, k, kth, less, scratch, hist);
}

/* ---- seen set ------------------------------------------------------------------------------- */

static inline size_t seen_home(uint64_t version, size_t mask)
{
    return (size_t)((version * 0x9e3779b97f4a7c15ull) >> 17) & mask;
}

bool ev_seen_build(struct ev_seen *s, const struct ev_cand *c, size_t n)
{
    size_t cap = 64;
    while (cap < 2 * n)
        cap *= 2;
    s->slots = calloc(cap, sizeof(*s->slots));
    if (!s->slots)
        return false;
    s->mask = cap - 1;
    for (size_t i = 0; i < n; i++) {
        size_t j = seen_home(c[i].version, s->mask);
        while (s->slots[j] && s->slots[j] != c[i].version)
            j = (j + 1) & s->mask;
        s->slots[j] = c[i].version;
    }
    return true;
}

bool ev_seen_has(const struct ev_seen *s, uint64_t version)
{
    for (size_t j = seen_home(version, s->mask);; j = (j + 1) & s->mask) {
        if (s->slots[j] == version)
            return true;
        if (!s->slots[j])
            return false;
    }
}

void ev_seen_free(struct ev_seen *s)
{
    free(s->slots);
    s->slots = NULL;
}
