/*
 * shard.c - mechanics of one object-table shard (layout in shard.h) and the group route map.
 *
 * htab slots are 32-bit: the top 8 bits of the key hash (a tag that skips most key compares)
 * and a 24-bit ent index (so at most 16M - 3 objects per shard); UINT32_MAX is empty and
 * SLOT_TOMB a deleted slot. The home slot is (key_hash >> 10) & mask (the bits above the shard
 * index). Slots are 4 bytes to keep the index small (tens of millions of objects); the price is
 * that a slot does not know its home, so deletion leaves a tombstone instead of shifting the
 * cluster back (a backward shift would hash every key it moves again, a cache miss on the
 * object each). Lookups step over tombstones, inserts reuse the first one on their path, a
 * tombstone followed by an empty slot becomes empty at once, and the table is rebuilt (keys
 * hashed again) when live + tombstones pass 3/4 of it: at the same size when the live keys fill
 * at most half of it (purge), else doubled.
 *
 * Bulk unlink (mc_shard_unlink_many, used by eviction when a round takes a share of a shard):
 * the holes in the entry array are filled from its tail (as many moves as holes below the new
 * end), and one sequential walk over the slots turns the dead entries' slots into tombstones
 * and renumbers the moved ones from an old → new index map: no key is hashed, and only the
 * moved objects are touched (their `ent` field).
 *
 * The route map records, for every grouped key, the shard of its group, keyed by the key's
 * 64-bit hash (a lookup that finds nothing there falls back to the key's own shard, so a hash
 * collision with another key only costs a second probe). 64 stripes, each a mutex and an open
 * addressing table; nothing is locked while a stripe is held.
 */
#include <stdlib.h>
#include <string.h>

#include "common/mc_assert.h"
#include "master/master_state.h"
#include "master/shard.h"

#define SLOT_EMPTY UINT32_MAX
#define SLOT_TOMB (UINT32_MAX - 1)
#define SLOT_ENT_BITS 24
#define SLOT_ENT_MASK ((1u << SLOT_ENT_BITS) - 1)
#define HTAB_MIN 64u

static inline uint32_t slot_tag(uint64_t key_hash)
{
    return (uint32_t)(key_hash >> 56);
}

static inline uint32_t slot_make(uint64_t key_hash, uint32_t ent)
{
    return (slot_tag(key_hash) << SLOT_ENT_BITS) | ent;
}

static inline uint32_t slot_home(uint64_t key_hash, uint32_t mask)
{
    return (uint32_t)(key_hash >> MC_ENT_SHIFT) & mask;
}

static uint64_t obj_hash(struct mc_object *o)
{
    return mc_hash_key(mc_obj_key(o), o->key_len);
}

/* ---- init / destroy ------------------------------------------------------------------------ */

static int shard_init(struct mc_shard *s, uint32_t index)
{
    memset(s, 0, sizeof(*s));
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    s->index = index;
    atomic_init(&s->pend_oldest_ms, UINT64_MAX);
    return 0;
}

int mc_shards_init(struct mc_master *m)
{
    m->shards = calloc(MC_NSHARDS, sizeof(*m->shards));
    if (!m->shards)
        return -1;
    for (uint32_t i = 0; i < MC_NSHARDS; i++)
        shard_init(&m->shards[i], i);
    return 0;
}

void mc_shards_destroy(struct mc_master *m)
{
    if (!m->shards)
        return;
    for (uint32_t i = 0; i < MC_NSHARDS; i++) {
        struct mc_shard *s = &m->shards[i];
        for (uint32_t c = 0; c < s->nchunks; c++)
            free(s->chunks[c]);
        free(s->chunks);
        free(s->slots);
        free(s->pend);
        for (uint32_t b = 0; s->gbuckets && b <= s->gmask; b++) {
            struct mc_group *g = s->gbuckets[b];
            while (g) {
                struct mc_group *nx = g->next;
                free(g->members);
                free(g);
                g = nx;
            }
        }
        free(s->gbuckets);
        mc_objslab_destroy(s);
        pthread_rwlock_destroy(&s->lock);
    }
    free(m->shards);
    m->shards = NULL;
}

/* ---- htab ---------------------------------------------------------------------------------- */

/* The next entry on a probe path whose slot has this tag, from slot *pos on (*pos then points
 * past it); NULL where the path ends (an empty slot). Either lock held. */
