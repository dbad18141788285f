/*
 * segments.c - segment table, per-segment allocators and allocation strategies (segments.h).
 *
 * The table is a small array of mounted segments (hundreds at most), scanned linearly by id and
 * name; it is only touched by mount/unmount (exclusive) and allocation/listing (shared). The hot
 * path is mc_segments_allocate: shared table lock, then one segment mutex per attempt.
 * Randomness comes from a per-table atomic counter run through splitmix64 (no global state).
 */
#include "master/segments.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/log.h"
#include "common/mc_assert.h"
#include "master/lock_order.h"
#include "mooncake/errors.h"

struct mc_segments {
    pthread_rwlock_t lock;
    struct mc_segment **segs;
    size_t n, cap;
    enum mc_alloc_strategy strategy;
    _Atomic uint64_t capacity;
    _Atomic uint64_t allocated;
    _Atomic uint64_t rng;
    uint64_t next_epoch; /* under the table write lock; see segments.h "Mount epochs" */
};

/* Every table and segment lock goes through these (lock order checked in checking builds). */
static void table_rdlock(struct mc_segments *t)
{
    mc_lo_acquire(MC_LO_SEGTABLE, 0);
    pthread_rwlock_rdlock(&t->lock);
}
static void table_wrlock(struct mc_segments *t)
{
    mc_lo_acquire(MC_LO_SEGTABLE, 0);
    pthread_rwlock_wrlock(&t->lock);
}
static void table_unlock(struct mc_segments *t)
{
    pthread_rwlock_unlock(&t->lock);
    mc_lo_release(MC_LO_SEGTABLE, 0);
}
static void seg_lock(struct mc_segment *s)
{
    mc_lo_acquire(MC_LO_SEGMENT, 0);
    pthread_mutex_lock(&s->lock);
}
static void seg_unlock(struct mc_segment *s)
{
    pthread_mutex_unlock(&s->lock);
    mc_lo_release(MC_LO_SEGMENT, 0);
}

static uint64_t next_rand(struct mc_segments *t)
{
    uint64_t z = atomic_fetch_add_explicit(&t->rng, 0x9e3779b97f4a7c15ull, memory_order_relaxed);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A random 64-bit start for the epoch counter (never 0). */
static uint64_t epoch_seed(const void *salt)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = ((uint64_t)ts.tv_sec << 32 ^ (uint64_t)ts.tv_nsec) * 0x9e3779b97f4a7c15ull ^
            (uint64_t)(uintptr_t)salt;
    }
    return r ? r : 1;
}

struct mc_segments *mc_segments_new(enum mc_alloc_strategy strategy)
{
    struct mc_segments *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&t->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    t->strategy = strategy;
    atomic_init(&t->rng, (uint64_t)(uintptr_t)t ^ 0x5bd1e995ull);
    t->next_epoch = epoch_seed(t);
    return t;
}

static void segment_destroy(struct mc_segment *s)
{
    mc_offset_alloc_free(s->alloc);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

void mc_segment_ref(struct mc_segment *seg)
{
    atomic_fetch_add_explicit(&seg->refs, 1, memory_order_relaxed);
}

void mc_segment_unref(struct mc_segment *seg)
{
    if (atomic_fetch_sub_explicit(&seg->refs, 1, memory_order_acq_rel) == 1)
        segment_destroy(seg);
}

/* Marks s dead and takes it out of the global figures. Caller holds the table write lock. */
static void segment_kill(struct mc_segments *t, struct mc_segment *s)
{
    seg_lock(s);
    atomic_store_explicit(&s->dead, true, memory_order_release);
    atomic_fetch_sub(&t->allocated, atomic_load(&s->allocated));
    atomic_fetch_sub(&t->capacity, s->desc.size);
    seg_unlock(s);
}

void mc_segments_free(struct mc_segments *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        segment_kill(t, t->segs[i]);
        mc_segment_unref(t->segs[i]);
    }
    free(t->segs);
    pthread_rwlock_destroy(&t->lock);
    free(t);
}

static bool str_ok(const char *s, size_t cap)
{
    size_t len = strnlen(s, cap);
    return len > 0 && len < cap;
}

