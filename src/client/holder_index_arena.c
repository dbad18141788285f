/*
 * holder_index_arena.c - see holder_index_arena.h.
 */
#include "client/holder_index_arena.h"

#include <malloc.h>
#include <stdlib.h>

/* a whole number of pages with malloc's header (chunks this size are mmap'ed) */
#define CHUNK ((256u << 10) - 64)

static size_t round8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static size_t usable(void *p)
{
    return p ? malloc_usable_size(p) : 0;
}

static int new_chunk(struct mc_hidx_arena *a)
{
    if (a->nchunks == a->cap) {
        size_t ncap = a->cap ? a->cap * 2 : 64;
        size_t had = usable(a->chunks);
        void **nc = realloc(a->chunks, ncap * sizeof(*nc));
        if (!nc)
            return -1;
        a->chunks = nc;
        a->cap = ncap;
        a->bytes += usable(nc) - had;
    }
    char *c = malloc(CHUNK);
    if (!c)
        return -1;
    a->chunks[a->nchunks++] = c;
    a->bytes += usable(c);
    /* the tail left in the previous chunk (less than one entry) is not reused */
    a->cur = c;
    a->left = CHUNK;
    return 0;
}

void *mc_hidx_arena_alloc(struct mc_hidx_arena *a, size_t bytes)
{
    size_t n = round8(bytes);
    if (n > MC_HIDX_ARENA_MAX) {
        void *p = malloc(n);
        a->bytes += usable(p);
        return p;
    }
    void **fl = &a->free[n / 8];
    if (*fl) {
        void *p = *fl;
        *fl = *(void **)p;
        return p;
    }
    if (a->left < n && new_chunk(a) != 0)
        return NULL;
    void *p = a->cur;
    a->cur += n;
    a->left -= n;
    return p;
}

void mc_hidx_arena_free(struct mc_hidx_arena *a, void *p, size_t bytes)
{
    if (!p)
        return;
    size_t n = round8(bytes);
    if (n > MC_HIDX_ARENA_MAX) {
        a->bytes -= usable(p);
        free(p);
        return;
    }
    *(void **)p = a->free[n / 8];
    a->free[n / 8] = p;
}

void mc_hidx_arena_reset(struct mc_hidx_arena *a)
{
    for (size_t i = 0; i < a->nchunks; i++) {
        a->bytes -= usable(a->chunks[i]);
        free(a->chunks[i]);
    }
    a->bytes -= usable(a->chunks);
    free(a->chunks);
    a->chunks = NULL;
    a->nchunks = a->cap = 0;
    a->cur = NULL;
    a->left = 0;
    for (size_t i = 0; i < sizeof(a->free) / sizeof(a->free[0]); i++)
        a->free[i] = NULL;
}