static inline const struct mc_obj_ent *probe_next(const struct mc_shard *s, uint32_t tag,
                                                  uint32_t *pos)
{
    for (uint32_t i = *pos;; i = (i + 1) & s->mask) {
        uint32_t v = s->slots[i];
        if (v == SLOT_EMPTY)
            return NULL;
        if ((v >> SLOT_ENT_BITS) != tag || v == SLOT_TOMB)
            continue;
        *pos = (i + 1) & s->mask;
        return mc_shard_ent(s, v & SLOT_ENT_MASK);
    }
}

struct mc_object *mc_shard_find(struct mc_shard *s, uint64_t key_hash, const char *key,
                                size_t key_len)
{
    if (!s->slots)
        return NULL;
    uint32_t i = slot_home(key_hash, s->mask);
    for (const struct mc_obj_ent *e; (e = probe_next(s, slot_tag(key_hash), &i));) {
        struct mc_object *o = mc_ent_obj(e);
        if (o->key_len == key_len && memcmp(mc_obj_key(o), key, key_len) == 0)
            return o;
    }
    return NULL;
}

struct mc_object *mc_shard_find_version(struct mc_shard *s, uint64_t key_hash, uint64_t version)
{
    if (!s->slots)
        return NULL;
    uint32_t i = slot_home(key_hash, s->mask);
    for (const struct mc_obj_ent *e; (e = probe_next(s, slot_tag(key_hash), &i));)
        if (mc_ent_obj(e)->version == version)
            return mc_ent_obj(e);
    return NULL;
}

void mc_shard_prefetch(const struct mc_shard *s, uint64_t key_hash, int stage)
{
    if (!s->slots)
        return;
    uint32_t i = slot_home(key_hash, s->mask);
    if (stage == 0) {
        __builtin_prefetch(&s->slots[i]);
        return;
    }
    const struct mc_obj_ent *e = probe_next(s, slot_tag(key_hash), &i);
    if (!e)
        return;
    if (stage == 1) {
        __builtin_prefetch(e);
    } else {
        const char *o = (const char *)mc_ent_obj(e);
        __builtin_prefetch(o);
        __builtin_prefetch(o + 64); /* replicas and key bytes */
    }
}

/* Puts v in the first empty or deleted slot from home on (a rebuild has no tombstones). */
static void htab_put(uint32_t *slots, uint32_t mask, uint32_t home, uint32_t v)
{
    uint32_t i = home;
    while (slots[i] != SLOT_EMPTY)
        i = (i + 1) & mask;
    slots[i] = v;
}

/* Home slot of an occupied slot value (its key is hashed again: slots keep only 8 hash bits). */
static uint32_t home_of(struct mc_shard *s, uint32_t v, uint32_t mask)
{
    return slot_home(obj_hash(mc_ent_obj(mc_shard_ent(s, v & SLOT_ENT_MASK))), mask);
}

/* Room for want live keys: live + tombstones stay <= 3/4 of the slots. A rebuild keeps the size
 * when want fills at most half of it (it only purges tombstones), else doubles it. */
static int htab_reserve(struct mc_shard *s, uint32_t want)
{
    uint32_t cap = s->slots ? s->mask + 1 : 0;
    if ((uint64_t)(want + s->ntomb) * 4 <= (uint64_t)cap * 3)
        return 0;
    uint32_t ncap = cap ? cap : HTAB_MIN;
    while ((uint64_t)want * 2 > ncap)
        ncap *= 2;
    uint32_t *ns = malloc((size_t)ncap * sizeof(*ns));
    if (!ns)
        return -1;
    memset(ns, 0xff, (size_t)ncap * sizeof(*ns));
    for (uint32_t i = 0; i < cap; i++) {
        uint32_t v = s->slots[i];
        if (v != SLOT_EMPTY && v != SLOT_TOMB)
            htab_put(ns, ncap - 1, home_of(s, v, ncap - 1), v);
    }
    free(s->slots);
    s->slots = ns;
    s->mask = ncap - 1;
    s->ntomb = 0;
    return 0;
}

/* Index of the slot holding ent (it must be there; EMPTY and TOMB never match an ent). */
static uint32_t htab_slot_of(struct mc_shard *s, uint64_t key_hash, uint32_t ent)
{
    uint32_t i = slot_home(key_hash, s->mask);
    while ((s->slots[i] & SLOT_ENT_MASK) != ent)
        i = (i + 1) & s->mask;
    return i;
}

