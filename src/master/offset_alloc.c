/*
 * offset_alloc.c - two-level segregated-fit offset allocator (see offset_alloc.h).
 *
 * Bin encoding ("float" with a 3-bit mantissa): a size of u units with u < 8 is bin u; otherwise,
 * with h the index of u's top bit, bin = ((h - 2) << 3) | ((u >> (h - 3)) & 7), i.e. exponent
 * h - 2 and the three bits under the top bit as mantissa. Rounding up adds one when any lower
 * bit is set. bin_size() is the inverse for exact bins. Top bitmap bit t is set when any of bins
 * 8t..8t+7 is non-empty; leaf bitmap t has one bit per bin of that group.
 *
 * Allocation searches from round_up(size); if that finds nothing it also looks at up to
 * MC_OA_DOWN_SCAN blocks of bin round_down(size), whose blocks may still be large enough (this
 * keeps "free everything, allocate everything" working for capacities that are not exact bins,
 * and lifts utilisation for random sizes) while keeping the operation O(1).
 */
#include "master/offset_alloc.h"

#include <stdlib.h>
#include <string.h>

#include "mooncake/errors.h"

#define MC_OA_CHUNK_SHIFT 12
#define MC_OA_CHUNK_NODES (1u << MC_OA_CHUNK_SHIFT)
#define MC_OA_NBINS 512
#define MC_OA_NTOP 64
#define MC_OA_DOWN_SCAN 16
#define NIL UINT32_MAX
#define MC_OA_MAX_UNITS ((1ull << 31) - 1)

enum { NODE_POOLED = 0, NODE_FREE = 1, NODE_USED = 2 };

struct oa_node {          /* 24 bytes */
    uint64_t offset : 31; /* units */
    uint64_t size : 31;   /* units */
    uint64_t state : 2;   /* NODE_* */
    uint32_t bin_prev, bin_next;
    uint32_t nb_prev, nb_next; /* address-order neighbours */
};

struct mc_offset_alloc {
    uint32_t align_shift;
    uint64_t capacity_units;
    uint64_t used_units;
    uint64_t used_blocks, free_blocks;
    uint64_t top_bits;
    uint8_t leaf_bits[MC_OA_NTOP];
    uint32_t bin_head[MC_OA_NBINS];
    struct oa_node **chunks;
    uint32_t nchunks, chunks_cap;
    uint32_t pool_head; /* stack of pooled nodes, linked through bin_next */
    uint32_t fresh;     /* nodes [0, fresh) were handed out at least once; the rest of the
                         * chunks was never written (a new segment touches one node, not a
                         * chunk: MountSegment stays cheap) */
};

/* ---- bins ---------------------------------------------------------------------------------- */

static inline uint32_t top_bit(uint64_t v)
{
    return 63u - (uint32_t)__builtin_clzll(v);
}

uint32_t mc_oa_bin_round_down(uint64_t units)
{
    if (units < 8)
        return (uint32_t)units;
    uint32_t h = top_bit(units);
    uint32_t shift = h - 3;
    return ((shift + 1) << 3) | (uint32_t)((units >> shift) & 7);
}

uint32_t mc_oa_bin_round_up(uint64_t units)
{
    if (units < 8)
        return (uint32_t)units;
    uint32_t h = top_bit(units);
    uint32_t shift = h - 3;
    uint32_t bin = ((shift + 1) << 3) | (uint32_t)((units >> shift) & 7);
    if (units & ((1ull << shift) - 1))
        bin++;
    return bin;
}

uint64_t mc_oa_bin_size(uint32_t bin)
{
    uint32_t e = bin >> 3, m = bin & 7;
    if (e == 0)
        return m;
    if (e - 1 > 60)
        return UINT64_MAX;
    return (uint64_t)(8 | m) << (e - 1);
}

/* ---- node pool ----------------------------------------------------------------------------- */

