/*
 * holder_index_arena.h - the memory of the holder index's entries (holder_index.c).
 *
 * An entry is a fixed part plus its key, allocated once and freed once, and there are millions
 * of them: malloc would add its 8-byte chunk header and round every entry up to 16 bytes (about
 * 15 bytes an entry on average). The arena carves entries out of 256 KiB chunks instead, each
 * size rounded up to 8 bytes, and keeps one free list per size: a freed entry is reused by the
 * next one of the same size. Chunks go back only when the whole arena is emptied
 * (mc_hidx_arena_reset, when no entry is live), so its memory is the peak of the live entries
 * per size. Sizes above MC_HIDX_ARENA_MAX (long keys) go to malloc.
 *
 * Not thread-safe: the index calls it under its own mutex.
 */
#ifndef MC_CLIENT_HOLDER_INDEX_ARENA_H
#define MC_CLIENT_HOLDER_INDEX_ARENA_H

#include <stddef.h>

#define MC_HIDX_ARENA_MAX 1024u

struct mc_hidx_arena {
    void *free[MC_HIDX_ARENA_MAX / 8 + 1]; /* per size / 8: freed entries, linked through
                                            * their first word */
    void **chunks;                         /* every chunk, for the reset */
    size_t nchunks, cap;
    char *cur; /* the unused tail of the newest chunk */
    size_t left;
    size_t bytes; /* heap bytes held: chunks, the chunk list, malloc'ed big entries */
};

/* bytes >= sizeof(void *); NULL when out of memory. The block is 8-byte aligned. */
void *mc_hidx_arena_alloc(struct mc_hidx_arena *a, size_t bytes);
/* p from mc_hidx_arena_alloc of the same bytes. */
void mc_hidx_arena_free(struct mc_hidx_arena *a, void *p, size_t bytes);
/* Returns every chunk (no block may be live; big blocks are freed one by one by their owner). */
void mc_hidx_arena_reset(struct mc_hidx_arena *a);

#endif