/* Empties the run of tombstones that ends just before slot i (slot i is empty). */
static void htab_clear_tombs_before(struct mc_shard *s, uint32_t i)
{
    for (uint32_t j = (i - 1) & s->mask; s->slots[j] == SLOT_TOMB; j = (j - 1) & s->mask) {
        s->slots[j] = SLOT_EMPTY;
        s->ntomb--;
    }
}

static void htab_delete_at(struct mc_shard *s, uint32_t i)
{
    s->slots[i] = SLOT_TOMB;
    s->ntomb++;
    uint32_t nx = (i + 1) & s->mask;
    if (s->slots[nx] == SLOT_EMPTY)
        htab_clear_tombs_before(s, nx);
}

/* ---- ents ---------------------------------------------------------------------------------- */

static int ents_reserve(struct mc_shard *s, uint32_t want)
{
    while ((uint64_t)s->nchunks * MC_ENT_CHUNK < want) {
        if (s->nchunks == s->chunks_cap) {
            uint32_t ncap = s->chunks_cap ? s->chunks_cap * 2 : 4;
            struct mc_obj_ent **nc = realloc(s->chunks, (size_t)ncap * sizeof(*nc));
            if (!nc)
                return -1;
            s->chunks = nc;
            s->chunks_cap = ncap;
        }
        /* the chunk's entries, then their blocks' lease floors (shard.h); on a cache line, so
         * that each block of entries is two whole lines (from a plain malloc, 16-byte aligned,
         * most blocks straddled three, and eviction's scans fetched only two of them ahead) */
        struct mc_obj_ent *c = aligned_alloc(
            64, MC_ENT_CHUNK * sizeof(*c) + (MC_ENT_CHUNK / MC_ENT_BLOCK) * sizeof(uint64_t));
        if (!c)
            return -1;
        memset(c + MC_ENT_CHUNK, 0, (MC_ENT_CHUNK / MC_ENT_BLOCK) * sizeof(uint64_t));
        s->chunks[s->nchunks++] = c;
    }
    return 0;
}

int mc_shard_insert(struct mc_shard *s, uint64_t key_hash, struct mc_object *o)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
    if (s->n >= SLOT_ENT_MASK - 2 || ents_reserve(s, s->n + 1) != 0 ||
        htab_reserve(s, s->n + 1) != 0)
        return -1;
    uint32_t ent = s->n++;
    struct mc_obj_ent *e = mc_shard_ent(s, ent);
    atomic_init(&e->lease_ms, 0);
    *mc_shard_floor(s, ent) = 0;
    e->obj_bits = (uintptr_t)o;
    o->ent = ent;
    uint32_t i = slot_home(key_hash, s->mask);
    while (s->slots[i] != SLOT_EMPTY && s->slots[i] != SLOT_TOMB)
        i = (i + 1) & s->mask;
    if (s->slots[i] == SLOT_TOMB)
        s->ntomb--;
    s->slots[i] = slot_make(key_hash, ent);
    mc_shard_refresh_bits(s, o);
    return 0;
}

void mc_shard_refresh_bits(struct mc_shard *s, struct mc_object *o)
{
    struct mc_obj_ent *e = mc_shard_ent(s, o->ent);
    unsigned bits = mc_obj_ent_bits(o);
    s->npop += mc_ent_in_pop(bits) - mc_ent_in_pop(e->obj_bits);
    e->obj_bits = (uintptr_t)o | bits;
}

struct mc_object *mc_shard_revalidate(struct mc_shard *s, uint32_t ent, uint64_t version)
{
    if (ent >= s->n)
        return NULL;
    struct mc_object *o = mc_ent_obj(mc_shard_ent(s, ent));
    return o->version == version ? o : NULL;
}