static inline struct oa_node *node_at(const struct mc_offset_alloc *a, uint32_t i)
{
    return &a->chunks[i >> MC_OA_CHUNK_SHIFT][i & (MC_OA_CHUNK_NODES - 1)];
}

static int pool_grow(struct mc_offset_alloc *a)
{
    if (a->nchunks >= (UINT32_MAX >> MC_OA_CHUNK_SHIFT))
        return -1;
    if (a->nchunks == a->chunks_cap) {
        uint32_t ncap = a->chunks_cap ? a->chunks_cap * 2 : 4;
        struct oa_node **nc = realloc(a->chunks, (size_t)ncap * sizeof(*nc));
        if (!nc)
            return -1;
        a->chunks = nc;
        a->chunks_cap = ncap;
    }
    struct oa_node *c = malloc(MC_OA_CHUNK_NODES * sizeof(*c));
    if (!c)
        return -1;
#if defined(__SANITIZE_ADDRESS__)
    /* checking builds: never-used nodes read as live allocations, so a check that let one
     * through (instead of refusing it by a->fresh) would show in the tests */
    memset(c, 0xaa, MC_OA_CHUNK_NODES * sizeof(*c));
#endif
    a->chunks[a->nchunks++] = c; /* its nodes are handed out from a->fresh on, in order */
    return 0;
}

/* A pooled node (given back earlier), else the next never-used one (a new chunk when the last
 * is used up); NIL when memory runs out. */
static uint32_t node_get(struct mc_offset_alloc *a)
{
    if (a->pool_head != NIL) {
        uint32_t i = a->pool_head;
        a->pool_head = node_at(a, i)->bin_next;
        return i;
    }
    if (a->fresh == a->nchunks << MC_OA_CHUNK_SHIFT && pool_grow(a) != 0)
        return NIL;
    uint32_t i = a->fresh++;
    node_at(a, i)->state = NODE_POOLED;
    return i;
}

static void node_put(struct mc_offset_alloc *a, uint32_t i)
{
    struct oa_node *n = node_at(a, i);
    n->state = NODE_POOLED;
    n->bin_next = a->pool_head;
    a->pool_head = i;
}

/* ---- bin lists ----------------------------------------------------------------------------- */

static void bin_insert(struct mc_offset_alloc *a, uint32_t i)
{
    struct oa_node *n = node_at(a, i);
    uint32_t bin = mc_oa_bin_round_down(n->size);
    uint32_t head = a->bin_head[bin];
    n->state = NODE_FREE;
    n->bin_prev = NIL;
    n->bin_next = head;
    if (head != NIL)
        node_at(a, head)->bin_prev = i;
    a->bin_head[bin] = i;
    a->leaf_bits[bin >> 3] |= (uint8_t)(1u << (bin & 7));
    a->top_bits |= 1ull << (bin >> 3);
    a->free_blocks++;
}

static void bin_remove(struct mc_offset_alloc *a, uint32_t i)
{
    struct oa_node *n = node_at(a, i);
    if (n->bin_prev != NIL) {
        node_at(a, n->bin_prev)->bin_next = n->bin_next;
    } else {
        uint32_t bin = mc_oa_bin_round_down(n->size);
        a->bin_head[bin] = n->bin_next;
        if (n->bin_next == NIL) {
            a->leaf_bits[bin >> 3] &= (uint8_t) ~(1u << (bin & 7));
            if (!a->leaf_bits[bin >> 3])
                a->top_bits &= ~(1ull << (bin >> 3));
        }
    }
    if (n->bin_next != NIL)
        node_at(a, n->bin_next)->bin_prev = n->bin_prev;
    a->free_blocks--;
}

