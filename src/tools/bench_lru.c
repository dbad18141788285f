/*
 * bench_lru.c - see bench_lru.h.
 *
 * A doubly linked recency list over a node array (head = most recent) and an open-addressing
 * hash table (linear probing, backward-shift deletion, load <= 1/2) from id to node. A bounded
 * cache never holds more than capacity nodes: once full, an insertion reuses the node of the
 * block it evicts. Every operation is O(1) expected.
 */
#include "tools/bench_lru.h"

#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX
#define DISK_BLOCK 4096u /* MC_DISK_BLOCK of src/client/disk_store.h */

struct lru_node {
    uint64_t id;
    uint32_t prev, next;
};

struct mc_lru {
    uint64_t capacity, evictions;
    uint32_t size, nodes_cap;
    struct lru_node *nodes;
    uint32_t *slots; /* node index + 1; 0 = empty */
    uint64_t mask;   /* slots - 1 */
    uint32_t head, tail;
};

static uint64_t hash_id(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

struct mc_lru *mc_lru_new(uint64_t capacity)
{
    struct mc_lru *l = calloc(1, sizeof(*l));

    if (!l)
        return NULL;
    l->capacity = capacity;
    l->head = l->tail = NIL;
    l->mask = 15;
    l->slots = calloc(l->mask + 1, sizeof(*l->slots));
    if (!l->slots) {
        free(l);
        return NULL;
    }
    return l;
}

void mc_lru_free(struct mc_lru *l)
{
    if (!l)
        return;
    free(l->nodes);
    free(l->slots);
    free(l);
}

/* The slot holding id, or the empty slot where it would go. */
static uint64_t find_slot(const struct mc_lru *l, uint64_t id)
{
    uint64_t i = hash_id(id) & l->mask;

    while (l->slots[i] && l->nodes[l->slots[i] - 1].id != id)
        i = (i + 1) & l->mask;
    return i;
}

static int grow_slots(struct mc_lru *l)
{
    uint64_t nmask = l->mask * 2 + 1;
    uint32_t *ns = calloc(nmask + 1, sizeof(*ns));

    if (!ns)
        return -1;
    for (uint64_t i = 0; i <= l->mask; i++) {
        if (!l->slots[i])
            continue;
        uint64_t j = hash_id(l->nodes[l->slots[i] - 1].id) & nmask;
        while (ns[j])
            j = (j + 1) & nmask;
        ns[j] = l->slots[i];
    }
    free(l->slots);
    l->slots = ns;
    l->mask = nmask;
    return 0;
}

static void slot_remove(struct mc_lru *l, uint64_t i)
{
    uint64_t j = i;

    l->slots[i] = 0;
    for (;;) {
        j = (j + 1) & l->mask;
        if (!l->slots[j])
            return;
        uint64_t k = hash_id(l->nodes[l->slots[j] - 1].id) & l->mask;
        /* the entry at j may move to the hole at i unless its home k lies cyclically in (i, j] */
        bool stays = i <= j ? (k > i && k <= j) : (k > i || k <= j);
        if (!stays) {
            l->slots[i] = l->slots[j];
            l->slots[j] = 0;
            i = j;
        }
    }
}

static void list_unlink(struct mc_lru *l, uint32_t n)
{
    struct lru_node *x = &l->nodes[n];

    if (x->prev != NIL)
        l->nodes[x->prev].next = x->next;
    else
        l->head = x->next;
    if (x->next != NIL)
        l->nodes[x->next].prev = x->prev;
    else
        l->tail = x->prev;
}

static void list_push_front(struct mc_lru *l, uint32_t n)
{
    l->nodes[n].prev = NIL;
    l->nodes[n].next = l->head;
    if (l->head != NIL)
        l->nodes[l->head].prev = n;
    l->head = n;
    if (l->tail == NIL)
        l->tail = n;
}

bool mc_lru_contains(const struct mc_lru *l, uint64_t id)
{
    return l->slots[find_slot(l, id)] != 0;
}

int mc_lru_touch(struct mc_lru *l, uint64_t id)
{
    uint64_t s = find_slot(l, id);
    uint32_t n;

    if (l->slots[s]) {
        n = l->slots[s] - 1;
        list_unlink(l, n);
        list_push_front(l, n);
        return 0;
    }
    if (l->capacity == 0)
        return 0;
    if ((uint64_t)l->size < l->capacity) {
        if (l->size == NIL - 1)
            return -1;
        if (l->size == l->nodes_cap) {
            uint64_t ncap = l->nodes_cap ? (uint64_t)l->nodes_cap * 2 : 64;
            if (ncap > l->capacity)
                ncap = l->capacity;
            if (ncap > NIL - 1)
                ncap = NIL - 1;
            struct lru_node *nn = realloc(l->nodes, (size_t)ncap * sizeof(*nn));
            if (!nn)
                return -1;
            l->nodes = nn;
            l->nodes_cap = (uint32_t)ncap;
        }
        if ((uint64_t)(l->size + 1) * 2 > l->mask + 1) {
            if (grow_slots(l) != 0)
                return -1;
            s = find_slot(l, id);
        }
        n = l->size++;
    } else {
        /* full: the least recently used block goes and its node takes the new one */
        n = l->tail;
        list_unlink(l, n);
        slot_remove(l, find_slot(l, l->nodes[n].id));
        l->evictions++;
        s = find_slot(l, id);
    }
    l->nodes[n].id = id;
    l->slots[s] = n + 1;
    list_push_front(l, n);
    return 0;
}

uint64_t mc_lru_size(const struct mc_lru *l)
{
    return l->size;
}

uint64_t mc_lru_capacity(const struct mc_lru *l)
{
    return l->capacity;
}

uint64_t mc_lru_evictions(const struct mc_lru *l)
{
    return l->evictions;
}

bool mc_lru_oldest(const struct mc_lru *l, uint64_t *id)
{
    if (l->tail == NIL)
        return false;
    *id = l->nodes[l->tail].id;
    return true;
}

int64_t mc_lru_request(struct mc_lru *l, const uint64_t *ids, size_t n)
{
    size_t hits = 0;

    while (hits < n && mc_lru_contains(l, ids[hits]))
        hits++;
    for (size_t i = 0; i < n; i++)
        if (mc_lru_touch(l, ids[i]) != 0)
            return -1;
    return (int64_t)hits;
}

size_t mc_prefix_present(const int *exist, size_t n)
{
    size_t i = 0;

    while (i < n && exist[i] == 1)
        i++;
    return i;
}

size_t mc_prefix_read(const int64_t *results, size_t n, uint64_t block_size)
{
    size_t i = 0;

    while (i < n && results[i] >= 0 && (uint64_t)results[i] == block_size)
        i++;
    return i;
}

uint64_t mc_lru_dram_blocks(uint64_t dram_bytes, double high_watermark, uint64_t block_size)
{
    if (block_size == 0 || high_watermark <= 0)
        return 0;
    if (high_watermark > 1)
        high_watermark = 1;
    return (uint64_t)((double)dram_bytes * high_watermark / (double)block_size);
}

uint64_t mc_lru_disk_blocks(uint64_t disk_bytes, double watermark, uint64_t block_size)
{
    uint64_t record = DISK_BLOCK + (block_size + DISK_BLOCK - 1) / DISK_BLOCK * DISK_BLOCK;

    if (block_size == 0 || watermark <= 0)
        return 0;
    if (watermark > 1)
        watermark = 1;
    return (uint64_t)((double)disk_bytes * watermark / (double)record);
}