struct mc_object *mc_shard_obj_grow(struct mc_shard *s, struct mc_object *o)
{
    if (o->nrep >= MC_MAX_REPLICAS || o->ent == MC_NO_INDEX)
        return NULL;
    size_t head = sizeof(*o) + (size_t)o->nrep * sizeof(o->rep[0]);
    struct mc_object *n = mc_obj_alloc(s, head + sizeof(o->rep[0]) + mc_obj_tail_bytes(o));
    if (!n)
        return NULL;
    unsigned heap = n->flags & MC_OBJ_HEAP;
    memcpy(n, o, head);
    n->flags = (o->flags & ~(unsigned)MC_OBJ_HEAP) | heap;
    memset(&n->rep[o->nrep], 0, sizeof(n->rep[0]));
    n->nrep = o->nrep + 1;
    memcpy(mc_obj_key(n), mc_obj_key(o), mc_obj_tail_bytes(o));
    struct mc_obj_ent *e = mc_shard_ent(s, o->ent);
    e->obj_bits = (uintptr_t)n | (e->obj_bits & MC_ENT_BITS);
    struct mc_group *g = mc_obj_group(o);
    if (g) {
        for (uint32_t i = 0; i < g->n; i++)
            if (g->members[i] == o)
                g->members[i] = n;
    }
    for (uint32_t i = 0; i < s->npend; i++)
        if (s->pend[i].obj == o)
            s->pend[i].obj = n;
    mc_obj_free_locked(s, o);
    return n;
}

/* ---- pending puts -------------------------------------------------------------------------- */

int mc_shard_pend_add(struct mc_shard *s, struct mc_object *o, struct mc_id owner,
                      uint64_t start_ms, uint64_t soft_pin_ttl_ms)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
    if (s->npend == s->pend_cap) {
        uint32_t ncap = s->pend_cap ? s->pend_cap * 2 : 8;
        struct mc_pending *np = realloc(s->pend, (size_t)ncap * sizeof(*np));
        if (!np)
            return -1;
        s->pend = np;
        s->pend_cap = ncap;
    }
    o->flags |= MC_OBJ_PROCESSING;
    s->pend[s->npend++] = (struct mc_pending){
        .obj = o, .owner = owner, .start_ms = start_ms, .soft_pin_ttl_ms = soft_pin_ttl_ms};
    /* only writers of this shard (under its lock) store it: no lost update */
    if (start_ms < atomic_load_explicit(&s->pend_oldest_ms, memory_order_relaxed))
        atomic_store_explicit(&s->pend_oldest_ms, start_ms, memory_order_relaxed);
    return 0;
}

void mc_shard_pend_remove(struct mc_shard *s, struct mc_object *o)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
    struct mc_pending *p = mc_obj_pending(s, o);
    if (!p)
        return;
    *p = s->pend[--s->npend];
    o->flags &= ~(uint64_t)MC_OBJ_PROCESSING;
    if (s->npend == 0 && s->pend_cap > 64) {
        free(s->pend);
        s->pend = NULL;
        s->pend_cap = 0;
    }
}

/* ---- groups -------------------------------------------------------------------------------- */

static int groups_reserve(struct mc_shard *s)
{
    uint32_t nb = s->gbuckets ? s->gmask + 1 : 0;
    if (s->ngroups + 1 <= nb)
        return 0;
    uint32_t ncap = nb ? nb * 2 : 16;
    struct mc_group **nbk = calloc(ncap, sizeof(*nbk));
    if (!nbk)
        return -1;
    for (uint32_t b = 0; b < nb; b++) {
        struct mc_group *g = s->gbuckets[b];
        while (g) {
            struct mc_group *nx = g->next;
            uint32_t h = (uint32_t)(g->hash >> MC_ENT_SHIFT) & (ncap - 1);
            g->next = nbk[h];
            nbk[h] = g;
            g = nx;
        }
    }
    free(s->gbuckets);
    s->gbuckets = nbk;
    s->gmask = ncap - 1;
    return 0;
}

int mc_shard_group_join(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                        const char *gid, size_t gid_len, uint64_t key_hash)
{
    uint64_t gh = mc_hash_key(gid, gid_len);
    struct mc_group *g = NULL;
    if (s->gbuckets) {
        for (g = s->gbuckets[(uint32_t)(gh >> MC_ENT_SHIFT) & s->gmask]; g; g = g->next)
            if (g->hash == gh && g->id_len == gid_len && !memcmp(g->id, gid, gid_len))
                break;
    }
    bool created = false;
    if (!g) {
        if (groups_reserve(s) != 0)
            return -1;
        g = calloc(1, sizeof(*g) + gid_len + 1);
        if (!g)
            return -1;
        g->hash = gh;
        g->id_len = (uint16_t)gid_len;
        memcpy(g->id, gid, gid_len);
        created = true;
    }
    if (g->n == g->cap) {
        uint32_t ncap = g->cap ? g->cap * 2 : 4;
        struct mc_object **nm = realloc(g->members, (size_t)ncap * sizeof(*nm));
        if (!nm)
            goto fail;
        g->members = nm;
        g->cap = ncap;
    }
    if (mc_route_add(m, key_hash, s->index) != 0)
        goto fail;
    g->members[g->n++] = o;
    mc_obj_set_group(o, g);
    if (created) {
        uint32_t b = (uint32_t)(gh >> MC_ENT_SHIFT) & s->gmask;
        g->next = s->gbuckets[b];
        s->gbuckets[b] = g;
        s->ngroups++;
    }
    return 0;
fail:
    if (created) {
        free(g->members);
        free(g);
    }
    return -1;
}