/* First non-empty bin >= bin, or NIL. */
static uint32_t find_bin(const struct mc_offset_alloc *a, uint32_t bin)
{
    if (bin >= MC_OA_NBINS)
        return NIL;
    uint32_t top = bin >> 3;
    uint32_t leaf = a->leaf_bits[top] & (uint32_t)(0xffu << (bin & 7)) & 0xffu;
    if (leaf)
        return (top << 3) | (uint32_t)__builtin_ctz(leaf);
    if (top + 1 >= MC_OA_NTOP)
        return NIL;
    uint64_t rest = a->top_bits & (~0ull << (top + 1));
    if (!rest)
        return NIL;
    top = (uint32_t)__builtin_ctzll(rest);
    return (top << 3) | (uint32_t)__builtin_ctz(a->leaf_bits[top]);
}

/* ---- public -------------------------------------------------------------------------------- */

struct mc_offset_alloc *mc_offset_alloc_new(uint64_t capacity, uint32_t align)
{
    if (align == 0)
        align = MC_OA_DEFAULT_ALIGN;
    if (align < 8 || (align & (align - 1)))
        return NULL;
    uint32_t shift = (uint32_t)__builtin_ctz(align);
    while ((capacity >> shift) > MC_OA_MAX_UNITS)
        shift++; /* very large segment: coarser unit */
    uint64_t units = capacity >> shift;
    if (units == 0)
        return NULL;
    struct mc_offset_alloc *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->align_shift = shift;
    a->capacity_units = units;
    a->pool_head = NIL;
    for (int b = 0; b < MC_OA_NBINS; b++)
        a->bin_head[b] = NIL;
    uint32_t first = node_get(a);
    if (first == NIL) {
        mc_offset_alloc_free(a);
        return NULL;
    }
    struct oa_node *n = node_at(a, first);
    n->offset = 0;
    n->size = units;
    n->nb_prev = n->nb_next = NIL;
    bin_insert(a, first);
    return a;
}

void mc_offset_alloc_free(struct mc_offset_alloc *a)
{
    if (!a)
        return;
    for (uint32_t c = 0; c < a->nchunks; c++)
        free(a->chunks[c]);
    free(a->chunks);
    free(a);
}

/* Takes free node i for a request of units, splitting off the remainder. */
static int take(struct mc_offset_alloc *a, uint32_t i, uint64_t units, struct mc_oa_allocation *out)
{
    struct oa_node *n = node_at(a, i);
    if (n->size > units) {
        /* Get the spare node before unlinking anything so failure leaves no trace. */
        uint32_t r = node_get(a);
        if (r == NIL)
            return MC_ERR_INTERNAL_ERROR;
        n = node_at(a, i); /* chunk table may have moved, the chunk itself did not */
        bin_remove(a, i);
        struct oa_node *rn = node_at(a, r);
        rn->offset = n->offset + units;
        rn->size = n->size - units;
        rn->nb_prev = i;
        rn->nb_next = n->nb_next;
        if (n->nb_next != NIL)
            node_at(a, n->nb_next)->nb_prev = r;
        n->nb_next = r;
        n->size = units;
        bin_insert(a, r);
    } else {
        bin_remove(a, i);
    }
    n->state = NODE_USED;
    a->used_units += units;
    a->used_blocks++;
    out->offset = (uint64_t)n->offset << a->align_shift;
    out->handle = i;
    return MC_OK;
}

int mc_offset_alloc_alloc(struct mc_offset_alloc *a, uint64_t size, struct mc_oa_allocation *out)
{
    if (size == 0)
        return MC_ERR_INVALID_PARAMS;
    uint64_t mask = (1ull << a->align_shift) - 1;
    if (size > UINT64_MAX - mask)
        return MC_ERR_NO_AVAILABLE_HANDLE;
    uint64_t units = (size + mask) >> a->align_shift;
    if (units > a->capacity_units - a->used_units)
        return MC_ERR_NO_AVAILABLE_HANDLE;
    uint32_t bin = find_bin(a, mc_oa_bin_round_up(units));
    if (bin != NIL)
        return take(a, a->bin_head[bin], units, out);
    /* The round-down bin may hold blocks that fit; look at a bounded number of them. */
    uint32_t down = mc_oa_bin_round_down(units);
    uint32_t i = a->bin_head[down];
    for (int k = 0; i != NIL && k < MC_OA_DOWN_SCAN; k++) {
        struct oa_node *n = node_at(a, i);
        if (n->size >= units)
            return take(a, i, units, out);
        i = n->bin_next;
    }
    return MC_ERR_NO_AVAILABLE_HANDLE;
}

