/*
 * holder_index.c - see holder_index.h for the design.
 */
#include "client/holder_index.h"

#include "client/holder_index_arena.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/hash.h"
#include "common/lock_owner.h"
#include "common/mc_assert.h"
#include "mooncake/errors.h"

#define F_CRC_VALID 0x1u
#define F_SOFT_PIN 0x2u
#define MIN_BUCKET_SHIFT 13u
#define MAX_BUCKETS (1u << 20)

struct hent {
    struct hent *hnext; /* key hash chain */
    struct hent *onext; /* the segment's bucket chain */
    uint64_t version;
    uint64_t offset : 48; /* segments are at most 2^48 bytes (MC_SEGMENT_MAX_SIZE) */
    uint64_t key_len : 16;
    uint32_t len;
    uint32_t crc32c;
    uint16_t access_min; /* last access, minutes on the monotonic clock (wraps after 45 days) */
    uint8_t seg;
    uint8_t flags;
    char key[]; /* key_len bytes, no NUL */
};
_Static_assert(sizeof(struct hent) == 48, "an entry's fixed part is 48 bytes");

struct hseg {
    struct mc_id id;
    uint64_t size;
    uint64_t epoch;
    uint64_t max_len; /* the longest entry ever filed here */
    uint32_t shift;   /* bucket = offset >> shift */
    uint32_t nbuckets;
    struct hent **buckets;
    bool used;
};

struct mc_holder_index {
    pthread_mutex_t mu;
    struct mc_lock_owner mu_owner; /* who holds mu (the _locked asserts) */
    struct hent **table;           /* key hash, power of two */
    size_t mask;
    struct hseg segs[MC_HIDX_MAX_SEGMENTS];
    struct mc_hidx_arena arena; /* the entries (holder_index_arena.h) */
    struct mc_hidx_stats st;    /* st.bytes: the tables; the arena's are added when read */
};

static size_t ent_bytes(size_t key_len)
{
    return sizeof(struct hent) + key_len;
}

static uint32_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint32_t)ts.tv_sec;
}

static size_t usable(const void *p)
{
    return p ? malloc_usable_size((void *)p) : 0;
}

struct mc_holder_index *mc_holder_index_new(void)
{
    struct mc_holder_index *ix = calloc(1, sizeof(*ix));
    if (!ix)
        return NULL;
    ix->table = calloc(1024, sizeof(*ix->table));
    if (!ix->table) {
        free(ix);
        return NULL;
    }
    ix->mask = 1023;
    ix->st.bytes = usable(ix) + usable(ix->table);
    pthread_mutex_init(&ix->mu, NULL);
    return ix;
}

void mc_holder_index_free(struct mc_holder_index *ix)
{
    if (!ix)
        return;
    for (size_t i = 0; i <= ix->mask; i++)
        for (struct hent *e = ix->table[i], *nx; e; e = nx) {
            nx = e->hnext;
            mc_hidx_arena_free(&ix->arena, e, ent_bytes(e->key_len));
        }
    mc_hidx_arena_reset(&ix->arena);
    for (size_t i = 0; i < MC_HIDX_MAX_SEGMENTS; i++)
        free(ix->segs[i].buckets);
    free(ix->table);
    pthread_mutex_destroy(&ix->mu);
    free(ix);
}

static struct hseg *find_seg_locked(struct mc_holder_index *ix, struct mc_id id)
{
    MC_ASSERT(mc_owner_is_me(&ix->mu_owner));
    for (size_t i = 0; i < MC_HIDX_MAX_SEGMENTS; i++)
        if (ix->segs[i].used && mc_id_eq(ix->segs[i].id, id))
            return &ix->segs[i];
    return NULL;
}