static void group_leave(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    struct mc_group *g = mc_obj_group(o);
    for (uint32_t i = 0; i < g->n; i++) {
        if (g->members[i] == o) {
            g->members[i] = g->members[--g->n];
            break;
        }
    }
    mc_obj_set_group(o, NULL);
    mc_route_del(m, mc_hash_key(mc_obj_key(o), o->key_len), s->index);
    if (g->n)
        return;
    struct mc_group **pp = &s->gbuckets[(uint32_t)(g->hash >> MC_ENT_SHIFT) & s->gmask];
    while (*pp != g)
        pp = &(*pp)->next;
    *pp = g->next;
    s->ngroups--;
    free(g->members);
    free(g);
}

/* ---- unlink -------------------------------------------------------------------------------- */

/* Gives memory back after removals: everything when the shard is empty (e.g. after RemoveAll),
 * else trailing entry chunks two chunks past the need. */
static void shard_shrink(struct mc_shard *s)
{
    if (s->n == 0) {
        for (uint32_t c = 0; c < s->nchunks; c++)
            free(s->chunks[c]);
        free(s->chunks);
        free(s->slots);
        s->chunks = NULL;
        s->nchunks = s->chunks_cap = 0;
        s->slots = NULL;
        s->mask = 0;
        s->ntomb = 0;
        return;
    }
    while (s->nchunks > 1 &&
           (uint64_t)s->n + 2 * MC_ENT_CHUNK <= (uint64_t)s->nchunks * MC_ENT_CHUNK)
        free(s->chunks[--s->nchunks]);
}

static void ent_move(struct mc_shard *s, uint32_t from_i, uint32_t to_i)
{
    struct mc_obj_ent *from = mc_shard_ent(s, from_i), *to = mc_shard_ent(s, to_i);
    uint64_t lease = atomic_load_explicit(&from->lease_ms, memory_order_relaxed);
    atomic_store_explicit(&to->lease_ms, lease, memory_order_relaxed);
    uint64_t *floor = mc_shard_floor(s, to_i);
    if (lease < *floor)
        *floor = lease;
    to->obj_bits = from->obj_bits;
    mc_ent_obj(to)->ent = to_i;
}

void mc_shard_detach(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
    if (o->flags & MC_OBJ_GROUPED)
        group_leave(m, s, o);
    mc_shard_pend_remove(s, o);
}

void mc_shard_unlink_hashed(struct mc_shard *s, struct mc_object *o, uint64_t oh,
                            const struct mc_object *last_obj, uint64_t lh)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
    uint32_t ent = o->ent;
    htab_delete_at(s, htab_slot_of(s, oh, ent));
    s->npop -= mc_ent_in_pop(mc_shard_ent(s, ent)->obj_bits);
    uint32_t last = --s->n;
    s->gen++;
    if (ent != last) {
        struct mc_object *lo = mc_ent_obj(mc_shard_ent(s, last));
        uint64_t mh = lo == last_obj ? lh : obj_hash(lo);
        s->slots[htab_slot_of(s, mh, last)] = slot_make(mh, ent);
        ent_move(s, last, ent);
    }
    o->ent = MC_NO_INDEX;
    shard_shrink(s);
}

void mc_shard_unlink(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    mc_shard_detach(m, s, o);
    mc_shard_unlink_hashed(s, o, obj_hash(o), NULL, 0);
}

#define MAP_DEAD UINT32_MAX