/* h names a node that was handed out at least once (never-used nodes hold no state). */
static inline bool handle_in_pool(const struct mc_offset_alloc *a, uint32_t h)
{
    return h != NIL && h < a->fresh;
}

static bool handle_live(const struct mc_offset_alloc *a, uint32_t h)
{
    return handle_in_pool(a, h) && node_at(a, h)->state == NODE_USED;
}

int mc_offset_alloc_release(struct mc_offset_alloc *a, uint32_t handle)
{
    if (!handle_live(a, handle))
        return MC_ERR_INVALID_PARAMS;
    struct oa_node *n = node_at(a, handle);
    a->used_units -= n->size;
    a->used_blocks--;
    uint32_t p = n->nb_prev;
    if (p != NIL && node_at(a, p)->state == NODE_FREE) {
        /* Merge into the previous block: it absorbs n. */
        struct oa_node *pn = node_at(a, p);
        bin_remove(a, p);
        pn->size += n->size;
        pn->nb_next = n->nb_next;
        if (n->nb_next != NIL)
            node_at(a, n->nb_next)->nb_prev = p;
        node_put(a, handle);
        handle = p;
        n = pn;
    }
    uint32_t nx = n->nb_next;
    if (nx != NIL && node_at(a, nx)->state == NODE_FREE) {
        struct oa_node *xn = node_at(a, nx);
        bin_remove(a, nx);
        n->size += xn->size;
        n->nb_next = xn->nb_next;
        if (xn->nb_next != NIL)
            node_at(a, xn->nb_next)->nb_prev = handle;
        node_put(a, nx);
    }
    bin_insert(a, handle);
    return MC_OK;
}

uint32_t mc_offset_alloc_handle_bound(const struct mc_offset_alloc *a)
{
    return a->nchunks << MC_OA_CHUNK_SHIFT;
}

uint64_t mc_offset_alloc_used_blocks(const struct mc_offset_alloc *a)
{
    return a->used_blocks;
}

void mc_offset_alloc_release_all(struct mc_offset_alloc *a)
{
    /* chunk 0 stays: the one free block needs a node, and getting it cannot fail */
    for (uint32_t c = 1; c < a->nchunks; c++)
        free(a->chunks[c]);
    a->nchunks = 1;
    a->used_units = a->used_blocks = a->free_blocks = 0;
    a->top_bits = 0;
    memset(a->leaf_bits, 0, sizeof(a->leaf_bits));
    for (int b = 0; b < MC_OA_NBINS; b++)
        a->bin_head[b] = NIL;
    a->pool_head = NIL;
    a->fresh = 0; /* chunk 0's nodes are handed out again from the first */
    uint32_t first = node_get(a);
    struct oa_node *n = node_at(a, first);
    n->offset = 0;
    n->size = a->capacity_units;
    n->nb_prev = n->nb_next = NIL;
    bin_insert(a, first);
}

void mc_offset_alloc_prefetch(const struct mc_offset_alloc *a, uint32_t handle, bool neighbours)
{
    if (!handle_in_pool(a, handle))
        return;
    const struct oa_node *n = node_at(a, handle);
    if (!neighbours) {
        __builtin_prefetch(n, 1);
        return;
    }
    if (handle_in_pool(a, n->nb_prev))
        __builtin_prefetch(node_at(a, n->nb_prev), 1);
    if (handle_in_pool(a, n->nb_next))
        __builtin_prefetch(node_at(a, n->nb_next), 1);
}