static int validate(const struct mc_segment_desc *d)
{
    if (mc_id_is_zero(d->id) || !str_ok(d->name, sizeof(d->name)) ||
        !str_ok(d->endpoint, sizeof(d->endpoint)) || !str_ok(d->protocol, sizeof(d->protocol)))
        return MC_ERR_INVALID_PARAMS;
    if (strnlen(d->transport_meta, sizeof(d->transport_meta)) >= sizeof(d->transport_meta))
        return MC_ERR_INVALID_PARAMS;
    if (strcmp(d->protocol, "tcp") != 0 && strcmp(d->protocol, "rdma") != 0)
        return MC_ERR_INVALID_PARAMS;
    if (d->base == 0 || d->size < MC_SEGMENT_MIN_SIZE || d->base + d->size < d->base)
        return MC_ERR_INVALID_PARAMS;
    if (d->size > MC_SEGMENT_MAX_SIZE) {
        char qn[MC_LOG_QUOTE_MAX];
        mc_warn("segments", "mount refused: segment larger than a replica offset can address",
                "name=%s size=%llu limit=%llu", mc_log_quote(d->name, qn, sizeof(qn)),
                (unsigned long long)d->size, (unsigned long long)MC_SEGMENT_MAX_SIZE);
        return MC_ERR_INVALID_PARAMS;
    }
    return MC_OK;
}

static struct mc_segment *find_locked(struct mc_segments *t, struct mc_id id, size_t *idx)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SEGTABLE, 0, false));
    for (size_t i = 0; i < t->n; i++) {
        if (mc_id_eq(t->segs[i]->desc.id, id)) {
            if (idx)
                *idx = i;
            return t->segs[i];
        }
    }
    return NULL;
}

