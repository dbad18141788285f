/*
 * objslab.c - the master's own allocator for object records (struct mc_object + replicas + key).
 *
 * Each shard owns its slabs, so allocation and release happen under the shard's write lock that
 * the Put/Remove/eviction paths already hold: no global lock and no malloc/free per object.
 * A slab is one MC_SLAB_SIZE block aligned to its size (the record's slab is found by masking
 * its address); its header holds the owning shard, the size class, a LIFO list of freed records
 * and the count of live ones. Records are carved lazily (a bump index), freed records are pushed
 * on the slab's list without any coalescing. Size classes go by the record's total length in
 * steps of MC_SLAB_GRAIN (records stay 16-byte aligned: ents keep bits in the low 4 pointer bits)
 * up to MC_SLAB_NCLASS * MC_SLAB_GRAIN bytes; larger records (long keys) are plain mallocs marked
 * MC_OBJ_HEAP.
 *
 * Per shard and class, the slabs with room are on a doubly-linked list; a full slab is off it and
 * rejoins on its first release. A slab that becomes empty goes back to the slab pool unless it is
 * the class's only slab with room (one empty slab per shard and class at most is kept).
 *
 * The slab pool (process-wide, one mutex, taken only to get or give back a whole slab: once per
 * ~100 records, never per record) carves slabs from MC_SLAB_ARENA mappings, so alignment costs
 * nothing (posix_memalign would waste up to a slab per slab); the arenas ask for transparent huge
 * pages (ARENA_ALIGN; --object_huge_pages). Free slabs stay in the pool for
 * reuse; once POOL_KEEP + TRIM_BATCH of them have their pages, the next
 * mc_objslab_pool_trim_if_over (called by every freelist flush, so with no shard lock held:
 * the madvise calls never run under a shard lock) gives back the pages of all but POOL_KEEP
 * (MADV_DONTNEED, one call per run of adjacent slabs: trim_locked, which splits a huge page it
 * covers in part); their addresses wait in an
 * array (a link inside them would fault a page back in). A large removal
 * holds the trims off (mc_objslab_pool_hold) and trims once at its end, when the freed slabs
 * form long runs.
 *
 * Under AddressSanitizer freed records are poisoned, so a use after release still reports.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/mc_assert.h"
#include "master/object_record.h"
#include "master/objslab.h"
#include "master/shard.h"

#if defined(__SANITIZE_ADDRESS__)
#define MC_SLAB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MC_SLAB_ASAN 1
#endif
#endif
#ifdef MC_SLAB_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define SLAB_HDR 64u

struct mc_slab {
    struct mc_shard *shard;
    struct mc_slab *next, *prev; /* the shard's list of this class's slabs with room */
    void *free;                  /* released records (first word: the next one) */
    uint32_t live, cap, bump;
    uint32_t cls; /* record size = cls * MC_SLAB_GRAIN */
};
_Static_assert(sizeof(struct mc_slab) <= SLAB_HDR, "slab header fits before the records");
_Static_assert(sizeof(struct mc_object) >= sizeof(void *), "a free record holds a pointer");

#define ARENA_SIZE (4u << 20)
/* Arenas start on a 2 MiB boundary and ask for transparent huge pages (arena_huge, on by
 * default): records are read at random (a Get's lookup, eviction's candidates), and in 4 KiB
 * pages each of those reads was likely a TLB miss; a TLB flush (a timer interrupt of a kernel
 * with page-table isolation and no PCID, as on the project's VM) made every one of them a page
 * walk. At 1M objects, a 1% eviction cycle with the bench's probe thread went from 5.5-6.5 ms to
 * 4.8-5.1 (alternated runs). */
#define ARENA_ALIGN ((size_t)2 << 20)
#define POOL_KEEP 8192u /* free slabs kept with their pages (64 MiB) */
#define TRIM_BATCH 512u /* past POOL_KEEP, pages go back this many slabs at a time */