uint64_t mc_offset_alloc_block_size(const struct mc_offset_alloc *a, uint32_t handle)
{
    if (!handle_live(a, handle))
        return 0;
    return (uint64_t)node_at(a, handle)->size << a->align_shift;
}

uint64_t mc_offset_alloc_largest_free(const struct mc_offset_alloc *a)
{
    if (!a->top_bits)
        return 0;
    uint32_t top = top_bit(a->top_bits);
    uint32_t bin = (top << 3) | top_bit(a->leaf_bits[top]);
    uint64_t best = 0;
    for (uint32_t i = a->bin_head[bin]; i != NIL; i = node_at(a, i)->bin_next)
        if (node_at(a, i)->size > best)
            best = node_at(a, i)->size;
    return best << a->align_shift;
}

void mc_offset_alloc_stats(const struct mc_offset_alloc *a, struct mc_oa_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->capacity = a->capacity_units << a->align_shift;
    out->allocated = a->used_units << a->align_shift;
    out->free = out->capacity - out->allocated;
    out->largest_free = mc_offset_alloc_largest_free(a);
    out->used_blocks = a->used_blocks;
    out->free_blocks = a->free_blocks;
}

/* ---- claim: a given range (re-registration) ------------------------------------------------ */

/* Any node in use or free (not pooled), to start an address-order walk from. */
static uint32_t any_node(const struct mc_offset_alloc *a, uint32_t hint)
{
    if (hint != NIL && handle_in_pool(a, hint) && node_at(a, hint)->state != NODE_POOLED)
        return hint;
    for (uint32_t i = 0; i < a->fresh; i++)
        if (node_at(a, i)->state != NODE_POOLED)
            return i;
    return NIL;
}

int mc_offset_alloc_claim(struct mc_offset_alloc *a, uint64_t offset, uint64_t size, uint32_t hint,
                          struct mc_oa_allocation *out)
{
    uint64_t mask = (1ull << a->align_shift) - 1;
    if (size == 0 || (offset & mask) || size > UINT64_MAX - mask)
        return MC_ERR_INVALID_PARAMS;
    uint64_t u0 = offset >> a->align_shift, units = (size + mask) >> a->align_shift;
    if (u0 >= a->capacity_units || units > a->capacity_units - u0)
        return MC_ERR_INVALID_PARAMS;
    uint32_t i = any_node(a, hint);
    if (i == NIL)
        return MC_ERR_INTERNAL_ERROR;
    /* walk in address order to the block holding u0 */
    while ((uint64_t)node_at(a, i)->offset > u0)
        i = node_at(a, i)->nb_prev;
    while ((uint64_t)node_at(a, i)->offset + (uint64_t)node_at(a, i)->size <= u0)
        i = node_at(a, i)->nb_next;
    struct oa_node *n = node_at(a, i);
    if (n->state != NODE_FREE || (uint64_t)n->offset + (uint64_t)n->size < u0 + units)
        return MC_ERR_NO_AVAILABLE_HANDLE; /* (part of) the range is in use */
    if ((uint64_t)n->offset < u0) {
        /* the left part stays free in n; a new node starts at u0 */
        uint32_t r = node_get(a);
        if (r == NIL)
            return MC_ERR_INTERNAL_ERROR;
        n = node_at(a, i);
        bin_remove(a, i);
        struct oa_node *rn = node_at(a, r);
        rn->offset = u0;
        rn->size = n->offset + n->size - u0;
        rn->nb_prev = i;
        rn->nb_next = n->nb_next;
        if (n->nb_next != NIL)
            node_at(a, n->nb_next)->nb_prev = r;
        n->nb_next = r;
        n->size = u0 - n->offset;
        bin_insert(a, i);
        bin_insert(a, r);
        i = r;
    }
    return take(a, i, units, out);
}
