/*
 * alloc_meter.c - see alloc_meter.h. The replacements call glibc's __libc_* entry points and
 * count malloc_usable_size of each block, so the counts are the real heap footprint less
 * malloc's own per-chunk bookkeeping.
 */
#include "alloc_meter.h"

#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t sz);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);

static _Atomic size_t g_live, g_peak;

static void count_in(void *p)
{
    if (!p)
        return;
    size_t now = atomic_fetch_add(&g_live, malloc_usable_size(p)) + malloc_usable_size(p);
    size_t peak = atomic_load(&g_peak);
    while (now > peak && !atomic_compare_exchange_weak(&g_peak, &peak, now))
        ;
}

static void count_out(void *p)
{
    if (p)
        atomic_fetch_sub(&g_live, malloc_usable_size(p));
}

size_t mc_alloc_meter_live(void)
{
    return atomic_load(&g_live);
}

size_t mc_alloc_meter_peak(void)
{
    return atomic_load(&g_peak);
}

void mc_alloc_meter_reset_peak(void)
{
    atomic_store(&g_peak, atomic_load(&g_live));
}

void *malloc(size_t n)
{
    void *p = __libc_malloc(n);
    count_in(p);
    return p;
}

void *calloc(size_t n, size_t sz)
{
    void *p = __libc_calloc(n, sz);
    count_in(p);
    return p;
}

void *realloc(void *old, size_t n)
{
    size_t before = old ? malloc_usable_size(old) : 0;
    void *p = __libc_realloc(old, n);
    if (p) {
        atomic_fetch_sub(&g_live, before);
        count_in(p);
    } else if (old && n == 0) {
        atomic_fetch_sub(&g_live, before);
    }
    return p;
}

void free(void *p)
{
    count_out(p);
    __libc_free(p);
}

void *memalign(size_t align, size_t n)
{
    void *p = __libc_memalign(align, n);
    count_in(p);
    return p;
}

void *aligned_alloc(size_t align, size_t n)
{
    return memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *valloc(size_t n)
{
    return memalign(4096, n);
}

void *pvalloc(size_t n)
{
    return memalign(4096, (n + 4095) & ~(size_t)4095);
}