/* The pool: a bump range of the current arena and a stack of free slabs (leaf lock). */
static struct {
    pthread_mutex_t lock;
    char *bump, *end;
    struct mc_slab *warm; /* free slabs with their pages, chained through next */
    size_t nwarm;
    /* free slabs whose pages went back to the system: an array, since a link written into such
     * a slab would bring a page back (and MADV_DONTNEED zeroes one written before) */
    struct mc_slab **cold;
    size_t ncold, cold_cap;
    size_t carved;     /* slabs taken from the arenas' bump ranges */
    unsigned holds;    /* mc_objslab_pool_hold calls not yet ended: no trim meanwhile */
    _Atomic bool over; /* nwarm reached POOL_KEEP + TRIM_BATCH: the next check trims */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic bool arena_huge = true;

static void *arena_map(void)
{
    size_t len = ARENA_SIZE + ARENA_ALIGN;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *a = (char *)(((uintptr_t)p + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    size_t tail = (size_t)(p + len - (a + ARENA_SIZE));
    if (tail)
        munmap(a + ARENA_SIZE, tail);
    /* advice only: a kernel without THP says EINVAL, and the arena stays in 4 KiB pages */
    if (atomic_load_explicit(&arena_huge, memory_order_relaxed))
        (void)madvise(a, ARENA_SIZE, MADV_HUGEPAGE);
    return a;
}

void mc_objslab_set_huge_pages(bool on)
{
    atomic_store_explicit(&arena_huge, on, memory_order_relaxed);
}

static struct mc_slab *pool_get(void)
{
    struct mc_slab *sl = NULL;
    pthread_mutex_lock(&pool.lock);
    if (pool.warm) {
        sl = pool.warm;
        UNPOISON(sl, SLAB_HDR);
        pool.warm = sl->next;
        pool.nwarm--;
    } else if (pool.ncold) {
        sl = pool.cold[--pool.ncold];
        UNPOISON(sl, SLAB_HDR);
    } else {
        if (pool.bump == pool.end) {
            char *a = arena_map();
            if (a) {
                pool.bump = a;
                pool.end = a + ARENA_SIZE;
            }
        }
        if (pool.bump != pool.end) {
            sl = (struct mc_slab *)(void *)pool.bump;
            pool.bump += MC_SLAB_SIZE;
            pool.carved++;
        }
    }
    pthread_mutex_unlock(&pool.lock);
    return sl;
}

static int cmp_addr(const void *x, const void *y)
{
    uintptr_t a = (uintptr_t) * (void *const *)x, b = (uintptr_t) * (void *const *)y;
    return a < b ? -1 : a > b;
}

/* Room for want cold slabs (pool lock held); false when the array cannot grow. */
static bool cold_reserve_locked(size_t want)
{
    if (want <= pool.cold_cap)
        return true;
    size_t ncap = pool.cold_cap ? pool.cold_cap : 1024;
    while (ncap < want)
        ncap *= 2;
    struct mc_slab **nc = realloc(pool.cold, ncap * sizeof(*nc));
    if (!nc)
        return false;
    pool.cold = nc;
    pool.cold_cap = ncap;
    return true;
}

static struct mc_slab *warm_pop_locked(void)
{
    struct mc_slab *sl = pool.warm;
    UNPOISON(sl, SLAB_HDR);
    pool.warm = sl->next;
    pool.nwarm--;
    POISON(sl, SLAB_HDR);
    return sl;
}

/* Moves the warm slabs past keep to the cold array and gives their pages back (pool lock held).
 * Each madvise call costs a TLB shootdown on every CPU whatever its length (most of a large
 * RemoveAll's time when made per slab), so the moved slabs are sorted by address and each run
 * of adjacent ones is one call: a whole arena's worth after a RemoveAll. When the array cannot
 * grow, a slab's pages go back all the same and only its address is lost. */
static void trim_locked(size_t keep)
{
    if (pool.nwarm <= keep)
        return;
    size_t want = pool.nwarm - keep;
    if (!cold_reserve_locked(pool.ncold + want)) {
        while (pool.nwarm > keep)
            madvise(warm_pop_locked(), MC_SLAB_SIZE, MADV_DONTNEED);
        return;
    }
    size_t base = pool.ncold;
    while (pool.nwarm > keep)
        pool.cold[pool.ncold++] = warm_pop_locked();
    qsort(pool.cold + base, want, sizeof(*pool.cold), cmp_addr);
    for (size_t i = base; i < pool.ncold;) {
        char *start = (char *)pool.cold[i];
        size_t j = i + 1;
        while (j < pool.ncold && (char *)pool.cold[j] == start + (j - i) * MC_SLAB_SIZE)
            j++;
        madvise(start, (j - i) * MC_SLAB_SIZE, MADV_DONTNEED);
        i = j;
    }
}

static void pool_put(struct mc_slab *sl)
{
    pthread_mutex_lock(&pool.lock);
    sl->next = pool.warm;
    pool.warm = sl;
    pool.nwarm++;
    POISON(sl, MC_SLAB_SIZE);
    if (pool.nwarm >= POOL_KEEP + TRIM_BATCH)
        atomic_store_explicit(&pool.over, true, memory_order_relaxed);
    pthread_mutex_unlock(&pool.lock);
}

void mc_objslab_pool_trim_if_over(void)
{
    if (!atomic_load_explicit(&pool.over, memory_order_relaxed))
        return;
    pthread_mutex_lock(&pool.lock);
    if (!pool.holds && pool.nwarm >= POOL_KEEP + TRIM_BATCH)
        trim_locked(POOL_KEEP);
    atomic_store_explicit(&pool.over, false, memory_order_relaxed);
    pthread_mutex_unlock(&pool.lock);
}

void mc_objslab_pool_hold(void)
{
    pthread_mutex_lock(&pool.lock);
    pool.holds++;
    pthread_mutex_unlock(&pool.lock);
}

void mc_objslab_pool_unhold(size_t keep)
{
    pthread_mutex_lock(&pool.lock);
    pool.holds--;
    if (!pool.holds)
        trim_locked(keep < POOL_KEEP ? keep : POOL_KEEP);
    pthread_mutex_unlock(&pool.lock);
}

void mc_objslab_pool_stats(struct mc_objslab_pool_stats *out)
{
    pthread_mutex_lock(&pool.lock);
    out->warm = pool.nwarm;
    out->cold = pool.ncold;
    out->carved = pool.carved;
    pthread_mutex_unlock(&pool.lock);
}

static struct mc_slab *slab_of(const void *p)
{
    return (struct mc_slab *)((uintptr_t)p & ~(uintptr_t)(MC_SLAB_SIZE - 1));
}

static void list_push(struct mc_shard *s, struct mc_slab *sl)
{
    struct mc_slab **head = &s->slabs[sl->cls - 1];
    sl->prev = NULL;
    sl->next = *head;
    if (*head)
        (*head)->prev = sl;
    *head = sl;
}

static void list_unlink(struct mc_shard *s, struct mc_slab *sl)
{
    if (sl->prev)
        sl->prev->next = sl->next;
    else
        s->slabs[sl->cls - 1] = sl->next;
    if (sl->next)
        sl->next->prev = sl->prev;
    sl->next = sl->prev = NULL;
}

struct mc_object *mc_obj_alloc(struct mc_shard *s, size_t bytes)
{
    size_t cls = (bytes + MC_SLAB_GRAIN - 1) / MC_SLAB_GRAIN;
    struct mc_object *o;
    if (cls > MC_SLAB_NCLASS) {
        o = malloc(bytes);
        if (!o)
            return NULL;
        memset(o, 0, sizeof(*o));
        o->flags = MC_OBJ_HEAP;
        return o;
    }
    struct mc_slab *sl = s->slabs[cls - 1];
    if (!sl) {
        sl = pool_get();
        if (!sl)
            return NULL;
        memset(sl, 0, sizeof(*sl));
        sl->shard = s;
        sl->cls = (uint32_t)cls;
        sl->cap = (MC_SLAB_SIZE - SLAB_HDR) / (uint32_t)(cls * MC_SLAB_GRAIN);
        POISON((char *)sl + SLAB_HDR, MC_SLAB_SIZE - SLAB_HDR);
        list_push(s, sl);
    }
    if (sl->free) {
        o = sl->free;
        UNPOISON(o, cls * MC_SLAB_GRAIN);
        sl->free = *(void **)o;
    } else {
        o = (struct mc_object *)((char *)sl + SLAB_HDR + (size_t)sl->bump++ * cls * MC_SLAB_GRAIN);
        UNPOISON(o, cls * MC_SLAB_GRAIN);
    }
    if (++sl->live == sl->cap)
        list_unlink(s, sl);
    memset(o, 0, sizeof(*o));
    return o;
}

void mc_obj_free_locked(struct mc_shard *s, struct mc_object *o)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock: the shard's slabs */
    if (o->flags & MC_OBJ_HEAP) {
        free(o);
        return;
    }
    struct mc_slab *sl = slab_of(o);
    struct mc_shard *own = sl->shard;
    if (sl->live == sl->cap)
        list_push(own, sl);
    *(void **)o = sl->free;
    sl->free = o;
    POISON(o, (size_t)sl->cls * MC_SLAB_GRAIN);
    if (--sl->live == 0 && (sl->prev || sl->next)) {
        list_unlink(own, sl);
        pool_put(sl);
    }
}

void mc_obj_free(struct mc_object *o)
{
    if (o->flags & MC_OBJ_HEAP) {
        free(o);
        return;
    }
    struct mc_shard *s = slab_of(o)->shard;
    mc_shard_wrlock(s);
    mc_obj_free_locked(s, o);
    mc_shard_unlock(s);
}

void mc_objslab_destroy(struct mc_shard *s)
{
    for (uint32_t c = 0; c < MC_SLAB_NCLASS; c++) {
        struct mc_slab *sl = s->slabs[c];
        while (sl) {
            struct mc_slab *nx = sl->next;
            pool_put(sl);
            sl = nx;
        }
        s->slabs[c] = NULL;
    }
}