int mc_segments_mount(struct mc_segments *t, const struct mc_segment_desc *d, struct mc_id owner,
                      uint64_t *mount_epoch)
{
    int rc = validate(d);
    if (rc != MC_OK)
        return rc;
    struct mc_segment *s = NULL;
    uint64_t epoch = 0;
    table_wrlock(t);
    struct mc_segment *old = find_locked(t, d->id, NULL);
    if (old) {
        if (!mc_id_eq(old->owner, owner))
            rc = MC_ERR_ILLEGAL_CLIENT;
        else if (old->desc.base != d->base || old->desc.size != d->size)
            rc = MC_ERR_SEGMENT_ALREADY_EXISTS;
        else if (mount_epoch)
            *mount_epoch = old->mount_epoch; /* the same mount, asked again */
        goto out;
    }
    /* The table lock is held for writing: nothing else changes the capacity now. */
    uint64_t cap = atomic_load(&t->capacity);
    if (d->size > MC_SEGMENTS_MAX_CAPACITY - cap) {
        char qn[MC_LOG_QUOTE_MAX];
        mc_warn("segments", "mount refused: total capacity would exceed its limit",
                "name=%s size=%llu capacity=%llu limit=%llu", mc_log_quote(d->name, qn, sizeof(qn)),
                (unsigned long long)d->size, (unsigned long long)cap,
                (unsigned long long)MC_SEGMENTS_MAX_CAPACITY);
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    if (t->n == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 16;
        struct mc_segment **ns = realloc(t->segs, ncap * sizeof(*ns));
        if (!ns) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        t->segs = ns;
        t->cap = ncap;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    s->alloc = mc_offset_alloc_new(d->size, MC_OA_DEFAULT_ALIGN);
    if (!s->alloc) {
        free(s);
        s = NULL;
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    s->desc = *d;
    s->owner = owner;
    s->mount_epoch = epoch = t->next_epoch++;
    if (t->next_epoch == 0)
        t->next_epoch = 1; /* 0 is never an epoch (the peer server's "no mount") */
    if (mount_epoch)
        *mount_epoch = epoch;
    s->table = t;
    atomic_init(&s->refs, 1);
    atomic_init(&s->dead, false);
    atomic_init(&s->allocated, 0);
    atomic_init(&s->nallocs, 0);
    pthread_mutex_init(&s->lock, NULL);
    t->segs[t->n++] = s;
    atomic_fetch_add(&t->capacity, d->size);
out:
    table_unlock(t);
    if (s) { /* name and endpoint are the client's text: quoted (no forged log lines) */
        char qn[MC_LOG_QUOTE_MAX], qe[MC_LOG_QUOTE_MAX];
        mc_info("segments", "mounted", "name=%s size=%llu endpoint=%s mount_epoch=%llx",
                mc_log_quote(d->name, qn, sizeof(qn)), (unsigned long long)d->size,
                mc_log_quote(d->endpoint, qe, sizeof(qe)), (unsigned long long)epoch);
    }
    return rc;
}

static void remove_at(struct mc_segments *t, size_t i)
{
    struct mc_segment *s = t->segs[i];
    t->segs[i] = t->segs[--t->n];
    segment_kill(t, s);
    mc_segment_unref(s);
}

int mc_segments_unmount(struct mc_segments *t, struct mc_id seg_id, struct mc_id owner,
                        bool *unmounted)
{
    int rc = MC_OK;
    size_t i;
    bool done = false;
    table_wrlock(t);
    struct mc_segment *s = find_locked(t, seg_id, &i);
    if (s) {
        if (!mc_id_is_zero(owner) && !mc_id_eq(owner, s->owner)) {
            rc = MC_ERR_ILLEGAL_CLIENT;
        } else {
            remove_at(t, i);
            done = true;
        }
    }
    table_unlock(t);
    if (unmounted)
        *unmounted = done;
    return rc;
}

size_t mc_segments_unmount_owner(struct mc_segments *t, struct mc_id owner)
{
    size_t count = 0;
    table_wrlock(t);
    for (size_t i = 0; i < t->n;) {
        if (mc_id_eq(t->segs[i]->owner, owner)) {
            remove_at(t, i);
            count++;
        } else {
            i++;
        }
    }
    table_unlock(t);
    return count;
}

bool mc_segments_is_mounted(struct mc_segments *t, struct mc_id seg_id)
{
    table_rdlock(t);
    bool found = find_locked(t, seg_id, NULL) != NULL;
    table_unlock(t);
    return found;
}

size_t mc_segments_count(struct mc_segments *t)
{
    table_rdlock(t);
    size_t n = t->n;
    table_unlock(t);
    return n;
}

/* ---- allocation ---------------------------------------------------------------------------- */

static bool try_segment(struct mc_segments *t, struct mc_segment *s, uint64_t size,
                        struct mc_segment_alloc *out)
{
    struct mc_oa_allocation a;
    bool ok = false;
    seg_lock(s);
    if (!atomic_load_explicit(&s->dead, memory_order_relaxed) &&
        mc_offset_alloc_alloc(s->alloc, size, &a) == MC_OK) {
        atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->allocated, size, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->nallocs, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->allocated, size, memory_order_relaxed);
        out->seg = s;
        out->offset = a.offset;
        out->size = size;
        out->handle = a.handle;
        ok = true;
    }
    seg_unlock(s);
    return ok;
}

struct placement {
    struct mc_segments *t;
    uint64_t size;
    uint32_t want;
    struct mc_segment_alloc *out;
    uint32_t n;
};

static bool already_used(const struct placement *p, const struct mc_segment *s)
{
    for (uint32_t i = 0; i < p->n; i++)
        if (p->out[i].seg == s)
            return true;
    return false;
}

static void place_on(struct placement *p, struct mc_segment *s)
{
    if (p->n < p->want && !already_used(p, s) && try_segment(p->t, s, p->size, &p->out[p->n]))
        p->n++;
}

static void place_preferred(struct placement *p, const char *const *pref, size_t npref)
{
    struct mc_segments *t = p->t;
    for (size_t k = 0; k < npref && p->n < p->want; k++) {
        if (!pref[k] || !pref[k][0])
            continue;
        /* One replica per name; a name with several segments is tried from a random start. */
        size_t start = t->n ? (size_t)(next_rand(t) % t->n) : 0;
        uint32_t before = p->n;
        for (size_t j = 0; j < t->n && p->n == before; j++) {
            struct mc_segment *s = t->segs[(start + j) % t->n];
            if (strcmp(s->desc.name, pref[k]) == 0)
                place_on(p, s);
        }
    }
}

static void place_random(struct placement *p)
{
    struct mc_segments *t = p->t;
    size_t tries = t->n < MC_ALLOC_MAX_TRIES ? t->n : MC_ALLOC_MAX_TRIES;
    size_t start = (size_t)(next_rand(t) % t->n);
    for (size_t j = 0; j < tries && p->n < p->want; j++)
        place_on(p, t->segs[(start + j) % t->n]);
}

static double free_ratio(struct mc_segment *s)
{
    double used = (double)atomic_load_explicit(&s->allocated, memory_order_relaxed);
    return 1.0 - used / (double)s->desc.size;
}

static void place_free_ratio_first(struct placement *p)
{
    struct mc_segments *t = p->t;
    struct mc_segment *sample[MC_ALLOC_MAX_TRIES];
    double ratio[MC_ALLOC_MAX_TRIES];
    size_t want = (size_t)(p->want - p->n) * 6;
    if (want > t->n)
        want = t->n;
    if (want > MC_ALLOC_MAX_TRIES)
        want = MC_ALLOC_MAX_TRIES;
    size_t start = (size_t)(next_rand(t) % t->n);
    for (size_t j = 0; j < want; j++) {
        sample[j] = t->segs[(start + j) % t->n];
        ratio[j] = free_ratio(sample[j]);
    }
    /* Insertion sort, descending free ratio (the sample is small). */
    for (size_t i = 1; i < want; i++) {
        struct mc_segment *s = sample[i];
        double r = ratio[i];
        size_t j = i;
        for (; j > 0 && ratio[j - 1] < r; j--) {
            sample[j] = sample[j - 1];
            ratio[j] = ratio[j - 1];
        }
        sample[j] = s;
        ratio[j] = r;
    }
    for (size_t j = 0; j < want && p->n < p->want; j++)
        place_on(p, sample[j]);
    if (p->n < p->want)
        place_random(p);
}

int mc_segments_allocate(struct mc_segments *t, uint64_t size, uint32_t replica_num,
                         const char *const *preferred, size_t npreferred,
                         struct mc_segment_alloc *out, uint32_t *nout)
{
    *nout = 0;
    if (size == 0 || replica_num == 0 || replica_num > MC_MAX_REPLICAS)
        return MC_ERR_INVALID_PARAMS;
    struct placement p = {.t = t, .size = size, .want = replica_num, .out = out, .n = 0};
    table_rdlock(t);
    if (t->n > 0) {
        if (preferred && npreferred)
            place_preferred(&p, preferred, npreferred);
        if (p.n < p.want) {
            if (t->strategy == MC_ALLOC_FREE_RATIO_FIRST)
                place_free_ratio_first(&p);
            else
                place_random(&p);
        }
    }
    table_unlock(t);
    *nout = p.n;
    return p.n > 0 ? MC_OK : MC_ERR_NO_AVAILABLE_HANDLE;
}

int mc_segments_allocate_owned(struct mc_segments *t, uint64_t size, struct mc_id owner,
                               struct mc_segment_alloc *out)
{
    if (size == 0 || mc_id_is_zero(owner))
        return MC_ERR_INVALID_PARAMS;
    struct placement p = {.t = t, .size = size, .want = 1, .out = out, .n = 0};
    table_rdlock(t);
    size_t start = t->n ? (size_t)(next_rand(t) % t->n) : 0;
    for (size_t j = 0; j < t->n && p.n == 0; j++) {
        struct mc_segment *s = t->segs[(start + j) % t->n];
        if (mc_id_eq(s->owner, owner))
            place_on(&p, s);
    }
    table_unlock(t);
    return p.n ? MC_OK : MC_ERR_NO_AVAILABLE_HANDLE;
}

int mc_segments_claim(struct mc_segments *t, struct mc_id seg_id, struct mc_id owner,
                      uint64_t mount_epoch, uint64_t offset, uint64_t size, uint32_t hint,
                      struct mc_segment_alloc *out)
{
    if (size == 0 || mc_id_is_zero(owner))
        return MC_ERR_INVALID_PARAMS;
    int rc = MC_ERR_SEGMENT_NOT_FOUND;
    table_rdlock(t);
    for (size_t i = 0; i < t->n; i++) {
        struct mc_segment *s = t->segs[i];
        if (!mc_id_eq(s->desc.id, seg_id))
            continue;
        if (!mc_id_eq(s->owner, owner) || s->mount_epoch != mount_epoch) {
            rc = MC_ERR_REPLICA_IS_GONE; /* another owner's, or another mount of it */
            break;
        }
        struct mc_oa_allocation a;
        seg_lock(s);
        rc = atomic_load_explicit(&s->dead, memory_order_relaxed)
                 ? MC_ERR_SEGMENT_NOT_FOUND
                 : mc_offset_alloc_claim(s->alloc, offset, size, hint, &a);
        if (rc == MC_OK) {
            atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&s->allocated, size, memory_order_relaxed);
            atomic_fetch_add_explicit(&s->nallocs, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&t->allocated, size, memory_order_relaxed);
            out->seg = s;
            out->offset = a.offset;
            out->size = size;
            out->handle = a.handle;
        }
        seg_unlock(s);
        break;
    }
    table_unlock(t);
    return rc;
}

bool mc_segments_owner_mounted(struct mc_segments *t, struct mc_id owner)
{
    bool found = false;
    table_rdlock(t);
    for (size_t i = 0; i < t->n && !found; i++)
        found = mc_id_eq(t->segs[i]->owner, owner) && mc_segment_alive(t->segs[i]);
    table_unlock(t);
    return found;
}

void mc_segment_release(struct mc_segment *s, uint32_t handle, uint64_t size)
{
    struct mc_segments *t = s->table;
    seg_lock(s);
    if (mc_offset_alloc_release(s->alloc, handle) == MC_OK) {
        atomic_fetch_sub_explicit(&s->allocated, size, memory_order_relaxed);
        atomic_fetch_sub_explicit(&s->nallocs, 1, memory_order_relaxed);
        if (!atomic_load_explicit(&s->dead, memory_order_relaxed))
            atomic_fetch_sub_explicit(&t->allocated, size, memory_order_relaxed);
    } else {
        mc_error("segments", "bad release", "name=%s handle=%u", s->desc.name, handle);
    }
    seg_unlock(s);
    mc_segment_unref(s);
}

void mc_segment_release_many(struct mc_segment *s, const uint32_t *handles, const uint64_t *sizes,
                             size_t n)
{
    enum { AHEAD_NODE = 8, AHEAD_NEIGHBOURS = 4 };
    if (n == 0)
        return;
    struct mc_segments *t = s->table;
    uint64_t bytes = 0, count = 0;
    seg_lock(s);
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD_NODE < n)
            mc_offset_alloc_prefetch(s->alloc, handles[i + AHEAD_NODE], false);
        if (i + AHEAD_NEIGHBOURS < n)
            mc_offset_alloc_prefetch(s->alloc, handles[i + AHEAD_NEIGHBOURS], true);
        if (mc_offset_alloc_release(s->alloc, handles[i]) == MC_OK) {
            bytes += sizes[i];
            count++;
        } else {
            mc_error("segments", "bad release", "name=%s handle=%u", s->desc.name, handles[i]);
        }
    }
    atomic_fetch_sub_explicit(&s->allocated, bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&s->nallocs, count, memory_order_relaxed);
    if (!atomic_load_explicit(&s->dead, memory_order_relaxed))
        atomic_fetch_sub_explicit(&t->allocated, bytes, memory_order_relaxed);
    seg_unlock(s);
    if (atomic_fetch_sub_explicit(&s->refs, (uint32_t)n, memory_order_acq_rel) == n)
        segment_destroy(s);
}

