/*
 * eviction_census.c - the scans of a BatchEvict cycle over the object table, the small
 * parallel runner they use, and the k-th-oldest selection.
 *
 * A scan visits every shard once, read-locked for just that shard, streaming its dense entry
 * array ({atomic lease, object pointer | MC_ENT_* bits}, 16 bytes each): the census only counts
 * and copies lease deadlines, touching an object only when the entry says it is soft-pinned
 * (to check the deadline). Materialization scans touch an object only when its entry passes the
 * predicate and the filter (at or below the cutoff, say), to copy its version.
 * Every scan raises the lease floors (shard.h) of the blocks it visits to their exact minima;
 * the low census and the frontier scan skip blocks whose floor is past what they look for.
 * Workers take shards from an atomic cursor in chunks, each writing to its own ev_part.
 *
 * Selection (ev_select_kth) is a radix select over [min, max] of the values with 2^16 buckets
 * per round: one counting pass over all values, then rounds over the (small) bucket that holds
 * the k-th value. Deadlines are milliseconds, so two or three rounds settle any table.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "master/eviction_internal.h"

#define SHARDS_PER_GRAB 8u
#define EV_PREFETCH 24u
#define EV_BLOCKS_AHEAD 4u
#define EV_LOW_AHEAD 12u

/* A vector this large asks for transparent huge pages: a fresh master's first cycle writes a
 * candidate per object (24 MB at 1M objects), and in 4 KiB pages that was ~7,600 page faults,
 * a sixth of the cycle. Debian's default THP mode ("madvise") gives huge pages only to ranges
 * that ask; the pages already in use stay as they are. */
#define EV_HUGE_MIN ((size_t)4 << 20)
#define EV_HUGE_PAGE ((uintptr_t)2 << 20)

void ev_ask_huge(void *v, size_t bytes)
{
    if (bytes < EV_HUGE_MIN)
        return;
    uintptr_t lo = ((uintptr_t)v + EV_HUGE_PAGE - 1) & ~(EV_HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)v + bytes) & ~(EV_HUGE_PAGE - 1);
    if (hi > lo) /* advice only: a kernel without THP says EINVAL, and nothing changes */
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

bool ev_reserve(void **v, size_t *cap, size_t want, size_t elem)
{
    size_t ncap = *cap ? *cap : 64;
    while (ncap < want)
        ncap *= 2;
    void *nv = realloc(*v, ncap * elem);
    if (!nv)
        return false;
    ev_ask_huge(nv, ncap * elem);
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
    case EV_PLAIN_LOW: /* scan_shard_low's, not this scan's */
    case EV_PLAIN_NONE:
        break;
    }
    return false;
}

/* o is plain eligible at lease: pushes what the scan wants of it. false when out of memory. */
static bool scan_plain(struct ev_scan *sc, struct ev_part *p, struct mc_obj_ent *e, uint64_t lease,
                       uint32_t shard, uint32_t ent)
{
    if (sc->count)
        p->nplain++;
    if (sc->collect_lease && lease <= sc->lease_max && !ev_u64v_push(&p->leases, lease))
        return false;
    if (sc->filter == EV_PLAIN_NONE)
        return true;
    struct mc_object *o = mc_ent_obj(e);
    if (sc->filter == EV_PLAIN_FRONTIER) {
        /* decided by the deadline alone: the object's version is read at the end of the shard
         * (resolve_versions), its line fetched from now on, so the misses overlap */
        if (!want_plain(sc, lease, NULL))
            return true;
        __builtin_prefetch(o);
        struct ev_cand *cd = ev_candv_push(&p->plain);
        if (!cd)
            return false;
        *cd = (struct ev_cand){
            .lease = lease, .version = (uintptr_t)o, .ent = ent, .shard = (uint16_t)shard};
        return true;
    }
    if (!want_plain(sc, lease, o))
        return true;
    struct ev_cand *cd = ev_candv_push(&p->plain);
    if (!cd)
        return false;
    make_cand(cd, o, shard, ent, lease, false);
    return true;
}

/* The frontier candidates c[0..n) of the shard being scanned (its lock held) hold their object's
 * address in version: the version itself goes there now. */
static void resolve_versions(struct ev_cand *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        c[i].version = ((const struct mc_object *)(uintptr_t)c[i].version)->version;
}

