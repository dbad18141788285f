/*
 * disk_index.c - the LOCAL_DISK store's in-memory index: key -> disk_entry, a chained hash table
 * (xxh3) with power-of-two buckets that doubles when the load passes 1. Entries carry their key
 * inline and also sit on their extent's list (disk_store.c maintains that one). Callers hold
 * the store lock.
 */
#include <stdlib.h>
#include <string.h>

#include "client/disk_internal.h"
#include "common/hash.h"

int disk_index_init(struct disk_index *ix)
{
    ix->nbuckets = 1024;
    ix->count = 0;
    ix->buckets = calloc(ix->nbuckets, sizeof(*ix->buckets));
    return ix->buckets ? 0 : -1;
}

void disk_index_destroy(struct disk_index *ix)
{
    if (!ix->buckets)
        return;
    for (size_t i = 0; i < ix->nbuckets; i++) {
        struct disk_entry *e = ix->buckets[i];
        while (e) {
            struct disk_entry *n = e->hnext;
            free(e);
            e = n;
        }
    }
    free(ix->buckets);
    ix->buckets = NULL;
    ix->count = 0;
}

struct disk_entry *disk_entry_new(const char *key, uint32_t key_len)
{
    struct disk_entry *e = calloc(1, sizeof(*e) + key_len);
    if (!e)
        return NULL;
    memcpy(e->key, key, key_len);
    e->key_len = key_len;
    e->hash = mc_hash_key(key, key_len);
    return e;
}

struct disk_entry *disk_index_find(struct disk_index *ix, const char *key, uint32_t key_len)
{
    uint64_t h = mc_hash_key(key, key_len);
    for (struct disk_entry *e = ix->buckets[h & (ix->nbuckets - 1)]; e; e = e->hnext)
        if (e->hash == h && e->key_len == key_len && !memcmp(e->key, key, key_len))
            return e;
    return NULL;
}

static void grow(struct disk_index *ix)
{
    size_t nb = ix->nbuckets * 2;
    struct disk_entry **b = calloc(nb, sizeof(*b));
    if (!b)
        return; /* keep the longer chains; still correct */
    for (size_t i = 0; i < ix->nbuckets; i++) {
        struct disk_entry *e = ix->buckets[i];
        while (e) {
            struct disk_entry *n = e->hnext;
            e->hnext = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
            e = n;
        }
    }
    free(ix->buckets);
    ix->buckets = b;
    ix->nbuckets = nb;
}

int disk_index_insert(struct disk_index *ix, struct disk_entry *e)
{
    if (ix->count >= ix->nbuckets)
        grow(ix);
    size_t i = e->hash & (ix->nbuckets - 1);
    e->hnext = ix->buckets[i];
    ix->buckets[i] = e;
    ix->count++;
    return 0;
}

void disk_index_unlink(struct disk_index *ix, struct disk_entry *e)
{
    struct disk_entry **pp = &ix->buckets[e->hash & (ix->nbuckets - 1)];
    while (*pp && *pp != e)
        pp = &(*pp)->hnext;
    if (*pp) {
        *pp = e->hnext;
        ix->count--;
    }
    e->hnext = NULL;
}