uint32_t mc_segment_handle_bound(struct mc_segment *s)
{
    seg_lock(s);
    uint32_t b = mc_offset_alloc_handle_bound(s->alloc);
    seg_unlock(s);
    return b;
}

void mc_segment_release_set(struct mc_segment *s, const uint64_t *bits, size_t nwords,
                            uint64_t count, uint64_t bytes)
{
    if (count == 0)
        return;
    enum { RELEASE_SET_RUN = 65536 };
    struct mc_segments *t = s->table;
    uint64_t done = 0;
    uint32_t run = 0;
    seg_lock(s);
    if (mc_offset_alloc_used_blocks(s->alloc) == count) {
        mc_offset_alloc_release_all(s->alloc); /* the set is every live allocation */
        done = count;
    } else {
        for (size_t w = 0; w < nwords; w++) {
            for (uint64_t b = bits[w]; b; b &= b - 1) {
                uint32_t h = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(b));
                if (mc_offset_alloc_release(s->alloc, h) == MC_OK)
                    done++;
                else
                    mc_error("segments", "bad release", "name=%s handle=%u", s->desc.name, h);
                if (++run == RELEASE_SET_RUN) { /* a Put placing here waits one run at most */
                    seg_unlock(s);
                    seg_lock(s);
                    run = 0;
                }
            }
        }
    }
    if (done != count) /* only after a bad release: the accounting follows the set */
        mc_error("segments", "released fewer than the set", "name=%s released=%llu set=%llu",
                 s->desc.name, (unsigned long long)done, (unsigned long long)count);
    atomic_fetch_sub_explicit(&s->allocated, bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&s->nallocs, count, memory_order_relaxed);
    if (!atomic_load_explicit(&s->dead, memory_order_relaxed))
        atomic_fetch_sub_explicit(&t->allocated, bytes, memory_order_relaxed);
    seg_unlock(s);
    if (atomic_fetch_sub_explicit(&s->refs, (uint32_t)count, memory_order_acq_rel) == count)
        segment_destroy(s);
}