int mc_holder_index_add_segment(struct mc_holder_index *ix, struct mc_id seg, uint64_t size)
{
    if (!ix || mc_id_is_zero(seg) || size == 0)
        return MC_ERR_INVALID_PARAMS;
    int rc = MC_ERR_NO_AVAILABLE_HANDLE;
    mc_owner_lock(&ix->mu, &ix->mu_owner);
    if (find_seg_locked(ix, seg)) {
        rc = MC_ERR_SEGMENT_ALREADY_EXISTS;
        goto out;
    }
    for (size_t i = 0; i < MC_HIDX_MAX_SEGMENTS; i++) {
        struct hseg *s = &ix->segs[i];
        if (s->used)
            continue;
        uint32_t shift = MIN_BUCKET_SHIFT;
        while (shift < 63 && (size >> shift) >= MAX_BUCKETS)
            shift++;
        uint64_t nb = (size + (1ull << shift) - 1) >> shift;
        s->buckets = calloc((size_t)nb, sizeof(*s->buckets));
        if (!s->buckets) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        s->id = seg;
        s->size = size;
        s->epoch = 0;
        s->max_len = 0;
        s->shift = shift;
        s->nbuckets = (uint32_t)nb;
        s->used = true;
        ix->st.bytes += usable(s->buckets);
        rc = 0;
        break;
    }
out:
    mc_owner_unlock(&ix->mu, &ix->mu_owner);
    return rc;
}

/* Unlinks e from its key chain and its bucket and frees it. */
static void unlink_free_locked(struct mc_holder_index *ix, struct hent *e)
{
    MC_ASSERT(mc_owner_is_me(&ix->mu_owner));
    size_t h = (size_t)mc_hash_key(e->key, e->key_len) & ix->mask;
    for (struct hent **pp = &ix->table[h]; *pp; pp = &(*pp)->hnext)
        if (*pp == e) {
            *pp = e->hnext;
            break;
        }
    struct hseg *s = &ix->segs[e->seg];
    uint64_t b = e->offset >> s->shift;
    for (struct hent **pp = &s->buckets[b]; *pp; pp = &(*pp)->onext)
        if (*pp == e) {
            *pp = e->onext;
            break;
        }
    ix->st.entries--;
    ix->st.key_bytes -= e->key_len;
    mc_hidx_arena_free(&ix->arena, e, ent_bytes(e->key_len));
}

/* Drops every entry of s overlapping [off, off + len); returns how many. */
static size_t drop_range_locked(struct mc_holder_index *ix, struct hseg *s, uint64_t off,
                                uint64_t len)
{
    MC_ASSERT(mc_owner_is_me(&ix->mu_owner));
    if (len == 0 || off >= s->size)
        return 0;
    uint64_t end = len > s->size - off ? s->size : off + len;
    size_t n = 0;
    uint64_t b0 = off >> s->shift, b1 = (end - 1) >> s->shift;
    for (uint64_t b = b0; b <= b1 && b < s->nbuckets; b++) {
        for (struct hent *e = s->buckets[b], *nx; e; e = nx) {
            nx = e->onext;
            if (e->offset < end && e->offset + e->len > off) {
                unlink_free_locked(ix, e);
                n++;
            }
        }
    }
    /* an entry starting before b0: live entries never overlap each other, so only the one
     * starting last before off can reach into the range, and it sits in the first non-empty
     * bucket below b0 (no further back than the longest entry) */
    uint64_t reach = (s->max_len >> s->shift) + 1;
    for (uint64_t k = 1; k <= reach && k <= b0; k++) {
        struct hent **head = &s->buckets[b0 - k];
        if (!*head)
            continue;
        for (struct hent *e = *head, *nx; e; e = nx) {
            nx = e->onext;
            if (e->offset < end && e->offset + e->len > off) {
                unlink_free_locked(ix, e);
                n++;
            }
        }
        break;
    }
    return n;
}

static void grow_locked(struct mc_holder_index *ix)
{
    MC_ASSERT(mc_owner_is_me(&ix->mu_owner));
    size_t nsz = (ix->mask + 1) * 2;
    struct hent **nt = calloc(nsz, sizeof(*nt));
    if (!nt)
        return; /* longer chains, still correct */
    for (size_t i = 0; i <= ix->mask; i++)
        for (struct hent *e = ix->table[i], *nx; e; e = nx) {
            nx = e->hnext;
            size_t h = (size_t)mc_hash_key(e->key, e->key_len) & (nsz - 1);
            e->hnext = nt[h];
            nt[h] = e;
        }
    ix->st.bytes -= usable(ix->table);
    free(ix->table);
    ix->table = nt;
    ix->mask = nsz - 1;
    ix->st.bytes += usable(nt);
}