/* One walk over the slots after a bulk unlink (map[e]: entry e's new position, or MAP_DEAD):
 * dead entries' slots become tombstones, moved ones are renumbered, and tombstones that end in
 * an empty slot (no probe passes them) are emptied. The walk goes down from an empty slot, so
 * that whether the next slot is empty is known at each one, and decides each slot without a
 * branch on what it holds (about half of them die, at random). */
static void slots_renumber(struct mc_shard *s, const uint32_t *map)
{
    const uint32_t mask = s->mask;
    uint32_t *slots = s->slots;
    uint32_t z = 0;
    while (z <= mask && slots[z] != SLOT_EMPTY)
        z++;
    if (z > mask) { /* no empty slot (not at this load factor): tombstones stay */
        for (uint32_t i = 0; i <= mask; i++) {
            uint32_t v = slots[i];
            if (v == SLOT_EMPTY || v == SLOT_TOMB)
                continue;
            uint32_t to = map[v & SLOT_ENT_MASK];
            s->ntomb += to == MAP_DEAD;
            slots[i] = to == MAP_DEAD ? SLOT_TOMB : (v & ~SLOT_ENT_MASK) | to;
        }
        return;
    }
    /* masks: all ones for true (compilers turn the plain conditionals back into branches) */
    _Static_assert(SLOT_EMPTY == UINT32_MAX && SLOT_TOMB == UINT32_MAX - 1, "slot markers");
    uint32_t ntomb = 0, next_empty = UINT32_MAX; /* slot z */
    for (uint32_t c = 1; c <= mask; c++) {
        uint32_t i = (z - c) & mask;
        uint32_t v = slots[i];
        uint32_t live = 0u - (uint32_t)(v < SLOT_TOMB);
        uint32_t to = map[v & SLOT_ENT_MASK & live]; /* map[0] for a marker: not used */
        /* a tombstone, or one now */
        uint32_t gone =
            ((0u - (uint32_t)(to == MAP_DEAD)) & live) | (0u - (uint32_t)(v == SLOT_TOMB));
        uint32_t empty = (0u - (uint32_t)(v == SLOT_EMPTY)) | (gone & next_empty);
        uint32_t nv = (v & ~SLOT_ENT_MASK) | to;
        nv = ((nv & ~gone) | (SLOT_TOMB & gone)) | empty; /* SLOT_EMPTY is all ones */
        ntomb += gone & ~empty & 1u;
        next_empty = empty;
        slots[i] = nv;
    }
    s->ntomb = ntomb;
}

void mc_shard_unlink_many(struct mc_shard *s, struct mc_object *const *objs, size_t cnt,
                          uint32_t *map)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
    if (cnt == 0)
        return;
    const uint32_t n = s->n, nn = n - (uint32_t)cnt;
    for (uint32_t e = 0; e < n; e++)
        map[e] = e;
    for (size_t k = 0; k < cnt; k++) {
        map[objs[k]->ent] = MAP_DEAD;
        s->npop -= mc_ent_in_pop(mc_shard_ent(s, objs[k]->ent)->obj_bits);
    }
    /* Fill the holes below the new end with the live entries at or above it. */
    uint32_t j = nn;
    for (size_t k = 0; k < cnt; k++) {
        uint32_t hole = objs[k]->ent;
        objs[k]->ent = MC_NO_INDEX;
        if (hole >= nn)
            continue;
        while (map[j] == MAP_DEAD)
            j++;
        if (j + 8 < n)
            __builtin_prefetch(mc_ent_obj(mc_shard_ent(s, j + 8)), 1);
        ent_move(s, j, hole);
        map[j++] = hole;
    }
    slots_renumber(s, map);
    s->n = nn;
    s->gen++;
    shard_shrink(s);
}

/* ---- group route map ----------------------------------------------------------------------- */

#define ROUTE_STRIPES 64u

struct route_ent {
    uint64_t hash;
    uint32_t shard;
    uint32_t refs; /* 0 = empty */
};

struct mc_route_stripe {
    pthread_mutex_t lock;
    struct route_ent *tab;
    uint32_t mask, n;
    char pad[32];
};

int mc_routes_init(struct mc_master *m)
{
    m->routes = calloc(ROUTE_STRIPES, sizeof(*m->routes));
    if (!m->routes)
        return -1;
    for (uint32_t i = 0; i < ROUTE_STRIPES; i++)
        pthread_mutex_init(&m->routes[i].lock, NULL);
    return 0;
}