static void scan_shard(struct ev_scan *sc, struct mc_shard *s, struct ev_part *p)
{
    const uint64_t now = sc->now;
    const bool prefetch = sc->filter == EV_PLAIN_ALL;
    const bool sparse = sc->skip_above != UINT64_MAX;
    mc_shard_rdlock(s);
    uint32_t n = s->n;
    size_t first = p->plain.n;
    if (sc->count)
        p->census += n;
    if (sc->gens)
        sc->gens[s->index] = s->gen;
    for (uint32_t base = 0, c = 0; base < n && !p->oom; base += MC_ENT_CHUNK, c++) {
        struct mc_obj_ent *chunk = s->chunks[c];
        uint64_t *floors = (uint64_t *)(chunk + MC_ENT_CHUNK);
        uint32_t lim = n - base < MC_ENT_CHUNK ? n - base : MC_ENT_CHUNK;
        const uint32_t nblocks = (lim + MC_ENT_BLOCK - 1) >> MC_ENT_BLOCK_SHIFT;
        uint32_t ahead = 0;  /* the next block the look-ahead examines */
        unsigned queued = 0; /* blocks in [this one, ahead) that the scan will visit */
        for (uint32_t b0 = 0; b0 < lim && !p->oom; b0 += MC_ENT_BLOCK) {
            uint64_t *floor = &floors[b0 >> MC_ENT_BLOCK_SHIFT];
            if (sparse) {
                /* A skipping scan visits blocks far apart, where the hardware prefetcher does
                 * not follow: the next EV_BLOCKS_AHEAD blocks it will visit (by their floors,
                 * which nothing changes under the read lock) are fetched from here. */
                while (queued < EV_BLOCKS_AHEAD && ahead < nblocks) {
                    if (floors[ahead] <= sc->skip_above) {
                        const struct mc_obj_ent *be = &chunk[ahead << MC_ENT_BLOCK_SHIFT];
                        __builtin_prefetch(be);
                        __builtin_prefetch((const char *)(be + MC_ENT_BLOCK) - 1);
                        queued++;
                    }
                    ahead++;
                }
            }
            if (*floor > sc->skip_above)
                continue;
            queued -= queued > 0;
            uint32_t bl = lim - b0 < MC_ENT_BLOCK ? lim : b0 + MC_ENT_BLOCK;
            uint64_t bm = UINT64_MAX;
            p->visited += bl - b0;
            for (uint32_t j = b0; j < bl; j++) {
                struct mc_obj_ent *e = &chunk[j];
                if (prefetch && j + EV_PREFETCH < lim) {
                    /* full materialization reads most objects' versions (the header's first
                     * line; the rest is read only by the rounds, long after): fetch far enough
                     * ahead that a miss with its page walk is over when the entry comes up */
                    __builtin_prefetch(mc_ent_obj(&chunk[j + EV_PREFETCH]));
                }
                uint64_t lease = atomic_load_explicit(&e->lease_ms, memory_order_relaxed);
                bm = lease < bm ? lease : bm;
                unsigned bits = mc_ent_bits(e);
                if (!(bits & MC_ENT_EVICTABLE) || (bits & MC_ENT_HARD_PIN))
                    continue; /* EV_OUT */
                struct mc_object *o = (bits & MC_ENT_SOFT_PIN) ? mc_ent_obj(e) : NULL;
                enum ev_class cls = ev_classify(bits, lease, now, o);
                if (sc->count)
                    p->base++;
                if (cls == EV_PLAIN) {
                    if (!scan_plain(sc, p, e, lease, s->index, base + j)) {
                        p->oom = true;
                        break;
                    }
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
            if (!p->oom) /* the block's exact minimum (only raises: leases only grow) */
                *floor = bm;
        }
    }
    if (sc->filter == EV_PLAIN_FRONTIER && p->plain.n > first)
        resolve_versions(p->plain.v + first, p->plain.n - first);
    mc_shard_unlock(s);
}

/* The low census's scan of one shard (EV_PLAIN_LOW: the plain eligible entries at or below the
 * cutoff, as records holding their objects' addresses): the general scan with what it does not
 * need taken out. The blocks to visit are listed first from their floors (no branch per block),
 * so each is fetched EV_LOW_AHEAD visits ahead (blocks far apart, where the hardware prefetcher
 * does not follow); a block's deadlines are read once, into its floor and a mask of those at or
 * below the cutoff, and only those entries are classified. At 1M objects and a 1% target this
 * scan took 0.75-0.82 ms where the general one took 1.25-1.9 (alternated runs). */
static void scan_shard_low(struct ev_scan *sc, struct mc_shard *s, struct ev_part *p)
{
    const uint64_t now = sc->now, cut = sc->cutoff;
    uint8_t vis[MC_ENT_CHUNK >> MC_ENT_BLOCK_SHIFT];
    _Static_assert((MC_ENT_CHUNK >> MC_ENT_BLOCK_SHIFT) <= 256, "block numbers fit a byte");
    mc_shard_rdlock(s);
    uint32_t n = s->n;
    if (sc->gens)
        sc->gens[s->index] = s->gen;
    for (uint32_t base = 0, c = 0; base < n && !p->oom; base += MC_ENT_CHUNK, c++) {
        struct mc_obj_ent *chunk = s->chunks[c];
        uint64_t *floors = (uint64_t *)(chunk + MC_ENT_CHUNK);
        uint32_t lim = n - base < MC_ENT_CHUNK ? n - base : MC_ENT_CHUNK;
        const uint32_t nblocks = (lim + MC_ENT_BLOCK - 1) >> MC_ENT_BLOCK_SHIFT;
        uint32_t nv = 0;
        for (uint32_t b = 0; b < nblocks; b++) {
            vis[nv] = (uint8_t)b;
            nv += floors[b] <= cut;
        }
        for (uint32_t i = 0; i < nv && i < EV_LOW_AHEAD; i++) {
            const struct mc_obj_ent *be = &chunk[(uint32_t)vis[i] << MC_ENT_BLOCK_SHIFT];
            __builtin_prefetch(be);
            __builtin_prefetch((const char *)(be + MC_ENT_BLOCK) - 1);
        }
        for (uint32_t i = 0; i < nv && !p->oom; i++) {
            if (i + EV_LOW_AHEAD < nv) {
                const struct mc_obj_ent *be =
                    &chunk[(uint32_t)vis[i + EV_LOW_AHEAD] << MC_ENT_BLOCK_SHIFT];
                __builtin_prefetch(be);
                __builtin_prefetch((const char *)(be + MC_ENT_BLOCK) - 1);
            }
            uint32_t b0 = (uint32_t)vis[i] << MC_ENT_BLOCK_SHIFT;
            uint32_t cnt = lim - b0 < MC_ENT_BLOCK ? lim - b0 : MC_ENT_BLOCK;
            struct mc_obj_ent *e = &chunk[b0];
            uint64_t lease[MC_ENT_BLOCK];
            uint64_t bm = UINT64_MAX;
            unsigned low = 0;
            for (uint32_t j = 0; j < cnt; j++) {
                lease[j] = atomic_load_explicit(&e[j].lease_ms, memory_order_relaxed);
                bm = lease[j] < bm ? lease[j] : bm;
                low |= (unsigned)(lease[j] <= cut) << j;
            }
            p->visited += cnt;
            floors[vis[i]] = bm; /* the block's exact minimum (only raises: leases only grow) */
            for (; low; low &= low - 1) {
                uint32_t j = (uint32_t)__builtin_ctz(low);
                unsigned bits = mc_ent_bits(&e[j]);
                struct mc_object *o = mc_ent_obj(&e[j]);
                if (ev_classify(bits, lease[j], now, (bits & MC_ENT_SOFT_PIN) ? o : NULL) !=
                    EV_PLAIN)
                    continue;
                struct ev_cand *cd = ev_candv_push(&p->plain);
                if (!cd) {
                    p->oom = true;
                    break;
                }
                /* the address comes from the entry; the object is not touched */
                *cd = (struct ev_cand){.lease = lease[j],
                                       .version = (uintptr_t)o,
                                       .ent = base + b0 + j,
                                       .shard = (uint16_t)s->index};
            }
        }
    }
    mc_shard_unlock(s);
}

void ev_scan_one(struct ev_scan *sc, struct mc_shard *s, struct ev_part *p)
{
    scan_shard(sc, s, p);
}

static void scan_worker(void *arg, unsigned worker)
{
    struct ev_scan *sc = arg;
    struct ev_part *p = &sc->parts[worker];
    const bool low = sc->filter == EV_PLAIN_LOW;
    for (;;) {
        uint32_t first =
            atomic_fetch_add_explicit(&sc->next_shard, SHARDS_PER_GRAB, memory_order_relaxed);
        if (first >= MC_NSHARDS)
            break;
        for (uint32_t i = first; i < first + SHARDS_PER_GRAB && i < MC_NSHARDS; i++) {
            if (low)
                scan_shard_low(sc, &sc->m->shards[i], p);
            else
                scan_shard(sc, &sc->m->shards[i], p);
        }
    }
}

void ev_scan_run(struct ev_scan *sc, unsigned nthreads)
{
    atomic_store_explicit(&sc->next_shard, 0, memory_order_relaxed);
    for (unsigned i = 0; i < nthreads; i++) {
        struct ev_part *p = &sc->parts[i];
        p->leases.n = p->plain.n = p->soft.n = 0;
        p->census = p->base = p->nplain = p->nsoft = p->visited = 0;
        p->oom = false;
    }
    if (nthreads <= 1)
        scan_worker(sc, 0);
    else
        ev_parallel(nthreads, scan_worker, sc);
}

/* ---- merging the workers' scan output ------------------------------------------------------- */

bool ev_merge_u64(struct ev_u64v *dst, struct ev_part *parts, unsigned n)
{
    unsigned first = 0;
    if (dst->n == 0) { /* adopt worker 0's buffer instead of copying it */
        struct ev_u64v t = *dst;
        *dst = parts[0].leases;
        parts[0].leases = t;
        parts[0].leases.n = 0;
        first = 1;
    }
    size_t total = dst->n;
    for (unsigned i = first; i < n; i++)
        total += parts[i].leases.n;
    if (!ev_u64v_reserve(dst, total))
        return false;
    for (unsigned i = first; i < n; i++) {
        if (parts[i].leases.n)
            memcpy(dst->v + dst->n, parts[i].leases.v, parts[i].leases.n * sizeof(*dst->v));
        dst->n += parts[i].leases.n;
    }
    return true;
}

bool ev_merge_cands(struct ev_candv *dst, struct ev_part *parts, unsigned n, bool soft)
{
    unsigned first = 0;
#define PART_VEC(i) (soft ? &parts[i].soft : &parts[i].plain)
    if (dst->n == 0) {
        struct ev_candv t = *dst;
        *dst = *PART_VEC(0);
        *PART_VEC(0) = t;
        PART_VEC(0)->n = 0;
        first = 1;
    }
    size_t total = dst->n;
    for (unsigned i = first; i < n; i++)
        total += PART_VEC(i)->n;
    if (!ev_candv_reserve(dst, total))
        return false;
    for (unsigned i = first; i < n; i++) {
        struct ev_candv *src = PART_VEC(i);
        if (src->n)
            memcpy(dst->v + dst->n, src->v, src->n * sizeof(*dst->v));
        dst->n += src->n;
    }
#undef PART_VEC
    return true;
}

bool ev_parts_oom(const struct ev_part *parts, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (parts[i].oom)
            return true;
    return false;
}

/* ---- sampling ------------------------------------------------------------------------------ */

bool ev_sample_run(struct mc_master *m, uint64_t now, uint32_t stride, uint32_t salt,
                   struct ev_u64v *out, uint64_t *base)
{
    uint64_t pop = 0;
    bool ok = true;
    out->n = 0;
    for (uint32_t si = 0; si < MC_NSHARDS && ok; si++) {
        struct mc_shard *s = &m->shards[si];
        mc_shard_rdlock(s);
        pop += s->npop;
        uint32_t n = s->n;
        for (uint32_t j = (si * 2654435761u + salt) % stride; j < n; j += stride) {
            struct mc_obj_ent *e = mc_shard_ent(s, j);
            if (j + 4 * stride < n)
                __builtin_prefetch(mc_shard_ent(s, j + 4 * stride));
            unsigned bits = mc_ent_bits(e);
            if (!(bits & MC_ENT_EVICTABLE) || (bits & MC_ENT_HARD_PIN))
                continue;
            uint64_t lease = atomic_load_explicit(&e->lease_ms, memory_order_relaxed);
            struct mc_object *o = (bits & MC_ENT_SOFT_PIN) ? mc_ent_obj(e) : NULL;
            if (ev_classify(bits, lease, now, o) == EV_PLAIN && !ev_u64v_push(out, lease)) {
                ok = false;
                break;
            }
        }
        mc_shard_unlock(s);
    }
    *base = pop;
    return ok;
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