size_t mc_holder_index_commit(struct mc_holder_index *ix, struct mc_id seg, uint64_t epoch,
                              const struct mc_hidx_entry *e, size_t n)
{
    size_t filed = 0;
    uint32_t now = now_s();
    mc_owner_lock(&ix->mu, &ix->mu_owner);
    struct hseg *s = find_seg_locked(ix, seg);
    if (!s || s->epoch == 0 || s->epoch != epoch) {
        ix->st.stale += n;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const struct mc_hidx_entry *x = &e[i];
        if (!x->key || x->key_len == 0 || x->len == 0 || x->offset >= s->size ||
            x->offset >= (1ull << 48) || x->len > s->size - x->offset) {
            ix->st.stale++;
            continue;
        }
        ix->st.dropped_by_overlap += drop_range_locked(ix, s, x->offset, x->len);
        struct hent *h = mc_hidx_arena_alloc(&ix->arena, ent_bytes(x->key_len));
        if (!h)
            break; /* a miss after a restart, never wrong bytes */
        h->version = x->version;
        h->offset = x->offset;
        h->len = x->len;
        h->crc32c = x->crc32c;
        h->access_min = (uint16_t)((x->access_s ? x->access_s : now) / 60);
        h->key_len = x->key_len;
        h->seg = (uint8_t)(s - ix->segs);
        h->flags = (uint8_t)((x->crc_valid ? F_CRC_VALID : 0) | (x->soft_pin ? F_SOFT_PIN : 0));
        memcpy(h->key, x->key, x->key_len);
        size_t k = (size_t)mc_hash_key(h->key, h->key_len) & ix->mask;
        h->hnext = ix->table[k];
        ix->table[k] = h;
        uint64_t b = h->offset >> s->shift;
        h->onext = s->buckets[b];
        s->buckets[b] = h;
        if (h->len > s->max_len)
            s->max_len = h->len;
        ix->st.entries++;
        ix->st.committed++;
        ix->st.key_bytes += h->key_len;
        filed++;
        if (ix->st.entries > ix->mask + 1)
            grow_locked(ix);
    }
out:
    mc_owner_unlock(&ix->mu, &ix->mu_owner);
    return filed;
}

void mc_holder_index_drop_range(struct mc_holder_index *ix, struct mc_id seg, uint64_t offset,
                                uint64_t len)
{
    if (!ix)
        return;
    mc_owner_lock(&ix->mu, &ix->mu_owner);
    struct hseg *s = find_seg_locked(ix, seg);
    if (s && ix->st.entries)
        ix->st.dropped_by_write += drop_range_locked(ix, s, offset, len);
    mc_owner_unlock(&ix->mu, &ix->mu_owner);
}

size_t mc_holder_index_drop_key(struct mc_holder_index *ix, const char *key, size_t key_len,
                                uint64_t version)
{
    size_t n = 0;
    mc_owner_lock(&ix->mu, &ix->mu_owner);
    size_t h = (size_t)mc_hash_key(key, key_len) & ix->mask;
    for (struct hent *e = ix->table[h], *nx; e; e = nx) {
        nx = e->hnext;
        if (e->key_len == key_len && e->version <= version && memcmp(e->key, key, key_len) == 0) {
            unlink_free_locked(ix, e);
            n++;
        }
    }
    ix->st.dropped_by_delete += n;
    mc_owner_unlock(&ix->mu, &ix->mu_owner);
    return n;
}

bool mc_holder_index_drop_exact(struct mc_holder_index *ix, struct mc_id seg, const char *key,
                                size_t key_len, uint64_t version, uint64_t offset)
{
    bool dropped = false;
    mc_owner_lock(&ix->mu, &ix->mu_owner);
    struct hseg *s = find_seg_locked(ix, seg);
    size_t h = (size_t)mc_hash_key(key, key_len) & ix->mask;
    for (struct hent *e = ix->table[h]; s && e; e = e->hnext)
        if (&ix->segs[e->seg] == s && e->version == version && e->offset == offset &&
            e->key_len == key_len && memcmp(e->key, key, key_len) == 0) {
            unlink_free_locked(ix, e);
            dropped = true;
            break;
        }
    mc_owner_unlock(&ix->mu, &ix->mu_owner);
    return dropped;
}