void mc_routes_destroy(struct mc_master *m)
{
    if (!m->routes)
        return;
    for (uint32_t i = 0; i < ROUTE_STRIPES; i++) {
        free(m->routes[i].tab);
        pthread_mutex_destroy(&m->routes[i].lock);
    }
    free(m->routes);
    m->routes = NULL;
}

/* Route stripes are leaves of the lock order. */
static void stripe_lock(struct mc_route_stripe *st)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    pthread_mutex_lock(&st->lock);
}
static void stripe_unlock(struct mc_route_stripe *st)
{
    pthread_mutex_unlock(&st->lock);
    mc_lo_release(MC_LO_LEAF, 0);
}

static struct mc_route_stripe *stripe_of(struct mc_master *m, uint64_t h)
{
    return &m->routes[(h >> 58) & (ROUTE_STRIPES - 1)];
}

static void route_put(struct route_ent *tab, uint32_t mask, struct route_ent e)
{
    uint32_t i = (uint32_t)(e.hash >> MC_ENT_SHIFT) & mask;
    while (tab[i].refs)
        i = (i + 1) & mask;
    tab[i] = e;
}

int mc_route_add(struct mc_master *m, uint64_t h, uint32_t shard)
{
    struct mc_route_stripe *st = stripe_of(m, h);
    int rc = 0;
    stripe_lock(st);
    if (st->tab) {
        for (uint32_t i = (uint32_t)(h >> MC_ENT_SHIFT) & st->mask; st->tab[i].refs;
             i = (i + 1) & st->mask) {
            if (st->tab[i].hash == h && st->tab[i].shard == shard) {
                st->tab[i].refs++;
                goto out;
            }
        }
    }
    uint32_t cap = st->tab ? st->mask + 1 : 0;
    if ((st->n + 1) * 2 > cap) {
        uint32_t ncap = cap ? cap * 2 : 64;
        struct route_ent *nt = calloc(ncap, sizeof(*nt));
        if (!nt) {
            rc = -1;
            goto out;
        }
        for (uint32_t i = 0; i < cap; i++)
            if (st->tab[i].refs)
                route_put(nt, ncap - 1, st->tab[i]);
        free(st->tab);
        st->tab = nt;
        st->mask = ncap - 1;
    }
    route_put(st->tab, st->mask, (struct route_ent){.hash = h, .shard = shard, .refs = 1});
    st->n++;
    atomic_fetch_add_explicit(&m->grouped_keys, 1, memory_order_relaxed);
out:
    stripe_unlock(st);
    return rc;
}

void mc_route_del(struct mc_master *m, uint64_t h, uint32_t shard)
{
    struct mc_route_stripe *st = stripe_of(m, h);
    stripe_lock(st);
    if (!st->tab)
        goto out;
    for (uint32_t i = (uint32_t)(h >> MC_ENT_SHIFT) & st->mask; st->tab[i].refs;
         i = (i + 1) & st->mask) {
        if (st->tab[i].hash != h || st->tab[i].shard != shard)
            continue;
        if (--st->tab[i].refs)
            goto out;
        /* Backward-shift deletion, as in the shard htab. */
        uint32_t j = i;
        for (;;) {
            j = (j + 1) & st->mask;
            if (!st->tab[j].refs)
                break;
            uint32_t home = (uint32_t)(st->tab[j].hash >> MC_ENT_SHIFT) & st->mask;
            bool stays = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
            if (stays)
                continue;
            st->tab[i] = st->tab[j];
            i = j;
        }
        st->tab[i].refs = 0;
        st->n--;
        atomic_fetch_sub_explicit(&m->grouped_keys, 1, memory_order_relaxed);
        break;
    }
out:
    stripe_unlock(st);
}

uint32_t mc_master_key_shard(struct mc_master *m, uint64_t h)
{
    uint32_t shard = (uint32_t)h & MC_SHARD_MASK;
    if (atomic_load_explicit(&m->grouped_keys, memory_order_relaxed) == 0)
        return shard;
    struct mc_route_stripe *st = stripe_of(m, h);
    stripe_lock(st);
    if (st->tab) {
        for (uint32_t i = (uint32_t)(h >> MC_ENT_SHIFT) & st->mask; st->tab[i].refs;
             i = (i + 1) & st->mask) {
            if (st->tab[i].hash == h) {
                shard = st->tab[i].shard;
                break;
            }
        }
    }
    stripe_unlock(st);
    return shard;
}
