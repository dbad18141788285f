/*
 * segment.h - the DRAM a client contributes to the store: one anonymous mmap.
 *
 * The region is mapped private and anonymous, zero-filled and MAP_NORESERVE-free (the memory is
 * committed as it is touched). With huge pages requested it first tries MAP_HUGETLB (2 MiB
 * pages, size rounded up); when the kernel has none to give, it falls back to normal pages and
 * logs one line, so a client never fails to start for want of huge pages. Internal to the
 * client library.
 */
#ifndef MC_CLIENT_SEGMENT_H
#define MC_CLIENT_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_segment_mem {
    uint8_t *base;  /* start of the region (NULL when none) */
    uint64_t size;  /* bytes usable, as asked */
    size_t map_len; /* bytes mapped (size rounded up to the page size) */
    bool huge;      /* backed by huge pages */
};

/* Maps size bytes (> 0). Returns 0, MC_ERR_INVALID_PARAMS (size 0 or too large) or
 * MC_ERR_INTERNAL_ERROR (mmap failed, logged with errno). */
int mc_segment_mem_init(struct mc_segment_mem *s, uint64_t size, bool huge_pages);
/* Unmaps. Safe on a zeroed or already destroyed struct. */
void mc_segment_mem_destroy(struct mc_segment_mem *s);

#endif