void mc_segment_alloc_release(const struct mc_segment_alloc *a)
{
    mc_segment_release(a->seg, a->handle, a->size);
}

/* ---- accounting ---------------------------------------------------------------------------- */

uint64_t mc_segments_capacity(struct mc_segments *t)
{
    return atomic_load_explicit(&t->capacity, memory_order_relaxed);
}

bool mc_segments_could_fit(struct mc_segments *t, uint64_t size)
{
    bool fit = false;
    table_rdlock(t);
    for (size_t i = 0; i < t->n && !fit; i++)
        fit = mc_segment_alive(t->segs[i]) && t->segs[i]->desc.size >= size;
    table_unlock(t);
    return fit;
}

uint64_t mc_segments_allocated(struct mc_segments *t)
{
    return atomic_load_explicit(&t->allocated, memory_order_relaxed);
}

double mc_segments_used_ratio(struct mc_segments *t)
{
    uint64_t cap = mc_segments_capacity(t);
    return cap ? (double)mc_segments_allocated(t) / (double)cap : 0.0;
}

int mc_segments_list(struct mc_segments *t, struct mc_segment_info **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int rc = MC_OK;
    table_rdlock(t);
    if (t->n) {
        struct mc_segment_info *v = calloc(t->n, sizeof(*v));
        if (!v) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        for (size_t i = 0; i < t->n; i++) {
            struct mc_segment *s = t->segs[i];
            v[i].desc = s->desc;
            v[i].owner = s->owner;
            v[i].mount_epoch = s->mount_epoch;
            seg_lock(s);
            struct mc_oa_stats st;
            mc_offset_alloc_stats(s->alloc, &st);
            v[i].capacity = s->desc.size;
            v[i].allocated = atomic_load(&s->allocated);
            v[i].nallocs = atomic_load(&s->nallocs);
            v[i].largest_free = st.largest_free;
            seg_unlock(s);
            v[i].used_ratio = (double)v[i].allocated / (double)v[i].capacity;
        }
        *out = v;
        *n = t->n;
    }
out:
    table_unlock(t);
    return rc;
}

int mc_alloc_strategy_parse(const char *s, enum mc_alloc_strategy *out)
{
    if (!s)
        return -1;
    if (!strcmp(s, "random")) {
        *out = MC_ALLOC_RANDOM;
        return 0;
    }
    if (!strcmp(s, "free_ratio_first")) {
        *out = MC_ALLOC_FREE_RATIO_FIRST;
        return 0;
    }
    return -1;
}

const char *mc_alloc_strategy_name(enum mc_alloc_strategy s)
{
    return s == MC_ALLOC_FREE_RATIO_FIRST ? "free_ratio_first" : "random";
}
