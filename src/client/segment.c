/*
 * segment.c - see segment.h.
 */
#include "client/segment.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "mooncake/errors.h"

#define HUGE_PAGE (2u << 20)

static size_t round_up(uint64_t v, uint64_t a)
{
    return (size_t)((v + a - 1) / a * a);
}

int mc_segment_mem_init(struct mc_segment_mem *s, uint64_t size, bool huge_pages)
{
    memset(s, 0, sizeof(*s));
    if (size == 0 || size > (UINT64_MAX >> 2) || size > (uint64_t)SIZE_MAX / 2)
        return MC_ERR_INVALID_PARAMS;
    if (huge_pages) {
        size_t len = round_up(size, HUGE_PAGE);
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB,
                       -1, 0);
        if (p != MAP_FAILED) {
            s->base = p;
            s->size = size;
            s->map_len = len;
            s->huge = true;
            return 0;
        }
        mc_info("client", "huge pages unavailable, using normal pages", "size=%llu errno=%d",
                (unsigned long long)size, errno);
    }
    long pg = sysconf(_SC_PAGESIZE);
    size_t len = round_up(size, pg > 0 ? (uint64_t)pg : 4096u);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        mc_error("client", "cannot map segment", "size=%llu errno=%d", (unsigned long long)size,
                 errno);
        return MC_ERR_INTERNAL_ERROR;
    }
    /* Transparent huge pages where the kernel gives them only on request (the "madvise" mode,
     * Debian's default): a 4 MiB value then spans two TLB entries instead of 1,024, which a
     * Get's copy out of the segment and a Put's copy in pay for on every call. No effect under
     * "never"; refused (EINVAL) by kernels without THP, which changes nothing. */
    if (madvise(p, len, MADV_HUGEPAGE) != 0 && errno != EINVAL)
        mc_debug("client", "no transparent huge pages for the segment", "errno=%d", errno);
    s->base = p;
    s->size = size;
    s->map_len = len;
    return 0;
}

void mc_segment_mem_destroy(struct mc_segment_mem *s)
{
    if (s->base)
        munmap(s->base, s->map_len);
    memset(s, 0, sizeof(*s));
}