int mc_holder_index_set_epoch(struct mc_holder_index *ix, struct mc_id seg, uint64_t epoch,
                              bool keep)
{
    int rc = MC_ERR_SEGMENT_NOT_FOUND;
    mc_owner_lock(&ix->mu, &ix->mu_owner);
    struct hseg *s = find_seg_locked(ix, seg);
    if (s) {
        if (!keep)
            (void)drop_range_locked(ix, s, 0, s->size);
        if (ix->st.entries == 0)
            mc_hidx_arena_reset(&ix->arena); /* nothing live: the chunks go back */
        s->epoch = epoch;
        rc = 0;
    }
    mc_owner_unlock(&ix->mu, &ix->mu_owner);
    return rc;
}

uint64_t mc_holder_index_epoch(struct mc_holder_index *ix, struct mc_id seg)
{
    mc_owner_lock(&ix->mu, &ix->mu_owner);
    struct hseg *s = find_seg_locked(ix, seg);
    uint64_t e = s ? s->epoch : 0;
    mc_owner_unlock(&ix->mu, &ix->mu_owner);
    return e;
}

int mc_holder_index_list(struct mc_holder_index *ix, struct mc_id seg, struct mc_hidx_entry **out,
                         size_t *n, char **keys_out)
{
    *out = NULL;
    *n = 0;
    *keys_out = NULL;
    int rc = 0;
    mc_owner_lock(&ix->mu, &ix->mu_owner);
    struct hseg *s = find_seg_locked(ix, seg);
    if (!s) {
        rc = MC_ERR_SEGMENT_NOT_FOUND;
        goto out;
    }
    size_t cnt = 0, kb = 0;
    for (uint32_t b = 0; b < s->nbuckets; b++)
        for (struct hent *e = s->buckets[b]; e; e = e->onext) {
            cnt++;
            kb += (size_t)e->key_len + 1;
        }
    if (!cnt)
        goto out;
    struct mc_hidx_entry *arr = calloc(cnt, sizeof(*arr));
    char *keys = malloc(kb);
    if (!arr || !keys) {
        free(arr);
        free(keys);
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    size_t i = 0, ko = 0;
    for (uint32_t b = 0; b < s->nbuckets; b++)
        for (struct hent *e = s->buckets[b]; e; e = e->onext) {
            memcpy(keys + ko, e->key, e->key_len);
            keys[ko + e->key_len] = '\0';
            arr[i] = (struct mc_hidx_entry){.key = keys + ko,
                                            .key_len = e->key_len,
                                            .version = e->version,
                                            .offset = e->offset,
                                            .len = e->len,
                                            .crc32c = e->crc32c,
                                            .crc_valid = (e->flags & F_CRC_VALID) != 0,
                                            .soft_pin = (e->flags & F_SOFT_PIN) != 0,
                                            .access_s = (uint32_t)e->access_min * 60};
            ko += (size_t)e->key_len + 1;
            i++;
        }
    *out = arr;
    *n = cnt;
    *keys_out = keys;
out:
    mc_owner_unlock(&ix->mu, &ix->mu_owner);
    return rc;
}

size_t mc_holder_index_clear(struct mc_holder_index *ix)
{
    size_t n = 0;
    mc_owner_lock(&ix->mu, &ix->mu_owner);
    for (size_t i = 0; i < MC_HIDX_MAX_SEGMENTS; i++)
        if (ix->segs[i].used)
            n += drop_range_locked(ix, &ix->segs[i], 0, ix->segs[i].size);
    mc_hidx_arena_reset(&ix->arena); /* nothing live: the chunks go back */
    mc_owner_unlock(&ix->mu, &ix->mu_owner);
    return n;
}

void mc_holder_index_stats(struct mc_holder_index *ix, struct mc_hidx_stats *st)
{
    mc_owner_lock(&ix->mu, &ix->mu_owner);
    *st = ix->st;
    st->bytes += ix->arena.bytes;
    mc_owner_unlock(&ix->mu, &ix->mu_owner);
}
